// The simulator's self-check: statements with the answers the simulated
// ClickHouse gives, written once and run twice.
//
//   * `simulated` suite (tests/simulation.cpp): on a fresh simulator, each
//     answer checked;
//   * `embedded` suite (tests/embedded.cpp): on the simulator and on chDB,
//     a differential test — every step not marked simulator_only must get
//     the same answer (reply bytes, or the same error code) from both, and
//     one line is printed: `simulator-differential: statements=N
//     mismatches=M excluded=K`.
//
// chDB merges parts in the background; the simulator only when the test
// asks (merge()). So that their unmerged rows compare, the chDB runner
// stops merges on each table right after creating it, and starts them only
// for an explicit merge step and around a DELETE (chDB runs mutations
// synchronously, mutations_sync = 1, and they wait for stopped merges).
// The simulator's own cluster mode (replicas, quorum) has no counterpart in
// chDB and is checked in tests/simulation.cpp alone.
#pragma once

#include "support.hpp"

#include <chstate/testing/simulated.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace chstate::test::self_check {

struct step {
    enum kind_t {
        sql,             ///< `text`, with parameters, format, data, settings; its answer compared
        parts,           ///< the active parts of `table`: part_count(), chDB's system.parts; compared
        merge,           ///< simulator: merge(`table`), answering the rows removed; chDB: OPTIMIZE … FINAL
        apply_mutations, ///< simulator: apply_mutations(), answering the rows removed; chDB: none (synchronous)
        advance,         ///< simulator: its server clock moves `seconds` on; chDB: none (the real clock)
        row_count,       ///< simulator: row_count(`table`); chDB: none
    } kind = sql;
    std::string text = {};
    /// The simulator's answer: the reply's bytes, or "error N" (a ClickHouse
    /// error) or "error: <message>" (another error).
    std::string expected = {};
    std::string table = {}; ///< `db`.`t` the step is about (chDB: merges stopped / started around it)
    std::vector<parameter> parameters = {};
    std::string format = {};
    std::string data = {};
    std::vector<setting> settings = {};
    std::chrono::seconds seconds{0};
    /// Non-empty: chDB is not compared here, for this reason (the simulator
    /// differs by design).
    std::string simulator_only = {};

    /// True when chDB's answer is compared with the simulator's.
    bool compared() const { return (kind == sql || kind == parts) && simulator_only.empty(); }
};

inline std::string answer_of(error_code ec, const std::string& reply) {
    if (!ec)
        return reply;
    if (ec.category() == clickhouse_category())
        return "error " + std::to_string(ec.value());
    return "error: " + ec.message();
}

/// The steps, on database `db` (created by the first step).
inline std::vector<step> steps(const std::string& db) {
    const std::string l = "`" + db + "`.`l`", t = "`" + db + "`.`t`", d = "`" + db + "`.`d`", s = "`" + db + "`.`s`";
    const std::string mutations_sync = "chDB runs mutations synchronously (mutations_sync = 1); the simulator's finish "
                                       "in the background, after a read of system.mutations or apply_mutations()";
    const std::string ttl_clock = "TTL: the simulator judges it on its manual clock, chDB on the real one";
    const std::string merges_stopped = "chDB's merges are stopped throughout (see above): nothing to observe there";
    using k = step;
    return {
        // ReplacingMergeTree: a part per INSERT, every unmerged row visible, FINAL collapses.
        {.text = "CREATE DATABASE IF NOT EXISTS `" + db + "`", .expected = ""},
        {.text = "CREATE TABLE IF NOT EXISTS " + l + " (state_id String, lock_id String, locked_at DateTime DEFAULT "
                 "now()) ENGINE = ReplacingMergeTree(locked_at) ORDER BY state_id",
         .expected = "", .table = l},
        {.text = "INSERT INTO " + l + " (state_id, lock_id) VALUES ('a', 'x')", .expected = ""},
        {.text = "INSERT INTO " + l + " (state_id, lock_id) VALUES ('a', 'w')", .expected = ""},
        {.kind = k::parts, .expected = "2\n", .table = l},
        {.text = "SELECT lock_id FROM " + l + " ORDER BY lock_id", .expected = "w\nx\n"},
        // equal versions: the last inserted wins
        {.text = "SELECT lock_id FROM " + l + " FINAL", .expected = "w\n"},
        {.kind = k::merge, .expected = "1", .table = l},
        {.kind = k::parts, .expected = "1\n", .table = l},
        {.text = "SELECT lock_id FROM " + l, .expected = "w\n"},
        // a higher version wins over a later insert
        {.text = "INSERT INTO " + l + " (state_id, lock_id, locked_at) SELECT 'b', 'new', toDateTime({t:UInt32})",
         .expected = "", .parameters = {{"t", "UInt32", "1700000100"}}},
        {.text = "INSERT INTO " + l + " (state_id, lock_id, locked_at) SELECT 'b', 'old', toDateTime({t:UInt32})",
         .expected = "", .parameters = {{"t", "UInt32", "1700000050"}}},
        {.text = "SELECT lock_id FROM " + l + " FINAL WHERE state_id = {id:String}", .expected = "new\n",
         .parameters = {{"id", "String", "b"}}},
        // an ALTER … DELETE is a mutation, applied in the background
        {.text = "ALTER TABLE " + l + " DELETE WHERE state_id = 'b'", .expected = "", .table = l},
        {.text = "SELECT count() FROM " + l, .expected = "3\n", .simulator_only = mutations_sync},
        {.kind = k::apply_mutations, .expected = "2"},
        {.text = "SELECT count() FROM " + l, .expected = "1\n"},
        // ... which a read of system.mutations sees unfinished, and which
        // has finished once that read is answered
        {.text = "INSERT INTO " + l + " (state_id, lock_id) VALUES ('c', 'y')", .expected = ""},
        {.text = "ALTER TABLE " + l + " DELETE WHERE state_id = 'c'", .expected = "", .table = l},
        {.text = "SELECT count() FROM system.mutations WHERE database = '" + db + "' AND table = 'l' AND is_done = 0",
         .expected = "1\n", .simulator_only = mutations_sync},
        {.text = "SELECT count() FROM " + l, .expected = "1\n"},
        // a lightweight DELETE takes effect at once
        {.text = "DELETE FROM " + l + " WHERE lock_id = 'w'", .expected = "", .table = l},
        {.text = "SELECT count() AS n FROM " + l, .expected = "0\n"},
        {.text = "SELECT count() AS n FROM " + l, .expected = "{\"n\":\"0\"}\n", .format = "JSONEachRow",
         .simulator_only = "UInt64 in JSON: quoted by the simulator (version 25.3, as ClickHouse up to 25.7 and "
                           "18.16), bare in chDB 26.5 (ClickHouse PR 74079); the store reads both"},
        // a mutation applies to the rows inserted before it, not to later ones
        {.text = "INSERT INTO " + l + " (state_id, lock_id) VALUES ('e', '1')", .expected = ""},
        {.text = "ALTER TABLE " + l + " DELETE WHERE state_id = 'e'", .expected = "", .table = l},
        {.text = "INSERT INTO " + l + " (state_id, lock_id) VALUES ('e', '2')", .expected = ""},
        {.text = "SELECT count() FROM system.mutations WHERE database = '" + db + "' AND table = 'l' AND is_done = 0",
         .expected = "1\n", .simulator_only = mutations_sync},
        {.text = "SELECT lock_id FROM " + l + " WHERE state_id = 'e'", .expected = "2\n"},
        // TTL at merge time, on the server's clock
        {.text = "CREATE TABLE " + t + " (k String, at DateTime DEFAULT now()) ENGINE = MergeTree ORDER BY k "
                 "TTL at + INTERVAL 300 SECOND",
         .expected = "", .table = t},
        {.text = "INSERT INTO " + t + " (k) VALUES ('c')", .expected = ""},
        {.kind = k::advance, .seconds = std::chrono::seconds(299)},
        {.kind = k::merge, .expected = "0", .table = t, .simulator_only = ttl_clock},
        {.kind = k::row_count, .expected = "1", .table = t},
        {.kind = k::advance, .seconds = std::chrono::seconds(1)},
        {.kind = k::merge, .expected = "1", .table = t, .simulator_only = ttl_clock},
        {.kind = k::row_count, .expected = "0", .table = t},
        // deduplication: by token, and by content without one
        {.text = "CREATE TABLE " + d + " (k String, v String) ENGINE = MergeTree ORDER BY k"
                 " SETTINGS non_replicated_deduplication_window = 100",
         .expected = "", .table = d},
        {.text = "INSERT INTO " + d + " (k, v) SETTINGS insert_deduplication_token = 't1' VALUES ('k', 'first')",
         .expected = ""},
        {.text = "INSERT INTO " + d + " (k, v) SETTINGS insert_deduplication_token = 't1' VALUES ('k', 'second')",
         .expected = ""},
        {.text = "INSERT INTO " + d + " (k, v) VALUES ('h', 'same')", .expected = ""},
        {.text = "INSERT INTO " + d + " (k, v) VALUES ('h', 'same')", .expected = "",
         .simulator_only = "a server drops a repeated VALUES block by its content; chdb_transport sends every "
                           "INSERT as INSERT ... SELECT (the host's stdin), which ClickHouse never deduplicates "
                           "by content"},
        {.text = "SELECT k, v FROM " + d + " ORDER BY k", .expected = "h\tsame\nk\tfirst\n"},
        // merges can be stopped, as on a server
        {.text = "INSERT INTO " + l + " (state_id, lock_id) VALUES ('d', '1')", .expected = ""},
        {.text = "INSERT INTO " + l + " (state_id, lock_id) VALUES ('d', '2')", .expected = ""},
        {.text = "SYSTEM STOP MERGES " + l, .expected = "", .simulator_only = merges_stopped},
        {.kind = k::merge, .expected = "0", .table = l, .simulator_only = merges_stopped},
        {.text = "SYSTEM START MERGES " + l, .expected = "", .simulator_only = merges_stopped},
        {.kind = k::merge, .expected = "1", .table = l},
        {.kind = k::parts, .expected = "1\n", .table = l},
        // the state table's shape: DateTime64(3), TabSeparated input, RowBinary output
        {.text = "CREATE TABLE " + s + " (state_id String, partial_state Nullable(String), completed_state "
                 "Nullable(String), updated_at DateTime64(3) DEFAULT now64(3)) ENGINE = ReplacingMergeTree(updated_at) "
                 "ORDER BY state_id",
         .expected = "", .table = s},
        {.text = "INSERT INTO " + s + " (state_id, partial_state, completed_state, updated_at) FORMAT TabSeparated",
         .expected = "", .data = "a\t{\"x\":1}\t\\N\t1700000000.123\nb\t\\N\tline\\nbreak\t1700000001.000\n"},
        {.text = "SELECT state_id, toUInt64(toUnixTimestamp64Milli(updated_at)) FROM " + s + " FINAL ORDER BY state_id",
         .expected = "a\t1700000000123\nb\t1700000001000\n"},
        {.text = "SELECT partial_state, completed_state FROM " + s + " FINAL WHERE state_id = {id:String} LIMIT 1",
         .expected = std::string("\1\0\12line\nbreak", 13), .parameters = {{"id", "String", "b"}}, .format = "RowBinary"},
        {.text = "SELECT updated_at FROM " + s + " ORDER BY updated_at DESC LIMIT 1",
         .expected = "2023-11-14 22:13:21.000\n"},
        // the store's monotonic version: greatest(now64(3), newest + 1 ms) (the clocks differ: compare the order)
        {.text = "INSERT INTO " + s + " (state_id, partial_state, completed_state, updated_at) SELECT {id:String}, "
                 "{p:Nullable(String)}, NULL, greatest(now64(3), (SELECT max(updated_at) FROM " + s +
                 " WHERE state_id = {id:String}) + INTERVAL 1 MILLISECOND)",
         .expected = "", .parameters = {{"id", "String", "a"}, {"p", "Nullable(String)", "p"}}},
        {.text = "SELECT count() FROM " + s + " WHERE state_id = 'a'", .expected = "2\n"},
        // get's read: PREWHERE on the sorting key before FINAL (statements.hpp, select_state)
        {.text = "SELECT partial_state FROM " + s + " FINAL PREWHERE state_id = {id:String} LIMIT 1",
         .expected = "p\n", .parameters = {{"id", "String", "a"}}},
        {.text = "SELECT toUInt64(toUnixTimestamp64Milli(updated_at)) > 1700000000123 FROM " + s +
                 " FINAL WHERE state_id = 'a'",
         .expected = "1\n"},
        {.text = "SELECT DISTINCT state_id FROM " + s + " FINAL WHERE startsWith(state_id, {p:String}) ORDER BY state_id",
         .expected = "a\n", .parameters = {{"p", "String", "a"}}},
        {.text = "SELECT max(updated_at), min(state_id), count() FROM " + s + " WHERE state_id = 'none'",
         .expected = "1970-01-01 00:00:00.000\t\t0\n"},
        {.text = "SELECT isNull(partial_state), isNull(completed_state) FROM " + s + " WHERE state_id = 'b'",
         .expected = "1\t0\n"},
        {.text = "SELECT count() FROM " + s + " WHERE state_id IN (SELECT arrayJoin({ids:Array(String)}))",
         .expected = "1\n", .parameters = {{"ids", "Array(String)", "['b','x']"}}},
        {.text = "SELECT state_id, updated_at FROM " + s + " FINAL ORDER BY state_id DESC LIMIT 1",
         .expected = "b\t2023-11-14 22:13:21.000\n"},
        {.text = "SELECT count() FROM " + s + " WHERE state_id = 'a' AND updated_at >= toDateTime(1700000000) OR "
                 "state_id != 'a'",
         .expected = "3\n"},
        // functions
        {.text = "SELECT greatest(toUInt64(5), (SELECT count() FROM " + s + ") + 1)", .expected = "5\n"},
        {.text = "SELECT SHA256('a') = unhex('ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb'), "
                 "startsWith('abc', 'ab'), isNull(NULL)",
         .expected = "1\t1\t1\n"},
        {.text = "SELECT toUnixTimestamp(toDateTime(1700000000)), toUInt64(toUnixTimestamp(toDateTime(1700000000))) * 1000",
         .expected = "1700000000\t1700000000000\n"},
        {.text = "SELECT name, type FROM system.columns WHERE database = '" + db + "' AND table = 's' ORDER BY position",
         .expected = "state_id\tString\npartial_state\tNullable(String)\ncompleted_state\tNullable(String)\n"
                     "updated_at\tDateTime64(3)\n"},
        {.text = "SELECT name, engine FROM system.tables WHERE database = '" + db + "' ORDER BY name",
         .expected = "d\tMergeTree\nl\tReplacingMergeTree\ns\tReplacingMergeTree\nt\tMergeTree\n"},
        // errors: the same codes
        {.text = "SELECT lock_id FROM " + s, .expected = "error 47"},
        {.text = "SELECT nosuchfunction_xyz()", .expected = "error 46"},
        {.text = "SELECT count() FROM `" + db + "`.`nosuch`", .expected = "error 60"},
        {.text = "SELECT count() FROM `nosuch_" + db + "`.`t`", .expected = "error 81"},
        {.text = "CREATE TABLE " + d + " (k String) ENGINE = MergeTree ORDER BY k", .expected = "error 57"},
        // cluster-mode settings on an engine without replicas: refused, never ignored
        {.text = "SELECT 1", .expected = "error: " + make_error_code(errc::unsupported).message(),
         .settings = {{"insert_quorum", "2"}}},
        // what the simulator does not model, it names
        {.text = "GRANT ALL ON " + l + " TO someone", .expected = "error 48",
         .simulator_only = "the simulator answers 48 (NOT_IMPLEMENTED) to all it does not model; chDB runs GRANT"},
    };
}

/// Runs `st` on the simulator (`clock`: its server clock); the answer.
inline std::string run_on_simulator(simulated_clickhouse& server, manual_clock& clock, const step& st) {
    switch (st.kind) {
    case step::parts:
        return std::to_string(server.part_count(st.table)) + "\n";
    case step::merge:
        return std::to_string(server.merge(st.table));
    case step::apply_mutations:
        return std::to_string(server.apply_mutations());
    case step::advance:
        clock.advance(st.seconds);
        return st.expected;
    case step::row_count:
        return std::to_string(server.row_count(st.table));
    case step::sql:
        break;
    }
    statement s{st.text, st.parameters, st.format, st.data, false};
    s.settings = st.settings;
    std::string reply;
    diagnostics diag;
    auto ec = server.execute(s, reply, diag);
    return answer_of(ec, reply);
}

} // namespace chstate::test::self_check
