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
inline op<> replicated_delete(session& s, statement del, table_kind table, diagnostics& diag, cancellation c) {
    const statements& sql = s.sql();
    const statement left = statements::rows_left_by(del);
    if (table == table_kind::lock)
        del = sql.with_lock_nudges_removed(std::move(del), s.now() - std::chrono::seconds(60));
    auto nudge = [&]() -> op<> {
        diagnostics ignored; // a failed nudge only means a longer wait (or the verdict at the end)
        auto [ec] = co_await s.execute(sql.nudge_delete(table, random_uuid()), ignored, c);
        co_return std::tuple{ec == asio::error::operation_aborted ? ec : error_code{}};
    };
    if (auto [ec] = co_await nudge(); ec)
        co_return std::tuple{ec};
    if (auto [ec] = co_await s.execute(std::move(del), diag, c); ec)
        co_return std::tuple{ec};
    const time_point start = s.now();
    time_point next_nudge = start + std::chrono::seconds(1);
    for (int i = 1;; ++i) {
        auto [ec, n] = co_await s.count(left, diag, c);
        if (ec == asio::error::operation_aborted)
            co_return std::tuple{ec};
        if (ec)
            co_return delete_outcome_unknown(diag, "the replicated DELETE",
                                             "counting the rows it deletes failed (" + diag.message + ")");
        if (n == 0)
            co_return std::tuple{error_code{}};
        const time_point t = s.now();
        if (t - start >= delete_give_up)
            co_return delete_outcome_unknown(diag, "the replicated DELETE", "its rows were still there after 60 s");
        if (t >= next_nudge) {
            next_nudge = t + std::chrono::seconds(5);
            if (auto [nec] = co_await nudge(); nec)
                co_return std::tuple{nec};
        }
        if (auto [wec] = co_await s.wait(duration(std::min(5 * i, 100)), c); wec)
            co_return std::tuple{wec};
    }
}

/// Sends `del` (a DELETE of rows of `table`) and returns once its rows are
/// gone for the next statement.
inline op<> delete_rows(session& s, statement del, table_kind table, diagnostics& diag,
                        cancellation c = cancellation::honour) {
    const statements& sql = s.sql();
    if (sql.replicated().enabled())
        co_return co_await replicated_delete(s, std::move(del), table, diag, c);
    if (!sql.deletes_are_mutations())
        co_return co_await s.execute(std::move(del), diag, c);
    if (auto [ec] = co_await s.execute(std::move(del), diag, c); ec)
        co_return std::tuple{ec};
    const time_point start = s.now();
    for (int i = 1;; ++i) {
        auto [ec, pending] = co_await s.count(sql.pending_mutations(table), diag, c);
        if (ec == asio::error::operation_aborted)
            co_return std::tuple{ec};
        if (ec)
            co_return delete_outcome_unknown(diag, "ALTER TABLE … DELETE",
                                             "reading system.mutations failed (" + diag.message + ")");
        if (pending == 0)
            co_return std::tuple{error_code{}};
        if (s.now() - start >= delete_give_up)
            co_return delete_outcome_unknown(diag, "ALTER TABLE … DELETE", "it did not finish within 60 s");
        if (auto [wec] = co_await s.wait(duration(std::min(2 * i, 50)), c); wec)
            co_return std::tuple{wec};
    }
}

} // namespace chstate::detail
