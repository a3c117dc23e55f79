// Tests of include/chstate/detail/schema.hpp's pure parts: reading a
// table's deduplication window out of its engine_full.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

TEST_CASE("engine_setting reads one whole setting name out of engine_full") {
    using detail::engine_setting;
    const std::string chdb = "MergeTree ORDER BY (state_id, token) SETTINGS non_replicated_deduplication_window = "
                             "10000, index_granularity = 8192";
    CHECK(engine_setting(chdb, "non_replicated_deduplication_window") == 10000u);
    CHECK(engine_setting(chdb, "index_granularity") == 8192u);
    // A name inside a longer one is not it.
    CHECK_FALSE(engine_setting(chdb, "replicated_deduplication_window"));
    CHECK_FALSE(engine_setting(chdb, "deduplication_window"));
    const std::string replicated =
        "ReplicatedMergeTree('/zk/{shard}/t', '{replica}') ORDER BY token SETTINGS "
        "replicated_deduplication_window_seconds = 60, replicated_deduplication_window = 0";
    CHECK(engine_setting(replicated, "replicated_deduplication_window") == 0u);
    CHECK(engine_setting(replicated, "replicated_deduplication_window_seconds") == 60u);
    CHECK_FALSE(engine_setting("MergeTree ORDER BY token", "non_replicated_deduplication_window"));
    CHECK_FALSE(engine_setting("", "x"));
    CHECK_FALSE(engine_setting("SETTINGS x = ", "x"));
    CHECK_FALSE(engine_setting("SETTINGS x = 'a'", "x"));
    CHECK(engine_setting("SETTINGS x=7", "x") == 7u);
}

TEST_CASE("the strict lock's grant statements ask for deduplication, and force it where the server decides") {
    const detail::table_names names("s", "state");
    const detail::statements modern(names, detail::server_features::from_version("26.5.3.1"));
    const detail::statements before(names, detail::server_features::from_version("25.8.1"));
    for (const auto& st : {modern.insert_grant_event("id", 1, "L", detail::grant_event::grant, 5, "k"),
                           modern.claim_grant("id", 2, "L", 5, "k", 1, 0), modern.renew_grant("id", 2, "L", 5, "k")}) {
        CAPTURE(st.sql);
        CHECK(st.sql.find("insert_deduplicate = 1") != std::string::npos);
        CHECK(st.sql.find("deduplicate_insert_select = 'force_enable'") != std::string::npos);
    }
    const auto old = before.claim_grant("id", 2, "L", 5, "k", 1, 0);
    CHECK(old.sql.find("insert_deduplicate = 1") != std::string::npos);
    CHECK(old.sql.find("deduplicate_insert_select") == std::string::npos); // unknown before 25.12
}
