// chstate/detail/deletes.ipp — the definitions of deletes.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/deletes.hpp>

namespace chstate::detail {

CHSTATE_DECL op<> replicated_delete(session& s, statement del, table_kind table, diagnostics& diag, cancellation c) {
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

CHSTATE_DECL op<> delete_rows(session& s, statement del, table_kind table, diagnostics& diag,
                        cancellation c) {
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
