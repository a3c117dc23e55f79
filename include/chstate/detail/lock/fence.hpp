// chstate/detail/lock/fence.hpp — what a strict lease guarantees, and how
// the store keeps it.
//
// A fenced write (update(), clear(), set(lease, s)) is an INSERT (or
// DELETE) that the server performs only while the lease's holder (its
// lock_id) holds the id's newest grant and has not released it; the check
// is part of the statement. Success then needs to know the grant was still
// current after the write landed — the next holder reads after its own
// grant, so it sees the write: either the engine's written-rows count
// plus a reply a clock_skew before the lease's expiry (no rival can have
// taken over yet), or a read of the grant table. Otherwise errc::lock_lost:
// refused, or — when the grant moved while the statement ran — "not
// confirmed", never silently lost.
//
// Renewal claims the next token for the holder itself: the slot a rival's
// takeover would claim, decided by the same atomic deduplication, so a
// renewal that succeeds means no rival holds the id, and none can take it
// before the renewed expiry plus the clock-skew grace (a takeover waits
// for that). A renewal therefore moves the lease to a newer fencing token.
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/lock/strict.hpp>

namespace chstate::detail {

/// Why `h` no longer holds the id (empty: it still does), from the id's
/// newest event; `check_expiry` also counts an expiry by our clock.
CHSTATE_DECL op<std::string> grant_lost_reason(session& s, const held_lock& h, bool check_expiry, diagnostics& diag);

/// After a fenced statement (`what`: "write", "delete"): success when the
/// grant is still ours; otherwise errc::lock_lost, refused or not confirmed.
CHSTATE_DECL op<> confirm_grant(session& s, const held_lock& h, const char* what, diagnostics& diag);

/// The store's verdict on a fenced write whose statement succeeded.
CHSTATE_DECL op<> settle_fenced_write(session& s, const held_lock& h, diagnostics& diag);

/// lease.verify(): still the id's current grant, not released, not
/// expired by our clock.
CHSTATE_DECL op<> verify_grant(session& s, const held_lock& h, diagnostics& diag);

/// Renews `h`: the holder claims the next token itself, with lease_ttl
/// from now. Completes with the lease's new token and expiry, or
/// errc::lock_lost when the lease already expired by our clock, a rival
/// holds the id, or `h` was released.
CHSTATE_DECL op<held_lock> renew_grant(session& s, held_lock h, diagnostics& diag);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/lock/fence.ipp>
#endif
