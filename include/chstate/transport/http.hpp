// chstate/transport/http.hpp — ClickHouse's HTTP interface over Boost.Beast.
//
//   asio::thread_pool threads(2);
//   chstate::http_transport http(threads.get_executor(),
//                                {.host = "127.0.0.1", .port = 8123, .user = "u", .password = "p"});
//   chstate::basic_state_store<chstate::http_transport> store(http);
//
// Each statement is one `POST /` (HTTP/1.1). No value travels in the URL,
// and none larger than 16 KiB in SQL text, so neither a state nor an id
// meets a limit on the query's or the URL's size, on any server version:
//   * no parameters, no data: the body is the statement text;
//   * stmt.data (INSERT … FORMAT …): the statement in the URL's `query`
//     parameter, the body is the data;
//   * parameters whose values total at most 16 KiB
//     (detail::inline_parameter_limit): the body is the statement with
//     each {name:Type} placeholder replaced by its quoted literal
//     (detail::inline_parameters: strings through quote_string, integers
//     checked), far below any server's max_query_size (256 KiB). This is
//     what the cheapest client sends, and it spares the server an external
//     table per request;
//   * larger parameters: the statement in `query`, the body
//     multipart/form-data carrying one external table, `_chstate_values`,
//     whose one TabSeparated row holds every value; each {name:Type}
//     placeholder is replaced by `(SELECT name FROM _chstate_values)`
//     (detail::bind_parameters_as_table). External tables exist on every
//     version, 18.16 included, so one form serves all servers.
// Other URL parameters: `database`, `default_format` (= stmt.format), and
// `wait_end_of_query=1` for RowBinary replies (raw ids and state text:
// the status must be final, see below) or when
// http_options::wait_end_of_query is set.
// Authentication is exactly one method: the X-ClickHouse-User /
// X-ClickHouse-Key headers.
//
// Connections. A bounded pool (http_options::pool_size) of kept-alive
// connections is shared by every copy of a transport and by concurrent
// operations; an operation waits for a free slot when all are busy. A
// connection is not reused once it has been idle for longer than the
// server's `Keep-Alive: timeout=N` minus idle_close_margin, nor when the
// peer has already closed it; the request is built before a connection is
// taken, so that check is not stale by the time a large body goes out. A
// request that fails on a reused connection before any response byte
// arrived is retried once on a fresh connection, only when stmt.idempotent; one the server answers with 400 and no
// ClickHouse exception (its HTTP layer could not parse it: no query ran) is
// sent again once on a fresh connection, whatever the statement.
//
// Failover (several endpoints: http_options::endpoints, from a URI naming
// several hosts). A statement goes to the current endpoint (the one the
// last statement connected to; the first at the start). When it cannot
// connect there — resolve failure, refused, unreachable, the connect
// timeout, a failed TLS handshake — it moves to the next endpoint, in
// order and wrapping around, at most once per endpoint per statement; the
// next endpoint becomes the current one for every later statement. When
// the connection fails under a statement (a write or read error: the
// server died or dropped it), it moves on only if the statement never
// reached the wire or is stmt.idempotent, and no reply data was passed to
// the sink yet; otherwise the error stands (a write whose request was sent
// stays errc::outcome_unknown: never silently sent to a second server).
// A request timeout, a cancellation and every answer of a server (an
// exception, an HTTP error status) never fail over. When every endpoint
// failed to connect: errc::connection_failed (errc::timeout if each one
// timed out), diag naming every endpoint and why. Idle kept-alive
// connections are kept per endpoint (a slot holding one to another endpoint
// is freed when needed). http_transport::current_endpoint() and failovers()
// show which endpoint serves and how often statements moved. A server that
// hangs (a request timeout) is not left: set request_timeout accordingly.
//
// Replies stream into the sink in chunks of at most 64 KiB; only a tail of
// up to 16 KiB is held back until the body is complete, because an old
// server (before 24.11) reports an exception that happens after status 200
// by appending "Code: N, e.displayText() = DB::Exception: …" (or, 25.1+,
// a `__exception__` block) to the data. Such a body completes with the
// ClickHouse code (or errc::truncated_response), as does a chunked body
// that ends early: never as data.
//
// Errors: a non-200 status → make_clickhouse_error(code) from
// X-ClickHouse-Exception-Code or a body that is ClickHouse's exception
// ("Code: N … DB::Exception …", or Coordination::Exception), its text in diag; any other body (a proxy's
// or another server's error page) is not searched for a code and reaches
// diag only as the status and an excerpt of at most 300 bytes, control
// characters replaced (detail::read_error_reply); no route / refused / reset
// → errc::connection_failed; a connect or request timeout → errc::timeout.
// The password never appears in diag.
//
// Options that cannot be sent — a host, user or password (header values)
// or a database holding a control character (0x00–0x1F, 0x7F), an empty
// host, port 0 — fail the operation with errc::invalid_configuration before
// any connection is opened (detail::validate_http_options). The Host header
// writes an IPv6 host in brackets ("[::1]:8123").
//
// Cancellation: the handler's cancellation slot (any type) closes the
// operation's connection and completes with asio::error::operation_aborted.
//
// TLS (secure = true): Boost.Asio SSL over OpenSSL, peer and host-name
// verification on; the CAs trusted are ca_file's (a PEM bundle) if given,
// else only the system's default paths (which OpenSSL lets SSL_CERT_FILE /
// SSL_CERT_DIR replace). The name
// checked is the endpoint's host (http_options::host for the first), by OpenSSL's own check during the
// handshake: a DNS name against the certificate's DNS names, an IP address
// (sent without SNI) against its IP addresses only. A certificate that does
// not verify fails the handshake before any request byte is sent:
// errc::connection_failed, diag "TLS handshake with H:P failed: certificate
// verification failed: <OpenSSL's reason>" (e.g. "unable to get local issuer
// certificate", "hostname mismatch", "IP address mismatch"). Tested against
// the 18.16 server's HTTPS port and a throwaway CA (tests/server.cpp).
// OpenSSL keeps some state per thread that ran a TLS operation, freed when
// the thread exits while OpenSSL is still initialised: join the threads that
// run http_transport before the program's exit handlers run OpenSSL's
// cleanup (or call OPENSSL_thread_stop() on them), or a leak checker reports
// that state. Define CHSTATE_NO_TLS to build without OpenSSL (secure = true
// then fails with errc::unsupported). With BOOST_ASIO_SEPARATE_COMPILATION
// one translation unit must include <boost/asio/ssl/impl/src.hpp>.
#pragma once

#include <chstate/detail/body_feeder.hpp>
#include <chstate/detail/server_error.hpp>
#include <chstate/detail/sql.hpp>
#include <chstate/clock.hpp>
#include <chstate/config.hpp>
#include <chstate/error.hpp>
#include <chstate/transport.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#ifndef CHSTATE_NO_TLS
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#endif

#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace chstate {

/// Settings of an http_transport.
struct http_options {
    std::string host = "localhost";
    std::uint16_t port = 8123;
    /// `database` URL parameter; empty: the user's default database.
    std::string database;
    std::string user = "default";
    std::string password;
    /// HTTPS with certificate and host-name verification.
    bool secure = false;
    /// CA bundle (PEM) trusted by secure connections, instead of the
    /// system's default paths; empty: those default paths.
    std::string ca_file;
    /// Connections open at once (in use or idle), shared by all operations.
    std::size_t pool_size = 4;
    /// Resolve + connect (+ TLS handshake) limit.
    std::chrono::milliseconds connect_timeout{10'000};
    /// Limit for sending a request and reading its whole reply, including
    /// any wait for a free pool slot.
    std::chrono::milliseconds request_timeout{300'000};
    /// An idle connection is not reused once idle for keep-alive − margin.
    std::chrono::milliseconds idle_close_margin{1'000};
    /// Keep-alive assumed when the server does not advertise one.
    std::chrono::milliseconds default_keep_alive{3'000};
    /// Send wait_end_of_query=1 (the server buffers the reply; its status
    /// is then trustworthy). Accepted by 18.16 and later.
    bool wait_end_of_query = false;
    /// Every endpoint of the store in order, for failover (see the header
    /// comment): endpoints[0] is host:port, and host and port win over it
    /// when they differ. Empty: host:port alone. make_http_options fills it
    /// from config::endpoints.
    std::vector<endpoint> endpoints;
};

namespace detail {

namespace http = boost::beast::http;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

/// Percent-encodes everything but RFC 3986 unreserved characters (so '+'
/// is never read as a space by the server's form decoder).
inline void append_url_encoded(std::string& out, std::string_view v) {
    static constexpr char hex[] = "0123456789ABCDEF";
    for (unsigned char c : v) {
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
            c == '.' || c == '_' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
}

/// Why a reply's head announces a coding chstate did not ask for (empty
/// when it does not): a Content-Encoding other than identity, or a
/// Transfer-Encoding other than chunked alone. Printable excerpt only.
template <class Fields>
std::string unasked_coding(const Fields& head) {
    auto printable = [](std::string_view v) {
        std::string out;
        for (char c : v.substr(0, 60))
            out += (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f) ? c : '?';
        return out;
    };
    auto lowered = [](std::string_view v) {
        std::string out(v);
        for (char& c : out)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return out;
    };
    for (const auto& f : head) {
        const std::string_view name(f.name_string().data(), f.name_string().size());
        const std::string_view value(f.value().data(), f.value().size());
        const std::string v = lowered(value);
        if (beast::iequals(name, "Content-Encoding") && !v.empty() && v != "identity")
            return "the reply is encoded (Content-Encoding: " + printable(value) +
                   "), which chstate never asks for: not read as rows";
        if (beast::iequals(name, "Transfer-Encoding") && v != "chunked")
            return "the reply has a transfer coding chstate does not read (Transfer-Encoding: " + printable(value) +
                   "): not read as rows";
    }
    return {};
}

/// The `timeout=N` of a Keep-Alive header, if any, at most a day (a larger
/// N would overflow the milliseconds, and the pool's nanosecond comparison).
inline std::optional<std::chrono::milliseconds> keep_alive_timeout(std::string_view header) {
    auto pos = header.find("timeout=");
    if (pos == std::string_view::npos)
        return std::nullopt;
    header.remove_prefix(pos + 8);
    long n = 0;
    auto [p, ec] = std::from_chars(header.data(), header.data() + header.size(), n);
    if (ec != std::errc{} || n < 0)
        return std::nullopt;
    return std::chrono::seconds(std::min(n, 24L * 3600));
}

/// Where a body that claims success carries an exception: the offset of
/// the exception text in `tail`, or npos.
inline std::size_t find_body_exception(std::string_view tail) {
    if (auto marker = tail.find("__exception__"); marker != std::string_view::npos)
        return marker;
    std::size_t pos = tail.size();
    while (pos > 0) {
        pos = tail.rfind("Code: ", pos - 1);
        if (pos == std::string_view::npos)
            return std::string_view::npos;
        if ((pos == 0 || tail[pos - 1] == '\n') && exception_code(tail.substr(pos)) &&
            names_server_exception(tail.substr(pos)))
            return pos;
        if (pos == 0)
            break;
    }
    return std::string_view::npos;
}

/// Refuses options whose values cannot travel: the host, user and password
/// become header values (Host, X-ClickHouse-User, X-ClickHouse-Key), where a
/// CR or LF would inject headers, and no database name has a use for a
/// control character (it travels percent-encoded in any case).
/// errc::invalid_configuration naming the option, never showing the user's or
/// password's value.
inline error_code validate_http_options(const http_options& o, diagnostics& diag) {
    if (auto ec = check_no_control_characters("http_options.host", o.host, false, diag))
        return ec;
    if (auto ec = check_no_control_characters("http_options.user", o.user, false, diag))
        return ec;
    if (auto ec = check_no_control_characters("http_options.password", o.password, true, diag))
        return ec;
    if (auto ec = check_no_control_characters("http_options.database", o.database, false, diag))
        return ec;
    if (auto ec = check_no_control_characters("http_options.ca_file", o.ca_file, false, diag))
        return ec;
    if (o.host.empty() || o.port == 0) {
        diag.message = o.host.empty() ? "http_options.host is empty" : "http_options.port is 0 (expected 1–65535)";
        return make_error_code(errc::invalid_configuration);
    }
    for (std::size_t i = 1; i < o.endpoints.size(); ++i) {
        const std::string name = "http_options.endpoints[" + std::to_string(i) + "]";
        if (auto ec = check_no_control_characters(name + ".host", o.endpoints[i].host, false, diag))
            return ec;
        if (o.endpoints[i].host.empty() || o.endpoints[i].port == 0) {
            diag.message = o.endpoints[i].host.empty() ? name + ".host is empty"
                                                       : name + ".port is 0 (expected 1–65535)";
            return make_error_code(errc::invalid_configuration);
        }
    }
    return {};
}

/// At most `limit` bytes of `text` for a diagnostic message: each run of
/// white space and control characters becomes one space (none at the ends),
/// a byte that does not belong to a UTF-8 sequence becomes '?', and a cut
/// falls between characters, marked "…".
inline std::string printable_excerpt(std::string_view text, std::size_t limit = 300) {
    std::string out;
    bool space = false;
    std::size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c <= 0x20 || c == 0x7F) {
            space = !out.empty();
            ++i;
            continue;
        }
        std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool valid = n > 0 && i + n <= text.size();
        for (std::size_t k = 1; valid && k < n; ++k)
            valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
        const std::string_view piece = valid ? text.substr(i, n) : std::string_view("?");
        if (out.size() + (space ? 1 : 0) + piece.size() > limit) {
            out += "…";
            break;
        }
        if (space)
            out += ' ';
        space = false;
        out += piece;
        i += valid ? n : 1;
    }
    return out;
}

/// What a reply with a status other than 200 says.
struct error_reply {
    std::optional<int> code; ///< ClickHouse's exception code, if the reply is its exception
    std::string message;     ///< for diagnostics
};

/// Reads a reply with a status other than 200. It is ClickHouse's exception
/// when it carries an X-ClickHouse-Exception-Code header (`code_header`) or
/// its body begins with "Code: N" and names a DB::Exception (or a
/// Coordination::Exception, ZooKeeper's): then the code
/// comes from the header (else the body) and the message is ClickHouse's text
/// (trim_message). Anything else — a proxy's or another server's error page —
/// is not searched for a code: the message is the status, its reason and at
/// most `excerpt_limit` bytes of the body (printable_excerpt).
inline error_reply read_error_reply(unsigned status, std::string_view reason,
                                    std::optional<std::string_view> code_header, std::string_view body,
                                    std::size_t excerpt_limit = 300) {
    error_reply r;
    bool clickhouse = false;
    if (code_header) {
        clickhouse = true;
        int n = 0;
        auto [p, ec] = std::from_chars(code_header->data(), code_header->data() + code_header->size(), n);
        if (ec == std::errc{} && p != code_header->data())
            r.code = n;
    }
    std::string_view start = body;
    while (!start.empty() && (start.front() == ' ' || start.front() == '\r' || start.front() == '\n'))
        start.remove_prefix(1);
    if (start.starts_with("Code: ") && exception_code(start) &&
        names_server_exception(start))
        clickhouse = true;
    if (clickhouse) {
        if (!r.code)
            r.code = exception_code(body);
        r.message = std::string(trim_message(body));
        if (r.message.empty())
            r.message = "HTTP status " + std::to_string(status);
        return r;
    }
    r.message = "HTTP status " + std::to_string(status);
    if (auto why = printable_excerpt(reason, 100); !why.empty())
        r.message += " " + why;
    r.message += " without a ClickHouse exception";
    if (auto excerpt = printable_excerpt(body, excerpt_limit); !excerpt.empty())
        r.message += "; the reply begins: " + excerpt;
    return r;
}

/// One kept-alive connection.
struct http_connection {
    explicit http_connection(const asio::any_io_executor& ex) : socket(ex) {}
    tcp::socket socket;
#ifndef CHSTATE_NO_TLS
    std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
#endif
    beast::flat_buffer buffer;
    std::chrono::steady_clock::time_point idle_since{};
    std::chrono::milliseconds keep_alive{3000};
    std::size_t requests = 0;
    std::size_t endpoint = 0; ///< index into http_pool::endpoints

    void close() {
        error_code ignored;
        socket.shutdown(tcp::socket::shutdown_both, ignored);
        socket.close(ignored);
    }

    /// False when the peer already closed it (or sent something unasked).
    bool looks_alive() {
        if (!socket.is_open())
            return false;
        char c;
        ssize_t n = ::recv(socket.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
};

/// The pool shared by copies of one http_transport.
struct http_pool {
    struct waiter {
        explicit waiter(const asio::any_io_executor& ex) : timer(ex) {}
        asio::steady_timer timer;
        bool notified = false;
        asio::any_io_executor ex;
    };

    http_pool(asio::any_io_executor e, http_options o)
        : ex(std::move(e)), options(std::move(o)),
          endpoints(endpoint_list(options.host, options.port, options.endpoints)) {
        if (options.pool_size == 0)
            options.pool_size = 1;
    }

    asio::any_io_executor ex;
    http_options options;
    std::vector<chstate::endpoint> endpoints;   ///< host:port first, then options.endpoints[1…]
    std::atomic<std::size_t> current{0};        ///< the endpoint a statement starts on
    std::atomic<std::size_t> failovers{0};      ///< moves to the next endpoint, ever
#ifndef CHSTATE_NO_TLS
    std::unique_ptr<asio::ssl::context> tls_context;
    error_code tls_error;
    std::string tls_error_text;
#endif

    std::mutex mutex;
    std::vector<std::unique_ptr<http_connection>> idle;
    std::deque<std::shared_ptr<waiter>> waiters;
    std::size_t open = 0;      ///< slots taken: connections in use, being opened, or idle
    std::size_t peak_open = 0; ///< the largest `open` ever seen
    std::atomic<std::size_t> connections_opened{0};

    /// Takes a slot: a live idle connection to endpoint `ep`, or an empty
    /// slot (nullptr, to be connected by the caller); false when every slot
    /// is taken. Idle connections to other endpoints are kept unless their
    /// slot is needed (the oldest is then closed).
    bool try_take(std::unique_ptr<http_connection>& out, std::size_t ep) {
        std::lock_guard lk(mutex);
        const auto now = std::chrono::steady_clock::now();
        for (std::size_t i = idle.size(); i-- > 0;) {
            auto& c = idle[i];
            const auto limit = c->keep_alive - options.idle_close_margin;
            const bool in_time = now - c->idle_since < limit;
            if (c->endpoint != ep && in_time)
                continue;
            if (in_time && c->looks_alive()) {
                out = std::move(c);
                idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(i));
                return true;
            }
            c->close();
            idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(i));
            --open;
        }
        if (open < options.pool_size) {
            ++open;
            peak_open = std::max(peak_open, open);
            out.reset();
            return true;
        }
        if (!idle.empty()) { // every slot holds an idle connection to another endpoint
            idle.front()->close();
            idle.erase(idle.begin());
            out.reset();
            return true;
        }
        return false;
    }

    void wake_one_locked() {
        while (!waiters.empty()) {
            auto w = std::move(waiters.front());
            waiters.pop_front();
            asio::post(w->ex, [w] {
                w->notified = true;
                w->timer.cancel();
            });
            return;
        }
    }

    /// Returns a slot: with a reusable connection, or freed.
    void give_back(std::unique_ptr<http_connection> c) {
        std::lock_guard lk(mutex);
        if (c) {
            c->idle_since = std::chrono::steady_clock::now();
            idle.push_back(std::move(c));
        } else {
            --open;
        }
        wake_one_locked();
    }
};

/// The state of one operation, shared with its timers and cancel handler.
struct http_op_state {
    explicit http_op_state(asio::any_io_executor s) : strand(s), watchdog(s), resolver(s) {}
    asio::any_io_executor strand;
    asio::steady_timer watchdog;
    tcp::resolver resolver;
    http_connection* conn = nullptr;
    std::shared_ptr<http_pool::waiter> waiting;
    bool cancelled = false;
    bool timed_out = false;

    void interrupt() {
        resolver.cancel();
        if (conn)
            conn->close();
        if (waiting)
            waiting->timer.cancel();
    }

    /// Arms the watchdog: on expiry the current step is interrupted.
    void arm(std::chrono::milliseconds d, const std::shared_ptr<http_op_state>& self) {
        watchdog.expires_after(d);
        watchdog.async_wait([w = std::weak_ptr<http_op_state>(self)](error_code ec) {
            if (ec)
                return;
            if (auto s = w.lock()) {
                s->timed_out = true;
                s->interrupt();
            }
        });
    }
};

} // namespace detail

/// Transport over ClickHouse's HTTP interface. Cheap to copy: copies share
/// the connection pool. See the header comment.
class http_transport {
public:
    /// Values travel in the request body on every server version (see the
    /// header comment): the store never writes them into SQL text.
    static constexpr bool binds_parameters = true;

    using executor_type = asio::any_io_executor;

    /// Operations run on strands of `ex`; a thread must run it.
    http_transport(executor_type ex, http_options options)
        : pool_(std::make_shared<detail::http_pool>(std::move(ex), std::move(options))) {
#ifndef CHSTATE_NO_TLS
        if (pool_->options.secure) {
            try {
                auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
                ctx->set_verify_mode(asio::ssl::verify_peer);
                if (pool_->options.ca_file.empty())
                    ctx->set_default_verify_paths();
                else
                    ctx->load_verify_file(pool_->options.ca_file);
                pool_->tls_context = std::move(ctx);
            } catch (const boost::system::system_error& e) {
                pool_->tls_error = make_error_code(errc::invalid_configuration);
                pool_->tls_error_text = std::string("TLS setup failed: ") + e.what();
            }
        }
#endif
    }

    executor_type get_executor() const noexcept { return pool_->ex; }
    const http_options& options() const noexcept { return pool_->options; }

    /// Pool figures (for tests and monitoring).
    std::size_t pool_peak() const {
        std::lock_guard lk(pool_->mutex);
        return pool_->peak_open;
    }
    std::size_t pool_open() const {
        std::lock_guard lk(pool_->mutex);
        return pool_->open;
    }
    std::size_t connections_opened() const noexcept { return pool_->connections_opened.load(); }

    /// Failover figures (see the header comment): every endpoint in order,
    /// the index of the one the next statement starts on (the last one that
    /// connected), and how many times a statement moved to the next one.
    const std::vector<endpoint>& endpoints() const noexcept { return pool_->endpoints; }
    std::size_t current_endpoint() const noexcept { return pool_->current.load(); }
    std::size_t failovers() const noexcept { return pool_->failovers.load(); }

    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [pool = pool_](auto handler, const statement* stmt, result_sink sink, diagnostics* diag) {
                auto strand = asio::any_io_executor(asio::make_strand(pool->ex));
                auto st = std::make_shared<detail::http_op_state>(strand);
                auto slot = asio::get_associated_cancellation_slot(handler);
                if (slot.is_connected()) {
                    slot.assign([w = std::weak_ptr<detail::http_op_state>(st)](asio::cancellation_type) {
                        if (auto s = w.lock())
                            asio::post(s->strand, [s] {
                                s->cancelled = true;
                                s->interrupt();
                            });
                    });
                }
                auto work = asio::make_work_guard(asio::get_associated_executor(handler, pool->ex));
                asio::co_spawn(strand, run(pool, st, stmt, std::move(sink), diag),
                               [h = std::move(handler), work = std::move(work), st](std::exception_ptr e,
                                                                                     error_code ec) mutable {
                                   if (e)
                                       std::rethrow_exception(e);
                                   auto slot = asio::get_associated_cancellation_slot(h);
                                   if (slot.is_connected())
                                       slot.clear();
                                   st->watchdog.cancel();
                                   // The work guard travels with the completion and is
                                   // released on the handler's executor, just before
                                   // the handler: released here, a caller's run() could
                                   // return (and its io_context be destroyed) while
                                   // this thread is still posting to it.
                                   auto ex = work.get_executor();
                                   asio::dispatch(ex, [h = std::move(h), ec, work = std::move(work)]() mutable {
                                       work.reset();
                                       std::move(h)(ec);
                                   });
                               });
            },
            token, &stmt, std::move(sink), &diag);
    }

private:
    using pool_ptr = std::shared_ptr<detail::http_pool>;
    using state_ptr = std::shared_ptr<detail::http_op_state>;
    static constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

    /// The external table that carries a statement's values.
    static constexpr std::string_view values_table = "_chstate_values";

    /// The request for one statement: the URL target, the body and its
    /// content type (see the header comment).
    struct request_parts {
        std::string target;
        std::string body;
        std::string content_type = "text/plain; charset=UTF-8";
        /// wait_end_of_query=1 was sent: the status is final, and a body
        /// under status 200 is data only (never searched for an exception).
        bool buffered = false;
    };

    static error_code build_request(const http_options& o, const statement& stmt, request_parts& out,
                                    diagnostics& diag) {
        std::string t = "/?";
        auto add = [&](std::string_view name, std::string_view value) {
            if (t.size() > 2)
                t += '&';
            detail::append_url_encoded(t, name);
            t += '=';
            detail::append_url_encoded(t, value);
        };
        if (!o.database.empty())
            add("database", o.database);
        if (!stmt.format.empty())
            add("default_format", stmt.format);
        // RowBinary replies carry ids and state text as raw bytes, which may
        // hold anything — text that looks like an exception included — and
        // an old server appends an exception right after the last row: the
        // server buffers such a reply, so its status is final.
        out.buffered = o.wait_end_of_query || stmt.format == "RowBinary";
        if (out.buffered)
            add("wait_end_of_query", "1");
        for (const auto& st : stmt.settings) {
            // A name the transport sets itself, or one that is not a plain
            // setting name, could change what the request means.
            const bool plain = !st.name.empty() && std::all_of(st.name.begin(), st.name.end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
            });
            if (!plain || st.name == "database" || st.name == "default_format" || st.name == "query" ||
                st.name == "wait_end_of_query" || st.name.starts_with(values_table) || st.name == "user" ||
                st.name == "password") {
                diag.message = plain ? "statement setting " + st.name + " is one the HTTP transport sets itself"
                                     : std::string("a statement setting's name is not lower-case letters, digits "
                                                   "and '_'");
                return make_error_code(errc::invalid_argument);
            }
            if (detail::find_control_character(st.value) != std::string_view::npos) {
                diag.message = "statement setting " + st.name + " has a control character in its value";
                return make_error_code(errc::invalid_argument);
            }
            add(st.name, st.value);
        }
        if (stmt.parameters.empty() && stmt.data.empty()) {
            out.body = stmt.sql; // no value in it, but any length: the body, not the URL
        } else if (stmt.data.empty() && detail::parameter_bytes(stmt) <= detail::inline_parameter_limit) {
            statement inlined = stmt; // small values: quoted literals in the body's SQL, as any client sends them
            if (auto ec = detail::inline_parameters(inlined, diag))
                return ec;
            out.body = std::move(inlined.sql);
        } else if (stmt.parameters.empty()) {
            add("query", stmt.sql);
            out.body = stmt.data;
        } else {
            if (!stmt.data.empty()) {
                diag.message = "a statement cannot carry both parameters and INSERT data over HTTP";
                return make_error_code(errc::invalid_argument);
            }
            detail::parameter_table bound;
            if (auto ec = detail::bind_parameters_as_table(stmt, values_table, bound, diag))
                return ec;
            add("query", bound.sql);
            add(std::string(values_table) + "_structure", bound.structure);
            add(std::string(values_table) + "_format", "TabSeparated");
            // A boundary that the values do not contain.
            std::string boundary = "chstate-values-boundary";
            for (unsigned n = 0; bound.row.find(boundary) != std::string::npos; ++n)
                boundary = "chstate-values-boundary-" + std::to_string(n);
            out.content_type = "multipart/form-data; boundary=" + boundary;
            out.body.reserve(bound.row.size() + 256);
            out.body += "--" + boundary + "\r\n";
            out.body += "Content-Disposition: form-data; name=\"" + std::string(values_table) + "\"; filename=\"" +
                        std::string(values_table) + "\"\r\n";
            out.body += "Content-Type: application/octet-stream\r\n\r\n";
            out.body += bound.row;
            out.body += "\r\n--" + boundary + "--\r\n";
        }
        out.target = std::move(t);
        return {};
    }

    static error_code fail_or_interrupt(const state_ptr& st, error_code fallback, diagnostics& diag,
                                        std::string what) {
        if (st->cancelled) {
            diag.message = "operation cancelled";
            return asio::error::operation_aborted;
        }
        if (st->timed_out) {
            diag.message = what + ": timed out";
            return make_error_code(errc::timeout);
        }
        diag.message = std::move(what);
        return fallback;
    }

    /// Opens a connection (resolve, connect, TLS handshake) under the connect timeout.
    static asio::awaitable<error_code> connect(const pool_ptr& pool, const state_ptr& st, std::size_t at,
                                               std::unique_ptr<detail::http_connection>& out, diagnostics& diag) {
        const http_options& o = pool->options;
        const std::string& host = pool->endpoints[at].host;
        const std::uint16_t port = pool->endpoints[at].port;
        const std::string where = detail::host_port(host, port);
        auto c = std::make_unique<detail::http_connection>(pool->ex);
        c->keep_alive = o.default_keep_alive;
        c->endpoint = at;
        st->conn = c.get();
        st->arm(o.connect_timeout, st);
        auto [rec, endpoints] = co_await st->resolver.async_resolve(host, std::to_string(port), tuple);
        if (rec || st->cancelled || st->timed_out) {
            st->conn = nullptr;
            co_return fail_or_interrupt(st, make_error_code(errc::connection_failed), diag,
                                        "cannot resolve " + host + ": " + rec.message());
        }
        auto [cec, ep] = co_await asio::async_connect(c->socket, endpoints, tuple);
        if (cec || st->cancelled || st->timed_out) {
            st->conn = nullptr;
            co_return fail_or_interrupt(st, make_error_code(errc::connection_failed), diag,
                                        "cannot connect to " + where + ": " + cec.message());
        }
        c->socket.set_option(detail::tcp::no_delay(true));
        if (o.secure) {
#ifdef CHSTATE_NO_TLS
            st->conn = nullptr;
            diag.message = "secure=true, but chstate was built with CHSTATE_NO_TLS";
            co_return make_error_code(errc::unsupported);
#else
            if (!pool->tls_context) {
                st->conn = nullptr;
                diag.message = pool->tls_error_text;
                co_return pool->tls_error ? pool->tls_error : make_error_code(errc::invalid_configuration);
            }
            c->tls = std::make_unique<asio::ssl::stream<detail::tcp::socket&>>(c->socket, *pool->tls_context);
            // The name to verify, checked by OpenSSL during the handshake (its
            // failure then reads "hostname mismatch", not only "certificate
            // verify failed"). An IP address is matched against the
            // certificate's IP addresses and sent without SNI (RFC 6066).
            SSL* ssl = c->tls->native_handle();
            X509_VERIFY_PARAM* verify = SSL_get0_param(ssl);
            error_code not_ip;
            (void)asio::ip::make_address(host, not_ip);
            const bool named = not_ip ? SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 &&
                                            X509_VERIFY_PARAM_set1_host(verify, host.c_str(), host.size()) == 1
                                      : X509_VERIFY_PARAM_set1_ip_asc(verify, host.c_str()) == 1;
            if (!named) {
                st->conn = nullptr;
                diag.message = "cannot set the TLS server name to verify to " + host;
                co_return make_error_code(errc::connection_failed);
            }
            auto [hec] = co_await c->tls->async_handshake(asio::ssl::stream_base::client, tuple);
            if (hec || st->cancelled || st->timed_out) {
                st->conn = nullptr;
                std::string why = hec.message();
                if (const long v = SSL_get_verify_result(ssl); hec && v != X509_V_OK)
                    why = std::string("certificate verification failed: ") + X509_verify_cert_error_string(v);
                co_return fail_or_interrupt(st, make_error_code(errc::connection_failed), diag,
                                            "TLS handshake with " + where + " failed: " + why);
            }
#endif
        }
        st->watchdog.cancel();
        pool->connections_opened.fetch_add(1);
        out = std::move(c);
        co_return error_code{};
    }

    struct exchange_result {
        error_code ec;
        bool response_started = false; ///< any response byte read
        bool request_sent = false;     ///< any request byte written: the server may have run it
        bool reusable = false;
        /// 400 without a ClickHouse exception: the server's HTTP layer could
        /// not parse the request, so no query ran (seen once in ~10^4
        /// requests on a kept-alive connection to 18.16).
        bool not_parsed = false;
        /// The connection failed (writing, or reading the reply), not the server's answer.
        bool io_failed = false;
        /// Reply data reached the sink: the statement cannot be sent again.
        bool delivered = false;
    };

    /// A write whose request reached the wire and whose reply was then lost
    /// (connection dropped, timed out, reply cut short) may have landed:
    /// errc::outcome_unknown, never a plain failure. A cancellation stays
    /// operation_aborted, with the same warning in the message.
    static error_code unknown_if_sent(const exchange_result& r, const statement& stmt, diagnostics& diag) {
        if (!r.ec || !r.request_sent || !writes_data(stmt))
            return r.ec;
        auto warn = [&](std::string_view what) {
            if (!diag.message.empty())
                diag.message += "; ";
            diag.message += what;
        };
        if (r.ec == asio::error::operation_aborted) {
            warn("the write was sent before the cancellation: it may have landed");
            return r.ec;
        }
        if (r.ec.category() != error_category())
            return r.ec; // the server's own answer: definite
        const auto e = static_cast<errc>(r.ec.value());
        if (e != errc::connection_failed && e != errc::timeout && e != errc::truncated_response &&
            e != errc::protocol_error)
            return r.ec;
        warn("the write was sent and its reply lost: it may have landed");
        return make_error_code(errc::outcome_unknown);
    }

    /// Sends the request and streams the reply on one connection.
    using request_type = detail::http::request<detail::http::string_body>;

    /// The whole request, built once per operation before a connection is
    /// taken: a large body takes long to build, and a kept-alive connection
    /// checked before that could have been closed by the server meanwhile
    /// (its write then fails after part of the body went out, and a write
    /// that never ran would look as if it might have landed).
    static error_code make_request(const http_options& o, const statement& stmt, request_type& req,
                                   bool& buffered, diagnostics& diag) {
        namespace http = detail::http;
        request_parts parts;
        if (auto ec = build_request(o, stmt, parts, diag))
            return ec;
        buffered = parts.buffered;
        req = request_type{http::verb::post, std::move(parts.target), 11};
        req.set(http::field::host, detail::host_port(o.host, o.port)); // [::1]:8123 for IPv6
        req.set(http::field::user_agent, "chstate");
        req.set("X-ClickHouse-User", o.user);
        req.set("X-ClickHouse-Key", o.password);
        req.set(http::field::content_type, parts.content_type);
        req.keep_alive(true);
        req.body() = std::move(parts.body);
        req.prepare_payload();
        return {};
    }

    /// Reads and parses body bytes until the parser makes progress, fills
    /// the body buffer (need_buffer) or fails; detail::body_feeder says
    /// why this is not http::async_read.
    template <class Stream, class Parser>
    static asio::awaitable<error_code> read_body_some(Stream& stream, detail::beast::flat_buffer& buffer, Parser& parser,
                                                      detail::body_feeder& feeder) {
        for (;;) {
            while (buffer.size() < feeder.wanted()) {
                auto [ec, n] = co_await stream.async_read_some(buffer.prepare(detail::body_feeder::read_size), tuple);
                buffer.commit(n);
                if (ec == asio::error::eof)
                    co_return feeder.eof(parser, buffer);
                if (ec)
                    co_return ec;
            }
            error_code ec = feeder.put(parser, buffer);
            if (ec != detail::http::error::need_more)
                co_return ec;
        }
    }

    template <class Stream>
    static asio::awaitable<exchange_result> exchange(Stream& stream, detail::http_connection& c,
                                                     const state_ptr& st, const request_type& req,
                                                     const bool parts_buffered, const result_sink& sink,
                                                     diagnostics& diag) {
        namespace http = detail::http;
        exchange_result r;
        auto [wec, wn] = co_await http::async_write(stream, req, tuple);
        r.request_sent = wn > 0;
        r.io_failed = bool(wec);
        if (wec || st->cancelled || st->timed_out) {
            r.ec = fail_or_interrupt(st, make_error_code(errc::connection_failed), diag,
                                     "sending the request failed: " + wec.message());
            co_return r;
        }
        http::response_parser<http::buffer_body> parser;
        parser.body_limit(boost::none);
        std::size_t before = c.buffer.size();
        auto [hec, hn] = co_await http::async_read_header(stream, c.buffer, parser, tuple);
        r.response_started = hn > 0 || c.buffer.size() != before || parser.got_some();
        r.io_failed = bool(hec);
        if (hec || st->cancelled || st->timed_out) {
            r.ec = fail_or_interrupt(st,
                                     make_error_code(r.response_started ? errc::protocol_error
                                                                        : errc::connection_failed),
                                     diag, "reading the reply failed: " + hec.message());
            co_return r;
        }
        const auto& head = parser.get();
        const bool ok = head.result() == http::status::ok;
        // chstate never asks for a coding (no Accept-Encoding, no
        // enable_http_compression): a coded body would be taken for rows.
        if (auto why = detail::unasked_coding(head); !why.empty()) {
            diag.message = std::move(why);
            r.ec = make_error_code(errc::protocol_error);
            co_return r;
        }

        std::vector<char> buf(64 * 1024);
        constexpr std::size_t hold = 16 * 1024;
        std::string pending; // ok: the held-back tail; error: the message
        error_code sink_ec;
        detail::body_feeder feeder;
        bool body_done = parser.is_done();
        while (!body_done) {
            parser.get().body().data = buf.data();
            parser.get().body().size = buf.size();
            error_code rec = co_await read_body_some(stream, c.buffer, parser, feeder);
            if (rec == http::error::need_buffer)
                rec = {};
            if (rec || st->cancelled || st->timed_out) {
                const bool framing = rec == http::error::buffer_overflow;
                r.io_failed = rec && !framing;
                r.ec = fail_or_interrupt(
                    st, make_error_code(framing ? errc::protocol_error : errc::truncated_response), diag,
                    framing ? "the reply's chunk framing holds more than 64 KiB that is not data"
                            : "the reply ended early: " + rec.message());
                co_return r;
            }
            std::size_t got = buf.size() - parser.get().body().size;
            if (ok) {
                if (!sink_ec) {
                    pending.append(buf.data(), got);
                    if (parts_buffered) { // the status is final: pass everything on
                        r.delivered = r.delivered || !pending.empty();
                        sink_ec = sink(pending);
                        pending.clear();
                    } else if (pending.size() > 2 * hold) {
                        std::size_t pass = pending.size() - hold;
                        // pass whole lines only, so an exception text stays in the tail
                        auto nl = pending.rfind('\n', pass);
                        std::size_t n = (nl != std::string::npos && nl > 0) ? nl + 1 : pass;
                        r.delivered = true;
                        sink_ec = sink(std::string_view(pending.data(), n));
                        pending.erase(0, n);
                    }
                    if (sink_ec) {
                        // abandon: the connection is in an unknown state
                        r.ec = sink_ec;
                        co_return r;
                    }
                }
            } else if (pending.size() < 64 * 1024) {
                pending.append(buf.data(), std::min(got, 64 * 1024 - pending.size()));
            }
            body_done = parser.is_done();
        }

        // Keep-alive bookkeeping.
        r.reusable = head.keep_alive();
        if (auto ka = head.find(http::field::keep_alive); ka != head.end()) {
            if (auto t = detail::keep_alive_timeout(ka->value()))
                c.keep_alive = *t;
        }

        if (!ok) {
            std::optional<std::string_view> code_header;
            if (auto h = head.find("X-ClickHouse-Exception-Code"); h != head.end())
                code_header = std::string_view(h->value().data(), h->value().size());
            const auto reason = head.reason();
            auto reply = detail::read_error_reply(head.result_int(), std::string_view(reason.data(), reason.size()),
                                                  code_header, pending);
            diag.message = std::move(reply.message);
            const std::optional<int> code = reply.code;
            r.not_parsed = !code && head.result() == http::status::bad_request;
            if (code)
                r.ec = make_clickhouse_error(*code);
            else if (head.result() == http::status::unauthorized || head.result() == http::status::forbidden)
                r.ec = make_error_code(errc::authentication_failed);
            else
                r.ec = make_error_code(errc::server_error);
            co_return r;
        }
        if (auto at = parts_buffered ? std::string::npos : detail::find_body_exception(pending);
            at != std::string::npos) {
            std::string_view text = std::string_view(pending).substr(at);
            diag.message = std::string(detail::trim_message(text));
            auto code = detail::exception_code(text);
            r.ec = code ? make_clickhouse_error(*code) : make_error_code(errc::truncated_response);
            r.reusable = false;
            co_return r;
        }
        if (!pending.empty())
            r.ec = sink(pending);
        if (r.ec)
            r.reusable = false;
        co_return r;
    }

    static asio::awaitable<error_code> run(pool_ptr pool, state_ptr st, const statement* stmt, result_sink sink,
                                           diagnostics* diag) {
        namespace http = detail::http;
        const http_options& o = pool->options;
        // Nothing that could inject a header is sent: refused before connecting.
        if (auto vec = detail::validate_http_options(o, *diag))
            co_return vec;
        const auto deadline = std::chrono::steady_clock::now() + o.request_timeout;
        request_type req;
        bool buffered = false;
        if (auto bec = make_request(o, *stmt, req, buffered, *diag))
            co_return bec;
        // Failover: the statement starts on the current endpoint and moves to
        // the next one (at most once per endpoint) when it cannot connect, or
        // when the connection fails and the statement may run again.
        const std::size_t n = pool->endpoints.size();
        std::size_t ep = pool->current.load() % n;
        std::size_t moves = 0;
        std::string failures; // what each endpoint given up on said
        bool all_timeouts = true;
        auto note_failure = [&](const error_code& ec) {
            if (!failures.empty())
                failures += "; ";
            failures += diag->message;
            if (ec != errc::timeout)
                all_timeouts = false;
        };
        auto fail_over = [&]() -> bool {
            if (moves + 1 >= n || st->cancelled)
                return false;
            ++moves;
            const std::size_t next = (ep + 1) % n;
            std::size_t expected = ep; // another statement may have moved it already
            pool->current.compare_exchange_strong(expected, next);
            pool->failovers.fetch_add(1);
            ep = next;
            st->timed_out = false; // a connect timeout on the previous endpoint
            return true;
        };
        bool force_fresh = false;
        bool retried_here = false; // the one retry on this endpoint (reused connection lost, or not parsed)
        std::unique_ptr<detail::http_connection> conn;
        bool have_slot = false;
        for (;;) {
            // 1. a slot (and maybe a kept-alive connection to this endpoint)
            if (!have_slot) {
                for (;;) {
                    if (pool->try_take(conn, ep)) {
                        have_slot = true;
                        break;
                    }
                    auto w = std::make_shared<detail::http_pool::waiter>(st->strand);
                    w->ex = st->strand;
                    w->timer.expires_at(deadline);
                    {
                        std::lock_guard lk(pool->mutex);
                        pool->waiters.push_back(w);
                    }
                    st->waiting = w;
                    co_await w->timer.async_wait(tuple);
                    st->waiting.reset();
                    const bool giving_up = st->cancelled || (!w->notified && std::chrono::steady_clock::now() >= deadline);
                    {
                        std::lock_guard lk(pool->mutex);
                        std::erase(pool->waiters, w);
                        // A wake-up meant for us must not be lost when we leave.
                        if (giving_up && (pool->open < pool->options.pool_size || !pool->idle.empty()))
                            pool->wake_one_locked();
                    }
                    if (st->cancelled) {
                        diag->message = "operation cancelled";
                        co_return asio::error::operation_aborted;
                    }
                    if (!w->notified && std::chrono::steady_clock::now() >= deadline) {
                        diag->message = "no free connection within the request timeout";
                        co_return make_error_code(errc::timeout);
                    }
                }
            }
            const bool reused = conn != nullptr && !force_fresh;
            if (force_fresh && conn) {
                conn->close();
                conn.reset();
            }
            force_fresh = false;
            // 2. a connection
            if (!conn) {
                if (auto ec = co_await connect(pool, st, ep, conn, *diag)) {
                    const bool unreachable =
                        !st->cancelled && (ec == errc::connection_failed || ec == errc::timeout);
                    if (unreachable) {
                        note_failure(ec);
                        if (fail_over()) {
                            retried_here = false;
                            continue; // keep the slot, connect to the next endpoint
                        }
                    }
                    pool->give_back(nullptr);
                    if (unreachable && moves > 0) {
                        diag->message = "no endpoint answered (" + std::to_string(moves + 1) + " of " +
                                        std::to_string(n) + " tried): " + failures;
                        co_return make_error_code(all_timeouts ? errc::timeout : errc::connection_failed);
                    }
                    co_return ec;
                }
            }
            // 3. the exchange, under the request timeout
            req.set(http::field::host, detail::host_port(pool->endpoints[ep].host, pool->endpoints[ep].port));
            st->conn = conn.get();
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                               std::chrono::steady_clock::now());
            st->arm(std::max(left, std::chrono::milliseconds(1)), st);
            exchange_result r;
#ifndef CHSTATE_NO_TLS
            if (conn->tls)
                r = co_await exchange(*conn->tls, *conn, st, req, buffered, sink, *diag);
            else
#endif
                r = co_await exchange(conn->socket, *conn, st, req, buffered, sink, *diag);
            st->watchdog.cancel();
            st->conn = nullptr;
            ++conn->requests;
            const bool interrupted = st->cancelled || st->timed_out;
            if (r.ec && reused && !r.response_started && stmt->idempotent && !retried_here && !interrupted) {
                retried_here = true;
                force_fresh = true; // keep the slot, reconnect
                continue;
            }
            // A request the server could not parse never ran: safe to send
            // again, once, on a fresh connection, whatever the statement.
            if (r.not_parsed && !retried_here && !interrupted) {
                retried_here = true;
                force_fresh = true;
                continue;
            }
            // The connection failed under the statement (the server died or
            // dropped it): the next endpoint, when the statement may run
            // twice or never reached the server, and no reply data was passed on.
            if (r.ec && r.io_failed && !interrupted && !r.delivered && (stmt->idempotent || !r.request_sent) &&
                moves + 1 < n) {
                diag->message = detail::host_port(pool->endpoints[ep].host, pool->endpoints[ep].port) + ": " +
                                diag->message;
                note_failure(r.ec);
                conn->close();
                conn.reset();
                fail_over();
                retried_here = false;
                continue; // keep the slot
            }
            if (!r.ec && r.reusable) {
                pool->give_back(std::move(conn));
            } else {
                conn->close();
                conn.reset();
                pool->give_back(nullptr);
            }
            if (r.ec && moves > 0)
                diag->message += " (after failing over from: " + failures + ")";
            co_return unknown_if_sent(r, *stmt, *diag);
        }
    }

    pool_ptr pool_;
};

static_assert(transport<http_transport>);

/// Connection settings from a parsed clickhouse:// URI or the environment.
/// A host, user, password, database or CA file holding a control character (possible
/// only in a config built or changed by hand: from_uri and from_environment
/// refuse them) sets ec to errc::invalid_configuration, naming the setting.
inline http_options make_http_options(const config& c, error_code& ec, diagnostics& diag) {
    http_options o;
    ec = config::check_http_settings(c, {"config.host", "config.user", "config.password", "config.database"}, diag);
    if (!ec)
        ec = detail::check_no_control_characters("config.ca_file", c.ca_file, false, diag);
    if (ec)
        return o;
    o.host = c.host;
    o.port = c.port;
    o.endpoints = c.all_endpoints();
    o.database = c.database;
    o.user = c.user;
    o.password = c.password;
    o.secure = c.secure;
    o.ca_file = c.ca_file;
    o.connect_timeout = c.connect_timeout;
    o.request_timeout = c.request_timeout;
    return o;
}

/// Throwing form (chstate::error with errc::invalid_configuration).
inline http_options make_http_options(const config& c) {
    error_code ec;
    diagnostics diag;
    http_options o = make_http_options(c, ec, diag);
    throw_if(ec, diag.message);
    return o;
}

template <transport Transport, clock Clock>
class basic_state_store;

/// The store over HTTP with the real clock.
using http_state_store = basic_state_store<http_transport, real_clock>;

} // namespace chstate
