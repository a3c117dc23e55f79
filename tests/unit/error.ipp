// Tests of include/chstate/error.hpp: ClickHouse codes onto chstate conditions.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

// ---- errors -----------------------------------------------------------------------------

TEST_CASE("ClickHouse codes map onto chstate conditions") {
    CHECK(make_clickhouse_error(516) == errc::authentication_failed);
    CHECK(make_clickhouse_error(193) == errc::authentication_failed);
    CHECK(make_clickhouse_error(81) == errc::unknown_database);
    CHECK(make_clickhouse_error(46) == errc::server_error);
    CHECK(make_error_code(errc::state_id_locked) == errc::state_id_locked);
    CHECK(make_error_code(errc::state_id_locked) != errc::timeout);
    CHECK(make_error_code(errc::state_id_locked).message() == "the state id's lock was not acquired before the timeout");
}
