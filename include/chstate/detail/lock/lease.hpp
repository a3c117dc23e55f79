// chstate/detail/lock/lease.hpp — what a lock_lease holds, and its
// operations: renew, verify, release, the heartbeat.
//
// The lease's state is shared by the lease object, its operations in
// flight and its heartbeat, and holds the store's core: a lease that
// outlives its store still renews and releases (the transport lives on
// until the last lease lets go).
//
// A renewal moves the lease to a newer token (fence.hpp); a release waits
// for a renewal in flight, then gives back the newest token, so a renewal
// can never land after the release and hold the id until it expires.
#pragma once

#include <chstate/detail/lock/acquire.hpp>
#include <chstate/detail/store_core.hpp>

#include <functional>
#include <memory>
#include <mutex>

namespace chstate::detail {

struct lease_state {
    lease_state(std::shared_ptr<store_core> c, held_lock h) : core(std::move(c)), held(std::move(h)) {}

    const std::shared_ptr<store_core> core;
    mutable std::mutex mutex;
    held_lock held;       ///< guarded by mutex; token and expiry grow with renewals
    bool released = false; ///< guarded by mutex
    int renewing = 0;      ///< guarded by mutex: renewals in flight
    std::shared_ptr<op_control> heartbeat; ///< guarded by mutex

    held_lock snapshot() const {
        std::lock_guard lk(mutex);
        return held;
    }
};

inline error_code lease_not_held(diagnostics& diag, const held_lock& h) {
    return fail(diag, errc::lock_lost, "the lock for state_id " + h.state_id + " was released");
}

/// strict: extends the lease to lease_ttl from now. seed_compatible:
/// success (the seed's rows age out by stale_age).
inline op<> renew_lease(session& s, lease_state& st, diagnostics& diag) {
    held_lock h;
    {
        std::lock_guard lk(st.mutex);
        if (st.released)
            co_return std::tuple{lease_not_held(diag, st.held)};
        if (!st.held.strict())
            co_return std::tuple{error_code{}};
        ++st.renewing;
        h = st.held;
    }
    auto [ec, renewed] = co_await renew_grant(s, std::move(h), diag);
    std::lock_guard lk(st.mutex);
    --st.renewing;
    if (!ec && renewed.token > st.held.token)
        st.held = std::move(renewed);
    else if (renewed.renewal_unknown)
        st.held.renewal_unknown = true; // the release will look for the newer token
    co_return std::tuple{ec};
}

/// strict: still the id's current grant, not released, not expired by the
/// store's clock. seed_compatible: success while held.
inline op<> verify_lease(session& s, lease_state& st, diagnostics& diag) {
    held_lock h;
    {
        std::lock_guard lk(st.mutex);
        if (st.released)
            co_return std::tuple{lease_not_held(diag, st.held)};
        h = st.held;
    }
    if (!h.strict())
        co_return std::tuple{error_code{}};
    co_return co_await verify_grant(s, h, diag);
}

/// Stops the heartbeat (any thread).
inline void stop_heartbeat(lease_state& st) {
    std::shared_ptr<op_control> hb;
    {
        std::lock_guard lk(st.mutex);
        hb = std::move(st.heartbeat);
    }
    if (hb)
        hb->request_cancel(asio::cancellation_type::terminal);
}

/// Gives the lock back, once; a second release is errc::lock_lost.
inline op<> release_lease(session& s, lease_state& st, diagnostics& diag) {
    {
        std::lock_guard lk(st.mutex);
        if (st.released)
            co_return std::tuple{lease_not_held(diag, st.held)};
        st.released = true;
    }
    stop_heartbeat(st);
    for (;;) { // a renewal in flight lands first, then its token is released
        {
            std::lock_guard lk(st.mutex);
            if (st.renewing == 0)
                break;
        }
        co_await s.wait(duration(2), cancellation::ignore);
    }
    co_return co_await release(s, st.snapshot(), diag);
}

/// The heartbeat: renews every `interval` until stopped; when a renewal
/// fails calls on_lost(ec) once (on the store's executor) and ends.
inline op<> heartbeat(session& s, std::shared_ptr<lease_state> st, duration interval,
                      std::function<void(error_code)> on_lost, diagnostics&) {
    for (;;) {
        if (auto [wec] = co_await s.wait(interval); wec)
            co_return std::tuple{error_code{}}; // stopped
        diagnostics diag;
        auto [ec] = co_await renew_lease(s, *st, diag);
        const bool stopped = co_await cancelled();
        if (ec == asio::error::operation_aborted || stopped)
            co_return std::tuple{error_code{}}; // stopped mid-renewal
        bool released;
        {
            std::lock_guard lk(st->mutex);
            released = st->released;
        }
        if (released)
            co_return std::tuple{error_code{}};
        if (ec) {
            if (on_lost)
                on_lost(ec);
            co_return std::tuple{error_code{}};
        }
    }
}

} // namespace chstate::detail
