// chstate/store.hpp — basic_state_store: Meltano's state-backend contract.
//
// The store is a thin façade. Beneath it (detail/):
//   engine.hpp     the one place that reaches the Transport and the Clock
//   session.hpp    the server's dialect and lock protocol, learnt once;
//                  sending, reading, cancellation at every statement
//   schema.hpp     ready(): version, quorum, DDL      deletes.hpp  deletes that are done
//   versions.hpp   what a write's version is          statements.hpp  every statement, named
//   ops/           the operations                     lock/        both lock protocols, leases
//   launch.hpp     async (any completion token) and blocking forms
//
// Operations. Each exists as
//   async_xxx(args…, token)                 completion: void(error_code, T)
//   async_xxx(args…, diagnostics&, token)   same, with the server's message
//   xxx(args…)                              blocking; throws chstate::error
// The token may be anything Asio accepts. The default (asio::deferred),
// use_awaitable and use_future complete with_diagnostics when no
// diagnostics& is given: the exception is a chstate::error holding the
// server's message (with_diagnostics.hpp). Arguments are copied before the
// operation starts.
//
//   get(id)            -> std::optional<state>   (nullopt: no state stored)
//   set(state)                                     write a whole state
//   set(lease, state)                              write under a held lock (fenced)
//   update(state)      -> state                    Meltano's locked update (detail/ops/locked.hpp)
//   delete_state(id)                               remove a state
//   clear(id)                                      delete under the lock
//   clear_all()        -> std::uint64_t            states removed
//   state_ids(glob)    -> std::vector<std::string> `*`, `?` (at most 64) wildcards; all else literal
//   get_all(visitor)   -> std::uint64_t            visitor(state&&) per state, streamed
//   set_all(states)                                one bulk INSERT
//   copy(src, dst), move(src, dst), merge(src, dst)  as Meltano's state service
//   acquire_lock(id)   -> lock_lease
//
// Executors. Operations run on a strand of the store's executor (by
// default the transport's) and complete on the handler's associated
// executor. Blocking forms need nobody to run the store's executor (they
// run the operation on the calling thread, on an io_context of their own)
// — but never call one from the transport's own threads
// (errc::would_deadlock, at once).
//
// Cancellation. The handler's cancellation slot (terminal, partial or
// total) stops an operation at its next statement or wait; it completes
// with operation_aborted, and its cleanup — giving back a lock row or
// grant — still runs. A statement already sent runs to its end on chDB;
// http_transport abandons it (a write then may or may not land).
//
// Lifetime. Operations in flight and leases share the store's insides:
// destroying the store cancels what is in flight (each completes with
// operation_aborted), and a lease that outlives its store still renews
// and releases.
//
// Threads. Operations may run concurrently, from any threads.
//
// First use. The first operation reads the server's version and creates the
// database and tables if absent (the seed's DDL), plus the strict lock's
// grant table in lock_mode::strict; ensure_schema() does it explicitly.
#pragma once

#include <chstate/clock.hpp>
#include <chstate/config.hpp>
#include <chstate/detail/launch.hpp>
#include <chstate/detail/ops/locked.hpp>
#include <chstate/error.hpp>
#include <chstate/lock.hpp>
#include <chstate/state.hpp>
#include <chstate/transport.hpp>
#include <chstate/with_diagnostics.hpp>

#include <boost/json/serialize.hpp> // users of earlier versions had it from here

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chstate {

template <transport Transport, clock Clock = real_clock>
class basic_state_store {
    using engine_type = detail::transport_engine<Transport, Clock>;
    using opt_state = std::optional<state>;
    using ids = std::vector<std::string>;

public:
    using executor_type = asio::any_io_executor;
    using transport_type = Transport;
    using clock_type = Clock;
    using lock_lease = basic_lock_lease<basic_state_store>;
    /// Called once per state by get_all, in state_id order.
    using state_visitor = detail::state_visitor;
    /// Called by get_all for each stored state it cannot read.
    using unreadable_visitor = detail::unreadable_visitor;

    /// Runs operations on the transport's executor.
    explicit basic_state_store(Transport transport, store_options options = {}, Clock clock = {}) {
        executor_type ex = transport.get_executor(); // before the transport moves
        build(std::move(ex), std::move(transport), std::move(options), std::move(clock));
    }

    /// Runs operations on `ex` (e.g. an io_context a test drives).
    basic_state_store(executor_type ex, Transport transport, store_options options = {}, Clock clock = {}) {
        build(std::move(ex), std::move(transport), std::move(options), std::move(clock));
    }

    basic_state_store(const basic_state_store&) = delete;
    basic_state_store& operator=(const basic_state_store&) = delete;
    /// Cancels the operations in flight (they complete with operation_aborted),
    /// and waits, at most lock.timeout, for what timed-out acquires left
    /// running: a claim still in flight at the deadline, given back if it
    /// lands (docs/lock.md). On one of the transport's own threads it does
    /// not wait (that work may need the thread).
    ~basic_state_store() {
        core_->cancel_all();
        core_->settle_leftovers(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::max(options().lock.timeout, duration::zero())));
    }

    executor_type get_executor() const noexcept { return core_->executor(); }
    Transport& get_transport() noexcept { return engine_->transport(); }
    Clock& get_clock() noexcept { return engine_->clock(); }
    const store_options& options() const noexcept { return core_->sess().options(); }

    /// Lock rows of this store that a failed statement left behind and that
    /// it has not yet given back (it tries before each later operation;
    /// unreturned rows age out: stale_age, lease_ttl).
    std::size_t orphaned_locks() const { return core_->sess().orphaned_locks(); }

    // ---- ensure_schema ------------------------------------------------------

    template <class CompletionToken = default_token>
    auto async_ensure_schema(diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(schema));
    }
    template <class CompletionToken = default_token>
    auto async_ensure_schema(CompletionToken&& token = {}) {
        return detail::async_run<>(core_, std::forward<CompletionToken>(token), detail::bind_op(schema));
    }
    void ensure_schema() { detail::run_blocking<>(core_, detail::bind_op(schema)); }

    // ---- get ------------------------------------------------------------------

    template <class CompletionToken = default_token>
    auto async_get(std::string id, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<opt_state>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(detail::get, std::move(id)));
    }
    template <class CompletionToken = default_token>
    auto async_get(std::string id, CompletionToken&& token = {}) {
        return detail::async_run<opt_state>(core_, std::forward<CompletionToken>(token), detail::bind_op(detail::get, std::move(id)));
    }
    opt_state get(std::string id) { return detail::run_blocking<opt_state>(core_, detail::bind_op(detail::get, std::move(id))); }

    // ---- set --------------------------------------------------------------------

    template <class CompletionToken = default_token>
    auto async_set(state s, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(detail::set, std::move(s)));
    }
    template <class CompletionToken = default_token>
    auto async_set(state s, CompletionToken&& token = {}) {
        return detail::async_run<>(core_, std::forward<CompletionToken>(token), detail::bind_op(detail::set, std::move(s)));
    }
    void set(state s) { detail::run_blocking<>(core_, detail::bind_op(detail::set, std::move(s))); }

    /// Writes s under `lease`, which must hold the lock for s.state_id.
    /// strict: fenced (errc::lock_lost once the lease was superseded);
    /// seed_compatible: a plain set (the seed's lock carries no token).
    /// errc::invalid_argument when the lease is for another state id;
    /// errc::lock_lost when it is not held.
    template <class CompletionToken = default_token>
    auto async_set(const lock_lease& lease, state s, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core_, &diag, std::forward<CompletionToken>(token), under(lease, std::move(s)));
    }
    template <class CompletionToken = default_token>
    auto async_set(const lock_lease& lease, state s, CompletionToken&& token = {}) {
        return detail::async_run<>(core_, std::forward<CompletionToken>(token), under(lease, std::move(s)));
    }
    void set(const lock_lease& lease, state s) { detail::run_blocking<>(core_, under(lease, std::move(s))); }

    // ---- update -----------------------------------------------------------------

    template <class CompletionToken = default_token>
    auto async_update(state s, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<state>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(detail::update, std::move(s)));
    }
    template <class CompletionToken = default_token>
    auto async_update(state s, CompletionToken&& token = {}) {
        return detail::async_run<state>(core_, std::forward<CompletionToken>(token), detail::bind_op(detail::update, std::move(s)));
    }
    state update(state s) { return detail::run_blocking<state>(core_, detail::bind_op(detail::update, std::move(s))); }

    // ---- delete_state -------------------------------------------------------------

    template <class CompletionToken = default_token>
    auto async_delete_state(std::string id, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(detail::delete_state, std::move(id)));
    }
    template <class CompletionToken = default_token>
    auto async_delete_state(std::string id, CompletionToken&& token = {}) {
        return detail::async_run<>(core_, std::forward<CompletionToken>(token), detail::bind_op(detail::delete_state, std::move(id)));
    }
    void delete_state(std::string id) { detail::run_blocking<>(core_, detail::bind_op(detail::delete_state, std::move(id))); }

    // ---- clear ------------------------------------------------------------------

    template <class CompletionToken = default_token>
    auto async_clear(std::string id, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(detail::clear, std::move(id)));
    }
    template <class CompletionToken = default_token>
    auto async_clear(std::string id, CompletionToken&& token = {}) {
        return detail::async_run<>(core_, std::forward<CompletionToken>(token), detail::bind_op(detail::clear, std::move(id)));
    }
    void clear(std::string id) { detail::run_blocking<>(core_, detail::bind_op(detail::clear, std::move(id))); }

    // ---- clear_all --------------------------------------------------------------

    template <class CompletionToken = default_token>
    auto async_clear_all(diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<std::uint64_t>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(detail::clear_all));
    }
    template <class CompletionToken = default_token>
    auto async_clear_all(CompletionToken&& token = {}) {
        return detail::async_run<std::uint64_t>(core_, std::forward<CompletionToken>(token), detail::bind_op(detail::clear_all));
    }
    std::uint64_t clear_all() { return detail::run_blocking<std::uint64_t>(core_, detail::bind_op(detail::clear_all)); }

    // ---- state_ids --------------------------------------------------------------

    template <class CompletionToken = default_token>
    auto async_state_ids(std::string glob, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<ids>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(detail::state_ids, std::move(glob)));
    }
    template <class CompletionToken = default_token>
    auto async_state_ids(std::string glob, CompletionToken&& token = {}) {
        return detail::async_run<ids>(core_, std::forward<CompletionToken>(token), detail::bind_op(detail::state_ids, std::move(glob)));
    }
    ids state_ids(std::string glob = "*") { return detail::run_blocking<ids>(core_, detail::bind_op(detail::state_ids, std::move(glob))); }

    // ---- get_all ----------------------------------------------------------------

    /// Streams every state to `visitor`, in state_id order, holding one reply
    /// chunk at a time; completes with the number of states visited. The
    /// visitor runs as chunks arrive, on the transport's thread (an engine
    /// thread for chDB): keep it short, and do not call blocking store
    /// operations from it (errc::would_deadlock). A visitor that throws
    /// ends the listing with errc::callback_failed.
    ///
    /// A stored state that cannot be read never hides the others: every
    /// readable state is visited. With `on_unreadable`, each unreadable one
    /// is reported to it (its id and why) and the operation succeeds;
    /// without, it completes with errc::corrupt_state after visiting the
    /// readable ones, the diagnostics naming the unreadable ids.
    template <class CompletionToken = default_token>
    auto async_get_all(state_visitor visitor, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<std::uint64_t>(core_, &diag, std::forward<CompletionToken>(token), listing(std::move(visitor), {}));
    }
    template <class CompletionToken = default_token>
    auto async_get_all(state_visitor visitor, CompletionToken&& token = {}) {
        return detail::async_run<std::uint64_t>(core_, std::forward<CompletionToken>(token), listing(std::move(visitor), {}));
    }
    template <class CompletionToken = default_token>
    auto async_get_all(state_visitor visitor, unreadable_visitor on_unreadable, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<std::uint64_t>(core_, &diag, std::forward<CompletionToken>(token), listing(std::move(visitor), std::move(on_unreadable)));
    }
    template <class CompletionToken = default_token>
    auto async_get_all(state_visitor visitor, unreadable_visitor on_unreadable, CompletionToken&& token = {}) {
        return detail::async_run<std::uint64_t>(core_, std::forward<CompletionToken>(token), listing(std::move(visitor), std::move(on_unreadable)));
    }
    std::uint64_t get_all(state_visitor visitor) { return detail::run_blocking<std::uint64_t>(core_, listing(std::move(visitor), {})); }
    std::uint64_t get_all(state_visitor visitor, unreadable_visitor on_unreadable) {
        return detail::run_blocking<std::uint64_t>(core_, listing(std::move(visitor), std::move(on_unreadable)));
    }

    // ---- set_all ----------------------------------------------------------------

    /// Writes all states in one INSERT. Every state is validated first; an
    /// invalid one fails the call before anything is written.
    template <class CompletionToken = default_token>
    auto async_set_all(std::vector<state> states, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(detail::set_all, std::move(states)));
    }
    template <class CompletionToken = default_token>
    auto async_set_all(std::vector<state> states, CompletionToken&& token = {}) {
        return detail::async_run<>(core_, std::forward<CompletionToken>(token), detail::bind_op(detail::set_all, std::move(states)));
    }
    void set_all(std::vector<state> states) { detail::run_blocking<>(core_, detail::bind_op(detail::set_all, std::move(states))); }

    // ---- copy / move / merge ----------------------------------------------------

    /// dst := src (both parts). errc::state_not_found when src has no
    /// state. copy, move and merge refuse src == dst with
    /// errc::invalid_argument and change nothing (Meltano's state service
    /// would delete the state on a move onto itself).
    template <class CompletionToken = default_token>
    auto async_copy(std::string src, std::string dst, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core_, &diag, std::forward<CompletionToken>(token), copying(std::move(src), std::move(dst), detail::then::keep_source));
    }
    template <class CompletionToken = default_token>
    auto async_copy(std::string src, std::string dst, CompletionToken&& token = {}) {
        return detail::async_run<>(core_, std::forward<CompletionToken>(token), copying(std::move(src), std::move(dst), detail::then::keep_source));
    }
    void copy(std::string src, std::string dst) { detail::run_blocking<>(core_, copying(std::move(src), std::move(dst), detail::then::keep_source)); }

    /// copy, then clear src.
    template <class CompletionToken = default_token>
    auto async_move(std::string src, std::string dst, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<>(core_, &diag, std::forward<CompletionToken>(token), copying(std::move(src), std::move(dst), detail::then::clear_source));
    }
    template <class CompletionToken = default_token>
    auto async_move(std::string src, std::string dst, CompletionToken&& token = {}) {
        return detail::async_run<>(core_, std::forward<CompletionToken>(token), copying(std::move(src), std::move(dst), detail::then::clear_source));
    }
    void move(std::string src, std::string dst) { detail::run_blocking<>(core_, copying(std::move(src), std::move(dst), detail::then::clear_source)); }

    /// update(dst, partial = src's merged view): src folded into dst as a
    /// partial update. Completes with the state written to dst.
    template <class CompletionToken = default_token>
    auto async_merge(std::string src, std::string dst, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<state>(core_, &diag, std::forward<CompletionToken>(token), detail::bind_op(detail::merge, std::move(src), std::move(dst)));
    }
    template <class CompletionToken = default_token>
    auto async_merge(std::string src, std::string dst, CompletionToken&& token = {}) {
        return detail::async_run<state>(core_, std::forward<CompletionToken>(token), detail::bind_op(detail::merge, std::move(src), std::move(dst)));
    }
    state merge(std::string src, std::string dst) { return detail::run_blocking<state>(core_, detail::bind_op(detail::merge, std::move(src), std::move(dst))); }

    // ---- locks ------------------------------------------------------------------

    /// Acquires the advisory lock for `state_id` (docs/lock.md): fails
    /// with errc::state_id_locked once options().lock.timeout has passed,
    /// statements in flight included. Cancelling it gives back whatever it
    /// had claimed and completes with operation_aborted.
    template <class CompletionToken = default_token>
    auto async_acquire_lock(std::string id, diagnostics& diag, CompletionToken&& token = {}) {
        return detail::async_run_with<lock_lease>(core_, &diag, std::forward<CompletionToken>(token), acquiring(std::move(id)));
    }
    template <class CompletionToken = default_token>
    auto async_acquire_lock(std::string id, CompletionToken&& token = {}) {
        return detail::async_run<lock_lease>(core_, std::forward<CompletionToken>(token), acquiring(std::move(id)));
    }
    lock_lease acquire_lock(std::string id) { return detail::run_blocking<lock_lease>(core_, acquiring(std::move(id))); }

private:
    void build(executor_type ex, Transport transport, store_options options, Clock clock) {
        auto engine = std::make_unique<engine_type>(std::move(ex), std::move(transport), std::move(clock));
        engine_ = engine.get();
        core_ = detail::store_core::make(std::move(engine), std::move(options));
    }

    static detail::op<> schema(detail::session& s, diagnostics& d) { return detail::prepare(s, d); }

    auto listing(state_visitor visitor, unreadable_visitor on_unreadable) {
        return detail::bind_op(detail::get_all, std::move(visitor), std::move(on_unreadable));
    }
    auto copying(std::string src, std::string dst, detail::then after) {
        return detail::bind_op(detail::copy, std::move(src), std::move(dst), after);
    }
    /// What set(lease, s) needs of a lease, taken before the operation starts.
    auto under(const lock_lease& lease, state s) {
        auto st = detail::lease_access::state_of(lease);
        return detail::bind_op(detail::set_under_lease, st != nullptr,
                               st ? st->snapshot() : detail::held_lock{}, std::move(s));
    }
    auto acquiring(std::string id) {
        return [core = core_, id = std::move(id)](detail::session& s, diagnostics& d) -> detail::op<lock_lease> {
            auto [ec, held] = co_await detail::acquire(s, id, d);
            if (ec)
                co_return std::tuple{ec, lock_lease{}};
            co_return std::tuple{error_code{}, detail::lease_access::make<lock_lease>(core, std::move(held))};
        };
    }

    std::shared_ptr<detail::store_core> core_;
    engine_type* engine_ = nullptr; ///< inside core_: the typed transport and clock
};

} // namespace chstate
