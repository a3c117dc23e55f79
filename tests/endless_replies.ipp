// hostile-input: every statement an operation sends, answered without end
// (issue 28: "endless replies for every statement shape").
//
// A proxy on loopback stands between an HTTP store and the real server
// (statement_proxy below): it passes every request through, except the k-th
// after it is armed, which it answers in one of the hostile forms — a 10 GB
// body of one byte repeated, an endless chunked body, an endless header line,
// endless header lines, endless `100 Continue`s, a 500 whose message never
// ends — until the client hangs up. For each operation kind, k runs from 1
// until the operation finishes without reaching a k-th statement, so every
// statement every operation sends (prepare's probes on a new store
// included) meets every form; no list of statement shapes to keep up to date.
// Each case must end in a typed chstate::error (or, where the statement was a
// clean-up whose failure the operation reports nowhere, in success), with
// memory bounded, and then the store must answer the next call and the state
// must be what it was or what the operation writes — never anything else.
// Included by server.cpp, inside the `server` suite beside
// hostile_input_cases.ipp (whose hcase and engine_scope it uses); each case counts in
// test::hostile() (the run's `hostile-input: cases=N failures=0`).

// (<netinet/in.h>, <poll.h> and <sys/socket.h> are included by server.cpp.)

namespace endless_replies {

using namespace chstate;
using namespace server_tests;
using namespace std::chrono_literals;
using http_store = basic_state_store<http_transport>;

/// One way of answering without end: `head`, then `endless` repeated.
struct form {
    const char* name;
    std::string head;
    std::string endless;
};

inline const std::vector<form>& forms() {
    static const std::vector<form> f = [] {
        const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n";
        std::vector<form> v;
        v.push_back({"a 10 GB body of zero bytes", ok, std::string(1, '\0')});
        v.push_back({"a 10 GB body of 0xff bytes (a varint that never ends)", ok, std::string(1, '\xff')});
        v.push_back({"a 10 GB body of newlines", ok, "\n"});
        v.push_back({"a 10 GB body of one line that never ends", ok, "a"});
        v.push_back({"a 10 GB body of tab-separated rows", ok, "x\t1\n"});
        v.push_back({"an endless chunked body", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                     "4000\r\n" + std::string(0x4000, 'b') + "\r\n"});
        v.push_back({"an endless header line", "HTTP/1.1 200 OK\r\nX-Endless: ", "a"});
        v.push_back({"endless header lines", "HTTP/1.1 200 OK\r\n", "X-A: b\r\n"});
        v.push_back({"endless 100 Continue replies", "", "HTTP/1.1 100 Continue\r\n\r\n"});
        v.push_back({"a 500 whose message never ends",
                     "HTTP/1.1 500 Internal Server Error\r\nX-ClickHouse-Exception-Code: 1\r\nContent-Length: "
                     "10000000000\r\n\r\nCode: 1. DB::Exception: ",
                     "x"});
        return v;
    }();
    return f;
}

/// A loopback proxy to the real server: each request goes on to it on a
/// connection of its own (`Connection: close`) and its whole reply comes
/// back, after which the client's connection is closed too (the store
/// opens another). After arm(k, f), the k-th request is answered with `f`
/// instead, without end, until the client hangs up. One thread, one
/// connection at a time (a second waits in the backlog), plain POSIX
/// sockets with timeouts so nothing here can hang the suite.
class statement_proxy {
public:
    statement_proxy(std::string upstream_host, std::uint16_t upstream_port)
        : upstream_host_(std::move(upstream_host)), upstream_port_(upstream_port) {
        listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(listener_ >= 0);
        int one = 1;
        ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = 0;
        REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(listener_, 16) == 0);
        socklen_t len = sizeof a;
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~statement_proxy() {
        stop_ = true;
        thread_.join();
        ::close(listener_);
    }
    statement_proxy(const statement_proxy&) = delete;
    statement_proxy& operator=(const statement_proxy&) = delete;

    std::uint16_t port() const { return port_; }
    /// The k-th request from now (1: the next) gets `f`.
    void arm(int k, const form& f) {
        std::lock_guard lock(mutex_);
        target_ = requests_ + k;
        form_ = &f;
        fired_ = false;
        seen_.clear();
    }
    void disarm() {
        std::lock_guard lock(mutex_);
        target_ = -1;
        form_ = nullptr;
    }
    bool fired() const {
        std::lock_guard lock(mutex_);
        return fired_;
    }
    /// The first line of the request that was answered without end.
    std::string fired_request() const {
        std::lock_guard lock(mutex_);
        return fired_request_;
    }
    /// Each request since arm(), a line apiece: its statement's start.
    std::string seen() const {
        std::lock_guard lock(mutex_);
        std::string out;
        for (const auto& r : seen_)
            out += "\n    " + r;
        return out;
    }

private:
    static bool wait_for(int fd, short events, int ms) {
        pollfd p{fd, events, 0};
        return ::poll(&p, 1, ms) > 0;
    }
    /// A whole request (head and Content-Length body), or empty.
    std::string read_request(int fd) {
        std::string in;
        char buf[65536];
        for (;;) {
            if (auto head_end = in.find("\r\n\r\n"); head_end != std::string::npos) {
                std::string lower = in.substr(0, head_end);
                std::transform(lower.begin(), lower.end(), lower.begin(),
                               [](unsigned char c) { return std::tolower(c); });
                std::size_t length = 0;
                if (auto at = lower.find("\r\ncontent-length: "); at != std::string::npos)
                    length = std::stoul(lower.substr(at + 18));
                if (in.size() >= head_end + 4 + length)
                    return in;
            }
            if (stop_ || !wait_for(fd, POLLIN, 30'000))
                return {};
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0)
                return {};
            in.append(buf, static_cast<std::size_t>(n));
        }
    }
    static bool send_all(int fd, std::string_view bytes) {
        while (!bytes.empty()) {
            if (!wait_for(fd, POLLOUT, 30'000))
                return false;
            const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n <= 0)
                return false;
            bytes.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }
    /// A request's statement, for a message: its body's start, or (a
    /// statement sent in the URL) the request line's.
    static std::string statement_start(const std::string& request) {
        const auto head_end = request.find("\r\n\r\n");
        std::string body = head_end == std::string::npos ? std::string() : request.substr(head_end + 4, 100);
        std::string text = body.empty() ? request.substr(0, std::min<std::size_t>(request.find("\r\n"), 100)) : body;
        for (auto& ch : text)
            if (static_cast<unsigned char>(ch) < 0x20)
                ch = ' ';
        return text;
    }
    /// The request with its Connection headers replaced by `Connection: close`.
    static std::string closing(const std::string& request) {
        const auto head_end = request.find("\r\n\r\n");
        std::string out;
        std::size_t at = 0;
        while (at < head_end) {
            auto eol = request.find("\r\n", at);
            std::string line = request.substr(at, eol - at);
            std::string lower = line;
            std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
            if (!lower.starts_with("connection:"))
                out += line + "\r\n";
            at = eol + 2;
        }
        out += "Connection: close\r\n\r\n";
        out += request.substr(head_end + 4);
        return out;
    }
    void pass_through(int client, const std::string& request) {
        const int up = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(upstream_port_);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && send_all(up, closing(request))) {
            char buf[65536];
            while (!stop_ && wait_for(up, POLLIN, 30'000)) {
                const ssize_t n = ::recv(up, buf, sizeof buf, 0);
                if (n <= 0 || !send_all(client, std::string_view(buf, static_cast<std::size_t>(n))))
                    break;
            }
        }
        ::close(up);
    }
    void answer_without_end(int client, const form& f) {
        std::string block;
        while (block.size() < (1 << 16))
            block += f.endless;
        if (!send_all(client, f.head))
            return;
        while (!stop_ && send_all(client, block)) {
        }
    }
    void serve() {
        while (!stop_) {
            if (!wait_for(listener_, POLLIN, 50))
                continue;
            const int client = ::accept(listener_, nullptr, nullptr);
            if (client < 0)
                continue;
            std::string request = read_request(client);
            if (!request.empty()) {
                const form* f = nullptr;
                {
                    std::lock_guard lock(mutex_);
                    if (seen_.size() < 64)
                        seen_.push_back(statement_start(request));
                    if (++requests_ == target_ && form_) {
                        f = form_;
                        fired_ = true;
                        fired_request_ = request.substr(0, request.find("\r\n"));
                    }
                }
                if (f)
                    answer_without_end(client, *f);
                else
                    pass_through(client, request);
            }
            ::close(client);
        }
    }

    std::string upstream_host_;
    std::uint16_t upstream_port_;
    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    mutable std::mutex mutex_;
    long requests_ = 0;
    long target_ = -1;
    const form* form_ = nullptr;
    bool fired_ = false;
    std::string fired_request_;
    std::vector<std::string> seen_;
    std::thread thread_;
};

using chstate::test::peak_rss; // (tests/support.hpp)
using chstate::test::reset_peak_rss;

inline json::object value_of(long v) { return json::object{{"v", v}}; }
inline std::optional<long> v_of(const std::optional<state>& s) {
    if (!s)
        return std::nullopt;
    for (const auto* o : {&s->completed_state, &s->partial_state})
        if (const auto* v = o->if_contains("v"); v && v->is_int64())
            return v->as_int64();
    return -1; // a state without `v`: neither before nor after of any operation here
}

/// One operation kind: what it does to `id` (whose state is {v: 1} before),
/// and the values `id` may hold after it, whether it failed or not
/// (nullopt: no state).
template <class Store>
struct operation {
    const char* name;
    std::function<void(Store&, const std::string&)> run;
    std::vector<std::optional<long>> may_leave;
};

template <class Store>
std::vector<operation<Store>> operations() {
    using http_store = Store;
    const std::vector<std::optional<long>> unchanged{1}, written{1, 2}, deleted{1, std::nullopt};
    std::vector<operation<Store>> v;
    v.push_back({"get", [](http_store& s, const std::string& id) { (void)s.get(id); }, unchanged});
    v.push_back({"state_ids", [](http_store& s, const std::string& id) { (void)s.state_ids(id + "*"); }, unchanged});
    v.push_back({"get_all", [](http_store& s, const std::string&) { (void)s.get_all([](state&&) {}); }, unchanged});
    v.push_back({"set", [](http_store& s, const std::string& id) { s.set(state{id, value_of(2), {}}); }, written});
    v.push_back({"set_all",
                 [](http_store& s, const std::string& id) {
                     s.set_all({state{id, value_of(2), {}}, state{id + "-b", value_of(2), {}}});
                 },
                 written});
    v.push_back({"update", [](http_store& s, const std::string& id) { (void)s.update(state{id, {}, value_of(2)}); },
                 written});
    v.push_back({"delete_state", [](http_store& s, const std::string& id) { s.delete_state(id); }, deleted});
    v.push_back({"clear", [](http_store& s, const std::string& id) { s.clear(id); }, deleted});
    v.push_back({"copy", [](http_store& s, const std::string& id) { s.copy(id, id + "-copy"); }, unchanged});
    v.push_back({"move", [](http_store& s, const std::string& id) { s.move(id, id + "-moved"); }, deleted});
    v.push_back({"merge", [](http_store& s, const std::string& id) { s.merge(id + "-src", id); }, written});
    v.push_back({"acquire_lock and release",
                 [](http_store& s, const std::string& id) {
                     auto lease = s.acquire_lock(id);
                     lease.release();
                 },
                 unchanged});
    v.push_back({"set under a lease",
                 [](http_store& s, const std::string& id) {
                     auto lease = s.acquire_lock(id);
                     s.set(lease, state{id, value_of(2), {}});
                     lease.release();
                 },
                 written});
    v.push_back({"clear_all", [](http_store& s, const std::string&) { (void)s.clear_all(); }, deleted});
    return v;
}

/// The codes a statement answered without end may end an operation with.
inline bool expected_code(const error_code& ec) {
    return ec == errc::reply_too_large || ec == errc::protocol_error || ec == errc::truncated_response ||
           ec == errc::outcome_unknown || ec == errc::server_error || ec == errc::timeout;
}

/// The whole series on stores `make(port, request_timeout)` makes (of type Store
/// whose server is the proxy at `port`): every statement of a new store's
/// first operation, then every statement of each operation on a ready one,
/// each in a few of the forms, taking turns (every form is used). Prints
/// one line and checks its own counts.
template <class Store, class Make>
void run_series(const char* label, const std::vector<form>& forms, Make make) {
    const auto& e = env();
    statement_proxy proxy(e.host, e.port);
    std::map<std::string, int> codes; // how the cases ended
    std::set<std::string> forms_fired;
    int cases = 0, fired_total = 0, absorbed = 0;
    double worst_rss_mib = 0;
    const auto start = std::chrono::steady_clock::now();
    // Each statement is answered in a few forms, the forms taking turns
    // across statements and operations, so every form meets the reading
    // code and every statement meets several forms: the plain build 4 per
    // statement (every one of the 11 for each statement took 240–330 s a
    // store, the run's longest process; how an operation handles a failed
    // statement does not depend on which form failed it, nor the form's
    // reading on which statement it answers), a sanitized build (where one
    // 64 MiB capped read takes the better part of a second) 1.
    const std::size_t forms_per_statement = std::min<std::size_t>(test::sanitized_build ? 1 : 4, forms.size());
    const long per_form = static_cast<long>(forms_per_statement);
    std::size_t turn = 0; // whose turn it is
    // Each input is a case of test::hostile(); at least this many must run.
    hostile_input::engine_scope scope(label, 50 * per_form);
    auto one_case = [&](Store& store, const operation<Store>& op, const form& f, int k, const std::string& id,
                        bool cold) -> bool {
        bool fired = false;
        hostile_input::run_case(
            std::string(op.name) + ", statement " + std::to_string(k) + (cold ? " of a new store" : "") + ": " + f.name,
            [&](hostile_input::hcase& c) {
                error_code ec;
                std::string what;
                reset_peak_rss();
                const std::size_t before = peak_rss();
                proxy.arm(k, f);
                try {
                    op.run(store, id);
                } catch (const chstate::error& err) {
                    ec = err.code();
                    what = err.what();
                }
                proxy.disarm();
                fired = proxy.fired();
                const std::size_t after = peak_rss();
                const double growth_mib = after > before ? double(after - before) / (1 << 20) : 0;
                worst_rss_mib = std::max(worst_rss_mib, growth_mib);
                if (!fired) {
                    c.check(!ec, "not reached, yet failed: " + what);
                    return;
                }
                ++fired_total;
                forms_fired.insert(f.name);
                codes[ec ? ec.message().substr(0, 40) : "success (a clean-up's reply)"]++;
                if (!ec)
                    ++absorbed;
                c.check(!ec || expected_code(ec),
                        "ended with " + ec.message() + ": " + what + " (the request: " + proxy.fired_request() + ")");
                c.check(what.size() < 4096, "a message of " + std::to_string(what.size()) + " bytes");
                c.check(growth_mib < double(chstate::test::peak_rss_bound >> 20),
                        "peak RSS grew " + std::to_string(growth_mib) + " MiB");
                // The store answers the next call, and the state is what it
                // was or what the operation writes.
                std::optional<state> now;
                std::string next_error;
                try {
                    now = store.get(id);
                } catch (const chstate::error& err) {
                    next_error = err.what();
                }
                if (c.check(next_error.empty(), "the next get failed: " + next_error)) {
                    const auto v = v_of(now);
                    c.check(std::find(op.may_leave.begin(), op.may_leave.end(), v) != op.may_leave.end(),
                            "left " + (v ? std::to_string(*v) : std::string("no state")));
                }
            });
        ++cases;
        return fired;
    };
    const auto ops = operations<Store>();
    // Prepare's statements: the first operation on a new store, each time.
    for (int k = 1, reached = 1; k <= 12 && reached; ++k) {
        for (std::size_t j = 0; j < forms_per_statement && reached; ++j) {
            const auto& f = forms[turn++ % forms.size()];
            const std::string id = "cold";
            auto seed = make(e.port, 30s); // straight to the server
            seed->set(state{id, value_of(1), {}});
            auto store = make(proxy.port(), 30s);
            reached = one_case(*store, ops[0], f, k, id, true); // no: every statement was reached
        }
    }
    // Each operation on a store that is ready: each of its statements.
    // get_all streams whatever rows come: only the request timeout ends an
    // endless stream of well-formed ones, so its store has a short one; the
    // others a long one, a bound on failures only (real statements on a busy
    // machine take seconds).
    int n = 0;
    auto store = make(proxy.port(), 30s);
    auto streaming = make(proxy.port(), 5s);
    store->ensure_schema();
    std::map<std::string, int> most_statements; // each operation's most, reached
    for (const auto& op : ops) {
        auto& on = std::string(op.name) == "get_all" ? streaming : store;
        // (the bound only stops a loop: an operation's statements are not a
        // fixed count — a lock round retried, orphaned grants given back
        // first — but they are a bounded one)
        constexpr int max_statements = 40;
        for (int k = 1, reached = 1; k <= max_statements && reached; ++k) {
            for (std::size_t j = 0; j < forms_per_statement && reached; ++j) {
                const auto& f = forms[turn++ % forms.size()];
                const std::string id = "e" + std::to_string(++n);
                store->set(state{id, value_of(1), {}});
                if (std::string(op.name) == "merge")
                    store->set(state{id + "-src", {}, value_of(2)});
                reached = one_case(*on, op, f, k, id, false);
                if (!reached)
                    break;
                most_statements[op.name] = std::max(most_statements[op.name], k);
                CHECK_MESSAGE(k < max_statements, std::string(op.name) << ": " << max_statements
                                                                     << " statements or more, answered in "
                                                                     << std::string(f.name) << "; they were:"
                                                                     << proxy.seen());
            }
        }
    }
    std::ostringstream summary;
    for (const auto& [code, count] : codes)
        summary << " " << code << "=" << count;
    summary << "; statements reached:";
    for (const auto& [name, count] : most_statements)
        summary << " " << name << "=" << count;
    MESSAGE(std::string(label) << ": " << cases << " cases, " << fired_total << " statements answered without end (" << absorbed
                  << " absorbed by a clean-up), in "
                  << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                  << " s; worst peak RSS growth " << worst_rss_mib << " MiB; endings:" << summary.str());
    CHECK(fired_total >= 30 * static_cast<int>(per_form));
    CHECK(forms_fired.size() == forms.size()); // every form had its turn
}

/// The series' settings: small bounds (an endless reply reaches them in
/// milliseconds), quick lock waits.
inline store_options series_store_options(const std::string& schema) {
    store_options so;
    so.schema = schema;
    so.limits.max_row_bytes = 1 << 20;
    so.limits.max_operation_bytes = 4 << 20;
    // (settle 20 ms: the statements are under test, not the waits; the
    // timeout, 20 s, only bounds a failure: a busy machine once took over
    // 3 s for one acquisition's real statements)
    so.lock = test::fast_locks();
    return so;
}

} // namespace endless_replies

TEST_CASE("hostile-input: every statement of every operation answered without end, in every form: HTTP store") {
    using namespace endless_replies;
    using namespace server_tests;
    require_server();
    const std::string schema = test::unique_schema("endless");
    run_series<http_store>("endless replies (http_transport)", forms(), [&](std::uint16_t port, auto timeout) {
        auto o = server_options();
        o.port = port;
        o.request_timeout = timeout;
        return std::make_unique<http_store>(http_transport(threads().get_executor(), o), series_store_options(schema));
    });
}

TEST_CASE("hostile-input: every statement of every operation answered without end, in every form: chstate::open") {
    using namespace endless_replies;
    using namespace server_tests;
    require_server();
    const std::string schema = test::unique_schema("endless_open");
    run_series<state_store>("endless replies (open)", forms(), [&](std::uint16_t port, auto timeout) {
        const auto& e = env();
        config c = config::from_uri("clickhouse://" + uri_encode(e.user) + ":" + uri_encode(e.password) + "@" +
                                    e.host + ":" + std::to_string(e.port) + "/default?schema=" + schema);
        c.port = port;
        c.endpoints.clear();
        c.request_timeout = timeout;
        c.store = series_store_options(schema);
        return chstate::open_unique(c);
    });
}
