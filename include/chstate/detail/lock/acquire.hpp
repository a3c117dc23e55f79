// chstate/detail/lock/acquire.hpp — taking and giving back a lock in the
// protocol ready() chose, bounded by lock.timeout, and what the store owes
// after a failure (orphans).
//
// lock.timeout bounds the call: the protocol runs as a coroutine of its
// own, raced against a wait on the store's Clock. When the wait ends first
// (or the caller cancels) the acquire returns at once with
// errc::state_id_locked (operation_aborted) and the protocol is told to
// stop at its next step. A statement still in flight runs to its end
// (chDB cannot stop one; a claim over HTTP is never cut short, so its
// outcome is known), and a lock it wins after the caller gave up is given
// back by the protocol's own coroutine, which holds the store meanwhile
// (a blocking call leaves it to a background thread of the store's:
// store_core.hpp). No grant is left behind by a timed-out, failed or
// cancelled acquire; the call returns within lock.timeout plus
// acquire_deadline_slack and the time to be scheduled.
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/lock/fence.hpp>
#include <chstate/detail/lock/seed.hpp>
#include <chstate/detail/schema.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/experimental/parallel_group.hpp>

#include <exception>
#include <memory>
#include <optional>

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

/// One run of the protocol that acquire() may stop waiting for; shared by
/// the two, on the operation's strand.
struct protocol_run {
    explicit protocol_run(const asio::any_io_executor& ex) : done(ex, 1) {}
    asio::experimental::channel<void(error_code)> done; ///< one message: `result` is set
    std::optional<std::tuple<error_code, held_lock>> result;
    std::exception_ptr failed; ///< what the protocol threw (bad_alloc), for acquire() to rethrow
    diagnostics diag;
    acquire_notes notes;
    bool abandoned = false;           ///< acquire() returned without it
    asio::cancellation_signal stop;   ///< the protocol's cancellation
};

/// Releases a lock a protocol won after its acquire gave up (`hold`: the
/// store, kept until this is done); what fails is remembered as an orphan.
CHSTATE_DECL asio::awaitable<void> give_back_late(session& s, held_lock h, leftover_hold hold);

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

/// How long after lock.timeout the race ends an acquire still in a
/// statement or a settle wait: enough that a round ending exactly at the
/// deadline reports it itself.
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
