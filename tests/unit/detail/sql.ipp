// Tests of include/chstate/detail/sql.hpp: identifier and literal quoting,
// TSV parameter values, inline_parameters.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

// ---- quoting and SQL text ------------------------------------------------------

TEST_CASE("identifiers are back-quoted with ` and \\ escaped") {
    CHECK(detail::quote_identifier("meltano") == "`meltano`");
    CHECK(detail::quote_identifier("we`ird\\") == "`we\\`ird\\\\`");
}

TEST_CASE("string literals escape quote, backslash and control characters") {
    CHECK(detail::quote_string("it's") == "'it\\'s'");
    CHECK(detail::quote_string("a\\b") == "'a\\\\b'");
    CHECK(detail::quote_string(std::string("n\nt\tz\0", 6)) == "'n\\nt\\tz\\0'");
}

TEST_CASE("parameter values use TSV escaping, NULL is \\N") {
    CHECK(detail::escape_parameter_value(std::nullopt) == "\\N");
    CHECK(detail::escape_parameter_value(std::string("\\N")) == "\\\\N");
    CHECK(detail::escape_parameter_value(std::string("a\tb\nc'd")) == "a\\tb\\nc'd");
}

TEST_CASE("inline_parameters quotes strings, checks integers, writes NULL") {
    statement s{"SELECT {a:String}, {n:UInt32}, {z:Nullable(String)}", {}, {}, {}, true};
    s.parameters = {{"a", "String", "x'); DROP"}, {"n", "UInt32", "42"}, {"z", "Nullable(String)", std::nullopt}};
    diagnostics d;
    REQUIRE_FALSE(detail::inline_parameters(s, d));
    CHECK(s.sql == "SELECT 'x\\'); DROP', 42, NULL");
    CHECK(s.parameters.empty());
    statement bad{"SELECT {n:UInt32}", {{"n", "UInt32", "1 OR 1"}}, {}, {}, true};
    CHECK(detail::inline_parameters(bad, d) == errc::invalid_argument);
    statement missing{"SELECT {q:String}", {}, {}, {}, true};
    CHECK(detail::inline_parameters(missing, d) == errc::invalid_argument);
}
