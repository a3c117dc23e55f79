// chstate/lock.hpp — the lease a caller holds while it owns a state id's lock.
//
// basic_state_store::async_acquire_lock() completes with a lock_lease. The
// lease is move-only; it releases the lock when released explicitly
// (async_release / release) or, failing that, when destroyed — then the
// release is started in the background on the store's executor and its
// outcome is not reported. The store must outlive its leases.
#pragma once

#include <chstate/error.hpp>

#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>

#include <string>
#include <utility>

namespace chstate {

namespace asio = boost::asio;

template <class Store>
class basic_lock_lease {
public:
    basic_lock_lease() = default;
    basic_lock_lease(Store& store, std::string state_id, std::string lock_id)
        : store_(&store), state_id_(std::move(state_id)), lock_id_(std::move(lock_id)) {}

    basic_lock_lease(const basic_lock_lease&) = delete;
    basic_lock_lease& operator=(const basic_lock_lease&) = delete;
    basic_lock_lease(basic_lock_lease&& other) noexcept
        : store_(std::exchange(other.store_, nullptr)),
          state_id_(std::move(other.state_id_)),
          lock_id_(std::move(other.lock_id_)) {}
    basic_lock_lease& operator=(basic_lock_lease&& other) noexcept {
        if (this != &other) {
            release_in_background();
            store_ = std::exchange(other.store_, nullptr);
            state_id_ = std::move(other.state_id_);
            lock_id_ = std::move(other.lock_id_);
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

    /// Deletes the lock row. Completes with void(error_code); releasing a
    /// lease that is not held completes with errc::lock_lost.
    template <class CompletionToken = asio::deferred_t>
    auto async_release(CompletionToken&& token = {}) {
        Store* store = std::exchange(store_, nullptr);
        return Store::async_release_lock(store, state_id_, lock_id_, std::forward<CompletionToken>(token));
    }

    /// Blocking form of async_release; throws chstate::error.
    void release() {
        Store* store = std::exchange(store_, nullptr);
        Store::release_lock(store, state_id_, lock_id_);
    }

private:
    void release_in_background() noexcept {
        if (Store* store = std::exchange(store_, nullptr)) {
            try {
                Store::async_release_lock(store, state_id_, lock_id_, asio::detached);
            } catch (...) {
                // Out of memory while starting the release: the row ages out
                // after the stale age instead.
            }
        }
    }

    Store* store_ = nullptr;
    std::string state_id_;
    std::string lock_id_;
};

} // namespace chstate
