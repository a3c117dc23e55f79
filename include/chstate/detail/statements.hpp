// chstate/detail/statements.hpp — the store's statements, per server dialect.
//
// On a modern server (≥ 23.3, and chDB) the schema is the seed's: a Meltano
// process and a chstate process share the tables. With
// write_versions::clock every statement is the seed's too; the default,
// write_versions::monotonic, changes one: the state INSERT becomes an
// INSERT … SELECT whose updated_at is greatest(now64(3), the id's newest
// updated_at + 1 ms), so clock steps cannot let an older write win.
//
// Older servers (down to 18.16) get what they understand:
//   * no DateTime64/now64 (< 20.1): the version column is
//     `updated_at UInt64` holding milliseconds since the epoch, supplied by
//     the store from its clock — monotonic: greatest(that, the id's newest
//     + 1), so a writer whose clock lags still sorts after the write it
//     followed; clock: the clock's value alone. Its DEFAULT (whole seconds
//     × 1000) versions rows written by other clients without the column;
//   * DateTime64 without millisecond intervals (20.1–22.3): monotonic
//     falls back to clock;
//   * no {name:Type} parameters (< 20.1 here): the store inlines quoted
//     literals (inline_parameters);
//   * no lightweight DELETE (< 23.3): `ALTER TABLE … DELETE`, a background
//     mutation; the store then waits until system.mutations shows no
//     unfinished mutation on the table (pending_mutations), so a deleted
//     state or lock row is gone for the very next statement;
//   * no TTL (< 19.6): the lock table has none (stale rows are still
//     removed by the lock protocol).
#pragma once

#include <chstate/detail/sha256.hpp>
#include <chstate/detail/glob.hpp>
#include <chstate/detail/sql.hpp>
#include <chstate/transport.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail {

/// What the connected server understands; learnt once from `SELECT version()`.
struct server_features {
    int major = 0;
    int minor = 0;
    bool query_parameters = true;   ///< {name:Type} with escaped values (≥ 20.1)
    bool datetime64 = true;         ///< DateTime64 / now64 (≥ 20.1)
    bool lightweight_delete = true; ///< DELETE FROM (≥ 23.3)
    bool ttl = true;                ///< table TTL (≥ 19.6)
    /// insert_deduplication_token (≥ 22.2) with non_replicated_deduplication_window
    /// (≥ 21.5): the strict lock's atomic grant.
    bool dedup_token = true;
    /// INTERVAL n MILLISECOND on DateTime64 (≥ 22.4): monotonic versions.
    bool subsecond_intervals = true;

    static server_features from_version(std::string_view version) {
        server_features f;
        auto read = [&](int& out) {
            auto [p, ec] = std::from_chars(version.data(), version.data() + version.size(), out);
            version.remove_prefix(static_cast<std::size_t>(p - version.data()));
            if (!version.empty() && version.front() == '.')
                version.remove_prefix(1);
            return ec == std::errc{};
        };
        if (!read(f.major) || !read(f.minor))
            return f; // unknown text: assume a modern server
        auto at_least = [&](int maj, int min) { return f.major > maj || (f.major == maj && f.minor >= min); };
        f.query_parameters = at_least(20, 1);
        f.datetime64 = at_least(20, 1);
        f.lightweight_delete = at_least(23, 3);
        f.ttl = at_least(19, 6);
        f.dedup_token = at_least(22, 2);
        f.subsecond_intervals = at_least(22, 4);
        return f;
    }
};

/// Quoted names of the two tables.
struct table_names {
    std::string database; ///< `meltano`
    std::string state;    ///< `meltano`.`state`
    std::string lock;     ///< `meltano`.`state_lock`
    std::string schema_name; ///< meltano (unquoted)
    std::string state_name;  ///< state (unquoted)
    std::string lock_name;   ///< state_lock (unquoted)
    std::string grant;       ///< `meltano`.`state_grant` (strict lock)
    std::string grant_name;  ///< state_grant (unquoted)

    table_names(std::string_view schema, std::string_view table)
        : database(quote_identifier(schema)),
          state(database + "." + quote_identifier(table)),
          lock(database + "." + quote_identifier(std::string(table) + "_lock")),
          schema_name(schema),
          state_name(table),
          lock_name(std::string(table) + "_lock"),
          grant(database + "." + quote_identifier(std::string(table) + "_grant")),
          grant_name(std::string(table) + "_grant") {}
};

inline parameter string_param(std::string name, std::string value) {
    return {std::move(name), "String", std::move(value)};
}


/// Seconds since the epoch, as text for a UInt32 parameter.
template <class TimePoint>
std::string epoch_seconds(TimePoint t) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count());
}

/// Milliseconds since the epoch as "seconds.mmm": the text a DateTime64(3)
/// column reads as that exact instant on every version.
inline std::string milliseconds_as_datetime64(std::uint64_t ms) {
    std::string frac = std::to_string(ms % 1000);
    return std::to_string(ms / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
}

/// Cluster mode (config.hpp, cluster_options): where the replicated tables
/// live and what every statement is sent with. Empty `cluster`: one server.
struct replication {
    std::string cluster;        ///< remote_servers name (unquoted)
    std::string zookeeper_path; ///< with {database} and {table} still to replace
    std::string replica;        ///< the replica name ({replica})
    /// insert_quorum, insert_quorum_timeout, select_sequential_consistency:
    /// a write is acknowledged once `quorum` replicas hold it, and a read
    /// fails rather than answer from a replica that lacks a quorum write.
    std::vector<setting> settings;

    bool enabled() const noexcept { return !cluster.empty(); }
};

class statements {
public:
    /// `monotonic`: write_versions::monotonic was asked for (config.hpp);
    /// it holds where the server can compute it (monotonic_versions()).
    statements(table_names names, server_features features, bool monotonic = true, replication r = {})
        : t_(std::move(names)), f_(features), monotonic_(monotonic && (f_.subsecond_intervals || !f_.datetime64)),
          r_(std::move(r)) {}

    /// Cluster mode: the settings every statement is sent with (empty on one server).
    const replication& replicated() const noexcept { return r_; }

    /// Cluster mode: how many of the store's tables (`names`, unquoted)
    /// the connected replica already has. When all do, the store skips its
    /// ON CLUSTER DDL, which waits for every replica of the cluster (up to
    /// distributed_ddl_task_timeout, 180 s) — a store must still start
    /// while a replica is down.
    statement count_existing_tables(const std::vector<std::string>& names) const {
        std::string list = "[";
        for (std::size_t i = 0; i < names.size(); ++i)
            list += (i ? "," : "") + quote_string(names[i]);
        list += ']';
        return {"SELECT count() AS n FROM system.tables WHERE database = {database:String} AND name IN "
                "(SELECT arrayJoin({names:Array(String)}))",
                {string_param("database", t_.schema_name), {"names", "Array(String)", std::move(list)}}, "JSONEachRow",
                {}, true};
    }

    /// Cluster mode: `n`, how many replicas the connected replica's shard
    /// has in `cluster` (0: the server does not know the cluster), and `p`,
    /// 1 when the server has insert_quorum_parallel (≥ 20.10; quorum
    /// inserts may then run side by side, and a sequentially consistent
    /// read holds only when they do not).
    static statement count_shard_replicas(std::string_view cluster) {
        return {"SELECT (SELECT count() FROM system.clusters WHERE cluster = {cluster:String} AND shard_num = "
                "(SELECT any(shard_num) FROM system.clusters WHERE cluster = {cluster:String} AND is_local)) AS n, "
                "(SELECT count() FROM system.settings WHERE name = 'insert_quorum_parallel') AS p",
                {string_param("cluster", std::string(cluster))}, "JSONEachRow", {}, true};
    }

    const server_features& features() const noexcept { return f_; }

    /// True when each write's version is greatest(now, the id's newest + 1 ms).
    bool monotonic_versions() const noexcept { return monotonic_; }
    const table_names& tables() const noexcept { return t_; }

    static statement select_version() { return {"SELECT version()", {}, "TabSeparated", {}, true}; }

    statement create_database() const {
        return {"CREATE DATABASE IF NOT EXISTS " + t_.database + on_cluster(), {}, {}, {}, true};
    }

    statement create_state_table() const {
        return {"CREATE TABLE IF NOT EXISTS " + t_.state + on_cluster() +
                    " (state_id String, partial_state Nullable(String), completed_state Nullable(String),"
                    + (f_.datetime64 ? std::string(" updated_at DateTime64(3) DEFAULT now64(3))")
                                     : std::string(" updated_at UInt64 DEFAULT toUInt64(toUnixTimestamp(now())) * 1000)")) +
                    " ENGINE = " + engine("ReplacingMergeTree", t_.state_name, "updated_at") + " ORDER BY state_id",
                {}, {}, {}, true};
    }

    /// True when the store must supply updated_at (milliseconds since the
    /// epoch) with every write: servers without DateTime64.
    bool store_versions() const noexcept { return !f_.datetime64; }

    /// True when deletes are mutations the store must wait for.
    bool deletes_are_mutations() const noexcept { return !f_.lightweight_delete; }

    statement create_lock_table() const {
        std::string sql = "CREATE TABLE IF NOT EXISTS " + t_.lock + on_cluster() +
                          " (state_id String, lock_id String, locked_at DateTime DEFAULT now())"
                          " ENGINE = " + engine("ReplacingMergeTree", t_.lock_name, "locked_at") + " ORDER BY state_id";
        // Servers without lightweight DELETE cannot share tables with the
        // seed anyway (it needs DateTime64 and DELETE FROM), nor can a
        // cluster's replicated tables: there the sorting key also holds
        // lock_id, so a background merge never collapses rival candidate
        // rows into one (a seed weakness).
        if (!f_.lightweight_delete || r_.enabled())
            sql.replace(sql.size() - std::string_view("state_id").size(), std::string_view("state_id").size(),
                        "(state_id, lock_id)");
        if (f_.ttl)
            sql += " TTL locked_at + INTERVAL 300 SECOND";
        return {std::move(sql), {}, {}, {}, true};
    }

    /// Replies that carry ids or state text are RowBinary (row_binary.hpp):
    /// every stored byte comes back as it is.
    statement select_state(std::string_view id) const {
        return {"SELECT partial_state, completed_state FROM " + t_.state +
                    " FINAL WHERE state_id = {state_id:String} LIMIT 1",
                {string_param("state_id", std::string(id))}, "RowBinary", {}, true};
    }

    /// Parts are JSON text, or nullopt for NULL (an empty part).
    /// `client_ms`: the store's clock in milliseconds, used only where the
    /// server has no DateTime64 (store_versions()).
    /// `fence`: a strict lock's fencing token; the row is then written only
    /// if that token is still the id's newest grant and not released — the
    /// check runs on the server inside the INSERT (grant table, see below).
    ///
    /// Statement shapes (modern server):
    ///   clock, no fence:  the seed's INSERT … VALUES (updated_at by DEFAULT,
    ///                     or the store's milliseconds without DateTime64)
    ///   otherwise:        INSERT … SELECT values, [version] [WHERE fence]
    ///   version (monotonic): greatest(now64(3), (SELECT max(updated_at) …
    ///                        WHERE state_id = id) + INTERVAL 1 MILLISECOND)
    statement insert_state(std::string_view id, std::optional<std::string> partial,
                           std::optional<std::string> completed, std::uint64_t client_ms = 0,
                           std::optional<std::uint64_t> fence = std::nullopt) const {
        statement st{{}, {string_param("state_id", std::string(id)),
                          {"partial_state", "Nullable(String)", std::move(partial)},
                          {"completed_state", "Nullable(String)", std::move(completed)}},
                     {}, {}, false};
        std::string version; // the updated_at expression, empty = the column's DEFAULT
        if (monotonic_) {
            const std::string newest =
                "(SELECT max(updated_at) FROM " + t_.state + " WHERE state_id = {state_id:String})";
            version = f_.datetime64 ? "greatest(now64(3), " + newest + " + INTERVAL 1 MILLISECOND)"
                                    : "greatest({updated_at:UInt64}, " + newest + " + 1)";
        } else if (store_versions()) {
            version = "{updated_at:UInt64}";
        }
        if (store_versions())
            st.parameters.push_back({"updated_at", "UInt64", std::to_string(client_ms)});
        st.sql = "INSERT INTO " + t_.state + " (state_id, partial_state, completed_state" +
                 (version.empty() ? ")" : ", updated_at)");
        const std::string values = "{state_id:String}, {partial_state:Nullable(String)}, {completed_state:Nullable(String)}" +
                                   (version.empty() ? std::string() : ", " + version);
        if (!monotonic_ && !fence) {
            st.sql += " VALUES (" + values + ")";
            return st;
        }
        st.sql += " SELECT " + values;
        if (fence) {
            st.sql += " WHERE" + fence_condition("state_id = {state_id:String}", "{fence:UInt64}");
            st.parameters.push_back({"fence", "UInt64", std::to_string(*fence)});
        }
        return st;
    }

    /// set_all's versions (monotonic). Each row is written at
    /// greatest(now, its own id's newest updated_at + 1 ms) — the same rule
    /// as a single write, so a batch never dates a row above what its own
    /// id needs. Reply (RowBinary), one row per id of the batch that has a
    /// stored row: the id, its newest version and now, both in milliseconds
    /// (now is the server's where it has DateTime64, else `client_ms`).
    /// No row: no id of the batch is stored, and the rows take the column's
    /// DEFAULT. `IN (SELECT arrayJoin(…))`, not has(): IN builds one hash
    /// set and uses the primary key, while has() scans the whole array for
    /// every row (10,000 ids against 10,000 rows on 18.16: 18 ms against
    /// 300 ms).
    statement select_newest_versions(const std::vector<std::string>& ids, std::uint64_t client_ms) const {
        std::string list = "[";
        for (std::size_t i = 0; i < ids.size(); ++i) {
            if (i)
                list += ',';
            list += quote_string(ids[i]);
        }
        list += ']';
        // Milliseconds whatever the column's precision (a table made by
        // another tool may have DateTime64(6)).
        statement st{"SELECT state_id, " +
                         std::string(f_.datetime64 ? "toUInt64(toUnixTimestamp64Milli(updated_at))"
                                                   : "toUInt64(updated_at)") +
                         ", " +
                         std::string(f_.datetime64 ? "toUInt64(toUnixTimestamp64Milli(now64(3)))" : "{now:UInt64}") +
                         " AS now FROM " + t_.state +
                         " FINAL WHERE state_id IN (SELECT arrayJoin({ids:Array(String)}))",
                     {{"ids", "Array(String)", std::move(list)}}, "RowBinary", {}, true};
        if (!f_.datetime64)
            st.parameters.push_back({"now", "UInt64", std::to_string(client_ms)});
        return st;
    }

    /// Bulk insert; `rows` is TabSeparated text (tsv_field in sql.hpp):
    /// data in the request, never in SQL text, every byte escaped exactly.
    /// `with_versions`: each row carries updated_at (milliseconds where the
    /// column is UInt64, "seconds.mmm" for DateTime64(3)).
    statement insert_states(std::string rows, bool with_versions) const {
        return {"INSERT INTO " + t_.state + " (state_id, partial_state, completed_state" +
                    (with_versions ? ", updated_at" : "") + ") FORMAT TabSeparated",
                {}, {}, std::move(rows), false};
    }

    /// `fence`: as insert_state's — the row is deleted only while that grant
    /// is the id's newest and not released.
    statement delete_state(std::string_view id, std::optional<std::uint64_t> fence = std::nullopt) const {
        std::string sql = delete_from(t_.state) + " WHERE " + mutation_id_test(id);
        if (fence)
            sql += " AND" + fence_condition(mutation_id_test(id), std::to_string(*fence));
        return {std::move(sql), {}, {}, {}, true};
    }

    statement count_states() const {
        return {"SELECT count() AS n FROM " + t_.state + " FINAL" + (r_.enabled() ? " WHERE state_id != ''" : ""),
                {}, "JSONEachRow", {}, true};
    }

    statement truncate_states() const {
        return {"TRUNCATE TABLE " + t_.state, {}, {}, {}, true};
    }

    /// Cluster mode's clear_all: TRUNCATE would drop the part ZooKeeper
    /// names as the quorum's last one, after which every sequentially
    /// consistent read fails (289) until the next quorum INSERT, and on
    /// 18.16 it can hang behind a running mutation. A replicated DELETE of
    /// every state (not the nudge row) has neither problem.
    statement delete_all_states() const {
        return {delete_from(t_.state) + " WHERE state_id != ''", {}, {}, {}, true};
    }

    /// The ids a glob can match (detail/glob.hpp): the one id a glob
    /// without wildcards names, else those starting with its literal
    /// prefix (startsWith compares bytes); the caller keeps the rows
    /// glob_match accepts. Never LIKE: it is a UTF-8 regular expression.
    statement select_state_ids(std::string_view glob) const {
        statement s{"SELECT DISTINCT state_id FROM " + t_.state + " FINAL", {}, "RowBinary", {}, true};
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
        return {"SELECT state_id, partial_state, completed_state FROM " + t_.state + " FINAL" +
                    (r_.enabled() ? " WHERE state_id != ''" : "") + " ORDER BY state_id SETTINGS max_block_size = 1000",
                {}, "RowBinary", {}, true};
    }

    // --- lock table -------------------------------------------------------

    /// The current holder: the smallest lock_id among the id's rows.
    statement select_lock_holder(std::string_view id) const {
        return {"SELECT lock_id FROM " + t_.lock +
                    " FINAL WHERE state_id = {state_id:String} ORDER BY lock_id LIMIT 1",
                {string_param("state_id", std::string(id))}, "JSONEachRow", {}, true};
    }

    /// Every candidate row for the id, without FINAL (rivals not yet merged).
    statement select_lock_candidates(std::string_view id) const {
        return {"SELECT lock_id FROM " + t_.lock + " WHERE state_id = {state_id:String} ORDER BY lock_id",
                {string_param("state_id", std::string(id))}, "JSONEachRow", {}, true};
    }

    template <class TimePoint>
    statement delete_stale_locks(TimePoint cutoff) const {
        return {delete_from(t_.lock) + " WHERE locked_at < toDateTime(" + epoch_seconds(cutoff) + ")", {}, {}, {},
                true};
    }

    template <class TimePoint>
    statement insert_lock_candidate(std::string_view id, std::string_view lock_id, TimePoint at) const {
        return {"INSERT INTO " + t_.lock +
                    " (state_id, lock_id, locked_at) SELECT {state_id:String}, {lock_id:String},"
                    " toDateTime({locked_at:UInt32})",
                {string_param("state_id", std::string(id)), string_param("lock_id", std::string(lock_id)),
                 {"locked_at", "UInt32", epoch_seconds(at)}},
                {}, {}, false};
    }

    statement delete_lock(std::string_view id, std::string_view lock_id) const {
        // lock_id is the store's own UUID text.
        return {delete_from(t_.lock) + " WHERE " + mutation_id_test(id) + " AND lock_id = " + quote_string(lock_id),
                {}, {}, {}, true};
    }

    /// Old servers: are there stale lock rows at all (saves a mutation)?
    template <class TimePoint>
    statement count_stale_locks(TimePoint cutoff) const {
        return {"SELECT count() AS n FROM " + t_.lock + " WHERE locked_at < toDateTime({cutoff:UInt32})",
                {{"cutoff", "UInt32", epoch_seconds(cutoff)}}, "JSONEachRow", {}, true};
    }

    // --- grant table (lock_mode::strict) ------------------------------------
    //
    // One row per event, never collapsed (plain MergeTree):
    //   kind 'grant'   token t taken (or renewed) by lock_id until expires_ms;
    //   kind 'release' token t given back.
    // Every INSERT carries an insert_deduplication_token naming its event, so
    // of concurrent grants of the same (state_id, token) exactly one row is
    // kept: the server's deduplication log is checked and updated atomically
    // with the part's commit (clickhouse-facts.md, "Semantics").

    statement create_grant_table() const {
        // Replicated: ZooKeeper (Keeper) arbitrates block ids across
        // replicas, so rival grants on two replicas deduplicate alike.
        return {"CREATE TABLE IF NOT EXISTS " + t_.grant + on_cluster() +
                    " (state_id String, token UInt64, lock_id String, kind String, expires_ms UInt64)"
                    " ENGINE = " + engine("MergeTree", t_.grant_name, "") + " ORDER BY (state_id, token, kind)" +
                    (r_.enabled() ? " SETTINGS replicated_deduplication_window = 10000"
                                  : " SETTINGS non_replicated_deduplication_window = 10000"),
                {}, {}, {}, true};
    }

    /// The id's newest event: the highest token; for it a release row sorts
    /// first ('release' > 'grant'), else the grant row with the latest expiry.
    statement select_grant_latest(std::string_view id) const {
        return {"SELECT token, lock_id, kind, expires_ms FROM " + t_.grant +
                    " WHERE state_id = {state_id:String} ORDER BY token DESC, kind DESC, expires_ms DESC LIMIT 1",
                {string_param("state_id", std::string(id))}, "JSONEachRow", {}, true};
    }

    /// Every event of `token` and later tokens: right after a grant INSERT,
    /// the grant row(s) of that token (one lock_id after a deduplicated race).
    statement select_grant_events_since(std::string_view id, std::uint64_t token) const {
        return {"SELECT token, lock_id, kind FROM " + t_.grant +
                    " WHERE state_id = {state_id:String} AND token >= {token:UInt64}",
                {string_param("state_id", std::string(id)), {"token", "UInt64", std::to_string(token)}},
                "JSONEachRow", {}, true};
    }

    /// One grant-table event. `dedup` names the event; a setting's value
    /// cannot be a bound parameter, so it is written into the SQL text as a
    /// literal quoted by quote_string (sql.hpp) — the one quoting function —
    /// and is therefore safe for any state id.
    statement insert_grant_event(std::string_view id, std::uint64_t token, std::string_view lock_id,
                                 std::string_view kind, std::uint64_t expires_ms, std::string_view dedup) const {
        return {"INSERT INTO " + t_.grant + " (state_id, token, lock_id, kind, expires_ms) SETTINGS" +
                    " insert_deduplication_token = " + quote_string(dedup) +
                    " VALUES ({state_id:String}, {token:UInt64}, {lock_id:String}, {kind:String}, {expires_ms:UInt64})",
                {string_param("state_id", std::string(id)),
                 {"token", "UInt64", std::to_string(token)},
                 string_param("lock_id", std::string(lock_id)),
                 string_param("kind", std::string(kind)),
                 {"expires_ms", "UInt64", std::to_string(expires_ms)}},
                {}, {}, true /* resending is safe: the token deduplicates it */};
    }

    /// A conditional grant of `token` to `lock_id`: written only while the
    /// id's newest token is `newest` and that token is free at `now_ms` —
    /// released, or none of its grant rows expires at or after `now_ms`
    /// (`newest` = 0: the id has no grant yet). The check runs inside the
    /// INSERT, so a renewal or rival grant that committed before it is seen;
    /// of rivals that pass it together, deduplication keeps one row. The
    /// written-rows count (diagnostics::written_rows) then says who won:
    /// 1 for the grant that landed, 0 for a deduplicated or refused one.
    statement claim_grant(std::string_view id, std::uint64_t token, std::string_view lock_id,
                          std::uint64_t expires_ms, std::string_view dedup, std::uint64_t newest,
                          std::uint64_t now_ms) const {
        const std::string of_newest = " FROM " + t_.grant + " WHERE state_id = {state_id:String} AND token = " +
                                      std::to_string(newest);
        return {"INSERT INTO " + t_.grant + " (state_id, token, lock_id, kind, expires_ms) SETTINGS" +
                    " insert_deduplication_token = " + quote_string(dedup) +
                    " SELECT {state_id:String}, {token:UInt64}, {lock_id:String}, {kind:String}, {expires_ms:UInt64}"
                    " WHERE (SELECT max(token) FROM " + t_.grant + " WHERE state_id = {state_id:String}) = " +
                    std::to_string(newest) + " AND ((SELECT count()" + of_newest + " AND kind = 'release') > 0 OR" +
                    " (SELECT count()" + of_newest + " AND kind = 'grant' AND expires_ms >= " + std::to_string(now_ms) +
                    ") = 0)",
                {string_param("state_id", std::string(id)),
                 {"token", "UInt64", std::to_string(token)},
                 string_param("lock_id", std::string(lock_id)),
                 string_param("kind", "grant"),
                 {"expires_ms", "UInt64", std::to_string(expires_ms)}},
                {}, {}, true /* resending is safe: the token deduplicates it */};
    }

    /// Removes the id's grant events older than `token` (every holder of
    /// them has been superseded); the newest token's rows stay, so tokens
    /// keep increasing.
    statement prune_grants(std::string_view id, std::uint64_t token) const {
        return {delete_from(t_.grant) + " WHERE " + mutation_id_test(id) + " AND token < " + std::to_string(token), {},
                {}, {}, true};
    }

    /// Cluster mode: how many rows a DELETE (`del`, an ALTER … DELETE or
    /// DELETE FROM built here) still leaves on the connected replica.
    static statement rows_left_by(const statement& del) {
        const auto where = del.sql.find(" WHERE ");
        std::string table = del.sql.substr(0, where);
        for (std::string_view head : {"ALTER TABLE ", "DELETE FROM "})
            if (table.starts_with(head))
                table.erase(0, head.size());
        if (table.ends_with(" DELETE"))
            table.resize(table.size() - std::string_view(" DELETE").size());
        return {"SELECT count() AS n FROM " + table + del.sql.substr(where), {}, "JSONEachRow", {}, true};
    }

    /// Cluster mode, servers up to 18.x at least: the newest part written
    /// with insert_quorum is never mutated until a newer quorum part
    /// exists (docs/cluster-rig-findings.md), so a DELETE of rows in it
    /// does not finish. One row of its own, with an empty state_id (an id
    /// no state has; the readers skip it) and `nonce` (no two alike, or
    /// block deduplication would drop it), becomes that newest part.
    /// `table`: 0 state, 1 lock, 2 grant.
    statement nudge_delete(int table, std::string_view nonce) const {
        statement st{{}, {string_param("nonce", std::string(nonce))}, {}, {}, false};
        if (table == 0)
            st.sql = "INSERT INTO " + t_.state + " (state_id, partial_state, completed_state) SELECT '', {nonce:String}, NULL";
        else if (table == 1)
            st.sql = "INSERT INTO " + t_.lock + " (state_id, lock_id) SELECT '', {nonce:String}";
        else
            st.sql = "INSERT INTO " + t_.grant + " (state_id, token, lock_id, kind, expires_ms) SELECT '', 0, "
                     "{nonce:String}, 'nudge', 0";
        return st;
    }

    /// Cluster mode: `del`, a DELETE of lock rows, also removing the lock
    /// table's nudge rows written before `cutoff` (ReplacingMergeTree
    /// ORDER BY (state_id, lock_id) keeps every nudge, each with its own
    /// lock_id, so without this they would pile up, one per release). Old
    /// nudges are never the newest quorum part — the caller's own nudge,
    /// written just before, is — so the mutation can reach them; the
    /// caller counts only the rows `del` itself deletes.
    template <class TimePoint>
    statement with_lock_nudges_removed(statement del, TimePoint cutoff) const {
        const auto where = del.sql.find(" WHERE ");
        if (where == std::string::npos)
            return del;
        del.sql.insert(where + 7, "(");
        del.sql += ") OR (state_id = '' AND locked_at < toDateTime(" + epoch_seconds(cutoff) + "))";
        return del;
    }

    /// Old servers: unfinished mutations on the state (lock = false) or lock table.
    statement pending_mutations(bool lock) const {
        return {"SELECT count() AS n FROM system.mutations WHERE database = {database:String}"
                " AND table = {table:String} AND is_done = 0",
                {string_param("database", t_.schema_name), string_param("table", lock ? t_.lock_name : t_.state_name)},
                "JSONEachRow", {}, true};
    }

private:
    /// Every DELETE is a mutation — ALTER TABLE … DELETE before 23.3, and
    /// a lightweight DELETE is one too. It may run after the request that
    /// created it is gone, so it must not read a value bound to that
    /// request (an external table: the mutation would fail, and block every
    /// later one), and its text is kept and parsed again, so the id is not
    /// written into it either. Deletes therefore carry no parameter: the id
    /// is named by its SHA-256, which no other id shares, and numbers are
    /// written as literals. The text stays small for any id.
    static std::string mutation_id_test(std::string_view id) {
        return "SHA256(state_id) = unhex('" + sha256_hex(id) + "')";
    }

    /// True while grant `fence` is the newest of the id (`id_test`) and
    /// not released.
    std::string fence_condition(const std::string& id_test, const std::string& fence) const {
        return " (SELECT max(token) FROM " + t_.grant + " WHERE " + id_test + ") = " + fence +
               " AND (SELECT count() FROM " + t_.grant + " WHERE " + id_test + " AND token = " + fence +
               " AND kind = 'release') = 0";
    }

    /// " ON CLUSTER `name`" in cluster mode, else nothing.
    std::string on_cluster() const {
        return r_.enabled() ? " ON CLUSTER " + quote_identifier(r_.cluster) : std::string();
    }

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
        return (f_.lightweight_delete ? "DELETE FROM " : "ALTER TABLE ") + table +
               (f_.lightweight_delete ? "" : " DELETE");
    }

    table_names t_;
    server_features f_;
    bool monotonic_ = true;
    replication r_;
};

} // namespace chstate::detail
