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

#include <chstate/detail/lock/strict.hpp>

namespace chstate::detail {

/// Why `h` no longer holds the id (empty: it still does), from the id's
/// newest event; `check_expiry` also counts an expiry by our clock.
inline op<std::string> grant_lost_reason(session& s, const held_lock& h, bool check_expiry, diagnostics& diag) {
    auto [ec, latest] = co_await grant_latest(s, h.state_id, diag);
    std::string why;
    if (ec)
        co_return std::tuple{ec, why};
    if (!latest || latest->token < h.token)
        why = "its grant is missing from the grant table";
    else if (latest->lock_id != h.lock_id)
        why = "superseded by fencing token " + std::to_string(latest->token);
    else if (latest->released)
        why = "it was released";
    else if (check_expiry && latest->expires_ms < s.now_ms())
        why = "the lease expired";
    co_return std::tuple{error_code{}, std::move(why)};
}

/// After a fenced statement (`what`: "write", "delete"): success when the
/// grant is still ours; otherwise errc::lock_lost, refused or not confirmed.
inline op<> confirm_grant(session& s, const held_lock& h, const char* what, diagnostics& diag) {
    auto [ec, why] = co_await grant_lost_reason(s, h, false, diag); // after it, only a newer grant matters
    if (ec || why.empty())
        co_return std::tuple{ec};
    co_return std::tuple{fail(diag, errc::lock_lost,
                              lock_lost_message(h, why) + "; the server refused the " + what +
                                  ", unless the grant moved while it ran — not confirmed")};
}

/// The store's verdict on a fenced write whose statement succeeded.
inline op<> settle_fenced_write(session& s, const held_lock& h, diagnostics& diag) {
    if (diag.written_rows && *diag.written_rows == 0) {
        auto [ec, why] = co_await grant_lost_reason(s, h, false, diag);
        if (ec)
            co_return std::tuple{ec};
        co_return std::tuple{
            fail(diag, errc::lock_lost, lock_lost_message(h, why) + "; the server refused the write")};
    }
    if (diag.written_rows && h.expires_ms != 0 && s.now_ms() + skew_ms(s) < h.expires_ms)
        co_return std::tuple{error_code{}};
    co_return co_await confirm_grant(s, h, "write", diag);
}

/// lease.verify(): still the id's current grant, not released, not
/// expired by our clock.
inline op<> verify_grant(session& s, const held_lock& h, diagnostics& diag) {
    auto [ec, why] = co_await grant_lost_reason(s, h, true, diag);
    if (ec || why.empty())
        co_return std::tuple{ec};
    co_return std::tuple{fail(diag, errc::lock_lost, lock_lost_message(h, why))};
}

/// Renews `h`: the holder claims the next token itself, with lease_ttl
/// from now. Completes with the lease's new token and expiry, or
/// errc::lock_lost when the lease already expired by our clock, a rival
/// holds the id, or `h` was released.
inline op<held_lock> renew_grant(session& s, held_lock h, diagnostics& diag) {
    // A lease that lapsed is not revived: another client could have been
    // granted the id meanwhile, so whatever ran under it since was not
    // protected — the caller must hear of it.
    if (h.expires_ms != 0 && s.now_ms() >= h.expires_ms)
        co_return std::tuple{fail(diag, errc::lock_lost, lock_lost_message(h, "the lease expired")), h};
    for (int attempt = 0; attempt < 4; ++attempt) {
        const bool stop = co_await cancelled();
        if (stop)
            co_return std::tuple{make_error_code(asio::error::operation_aborted), h};
        const std::uint64_t next = h.token + 1 + static_cast<std::uint64_t>(attempt);
        const std::uint64_t expires = s.now_ms() + lease_ttl_ms(s);
        // Never cut short: a renewal that might land after the lease's
        // release would hold the id until it expired. A cancellation stops
        // the renewal at its next step instead.
        auto [ec] = co_await s.execute(
            s.sql().renew_grant(h.state_id, next, h.lock_id, expires, grant_slot_key(h.state_id, next)), diag,
            cancellation::ignore);
        h.renewal_unknown = true; // until the slot is read back
        if (ec)
            co_return std::tuple{ec, h}; // the old grant still fences; the new one, if it landed, is ours too
        s.note_written_rows(diag);
        std::uint64_t written_expiry = 0;
        auto [rec, outcome] = co_await read_slot(s, h.state_id, next, h.lock_id, diag, cancellation::honour,
                                                 &written_expiry);
        if (rec)
            co_return std::tuple{rec, h};
        h.renewal_unknown = false;
        if (outcome == slot_outcome::ours) {
            h.token = next;
            h.expires_ms = written_expiry; // a concurrent renewal of ours may have written the slot
            co_return std::tuple{error_code{}, h};
        }
        if (outcome == slot_outcome::theirs) {
            auto [lec, why] = co_await grant_lost_reason(s, h, false, diag);
            if (lec)
                co_return std::tuple{lec, h};
            // Our own later renewal (the heartbeat's and an explicit one
            // racing): still ours, at the newer token.
            if (why.empty()) {
                auto [gec, latest] = co_await grant_latest(s, h.state_id, diag);
                if (gec)
                    co_return std::tuple{gec, h};
                h.token = latest->token;
                h.expires_ms = latest->expires_ms;
                co_return std::tuple{error_code{}, h};
            }
            co_return std::tuple{fail(diag, errc::lock_lost, lock_lost_message(h, why)), h};
        }
        // vacant: the slot's deduplication id was recorded without a row;
        // nobody can use it: claim the one after.
    }
    co_return std::tuple{fail(diag, errc::lock_lost, lock_lost_message(h, "no token after it could be claimed")), h};
}

} // namespace chstate::detail
