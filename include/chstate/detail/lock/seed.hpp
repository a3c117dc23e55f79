// chstate/detail/lock/seed.hpp — the seed's lock protocol, kept so a
// Python Meltano process and chstate exclude each other (docs/lock.md,
// seed_compatible). Best effort: a background merge that collapses rival
// candidate rows, a slow acquirer or clocks apart can let two win.
//
// acquire:
//   1. the holder is the smallest lock_id among the id's rows (FINAL);
//   2. if held, delete rows older than the stale age (all ids), look again;
//   3. if free, insert a candidate stamped with the store's clock, wait the
//      settle time, read every candidate row (no FINAL): the smallest
//      lock_id wins; a loser withdraws its row;
//   4. otherwise wait the retry interval and repeat until the deadline.
// A candidate row of ours that a failure or a cancellation leaves behind
// is withdrawn at once (never cancelled), or remembered and withdrawn
// before the store's next operation; unreturned rows age out (stale_age).
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/deletes.hpp>
#include <chstate/detail/lock/held.hpp>

namespace chstate::detail {

/// Gives back our candidate row; never cancelled, never fails the caller.
CHSTATE_DECL asio::awaitable<void> withdraw_candidate(session& s, const std::string& id, const std::string& lock_id);

CHSTATE_DECL op<std::optional<std::string>> lock_holder(session& s, const std::string& id, diagnostics& diag);

/// Step 2: removes stale rows (all ids) and reads the holder again.
CHSTATE_DECL op<std::optional<std::string>> clear_stale_then_holder(session& s, const std::string& id, diagnostics& diag);

/// Step 3 once the id looked free: true when our candidate won.
/// `checked`: when the holder check that found it free began.
CHSTATE_DECL op<bool> try_candidate(session& s, const std::string& id, const std::string& mine, time_point checked,
                              time_point deadline, diagnostics& diag);

/// The seed's protocol until won or `deadline`; `notes`: what it saw of rivals.
CHSTATE_DECL op<held_lock> acquire_seed(session& s, const std::string& id, time_point deadline, diagnostics& diag,
                                        acquire_notes& notes);

/// Deletes our lock row.
CHSTATE_DECL op<> release_seed(session& s, const held_lock& h, diagnostics& diag, cancellation c);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/lock/seed.ipp>
#endif
