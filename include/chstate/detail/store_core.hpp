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
// Work that outlives its operation: an acquire that gave up at
// lock.timeout while a claim was still in flight leaves that claim's
// coroutine running, holding the core, to give back whatever lands late
// (lock/acquire.hpp). Started by a blocking call, it runs on a thread of
// the core's (run_in_background); the store's destructor waits for those
// threads, so a process that destroys its store before it exits never
// tears an engine down under them.
#pragma once

#include <chstate/detail/session.hpp>

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/system_executor.hpp>

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>

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

class store_core {
public:
    store_core(std::unique_ptr<engine> e, store_options options)
        : engine_(std::move(e)), session_(*engine_, std::move(options)) {}
    store_core(const store_core&) = delete;
    store_core& operator=(const store_core&) = delete;
    ~store_core() { join_background(); }

    /// The way to make one: its session knows what keeps it alive.
    static std::shared_ptr<store_core> make(std::unique_ptr<engine> e, store_options options) {
        auto core = std::make_shared<store_core>(std::move(e), std::move(options));
        core->session_.set_owner(core);
        return core;
    }

    engine& eng() noexcept { return *engine_; }
    session& sess() noexcept { return session_; }
    asio::any_io_executor executor() const { return engine_->get_executor(); }

    void add(const std::shared_ptr<op_control>& op) {
        std::lock_guard lk(mutex_);
        in_flight_.insert(op);
    }
    void remove(const std::shared_ptr<op_control>& op) {
        std::lock_guard lk(mutex_);
        in_flight_.erase(op);
    }
    /// Cancels every operation in flight (the store is going away).
    void cancel_all() {
        std::unordered_set<std::shared_ptr<op_control>> ops;
        {
            std::lock_guard lk(mutex_);
            ops = in_flight_;
        }
        for (const auto& op : ops)
            op->request_cancel(asio::cancellation_type::terminal);
    }

    /// Runs `ctx` to its end on a thread of its own: what a blocking call
    /// left on its io_context when it returned (lock/acquire.hpp). Threads
    /// that have finished are joined here. Without a thread (none can be
    /// started), on the calling thread.
    void run_in_background(std::shared_ptr<asio::io_context> ctx) {
        std::unique_lock lk(background_mutex_);
        for (auto it = background_.begin(); it != background_.end();) {
            if (it->finished->load()) {
                it->thread.join();
                it = background_.erase(it);
            } else
                ++it;
        }
        try {
            background_.emplace_back();
            auto& b = background_.back();
            b.finished = std::make_shared<std::atomic<bool>>(false);
            b.thread = std::thread([ctx, finished = b.finished]() mutable {
                // A wait on a simulated clock nothing advances is refused
                // here too, as on a blocking call's own thread (engine.hpp).
                blocking_call call;
                blocking_call_here() = &call;
                for (;;) {
                    try {
                        ctx->run();
                        break;
                    } catch (...) {
                        // A handler threw (only bad_alloc can): go on with the rest.
                    }
                }
                ctx.reset();
                finished->store(true);
            });
        } catch (...) {
            if (!background_.empty() && !background_.back().thread.joinable())
                background_.pop_back();
            lk.unlock();
            ctx->run();
        }
    }

    /// What the store's destructor waits for: the work its operations left
    /// running (a claim a timed-out acquire stopped waiting for, and its
    /// give-back), at most `bound`; then the background threads that have
    /// finished are joined and the others let go (they hold the core).
    /// On one of the transport's own threads it does not wait: that work
    /// may need this very thread.
    void settle_leftovers(std::chrono::milliseconds bound) noexcept {
        (void)session_.leftovers()->close_and_wait(engine_->runs_transport_here() ? std::chrono::milliseconds(0)
                                                                                  : bound);
        join_background(/*wait=*/false);
    }

    /// Joins the background threads (`wait`: all; else those that have
    /// finished, letting the others go). On one of those threads (the last
    /// reference to the core dropped there) that thread is let go instead.
    void join_background(bool wait = true) noexcept {
        std::list<background_thread> threads;
        {
            std::lock_guard lk(background_mutex_);
            threads.swap(background_);
        }
        for (auto& b : threads) {
            if (!b.thread.joinable())
                continue;
            if (b.thread.get_id() == std::this_thread::get_id() || (!wait && !b.finished->load()))
                b.thread.detach();
            else
                b.thread.join();
        }
    }

private:
    struct background_thread {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> finished;
    };

    std::unique_ptr<engine> engine_;
    session session_;
    std::mutex mutex_;
    std::unordered_set<std::shared_ptr<op_control>> in_flight_;
    std::mutex background_mutex_;
    std::list<background_thread> background_;
};

/// The engine of a core with no store behind it (a lease that is not
/// held): it sends nothing.
class null_engine final : public engine {
public:
    asio::any_io_executor get_executor() const override { return asio::system_executor(); }
    transport_traits traits() const override { return {}; }
    time_point now() const override { return {}; }
    std::uint64_t steady_ms() const override { return 0; }
    asio::awaitable<error_code> send(const statement&, const result_sink&, diagnostics& diag, cancellation) override {
        diag.message = "no store: the lease is not held";
        co_return make_error_code(errc::lock_lost);
    }
    asio::awaitable<error_code> wait(duration, cancellation, bool) override { co_return error_code{}; }
    bool runs_transport_here() const override { return false; }
};

/// The core operations of a lease that is not held run on (they complete
/// with errc::lock_lost before touching it).
inline std::shared_ptr<store_core> detached_core() {
    static const auto core = store_core::make(std::make_unique<null_engine>(), store_options{});
    return core;
}

} // namespace chstate::detail
