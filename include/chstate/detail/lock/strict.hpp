// chstate/detail/lock/strict.hpp — the strict lock: grants the server
// decides, fencing tokens, leases (docs/lock.md, strict).
//
// acquire: read the id's newest event (token t) — or trust this store's own
// last release of it (free_token_hint) — and when t is free (released, or
// expired by more than the clock-skew grace, on the server's clock) claim t+1: a
// conditional INSERT of our grant, with insert_deduplication_token naming
// the slot t+1, written only while t is still the newest token and free.
// Of all rivals claiming t+1 the server keeps exactly one row, atomically,
// and may report success to each, so we then read back who holds t+1 (or,
// where the engine counts written rows, a count of 0 says at once that
// we did not). Otherwise wait the retry interval and repeat until the
// deadline. No settle wait.
//
// A token whose INSERT succeeded yet left no row (the server recorded the
// deduplication id, then failed to commit the part: MergeTreeSink records
// before it commits) stays "vacant" forever: every racer finds it so and
// moves on to the next token together.
//
// Renewal (fence.hpp) claims the next slot for the holder itself, so a
// renewal and a takeover contend for one deduplication slot and never both
// land. A grant that a failure may have left behind is withdrawn at once
// (released if it is ours; never cancelled) or remembered for the store's
// next operation; one that cannot be given back expires (lease_ttl).
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/lock/held.hpp>

namespace chstate::detail {

/// The id's newest grant-table event, with the server's clock when read.
struct grant_row {
    std::uint64_t token = 0;
    std::string lock_id;
    bool released = false;
    std::uint64_t expires_ms = 0;    ///< on the server's clock
    std::uint64_t server_now_ms = 0; ///< the server's clock as it answered
};

inline std::uint64_t lease_ttl_ms(const session& s) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(s.options().lock.lease_ttl).count());
}

/// Why a lease that lapsed is gone, naming the setting: work slower than
/// lock.lease_ttl between renewals cannot keep its lock.
inline std::string lease_expired_reason(const session& s) {
    return "the lease expired: more than lock.lease_ttl (" + std::to_string(lease_ttl_ms(s)) +
           " ms) passed without a renewal; work that takes longer needs a longer lease_ttl or a heartbeat";
}

/// The grace a takeover waits past a grant's expiry on the server's clock:
/// what the holder's own bound may lag behind it (clock rates; on a
/// cluster, replicas' clocks that differ).
inline std::uint64_t skew_ms(const session& s) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(s.options().lock.clock_skew).count();
    return ms < 0 ? 0 : static_cast<std::uint64_t>(ms);
}

/// Free: no event, a release, or a grant expired by more than the grace —
/// all on the server's clock.
inline bool is_free(const std::optional<grant_row>& latest, std::uint64_t grace_ms) {
    return !latest || latest->released || latest->expires_ms + grace_ms < latest->server_now_ms;
}

/// A grant's expiry read from the server (`expires_ms`, the server's now
/// `server_now_ms`), on this store's steady clock: the time left on the
/// server, counted from `asked_steady_ms`, taken before the read was sent
/// (so never later than the server's own count).
inline std::uint64_t steady_bound(std::uint64_t asked_steady_ms, std::uint64_t expires_ms, std::uint64_t server_now_ms) {
    return asked_steady_ms + (expires_ms > server_now_ms ? expires_ms - server_now_ms : 0);
}

inline std::optional<grant_row> grant_of(const json::object& row) {
    auto token = uint_field(row, "token");
    auto expires = uint_field(row, "expires_ms");
    auto lock_id = string_field(row, "lock_id");
    auto kind = string_field(row, "kind");
    auto now = uint_field(row, "now_ms");
    if (!token || !expires || !lock_id || !kind || !now)
        return std::nullopt;
    return grant_row{*token, std::move(*lock_id), *kind == "release", *expires, *now};
}

CHSTATE_DECL op<std::optional<grant_row>> grant_latest(session& s, const std::string& id, diagnostics& diag,
                                                 cancellation c = cancellation::honour);

/// Who holds `token` right after a claim of it.
enum class slot_outcome {
    ours,   ///< every event of `token` or later is our grant of `token`
    theirs, ///< a rival's row, a release or a later token
    vacant, ///< no event of `token` or later at all
};

/// Reads the slot back; when ours, `steady_deadline_ms` (if given) is
/// lowered to what the server's row leaves (steady_bound): a renewal's row
/// may be another renewal's of the same lease, sent before our reading.
CHSTATE_DECL op<slot_outcome> read_slot(session& s, const std::string& id, std::uint64_t token, const std::string& lock_id,
                                  diagnostics& diag, cancellation c = cancellation::honour,
                                  std::uint64_t* steady_deadline_ms = nullptr);

/// Records the release of `token` (its own deduplication token; harmless
/// once superseded).
CHSTATE_DECL op<> release_grant(session& s, const std::string& id, std::uint64_t token, const std::string& lock_id,
                          diagnostics& diag, cancellation c);

/// After a failure between our claim (or renewal) and learning its
/// outcome: if the id's newest grant is ours (`lock_id`; a renewal may have
/// moved it past `token`), release it. Never cancelled, never fails the
/// caller: what it cannot give back is remembered for the next operation.
CHSTATE_DECL asio::awaitable<void> withdraw_grant(session& s, const std::string& id, std::uint64_t token,
                                            const std::string& lock_id);

/// One claim of `next` over `basis` (the newest token, believed free).
/// Completes with the held lock, or an empty one when we did not win;
/// `vacant` is set when the slot turned out vacant, `free_basis` when the
/// newest token read after a refused claim is free (try again at once).
struct claim_result {
    std::optional<held_lock> won;
    bool vacant = false;
    std::optional<std::uint64_t> free_basis;
};

/// `confirm` false (acquire_request::optimistic): a claim the server
/// counted as written is won without the read-back, unconfirmed.
CHSTATE_DECL op<claim_result> claim_once(session& s, const std::string& id, std::uint64_t basis, std::uint64_t next,
                                   diagnostics& diag, bool confirm = true);

/// The strict protocol until won or `deadline`; `notes`: what it saw of rivals.
CHSTATE_DECL op<held_lock> acquire_strict(session& s, const std::string& id, time_point deadline, diagnostics& diag,
                                          const acquire_request& how, acquire_notes& notes);

/// What became of an unconfirmed claim (held_lock::unconfirmed) whose
/// fenced write the server refused.
enum class claim_fate {
    landed,   ///< our grant of the token is there: we held the id, and lost it
    rivals,   ///< a rival's grant of the token was kept: we never held the id
    vacant,   ///< the token has no event at all: nobody holds it
};

CHSTATE_DECL op<claim_fate> fate_of_claim(session& s, const held_lock& h, diagnostics& diag);

/// strict: how many tokens an id's grant events may span before a release prunes them.
inline constexpr std::uint64_t grant_prune_interval = 64;

/// Records the release of `h`'s grant. Every grant_prune_interval-th
/// token, also drops the id's older events (~2 rows per grant); the newest
/// token's stay, so tokens keep increasing. A failed prune only leaves rows
/// for the next one.
CHSTATE_DECL op<> release_strict(session& s, held_lock h, diagnostics& diag, cancellation c);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/lock/strict.ipp>
#endif
