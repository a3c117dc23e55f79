// chstate/detail/ops/locked.hpp — the operations that take the lock:
// update, clear, merge (via update), move (src locked across its read and
// delete), and set(lease, s).
//
// update(s): under the lock for s.state_id — when s is not complete and a
// state is stored, s.partial_state is deep-merged onto the stored partial
// state and the stored state (with its completed part) is written;
// otherwise s is written as is (Meltano does not read a complete state
// first, so update() can replace a stored state that no longer parses).
//
// strict: four round trips — claim, read, fenced write, release (three for
// a complete state). The claim is not read back: the fenced write lands
// only under the id's newest grant and only when that grant is ours, so a
// write that lands proves the claim did. A refused write on an unconfirmed
// claim is looked into: a claim a rival's grant displaced (or a vacant
// token) never held the lock, so update() seeks it again, within the
// same lock.timeout; one that had landed lost its lease (errc::lock_lost).
//
// The lock is always given back, whatever happened in between, and never
// by a cancellable statement: a cancellation stops the operation's next
// step, not its cleanup. A release that fails does not undo a write that
// landed: the lock is remembered and given back before the store's next
// operation (or ages out), so the caller learns the write's own fate.
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/ops/read.hpp>
#include <chstate/detail/ops/write.hpp>
#include <chstate/detail/shown.hpp>

namespace chstate::detail {

/// A write under a held lock: seed_compatible a plain set; strict an
/// INSERT conditional on the lease, then the store's verdict (fence.hpp).
/// `newest_ms`: the id's newest version as read under this lock (write_state).
CHSTATE_DECL op<> fenced_set(session& s, const state& st, const held_lock& h, diagnostics& diag,
                             std::optional<std::uint64_t> newest_ms = std::nullopt);

/// strict: half of `h`'s lease is gone.
inline bool renewal_due(const session& s, const held_lock& h) {
    return h.strict() && h.steady_deadline_ms != 0 && s.steady_ms() + lease_ttl_ms(s) / 2 >= h.steady_deadline_ms;
}

/// strict: renews `h` in place before a write when half its lease is gone,
/// so a slow operation does not hand the id to a rival midway. `h` is
/// updated even when the renewal fails: one whose reply was lost may have
/// landed (renewal_unknown), and the release must then look for the newer
/// token instead of giving back the old one.
CHSTATE_DECL op<> keep_alive(session& s, held_lock& h, diagnostics& diag);

/// One attempt of update() under `held`: `merged` the stored state with
/// the partial merged in (none: `incoming` itself was written);
/// `never_held`: an unconfirmed claim turned out never to have landed —
/// nothing was written, nothing is to be given back (`vacant`: nobody's).
struct update_attempt {
    std::optional<state> merged;
    bool never_held = false;
    bool vacant = false;
};

/// An unconfirmed claim (update()'s, not read back) looked up: true when it
/// landed (`held` is then confirmed); false when it never held the lock
/// (`attempt` says so: nothing to give back, the lock is sought again).
CHSTATE_DECL op<bool> confirm_claim(session& s, held_lock& held, update_attempt& attempt, diagnostics& diag);

CHSTATE_DECL op<update_attempt> update_under(session& s, const state& incoming, held_lock& held, diagnostics& diag);

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

CHSTATE_DECL op<state> update(session& s, state incoming, diagnostics& diag);

struct nothing {};

/// Deletes `id`'s state under its lock (strict: fenced, then confirmed).
CHSTATE_DECL op<> clear(session& s, std::string id, diagnostics& diag);

/// clear's work under `held`, the lock of `id` (renewed first when due).
CHSTATE_DECL op<> clear_under(session& s, const std::string& id, held_lock& held, diagnostics& diag);

/// copy, move and merge onto the source itself would change or lose it.
inline error_code check_distinct(const std::string& src, const std::string& dst, const char* what,
                                 diagnostics& diag) {
    if (src != dst)
        return {};
    return fail(diag, errc::invalid_argument,
                std::string(what) + ": source and destination are the same state_id \"" + shown(src) +
                    "\"; nothing was changed");
}

/// src's stored state, or errc::state_not_found.
CHSTATE_DECL op<state> stored_source(session& s, const std::string& src, diagnostics& diag);

/// What copy does after writing the destination.
enum class then { keep_source, clear_source };

/// dst := src (both parts); `after` == clear_source: move, which holds
/// src's lock from before its read until its delete (copy reads src once
/// and takes no lock: it changes only dst, which it does not read).
CHSTATE_DECL op<> copy(session& s, std::string src, std::string dst, then after, diagnostics& diag);

/// update(dst, partial = src's merged view).
CHSTATE_DECL op<state> merge(session& s, std::string src, std::string dst, diagnostics& diag);

/// set(lease, st): `h` must hold the lock of st.state_id (`held`: the
/// lease has not been released or moved from).
CHSTATE_DECL op<> set_under_lease(session& s, bool held, held_lock h, state st, diagnostics& diag);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/ops/locked.ipp>
#endif
