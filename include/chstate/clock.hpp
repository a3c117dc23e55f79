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
// And two optional members:
//
//   bool driven() const;
//       For a simulated clock, whose waits complete only when something
//       advances it: whether something does now. A blocking store call
//       whose operation would wait on such a clock while it is not driven
//       fails at once with errc::would_deadlock instead of waiting forever.
//       A clock without it (real_clock) is taken to move by itself.
//
//   duration steady_now() const;
//       Time on a clock that never steps, since any fixed origin (for
//       real_clock, std::chrono::steady_clock). The strict lock bounds its
//       lease with it, from just before it sent the claim or renewal: a
//       wall clock that steps (NTP, a resumed VM) then neither stretches
//       nor shortens what the holder believes it holds. A clock without it
//       has now() used instead.
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
#include <cstdint>
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

    /// std::chrono::steady_clock's time since its origin.
    duration steady_now() const {
        return std::chrono::duration_cast<duration>(std::chrono::steady_clock::now().time_since_epoch());
    }

    template <class CompletionToken>
    auto async_wait(asio::any_io_executor ex, duration d, CompletionToken&& token) {
        auto timer = std::make_shared<asio::steady_timer>(std::move(ex), d);
        auto& t = *timer;
        // The timer lives until the wait completes: moved into the handler chain.
        return t.async_wait(asio::consign(std::forward<CompletionToken>(token), std::move(timer)));
    }
};

static_assert(clock<real_clock>);

namespace detail {
/// A Clock's steady_now() in milliseconds; its now() when it has none.
template <class Clock>
std::uint64_t steady_ms(const Clock& c) {
    std::int64_t ms;
    if constexpr (requires { { c.steady_now() } -> std::convertible_to<duration>; })
        ms = duration(c.steady_now()).count();
    else
        ms = std::chrono::duration_cast<duration>(c.now().time_since_epoch()).count();
    return ms < 0 ? 0 : static_cast<std::uint64_t>(ms);
}
} // namespace detail

} // namespace chstate
