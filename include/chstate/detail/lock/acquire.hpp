// chstate/detail/lock/acquire.hpp — taking and giving back a lock in the
// protocol ready() chose, bounded by lock.timeout, and what the store owes
// after a failure (orphans).
//
// lock.timeout bounds the call, not only the protocol's rounds. The
// protocol runs apart from its caller (store_core.hpp: background work)
// and the caller waits for whichever comes first: the protocol's result,
// or the deadline on the store's Clock plus acquire_deadline_slack. At the
// deadline the caller returns errc::state_id_locked at once, even while a
// statement is still running (chDB cannot stop one); the protocol ends on
// its own — its rounds stop at the same deadline — and whatever it wins
// after that (a claim that landed late) it gives back itself, in the
// background, as it gives back its candidate or grant on any failure.
// A caller that is cancelled stops waiting at once as well, and cancels
// the protocol, whose cleanup still runs. A result that arrives just as
// the caller stops waiting is still handed over: a lease is never dropped
// by the race, only given back.
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/lock/fence.hpp>
#include <chstate/detail/lock/seed.hpp>
#include <chstate/detail/schema.hpp>
#include <chstate/detail/store_core.hpp>

#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>

#include <variant>

namespace chstate::detail {

inline error_code check_id(std::string_view id, diagnostics& diag) {
    if (id.empty())
        return fail(diag, errc::invalid_argument, "state_id must not be empty");
    return {};
}

/// Gives back every remembered orphan; those that fail again stay for the
/// next operation. Never cancelled, never fails the caller: a row left
/// behind still ages out (stale_age, lease_ttl).
CHSTATE_DECL asio::awaitable<void> give_back_orphans(session& s);

/// What every operation does first: learn the server once, then give back
/// what earlier failures left.
CHSTATE_DECL op<> prepare(session& s, diagnostics& diag);

/// The protocol alone, as a child of acquire()'s race.
CHSTATE_DECL op<held_lock> run_protocol(session& s, std::string id, time_point deadline, diagnostics& diag,
                                        acquire_request how, acquire_notes& notes);

CHSTATE_DECL op<> deadline_wait(session& s, duration d);

/// What an acquire and the protocol it runs apart share. Either the
/// protocol hands its result over while the caller waits, or the caller
/// leaves first and the protocol keeps what it wins, to give it back:
/// decided once, under the mutex, so no lease is both or neither.
class acquire_race {
public:
    explicit acquire_race(const asio::any_io_executor& ex) : ready_(ex) {}

    /// The protocol's diagnostics; the caller reads them only after
    /// take_or_abandon() gave it the result.
    diagnostics diag;
    /// What the protocol saw of rivals, for the caller's message at the deadline.
    acquire_notes notes;

    /// The protocol's end. True: a caller waits, and takes `held`. False:
    /// the caller has left; `held` stays the protocol's.
    bool hand_over(error_code ec, held_lock& held) {
        {
            std::lock_guard lk(mutex_);
            if (abandoned_)
                return false;
            result_.emplace(ec, std::move(held));
        }
        ready_.notify();
        return true;
    }
    /// The caller's wait for hand_over (operation_aborted when cancelled).
    asio::awaitable<error_code> result_ready() { co_return co_await ready_.wait(); }
    /// The caller's end: the result if handed over, else none ever will be.
    std::optional<std::tuple<error_code, held_lock>> take_or_abandon() {
        std::lock_guard lk(mutex_);
        if (!result_)
            abandoned_ = true;
        return std::move(result_);
    }

private:
    std::mutex mutex_;
    bool abandoned_ = false;
    std::optional<std::tuple<error_code, held_lock>> result_;
    one_shot ready_;
};

/// The protocol run apart from its caller: hands its result over, or
/// gives back what it won once nobody waits for it.
CHSTATE_DECL asio::awaitable<void> run_apart(session& s, std::shared_ptr<acquire_race> race, std::string id,
                                             time_point deadline, acquire_request how);

inline error_code check_lease_settings(const session& s, diagnostics& diag) {
    const lock_options& lo = s.options().lock;
    if (lo.lease_ttl <= 2 * lo.clock_skew)
        return fail(diag, errc::invalid_configuration,
                    "lock.lease_ttl (" + std::to_string(lo.lease_ttl.count()) +
                        " ms) must exceed twice lock.clock_skew (" + std::to_string(lo.clock_skew.count()) +
                        " ms): a rival takes an expired lease over only after the skew has passed too, and the "
                        "holder needs time of its own inside the lease");
    return {};
}

/// How long after lock.timeout the caller stops waiting for a protocol
/// still in a statement or a settle wait: enough that a round ending
/// exactly at the deadline reports it itself.
inline constexpr duration acquire_deadline_slack{1};

/// Acquires the lock of `id`, within lock.timeout (or by how.deadline).
CHSTATE_DECL op<held_lock> acquire(session& s, const std::string& id, diagnostics& diag, acquire_request how = {});

/// Gives `h` back. One that cannot be given back now is remembered and
/// given back before the store's next operation.
CHSTATE_DECL op<> release(session& s, const held_lock& h, diagnostics& diag, cancellation c = cancellation::honour);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/lock/acquire.ipp>
#endif
