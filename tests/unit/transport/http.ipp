// Tests of include/chstate/transport/http.hpp against servers no ClickHouse
// is: bounded replies, hostile replies, lost replies.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

// ---- hostile servers: each distinct behaviour is one case of test::hostile() --------
//
// Every case in this section (the bounded-reply cases above included) is one
// hostile-server behaviour: it counts one case, and a failure when any check
// made inside it failed (a listener counts failed doctest assertions).

namespace {

std::atomic<long> failed_assertions{0};

/// Counts failed assertions, so a scope can tell whether a check inside it failed.
struct failed_assertion_counter : doctest::IReporter {
    explicit failed_assertion_counter(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override { ++failed_assertions; }
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData& ad) override {
        if (ad.m_failed)
            ++failed_assertions;
    }
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("chstate-failed-assertions", 1, failed_assertion_counter);

/// One hostile-server case: counted now, a failure if an assertion failed
/// (or an exception escaped) before the end of its scope.
class hostile_server_case {
public:
    hostile_server_case() { ++test::hostile().cases; }
    hostile_server_case(const hostile_server_case&) = delete;
    hostile_server_case& operator=(const hostile_server_case&) = delete;
    ~hostile_server_case() {
        if (failed_assertions.load() != before_ || std::uncaught_exceptions() > uncaught_)
            ++test::hostile().failures;
    }

private:
    long before_ = failed_assertions.load();
    int uncaught_ = std::uncaught_exceptions();
};

} // namespace

// ---- bounded replies: a hostile server cannot grow the client ----------------

namespace {

/// A loopback server that answers like ClickHouse 18.16 until a request's
/// text holds `trigger`, and answers that one with its script: each step's
/// bytes, then the step's pause; then `endless` repeated until the client
/// hangs up (when not empty); then it closes the connection, or with `hold`
/// keeps it open, silent, until the server is destroyed.
class scripted_server {
public:
    struct step {
        std::string bytes;
        std::chrono::milliseconds pause{0};
    };
    struct script {
        std::vector<step> steps;
        std::string endless;
        bool hold = false;
        bool reset = false; ///< close with an RST (SO_LINGER 0) instead of a FIN
    };

    scripted_server(std::string trigger, script s) : trigger_(std::move(trigger)), script_(std::move(s)) {
        acceptor_.open(asio::ip::tcp::v4());
        acceptor_.bind({loopback, 0});
        acceptor_.listen(16);
        port_ = acceptor_.local_endpoint().port();
        thread_ = std::thread([this] { serve(); });
    }
    ~scripted_server() {
        stop_ = true;
        error_code ignored;
        asio::ip::tcp::socket poke(io_);
        poke.connect({loopback, port_}, ignored); // unblocks accept()
        poke.close(ignored);
        thread_.join();
    }
    std::uint16_t port() const { return port_; }
    int triggered() const { return triggered_; }
    /// The last request that held the trigger, as received.
    std::string scripted_request() const {
        std::lock_guard lock(mutex_);
        return scripted_request_;
    }

private:
    void serve() {
        while (!stop_) {
            asio::ip::tcp::socket s(io_);
            error_code ec;
            acceptor_.accept(s, ec);
            if (ec || stop_)
                return;
            std::string in;
            std::array<char, 65536> buf;
            for (;;) {
                auto head_end = in.find("\r\n\r\n");
                if (head_end != std::string::npos) {
                    std::string lower = in.substr(0, head_end);
                    std::transform(lower.begin(), lower.end(), lower.begin(),
                                   [](unsigned char c) { return std::tolower(c); });
                    std::size_t length = 0;
                    if (auto at = lower.find("\r\ncontent-length: "); at != std::string::npos)
                        length = std::stoul(lower.substr(at + 18));
                    if (in.size() >= head_end + 4 + length)
                        break;
                }
                std::size_t n = s.read_some(asio::buffer(buf), ec);
                if (ec)
                    break;
                in.append(buf.data(), n);
            }
            if (ec)
                continue;
            if (in.find(trigger_) == std::string::npos) {
                const std::string plain = in.find("version()") != std::string::npos ? "18.16.1\n" : "";
                std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(plain.size()) +
                                    "\r\nConnection: close\r\n\r\n" + plain;
                asio::write(s, asio::buffer(reply), ec);
                continue;
            }
            {
                std::lock_guard lock(mutex_);
                scripted_request_ = in;
            }
            ++triggered_;
            for (const auto& st : script_.steps) {
                if (!st.bytes.empty())
                    asio::write(s, asio::buffer(st.bytes), ec);
                if (st.pause.count())
                    sleep_unless_stopped(st.pause);
                if (ec || stop_)
                    break;
            }
            if (!script_.endless.empty()) {
                std::string block;
                while (block.size() < (1 << 16))
                    block += script_.endless;
                while (!ec && !stop_)
                    asio::write(s, asio::buffer(block), ec);
            }
            if (script_.hold)
                sleep_unless_stopped(std::chrono::hours(1));
            if (script_.reset) {
                s.set_option(asio::socket_base::linger(true, 0), ec);
                s.close(ec);
            }
        }
    }
    void sleep_unless_stopped(std::chrono::milliseconds d) {
        const auto until = std::chrono::steady_clock::now() + d;
        while (!stop_ && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }

    std::string trigger_;
    script script_;
    asio::io_context io_;
    asio::ip::tcp::acceptor acceptor_{io_};
    std::uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> triggered_{0};
    mutable std::mutex mutex_;
    std::string scripted_request_;
    std::thread thread_;
};

/// A server that answers the request holding `trigger` with status 200, a
/// 10 GB Content-Length, `head_of_body`, then `pattern` repeated until the
/// client hangs up.
scripted_server endless_server(std::string trigger, const std::string& head_of_body, std::string pattern) {
    return scripted_server(
        std::move(trigger),
        {{{"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\nConnection: close\r\n\r\n" + head_of_body, {}}},
         std::move(pattern),
         false,
         false});
}

using chstate::test::peak_rss; // (tests/support.hpp)
using chstate::test::reset_peak_rss;

using chstate::test::peak_rss_bound;
using chstate::test::sanitized_build;

struct hostile_outcome {
    error_code ec;
    std::string message;
    std::size_t rss_growth = 0;
    double seconds = 0;
};

/// Runs `op` on a store over HTTP to `server`, limits as given.
template <class Op>
hostile_outcome against(scripted_server& server, reply_limits limits, Op op) {
    asio::thread_pool threads(1);
    http_options h;
    h.host = "127.0.0.1";
    h.port = server.port();
    h.request_timeout = std::chrono::seconds(60);
    store_options o;
    o.limits = limits;
    basic_state_store<http_transport> store(http_transport(threads.get_executor(), h), o);
    hostile_outcome out;
    reset_peak_rss();
    const std::size_t before = peak_rss();
    const auto t0 = std::chrono::steady_clock::now();
    try {
        op(store);
    } catch (const chstate::error& e) {
        out.ec = e.code();
        out.message = e.what();
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::size_t after = peak_rss();
    out.rss_growth = after > before ? after - before : 0;
    return out;
}

} // namespace

TEST_CASE("limits: endless ids from a hostile server stop at max_operation_bytes, memory bounded") {
    hostile_server_case hc;
    // Rows of RowBinary: varint length, then the id — forever. 8 bytes fit
    // std::string's own buffer, 24 do not: the bound counts what the listing
    // holds (heap blocks, the vector's slots as it grows), not wire bytes,
    // which let 24-byte ids peak at 1.75 times the bound.
    for (const std::string id : {"id-bytes", "a-24-byte-id-0123456789x"}) {
        CAPTURE(id.size());
        scripted_server server = endless_server("RowBinary", "", std::string(1, char(id.size())) + id);
        reply_limits limits;
        limits.max_operation_bytes = 16 << 20;
        auto r = against(server, limits, [](auto& store) { store.state_ids("*"); });
        INFO(r.message);
        CHECK(r.ec == errc::reply_too_large);
        CHECK(contains(r.message, "max_operation_bytes"));
        CHECK(r.rss_growth < peak_rss_bound);
        // The bound itself, plus 8 MiB for the transport's buffers and the
        // allocator's own (a sanitizer's heap keeps freed blocks: not there).
        if (!sanitized_build)
            CHECK(r.rss_growth < limits.max_operation_bytes + (std::size_t(8) << 20));
        // (reply_too_large, not timeout: it stopped at the byte bound, not at the 60 s request timeout)
        MESSAGE("endless " << id.size() << "-byte ids: stopped after " << r.seconds << " s, peak RSS +"
                           << (r.rss_growth >> 20) << " MiB");
    }
}

TEST_CASE("limits: endless lock rows to update() stop at max_operation_bytes, memory bounded") {
    hostile_server_case hc;
    // The seed lock's holder read (JSONEachRow, a bookkeeping reply of one
    // row) answered with small rows forever. Each parsed row holds several
    // times its text (an object's table, its key): the bound counts that,
    // not the wire bytes, which let such replies hold 431-625 MiB under a
    // 256 MiB bound.
    scripted_server server = endless_server("ORDER BY lock_id LIMIT 1", "", "{\"lock_id\":\"a\"}\n");
    reply_limits limits;
    limits.max_operation_bytes = 16 << 20;
    auto r = against(server, limits, [](auto& store) { store.update(state{"job", {}, json::object{{"n", 1}}}); });
    INFO(r.message);
    CHECK(server.triggered() > 0);
    CHECK(r.ec == errc::reply_too_large);
    CHECK(contains(r.message, "max_operation_bytes"));
    CHECK(r.rss_growth < peak_rss_bound);
    if (!sanitized_build)
        CHECK(r.rss_growth < limits.max_operation_bytes + (std::size_t(8) << 20));
    MESSAGE("endless lock rows: stopped after " << r.seconds << " s, peak RSS +" << (r.rss_growth >> 20) << " MiB");
}

TEST_CASE("limits: a row declaring 10 GB fails at once, before its bytes are read (default limits)") {
    hostile_server_case hc;
    // The partial state, a Nullable(String), declaring 10^10 bytes.
    std::string head = std::string("\x00", 1);
    std::uint64_t n = 10'000'000'000ull;
    while (n >= 0x80) {
        head += char((n & 0x7f) | 0x80);
        n >>= 7;
    }
    head += char(n);
    scripted_server server = endless_server("RowBinary", head, "x");
    auto r = against(server, reply_limits{}, [](auto& store) { store.get("x"); });
    INFO(r.message);
    CHECK(r.ec == errc::reply_too_large);
    CHECK(contains(r.message, "10000000000 bytes"));
    CHECK(contains(r.message, "max_row_bytes"));
    CHECK(r.rss_growth < peak_rss_bound);
}

TEST_CASE("limits: endless rows to get are refused at the second row; to get_all, memory stays flat until the timeout") {
    // (partial NULL, completed "{}") as RowBinary, forever.
    const std::string row = std::string("\x01\x00\x02{}", 5);
    {
        hostile_server_case hc; // endless rows to get
        scripted_server server = endless_server("RowBinary", "", row);
        auto r = against(server, reply_limits{}, [](auto& store) { store.get("x"); });
        INFO(r.message);
        CHECK(r.ec == errc::protocol_error);
        CHECK(contains(r.message, "more than one row"));
    }
    // get_all streams: the rows reach the visitor one by one, nothing piles
    // up, and the request timeout ends the stream.
    hostile_server_case hc; // endless rows to get_all
    const std::string id_row = std::string("\x01x", 2) + row;
    scripted_server server = endless_server("RowBinary", "", id_row);
    asio::thread_pool threads(1);
    http_options h;
    h.host = "127.0.0.1";
    h.port = server.port();
    h.request_timeout = std::chrono::seconds(3);
    basic_state_store<http_transport> store(http_transport(threads.get_executor(), h));
    std::uint64_t seen = 0;
    reset_peak_rss();
    const std::size_t before = peak_rss();
    error_code ec;
    try {
        store.get_all([&](state&&) { ++seen; });
    } catch (const chstate::error& e) {
        ec = e.code();
    }
    CHECK(ec == errc::timeout);
    CHECK(seen > 1000);
    // Clamped: the kernel keeps the high-water mark lazily, so when the
    // resident set grew between the reset and the first read and shrank
    // again, VmHWM can read below `before` (an unsigned wrap failed a CI run).
    const std::size_t after = peak_rss();
    const std::size_t growth = after > before ? after - before : 0;
    CHECK(growth < peak_rss_bound);
    MESSAGE("get_all of an endless reply: " << seen << " states visited in 3 s, peak RSS +" << (growth >> 20)
                                            << " MiB");
}

TEST_CASE("limits: a bookkeeping reply with no newline stops at max_row_bytes") {
    hostile_server_case hc;
    // clear_all counts the states (a JSONEachRow reply): one endless line.
    scripted_server server = endless_server("JSONEachRow", "{\"n\":\"", "0123456789");
    reply_limits limits;
    limits.max_row_bytes = 4 << 20;
    auto r = against(server, limits, [](auto& store) { store.clear_all(); });
    INFO(r.message);
    CHECK(r.ec == errc::reply_too_large);
    CHECK(contains(r.message, "max_row_bytes"));
    CHECK(r.rss_growth < peak_rss_bound);
}

TEST_CASE("limits: a version() reply that never ends is refused") {
    hostile_server_case hc;
    scripted_server server = endless_server("version()", "18.16.1", "0");
    auto r = against(server, reply_limits{}, [](auto& store) { store.get("x"); });
    CHECK(r.ec == errc::protocol_error);
    CHECK(contains(r.message, "version()"));
}

// ---- hostile servers: replies no ClickHouse sends ------------------------------

namespace {

struct scripted_outcome {
    error_code ec;
    std::string message;
    bool returned = false; ///< the operation completed with a result
    std::size_t rss_growth = 0;
    double seconds = 0;
};

/// state_ids("*") (a RowBinary reply) on a store over HTTP to `server`, or
/// with `count`, clear_all() (its count() is a JSONEachRow reply, streamed
/// without wait_end_of_query); request_timeout 1 s.
scripted_outcome state_ids_from(scripted_server& server, bool count = false) {
    asio::thread_pool threads(1);
    http_options h;
    h.host = "127.0.0.1";
    h.port = server.port();
    h.request_timeout = std::chrono::seconds(1);
    basic_state_store<http_transport> store(http_transport(threads.get_executor(), h));
    scripted_outcome out;
    reset_peak_rss();
    const std::size_t before = peak_rss();
    const auto t0 = std::chrono::steady_clock::now();
    try {
        if (count) {
            out.message = "returned " + std::to_string(store.clear_all()) + " states cleared";
        } else {
            auto ids = store.state_ids("*");
            out.message = "returned " + std::to_string(ids.size()) + " ids";
        }
        out.returned = true;
    } catch (const chstate::error& e) {
        out.ec = e.code();
        out.message = e.what();
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::size_t after = peak_rss();
    out.rss_growth = after > before ? after - before : 0;
    return out;
}

/// A RowBinary reply of one id, "id-1", as ClickHouse sends it.
const std::string one_id_row = std::string("\x04", 1) + "id-1";

struct scripted_case {
    const char* name;
    scripted_server::script script;
    std::vector<errc> expected; ///< any of these
    bool count = false;         ///< clear_all() (JSONEachRow) instead of state_ids() (RowBinary)
};

std::string head(std::string status_line, std::string headers) {
    return status_line + "\r\n" + headers + "\r\n";
}

std::vector<scripted_case> scripted_cases() {
    using ms = std::chrono::milliseconds;
    const std::string ok_close = "Connection: close\r\n";
    auto once = [](std::string bytes) { return scripted_server::script{{{std::move(bytes), ms(0)}}, {}, false, false}; };
    std::vector<scripted_case> v;
    v.push_back({"absurd Content-Length (10 GB), 5 bytes, then close",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 10000000000\r\n" + ok_close) + one_id_row),
                 {errc::truncated_response, errc::connection_failed}});
    v.push_back({"Content-Length: -1", once(head("HTTP/1.1 200 OK", "Content-Length: -1\r\n" + ok_close) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"Content-Length beyond 64 bits",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 99999999999999999999999\r\n" + ok_close) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"two different Content-Lengths",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 5\r\nContent-Length: 3\r\n" + ok_close) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"Content-Length 100, 5 bytes, then close (closing mid-body)",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 100\r\n" + ok_close) + one_id_row),
                 {errc::truncated_response, errc::connection_failed}});
    v.push_back({"Content-Length 100, 5 bytes, then a reset",
                 {{{head("HTTP/1.1 200 OK", "Content-Length: 100\r\n" + ok_close) + one_id_row, ms(50)}}, {}, false, true},
                 {errc::truncated_response, errc::connection_failed}});
    v.push_back({"chunked: a chunk size that is not hex",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) + "zz\r\n" + one_id_row +
                      "\r\n0\r\n\r\n"),
                 {errc::protocol_error, errc::truncated_response}});
    v.push_back({"chunked: a chunk size beyond 64 bits",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) +
                      "fffffffffffffffffffff\r\n" + one_id_row),
                 {errc::protocol_error, errc::truncated_response}});
    v.push_back({"chunked: closed before the last chunk",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) + "5\r\n" + one_id_row +
                      "\r\n"),
                 {errc::truncated_response, errc::connection_failed}});
    v.push_back({"chunked: a chunk longer than its size (no CRLF where one must be)",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) + "2\r\n" + one_id_row +
                      "\r\n0\r\n\r\n"),
                 {errc::protocol_error, errc::truncated_response}});
    v.push_back({"chunked: an endless chunk extension (framing that is never data)",
                 {{{head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) + "5;x=", ms(0)}},
                  "aaaaaaaa",
                  false,
                  false},
                 {errc::protocol_error}});
    v.push_back({"chunked and Content-Length together",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n" + ok_close) + "5\r\n" +
                      one_id_row + "\r\n0\r\n\r\n"),
                 {errc::protocol_error}});
    v.push_back({"an unknown Transfer-Encoding (gzip) on a body that is not gzip",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: gzip\r\n" + ok_close) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"never answers (the request timeout ends it)", {{}, {}, true, false}, {errc::timeout}});
    v.push_back({"stalls mid-body, connection open",
                 {{{head("HTTP/1.1 200 OK", "Content-Length: 100\r\n" + ok_close) + one_id_row, ms(0)}}, {}, true, false},
                 {errc::timeout}});
    v.push_back({"stalls mid-header, connection open", {{{"HTTP/1.1 200 OK\r\nContent-Le", ms(0)}}, {}, true, false},
                 {errc::timeout}});
    v.push_back({"closes without a byte", {{}, {}, false, false}, {errc::connection_failed}});
    v.push_back({"resets without a byte", {{}, {}, false, true}, {errc::connection_failed}});
    const std::string page = "<html><body><h1>Code: 503. Try later</h1>\r\n<p>DB::Exception</p></body></html>\n";
    v.push_back({"HTML error page (503, text/html)",
                 once(head("HTTP/1.1 503 Service Unavailable", "Content-Type: text/html\r\nContent-Length: " +
                                                                   std::to_string(page.size()) + "\r\n" + ok_close) +
                      page),
                 {errc::server_error}});
    v.push_back({"status 200 with a Content-Encoding the client did not ask for (gzip)",
                 once(head("HTTP/1.1 200 OK", "Content-Encoding: gzip\r\nContent-Length: 5\r\n" + ok_close) +
                      one_id_row),
                 {errc::protocol_error}});
    v.push_back({"redirect (302 with Location) is not followed",
                 once(head("HTTP/1.1 302 Found", "Location: http://evil.example/\r\nContent-Length: 0\r\n" + ok_close)),
                 {errc::server_error}});
    // RowBinary replies ask for wait_end_of_query (a 200 is final): an
    // exception after 200 is looked for in streamed replies, clear_all's count.
    const std::string count_row = "{\"n\":\"7\"}\n";
    const std::string old_text = "Code: 241, e.displayText() = DB::Exception: Memory limit exceeded\n";
    v.push_back({"exception after status 200 (the old text)",
                 once(head("HTTP/1.1 200 OK", ok_close) + count_row + old_text),
                 {errc::server_error},
                 true});
    v.push_back({"exception after status 200 (the __exception__ block)",
                 once(head("HTTP/1.1 200 OK", ok_close) + count_row +
                      "__exception__\r\nCode: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_EXCEEDED)\n"
                      "70 __exception__\n"),
                 {errc::server_error, errc::truncated_response},
                 true});
    {
        auto hex_size = [](const std::string& chunk) {
            char size[24];
            std::snprintf(size, sizeof size, "%zx", chunk.size());
            return std::string(size);
        };
        const std::string size = hex_size(old_text);
        v.push_back({"exception after status 200, chunked, in a later chunk",
                     once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) +
                          hex_size(count_row) + "\r\n" + count_row + "\r\n" + size + "\r\n" + old_text +
                          "\r\n0\r\n\r\n"),
                     {errc::server_error},
                     true});
    }
    v.push_back({"exception after status 200 on a RowBinary reply (wait_end_of_query ignored)",
                 once(head("HTTP/1.1 200 OK", ok_close) + one_id_row + "\n" + old_text),
                 {errc::server_error, errc::truncated_response, errc::protocol_error}});
    v.push_back({"no status line (an HTTP/0.9 body)", once(one_id_row + "\n"), {errc::protocol_error}});
    v.push_back({"garbage status line", once("HTTP/1.1 2OO OK\r\nContent-Length: 5\r\n\r\n" + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"status line of another protocol", once("SSH-2.0-OpenSSH_9.6\r\n"), {errc::protocol_error}});
    v.push_back({"a TLS alert to a plain request", once(std::string("\x15\x03\x01\x00\x02\x02\x46", 7)),
                 {errc::protocol_error}});
    v.push_back({"HTTP/9.9", once("HTTP/9.9 200 OK\r\nContent-Length: 5\r\n\r\n" + one_id_row), {errc::protocol_error}});
    v.push_back({"status 999", once("HTTP/1.1 999 Odd\r\nContent-Length: 5\r\n\r\n" + one_id_row),
                 {errc::protocol_error, errc::server_error}});
    v.push_back({"a header line without a colon",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 5\r\nX-ClickHouse-Exception-Code 60\r\n") + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"a bare CR inside a header value",
                 once(head("HTTP/1.1 200 OK", "X-Note: a\rX-ClickHouse-Exception-Code: 60\r\nContent-Length: 5\r\n") +
                      one_id_row),
                 {errc::protocol_error}});
    v.push_back({"a NUL inside a header value",
                 once(head("HTTP/1.1 200 OK", std::string("X-Note: a\0b\r\nContent-Length: 5\r\n", 31)) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"a space before a header's colon",
                 once(head("HTTP/1.1 200 OK", "Content-Length : 5\r\n") + one_id_row), {errc::protocol_error}});
    v.push_back({"an endless header line", {{{"HTTP/1.1 200 OK\r\nX-Long: ", ms(0)}}, "aaaaaaaa", false, false},
                 {errc::protocol_error, errc::reply_too_large}});
    v.push_back({"endless header lines", {{{"HTTP/1.1 200 OK\r\n", ms(0)}}, "X-A: b\r\n", false, false},
                 {errc::protocol_error, errc::reply_too_large}});
    v.push_back({"100 Continue, then close", once("HTTP/1.1 100 Continue\r\n\r\n"),
                 {errc::connection_failed, errc::truncated_response, errc::protocol_error, errc::server_error}});
    v.push_back({"endless 100 Continue replies", {{}, "HTTP/1.1 100 Continue\r\n\r\n", false, false},
                 {errc::protocol_error, errc::timeout, errc::reply_too_large, errc::server_error}});
    v.push_back({"a 500 with an exception code header and a gigabyte of body",
                 {{{head("HTTP/1.1 500 Internal Server Error",
                         "X-ClickHouse-Exception-Code: 241\r\nContent-Length: 1000000000\r\n" + ok_close),
                    ms(0)}},
                  "Code: 241. DB::Exception: ",
                  false,
                  false},
                 {errc::server_error, errc::reply_too_large, errc::timeout}});
    return v;
}

} // namespace

TEST_CASE("hostile servers: every reply no ClickHouse sends is a typed error: never data, never a hang, memory "
          "bounded") {
    for (const auto& sc : scripted_cases()) {
        hostile_server_case hc;
        CAPTURE(std::string(sc.name));
        scripted_server server(sc.count ? "JSONEachRow" : "RowBinary", sc.script);
        auto r = state_ids_from(server, sc.count);
        INFO(r.message);
        MESSAGE(std::string(sc.name) << " -> " << (r.ec ? r.ec.message() : std::string("success")) << " in " << r.seconds
                        << " s: " << r.message.substr(0, 200));
        CHECK_FALSE(r.returned);
        CHECK(std::any_of(sc.expected.begin(), sc.expected.end(), [&](errc e) { return r.ec == e; }));
        CHECK(server.triggered() >= 1);
        CHECK(r.seconds < 10);
        CHECK(r.rss_growth < peak_rss_bound);
        CHECK(r.message.size() < 2100); // the server's text is cut at 2000 bytes (trim_message), then the code is named
        // No control character but the line breaks and tabs of ClickHouse's own exception text (kept whole).
        CHECK(std::none_of(r.message.begin(), r.message.end(), [](char ch) {
            const auto b = static_cast<unsigned char>(ch);
            return (b < 0x20 && b != '\n' && b != '\r' && b != '\t') || b == 0x7f;
        }));
    }
}

TEST_CASE("http: a reply that arrives a few bytes at a time is read whole") {
    // Beast before 1.86 asserts when the last chunk's "0\r\n" and the next
    // byte arrive in separate reads (detail/body_feeder.hpp): this aborted
    // the sanitizer build (assertions on) before the transport fed the
    // parser itself.
    using ms = std::chrono::milliseconds;
    const ms gap(60); // longer than a delayed ACK, so each piece is a read of its own
    const std::string chunked = head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\nConnection: close\r\n");
    struct piecewise {
        const char* name;
        std::vector<std::string> pieces;
        std::size_t ids;
    };
    const std::vector<piecewise> cases = {
        {"empty body: 0\\r\\n, \\r, \\n", {chunked + "0\r\n", "\r", "\n"}, 0},
        {"empty body: 0, \\r\\n\\r, \\n", {chunked + "0", "\r\n\r", "\n"}, 0},
        {"one row, then the last chunk byte by byte",
         {chunked + "5\r\n" + one_id_row + "\r\n", "0", "\r", "\n", "\r", "\n"},
         1},
        {"one row, its CRLF and the last chunk split",
         {chunked + "5\r\n" + one_id_row, "\r", "\n0\r\n", "\r", "\n"},
         1},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        scripted_server::script script;
        for (const auto& piece : c.pieces)
            script.steps.push_back({piece, gap});
        scripted_server server("RowBinary", script);
        auto r = state_ids_from(server);
        INFO(r.message);
        CHECK(r.returned);
        CHECK(r.message == "returned " + std::to_string(c.ids) + " ids");
        CHECK(server.triggered() == 1);
    }
}

TEST_CASE("http: values of at most 16 KiB travel as quoted literals in the statement, larger ones as an external "
          "table") {
    const std::string empty_reply = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    auto request_for = [&](const std::string& id) {
        scripted_server server("RowBinary", {{{empty_reply, {}}}, {}, false, false});
        asio::thread_pool threads(1);
        http_options h;
        h.host = "127.0.0.1";
        h.port = server.port();
        basic_state_store<http_transport> store(http_transport(threads.get_executor(), h));
        CHECK_FALSE(store.get(id).has_value());
        REQUIRE(server.triggered() == 1);
        return server.scripted_request();
    };
    // Every byte the quoting escapes, a quote and a byte that is not UTF-8.
    const std::string small = std::string("dev:'\\\n\t\r\0\b\f\xff x", 15);
    const std::string request = request_for(small);
    CHECK(contains(request, detail::quote_string(small)));
    CHECK_FALSE(contains(request, "multipart/form-data"));
    CHECK_FALSE(contains(request, "_chstate_values"));
    CHECK_FALSE(contains(request, "{state_id:String}"));

    const std::string large(detail::inline_parameter_limit + 1, 'x');
    const std::string large_request = request_for(large);
    CHECK(contains(large_request, "multipart/form-data"));
    CHECK(contains(large_request, "_chstate_values"));
    CHECK_FALSE(contains(large_request, "'" + large + "'"));
}

// ---- outcome_unknown: a write whose reply was lost may have landed ----------

namespace {
/// Runs `stmt` against a one-connection server that reads the request and
/// then closes without a word (or never answers, `silent`).
http_outcome run_lost_reply(statement stmt, bool silent) {
    asio::io_context server_io;
    asio::ip::tcp::acceptor acceptor(server_io, {loopback, 0});
    const auto port = acceptor.local_endpoint().port();
    std::thread server([&] {
        asio::ip::tcp::socket s(server_io);
        error_code ec;
        acceptor.accept(s, ec);
        std::array<char, 65536> buf;
        std::string in;
        while (!ec && in.find("\r\n\r\n") == std::string::npos)
            in.append(buf.data(), s.read_some(asio::buffer(buf), ec));
        if (silent)
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        s.close(ec);
    });
    asio::io_context io;
    http_options o;
    o.host = "127.0.0.1";
    o.port = port;
    o.request_timeout = std::chrono::milliseconds(500);
    http_transport t(io.get_executor(), o);
    http_outcome out;
    diagnostics d;
    t.async_execute(stmt, [](std::string_view) { return error_code{}; }, d, [&](error_code ec) { out.ec = ec; });
    io.run();
    server.join();
    out.message = d.message;
    return out;
}
} // namespace

TEST_CASE("http: a write sent and then cut off is outcome_unknown; a read stays a connection failure") {
    for (bool silent : {false, true}) {
        CAPTURE(silent);
        auto insert = run_lost_reply({"INSERT INTO t (a) VALUES (1)", {}, {}, {}, false}, silent);
        CHECK(insert.ec == errc::outcome_unknown);
        CHECK(contains(insert.message, "may have landed"));
        auto mutation = run_lost_reply({"ALTER TABLE t DELETE WHERE 1", {}, {}, {}, true}, silent);
        CHECK(mutation.ec == errc::outcome_unknown);
        auto read = run_lost_reply({"SELECT 1", {}, "TabSeparated", {}, true}, silent);
        CHECK(read.ec == (silent ? make_error_code(errc::timeout) : make_error_code(errc::connection_failed)));
        CHECK_FALSE(contains(read.message, "may have landed"));
    }
    CHECK(writes_data({" insert into t values (1)", {}, {}, {}, false}));
    CHECK(writes_data({"TRUNCATE TABLE t", {}, {}, {}, false}));
    CHECK(writes_data({"DELETE FROM t WHERE 1", {}, {}, {}, false}));
    CHECK_FALSE(writes_data({"SELECT 'INSERT'", {}, {}, {}, false}));
    CHECK_FALSE(writes_data({"INSERTS", {}, {}, {}, false}));
    CHECK_FALSE(writes_data({"CREATE TABLE t (a Int8) ENGINE = Memory", {}, {}, {}, false}));
}
