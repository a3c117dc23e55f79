// No state changed, lost or hidden (docs/values.md): one case per
// way chstate used to lose data. Templated test cases over the data fixtures
// (DATA_CASE, tests/contract.hpp), included once per test file, inside its suite.

namespace lossless {

template <class Transport>
void run(Transport& t, const statement& s) {
    diagnostics diag;
    if (auto ec = test::run_statement(t, s, diag))
        throw error(ec, diag.message);
}

using test::seed_insert;
using test::stored_parts;

/// {"k": {"k": … leaf …}} nested `depth` objects deep (the part itself is one).
inline std::string nested_text(std::size_t depth, std::string_view leaf = "1") {
    std::string text;
    for (std::size_t i = 1; i < depth; ++i)
        text += "{\"k\": ";
    text += "{\"leaf\": ";
    text += leaf;
    text += std::string(depth, '}');
    return text;
}

} // namespace lossless

DATA_CASE("lossless: values a Python process wrote survive update() of another key, byte for byte") {
    store_under_test<fixture> t;
    t.store.ensure_schema();
    // json.dumps({"t": 1700000000.8702567, "n": 2**64, "m": -2**63-1, "x": float("nan"),
    //             "i": float("-inf"), "s": "\ud800", "e": "é", "z": -0.0, "f": 1e16})
    const std::string python =
        R"({"t": 1700000000.8702567, "n": 18446744073709551616, "m": -9223372036854775809, "x": NaN, )"
        R"("i": -Infinity, "s": "\ud800", "e": "\u00e9", "z": -0.0, "f": 1e+16})";
    lossless::run(t.transport, lossless::seed_insert(t.table(), "py", python, python));
    auto got = t.store.get("py");
    REQUIRE(got);
    CHECK(got->partial_state.at("t").as_double() == 1700000000.8702567);
    CHECK(got->partial_state.at("n").big_integer_text() == "18446744073709551616");
    CHECK(std::isnan(got->partial_state.at("x").as_double()));
    t.store.update(state{"py", object{{"other", 1}}, {}});
    auto row = lossless::stored_parts(t.transport, t.table(), "py");
    CHECK(row.partial == python.substr(0, python.size() - 1) + R"(, "other": 1})");
    CHECK(row.completed == python);
}

DATA_CASE("lossless: states nested 10,000 levels deep round-trip; deeper than the limit is refused at set") {
    store_under_test<fixture> t;
    const std::string deep = lossless::nested_text(10'000, "1.5");
    state s{"deep", parse_json(deep).as_object(), parse_json(deep).as_object()};
    t.store.set(s);
    CHECK(t.store.get("deep") == s);
    t.store.update(state{"deep", object{{"more", true}}, {}});
    auto back = t.store.get("deep");
    REQUIRE(back);
    CHECK(back->completed_state == s.completed_state);
    CHECK(back->partial_state.size() == 2);
    std::uint64_t seen = t.store.get_all([&](state&& st) { CHECK(st.completed_state == s.completed_state); });
    CHECK(seen == 1);
    t.store.set_all({state{"deep2", {}, s.completed_state}});
    CHECK(t.store.get("deep2")->completed_state == s.completed_state);

    // One level over the limit: refused before anything is written, the limit named.
    const std::size_t limit = json_limits{}.max_depth;
    json_limits wider{limit + 1};
    state too_deep{"too-deep", {}, parse_json(lossless::nested_text(limit + 1), wider).as_object()};
    for (int form = 0; form < 2; ++form) {
        try {
            if (form == 0)
                t.store.set(too_deep);
            else
                t.store.set_all({state{"fine", {}, object{{"a", 1}}}, too_deep});
            FAIL("a state deeper than the limit was accepted");
        } catch (const error& e) {
            CHECK(e.code() == errc::invalid_argument);
            CHECK(std::string(e.what()).find(std::to_string(limit)) != std::string::npos);
            CHECK(std::string(e.what()).find("too-deep") != std::string::npos);
        }
    }
    CHECK_FALSE(t.store.get("too-deep"));
    CHECK_FALSE(t.store.get("fine")); // set_all is all or nothing
}

DATA_CASE("lossless: get_all delivers every readable state and reports each unreadable one; state_ids lists ids "
          "that are not UTF-8") {
    store_under_test<fixture> t;
    t.store.ensure_schema();
    const std::string bad_utf8_id = std::string("job-\xff\xfe-") + '\t' + "end";
    lossless::run(t.transport, lossless::seed_insert(t.table(), "a", R"({"ok": 1})", std::nullopt));
    lossless::run(t.transport, lossless::seed_insert(t.table(), "b", R"({"cut": )", std::nullopt));
    lossless::run(t.transport, lossless::seed_insert(t.table(), "c", std::nullopt, "[1, 2]"));
    lossless::run(t.transport, lossless::seed_insert(t.table(), bad_utf8_id, R"({"ok": 2})", std::nullopt));
    lossless::run(t.transport, lossless::seed_insert(t.table(), "d", R"({"ok": 3})", std::nullopt));

    std::vector<std::string> ids = t.store.state_ids("*");
    CHECK(ids == std::vector<std::string>{"a", "b", "c", "d", bad_utf8_id});

    std::vector<std::string> visited, unreadable;
    std::uint64_t n = t.store.get_all([&](state&& s) { visited.push_back(s.state_id); },
                                      [&](unreadable_state&& u) {
                                          CHECK(u.code == errc::corrupt_state);
                                          CHECK(u.reason.find("\"" + u.state_id + "\"") != std::string::npos);
                                          unreadable.push_back(u.state_id);
                                      });
    CHECK(n == 3);
    CHECK(visited == std::vector<std::string>{"a", "d", bad_utf8_id});
    CHECK(unreadable == std::vector<std::string>{"b", "c"});

    // Without a reporter: the readable ones are still delivered, then a corrupt_state naming the others.
    visited.clear();
    try {
        t.store.get_all([&](state&& s) { visited.push_back(s.state_id); });
        FAIL("get_all hid unreadable states");
    } catch (const error& e) {
        CHECK(e.code() == errc::corrupt_state);
        CHECK(std::string(e.what()).find("\"b\"") != std::string::npos);
        CHECK(std::string(e.what()).find("\"c\"") != std::string::npos);
    }
    CHECK(visited.size() == 3);
    // get names the id and what is wrong.
    try {
        t.store.get("b");
        FAIL("an unreadable state was returned");
    } catch (const error& e) {
        CHECK(e.code() == errc::corrupt_state);
        CHECK(std::string(e.what()).find("state \"b\": partial_state cannot be read") != std::string::npos);
    }
    CHECK(t.store.get(bad_utf8_id)->partial_state == object{{"ok", 2}});
}

DATA_CASE("lossless: update() with a complete state repairs an unreadable stored state without reading it") {
    store_under_test<fixture> t;
    t.store.ensure_schema();
    lossless::run(t.transport, lossless::seed_insert(t.table(), "broken", "{not json", "{also not"));
    CHECK_THROWS_AS(t.store.update(state{"broken", object{{"p", 1}}, {}}), error); // incomplete: must read
    state repaired{"broken", {}, object{{"fixed", true}}};
    CHECK(t.store.update(repaired) == repaired);
    CHECK(t.store.get("broken") == repaired);
}

DATA_CASE("lossless: copy, move and merge onto the source itself are refused and change nothing") {
    store_under_test<fixture> t;
    auto s = make_state("same", R"({"p":1})", R"({"c":2})");
    t.store.set(s);
    for (int op = 0; op < 3; ++op) {
        try {
            if (op == 0)
                t.store.copy("same", "same");
            else if (op == 1)
                t.store.move("same", "same");
            else
                t.store.merge("same", "same");
            FAIL("accepted src == dst");
        } catch (const error& e) {
            CHECK(e.code() == errc::invalid_argument);
            CHECK(std::string(e.what()).find("same state_id \"same\"") != std::string::npos);
        }
        CHECK(t.store.get("same") == s);
    }
}

DATA_CASE("lossless: set_all dates each row by its own id, so a row dated in the future does not shadow later "
          "writes to other ids") {
    store_under_test<fixture> t;
    t.store.ensure_schema();
    const auto features = detail::server_features::from_version(t.raw("SELECT version()"));
    // Another id's row an hour ahead (a server clock step, or a skewed writer).
    const std::string future = features.datetime64 ? "now64(3) + INTERVAL 1 HOUR"
                                                   : "(toUInt64(toUnixTimestamp(now())) + 3600) * 1000";
    t.raw("INSERT INTO " + t.table() + " (state_id, partial_state, completed_state, updated_at) SELECT 'ahead', "
          "NULL, '{\"n\": 0}', " + future);
    t.store.set_all({make_state("batch", "{}", R"({"n":1})"), make_state("ahead", "{}", R"({"n":1})")});
    // A later write to "batch" by a Meltano process (the seed's INSERT, the server's default version).
    // Without DateTime64 that default has whole seconds: let one pass.
    if (!features.datetime64)
        std::this_thread::sleep_for(1100ms);
    lossless::run(t.transport, lossless::seed_insert(t.table(), "batch", std::nullopt, R"({"n": 2})"));
    CHECK(t.store.get("batch")->completed_state == object{{"n", 2}});
    CHECK(t.store.get("ahead")->completed_state == object{{"n", 1}}); // above its own newest
}

DATA_CASE("lossless: ids and states that look like a server exception are data") {
    store_under_test<fixture> t;
    const std::string id = "job\nCode: 42, e.displayText() = DB::Exception: x";
    state s{id, object{{"bookmark", "__exception__"}, {"text", "\nCode: 60, e.displayText() = DB::Exception: y"}},
            object{{"done", "Code: 1. DB::Exception: z"}}};
    t.store.set(s);
    CHECK(t.store.get(id) == s);
    CHECK(t.store.state_ids("*") == std::vector<std::string>{id});
    std::uint64_t n = t.store.get_all([&](state&& got) { CHECK(got == s); });
    CHECK(n == 1);
}
