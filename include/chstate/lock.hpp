// chstate/lock.hpp — the lease a caller holds while it owns a state id's lock.
//
// basic_state_store::async_acquire_lock() completes with a lock_lease. The
// lease is move-only; it releases the lock when released explicitly
// (async_release / release) or, failing that, when destroyed — then the
// release is started in the background on the store's executor and its
// outcome is not reported. The store must outlive its leases.
//
// In lock_mode::strict a lease also carries a fencing token (token(): the
// grant's number, increasing per state id) and an expiry (lease_ttl after the
// grant or the last renewal). async_renew() extends it; async_verify()
// checks on the server that the grant is still the id's newest, not
// released and not expired. A lease that has been superseded fails both
// with errc::lock_lost. start_heartbeat(interval, on_lost) renews in the
// background every `interval` (on the store's Clock) until the lease is
// released, destroyed or moved onto; a failed renewal calls on_lost(ec)
// once, on the store's executor, and ends the heartbeat: the signal to stop
// (or cancel) the guarded work.
//
// Write under the lease with store.set(lease, state): in strict mode the
// server refuses it once a newer grant exists (errc::lock_lost), and a
// success means the write landed while the grant was still current.
#pragma once

#include <chstate/clock.hpp>
#include <chstate/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace chstate {

namespace asio = boost::asio;

namespace detail {

/// A running heartbeat: the loop runs on `strand`; stop() may be called
/// from any thread.
struct heartbeat_control {
    asio::any_io_executor strand;
    asio::cancellation_signal signal; ///< emitted on `strand` only
    std::atomic<bool> stopped{false};

    static void stop(const std::shared_ptr<heartbeat_control>& hb) {
        if (!hb || hb->stopped.exchange(true))
            return;
        try {
            asio::post(hb->strand, [hb] { hb->signal.emit(asio::cancellation_type::terminal); });
        } catch (...) {
            // The loop also checks `stopped` after each wait.
        }
    }
};

} // namespace detail

template <class Store>
class basic_lock_lease {
public:
    basic_lock_lease() = default;
    basic_lock_lease(Store& store, std::string state_id, std::string lock_id, std::uint64_t token = 0)
        : store_(&store), state_id_(std::move(state_id)), lock_id_(std::move(lock_id)), token_(token) {}

    basic_lock_lease(const basic_lock_lease&) = delete;
    basic_lock_lease& operator=(const basic_lock_lease&) = delete;
    basic_lock_lease(basic_lock_lease&& other) noexcept
        : store_(std::exchange(other.store_, nullptr)),
          state_id_(std::move(other.state_id_)),
          lock_id_(std::move(other.lock_id_)),
          token_(std::exchange(other.token_, 0)),
          heartbeat_(std::move(other.heartbeat_)) {}
    basic_lock_lease& operator=(basic_lock_lease&& other) noexcept {
        if (this != &other) {
            release_in_background();
            store_ = std::exchange(other.store_, nullptr);
            state_id_ = std::move(other.state_id_);
            lock_id_ = std::move(other.lock_id_);
            token_ = std::exchange(other.token_, 0);
            heartbeat_ = std::move(other.heartbeat_);
        }
        return *this;
    }
    ~basic_lock_lease() { release_in_background(); }

    /// True until released (or moved from).
    bool held() const noexcept { return store_ != nullptr; }
    explicit operator bool() const noexcept { return held(); }

    const std::string& state_id() const noexcept { return state_id_; }
    /// The random id of this grant, as stored in the lock table.
    const std::string& lock_id() const noexcept { return lock_id_; }
    /// The fencing token of this grant (lock_mode::strict): greater than
    /// every earlier grant's for the same state id. 0 in seed_compatible mode.
    std::uint64_t token() const noexcept { return token_; }

    /// strict: extends the lease to lease_ttl from now, if it is still the
    /// id's current grant; completes with void(error_code), errc::lock_lost
    /// when it was superseded, released or had expired. seed_compatible:
    /// completes with success (the seed's rows age out by stale_age).
    template <class CompletionToken = asio::deferred_t>
    auto async_renew(CompletionToken&& token = {}) {
        return Store::async_lease_op(store_, true, state_id_, lock_id_, token_,
                                     std::forward<CompletionToken>(token));
    }

    /// strict: renews the lease every `interval` in the background until it
    /// is released, destroyed or moved onto. When a renewal fails (the grant
    /// was superseded or expired, or the server failed) calls on_lost(ec)
    /// once, on the store's executor, and stops. Choose interval well below
    /// lease_ttl (e.g. a third). A second call replaces the first heartbeat.
    /// seed_compatible: does nothing.
    void start_heartbeat(duration interval, std::function<void(error_code)> on_lost = {}) {
        if (!store_ || token_ == 0)
            return;
        detail::heartbeat_control::stop(heartbeat_);
        heartbeat_ = Store::start_heartbeat(store_, state_id_, lock_id_, token_, interval, std::move(on_lost));
    }

    /// strict: checks that the lease is still the id's current grant, not
    /// released and not expired by the store's clock; completes with
    /// void(error_code), errc::lock_lost if not. (Writes do not need it:
    /// store.set(lease, s) is checked by the server itself.) seed_compatible:
    /// success while held.
    template <class CompletionToken = asio::deferred_t>
    auto async_verify(CompletionToken&& token = {}) {
        return Store::async_lease_op(store_, false, state_id_, lock_id_, token_,
                                     std::forward<CompletionToken>(token));
    }

    /// Deletes the lock row. Completes with void(error_code); releasing a
    /// lease that is not held completes with errc::lock_lost.
    template <class CompletionToken = asio::deferred_t>
    auto async_release(CompletionToken&& token = {}) {
        Store* store = std::exchange(store_, nullptr);
        detail::heartbeat_control::stop(std::exchange(heartbeat_, nullptr));
        return Store::async_release_lock(store, state_id_, lock_id_, token_, std::forward<CompletionToken>(token));
    }

    /// Blocking form of async_release; throws chstate::error.
    void release() {
        Store* store = std::exchange(store_, nullptr);
        detail::heartbeat_control::stop(std::exchange(heartbeat_, nullptr));
        Store::release_lock(store, state_id_, lock_id_, token_);
    }

private:
    void release_in_background() noexcept {
        detail::heartbeat_control::stop(std::exchange(heartbeat_, nullptr));
        if (Store* store = std::exchange(store_, nullptr)) {
            try {
                Store::async_release_lock(store, state_id_, lock_id_, token_, asio::detached);
            } catch (...) {
                // Out of memory while starting the release: the row ages out
                // after the stale age instead.
            }
        }
    }

    Store* store_ = nullptr;
    std::string state_id_;
    std::string lock_id_;
    std::uint64_t token_ = 0;
    std::shared_ptr<detail::heartbeat_control> heartbeat_;
};

} // namespace chstate
