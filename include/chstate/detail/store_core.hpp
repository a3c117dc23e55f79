// chstate/detail/store_core.hpp — what a store is made of, shared by the
// store, its operations in flight and its leases.
//
// A store holds its core through a shared_ptr, and so does every operation
// while it runs and every lease: destroying the store never pulls the
// session or the transport from under them. Destruction cancels what is in
// flight, as destroying an Asio I/O object does: each operation completes
// with operation_aborted at its next step (its cleanup still runs), and
// the core goes when the last of them has.
//
// Background work. Some work outlives the operation that started it: an
// acquire that stopped waiting at its deadline leaves its protocol to end
// apart, and gives back whatever that protocol still wins
// (lock/acquire.hpp). start_background() runs such work on a strand of
// background_executor(), holding the core; destroying the store cancels it
// as it cancels operations, and settled() waits until none is left.
#pragma once

#include <chstate/detail/session.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>

#include <exception>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace chstate::detail {

/// One operation in flight: it runs on its own strand, where its
/// cancellation signal is emitted (a cancellation from any thread is
/// posted there first, so it never races the operation).
class op_control : public std::enable_shared_from_this<op_control> {
public:
    explicit op_control(asio::any_io_executor strand) : strand_(std::move(strand)) {}

    const asio::any_io_executor& strand() const noexcept { return strand_; }
    asio::cancellation_slot slot() noexcept { return signal_.slot(); }

    /// Asks the operation to stop; any thread.
    void request_cancel(asio::cancellation_type type) {
        asio::post(strand_, [self = shared_from_this(), type] {
            if (!self->finished_)
                self->signal_.emit(type);
        });
    }
    /// Called on the strand when the operation has completed.
    void finish() noexcept { finished_ = true; }

private:
    asio::any_io_executor strand_;
    asio::cancellation_signal signal_;
    bool finished_ = false; ///< on the strand only
};

/// A signal sent once, from any thread, and awaited once: whichever
/// comes first, the other completes at once. The channel runs on `ex`, so
/// nothing of the waiter's executor stays behind in it after the wait.
class one_shot {
public:
    explicit one_shot(const asio::any_io_executor& ex) : channel_(ex, 1) {}
    void notify() { channel_.try_send(error_code{}); }
    /// Completes when notified (at once if it was); operation_aborted when cancelled.
    asio::awaitable<error_code> wait() {
        auto [ec] = co_await channel_.async_receive(asio::as_tuple(asio::use_awaitable));
        co_return ec;
    }

private:
    asio::experimental::concurrent_channel<void(error_code)> channel_;
};

class store_core : public std::enable_shared_from_this<store_core> {
public:
    store_core(std::unique_ptr<engine> e, store_options options)
        : engine_(std::move(e)), session_(*engine_, std::move(options)) {
        session_.belongs_to(this);
    }
    store_core(const store_core&) = delete;
    store_core& operator=(const store_core&) = delete;

    engine& eng() noexcept { return *engine_; }
    session& sess() noexcept { return session_; }
    asio::any_io_executor executor() const { return engine_->get_executor(); }

    /// Where background work started by an operation running on `here`
    /// runs: the store's executor when the operation runs there (an async
    /// call: whoever runs it keeps it running, and a test driving simulated
    /// time sees every step), else the transport's (a blocking call's own
    /// io_context stops when the call returns).
    asio::any_io_executor background_executor(const asio::any_io_executor& here) const {
        const asio::any_io_executor store = executor();
        return beneath_strands(here) == beneath_strands(store) ? store : engine_->background_executor();
    }

    void add(const std::shared_ptr<op_control>& op) {
        std::lock_guard lk(mutex_);
        in_flight_.insert(op);
    }
    void remove(const std::shared_ptr<op_control>& op) {
        std::lock_guard lk(mutex_);
        in_flight_.erase(op);
    }
    /// Cancels every operation in flight, background work included (the
    /// store is going away).
    void cancel_all() {
        std::unordered_set<std::shared_ptr<op_control>> ops;
        {
            std::lock_guard lk(mutex_);
            ops = in_flight_;
        }
        for (const auto& op : ops)
            op->request_cancel(asio::cancellation_type::terminal);
    }

    /// Background work still running.
    std::size_t background() const {
        std::lock_guard lk(mutex_);
        return background_;
    }
    /// Completes once no background work is left (at once if none is).
    asio::awaitable<error_code> settled() {
        std::shared_ptr<one_shot> idle;
        {
            std::lock_guard lk(mutex_);
            if (background_ == 0)
                co_return error_code{};
            idle = std::make_shared<one_shot>(engine_->background_executor());
            idle_waiters_.push_back(idle);
        }
        co_return co_await idle->wait();
    }

private:
    template <class Work>
    friend std::shared_ptr<op_control> start_background(const std::shared_ptr<store_core>& core,
                                                        const asio::any_io_executor& ex, Work work);

    void background_started() {
        std::lock_guard lk(mutex_);
        ++background_;
    }
    void background_ended() {
        std::vector<std::shared_ptr<one_shot>> waiters;
        {
            std::lock_guard lk(mutex_);
            if (--background_ == 0)
                waiters = std::exchange(idle_waiters_, {});
        }
        for (const auto& w : waiters)
            w->notify();
    }

    std::unique_ptr<engine> engine_;
    session session_;
    mutable std::mutex mutex_;
    std::unordered_set<std::shared_ptr<op_control>> in_flight_;
    std::size_t background_ = 0;
    std::vector<std::shared_ptr<one_shot>> idle_waiters_;
};

/// `work(session&)`, an awaitable<void> that reports to nobody, run apart
/// from any operation (the header comment): on a strand of `ex`
/// (background_executor()), holding the core, cancelled with the store.
/// Returns its control, to cancel it sooner.
template <class Work>
std::shared_ptr<op_control> start_background(const std::shared_ptr<store_core>& core, const asio::any_io_executor& ex,
                                             Work work) {
    auto ctl = std::make_shared<op_control>(asio::make_strand(ex));
    core->add(ctl);
    core->background_started();
    auto body = [](std::shared_ptr<store_core> core, Work work) -> asio::awaitable<void> {
        co_await asio::this_coro::throw_if_cancelled(false);
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        try {
            co_await work(core->sess());
        } catch (...) {
            // Nobody to tell: background work is cleanup, and what it could
            // not give back still ages out (lease_ttl, stale_age).
        }
    };
    asio::co_spawn(ctl->strand(), body(core, std::move(work)),
                   asio::bind_cancellation_slot(ctl->slot(), [core, ctl](std::exception_ptr) mutable {
                       ctl->finish();
                       core->remove(ctl);
                       core->background_ended();
                   }));
    return ctl;
}

/// The engine of a core with no store behind it (a lease that is not
/// held): it sends nothing.
class null_engine final : public engine {
public:
    asio::any_io_executor get_executor() const override { return asio::system_executor(); }
    asio::any_io_executor background_executor() const override { return asio::system_executor(); }
    transport_traits traits() const override { return {}; }
    time_point now() const override { return {}; }
    std::uint64_t steady_ms() const override { return 0; }
    asio::awaitable<error_code> send(const statement&, const result_sink&, diagnostics& diag, cancellation) override {
        diag.message = "no store: the lease is not held";
        co_return make_error_code(errc::lock_lost);
    }
    asio::awaitable<error_code> wait(duration, cancellation) override { co_return error_code{}; }
    bool runs_transport_here() const override { return false; }
};

/// The core operations of a lease that is not held run on (they complete
/// with errc::lock_lost before touching it).
inline std::shared_ptr<store_core> detached_core() {
    static const auto core = std::make_shared<store_core>(std::make_unique<null_engine>(), store_options{});
    return core;
}

} // namespace chstate::detail
