// chstate/transport/simulated.hpp — an in-memory model of the ClickHouse
// behaviour the store relies on, for deterministic tests (ours and yours).
//
//   auto server = chstate::simulated_clickhouse::create();          // automatic delivery
//   chstate::simulated_transport t{server, ioc.get_executor()};
//   chstate::basic_state_store<chstate::simulated_transport, chstate::manual_clock>
//       store{ioc.get_executor(), t, {}, clock};
//
// The model (one non-replicated server, single partition):
//   * CREATE DATABASE / CREATE TABLE [IF NOT EXISTS] record the columns, their
//     DEFAULT (now(), now64(…) or a literal), ENGINE = [Replacing]MergeTree[(ver)],
//     ORDER BY key, TTL col + INTERVAL n SECOND|MINUTE|HOUR|DAY, and
//     SETTINGS non_replicated_deduplication_window = n.
//   * Every INSERT is a new part; rows keep insertion order.
//   * SELECT … FINAL collapses rows by the sorting key as ReplacingMergeTree
//     does: the highest version wins, equal versions → the last inserted.
//     Without FINAL every unmerged row is visible.
//   * merge(table) / merge_all() are the background merges: all parts of the
//     table become one, collapsed exactly like FINAL, and rows whose TTL has
//     passed (on the server's clock) are dropped. They run only when the test
//     calls them.
//   * DELETE FROM (lightweight) takes effect immediately; ALTER TABLE … DELETE
//     is queued as a mutation, applied by apply_mutations().
//   * INSERT … SETTINGS insert_deduplication_token = '…' into a table with
//     non_replicated_deduplication_window > 0: a block whose token was seen
//     is dropped and the INSERT still reports success (as ClickHouse does).
//   * now() / now64(3) read the server's manual_clock (server_clock()),
//     which may be a skewed handle on the clients' timeline; set_server_clock()
//     swaps it (a clock step).
//   * Bound parameters {name:Type} come from statement::parameters (values
//     raw text; nullopt = NULL). Replies: JSONEachRow (UInt64 quoted, as
//     ClickHouse's default) or TabSeparated (the default when no format is
//     named); large replies arrive in chunks of max_block_size (1000) rows.
//
// Statements understood (the store's, detail/statements.hpp, modern dialect,
// plus what tests use to inspect tables):
//   SELECT version()
//   CREATE DATABASE [IF NOT EXISTS] db
//   CREATE TABLE [IF NOT EXISTS] db.t (col Type [DEFAULT expr], …) ENGINE = … ORDER BY … [TTL …] [SETTINGS …]
//   INSERT INTO db.t (cols) VALUES (expr, …)[, (…)] | SELECT expr, … [WHERE cond]
//       | FORMAT JSONEachRow|TabSeparated (+ statement::data) [SETTINGS insert_deduplication_token = '…']
//   SELECT [DISTINCT] item, … [FROM db.t [FINAL]] [WHERE cond] [ORDER BY expr [ASC|DESC], …] [LIMIT n] [SETTINGS …]
//       items: columns, count(), max(x), min(x) (no GROUP BY), expressions, [AS alias];
//       expressions: AND / OR of =, !=, <, <=, >, >=, LIKE, + and - over columns, literals, {params},
//       x IN (SELECT arrayJoin({param:Array(String)})),
//       INTERVAL n MILLISECOND|SECOND|MINUTE|HOUR|DAY, scalar subqueries (SELECT …), and the
//       functions now(), now64(3), toDateTime(x), greatest, least, isNull, isNotNull,
//       toUnixTimestamp64Milli, fromUnixTimestamp64Milli (times are milliseconds), toUInt64,
//       SHA256, unhex; replies also in RowBinary
//   SELECT … FROM system.tables (database, name, engine, engine_full) | system.columns
//       (database, table, name, type, position) | system.mutations (database, table, is_done)
//   DELETE FROM db.t WHERE cond            ALTER TABLE db.t DELETE WHERE cond
//   TRUNCATE TABLE db.t
//   OPTIMIZE TABLE db.t [FINAL]                 (a merge, now)
//   SYSTEM STOP MERGES [db.t] / SYSTEM START MERGES [db.t]   (merge()/merge_all() then skip the table)
// Anything else fails with ClickHouse error 48 (NOT_IMPLEMENTED) and a
// message naming the statement; an unknown function with 46, an unknown
// table with 60, an unknown database with 81.
//
// Cluster mode (create_cluster(N, clock, manual, "name")): one shard of N
// replicas of cluster `name`; bind each simulated_transport to one (its
// `replica` argument). It models what the lock protocols depend on, after
// ClickHouse's ReplicatedMergeTreeSink and StorageReplicatedMergeTree and
// what docs/cluster-rig-findings.md measured on 18.16:
//   * CREATE DATABASE|TABLE … ON CLUSTER name (on every replica at once; any
//     other cluster name: 701) and Replicated[Replacing]MergeTree('path',
//     'replica'[, ver]) engines, SETTINGS replicated_deduplication_window = n
//     (default 1000). The path and replica name are not interpreted: a
//     table's replicas are its copies, one per replica, of the same name.
//   * Each replica has its own parts. An INSERT writes its part (a numbered
//     block) on the replica it reached; every other replica gets it by a
//     fetch, a background task the test runs (pending_replication(),
//     replicate(i), replicate_all()): hold a replica's tasks back and it
//     lags. In automatic delivery all tasks run after each statement.
//   * Deduplication: a block's id (insert_deduplication_token, else the
//     rows' content) is kept in ZooKeeper, shared by the replicas; a
//     duplicate is dropped on a replica that holds the block, but on one
//     that does not yet, its own rows are written there under the block's
//     number, as ClickHouse writes them under the existing part's name — so
//     a token reused with other rows leaves that replica with other rows.
//   * Statement settings insert_quorum (n or 'auto'), insert_quorum_timeout
//     (on the server's clock: quorum_waits() says which have expired; the
//     test decides when one times out),
//     insert_quorum_parallel and select_sequential_consistency (nothing else;
//     one server refuses every setting with errc::unsupported). With
//     insert_quorum >= 2 an INSERT is acknowledged only when that many
//     replicas hold its part (quorum_waits(); fetches complete it) or fails
//     with 319 when the test calls time_out_quorum(i): the part stays where
//     it is and later fetches still complete its quorum (18.16, measured).
//     More replicas asked than exist: 285. insert_quorum_parallel = 0: one
//     quorum INSERT at a time per table, across replicas (286 while one is
//     pending); = 1 (ClickHouse's default since 20.12, here too unless
//     set_insert_quorum_parallel_default(false), e.g. a users.xml profile):
//     in parallel, and such parts never become quorum/last_part.
//   * select_sequential_consistency = 1 (every read of the statement,
//     subqueries too): 289 on a replica that lacks the last part whose
//     non-parallel quorum was reached; blocks after a pending quorum part,
//     and after the last quorum part, are not read (getMaxAddedBlocks).
//   * ALTER TABLE … DELETE on a replicated table: a mutation in the shared
//     log covering the blocks written so far, applied by each replica when
//     its task runs (fetched blocks are mutated as that replica's log says).
//     DELETE FROM: the same, applied on the receiving replica at once (as
//     lightweight_deletes_sync = 1; ClickHouse's default 2 also waits for
//     the other replicas, which only makes this model more adversarial).
//   * system.clusters (cluster, shard_num, replica_num, host_name, is_local);
//     system.settings (name, value): insert_quorum_parallel only.
// Not modelled: replicas that die or ZooKeeper outages (242, 999, session
// expiry), real time (insert_quorum_timeout), merges coordinated across
// replicas (merge() merges each replica's own parts), 18.16's refusal to
// mutate the newest quorum part, partitions, a quorum INSERT's rollback, and
// the fetch source (a fetch copies the block as first written, where
// ClickHouse may copy a diverged duplicate from another replica).
//
// Delivery. In automatic mode (the default) a statement is executed when
// async_execute is called and its completion is posted to the handler's
// associated executor (default: the transport's executor). In manual mode
// (set_manual_delivery(true)) each statement waits in pending() until the
// test calls step(i): the test decides the order in which several clients'
// statements reach the server. In manual mode drive the io_context yourself
// (manual_clock::run would wait for a reply nobody delivers). Cancellation
// is not supported: a statement, once sent, runs to its end.
//
// Threads: every member is safe to call from any thread; sinks are called
// on the thread that executes the statement (the caller of async_execute or
// of step()), outside the server's lock.
#pragma once

#include <chstate/detail/sha256.hpp>
#include <chstate/detail/sql.hpp>

#include <chstate/error.hpp>
#include <chstate/manual_clock.hpp>
#include <chstate/transport.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chstate {

namespace detail::sim {

namespace json = boost::json;

struct sim_error {
    int code;
    std::string message;
};

/// A cell: NULL, text, or a number (times are milliseconds since the epoch).
struct value {
    enum kind_t { null, text, number } kind = null;
    std::string s;
    std::int64_t n = 0;
    bool quoted64 = false; ///< UInt64 result (count()): quoted in JSON

    static value of_null() { return {}; }
    static value of_text(std::string t) { return {text, std::move(t), 0, false}; }
    static value of_number(std::int64_t v) { return {number, {}, v, false}; }
};

inline std::optional<std::int64_t> to_int(std::string_view s) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size())
        return std::nullopt;
    return v;
}

/// -1, 0, 1; NULL compares unequal to everything (nullopt).
inline std::optional<int> compare(const value& a, const value& b) {
    if (a.kind == value::null || b.kind == value::null)
        return std::nullopt;
    if (a.kind == value::number || b.kind == value::number) {
        auto x = a.kind == value::number ? std::optional<std::int64_t>(a.n) : to_int(a.s);
        auto y = b.kind == value::number ? std::optional<std::int64_t>(b.n) : to_int(b.s);
        if (x && y)
            return *x < *y ? -1 : (*x > *y ? 1 : 0);
    }
    int c = a.s.compare(b.s);
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

/// SQL LIKE with % _ and backslash escapes.
inline bool like(std::string_view s, std::string_view p) {
    if (p.empty())
        return s.empty();
    if (p[0] == '%') {
        for (std::size_t i = 0; i <= s.size(); ++i)
            if (like(s.substr(i), p.substr(1)))
                return true;
        return false;
    }
    if (s.empty())
        return false;
    if (p[0] == '_')
        return like(s.substr(1), p.substr(1));
    if (p[0] == '\\' && p.size() > 1)
        return s[0] == p[1] && like(s.substr(1), p.substr(2));
    return s[0] == p[0] && like(s.substr(1), p.substr(1));
}

struct token {
    enum kind_t { ident, quoted_ident, string, number, param, symbol, end } kind = end;
    std::string text;   // identifier / literal value / symbol
    std::string type;   // param type
    std::size_t pos = 0;
};

inline std::vector<token> tokenize(std::string_view sql) {
    std::vector<token> out;
    std::size_t i = 0;
    auto err = [&](const char* what) { throw sim_error{62, std::string("Syntax error: ") + what + " in: " + std::string(sql)}; };
    while (i < sql.size()) {
        char c = sql[i];
        if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
            continue;
        }
        token t;
        t.pos = i;
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            std::size_t j = i;
            while (j < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[j])) || sql[j] == '_'))
                ++j;
            t.kind = token::ident;
            t.text = std::string(sql.substr(i, j - i));
            i = j;
        } else if (std::isdigit(static_cast<unsigned char>(c))) {
            std::size_t j = i;
            while (j < sql.size() && std::isdigit(static_cast<unsigned char>(sql[j])))
                ++j;
            t.kind = token::number;
            t.text = std::string(sql.substr(i, j - i));
            i = j;
        } else if (c == '`' || c == '\'') {
            char q = c;
            std::string v;
            std::size_t j = i + 1;
            for (;; ++j) {
                if (j >= sql.size())
                    err("unterminated quote");
                if (sql[j] == '\\' && j + 1 < sql.size()) {
                    char e = sql[++j];
                    switch (e) {
                    case 'n': v += '\n'; break;
                    case 't': v += '\t'; break;
                    case 'r': v += '\r'; break;
                    case '0': v += '\0'; break;
                    default: v += e;
                    }
                } else if (sql[j] == q) {
                    if (j + 1 < sql.size() && sql[j + 1] == q) {
                        v += q;
                        ++j;
                    } else
                        break;
                } else
                    v += sql[j];
            }
            t.kind = q == '`' ? token::quoted_ident : token::string;
            t.text = std::move(v);
            i = j + 1;
        } else if (c == '{') {
            auto close = sql.find('}', i);
            auto colon = sql.find(':', i);
            if (close == std::string_view::npos || colon == std::string_view::npos || colon > close)
                err("bad parameter");
            t.kind = token::param;
            t.text = std::string(sql.substr(i + 1, colon - i - 1));
            t.type = std::string(sql.substr(colon + 1, close - colon - 1));
            i = close + 1;
        } else {
            t.kind = token::symbol;
            std::string_view two = sql.substr(i, 2);
            if (two == "<=" || two == ">=" || two == "!=" || two == "<>") {
                t.text = std::string(two);
                i += 2;
            } else {
                t.text = std::string(1, c);
                ++i;
            }
        }
        out.push_back(std::move(t));
    }
    token e;
    e.pos = sql.size();
    out.push_back(e);
    return out;
}

inline std::string upper(std::string s) {
    for (auto& c : s)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

/// Expression tree, parameters already bound.
struct expr {
    enum kind_t { literal, column, call, binary, star } kind = literal;
    value v;                 // literal
    std::string name;        // column / function / operator (upper-case for operators)
    std::vector<expr> args;
    std::string text;        // as written, for default column names
};

struct column_def {
    std::string name;
    std::string type;
    std::optional<expr> default_value;
};

struct row {
    std::vector<value> cells;
    std::uint64_t seq = 0; ///< global insertion order
    std::uint64_t block = 0; ///< cluster mode: the block (INSERT) that wrote it
};

struct part {
    std::vector<row> rows;
};

struct table {
    std::string database, name;
    std::vector<column_def> columns;
    std::string engine_full;
    std::string engine;
    std::optional<std::size_t> version_col;
    std::vector<std::size_t> key_cols;
    std::optional<std::size_t> ttl_col;
    std::int64_t ttl_ms = 0;
    std::int64_t dedup_window = 0;
    std::vector<std::string> dedup_log;
    /// The bytes of each remembered block (absent: recorded without a block).
    std::map<std::string, std::string> dedup_bytes;
    std::vector<part> parts;
    std::vector<expr> mutations;
    bool merges_stopped = false; ///< SYSTEM STOP MERGES
    // Cluster mode, Replicated*MergeTree: this replica's copy.
    bool replicated = false;
    std::set<std::uint64_t> have;     ///< blocks this replica holds (fetched or written here)
    std::size_t mutations_done = 0;   ///< replicated mutations applied here, in log order

    /// Records a block's deduplication token; the oldest falls out of the window.
    void remember_token(std::string token, std::optional<std::string> bytes = std::nullopt) {
        if (bytes)
            dedup_bytes[token] = std::move(*bytes);
        dedup_log.push_back(std::move(token));
        if (static_cast<std::int64_t>(dedup_log.size()) > dedup_window) {
            if (std::find(dedup_log.begin() + 1, dedup_log.end(), dedup_log.front()) == dedup_log.end())
                dedup_bytes.erase(dedup_log.front());
            dedup_log.erase(dedup_log.begin());
        }
    }

    std::optional<std::size_t> find(std::string_view col) const {
        for (std::size_t i = 0; i < columns.size(); ++i)
            if (columns[i].name == col)
                return i;
        return std::nullopt;
    }
};

inline std::string format_time(std::int64_t ms, bool with_ms) {
    std::time_t secs = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
    std::string out = buf;
    if (with_ms) {
        std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(((ms % 1000) + 1000) % 1000));
        out += buf;
    }
    return out;
}

} // namespace detail::sim

/// The shared in-memory server. Create with create(); connect clients with
/// simulated_transport. See the header comment.
class simulated_clickhouse : public std::enable_shared_from_this<simulated_clickhouse> {
    using value = detail::sim::value;
    using expr = detail::sim::expr;
    using token = detail::sim::token;
    using table = detail::sim::table;
    using sim_error = detail::sim::sim_error;

public:
    /// A statement waiting for step() (manual delivery).
    struct pending_request {
        std::size_t client;
        std::string sql;
        std::size_t replica = 0; ///< cluster mode: the replica it was sent to
    };

    /// Cluster mode: a background step of one replica's replication queue.
    struct replication_task {
        enum kind_t { fetch, mutate } kind = fetch;
        std::size_t replica = 0;
        std::string table;         ///< db.t
        std::uint64_t block = 0;   ///< fetch: the block (part) to fetch
        std::size_t mutation = 0;  ///< mutation: its index in the table's log
    };
    /// Cluster mode: a quorum INSERT executed on `replica`, waiting until
    /// insert_quorum replicas hold its part.
    struct quorum_wait {
        std::size_t client = 0, replica = 0;
        std::string table;
        std::uint64_t block = 0;
        /// insert_quorum_timeout (default 600 s) has passed on the server's
        /// clock since the INSERT ran: ClickHouse would give up now.
        bool expired = false;
    };

    /// One shard of `replicas` replicas of cluster `cluster` (see the header
    /// comment, "Cluster mode"). Bind each simulated_transport to a replica.
    static std::shared_ptr<simulated_clickhouse> create_cluster(std::size_t replicas,
                                                                manual_clock server_clock = manual_clock(),
                                                                bool manual_delivery = false,
                                                                std::string cluster = "sim_cluster") {
        if (replicas == 0 || cluster.empty())
            throw std::invalid_argument("simulated_clickhouse::create_cluster: no replicas or no cluster name");
        auto s = create(std::move(server_clock), manual_delivery);
        s->cluster_ = std::move(cluster);
        s->replica_tables_.resize(replicas);
        return s;
    }
    std::size_t replicas() const {
        std::lock_guard lk(mutex_);
        return replica_tables_.size();
    }
    /// insert_quorum_parallel when a statement does not set it. The setting
    /// came with 20.10 (ClickHouse PR 15601); its default is 1 since 20.12
    /// (PR 17567: "if you rely on sequential consistency, set it back to
    /// zero"): quorum INSERTs run in parallel, are not linearized and never
    /// become quorum/last_part, so select_sequential_consistency does not
    /// cover them. A users.xml profile may set 0: 18.16's only behaviour.
    void set_insert_quorum_parallel_default(bool on) {
        std::lock_guard lk(mutex_);
        quorum_parallel_default_ = on;
    }

    /// Cluster mode: fetches and mutations not yet run, oldest first.
    std::vector<replication_task> pending_replication() const {
        std::lock_guard lk(mutex_);
        return tasks_;
    }
    std::size_t pending_replication_count() const {
        std::lock_guard lk(mutex_);
        return tasks_.size();
    }
    /// Runs pending replication task `index` (a lagging replica is one whose
    /// tasks the test holds back). A fetch that completes a quorum
    /// acknowledges the INSERT waiting for it.
    void replicate(std::size_t index) {
        std::vector<request> done;
        {
            std::lock_guard lk(mutex_);
            if (index >= tasks_.size())
                throw std::out_of_range("simulated_clickhouse::replicate: no such task");
            auto t = tasks_[index];
            tasks_.erase(tasks_.begin() + static_cast<std::ptrdiff_t>(index));
            run_task(t);
            done.swap(ready_);
        }
        for (auto& r : done)
            r.complete({});
    }
    /// Runs every pending replication task (and those they cause).
    void replicate_all() {
        while (pending_replication_count() > 0)
            replicate(0);
    }
    std::vector<quorum_wait> quorum_waits() const {
        std::lock_guard lk(mutex_);
        std::vector<quorum_wait> out;
        for (auto& w : waiters_)
            out.push_back({w.r.client, w.r.replica, w.table, w.block, now_ms() >= w.deadline_ms});
        return out;
    }
    /// The quorum INSERT `index` gives up waiting (insert_quorum_timeout
    /// passed, or whenever the test says: see quorum_wait::expired): it fails with 319, its part stays on the replicas that have
    /// it, and the quorum is still completed by later fetches (18.16,
    /// docs/cluster-rig-findings.md).
    void time_out_quorum(std::size_t index) {
        request r;
        {
            std::lock_guard lk(mutex_);
            if (index >= waiters_.size())
                throw std::out_of_range("simulated_clickhouse::time_out_quorum: no such insert");
            r = std::move(waiters_[index].r);
            waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(index));
        }
        r.diag->message = "Code: 319. DB::Exception: Unknown status, client must retry. Reason: Code: 159. "
                          "DB::Exception: Timeout while waiting for quorum. (UNKNOWN_STATUS_OF_INSERT) (simulated)";
        r.complete(make_clickhouse_error(319));
    }

    /// `server_clock` gives now()/now64() and judges TTL; pass a (skewed)
    /// handle on the clients' timeline to share simulated time.
    static std::shared_ptr<simulated_clickhouse> create(manual_clock server_clock = manual_clock(),
                                                        bool manual_delivery = false) {
        return std::shared_ptr<simulated_clickhouse>(new simulated_clickhouse(std::move(server_clock), manual_delivery));
    }

    manual_clock server_clock() const {
        std::lock_guard lk(mutex_);
        return clock_;
    }
    /// Records `token` in `table`'s deduplication log without inserting a
    /// block: a server that recorded the id and then failed to commit the
    /// part (ClickHouse's MergeTreeSink records before it commits). Later
    /// INSERTs with that token are dropped while reporting success.
    void record_deduplication_token(const std::string& table_name, std::string token) {
        std::lock_guard lk(mutex_);
        table* found = nullptr;
        try {
            found = &lookup(table_name);
        } catch (const sim_error& e) {
            throw error(make_clickhouse_error(e.code), e.message);
        }
        if (found->replicated) { // in ZooKeeper: no block behind it
            auto& z = zk_[key_of(*found)];
            std::string id = "token:" + token;
            z.block_ids.push_back(id);
            z.block_of_id[id] = 0;
            return;
        }
        found->remember_token(std::move(token));
    }

    /// Replaces the server's clock, e.g. with a skewed handle on the same
    /// timeline: the server's clock stepping back (or forward) as NTP does.
    void set_server_clock(manual_clock c) {
        std::lock_guard lk(mutex_);
        clock_ = std::move(c);
    }
    /// Reported by SELECT version().
    void set_version(std::string v) {
        std::lock_guard lk(mutex_);
        version_ = std::move(v);
    }

    // ---- delivery ---------------------------------------------------------

    void set_manual_delivery(bool on) {
        std::lock_guard lk(mutex_);
        manual_ = on;
    }
    bool manual_delivery() const {
        std::lock_guard lk(mutex_);
        return manual_;
    }
    /// Statements sent and not yet delivered, in sending order.
    std::vector<pending_request> pending() const {
        std::lock_guard lk(mutex_);
        std::vector<pending_request> out;
        for (auto& p : queue_)
            out.push_back({p.client, p.stmt.sql, p.replica});
        return out;
    }
    std::size_t pending_count() const {
        std::lock_guard lk(mutex_);
        return queue_.size();
    }
    /// Delivers pending request `index`: executes it now, streams the reply
    /// to its sink and posts its completion.
    void step(std::size_t index) {
        request r;
        {
            std::lock_guard lk(mutex_);
            if (index >= queue_.size())
                throw std::out_of_range("simulated_clickhouse::step: no such pending request");
            r = std::move(queue_[index]);
            queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(index));
        }
        run(r);
    }

    // ---- background work --------------------------------------------------

    /// Merges every part of `table_name` (`db.t`, quotes optional) into one,
    /// collapsing by sorting key and dropping TTL-expired rows. Returns the
    /// number of rows removed. Does nothing after SYSTEM STOP MERGES.
    /// Cluster mode: on every replica, each merging the parts it holds.
    std::size_t merge(std::string_view table_name) {
        std::lock_guard lk(mutex_);
        lookup(table_name); // unknown: throws
        std::size_t n = 0;
        for (auto& tables : replica_tables_)
            if (auto it = tables.find(normalize(table_name)); it != tables.end())
                n += merge_locked(it->second);
        return n;
    }
    /// merge() on every table.
    std::size_t merge_all() {
        std::lock_guard lk(mutex_);
        std::size_t n = 0;
        for (auto& tables : replica_tables_)
            for (auto& [_, t] : tables)
                n += merge_locked(t);
        return n;
    }
    /// Applies every queued ALTER … DELETE (cluster mode: on every
    /// replica, the replicated ones too); returns rows removed.
    std::size_t apply_mutations() {
        std::size_t n = 0;
        {
            std::lock_guard lk(mutex_);
            for (auto& tables : replica_tables_)
                for (auto& [_, t] : tables) {
                    for (auto& m : t.mutations)
                        n += delete_where(t, m);
                    t.mutations.clear();
                }
        }
        for (;;) {
            std::size_t k = 0;
            {
                std::lock_guard lk(mutex_);
                while (k < tasks_.size() && tasks_[k].kind != replication_task::mutate)
                    ++k;
                if (k == tasks_.size())
                    break;
            }
            replicate(k);
        }
        return n;
    }
    std::size_t pending_mutations() const {
        std::lock_guard lk(mutex_);
        std::size_t n = 0;
        for (auto& tables : replica_tables_)
            for (auto& [_, t] : tables)
                n += t.mutations.size();
        for (auto& t : tasks_)
            n += t.kind == replication_task::mutate;
        return n;
    }
    /// Unmerged parts of a table (0 for an unknown table), on `replica`.
    std::size_t part_count(std::string_view table_name, std::size_t replica = 0) const {
        std::lock_guard lk(mutex_);
        auto& tables = replica_tables_.at(replica);
        auto it = tables.find(normalize(table_name));
        return it == tables.end() ? 0 : it->second.parts.size();
    }
    /// Rows in a table, unmerged (as SELECT count() without FINAL), on `replica`.
    std::size_t row_count(std::string_view table_name, std::size_t replica = 0) const {
        std::lock_guard lk(mutex_);
        auto& tables = replica_tables_.at(replica);
        auto it = tables.find(normalize(table_name));
        if (it == tables.end())
            return 0;
        std::size_t n = 0;
        for (auto& p : it->second.parts)
            n += p.rows.size();
        return n;
    }

    /// Executes `stmt` synchronously, bypassing delivery; the whole reply in `reply`.
    /// Cluster mode: on `replica`; a quorum INSERT replicates everything at
    /// once (replicate_all()) to reach its quorum.
    error_code execute(const statement& stmt, std::string& reply, diagnostics& diag, std::size_t replica = 0) {
        if (auto why = refuse_settings(stmt)) {
            diag.message = *why;
            return make_error_code(errc::unsupported);
        }
        std::vector<std::string> chunks;
        bool waiting = false;
        auto ec = execute_chunks(stmt, replica, chunks, diag, nullptr, &waiting);
        for (auto& c : chunks)
            reply += c;
        if (waiting || !manual_delivery())
            replicate_all();
        return ec;
    }

    /// Used by simulated_transport.
    template <class Handler>
    void submit(std::size_t client, const statement& stmt, result_sink sink, diagnostics& diag, Handler handler,
                asio::any_io_executor default_ex, std::size_t replica = 0) {
        auto hex = asio::get_associated_executor(handler, default_ex);
        auto shared = std::make_shared<Handler>(std::move(handler));
        request r;
        r.client = client;
        r.replica = replica;
        r.stmt = stmt;
        r.sink = std::move(sink);
        r.diag = &diag;
        r.complete = [shared, hex](error_code ec) {
            asio::post(hex, [shared, ec]() mutable { std::move(*shared)(ec); });
        };
        if (auto why = refuse_settings(stmt)) {
            diag.message = *why;
            r.complete(make_error_code(errc::unsupported));
            return;
        }
        {
            std::lock_guard lk(mutex_);
            if (replica >= replica_tables_.size()) {
                diag.message = "simulated_clickhouse: no replica " + std::to_string(replica);
                r.complete(make_error_code(errc::connection_failed));
                return;
            }
            if (manual_) {
                queue_.push_back(std::move(r));
                return;
            }
        }
        run(r);
    }

private:
    struct request {
        std::size_t client = 0;
        std::size_t replica = 0;
        statement stmt;
        result_sink sink;
        diagnostics* diag = nullptr;
        std::function<void(error_code)> complete;
    };

    /// A quorum INSERT's status node in ZooKeeper: the replicas that hold the part.
    struct quorum_entry {
        std::uint64_t block = 0;
        std::size_t required = 0;
        std::set<std::size_t> replicas;
        bool parallel = false;
    };
    struct mutation_entry {
        expr cond;
        std::uint64_t max_block = 0; ///< applies to blocks up to this one
    };
    /// What ZooKeeper holds for one replicated table, shared by its replicas.
    struct shared_table {
        std::vector<std::string> block_ids;                ///< deduplication log, oldest first
        std::map<std::string, std::uint64_t> block_of_id;  ///< id → block number
        std::map<std::string, std::string> id_bytes;       ///< id → the block's bytes (written_rows)
        std::map<std::uint64_t, detail::sim::part> blocks; ///< each block as inserted (what a fetch copies)
        std::optional<quorum_entry> quorum;                ///< quorum/status (insert_quorum_parallel = 0)
        std::map<std::uint64_t, quorum_entry> parallel;    ///< quorum/parallel/<part>
        std::uint64_t last_quorum_block = 0;               ///< quorum/last_part (0: none)
        std::vector<mutation_entry> mutations;             ///< the replication log's mutations
    };

    simulated_clickhouse(manual_clock c, bool manual) : clock_(std::move(c)), manual_(manual) {}

    /// The settings a statement may carry: none on one server; in cluster
    /// mode the quorum ones. Anything else: a reason to refuse it.
    std::optional<std::string> refuse_settings(const statement& stmt) const {
        std::lock_guard lk(mutex_);
        for (auto& st : stmt.settings) {
            if (cluster_.empty())
                return "the simulated server has no replicas: statement setting " + st.name +
                       " (cluster mode) cannot apply (simulated_clickhouse::create_cluster has them)";
            if (st.name != "insert_quorum" && st.name != "insert_quorum_timeout" &&
                st.name != "select_sequential_consistency" && st.name != "insert_quorum_parallel" &&
                st.name != "distributed_ddl_task_timeout") // ON CLUSTER runs at once here
                return "simulated_clickhouse does not model the setting " + st.name;
            if (!detail::sim::to_int(st.value) && !(st.name == "insert_quorum" && st.value == "auto"))
                return "simulated_clickhouse: setting " + st.name + " = '" + st.value + "' is not a number";
        }
        return std::nullopt;
    }

    /// Cluster mode, automatic delivery: replication happens at once.
    void auto_replicate() {
        {
            std::lock_guard lk(mutex_);
            if (manual_ || cluster_.empty())
                return;
        }
        replicate_all();
    }

    void run(request& r) {
        std::vector<std::string> chunks;
        diagnostics local;
        bool waiting = false;
        error_code ec = execute_chunks(r.stmt, r.replica, chunks, local, &r, &waiting);
        if (waiting) { // moved to waiters_; acknowledged once its quorum holds the part
            auto_replicate();
            return;
        }
        r.diag->written_rows = local.written_rows;
        if (!ec) {
            for (auto& c : chunks) {
                if (auto sec = r.sink(c)) {
                    ec = sec;
                    break;
                }
            }
        } else {
            r.diag->message = local.message;
        }
        r.complete(ec);
        auto_replicate();
    }

    /// `r` (delivery) and `waiting`: a quorum INSERT that must wait for its
    /// quorum moves `*r` to waiters_ and sets `*waiting`.
    error_code execute_chunks(const statement& stmt, std::size_t replica, std::vector<std::string>& chunks,
                              diagnostics& diag, request* r = nullptr, bool* waiting = nullptr) {
        std::vector<request> done;
        struct drain { // completions a statement caused (a duplicate block completing a quorum)
            std::vector<request>& d;
            ~drain() {
                for (auto& q : d)
                    q.complete({});
            }
        } drained{done};
        try {
            std::lock_guard lk(mutex_);
            struct restore {
                std::size_t& cur;
                ~restore() { cur = 0; }
            } back{cur_};
            cur_ = replica;
            parser p(*this, stmt);
            p.run(chunks);
            diag.written_rows = p.written_rows; // as the engine counts them
            done.swap(ready_);
            if (p.wait_block && !quorum_done(p.wait_table, p.wait_block)) {
                if (waiting)
                    *waiting = true;
                if (r) {
                    r->diag->written_rows = p.written_rows;
                    waiters_.push_back({std::move(*r), p.wait_table, p.wait_block, p.wait_parallel,
                                        now_ms() + p.qs.timeout_ms});
                }
            }
            return {};
        } catch (const sim_error& e) {
            diag.message = e.message;
            return make_clickhouse_error(e.code);
        } catch (const std::exception& e) {
            diag.message = std::string("simulated_clickhouse: ") + e.what() + " in: " + stmt.sql;
            return make_clickhouse_error(1001);
        }
    }

    // ---- storage helpers (mutex held) ---------------------------------------

    static std::string normalize(std::string_view name) {
        std::string out;
        for (char c : name)
            if (c != '`')
                out += c;
        return out;
    }

    table& lookup(std::string_view name) {
        auto it = tables().find(normalize(name));
        if (it == tables().end()) {
            auto n = normalize(name);
            auto dot = n.find('.');
            if (dot != std::string::npos && !databases_.count(n.substr(0, dot)))
                throw sim_error{81, "Database " + n.substr(0, dot) + " does not exist"};
            throw sim_error{60, "Table " + n + " does not exist"};
        }
        return it->second;
    }

    /// The ReplacingMergeTree collapse of `rows` (any order): one row per key.
    static std::vector<detail::sim::row> collapse(const table& t, std::vector<detail::sim::row> rows) {
        auto key_less = [&](const detail::sim::row& a, const detail::sim::row& b) {
            for (auto k : t.key_cols) {
                auto c = detail::sim::compare(a.cells[k], b.cells[k]);
                int ci = c ? *c : (a.cells[k].kind == value::null) - (b.cells[k].kind == value::null);
                if (ci != 0)
                    return ci < 0;
            }
            return false;
        };
        std::stable_sort(rows.begin(), rows.end(), key_less);
        if (t.engine.find("ReplacingMergeTree") == std::string::npos)
            return rows;
        std::vector<detail::sim::row> out;
        for (auto& r : rows) {
            if (!out.empty() && !key_less(out.back(), r) && !key_less(r, out.back())) {
                auto& cur = out.back();
                bool replace = true;
                if (t.version_col) {
                    auto c = detail::sim::compare(r.cells[*t.version_col], cur.cells[*t.version_col]);
                    int ci = c ? *c : 0;
                    replace = ci > 0 || (ci == 0 && r.seq > cur.seq);
                } else {
                    replace = r.seq > cur.seq;
                }
                if (replace)
                    cur = r;
            } else {
                out.push_back(r);
            }
        }
        return out;
    }

    std::size_t merge_locked(table& t, bool forced = false) {
        if (t.merges_stopped && !forced)
            return 0;
        std::vector<detail::sim::row> all;
        for (auto& p : t.parts)
            for (auto& r : p.rows)
                all.push_back(r);
        std::size_t before = all.size();
        auto merged = collapse(t, std::move(all));
        if (t.ttl_col) {
            auto now = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now().time_since_epoch()).count();
            std::erase_if(merged, [&](const detail::sim::row& r) {
                auto& c = r.cells[*t.ttl_col];
                return c.kind == value::number && c.n + t.ttl_ms <= now;
            });
        }
        std::size_t removed = before - merged.size();
        t.parts.clear();
        if (!merged.empty())
            t.parts.push_back({std::move(merged)});
        return removed;
    }

    std::size_t delete_where(table& t, const expr& cond) {
        std::size_t n = 0;
        for (auto& p : t.parts) {
            auto before = p.rows.size();
            std::erase_if(p.rows, [&](const detail::sim::row& r) { return truthy(eval(cond, t, r.cells)); });
            n += before - p.rows.size();
        }
        std::erase_if(t.parts, [](const detail::sim::part& p) { return p.rows.empty(); });
        return n;
    }

    // ---- cluster mode (mutex held) -------------------------------------------

    static std::string key_of(const table& t) { return t.database + "." + t.name; }

    /// True unless a quorum for `block` of `key` is still being gathered.
    bool quorum_done(const std::string& key, std::uint64_t block) const {
        auto it = zk_.find(key);
        if (it == zk_.end())
            return true;
        auto& z = it->second;
        return !(z.quorum && z.quorum->block == block) && !z.parallel.count(block);
    }

    /// `replica` now holds `block`: counts it for a pending quorum; a quorum
    /// reached moves its waiting INSERT to ready_ (acknowledged after the
    /// lock is released).
    void quorum_ack(const std::string& key, std::size_t replica, std::uint64_t block) {
        auto& z = zk_[key];
        quorum_entry* e = z.quorum && z.quorum->block == block ? &*z.quorum : nullptr;
        if (auto it = z.parallel.find(block); !e && it != z.parallel.end())
            e = &it->second;
        if (!e)
            return;
        e->replicas.insert(replica);
        if (e->replicas.size() < e->required)
            return;
        // The quorum is reached: quorum/status goes and quorum/last_part names
        // the part; a parallel quorum updates no last_part (ClickHouse's
        // StorageReplicatedMergeTree::updateQuorum).
        if (e->parallel)
            z.parallel.erase(block);
        else {
            z.last_quorum_block = block;
            z.quorum.reset();
        }
        for (std::size_t k = 0; k < waiters_.size();)
            if (waiters_[k].table == key && waiters_[k].block == block) {
                ready_.push_back(std::move(waiters_[k].r));
                waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(k));
            } else
                ++k;
    }

    /// Deletes the rows of `rows` that mutation `m` removes.
    std::size_t mutate_rows(const table& t, const mutation_entry& m, std::vector<detail::sim::row>& rows) const {
        auto before = rows.size();
        std::erase_if(rows, [&](const detail::sim::row& r) {
            return r.block <= m.max_block && truthy(eval(m.cond, t, r.cells));
        });
        return before - rows.size();
    }

    /// Adds `block` to this replica's `t`: the block as first written (a
    /// fetch), or `own` rows under its number (a duplicate block written
    /// here), as mutated by the mutations this replica has already applied.
    void copy_block(table& t, const shared_table& z, std::uint64_t block,
                    std::optional<std::vector<detail::sim::row>> own = std::nullopt) {
        if (t.have.count(block))
            return;
        t.have.insert(block);
        auto it = z.blocks.find(block);
        if (it == z.blocks.end() && !own)
            return;
        auto rows = own ? std::move(*own) : it->second.rows;
        for (auto& r : rows)
            r.block = block;
        for (std::size_t k = 0; k < t.mutations_done && k < z.mutations.size(); ++k)
            mutate_rows(t, z.mutations[k], rows);
        if (!rows.empty())
            t.parts.push_back({std::move(rows)});
    }

    /// Applies the replicated mutations up to (excluding) `upto`, in order.
    void apply_upto(table& t, const shared_table& z, std::size_t upto) {
        for (; t.mutations_done < upto && t.mutations_done < z.mutations.size(); ++t.mutations_done)
            for (auto& p : t.parts)
                mutate_rows(t, z.mutations[t.mutations_done], p.rows);
        std::erase_if(t.parts, [](const detail::sim::part& p) { return p.rows.empty(); });
    }

    void run_task(const replication_task& task) {
        auto& tables = replica_tables_.at(task.replica);
        auto it = tables.find(task.table);
        if (it == tables.end())
            return;
        auto& z = zk_[task.table];
        if (task.kind == replication_task::fetch) {
            copy_block(it->second, z, task.block);
            quorum_ack(task.table, task.replica, task.block);
        } else {
            apply_upto(it->second, z, task.mutation + 1);
        }
    }

    /// The rows a read of `t` sees on this replica. With
    /// select_sequential_consistency (ClickHouse's
    /// StorageReplicatedMergeTree::getMaxAddedBlocks): 289 when the replica
    /// lacks quorum/last_part; blocks after a pending (non-parallel) quorum
    /// part and after the last quorum part are not read.
    std::vector<detail::sim::row> visible_rows(const table& t, bool sequential) const {
        std::vector<detail::sim::row> all;
        std::optional<std::uint64_t> max_block;
        if (t.replicated && sequential) {
            auto zit = zk_.find(key_of(t));
            if (zit != zk_.end()) {
                auto& z = zit->second;
                if (z.last_quorum_block && !t.have.count(z.last_quorum_block))
                    throw sim_error{289, "Replica doesn't have part " + std::to_string(z.last_quorum_block) +
                                             " which was successfully written to quorum of other replicas. Send query "
                                             "to another replica or disable 'select_sequential_consistency' setting."};
                if (z.quorum)
                    max_block = z.quorum->block - 1;
                if (z.last_quorum_block)
                    max_block = z.last_quorum_block;
            }
        }
        for (auto& p : t.parts)
            for (auto& r : p.rows)
                if (!max_block || r.block <= *max_block)
                    all.push_back(r);
        return all;
    }

    struct quorum_settings {
        std::size_t quorum = 0; ///< insert_quorum (< 2: no quorum)
        bool parallel = true;   ///< insert_quorum_parallel
        bool sequential = false;
        std::int64_t timeout_ms = 600'000; ///< insert_quorum_timeout
    };

    /// An INSERT's part into a replicated table (ReplicatedMergeTreeSink):
    /// the quorum preconditions, deduplication by block id in ZooKeeper
    /// (shared by the replicas), the part on this replica and a fetch queued
    /// for each other one; with a quorum, `wait` names the block to wait for.
    /// Returns the rows counted as written.
    std::uint64_t replicated_insert(table& t, detail::sim::part p, const std::optional<std::string>& token,
                                    const quorum_settings& q, std::uint64_t& wait) {
        const std::string key = key_of(t);
        auto& z = zk_[key];
        const bool quorum = q.quorum >= 2;
        if (p.rows.empty()) // no block reaches the sink: nothing checked, nothing written
            return 0;
        if (quorum && q.quorum > replica_tables_.size())
            throw sim_error{285, "Number of alive replicas (" + std::to_string(replica_tables_.size()) +
                                     ") is less than requested quorum (" + std::to_string(q.quorum) + ")."};
        if (quorum && !q.parallel && z.quorum)
            throw sim_error{286, "Quorum for previous write has not been satisfied yet. Status: part_name: " +
                                     std::to_string(z.quorum->block) + ", required_number_of_replicas: " +
                                     std::to_string(z.quorum->required) + ", actual_number_of_replicas: " +
                                     std::to_string(z.quorum->replicas.size())};
        std::string bytes;
        for (auto& r : p.rows)
            for (auto& v : r.cells)
                bytes += std::to_string(int(v.kind)) + ':' + std::to_string(v.s.size()) + ':' + v.s + ':' +
                         std::to_string(v.n) + ';';
        const std::string id = token ? "token:" + *token : "hash:" + bytes;
        if (auto it = z.block_of_id.find(id); it != z.block_of_id.end() && t.dedup_window > 0) {
            // A duplicate. On this replica: ignored. Not here: THIS insert's
            // rows are written here under the existing part's name
            // (ReplicatedMergeTreeSink::commitPart: "already exists on other
            // replicas as part …; will write it locally with that name") — for
            // a deduplication token with other rows, this replica's copy of
            // the part then differs from the others', for good (its later
            // fetch of the part finds it present). Either way it counts for
            // that part's quorum, and a quorum INSERT waits for it.
            const std::uint64_t block = it->second;
            const std::uint64_t written = z.id_bytes[id] == bytes ? 0 : p.rows.size();
            if (!t.have.count(block))
                copy_block(t, z, block, std::move(p.rows));
            quorum_ack(key, cur_, block);
            if (quorum && !quorum_done(key, block))
                wait = block;
            return written;
        }
        const std::uint64_t block = ++block_seq_;
        for (auto& r : p.rows)
            r.block = block;
        if (t.dedup_window > 0) {
            z.block_ids.push_back(id);
            z.block_of_id[id] = block;
            z.id_bytes[id] = bytes;
            while (static_cast<std::int64_t>(z.block_ids.size()) > t.dedup_window) {
                z.block_of_id.erase(z.block_ids.front());
                z.id_bytes.erase(z.block_ids.front());
                z.block_ids.erase(z.block_ids.begin());
            }
        }
        z.blocks[block] = p;
        const std::uint64_t written = p.rows.size();
        t.have.insert(block);
        t.parts.push_back(std::move(p));
        for (std::size_t k = 0; k < replica_tables_.size(); ++k)
            if (k != cur_)
                tasks_.push_back({replication_task::fetch, k, key, block, 0});
        if (quorum) {
            quorum_entry e{block, q.quorum, {cur_}, q.parallel};
            if (q.parallel)
                z.parallel[block] = std::move(e);
            else
                z.quorum = std::move(e);
            wait = block;
        }
        return written;
    }

    /// ALTER TABLE … DELETE / DELETE FROM on a replicated table: a mutation
    /// in the replication log for every block written so far; each replica
    /// applies it when its task runs. `here_now` (DELETE FROM): applied on
    /// the receiving replica at once.
    void replicated_mutation(table& t, expr cond, bool here_now) {
        const std::string key = key_of(t);
        auto& z = zk_[key];
        z.mutations.push_back({std::move(cond), block_seq_});
        const std::size_t index = z.mutations.size() - 1;
        for (std::size_t k = 0; k < replica_tables_.size(); ++k) {
            if (here_now && k == cur_)
                apply_upto(t, z, index + 1);
            else
                tasks_.push_back({replication_task::mutate, k, key, 0, index});
        }
    }

    static bool truthy(const value& v) {
        if (v.kind == value::number)
            return v.n != 0;
        if (v.kind == value::text)
            return !v.s.empty() && v.s != "0";
        return false;
    }

    std::int64_t now_ms() const {
        return std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now().time_since_epoch()).count();
    }

    /// Evaluates `e` on a row of `t` (cells may be empty for no row).
    /// An Array(String) literal ['a', 'b\'c'] (escapes as quote_string
    /// writes them), parsed once per distinct text.
    const std::vector<std::string>& string_array(const std::string& text) const {
        std::lock_guard lk(array_cache_mutex_);
        // Not a structured binding: `fail` below captures `it`, which
        // clang before 16 cannot do with a binding (P1091, P1381).
        auto emplaced = array_cache_.try_emplace(text);
        auto it = emplaced.first;
        if (!emplaced.second)
            return it->second;
        std::vector<std::string>& out = it->second;
        std::size_t i = 0;
        auto fail = [&] {
            array_cache_.erase(it); // no half-parsed entry for the next call
            throw sim_error{41, "Cannot parse Array(String) from " + text.substr(0, 100)};
        };
        if (text.empty() || text[i++] != '[')
            fail();
        while (i < text.size() && text[i] != ']') {
            if (text[i] == ',') { ++i; continue; }
            if (text[i] != '\'')
                fail();
            ++i;
            std::string item;
            for (;;) {
                if (i >= text.size())
                    fail();
                char c = text[i++];
                if (c == '\'')
                    break;
                if (c == '\\') {
                    if (i >= text.size())
                        fail();
                    item += detail::unescaped(text[i++]);
                } else {
                    item += c;
                }
            }
            out.push_back(std::move(item));
        }
        return out;
    }

    value eval(const expr& e, const table& t, const std::vector<value>& cells) const {
        switch (e.kind) {
        case expr::literal:
            return e.v;
        case expr::star:
            return value::of_number(1);
        case expr::column: {
            auto i = t.find(e.name);
            if (!i)
                throw sim_error{47, "Missing columns: '" + e.name + "' in table " + t.database + "." + t.name};
            return cells.at(*i);
        }
        case expr::call: {
            std::string f = detail::sim::upper(e.name);
            if (f == "NOW")
                return value::of_number(now_ms() / 1000 * 1000);
            if (f == "NOW64")
                return value::of_number(now_ms());
            if (f == "VERSION")
                return value::of_text(version_);
            if (f == "TODATETIME" || f == "TODATETIME64") {
                value a = eval(e.args.at(0), t, cells);
                if (a.kind == value::text) {
                    auto n = detail::sim::to_int(a.s);
                    if (!n)
                        throw sim_error{41, "Cannot parse DateTime from '" + a.s + "' (simulated: seconds only)"};
                    return value::of_number(*n * 1000);
                }
                if (a.kind == value::number && !a.quoted64)
                    return value::of_number(a.n * 1000);
                return a;
            }
            if (f == "GREATEST" || f == "LEAST") {
                value best = eval(e.args.at(0), t, cells);
                for (std::size_t k = 1; k < e.args.size(); ++k) {
                    value v = eval(e.args[k], t, cells);
                    auto c = detail::sim::compare(v, best);
                    if (c && (f == "GREATEST" ? *c > 0 : *c < 0))
                        best = std::move(v);
                }
                return best;
            }
            // Times are milliseconds already.
            if (f == "TOUNIXTIMESTAMP64MILLI" || f == "FROMUNIXTIMESTAMP64MILLI" || f == "TOINT64" || f == "TOUINT64") {
                value a = eval(e.args.at(0), t, cells);
                a.quoted64 = false;
                return a;
            }
            if (f == "SHA256") { // the raw 32 bytes, as ClickHouse's FixedString(32)
                value a = eval(e.args.at(0), t, cells);
                if (a.kind == value::null)
                    return a;
                auto digest = detail::sha256(a.s);
                return value::of_text(std::string(digest.begin(), digest.end()));
            }
            if (f == "UNHEX") {
                value a = eval(e.args.at(0), t, cells);
                std::string out;
                for (std::size_t k = 0; k + 1 < a.s.size(); k += 2)
                    out += static_cast<char>(std::stoi(a.s.substr(k, 2), nullptr, 16));
                return value::of_text(std::move(out));
            }
            if (f == "STARTSWITH") { // bytes, as ClickHouse compares them
                value a = eval(e.args.at(0), t, cells), prefix = eval(e.args.at(1), t, cells);
                if (a.kind == value::null || prefix.kind == value::null)
                    return value::of_null();
                return value::of_number(a.s.starts_with(prefix.s) ? 1 : 0);
            }
            if (f == "ISNULL")
                return value::of_number(eval(e.args.at(0), t, cells).kind == value::null ? 1 : 0);
            if (f == "ISNOTNULL")
                return value::of_number(eval(e.args.at(0), t, cells).kind == value::null ? 0 : 1);
            throw sim_error{46, "Unknown function " + e.name + " (simulated_clickhouse)"};
        }
        case expr::binary: {
            if (e.name == "AND")
                return value::of_number(truthy(eval(e.args[0], t, cells)) && truthy(eval(e.args[1], t, cells)));
            if (e.name == "OR")
                return value::of_number(truthy(eval(e.args[0], t, cells)) || truthy(eval(e.args[1], t, cells)));
            value a = eval(e.args[0], t, cells), b = eval(e.args[1], t, cells);
            if (e.name == "IN") { // b: the array parameter's text as the store writes it
                if (a.kind == value::null)
                    return value::of_number(0);
                const auto& items = string_array(b.s);
                return value::of_number(std::find(items.begin(), items.end(), a.s) != items.end() ? 1 : 0);
            }
            if (e.name == "+" || e.name == "-") {
                auto c = [](const value& v) { return v.kind == value::number ? v.n : detail::sim::to_int(v.s).value_or(0); };
                return value::of_number(e.name == "+" ? c(a) + c(b) : c(a) - c(b));
            }
            if (e.name == "LIKE" || e.name == "NOT LIKE") {
                if (a.kind == value::null || b.kind == value::null)
                    return value::of_null();
                bool m = detail::sim::like(a.s, b.s);
                return value::of_number(e.name == "LIKE" ? m : !m);
            }
            auto c = detail::sim::compare(a, b);
            if (!c)
                return value::of_null();
            bool r = e.name == "=" ? *c == 0
                     : e.name == "!=" || e.name == "<>" ? *c != 0
                     : e.name == "<"                    ? *c < 0
                     : e.name == "<="                   ? *c <= 0
                     : e.name == ">"                    ? *c > 0
                                                        : *c >= 0;
            return value::of_number(r);
        }
        }
        return {};
    }

    // ---- the statement parser / executor ----------------------------------

    struct parser {
        simulated_clickhouse& s;
        const statement& stmt;
        std::vector<token> toks;
        std::size_t i = 0;
        std::uint64_t written_rows = 0; ///< rows INSERTed (after deduplication)
        quorum_settings qs;             ///< cluster mode: the statement's settings
        std::string wait_table;         ///< a quorum INSERT: the table and block to wait for
        std::uint64_t wait_block = 0;
        bool wait_parallel = false;

        parser(simulated_clickhouse& sv, const statement& st) : s(sv), stmt(st), toks(detail::sim::tokenize(st.sql)) {
            qs.parallel = s.quorum_parallel_default_;
            for (auto& set : st.settings) { // checked by refuse_settings
                auto n = detail::sim::to_int(set.value);
                if (set.name == "insert_quorum")
                    qs.quorum = n ? static_cast<std::size_t>(*n) : s.replica_tables_.size() / 2 + 1;
                else if (set.name == "select_sequential_consistency")
                    qs.sequential = n && *n != 0;
                else if (set.name == "insert_quorum_parallel")
                    qs.parallel = n && *n != 0;
                else if (set.name == "insert_quorum_timeout" && n)
                    qs.timeout_ms = *n;
            }
        }

        /// ON CLUSTER name (after a CREATE's object name): true when given.
        bool on_cluster() {
            if (!accept_kw("ON"))
                return false;
            expect_kw("CLUSTER");
            std::string c = name();
            if (s.cluster_.empty() || c != s.cluster_)
                throw sim_error{701, "Requested cluster '" + c + "' not found"};
            return true;
        }

        [[noreturn]] void unsupported() const {
            throw sim_error{48, "simulated_clickhouse does not understand this statement (see "
                                "chstate/transport/simulated.hpp for those it does): " + stmt.sql};
        }
        const token& peek(std::size_t k = 0) const { return toks[std::min(i + k, toks.size() - 1)]; }
        bool is_kw(std::string_view kw, std::size_t k = 0) const {
            return peek(k).kind == token::ident && detail::sim::upper(peek(k).text) == kw;
        }
        bool is_sym(std::string_view sym) const { return peek().kind == token::symbol && peek().text == sym; }
        bool accept_kw(std::string_view kw) {
            if (!is_kw(kw))
                return false;
            ++i;
            return true;
        }
        bool accept_sym(std::string_view sym) {
            if (!is_sym(sym))
                return false;
            ++i;
            return true;
        }
        void expect_kw(std::string_view kw) {
            if (!accept_kw(kw))
                unsupported();
        }
        void expect_sym(std::string_view sym) {
            if (!accept_sym(sym))
                unsupported();
        }
        std::string name() {
            auto& t = peek();
            if (t.kind != token::ident && t.kind != token::quoted_ident)
                unsupported();
            ++i;
            return t.text;
        }
        std::string table_name() {
            std::string n = name();
            if (accept_sym("."))
                n += "." + name();
            return n;
        }
        bool at_end() const { return peek().kind == token::end; }

        value bind(const token& t) const {
            for (auto& p : stmt.parameters) {
                if (p.name != t.text)
                    continue;
                if (!p.value)
                    return value::of_null();
                std::string ty = t.type;
                if (ty.find("Int") != std::string::npos) {
                    auto n = detail::sim::to_int(*p.value);
                    if (!n)
                        throw sim_error{27, "Cannot parse " + ty + " parameter " + p.name};
                    return value::of_number(*n);
                }
                return value::of_text(*p.value);
            }
            throw sim_error{456, "Substitution `" + t.text + "` is not set"};
        }

        // expressions: or -> and -> comparison -> additive -> primary
        expr parse_expr() { return parse_or(); }
        expr parse_or() {
            expr l = parse_and();
            while (accept_kw("OR"))
                l = binary("OR", std::move(l), parse_and());
            return l;
        }
        expr parse_and() {
            expr l = parse_cmp();
            while (accept_kw("AND"))
                l = binary("AND", std::move(l), parse_cmp());
            return l;
        }
        static expr binary(std::string op, expr a, expr b) {
            expr e;
            e.kind = expr::binary;
            e.name = std::move(op);
            e.text = a.text + " " + e.name + " " + b.text;
            e.args.push_back(std::move(a));
            e.args.push_back(std::move(b));
            return e;
        }
        expr parse_cmp() {
            expr l = parse_add();
            for (std::string op : {"=", "!=", "<>", "<=", ">=", "<", ">"})
                if (accept_sym(op))
                    return binary(op, std::move(l), parse_add());
            if (accept_kw("LIKE"))
                return binary("LIKE", std::move(l), parse_add());
            if (is_kw("NOT") && is_kw("LIKE", 1)) {
                i += 2;
                return binary("NOT LIKE", std::move(l), parse_add());
            }
            if (accept_kw("IN")) { // x IN (SELECT arrayJoin({param:Array(String)}))
                expect_sym("(");
                expect_kw("SELECT");
                expect_kw("ARRAYJOIN");
                expect_sym("(");
                expr list = parse_expr();
                expect_sym(")");
                expect_sym(")");
                return binary("IN", std::move(l), std::move(list));
            }
            return l;
        }
        expr parse_add() {
            expr l = parse_primary();
            for (;;) {
                if (accept_sym("+"))
                    l = binary("+", std::move(l), parse_primary());
                else if (accept_sym("-"))
                    l = binary("-", std::move(l), parse_primary());
                else
                    return l;
            }
        }
        expr parse_primary() {
            const token& t = peek();
            expr e;
            if (accept_sym("(")) {
                if (accept_kw("SELECT")) { // scalar subquery: evaluated now, as ClickHouse does before the query
                    auto sel = selection_rows();
                    expect_sym(")");
                    e.v = sel.rows.empty() || sel.rows.front().empty() ? value::of_null() : sel.rows.front().front();
                    e.v.quoted64 = false;
                    e.text = "(SELECT …)";
                    return e;
                }
                e = parse_expr();
                expect_sym(")");
                return e;
            }
            if (t.kind == token::string) {
                e.v = value::of_text(t.text);
                e.text = "'" + t.text + "'";
                ++i;
                return e;
            }
            if (t.kind == token::number) {
                e.v = value::of_number(*detail::sim::to_int(t.text));
                e.text = t.text;
                ++i;
                return e;
            }
            if (t.kind == token::param) {
                e.v = bind(t);
                e.text = "{" + t.text + ":" + t.type + "}";
                ++i;
                return e;
            }
            if (t.kind == token::symbol && t.text == "*") {
                ++i;
                e.kind = expr::star;
                e.text = "*";
                return e;
            }
            if (t.kind == token::ident && detail::sim::upper(t.text) == "NULL") {
                ++i;
                e.text = "NULL";
                return e;
            }
            if (t.kind == token::ident && detail::sim::upper(t.text) == "INTERVAL") {
                ++i;
                expr n = parse_primary();
                std::string unit = detail::sim::upper(name());
                std::int64_t mult = unit.starts_with("MILLISECOND") ? 1
                                    : unit.starts_with("SECOND") ? 1000
                                    : unit.starts_with("MINUTE") ? 60000
                                    : unit.starts_with("HOUR")   ? 3600000
                                    : unit.starts_with("DAY")    ? 86400000
                                                                 : (unsupported(), 0);
                e.v = value::of_number(n.v.n * mult);
                e.text = "INTERVAL";
                return e;
            }
            if (t.kind == token::ident || t.kind == token::quoted_ident) {
                std::string n = t.text;
                ++i;
                if (t.kind == token::ident && accept_sym("(")) {
                    e.kind = expr::call;
                    e.name = n;
                    e.text = n + "(";
                    if (!accept_sym(")")) {
                        for (;;) {
                            e.args.push_back(parse_expr());
                            e.text += e.args.back().text;
                            if (accept_sym(")"))
                                break;
                            expect_sym(",");
                            e.text += ", ";
                        }
                    }
                    e.text += ")";
                    return e;
                }
                e.kind = expr::column;
                e.name = n;
                e.text = n;
                return e;
            }
            unsupported();
        }

        void run(std::vector<std::string>& out) {
            if (accept_kw("SELECT"))
                return select(out);
            if (accept_kw("INSERT"))
                return insert();
            if (accept_kw("CREATE"))
                return create();
            if (accept_kw("DELETE")) {
                expect_kw("FROM");
                table& t = s.lookup(table_name());
                expect_kw("WHERE");
                expr cond = parse_expr();
                finish();
                if (t.replicated) {
                    s.eval(cond, t, std::vector<detail::sim::value>(t.columns.size())); // validates columns
                    s.replicated_mutation(t, std::move(cond), true);
                    return;
                }
                s.delete_where(t, cond);
                return;
            }
            if (accept_kw("ALTER")) {
                expect_kw("TABLE");
                table& t = s.lookup(table_name());
                expect_kw("DELETE");
                expect_kw("WHERE");
                expr cond = parse_expr();
                finish();
                s.eval(cond, t, std::vector<detail::sim::value>(t.columns.size())); // validates columns
                if (t.replicated)
                    s.replicated_mutation(t, std::move(cond), false);
                else
                    t.mutations.push_back(std::move(cond));
                return;
            }
            if (accept_kw("OPTIMIZE")) {
                expect_kw("TABLE");
                table& t = s.lookup(table_name());
                accept_kw("FINAL");
                finish();
                s.merge_locked(t, true);
                return;
            }
            if (accept_kw("SYSTEM")) {
                bool stop = accept_kw("STOP");
                if (!stop)
                    expect_kw("START");
                expect_kw("MERGES");
                if (at_end()) {
                    for (auto& [_, t] : s.tables())
                        t.merges_stopped = stop;
                    return;
                }
                table& t = s.lookup(table_name());
                finish();
                t.merges_stopped = stop;
                return;
            }
            if (accept_kw("TRUNCATE")) {
                accept_kw("TABLE");
                table& t = s.lookup(table_name());
                finish();
                t.parts.clear();
                return;
            }
            unsupported();
        }

        std::map<std::string, value> leading_settings() {
            std::map<std::string, value> settings;
            expect_kw("SETTINGS");
            do {
                std::string k = name();
                expect_sym("=");
                settings[k] = parse_primary().v;
            } while (accept_sym(","));
            return settings;
        }

        /// Trailing SETTINGS (returned) / FORMAT; anything else is unsupported.
        std::map<std::string, value> finish(std::string* format = nullptr) {
            std::map<std::string, value> settings;
            for (;;) {
                if (accept_kw("SETTINGS")) {
                    do {
                        std::string k = name();
                        expect_sym("=");
                        settings[k] = parse_primary().v;
                    } while (accept_sym(","));
                } else if (accept_kw("FORMAT")) {
                    std::string f = name();
                    if (format)
                        *format = f;
                } else
                    break;
            }
            accept_sym(";");
            if (!at_end())
                unsupported();
            return settings;
        }

        void create() {
            if (accept_kw("DATABASE")) {
                bool if_not = accept_kw("IF") && (expect_kw("NOT"), expect_kw("EXISTS"), true);
                std::string db = name();
                on_cluster(); // the replicas share the set of databases
                finish();
                if (!s.databases_.insert(db).second && !if_not)
                    throw sim_error{82, "Database " + db + " already exists"};
                return;
            }
            expect_kw("TABLE");
            bool if_not = accept_kw("IF") && (expect_kw("NOT"), expect_kw("EXISTS"), true);
            std::string full = table_name();
            auto dot = full.find('.');
            if (dot == std::string::npos)
                unsupported();
            const bool everywhere = on_cluster();
            table t;
            t.database = full.substr(0, dot);
            t.name = full.substr(dot + 1);
            expect_sym("(");
            for (;;) {
                detail::sim::column_def c;
                c.name = name();
                std::size_t start = peek().pos;
                int depth = 0;
                while (!at_end() && !(depth == 0 && (is_sym(",") || is_sym(")") || is_kw("DEFAULT")))) {
                    if (is_sym("("))
                        ++depth;
                    if (is_sym(")"))
                        --depth;
                    ++i;
                }
                c.type = stmt.sql.substr(start, peek().pos - start);
                while (!c.type.empty() && c.type.back() == ' ')
                    c.type.pop_back();
                if (accept_kw("DEFAULT"))
                    c.default_value = parse_expr();
                t.columns.push_back(std::move(c));
                if (accept_sym(")"))
                    break;
                expect_sym(",");
            }
            expect_kw("ENGINE");
            expect_sym("=");
            std::size_t engine_start = peek().pos;
            t.engine = name();
            // Replicated*MergeTree('zookeeper path', 'replica'[, ver]), cluster mode only:
            // the replicas of a table are its copies in each replica's tables.
            t.replicated = t.engine.starts_with("Replicated");
            if (t.replicated && s.cluster_.empty())
                unsupported();
            if (accept_sym("(")) {
                if (t.replicated) {
                    for (int arg = 0; arg < 2; ++arg) {
                        if (peek().kind != token::string)
                            unsupported();
                        ++i;
                        if (arg == 0 || !is_sym(")"))
                            expect_sym(",");
                    }
                }
                if (!accept_sym(")")) {
                    std::string ver = name();
                    t.version_col = t.find(ver);
                    if (!t.version_col)
                        throw sim_error{47, "Missing column " + ver};
                    expect_sym(")");
                }
            }
            const std::string base = t.replicated ? t.engine.substr(std::string_view("Replicated").size()) : t.engine;
            if (base != "MergeTree" && base != "ReplacingMergeTree")
                unsupported();
            if (t.replicated)
                t.dedup_window = 1000; // replicated_deduplication_window's default (100 before 23.x)
            expect_kw("ORDER");
            expect_kw("BY");
            auto key_col = [&] {
                std::string k = name();
                auto idx = t.find(k);
                if (!idx)
                    throw sim_error{47, "Missing column " + k};
                t.key_cols.push_back(*idx);
            };
            if (accept_sym("(")) {
                if (!accept_sym(")")) {
                    do
                        key_col();
                    while (accept_sym(","));
                    expect_sym(")");
                }
            } else
                key_col();
            if (accept_kw("TTL")) {
                std::string col = name();
                t.ttl_col = t.find(col);
                if (!t.ttl_col)
                    throw sim_error{47, "Missing column " + col};
                expect_sym("+");
                expr iv = parse_primary();
                t.ttl_ms = iv.v.n;
            }
            t.engine_full = stmt.sql.substr(engine_start);
            auto settings = finish();
            if (auto it = settings.find("non_replicated_deduplication_window"); it != settings.end() && !t.replicated)
                t.dedup_window = it->second.n;
            if (auto it = settings.find("replicated_deduplication_window"); it != settings.end() && t.replicated)
                t.dedup_window = it->second.n;
            if (!s.databases_.count(t.database))
                throw sim_error{81, "Database " + t.database + " does not exist"};
            std::string key = t.database + "." + t.name;
            if (s.tables().count(key)) {
                if (if_not)
                    return;
                throw sim_error{57, "Table " + key + " already exists"};
            }
            if (everywhere) // distributed DDL: modelled as done on every replica before the reply
                for (auto& tables : s.replica_tables_)
                    tables.emplace(key, t);
            else
                s.tables().emplace(key, std::move(t));
        }

        void insert() {
            expect_kw("INTO");
            table& t = s.lookup(table_name());
            std::vector<std::size_t> cols;
            if (accept_sym("(")) {
                do {
                    std::string c = name();
                    auto idx = t.find(c);
                    if (!idx)
                        throw sim_error{16, "No such column " + c + " in table " + t.database + "." + t.name};
                    cols.push_back(*idx);
                } while (accept_sym(","));
                expect_sym(")");
            } else {
                for (std::size_t k = 0; k < t.columns.size(); ++k)
                    cols.push_back(k);
            }
            std::vector<std::vector<value>> given;
            std::map<std::string, value> settings;
            if (is_kw("SETTINGS"))
                settings = leading_settings();
            std::vector<detail::sim::value> no_row(t.columns.size());
            if (accept_kw("VALUES")) {
                do {
                    expect_sym("(");
                    std::vector<value> r;
                    do
                        r.push_back(s.eval(parse_expr(), t, no_row));
                    while (accept_sym(","));
                    expect_sym(")");
                    given.push_back(std::move(r));
                } while (accept_sym(","));
                settings.merge(finish());
            } else if (accept_kw("SELECT")) {
                std::vector<value> r;
                do
                    r.push_back(s.eval(parse_expr(), t, no_row));
                while (accept_sym(","));
                bool keep = true; // SELECT … WHERE cond: no row when cond is false
                if (accept_kw("WHERE"))
                    keep = truthy(s.eval(parse_expr(), t, no_row));
                if (keep)
                    given.push_back(std::move(r));
                settings.merge(finish());
            } else if (is_kw("FORMAT") || is_kw("SETTINGS")) {
                std::string format;
                settings.merge(finish(&format));
                if (format == "TabSeparated" || format == "TSV") {
                    read_tsv_rows(stmt.data, cols.size(), given);
                } else if (format != "JSONEachRow") {
                    unsupported();
                }
                std::string_view data = format == "JSONEachRow" ? std::string_view(stmt.data) : std::string_view();
                while (!data.empty()) {
                    auto nl = data.find('\n');
                    std::string_view line = data.substr(0, nl);
                    data.remove_prefix(nl == std::string_view::npos ? data.size() : nl + 1);
                    if (line.empty())
                        continue;
                    boost::system::error_code jec;
                    auto jv = detail::sim::json::parse(line, jec);
                    if (jec || !jv.is_object())
                        throw sim_error{117, "Cannot parse JSONEachRow input: " + std::string(line.substr(0, 100))};
                    std::vector<value> r;
                    for (auto c : cols) {
                        auto* f = jv.as_object().if_contains(t.columns[c].name);
                        if (!f || f->is_null())
                            r.push_back(value::of_null());
                        else if (f->is_string())
                            r.push_back(value::of_text(std::string(f->get_string())));
                        else if (f->is_int64())
                            r.push_back(value::of_number(f->get_int64()));
                        else
                            r.push_back(value::of_text(detail::sim::json::serialize(*f)));
                    }
                    given.push_back(std::move(r));
                }
            } else
                unsupported();
            // An INSERT of no rows (a SELECT whose WHERE is false) makes no
            // block, so it leaves no deduplication token.
            if (auto it = settings.find("insert_deduplication_token");
                it != settings.end() && t.dedup_window > 0 && !given.empty() && !t.replicated) {
                std::string tok = it->second.s;
                std::string bytes;
                for (auto& g : given)
                    for (auto& v : g)
                        bytes += std::to_string(int(v.kind)) + ':' + std::to_string(v.s.size()) + ':' + v.s + ':' +
                                 std::to_string(v.n) + ';';
                if (std::find(t.dedup_log.begin(), t.dedup_log.end(), tok) != t.dedup_log.end()) {
                    // Dropped, reported as success. As chDB 26.5 counts it:
                    // the same bytes again are not written; other bytes are
                    // counted as written, then dropped at the commit.
                    auto same = t.dedup_bytes.find(tok);
                    if (same == t.dedup_bytes.end() || same->second != bytes)
                        written_rows += given.size();
                    return;
                }
                t.remember_token(std::move(tok), std::move(bytes));
            }
            detail::sim::part p;
            for (auto& g : given) {
                if (g.size() != cols.size())
                    throw sim_error{20, "Number of columns doesn't match in: " + stmt.sql};
                detail::sim::row r;
                r.cells.resize(t.columns.size());
                std::vector<bool> set(t.columns.size(), false);
                for (std::size_t k = 0; k < cols.size(); ++k) {
                    r.cells[cols[k]] = coerce(t.columns[cols[k]], std::move(g[k]));
                    set[cols[k]] = true;
                }
                for (std::size_t k = 0; k < t.columns.size(); ++k) {
                    if (set[k])
                        continue;
                    auto& c = t.columns[k];
                    r.cells[k] = c.default_value ? coerce(c, s.eval(*c.default_value, t, no_row))
                                                 : default_of(c.type);
                }
                r.seq = ++s.seq_;
                p.rows.push_back(std::move(r));
            }
            if (t.replicated) {
                std::optional<std::string> token;
                if (auto it = settings.find("insert_deduplication_token"); it != settings.end())
                    token = it->second.s;
                std::uint64_t wait = 0;
                written_rows += s.replicated_insert(t, std::move(p), token, qs, wait);
                if (wait) {
                    wait_table = key_of(t);
                    wait_block = wait;
                    wait_parallel = qs.parallel;
                }
                return;
            }
            written_rows += p.rows.size();
            if (!p.rows.empty())
                t.parts.push_back(std::move(p));
        }

        /// INSERT … FORMAT TabSeparated: `\N` is NULL, escapes as ClickHouse reads them.
        static void read_tsv_rows(std::string_view data, std::size_t ncols, std::vector<std::vector<value>>& given) {
            while (!data.empty()) {
                auto nl = data.find('\n');
                std::string_view line = data.substr(0, nl);
                data.remove_prefix(nl == std::string_view::npos ? data.size() : nl + 1);
                std::vector<value> r;
                std::size_t start = 0;
                for (;;) {
                    auto tab = line.find('\t', start);
                    std::string_view field = line.substr(start, tab == std::string_view::npos ? tab : tab - start);
                    if (field == "\\N") {
                        r.push_back(value::of_null());
                    } else {
                        std::string text;
                        for (std::size_t k = 0; k < field.size(); ++k) {
                            if (field[k] != '\\' || k + 1 == field.size()) {
                                text += field[k];
                                continue;
                            }
                            text += detail::unescaped(field[++k]);
                        }
                        r.push_back(value::of_text(std::move(text)));
                    }
                    if (tab == std::string_view::npos)
                        break;
                    start = tab + 1;
                }
                if (r.size() != ncols)
                    throw sim_error{117, "Cannot parse TabSeparated input: expected " + std::to_string(ncols) +
                                             " fields in: " + std::string(line.substr(0, 100))};
                given.push_back(std::move(r));
            }
        }

        static bool nullable(const std::string& type) { return type.starts_with("Nullable"); }
        static bool is_time(const std::string& type) { return type.find("DateTime") != std::string::npos; }
        static value default_of(const std::string& type) {
            if (nullable(type))
                return value::of_null();
            if (type == "String")
                return value::of_text("");
            return value::of_number(0);
        }
        value coerce(const detail::sim::column_def& c, value v) const {
            if (v.kind == value::null) {
                if (!nullable(c.type))
                    throw sim_error{53, "Cannot insert NULL into non-Nullable column " + c.name};
                return v;
            }
            if (c.type.find("String") != std::string::npos) {
                if (v.kind == value::number)
                    return value::of_text(std::to_string(v.n));
                return v;
            }
            if (v.kind == value::text) {
                if (auto dot = v.s.find('.'); is_time(c.type) && dot != std::string::npos && v.s.size() - dot == 4) {
                    auto secs = detail::sim::to_int(std::string_view(v.s).substr(0, dot));
                    auto ms = detail::sim::to_int(std::string_view(v.s).substr(dot + 1));
                    if (secs && ms && *ms >= 0) // "seconds.mmm", as ClickHouse reads a DateTime64(3)
                        return value::of_number(*secs * 1000 + *ms);
                }
                auto n = detail::sim::to_int(v.s);
                if (!n)
                    throw sim_error{41, "Cannot parse " + c.type + " from '" + v.s + "' (simulated)"};
                return value::of_number(is_time(c.type) ? *n * 1000 : *n);
            }
            v.quoted64 = false;
            if (c.type == "DateTime")
                v.n = v.n / 1000 * 1000;
            return v;
        }

        struct item {
            expr e;
            std::string name;
            enum agg_t { none, count, max, min, any } agg = none;
        };

        /// A SELECT's items, evaluated rows and the table they came from.
        struct selection {
            std::vector<item> items;
            std::vector<std::vector<value>> rows;
            table scratch;             ///< system tables and SELECT without FROM
            const table* src = nullptr; ///< the table read, or null for scratch
            const table& source() const { return src ? *src : scratch; }
        };

        /// Parses and runs `SELECT …` after the keyword, up to (not including)
        /// SETTINGS / FORMAT / end / a closing parenthesis. Aggregates:
        /// count(), max(col), min(col) without GROUP BY (one row, as ClickHouse
        /// returns even for no input).
        selection selection_rows() {
            selection sel;
            bool distinct = accept_kw("DISTINCT");
            auto& items = sel.items;
            do {
                item it;
                if (is_kw("COUNT") && peek(1).kind == token::symbol && peek(1).text == "(") {
                    i += 2;
                    if (!accept_sym(")")) {
                        accept_sym("*");
                        expect_sym(")");
                    }
                    it.agg = item::count;
                    it.e.text = "count()";
                } else {
                    it.e = parse_expr();
                    std::string f = detail::sim::upper(it.e.name);
                    if (it.e.kind == expr::call && (f == "MAX" || f == "MIN" || f == "ANY") && it.e.args.size() == 1) {
                        it.agg = f == "MAX" ? item::max : f == "MIN" ? item::min : item::any;
                        expr arg = it.e.args.front();
                        std::string text = it.e.text;
                        it.e = std::move(arg);
                        it.e.text = std::move(text);
                    }
                }
                it.name = it.e.text;
                if (accept_kw("AS"))
                    it.name = name();
                items.push_back(std::move(it));
            } while (accept_sym(","));

            std::vector<std::vector<value>> rows;
            if (accept_kw("FROM")) {
                std::string tn = table_name();
                if (tn == "system.tables" || tn == "system.columns" || tn == "system.mutations" ||
                    tn == "system.clusters" || tn == "system.settings") {
                    system_table(tn, sel.scratch, rows);
                } else {
                    const table& t = s.lookup(tn);
                    sel.src = &t;
                    bool final_ = accept_kw("FINAL");
                    std::vector<detail::sim::row> all = s.visible_rows(t, qs.sequential);
                    if (final_)
                        all = collapse(t, std::move(all));
                    for (auto& r : all)
                        rows.push_back(std::move(r.cells));
                }
            } else {
                rows.emplace_back(); // one row, no columns
            }
            const table* src = &sel.source();
            if (accept_kw("WHERE")) {
                expr cond = parse_expr();
                std::erase_if(rows, [&](const std::vector<value>& r) { return !truthy(s.eval(cond, *src, r)); });
            }
            std::vector<std::pair<expr, bool>> order;
            if (accept_kw("ORDER")) {
                expect_kw("BY");
                do {
                    expr e = parse_expr();
                    bool desc = accept_kw("DESC");
                    if (!desc)
                        accept_kw("ASC");
                    order.emplace_back(std::move(e), desc);
                } while (accept_sym(","));
            }
            std::optional<std::int64_t> limit;
            if (accept_kw("LIMIT")) {
                auto& t = peek();
                if (t.kind != token::number)
                    unsupported();
                limit = *detail::sim::to_int(t.text);
                ++i;
            }
            if (!order.empty()) {
                std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
                    for (auto& [e, desc] : order) {
                        auto c = detail::sim::compare(s.eval(e, *src, a), s.eval(e, *src, b));
                        int ci = c ? *c : 0;
                        if (ci != 0)
                            return desc ? ci > 0 : ci < 0;
                    }
                    return false;
                });
            }
            auto& result = sel.rows;
            bool aggregate = std::any_of(items.begin(), items.end(), [](const item& it) { return it.agg != item::none; });
            // Evaluate every item up front, so invalid expressions fail even on an empty table.
            std::vector<value> probe(src->columns.size());
            for (auto& it : items)
                if (it.agg != item::count)
                    s.eval(it.e, *src, rows.empty() ? probe : rows.front());
            if (aggregate) {
                std::vector<value> r;
                for (auto& it : items) {
                    if (it.agg == item::none)
                        unsupported(); // no GROUP BY in the model
                    if (it.agg == item::count) {
                        value v = value::of_number(static_cast<std::int64_t>(rows.size()));
                        v.quoted64 = true;
                        r.push_back(v);
                        continue;
                    }
                    std::optional<value> best;
                    for (auto& row : rows) {
                        value v = s.eval(it.e, *src, row);
                        auto c = best ? detail::sim::compare(v, *best) : std::optional<int>(1);
                        if (it.agg == item::any) {
                            if (!best)
                                best = std::move(v);
                            continue;
                        }
                        if (!best || (c && (it.agg == item::max ? *c > 0 : *c < 0)))
                            best = std::move(v);
                    }
                    if (!best) { // no rows: the type's default (0, the epoch, '')
                        best = value::of_number(0);
                        if (it.e.kind == expr::column)
                            if (auto idx = src->find(it.e.name); idx && src->columns[*idx].type.find("String") != std::string::npos)
                                best = value::of_text("");
                    }
                    r.push_back(*best);
                }
                result.push_back(std::move(r));
            } else {
                std::set<std::vector<std::string>> seen;
                for (auto& row : rows) {
                    std::vector<value> r;
                    for (auto& it : items)
                        r.push_back(s.eval(it.e, *src, row));
                    if (distinct) {
                        std::vector<std::string> key;
                        for (auto& v : r)
                            key.push_back(std::to_string(v.kind) + ":" + v.s + ":" + std::to_string(v.n));
                        if (!seen.insert(key).second)
                            continue;
                    }
                    result.push_back(std::move(r));
                }
            }
            if (limit && static_cast<std::int64_t>(result.size()) > *limit)
                result.resize(static_cast<std::size_t>(*limit));
            return sel;
        }

        void select(std::vector<std::string>& out) {
            selection sel = selection_rows();
            const table* src = &sel.source();
            auto& items = sel.items;
            auto& result = sel.rows;
            std::string format = stmt.format;
            auto settings = finish(&format);
            if (format.empty())
                format = "TabSeparated";
            if (format != "TabSeparated" && format != "JSONEachRow" && format != "TSV" && format != "RowBinary")
                unsupported();
            std::size_t block = 1000;
            if (auto it = settings.find("max_block_size"); it != settings.end() && it->second.n > 0)
                block = static_cast<std::size_t>(it->second.n);

            // Output types: a bare column (or max/min of one) of a time type is formatted as a time.
            std::vector<std::string> types;
            for (auto& it : items) {
                std::string ty;
                if (it.e.kind == expr::column && it.agg != item::count)
                    if (auto idx = src->find(it.e.name))
                        ty = src->columns[*idx].type;
                if (it.e.kind == expr::call && detail::sim::upper(it.e.name).starts_with("TODATETIME"))
                    ty = "DateTime";
                types.push_back(ty);
            }
            std::string chunk;
            std::size_t in_chunk = 0;
            for (auto& r : result) {
                if (format == "RowBinary") {
                    for (std::size_t k = 0; k < r.size(); ++k)
                        row_binary_value(chunk, r[k], types[k]);
                } else if (format == "JSONEachRow") {
                    chunk += '{';
                    for (std::size_t k = 0; k < r.size(); ++k) {
                        if (k)
                            chunk += ',';
                        chunk += detail::sim::json::serialize(detail::sim::json::string(items[k].name));
                        chunk += ':';
                        chunk += json_value(r[k], types[k]);
                    }
                    chunk += "}\n";
                } else {
                    for (std::size_t k = 0; k < r.size(); ++k) {
                        if (k)
                            chunk += '\t';
                        chunk += tsv_value(r[k], types[k]);
                    }
                    chunk += '\n';
                }
                if (++in_chunk == block) {
                    out.push_back(std::move(chunk));
                    chunk.clear();
                    in_chunk = 0;
                }
            }
            if (!chunk.empty())
                out.push_back(std::move(chunk));
        }

        static std::string text_of(const value& v, const std::string& type) {
            if (v.kind == value::text)
                return v.s;
            if (type == "DateTime")
                return detail::sim::format_time(v.n, false);
            if (type.starts_with("DateTime64"))
                return detail::sim::format_time(v.n, true);
            return std::to_string(v.n);
        }
        /// RowBinary: Nullable columns get a flag byte; text is a LEB128
        /// length and the bytes; numbers (times in milliseconds, as a
        /// DateTime64(3)) eight bytes little-endian.
        static void row_binary_value(std::string& out, const value& v, const std::string& type) {
            if (nullable(type)) {
                out += v.kind == value::null ? '\1' : '\0';
                if (v.kind == value::null)
                    return;
            }
            if (v.kind == value::number) {
                auto n = static_cast<std::uint64_t>(v.n);
                for (int b = 0; b < 8; ++b)
                    out += static_cast<char>((n >> (8 * b)) & 0xff);
                return;
            }
            std::size_t len = v.s.size();
            do {
                unsigned char byte = len & 0x7f;
                len >>= 7;
                out += static_cast<char>(len ? byte | 0x80 : byte);
            } while (len);
            out += v.s;
        }

        static std::string json_value(const value& v, const std::string& type) {
            if (v.kind == value::null)
                return "null";
            if (v.kind == value::number && !v.quoted64 && !is_time(type))
                return std::to_string(v.n);
            return detail::sim::json::serialize(detail::sim::json::string(text_of(v, type)));
        }
        static std::string tsv_value(const value& v, const std::string& type) {
            if (v.kind == value::null)
                return "\\N";
            std::string out;
            for (char c : text_of(v, type)) {
                switch (c) {
                case '\\': out += "\\\\"; break;
                case '\t': out += "\\t"; break;
                case '\n': out += "\\n"; break;
                default: out += c;
                }
            }
            return out;
        }

        void system_table(const std::string& tn, table& scratch, std::vector<std::vector<value>>& rows) {
            auto col = [&](std::string n, std::string ty) { scratch.columns.push_back({std::move(n), std::move(ty), {}}); };
            if (tn == "system.clusters") { // cluster mode: one shard, a replica per row
                col("cluster", "String");
                col("shard_num", "UInt32");
                col("replica_num", "UInt32");
                col("host_name", "String");
                col("is_local", "UInt8");
                if (!s.cluster_.empty())
                    for (std::size_t k = 0; k < s.replica_tables_.size(); ++k)
                        rows.push_back({value::of_text(s.cluster_), value::of_number(1),
                                        value::of_number(static_cast<std::int64_t>(k + 1)),
                                        value::of_text("replica" + std::to_string(k + 1)),
                                        value::of_number(k == s.cur_ ? 1 : 0)});
            } else if (tn == "system.settings") { // cluster mode: the one setting the store asks about
                col("name", "String");
                col("value", "String");
                if (!s.cluster_.empty())
                    rows.push_back({value::of_text("insert_quorum_parallel"),
                                    value::of_text(s.quorum_parallel_default_ ? "1" : "0")});
            } else if (tn == "system.mutations") {
                col("database", "String");
                col("table", "String");
                col("is_done", "UInt8");
                for (auto& [key, t] : s.tables()) {
                    for (std::size_t k = 0; k < t.mutations.size(); ++k)
                        rows.push_back({value::of_text(t.database), value::of_text(t.name), value::of_number(0)});
                    if (auto z = s.zk_.find(key); t.replicated && z != s.zk_.end()) // done: applied on this replica
                        for (std::size_t k = 0; k < z->second.mutations.size(); ++k)
                            rows.push_back({value::of_text(t.database), value::of_text(t.name),
                                            value::of_number(k < t.mutations_done ? 1 : 0)});
                }
            } else if (tn == "system.tables") {
                col("database", "String");
                col("name", "String");
                col("engine", "String");
                col("engine_full", "String");
                for (auto& [_, t] : s.tables())
                    rows.push_back({value::of_text(t.database), value::of_text(t.name), value::of_text(t.engine),
                                    value::of_text(t.engine_full)});
            } else {
                col("database", "String");
                col("table", "String");
                col("name", "String");
                col("type", "String");
                col("position", "UInt64");
                for (auto& [_, t] : s.tables())
                    for (std::size_t k = 0; k < t.columns.size(); ++k)
                        rows.push_back({value::of_text(t.database), value::of_text(t.name),
                                        value::of_text(t.columns[k].name), value::of_text(t.columns[k].type),
                                        value::of_number(static_cast<std::int64_t>(k + 1))});
            }
        }
    };

    mutable std::mutex mutex_;
    manual_clock clock_;
    bool manual_ = false;
    std::string version_ = "25.3.1.1";
    mutable std::mutex array_cache_mutex_;
    mutable std::map<std::string, std::vector<std::string>> array_cache_;
    std::set<std::string> databases_{"default", "system"};
    /// One map of tables per replica (one server: one replica); cur_ is the
    /// replica the statement under execution was sent to.
    std::vector<std::map<std::string, table>> replica_tables_ = std::vector<std::map<std::string, table>>(1);
    std::size_t cur_ = 0;
    std::map<std::string, table>& tables() { return replica_tables_[cur_]; }
    const std::map<std::string, table>& tables() const { return replica_tables_[cur_]; }
    std::uint64_t seq_ = 0;
    std::vector<request> queue_;

    // ---- cluster mode (create_cluster) ------------------------------------
    std::string cluster_;           ///< the cluster's name; empty: one server
    bool quorum_parallel_default_ = true;
    std::map<std::string, shared_table> zk_;
    std::uint64_t block_seq_ = 0;
    std::vector<replication_task> tasks_;
    /// Quorum INSERTs executed and not yet acknowledged.
    struct waiter {
        request r;
        std::string table;
        std::uint64_t block = 0;
        bool parallel = false;
        std::int64_t deadline_ms = 0; ///< server clock: when insert_quorum_timeout has passed
    };
    std::vector<waiter> waiters_;
    std::vector<request> ready_; ///< quorum INSERTs acknowledged, to complete outside the lock
};

/// A client connection to a simulated_clickhouse; cheap to copy. `client`
/// identifies it in simulated_clickhouse::pending().
class simulated_transport {
public:
    /// `replica`: in cluster mode (simulated_clickhouse::create_cluster) the
    /// replica this client is connected to.
    simulated_transport(std::shared_ptr<simulated_clickhouse> server, asio::any_io_executor ex, std::size_t client = 0,
                        std::size_t replica = 0)
        : server_(std::move(server)), ex_(std::move(ex)), client_(client), replica_(replica) {}

    asio::any_io_executor get_executor() const { return ex_; }
    const std::shared_ptr<simulated_clickhouse>& server() const noexcept { return server_; }
    std::size_t client() const noexcept { return client_; }
    std::size_t replica() const noexcept { return replica_; }

    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [server = server_, ex = ex_, client = client_, replica = replica_](auto handler, const statement* stmt,
                                                                               result_sink sink, diagnostics* diag) {
                server->submit(client, *stmt, std::move(sink), *diag, std::move(handler), ex, replica);
            },
            token, &stmt, std::move(sink), &diag);
    }

private:
    std::shared_ptr<simulated_clickhouse> server_;
    asio::any_io_executor ex_;
    std::size_t client_ = 0;
    std::size_t replica_ = 0;
};

static_assert(transport<simulated_transport>);

} // namespace chstate
