// chstate/lock.hpp — the lease a caller holds while it owns a state id's lock.
//
// basic_state_store::async_acquire_lock() completes with a lock_lease. The
// lease is move-only; it releases the lock when released explicitly
// (async_release / release) or, failing that, when destroyed — then the
// release runs in the background and its outcome is not reported. A lease
// may outlive its store: it keeps what it needs of it (docs/lock.md).
//
// In lock_mode::strict a lease also carries a fencing token (token(): its
// grant's number, increasing per state id) and an expiry (expires_at():
// lease_ttl after the claim or the last renewal was sent, on the store's
// clock; steady_expiry(): the same on its steady time). The server writes
// each grant's expiry and judges it on its own clock, never a client's.
// What a lease guarantees:
//   * until steady_expiry(), by the store clock's steady time, no other
//     client is granted the id: the server grants it only once the grant
//     expired by more than lock.clock_skew on the server's clock, and the
//     holder's count started before the server's (it assumes the two
//     clocks run at the same rate, within clock_skew per lease_ttl — not
//     that they agree: a client's wall clock may be off or step);
//   * async_renew() that succeeds extends that to lease_ttl from when it
//     began. A renewal re-grants the id to this lease under the next token
//     — the slot a rival's takeover would need, decided by the server's
//     deduplication — so a renewal and a takeover never both succeed, and
//     token() grows with each renewal;
//   * writes through store.set(lease, s) are fenced: the server refuses
//     them once another client holds the id (errc::lock_lost), and a
//     success means the write landed while this lease still held it.
// async_verify() checks on the server that the lease is still the id's
// current grant, not released and not expired. start_heartbeat(interval,
// on_lost) renews every `interval` until the lease is released, destroyed
// or moved onto; a failed renewal calls on_lost(ec) once, on the store's
// executor, and ends the heartbeat: the signal to stop the guarded work.
//
// Every lease operation has the store's three forms: async_xxx(token),
// async_xxx(diagnostics&, token) and blocking xxx().
#pragma once

#include <chstate/clock.hpp>
#include <chstate/detail/launch.hpp>
#include <chstate/detail/lock/lease.hpp>
#include <chstate/error.hpp>
#include <chstate/with_diagnostics.hpp>

#include <boost/asio/detached.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace chstate {

namespace detail {
/// How the store makes leases and reads them; nothing else can.
struct lease_access {
    template <class Lease>
    static Lease make(std::shared_ptr<store_core> core, held_lock held) {
        return Lease(std::make_shared<lease_state>(std::move(core), std::move(held)));
    }
    template <class Lease>
    static const std::shared_ptr<lease_state>& state_of(const Lease& lease) {
        return lease.state_;
    }
};
} // namespace detail

template <class Store>
class basic_lock_lease {
public:
    basic_lock_lease() = default;
    basic_lock_lease(const basic_lock_lease&) = delete;
    basic_lock_lease& operator=(const basic_lock_lease&) = delete;
    basic_lock_lease(basic_lock_lease&& other) noexcept
        : state_(std::move(other.state_)), state_id_(std::move(other.state_id_)), lock_id_(std::move(other.lock_id_)) {}
    basic_lock_lease& operator=(basic_lock_lease&& other) noexcept {
        if (this != &other) {
            release_in_background();
            state_ = std::move(other.state_);
            state_id_ = std::move(other.state_id_);
            lock_id_ = std::move(other.lock_id_);
        }
        return *this;
    }
    ~basic_lock_lease() { release_in_background(); }

    /// True until released (or moved from).
    bool held() const noexcept { return state_ != nullptr; }
    explicit operator bool() const noexcept { return held(); }

    const std::string& state_id() const noexcept { return state_id_; }
    /// The random id of this lease's grant(s), as stored in the lock or grant table.
    const std::string& lock_id() const noexcept { return lock_id_; }
    /// strict: the fencing token of this lease's newest grant — greater than
    /// every earlier grant's for the same state id; grows with renewals.
    /// seed_compatible (or not held): 0.
    std::uint64_t token() const { return state_ ? state_->snapshot().token : 0; }
    /// strict: until when, on the store's clock, no other client can be
    /// granted the id. seed_compatible (or not held): the epoch.
    time_point expires_at() const {
        return time_point(std::chrono::milliseconds(state_ ? state_->snapshot().expires_ms : 0));
    }
    /// strict: the same moment on the store clock's steady time (clock.hpp,
    /// steady_now; now() for a clock without it) — what the store itself
    /// relies on, unmoved by steps of the wall clock. Zero when not held or
    /// seed_compatible.
    duration steady_expiry() const {
        return duration(state_ ? state_->snapshot().steady_deadline_ms : 0);
    }

    /// strict: extends the lease to lease_ttl from now if it still holds the
    /// id (errc::lock_lost when superseded or released). seed_compatible:
    /// success (the seed's rows age out by stale_age).
    template <class CompletionToken = default_token>
    auto async_renew(diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core(), &diag, std::forward<CompletionToken>(token), on_state(detail::renew_lease));
    }
    template <class CompletionToken = default_token>
    auto async_renew(CompletionToken&& token = {}) {
        return detail::async_run<>(core(), std::forward<CompletionToken>(token), on_state(detail::renew_lease));
    }
    void renew() { detail::run_blocking<>(core(), on_state(detail::renew_lease)); }

    /// strict: checks on the server that the lease is still the id's current
    /// grant, not released and not expired by the store's clock
    /// (errc::lock_lost if not). Writes do not need it: store.set(lease, s)
    /// is checked by the server itself. seed_compatible: success while held.
    template <class CompletionToken = default_token>
    auto async_verify(diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core(), &diag, std::forward<CompletionToken>(token), on_state(detail::verify_lease));
    }
    template <class CompletionToken = default_token>
    auto async_verify(CompletionToken&& token = {}) {
        return detail::async_run<>(core(), std::forward<CompletionToken>(token), on_state(detail::verify_lease));
    }
    void verify() { detail::run_blocking<>(core(), on_state(detail::verify_lease)); }

    /// strict: renews the lease every `interval` in the background until it
    /// is released, destroyed or moved onto. When a renewal fails (the grant
    /// was superseded or expired, or the server failed) calls on_lost(ec)
    /// once, on the store's executor, and stops. Choose interval well below
    /// lease_ttl (e.g. a third). A second call replaces the first heartbeat.
    /// seed_compatible: does nothing.
    void start_heartbeat(duration interval, std::function<void(error_code)> on_lost = {}) {
        if (!state_ || token() == 0)
            return;
        detail::stop_heartbeat(*state_);
        auto ctl = detail::start_op<>(state_->core, state_->core->executor(), nullptr,
                                      detail::bind_op(detail::heartbeat, state_, interval, std::move(on_lost)),
                                      [](error_code) {});
        std::lock_guard lk(state_->mutex);
        state_->heartbeat = std::move(ctl);
    }

    /// Gives the lock back. Releasing a lease that is not held completes
    /// with errc::lock_lost.
    template <class CompletionToken = default_token>
    auto async_release(diagnostics& diag, CompletionToken&& token = {}) {
        auto st = std::exchange(state_, nullptr);
        return detail::async_run_with<>(core_of(st), &diag, std::forward<CompletionToken>(token), releasing(st));
    }
    template <class CompletionToken = default_token>
    auto async_release(CompletionToken&& token = {}) {
        auto st = std::exchange(state_, nullptr);
        return detail::async_run<>(core_of(st), std::forward<CompletionToken>(token), releasing(st));
    }
    void release() {
        auto st = std::exchange(state_, nullptr);
        detail::run_blocking<>(core_of(st), releasing(st));
    }

private:
    friend struct detail::lease_access;
    explicit basic_lock_lease(std::shared_ptr<detail::lease_state> st)
        : state_(std::move(st)), state_id_(state_->held.state_id), lock_id_(state_->held.lock_id) {}

    /// A lease that is not held still needs a core to complete its operations
    /// (with errc::lock_lost) on: an engine-less one that sends nothing.
    static std::shared_ptr<detail::store_core> core_of(const std::shared_ptr<detail::lease_state>& st) {
        return st ? st->core : detail::detached_core();
    }
    std::shared_ptr<detail::store_core> core() const { return core_of(state_); }

    /// `fn(session&, lease_state&, diagnostics&)` on this lease, or lock_lost.
    template <class Fn>
    auto on_state(Fn fn) const {
        return [fn, st = state_, id = state_id_](detail::session& s, diagnostics& d) -> detail::op<> {
            if (!st)
                co_return std::tuple{detail::fail(d, errc::lock_lost, "the lock for \"" + detail::shown(id) + "\" is not held")};
            co_return co_await fn(s, *st, d);
        };
    }
    auto releasing(std::shared_ptr<detail::lease_state> st) const {
        return [st = std::move(st), id = state_id_](detail::session& s, diagnostics& d) -> detail::op<> {
            if (!st)
                co_return std::tuple{detail::fail(d, errc::lock_lost, "lock for \"" + detail::shown(id) + "\" was not held")};
            co_return co_await detail::release_lease(s, *st, d);
        };
    }

    void release_in_background() noexcept {
        if (auto st = std::exchange(state_, nullptr)) {
            try {
                detail::start_op<>(st->core, st->core->executor(), nullptr, releasing(st), [](error_code) {});
            } catch (...) {
                // Out of memory while starting the release: the row ages
                // out after stale_age (or the grant after lease_ttl) instead.
            }
        }
    }

    std::shared_ptr<detail::lease_state> state_;
    std::string state_id_;
    std::string lock_id_;
};

} // namespace chstate
