// chstate/detail/lock/fence.ipp — the definitions of lock/fence.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/lock/fence.hpp>

namespace chstate::detail {

CHSTATE_DECL op<std::string> grant_lost_reason(session& s, const held_lock& h, bool check_expiry, diagnostics& diag) {
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
    else if (check_expiry && latest->expires_ms < latest->server_now_ms)
        why = lease_expired_reason(s);
    co_return std::tuple{error_code{}, std::move(why)};
}

CHSTATE_DECL op<> confirm_grant(session& s, const held_lock& h, const char* what, diagnostics& diag) {
    auto [ec, why] = co_await grant_lost_reason(s, h, false, diag); // after it, only a newer grant matters
    if (ec || why.empty())
        co_return std::tuple{ec};
    co_return std::tuple{fail(diag, errc::lock_lost,
                              lock_lost_message(h, why) + "; the server refused the " + what +
                                  ", unless the grant moved while it ran — not confirmed")};
}

CHSTATE_DECL op<> settle_fenced_write(session& s, const held_lock& h, diagnostics& diag) {
    if (diag.written_rows && *diag.written_rows == 0) {
        // the fence refuses a lease expired on the server's clock too
        auto [ec, why] = co_await grant_lost_reason(s, h, true, diag);
        if (ec)
            co_return std::tuple{ec};
        co_return std::tuple{
            fail(diag, errc::lock_lost, lock_lost_message(h, why) + "; the server refused the write")};
    }
    if (diag.written_rows && h.steady_deadline_ms != 0 && s.steady_ms() + skew_ms(s) < h.steady_deadline_ms)
        co_return std::tuple{error_code{}};
    co_return co_await confirm_grant(s, h, "write", diag);
}

CHSTATE_DECL op<> verify_grant(session& s, const held_lock& h, diagnostics& diag) {
    auto [ec, why] = co_await grant_lost_reason(s, h, true, diag);
    if (ec || why.empty())
        co_return std::tuple{ec};
    co_return std::tuple{fail(diag, errc::lock_lost, lock_lost_message(h, why))};
}

CHSTATE_DECL op<held_lock> renew_grant(session& s, held_lock h, diagnostics& diag) {
    // A lease that lapsed is not revived: another client could have been
    // granted the id meanwhile, so whatever ran under it since was not
    // protected — the caller must hear of it.
    if (h.steady_deadline_ms != 0 && s.steady_ms() >= h.steady_deadline_ms)
        co_return std::tuple{fail(diag, errc::lock_lost, lock_lost_message(h, lease_expired_reason(s))), h};
    for (int attempt = 0; attempt < 4; ++attempt) {
        const bool stop = co_await cancelled();
        if (stop)
            co_return std::tuple{make_error_code(asio::error::operation_aborted), h};
        const std::uint64_t next = h.token + 1 + static_cast<std::uint64_t>(attempt);
        // The server writes the new expiry on its clock; ours is bounded
        // from before the renewal is sent.
        const std::uint64_t ttl = lease_ttl_ms(s), sent_wall = s.now_ms() + ttl;
        std::uint64_t sent_steady = s.steady_ms() + ttl;
        // Never cut short: a renewal that might land after the lease's
        // release would hold the id until it expired. A cancellation stops
        // the renewal at its next step instead.
        auto [ec] = co_await s.execute(
            s.sql().renew_grant(h.state_id, next, h.lock_id, ttl, grant_slot_key(h.state_id, next)), diag,
            cancellation::ignore);
        h.renewal_unknown = true; // until the slot is read back
        if (ec)
            co_return std::tuple{ec, h}; // the old grant still fences; the new one, if it landed, is ours too
        s.note_written_rows(diag);
        auto [rec, outcome] = co_await read_slot(s, h.state_id, next, h.lock_id, diag, cancellation::honour,
                                                 &sent_steady);
        if (rec)
            co_return std::tuple{rec, h};
        h.renewal_unknown = false;
        if (outcome == slot_outcome::ours) {
            h.token = next;
            // (a concurrent renewal of ours may have written the slot
            // earlier: read_slot lowered the bound to the row's expiry)
            h.expires_ms = sent_wall;
            h.steady_deadline_ms = sent_steady;
            co_return std::tuple{error_code{}, h};
        }
        if (outcome == slot_outcome::theirs) {
            auto [lec, why] = co_await grant_lost_reason(s, h, false, diag);
            if (lec)
                co_return std::tuple{lec, h};
            // Our own later renewal (the heartbeat's and an explicit one
            // racing): still ours, at the newer token.
            if (why.empty()) {
                const std::uint64_t asked = s.steady_ms();
                auto [gec, latest] = co_await grant_latest(s, h.state_id, diag);
                if (gec)
                    co_return std::tuple{gec, h};
                if (!latest)
                    co_return std::tuple{fail(diag, errc::lock_lost, lock_lost_message(h, "its grant is missing")), h};
                const std::uint64_t bound = steady_bound(asked, latest->expires_ms, latest->server_now_ms);
                const std::uint64_t steady_now = s.steady_ms(), wall_now = s.now_ms();
                h.expires_ms = bound >= steady_now ? wall_now + (bound - steady_now)
                                                   : wall_now - std::min(wall_now, steady_now - bound);
                h.token = latest->token;
                h.steady_deadline_ms = bound;
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
