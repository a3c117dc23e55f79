// chstate/detail/statements.hpp — every statement the store sends, per
// server dialect (dialect.hpp), each with a name a test can expect.
//
// With write_versions::clock on a modern server every statement is the
// seed's, so a Meltano process shares the tables. The default
// (monotonic) changes one: the state INSERT becomes an INSERT … SELECT
// whose version the server computes (versions.hpp).
//
// Values appear only as {name:Type} placeholders (bound, or quoted by the
// one quoting function in sql.hpp). Deletes are the exception that proves
// it: they carry no value at all (mutation_id_test).
#pragma once

#include <chstate/detail/dialect.hpp>
#include <chstate/detail/glob.hpp>
#include <chstate/detail/sha256.hpp>
#include <chstate/detail/sql.hpp>
#include <chstate/detail/versions.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail {

/// The two kinds of grant-table event (lock_mode::strict).
enum class grant_event { grant, release };

inline const char* kind_text(grant_event e) { return e == grant_event::grant ? "grant" : "release"; }

class statements {
public:
    /// `monotonic`: write_versions::monotonic was asked for (config.hpp).
    statements(table_names names, server_features features, bool monotonic = true, replication r = {})
        : t_(std::move(names)), f_(features), v_(choose_version_source(f_, monotonic)), r_(std::move(r)) {}

    const server_features& features() const noexcept { return f_; }
    const table_names& tables() const noexcept { return t_; }
    /// Cluster mode: the settings every statement is sent with (empty on one server).
    const replication& replicated() const noexcept { return r_; }
    version_source versions() const noexcept { return v_; }
    /// True when each write's version is greatest(now, the id's newest + 1 ms).
    bool monotonic_versions() const noexcept {
        return v_ == version_source::server_monotonic || v_ == version_source::client_monotonic;
    }
    /// True when the store supplies updated_at (ms) with every write.
    bool store_versions() const noexcept { return store_supplies_versions(v_); }
    /// True when deletes are mutations the store must wait for.
    bool deletes_are_mutations() const noexcept { return !f_.lightweight_delete; }

    // --- the server and the schema -------------------------------------------

    static statement select_version() {
        return {.sql = "SELECT version()", .format = "TabSeparated", .idempotent = true, .name = "server.version"};
    }

    /// Cluster mode: `n`, the replicas of the connected replica's shard in
    /// `cluster` (0: unknown cluster), and `p`, 1 when the server has
    /// insert_quorum_parallel (≥ 20.10; a sequentially consistent read
    /// holds only when quorum inserts do not run side by side).
    static statement count_shard_replicas(std::string_view cluster) {
        return {.sql = "SELECT (SELECT count() FROM system.clusters WHERE cluster = {cluster:String} AND shard_num = "
                       "(SELECT any(shard_num) FROM system.clusters WHERE cluster = {cluster:String} AND is_local)) "
                       "AS n, (SELECT count() FROM system.settings WHERE name = 'insert_quorum_parallel') AS p",
                .parameters = {string_param("cluster", std::string(cluster))},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "cluster.count_replicas"};
    }

    /// The grant table's engine as the server shows it (strict lock: its
    /// deduplication is checked, schema.hpp).
    statement select_grant_engine() const {
        return {.sql = "SELECT engine, engine_full FROM system.tables WHERE database = {database:String} AND "
                       "name = {table:String}",
                .parameters = {string_param("database", t_.schema_name), string_param("table", t_.grant_name)},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "schema.grant_engine"};
    }

    /// A MergeTree setting's server-wide value (what a table that does not
    /// state it has).
    static statement select_merge_tree_setting(std::string_view name) {
        return {.sql = "SELECT value FROM system.merge_tree_settings WHERE name = {name:String}",
                .parameters = {string_param("name", std::string(name))},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "schema.merge_tree_setting"};
    }

    /// Cluster mode: how many of `names` (unquoted) the connected replica has.
    statement count_existing_tables(const std::vector<std::string>& names) const {
        return {.sql = "SELECT count() AS n FROM system.tables WHERE database = {database:String} AND name IN "
                       "(SELECT arrayJoin({names:Array(String)}))",
                .parameters = {string_param("database", t_.schema_name), {"names", "Array(String)", string_array(names)}},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "schema.count_tables"};
    }

    statement create_database() const {
        return ddl("CREATE DATABASE IF NOT EXISTS " + t_.database + on_cluster(), "schema.create_database");
    }

    statement create_state_table() const {
        return ddl("CREATE TABLE IF NOT EXISTS " + t_.state + on_cluster() +
                       " (state_id String, partial_state Nullable(String), completed_state Nullable(String)," +
                       (f_.datetime64 ? " updated_at DateTime64(3) DEFAULT now64(3))"
                                      : " updated_at UInt64 DEFAULT toUInt64(toUnixTimestamp(now())) * 1000)") +
                       " ENGINE = " + engine("ReplacingMergeTree", t_.state_name, "updated_at") + " ORDER BY state_id",
                   "schema.create_state_table");
    }

    /// Servers without lightweight DELETE cannot share tables with the seed
    /// anyway (it needs DateTime64 and DELETE FROM), nor can a cluster's
    /// replicated tables: there the sorting key also holds lock_id, so a
    /// background merge never collapses rival candidate rows into one (a
    /// seed weakness).
    statement create_lock_table() const {
        const bool keyed_by_lock_id = !f_.lightweight_delete || r_.enabled();
        return ddl("CREATE TABLE IF NOT EXISTS " + t_.lock + on_cluster() +
                       " (state_id String, lock_id String, locked_at DateTime DEFAULT now())"
                       " ENGINE = " + engine("ReplacingMergeTree", t_.lock_name, "locked_at") + " ORDER BY " +
                       (keyed_by_lock_id ? "(state_id, lock_id)" : "state_id") +
                       (f_.ttl ? " TTL locked_at + INTERVAL 300 SECOND" : ""),
                   "schema.create_lock_table");
    }

    /// The grant table's deduplication window, as chstate creates it.
    static constexpr std::uint64_t grant_deduplication_window = 10000;
    /// The MergeTree setting that holds it here (replicated in cluster mode).
    std::string grant_window_setting() const {
        return r_.enabled() ? "replicated_deduplication_window" : "non_replicated_deduplication_window";
    }

    /// One row per event, never collapsed (plain MergeTree); every INSERT
    /// carries an insert_deduplication_token naming its event, so of rival
    /// grants of one (state_id, token) exactly one row is kept: the
    /// deduplication log is checked and updated atomically with the part's
    /// commit (docs/lock.md). Replicated: ZooKeeper (Keeper) decides
    /// block ids for rivals on any replica.
    statement create_grant_table() const {
        return ddl("CREATE TABLE IF NOT EXISTS " + t_.grant + on_cluster() +
                       " (state_id String, token UInt64, lock_id String, kind String, expires_ms UInt64)"
                       " ENGINE = " + engine("MergeTree", t_.grant_name, "") + " ORDER BY (state_id, token, kind)" +
                       " SETTINGS " + grant_window_setting() + " = " + std::to_string(grant_deduplication_window),
                   "schema.create_grant_table");
    }

    // --- the state table -------------------------------------------------------

    /// Replies that carry ids or state text are RowBinary (row_binary.hpp):
    /// every stored byte comes back as it is.
    /// `with_version`: a third column, the row's version in milliseconds
    /// (version_milliseconds): update() reads it under its lock and binds
    /// it into its write (insert_state's `newest_ms`).
    /// PREWHERE, not WHERE: with FINAL, ClickHouse does not move the id test
    /// to PREWHERE by itself, so it would read both state columns of every
    /// row in the id's granules (8192 rows: on a table of 4,000 2 KB states
    /// 18.16 took 40.6 ms a get against 5.2 ms with PREWHERE; chDB 26.5
    /// 3.6 ms either way — docs/settings.md). The test is on the
    /// sorting key, so it drops whole groups of versions before FINAL
    /// collapses them: the same row as WHERE, on 18.16 and on 26.x.
    statement select_state(std::string_view id, bool with_version = false) const {
        return {.sql = "SELECT partial_state, completed_state" +
                       (with_version ? ", " + version_milliseconds(f_.datetime64) : std::string()) + " FROM " +
                       t_.state + " FINAL PREWHERE state_id = {state_id:String} LIMIT 1",
                .parameters = {string_param("state_id", std::string(id))},
                .format = "RowBinary",
                .idempotent = true,
                .name = with_version ? "state.select_with_version" : "state.select"};
    }

    /// Parts are JSON text, or nullopt for NULL (an empty part). `client_ms`:
    /// the store's milliseconds, used where it supplies versions. `fence`: a
    /// strict lease's lock_id; the row is then written only while that
    /// lease holds the id's newest grant (the check runs on the server
    /// inside the INSERT). `newest_ms`: the id's newest version (0: none)
    /// as the operation read it under its lock — a monotonic version then
    /// starts from it instead of reading it again (versions.hpp). Shapes:
    /// the seed's INSERT … VALUES when neither a computed version nor a
    /// fence is needed, else INSERT … SELECT.
    statement insert_state(std::string_view id, std::optional<std::string> partial,
                           std::optional<std::string> completed, std::uint64_t client_ms = 0,
                           std::optional<std::string> fence = std::nullopt,
                           std::optional<std::uint64_t> newest_ms = std::nullopt) const {
        statement st{.parameters = {string_param("state_id", std::string(id)),
                                    {"partial_state", "Nullable(String)", std::move(partial)},
                                    {"completed_state", "Nullable(String)", std::move(completed)}},
                     .idempotent = false,
                     .name = fence ? "state.insert_fenced" : "state.insert"};
        const bool newest_known = newest_ms && monotonic_versions();
        const std::string version = version_expression(v_, t_.state, newest_known);
        if (store_versions())
            st.parameters.push_back(uint_param("updated_at", client_ms));
        if (newest_known)
            st.parameters.push_back(uint_param("newest_ms", *newest_ms));
        st.sql = "INSERT INTO " + t_.state + " (state_id, partial_state, completed_state" +
                 (version.empty() ? ")" : ", updated_at)");
        const std::string values =
            "{state_id:String}, {partial_state:Nullable(String)}, {completed_state:Nullable(String)}" +
            (version.empty() ? std::string() : ", " + version);
        if (!monotonic_versions() && !fence) {
            st.sql += " VALUES (" + values + ")";
            return st;
        }
        st.sql += " SELECT " + values;
        if (fence) {
            st.sql += " WHERE" + fence_condition("state_id = {state_id:String}", "{lock_id:String}");
            st.parameters.push_back(string_param("lock_id", std::move(*fence)));
        }
        return st;
    }

    /// set_all's version read (versions.hpp, batch_versions): per id of the
    /// batch that has a stored row, the id, its newest version and now, both
    /// in milliseconds whatever the column's precision (now is the server's
    /// where it has DateTime64, else `client_ms`). `IN (SELECT arrayJoin(…))`,
    /// not has(): IN builds one hash set and uses the primary key, where
    /// has() scans the whole array per row (10,000 ids on 18.16: 18 ms
    /// against 300 ms).
    statement select_newest_versions(const std::vector<std::string>& ids, std::uint64_t client_ms) const {
        statement st{.sql = "SELECT state_id, " + version_milliseconds(f_.datetime64) + ", " +
                            std::string(f_.datetime64 ? "toUInt64(toUnixTimestamp64Milli(now64(3)))"
                                                      : "{now:UInt64}") +
                            " AS now FROM " + t_.state +
                            " FINAL WHERE state_id IN (SELECT arrayJoin({ids:Array(String)}))",
                     .parameters = {{"ids", "Array(String)", string_array(ids)}},
                     .format = "RowBinary",
                     .idempotent = true,
                     .name = "state.newest_versions"};
        if (!f_.datetime64)
            st.parameters.push_back(uint_param("now", client_ms));
        return st;
    }

    /// Bulk insert; `rows` is TabSeparated text (append_tsv_field): data in
    /// the request, never in SQL text. `with_versions`: each row carries
    /// updated_at (versions.hpp, version_text).
    statement insert_states(std::string rows, bool with_versions) const {
        return {.sql = "INSERT INTO " + t_.state + " (state_id, partial_state, completed_state" +
                       (with_versions ? ", updated_at" : "") + ") FORMAT TabSeparated",
                .data = std::move(rows),
                .idempotent = false,
                .name = "state.insert_batch"};
    }

    /// `fence`: as insert_state's.
    statement delete_state(std::string_view id, std::optional<std::string> fence = std::nullopt) const {
        std::string sql = delete_from(t_.state) + " WHERE " + mutation_id_test(id);
        if (fence)
            sql += " AND" + fence_condition(mutation_id_test(id), quote_string(*fence));
        return {.sql = std::move(sql), .idempotent = true, .name = fence ? "state.delete_fenced" : "state.delete"};
    }

    statement count_states() const {
        return {.sql = "SELECT count() AS n FROM " + t_.state + " FINAL" + (r_.enabled() ? " WHERE state_id != ''" : ""),
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "state.count"};
    }

    statement truncate_states() const {
        return {.sql = "TRUNCATE TABLE " + t_.state, .idempotent = true, .name = "state.truncate"};
    }

    /// Cluster mode's clear_all: TRUNCATE would drop the part ZooKeeper
    /// names as the quorum's last one, after which every sequentially
    /// consistent read fails (289) until the next quorum INSERT, and on
    /// 18.16 it can hang behind a running mutation.
    statement delete_all_states() const {
        return {.sql = delete_from(t_.state) + " WHERE state_id != ''", .idempotent = true, .name = "state.delete_all"};
    }

    /// The ids a glob can match (glob.hpp): the one id a glob without
    /// wildcards names, else those starting with its literal prefix
    /// (startsWith compares bytes); the caller keeps what glob_match
    /// accepts. Never LIKE: it is a UTF-8 regular expression.
    statement select_state_ids(std::string_view glob) const {
        statement s{.sql = "SELECT DISTINCT state_id FROM " + t_.state + " FINAL",
                    .format = "RowBinary",
                    .idempotent = true,
                    .name = "state.ids"};
        if (glob_matches_all(glob)) {
            if (r_.enabled())
                s.sql += " WHERE state_id != ''"; // not the delete nudges (nudge_delete)
        } else if (!glob_has_wildcard(glob)) {
            s.sql += " WHERE state_id = {state_id:String}";
            s.parameters.push_back(string_param("state_id", std::string(glob)));
        } else if (auto prefix = glob_literal_prefix(glob); !prefix.empty()) {
            s.sql += " WHERE startsWith(state_id, {prefix:String})";
            s.parameters.push_back(string_param("prefix", std::string(prefix)));
        }
        s.sql += " ORDER BY state_id";
        return s;
    }

    /// Blocks of 1000 rows keep each streamed reply chunk small.
    statement select_all_states() const {
        return {.sql = "SELECT state_id, partial_state, completed_state FROM " + t_.state + " FINAL" +
                       (r_.enabled() ? " WHERE state_id != ''" : "") +
                       " ORDER BY state_id SETTINGS max_block_size = 1000",
                .format = "RowBinary",
                .idempotent = true,
                .name = "state.all",
                .streamed_reply = true};
    }

    // --- the lock table (seed_compatible) --------------------------------------

    /// The current holder: the smallest lock_id among the id's rows.
    statement select_lock_holder(std::string_view id) const {
        return {.sql = "SELECT lock_id FROM " + t_.lock +
                       " FINAL WHERE state_id = {state_id:String} ORDER BY lock_id LIMIT 1",
                .parameters = {string_param("state_id", std::string(id))},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "lock.holder"};
    }

    /// Every candidate row for the id, without FINAL (rivals not yet merged).
    statement select_lock_candidates(std::string_view id) const {
        return {.sql = "SELECT lock_id FROM " + t_.lock + " WHERE state_id = {state_id:String} ORDER BY lock_id",
                .parameters = {string_param("state_id", std::string(id))},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "lock.candidates"};
    }

    template <class TimePoint>
    statement insert_lock_candidate(std::string_view id, std::string_view lock_id, TimePoint at) const {
        return {.sql = "INSERT INTO " + t_.lock +
                       " (state_id, lock_id, locked_at) SELECT {state_id:String}, {lock_id:String},"
                       " toDateTime({locked_at:UInt32})",
                .parameters = {string_param("state_id", std::string(id)),
                               string_param("lock_id", std::string(lock_id)),
                               {"locked_at", "UInt32", epoch_seconds(at)}},
                .idempotent = false,
                .name = "lock.insert_candidate"};
    }

    statement delete_lock(std::string_view id, std::string_view lock_id) const {
        // lock_id is the store's own UUID text.
        return {.sql = delete_from(t_.lock) + " WHERE " + mutation_id_test(id) + " AND lock_id = " +
                       quote_string(lock_id),
                .idempotent = true,
                .name = "lock.delete"};
    }

    /// Old servers: are there stale lock rows at all (saves a mutation)?
    template <class TimePoint>
    statement count_stale_locks(TimePoint cutoff) const {
        return {.sql = "SELECT count() AS n FROM " + t_.lock + " WHERE locked_at < toDateTime({cutoff:UInt32})",
                .parameters = {{"cutoff", "UInt32", epoch_seconds(cutoff)}},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "lock.count_stale"};
    }

    template <class TimePoint>
    statement delete_stale_locks(TimePoint cutoff) const {
        return {.sql = delete_from(t_.lock) + " WHERE locked_at < toDateTime(" + epoch_seconds(cutoff) + ")",
                .idempotent = true,
                .name = "lock.delete_stale"};
    }

    // --- the grant table (lock_mode::strict) -----------------------------------

    /// The id's newest event: the highest token; for it a release row sorts
    /// first ('release' > 'grant'), else the grant row with the latest expiry.
    /// `now_ms`: the server's clock, which judges every expiry.
    statement select_grant_latest(std::string_view id) const {
        return {.sql = "SELECT token, lock_id, kind, expires_ms, " + server_now_ms() + " AS now_ms FROM " + t_.grant +
                       " WHERE state_id = {state_id:String} ORDER BY token DESC, kind DESC, expires_ms DESC LIMIT 1",
                .parameters = {string_param("state_id", std::string(id))},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "grant.latest"};
    }

    /// Every event of `token` and later: right after a claim, the grant
    /// row(s) of that token (one lock_id after a deduplicated race).
    statement select_grant_events_since(std::string_view id, std::uint64_t token) const {
        return {.sql = "SELECT token, lock_id, kind, expires_ms, " + server_now_ms() + " AS now_ms FROM " + t_.grant +
                       " WHERE state_id = {state_id:String} AND token >= {token:UInt64}",
                .parameters = {string_param("state_id", std::string(id)), uint_param("token", token)},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "grant.events_since"};
    }

    /// One grant-table event, unconditional. `dedup` names the event (a
    /// setting cannot be a bound parameter: it is written as a literal
    /// quoted by quote_string, safe for any id).
    statement insert_grant_event(std::string_view id, std::uint64_t token, std::string_view lock_id, grant_event kind,
                                 std::uint64_t expires_ms, std::string_view dedup) const {
        // (chDB runs VALUES as INSERT … SELECT: chdb_transport; the same settings)
        return {.sql = grant_insert_head(dedup) +
                       " VALUES ({state_id:String}, {token:UInt64}, {lock_id:String}, {kind:String}, "
                       "{expires_ms:UInt64})",
                .parameters = event_parameters(id, token, lock_id, kind, expires_ms),
                .idempotent = true /* resending is safe: the token deduplicates it */,
                .name = kind == grant_event::release ? "grant.release" : "grant.insert"};
    }

    /// A takeover: grant `token` to `lock_id` only while the id's newest
    /// token is `newest` and that token is free — released, or none of its
    /// grant rows expires at or after the server's now less `grace_ms`
    /// (`newest` = 0: no grant yet). The grant expires `ttl_ms` after the
    /// server's now: every expiry is written and judged on the server's
    /// clock, never a client's. The check runs inside the INSERT; of rivals
    /// that pass it together, deduplication on `dedup` keeps one row.
    statement claim_grant(std::string_view id, std::uint64_t token, std::string_view lock_id, std::uint64_t ttl_ms,
                          std::string_view dedup, std::uint64_t newest, std::uint64_t grace_ms) const {
        const std::string newest_token = std::to_string(newest);
        auto parameters = expiring_grant_parameters(id, token, lock_id, ttl_ms);
        parameters.push_back(uint_param("grace_ms", grace_ms));
        return {.sql = expiring_grant_select(dedup) + " WHERE (SELECT max(token) = " + newest_token +
                       " AND (countIf(token = " + newest_token + " AND kind = 'release') > 0 OR countIf(token = " +
                       newest_token + " AND kind = 'grant' AND expires_ms + {grace_ms:UInt64} >= " + server_now_ms() +
                       ") = 0) FROM " + t_.grant + " WHERE state_id = {state_id:String}) = 1",
                .parameters = std::move(parameters),
                .idempotent = true,
                .name = "grant.claim"};
    }

    /// A renewal: the holder `lock_id` of the id's newest grant takes the
    /// next token, `token`, itself, expiring `ttl_ms` after the server's
    /// now — the very slot a rival's takeover would claim (the same
    /// `dedup`), so a renewal and a takeover can never both land. Written
    /// only while the holder still holds (fence_condition).
    statement renew_grant(std::string_view id, std::uint64_t token, std::string_view lock_id, std::uint64_t ttl_ms,
                          std::string_view dedup) const {
        return {.sql = expiring_grant_select(dedup) + " WHERE" +
                       fence_condition("state_id = {state_id:String}", "{lock_id:String}"),
                .parameters = expiring_grant_parameters(id, token, lock_id, ttl_ms),
                .idempotent = true,
                .name = "grant.renew"};
    }

    /// Removes the id's events older than `token` (their holders are all
    /// superseded); the newest token's stay, so tokens keep increasing.
    statement prune_grants(std::string_view id, std::uint64_t token) const {
        return {.sql = delete_from(t_.grant) + " WHERE " + mutation_id_test(id) + " AND token < " +
                       std::to_string(token),
                .idempotent = true,
                .name = "grant.prune"};
    }

    // --- waiting for deletes ----------------------------------------------------

    /// Old servers: unfinished mutations on a table.
    statement pending_mutations(table_kind table) const {
        return {.sql = "SELECT count() AS n FROM system.mutations WHERE database = {database:String}"
                       " AND table = {table:String} AND is_done = 0",
                .parameters = {string_param("database", t_.schema_name), string_param("table", name_of(table))},
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "mutations.pending"};
    }

    /// Cluster mode: how many rows a DELETE built here (`del`) still leaves
    /// on the connected replica.
    static statement rows_left_by(const statement& del) {
        const auto where = del.sql.find(" WHERE ");
        std::string table = del.sql.substr(0, where);
        for (std::string_view head : {"ALTER TABLE ", "DELETE FROM "})
            if (table.starts_with(head))
                table.erase(0, head.size());
        if (table.ends_with(" DELETE"))
            table.resize(table.size() - std::string_view(" DELETE").size());
        return {.sql = "SELECT count() AS n FROM " + table + del.sql.substr(where),
                .format = "JSONEachRow",
                .idempotent = true,
                .name = "mutations.rows_left"};
    }

    /// Cluster mode, 18.x servers at least: the newest part written with
    /// insert_quorum is never mutated until a newer quorum part exists
    /// (docs/cluster-rig-findings.md), so a DELETE of rows in it would not
    /// finish. One row of its own — an empty state_id (no state has one;
    /// the readers skip it) and `nonce` (no two alike, or deduplication
    /// would drop it) — becomes that newest part.
    statement nudge_delete(table_kind table, std::string_view nonce) const {
        statement st{.parameters = {string_param("nonce", std::string(nonce))},
                     .idempotent = false,
                     .name = "mutations.nudge"};
        switch (table) {
        case table_kind::state:
            st.sql = "INSERT INTO " + t_.state +
                     " (state_id, partial_state, completed_state) SELECT '', {nonce:String}, NULL";
            break;
        case table_kind::lock:
            st.sql = "INSERT INTO " + t_.lock + " (state_id, lock_id) SELECT '', {nonce:String}";
            break;
        case table_kind::grant:
            st.sql = "INSERT INTO " + t_.grant +
                     " (state_id, token, lock_id, kind, expires_ms) SELECT '', 0, {nonce:String}, 'nudge', 0";
            break;
        }
        return st;
    }

    /// Cluster mode: `del`, a DELETE of lock rows, also removing the lock
    /// table's nudge rows written before `cutoff` (each has its own
    /// lock_id, so the sorting key keeps them all). Old nudges are never
    /// the newest quorum part, so the mutation can reach them; the caller
    /// counts only the rows `del` itself deletes.
    template <class TimePoint>
    statement with_lock_nudges_removed(statement del, TimePoint cutoff) const {
        const auto where = del.sql.find(" WHERE ");
        if (where == std::string::npos)
            return del;
        del.sql.insert(where + 7, "(");
        del.sql += ") OR (state_id = '' AND locked_at < toDateTime(" + epoch_seconds(cutoff) + "))";
        return del;
    }

private:
    static statement ddl(std::string sql, const char* name) {
        return {.sql = std::move(sql), .idempotent = true, .name = name};
    }

    const std::string& name_of(table_kind t) const {
        return t == table_kind::state ? t_.state_name : t == table_kind::lock ? t_.lock_name : t_.grant_name;
    }

    /// `INSERT INTO grant (…) SETTINGS …`, every grant event's start.
    /// Deduplication is what makes a grant atomic, so it is asked for, not
    /// assumed: `insert_deduplicate = 1` whatever the user's profile says,
    /// and where the server decides per INSERT … SELECT whether it can
    /// deduplicate, `force_enable` (it fails rather than write undeduplicated).
    std::string grant_insert_head(std::string_view dedup) const {
        return "INSERT INTO " + t_.grant + " (state_id, token, lock_id, kind, expires_ms) SETTINGS" +
               " insert_deduplication_token = " + quote_string(dedup) + ", insert_deduplicate = 1" +
               (f_.deduplicate_insert_select ? ", deduplicate_insert_select = 'force_enable'" : "");
    }

    /// A grant written by INSERT … SELECT (its WHERE the condition),
    /// expiring `{ttl_ms}` after the server's now.
    std::string expiring_grant_select(std::string_view dedup) const {
        return grant_insert_head(dedup) + " SELECT {state_id:String}, {token:UInt64}, {lock_id:String}, {kind:String}, " +
               server_now_ms() + " + {ttl_ms:UInt64}";
    }

    /// The server's clock in milliseconds: what every grant's expiry is
    /// written and judged on (strict mode needs 22.2, which has now64).
    static std::string server_now_ms() { return "toUInt64(toUnixTimestamp64Milli(now64(3)))"; }

    /// expiring_grant_select's values: a grant event's, `ttl_ms` in place of its expiry.
    static std::vector<parameter> expiring_grant_parameters(std::string_view id, std::uint64_t token,
                                                            std::string_view lock_id, std::uint64_t ttl_ms) {
        return {string_param("state_id", std::string(id)), uint_param("token", token),
                string_param("lock_id", std::string(lock_id)), string_param("kind", kind_text(grant_event::grant)),
                uint_param("ttl_ms", ttl_ms)};
    }

    static std::vector<parameter> event_parameters(std::string_view id, std::uint64_t token, std::string_view lock_id,
                                                   grant_event kind, std::uint64_t expires_ms) {
        return {string_param("state_id", std::string(id)), uint_param("token", token),
                string_param("lock_id", std::string(lock_id)), string_param("kind", kind_text(kind)),
                uint_param("expires_ms", expires_ms)};
    }

    /// Every DELETE is a mutation (a lightweight DELETE too). It may run
    /// after the request that created it is gone, so it must not read a
    /// value bound to that request (an external table: the mutation would
    /// fail and block every later one), and its text is kept and parsed
    /// again, so the id is not written into it either: the id is named by
    /// its SHA-256, numbers are literals. The text stays small for any id.
    static std::string mutation_id_test(std::string_view id) {
        return "SHA256(state_id) = unhex('" + sha256_hex(id) + "')";
    }

    /// True while the lease `holder` (an SQL expression: a placeholder or a
    /// quoted lock_id) holds the id's newest grant, has not released it, and
    /// the grant has not expired on the server's clock (a takeover waits a
    /// grace past that expiry, so a write and a takeover are never both
    /// allowed at one moment).
    /// Renewals move a lease to newer tokens, so the holder is named by
    /// lock_id, not by token. One read of the id's events (one scalar
    /// subquery of aggregates, not one per test: each subquery reads every
    /// part of the table again).
    /// No other lease's grant may sit at that token: deduplication keeps
    /// one grant per token, and should a second ever land (a table whose
    /// deduplication failed) neither holder passes — none writes, rather
    /// than two.
    std::string fence_condition(const std::string& id_test, const std::string& holder) const {
        const std::string held = "maxIf(token, kind = 'grant' AND lock_id = " + holder + ")";
        return " (SELECT max(token) = " + held + " AND " + held + " > 0 AND countIf(kind = 'release' AND lock_id = " +
               holder + ") = 0 AND maxIf(token, kind = 'grant' AND lock_id != " + holder + ") < " + held +
               " AND maxIf(expires_ms, kind = 'grant' AND lock_id = " + holder + ") >= " + server_now_ms() + " FROM " +
               t_.grant + " WHERE " + id_test + ") = 1";
    }

    /// " ON CLUSTER `name`" in cluster mode, else nothing.
    std::string on_cluster() const { return r_.enabled() ? " ON CLUSTER " + quote_identifier(r_.cluster) : std::string(); }

    /// `base`(version) on one server; Replicated`base`('path', 'replica'[,
    /// version]) in cluster mode, the path's {database} and {table}
    /// replaced by this table's names.
    std::string engine(std::string_view base, const std::string& table, std::string_view version) const {
        if (!r_.enabled())
            return std::string(base) + (version.empty() ? "" : "(" + std::string(version) + ")");
        std::string path = r_.zookeeper_path;
        for (auto [macro, value] : {std::pair{std::string_view("{database}"), t_.schema_name},
                                    std::pair{std::string_view("{table}"), table}})
            for (auto at = path.find(macro); at != std::string::npos; at = path.find(macro, at + value.size()))
                path.replace(at, macro.size(), value);
        return "Replicated" + std::string(base) + "(" + quote_string(path) + ", " + quote_string(r_.replica) +
               (version.empty() ? "" : ", " + std::string(version)) + ")";
    }

    std::string delete_from(const std::string& table) const {
        return f_.lightweight_delete ? "DELETE FROM " + table : "ALTER TABLE " + table + " DELETE";
    }

    table_names t_;
    server_features f_;
    version_source v_;
    replication r_;
};

} // namespace chstate::detail
