// Tests of include/chstate/detail/dialect.hpp: what a server version supports.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

TEST_CASE("server_features from version strings") {
    auto modern = detail::server_features::from_version("26.5.1.1");
    CHECK(modern.query_parameters);
    CHECK(modern.lightweight_delete);
    auto old = detail::server_features::from_version("18.16.1");
    CHECK_FALSE(old.query_parameters);
    CHECK_FALSE(old.datetime64);
    CHECK_FALSE(old.lightweight_delete);
    CHECK_FALSE(old.ttl);
    auto lts = detail::server_features::from_version("23.3.2.1");
    CHECK(lts.lightweight_delete);
    CHECK(detail::server_features::from_version("22.8.1").query_parameters);
    CHECK_FALSE(detail::server_features::from_version("22.8.1").lightweight_delete);
}
