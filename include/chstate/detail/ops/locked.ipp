// chstate/detail/ops/locked.ipp — the definitions of ops/locked.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/ops/locked.hpp>

namespace chstate::detail {

CHSTATE_DECL op<> fenced_set(session& s, const state& st, const held_lock& h, diagnostics& diag,
                             std::optional<std::uint64_t> newest_ms) {
    if (!h.strict())
        co_return co_await write_state(s, st, diag, std::nullopt, newest_ms);
    if (auto [ec] = co_await write_state(s, st, diag, h.lock_id, newest_ms); ec)
        co_return std::tuple{ec};
    co_return co_await settle_fenced_write(s, h, diag);
}

CHSTATE_DECL op<> keep_alive(session& s, held_lock& h, diagnostics& diag) {
    if (!renewal_due(s, h))
        co_return std::tuple{error_code{}};
    auto [ec, renewed] = co_await renew_grant(s, h, diag);
    h = std::move(renewed); // on failure too (see locked.hpp)
    co_return std::tuple{ec};
}

CHSTATE_DECL op<bool> confirm_claim(session& s, held_lock& held, update_attempt& attempt, diagnostics& diag) {
    auto [ec, fate] = co_await fate_of_claim(s, held, diag);
    if (ec)
        co_return std::tuple{ec, false};
    if (fate != claim_fate::landed) {
        attempt.never_held = true;
        attempt.vacant = fate == claim_fate::vacant;
        co_return std::tuple{error_code{}, false};
    }
    held.unconfirmed = false;
    co_return std::tuple{error_code{}, true};
}

CHSTATE_DECL op<update_attempt> update_under(session& s, const state& incoming, held_lock& held, diagnostics& diag) {
    update_attempt attempt;
    // The stored version, read under the lock with the state: the write's
    // monotonic version starts from it and reads nothing more. Every later
    // writer of the id either holds this lock after us or started before
    // our write finished (versions.hpp).
    std::optional<std::uint64_t> newest_ms;
    if (!incoming.is_complete()) {
        std::uint64_t newest = 0;
        auto [ec, current] = co_await read_state(s, incoming.state_id, diag, &newest);
        if (ec)
            co_return std::tuple{ec, std::move(attempt)};
        newest_ms = newest;
        if (current)
            attempt.merged = std::move(current->merge_partial(incoming));
    }
    const state& written = attempt.merged ? *attempt.merged : incoming;
    if (held.unconfirmed && renewal_due(s, held)) { // only a holder renews: look the claim up first
        auto [cec, landed] = co_await confirm_claim(s, held, attempt, diag);
        if (cec || !landed) // never held: ends the attempt without an error
            co_return std::tuple{cec, std::move(attempt)};
    }
    if (auto [kec] = co_await keep_alive(s, held, diag); kec)
        co_return std::tuple{kec, std::move(attempt)};
    if (!held.strict()) {
        auto [ec] = co_await write_state(s, written, diag, std::nullopt, newest_ms);
        co_return std::tuple{ec, std::move(attempt)};
    }
    if (auto [ec] = co_await write_state(s, written, diag, held.lock_id, newest_ms); ec)
        co_return std::tuple{ec, std::move(attempt)};
    // A row written passed the fence: the newest grant was ours, so our
    // claim landed. None written: find out whether it ever did.
    if (held.unconfirmed && diag.written_rows) {
        if (*diag.written_rows == 0) {
            const auto refused = diag.written_rows;
            auto [cec, landed] = co_await confirm_claim(s, held, attempt, diag);
            if (cec || !landed)
                co_return std::tuple{cec, std::move(attempt)};
            diag.written_rows = refused; // the write's count, for settle_fenced_write
        }
        held.unconfirmed = false;
    }
    auto [ec] = co_await settle_fenced_write(s, held, diag);
    co_return std::tuple{ec, std::move(attempt)};
}

CHSTATE_DECL op<state> update(session& s, state incoming, diagnostics& diag) {
    if (auto ec = check_id(incoming.state_id, diag))
        co_return std::tuple{ec, state{}};
    const std::string id = incoming.state_id;
    const time_point started = s.now();
    // strict: the claim is not read back (acquire_request::optimistic); a
    // claim that never landed shows as a refused write, and the lock is
    // then sought again until lock.timeout has passed since the start.
    acquire_request how{.optimistic = true};
    for (;;) {
        auto [ec, held] = co_await acquire(s, id, diag, how);
        if (ec)
            co_return std::tuple{ec, state{}};
        auto [bec, attempt] = co_await update_under(s, incoming, held, diag);
        if (!bec && attempt.never_held) { // nothing to give back: the token was never ours
            s.forget_free_token(id);
            how.deadline = started + s.options().lock.timeout;
            if (attempt.vacant)
                how.vacant_token = std::max(how.vacant_token, held.token);
            continue;
        }
        diagnostics release_diag;
        co_await release(s, held, release_diag, cancellation::ignore);
        if (bec)
            co_return std::tuple{bec, state{}};
        co_return std::tuple{error_code{}, attempt.merged ? std::move(*attempt.merged) : std::move(incoming)};
    }
}

CHSTATE_DECL op<> clear_under(session& s, const std::string& id, held_lock& held, diagnostics& diag) {
    if (auto [kec] = co_await keep_alive(s, held, diag); kec)
        co_return std::tuple{kec};
    std::optional<std::string> fence;
    if (held.strict())
        fence = held.lock_id;
    auto [dec] = co_await delete_fenced(s, id, fence, diag);
    if (!dec && held.strict())
        std::tie(dec) = co_await confirm_grant(s, held, "delete", diag);
    co_return std::tuple{dec};
}

CHSTATE_DECL op<> clear(session& s, std::string id, diagnostics& diag) {
    if (auto ec = check_id(id, diag))
        co_return std::tuple{ec};
    auto [ec, done] = co_await under_lock<nothing>(s, id, diag, [&](held_lock& held) -> op<nothing> {
        auto [dec] = co_await clear_under(s, id, held, diag);
        co_return std::tuple{dec, nothing{}};
    });
    co_return std::tuple{ec};
}

CHSTATE_DECL op<state> stored_source(session& s, const std::string& src, diagnostics& diag) {
    auto [ec, found] = co_await get(s, src, diag);
    if (ec)
        co_return std::tuple{ec, state{}};
    if (!found)
        co_return std::tuple{fail(diag, errc::state_not_found, "no state stored for \"" + shown(src) + "\""), state{}};
    co_return std::tuple{error_code{}, std::move(*found)};
}

CHSTATE_DECL op<> copy(session& s, std::string src, std::string dst, then after, diagnostics& diag) {
    if (auto ec = check_id(dst, diag))
        co_return std::tuple{ec};
    if (auto ec = check_distinct(src, dst, after == then::clear_source ? "move" : "copy", diag))
        co_return std::tuple{ec};
    // src's state as one read saw it, written as dst.
    auto copy_once = [&]() -> op<> {
        auto [ec, found] = co_await stored_source(s, src, diag);
        if (ec)
            co_return std::tuple{ec};
        found.state_id = dst;
        co_return co_await write_state(s, found, diag);
    };
    // A copy changes only dst, which it does not read: no lock.
    if (after == then::keep_source)
        co_return co_await copy_once();
    // A move reads src and then deletes it: src's lock is held from before
    // the read until after the delete, so a write to src confirmed in
    // between cannot be deleted unseen — an update() of src lands before
    // the read (and moves with it) or after the lock is given back (and
    // stays in src). Without it a move deleted every update confirmed
    // while it wrote dst (1,504 of 1,664 in an outside test on chDB).
    if (auto ec = check_id(src, diag))
        co_return std::tuple{ec};
    auto [ec, done] = co_await under_lock<nothing>(s, src, diag, [&](held_lock& held) -> op<nothing> {
        if (auto [wec] = co_await copy_once(); wec)
            co_return std::tuple{wec, nothing{}};
        auto [cec] = co_await clear_under(s, src, held, diag);
        co_return std::tuple{cec, nothing{}};
    });
    co_return std::tuple{ec};
}

CHSTATE_DECL op<state> merge(session& s, std::string src, std::string dst, diagnostics& diag) {
    if (auto ec = check_id(dst, diag))
        co_return std::tuple{ec, state{}};
    if (auto ec = check_distinct(src, dst, "merge", diag))
        co_return std::tuple{ec, state{}};
    auto [ec, found] = co_await stored_source(s, src, diag);
    if (ec)
        co_return std::tuple{ec, state{}};
    state incoming;
    incoming.state_id = std::move(dst);
    incoming.partial_state = found.merged();
    co_return co_await update(s, std::move(incoming), diag);
}

CHSTATE_DECL op<> set_under_lease(session& s, bool held, held_lock h, state st, diagnostics& diag) {
    if (auto ec = check_id(st.state_id, diag))
        co_return std::tuple{ec};
    if (!held)
        co_return std::tuple{fail(diag, errc::lock_lost,
                                  "set(lease, state): the lease does not hold a lock (released or moved from)")};
    if (h.state_id != st.state_id)
        co_return std::tuple{fail(diag, errc::invalid_argument,
                                  "set(lease, state): the lease is for state_id " + shown(h.state_id) +
                                      ", the state is for state_id " + shown(st.state_id))};
    co_return co_await fenced_set(s, st, h, diag);
}

} // namespace chstate::detail
