// chstate/testing/simulated.hpp — an in-memory model of the ClickHouse
// behaviour the store relies on, for deterministic tests (ours and yours).
// (chstate/transport/simulated.hpp, its old place, includes this header.)
//
//   auto server = chstate::simulated_clickhouse::create();          // automatic delivery
//   chstate::simulated_transport t{server, ioc.get_executor()};
//   chstate::basic_state_store<chstate::simulated_transport, chstate::manual_clock>
//       store{ioc.get_executor(), t, {}, clock};
//
// The model (one non-replicated server, single partition):
//   * CREATE DATABASE / CREATE TABLE [IF NOT EXISTS] record the columns, their
//     DEFAULT expression, ENGINE = [Replacing]MergeTree[(ver)], ORDER BY key,
//     TTL col + INTERVAL n SECOND|MINUTE|HOUR|DAY, and
//     SETTINGS non_replicated_deduplication_window = n.
//   * Every INSERT is a new part; rows keep insertion order.
//   * SELECT … FINAL collapses rows by the sorting key as ReplacingMergeTree
//     does: the highest version wins, equal versions → the last inserted.
//     Without FINAL every unmerged row is visible.
//   * merge(table) / merge_all() are the background merges: all parts of the
//     table become one, collapsed exactly like FINAL, and rows whose TTL has
//     passed (on the server's clock) are dropped. They run only when the test
//     calls them.
//   * DELETE FROM (lightweight) takes effect immediately. ALTER TABLE …
//     DELETE is a mutation of the rows inserted before it, applied in the
//     background: a read of system.mutations shows it unfinished
//     (is_done = 0), and it finishes once that read has been answered — so
//     a client waiting for it, as the store does on a server without
//     DELETE FROM, waits one round, as it may on 18.16, where a mutation
//     takes milliseconds. apply_mutations() applies the queued ones at
//     once; hold_mutations(true) leaves them to it alone (a mutation that
//     does not finish).
//   * INSERT into a table with non_replicated_deduplication_window = n > 0:
//     a block whose id is among the last n blocks' is dropped and the INSERT
//     still reports success (as ClickHouse does). The id: its
//     insert_deduplication_token, else the block's content.
//   * now() / now64(3) read the server's manual_clock (server_clock()),
//     which may be a skewed handle on the clients' timeline; set_server_clock()
//     swaps it (a clock step).
//   * Bound parameters {name:Type} come from statement::parameters (values
//     raw text; nullopt = NULL). Replies: JSONEachRow (UInt64 quoted, as
//     ClickHouse writes it by default up to 25.7), RowBinary or TabSeparated (the default when no
//     format is named); large replies arrive in chunks of max_block_size
//     (1000) rows.
//
// Versions. SELECT version() answers "25.3.1.1": a modern server, whose
// dialect is that of 23.3 and later. set_version("18.16.1"), before the
// first statement, makes the server ClickHouse 18.16, the oldest the store
// supports: the store then speaks its old dialect (detail/statements.hpp)
// and writes values into the SQL text as quoted literals (simulated_transport
// does not bind parameters itself), and the simulator refuses what 18.16
// refuses, with 18.16's codes: {name:Type} placeholders, DELETE FROM, TTL,
// INTERVAL n MILLISECOND and INSERT … SETTINGS (62, a syntax error), the
// type DateTime64 (50), now64 and toUnixTimestamp64Milli (46), the table
// setting non_replicated_deduplication_window (36), the query setting
// insert_deduplication_token (115) and system.columns.position (47).
// Versions other than 18.x and 23.3 or later are refused
// (std::invalid_argument): the simulator speaks no dialect in between.
//
// Statements understood (the store's in both dialects, detail/statements.hpp,
// plus what tests use to inspect tables):
//   SELECT version()
//   CREATE DATABASE [IF NOT EXISTS] db
//   CREATE TABLE [IF NOT EXISTS] db.t (col Type [DEFAULT expr], …) ENGINE = … ORDER BY … [TTL …] [SETTINGS …]
//   INSERT INTO db.t (cols) [SETTINGS insert_deduplication_token = '…'] VALUES (expr, …)[, (…)]
//       | SELECT expr, … [WHERE cond] | FORMAT TabSeparated (rows in statement::data)
//   SELECT [DISTINCT] item, … [FROM db.t [FINAL]] [WHERE cond] [ORDER BY expr [DESC], …] [LIMIT n]
//       [SETTINGS max_block_size = n] [FORMAT TabSeparated|JSONEachRow|RowBinary]
//       items: expressions [AS alias]; count(), max(x), min(x), any(x), countIf(c),
//       maxIf(x, c), minIf(x, c), alone or inside an expression (no GROUP BY: one row);
//       expressions: AND / OR of =, !=, <, <=, >, >=; +, - and * over columns, literals,
//       {params} and NULL; x IN (SELECT arrayJoin({param:Array(String)} or ['…', …]));
//       INTERVAL n MILLISECOND|SECOND|MINUTE|HOUR|DAY; scalar subqueries (SELECT …); the
//       functions now(), now64(3), version(), toDateTime(seconds), toUnixTimestamp,
//       toUnixTimestamp64Milli, fromUnixTimestamp64Milli (times are milliseconds),
//       toUInt64, toInt64, greatest, isNull,
//       startsWith, SHA256, unhex
//   SELECT … FROM system.tables (database, name, engine, engine_full) | system.columns
//       (database, table, name, type, position) | system.mutations (database, table, is_done)
//   DELETE FROM db.t WHERE cond            ALTER TABLE db.t DELETE WHERE cond
//   TRUNCATE TABLE db.t
//   SYSTEM STOP MERGES db.t / SYSTEM START MERGES db.t   (merge()/merge_all() then skip the table)
// Anything else fails with ClickHouse error 48 (NOT_IMPLEMENTED) and a
// message naming the statement; an unknown function with 46, an unknown
// table with 60, an unknown database with 81.
//
// Cluster mode (create_cluster(N, clock, manual, "name")): one shard of N
// replicas of cluster `name`; bind each simulated_transport to one (its
// `replica` argument). It models what the lock protocols depend on, after
// ClickHouse's ReplicatedMergeTreeSink and StorageReplicatedMergeTree and
// what docs/cluster-rig-findings.md measured on 18.16:
//   * CREATE DATABASE|TABLE … ON CLUSTER name (on every replica at once; any
//     other cluster name: 701) and Replicated[Replacing]MergeTree('path',
//     'replica'[, ver]) engines, SETTINGS replicated_deduplication_window = n
//     (default 1000). The path and replica name are not interpreted: a
//     table's replicas are its copies, one per replica, of the same name.
//   * Each replica has its own parts. An INSERT writes its part (a numbered
//     block) on the replica it reached; every other replica gets it by a
//     fetch, a background task the test runs (pending_replication(),
//     replicate(i), replicate_all()): hold a replica's tasks back and it
//     lags. In automatic delivery all tasks run after each statement.
//   * Deduplication: a block's id (insert_deduplication_token, else the
//     rows' content) is kept in ZooKeeper, shared by the replicas; a
//     duplicate is dropped on a replica that holds the block, but on one
//     that does not yet, its own rows are written there under the block's
//     number, as ClickHouse writes them under the existing part's name — so
//     a token reused with other rows leaves that replica with other rows.
//   * Statement settings insert_quorum (n or 'auto'), insert_quorum_timeout
//     (on the server's clock: quorum_waits() says which have expired; the
//     test decides when one times out),
//     insert_quorum_parallel and select_sequential_consistency (nothing else;
//     one server refuses every setting with errc::unsupported). With
//     insert_quorum >= 2 an INSERT is acknowledged only when that many
//     replicas hold its part (quorum_waits(); fetches complete it) or fails
//     with 319 when the test calls time_out_quorum(i): the part stays where
//     it is and later fetches still complete its quorum (18.16, measured).
//     More replicas asked than exist: 285. insert_quorum_parallel = 0: one
//     quorum INSERT at a time per table, across replicas (286 while one is
//     pending); = 1 (ClickHouse's default since 20.12, here too unless
//     set_insert_quorum_parallel_default(false), e.g. a users.xml profile):
//     in parallel, and such parts never become quorum/last_part.
//   * select_sequential_consistency = 1 (every read of the statement,
//     subqueries too): 289 on a replica that lacks the last part whose
//     non-parallel quorum was reached; blocks after a pending quorum part,
//     and after the last quorum part, are not read (getMaxAddedBlocks).
//   * ALTER TABLE … DELETE on a replicated table: a mutation in the shared
//     log covering the blocks written so far, applied by each replica when
//     its task runs (fetched blocks are mutated as that replica's log says).
//     DELETE FROM: the same, applied on the receiving replica at once (as
//     lightweight_deletes_sync = 1; ClickHouse's default 2 also waits for
//     the other replicas, which only makes this model more adversarial).
//   * system.clusters (cluster, shard_num, replica_num, host_name, is_local);
//     system.settings (name, value): insert_quorum_parallel only.
// Not modelled: replicas that die or ZooKeeper outages (242, 999, session
// expiry), real time (insert_quorum_timeout), merges coordinated across
// replicas (merge() merges each replica's own parts), 18.16's refusal to
// mutate the newest quorum part, partitions, a quorum INSERT's rollback, and
// the fetch source (a fetch copies the block as first written, where
// ClickHouse may copy a diverged duplicate from another replica).
//
// Delivery. In automatic mode (the default) a statement is executed when
// async_execute is called and its completion is posted to the handler's
// associated executor (default: the transport's executor). In manual mode
// (set_manual_delivery(true)) each statement waits in pending() until the
// test calls step(i): the test decides the order in which several clients'
// statements reach the server. In manual mode drive the io_context yourself
// (manual_clock::run would wait for a reply nobody delivers). Cancellation
// is not supported: a statement, once sent, runs to its end.
//
// Two-phase inserts (set_two_phase_inserts(true); off by default). On a
// server an INSERT … SELECT is not atomic: its SELECT (scalar subqueries
// included) is evaluated, then its block is written, deduplicated and
// committed, and other INSERTs can commit in between (ClickHouse's
// InterpreterInsertQuery and MergeTreeSink; detail/execute.hpp,
// staged_block, cites them). With the option on, in manual delivery, the
// first step(i) of an INSERT … SELECT evaluates its SELECT against the data
// as it is then and keeps the rows; the request stays in pending() at its
// place, marked `commit`, and its next step(i) commits the block —
// deduplication by insert_deduplication_token (or content) decided then —
// and replies. An INSERT … SELECT whose SELECT yields no row (WHERE false)
// has no block to commit and replies at once; INSERT … VALUES and
// FORMAT data read nothing and stay one step. Automatic delivery and
// execute() do both steps at once.
//
// Threads: every member is safe to call from any thread; sinks are called
// on the thread that executes the statement (the caller of async_execute or
// of step()), outside the server's lock.
//
// The parts, in chstate/testing/detail/ (namespace chstate::detail::sim):
// cell (values), dialect (what a version understands), lexer, ast,
// expr_parser and parser (text to a statement's description), eval
// (expressions and functions), table and storage (parts, FINAL, merges,
// TTL, mutations, deduplication), replication (cluster mode), state (what
// the server holds), system_tables, select and execute (running a
// statement), formats (the bytes of replies and INSERT data), delivery
// (clients, delivery, quorum waits, background tasks).
#pragma once

#include <chstate/testing/detail/delivery.hpp>

#include <chstate/error.hpp>
#include <chstate/manual_clock.hpp>
#include <chstate/transport.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chstate {

/// The shared in-memory server. Create with create() or create_cluster();
/// connect clients with simulated_transport. See the header comment.
class simulated_clickhouse : public std::enable_shared_from_this<simulated_clickhouse> {
public:
    /// A statement waiting for step() (manual delivery): client, sql,
    /// replica, and `commit` for an INSERT … SELECT whose SELECT has run
    /// (two-phase inserts).
    using pending_request = detail::sim::pending_request;
    /// Cluster mode: a background step of one replica's replication queue:
    /// kind (fetch or mutate), replica, table, block (fetch), mutation (its
    /// index in the table's log).
    using replication_task = detail::sim::replication_task;
    /// Cluster mode: a quorum INSERT executed on `replica`, waiting until
    /// insert_quorum replicas hold its block; `expired` once
    /// insert_quorum_timeout has passed on the server's clock.
    using quorum_wait = detail::sim::quorum_wait;

    /// `server_clock` gives now()/now64() and judges TTL; pass a (skewed)
    /// handle on the clients' timeline to share simulated time.
    static std::shared_ptr<simulated_clickhouse> create(manual_clock server_clock = manual_clock(),
                                                        bool manual_delivery = false) {
        return std::shared_ptr<simulated_clickhouse>(new simulated_clickhouse(std::move(server_clock), manual_delivery));
    }

    /// One shard of `replicas` replicas of cluster `cluster` (see the header
    /// comment, "Cluster mode"). Bind each simulated_transport to a replica.
    static std::shared_ptr<simulated_clickhouse> create_cluster(std::size_t replicas,
                                                                manual_clock server_clock = manual_clock(),
                                                                bool manual_delivery = false,
                                                                std::string cluster = "sim_cluster") {
        if (replicas == 0 || cluster.empty())
            throw std::invalid_argument("simulated_clickhouse::create_cluster: no replicas or no cluster name");
        auto s = create(std::move(server_clock), manual_delivery);
        s->impl_.with_state([&](auto& st) {
            st.cluster = std::move(cluster);
            st.replica_tables.resize(replicas);
        });
        return s;
    }

    // ---- the server ---------------------------------------------------------------

    /// The version SELECT version() reports, and so the dialect the server
    /// speaks (see the header comment, "Versions"): "18.16.1" for ClickHouse
    /// 18.16's. Before the first database or table is created (after it:
    /// std::logic_error); a version the simulator does not model:
    /// std::invalid_argument.
    void set_version(std::string v) {
        auto d = detail::sim::dialect::of_version(v);
        impl_.with_state([&](auto& s) {
            bool used = s.databases.size() > 2;
            for (const auto& tables : s.replica_tables)
                used = used || !tables.empty();
            if (used)
                throw std::logic_error("simulated_clickhouse::set_version: call it before the first statement");
            s.version = std::move(v);
            s.sql_dialect = d;
        });
    }

    manual_clock server_clock() const {
        return impl_.with_state([](const auto& s) { return s.clock; });
    }
    /// Replaces the server's clock, e.g. with a skewed handle on the same
    /// timeline: the server's clock stepping back (or forward) as NTP does.
    void set_server_clock(manual_clock c) {
        impl_.with_state([&](auto& s) { s.clock = std::move(c); });
    }

    /// Records `token` in `table`'s deduplication log without inserting a
    /// block: a server that recorded the id and then failed to commit the
    /// part (ClickHouse's MergeTreeSink records before it commits). Later
    /// INSERTs with that token are dropped while reporting success.
    void record_deduplication_token(const std::string& table_name, std::string token) {
        impl_.with_state([&](auto& s) {
            auto& t = lookup(s, table_name);
            if (t.replicated) // in ZooKeeper: no block behind it
                detail::sim::record_block_id(s, t, token);
            else
                t.remember_block(detail::sim::block_id(token, {}));
        });
    }

    // ---- delivery -----------------------------------------------------------------

    void set_manual_delivery(bool on) { impl_.set_manual(on); }
    bool manual_delivery() const { return impl_.manual(); }
    /// INSERT … SELECT in two steps under manual delivery (see the header
    /// comment, "Two-phase inserts"). Blocks already staged still commit
    /// when stepped after the option is turned off.
    void set_two_phase_inserts(bool on) { impl_.set_two_phase(on); }
    bool two_phase_inserts() const { return impl_.two_phase(); }
    /// Statements sent and not yet delivered, in sending order.
    std::vector<pending_request> pending() const { return impl_.pending(); }
    std::size_t pending_count() const { return impl_.pending_count(); }
    /// Delivers pending request `index`: executes it now, streams the reply
    /// to its sink and posts its completion — or, with two-phase inserts,
    /// runs an INSERT … SELECT's SELECT (it stays pending, marked `commit`)
    /// or commits its block.
    void step(std::size_t index) { impl_.step(index); }

    /// Executes `stmt` synchronously, bypassing delivery; the whole reply in `reply`.
    /// Cluster mode: on `replica`; a quorum INSERT replicates everything at
    /// once (replicate_all()) to reach its quorum.
    error_code execute(const statement& stmt, std::string& reply, diagnostics& diag, std::size_t replica = 0) {
        return impl_.execute(stmt, reply, diag, replica);
    }

    /// Used by simulated_transport.
    template <class Handler>
    void submit(std::size_t client, const statement& stmt, result_sink sink, diagnostics& diag, Handler handler,
                asio::any_io_executor default_ex, std::size_t replica = 0) {
        auto hex = asio::get_associated_executor(handler, default_ex);
        auto shared = std::make_shared<Handler>(std::move(handler));
        impl_.submit({client, replica, stmt, std::move(sink), &diag, [shared, hex](error_code ec) {
                          asio::post(hex, [shared, ec]() mutable { std::move(*shared)(ec); });
                      },
                      {}});
    }

    // ---- background work ------------------------------------------------------------

    /// Merges every part of `table_name` (`db.t`, quotes optional) into one,
    /// collapsing by sorting key and dropping TTL-expired rows. Returns the
    /// number of rows removed. Does nothing after SYSTEM STOP MERGES.
    /// Cluster mode: on every replica, each merging the parts it holds.
    std::size_t merge(std::string_view table_name) {
        return impl_.with_state([&](auto& s) {
            lookup(s, table_name); // unknown: throws
            std::size_t n = 0;
            for (auto& tables : s.replica_tables)
                if (auto it = tables.find(s.normalize(table_name)); it != tables.end())
                    n += detail::sim::merge(it->second, s.now_ms());
            return n;
        });
    }
    /// merge() on every table.
    std::size_t merge_all() {
        return impl_.with_state([&](auto& s) {
            std::size_t n = 0;
            for (auto& tables : s.replica_tables)
                for (auto& [_, t] : tables)
                    n += detail::sim::merge(t, s.now_ms());
            return n;
        });
    }

    /// Applies every queued ALTER … DELETE (cluster mode: on every replica,
    /// the replicated ones too); returns rows removed.
    std::size_t apply_mutations() { return impl_.apply_mutations(); }
    /// true: mutations wait for apply_mutations() alone; false (the
    /// default): they also finish once a read of system.mutations has seen
    /// them unfinished (see the header comment).
    void hold_mutations(bool held) {
        impl_.with_state([&](auto& s) { s.mutations_held = held; });
    }
    /// Mutations not yet applied (queued ones, and replicated mutation tasks).
    std::size_t pending_mutations() const {
        return impl_.with_state([](const auto& s) {
            std::size_t n = 0;
            for (const auto& tables : s.replica_tables)
                for (const auto& [_, t] : tables)
                    n += t.mutations.size();
            for (const auto& t : s.tasks)
                n += t.kind == replication_task::mutate;
            return n;
        });
    }

    /// Unmerged parts of a table (0 for an unknown table), on `replica`.
    std::size_t part_count(std::string_view table_name, std::size_t replica = 0) const {
        return impl_.with_state([&](const auto& s) {
            const auto& tables = s.replica_tables.at(replica);
            auto it = tables.find(s.normalize(table_name));
            return it == tables.end() ? std::size_t(0) : it->second.parts.size();
        });
    }
    /// Rows in a table, unmerged (as SELECT count() without FINAL), on `replica`.
    std::size_t row_count(std::string_view table_name, std::size_t replica = 0) const {
        return impl_.with_state([&](const auto& s) {
            const auto& tables = s.replica_tables.at(replica);
            auto it = tables.find(s.normalize(table_name));
            std::size_t n = 0;
            if (it != tables.end())
                for (const auto& p : it->second.parts)
                    n += p.rows.size();
            return n;
        });
    }

    // ---- cluster mode ---------------------------------------------------------------

    std::size_t replicas() const {
        return impl_.with_state([](const auto& s) { return s.replica_tables.size(); });
    }
    /// insert_quorum_parallel when a statement does not set it. The setting
    /// came with 20.10 (ClickHouse PR 15601); its default is 1 since 20.12
    /// (PR 17567: "if you rely on sequential consistency, set it back to
    /// zero"): quorum INSERTs run in parallel, are not linearized and never
    /// become quorum/last_part, so select_sequential_consistency does not
    /// cover them. A users.xml profile may set 0: 18.16's only behaviour.
    void set_insert_quorum_parallel_default(bool on) {
        impl_.with_state([&](auto& s) { s.quorum_parallel_default = on; });
    }

    /// Fetches and mutations not yet run, oldest first.
    std::vector<replication_task> pending_replication() const { return impl_.pending_replication(); }
    std::size_t pending_replication_count() const { return impl_.pending_replication_count(); }
    /// Runs pending replication task `index` (a lagging replica is one whose
    /// tasks the test holds back). A fetch that completes a quorum
    /// acknowledges the INSERT waiting for it.
    void replicate(std::size_t index) { impl_.replicate(index); }
    /// Runs every pending replication task (and those they cause).
    void replicate_all() { impl_.replicate_all(); }

    std::vector<quorum_wait> quorum_waits() const { return impl_.quorum_waits(); }
    /// The quorum INSERT `index` gives up waiting (insert_quorum_timeout
    /// passed, or whenever the test says: see quorum_wait::expired): it
    /// fails with 319, its part stays on the replicas that have it, and the
    /// quorum is still completed by later fetches (18.16,
    /// docs/cluster-rig-findings.md).
    void time_out_quorum(std::size_t index) { impl_.time_out_quorum(index); }

private:
    simulated_clickhouse(manual_clock c, bool manual) : impl_(std::move(c), manual) {}

    /// The table named `name` on replica 0; an unknown one is a chstate::error.
    static detail::sim::table& lookup(detail::sim::server_state& s, std::string_view name) {
        try {
            return s.lookup(name);
        } catch (const detail::sim::sim_error& e) {
            throw error(make_clickhouse_error(e.code), e.message);
        }
    }

    detail::sim::server impl_;
};

/// A client connection to a simulated_clickhouse; cheap to copy. `client`
/// identifies it in simulated_clickhouse::pending(). Values of {name:Type}
/// placeholders go to the server as they are: the store writes them into
/// the SQL text itself for a server without query parameters (18.16).
class simulated_transport {
public:
    /// `replica`: in cluster mode (simulated_clickhouse::create_cluster) the
    /// replica this client is connected to.
    simulated_transport(std::shared_ptr<simulated_clickhouse> server, asio::any_io_executor ex, std::size_t client = 0,
                        std::size_t replica = 0)
        : server_(std::move(server)), ex_(std::move(ex)), client_(client), replica_(replica) {}

    asio::any_io_executor get_executor() const { return ex_; }
    const std::shared_ptr<simulated_clickhouse>& server() const noexcept { return server_; }
    std::size_t client() const noexcept { return client_; }
    std::size_t replica() const noexcept { return replica_; }

    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [server = server_, ex = ex_, client = client_, replica = replica_](auto handler, const statement* stmt,
                                                                               result_sink sink, diagnostics* diag) {
                server->submit(client, *stmt, std::move(sink), *diag, std::move(handler), ex, replica);
            },
            token, &stmt, std::move(sink), &diag);
    }

private:
    std::shared_ptr<simulated_clickhouse> server_;
    asio::any_io_executor ex_;
    std::size_t client_ = 0;
    std::size_t replica_ = 0;
};

static_assert(transport<simulated_transport>);

} // namespace chstate
