// chstate/detail/lock/held.hpp — a held lock as the operations pass it
// around, and the statements' shared vocabulary for both protocols.
#pragma once

#include <chstate/detail/session.hpp>
#include <chstate/detail/shown.hpp>

#include <cstdint>
#include <string>

namespace chstate::detail {

/// A lock this store holds.
///   seed_compatible: its row in the lock table (token 0);
///   strict: its grant — `token` the fencing token (it grows when the
///   lease is renewed). The server writes and judges the grant's expiry on
///   its own clock; the holder bounds it from just before it sent the claim
///   or renewal, lease_ttl later: `steady_deadline_ms` on the store clock's
///   steady time (what every decision uses), `expires_ms` the same moment
///   on its wall clock (what lock_lease::expires_at() shows). 0: unknown.
struct held_lock {
    std::string state_id;
    std::string lock_id;
    std::uint64_t token = 0;
    std::uint64_t expires_ms = 0;
    std::uint64_t steady_deadline_ms = 0;
    /// strict: a renewal was sent and its outcome is not known — the lease
    /// may hold a newer token than `token`; a release then looks.
    bool renewal_unknown = false;
    /// strict, update() only (acquire_request::optimistic): the server
    /// counted our claim's row but nobody read it back, so a rival's grant
    /// of the same token may have been kept instead. The fenced write
    /// decides: it lands only under the id's newest grant, and only when
    /// that grant is ours. A refused write on such a claim is looked into
    /// (fate_of_claim) before anyone calls the lock lost; a release gives
    /// the token back only if the newest grant is ours (withdraw_grant).
    bool unconfirmed = false;

    bool strict() const noexcept { return token != 0; }
};

/// How an operation asks for its lock; the defaults are what acquire_lock
/// and clear() use.
struct acquire_request {
    /// strict: a claim the server counted as written is handed over without
    /// reading it back (held_lock::unconfirmed) — for update(), whose
    /// fenced write settles who held the id (one round trip fewer).
    bool optimistic = false;
    /// When to give up; none: now + lock.timeout.
    std::optional<time_point> deadline{};
    /// strict: a token found vacant (its slot recorded, no row kept):
    /// claims start after it.
    std::uint64_t vacant_token = 0;
};

/// The deduplication token of one grant-table event: "sha256:<hex of the
/// id>/<token>" for a grant (a claim or a renewal: both decide the same
/// slot), plus "/release" for a release. Ids never share a hash, so no two
/// events collide. The id is hashed because the token is a setting, written
/// into the SQL text, which holds no value and stays small for any id.
/// (Earlier chstate versions wrote the id itself: do not run both in strict
/// mode on one table.)
inline std::string grant_slot_key(const std::string& id, std::uint64_t token) {
    return "sha256:" + sha256_hex(id) + "/" + std::to_string(token);
}
inline std::string release_key(const std::string& id, std::uint64_t token) {
    return grant_slot_key(id, token) + "/release";
}

/// "lock for state_id … is no longer held[: why]".
inline std::string lock_lost_message(const held_lock& h, const std::string& why) {
    return "lock for state_id " + shown(h.state_id) + " (fencing token " + std::to_string(h.token) + ") is no longer held" +
           (why.empty() ? std::string() : ": " + why);
}

/// What an acquire saw of rivals, for its message when it gives up.
struct acquire_notes {
    std::string holder;      ///< the lock_id holding the id at the last check; empty: free
    bool rival_won = false;  ///< a round the id looked free went to another client
};

/// could_not_acquire's detail for a deadline that passed: who held the id,
/// or that nobody was seen and the lock's own statements took the time
/// (`still_running`: they were cut short by the deadline).
inline std::string deadline_detail(const acquire_notes& notes, duration timeout, bool still_running) {
    const std::string limit = "lock.timeout of " + std::to_string(timeout.count()) + " ms";
    if (!notes.holder.empty())
        return "held by lock_id " + shown(notes.holder) + " at the last check; " + limit + " passed";
    if (notes.rival_won)
        return "another client won the rounds in which it looked free; " + limit + " passed";
    return "no holder was seen: the lock's own statements " +
           std::string(still_running ? "were still running when " + limit + " passed"
                                     : "took longer than " + limit);
}

/// "Could not acquire lock for state_id: …" — the seed's own words, which
/// operators grep for.
inline error_code could_not_acquire(diagnostics& diag, const std::string& id, const std::string& detail = {}) {
    return fail(diag, errc::state_id_locked,
                "Could not acquire lock for state_id: " + shown(id) + (detail.empty() ? "" : " (" + detail + ")"));
}

/// The wait between two rounds, never past the deadline.
inline duration until_next_round(const session& s, time_point deadline) {
    const auto left = std::chrono::duration_cast<duration>(deadline - s.now());
    return std::max(duration::zero(), std::min(s.options().lock.retry_interval, left));
}

} // namespace chstate::detail
