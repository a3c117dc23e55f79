// Tests of include/chstate/detail/rows.hpp: reply rows reassembled across chunks, fields, parts.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

// ---- reply parsing ---------------------------------------------------------------

TEST_CASE("row_reader reassembles rows split across chunks at any byte") {
    const std::string body = "{\"a\":\"x\\ny\"}\n{\"a\":\"second\"}\n{\"a\":\"no newline at end\"}";
    for (std::size_t step = 1; step <= body.size(); ++step) {
        detail::row_reader r;
        std::vector<std::string> seen;
        diagnostics d;
        auto on_row = [&](json::object&& row) {
            seen.push_back(std::string(row.at("a").as_string()));
            return error_code{};
        };
        for (std::size_t i = 0; i < body.size(); i += step)
            REQUIRE_FALSE(r.feed(std::string_view(body).substr(i, step), on_row, d));
        REQUIRE_FALSE(r.finish(on_row, d));
        CHECK(seen == std::vector<std::string>{"x\ny", "second", "no newline at end"});
    }
}

TEST_CASE("row_reader rejects a line that is not a JSON object") {
    detail::row_reader r;
    diagnostics d;
    auto ec = r.feed("{\"a\":1}\nCode: 241. DB::Exception: Memory limit\n", [](json::object&&) { return error_code{}; }, d);
    CHECK(ec == errc::protocol_error);
    CHECK(d.message.find("Memory limit") != std::string::npos);
}

TEST_CASE("uint_field accepts quoted and unquoted 64-bit integers") {
    CHECK(detail::uint_field(obj(R"({"n":7})"), "n") == 7u);
    CHECK(detail::uint_field(obj(R"({"n":"18446744073709551615"})"), "n") == 18446744073709551615ull);
    CHECK_FALSE(detail::uint_field(obj(R"({"n":"7x"})"), "n"));
    CHECK_FALSE(detail::uint_field(obj(R"({"m":1})"), "n"));
}

TEST_CASE("parse_part: NULL and empty text are {}, other non-objects are corrupt") {
    object out;
    diagnostics d;
    CHECK_FALSE(detail::parse_part("", true, out, "id", "partial_state", d));
    CHECK_FALSE(detail::parse_part("", false, out, "id", "partial_state", d));
    CHECK_FALSE(detail::parse_part("{\"a\":1}", false, out, "id", "partial_state", d));
    CHECK(out == cobj(R"({"a":1})"));
    CHECK(detail::parse_part("\"str\"", false, out, "id", "partial_state", d) == errc::corrupt_state);
    CHECK(d.message == "state \"id\": partial_state is not a JSON object (it is string)");
    CHECK(detail::parse_part("{\"a\": NaN, \"b\": 1e999, \"c\": 18446744073709551616}", false, out, "id", "p", d) ==
          error_code{});
    CHECK(serialize_json(value(out)) == "{\"a\": NaN, \"b\": Infinity, \"c\": 18446744073709551616}");
    CHECK(detail::parse_part("{\"a\": 1", false, out, "job:1", "completed_state", d) == errc::corrupt_state);
    CHECK(d.message.starts_with("state \"job:1\": completed_state cannot be read: "));
    std::optional<std::string> text;
    CHECK_FALSE(detail::serialize_part({}, text, "id", "partial_state", d));
    CHECK(text == std::nullopt);
    CHECK_FALSE(detail::serialize_part(cobj(R"({"a":1})"), text, "id", "partial_state", d));
    CHECK(text == std::string(R"({"a": 1})"));
    object bad;
    bad["s"] = std::string("\xff");
    CHECK(detail::serialize_part(bad, text, "job:2", "partial_state", d) == errc::invalid_argument);
    CHECK(d.message == "state \"job:2\": partial_state cannot be stored: the string at $[\"s\"] is not valid UTF-8 "
                       "(byte 0 of the string)");
    object huge;
    huge["n"] = big_integer(std::string(4301, '7')); // Python 3.11+ refuses to read it
    CHECK(detail::serialize_part(huge, text, "job:3", "partial_state", d) == errc::invalid_argument);
    CHECK(d.message.find("4301 digits") != std::string::npos);
    huge["n"] = big_integer(std::string(4300, '7'));
    CHECK_FALSE(detail::serialize_part(huge, text, "job:3", "partial_state", d));
}
