// chstate/detail/http/transport.ipp — http_transport's definitions: the
// constructor and figures, and one statement's operation, a coroutine on
// its own strand: options checked and the request built, a pool slot, a
// connection (resolve, connect, TLS handshake), the exchange
// (exchange.ipp), and the retry and failover rules of transport/http.hpp's
// header comment. Included by transport/http.hpp when header-only, by
// <chstate/src.hpp> under CHSTATE_SEPARATE_COMPILATION.
#pragma once

#include <chstate/detail/config/checks.hpp>
#include <chstate/detail/http/exchange.ipp>
#include <chstate/detail/http/pool.hpp>
#include <chstate/detail/http/request.hpp>
#include <chstate/detail/http/tls.hpp>
#include <chstate/detail/separate_compilation.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

namespace chstate {

namespace detail {

/// Opens a connection (resolve, connect, TLS handshake) to endpoint `at`
/// under the connect timeout.
CHSTATE_DECL asio::awaitable<error_code> open_connection(const std::shared_ptr<http_pool>& pool,
                                                 const std::shared_ptr<http_op_state>& st, std::size_t at,
                                                 std::unique_ptr<http_connection>& out, diagnostics& diag) {
    const http_options& o = pool->options;
    const std::string& host = pool->endpoints[at].host;
    const std::uint16_t port = pool->endpoints[at].port;
    const std::string where = host_port(host, port);
    auto c = std::make_unique<http_connection>(pool->ex);
    c->keep_alive = o.default_keep_alive;
    c->endpoint = at;
    st->conn = c.get();
    st->arm(o.connect_timeout, st);
    auto [rec, endpoints] = co_await st->resolver.async_resolve(host, std::to_string(port), as_tuple_awaitable);
    if (rec || st->cancelled || st->timed_out) {
        st->conn = nullptr;
        co_return fail_or_interrupt(*st, make_error_code(errc::connection_failed), diag,
                                    "cannot resolve " + host + ": " + rec.message());
    }
    auto [cec, ep] = co_await asio::async_connect(c->socket, endpoints, as_tuple_awaitable);
    if (cec || st->cancelled || st->timed_out) {
        st->conn = nullptr;
        co_return fail_or_interrupt(*st, make_error_code(errc::connection_failed), diag,
                                    "cannot connect to " + where + ": " + cec.message());
    }
    c->socket.set_option(tcp::no_delay(true));
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
        c->tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(c->socket, *pool->tls_context);
        SSL* ssl = c->tls->native_handle();
        if (!set_name_to_verify(ssl, host)) {
            st->conn = nullptr;
            diag.message = "cannot set the TLS server name to verify to " + host;
            co_return make_error_code(errc::connection_failed);
        }
        auto [hec] = co_await c->tls->async_handshake(asio::ssl::stream_base::client, as_tuple_awaitable);
        if (hec || st->cancelled || st->timed_out) {
            st->conn = nullptr;
            co_return fail_or_interrupt(*st, make_error_code(errc::connection_failed), diag,
                                        "TLS handshake with " + where + " failed: " + handshake_failure(ssl, hec));
        }
#endif
    }
    st->watchdog.cancel();
    pool->connections_opened.fetch_add(1);
    out = std::move(c);
    co_return error_code{};
}

/// Waits for a pool slot (and takes a kept-alive connection to endpoint
/// `ep` with it, if one is idle) until `deadline`.
CHSTATE_DECL asio::awaitable<error_code> take_slot(const std::shared_ptr<http_pool>& pool,
                                                   const std::shared_ptr<http_op_state>& st, std::size_t ep,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   std::unique_ptr<http_connection>& conn, diagnostics& diag) {
    for (;;) {
        if (pool->try_take(conn, ep))
            co_return error_code{};
        auto w = std::make_shared<http_pool::waiter>(st->strand);
        w->ex = st->strand;
        w->timer.expires_at(deadline);
        {
            std::lock_guard lk(pool->mutex);
            pool->waiters.push_back(w);
        }
        st->waiting = w;
        co_await w->timer.async_wait(as_tuple_awaitable);
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
            diag.message = "operation cancelled";
            co_return asio::error::operation_aborted;
        }
        if (!w->notified && std::chrono::steady_clock::now() >= deadline) {
            diag.message = "no free connection within the request timeout";
            co_return make_error_code(errc::timeout);
        }
    }
}

/// A write whose request reached the wire and whose reply was then lost
/// (connection dropped, timed out, reply cut short) may have landed:
/// errc::outcome_unknown, never a plain failure. A cancellation stays
/// operation_aborted, with the same warning in the message.
CHSTATE_DECL error_code unknown_if_sent(const exchange_result& r, const statement& stmt, diagnostics& diag) {
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

/// Failover: a statement starts on the pool's current endpoint and moves to
/// the next one (at most once per endpoint, wrapping around) when it cannot
/// connect, or when the connection fails and the statement may run again;
/// a move makes the next endpoint current for every later statement.
class failover_walk {
public:
    explicit failover_walk(http_pool& pool)
        : pool_(pool), count_(pool.endpoints.size()), at_(pool.current.load() % count_) {}

    std::size_t at() const noexcept { return at_; }
    std::size_t count() const noexcept { return count_; }
    std::size_t moves() const noexcept { return moves_; }
    /// Every endpoint given up on and why ("; "-separated).
    const std::string& failures() const noexcept { return failures_; }
    /// Every endpoint given up on timed out.
    bool all_timeouts() const noexcept { return all_timeouts_; }

    /// The current endpoint is given up on with `ec`, diag saying why.
    void note_failure(const error_code& ec, const diagnostics& diag) {
        if (!failures_.empty())
            failures_ += "; ";
        failures_ += diag.message;
        if (ec != errc::timeout)
            all_timeouts_ = false;
    }

    /// Moves to the next endpoint; false when every one was tried or the
    /// operation was cancelled.
    bool next(http_op_state& st) {
        if (moves_ + 1 >= count_ || st.cancelled)
            return false;
        ++moves_;
        const std::size_t next = (at_ + 1) % count_;
        std::size_t expected = at_; // another statement may have moved it already
        pool_.current.compare_exchange_strong(expected, next);
        pool_.failovers.fetch_add(1);
        at_ = next;
        st.timed_out = false; // a connect timeout on the previous endpoint
        return true;
    }

private:
    http_pool& pool_;
    std::size_t count_;
    std::size_t at_;
    std::size_t moves_ = 0;
    std::string failures_;
    bool all_timeouts_ = true;
};

/// An exception out of a statement's coroutine, as its error: out of memory
/// as not_enough_memory, anything else (a length Boost.Beast refuses, say)
/// as invalid_argument, its what() in diag.
CHSTATE_DECL error_code error_from_exception(std::exception_ptr e, diagnostics& diag) {
    try {
        std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
        diag.message = "out of memory while sending the statement or reading its reply";
        return make_error_code(boost::system::errc::not_enough_memory);
    } catch (const std::exception& x) {
        diag.message = std::string("the statement could not be sent: ") + x.what();
    } catch (...) {
        diag.message = "the statement could not be sent: an unknown exception";
    }
    return make_error_code(errc::invalid_argument);
}

/// One statement, start to end.
CHSTATE_DECL asio::awaitable<error_code> run_statement(std::shared_ptr<http_pool> pool,
                                                       std::shared_ptr<http_op_state> st, const statement* stmt,
                                                       result_sink sink, diagnostics* diag) {
    const http_options& o = pool->options;
    // Nothing that could inject a header is sent: refused before connecting.
    if (auto vec = validate_http_options(o, *diag))
        co_return vec;
    const auto deadline = std::chrono::steady_clock::now() + o.request_timeout;
    http_request req;
    bool status_final = false;
    if (auto bec = make_request(o, *stmt, req, status_final, *diag))
        co_return bec;
    failover_walk walk(*pool);
    bool force_fresh = false;
    bool retried_here = false; // the one retry on this endpoint (reused connection lost, or not parsed)
    std::unique_ptr<http_connection> conn;
    // 1. a slot (and maybe a kept-alive connection to this endpoint), kept to the end
    if (auto sec = co_await take_slot(pool, st, walk.at(), deadline, conn, *diag))
        co_return sec;
    for (;;) {
        const bool reused = conn != nullptr && !force_fresh;
        if (force_fresh && conn) {
            conn->close();
            conn.reset();
        }
        force_fresh = false;
        // 2. a connection
        if (!conn) {
            if (auto ec = co_await open_connection(pool, st, walk.at(), conn, *diag)) {
                const bool unreachable = !st->cancelled && (ec == errc::connection_failed || ec == errc::timeout);
                if (unreachable) {
                    walk.note_failure(ec, *diag);
                    if (walk.next(*st)) {
                        retried_here = false;
                        continue; // keep the slot, connect to the next endpoint
                    }
                }
                pool->give_back(nullptr);
                if (unreachable && walk.moves() > 0) {
                    diag->message = "no endpoint answered (" + std::to_string(walk.moves() + 1) + " of " +
                                    std::to_string(walk.count()) + " tried): " + walk.failures();
                    co_return make_error_code(walk.all_timeouts() ? errc::timeout : errc::connection_failed);
                }
                co_return ec;
            }
        }
        // 3. the exchange, under the request timeout
        const endpoint& server = pool->endpoints[walk.at()];
        req.set(http::field::host, host_port(server.host, server.port));
        st->conn = conn.get();
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        st->arm(std::max(left, std::chrono::milliseconds(1)), st);
        connection_stream stream(*conn); // TLS or TCP
        const exchange_result r = co_await exchange(stream, *conn, *st, req, status_final, sink, *diag);
        st->watchdog.cancel();
        st->conn = nullptr;
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
            walk.moves() + 1 < walk.count()) {
            diag->message = host_port(server.host, server.port) + ": " + diag->message;
            walk.note_failure(r.ec, *diag);
            conn->close();
            conn.reset();
            walk.next(*st);
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
        if (r.ec && walk.moves() > 0)
            diag->message += " (after failing over from: " + walk.failures() + ")";
        co_return unknown_if_sent(r, *stmt, *diag);
    }
}

} // namespace detail

CHSTATE_DECL http_transport::http_transport(executor_type ex, http_options options)
    : pool_(std::make_shared<detail::http_pool>(std::move(ex), std::move(options))) {
#ifndef CHSTATE_NO_TLS
    detail::set_up_tls(*pool_);
#endif
}

CHSTATE_DECL http_transport::executor_type http_transport::get_executor() const noexcept { return pool_->ex; }

CHSTATE_DECL const http_options& http_transport::options() const noexcept { return pool_->options; }

CHSTATE_DECL std::size_t http_transport::pool_peak() const {
    std::lock_guard lk(pool_->mutex);
    return pool_->peak_open;
}

CHSTATE_DECL std::size_t http_transport::pool_open() const {
    std::lock_guard lk(pool_->mutex);
    return pool_->open;
}

CHSTATE_DECL std::size_t http_transport::connections_opened() const noexcept {
    return pool_->connections_opened.load();
}

CHSTATE_DECL const std::vector<endpoint>& http_transport::endpoints() const noexcept { return pool_->endpoints; }

CHSTATE_DECL std::size_t http_transport::current_endpoint() const noexcept { return pool_->current.load(); }

CHSTATE_DECL std::size_t http_transport::failovers() const noexcept { return pool_->failovers.load(); }

CHSTATE_DECL void http_transport::start(const std::shared_ptr<detail::http_pool>& pool, const statement& stmt,
                                        result_sink sink, diagnostics& diag, handler_type handler) {
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
    asio::co_spawn(strand, detail::run_statement(pool, st, &stmt, std::move(sink), &diag),
                   [h = std::move(handler), work = std::move(work), st, &diag](std::exception_ptr e,
                                                                                error_code ec) mutable {
                       // run_statement reports errors as values; an exception
                       // that still gets out (memory, or a library's limit)
                       // becomes one too: rethrown here, on a pool thread,
                       // it would end the caller's process.
                       if (e)
                           ec = detail::error_from_exception(e, diag);
                       // The cancellation slot is left as it is: it belongs
                       // to the caller's strand, which may be emitting into
                       // it now (transport/http.hpp, "Cancellation";
                       // detail::hand_back clears it there).
                       st->watchdog.cancel();
                       // The work guard keeps the handler's executor (for a
                       // store, the plain one beneath its operation's strand:
                       // detail::hand_back) from running out of work while the
                       // statement is in flight, so a caller's run() waits for
                       // it. It travels with the completion and is released on
                       // that executor, just before the handler: released
                       // here, run() could return (and its io_context be
                       // destroyed) while this thread is still posting to it.
                       auto ex = work.get_executor();
                       asio::dispatch(ex, [h = std::move(h), ec, work = std::move(work)]() mutable {
                           work.reset();
                           std::move(h)(ec);
                       });
                   });
}

} // namespace chstate
