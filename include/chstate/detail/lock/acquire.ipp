// chstate/detail/lock/acquire.ipp — the definitions of lock/acquire.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/lock/acquire.hpp>

namespace chstate::detail {

CHSTATE_DECL asio::awaitable<void> give_back_orphans(session& s) {
    for (auto& o : s.take_orphans()) {
        if (o.token == 0)
            co_await withdraw_candidate(s, o.state_id, o.lock_id);
        else
            co_await withdraw_grant(s, o.state_id, o.token, o.lock_id);
    }
}

CHSTATE_DECL op<> prepare(session& s, diagnostics& diag) {
    if (auto [ec] = co_await ready(s, diag); ec)
        co_return std::tuple{ec};
    co_await give_back_orphans(s);
    co_return std::tuple{error_code{}};
}

CHSTATE_DECL op<held_lock> run_protocol(session& s, std::string id, time_point deadline, diagnostics& diag,
                                        acquire_request how, acquire_notes& notes) {
    co_await asio::this_coro::throw_if_cancelled(false);
    if (s.known()->lock == lock_protocol::strict)
        co_return co_await acquire_strict(s, id, deadline, diag, how, notes);
    co_return co_await acquire_seed(s, id, deadline, diag, notes);
}

CHSTATE_DECL op<> deadline_wait(session& s, duration d) {
    co_await asio::this_coro::throw_if_cancelled(false);
    const error_code ec = co_await s.eng().wait(d, cancellation::honour, /*deadline=*/true);
    co_return std::tuple{ec};
}

CHSTATE_DECL op<held_lock> acquire(session& s, const std::string& id, diagnostics& diag, acquire_request how) {
    if (auto ec = check_id(id, diag))
        co_return std::tuple{ec, held_lock{}};
    if (auto [ec] = co_await prepare(s, diag); ec)
        co_return std::tuple{ec, held_lock{}};
    const auto mode = s.known()->lock;
    if (mode == lock_protocol::strict_unsupported) {
        const auto& f = s.sql().features();
        co_return std::tuple{fail(diag, errc::unsupported,
                                  "lock_mode::strict needs insert_deduplication_token (ClickHouse 22.2 or later); "
                                  "the server is " + std::to_string(f.major) + "." + std::to_string(f.minor)),
                             held_lock{}};
    }
    if (mode == lock_protocol::strict)
        if (auto ec = check_lease_settings(s, diag))
            co_return std::tuple{ec, held_lock{}};
    const bool stop = co_await cancelled();
    if (stop)
        co_return std::tuple{make_error_code(asio::error::operation_aborted), held_lock{}};
    const duration timeout = s.options().lock.timeout;
    if (timeout <= duration::zero() && !how.deadline) {
        // lock.timeout 0: one round, however long its statements take (a
        // try-lock) — no deadline could let even one statement finish.
        acquire_notes notes;
        co_return co_await run_protocol(s, id, s.now(), diag, how, notes);
    }
    const time_point deadline = how.deadline ? *how.deadline : s.now() + timeout;
    const duration left = std::max(duration::zero(), std::chrono::duration_cast<duration>(deadline - s.now()));
    // The protocol's own rounds end at the deadline (its message says so);
    // the race ends one that a statement or settle wait holds past it.
    // The protocol runs as a coroutine of its own that this one can stop
    // waiting for: a claim still in flight at the deadline (chDB cannot
    // stop one; HTTP's is not cut short, so its outcome is known) runs on,
    // holding the store, and what it wins after we gave up it gives back.
    auto ex = co_await asio::this_coro::executor;
    // Counted from here until the protocol has ended and given back what
    // it won (the store's destructor waits for that); refused once the
    // store is going away.
    auto hold = s.try_hold();
    if (!hold)
        co_return std::tuple{make_error_code(asio::error::operation_aborted), held_lock{}};
    auto run = std::make_shared<protocol_run>(ex);
    asio::co_spawn(
        ex, run_protocol(s, id, deadline, run->diag, how, run->notes),
        asio::bind_cancellation_slot(
            run->stop.slot(), [run, &s, hold = std::move(*hold)](std::exception_ptr e,
                                                                 std::tuple<error_code, held_lock> r) mutable {
                if (!run->abandoned) {
                    run->failed = e; // rethrown by acquire(), never through the executor
                    run->result = std::move(r);
                    run->done.try_send(error_code{});
                    return;
                }
                // acquire() has returned: give back what was won (the hold
                // goes with it, else with this handler).
                auto& [ec, held] = r;
                if (!e && !ec && !held.state_id.empty()) {
                    try {
                        asio::co_spawn(run->done.get_executor(), give_back_late(s, held, std::move(hold)),
                                       asio::detached);
                    } catch (...) { // bad_alloc: the next operation gives it back
                        s.remember_orphan({held.state_id, held.lock_id, held.token});
                    }
                }
            }));
    auto [order, received, wait_failed, waited] =
        co_await asio::experimental::make_parallel_group(
            run->done.async_receive(asio::deferred),
            asio::co_spawn(ex, deadline_wait(s, left + acquire_deadline_slack), asio::deferred))
            .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
    (void)received;
    if (run->failed) // only bad_alloc
        std::rethrow_exception(run->failed);
    if (run->result) {
        auto& [ec, held] = *run->result;
        // Won just as the race ended (or as the caller cancelled): the lease
        // is handed over, never dropped.
        if (order[0] == 0 || !ec) {
            diag = std::move(run->diag);
            co_return std::move(*run->result);
        }
    } else {
        // Still running: stop it at its next step; a claim in flight
        // finishes, and what it won goes back (above).
        run->abandoned = true;
        run->stop.emit(asio::cancellation_type::terminal);
    }
    if (wait_failed) // deadline_wait does not throw: a bug, or bad_alloc
        std::rethrow_exception(wait_failed);
    // The wait ended first: the deadline passed, or the caller cancelled.
    if (auto [wec] = waited; wec)
        co_return std::tuple{wec, held_lock{}};
    co_return std::tuple{could_not_acquire(diag, id, deadline_detail(run->notes, timeout, true)), held_lock{}};
}

CHSTATE_DECL asio::awaitable<void> give_back_late(session& s, held_lock h, leftover_hold hold) {
    (void)hold; // released with this frame, once the lock is given back
    try {
        diagnostics ignored;
        co_await release(s, h, ignored, cancellation::ignore);
    } catch (...) { // bad_alloc: the next operation gives it back
        s.remember_orphan({h.state_id, h.lock_id, h.token});
    }
}

CHSTATE_DECL op<> release(session& s, const held_lock& h, diagnostics& diag, cancellation c) {
    error_code ec;
    if (auto [rec] = co_await ready(s, diag); rec)
        ec = rec;
    else if (h.strict())
        std::tie(ec) = co_await release_strict(s, h, diag, c);
    else
        std::tie(ec) = co_await release_seed(s, h, diag, c);
    if (ec)
        s.remember_orphan({h.state_id, h.lock_id, h.token});
    co_return std::tuple{ec};
}

} // namespace chstate::detail
