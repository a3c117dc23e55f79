// chstate/detail/lock/strict.ipp — the definitions of lock/strict.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/lock/strict.hpp>

namespace chstate::detail {

CHSTATE_DECL op<std::optional<grant_row>> grant_latest(session& s, const std::string& id, diagnostics& diag,
                                                 cancellation c) {
    auto [ec, found] = co_await s.rows(s.sql().select_grant_latest(id), diag, c);
    if (ec || found.empty())
        co_return std::tuple{ec, std::optional<grant_row>{}};
    auto row = grant_of(found.front());
    if (!row)
        co_return std::tuple{fail(diag, errc::protocol_error, "grant table reply row is incomplete"),
                             std::optional<grant_row>{}};
    co_return std::tuple{error_code{}, std::move(row)};
}

CHSTATE_DECL op<slot_outcome> read_slot(session& s, const std::string& id, std::uint64_t token, const std::string& lock_id,
                                  diagnostics& diag, cancellation c,
                                  std::uint64_t* steady_deadline_ms) {
    const std::uint64_t asked = s.steady_ms();
    auto [ec, found] = co_await s.rows(s.sql().select_grant_events_since(id, token), diag, c);
    if (ec)
        co_return std::tuple{ec, slot_outcome::theirs};
    if (found.empty())
        co_return std::tuple{error_code{}, slot_outcome::vacant};
    for (const auto& row : found) {
        auto g = grant_of(row);
        if (!g || g->token != token || g->released || g->lock_id != lock_id)
            co_return std::tuple{error_code{}, slot_outcome::theirs};
        if (steady_deadline_ms)
            *steady_deadline_ms = std::min(*steady_deadline_ms, steady_bound(asked, g->expires_ms, g->server_now_ms));
    }
    co_return std::tuple{error_code{}, slot_outcome::ours};
}

CHSTATE_DECL op<> release_grant(session& s, const std::string& id, std::uint64_t token, const std::string& lock_id,
                          diagnostics& diag, cancellation c) {
    co_return co_await s.execute(
        s.sql().insert_grant_event(id, token, lock_id, grant_event::release, 0, release_key(id, token)), diag, c);
}

CHSTATE_DECL asio::awaitable<void> withdraw_grant(session& s, const std::string& id, std::uint64_t token,
                                            const std::string& lock_id) {
    diagnostics ignored;
    auto [ec, latest] = co_await grant_latest(s, id, ignored, cancellation::ignore);
    if (!ec && latest && latest->lock_id == lock_id && !latest->released && latest->token >= token)
        std::tie(ec) = co_await release_grant(s, id, latest->token, lock_id, ignored, cancellation::ignore);
    if (ec)
        s.remember_orphan({id, lock_id, token});
}

CHSTATE_DECL op<claim_result> claim_once(session& s, const std::string& id, std::uint64_t basis, std::uint64_t next,
                                   diagnostics& diag, bool confirm) {
    if (co_await cancelled()) // the claim below is not cut short: not sent at all then
        co_return std::tuple{make_error_code(asio::error::operation_aborted), claim_result{}};
    std::string mine = random_uuid();
    // The server writes the expiry on its clock; ours is bounded from now,
    // before the claim is sent, so it ends no later than the server's.
    const std::uint64_t ttl = lease_ttl_ms(s);
    held_lock mine_held{id, mine, next, s.now_ms() + ttl, s.steady_ms() + ttl};
    claim_result r;
    // Never cut short (cancellation::ignore): a claim stopped mid-flight
    // (an HTTP request closed) may still land after we looked; one that ran
    // to its end has an outcome we can read and give back.
    auto [ec] = co_await s.execute(
        s.sql().claim_grant(id, next, mine, ttl, grant_slot_key(id, next), basis, skew_ms(s)), diag,
        cancellation::ignore);
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
        // (our own earlier send of this claim, kept: every send of it came
        // after mine_held's reading, so its bound stands)
        if (latest && latest->token == next && latest->lock_id == mine && !latest->released)
            r.won = std::move(mine_held);
        else if (is_free(latest, skew_ms(s)))
            r.free_basis = latest ? latest->token : 0;
        co_return std::tuple{error_code{}, std::move(r)};
    }
    // Written, or not counted. A count of one does not say the row survived:
    // the engine counts a block it then drops as a duplicate of a rival's
    // grant (chDB 26.5 does), so read back who holds the token — unless the
    // caller's fenced write will tell (update(): the fence refuses anyone
    // whose grant is not the newest, or who has none).
    if (!confirm && diag.written_rows) {
        r.won = std::move(mine_held);
        r.won->unconfirmed = true;
        co_return std::tuple{error_code{}, std::move(r)};
    }
    auto [hec, outcome] = co_await read_slot(s, id, next, mine, diag);
    if (hec) {
        co_await withdraw_grant(s, id, next, mine);
        co_return std::tuple{hec, r};
    }
    if (outcome == slot_outcome::ours)
        r.won = std::move(mine_held);
    else
        s.forget_free_token(id);
    r.vacant = outcome == slot_outcome::vacant;
    co_return std::tuple{error_code{}, std::move(r)};
}

CHSTATE_DECL op<held_lock> acquire_strict(session& s, const std::string& id, time_point deadline, diagnostics& diag,
                                          const acquire_request& how, acquire_notes& notes) {
    std::uint64_t vacant_token = how.vacant_token;
    std::optional<std::uint64_t> basis = s.free_token_hint(id);
    int immediate = 0; // claims retried without waiting
    for (;;) {
        if (!basis) {
            auto [ec, latest] = co_await grant_latest(s, id, diag);
            if (ec)
                co_return std::tuple{ec, held_lock{}};
            if (is_free(latest, skew_ms(s)))
                basis = latest ? latest->token : 0;
            notes.holder = basis ? std::string() : latest->lock_id;
        }
        if (basis) {
            const std::uint64_t next = std::max(*basis + 1, vacant_token + 1);
            auto [ec, r] = co_await claim_once(s, id, *basis, next, diag, !how.optimistic);
            if (ec)
                co_return std::tuple{ec, held_lock{}};
            if (r.won)
                co_return std::tuple{error_code{}, std::move(*r.won)};
            if (!r.vacant)
                notes.rival_won = true;
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
            co_return std::tuple{could_not_acquire(diag, id, deadline_detail(notes, s.options().lock.timeout, false)),
                                 held_lock{}};
        if (auto [wec] = co_await s.wait(until_next_round(s, deadline)); wec)
            co_return std::tuple{wec, held_lock{}};
        basis.reset();
        immediate = 0;
    }
}

CHSTATE_DECL op<claim_fate> fate_of_claim(session& s, const held_lock& h, diagnostics& diag) {
    auto [ec, found] = co_await s.rows(s.sql().select_grant_events_since(h.state_id, h.token), diag);
    if (ec)
        co_return std::tuple{ec, claim_fate::rivals};
    bool token_seen = false;
    for (const auto& row : found) {
        auto g = grant_of(row);
        if (!g)
            co_return std::tuple{fail(diag, errc::protocol_error, "grant table reply row is incomplete"),
                                 claim_fate::rivals};
        if (g->token != h.token)
            continue;
        token_seen = true;
        if (g->lock_id == h.lock_id && !g->released)
            co_return std::tuple{error_code{}, claim_fate::landed};
    }
    co_return std::tuple{error_code{}, token_seen ? claim_fate::rivals : claim_fate::vacant};
}

CHSTATE_DECL op<> release_strict(session& s, held_lock h, diagnostics& diag, cancellation c) {
    if (h.unconfirmed) {
        // Possibly never ours: give the token back only if the newest grant
        // is (withdraw_grant remembers what it cannot give back).
        s.forget_free_token(h.state_id);
        co_await withdraw_grant(s, h.state_id, h.token, h.lock_id);
        co_return std::tuple{error_code{}};
    }
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
