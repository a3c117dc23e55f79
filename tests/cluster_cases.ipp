// The cluster suite: cluster mode (store_options::cluster) against a real
// replicated ClickHouse 18.16 cluster — one ZooKeeper and 3 replicas of one
// shard on loopback, from scripts/clickhouse-cluster.sh (findings:
// docs/cluster-rig-findings.md). Its own doctest suite, "cluster":
//
//   CHSTATE_CLUSTER_ZK_SESSION_TIMEOUT_MS=6000 bash scripts/clickhouse-cluster.sh start DIR 3
//   CHSTATE_TEST_CLUSTER_DIR=DIR ./build/tests/chstate_tests -ts=cluster
//
// Without CHSTATE_TEST_CLUSTER_DIR, or when a replica does not answer, every
// case FAILS saying how to start the rig (never skips). Cases kill, stop,
// pause replicas and ZooKeeper through the rig's script; each brings back
// what it broke before it ends (rig_restorer), so the next one starts on a
// healthy cluster. Every case works in a schema of its own, dropped again
// on every replica at the end.
//
// The stress case ("cluster stress: …") runs child processes of this very
// binary (`chstate_tests --chstate-cluster-child …`, dispatched by
// tests/main.cpp to chstate_cluster_child below) and prints one line:
//
//   cluster: replicas=N processes=P acked=A acked_lost=0 overlaps=0 failovers=F
//
// Included by cluster.cpp, a translation unit of its own that only the
// plain test binary holds; uses the server suite's threads() pool and
// helpers (server_support.hpp).

#include <boost/asio/consign.hpp>

#include <csignal>

namespace cluster_tests {

using namespace chstate;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using server_tests::threads;
using http_store = basic_state_store<http_transport>;
using steady = std::chrono::steady_clock;

constexpr const char* child_flag = "--chstate-cluster-child";
constexpr const char* start_hint =
    "start it with: CHSTATE_CLUSTER_ZK_SESSION_TIMEOUT_MS=6000 bash scripts/clickhouse-cluster.sh start DIR 3; "
    "export CHSTATE_TEST_CLUSTER_DIR=DIR";

/// What DIR/env of the rig says.
struct cluster_env {
    std::string dir, name, user, password, shard, problem;
    /// The replicas' ZooKeeper session timeout as the rig was started with
    /// (DIR/r1/config.d/cluster.xml): passed again to every script call,
    /// since start and restart write the replicas' configuration anew.
    std::string session_timeout_ms;
    std::vector<std::uint16_t> ports; ///< HTTP port of r1, r2, …
    int replicas() const { return static_cast<int>(ports.size()); }
};

/// Reads CHSTATE_TEST_CLUSTER_DIR/env (shell exports) once.
inline const cluster_env& cenv() {
    static const cluster_env e = [] {
        cluster_env e;
        const char* dir = std::getenv("CHSTATE_TEST_CLUSTER_DIR");
        if (!dir || !*dir) {
            e.problem = std::string("CHSTATE_TEST_CLUSTER_DIR is not set: the cluster suite needs the replicated "
                                    "cluster rig (") + start_hint + ")";
            return e;
        }
        e.dir = dir;
        std::ifstream in(e.dir + "/env");
        if (!in) {
            e.problem = e.dir + "/env cannot be read: is the rig there? (" + start_hint + ")";
            return e;
        }
        std::map<std::string, std::string> vars;
        std::string line;
        while (std::getline(in, line)) {
            if (line.starts_with("export "))
                line.erase(0, 7);
            auto eq = line.find('=');
            if (eq == std::string::npos)
                continue;
            std::string k = line.substr(0, eq), v = line.substr(eq + 1);
            if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
                v = v.substr(1, v.size() - 2);
            vars[k] = v;
        }
        auto get = [&](const std::string& k) {
            auto it = vars.find(k);
            return it == vars.end() ? std::string() : it->second;
        };
        e.name = get("CHSTATE_TEST_CLUSTER_NAME");
        e.user = get("CHSTATE_TEST_CLUSTER_USER");
        e.shard = get("CHSTATE_TEST_CLUSTER_SHARD");
        const int n = std::atoi(get("CHSTATE_TEST_CLUSTER_REPLICAS").c_str());
        for (int i = 1; i <= n; ++i) {
            const int port = std::atoi(get("CHSTATE_TEST_CLUSTER_R" + std::to_string(i) + "_HTTP_PORT").c_str());
            if (port <= 0 || port > 65535) {
                e.problem = e.dir + "/env lacks CHSTATE_TEST_CLUSTER_R" + std::to_string(i) + "_HTTP_PORT";
                return e;
            }
            e.ports.push_back(static_cast<std::uint16_t>(port));
        }
        e.password = server_tests::read_file(get("CHSTATE_TEST_CLUSTER_PASSWORD_FILE"));
        while (!e.password.empty() && (e.password.back() == '\n' || e.password.back() == '\r'))
            e.password.pop_back();
        const std::string xml = server_tests::read_file(e.dir + "/r1/config.d/cluster.xml");
        const std::string tag = "<session_timeout_ms>";
        if (auto at = xml.find(tag); at != std::string::npos) {
            auto end = xml.find('<', at + tag.size());
            e.session_timeout_ms = xml.substr(at + tag.size(), end - at - tag.size());
        }
        if (e.session_timeout_ms.empty() ||
            e.session_timeout_ms.find_first_not_of("0123456789") != std::string::npos)
            e.session_timeout_ms = "6000";
        if (e.name.empty() || e.user.empty() || e.password.empty() || e.ports.empty())
            e.problem = e.dir + "/env lacks CHSTATE_TEST_CLUSTER_NAME/USER/PASSWORD_FILE/REPLICAS (" + start_hint + ")";
        return e;
    }();
    return e;
}

inline std::string r_name(int r) { return "r" + std::to_string(r); }

/// One replica alone (r = 1…N).
inline http_options replica_options(int r) {
    const auto& e = cenv();
    if (!e.problem.empty())
        throw std::runtime_error("cluster suite: " + e.problem);
    http_options o;
    o.host = "127.0.0.1";
    o.port = e.ports.at(static_cast<std::size_t>(r - 1));
    o.user = e.user;
    o.password = e.password;
    o.connect_timeout = 3s;
    o.request_timeout = 60s;
    return o;
}

/// True when replica r's HTTP port refuses a connection: its process has
/// closed its descriptors, kept-alive connections to it included.
inline bool refuses_connections(int r) {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket socket(io);
    boost::system::error_code ec;
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), replica_options(r).port}, ec);
    return ec == boost::asio::error::connection_refused;
}

/// Several replicas in this order, for failover.
inline http_options endpoints_options(const std::vector<int>& order) {
    http_options o = replica_options(order.front());
    for (int r : order)
        o.endpoints.push_back({"127.0.0.1", cenv().ports.at(static_cast<std::size_t>(r - 1))});
    return o;
}

/// A statement on replica r, outside any store; throws chstate::error.
inline std::string sql(int r, const std::string& q, std::chrono::milliseconds timeout = 30s) {
    auto o = replica_options(r);
    o.request_timeout = timeout;
    http_transport t(threads().get_executor(), o);
    return test::raw_sql(t, q);
}

/// The same with select_sequential_consistency (a SELECT only).
inline std::string sequential_sql(int r, const std::string& q) {
    return sql(r, q + " SETTINGS select_sequential_consistency = 1");
}

/// Throws (failing the case loudly) unless every replica answers, sees
/// ZooKeeper and lists all replicas of the cluster.
inline void require_cluster() {
    const auto& e = cenv();
    if (!e.problem.empty())
        throw std::runtime_error("cluster suite: " + e.problem);
    if (e.replicas() < 3)
        throw std::runtime_error("cluster suite: the rig in " + e.dir + " has " + std::to_string(e.replicas()) +
                                 " replicas; the suite needs 3 (" + start_hint + ")");
    for (int r = 1; r <= e.replicas(); ++r) {
        try {
            sql(r, "SELECT count() FROM system.zookeeper WHERE path = '/'");
            auto listed = sql(r, "SELECT count() FROM system.clusters WHERE cluster = '" + e.name + "'");
            if (listed != std::to_string(e.replicas()) + "\n")
                throw std::runtime_error("system.clusters lists " + listed + " replicas of " + e.name);
        } catch (const std::exception& ex) {
            throw std::runtime_error("cluster suite: replica " + r_name(r) + " (127.0.0.1:" +
                                     std::to_string(e.ports[static_cast<std::size_t>(r - 1)]) +
                                     ") does not answer or does not see ZooKeeper: " + ex.what() +
                                     " — is the rig running? (bash scripts/clickhouse-cluster.sh status " + e.dir +
                                     "; " + start_hint + ")");
        }
    }
}

/// bash scripts/clickhouse-cluster.sh CMD DIR [I]; the script's exit status.
inline int rig_status(const std::string& cmd, int replica = 0, std::string* err = nullptr) {
    const auto& e = cenv();
    const std::string err_file = e.dir + "/.cluster-suite-" + std::to_string(::getpid()) + ".err";
    std::string line = "CHSTATE_CLUSTER_ZK_SESSION_TIMEOUT_MS=" + e.session_timeout_ms + " bash '" CHSTATE_SOURCE_DIR
                       "/scripts/clickhouse-cluster.sh' " + cmd + " '" + e.dir + "'" +
                       (replica ? " " + std::to_string(replica) : std::string()) + " >/dev/null 2>'" + err_file + "'";
    int rc = std::system(line.c_str());
    if (err)
        *err = server_tests::read_file(err_file);
    std::filesystem::remove(err_file);
    return rc;
}

/// The same; throws when the script fails. A start or restart that finds a
/// saved port taken (exit 3: on a shared machine another process may bind
/// a port of a replica while it is down) is tried again for up to 30 s.
inline void rig(const std::string& cmd, int replica = 0) {
    std::string err;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
        const int rc = rig_status(cmd, replica, &err);
        if (rc == 0)
            return;
        const bool port_taken = WIFEXITED(rc) && WEXITSTATUS(rc) == 3;
        if (!port_taken || (cmd != "start" && cmd != "restart") || std::chrono::steady_clock::now() >= give_up)
            throw std::runtime_error("clickhouse-cluster.sh " + cmd + (replica ? " " + std::to_string(replica) : "") +
                                     " failed with status " + std::to_string(rc) + ": " + err);
        std::fprintf(stderr, "cluster suite: %s: a saved port is taken, trying again: %s", cmd.c_str(), err.c_str());
        std::this_thread::sleep_for(std::chrono::seconds(2));
    }
}

/// Stops replica r cleanly (SIGTERM: it leaves ZooKeeper at once, unlike a
/// kill); `rig("start")` brings it back.
inline void stop_replica(int r) {
    std::string line = "bash '" CHSTATE_SOURCE_DIR "/scripts/clickhouse-server.sh' stop '" + cenv().dir + "/" +
                       r_name(r) + "' >/dev/null 2>&1";
    if (int rc = std::system(line.c_str()); rc != 0)
        throw std::runtime_error("clickhouse-server.sh stop " + r_name(r) + " failed with status " + std::to_string(rc));
}

/// Brings back whatever a case broke: every replica resumed, ZooKeeper and
/// every replica started (`start` leaves what runs alone).
struct rig_restorer {
    rig_restorer() = default;
    rig_restorer(const rig_restorer&) = delete;
    ~rig_restorer() {
        for (int r = 1; r <= cenv().replicas(); ++r)
            (void)rig_status("resume", r); // fails harmlessly for a replica that is down
        std::string err;
        if (int rc = rig_status("start", 0, &err); rc != 0)
            std::fprintf(stderr, "cluster suite: restoring the rig failed (status %d): %s\n", rc, err.c_str());
    }
};

/// The case's schema, dropped on every replica when the case ends (after
/// its rig_restorer, declared later, has brought everything back). Local
/// drops, not ON CLUSTER: that would wait for a replica that is down.
struct scratch_schema {
    std::string name;
    explicit scratch_schema(std::string prefix) : name(test::unique_schema(prefix)) {}
    scratch_schema(const scratch_schema&) = delete;
    ~scratch_schema() {
        for (int r = 1; r <= cenv().replicas(); ++r) {
            // 18.16 can take half a minute to drop a table that had many
            // mutations; the server goes on after the request times out.
            try {
                sql(r, "DROP DATABASE IF EXISTS `" + name + "`", 5s);
            } catch (const chstate::error& e) {
                if (e.code() == errc::timeout)
                    std::fprintf(stderr, "cluster suite: %s on r%d is still being dropped (in the background)\n",
                                 name.c_str(), r);
                else
                    std::fprintf(stderr, "cluster suite: dropping %s on r%d failed: %s\n", name.c_str(), r, e.what());
            } catch (const std::exception& e) {
                std::fprintf(stderr, "cluster suite: dropping %s on r%d failed: %s\n", name.c_str(), r, e.what());
            }
        }
    }
    operator const std::string&() const { return name; }
};

/// The lock's durations for a case.
inline lock_options cluster_locks(std::chrono::milliseconds settle, std::chrono::milliseconds timeout) {
    lock_options lo;
    lo.settle = settle;
    lo.retry_interval = 50ms;
    lo.timeout = timeout;
    return lo;
}

/// Cluster mode on the rig's cluster.
inline store_options cluster_store(const std::string& schema, unsigned quorum = 0,
                                   std::chrono::milliseconds quorum_timeout = 10s) {
    store_options so;
    so.schema = schema;
    // A settle time above a quorum INSERT's acknowledgement (tens of ms
    // here): a candidate acknowledged later gives its round up.
    so.lock = cluster_locks(250ms, 20s);
    so.cluster.name = cenv().name;
    so.cluster.insert_quorum = quorum;
    so.cluster.insert_quorum_timeout = quorum_timeout;
    return so;
}

/// A store connected to replica r alone.
inline std::unique_ptr<http_store> on(int r, const store_options& so, std::chrono::milliseconds timeout = 60s) {
    auto o = replica_options(r);
    o.request_timeout = timeout;
    return std::make_unique<http_store>(http_transport(threads().get_executor(), o), so);
}

/// Restarts a replica still running a statement of the case's schema
/// long after the case gave up on it (a TRUNCATE that never returns, see
/// the dedup case): later cases then start on a healthy cluster, and the
/// schema can be dropped. Declare it after the scratch_schema.
struct wedge_guard {
    const std::string& schema;
    explicit wedge_guard(const std::string& s) : schema(s) {}
    wedge_guard(const wedge_guard&) = delete;
    ~wedge_guard() {
        for (int r = 1; r <= cenv().replicas(); ++r) {
            std::string running;
            try {
                running = sql(r, "SELECT query, elapsed FROM system.processes WHERE elapsed > 5 AND query LIKE '%" +
                                     schema + "%' AND query NOT LIKE '%system.processes%'", 10s);
            } catch (const std::exception& e) {
                running = std::string("(no answer: ") + e.what() + ")";
            }
            if (running.empty())
                continue;
            std::fprintf(stderr, "cluster suite: %s still runs, long after the case ended: %s— restarting it\n",
                         r_name(r).c_str(), running.c_str());
            std::string err;
            if (int rc = rig_status("restart", r, &err); rc != 0) {
                std::fprintf(stderr, "cluster suite: restart %s failed (status %d): %s; starting the rig\n",
                             r_name(r).c_str(), rc, err.c_str());
                if (rig_status("start", 0, &err) != 0)
                    std::fprintf(stderr, "cluster suite: start failed too: %s\n", err.c_str());
            }
        }
    }
};

/// The error a call throws (chstate::error), with its message.
template <class F>
error_code code_of(F&& f, std::string* message = nullptr) {
    try {
        f();
    } catch (const chstate::error& e) {
        if (message)
            *message = e.what();
        return e.code();
    }
    return {};
}

inline double seconds_since(steady::time_point t) {
    return std::chrono::duration<double>(steady::now() - t).count();
}

/// Polls f() (exceptions count as false) until it holds or `limit` passed.
template <class F>
bool eventually(std::chrono::milliseconds limit, F&& f, std::chrono::milliseconds step = 200ms) {
    const auto end = steady::now() + limit;
    for (;;) {
        try {
            if (f())
                return true;
        } catch (const std::exception&) {
        }
        if (steady::now() >= end)
            return false;
        std::this_thread::sleep_for(step);
    }
}

// No check here compares a wall-clock time with a fixed limit (issue 26:
// the machine may be busy). What the store promises about time is checked
// as such: a timeout that fires, with a margin of several seconds; a delete
// that does not wait for 18.16's mutation round, against a baseline timed
// in the same case; what other replicas apply from the replication log,
// eventually (below). Everything else measured is reported with MESSAGE.

/// How long the suite waits for a replica that did not run a DELETE to
/// apply it from the replication log: the store's own give-up for a delete
/// (detail::delete_give_up, 60 s). A bound on failure, not a speed claim —
/// the README promises only that it happens; the lag is reported.
constexpr std::chrono::milliseconds replication_give_up = chstate::detail::delete_give_up;

/// Polls f() (exceptions count as false) until it holds or
/// replication_give_up passed; `lag` becomes the seconds that took (when
/// it held at once: about one call's time).
template <class F>
bool replicated_eventually(F&& f, double& lag, std::chrono::milliseconds step = 20ms) {
    const auto since = steady::now();
    const bool ok = eventually(replication_give_up, std::forward<F>(f), step);
    lag = seconds_since(since);
    return ok;
}

/// The median of a few timings (seconds).
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// The engine of schema.table on replica r ("" when absent).
inline std::string engine_of(int r, const std::string& schema, const std::string& table) {
    auto out = sql(r, "SELECT engine FROM system.tables WHERE database = '" + schema + "' AND name = '" + table + "'");
    if (!out.empty() && out.back() == '\n')
        out.pop_back();
    return out;
}

inline std::int64_t v_of(const std::optional<state>& s) {
    return s ? s->partial_state.at("v").as_int64() : -1;
}

/// SYSTEM STOP FETCHES on tables of some replicas; started again at the end.
struct stopped_fetches {
    std::vector<std::pair<int, std::string>> stopped;
    void stop(int r, const std::string& table) {
        sql(r, "SYSTEM STOP FETCHES " + table);
        stopped.emplace_back(r, table);
    }
    void start_all() {
        for (auto& [r, table] : stopped) {
            try {
                sql(r, "SYSTEM START FETCHES " + table);
            } catch (...) {
            }
        }
        stopped.clear();
    }
    ~stopped_fetches() { start_all(); }
};

/// The pending quorum's status node of a table (its ZooKeeper path from
/// system.replicas on r1), "" when no quorum is pending.
inline std::string quorum_status(const std::string& schema, const std::string& table) {
    auto path = sql(1, "SELECT zookeeper_path FROM system.replicas WHERE database = '" + schema + "' AND table = '" +
                           table + "'");
    if (!path.empty() && path.back() == '\n')
        path.pop_back();
    return sql(1, "SELECT value FROM system.zookeeper WHERE path = '" + path + "/quorum' AND name = 'status'");
}

inline std::int64_t mono_us() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

inline void append_line(int fd, const std::string& line) {
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        ssize_t n = ::write(fd, p, left);
        if (n <= 0)
            throw std::runtime_error("cannot write the child's log");
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

/// http_transport that holds back the statements `hold` picks for `delay`
/// before sending them: how a store's 286 retries (another quorum INSERT
/// under way) hold its statement up, made deterministic.
class delaying_transport {
public:
    static constexpr bool binds_parameters = http_transport::binds_parameters;
    using predicate = std::function<bool(const statement&)>;

    delaying_transport(http_transport inner, predicate hold, std::chrono::milliseconds delay)
        : inner_(std::move(inner)), hold_(std::make_shared<predicate>(std::move(hold))), delay_(delay) {}

    auto get_executor() const { return inner_.get_executor(); }
    std::size_t held() const { return held_->load(); }
    /// The lock_id parameter of the first statement held back since
    /// forget_lock_id(), if it had one.
    std::string first_lock_id() const {
        std::lock_guard lk(seen_->m);
        return seen_->lock_id;
    }
    void forget_lock_id() {
        std::lock_guard lk(seen_->m);
        seen_->lock_id.clear();
    }

    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        const bool hold = (*hold_)(stmt);
        if (hold) {
            ++*held_;
            for (const auto& p : stmt.parameters)
                if (p.name == "lock_id" && p.value) {
                    std::lock_guard lk(seen_->m);
                    if (seen_->lock_id.empty())
                        seen_->lock_id = *p.value;
                }
        }
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [this, hold](auto handler, statement s, result_sink sk, diagnostics* d) {
                auto timer = std::make_shared<asio::steady_timer>(inner_.get_executor(),
                                                                  hold ? delay_ : std::chrono::milliseconds(0));
                // The inner transport reads the statement until it completes.
                auto kept = std::make_shared<const statement>(std::move(s));
                timer->async_wait([this, timer, kept, sk = std::move(sk), d,
                                   handler = std::move(handler)](error_code) mutable {
                    inner_.async_execute(*kept, std::move(sk), *d, asio::consign(std::move(handler), kept));
                });
            },
            token, stmt, std::move(sink), &diag);
    }

private:
    http_transport inner_;
    std::shared_ptr<predicate> hold_;
    std::chrono::milliseconds delay_;
    std::shared_ptr<std::atomic<std::size_t>> held_ = std::make_shared<std::atomic<std::size_t>>(0);
    struct seen {
        std::mutex m;
        std::string lock_id;
    };
    std::shared_ptr<seen> seen_ = std::make_shared<seen>();
};

} // namespace cluster_tests

// ---- the children of the stress case ----------------------------------------
//
// stream: argv = exe flag stream SCHEMA K LOGFILE STOPFILE
//   A store over every replica, its endpoint list starting at replica
//   N - K % N (K = 0 → rN, 1 → rN-1, …), writes its own ids c<K>:<j> with
//   set, update (the seed lock) and set_all until STOPFILE exists. Every
//   write is logged per id as `<kind> <id> <seq> <code>`: A acknowledged,
//   U outcome unknown (errc::outcome_unknown / errc::timeout: may have
//   landed), N not made (errc::replicas_unavailable / connection_failed /
//   state_id_locked), O any other error (counted as unknown; named in the
//   report). Last line: `F <failovers> <current endpoint>`.
// lock: argv = exe flag lock SCHEMA K LOGFILE ROUNDS
//   A store on replica K % N + 1; ROUNDS times: acquire_lock("contended"),
//   read the counter, set(lease, n + 1), log `S <pid> <enter_us> <exit_us>`
//   (or `X …` when the write's outcome is unknown), release.
int chstate_cluster_child(int argc, char** argv) {
    using namespace cluster_tests;
    if (argc < 7)
        return 2;
    const std::string mode = argv[2], schema = argv[3], logfile = argv[5], param = argv[6];
    const int k = std::atoi(argv[4]);
    const int n_replicas = cenv().replicas();
    if (n_replicas < 1)
        return 5;
    int fd = ::open(logfile.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0)
        return 3;
    try {
        if (mode == "stream") {
            std::vector<int> order;
            const int first = n_replicas - k % n_replicas;
            for (int i = 0; i < n_replicas; ++i)
                order.push_back((first - 1 + i) % n_replicas + 1);
            auto o = endpoints_options(order);
            o.connect_timeout = 2s;
            o.request_timeout = 60s;
            store_options so = cluster_store(schema, 0, 5s);
            so.lock = cluster_locks(250ms, 20s);
            http_transport t(threads().get_executor(), o);
            http_store store(t, so);
            const std::string prefix = "c" + std::to_string(k) + ":";
            auto id_of = [&](long j) { return prefix + std::to_string(j % 6); };
            long seq = 0;
            const auto hard_end = steady::now() + 900s; // a hang guard: the stop file ends the stream
            while (!std::filesystem::exists(param) && steady::now() < hard_end) {
                ++seq;
                std::vector<std::string> ids;
                const char* op = "set";
                error_code ec;
                if (seq % 5 == 3) {
                    op = "update";
                    ids = {id_of(seq)};
                    ec = code_of([&] { store.update(state{ids[0], json::object{{"v", seq}}, {}}); });
                } else if (seq % 5 == 4) {
                    op = "set_all";
                    std::vector<state> batch;
                    for (long j = 0; j < 3; ++j) {
                        ids.push_back(id_of(seq + j));
                        batch.push_back(state{ids.back(), json::object{{"v", seq}, {"k", k}}, {}});
                    }
                    ec = code_of([&] { store.set_all(batch); });
                } else {
                    ids = {id_of(seq)};
                    ec = code_of([&] { store.set(state{ids[0], json::object{{"v", seq}, {"k", k}}, {}}); });
                }
                char kind = 'A';
                if (ec == errc::outcome_unknown || ec == errc::timeout)
                    kind = 'U';
                else if (ec == errc::replicas_unavailable || ec == errc::connection_failed ||
                         ec == errc::state_id_locked)
                    kind = 'N';
                else if (ec)
                    kind = 'O';
                std::string code = ec ? std::string(ec.category().name()) + ":" + std::to_string(ec.value()) : "ok";
                for (const auto& id : ids)
                    append_line(fd, std::string(1, kind) + " " + id + " " + std::to_string(seq) + " " + code + " " +
                                        op + "\n");
            }
            append_line(fd, "F " + std::to_string(t.failovers()) + " " + std::to_string(t.current_endpoint()) + "\n");
        } else if (mode == "lock") {
            const int rounds = std::atoi(param.c_str());
            store_options so = cluster_store(schema, 0, 10s);
            so.lock = cluster_locks(300ms, 120s);
            http_store store(http_transport(threads().get_executor(), replica_options(k % n_replicas + 1)), so);
            int retries = 0;
            for (int r = 0; r < rounds; ++r) {
                std::optional<http_store::lock_lease> lease;
                for (int attempt = 0; !lease; ++attempt) {
                    try {
                        lease.emplace(store.acquire_lock("contended"));
                    } catch (const chstate::error& e) {
                        // A replica a moment behind the quorum (289) or a
                        // quorum insert in the way: not a lock decision.
                        if (attempt >= 20 ||
                            !(e.code() == errc::replicas_unavailable || e.code() == errc::outcome_unknown))
                            throw;
                        ++retries;
                        append_line(fd, "R " + std::to_string(::getpid()) + " acquire " + e.what() + "\n");
                        std::this_thread::sleep_for(100ms);
                    }
                }
                const auto enter = mono_us();
                std::optional<state> cur;
                for (int attempt = 0;; ++attempt) {
                    try {
                        cur = store.get("contended");
                        break;
                    } catch (const chstate::error& e) {
                        if (attempt >= 50 || e.code() != errc::replicas_unavailable)
                            throw;
                        ++retries;
                        append_line(fd, "R " + std::to_string(::getpid()) + " get " + e.what() + "\n");
                        std::this_thread::sleep_for(100ms);
                    }
                }
                const std::int64_t n = cur ? cur->completed_state.at("n").as_int64() : 0;
                std::this_thread::sleep_for(30ms);
                const auto ec = code_of([&] { store.set(*lease, state{"contended", {}, json::object{{"n", n + 1}}}); });
                const auto exit = mono_us();
                if (ec && ec != errc::outcome_unknown)
                    throw chstate::error(ec, "set under the lease");
                append_line(fd, std::string(ec ? "X " : "S ") + std::to_string(::getpid()) + " " +
                                    std::to_string(enter) + " " + std::to_string(exit) + "\n");
                lease->release();
            }
            (void)retries;
        } else {
            return 2;
        }
        ::close(fd);
        threads().join();
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cluster child %d (%s %d): %s\n", int(::getpid()), mode.c_str(), k, e.what());
        try {
            append_line(fd, std::string("! ") + e.what() + "\n");
        } catch (...) {
        }
        return 1;
    }
}

TEST_SUITE("cluster") {
using namespace cluster_tests;

TEST_CASE("cluster: the rig answers: every replica sees ZooKeeper and lists the 3 replicas of the cluster") {
    require_cluster();
    const auto& e = cenv();
    CHECK(e.replicas() == 3);
    for (int r = 1; r <= e.replicas(); ++r) {
        CAPTURE(r);
        CHECK(sql(r, "SELECT version()").starts_with("18.16"));
        CHECK(sql(r, "SELECT macro, substitution FROM system.macros ORDER BY macro") ==
              "replica\t" + r_name(r) + "\nshard\t" + e.shard + "\n");
    }
    MESSAGE("cluster " << e.name << " in " << e.dir << ": " << e.replicas()
                       << " replicas, ZooKeeper session timeout " << e.session_timeout_ms << " ms");
}

TEST_CASE("cluster: ensure_schema creates the tables ON CLUSTER, replicated, on every replica") {
    require_cluster();
    scratch_schema schema("cl_schema");
    auto store = on(1, cluster_store(schema));
    store->ensure_schema();
    store->ensure_schema(); // again: IF NOT EXISTS, on every replica
    on(2, cluster_store(schema))->ensure_schema(); // another store, another replica: same tables
    for (int r = 1; r <= 3; ++r) {
        CAPTURE(r);
        CHECK(engine_of(r, schema, "state") == "ReplicatedReplacingMergeTree");
        CHECK(engine_of(r, schema, "state_lock") == "ReplicatedReplacingMergeTree");
        // ZooKeeper path {shard}/{database}/{table}, replica = the {replica} macro.
        CHECK(sql(r, "SELECT zookeeper_path, replica_name, total_replicas, active_replicas, is_readonly FROM "
                     "system.replicas WHERE database = '" + schema.name + "' AND table = 'state'") ==
              "/clickhouse/tables/" + cenv().shard + "/" + schema.name + "/state\t" + r_name(r) + "\t3\t3\t0\n");
        CHECK(sql(r, "SELECT zookeeper_path FROM system.replicas WHERE database = '" + schema.name +
                     "' AND table = 'state_lock'") ==
              "/clickhouse/tables/" + cenv().shard + "/" + schema.name + "/state_lock\n");
    }
    // Versioned by updated_at, sorted by state_id, as the seed's table.
    CHECK(sql(3, "SELECT sorting_key FROM system.tables WHERE database = '" + schema.name + "' AND name = 'state'") ==
          "state_id\n");
    const auto engine_full =
        sql(2, "SELECT engine_full FROM system.tables WHERE database = '" + schema.name + "' AND name = 'state'");
    INFO(engine_full);
    CHECK(engine_full.find("{replica}") != std::string::npos);
    CHECK(engine_full.find("updated_at) ORDER BY state_id") != std::string::npos);
}

TEST_CASE("cluster: what one replica acknowledged is read at once on the others, every time (a delete: eventually, "
          "its lag reported)") {
    require_cluster();
    scratch_schema schema("cl_read");
    std::unique_ptr<http_store> stores[3];
    for (int r = 1; r <= 3; ++r)
        stores[r - 1] = on(r, cluster_store(schema));
    stores[0]->ensure_schema();
    int failures = 0, reads = 0, delete_lagged = 0;
    double delete_lag_max = 0;
    std::vector<std::string> failed;
    // Each round: a set, a set_all or a delete on one replica, read straight
    // away on the two others (quorum 2 of 3: one of them may not have the
    // part yet; the store must answer with what was acknowledged, not an
    // error, nor an old state).
    for (int round = 0; round < 15; ++round) {
        const int writer = round % 3;
        const state s{"tap-" + std::to_string(round % 2),
                      json::object{{"v", round}, {"text", "über ✓ \"quoted\"\n"}, {"n", 1700000000.8702567}},
                      json::object{{"singer_state", json::object{{"round", round}}}}};
        std::optional<state> expected = s;
        std::string what;
        switch (round % 5) {
        case 0:
        case 1:
        case 3:
            what = "set";
            stores[writer]->set(s);
            break;
        case 2:
            what = "set_all";
            stores[writer]->set_all({s, state{"batch-" + std::to_string(round), json::object{{"v", round}}, {}}});
            break;
        case 4:
            what = "delete_state";
            stores[writer]->delete_state(s.state_id);
            expected.reset();
            break;
        }
        for (int reader = 0; reader < 3; ++reader) {
            if (reader == writer)
                continue;
            ++reads;
            std::string message;
            std::optional<state> got;
            auto ec = code_of([&] { got = stores[reader]->get(s.state_id); }, &message);
            // A delete is waited for on the replica that ran it; the others
            // apply the mutation from the replication log (README, cluster
            // mode: "nothing waits for them"): gone there eventually (the
            // store's 60 s delete give-up bounds the wait; the lag is reported).
            if (what == "delete_state" && !ec && got) {
                ++delete_lagged;
                const auto since = steady::now();
                while (!ec && got && steady::now() - since < replication_give_up) {
                    std::this_thread::sleep_for(10ms);
                    ec = code_of([&] { got = stores[reader]->get(s.state_id); }, &message);
                }
                delete_lag_max = std::max(delete_lag_max, seconds_since(since));
            }
            if (ec || got != expected) {
                ++failures;
                if (failed.size() < 4)
                    failed.push_back("round " + std::to_string(round) + ": " + what + " on " + r_name(writer + 1) +
                                     ", get on " + r_name(reader + 1) + ": " +
                                     (ec ? message : got ? got->to_json_text() : std::string("nullopt")));
            }
        }
    }
    for (const auto& f : failed)
        MESSAGE(f);
    CHECK(failures == 0);
    MESSAGE(reads << " reads straight after a write on another replica, " << failures << " failed; "
                  << delete_lagged << " saw a delete late, by at most " << delete_lag_max << " s");
}

TEST_CASE("cluster: set_all on r2, state_ids on r3, get_all on r1") {
    require_cluster();
    scratch_schema schema("cl_bulk");
    auto r1 = on(1, cluster_store(schema));
    auto r2 = on(2, cluster_store(schema));
    auto r3 = on(3, cluster_store(schema));
    std::vector<state> batch;
    for (const char* id : {"tap-b:2", "tap-a:1", "tap-a:2", "tap-b:1", "other"})
        batch.push_back(state{id, json::object{{"id", id}}, json::object{{"done", true}}});
    r2->set_all(batch);
    CHECK(r3->state_ids("tap-a:*") == std::vector<std::string>{"tap-a:1", "tap-a:2"});
    CHECK(r3->state_ids() == std::vector<std::string>{"other", "tap-a:1", "tap-a:2", "tap-b:1", "tap-b:2"});
    std::vector<std::string> seen;
    const auto n = r1->get_all([&](state&& s) {
        CHECK(s.partial_state.at("id").as_string() == s.state_id);
        seen.push_back(s.state_id);
    });
    CHECK(n == 5);
    CHECK(seen == std::vector<std::string>{"other", "tap-a:1", "tap-a:2", "tap-b:1", "tap-b:2"});
    // A second batch over the same ids wins everywhere.
    for (auto& s : batch)
        s.partial_state = json::object{{"id", s.state_id}, {"second", true}};
    r1->set_all(batch);
    for (auto* st : {r2.get(), r3.get()}) {
        std::size_t second = 0;
        st->get_all([&](state&& s) { second += s.partial_state.contains("second") ? 1 : 0; });
        CHECK(second == 5);
    }
}

TEST_CASE("cluster: update, merge, copy and move, each on another replica") {
    require_cluster();
    scratch_schema schema("cl_ops");
    auto r1 = on(1, cluster_store(schema));
    auto r2 = on(2, cluster_store(schema));
    auto r3 = on(3, cluster_store(schema));
    r1->set(state{"job", json::object{{"bookmarks", json::object{{"a", 1}}}}, {}});
    auto updated = r2->update(state{"job", json::object{{"bookmarks", json::object{{"b", 2}}}}, {}});
    CHECK(updated.to_json_text() == R"({"completed": {}, "partial": {"bookmarks": {"a": 1, "b": 2}}})");
    CHECK(r3->get("job")->to_json_text() == updated.to_json_text());
    r2->set(state{"src", json::object{{"bookmarks", json::object{{"c", 3}}}}, {}});
    auto merged = r3->merge("src", "job");
    CHECK(merged.to_json_text() == R"({"completed": {}, "partial": {"bookmarks": {"a": 1, "b": 2, "c": 3}}})");
    CHECK(r1->get("job")->to_json_text() == merged.to_json_text());
    r2->copy("job", "copy");
    CHECK(r3->get("copy")->to_json_text() == merged.to_json_text());
    r1->move("copy", "moved");
    // move deletes the source: gone at once on r1, which ran it; the other
    // replicas apply the delete from the replication log, eventually
    // (README: nothing waits for them).
    CHECK_FALSE(r1->get("copy"));
    double lag = 0;
    CHECK(replicated_eventually([&] { return !r2->get("copy"); }, lag));
    MESSAGE("move on r1: its source gone on r2 " << lag << " s later");
    CHECK(r3->get("moved")->to_json_text() == merged.to_json_text());
    CHECK(code_of([&] { r2->copy("missing", "x"); }) == errc::state_not_found);
    CHECK(r1->state_ids() == std::vector<std::string>{"job", "moved", "src"});
}

TEST_CASE("cluster: delete_state and clear on one replica: gone there at once, on the others eventually (lag "
          "reported)") {
    require_cluster();
    scratch_schema schema("cl_delete");
    wedge_guard wedged(schema);
    std::unique_ptr<http_store> s[3];
    for (int r = 1; r <= 3; ++r)
        s[r - 1] = on(r, cluster_store(schema), 20s);
    for (const char* id : {"a", "b", "c", "d"})
        s[0]->set(state{id, json::object{{"v", 1}}, {}});
    // The tables were written with quorum: on 18.16 such a table's mutation
    // does not finish while the last quorum part is untouched
    // (docs/cluster-rig-findings.md, 5), so a delete that waited for
    // is_done would hang.
    // How long each took is reported, not asserted (issue 26); that a delete
    // does not wait for 18.16's mutation round is the subject of "deletes do
    // not wait for 18.16's mutation scheduling", against a baseline.
    auto t0 = steady::now();
    s[1]->delete_state("a");
    const double delete_s = seconds_since(t0);
    // The delete is waited for on the replica that ran it: gone there at
    // once. The others apply the mutation from the replication log (README,
    // cluster mode: nothing waits for them): gone there eventually, the
    // store's 60 s delete give-up bounding the wait; the lag is reported.
    double lag_max = 0;
    auto gone_eventually = [&](auto&& gone) {
        double lag = 0;
        const bool ok = replicated_eventually(gone, lag, 10ms);
        lag_max = std::max(lag_max, lag);
        return ok;
    };
    for (int r = 0; r < 3; ++r) {
        CAPTURE(r + 1);
        std::optional<state> got;
        auto gone = [&] { return !code_of([&] { got = s[r]->get("a"); }) && !got; };
        CHECK((r == 1 ? gone() : gone_eventually(gone))); // replica 2 ran it: gone at once
    }
    t0 = steady::now();
    s[2]->clear("b");
    const double clear_s = seconds_since(t0);
    for (int r = 0; r < 3; ++r) {
        CAPTURE(r + 1);
        std::vector<std::string> ids;
        auto gone = [&] {
            return !code_of([&] { ids = s[r]->state_ids(); }) && ids == std::vector<std::string>{"c", "d"};
        };
        CHECK((r == 2 ? gone() : gone_eventually(gone))); // replica 3 ran it: gone at once
    }
    // Writes still work after the deletes (nothing left pending), and reads.
    std::string message;
    CHECK_FALSE(code_of([&] { s[1]->set(state{"e", json::object{{"v", 2}}, {}}); }, &message));
    INFO(message);
    std::optional<state> e;
    CHECK_FALSE(code_of([&] { e = s[2]->get("e"); }, &message));
    CHECK(v_of(e) == 2);
    MESSAGE("delete_state " << delete_s << " s, clear " << clear_s << " s; seen late on the other replicas by at most "
                            << lag_max << " s");
}

TEST_CASE("cluster: set, delete, set the identical state again → present (not swallowed by block deduplication)") {
    require_cluster();
    // Each step's error, if any, with the server's message.
    auto step = [](const char* what, auto&& f) {
        std::string message;
        auto ec = code_of(f, &message);
        CHECK_MESSAGE(!ec, std::string(what) << ": " << message);
        return !ec;
    };
    for (auto versions : {write_versions::monotonic, write_versions::clock}) {
        CAPTURE(int(versions));
        scratch_schema schema("cl_dedup");
        wedge_guard wedged(schema);
        auto so = cluster_store(schema);
        so.versions = versions;
        auto r1 = on(1, so, 20s);
        auto r2 = on(2, so, 20s);
        auto r3 = on(3, so, 20s);
        const state s{"dup", json::object{{"bookmark", 42}}, {}};
        REQUIRE(step("set on r1", [&] { r1->set(s); }));
        REQUIRE(step("delete on r2", [&] { r2->delete_state("dup"); }));
        // Other replicas apply the delete from the replication log (README
        // "Cluster": r2 itself at once; the others eventually, nothing
        // waits for them — the store's 60 s delete give-up bounds the wait).
        CHECK_FALSE(r2->get("dup"));
        double lag = 0;
        CHECK(replicated_eventually([&] { return !r1->get("dup"); }, lag, 50ms));
        MESSAGE("delete on r2 seen on r1 " << lag << " s later");
        REQUIRE(step("the same set on r3", [&] { r3->set(s); })); // the same rows on another replica
        for (auto* st : {r1.get(), r2.get(), r3.get()}) {
            auto got = st->get("dup");
            REQUIRE(got);
            CHECK(*got == s);
        }
        REQUIRE(step("delete on r1", [&] { r1->delete_state("dup"); }));
        REQUIRE(step("the same set on r1", [&] { r1->set(s); })); // on the replica that took the first block
        CHECK(r2->get("dup") == std::optional<state>(s));
        // The same batch twice around a delete of its ids.
        const std::vector<state> batch{state{"x", json::object{{"n", 1}}, {}}, state{"y", json::object{{"n", 2}}, {}}};
        REQUIRE(step("set_all on r2", [&] { r2->set_all(batch); }));
        REQUIRE(step("delete x on r3", [&] { r3->delete_state("x"); }));
        REQUIRE(step("delete y on r1", [&] { r1->delete_state("y"); }));
        REQUIRE(step("the same set_all on r2", [&] { r2->set_all(batch); }));
        CHECK(r1->state_ids() == std::vector<std::string>{"dup", "x", "y"});
        // A state set to what it already holds stays (twice in a row).
        REQUIRE(step("set twice", [&] {
            r3->set(s);
            r3->set(s);
        }));
        CHECK(r1->get("dup") == std::optional<state>(s));
    }
}

TEST_CASE("cluster: the default quorum is a majority: 2 of 3 replicas") {
    // Replicas are paused (SIGSTOP) for less than the ZooKeeper session
    // timeout: still counted alive, they just do not fetch the part.
    require_cluster();
    scratch_schema schema("cl_majority");
    auto r1 = on(1, cluster_store(schema, 0, 2s));
    auto r2 = on(2, cluster_store(schema));
    r1->set(state{"warm", json::object{{"v", 0}}, {}});
    r2->get("warm");
    rig_restorer restore;
    // r3 takes no part: the write needs r1 and r2 only.
    rig("pause", 3);
    // Acknowledged (had it waited for r3 it would have failed with 319
    // after the 2 s quorum timeout).
    std::string message;
    CHECK_FALSE(code_of([&] { r1->set(state{"two", json::object{{"v", 2}}, {}}); }, &message));
    INFO(message);
    // r2 neither: r1 alone cannot acknowledge it (so the quorum is not 1).
    rig("pause", 2);
    const auto t0 = steady::now();
    message.clear();
    const auto ec = code_of([&] { r1->set(state{"one", json::object{{"v", 1}}, {}}); }, &message);
    const double waited = seconds_since(t0);
    // ZooKeeper's record of the pending quorum: 2 replicas required.
    const auto status = quorum_status(schema, "state");
    rig("resume", 2);
    rig("resume", 3);
    CHECK(ec == errc::outcome_unknown); // 319: the quorum timed out, the part is written on r1
    // The 2 s quorum timeout fired, and not much later (8 s of margin).
    CHECK(waited >= 1.8);
    CHECK(waited < 10);
    INFO(status);
    CHECK(status.find("required_number_of_replicas: 2\\n") != std::string::npos);
    // The paused replicas fetch the part, the quorum completes: the unknown
    // write landed after all (18.16), and sequentially consistent reads
    // return it.
    CHECK(eventually(20s, [&] { return v_of(r2->get("one")) == 1; }));
    CHECK(v_of(r2->get("two")) == 2);
    CHECK(eventually(10s, [&] { return quorum_status(schema, "state").empty(); }));
    r1->set(state{"after", json::object{{"v", 3}}, {}});
    CHECK(v_of(r2->get("after")) == 3);
}

TEST_CASE("cluster: a write while another write's quorum is pending waits for it (286 retried), then lands") {
    require_cluster();
    scratch_schema schema("cl_pending");
    auto first = on(1, cluster_store(schema, 0, 1500ms));
    auto second = on(1, cluster_store(schema, 0, 20s)); // another store (process) on the same replica
    auto r3 = on(3, cluster_store(schema));
    first->set(state{"warm", json::object{{"v", 0}}, {}});
    second->get("warm");
    r3->get("warm");
    rig_restorer restore;
    rig("pause", 2);
    rig("pause", 3);
    CHECK(code_of([&] { first->set(state{"first", json::object{{"v", 1}}, {}}); }) == errc::outcome_unknown);
    const bool pending_quorum = !quorum_status(schema, "state").empty();
    // Every quorum insert into the table now meets 286 until the first's
    // quorum completes; the second store must keep trying, not fail at once.
    const auto t0 = steady::now();
    std::string message;
    auto later = std::async(std::launch::async, [&] {
        return code_of([&] { second->set(state{"second", json::object{{"v", 2}}, {}}); }, &message);
    });
    const bool waiting = later.wait_for(1500ms) == std::future_status::timeout;
    rig("resume", 2);
    rig("resume", 3);
    CHECK(pending_quorum);
    CHECK(waiting); // still trying after 1.5 s
    const auto ec = later.get();
    const double took = seconds_since(t0);
    INFO(message);
    // The verdict is that it landed: a store that gave up would fail the
    // write (its quorum timeout is 20 s); how long it waited is reported.
    CHECK_FALSE(ec);
    CHECK(took >= 1.5);
    CHECK(eventually(10s, [&] { return v_of(r3->get("first")) == 1 && v_of(r3->get("second")) == 2; }));
    MESSAGE("the second write waited " << took << " s for the first one's quorum");
}

TEST_CASE("cluster: insert_quorum=3 with a replica stopped → replicas_unavailable (285), not the quorum timeout, "
          "nothing written") {
    require_cluster();
    scratch_schema schema("cl_q3_stopped");
    auto q3 = on(1, cluster_store(schema, 3, 5s));
    // The refused write goes through a store whose quorum timeout is 30 s:
    // "it did not wait for the quorum timeout" then has a margin no busy
    // machine eats.
    constexpr auto long_quorum_timeout = 30s;
    auto q3_long = on(1, cluster_store(schema, 3, long_quorum_timeout));
    auto majority = on(2, cluster_store(schema));
    q3->set(state{"warm", json::object{{"v", 0}}, {}});
    q3_long->get("warm");
    majority->get("warm");
    rig_restorer restore;
    stop_replica(3);
    auto t0 = steady::now();
    std::string message;
    const auto ec = code_of([&] { q3_long->set(state{"k", json::object{{"v", 1}}, {}}); }, &message);
    const double took = seconds_since(t0);
    INFO(message);
    // The verdict is the typed error: 285 (2 live replicas, quorum 3) comes
    // before anything is written; a write that waited for the quorum would
    // end with 319 (outcome_unknown) after the timeout. The time only backs
    // that up: under half the 30 s timeout.
    CHECK(ec == errc::replicas_unavailable);
    CHECK(took < std::chrono::duration<double>(long_quorum_timeout).count() / 2);
    MESSAGE("insert_quorum=3 with r3 stopped: replicas_unavailable after " << took << " s");
    CHECK_FALSE(q3->get("k"));
    CHECK(sql(1, "SELECT count() FROM `" + schema.name + "`.state WHERE state_id = 'k'") == "0\n"); // not even on r1
    // The default quorum (2) still writes with r3 down.
    CHECK_FALSE(code_of([&] { majority->set(state{"m", json::object{{"v", 2}}, {}}); }));
    CHECK(v_of(q3->get("m")) == 2);
    rig("start");
    CHECK(eventually(20s, [&] {
        return !code_of([&] { q3->set(state{"k", json::object{{"v", 3}}, {}}); });
    }));
    auto r3 = on(3, cluster_store(schema));
    CHECK(v_of(r3->get("k")) == 3); // written with quorum 3: on r3 too
    CHECK(eventually(10s, [&] { return v_of(r3->get("m")) == 2; }));
}

TEST_CASE("cluster: insert_quorum=3 with a replica paused → outcome_unknown after the quorum timeout, never success") {
    require_cluster();
    scratch_schema schema("cl_q3_paused");
    auto q3 = on(1, cluster_store(schema, 3, 2s));
    q3->set(state{"warm", json::object{{"v", 0}}, {}});
    rig_restorer restore;
    rig("pause", 3); // still counted alive: its ZooKeeper session lives on
    auto t0 = steady::now();
    std::string message;
    const auto ec = code_of([&] { q3->set(state{"k", json::object{{"v", 1}}, {}}); }, &message);
    const double took = seconds_since(t0);
    rig("resume", 3); // before its session times out
    INFO(message);
    CHECK(ec == errc::outcome_unknown); // 319
    CHECK(ec != errc::replicas_unavailable);
    // The 2 s quorum timeout fired, and not much later (8 s of margin).
    CHECK(took >= 1.8);
    CHECK(took < 10);
    // Unknown, not failed: once r3 fetches the part the quorum is met and
    // the write is there for sequential reads (18.16).
    CHECK(eventually(20s, [&] { return v_of(on(2, cluster_store(schema))->get("k")) == 1; }));
    CHECK(eventually(20s, [&] { return !code_of([&] { q3->set(state{"k", json::object{{"v", 2}}, {}}); }); }));
    CHECK(v_of(on(3, cluster_store(schema))->get("k")) == 2);
}

TEST_CASE("cluster: a replica behind the quorum refuses sequential reads (replicas_unavailable), never answers stale") {
    require_cluster();
    scratch_schema schema("cl_lagging");
    auto r1 = on(1, cluster_store(schema));
    auto r3 = on(3, cluster_store(schema));
    r1->set(state{"k", json::object{{"v", 1}}, {}});
    CHECK(eventually(10s, [&] { return v_of(r3->get("k")) == 1; }));
    stopped_fetches fetches;
    fetches.stop(3, "`" + schema.name + "`.state");
    r1->set(state{"k", json::object{{"v", 2}}, {}}); // quorum 2: r1 and r2
    r1->set(state{"new", json::object{{"v", 1}}, {}});
    // r3 has neither write: a plain read there shows the old state ...
    CHECK(sql(3, "SELECT count() FROM `" + schema.name + "`.state WHERE state_id = 'new'") == "0\n");
    // ... the store's reads must not.
    std::string message;
    std::optional<state> got;
    auto ec = code_of([&] { got = r3->get("k"); }, &message);
    INFO(message);
    CHECK(ec == errc::replicas_unavailable); // 289
    if (!ec)
        CHECK(v_of(got) == 2);
    CHECK(code_of([&] { r3->get("new"); }) == errc::replicas_unavailable);
    CHECK(code_of([&] { r3->state_ids(); }) == errc::replicas_unavailable);
    CHECK(code_of([&] { r3->get_all([](state&&) {}); }) == errc::replicas_unavailable);
    fetches.start_all();
    CHECK(eventually(15s, [&] { return v_of(r3->get("k")) == 2 && v_of(r3->get("new")) == 1; }));
}

TEST_CASE("cluster: ZooKeeper stopped → writes and sequential reads fail typed (replicas_unavailable); after zk-start "
          "writes work again") {
    require_cluster();
    scratch_schema schema("cl_zookeeper");
    auto r1 = on(1, cluster_store(schema, 0, 3s));
    auto r2 = on(2, cluster_store(schema, 0, 3s));
    r1->set(state{"before", json::object{{"v", 1}}, {}});
    CHECK(v_of(r2->get("before")) == 1);
    rig_restorer restore;
    rig("zk-stop");
    auto t0 = steady::now();
    std::string message;
    auto ec = code_of([&] { r1->set(state{"during", json::object{{"v", 2}}, {}}); }, &message);
    const double write_s = seconds_since(t0);
    INFO(message);
    // The verdicts are the typed errors (a hang would end in a timeout, a
    // lost reply in outcome_unknown); how long they took is reported.
    CHECK(ec == errc::replicas_unavailable); // 242: the table is read-only
    t0 = steady::now();
    message.clear();
    ec = code_of([&] { r2->get("before"); }, &message);
    const double read_s = seconds_since(t0);
    INFO(message);
    CHECK(ec == errc::replicas_unavailable); // 999 on a sequentially consistent read
    CHECK(code_of([&] { r1->update(state{"before", json::object{{"w", 1}}, {}}); }) == errc::replicas_unavailable);
    rig("zk-start");
    t0 = steady::now();
    // That writes work again, not how soon: 60 s bounds the wait.
    const bool back = eventually(60s, [&] {
        return !code_of([&] { r1->set(state{"after", json::object{{"v", 3}}, {}}); });
    }, 500ms);
    const double recovery = seconds_since(t0);
    CHECK(back);
    CHECK(eventually(20s, [&] {
        auto r3 = on(3, cluster_store(schema));
        return v_of(r3->get("after")) == 3 && v_of(r3->get("before")) == 1 && !r3->get("during");
    }, 500ms));
    CHECK_FALSE(r2->get("during")); // the refused write was never made
    MESSAGE("with ZooKeeper stopped: the write refused after " << write_s << " s, the read after " << read_s
                                                                << " s; writes worked again " << recovery
                                                                << " s after ZooKeeper answered");
}

TEST_CASE("cluster: a store over r3,r1,r2 whose replica is killed fails over and keeps working; r3 catches up") {
    require_cluster();
    scratch_schema schema("cl_failover");
    auto o = endpoints_options({3, 1, 2});
    o.connect_timeout = 2s;
    http_transport t(threads().get_executor(), o);
    http_store store(t, cluster_store(schema));
    store.set(state{"k", json::object{{"v", 1}}, {}});
    CHECK(v_of(store.get("k")) == 1);
    CHECK(t.current_endpoint() == 0);
    CHECK(t.failovers() == 0);
    auto r2 = on(2, cluster_store(schema)); // its first operation (ready) before the kill
    r2->get("k");
    rig_restorer restore;
    rig("kill", 3);
    // The store's kept-alive connection to r3 must have seen the kill before
    // the next write, or the write goes out on it and its reply is lost
    // (outcome_unknown: another case's subject). r3's port refusing
    // connections says its descriptors, that connection's too, are closed.
    // (A precondition, not a speed claim: 30 s bounds the wait.)
    CHECK(eventually(30s, [] { return refuses_connections(3); }, 20ms));
    const auto t0 = steady::now();
    std::string message;
    auto ec = code_of([&] { store.set(state{"k", json::object{{"v", 2}}, {}}); }, &message);
    const double failover_s = seconds_since(t0);
    INFO(message);
    // The verdict: the write succeeded, through r1, after a failover; how
    // long it took is reported.
    CHECK_FALSE(ec);
    MESSAGE("the first write after r3's kill (failing over to r1): " << failover_s << " s");
    CHECK(t.failovers() >= 1);
    CHECK(t.current_endpoint() == 1);
    CHECK(v_of(store.get("k")) == 2);
    store.set_all({state{"a", json::object{{"v", 3}}, {}}, state{"b", json::object{{"v", 4}}, {}}});
    std::string update_message;
    const bool updated = !code_of([&] { store.update(state{"a", json::object{{"w", 5}}, {}}); }, &update_message);
    CHECK_MESSAGE(updated, "update (the lock via r1): " << update_message);
    CHECK(store.state_ids() == std::vector<std::string>{"a", "b", "k"});
    CHECK(v_of(r2->get("b")) == 4);
    const auto failovers = t.failovers();
    // Back on its ports; it replicates again once its old ZooKeeper
    // session has expired, and then has every write made meanwhile.
    rig("start");
    const auto t1 = steady::now();
    auto r3 = on(3, cluster_store(schema));
    std::string last_error;
    int restarts = 0;
    const bool caught_up = eventually(90s, [&] {
        std::optional<state> a;
        if (auto ec = code_of([&] { a = r3->get("a"); }, &last_error)) {
            // r3 answered its start and is gone again (seen once in a full
            // run: refused for the whole wait). That is the 18.16 server's
            // doing, not the store's: show its logs and start it again.
            if (restarts < 2 && refuses_connections(3)) {
                ++restarts;
                const std::string logs = cenv().dir + "/" + r_name(3) + "/log/";
                auto tail = [](std::string text) { return text.size() > 3000 ? text.substr(text.size() - 3000) : text; };
                MESSAGE("r3 refuses connections after its start; the tails of its logs:\n"
                        << tail(server_tests::read_file(logs + "clickhouse-server.err.log")) << "\n"
                        << tail(server_tests::read_file(logs + "stdout.log")));
                rig("start");
            }
            return false;
        }
        return v_of(r3->get("k")) == 2 && v_of(r3->get("b")) == 4 && v_of(a) == 3 &&
               a->partial_state.contains("w") == updated;
    }, 500ms);
    if (!caught_up) { // what r3's replication was doing, for whoever reads the log
        std::string replica;
        code_of([&] {
            replica = sql(3, "SELECT is_readonly, is_session_expired, queue_size, inserts_in_queue, "
                             "merges_in_queue, absolute_delay, last_queue_update, active_replicas "
                             "FROM system.replicas WHERE database = '" + schema.name + "' FORMAT Vertical");
        }, &replica);
        MESSAGE("r3 not caught up; its last read: " << last_error << "\nits replica state:\n" << replica);
    }
    CHECK(caught_up);
    CHECK(t.failovers() == failovers); // r1 stays current
    MESSAGE("r3 caught up " << seconds_since(t1) << " s after its restart");
}

TEST_CASE("cluster: a new store while a replica is down starts on the existing tables without waiting for it") {
    require_cluster();
    scratch_schema schema("cl_new_store");
    on(1, cluster_store(schema))->set(state{"k", json::object{{"v", 1}}, {}});
    rig_restorer restore;
    stop_replica(3);
    // A process starting now (its first operation creates nothing: the
    // tables exist) must not wait for r3 in an ON CLUSTER statement
    // (distributed_ddl_task_timeout is 180 s on 18.16): with a 60 s request
    // timeout such a wait ends in errc::timeout, 120 s before the server's
    // own. The verdict is that error's absence; the time is reported.
    auto o = replica_options(1);
    o.request_timeout = 60s;
    http_store fresh(http_transport(threads().get_executor(), o), cluster_store(schema));
    const auto t0 = steady::now();
    std::string message;
    std::optional<state> got;
    auto ec = code_of([&] { got = fresh.get("k"); }, &message);
    const double took = seconds_since(t0);
    INFO(message);
    CHECK_FALSE(ec);
    CHECK(v_of(got) == 1);
    if (!ec)
        CHECK_FALSE(code_of([&] { fresh.set(state{"k", json::object{{"v", 2}}, {}}); }));
    MESSAGE("first operation of a new store with r3 down: " << took << " s");
}

TEST_CASE("cluster: a new schema while a replica is down: created within ddl_timeout per statement, and on the "
          "replica once it returns") {
    require_cluster();
    scratch_schema schema("cl_new_schema");
    {
        rig_restorer restore;
        stop_replica(3);
        auto so = cluster_store(schema);
        so.cluster.ddl_timeout = 2s;
        auto r1 = on(1, so, 30s);
        const auto t0 = steady::now();
        std::string message;
        auto ec = code_of([&] { r1->ensure_schema(); }, &message);
        const double took = seconds_since(t0);
        INFO(message);
        CHECK_FALSE(ec);
        // Three ON CLUSTER statements (database, state and lock table),
        // each waiting 2 s for r3: not the servers' 180 s. The ddl_timeout
        // fired (at least once), and not much later: 3 × 2 s and 14 s of
        // margin, far below one 180 s wait.
        CHECK(took >= 2);
        CHECK(took < 20);
        MESSAGE("ensure_schema of a new schema with r3 down: " << took << " s");
        if (!ec) {
            CHECK_FALSE(code_of([&] { r1->set(state{"k", json::object{{"v", 1}}, {}}); }));
            CHECK(v_of(on(2, so)->get("k")) == 1);
        }
    } // r3 starts again
    CHECK(eventually(60s, [&] {
        try {
            return v_of(on(3, cluster_store(schema), 10s)->get("k")) == 1;
        } catch (const std::exception&) {
            return false; // its DDL queue or fetches not through yet
        }
    }));
}

TEST_CASE("cluster: a cluster the servers do not know, or a quorum above the shard's replicas: typed errors, nothing written") {
    require_cluster();
    scratch_schema schema("cl_misconfigured");
    {
        auto so = cluster_store(schema);
        so.cluster.name = "no_such_cluster";
        auto store = on(1, so);
        std::string message;
        auto ec = code_of([&] { store->set(state{"k", json::object{{"v", 1}}, {}}); }, &message);
        INFO(message);
        CHECK(ec == errc::invalid_configuration);
        CHECK(message.find("no_such_cluster") != std::string::npos);
        CHECK(sql(1, "SELECT count() FROM system.databases WHERE name = '" + schema.name + "'") == "0\n");
    }
    {
        auto store = on(2, cluster_store(schema, 4, 2s)); // 3 replicas in the shard
        std::string message;
        const auto t0 = steady::now();
        auto ec = code_of([&] { store->set(state{"k", json::object{{"v", 1}}, {}}); }, &message);
        INFO(message);
        // The verdict is the typed error (a quorum the shard cannot meet is
        // refused, not waited out to outcome_unknown); the time is reported.
        CHECK((ec == errc::invalid_configuration || ec == errc::replicas_unavailable));
        MESSAGE("insert_quorum=4 on a 3-replica shard: "
                << std::string(ec == errc::invalid_configuration ? "invalid_configuration" : "replicas_unavailable")
                << " after " << seconds_since(t0) << " s");
        for (int r = 1; r <= 3; ++r) {
            CAPTURE(r);
            CHECK(sql(r, "SELECT count() FROM system.tables WHERE database = '" + schema.name +
                         "' AND name = 'state'") == (ec == errc::invalid_configuration ? "0\n" : "1\n"));
        }
        if (ec == errc::replicas_unavailable)
            CHECK_FALSE(on(1, cluster_store(schema))->get("k"));
    }
}

TEST_CASE("cluster: URI and environment settings cluster, insert_quorum, insert_quorum_timeout; chdb: refuses them") {
    require_cluster();
    {
        auto c = config::from_uri(
            "clickhouse://u:p@h1:1,h2:2/db?cluster=chstate_cluster&insert_quorum=2&insert_quorum_timeout=5s");
        CHECK(c.endpoints.size() == 2);
        CHECK(c.store.cluster.name == "chstate_cluster");
        CHECK(c.store.cluster.insert_quorum == 2);
        CHECK(c.store.cluster.insert_quorum_timeout == 5000ms);
        CHECK(c.store.cluster.zookeeper_path == "/clickhouse/tables/{shard}/{database}/{table}");
        CHECK(c.store.cluster.replica == "{replica}");
    }
    {
        auto c = config::from_uri("clickhouse://u:p@h/db?cluster=c1&insert_quorum_timeout=500ms");
        CHECK(c.store.cluster.name == "c1");
        CHECK(c.store.cluster.insert_quorum == 0); // a majority
        CHECK(c.store.cluster.insert_quorum_timeout == 500ms);
    }
    {
        auto c = config::from_uri("clickhouse://u:p@h/db");
        CHECK(c.store.cluster.name.empty());
        CHECK(c.store.cluster.insert_quorum == 0);
        CHECK(c.store.cluster.insert_quorum_timeout == 60'000ms);
    }
    auto refused = [](std::string_view uri) {
        error_code ec;
        diagnostics diag;
        (void)config::from_uri(uri, ec, diag);
        INFO(uri << ": " << diag.message);
        CHECK(ec == errc::invalid_configuration);
        CHECK_FALSE(diag.message.empty());
        CHECK(diag.message.find("secret") == std::string::npos);
        return ec;
    };
    refused("clickhouse://u:secret@h/db?cluster=c&insert_quorum=two");
    refused("clickhouse://u:secret@h/db?cluster=c&insert_quorum=-1");
    refused("clickhouse://u:secret@h/db?cluster=c&insert_quorum_timeout=soon");
    refused("clickhouse://u:secret@h/db?cluster=c&insert_quorum_timeout=0s");
    refused("clickhouse://u:secret@h/db?cluster=");
    refused("clickhouse://u:secret@h/db?cluster=a%27b");
    refused("clickhouse://u:secret@h/db?cluster=a&cluster=b");
    refused("chdb:///tmp/chstate-cluster-refused?cluster=chstate_cluster");
    refused("chdb:///tmp/chstate-cluster-refused?insert_quorum=2");
    refused("chdb:///tmp/chstate-cluster-refused?insert_quorum_timeout=5s");
    // The environment.
    std::map<std::string, std::string> vars{
        {"MELTANO_STATE_BACKEND_URI", "clickhouse://u:secret@h1:1,h2:2/db?cluster=from_uri&insert_quorum=1"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_CLUSTER", "chstate_cluster"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_INSERT_QUORUM", "3"},
    };
    auto lookup = [&](const char* k) -> std::optional<std::string> {
        auto it = vars.find(k);
        return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    auto c = config::from_environment(lookup);
    CHECK(c.store.cluster.name == "chstate_cluster"); // the override wins over the URI
    CHECK(c.store.cluster.insert_quorum == 3);
    CHECK(c.endpoints.size() == 2);
    auto env_refused = [&](const char* key, const char* value) {
        auto saved = vars;
        vars[key] = value;
        error_code ec;
        diagnostics diag;
        (void)config::from_environment(lookup, ec, diag);
        INFO(key << "=" << value << ": " << diag.message);
        CHECK(ec == errc::invalid_configuration);
        CHECK(diag.message.find("secret") == std::string::npos);
        vars = saved;
    };
    env_refused("MELTANO_STATE_BACKEND_CLICKHOUSE_INSERT_QUORUM", "many");
    env_refused("MELTANO_STATE_BACKEND_CLICKHOUSE_CLUSTER", "");
    env_refused("MELTANO_STATE_BACKEND_URI", "chdb:///tmp/chstate-cluster-refused");
    CHECK_FALSE(std::filesystem::exists("/tmp/chstate-cluster-refused")); // nothing was opened
}

TEST_CASE("cluster: open() with a URI naming every replica and cluster= works on the cluster; so does the environment") {
    require_cluster();
    scratch_schema schema("cl_open");
    const auto& e = cenv();
    std::string hosts;
    for (int r = 1; r <= e.replicas(); ++r)
        hosts += (r > 1 ? "," : "") + std::string("127.0.0.1:") + std::to_string(e.ports[std::size_t(r - 1)]);
    const std::string uri = "clickhouse://" + server_tests::uri_encode(e.user) + ":" +
                            server_tests::uri_encode(e.password) + "@" + hosts + "/default?schema=" + schema.name +
                            "&cluster=" + e.name + "&insert_quorum_timeout=5s";
    auto cfg = config::from_uri(uri);
    CHECK(cfg.endpoints.size() == 3);
    CHECK(cfg.store.cluster.name == e.name);
    auto store = chstate::open(cfg);
    store.set(state{"uri", json::object{{"v", 1}}, {}});
    CHECK(v_of(store.get("uri")) == 1);
    double lag_max = 0;
    for (int r = 1; r <= 3; ++r) {
        CAPTURE(r);
        CHECK(engine_of(r, schema, "state") == "ReplicatedReplacingMergeTree");
        // Read on every replica; 60 s bounds the wait (not a speed claim).
        double lag = 0;
        CHECK(replicated_eventually([&] { return v_of(on(r, cluster_store(schema))->get("uri")) == 1; }, lag, 200ms));
        lag_max = std::max(lag_max, lag);
    }
    MESSAGE("the write through open()'s store read on every replica within " << lag_max << " s");
    // The environment: the same URI without the cluster, the cluster and the
    // hosts as overrides.
    std::map<std::string, std::string> vars{
        {"MELTANO_STATE_BACKEND_URI", "clickhouse://" + server_tests::uri_encode(e.user) + "@127.0.0.1:1/default?schema=" +
                                          schema.name},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_HOST", hosts},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD", e.password},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_CLUSTER", e.name},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_INSERT_QUORUM", "3"},
    };
    auto lookup = [&](const char* k) -> std::optional<std::string> {
        auto it = vars.find(k);
        return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    auto env_store = chstate::open(config::from_environment(lookup));
    CHECK(v_of(env_store.get("uri")) == 1);
    env_store.set(state{"env", json::object{{"v", 2}}, {}}); // quorum 3: on every replica when acknowledged
    for (int r = 1; r <= 3; ++r) {
        CAPTURE(r);
        CHECK(sql(r, "SELECT count() FROM `" + schema.name + "`.state WHERE state_id = 'env'") == "1\n");
    }
}

TEST_CASE("cluster: without a cluster name nothing changes: the seed's tables on the connected server only") {
    require_cluster();
    scratch_schema schema("cl_plain");
    store_options so;
    so.schema = schema;
    so.lock = test::fast_locks();
    auto plain = on(1, so);
    plain->set(state{"k", json::object{{"v", 1}}, {}});
    CHECK(v_of(plain->get("k")) == 1);
    CHECK(engine_of(1, schema, "state") == "ReplacingMergeTree");
    CHECK(engine_of(1, schema, "state_lock") == "ReplacingMergeTree");
    for (int r = 2; r <= 3; ++r) {
        CAPTURE(r);
        CHECK(sql(r, "SELECT count() FROM system.databases WHERE name = '" + schema.name + "'") == "0\n");
    }
    CHECK(sql(1, "SELECT count() FROM system.replicas WHERE database = '" + schema.name + "'") == "0\n");
    auto lease = plain->acquire_lock("k");
    CHECK(lease.token() == 0);
    plain->set(lease, state{"k", json::object{{"v", 2}}, {}});
    lease.release();
    CHECK(v_of(plain->get("k")) == 2);
    // A second plain store on r2 has its own, empty tables.
    auto other = on(2, so);
    CHECK_FALSE(other->get("k"));
    CHECK(engine_of(2, schema, "state") == "ReplacingMergeTree");
}

TEST_CASE("cluster: the lock across replicas: held via r1, r2 and r3 time out (and update too); after release r2 acquires") {
    require_cluster();
    scratch_schema schema("cl_lock");
    auto so_holder = cluster_store(schema);
    so_holder.lock = cluster_locks(200ms, 10s);
    auto so_rival = cluster_store(schema);
    so_rival.lock = cluster_locks(200ms, 1500ms);
    auto a = on(1, so_holder);
    auto b = on(2, so_rival);
    auto c = on(3, so_rival);
    a->set(state{"job", json::object{{"v", 0}}, {}});
    auto t_acquire = steady::now();
    auto lease = a->acquire_lock("job");
    const double acquire_s = seconds_since(t_acquire);
    CHECK(lease.token() == 0); // seed_compatible over HTTP
    // The candidate row is on every replica (written with quorum; r3 may
    // be a moment behind: 60 s bounds the wait).
    CHECK(eventually(replication_give_up, [&] {
        return sequential_sql(3, "SELECT count() FROM `" + schema.name + "`.state_lock WHERE state_id = 'job'") ==
               "1\n";
    }));
    for (auto* rival : {b.get(), c.get()}) {
        const auto t0 = steady::now();
        CHECK(code_of([&] { auto l = rival->acquire_lock("job"); }) == errc::state_id_locked);
        CHECK(seconds_since(t0) >= 1.4);
    }
    CHECK(code_of([&] { b->update(state{"job", json::object{{"v", 99}}, {}}); }) == errc::state_id_locked);
    a->set(lease, state{"job", json::object{{"v", 1}}, {}});
    const auto t_release = steady::now();
    lease.release();
    const double release_s = seconds_since(t_release);
    auto taken = b->acquire_lock("job");
    CHECK(taken.held());
    b->set(taken, state{"job", json::object{{"v", 2}}, {}});
    CHECK(code_of([&] { auto l = c->acquire_lock("job"); }) == errc::state_id_locked);
    taken.release();
    auto third = c->acquire_lock("job");
    third.release();
    CHECK(v_of(a->get("job")) == 2);
    // Released everywhere: no lock row left. The last release ran on r3;
    // r1 applies its DELETE from the replication log, eventually.
    double release_lag = 0;
    CHECK(replicated_eventually([&] {
        return sequential_sql(1, "SELECT count() FROM `" + schema.name + "`.state_lock WHERE state_id = 'job'") ==
               "0\n";
    }, release_lag, 50ms));
    const auto t_update = steady::now();
    a->update(state{"job", json::object{{"w", 1}}, {}});
    const double update_s = seconds_since(t_update);
    // Reported only: that a release or an update does not wait for 18.16's
    // mutation round is asserted, against a baseline, in "deletes do not
    // wait for 18.16's mutation scheduling".
    MESSAGE("uncontended on the cluster: acquire_lock " << acquire_s << " s, release (after ~6 s held) " << release_s
                                                        << " s, update " << update_s << " s; the release seen on r1 "
                                                        << release_lag << " s after the last one");
}

TEST_CASE("cluster: deletes do not wait for 18.16's mutation scheduling: update, delete_state and a release after a "
          "quiet spell, each within a few quorum sets' time") {
    // A DELETE of rows in the newest quorum part (the lock row just
    // inserted, the state just written) cannot run until a newer quorum
    // part exists. A replicated table's mutations are assigned by its
    // merge-selecting task, which after a few idle seconds sleeps 5 s
    // between rounds: a mutation it could not assign at once then waits for
    // the next round. A pipeline's update() (lock, read, write, release)
    // after a quiet spell is the everyday case.
    //
    // The measure is not a fixed limit (issue 26: the machine may be busy)
    // but a baseline timed in this case on the same replicas just before:
    // the median of 5 quorum sets (0.03–0.04 s on the 2-core dev machine).
    // A delete that does not wait is a nudge (a quorum INSERT), an ALTER …
    // DELETE and a few counts: 3–5 quorum sets measured there, a release
    // the same. An update is a lock (check, candidate INSERT, settle,
    // check), a read, a write and a release: 8–15 quorum sets measured. One
    // that waits for the mutation round adds up to 5 s of the server's own
    // sleep: 25–50 quorum sets even if a set took 0.1–0.2 s, 150 at 0.03 s.
    // So a delete or a release is allowed 20 baselines, an update 40 —
    // 2.5–4 times the highest ratio measured — plus the waits they make by design, which
    // no load stretches (the update's 0.1 s settle; a delete's polls
    // pausing 5, 10, 15 … ms: 0.1 s). Load stretches the operations and
    // the baseline alike (the same statements on the same replicas), so
    // the ratio of an operation that did not wait stays where it was on a
    // busy machine; load only shrinks the ratio of one that did wait (the
    // server's 5 s do not stretch), so a busy machine makes the check more
    // lenient, not stricter. Every ratio is reported.
    require_cluster();
    scratch_schema schema("cl_delete_speed");
    auto so = cluster_store(schema);
    constexpr auto settle = 100ms;
    so.lock = cluster_locks(settle, 10s);
    auto r1 = on(1, so);
    auto r2 = on(2, so);
    r1->set(state{"job", json::object{{"v", 0}}, {}});
    r2->update(state{"job", json::object{{"warm", true}}, {}});
    // The baseline: 5 quorum sets, on r1 and r2 in turn (the operations
    // below run on them).
    std::vector<double> sets;
    for (int i = 0; i < 5; ++i) {
        auto& store = i % 2 ? r2 : r1;
        const auto t = steady::now();
        store->set(state{"baseline", json::object{{"v", i}}, {}});
        sets.push_back(seconds_since(t));
    }
    const double baseline = median(sets);
    // A lease held through a quiet spell (a pipeline's run), then given
    // back; then a state written and deleted at once; then an update.
    auto lease = r1->acquire_lock("job");
    std::this_thread::sleep_for(5500ms);
    auto t0 = steady::now();
    lease.release();
    const double release_s = seconds_since(t0);
    r1->set(state{"gone", json::object{{"v", 1}}, {}});
    t0 = steady::now();
    r2->delete_state("gone");
    const double delete_s = seconds_since(t0);
    // Gone at once on r2, which ran it; on r1 eventually (README, cluster
    // mode: the others apply the mutation from the replication log; the
    // store's 60 s delete give-up bounds the wait).
    CHECK_FALSE(r2->get("gone"));
    double lag = 0;
    CHECK(replicated_eventually([&] { return !r1->get("gone"); }, lag, 50ms));
    t0 = steady::now();
    r2->update(state{"job", json::object{{"round", 1}}, {}});
    const double update_s = seconds_since(t0);
    constexpr double delete_factor = 20, update_factor = 40;
    constexpr double delete_polls_s = 0.1;
    const double settle_s = std::chrono::duration<double>(settle).count();
    const double delete_allowed = delete_factor * baseline + delete_polls_s;
    const double update_allowed = update_factor * baseline + settle_s + delete_polls_s;
    MESSAGE("baseline (median of 5 quorum sets on r1, r2) " << baseline << " s; release of a lease held 5.5 s "
            << release_s << " s = " << release_s / baseline << " baselines; then delete_state of a state just written "
            << delete_s << " s = " << delete_s / baseline << " baselines (seen on r1 " << lag << " s later); update "
            << update_s << " s = " << update_s / baseline << " baselines; allowed " << delete_allowed
            << " s for a delete or a release, " << update_allowed << " s for an update");
    CHECK(release_s <= delete_allowed);
    CHECK(delete_s <= delete_allowed);
    CHECK(update_s <= update_allowed);
}

TEST_CASE("cluster: a lock candidate held up past the settle time (as 286 retries hold it) never wins a lock held via "
          "another replica") {
    // The seed protocol rests on every rival's check→insert gap being
    // shorter than the settle time (README, "seed_compatible"). On the
    // cluster the store itself stretches that gap: a candidate INSERT that
    // meets 286 is retried for up to insert_quorum_timeout. Here the late
    // store's candidate INSERT is held back 2.5 s (settle 0.2 s), while a
    // store on r1 acquires meanwhile. Whatever the two random lock_ids,
    // the late one must not also hold the lock.
    require_cluster();
    scratch_schema schema("cl_late_candidate");
    auto so = cluster_store(schema);
    so.lock = cluster_locks(200ms, 6s);
    auto late_so = so;
    late_so.lock.timeout = 4500ms;
    auto holder = on(1, so);
    holder->ensure_schema();
    const std::string lock_table = "`" + schema.name + "`.`state_lock`";
    delaying_transport slow(
        http_transport(threads().get_executor(), replica_options(2)),
        [lock_table](const statement& s) { return s.sql.starts_with("INSERT INTO " + lock_table); }, 2500ms);
    basic_state_store<delaying_transport> late(slow, late_so);
    late.get("warm"); // ready() done
    // A round tells only when the late candidate's lock_id is the smaller
    // (else it loses, rightly or not): rounds until one such, at most 12.
    // Each has even odds, so two rounds are typical and a run without a
    // telling round has odds of 1 in 4096 (5 rounds, 1 in 32, happened in CI).
    int double_grants = 0, rounds = 0, telling = 0;
    for (int round = 0; round < 12 && telling < 1; ++round) {
        ++rounds;
        CAPTURE(round);
        const auto round0 = steady::now();
        const std::string id = "job" + std::to_string(round);
        std::optional<basic_state_store<delaying_transport>::lock_lease> late_lease;
        error_code late_ec;
        std::string late_message;
        slow.forget_lock_id();
        auto pending = std::async(std::launch::async, [&] {
            late_ec = code_of([&] { late_lease.emplace(late.acquire_lock(id)); }, &late_message);
        });
        std::this_thread::sleep_for(300ms); // the late store has checked (free) and sent its candidate
        std::string message;
        std::optional<http_store::lock_lease> lease;
        // Its check → insert → settle all fit in the late INSERT's 2.5 s.
        const auto ec = code_of([&] { lease.emplace(holder->acquire_lock(id)); }, &message);
        const auto held_from = steady::now();
        CHECK_MESSAGE(!ec, "the holder's acquire_lock via r1: " << message);
        // The late candidate lands 2.5 s after the round began, settles 0.2 s
        // and decides: by 4 s it has won (wrongly) or is still trying.
        const bool late_done = pending.wait_until(round0 + 4s) == std::future_status::ready;
        const bool both = lease && late_done && late_lease.has_value();
        const std::string late_id = slow.first_lock_id(); // the candidate that raced the holder
        if (lease && !late_id.empty() && late_id < lease->lock_id())
            ++telling;
        if (both)
            ++double_grants;
        CHECK_MESSAGE(!both, "the late store holds " << id << " too, " << seconds_since(held_from)
                                                      << " s after the holder took it");
        if (lease)
            CHECK_FALSE(code_of([&] { lease->release(); }));
        pending.wait();
        if (late_lease)
            CHECK_FALSE(code_of([&] { late_lease->release(); }));
        else
            CHECK_MESSAGE(late_ec == errc::state_id_locked, late_message);
    }
    MESSAGE("late candidate: " << double_grants << " double grants in " << rounds << " rounds, " << telling
                               << " of them with the late lock_id the smaller (" << slow.held()
                               << " INSERTs held back)");
    CHECK(slow.held() >= std::size_t(rounds));
    CHECK(telling >= 1);
}

} // TEST_SUITE("cluster")

// ---- the stress case ---------------------------------------------------------

namespace cluster_tests {

struct attempt {
    long seq;
    char kind; ///< A acknowledged, U unknown, N not made, O other error
};

/// One child's log: attempts per id in order, its failovers, other lines.
struct child_log {
    std::map<std::string, std::vector<attempt>> by_id;
    std::size_t failovers = 0;
    bool finished = false;
    long acked_ops = 0, unknown_ops = 0, not_made_ops = 0, other_ops = 0;
    std::vector<std::string> other_codes, errors;
};

inline child_log read_child_log(const std::string& path) {
    child_log out;
    std::ifstream in(path);
    std::string line;
    std::set<std::pair<long, char>> ops; // (seq, kind): a set_all is one operation
    while (std::getline(in, line)) {
        if (line.empty())
            continue;
        std::istringstream ss(line);
        char kind = 0;
        ss >> kind;
        if (kind == 'F') {
            ss >> out.failovers;
            out.finished = true;
        } else if (kind == '!') {
            out.errors.push_back(line);
        } else if (kind == 'A' || kind == 'U' || kind == 'N' || kind == 'O') {
            std::string id, code, op;
            long seq = 0;
            ss >> id >> seq >> code >> op;
            out.by_id[id].push_back({seq, kind});
            if (ops.insert({seq, kind}).second) {
                if (kind == 'A')
                    ++out.acked_ops;
                else if (kind == 'U')
                    ++out.unknown_ops;
                else if (kind == 'N')
                    ++out.not_made_ops;
                else {
                    ++out.other_ops;
                    if (out.other_codes.size() < 5)
                        out.other_codes.push_back(op + " " + code);
                }
            }
        }
    }
    return out;
}

inline long count_acked(const std::vector<std::string>& logs) {
    long n = 0;
    for (const auto& path : logs) {
        std::ifstream in(path);
        std::string line;
        std::set<long> seqs;
        while (std::getline(in, line))
            if (line.size() > 2 && line[0] == 'A') {
                std::istringstream ss(line.substr(2));
                std::string id;
                long seq = 0;
                ss >> id >> seq;
                seqs.insert(seq);
            }
        n += static_cast<long>(seqs.size());
    }
    return n;
}

struct replica_verdict {
    long lost = 0;      ///< the last acknowledged value (or a later unknown one) missing
    long not_made = 0;  ///< a value whose write was reported not made is what the replica returns
    long checked = 0;
    std::vector<std::string> examples;
};

/// Compares what a replica returned (id → v; absent = not in the map) with
/// the ledgers: per id, the value must be the last acknowledged write's or
/// a later one's that was not refused (unknown, other); absent only if no
/// write to it was acknowledged.
inline replica_verdict judge(const std::vector<child_log>& logs, const std::map<std::string, std::int64_t>& seen) {
    replica_verdict v;
    for (const auto& log : logs) {
        for (const auto& [id, attempts] : log.by_id) {
            ++v.checked;
            long last_acked = -1;
            std::size_t from = 0;
            for (std::size_t i = 0; i < attempts.size(); ++i)
                if (attempts[i].kind == 'A') {
                    last_acked = attempts[i].seq;
                    from = i;
                }
            std::set<long> allowed, refused;
            if (last_acked >= 0)
                allowed.insert(last_acked);
            for (std::size_t i = last_acked >= 0 ? from + 1 : 0; i < attempts.size(); ++i) {
                if (attempts[i].kind == 'U' || attempts[i].kind == 'O')
                    allowed.insert(attempts[i].seq);
                else if (attempts[i].kind == 'N')
                    refused.insert(attempts[i].seq);
            }
            auto it = seen.find(id);
            if (it == seen.end()) {
                if (last_acked >= 0) {
                    ++v.lost;
                    if (v.examples.size() < 5)
                        v.examples.push_back(id + ": absent, last acknowledged v=" + std::to_string(last_acked));
                }
                continue;
            }
            if (allowed.count(it->second))
                continue;
            if (refused.count(it->second)) {
                ++v.not_made;
                if (v.examples.size() < 5)
                    v.examples.push_back(id + ": v=" + std::to_string(it->second) + " whose write was reported not made");
                continue;
            }
            ++v.lost;
            if (v.examples.size() < 5)
                v.examples.push_back(id + ": v=" + std::to_string(it->second) + ", last acknowledged v=" +
                                     std::to_string(last_acked));
        }
    }
    return v;
}

/// Every state of the stress schema as replica r returns it (the store's
/// sequentially consistent get_all); retried while the replica is behind
/// the quorum (replicas_unavailable) for up to `limit`. nullopt if it never answered.
inline std::optional<std::map<std::string, std::int64_t>> read_all(http_store& store, std::chrono::milliseconds limit,
                                                                   std::string& last_error) {
    const auto end = steady::now() + limit;
    for (;;) {
        std::map<std::string, std::int64_t> seen;
        std::string message;
        auto ec = code_of(
            [&] {
                store.get_all([&](state&& s) {
                    if (const auto* v = s.partial_state.if_contains("v"); v && v->is_int64())
                        seen[s.state_id] = v->as_int64();
                    else
                        seen[s.state_id] = -2; // not a stream write
                });
            },
            &message);
        if (!ec)
            return seen;
        last_error = message;
        if (steady::now() >= end)
            return std::nullopt;
        std::this_thread::sleep_for(500ms);
    }
}

/// Starts `exe flag args…`; the child's pid.
inline pid_t spawn_child(const std::vector<std::string>& args) {
    pid_t pid = ::fork();
    if (pid == 0) {
        std::vector<const char*> argv{"/proc/self/exe", child_flag};
        for (const auto& a : args)
            argv.push_back(a.c_str());
        argv.push_back(nullptr);
        ::execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
        ::_exit(127);
    }
    if (pid < 0)
        throw std::runtime_error("fork failed");
    return pid;
}

/// Waits for the children (SIGKILLs any still running after `limit`);
/// the number that did not exit with 0.
inline int wait_children(const std::vector<pid_t>& kids, std::chrono::seconds limit) {
    const auto end = steady::now() + limit;
    int failed = 0;
    std::set<pid_t> left(kids.begin(), kids.end());
    while (!left.empty()) {
        for (auto it = left.begin(); it != left.end();) {
            int status = 0;
            pid_t got = ::waitpid(*it, &status, WNOHANG);
            if (got == *it) {
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                    ++failed;
                it = left.erase(it);
            } else {
                ++it;
            }
        }
        if (left.empty())
            break;
        if (steady::now() >= end) {
            for (pid_t pid : left) {
                ::kill(pid, SIGKILL);
                int status = 0;
                ::waitpid(pid, &status, 0);
                ++failed;
            }
            break;
        }
        std::this_thread::sleep_for(100ms);
    }
    return failed;
}

} // namespace cluster_tests

TEST_SUITE("cluster") {
using namespace cluster_tests;

TEST_CASE("cluster stress: processes stream writes over all replicas while one is killed; nothing acknowledged is lost; "
          "the lock holds across replicas") {
    require_cluster();
    constexpr int processes = 4, lock_rounds = 5;
    constexpr long want_acked = 200;
    const int replicas = cenv().replicas();
    scratch_schema schema("cl_stress");
    rig_restorer restore;
    const auto wall0 = steady::now();
    // Readers on each replica, ready (first operation done) before anything breaks.
    std::vector<std::unique_ptr<http_store>> readers;
    for (int r = 1; r <= replicas; ++r) {
        readers.push_back(on(r, cluster_store(schema)));
        readers.back()->ensure_schema();
    }
    const std::string base = (std::filesystem::temp_directory_path() / ("chstate-cluster-" + schema.name)).string();
    const std::string stop_file = base + ".stop";
    std::filesystem::remove(stop_file);
    std::vector<std::string> logs;
    std::vector<pid_t> kids;
    for (int k = 0; k < processes; ++k) {
        logs.push_back(base + ".stream" + std::to_string(k) + ".log");
        std::filesystem::remove(logs.back());
        kids.push_back(spawn_child({"stream", schema.name, std::to_string(k), logs.back(), stop_file}));
    }
    // Until enough writes are acknowledged, then kill r<N> and stream on for
    // 12 s: its children fail over, the others carry on. (The 600 s cap only
    // guards against a hang: ~30 s on a quiet machine, several times that on
    // a busy one; the count, not the machine's speed, decides.)
    const auto stream0 = steady::now();
    while (count_acked(logs) < want_acked && steady::now() - stream0 < 600s)
        std::this_thread::sleep_for(200ms);
    const long acked_before_kill = count_acked(logs);
    rig("kill", replicas);
    const auto killed_at = steady::now();
    std::this_thread::sleep_for(12s);
    const long acked_at_stop = count_acked(logs);
    const double after_kill_s = seconds_since(killed_at);
    std::ofstream(stop_file) << "stop\n";
    const int failed_streams = wait_children(kids, 120s);
    const double stream_s = seconds_since(stream0);
    std::filesystem::remove(stop_file);
    std::vector<child_log> ledgers;
    long acked = 0, unknown = 0, not_made = 0, other = 0;
    std::size_t failovers = 0;
    int finished = 0;
    for (const auto& path : logs) {
        ledgers.push_back(read_child_log(path));
        const auto& l = ledgers.back();
        acked += l.acked_ops;
        unknown += l.unknown_ops;
        not_made += l.not_made_ops;
        other += l.other_ops;
        failovers += l.failovers;
        finished += l.finished ? 1 : 0;
        for (const auto& e : l.errors)
            MESSAGE(path << ": " << e);
        for (const auto& c : l.other_codes)
            MESSAGE(path << ": other error " << c);
    }
    // Every live replica: what it returns is what was acknowledged.
    long acked_lost = 0, not_made_seen = 0;
    for (int r = 1; r < replicas; ++r) {
        std::string last_error;
        auto seen = read_all(*readers[std::size_t(r - 1)], 20s, last_error);
        INFO("read on " << r_name(r) << ": " << last_error);
        CHECK(seen.has_value());
        if (!seen) {
            acked_lost += acked; // nothing could be checked
            continue;
        }
        auto v = judge(ledgers, *seen);
        acked_lost += v.lost;
        not_made_seen += v.not_made;
        for (const auto& ex : v.examples)
            MESSAGE(r_name(r) << ": " << ex);
    }
    // The killed replica back: once caught up it returns the same.
    const auto restarted = steady::now(); // the catch-up counts from here, the start included
    rig("start");
    std::string last_error;
    auto seen = read_all(*readers[std::size_t(replicas - 1)], 60s, last_error);
    const double catch_up_s = seconds_since(restarted);
    {
        INFO("read on " << r_name(replicas) << " after its restart: " << last_error);
        CHECK(seen.has_value());
    }
    if (seen) {
        auto v = judge(ledgers, *seen);
        acked_lost += v.lost;
        not_made_seen += v.not_made;
        for (const auto& ex : v.examples)
            MESSAGE(r_name(replicas) << ": " << ex);
    } else {
        acked_lost += acked;
    }
    // The lock phase: every process on another replica, one id, a counter
    // incremented under the lease.
    const std::string spans_file = base + ".lock.log";
    std::filesystem::remove(spans_file);
    kids.clear();
    const auto lock0 = steady::now();
    for (int k = 0; k < processes; ++k)
        kids.push_back(spawn_child({"lock", schema.name, std::to_string(k), spans_file, std::to_string(lock_rounds)}));
    const int failed_lockers = wait_children(kids, 150s);
    const double lock_s = seconds_since(lock0);
    struct span {
        long pid;
        std::int64_t enter, exit;
        bool unknown;
    };
    std::vector<span> spans;
    long lock_retries = 0;
    {
        std::ifstream in(spans_file);
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream ss(line);
            char kind = 0;
            ss >> kind;
            span s{};
            if ((kind == 'S' || kind == 'X') && (ss >> s.pid >> s.enter >> s.exit)) {
                s.unknown = kind == 'X';
                spans.push_back(s);
            } else if (kind == 'R') {
                ++lock_retries;
            } else if (kind == '!') {
                MESSAGE("lock child: " << line);
            }
        }
    }
    std::sort(spans.begin(), spans.end(), [](const span& a, const span& b) { return a.enter < b.enter; });
    int overlaps = 0;
    std::int64_t latest_exit = 0;
    long unknown_increments = 0;
    std::set<long> pids;
    for (const auto& s : spans) {
        if (s.enter < latest_exit)
            ++overlaps;
        latest_exit = std::max(latest_exit, s.exit);
        unknown_increments += s.unknown ? 1 : 0;
        pids.insert(s.pid);
    }
    std::int64_t counter = -1;
    eventually(20s, [&] {
        auto got = readers[0]->get("contended");
        counter = got ? got->completed_state.at("n").as_int64() : -1;
        return true;
    });
    std::printf("cluster: replicas=%d processes=%d acked=%ld acked_lost=%ld overlaps=%d failovers=%zu\n", replicas,
                processes, acked, acked_lost, overlaps, failovers);
    std::fflush(stdout);
    MESSAGE("stream: " << stream_s << " s, acknowledged " << acked_before_kill << " before the kill of "
                       << r_name(replicas) << ", " << acked_at_stop << " at the stop (" << after_kill_s
                       << " s after the kill); unknown " << unknown << ", not made " << not_made << ", other " << other
                       << "; reported-not-made values seen " << not_made_seen << "; " << r_name(replicas)
                       << " caught up " << catch_up_s << " s after its start began");
    MESSAGE("lock: " << spans.size() << " acquisitions by " << pids.size() << " processes in " << lock_s
                     << " s, counter " << counter << ", unknown increments " << unknown_increments << ", retried "
                     << lock_retries << " times (replicas_unavailable); whole case " << seconds_since(wall0) << " s");
    for (const auto& path : logs)
        std::filesystem::remove(path);
    std::filesystem::remove(spans_file);
    CHECK(failed_streams == 0);
    CHECK(finished == processes);
    CHECK(replicas >= 3);
    CHECK(processes >= 4);
    CHECK(acked >= want_acked);
    CHECK(acked_lost == 0);
    CHECK(not_made_seen == 0);
    CHECK(failovers >= 1);
    CHECK(failed_lockers == 0);
    CHECK(pids.size() == std::size_t(processes));
    CHECK(spans.size() == std::size_t(processes * lock_rounds));
    CHECK(overlaps == 0);
    CHECK(counter >= std::int64_t(spans.size() - unknown_increments));
    CHECK(counter <= std::int64_t(spans.size()));
    if (unknown_increments == 0)
        CHECK(counter == std::int64_t(spans.size()));
}

} // TEST_SUITE("cluster")

// ---- clear_all, last: on 18.16 a TRUNCATE of a replicated table can hang
// the replica it runs on (see the case); nothing runs after it but the drop.

TEST_SUITE("cluster") {
using namespace cluster_tests;

TEST_CASE("cluster: clear_all on one replica: empty there at once, on the others eventually (lag reported), and "
          "the table keeps working") {
    require_cluster();
    scratch_schema schema("cl_clear_all");
    wedge_guard wedged(schema); // restarts a replica left running the TRUNCATE
    std::unique_ptr<http_store> s[3];
    for (int r = 1; r <= 3; ++r)
        s[r - 1] = on(r, cluster_store(schema), 20s);
    auto step = [](const char* what, auto&& f) {
        std::string message;
        auto ec = code_of(f, &message);
        CHECK_MESSAGE(!ec, std::string(what) << ": " << message);
        return !ec;
    };
    const std::vector<state> batch{state{"c", json::object{{"v", 3}}, {}}, state{"d", json::object{{"v", 4}}, {}}};
    REQUIRE(step("set a, b on r1", [&] {
        s[0]->set(state{"a", json::object{{"v", 1}}, {}});
        s[0]->set(state{"b", json::object{{"v", 2}}, {}});
    }));
    REQUIRE(step("delete a on r2", [&] { s[1]->delete_state("a"); }));
    REQUIRE(step("set_all c, d on r1", [&] { s[0]->set_all(batch); }));
    // On a replica that is not the leader: 18.16 sends the TRUNCATE on to the leader.
    const auto t0 = steady::now();
    std::uint64_t cleared = 0;
    REQUIRE(step("clear_all on r3", [&] { cleared = s[2]->clear_all(); }));
    const double took = seconds_since(t0); // reported, not asserted (issue 26)
    CHECK(cleared == 3);
    // clear_all is an ALTER TABLE … DELETE (README, cluster mode), waited
    // for on the replica that ran it: r3 is empty at once. The others apply
    // the mutation from the replication log and nothing waits for them:
    // empty there eventually, the store's 60 s delete give-up bounding the
    // wait; the lag is reported.
    double lag_max = 0;
    for (int r : {2, 0, 1}) {
        CAPTURE(r + 1);
        std::vector<std::string> ids{"not read"};
        std::string message;
        auto read = [&] {
            ids = {"not read"};
            return !code_of([&] { ids = s[r]->state_ids(); }, &message);
        };
        if (r == 2) {
            CHECK_MESSAGE(read(), "state_ids after clear_all: " << message);
            CHECK(ids.empty());
            continue;
        }
        double lag = 0;
        const bool empty = replicated_eventually([&] { return read() && ids.empty(); }, lag, 10ms);
        lag_max = std::max(lag_max, lag);
        CHECK_MESSAGE(empty, "state_ids after clear_all, for " << lag << " s: " << ids.size() << " ids, " << message);
    }
    CHECK(step("set e on r2 after clear_all", [&] { s[1]->set(state{"e", json::object{{"v", 5}}, {}}); }));
    std::optional<state> e;
    CHECK(step("get e on r3", [&] { e = s[2]->get("e"); }));
    CHECK(v_of(e) == 5);
    CHECK(step("the same set_all again on r1", [&] { s[0]->set_all(batch); }));
    // Read on r2, which did not run the clear_all: tolerating its lag as
    // above (it was empty before, so this waits only in a rare case).
    std::vector<std::string> ids;
    std::string message;
    double lag = 0;
    const bool seen = replicated_eventually([&] {
        ids.clear();
        return !code_of([&] { ids = s[1]->state_ids(); }, &message) &&
               ids == std::vector<std::string>{"c", "d", "e"};
    }, lag, 10ms);
    INFO("state_ids on r2: " << message);
    CHECK(seen);
    CHECK(ids == std::vector<std::string>{"c", "d", "e"});
    MESSAGE("clear_all on r3: " << took << " s; seen empty on the other replicas by at most " << lag_max
                                << " s later; state_ids on r2 after the writes: " << lag << " s");
}

} // TEST_SUITE("cluster")
