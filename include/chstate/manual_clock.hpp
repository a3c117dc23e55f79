// chstate/manual_clock.hpp — simulated time for tests (yours and ours).
//
// A manual_clock is a handle on a shared timeline: copies see the same time.
// Time moves only when the test says so, and waits complete when time
// reaches their deadline, without any real sleeping:
//
//     asio::io_context ioc;
//     chstate::manual_clock clock;                  // starts at the current second
//     auto fut = asio::co_spawn(ioc, my_job(clock), asio::use_future);
//     clock.run(ioc);   // run everything; when only clock waits are left,
//                       // jump to the next deadline; repeat until idle
//
// Time advances only when nothing else can progress: no handler is ready
// on the io_context and no statement is in flight. The store marks each
// statement it sends with begin_activity() (any code of yours that starts
// I/O the simulated world must wait for can do the same), so run() blocks
// for a reply instead of jumping past it.
//
// Something must drive the clock while a store waits on it: run() does, for
// as long as it runs, and so does a `driving` mark (drive()) held by a
// thread that advances the clock while another thread makes a blocking
// call. A blocking call (store.update(…), not async_update) whose operation
// has to wait on a clock that nothing drives would wait forever: it fails
// at once with errc::would_deadlock instead, saying how to drive the clock.
//
// skewed(offset) gives a handle whose now() reads `offset` ahead (or behind)
// while sharing the timeline: two clients with disagreeing clocks.
// with_wall_steps() gives a handle whose wall clock a test can step while
// a store holds a copy of it (step_wall: NTP, a resumed VM); steady_now()
// reads the timeline itself, which never steps, for every handle.
#pragma once

#include <chstate/clock.hpp>
#include <chstate/error.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>

namespace chstate {

class manual_clock {
    struct waiter {
        std::function<void(error_code)> complete; // posts the handler to its executor
    };

    struct timeline {
        std::mutex mutex;
        time_point now;
        std::uint64_t next_id = 0;
        // (deadline, sequence) keeps equal deadlines in the order the waits began.
        std::map<std::pair<time_point, std::uint64_t>, waiter> waiters;
        std::atomic<int> in_flight{0};
        std::atomic<int> drivers{0};
    };

public:
    /// Starts at the current wall time, rounded down to a second. Rows the
    /// store stamps then look recent to a real engine, whose TTL (on the
    /// lock table) runs on the engine's own clock.
    manual_clock() : manual_clock(std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now())) {}

    /// Starts at `start` (for fully reproducible runs on a simulated engine).
    explicit manual_clock(time_point start) : timeline_(std::make_shared<timeline>()) {
        timeline_->now = start;
    }

    /// Simulated now, plus this handle's skew and steps.
    time_point now() const {
        const duration stepped = steps_ ? duration(steps_->load()) : duration::zero();
        std::lock_guard lk(timeline_->mutex);
        return timeline_->now + skew_ + stepped;
    }

    /// Simulated time since the epoch, without skew or steps: the clock
    /// that never steps (clock.hpp), the same for every handle.
    duration steady_now() const { return std::chrono::duration_cast<duration>(now_unskewed().time_since_epoch()); }

    /// A handle on the same timeline whose wall clock step_wall() moves —
    /// in every copy of it, such as the one a store holds.
    manual_clock with_wall_steps() const {
        manual_clock c = *this;
        c.steps_ = std::make_shared<std::atomic<duration::rep>>(0);
        return c;
    }

    /// Steps this handle's wall clock (now()) by `d`, forward or back, as
    /// NTP or a resumed VM does; waits and steady_now() are unaffected.
    /// Only on a handle from with_wall_steps().
    void step_wall(duration d) {
        if (!steps_)
            throw std::logic_error("manual_clock::step_wall needs a handle from with_wall_steps()");
        steps_->fetch_add(d.count());
    }

    /// A handle on the same timeline whose now() reads `offset` away.
    manual_clock skewed(duration offset) const {
        manual_clock c = *this;
        c.skew_ += offset;
        return c;
    }

    /// Completes once simulated time has advanced by `d` (immediately, via
    /// post, when d <= 0). Supports per-operation cancellation.
    template <class CompletionToken>
    auto async_wait(asio::any_io_executor ex, duration d, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            // (named, not `this`: Clang 14's -Wunused-lambda-capture misses a
            // member call inside a generic lambda)
            [self = this](auto handler, asio::any_io_executor ex, duration d) {
                self->start_wait(std::move(handler), std::move(ex), d);
            },
            token, std::move(ex), d);
    }

    /// Moves time forward by `d`, completing every wait that falls due, in
    /// deadline order. Handlers are posted, not run inline.
    void advance(duration d) { advance_to(now_unskewed() + d); }

    /// Moves time to `t` (never backwards), completing due waits.
    void advance_to(time_point t) {
        for (;;) {
            std::function<void(error_code)> complete;
            {
                std::lock_guard lk(timeline_->mutex);
                auto it = timeline_->waiters.begin();
                if (it == timeline_->waiters.end() || it->first.first > t) {
                    if (t > timeline_->now)
                        timeline_->now = t;
                    return;
                }
                if (it->first.first > timeline_->now)
                    timeline_->now = it->first.first;
                complete = std::move(it->second.complete);
                timeline_->waiters.erase(it);
            }
            complete(error_code{});
        }
    }

    /// Jumps to the earliest pending deadline; false when nothing waits.
    bool advance_to_next() {
        auto next = next_deadline();
        if (!next)
            return false;
        advance_to(*next);
        return true;
    }

    /// The earliest pending deadline, in unskewed timeline time.
    std::optional<time_point> next_deadline() const {
        std::lock_guard lk(timeline_->mutex);
        if (timeline_->waiters.empty())
            return std::nullopt;
        return timeline_->waiters.begin()->first.first;
    }

    /// Number of waits not yet completed.
    std::size_t pending_waits() const {
        std::lock_guard lk(timeline_->mutex);
        return timeline_->waiters.size();
    }

    /// One of the timeline's counts, held up while the mark lives (the
    /// marks below: work in flight, a thread driving the clock).
    template <std::atomic<int> timeline::*Count>
    class counted_mark {
    public:
        explicit counted_mark(std::shared_ptr<timeline> t) : t_(std::move(t)) { ++((*t_).*Count); }
        counted_mark(counted_mark&& o) noexcept : t_(std::move(o.t_)) {}
        counted_mark(const counted_mark&) = delete;
        counted_mark& operator=(const counted_mark&) = delete;
        counted_mark& operator=(counted_mark&&) = delete;
        ~counted_mark() {
            if (t_)
                --((*t_).*Count);
        }

    private:
        std::shared_ptr<timeline> t_;
    };

    /// Marks work in flight outside the io_context (a statement sent to an
    /// engine) until the returned guard is destroyed; run() waits for it.
    using activity = counted_mark<&timeline::in_flight>;
    activity begin_activity() const { return activity(timeline_); }

    /// Marks, until it is destroyed, that a thread drives this timeline
    /// (advances it while others wait on it): see driven().
    using driving = counted_mark<&timeline::drivers>;
    /// Hold the result on the thread that advances the clock while another
    /// thread makes blocking store calls on it:
    ///
    ///     auto driver = clock.drive();
    ///     std::thread job([&] { store.update(s); });   // may wait on the clock
    ///     while (!done)
    ///         if (auto next = clock.next_deadline(); next && *next - clock.now() < 1min)
    ///             clock.advance_to_next();
    ///
    /// Move time only to a near wait (a lock round, the settle): the thread
    /// driving cannot see the call's statements in flight (run() can), and
    /// jumping meanwhile — to the lock's far deadline, or by fixed steps
    /// while a busy machine starves the call — can expire the call's own
    /// lease under it. run() drives the clock for as long as it runs,
    /// without this mark. (A wait completed from the driving thread keeps
    /// its handler's io_context running until this thread holds no copy of
    /// its executor: see start_wait.)
    [[nodiscard]] driving drive() const { return driving(timeline_); }

    /// True while run() runs or a drive() mark is held on this timeline.
    /// The store asks before a blocking call waits on the clock (clock.hpp):
    /// nothing driving it, the wait would never end.
    bool driven() const { return timeline_->drivers.load() > 0; }

    /// Runs `ioc`, advancing simulated time to the next deadline whenever no
    /// handler is ready and no activity is in flight, until nothing is left
    /// to run or wait for. Returns the simulated time that passed. Stops
    /// early (leaving waits pending) once the next deadline lies more than
    /// `limit` ahead of the start, so a test of a hung job terminates.
    duration run(asio::io_context& ioc, duration limit = std::chrono::hours(24 * 365)) {
        const driving driver(timeline_);
        const time_point start = now_unskewed();
        for (;;) {
            ioc.restart();
            if (ioc.poll() > 0)
                continue;
            if (timeline_->in_flight.load() > 0) {
                ioc.restart();
                ioc.run_one(); // blocks until the reply's handler is ready, and runs it
                continue;
            }
            auto next = next_deadline();
            if (!next || *next - start > limit)
                break;
            advance_to(*next);
        }
        return std::chrono::duration_cast<duration>(now_unskewed() - start);
    }

private:
    time_point now_unskewed() const {
        std::lock_guard lk(timeline_->mutex);
        return timeline_->now;
    }

    template <class Handler>
    void start_wait(Handler handler, asio::any_io_executor ex, duration d) {
        auto slot = asio::get_associated_cancellation_slot(handler);
        using handler_executor = asio::associated_executor_t<Handler, asio::any_io_executor>;
        // The handler and its executor, shared so both the timeline and a
        // cancellation can complete it, once (the timeline's mutex decides
        // which). The executor is held here and nowhere else, so completing
        // can give up every copy of it before it lets the handler's
        // io_context stop.
        struct pending {
            std::optional<Handler> handler;
            std::optional<handler_executor> executor;
        };
        auto shared = std::make_shared<pending>();
        shared->executor.emplace(asio::get_associated_executor(handler, ex));
        shared->handler.emplace(std::move(handler));
        auto complete = [shared](error_code ec) {
            if (!shared->handler)
                return;
            // Completing from the thread that advances the clock: the moment
            // the handler is posted, the thread running it may finish the
            // call and destroy its io_context (a blocking call does), while
            // this thread still holds copies of the executor (a strand's
            // impl, whose destructor reaches its service). Tracked work
            // keeps that io_context running until every copy this thread
            // holds is gone; it is given up last (locals are destroyed in
            // reverse order, and a strand releases its impl before its inner
            // executor's work).
            const auto work = asio::prefer(*shared->executor, asio::execution::outstanding_work.tracked);
            Handler h = std::move(*shared->handler);
            shared->handler.reset();
            auto hex = std::move(*shared->executor);
            shared->executor.reset();
            asio::post(hex, [h = std::move(h), ec]() mutable { std::move(h)(ec); });
        };
        if (d <= duration::zero()) {
            complete(error_code{});
            return;
        }
        std::pair<time_point, std::uint64_t> key;
        {
            std::lock_guard lk(timeline_->mutex);
            key = {timeline_->now + d, timeline_->next_id++};
            timeline_->waiters.emplace(key, waiter{complete});
        }
        if (slot.is_connected()) {
            std::weak_ptr<timeline> weak = timeline_;
            slot.assign([weak, key, complete](asio::cancellation_type) {
                if (auto tl = weak.lock()) {
                    std::unique_lock lk(tl->mutex);
                    if (tl->waiters.erase(key) == 0)
                        return; // already completed
                }
                complete(asio::error::operation_aborted);
            });
        }
    }

    std::shared_ptr<timeline> timeline_;
    duration skew_{0};
    std::shared_ptr<std::atomic<duration::rep>> steps_; ///< with_wall_steps(): shared by copies
};

static_assert(clock<manual_clock>);

} // namespace chstate
