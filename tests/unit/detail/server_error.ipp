// Tests of include/chstate/detail/server_error.hpp: exception texts of every server version.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

TEST_CASE("exception_code reads old and new exception texts") {
    CHECK(detail::exception_code("Code: 46, e.displayText() = DB::Exception: Unknown function nosuchfn") == 46);
    CHECK(detail::exception_code("Code: 81. DB::Exception: Database x does not exist. (UNKNOWN_DATABASE)") == 81);
    CHECK_FALSE(detail::exception_code("no code here"));
    CHECK_FALSE(detail::exception_code("Code: abc"));
}
