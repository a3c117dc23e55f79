// chstate/clock.hpp — the Clock concept and the real clock.
//
// The store never reads a system clock or starts a timer itself: every wait
// (lock settle, retry interval) and every time it compares (a lock's age,
// the lock deadline) goes through its Clock. A Clock is a small copyable
// value with two members:
//
//   time_point now() const;
//       The current wall time, as std::chrono::system_clock::time_point.
//       Lock rows are stamped with it, so a test ages a lock by advancing
//       the clock.
//
//   async_wait(executor, duration, CompletionToken)
//       Completes with void(error_code) once `duration` has passed, or with
//       asio::error::operation_aborted when the operation's cancellation
//       slot fires. The handler runs on its associated executor, defaulting
//       to `executor`.
//
// chstate::real_clock (below) uses the system clock and asio::steady_timer;
// chstate::manual_clock (manual_clock.hpp) is simulated time for tests.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/consign.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <concepts>
#include <memory>

namespace chstate {

namespace asio = boost::asio;

using time_point = std::chrono::system_clock::time_point;
using duration = std::chrono::milliseconds;

/// What the store needs from a clock. See the header comment.
template <class C>
concept clock = std::copy_constructible<C> &&
    requires(C& c, const C& cc, asio::any_io_executor ex, duration d) {
        { cc.now() } -> std::same_as<time_point>;
        c.async_wait(ex, d, asio::deferred);
    };

/// Wall time from std::chrono::system_clock; waits on asio::steady_timer,
/// so stepping the wall clock does not stretch or shorten a wait.
class real_clock {
public:
    time_point now() const { return std::chrono::system_clock::now(); }

    template <class CompletionToken>
    auto async_wait(asio::any_io_executor ex, duration d, CompletionToken&& token) {
        auto timer = std::make_shared<asio::steady_timer>(std::move(ex), d);
        auto& t = *timer;
        // The timer lives until the wait completes: moved into the handler chain.
        return t.async_wait(asio::consign(std::forward<CompletionToken>(token), std::move(timer)));
    }
};

static_assert(clock<real_clock>);

} // namespace chstate
