// chstate/detail/engine.hpp — the one place a store reaches its transport and
// its clock.
//
// Everything above this file (the session, the operations, both lock
// protocols) is ordinary code over `engine`, an abstract class: it is
// compiled once whatever the store's Transport and Clock, and a test can
// put a scripted engine, or a scripted transport, beneath it.
//
// An engine sends one statement as it is (no inlining, no retries: the
// session does those) and waits on the store's Clock. Both honour the
// awaiting coroutine's cancellation slot unless told not to: a cleanup
// statement (giving back a lock row after a failure or a cancellation) is
// sent with cancellation::ignore, so the cancellation that caused it cannot
// also stop it.
#pragma once

#include <chstate/clock.hpp>
#include <chstate/error.hpp>
#include <chstate/transport.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <concepts>
#include <utility>

namespace chstate::detail {

namespace asio = boost::asio;

/// Whether a statement or wait may be cut short by the operation's cancellation.
enum class cancellation { honour, ignore };

class engine {
public:
    virtual ~engine() = default;

    /// The executor the store runs its operations on by default.
    virtual asio::any_io_executor get_executor() const = 0;
    /// What the transport declares beyond the concept (transport.hpp).
    virtual transport_traits traits() const = 0;
    /// The store's Clock.
    virtual time_point now() const = 0;
    /// The store's Clock, on its steady time (clock.hpp: steady_now), in ms.
    virtual std::uint64_t steady_ms() const = 0;

    /// Sends one statement; reply bytes go to `sink`.
    virtual asio::awaitable<error_code> send(const statement& stmt, const result_sink& sink, diagnostics& diag,
                                             cancellation c) = 0;
    /// Completes after `d` on the store's Clock (operation_aborted when
    /// cancelled). `deadline`: the wait only bounds work raced against it
    /// (lock.timeout), which may finish first; a blocking call's deadline
    /// on a simulated clock nothing drives is left pending, not refused.
    virtual asio::awaitable<error_code> wait(duration d, cancellation c, bool deadline = false) = 0;

    /// True when the calling thread runs the transport's executor: a
    /// blocking call from it would wait for a thread it is itself holding.
    virtual bool runs_transport_here() const = 0;
};

/// An RAII mark, on a clock that tracks activity (manual_clock), that a
/// statement is in flight, so simulated time does not jump past its reply.
/// Other clocks: nothing.
template <class Clock>
auto begin_activity(Clock& c) {
    if constexpr (requires { c.begin_activity(); })
        return c.begin_activity();
    else
        return 0;
}

/// The executor beneath any strands in `ex`: an io_context's, a
/// thread_pool's, the system executor, or `ex` itself when it is of a kind
/// this cannot see into.
inline asio::any_io_executor beneath_strands(asio::any_io_executor ex) {
    for (;;) {
        if (auto* s = ex.template target<asio::strand<asio::any_io_executor>>()) {
            asio::any_io_executor inner = s->get_inner_executor();
            ex = std::move(inner);
            continue;
        }
        if (auto* s = ex.template target<asio::strand<asio::io_context::executor_type>>())
            return s->get_inner_executor();
        if (auto* s = ex.template target<asio::strand<asio::thread_pool::executor_type>>())
            return s->get_inner_executor();
        return ex;
    }
}

/// True when the calling thread is running `ex` (an io_context's, a
/// thread_pool's or a strand of either, as any_io_executor holds them; for a
/// strand, the executor beneath it); false for executors it cannot ask.
template <class Executor>
bool running_in_this_thread(const Executor& ex) {
    if constexpr (requires { ex.running_in_this_thread(); })
        return ex.running_in_this_thread();
    else if constexpr (std::same_as<Executor, asio::any_io_executor>) {
        const asio::any_io_executor beneath = beneath_strands(ex);
        if (auto* e = beneath.template target<asio::io_context::executor_type>())
            return e->running_in_this_thread();
        if (auto* e = beneath.template target<asio::thread_pool::executor_type>())
            return e->running_in_this_thread();
        return false;
    } else
        return false;
}

/// The completion handler a transport is given: `resume` (the awaiting
/// coroutine, on the operation's strand) behind an associated executor that
/// is the plain one beneath that strand.
///
/// Why: a transport completes from threads of its own (chDB's, the HTTP
/// pool's). Handed the strand itself, such a thread still holds copies of it
/// for a moment after posting the completion, and the last copy of an Asio
/// strand, when it goes, locks its io_context's strand service. Meanwhile
/// the completion can run, the caller's run() return and the io_context be
/// destroyed: the transport thread then locks freed memory (seen as a
/// SIGSEGV or a glibc mutex assertion in the HTTPS lock tests, about one run
/// in five under load). Copies of a plain io_context executor hold nothing
/// when they go, so the transport thread never touches the caller's
/// context after the post; the hop onto the strand happens on the caller's
/// own thread.
///
/// The cancellation slot is cleared there too, on the operation's strand,
/// where its signal is emitted: a transport thread clearing it could free
/// the handler while the strand emits into it.
template <class Resume>
auto hand_back(Resume resume, asio::cancellation_slot slot) {
    auto strand = asio::get_associated_executor(resume);
    auto beneath = beneath_strands(strand);
    return asio::bind_cancellation_slot(
        slot, asio::bind_executor(std::move(beneath), [resume = std::move(resume), strand = std::move(strand), slot](
                                                          error_code ec) mutable {
            asio::dispatch(strand, [resume = std::move(resume), ec, slot]() mutable {
                if (slot.is_connected())
                    slot.clear();
                std::move(resume)(ec);
            });
        }));
}

/// The blocking call (launch.hpp, run_blocking) this thread is making, if
/// any: its operation runs on this thread, so a clock wait started here is
/// that call's. A wait refused because nothing drives a simulated clock
/// (clock.hpp, driven()) is noted for the call to say why it failed.
struct blocking_call {
    bool refused_undriven_wait = false;
};
inline blocking_call*& blocking_call_here() noexcept {
    thread_local blocking_call* current = nullptr;
    return current;
}

/// The engine of basic_state_store<Transport, Clock>.
template <class Transport, class Clock>
class transport_engine final : public engine {
public:
    transport_engine(asio::any_io_executor ex, Transport transport, Clock clock)
        : ex_(std::move(ex)), transport_(std::move(transport)), clock_(std::move(clock)) {}

    asio::any_io_executor get_executor() const override { return ex_; }

    transport_traits traits() const override {
        if constexpr (requires(const Transport& t) {
                          { t.traits() } -> std::same_as<transport_traits>;
                      })
            return transport_.traits();
        else
            return traits_of<Transport>();
    }

    time_point now() const override { return clock_.now(); }
    std::uint64_t steady_ms() const override { return detail::steady_ms(clock_); }

    asio::awaitable<error_code> send(const statement& stmt, const result_sink& sink, diagnostics& diag,
                                     cancellation c) override {
        diag.clear();
        [[maybe_unused]] auto in_flight = begin_activity(clock_);
        auto token = asio::as_tuple(asio::use_awaitable);
        auto [ec] = co_await asio::async_initiate<decltype(token), void(error_code)>(
            [this, &stmt, &sink, &diag, c](auto resume) {
                // The coroutine's cancellation slot, or none: a cleanup
                // statement is not stopped by the cancellation that caused it.
                auto slot = c == cancellation::ignore ? asio::cancellation_slot()
                                                      : asio::get_associated_cancellation_slot(resume);
                transport_.async_execute(stmt, sink, diag, hand_back(std::move(resume), slot));
            },
            token);
        co_return ec;
    }

    asio::awaitable<error_code> wait(duration d, cancellation c, bool deadline) override {
        if constexpr (requires(const Clock& k) {
                          { k.driven() } -> std::convertible_to<bool>;
                      }) {
            // A blocking call's wait on a simulated clock nothing drives
            // would never end: refused, as a failed wait (an error the
            // protocol already cleans up after). A deadline raced against
            // the work may stay pending: the work, if it need not wait,
            // ends first.
            if (blocking_call* call = blocking_call_here();
                call && !deadline && d > duration::zero() && !clock_.driven()) {
                call->refused_undriven_wait = true;
                co_return make_error_code(errc::would_deadlock);
            }
        }
        auto ex = co_await asio::this_coro::executor;
        if (c == cancellation::ignore) {
            auto [ec] = co_await clock_.async_wait(
                ex, d, asio::bind_cancellation_slot(asio::cancellation_slot(), asio::as_tuple(asio::use_awaitable)));
            co_return ec;
        }
        auto [ec] = co_await clock_.async_wait(ex, d, asio::as_tuple(asio::use_awaitable));
        co_return ec;
    }

    bool runs_transport_here() const override {
        if constexpr (requires(const Transport& t) { t.get_executor(); })
            return running_in_this_thread(transport_.get_executor());
        else
            return false;
    }

    Transport& transport() noexcept { return transport_; }
    Clock& clock() noexcept { return clock_; }

private:
    asio::any_io_executor ex_;
    Transport transport_;
    Clock clock_;
};

} // namespace chstate::detail
