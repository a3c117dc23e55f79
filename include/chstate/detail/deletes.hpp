// chstate/detail/deletes.hpp — a DELETE that is gone when it returns.
//
// Every DELETE the store sends is a mutation. A lightweight DELETE (≥ 23.3,
// chDB) hides its rows before it replies; an ALTER TABLE … DELETE (older
// servers) runs in the background, so the store waits until
// system.mutations shows none unfinished on the table — the next statement
// must not see a deleted lock row or state. On a cluster the wait is for
// the rows themselves (replicated_delete). Waits and give-ups are on the
// store's Clock. Once the server has accepted a DELETE, a failure to see it
// finish is errc::outcome_unknown: it may still apply.
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/session.hpp>

namespace chstate::detail {

/// How long a DELETE the server accepted may take to be seen finished.
inline constexpr duration delete_give_up{60'000};

inline std::tuple<error_code> delete_outcome_unknown(diagnostics& diag, const std::string& what,
                                                     const std::string& why) {
    return std::tuple{fail(diag, errc::outcome_unknown,
                           what + " was accepted, but " + why + ": the delete may or may not have been applied yet")};
}

/// Cluster mode: a DELETE is a replicated mutation, waited for until its
/// rows are gone on the connected replica (system.mutations would not do:
/// a mutation that cannot touch the newest quorum part stays unfinished
/// though every row it had to delete is gone). 18.16 never mutates the
/// newest part written with insert_quorum until a newer quorum part
/// exists, and a delete's rows are often in it (a release deletes the
/// candidate row just written), so one nudge row (statements::nudge_delete)
/// is written first and becomes that part: the delete then finishes in
/// tens of milliseconds, where a nudge after it waited for 18.16's next
/// mutation round (about 5 s, docs/cluster-rig-findings.md). Rows still
/// there after a second (a rival's quorum part came after ours): one more
/// nudge, every 5 s. A lock-table delete also removes nudges over a
/// minute old. Other replicas apply the mutation from the replication
/// log; nothing waits for them.
CHSTATE_DECL op<> replicated_delete(session& s, statement del, table_kind table, diagnostics& diag, cancellation c);

/// Sends `del` (a DELETE of rows of `table`) and returns once its rows are
/// gone for the next statement.
CHSTATE_DECL op<> delete_rows(session& s, statement del, table_kind table, diagnostics& diag,
                        cancellation c = cancellation::honour);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/deletes.ipp>
#endif
