// chstate/detail/lock/acquire.hpp — taking and giving back a lock in the
// protocol ready() chose, bounded by lock.timeout, and what the store owes
// after a failure (orphans).
//
// lock.timeout bounds the acquire's rounds: the protocol runs against a
// wait on the store's Clock; when the wait ends first the protocol is
// cancelled (its cleanup still runs) and the acquire fails with
// errc::state_id_locked. The race waits for the protocol to end, so a
// statement in flight (chDB cannot stop one) and the cleanup after it
// still delay the return: up to one statement and one withdrawal past
// lock.timeout (an open gap: docs/strict-lock.md, issue 27).
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/lock/fence.hpp>
#include <chstate/detail/lock/seed.hpp>
#include <chstate/detail/schema.hpp>

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
