// chstate/detail/ops/read.hpp — get, state_ids, get_all.
//
// Every reply that carries ids or state text is RowBinary: ids come back
// byte for byte (valid UTF-8 or not), and one state that cannot be read
// never hides another.
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/lock/acquire.hpp>

#include <functional>

namespace chstate::detail {

CHSTATE_DECL op<std::optional<state>> get(session& s, std::string id, diagnostics& diag);

/// get; `newest_ms`, when not null, also gets the stored row's version in
/// milliseconds (0 when nothing is stored): update() binds it into its write.
CHSTATE_DECL op<std::optional<state>> read_state(session& s, std::string id, diagnostics& diag,
                                                 std::uint64_t* newest_ms);

CHSTATE_DECL op<std::vector<std::string>> state_ids(session& s, std::string glob, diagnostics& diag);

/// Called once per readable state, in state_id order.
using state_visitor = std::function<void(state&&)>;
/// Called for each stored state that cannot be read (its id and why).
using unreadable_visitor = std::function<void(unreadable_state&&)>;

/// Streams every state to `visitor`, one reply chunk in memory at a time.
/// Without `on_unreadable`, unreadable states fail the operation with
/// errc::corrupt_state after every readable one was visited. A visitor that
/// throws stops the listing: the operation fails with errc::callback_failed
/// naming the exception (nothing is thrown through the transport's thread).
CHSTATE_DECL op<std::uint64_t> get_all(session& s, state_visitor visitor, unreadable_visitor on_unreadable,
                                 diagnostics& diag);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/ops/read.ipp>
#endif
