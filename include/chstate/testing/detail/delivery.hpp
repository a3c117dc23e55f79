// chstate/testing/detail/delivery.hpp — a simulated server as its clients
// meet it: statements arrive (automatic delivery: at once; manual: when
// the test steps them), run under the server's lock, stream their reply
// to the client's sink and complete on the client's executor. With
// two-phase inserts, a manually delivered INSERT … SELECT takes two steps:
// its SELECT, then its block's commit (execute.hpp, staged_block). Quorum
// INSERTs wait until their quorum holds the part; background work —
// replication tasks, mutations, merges — runs when the test says (or,
// for replication in automatic delivery, after each statement).
// simulated_clickhouse (chstate/testing/simulated.hpp) is its public face.
#pragma once

#include <chstate/testing/detail/execute.hpp>

#include <chstate/error.hpp>
#include <chstate/manual_clock.hpp>
#include <chstate/transport.hpp>

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace chstate::detail::sim {

/// A statement sent by a client, until it completes.
struct request {
    std::size_t client = 0;
    std::size_t replica = 0;
    statement stmt;
    result_sink sink;
    diagnostics* diag = nullptr;
    std::function<void(error_code)> complete; ///< posts the completion to the client
    /// Two-phase inserts: the SELECT has run; this block waits for its commit step.
    std::optional<staged_block> staged;
};

/// A quorum INSERT executed and not yet acknowledged.
struct waiter {
    request r;
    std::string table;
    std::uint64_t block = 0;
    bool parallel = false;
    std::int64_t deadline_ms = 0; ///< server clock: when insert_quorum_timeout has passed
};

/// What the public header's pending() and quorum_waits() list.
struct pending_request {
    std::size_t client;
    std::string sql;
    std::size_t replica = 0; ///< cluster mode: the replica it was sent to
    /// Two-phase inserts: the SELECT of this INSERT … SELECT has run, and
    /// step() now commits its block (then the client gets its reply).
    bool commit = false;
};
struct quorum_wait {
    std::size_t client = 0, replica = 0;
    std::string table;
    std::uint64_t block = 0;
    /// insert_quorum_timeout has passed on the server's clock since the
    /// INSERT ran: ClickHouse would give up now.
    bool expired = false;
};

class server {
public:
    server(manual_clock clock, bool manual) : s_(std::move(clock)), manual_(manual) {}

    /// Runs `f(state)` under the server's lock.
    template <class F>
    decltype(auto) with_state(F&& f) {
        std::lock_guard lk(mutex_);
        return std::forward<F>(f)(s_);
    }
    template <class F>
    decltype(auto) with_state(F&& f) const {
        std::lock_guard lk(mutex_);
        return std::forward<F>(f)(s_);
    }

    // ---- delivery ---------------------------------------------------------------

    void set_manual(bool on) { with_state([&](auto&) { manual_ = on; }); }
    bool manual() const { return with_state([&](auto&) { return manual_; }); }
    void set_two_phase(bool on) { with_state([&](auto&) { two_phase_ = on; }); }
    bool two_phase() const { return with_state([&](auto&) { return two_phase_; }); }

    std::vector<pending_request> pending() const {
        return with_state([&](auto&) {
            std::vector<pending_request> out;
            for (const auto& p : queue_)
                out.push_back({p.client, p.stmt.sql, p.replica, p.staged.has_value()});
            return out;
        });
    }
    std::size_t pending_count() const { return with_state([&](auto&) { return queue_.size(); }); }

    /// A client's statement: refused at once (a setting the server cannot
    /// apply, no such replica), queued (manual delivery) or run now.
    void submit(request r) {
        if (auto why = refuse_settings(r.stmt)) {
            r.diag->message = *why;
            r.complete(make_error_code(errc::unsupported));
            return;
        }
        {
            std::lock_guard lk(mutex_);
            if (r.replica >= s_.replica_tables.size()) {
                r.diag->message = "simulated_clickhouse: no replica " + std::to_string(r.replica);
                r.complete(make_error_code(errc::connection_failed));
                return;
            }
            if (manual_) {
                queue_.push_back(std::move(r));
                return;
            }
        }
        run(r);
    }

    /// Delivers pending statement `index` (manual delivery). With two-phase
    /// inserts an INSERT … SELECT's first step runs its SELECT, and the
    /// request stays at `index` for its commit step; stepped again (or
    /// once manual delivery is off) it commits.
    void step(std::size_t index) {
        request r;
        bool stage = false;
        {
            std::lock_guard lk(mutex_);
            if (index >= queue_.size())
                throw std::out_of_range("simulated_clickhouse::step: no such pending request");
            r = std::move(queue_[index]);
            queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(index));
            stage = two_phase_ && manual_ && !r.staged;
        }
        if (!run(r, stage)) {
            std::lock_guard lk(mutex_);
            queue_.insert(queue_.begin() + static_cast<std::ptrdiff_t>(std::min(index, queue_.size())), std::move(r));
        }
    }

    /// Runs `stmt` now, bypassing delivery; the whole reply in `reply`. A
    /// quorum INSERT (and, in automatic delivery, any write) replicates
    /// everything at once.
    error_code execute(const statement& stmt, std::string& reply, diagnostics& diag, std::size_t replica) {
        if (auto why = refuse_settings(stmt)) {
            diag.message = *why;
            return make_error_code(errc::unsupported);
        }
        outcome out;
        bool waiting = false;
        auto ec = execute_locked(stmt, replica, out, diag, nullptr, &waiting, false);
        for (auto& c : out.chunks)
            reply += c;
        if (waiting || !manual())
            replicate_all();
        return ec;
    }

    // ---- quorum INSERTs ---------------------------------------------------------

    std::vector<quorum_wait> quorum_waits() const {
        return with_state([&](const server_state& s) {
            std::vector<quorum_wait> out;
            for (const auto& w : waiters_)
                out.push_back({w.r.client, w.r.replica, w.table, w.block, s.now_ms() >= w.deadline_ms});
            return out;
        });
    }

    /// Quorum INSERT `index` gives up waiting: 319, its part stays where it is.
    void time_out_quorum(std::size_t index) {
        request r;
        {
            std::lock_guard lk(mutex_);
            if (index >= waiters_.size())
                throw std::out_of_range("simulated_clickhouse::time_out_quorum: no such insert");
            r = std::move(waiters_[index].r);
            waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(index));
        }
        r.diag->message = "Code: 319. DB::Exception: Unknown status, client must retry. Reason: Code: 159. "
                          "DB::Exception: Timeout while waiting for quorum. (UNKNOWN_STATUS_OF_INSERT) (simulated)";
        r.complete(make_clickhouse_error(319));
    }

    // ---- replication tasks ------------------------------------------------------

    std::vector<replication_task> pending_replication() const {
        return with_state([](const server_state& s) { return s.tasks; });
    }
    std::size_t pending_replication_count() const {
        return with_state([](const server_state& s) { return s.tasks.size(); });
    }

    /// Runs replication task `index`; a fetch that completes a quorum
    /// acknowledges the INSERT waiting for it.
    void replicate(std::size_t index) {
        std::vector<request> done;
        {
            std::lock_guard lk(mutex_);
            if (index >= s_.tasks.size())
                throw std::out_of_range("simulated_clickhouse::replicate: no such task");
            auto t = s_.tasks[index];
            s_.tasks.erase(s_.tasks.begin() + static_cast<std::ptrdiff_t>(index));
            run_task(s_, t);
            acknowledge_quorums();
            done.swap(ready_);
        }
        for (auto& r : done)
            r.complete({});
    }
    void replicate_all() {
        while (pending_replication_count() > 0)
            replicate(0);
    }

    /// Applies every queued ALTER … DELETE and every replicated mutation
    /// task; returns the rows removed by the former.
    std::size_t apply_mutations() {
        std::size_t n = with_state([](server_state& s) {
            std::size_t removed = 0;
            for (auto& tables : s.replica_tables)
                for (auto& [_, t] : tables)
                    removed += sim::apply_mutations(t, s.eval());
            return removed;
        });
        for (;;) {
            auto k = with_state([](const server_state& s) {
                std::size_t i = 0;
                while (i < s.tasks.size() && s.tasks[i].kind != replication_task::mutate)
                    ++i;
                return i < s.tasks.size() ? std::optional<std::size_t>(i) : std::nullopt;
            });
            if (!k)
                return n;
            replicate(*k);
        }
    }

private:
    /// The settings a statement may carry: none on one server; in cluster
    /// mode the quorum ones. Anything else: the reason to refuse it.
    std::optional<std::string> refuse_settings(const statement& stmt) const {
        std::lock_guard lk(mutex_);
        for (const auto& st : stmt.settings) {
            if (s_.cluster.empty())
                return "the simulated server has no replicas: statement setting " + st.name +
                       " (cluster mode) cannot apply (simulated_clickhouse::create_cluster has them)";
            if (st.name != "insert_quorum" && st.name != "insert_quorum_timeout" &&
                st.name != "select_sequential_consistency" && st.name != "insert_quorum_parallel" &&
                st.name != "distributed_ddl_task_timeout") // ON CLUSTER runs at once here
                return "simulated_clickhouse does not model the setting " + st.name;
            if (!to_int(st.value) && !(st.name == "insert_quorum" && st.value == "auto"))
                return "simulated_clickhouse: setting " + st.name + " = '" + st.value + "' is not a number";
        }
        return std::nullopt;
    }

    /// Moves the waiters whose quorum was reached to ready_ (mutex held).
    void acknowledge_quorums() {
        for (const auto& [table, block] : s_.quorums_reached)
            for (std::size_t k = 0; k < waiters_.size();)
                if (waiters_[k].table == table && waiters_[k].block == block) {
                    ready_.push_back(std::move(waiters_[k].r));
                    waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(k));
                } else
                    ++k;
        s_.quorums_reached.clear();
    }

    /// Executes `r`, streams the reply to its sink and completes it — or,
    /// a quorum INSERT short of its quorum, leaves it waiting. `stage`: an
    /// INSERT … SELECT stops before its commit; then `r` holds its block,
    /// is not completed, and run() returns false (the caller queues it).
    bool run(request& r, bool stage = false) {
        outcome out;
        diagnostics local;
        bool waiting = false;
        error_code ec = execute_locked(r.stmt, r.replica, out, local, &r, &waiting, stage);
        if (!ec && out.staged) {
            r.staged = std::move(out.staged);
            return false;
        }
        if (!waiting) {
            r.diag->written_rows = local.written_rows;
            if (!ec) {
                for (auto& c : out.chunks)
                    if (auto sec = r.sink(c)) {
                        ec = sec;
                        break;
                    }
            } else {
                r.diag->message = local.message;
            }
            r.complete(ec);
        }
        // Cluster mode, automatic delivery: replication happens at once.
        if (!manual() && with_state([](const server_state& s) { return !s.cluster.empty(); }))
            replicate_all();
        return true;
    }

    /// Runs `stmt` on `replica` under the lock — or, when `r` holds a
    /// staged block, commits it; `stage`: see run(). A quorum INSERT short
    /// of its quorum sets `*waiting`, and `*r` (when given) joins the
    /// waiters. The INSERTs it completed (a duplicate block reaching a
    /// quorum) are acknowledged after the lock is released.
    error_code execute_locked(const statement& stmt, std::size_t replica, outcome& out, diagnostics& diag,
                              request* r, bool* waiting, bool stage) {
        std::vector<request> done;
        struct drain {
            std::vector<request>& d;
            ~drain() {
                for (auto& q : d)
                    q.complete({});
            }
        } drained{done};
        std::lock_guard lk(mutex_);
        struct restore {
            server_state& s;
            ~restore() {
                s.current = 0;
                s.mutations_read = false;
            }
        } back{s_};
        s_.current = replica;
        try {
            interpreter in(s_, stmt);
            if (r && r->staged) {
                auto block = std::move(*r->staged);
                r->staged.reset();
                out = in.commit(std::move(block));
            } else {
                out = in.run(stage);
            }
        } catch (const sim_error& e) {
            acknowledge_quorums();
            diag.message = e.message;
            return make_clickhouse_error(e.code);
        } catch (const std::exception& e) {
            acknowledge_quorums();
            diag.message = std::string("simulated_clickhouse: ") + e.what() + " in: " + stmt.sql;
            return make_clickhouse_error(1001);
        }
        diag.written_rows = out.written_rows; // as the engine counts them
        acknowledge_quorums();
        done.swap(ready_);
        if (out.wait_block && !quorum_done(s_, out.wait_table, out.wait_block)) {
            if (waiting)
                *waiting = true;
            if (r) {
                r->diag->written_rows = out.written_rows;
                waiters_.push_back({std::move(*r), out.wait_table, out.wait_block, out.wait_parallel,
                                    s_.now_ms() + out.wait_timeout_ms});
            }
        }
        return {};
    }

    mutable std::mutex mutex_;
    server_state s_;
    bool manual_ = false;
    bool two_phase_ = false; ///< INSERT … SELECT in two steps (manual delivery)
    std::vector<request> queue_;
    std::vector<waiter> waiters_;
    std::vector<request> ready_; ///< quorum INSERTs acknowledged, to complete outside the lock
};

} // namespace chstate::detail::sim
