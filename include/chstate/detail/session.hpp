// chstate/detail/session.hpp — what a store knows and how it talks: the
// server's dialect and the lock protocol, learnt once (ready()), and the
// statement plumbing every operation shares.
//
// Sending. execute() is the one way to send a statement:
//   * a cancelled operation sends nothing more: each statement (and each
//     wait) first checks the operation's cancellation state, so a cancel
//     that arrived while a statement ran is honoured before the next one;
//   * values become quoted literals for a server without query parameters
//     (< 20.1) unless the transport binds them itself (binds_parameters);
//   * cluster mode: every statement carries the quorum settings; one
//     refused because another quorum INSERT into the table is under way
//     (286: nothing written) is sent again after a short random pause
//     until insert_quorum_timeout has passed, and a read refused by a
//     replica still fetching a quorum part (289: nothing read) for up to
//     a second, then errc::replicas_unavailable, never stale data.
// Every pause and every time compared goes through the store's Clock.
//
// Reading: rows() (JSONEachRow, bookkeeping replies), count() (one `n`),
// read_rows() (RowBinary: ids and state text, byte for byte).
// Deleting: delete_rows() (deletes.hpp) waits where a DELETE is a
// background mutation. ready() (schema.hpp) fills in what the server is.
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/config.hpp>
#include <chstate/detail/engine.hpp>
#include <chstate/detail/row_binary.hpp>
#include <chstate/detail/rows.hpp>
#include <chstate/detail/sql.hpp>
#include <chstate/detail/statements.hpp>
#include <chstate/detail/uuid.hpp>

#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
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

namespace chstate::detail {

/// An operation step: an awaitable yielding an error code and its values.
template <class... Ts>
using op = asio::awaitable<std::tuple<error_code, Ts...>>;

/// The lock protocol ready() settled on (config.hpp: lock_mode).
enum class lock_protocol {
    seed_compatible,
    strict,
    /// lock_mode::strict asked of a server without insert_deduplication_token.
    strict_unsupported,
};

/// What ready() learns from the server, once; never changes after.
struct resolved {
    statements sql;
    lock_protocol lock = lock_protocol::seed_compatible;
};

/// A lock row (seed_compatible: token 0) or strict grant that a failure
/// may have left behind and that the store still has to give back.
struct orphan_lock {
    std::string state_id;
    std::string lock_id;
    std::uint64_t token = 0;
};

/// Work that can outlive the operation that started it (an acquire's
/// protocol, which a timed-out acquire stops waiting for, and its
/// give-back), counted so that the store's destructor can wait for it
/// (lock/acquire.hpp). Once closed (the store is going away) no more starts.
class leftover_work {
public:
    /// False once closed: the caller must not start the work.
    bool try_add() {
        std::lock_guard lk(m_);
        if (closed_)
            return false;
        ++n_;
        return true;
    }
    void done() {
        std::lock_guard lk(m_);
        if (--n_ == 0)
            cv_.notify_all();
    }
    /// Refuses new work; then true when none is left, waiting at most `d`.
    bool close_and_wait(std::chrono::milliseconds d) {
        std::unique_lock lk(m_);
        closed_ = true;
        return cv_.wait_for(lk, d, [this] { return n_ == 0; });
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    int n_ = 0;
    bool closed_ = false;
};

/// One piece of leftover work while it runs: keeps the store alive and
/// counted; on destruction lets the store go first, then the count (the
/// store's destructor, waiting on the count, never outlives the hold's
/// reference).
class leftover_hold {
public:
    leftover_hold(std::shared_ptr<void> store, std::shared_ptr<leftover_work> work)
        : store_(std::move(store)), work_(std::move(work)) {}
    leftover_hold(leftover_hold&&) noexcept = default;
    leftover_hold& operator=(leftover_hold&&) = delete;
    ~leftover_hold() {
        store_.reset();
        if (work_)
            work_->done();
    }

private:
    std::shared_ptr<void> store_;
    std::shared_ptr<leftover_work> work_;
};

/// Sets diag's message and returns `e`.
inline error_code fail(diagnostics& diag, errc e, std::string message) {
    diag.message = std::move(message);
    return make_error_code(e);
}

/// True once the running operation has been asked to stop.
inline asio::awaitable<bool> cancelled() {
    auto state = co_await asio::this_coro::cancellation_state;
    co_return state.cancelled() != asio::cancellation_type::none;
}

using row_handler = std::function<error_code(std::span<const rb_field>)>;

class session {
public:
    session(engine& e, store_options options) : engine_(e), options_(std::move(options)) {}
    session(const session&) = delete;
    session& operator=(const session&) = delete;

    engine& eng() noexcept { return engine_; }
    const store_options& options() const noexcept { return options_; }

    /// For work that may go on after the operation that started it has
    /// completed (a lock claim a timed-out acquire no longer waits for): a
    /// hold on the store that owns this session, counted in leftovers();
    /// none once the store is going away.
    std::optional<leftover_hold> try_hold() {
        if (!leftovers_->try_add())
            return std::nullopt;
        return leftover_hold(owner_.lock(), leftovers_);
    }
    void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }
    /// What operations left running (see leftover_work).
    const std::shared_ptr<leftover_work>& leftovers() const noexcept { return leftovers_; }
    time_point now() const { return engine_.now(); }
    /// The store's clock in milliseconds since the epoch.
    std::uint64_t now_ms() const {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now().time_since_epoch()).count();
        return ms < 0 ? 0 : static_cast<std::uint64_t>(ms);
    }
    /// The store's clock on its steady time (clock.hpp), in milliseconds:
    /// what the strict lock bounds a lease with.
    std::uint64_t steady_ms() const { return engine_.steady_ms(); }

    /// What ready() resolved; null before the first success.
    std::shared_ptr<const resolved> known() const {
        std::lock_guard lk(mutex_);
        return resolved_;
    }
    /// After a successful ready(): never null.
    const statements& sql() const { return known()->sql; }

    // -- sending ---------------------------------------------------------------

    op<> execute(statement s, const result_sink& sink, diagnostics& diag,
                 cancellation c = cancellation::honour);

    /// Sends `s`, a statement without output (INSERT, DDL, ALTER): its
    /// reply holds nothing, and one holding more than
    /// max_reply_without_output bytes is a protocol_error (a write's, as
    /// any lost reply, outcome_unknown), its rest not read — a server
    /// could send it for ever.
    op<> execute(statement s, diagnostics& diag, cancellation c = cancellation::honour);
    static constexpr std::size_t max_reply_without_output = 64 * 1024;

    /// Sends `s` and reads its JSONEachRow rows, keeping at most
    /// limits.max_operation_bytes of reply.
    op<std::vector<json::object>> rows(statement s, diagnostics& diag, cancellation c = cancellation::honour);

    /// Sends `s`, whose reply is one row with an unsigned `n`.
    op<std::uint64_t> count(statement s, diagnostics& diag, cancellation c = cancellation::honour);

    /// Sends `s` and reads its RowBinary rows of `columns`, one on_row call per row.
    op<> read_rows(statement s, std::vector<rb_type> columns, row_handler on_row, diagnostics& diag);

    /// Waits on the store's Clock; honours cancellation unless told not to.
    op<> wait(duration d, cancellation c = cancellation::honour);

    error_code over_operation_limit(std::size_t bytes, diagnostics& diag) const {
        return fail(diag, errc::reply_too_large,
                    "the reply holds more than " + std::to_string(bytes) + " bytes, over the limit of " +
                        std::to_string(options_.limits.max_operation_bytes) +
                        " (store_options::limits.max_operation_bytes)");
    }

    // -- what failures leave behind ------------------------------------------

    void remember_orphan(orphan_lock o) {
        std::lock_guard lk(mutex_);
        orphans_.push_back(std::move(o));
    }
    std::vector<orphan_lock> take_orphans() {
        std::lock_guard lk(mutex_);
        return std::exchange(orphans_, {});
    }
    std::size_t orphaned_locks() const {
        std::lock_guard lk(mutex_);
        return orphans_.size();
    }

    // -- the strict lock's hints -------------------------------------------------

    /// The newest token of `id` this store released (and so believes free):
    /// its next acquire claims the following token without reading first.
    /// Kept only where the engine counts written rows, which tell a wrong
    /// guess at once; bounded, and forgotten on any doubt.
    std::optional<std::uint64_t> free_token_hint(const std::string& id) const {
        std::lock_guard lk(mutex_);
        auto it = free_tokens_.find(id);
        return it == free_tokens_.end() ? std::nullopt : std::optional<std::uint64_t>(it->second);
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
    /// Called with each claim's diagnostics: a transport that reports written rows.
    void note_written_rows(const diagnostics& d) {
        if (d.written_rows)
            counts_written_rows_ = true;
    }

    /// A version from the store's clock, strictly increasing per store
    /// (servers without DateTime64; versions.hpp).
    std::uint64_t next_client_version() {
        const std::uint64_t now = now_ms();
        std::uint64_t last = last_version_.load();
        std::uint64_t next;
        do {
            next = std::max(now, last + 1);
        } while (!last_version_.compare_exchange_weak(last, next));
        return next;
    }

    /// ready()'s result, set once (schema.hpp).
    void settle(std::shared_ptr<const resolved> r) {
        std::lock_guard lk(mutex_);
        if (!resolved_)
            resolved_ = std::move(r);
    }

private:
    /// How long a read refused by a replica still fetching a quorum part
    /// (289) is sent again.
    static constexpr duration replica_catch_up{1000};

    /// One statement through the engine; in cluster mode with the quorum
    /// settings, 286 and 289 sent again as the header comment says.
    asio::awaitable<error_code> send(const statement& s, const result_sink& sink, diagnostics& diag, cancellation c);

    engine& engine_;
    const store_options options_;
    std::weak_ptr<void> owner_;
    std::shared_ptr<leftover_work> leftovers_ = std::make_shared<leftover_work>();
    mutable std::mutex mutex_;
    std::shared_ptr<const resolved> resolved_;
    std::vector<orphan_lock> orphans_;
    std::unordered_map<std::string, std::uint64_t> free_tokens_;
    std::atomic<bool> counts_written_rows_{false};
    std::atomic<std::uint64_t> last_version_{0};
};

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/session.ipp>
#endif
