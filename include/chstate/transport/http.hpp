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
// The transport does not clear the slot when it completes (it completes on
// a thread of its own, while the slot belongs to the caller's): the handler
// it leaves there holds only a weak reference and does nothing once the
// statement has ended; clear or reassign the slot on your own executor.
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
// then fails with errc::unsupported; under CHSTATE_SEPARATE_COMPILATION
// it matters only where <chstate/src.hpp> is compiled). With
// BOOST_ASIO_SEPARATE_COMPILATION one translation unit must include
// <boost/asio/ssl/impl/src.hpp>.
//
// Where things are. This header declares the transport; its machinery is
// in detail/http/: request.hpp (the URL target and body for a statement),
// reply.hpp (Keep-Alive, error replies, exceptions in a body),
// body_filter.hpp (the held-back tail), pool.hpp (connections, the pool),
// tls.hpp, and the coroutines in exchange.ipp (one request and its reply)
// and transport.ipp (slot, connection, retry, failover). Header-only (the
// default) this header includes them, and so Boost.Beast and OpenSSL;
// with CHSTATE_SEPARATE_COMPILATION it includes neither, and they are
// compiled once, in the file that includes <chstate/src.hpp> (README:
// "Using chstate in your project").
#pragma once

#include <chstate/clock.hpp>
#include <chstate/config.hpp>
#include <chstate/detail/config/checks.hpp>
#include <chstate/detail/separate_compilation.hpp>
#include <chstate/error.hpp>
#include <chstate/transport.hpp>
#include <chstate/transport/http_options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace chstate {

namespace detail {
struct http_pool; // detail/http/pool.hpp
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
    CHSTATE_DECL http_transport(executor_type ex, http_options options);

    CHSTATE_DECL executor_type get_executor() const noexcept;
    CHSTATE_DECL const http_options& options() const noexcept;

    /// Pool figures (for tests and monitoring).
    CHSTATE_DECL std::size_t pool_peak() const;
    CHSTATE_DECL std::size_t pool_open() const;
    CHSTATE_DECL std::size_t connections_opened() const noexcept;

    /// Failover figures (see the header comment): every endpoint in order,
    /// the index of the one the next statement starts on (the last one that
    /// connected), and how many times a statement moved to the next one.
    CHSTATE_DECL const std::vector<endpoint>& endpoints() const noexcept;
    CHSTATE_DECL std::size_t current_endpoint() const noexcept;
    CHSTATE_DECL std::size_t failovers() const noexcept;

    /// The Transport concept's operation (transport.hpp), for any completion
    /// token. The handler is type-erased here, so the machinery behind it is
    /// compiled once (not once per token type, nor, under
    /// CHSTATE_SEPARATE_COMPILATION, once per file); it keeps the handler's
    /// associated executor (work is tracked on it until the handler runs)
    /// and cancellation slot (see the header comment).
    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [pool = pool_](auto handler, const statement* stmt, result_sink sink, diagnostics* diag) {
                start(pool, *stmt, std::move(sink), *diag, handler_type(std::move(handler)));
            },
            token, &stmt, std::move(sink), &diag);
    }

private:
    using handler_type = asio::any_completion_handler<void(error_code)>;

    /// Runs one statement on a strand of the pool's executor (detail/http/transport.ipp).
    CHSTATE_DECL static void start(const std::shared_ptr<detail::http_pool>& pool, const statement& stmt,
                                   result_sink sink, diagnostics& diag, handler_type handler);

    std::shared_ptr<detail::http_pool> pool_;
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

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/http/transport.ipp>
#endif
