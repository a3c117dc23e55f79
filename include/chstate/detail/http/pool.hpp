// chstate/detail/http/pool.hpp — http_transport's connections: one
// kept-alive connection (TCP, TLS over it when secure), the bounded pool
// that copies of a transport share (slots, idle connections per endpoint,
// waiters for a free slot), and the state one operation shares with its
// watchdog timer and cancellation handler. transport/http.hpp's header
// comment says when a connection is reused.
#pragma once

#include <chstate/detail/config/endpoints.hpp>
#include <chstate/error.hpp>
#include <chstate/transport/http_options.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#ifndef CHSTATE_NO_TLS
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#endif

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace chstate::detail {

namespace beast = boost::beast;
using tcp = asio::ip::tcp;

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

} // namespace chstate::detail
