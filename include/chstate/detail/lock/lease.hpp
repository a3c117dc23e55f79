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

#include <chstate/detail/separate_compilation.hpp>

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
    return fail(diag, errc::lock_lost, "the lock for state_id " + shown(h.state_id) + " was released");
}

/// strict: extends the lease to lease_ttl from now. seed_compatible:
/// success (the seed's rows age out by stale_age).
CHSTATE_DECL op<> renew_lease(session& s, lease_state& st, diagnostics& diag);

/// strict: still the id's current grant, not released, not expired by the
/// store's clock. seed_compatible: success while held.
CHSTATE_DECL op<> verify_lease(session& s, lease_state& st, diagnostics& diag);

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
CHSTATE_DECL op<> release_lease(session& s, lease_state& st, diagnostics& diag);

/// The heartbeat: renews every `interval` until stopped; when a renewal
/// fails calls on_lost(ec) once (on the store's executor) and ends.
CHSTATE_DECL op<> heartbeat(session& s, std::shared_ptr<lease_state> st, duration interval,
                      std::function<void(error_code)> on_lost, diagnostics&);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/lock/lease.ipp>
#endif
