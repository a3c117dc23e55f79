// chstate/store.hpp — basic_state_store: Meltano's state-backend contract.
//
// The store owns all SQL, versioning and lock logic; the Transport only
// executes statements (transport.hpp) and the Clock owns every wait and
// every time the lock protocol compares (clock.hpp).
//
// Operations. Each exists as
//   async_xxx(args…, token)                 completion: void(error_code, T)
//   async_xxx(args…, diagnostics&, token)   same, with the server's message
//   xxx(args…)                              blocking; throws chstate::error
// The token may be anything Asio accepts (asio::deferred by default,
// use_awaitable, use_future, a callback). Arguments are copied before the
// operation starts; the store must outlive the operation.
//
//   get(id)            -> std::optional<state>   (nullopt: no state stored)
//   set(state)                                     write a whole state
//   set(lease, state)                              write under a held lock (fenced)
//   update(state)      -> state                    Meltano's locked update (see below)
//   delete_state(id)                               remove a state
//   clear(id)                                      delete under the lock
//   clear_all()        -> std::uint64_t            states removed
//   state_ids(glob)    -> std::vector<std::string> `*`, `?` wildcards; all else literal
//   get_all(visitor)   -> std::uint64_t            visitor(state&&) per state, streamed
//   set_all(states)                                one bulk INSERT
//   copy(src, dst), move(src, dst), merge(src, dst)  as Meltano's state service
//   acquire_lock(id)   -> lock_lease
//
// update(s): under the lock for s.state_id — when s is not complete and a
// state is stored, s.partial_state is deep-merged onto the stored partial
// state and the stored state (with its completed part) is written;
// otherwise s is written as is. Returns what was written.
//
// Executors. Operations run on the store's executor (by default the
// transport's) and complete on the handler's associated executor. The
// blocking forms need that executor to be run by another thread; the
// embedded transport's default executor always is.
//
// Threads. Operations may run concurrently, from any threads.
//
// First use. The first operation reads the server's version and creates the
// database and both tables if absent (the seed's DDL), plus the strict
// lock's grant table when the store runs lock_mode::strict (config.hpp);
// ensure_schema() does it explicitly.
//
// Fencing (lock_mode::strict). update(), and set(lease, s) for a caller
// holding a lease, write with an INSERT that the server performs only if
// the lease's grant is still the id's newest and not released (the check is
// part of the INSERT … SELECT), then read the grant table again: success
// means the grant was still current after the write had landed, so the
// next holder, which reads after its own grant, sees the write. Otherwise
// they fail with errc::lock_lost — the write was refused, or, when the
// grant moved while the INSERT ran, may have landed: "not confirmed", never
// silently lost. clear() deletes the same way.
//
// Versions (store_options::versions). By default each write's updated_at is
// greatest(server now, the id's newest updated_at + 1 ms), computed by the
// server: a write that starts after another finished sorts after it,
// whatever the clocks do (README: "Versions").
#pragma once

#include <chstate/clock.hpp>
#include <chstate/config.hpp>
#include <chstate/detail/async.hpp>
#include <chstate/detail/row_binary.hpp>
#include <chstate/detail/rows.hpp>
#include <chstate/detail/sha256.hpp>
#include <chstate/detail/statements.hpp>
#include <chstate/detail/uuid.hpp>
#include <chstate/error.hpp>
#include <chstate/lock.hpp>
#include <chstate/state.hpp>
#include <chstate/transport.hpp>

#include <cstdio>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace chstate {

template <transport Transport, clock Clock = real_clock>
class basic_state_store {
    template <class... Ts>
    using op = asio::awaitable<std::tuple<error_code, Ts...>>;
    static constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
    /// Cluster mode: how long a read refused by a replica still fetching a
    /// quorum part (289) is retried (send).
    static constexpr std::chrono::milliseconds replica_catch_up{1000};

public:
    using executor_type = asio::any_io_executor;
    using transport_type = Transport;
    using clock_type = Clock;
    using lock_lease = basic_lock_lease<basic_state_store>;
    /// Called once per state by get_all, in state_id order.
    using state_visitor = std::function<void(state&&)>;
    /// Called by get_all for each stored state it cannot read.
    using unreadable_visitor = std::function<void(unreadable_state&&)>;

    /// Runs operations on the transport's executor.
    explicit basic_state_store(Transport transport, store_options options = {}, Clock clock = {})
        : ex_(transport.get_executor()),
          transport_(std::move(transport)),
          options_(std::move(options)),
          clock_(std::move(clock)) {}

    /// Runs operations on `ex` (e.g. an io_context a test drives).
    basic_state_store(executor_type ex, Transport transport, store_options options = {}, Clock clock = {})
        : ex_(std::move(ex)),
          transport_(std::move(transport)),
          options_(std::move(options)),
          clock_(std::move(clock)) {}

    basic_state_store(const basic_state_store&) = delete;
    basic_state_store& operator=(const basic_state_store&) = delete;

    executor_type get_executor() const noexcept { return ex_; }
    Transport& get_transport() noexcept { return transport_; }
    Clock& get_clock() noexcept { return clock_; }
    const store_options& options() const noexcept { return options_; }

    /// Lock rows of this store that a failed statement left behind and that
    /// it has not yet given back (it tries before each later operation;
    /// unreturned rows age out: stale_age, lease_ttl).
    std::size_t orphaned_locks() const {
        std::lock_guard lk(mutex_);
        return orphans_.size();
    }

    // ---- ensure_schema ----------------------------------------------------

    template <class CompletionToken = asio::deferred_t>
    auto async_ensure_schema(diagnostics& diag, CompletionToken&& token = {}) {
        return start(ensure_schema_op(&diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_ensure_schema(CompletionToken&& token = {}) {
        return start(ensure_schema_op(nullptr), std::forward<CompletionToken>(token));
    }
    void ensure_schema() {
        detail::run_blocking<>([&](diagnostics& d, auto h) { async_ensure_schema(d, std::move(h)); });
    }

    // ---- get ----------------------------------------------------------------

    template <class CompletionToken = asio::deferred_t>
    auto async_get(std::string state_id, diagnostics& diag, CompletionToken&& token = {}) {
        return start(get_op(std::move(state_id), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_get(std::string state_id, CompletionToken&& token = {}) {
        return start(get_op(std::move(state_id), nullptr), std::forward<CompletionToken>(token));
    }
    std::optional<state> get(std::string state_id) {
        return detail::run_blocking<std::optional<state>>(
            [&](diagnostics& d, auto h) { async_get(std::move(state_id), d, std::move(h)); });
    }

    // ---- set ----------------------------------------------------------------

    template <class CompletionToken = asio::deferred_t>
    auto async_set(state s, diagnostics& diag, CompletionToken&& token = {}) {
        return start(set_op(std::move(s), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_set(state s, CompletionToken&& token = {}) {
        return start(set_op(std::move(s), nullptr), std::forward<CompletionToken>(token));
    }
    void set(state s) {
        detail::run_blocking<>([&](diagnostics& d, auto h) { async_set(std::move(s), d, std::move(h)); });
    }

    /// Writes s under `lease`, which must hold the lock for s.state_id.
    /// strict: fenced as described at the top (errc::lock_lost when the
    /// lease was superseded); seed_compatible: a plain set (the seed's lock
    /// carries no token to check). errc::invalid_argument when the lease is
    /// for another state id; errc::lock_lost when it is not held.
    template <class CompletionToken = asio::deferred_t>
    auto async_set(const lock_lease& lease, state s, diagnostics& diag, CompletionToken&& token = {}) {
        return start(set_under_op(lease_view(lease), std::move(s), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_set(const lock_lease& lease, state s, CompletionToken&& token = {}) {
        return start(set_under_op(lease_view(lease), std::move(s), nullptr), std::forward<CompletionToken>(token));
    }
    void set(const lock_lease& lease, state s) {
        detail::run_blocking<>([&](diagnostics& d, auto h) { async_set(lease, std::move(s), d, std::move(h)); });
    }

    // ---- update -------------------------------------------------------------

    template <class CompletionToken = asio::deferred_t>
    auto async_update(state s, diagnostics& diag, CompletionToken&& token = {}) {
        return start(update_op(std::move(s), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_update(state s, CompletionToken&& token = {}) {
        return start(update_op(std::move(s), nullptr), std::forward<CompletionToken>(token));
    }
    state update(state s) {
        return detail::run_blocking<state>(
            [&](diagnostics& d, auto h) { async_update(std::move(s), d, std::move(h)); });
    }

    // ---- delete_state -------------------------------------------------------

    template <class CompletionToken = asio::deferred_t>
    auto async_delete_state(std::string state_id, diagnostics& diag, CompletionToken&& token = {}) {
        return start(delete_op(std::move(state_id), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_delete_state(std::string state_id, CompletionToken&& token = {}) {
        return start(delete_op(std::move(state_id), nullptr), std::forward<CompletionToken>(token));
    }
    void delete_state(std::string state_id) {
        detail::run_blocking<>(
            [&](diagnostics& d, auto h) { async_delete_state(std::move(state_id), d, std::move(h)); });
    }

    // ---- clear --------------------------------------------------------------

    template <class CompletionToken = asio::deferred_t>
    auto async_clear(std::string state_id, diagnostics& diag, CompletionToken&& token = {}) {
        return start(clear_op(std::move(state_id), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_clear(std::string state_id, CompletionToken&& token = {}) {
        return start(clear_op(std::move(state_id), nullptr), std::forward<CompletionToken>(token));
    }
    void clear(std::string state_id) {
        detail::run_blocking<>([&](diagnostics& d, auto h) { async_clear(std::move(state_id), d, std::move(h)); });
    }

    // ---- clear_all ----------------------------------------------------------

    template <class CompletionToken = asio::deferred_t>
    auto async_clear_all(diagnostics& diag, CompletionToken&& token = {}) {
        return start(clear_all_op(&diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_clear_all(CompletionToken&& token = {}) {
        return start(clear_all_op(nullptr), std::forward<CompletionToken>(token));
    }
    std::uint64_t clear_all() {
        return detail::run_blocking<std::uint64_t>([&](diagnostics& d, auto h) { async_clear_all(d, std::move(h)); });
    }

    // ---- state_ids ----------------------------------------------------------

    template <class CompletionToken = asio::deferred_t>
    auto async_state_ids(std::string glob, diagnostics& diag, CompletionToken&& token = {}) {
        return start(state_ids_op(std::move(glob), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_state_ids(std::string glob, CompletionToken&& token = {}) {
        return start(state_ids_op(std::move(glob), nullptr), std::forward<CompletionToken>(token));
    }
    std::vector<std::string> state_ids(std::string glob = "*") {
        return detail::run_blocking<std::vector<std::string>>(
            [&](diagnostics& d, auto h) { async_state_ids(std::move(glob), d, std::move(h)); });
    }

    // ---- get_all ------------------------------------------------------------

    /// Streams every state to `visitor`, in state_id order, holding one reply
    /// chunk at a time; completes with the number of states visited. The
    /// visitor runs as chunks arrive, on the transport's thread (an engine
    /// thread for chDB): keep it short and do not call blocking store
    /// operations from it.
    ///
    /// A stored state that cannot be read (its JSON does not parse, or is
    /// not an object) never hides the others: every readable state is
    /// visited. With `on_unreadable`, each unreadable one is reported to it
    /// (its id and why) and the operation succeeds; without, the operation
    /// completes with errc::corrupt_state after visiting the readable ones,
    /// and the diagnostics name the unreadable ids.
    template <class CompletionToken = asio::deferred_t>
    auto async_get_all(state_visitor visitor, diagnostics& diag, CompletionToken&& token = {}) {
        return start(get_all_op(std::move(visitor), {}, &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_get_all(state_visitor visitor, CompletionToken&& token = {}) {
        return start(get_all_op(std::move(visitor), {}, nullptr), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_get_all(state_visitor visitor, unreadable_visitor on_unreadable, diagnostics& diag,
                       CompletionToken&& token = {}) {
        return start(get_all_op(std::move(visitor), std::move(on_unreadable), &diag),
                     std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_get_all(state_visitor visitor, unreadable_visitor on_unreadable, CompletionToken&& token = {}) {
        return start(get_all_op(std::move(visitor), std::move(on_unreadable), nullptr),
                     std::forward<CompletionToken>(token));
    }
    std::uint64_t get_all(state_visitor visitor) {
        return detail::run_blocking<std::uint64_t>(
            [&](diagnostics& d, auto h) { async_get_all(std::move(visitor), d, std::move(h)); });
    }
    std::uint64_t get_all(state_visitor visitor, unreadable_visitor on_unreadable) {
        return detail::run_blocking<std::uint64_t>([&](diagnostics& d, auto h) {
            async_get_all(std::move(visitor), std::move(on_unreadable), d, std::move(h));
        });
    }

    // ---- set_all ------------------------------------------------------------

    /// Writes all states in one INSERT. Every state is validated first; an
    /// invalid one fails the call before anything is written.
    template <class CompletionToken = asio::deferred_t>
    auto async_set_all(std::vector<state> states, diagnostics& diag, CompletionToken&& token = {}) {
        return start(set_all_op(std::move(states), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_set_all(std::vector<state> states, CompletionToken&& token = {}) {
        return start(set_all_op(std::move(states), nullptr), std::forward<CompletionToken>(token));
    }
    void set_all(std::vector<state> states) {
        detail::run_blocking<>([&](diagnostics& d, auto h) { async_set_all(std::move(states), d, std::move(h)); });
    }

    // ---- copy / move / merge -----------------------------------------------

    /// dst := src (both parts). errc::state_not_found when src has no state.
    /// copy, move and merge refuse src == dst with errc::invalid_argument
    /// and change nothing (Meltano's state service would delete the state
    /// on a move onto itself).
    template <class CompletionToken = asio::deferred_t>
    auto async_copy(std::string src, std::string dst, diagnostics& diag, CompletionToken&& token = {}) {
        return start(copy_op(std::move(src), std::move(dst), false, &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_copy(std::string src, std::string dst, CompletionToken&& token = {}) {
        return start(copy_op(std::move(src), std::move(dst), false, nullptr), std::forward<CompletionToken>(token));
    }
    void copy(std::string src, std::string dst) {
        detail::run_blocking<>(
            [&](diagnostics& d, auto h) { async_copy(std::move(src), std::move(dst), d, std::move(h)); });
    }

    /// copy, then clear src.
    template <class CompletionToken = asio::deferred_t>
    auto async_move(std::string src, std::string dst, diagnostics& diag, CompletionToken&& token = {}) {
        return start(copy_op(std::move(src), std::move(dst), true, &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_move(std::string src, std::string dst, CompletionToken&& token = {}) {
        return start(copy_op(std::move(src), std::move(dst), true, nullptr), std::forward<CompletionToken>(token));
    }
    void move(std::string src, std::string dst) {
        detail::run_blocking<>(
            [&](diagnostics& d, auto h) { async_move(std::move(src), std::move(dst), d, std::move(h)); });
    }

    /// update(dst, partial = src's merged view): src folded into dst as a
    /// partial update. Completes with the state written to dst.
    template <class CompletionToken = asio::deferred_t>
    auto async_merge(std::string src, std::string dst, diagnostics& diag, CompletionToken&& token = {}) {
        return start(merge_op(std::move(src), std::move(dst), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_merge(std::string src, std::string dst, CompletionToken&& token = {}) {
        return start(merge_op(std::move(src), std::move(dst), nullptr), std::forward<CompletionToken>(token));
    }
    state merge(std::string src, std::string dst) {
        return detail::run_blocking<state>(
            [&](diagnostics& d, auto h) { async_merge(std::move(src), std::move(dst), d, std::move(h)); });
    }

    // ---- locks --------------------------------------------------------------

    /// Acquires the advisory lock for `state_id` (see the README's lock
    /// section). Fails with errc::state_id_locked after options().lock.timeout.
    /// Cancelling the operation withdraws the candidate row and completes
    /// with asio::error::operation_aborted.
    template <class CompletionToken = asio::deferred_t>
    auto async_acquire_lock(std::string state_id, diagnostics& diag, CompletionToken&& token = {}) {
        return start(acquire_op(std::move(state_id), &diag), std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::deferred_t>
    auto async_acquire_lock(std::string state_id, CompletionToken&& token = {}) {
        return start(acquire_op(std::move(state_id), nullptr), std::forward<CompletionToken>(token));
    }
    lock_lease acquire_lock(std::string state_id) {
        return detail::run_blocking<lock_lease>(
            [&](diagnostics& d, auto h) { async_acquire_lock(std::move(state_id), d, std::move(h)); });
    }

    /// Used by lock_lease: gives the grant back (seed_compatible: deletes the
    /// lock row (id, lock_id); strict: records the release of `fence`). A
    /// null store means the lease was not held: completes with errc::lock_lost.
    template <class CompletionToken>
    static auto async_release_lock(basic_state_store* store, std::string state_id, std::string lock_id,
                                   std::uint64_t fence, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [store, fence](auto handler, std::string state_id, std::string lock_id) {
                if (!store) {
                    auto ex = asio::get_associated_executor(handler);
                    asio::post(ex, [h = std::move(handler)]() mutable {
                        std::move(h)(make_error_code(errc::lock_lost));
                    });
                    return;
                }
                store->start(store->release_op(std::move(state_id), std::move(lock_id), fence, nullptr),
                             std::move(handler));
            },
            token, std::move(state_id), std::move(lock_id));
    }
    static void release_lock(basic_state_store* store, std::string state_id, std::string lock_id,
                             std::uint64_t fence = 0) {
        if (!store)
            throw error(make_error_code(errc::lock_lost), "lock for \"" + state_id + "\" was not held");
        detail::run_blocking<>([&](diagnostics& d, auto h) {
            store->start(store->release_op(std::move(state_id), std::move(lock_id), fence, &d), std::move(h));
        });
    }

    /// Used by lock_lease::start_heartbeat: renews (id, lock_id, fence) every
    /// `interval` until stopped; on_lost(ec) once when a renewal fails.
    static std::shared_ptr<detail::heartbeat_control> start_heartbeat(basic_state_store* store, std::string id,
                                                                      std::string lock_id, std::uint64_t fence,
                                                                      duration interval,
                                                                      std::function<void(error_code)> on_lost) {
        auto hb = std::make_shared<detail::heartbeat_control>();
        hb->strand = asio::make_strand(store->ex_);
        asio::co_spawn(hb->strand,
                       store->heartbeat_loop(hb, std::move(id), std::move(lock_id), fence, interval, std::move(on_lost)),
                       asio::bind_cancellation_slot(hb->signal.slot(), asio::detached));
        return hb;
    }

    /// Used by lock_lease: renew (true) or verify (false) a grant. A null
    /// store means the lease was not held: completes with errc::lock_lost.
    template <class CompletionToken>
    static auto async_lease_op(basic_state_store* store, bool renew, std::string state_id, std::string lock_id,
                               std::uint64_t fence, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [store, renew, fence](auto handler, std::string state_id, std::string lock_id) {
                if (!store) {
                    auto ex = asio::get_associated_executor(handler);
                    asio::post(ex, [h = std::move(handler)]() mutable {
                        std::move(h)(make_error_code(errc::lock_lost));
                    });
                    return;
                }
                store->start(store->lease_op(renew, std::move(state_id), std::move(lock_id), fence),
                             std::move(handler));
            },
            token, std::move(state_id), std::move(lock_id));
    }

private:
    template <class Result, class CompletionToken>
    auto start(asio::awaitable<Result> o, CompletionToken&& token) {
        return detail::launch(ex_, std::move(o), std::forward<CompletionToken>(token));
    }

    // -- plumbing --------------------------------------------------------------

    /// Sends one statement, streaming the reply into `sink`.
    op<> execute(statement s, result_sink sink, diagnostics& diag) {
        // A transport that binds every value itself (binds_parameters,
        // transport.hpp) gets the placeholders; others get quoted literals
        // from servers without query parameters.
        if (!traits().binds_parameters) {
            auto stm = stmts_snapshot();
            if (stm && !stm->features().query_parameters) {
                if (auto ec = detail::inline_parameters(s, diag))
                    co_return std::tuple{ec};
            }
        }
        co_return co_await send(s, std::move(sink), diag);
    }

    /// The one place the store calls its transport. A clock that tracks
    /// activity (manual_clock) learns a statement is in flight, so simulated
    /// time does not jump past the reply.
    ///
    /// Cluster mode: every statement carries the quorum settings, and one
    /// refused because another quorum INSERT into the table is still under
    /// way (ClickHouse 286: nothing was written; a replicated table takes
    /// one quorum INSERT at a time across the shard) is sent again after a
    /// short random pause, until insert_quorum_timeout has passed. A read
    /// refused because the connected replica has not yet fetched a part
    /// written to the quorum through another replica (289: nothing was
    /// read) is sent again the same way for up to a second
    /// (replica_catch_up): a healthy replica fetches within milliseconds,
    /// and one that lags longer is reported (errc::replicas_unavailable).
    op<> send(const statement& s, result_sink sink, diagnostics& diag) {
        auto stm = stmts_snapshot();
        if (!stm || !stm->replicated().enabled())
            co_return co_await send_once(s, std::move(sink), diag);
        statement with = s;
        with.settings.insert(with.settings.end(), stm->replicated().settings.begin(),
                             stm->replicated().settings.end());
        const auto start = std::chrono::steady_clock::now();
        const auto give_up = start + options_.cluster.insert_quorum_timeout;
        const auto catch_up_ends = start + replica_catch_up;
        for (unsigned attempt = 1;; ++attempt) {
            auto [ec] = co_await send_once(with, sink, diag);
            const auto now = std::chrono::steady_clock::now();
            const bool retry =
                (ec == make_clickhouse_error(clickhouse_code::unsatisfied_quorum_for_previous_write) && now < give_up) ||
                (ec == make_clickhouse_error(clickhouse_code::replica_is_not_in_quorum) && now < catch_up_ends);
            if (!retry)
                co_return std::tuple{ec};
            const auto cap = std::min(5u * attempt, 100u);
            asio::steady_timer pause(ex_, std::chrono::milliseconds(1 + detail::random_below(cap)));
            if (auto [wec] = co_await pause.async_wait(use_tuple); wec)
                co_return std::tuple{wec};
        }
    }

    op<> send_once(const statement& s, result_sink sink, diagnostics& diag) {
        diag.clear();
        [[maybe_unused]] auto in_flight = activity();
        auto [ec] = co_await transport_.async_execute(s, std::move(sink), diag, use_tuple);
        co_return std::tuple{ec};
    }

    /// While the result lives, a clock that tracks activity (manual_clock)
    /// counts a statement or wait in flight; for other clocks, nothing.
    auto activity() {
        if constexpr (requires(Clock& c) { c.begin_activity(); })
            return clock_.begin_activity();
        else
            return 0;
    }

    op<> execute(statement s, diagnostics& diag) {
        return execute(std::move(s), [](std::string_view) { return error_code{}; }, diag);
    }

    /// A DELETE of state rows (lock_table = false) or lock rows. On servers
    /// without lightweight DELETE it is an asynchronous mutation: wait until
    /// the table has no unfinished mutation, so the next statement no
    /// longer sees the rows. The wait counts as activity for a manual clock.
    op<> execute_delete(statement s, bool lock_table, diagnostics& diag) {
        auto stm = stmts_snapshot();
        if (stm && stm->replicated().enabled())
            co_return co_await execute_replicated_delete(std::move(s), lock_table ? 1 : 0, *stm, diag);
        if (!stm || !stm->deletes_are_mutations())
            co_return co_await execute(std::move(s), diag);
        [[maybe_unused]] auto in_flight = activity();
        auto [ec] = co_await execute(std::move(s), diag);
        if (ec)
            co_return std::tuple{ec};
        // From here on the server has accepted the delete: a failure to see
        // it finish leaves it applying (or not) behind our back.
        auto unknown = [&diag](std::string why) {
            diag.message = "ALTER TABLE … DELETE was accepted, but " + why +
                           ": the delete may or may not have been applied yet";
            return std::tuple{make_error_code(errc::outcome_unknown)};
        };
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (int i = 1;; ++i) {
            auto [pec, found] = co_await rows(stm->pending_mutations(lock_table), diag);
            if (pec == asio::error::operation_aborted)
                co_return std::tuple{pec};
            if (pec)
                co_return unknown("reading system.mutations failed (" + diag.message + ")");
            std::optional<std::uint64_t> n;
            if (!found.empty())
                n = detail::uint_field(found.front(), "n");
            if (!n) {
                diag.message = "system.mutations reply has no count";
                co_return std::tuple{make_error_code(errc::protocol_error)};
            }
            if (*n == 0)
                co_return std::tuple{error_code{}};
            if (std::chrono::steady_clock::now() >= give_up)
                co_return unknown("it did not finish within 60 s");
            asio::steady_timer pause(ex_, std::chrono::milliseconds(std::min(2 * i, 50)));
            co_await pause.async_wait(use_tuple);
        }
    }

    /// The version of a write on servers without DateTime64: milliseconds
    /// since the epoch by the store's clock, strictly increasing per store.
    std::uint64_t next_version() {
        auto now = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now().time_since_epoch()).count());
        std::uint64_t last = last_version_.load();
        std::uint64_t next;
        do {
            next = std::max(now, last + 1);
        } while (!last_version_.compare_exchange_weak(last, next));
        return next;
    }

    /// Sends one statement and reads its JSONEachRow rows, keeping at most
    /// limits.max_operation_bytes of reply.
    op<std::vector<json::object>> rows(statement s, diagnostics& diag) {
        std::vector<json::object> out;
        detail::row_reader reader(options_.limits.max_row_bytes);
        auto on_row = [&out](json::object&& row) {
            out.push_back(std::move(row));
            return error_code{};
        };
        std::size_t kept = 0;
        auto [ec] = co_await execute(
            std::move(s),
            [&](std::string_view chunk) {
                if ((kept += chunk.size()) > options_.limits.max_operation_bytes)
                    return over_operation_limit(kept, diag);
                return reader.feed(chunk, on_row, diag);
            },
            diag);
        if (!ec)
            ec = reader.finish(on_row, diag);
        co_return std::tuple{ec, std::move(out)};
    }

    /// Cluster mode: a DELETE is a replicated mutation. It is waited for
    /// until its rows are gone on the connected replica (system.mutations
    /// would not do: a mutation that cannot touch the newest quorum part
    /// stays unfinished though every row it had to delete is gone). 18.16
    /// never mutates the newest part written with insert_quorum until a
    /// newer quorum part exists, and the rows to delete are often in it (a
    /// release deletes the candidate row just written), so one nudge row
    /// (statements::nudge_delete) is written first and becomes that part:
    /// the delete then finishes in tens of milliseconds, where a nudge
    /// after it waited for the next mutation scheduling (about 5 s,
    /// docs/cluster-rig-findings.md). Should rows still be there after a
    /// second (a rival's quorum part came after ours), one more nudge.
    /// A lock-table delete also removes nudges over a minute old. Other
    /// replicas apply the mutation from the replication log, usually
    /// within milliseconds; nothing waits for them.
    op<> execute_replicated_delete(statement s, int table, const detail::statements& stm, diagnostics& diag) {
        [[maybe_unused]] auto in_flight = activity();
        const statement left = detail::statements::rows_left_by(s);
        if (table == 1)
            s = stm.with_lock_nudges_removed(std::move(s), clock_.now() - std::chrono::seconds(60));
        auto nudge = [&]() -> op<> {
            diagnostics ignored; // a failed nudge only means a longer wait (or the 60 s verdict)
            auto [nec] = co_await execute(stm.nudge_delete(table, detail::random_uuid()), ignored);
            co_return std::tuple{nec == asio::error::operation_aborted ? nec : error_code{}};
        };
        if (auto [nec] = co_await nudge(); nec)
            co_return std::tuple{nec};
        auto [ec] = co_await execute(std::move(s), diag);
        if (ec)
            co_return std::tuple{ec};
        auto unknown = [&diag](std::string why) {
            diag.message = "the replicated DELETE was accepted, but " + why +
                           ": the delete may or may not have been applied yet";
            return std::tuple{make_error_code(errc::outcome_unknown)};
        };
        const auto start = std::chrono::steady_clock::now();
        const auto give_up = start + std::chrono::seconds(60);
        auto next_nudge = start + std::chrono::seconds(1);
        for (int i = 1;; ++i) {
            auto [pec, found] = co_await rows(left, diag);
            if (pec == asio::error::operation_aborted)
                co_return std::tuple{pec};
            if (pec)
                co_return unknown("counting the rows it deletes failed (" + diag.message + ")");
            const auto n = found.empty() ? std::nullopt : detail::uint_field(found.front(), "n");
            if (!n) {
                diag.message = "the row count reply has no number";
                co_return std::tuple{make_error_code(errc::protocol_error)};
            }
            if (*n == 0)
                co_return std::tuple{error_code{}};
            const auto now = std::chrono::steady_clock::now();
            if (now >= give_up)
                co_return unknown("its rows were still there after 60 s");
            if (now >= next_nudge) {
                next_nudge = now + std::chrono::seconds(5);
                if (auto [nec] = co_await nudge(); nec)
                    co_return std::tuple{nec};
            }
            asio::steady_timer pause(ex_, std::chrono::milliseconds(std::min(5 * i, 100)));
            co_await pause.async_wait(use_tuple);
        }
    }

    /// Sends one statement and reads its RowBinary rows of `columns`,
    /// calling on_row(std::span<const detail::rb_field>) per row.
    template <class OnRow>
    op<> read_rows(statement s, std::vector<detail::rb_type> columns, OnRow on_row, diagnostics& diag) {
        detail::row_binary_reader reader(std::move(columns), options_.limits.max_row_bytes);
        auto [ec] = co_await execute(
            std::move(s),
            [&](std::string_view chunk) {
                error_code fec = reader.feed(chunk, on_row);
                if (fec == errc::reply_too_large && !reader.problem().empty())
                    diag.message = reader.problem(); // the reader's own limit, not on_row's
                return fec;
            },
            diag);
        if (!ec)
            ec = reader.finish(diag);
        co_return std::tuple{ec};
    }

    error_code over_operation_limit(std::size_t bytes, diagnostics& diag) const {
        diag.message = "the reply holds more than " + std::to_string(bytes) + " bytes, over the limit of " +
                       std::to_string(options_.limits.max_operation_bytes) +
                       " (store_options::limits.max_operation_bytes)";
        return make_error_code(errc::reply_too_large);
    }

    /// A lock row (seed_compatible: token 0) or grant of ours to give back.
    struct orphan_lock {
        std::string id, lock_id;
        std::uint64_t token = 0;
    };

    void remember_orphan(std::string id, std::string lock_id, std::uint64_t token) {
        std::lock_guard lk(mutex_);
        orphans_.push_back({std::move(id), std::move(lock_id), token});
    }

    /// Gives back every remembered orphan; those that fail again stay for
    /// the next operation. Never cancelled, never fails the caller: a lock
    /// row left behind still ages out (stale_age, lease_ttl).
    asio::awaitable<void> withdraw_orphans() {
        std::vector<orphan_lock> pending;
        {
            std::lock_guard lk(mutex_);
            if (orphans_.empty())
                co_return;
            pending.swap(orphans_);
        }
        // withdraw() and withdraw_strict() ignore cancellation and remember
        // again whatever they cannot give back.
        for (auto& o : pending) {
            if (o.token == 0)
                co_await withdraw(o.id, o.lock_id);
            else
                co_await withdraw_strict(o.id, o.token, o.lock_id);
        }
    }

    /// The strict lock's release event for `token` (its own deduplication token).
    statement release_event(const std::string& id, std::uint64_t token, const std::string& lock_id) const {
        return stmts_snapshot()->insert_grant_event(id, token, lock_id, "release", 0,
                                                    grant_event_key(id, token, "/release"));
    }

    std::shared_ptr<const detail::statements> stmts_snapshot() const {
        std::lock_guard lk(mutex_);
        return stmts_;
    }

    /// Reads the server version and creates the schema, once.
    op<> ready(diagnostics& diag) {
        if (stmts_snapshot()) {
            co_await withdraw_orphans();
            co_return std::tuple{error_code{}};
        }
        std::string version;
        auto [ec] = co_await send(
            detail::statements::select_version(),
            [&](std::string_view chunk) {
                version.append(chunk);
                if (version.size() > 256) { // "18.16.1\n": anything longer is not a version
                    diag.message = "the server's version() reply is over 256 bytes";
                    return make_error_code(errc::protocol_error);
                }
                return error_code{};
            },
            diag);
        if (ec)
            co_return std::tuple{ec};
        while (!version.empty() && (version.back() == '\n' || version.back() == '\r'))
            version.pop_back();
        detail::replication repl;
        if (!options_.cluster.name.empty()) {
            if (auto [cec] = co_await learn_replication(repl, diag); cec)
                co_return std::tuple{cec};
        }
        auto stm = std::make_shared<const detail::statements>(detail::table_names(options_.schema, options_.table),
                                                              detail::server_features::from_version(version),
                                                              options_.versions == write_versions::monotonic,
                                                              std::move(repl));
        const bool can_strict = stm->features().dedup_token;
        bool strict = false;
        switch (options_.lock.mode) {
        case lock_mode::automatic: strict = traits().embedded_engine && can_strict; break;
        case lock_mode::seed_compatible: strict = false; break;
        case lock_mode::strict: strict = can_strict; break;
        }
        std::vector<statement> ddl{stm->create_database(), stm->create_state_table(), stm->create_lock_table()};
        if (strict)
            ddl.push_back(stm->create_grant_table());
        if (stm->replicated().enabled()) {
            const auto& t = stm->tables();
            std::vector<std::string> names{t.state_name, t.lock_name};
            if (strict)
                names.push_back(t.grant_name);
            auto [tec, found] = co_await rows(stm->count_existing_tables(names), diag);
            if (tec)
                co_return std::tuple{tec};
            if (auto n = found.empty() ? std::nullopt : detail::uint_field(found.front(), "n"); n && *n == names.size())
                ddl.clear(); // every table is here: no ON CLUSTER wait for every replica
        }
        bool ddl_timed_out = false;
        for (statement& s : ddl) {
            if (stm->replicated().enabled())
                s.settings.push_back({"distributed_ddl_task_timeout",
                                      std::to_string(std::max<long long>(1, options_.cluster.ddl_timeout.count()))});
            auto [ddl_ec] = co_await send(s, [](std::string_view) { return error_code{}; }, diag);
            if (ddl_ec == make_clickhouse_error(clickhouse_code::timeout_exceeded) && stm->replicated().enabled()) {
                // Some replica did not run it in time (it is down): the
                // rest did, and it will from the DDL queue when it is back.
                ddl_timed_out = true;
                continue;
            }
            // A concurrent creator may win the race between IF NOT EXISTS and CREATE.
            if (ddl_ec && ddl_ec != make_clickhouse_error(clickhouse_code::table_already_exists) &&
                ddl_ec != make_clickhouse_error(clickhouse_code::database_already_exists))
                co_return std::tuple{ddl_ec};
        }
        if (ddl_timed_out) {
            const std::string why = diag.message;
            const auto& t = stm->tables();
            std::vector<std::string> names{t.state_name, t.lock_name};
            if (strict)
                names.push_back(t.grant_name);
            auto [tec, found] = co_await rows(stm->count_existing_tables(names), diag);
            if (tec)
                co_return std::tuple{tec};
            if (auto n = found.empty() ? std::nullopt : detail::uint_field(found.front(), "n"); !n || *n != names.size()) {
                diag.message = "creating the tables ON CLUSTER " + options_.cluster.name + " did not finish within " +
                               std::to_string(options_.cluster.ddl_timeout.count()) +
                               " s (cluster_options::ddl_timeout), and the connected replica lacks some: " + why;
                co_return std::tuple{make_error_code(errc::replicas_unavailable)};
            }
        }
        std::lock_guard lk(mutex_);
        if (!stmts_) {
            strict_ = strict;
            strict_unsupported_ = options_.lock.mode == lock_mode::strict && !can_strict;
            stmts_ = std::move(stm);
        }
        co_return std::tuple{error_code{}};
    }

    /// Cluster mode: the replica count of the connected replica's shard
    /// (system.clusters), hence the quorum, and the settings every
    /// statement is sent with.
    op<> learn_replication(detail::replication& repl, diagnostics& diag) {
        const auto& c = options_.cluster;
        auto [ec, found] = co_await rows(detail::statements::count_shard_replicas(c.name), diag);
        if (ec)
            co_return std::tuple{ec};
        const auto n = found.empty() ? std::nullopt : detail::uint_field(found.front(), "n");
        if (!n) {
            diag.message = "the system.clusters count has no number";
            co_return std::tuple{make_error_code(errc::protocol_error)};
        }
        if (*n == 0) {
            diag.message = "cluster \"" + c.name + "\" is not in this server's system.clusters (remote_servers), "
                           "or the server is not one of its replicas";
            co_return std::tuple{make_error_code(errc::invalid_configuration)};
        }
        const std::uint64_t quorum = c.insert_quorum ? c.insert_quorum : *n / 2 + 1;
        if (quorum > *n) {
            diag.message = "insert_quorum " + std::to_string(quorum) + " is more than the " + std::to_string(*n) +
                           " replicas of this shard of cluster \"" + c.name + "\"";
            co_return std::tuple{make_error_code(errc::invalid_configuration)};
        }
        repl.cluster = c.name;
        repl.zookeeper_path = c.zookeeper_path;
        repl.replica = c.replica;
        repl.settings = {{"insert_quorum", std::to_string(quorum)},
                         {"insert_quorum_timeout", std::to_string(c.insert_quorum_timeout.count())},
                         {"select_sequential_consistency", "1"}};
        // Parallel quorum inserts (the default where the setting exists)
        // leave a sequentially consistent read free to miss a write that
        // was acknowledged: one quorum INSERT at a time, as on 18.16.
        if (auto p = detail::uint_field(found.front(), "p"); p && *p > 0)
            repl.settings.push_back({"insert_quorum_parallel", "0"});
        co_return std::tuple{error_code{}};
    }

    /// What the transport declares (transport.hpp): its static members, or
    /// traits() for one that knows only at run time (any_transport).
    transport_traits traits() const {
        if constexpr (requires(const Transport& t) {
                          { t.traits() } -> std::same_as<transport_traits>;
                      })
            return transport_.traits();
        else
            return traits_of<Transport>();
    }

    static error_code invalid(diagnostics& diag, std::string msg) {
        diag.message = std::move(msg);
        return make_error_code(errc::invalid_argument);
    }

    static error_code check_id(std::string_view id, diagnostics& diag) {
        if (id.empty())
            return invalid(diag, "state_id must not be empty");
        return {};
    }

    // -- operations --------------------------------------------------------------

    op<> ensure_schema_op(diagnostics* d) {
        diagnostics local;
        diagnostics& diag = d ? *d : local;
        co_return co_await ready(diag);
    }

    op<std::optional<state>> get_op(std::string id, diagnostics* d) {
        diagnostics local;
        co_return co_await get_impl(std::move(id), d ? *d : local);
    }

    op<std::optional<state>> get_impl(std::string id, diagnostics& diag) {
        if (auto ec = check_id(id, diag))
            co_return std::tuple{ec, std::nullopt};
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec, std::nullopt};
        std::optional<state> found;
        auto [ec] = co_await read_rows(
            stmts_snapshot()->select_state(id), detail::state_parts_columns(),
            [&](std::span<const detail::rb_field> row) {
                if (found) { // the statement says LIMIT 1
                    diag.message = "the reply to a get holds more than one row";
                    return make_error_code(errc::protocol_error);
                }
                found.emplace();
                found->state_id = id;
                return detail::parse_state_parts(row[0], row[1], *found, diag);
            },
            diag);
        if (ec || !found)
            co_return std::tuple{ec, std::nullopt};
        co_return std::tuple{error_code{}, std::move(found)};
    }

    op<> set_op(state s, diagnostics* d) {
        diagnostics local;
        co_return co_await set_impl(s, d ? *d : local);
    }

    /// `fence`: a strict grant's token; the server then writes only while
    /// that grant is the id's newest (statements::insert_state).
    op<> set_impl(const state& s, diagnostics& diag, std::optional<std::uint64_t> fence = std::nullopt) {
        if (auto ec = check_id(s.state_id, diag))
            co_return std::tuple{ec};
        // Serialising validates: what could not be read back is refused here.
        detail::serialized_parts parts;
        if (auto ec = detail::serialize_parts(s, parts, diag))
            co_return std::tuple{ec};
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec};
        auto stm = stmts_snapshot();
        co_return co_await execute(stm->insert_state(s.state_id, std::move(parts.partial), std::move(parts.completed),
                                                     stm->store_versions() ? next_version() : 0, fence),
                                   diag);
    }

    /// strict: how many tokens an id's grant events may span before release prunes them.
    static constexpr std::uint64_t grant_prune_interval = 64;

    /// A held lock: its lock_id and, in strict mode, its fencing token (else 0).
    struct grant_ref {
        std::string lock_id;
        std::uint64_t token = 0;
        /// strict: the expiry this store wrote (its clock, ms); 0 = unknown.
        std::uint64_t expires_ms = 0;
    };

    /// What set(lease, s) needs of a lease, copied before the operation starts.
    struct lease_ref {
        bool held = false;
        std::string state_id;
        std::string lock_id;
        std::uint64_t token = 0;
    };
    static lease_ref lease_view(const lock_lease& l) { return {l.held(), l.state_id(), l.lock_id(), l.token()}; }

    op<> set_under_op(lease_ref lease, state s, diagnostics* d) {
        diagnostics local;
        diagnostics& diag = d ? *d : local;
        if (auto ec = check_id(s.state_id, diag))
            co_return std::tuple{ec};
        if (!lease.held) {
            diag.message = "set(lease, state): the lease does not hold a lock (released or moved from)";
            co_return std::tuple{make_error_code(errc::lock_lost)};
        }
        if (lease.state_id != s.state_id) {
            diag.message = "set(lease, state): the lease is for state_id " + lease.state_id +
                           ", the state is for state_id " + s.state_id;
            co_return std::tuple{make_error_code(errc::invalid_argument)};
        }
        // A named local: GCC 12 mishandles temporaries that live across co_await.
        const grant_ref held{std::move(lease.lock_id), lease.token};
        co_return co_await fenced_set(s, held, diag);
    }

    /// A write under a grant: seed_compatible (token 0) a plain set; strict
    /// an INSERT conditional on the grant, then the grant read again.
    /// When the engine counts written rows: none means the fence refused
    /// the write (lock_lost, certainly not landed); one whose reply came
    /// back a clock_skew before the expiry we wrote needs no read, since
    /// no rival can have taken the grant over before it landed.
    op<> fenced_set(const state& s, const grant_ref& held, diagnostics& diag) {
        if (held.token == 0)
            co_return co_await set_impl(s, diag);
        if (auto [ec] = co_await set_impl(s, diag, held.token); ec)
            co_return std::tuple{ec};
        if (diag.written_rows && *diag.written_rows == 0) {
            auto [ec, why] = co_await grant_lost_reason(s.state_id, held, false, diag);
            if (ec)
                co_return std::tuple{ec};
            diag.message = lock_lost_message(s.state_id, held, why) + "; the server refused the write";
            co_return std::tuple{make_error_code(errc::lock_lost)};
        }
        if (diag.written_rows && held.expires_ms != 0 && now_ms() + skew_ms() < held.expires_ms)
            co_return std::tuple{error_code{}};
        co_return co_await confirm_grant(s.state_id, held, "write", diag);
    }

    /// clear() under a grant: seed_compatible a plain delete; strict a DELETE
    /// conditional on the grant, then the grant read again.
    op<> fenced_delete(const std::string& id, const grant_ref& held, diagnostics& diag) {
        if (held.token == 0)
            co_return co_await delete_impl(id, diag);
        if (auto [ec] = co_await delete_impl(id, diag, held.token); ec)
            co_return std::tuple{ec};
        co_return co_await confirm_grant(id, held, "delete", diag);
    }

    /// "lock for state_id … (fencing token …) is no longer held[: why]".
    static std::string lock_lost_message(const std::string& id, const grant_ref& held, const std::string& why) {
        return "lock for state_id " + id + " (fencing token " + std::to_string(held.token) + ") is no longer held" +
               (why.empty() ? std::string() : ": " + why);
    }

    /// After a fenced statement: success when the grant is still the id's
    /// newest, ours and not released — then any later grant, and the reads
    /// of its holder, come after our statement. Otherwise errc::lock_lost:
    /// refused by the server, or (grant moved while it ran) not confirmed.
    op<> confirm_grant(const std::string& id, const grant_ref& held, const char* what, diagnostics& diag) {
        // Expiry is not checked: after the statement, only a newer grant matters.
        auto [ec, why] = co_await grant_lost_reason(id, held, false, diag);
        if (ec || why.empty())
            co_return std::tuple{ec};
        diag.message = lock_lost_message(id, held, why) + "; the server refused the " + what +
                       ", unless the grant moved while it ran — not confirmed";
        co_return std::tuple{make_error_code(errc::lock_lost)};
    }

    op<state> update_op(state incoming, diagnostics* d) {
        diagnostics local;
        co_return co_await update_impl(std::move(incoming), d ? *d : local);
    }

    op<state> update_impl(state incoming, diagnostics& diag) {
        if (auto ec = check_id(incoming.state_id, diag))
            co_return std::tuple{ec, state{}};
        const std::string id = incoming.state_id;
        auto [ec, held] = co_await acquire_any(id, diag);
        if (ec)
            co_return std::tuple{ec, state{}};
        state written;
        // Meltano reads the stored state only to merge an incomplete one into
        // it: a complete state is written as it is, so update() can replace
        // a stored state that no longer parses.
        std::optional<state> current;
        if (!incoming.is_complete())
            std::tie(ec, current) = co_await get_impl(id, diag);
        if (!ec) {
            if (current && !incoming.is_complete())
                written = std::move(current->merge_partial(incoming));
            else
                written = std::move(incoming);
            // Fenced: refused (errc::lock_lost) under a superseded grant.
            std::tie(ec) = co_await fenced_set(written, held, diag);
            if (ec)
                written = state{};
        }
        // A release that fails does not undo a write that landed: the lock
        // row is remembered and given back before this store's next
        // operation (or ages out), so the caller learns the write's fate.
        diagnostics release_diag;
        co_await release_impl(id, held.lock_id, held.token, release_diag);
        co_return std::tuple{ec, std::move(written)};
    }

    op<> delete_op(std::string id, diagnostics* d) {
        diagnostics local;
        co_return co_await delete_impl(id, d ? *d : local);
    }

    /// `fence`: as set_impl's.
    op<> delete_impl(const std::string& id, diagnostics& diag, std::optional<std::uint64_t> fence = std::nullopt) {
        if (auto ec = check_id(id, diag))
            co_return std::tuple{ec};
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec};
        co_return co_await execute_delete(stmts_snapshot()->delete_state(id, fence), false, diag);
    }

    op<> clear_op(std::string id, diagnostics* d) {
        diagnostics local;
        co_return co_await clear_impl(id, d ? *d : local);
    }

    op<> clear_impl(const std::string& id, diagnostics& diag) {
        if (auto ec = check_id(id, diag))
            co_return std::tuple{ec};
        auto [ec, held] = co_await acquire_any(id, diag);
        if (ec)
            co_return std::tuple{ec};
        std::tie(ec) = co_await fenced_delete(id, held, diag);
        diagnostics release_diag; // as update_impl's
        co_await release_impl(id, held.lock_id, held.token, release_diag);
        co_return std::tuple{ec};
    }

    op<std::uint64_t> clear_all_op(diagnostics* d) {
        diagnostics local;
        diagnostics& diag = d ? *d : local;
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec, std::uint64_t{0}};
        auto stm = stmts_snapshot();
        auto [ec, counted] = co_await rows(stm->count_states(), diag);
        if (ec)
            co_return std::tuple{ec, std::uint64_t{0}};
        std::optional<std::uint64_t> n;
        if (!counted.empty())
            n = detail::uint_field(counted.front(), "n");
        if (!n) {
            diag.message = "count() reply has no number";
            co_return std::tuple{make_error_code(errc::protocol_error), std::uint64_t{0}};
        }
        if (stm->replicated().enabled())
            std::tie(ec) = co_await execute_delete(stm->delete_all_states(), false, diag);
        else
            std::tie(ec) = co_await execute(stm->truncate_states(), diag);
        co_return std::tuple{ec, ec ? std::uint64_t{0} : *n};
    }

    op<std::vector<std::string>> state_ids_op(std::string glob, diagnostics* d) {
        diagnostics local;
        diagnostics& diag = d ? *d : local;
        std::vector<std::string> ids;
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec, std::move(ids)};
        // RowBinary: each id exactly as stored, valid UTF-8 or not.
        std::size_t kept = 0;
        auto [ec] = co_await read_rows(
            stmts_snapshot()->select_state_ids(glob), detail::state_id_columns(),
            [&](std::span<const detail::rb_field> row) {
                if (!detail::glob_match(glob, row[0].bytes))
                    return error_code{}; // the server narrowed by prefix only
                if ((kept += row[0].bytes.size() + sizeof(std::string)) > options_.limits.max_operation_bytes)
                    return over_operation_limit(kept, diag);
                ids.emplace_back(row[0].bytes);
                return error_code{};
            },
            diag);
        if (ec)
            ids.clear();
        co_return std::tuple{ec, std::move(ids)};
    }

    op<std::uint64_t> get_all_op(state_visitor visitor, unreadable_visitor on_unreadable, diagnostics* d) {
        diagnostics local;
        diagnostics& diag = d ? *d : local;
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec, std::uint64_t{0}};
        std::uint64_t count = 0;
        std::uint64_t unreadable = 0;
        std::string unreadable_reasons; // the first few, for the message
        auto on_row = [&](std::span<const detail::rb_field> row) -> error_code {
            state s;
            s.state_id = std::string(row[0].bytes);
            diagnostics why;
            if (auto ec = detail::parse_state_parts(row[1], row[2], s, why)) {
                ++unreadable;
                if (unreadable <= 5)
                    unreadable_reasons += (unreadable > 1 ? "; " : "") + why.message;
                if (on_unreadable)
                    on_unreadable(unreadable_state{std::move(s.state_id), ec, std::move(why.message)});
                return {};
            }
            ++count;
            visitor(std::move(s));
            return {};
        };
        auto [ec] = co_await read_rows(
            stmts_snapshot()->select_all_states(), detail::state_row_columns(), on_row,
            diag);
        if (!ec && unreadable && !on_unreadable) {
            diag.message = std::to_string(unreadable) + " stored state(s) could not be read (the other " +
                           std::to_string(count) + " were delivered): " + unreadable_reasons +
                           (unreadable > 5 ? "; …" : "");
            ec = make_error_code(errc::corrupt_state);
        }
        co_return std::tuple{ec, count};
    }

    op<> set_all_op(std::vector<state> states, diagnostics* d) {
        diagnostics local;
        diagnostics& diag = d ? *d : local;
        for (const auto& s : states)
            if (auto ec = check_id(s.state_id, diag))
                co_return std::tuple{ec};
        if (states.empty())
            co_return std::tuple{error_code{}};
        // Every state is serialised (and so validated) before anything is sent.
        std::vector<detail::serialized_parts> parts(states.size());
        for (std::size_t i = 0; i < states.size(); ++i)
            if (auto ec = detail::serialize_parts(states[i], parts[i], diag))
                co_return std::tuple{ec};
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec};
        auto stm = stmts_snapshot();
        // monotonic: each row at greatest(now, its own id's newest + 1 ms).
        std::optional<std::uint64_t> now_ms;
        std::unordered_map<std::string, std::uint64_t> newest;
        if (stm->monotonic_versions()) {
            std::vector<std::string> ids;
            ids.reserve(states.size());
            for (const auto& s : states)
                ids.push_back(s.state_id);
            auto [ec] = co_await read_rows(
                stm->select_newest_versions(ids, next_version()), detail::version_floor_columns(),
                [&](std::span<const detail::rb_field> row) {
                    newest[std::string(row[0].bytes)] = row[1].number;
                    now_ms = row[2].number;
                    return error_code{};
                },
                diag);
            if (ec)
                co_return std::tuple{ec};
        }
        const bool versions = now_ms || stm->store_versions();
        std::string body;
        for (std::size_t i = 0; i < states.size(); ++i) {
            detail::append_tsv_field(body, states[i].state_id);
            body += '\t';
            detail::append_tsv_field(body, parts[i].partial);
            body += '\t';
            detail::append_tsv_field(body, parts[i].completed);
            if (versions) {
                std::uint64_t v = 0;
                if (now_ms) {
                    auto it = newest.find(states[i].state_id);
                    v = it == newest.end() ? *now_ms : std::max(*now_ms, it->second + 1);
                } else {
                    v = next_version();
                }
                body += '\t';
                body += stm->features().datetime64 ? detail::milliseconds_as_datetime64(v) : std::to_string(v);
            }
            body += '\n';
        }
        co_return co_await execute(stm->insert_states(std::move(body), versions), diag);
    }

    /// copy, move and merge onto the source itself would change or lose it.
    static error_code check_distinct(const std::string& src, const std::string& dst, const char* what,
                                     diagnostics& diag) {
        if (src != dst)
            return {};
        return invalid(diag, std::string(what) + ": source and destination are the same state_id \"" + src +
                                 "\"; nothing was changed");
    }

    op<> copy_op(std::string src, std::string dst, bool then_clear, diagnostics* d) {
        diagnostics local;
        diagnostics& diag = d ? *d : local;
        if (auto ec = check_id(dst, diag))
            co_return std::tuple{ec};
        if (auto ec = check_distinct(src, dst, then_clear ? "move" : "copy", diag))
            co_return std::tuple{ec};
        auto [ec, found] = co_await get_impl(src, diag);
        if (ec)
            co_return std::tuple{ec};
        if (!found) {
            diag.message = "no state stored for \"" + src + "\"";
            co_return std::tuple{make_error_code(errc::state_not_found)};
        }
        found->state_id = dst;
        std::tie(ec) = co_await set_impl(*found, diag);
        if (!ec && then_clear)
            std::tie(ec) = co_await clear_impl(src, diag);
        co_return std::tuple{ec};
    }

    op<state> merge_op(std::string src, std::string dst, diagnostics* d) {
        diagnostics local;
        diagnostics& diag = d ? *d : local;
        if (auto ec = check_id(dst, diag))
            co_return std::tuple{ec, state{}};
        if (auto ec = check_distinct(src, dst, "merge", diag))
            co_return std::tuple{ec, state{}};
        auto [ec, found] = co_await get_impl(src, diag);
        if (ec)
            co_return std::tuple{ec, state{}};
        if (!found) {
            diag.message = "no state stored for \"" + src + "\"";
            co_return std::tuple{make_error_code(errc::state_not_found), state{}};
        }
        state incoming;
        incoming.state_id = std::move(dst);
        incoming.partial_state = found->merged();
        co_return co_await update_impl(std::move(incoming), diag);
    }

    // -- the lock protocol (seed-compatible) --------------------------------------

    op<lock_lease> acquire_op(std::string id, diagnostics* d) {
        diagnostics local;
        diagnostics& diag = d ? *d : local;
        auto [ec, held] = co_await acquire_any(id, diag);
        if (ec)
            co_return std::tuple{ec, lock_lease{}};
        co_return std::tuple{error_code{}, lock_lease(*this, std::move(id), std::move(held.lock_id), held.token)};
    }

    /// A grant as the store tracks it: token 0 = seed_compatible.

    /// Acquires in the mode ready() resolved.
    op<grant_ref> acquire_any(const std::string& id, diagnostics& diag) {
        if (auto ec = check_id(id, diag))
            co_return std::tuple{ec, grant_ref{}};
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec, grant_ref{}};
        if (strict_unsupported_) {
            auto stm = stmts_snapshot();
            diag.message = "lock_mode::strict needs insert_deduplication_token (ClickHouse 22.2 or later); the server is " +
                           std::to_string(stm->features().major) + "." + std::to_string(stm->features().minor);
            co_return std::tuple{make_error_code(errc::unsupported), grant_ref{}};
        }
        if (strict_)
            co_return co_await acquire_strict(id, diag);
        auto [ec, lock_id] = co_await acquire_impl(id, diag);
        co_return std::tuple{ec, grant_ref{std::move(lock_id), 0}};
    }

    op<std::optional<std::string>> lock_holder(const std::string& id, diagnostics& diag) {
        auto [ec, found] = co_await rows(stmts_snapshot()->select_lock_holder(id), diag);
        if (ec || found.empty())
            co_return std::tuple{ec, std::optional<std::string>{}};
        co_return std::tuple{error_code{}, detail::string_field(found.front(), "lock_id")};
    }

    op<> wait(duration d) {
        auto [ec] = co_await clock_.async_wait(ex_, d, use_tuple);
        co_return std::tuple{ec};
    }

    /// 1. the holder is the smallest lock_id among the id's rows (FINAL);
    /// 2. if held, delete rows older than the stale age (all ids), look again;
    /// 3. if free, insert a candidate stamped with clock.now(), wait the
    ///    settle time, read every candidate row (no FINAL): the smallest
    ///    lock_id wins; a loser withdraws its row;
    /// 4. otherwise wait the retry interval and repeat until the timeout.
    op<std::string> acquire_impl(std::string id, diagnostics& diag) {
        if (auto ec = check_id(id, diag))
            co_return std::tuple{ec, std::string{}};
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec, std::string{}};
        co_await asio::this_coro::throw_if_cancelled(false);
        const lock_options& lo = options_.lock;
        const time_point deadline = clock_.now() + lo.timeout;
        for (;;) {
            auto stm = stmts_snapshot();
            const time_point checked = clock_.now();
            auto [ec, holder] = co_await lock_holder(id, diag);
            if (ec)
                co_return std::tuple{ec, std::string{}};
            if (holder) {
                const time_point cutoff = clock_.now() - lo.stale_age;
                bool stale = true;
                if (stm->deletes_are_mutations()) { // a mutation is costly: only when needed
                    auto [cec, counted] = co_await rows(stm->count_stale_locks(cutoff), diag);
                    if (cec)
                        co_return std::tuple{cec, std::string{}};
                    auto n = counted.empty() ? std::nullopt : detail::uint_field(counted.front(), "n");
                    stale = !n || *n > 0;
                }
                if (stale)
                    std::tie(ec) = co_await execute_delete(stm->delete_stale_locks(cutoff), true, diag);
                if (ec)
                    co_return std::tuple{ec, std::string{}};
                std::tie(ec, holder) = co_await lock_holder(id, diag);
                if (ec)
                    co_return std::tuple{ec, std::string{}};
            }
            if (!holder) {
                std::string mine = detail::random_uuid();
                std::tie(ec) = co_await execute(stm->insert_lock_candidate(id, mine, clock_.now()), diag);
                if (ec) {
                    if (ec == errc::outcome_unknown || ec == asio::error::operation_aborted)
                        remember_orphan(id, mine, 0); // it may have landed
                    co_return std::tuple{ec, std::string{}};
                }
                // The protocol holds while every candidate is acknowledged
                // (visible to rivals) within the settle time of its
                // holder check. On a cluster the store itself can stretch
                // that — a quorum INSERT is acknowledged only once a quorum
                // holds it, and 286 is retried — so a candidate that took
                // longer gives this round up: a rival may have checked,
                // settled and won without seeing it.
                if (const auto took = clock_.now() - checked; stm->replicated().enabled() && took >= lo.settle) {
                    if (std::tie(ec) = co_await execute_delete(stm->delete_lock(id, mine), true, diag); ec) {
                        remember_orphan(id, mine, 0);
                        co_return std::tuple{ec, std::string{}};
                    }
                    if (clock_.now() >= deadline) {
                        using std::chrono::milliseconds, std::chrono::duration_cast;
                        diag.message =
                            "Could not acquire lock for state_id: " + id + " (the last candidate was acknowledged " +
                            std::to_string(duration_cast<milliseconds>(took).count()) +
                            " ms after its holder check, not within lock.settle = " +
                            std::to_string(duration_cast<milliseconds>(lo.settle).count()) +
                            " ms: on a cluster the settle time must exceed a quorum INSERT's acknowledgement)";
                        co_return std::tuple{make_error_code(errc::state_id_locked), std::string{}};
                    }
                    auto [late_ec] = co_await wait(lo.retry_interval);
                    if (late_ec)
                        co_return std::tuple{late_ec, std::string{}};
                    continue;
                }
                auto [wait_ec] = co_await wait(lo.settle);
                if (wait_ec) {
                    co_await withdraw(id, mine);
                    co_return std::tuple{wait_ec, std::string{}};
                }
                auto [cand_ec, candidates] = co_await rows(stm->select_lock_candidates(id), diag);
                if (cand_ec) {
                    co_await withdraw(id, mine);
                    co_return std::tuple{cand_ec, std::string{}};
                }
                if (!candidates.empty() && detail::string_field(candidates.front(), "lock_id") == mine)
                    co_return std::tuple{error_code{}, std::move(mine)};
                std::tie(ec) = co_await execute_delete(stm->delete_lock(id, mine), true, diag);
                if (ec) {
                    remember_orphan(id, mine, 0);
                    co_return std::tuple{ec, std::string{}};
                }
            }
            if (clock_.now() >= deadline) {
                diag.message = "Could not acquire lock for state_id: " + id;
                co_return std::tuple{make_error_code(errc::state_id_locked), std::string{}};
            }
            auto [wait_ec] = co_await wait(lo.retry_interval);
            if (wait_ec)
                co_return std::tuple{wait_ec, std::string{}};
        }
    }

    /// Deletes our candidate row after a cancellation or failure; the
    /// cancellation must not also cancel this cleanup.
    asio::awaitable<void> withdraw(const std::string& id, const std::string& lock_id) {
        co_await asio::this_coro::reset_cancellation_state();
        diagnostics ignored;
        auto [ec] = co_await execute_delete(stmts_snapshot()->delete_lock(id, lock_id), true, ignored);
        if (ec)
            remember_orphan(id, lock_id, 0);
    }

    op<> release_op(std::string id, std::string lock_id, std::uint64_t fence, diagnostics* d) {
        diagnostics local;
        co_return co_await release_impl(id, lock_id, fence, d ? *d : local);
    }

    /// Gives the lock back; one that cannot be given back now is remembered
    /// and given back before the store's next operation (withdraw_orphans).
    op<> release_impl(const std::string& id, const std::string& lock_id, std::uint64_t fence, diagnostics& diag) {
        auto [ec] = co_await release_once(id, lock_id, fence, diag);
        if (ec)
            remember_orphan(id, lock_id, fence);
        co_return std::tuple{ec};
    }

    op<> release_once(const std::string& id, const std::string& lock_id, std::uint64_t fence, diagnostics& diag) {
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec};
        if (fence != 0) { // strict: a release row for our token (harmless once superseded)
            auto stm = stmts_snapshot();
            auto [ec] = co_await execute(release_event(id, fence, lock_id), diag);
            if (ec)
                forget_free_token(id);
            else
                remember_free_token(id, fence);
            // Every grant_prune_interval-th token, drop the id's older events
            // (~2 rows per grant); the newest token's stay, so tokens keep
            // increasing. A failed prune only leaves rows for the next one.
            if (!ec && fence % grant_prune_interval == 0) {
                diagnostics ignored;
                co_await execute(stm->prune_grants(id, fence), ignored);
            }
            co_return std::tuple{ec};
        }
        co_return co_await execute_delete(stmts_snapshot()->delete_lock(id, lock_id), true, diag);
    }

    // -- the lock protocol (strict) ----------------------------------------------
    //
    // acquire: read the id's newest event (token t). Free when there is none,
    // when t was released, or when its expiry (milliseconds on the grantor's
    // clock) is before our now. Then INSERT the grant row of t+1 with
    // insert_deduplication_token '<id>/<t+1>': of all rivals racing for t+1
    // the server keeps exactly one row, atomically, and reports success to
    // every one of them, so read back who holds t+1. We hold it when every
    // event of t+1 or later is our grant of t+1. A rival stalled until the
    // deduplication window (10,000 inserts on the table) forgot '<id>/<t+1>'
    // can still add a second grant row for t+1, but it then sees two
    // lock_ids (or a later token) and does not win; a first grantee that had
    // not read back yet does not win either, and the token frees itself by
    // expiry. Otherwise wait the retry interval and repeat until the
    // timeout. No settle wait.

    /// The id's newest grant-table event.
    struct grant_row {
        std::uint64_t token = 0;
        std::string lock_id;
        bool released = false;
        std::uint64_t expires_ms = 0;
    };

    std::uint64_t now_ms() {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now().time_since_epoch()).count();
        return ms < 0 ? 0 : static_cast<std::uint64_t>(ms);
    }

    std::uint64_t ttl_ms() const {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(options_.lock.lease_ttl).count());
    }

    /// The deduplication token of one grant-table event:
    /// "sha256:<hex of the id>/<token>" for a grant, plus "/release" or
    /// "/renew-<expiry>". A grant's ends in a number after the last '/', the
    /// others do not, and ids never share a hash: no two events collide.
    /// The id is hashed because the token is a setting, written into the
    /// SQL text, which holds no value and must stay small for any id.
    /// (Earlier chstate versions wrote the id itself: do not run both in
    /// strict mode on one table.)
    static std::string grant_event_key(const std::string& id, std::uint64_t token, std::string_view suffix) {
        return "sha256:" + detail::sha256_hex(id) + "/" + std::to_string(token) + std::string(suffix);
    }

    op<std::optional<grant_row>> grant_latest(const std::string& id, diagnostics& diag) {
        auto [ec, found] = co_await rows(stmts_snapshot()->select_grant_latest(id), diag);
        if (ec || found.empty())
            co_return std::tuple{ec, std::optional<grant_row>{}};
        auto token = detail::uint_field(found.front(), "token");
        auto expires = detail::uint_field(found.front(), "expires_ms");
        auto lock_id = detail::string_field(found.front(), "lock_id");
        auto kind = detail::string_field(found.front(), "kind");
        if (!token || !expires || !lock_id || !kind) {
            diag.message = "grant table reply row is incomplete";
            co_return std::tuple{make_error_code(errc::protocol_error), std::optional<grant_row>{}};
        }
        co_return std::tuple{error_code{},
                             std::optional<grant_row>(grant_row{*token, std::move(*lock_id), *kind == "release", *expires})};
    }

    /// True when `lock_id` holds `token`: every event of that token or a
    /// later one is a grant of exactly that token to `lock_id`. (A rival's
    /// row for the same token, a release, or any later token: not ours.)
    /// `vacant`, when given, is set when no event of `token` or later exists.
    op<bool> holds(const std::string& id, std::uint64_t token, const std::string& lock_id, diagnostics& diag,
                   bool* vacant = nullptr) {
        auto [ec, found] = co_await rows(stmts_snapshot()->select_grant_events_since(id, token), diag);
        if (vacant)
            *vacant = !ec && found.empty();
        if (ec || found.empty())
            co_return std::tuple{ec, false};
        for (const auto& row : found)
            if (detail::uint_field(row, "token") != token || detail::string_field(row, "kind") != "grant" ||
                detail::string_field(row, "lock_id") != lock_id)
                co_return std::tuple{error_code{}, false};
        co_return std::tuple{error_code{}, true};
    }

    /// The newest token of `id` this store last released (and so believes
    /// free): its next acquire claims the following token without reading
    /// first. Only where the engine counts written rows, which tell a wrong
    /// guess at once; bounded, and forgotten on any doubt.
    std::optional<std::uint64_t> free_token_hint(const std::string& id) {
        std::lock_guard lk(mutex_);
        auto it = free_tokens_.find(id);
        if (it == free_tokens_.end())
            return std::nullopt;
        return it->second;
    }
    void remember_free_token(const std::string& id, std::uint64_t token) {
        if (!counts_written_rows_.load())
            return;
        std::lock_guard lk(mutex_);
        if (free_tokens_.size() >= 1024 && !free_tokens_.count(id))
            free_tokens_.clear();
        free_tokens_[id] = token;
    }
    void forget_free_token(const std::string& id) {
        std::lock_guard lk(mutex_);
        free_tokens_.erase(id);
    }

    std::uint64_t skew_ms() const {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(options_.lock.clock_skew).count();
        return ms < 0 ? 0 : static_cast<std::uint64_t>(ms);
    }

    static bool is_free(const std::optional<grant_row>& latest, std::uint64_t now) {
        return !latest || latest->released || latest->expires_ms < now;
    }

    op<grant_ref> acquire_strict(const std::string& id, diagnostics& diag) {
        co_await asio::this_coro::throw_if_cancelled(false);
        const lock_options& lo = options_.lock;
        const time_point deadline = clock_.now() + lo.timeout;
        // A token whose INSERT reported success yet left no row: the server
        // recorded its deduplication id and then failed to commit the part
        // (MergeTreeSink records before it commits), so every later INSERT of
        // that token is dropped too. Racers all find it vacant and move on
        // to the next token together, where deduplication decides again.
        std::uint64_t vacant_token = 0;
        // The id's newest token, believed free: from our last release of it
        // (no read first), or read just now.
        std::optional<std::uint64_t> basis = free_token_hint(id);
        int immediate = 0; // claims retried without waiting
        for (;;) {
            auto stm = stmts_snapshot();
            if (!basis) {
                auto [ec, latest] = co_await grant_latest(id, diag);
                if (ec)
                    co_return std::tuple{ec, grant_ref{}};
                if (is_free(latest, now_ms()))
                    basis = latest ? latest->token : 0;
            }
            if (basis) {
                const std::uint64_t next = std::max(*basis + 1, vacant_token + 1);
                std::string mine = detail::random_uuid();
                const std::uint64_t expires = now_ms() + ttl_ms();
                auto [ec] = co_await execute(
                    stm->claim_grant(id, next, mine, expires, grant_event_key(id, next, ""), *basis, now_ms()), diag);
                if (ec) { // the row may have landed: give it back if it is ours
                    forget_free_token(id);
                    co_await withdraw_strict(id, next, mine);
                    co_return std::tuple{ec, grant_ref{}};
                }
                if (diag.written_rows)
                    counts_written_rows_ = true;
                if (diag.written_rows && *diag.written_rows == 0) {
                    // Nothing written: the check inside the INSERT failed (a
                    // rival took a token, or our guess was stale), or this
                    // is our own INSERT resent after a lost reply and
                    // deduplicated. The newest event tells which.
                    forget_free_token(id);
                    auto [lec, latest] = co_await grant_latest(id, diag);
                    if (lec)
                        co_return std::tuple{lec, grant_ref{}};
                    if (latest && latest->token == next && latest->lock_id == mine && !latest->released)
                        co_return std::tuple{error_code{}, grant_ref{std::move(mine), next, expires}};
                    basis.reset();
                    if (is_free(latest, now_ms())) {
                        basis = latest ? latest->token : 0;
                        if (clock_.now() < deadline && ++immediate <= 8)
                            continue;
                    }
                } else {
                    // Written, or not counted. A count of one does not say the
                    // row survived: the engine counts a block it then drops as
                    // a duplicate of a rival's grant (chDB 26.5 does), so read
                    // back who holds the token.
                    bool vacant = false;
                    auto [hec, won] = co_await holds(id, next, mine, diag, &vacant);
                    if (hec) {
                        co_await withdraw_strict(id, next, mine);
                        co_return std::tuple{hec, grant_ref{}};
                    }
                    if (won)
                        co_return std::tuple{error_code{}, grant_ref{std::move(mine), next, expires}};
                    forget_free_token(id);
                    basis.reset();
                    if (vacant) {
                        vacant_token = next;
                        if (clock_.now() < deadline)
                            continue; // try the next token now
                    }
                }
            }
            if (clock_.now() >= deadline) {
                diag.message = "Could not acquire lock for state_id: " + id;
                co_return std::tuple{make_error_code(errc::state_id_locked), grant_ref{}};
            }
            auto [wait_ec] = co_await wait(lo.retry_interval);
            if (wait_ec)
                co_return std::tuple{wait_ec, grant_ref{}};
            basis.reset();
            immediate = 0;
        }
    }

    /// After a failure between our grant INSERT and learning its outcome:
    /// release the token if it is ours; never cancelled.
    asio::awaitable<void> withdraw_strict(const std::string& id, std::uint64_t token, const std::string& lock_id) {
        co_await asio::this_coro::reset_cancellation_state();
        diagnostics ignored;
        auto [ec, won] = co_await holds(id, token, lock_id, ignored);
        if (!ec && won)
            std::tie(ec) = co_await execute(release_event(id, token, lock_id), ignored);
        if (ec)
            remember_orphan(id, lock_id, token);
    }

    /// Why `held` is no longer the id's grant (empty: it still is): reads the
    /// id's newest event; `check_expiry` also counts an expiry by our clock.
    op<std::string> grant_lost_reason(const std::string& id, const grant_ref& held, bool check_expiry,
                                      diagnostics& diag) {
        auto [ec, latest] = co_await grant_latest(id, diag);
        std::string why;
        if (ec)
            co_return std::tuple{ec, why};
        if (!latest || latest->token < held.token)
            why = "its grant is missing from the grant table";
        else if (latest->token > held.token)
            why = "superseded by fencing token " + std::to_string(latest->token);
        else if (latest->released)
            why = "it was released";
        else if (latest->lock_id != held.lock_id)
            why = "another client holds the token";
        else if (check_expiry && latest->expires_ms < now_ms())
            why = "the lease expired";
        co_return std::tuple{error_code{}, std::move(why)};
    }

    /// The fencing check: the grant is still the id's newest event, ours,
    /// not released and not expired by our clock. Nothing to check in
    /// seed_compatible mode (token 0).
    op<> fence_check(const std::string& id, const grant_ref& held, diagnostics& diag) {
        if (held.token == 0)
            co_return std::tuple{error_code{}};
        auto [ec, why] = co_await grant_lost_reason(id, held, true, diag);
        if (ec || why.empty())
            co_return std::tuple{ec};
        diag.message = lock_lost_message(id, held, why);
        co_return std::tuple{make_error_code(errc::lock_lost)};
    }

    asio::awaitable<void> heartbeat_loop(std::shared_ptr<detail::heartbeat_control> hb, std::string id,
                                         std::string lock_id, std::uint64_t fence, duration interval,
                                         std::function<void(error_code)> on_lost) {
        co_await asio::this_coro::throw_if_cancelled(false);
        for (;;) {
            auto [wait_ec] = co_await wait(interval);
            if (wait_ec || hb->stopped)
                co_return;
            auto [ec] = co_await lease_op(true, id, lock_id, fence);
            if (hb->stopped)
                co_return;
            if (ec) {
                if (on_lost)
                    on_lost(ec);
                co_return;
            }
        }
    }

    /// lock_lease::async_renew / async_verify.
    op<> lease_op(bool renew, std::string id, std::string lock_id, std::uint64_t fence) {
        diagnostics diag;
        if (fence == 0)
            co_return std::tuple{error_code{}};
        if (auto [ec] = co_await ready(diag); ec)
            co_return std::tuple{ec};
        grant_ref held{std::move(lock_id), fence};
        auto [ec] = co_await fence_check(id, held, diag);
        if (ec || !renew)
            co_return std::tuple{ec};
        const std::uint64_t expires = now_ms() + ttl_ms();
        std::tie(ec) = co_await execute(
            stmts_snapshot()->insert_grant_event(id, fence, held.lock_id, "grant", expires,
                                                 grant_event_key(id, fence, "/renew-" + std::to_string(expires))),
            diag);
        if (ec)
            co_return std::tuple{ec};
        co_return co_await fence_check(id, held, diag); // still ours, now with the new expiry
    }

    executor_type ex_;
    Transport transport_;
    store_options options_;
    Clock clock_;
    mutable std::mutex mutex_;
    std::shared_ptr<const detail::statements> stmts_;
    std::atomic<std::uint64_t> last_version_{0};
    /// Lock rows of ours that a failed statement may have left behind
    /// (a candidate, a grant or a release whose outcome is unknown, a
    /// withdrawal that failed); guarded by mutex_. withdraw_orphans() gives
    /// them back before the next operation's statements.
    std::vector<orphan_lock> orphans_;
    /// strict: per id, the newest token this store released (free_token_hint).
    std::unordered_map<std::string, std::uint64_t> free_tokens_;
    std::atomic<bool> counts_written_rows_{false}; ///< the transport reported written rows
    bool strict_ = false;             ///< set once by ready(), with stmts_
    bool strict_unsupported_ = false; ///< lock_mode::strict on a server without it
};

} // namespace chstate
