// chstate/detail/ops/locked.hpp — the operations that take the lock:
// update, clear, merge and move (via clear), and set(lease, s).
//
// update(s): under the lock for s.state_id — when s is not complete and a
// state is stored, s.partial_state is deep-merged onto the stored partial
// state and the stored state (with its completed part) is written;
// otherwise s is written as is (Meltano does not read a complete state
// first, so update() can replace a stored state that no longer parses).
//
// The lock is always given back, whatever happened in between, and never
// by a cancellable statement: a cancellation stops the operation's next
// step, not its cleanup. A release that fails does not undo a write that
// landed: the lock is remembered and given back before the store's next
// operation (or ages out), so the caller learns the write's own fate.
#pragma once

#include <chstate/detail/ops/read.hpp>
#include <chstate/detail/ops/write.hpp>

namespace chstate::detail {

/// A write under a held lock: seed_compatible a plain set; strict an
/// INSERT conditional on the lease, then the store's verdict (fence.hpp).
inline op<> fenced_set(session& s, const state& st, const held_lock& h, diagnostics& diag) {
    if (!h.strict())
        co_return co_await write_state(s, st, diag);
    if (auto [ec] = co_await write_state(s, st, diag, h.lock_id); ec)
        co_return std::tuple{ec};
    co_return co_await settle_fenced_write(s, h, diag);
}

/// strict: renews `h` before a write when half its lease is gone, so a
/// slow operation does not hand the id to a rival midway.
inline op<held_lock> keep_alive(session& s, held_lock h, diagnostics& diag) {
    if (!h.strict() || h.expires_ms == 0 || s.now_ms() + lease_ttl_ms(s) / 2 < h.expires_ms)
        co_return std::tuple{error_code{}, std::move(h)};
    co_return co_await renew_grant(s, std::move(h), diag);
}

/// Runs `body(held)` under the lock of `id`, then gives the lock back.
template <class Result, class Body>
op<Result> under_lock(session& s, const std::string& id, diagnostics& diag, Body body) {
    auto [ec, held] = co_await acquire(s, id, diag);
    if (ec)
        co_return std::tuple{ec, Result{}};
    auto [bec, result] = co_await body(held);
    diagnostics release_diag;
    co_await release(s, held, release_diag, cancellation::ignore);
    co_return std::tuple{bec, bec ? Result{} : std::move(result)};
}

inline op<state> update(session& s, state incoming, diagnostics& diag) {
    if (auto ec = check_id(incoming.state_id, diag))
        co_return std::tuple{ec, state{}};
    const std::string id = incoming.state_id;
    co_return co_await under_lock<state>(s, id, diag, [&](held_lock& held) -> op<state> {
        state written;
        if (!incoming.is_complete()) {
            auto [ec, current] = co_await get(s, id, diag);
            if (ec)
                co_return std::tuple{ec, state{}};
            written = current ? std::move(current->merge_partial(incoming)) : std::move(incoming);
        } else {
            written = std::move(incoming);
        }
        auto [kec, kept] = co_await keep_alive(s, held, diag);
        if (kec)
            co_return std::tuple{kec, state{}};
        held = std::move(kept);
        auto [ec] = co_await fenced_set(s, written, held, diag);
        co_return std::tuple{ec, std::move(written)};
    });
}

struct nothing {};

/// Deletes `id`'s state under its lock (strict: fenced, then confirmed).
inline op<> clear(session& s, std::string id, diagnostics& diag) {
    if (auto ec = check_id(id, diag))
        co_return std::tuple{ec};
    auto [ec, done] = co_await under_lock<nothing>(s, id, diag, [&](held_lock& held) -> op<nothing> {
        auto [kec, kept] = co_await keep_alive(s, held, diag);
        if (kec)
            co_return std::tuple{kec, nothing{}};
        held = std::move(kept);
        std::optional<std::string> fence;
        if (held.strict())
            fence = held.lock_id;
        auto [dec] = co_await delete_fenced(s, id, fence, diag);
        if (!dec && held.strict())
            std::tie(dec) = co_await confirm_grant(s, held, "delete", diag);
        co_return std::tuple{dec, nothing{}};
    });
    co_return std::tuple{ec};
}

/// copy, move and merge onto the source itself would change or lose it.
inline error_code check_distinct(const std::string& src, const std::string& dst, const char* what,
                                 diagnostics& diag) {
    if (src != dst)
        return {};
    return fail(diag, errc::invalid_argument,
                std::string(what) + ": source and destination are the same state_id \"" + src +
                    "\"; nothing was changed");
}

/// src's stored state, or errc::state_not_found.
inline op<state> stored_source(session& s, const std::string& src, diagnostics& diag) {
    auto [ec, found] = co_await get(s, src, diag);
    if (ec)
        co_return std::tuple{ec, state{}};
    if (!found)
        co_return std::tuple{fail(diag, errc::state_not_found, "no state stored for \"" + src + "\""), state{}};
    co_return std::tuple{error_code{}, std::move(*found)};
}

/// What copy does after writing the destination.
enum class then { keep_source, clear_source };

/// dst := src (both parts); `after` == clear_source: move.
inline op<> copy(session& s, std::string src, std::string dst, then after, diagnostics& diag) {
    if (auto ec = check_id(dst, diag))
        co_return std::tuple{ec};
    if (auto ec = check_distinct(src, dst, after == then::clear_source ? "move" : "copy", diag))
        co_return std::tuple{ec};
    auto [ec, found] = co_await stored_source(s, src, diag);
    if (ec)
        co_return std::tuple{ec};
    found.state_id = dst;
    if (std::tie(ec) = co_await write_state(s, found, diag); ec || after == then::keep_source)
        co_return std::tuple{ec};
    co_return co_await clear(s, src, diag);
}

/// update(dst, partial = src's merged view).
inline op<state> merge(session& s, std::string src, std::string dst, diagnostics& diag) {
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

/// set(lease, st): `h` must hold the lock of st.state_id (`held`: the
/// lease has not been released or moved from).
inline op<> set_under_lease(session& s, bool held, held_lock h, state st, diagnostics& diag) {
    if (auto ec = check_id(st.state_id, diag))
        co_return std::tuple{ec};
    if (!held)
        co_return std::tuple{fail(diag, errc::lock_lost,
                                  "set(lease, state): the lease does not hold a lock (released or moved from)")};
    if (h.state_id != st.state_id)
        co_return std::tuple{fail(diag, errc::invalid_argument,
                                  "set(lease, state): the lease is for state_id " + h.state_id +
                                      ", the state is for state_id " + st.state_id)};
    co_return co_await fenced_set(s, st, h, diag);
}

} // namespace chstate::detail
