// Tests of include/chstate/detail/uuid.hpp.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

TEST_CASE("random_uuid: version 4 text, distinct") {
    auto a = detail::random_uuid();
    auto b = detail::random_uuid();
    CHECK(a.size() == 36);
    CHECK(a[14] == '4');
    CHECK(a != b);
}
