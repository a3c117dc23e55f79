// Tests of include/chstate/detail/statements.hpp: the named statements the store sends.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

TEST_CASE("statements: the seed's DDL on a modern server") {
    detail::statements st(detail::table_names("meltano", "state"), detail::server_features::from_version("26.5.1.1"));
    CHECK(st.create_database().sql == "CREATE DATABASE IF NOT EXISTS `meltano`");
    CHECK(st.create_state_table().sql ==
          "CREATE TABLE IF NOT EXISTS `meltano`.`state` (state_id String, partial_state Nullable(String), "
          "completed_state Nullable(String), updated_at DateTime64(3) DEFAULT now64(3)) "
          "ENGINE = ReplacingMergeTree(updated_at) ORDER BY state_id");
    CHECK(st.create_lock_table().sql ==
          "CREATE TABLE IF NOT EXISTS `meltano`.`state_lock` (state_id String, lock_id String, locked_at DateTime "
          "DEFAULT now()) ENGINE = ReplacingMergeTree(locked_at) ORDER BY state_id TTL locked_at + INTERVAL 300 SECOND");
}

TEST_CASE("statements: the state INSERT per write_versions and server") {
    const detail::table_names names("meltano", "state");
    const auto modern = detail::server_features::from_version("26.5.1.1");
    // clock: the seed's statement, verbatim.
    detail::statements seed(names, modern, false);
    CHECK_FALSE(seed.monotonic_versions());
    CHECK(seed.insert_state("id", "{}", std::nullopt).sql ==
          "INSERT INTO `meltano`.`state` (state_id, partial_state, completed_state) VALUES ({state_id:String}, "
          "{partial_state:Nullable(String)}, {completed_state:Nullable(String)})");
    // monotonic (default): the server computes the version inside the INSERT.
    detail::statements mono(names, modern);
    CHECK(mono.monotonic_versions());
    auto m = mono.insert_state("id", "{}", std::nullopt);
    CHECK(m.sql ==
          "INSERT INTO `meltano`.`state` (state_id, partial_state, completed_state, updated_at) SELECT "
          "{state_id:String}, {partial_state:Nullable(String)}, {completed_state:Nullable(String)}, "
          "greatest(now64(3), (SELECT max(updated_at) FROM `meltano`.`state` WHERE state_id = {state_id:String}) "
          "+ INTERVAL 1 MILLISECOND)");
    CHECK(m.parameters.size() == 3);
    // fenced: written only while the lease (its lock_id) holds the newest
    // grant, has not released it, and the grant has not expired on the
    // server's clock; renewals move it to newer tokens, so the holder is
    // named by lock_id, not by token.
    const std::string lease_id = "8a0c7e1e-0000-4000-8000-000000000001";
    auto f = mono.insert_state("id", "{}", std::nullopt, 0, lease_id);
    // One read of the grant events: a scalar subquery of aggregates.
    // No other lease's grant at that token (two there: neither writes).
    CHECK(f.sql.find(" WHERE (SELECT max(token) = maxIf(token, kind = 'grant' AND lock_id = {lock_id:String}) AND "
                     "maxIf(token, kind = 'grant' AND lock_id = {lock_id:String}) > 0 AND countIf(kind = 'release' AND "
                     "lock_id = {lock_id:String}) = 0 AND maxIf(token, kind = 'grant' AND lock_id != {lock_id:String}) "
                     "< maxIf(token, kind = 'grant' AND lock_id = {lock_id:String}) AND maxIf(expires_ms, kind = "
                     "'grant' AND lock_id = {lock_id:String}) >= toUInt64(toUnixTimestamp64Milli(now64(3))) FROM "
                     "`meltano`.`state_grant` WHERE state_id = {state_id:String}) = 1") != std::string::npos);
    CHECK(f.parameters.back().name == "lock_id");
    CHECK(f.parameters.back().value == lease_id);
    CHECK(f.name == "state.insert_fenced");
    auto fd = mono.delete_state("id", lease_id);
    // A delete is a mutation: no parameter, the id named by its SHA-256, the
    // lease's own UUID as a quoted literal.
    const std::string id_test = "SHA256(state_id) = unhex('" + detail::sha256_hex("id") + "')";
    const std::string holder = "lock_id = '" + lease_id + "'";
    const std::string other = "lock_id != '" + lease_id + "'";
    CHECK(fd.sql == "DELETE FROM `meltano`.`state` WHERE " + id_test + " AND (SELECT max(token) = maxIf(token, kind = "
                    "'grant' AND " + holder + ") AND maxIf(token, kind = 'grant' AND " + holder + ") > 0 AND "
                    "countIf(kind = 'release' AND " + holder + ") = 0 AND maxIf(token, kind = 'grant' AND " + other +
                    ") < maxIf(token, kind = 'grant' AND " + holder + ") AND maxIf(expires_ms, kind = 'grant' AND " +
                    holder + ") >= toUInt64(toUnixTimestamp64Milli(now64(3))) FROM `meltano`.`state_grant` WHERE " +
                    id_test + ") = 1");
    CHECK(fd.parameters.empty());
    // fenced under the seed's versions: the same condition on an INSERT … SELECT.
    auto fs = seed.insert_state("id", "{}", std::nullopt, 0, lease_id);
    CHECK(fs.sql.starts_with("INSERT INTO `meltano`.`state` (state_id, partial_state, completed_state) SELECT "));
    CHECK(fs.sql.find("{lock_id:String}") != std::string::npos);
    // No DateTime64 (18.16): the store's milliseconds, raised above the id's newest.
    const auto old = detail::server_features::from_version("18.16.1");
    auto o = detail::statements(names, old).insert_state("id", "{}", std::nullopt, 1767225600123);
    CHECK(o.sql.find("greatest({updated_at:UInt64}, (SELECT max(updated_at) FROM `meltano`.`state` WHERE "
                     "state_id = {state_id:String}) + 1)") != std::string::npos);
    CHECK(o.parameters.back().value == "1767225600123");
    auto oc = detail::statements(names, old, false).insert_state("id", "{}", std::nullopt, 1767225600123);
    CHECK(oc.sql.ends_with("{updated_at:UInt64})"));
    // The newest version already read under the lock (update): bound, no read.
    auto known = mono.insert_state("id", "{}", std::nullopt, 0, lease_id, 1767225600123);
    CHECK(known.sql.find("greatest(now64(3), fromUnixTimestamp64Milli(toInt64({newest_ms:UInt64})) + INTERVAL 1 "
                         "MILLISECOND)") != std::string::npos);
    CHECK(known.sql.find("max(updated_at)") == std::string::npos);
    CHECK(known.parameters.at(3).name == "newest_ms");
    CHECK(known.parameters.at(3).value == "1767225600123");
    auto old_known = detail::statements(names, old).insert_state("id", "{}", std::nullopt, 1767225600200,
                                                                   std::nullopt, 1767225600123);
    CHECK(old_known.sql.find("greatest({updated_at:UInt64}, {newest_ms:UInt64} + 1)") != std::string::npos);
    // Clock versions ignore it: the seed's statement.
    CHECK(seed.insert_state("id", "{}", std::nullopt, 0, std::nullopt, 5).sql ==
          seed.insert_state("id", "{}", std::nullopt).sql);
    // update's read of the state carries the version in milliseconds.
    CHECK(mono.select_state("id", true).sql ==
          "SELECT partial_state, completed_state, toUInt64(toUnixTimestamp64Milli(updated_at)) FROM "
          "`meltano`.`state` FINAL PREWHERE state_id = {state_id:String} LIMIT 1");
    CHECK(detail::statements(names, old).select_state("id", true).sql.find(", toUInt64(updated_at) FROM") !=
          std::string::npos);
    CHECK(oc.sql.find("VALUES") != std::string::npos);
    // DateTime64 without millisecond intervals (20.1–22.3): falls back to the clock.
    CHECK_FALSE(detail::statements(names, detail::server_features::from_version("21.8.1")).monotonic_versions());
    CHECK(detail::statements(names, detail::server_features::from_version("22.4.1")).monotonic_versions());
}

TEST_CASE("statements: values are only ever bound parameters") {
    detail::statements st(detail::table_names("meltano", "state"), {});
    const std::string evil = "x' OR 1=1 --";
    for (const statement& s : {st.select_state(evil), st.insert_state(evil, evil, std::nullopt),
                               st.insert_state(evil, evil, evil, 1, evil), st.select_state_ids(evil + "*"),
                               st.select_lock_holder(evil), st.select_newest_versions({evil}, 0)}) {
        CHECK(s.sql.find(evil) == std::string::npos);
        CHECK_FALSE(s.parameters.empty());
    }
    // Deletes are mutations: they carry no value at all, only the id's SHA-256.
    for (const statement& s : {st.prune_grants(evil, 3), st.delete_state(evil),
                               st.delete_state(evil, std::string("8a0c7e1e-0000-4000-8000-000000000002")),
                               st.delete_lock(evil, "8a0c7e1e-0000-4000-8000-000000000001")}) {
        CHECK(s.sql.find(evil) == std::string::npos);
        CHECK(s.sql.find(detail::sha256_hex(evil)) != std::string::npos);
        CHECK(s.parameters.empty());
    }
    const std::string huge(1 << 20, 'x'); // a 1 MiB id: derived text stays small
    CHECK(st.delete_state(huge).sql.size() < 200);
    auto get = st.select_state("dev:job");
    CHECK(get.sql == "SELECT partial_state, completed_state FROM `meltano`.`state` FINAL PREWHERE state_id = "
                     "{state_id:String} LIMIT 1");
    CHECK(get.parameters.at(0).value == "dev:job");
}

TEST_CASE("statements: state_ids narrows by the glob's literal prefix, never with LIKE") {
    detail::statements st(detail::table_names("m", "s"), {});
    CHECK(st.select_state_ids("*").sql == "SELECT DISTINCT state_id FROM `m`.`s` FINAL ORDER BY state_id");
    CHECK(st.select_state_ids("").sql == st.select_state_ids("*").sql);
    auto filtered = st.select_state_ids("dev_*");
    CHECK(filtered.sql == "SELECT DISTINCT state_id FROM `m`.`s` FINAL WHERE startsWith(state_id, "
                          "{prefix:String}) ORDER BY state_id");
    CHECK(filtered.parameters.at(0).value == "dev_");
    auto exact = st.select_state_ids("dev_a");
    CHECK(exact.sql.find("WHERE state_id = {state_id:String}") != std::string::npos);
    CHECK(exact.parameters.at(0).value == "dev_a");
    // A leading wildcard: every id comes back, the library decides.
    CHECK(st.select_state_ids("*x").sql == st.select_state_ids("*").sql);
}

TEST_CASE("statements: lock times are whole epoch seconds from the caller's clock") {
    detail::statements st(detail::table_names("m", "s"), {});
    auto t = time_point{std::chrono::seconds{1767225600}} + 900ms;
    auto ins = st.insert_lock_candidate("id", "L", t);
    CHECK(ins.parameters.at(2).value == "1767225600");
    auto stale = st.delete_stale_locks(t - 300s);
    CHECK(stale.sql.ends_with("WHERE locked_at < toDateTime(1767225300)"));
}

TEST_CASE("statements: only get_all's reply is streamed; every other reply is bounded by the request") {
    detail::statements st(detail::table_names("meltano", "state"), detail::server_features::from_version("26.5.1.1"));
    CHECK(st.select_all_states().streamed_reply);
    CHECK_FALSE(st.select_state("a").streamed_reply);
    CHECK_FALSE(st.select_state_ids("*").streamed_reply);
    CHECK_FALSE(st.select_newest_versions({"a", "b"}, 0).streamed_reply);
}
