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

TEST_CASE("sql_without_inline_data: the embedded engine's INSERTs carry no rows after their text") {
    // (chDB would read the host process's standard input as more rows:
    // tests/embedded.cpp runs every write with a full pipe as stdin.)
    diagnostics d;
    std::string sql;
    // One row of VALUES: the same row as a SELECT, placeholders untouched.
    statement one{"INSERT INTO `s`.`t` (a, b) SETTINGS insert_deduplication_token = 'k' VALUES ({a:String}, "
                  "{b:Nullable(String)})"};
    REQUIRE_FALSE(detail::sql_without_inline_data(one, sql, d));
    CHECK(sql == "INSERT INTO `s`.`t` (a, b) SETTINGS insert_deduplication_token = 'k' SELECT {a:String}, "
                 "{b:Nullable(String)}");
    // Rows after the text: read by format() from a bound parameter, every
    // field as text (cast to its column by the INSERT).
    statement rows{"INSERT INTO `s`.`t` (state_id, partial_state, updated_at) FORMAT TabSeparated"};
    rows.data = "a\t\\N\t2026-01-01 00:00:00.000\n";
    REQUIRE_FALSE(detail::sql_without_inline_data(rows, sql, d));
    CHECK(sql == "INSERT INTO `s`.`t` (state_id, partial_state, updated_at) SELECT * FROM format(TabSeparated, "
                 "'state_id Nullable(String), partial_state Nullable(String), updated_at Nullable(String)', "
                 "{chstate_rows:String})");
    CHECK(rows.data.size() > 0); // the statement itself is not changed
    // An INSERT … SELECT and a query: as they are.
    statement select{"INSERT INTO t (a) SELECT {a:String} WHERE (1 = 1)"};
    REQUIRE_FALSE(detail::sql_without_inline_data(select, sql, d));
    CHECK(sql == select.sql);
    statement query{"SELECT 1 FROM t WHERE a IN (1)"};
    REQUIRE_FALSE(detail::sql_without_inline_data(query, sql, d));
    CHECK(sql == query.sql);
    // Rows in any other shape: refused, never run with stdin as part of them.
    statement json{"INSERT INTO t (a) FORMAT JSONEachRow"};
    json.data = "{\"a\": 1}\n";
    CHECK(detail::sql_without_inline_data(json, sql, d) == errc::unsupported);
    CHECK(d.message.find("standard input") != std::string::npos);
}
