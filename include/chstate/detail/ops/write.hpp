// chstate/detail/ops/write.hpp — set, set_all, delete_state, clear_all.
//
// Writes serialise first: a state that could not be read back (too deep,
// invalid UTF-8, an integer Python cannot parse) is refused before
// anything is sent (rows.hpp, serialize_parts).
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/lock/acquire.hpp>

namespace chstate::detail {

/// Writes `st`; with `fence` (a strict lease's lock_id) only while that
/// lease holds the id's newest grant — the statement alone: fenced_set
/// (locked.hpp) adds the verdict. `newest_ms`: the id's newest version as
/// read under the lock (update), the floor of a monotonic version.
CHSTATE_DECL op<> write_state(session& s, const state& st, diagnostics& diag,
                        std::optional<std::string> fence = std::nullopt,
                        std::optional<std::uint64_t> newest_ms = std::nullopt);

CHSTATE_DECL op<> set(session& s, state st, diagnostics& diag);

/// Deletes `id`'s state; `fence` as write_state's.
CHSTATE_DECL op<> delete_fenced(session& s, std::string id, std::optional<std::string> fence, diagnostics& diag);

CHSTATE_DECL op<> delete_state(session& s, std::string id, diagnostics& diag);

/// Counts the states, then removes them all (TRUNCATE; a replicated
/// DELETE on a cluster). Completes with the count.
CHSTATE_DECL op<std::uint64_t> clear_all(session& s, diagnostics& diag);

/// One bulk INSERT. Every state is validated first; any invalid one
/// refuses the batch before anything is written. Versions: versions.hpp.
CHSTATE_DECL op<> set_all(session& s, std::vector<state> states, diagnostics& diag);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/ops/write.ipp>
#endif
