// chstate/detail/lock/strict.hpp — the strict lock: grants the server
// decides, fencing tokens, leases (README "The lock", strict).
//
// acquire: read the id's newest event (token t) — or trust this store's own
// last release of it (free_token_hint) — and when t is free (released, or
// expired by more than the clock-skew grace on our clock) claim t+1: a
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

#include <chstate/detail/lock/held.hpp>

namespace chstate::detail {

/// The id's newest grant-table event.
struct grant_row {
    std::uint64_t token = 0;
    std::string lock_id;
    bool released = false;
    std::uint64_t expires_ms = 0;
};

inline std::uint64_t lease_ttl_ms(const session& s) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(s.options().lock.lease_ttl).count());
}

/// The grace a takeover waits past a grant's expiry: the clocks of the
/// processes sharing a lock may differ by up to clock_skew.
inline std::uint64_t skew_ms(const session& s) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(s.options().lock.clock_skew).count();
    return ms < 0 ? 0 : static_cast<std::uint64_t>(ms);
}

/// A grant expiring at or after this (ms) still holds, by our clock with the grace.
inline std::uint64_t still_held_from(const session& s) {
    const std::uint64_t now = s.now_ms(), grace = skew_ms(s);
    return now > grace ? now - grace : 0;
}

inline bool is_free(const std::optional<grant_row>& latest, std::uint64_t still_held_from_ms) {
    return !latest || latest->released || latest->expires_ms < still_held_from_ms;
}

inline std::optional<grant_row> grant_of(const json::object& row) {
    auto token = uint_field(row, "token");
    auto expires = uint_field(row, "expires_ms");
    auto lock_id = string_field(row, "lock_id");
    auto kind = string_field(row, "kind");
    if (!token || !expires || !lock_id || !kind)
        return std::nullopt;
    return grant_row{*token, std::move(*lock_id), *kind == "release", *expires};
}

inline op<std::optional<grant_row>> grant_latest(session& s, const std::string& id, diagnostics& diag,
                                                 cancellation c = cancellation::honour) {
    auto [ec, found] = co_await s.rows(s.sql().select_grant_latest(id), diag, c);
    if (ec || found.empty())
        co_return std::tuple{ec, std::optional<grant_row>{}};
    auto row = grant_of(found.front());
    if (!row)
        co_return std::tuple{fail(diag, errc::protocol_error, "grant table reply row is incomplete"),
                             std::optional<grant_row>{}};
    co_return std::tuple{error_code{}, std::move(row)};
}

/// Who holds `token` right after a claim of it.
enum class slot_outcome {
    ours,   ///< every event of `token` or later is our grant of `token`
    theirs, ///< a rival's row, a release or a later token
    vacant, ///< no event of `token` or later at all
};

/// Reads the slot back; `expires_ms` gets our row's expiry when ours.
inline op<slot_outcome> read_slot(session& s, const std::string& id, std::uint64_t token, const std::string& lock_id,
                                  diagnostics& diag, cancellation c = cancellation::honour,
                                  std::uint64_t* expires_ms = nullptr) {
    auto [ec, found] = co_await s.rows(s.sql().select_grant_events_since(id, token), diag, c);
    if (ec)
        co_return std::tuple{ec, slot_outcome::theirs};
    if (found.empty())
        co_return std::tuple{error_code{}, slot_outcome::vacant};
    for (const auto& row : found) {
        auto g = grant_of(row);
        if (!g || g->token != token || g->released || g->lock_id != lock_id)
            co_return std::tuple{error_code{}, slot_outcome::theirs};
        if (expires_ms)
            *expires_ms = std::max(*expires_ms, g->expires_ms);
    }
    co_return std::tuple{error_code{}, slot_outcome::ours};
}

/// Records the release of `token` (its own deduplication token; harmless
/// once superseded).
inline op<> release_grant(session& s, const std::string& id, std::uint64_t token, const std::string& lock_id,
                          diagnostics& diag, cancellation c) {
    co_return co_await s.execute(
        s.sql().insert_grant_event(id, token, lock_id, grant_event::release, 0, release_key(id, token)), diag, c);
}

/// After a failure between our claim (or renewal) and learning its
/// outcome: if the id's newest grant is ours (`lock_id`; a renewal may have
/// moved it past `token`), release it. Never cancelled, never fails the
/// caller: what it cannot give back is remembered for the next operation.
inline asio::awaitable<void> withdraw_grant(session& s, const std::string& id, std::uint64_t token,
                                            const std::string& lock_id) {
    diagnostics ignored;
    auto [ec, latest] = co_await grant_latest(s, id, ignored, cancellation::ignore);
    if (!ec && latest && latest->lock_id == lock_id && !latest->released && latest->token >= token)
        std::tie(ec) = co_await release_grant(s, id, latest->token, lock_id, ignored, cancellation::ignore);
    if (ec)
        s.remember_orphan({id, lock_id, token});
}

/// One claim of `next` over `basis` (the newest token, believed free).
/// Completes with the held lock, or an empty one when we did not win;
/// `vacant` is set when the slot turned out vacant, `free_basis` when the
/// newest token read after a refused claim is free (try again at once).
struct claim_result {
    std::optional<held_lock> won;
    bool vacant = false;
    std::optional<std::uint64_t> free_basis;
};

inline op<claim_result> claim_once(session& s, const std::string& id, std::uint64_t basis, std::uint64_t next,
                                   diagnostics& diag) {
    std::string mine = random_uuid();
    const std::uint64_t expires = s.now_ms() + lease_ttl_ms(s);
    claim_result r;
    auto [ec] = co_await s.execute(
        s.sql().claim_grant(id, next, mine, expires, grant_slot_key(id, next), basis, still_held_from(s)), diag);
    if (ec) { // the row may have landed: give it back if it is ours
        s.forget_free_token(id);
        co_await withdraw_grant(s, id, next, mine);
        co_return std::tuple{ec, r};
    }
    s.note_written_rows(diag);
    if (diag.written_rows && *diag.written_rows == 0) {
        // Nothing written: the check inside the INSERT failed (a rival took
        // a token, or our guess was stale), or this is our own INSERT resent
        // after a lost reply and deduplicated. The newest event tells which.
        s.forget_free_token(id);
        auto [lec, latest] = co_await grant_latest(s, id, diag);
        if (lec) {
            co_await withdraw_grant(s, id, next, mine);
            co_return std::tuple{lec, r};
        }
        if (latest && latest->token == next && latest->lock_id == mine && !latest->released)
            r.won = held_lock{id, std::move(mine), next, expires};
        else if (is_free(latest, still_held_from(s)))
            r.free_basis = latest ? latest->token : 0;
        co_return std::tuple{error_code{}, std::move(r)};
    }
    // Written, or not counted. A count of one does not say the row survived:
    // the engine counts a block it then drops as a duplicate of a rival's
    // grant (chDB 26.5 does), so read back who holds the token.
    auto [hec, outcome] = co_await read_slot(s, id, next, mine, diag);
    if (hec) {
        co_await withdraw_grant(s, id, next, mine);
        co_return std::tuple{hec, r};
    }
    if (outcome == slot_outcome::ours)
        r.won = held_lock{id, std::move(mine), next, expires};
    else
        s.forget_free_token(id);
    r.vacant = outcome == slot_outcome::vacant;
    co_return std::tuple{error_code{}, std::move(r)};
}

inline op<held_lock> acquire_strict(session& s, const std::string& id, time_point deadline, diagnostics& diag) {
    std::uint64_t vacant_token = 0;
    std::optional<std::uint64_t> basis = s.free_token_hint(id);
    int immediate = 0; // claims retried without waiting
    for (;;) {
        if (!basis) {
            auto [ec, latest] = co_await grant_latest(s, id, diag);
            if (ec)
                co_return std::tuple{ec, held_lock{}};
            if (is_free(latest, still_held_from(s)))
                basis = latest ? latest->token : 0;
        }
        if (basis) {
            const std::uint64_t next = std::max(*basis + 1, vacant_token + 1);
            auto [ec, r] = co_await claim_once(s, id, *basis, next, diag);
            if (ec)
                co_return std::tuple{ec, held_lock{}};
            if (r.won)
                co_return std::tuple{error_code{}, std::move(*r.won)};
            basis.reset();
            if (r.vacant) {
                vacant_token = next;
                if (s.now() < deadline)
                    continue; // try the next token now
            }
            if (r.free_basis && s.now() < deadline && ++immediate <= 8) {
                basis = r.free_basis;
                continue;
            }
        }
        if (s.now() >= deadline)
            co_return std::tuple{could_not_acquire(diag, id), held_lock{}};
        if (auto [wec] = co_await s.wait(until_next_round(s, deadline)); wec)
            co_return std::tuple{wec, held_lock{}};
        basis.reset();
        immediate = 0;
    }
}

/// strict: how many tokens an id's grant events may span before a release prunes them.
inline constexpr std::uint64_t grant_prune_interval = 64;

/// Records the release of `h`'s grant. Every grant_prune_interval-th
/// token, also drops the id's older events (~2 rows per grant); the newest
/// token's stay, so tokens keep increasing. A failed prune only leaves rows
/// for the next one.
inline op<> release_strict(session& s, held_lock h, diagnostics& diag, cancellation c) {
    if (h.renewal_unknown) {
        // A renewal whose outcome was lost may have moved the lease to a
        // newer token: release the newest one if it is ours.
        auto [lec, latest] = co_await grant_latest(s, h.state_id, diag, c);
        if (lec)
            co_return std::tuple{lec};
        if (latest && latest->lock_id == h.lock_id && !latest->released && latest->token > h.token)
            h.token = latest->token;
    }
    auto [ec] = co_await release_grant(s, h.state_id, h.token, h.lock_id, diag, c);
    if (ec) {
        s.forget_free_token(h.state_id);
        co_return std::tuple{ec};
    }
    s.remember_free_token(h.state_id, h.token);
    if (h.token % grant_prune_interval == 0) {
        diagnostics ignored;
        co_await s.execute(s.sql().prune_grants(h.state_id, h.token), ignored, cancellation::ignore);
    }
    co_return std::tuple{error_code{}};
}

} // namespace chstate::detail
