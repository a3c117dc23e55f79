// chstate/detail/lock/seed.ipp — the definitions of lock/seed.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/lock/seed.hpp>

namespace chstate::detail {

CHSTATE_DECL asio::awaitable<void> withdraw_candidate(session& s, const std::string& id, const std::string& lock_id) {
    diagnostics ignored;
    auto [ec] = co_await delete_rows(s, s.sql().delete_lock(id, lock_id), table_kind::lock, ignored,
                                     cancellation::ignore);
    if (ec)
        s.remember_orphan({id, lock_id, 0});
}

CHSTATE_DECL op<std::optional<std::string>> lock_holder(session& s, const std::string& id, diagnostics& diag) {
    auto [ec, found] = co_await s.rows(s.sql().select_lock_holder(id), diag);
    if (ec || found.empty())
        co_return std::tuple{ec, std::optional<std::string>{}};
    co_return std::tuple{error_code{}, string_field(found.front(), "lock_id")};
}

CHSTATE_DECL op<std::optional<std::string>> clear_stale_then_holder(session& s, const std::string& id, diagnostics& diag) {
    const statements& sql = s.sql();
    const time_point cutoff = s.now() - s.options().lock.stale_age;
    bool stale = true;
    if (sql.deletes_are_mutations()) { // a mutation is costly: only when needed
        auto [ec, n] = co_await s.count(sql.count_stale_locks(cutoff), diag);
        if (ec)
            co_return std::tuple{ec, std::optional<std::string>{}};
        stale = n > 0;
    }
    if (stale)
        if (auto [ec] = co_await delete_rows(s, sql.delete_stale_locks(cutoff), table_kind::lock, diag); ec)
            co_return std::tuple{ec, std::optional<std::string>{}};
    co_return co_await lock_holder(s, id, diag);
}

CHSTATE_DECL op<bool> try_candidate(session& s, const std::string& id, const std::string& mine, time_point checked,
                              time_point deadline, diagnostics& diag) {
    const statements& sql = s.sql();
    const lock_options& lo = s.options().lock;
    if (co_await cancelled())
        co_return std::tuple{make_error_code(asio::error::operation_aborted), false};
    // Never cut short, as a strict claim (strict.ipp): its outcome is known.
    if (auto [ec] = co_await s.execute(sql.insert_lock_candidate(id, mine, s.now()), diag, cancellation::ignore);
        ec) {
        if (ec == errc::outcome_unknown || ec == asio::error::operation_aborted)
            co_await withdraw_candidate(s, id, mine); // it may have landed
        co_return std::tuple{ec, false};
    }
    // The protocol holds while every candidate is acknowledged (visible to
    // rivals) within the settle time of its holder check. On a cluster the
    // store itself can stretch that — a quorum INSERT is acknowledged only
    // once a quorum holds it, and 286 is retried — so a candidate that took
    // longer gives this round up: a rival may have checked, settled and won
    // without seeing it.
    if (const auto took = s.now() - checked; sql.replicated().enabled() && took >= lo.settle) {
        co_await withdraw_candidate(s, id, mine);
        if (s.now() >= deadline) {
            using std::chrono::duration_cast, std::chrono::milliseconds;
            co_return std::tuple{
                could_not_acquire(diag, id,
                                  "the last candidate was acknowledged " +
                                      std::to_string(duration_cast<milliseconds>(took).count()) +
                                      " ms after its holder check, not within lock.settle = " +
                                      std::to_string(duration_cast<milliseconds>(lo.settle).count()) +
                                      " ms: on a cluster the settle time must exceed a quorum INSERT's "
                                      "acknowledgement"),
                false};
        }
        co_return std::tuple{error_code{}, false};
    }
    if (auto [ec] = co_await s.wait(lo.settle); ec) {
        co_await withdraw_candidate(s, id, mine);
        co_return std::tuple{ec, false};
    }
    auto [ec, candidates] = co_await s.rows(sql.select_lock_candidates(id), diag);
    if (!ec && !candidates.empty() && string_field(candidates.front(), "lock_id") == mine)
        co_return std::tuple{error_code{}, true};
    co_await withdraw_candidate(s, id, mine); // lost, or could not tell
    co_return std::tuple{ec, false};
}

CHSTATE_DECL op<held_lock> acquire_seed(session& s, const std::string& id, time_point deadline, diagnostics& diag,
                                        acquire_notes& notes) {
    for (;;) {
        const time_point checked = s.now();
        auto [ec, holder] = co_await lock_holder(s, id, diag);
        if (!ec && holder)
            std::tie(ec, holder) = co_await clear_stale_then_holder(s, id, diag);
        if (ec)
            co_return std::tuple{ec, held_lock{}};
        notes.holder = holder ? *holder : std::string();
        if (!holder) {
            std::string mine = random_uuid();
            auto [cec, won] = co_await try_candidate(s, id, mine, checked, deadline, diag);
            if (cec)
                co_return std::tuple{cec, held_lock{}};
            if (won)
                co_return std::tuple{error_code{}, held_lock{.state_id = id, .lock_id = std::move(mine)}};
            notes.rival_won = true;
        }
        if (s.now() >= deadline)
            co_return std::tuple{could_not_acquire(diag, id, deadline_detail(notes, s.options().lock.timeout, false)),
                                 held_lock{}};
        if (auto [wec] = co_await s.wait(until_next_round(s, deadline)); wec)
            co_return std::tuple{wec, held_lock{}};
    }
}

CHSTATE_DECL op<> release_seed(session& s, const held_lock& h, diagnostics& diag, cancellation c) {
    co_return co_await delete_rows(s, s.sql().delete_lock(h.state_id, h.lock_id), table_kind::lock, diag, c);
}

} // namespace chstate::detail
