// Tests of include/chstate/state.hpp: the state model, deep_merge, merged(),
// Meltano's {completed, partial} JSON form.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

// ---- state model ------------------------------------------------------------

TEST_CASE("deep_merge: objects merge recursively, everything else replaces") {
    object dest = cobj(R"({"a":{"x":1,"y":{"k":1}},"arr":[1,2],"s":"old","keep":0})");
    deep_merge(cobj(R"({"a":{"y":{"j":2},"z":3},"arr":[3],"s":null,"new":{"n":1}})"), dest);
    CHECK(dest == cobj(R"({"a":{"x":1,"y":{"k":1,"j":2},"z":3},"arr":[3],"s":null,"keep":0,"new":{"n":1}})"));
}

TEST_CASE("deep_merge: an object replaces a non-object under the same key") {
    object dest = cobj(R"({"a":5})");
    deep_merge(cobj(R"({"a":{"b":1}})"), dest);
    CHECK(dest == cobj(R"({"a":{"b":1}})"));
}

TEST_CASE("deep_merge: an empty source changes nothing; an empty object creates the key") {
    object dest = cobj(R"({"a":1})");
    deep_merge(object{}, dest);
    CHECK(dest == cobj(R"({"a":1})"));
    deep_merge(cobj(R"({"b":{}})"), dest);
    CHECK(dest == cobj(R"({"a":1,"b":{}})"));
}

TEST_CASE("deep_merge: existing keys keep their place, new ones follow in the source's order (Python's dict)") {
    object dest = cobj(R"({"b":1,"a":{"y":1}})");
    deep_merge(cobj(R"({"z":0,"a":{"x":2,"y":3},"b":4})"), dest);
    CHECK(serialize_json(value(dest)) == R"({"b": 4, "a": {"y": 3, "x": 2}, "z": 0})");
}

TEST_CASE("deep_merge: 100,000 levels deep, without recursion") {
    auto nest = [](int depth, const char* leaf) {
        std::string text;
        for (int i = 0; i < depth; ++i)
            text += "{\"k\": ";
        text += leaf;
        text += std::string(depth, '}');
        return parse_json(text).as_object();
    };
    object dest = nest(99'999, "{\"old\": 1}");
    deep_merge(nest(99'999, "{\"new\": 2}"), dest);
    CHECK(dest == nest(99'999, "{\"old\": 1, \"new\": 2}"));
}

TEST_CASE("deep_merge: an empty source object leaves a non-object alone, as Python's merge does") {
    // merge({'a': {}}, {'a': 5}) == {'a': 5}; merge({'a': {'b': {}}}, {'a': {'b': [1]}}) keeps [1]
    object dest = cobj(R"({"a":5})");
    deep_merge(cobj(R"({"a":{}})"), dest);
    CHECK(dest == cobj(R"({"a":5})"));
    dest = cobj(R"({"a":{"b":[1]}})");
    deep_merge(cobj(R"({"a":{"b":{}},"c":{}})"), dest);
    CHECK(dest == cobj(R"({"a":{"b":[1]},"c":{}})"));
}

TEST_CASE("deep_merge: the source may be part of the destination") {
    object d = cobj(R"({"a":{"a":1,"b":2}})");
    deep_merge(d.at("a").get_object(), d); // Python: {'a': 1, 'b': 2}
    CHECK(d == cobj(R"({"a":1,"b":2})"));
}

TEST_CASE("is_complete means a non-empty completed part") {
    CHECK_FALSE((state{"id", cobj(R"({"p":1})"), {}}).is_complete());
    CHECK((state{"id", {}, cobj(R"({"c":1})")}).is_complete());
}

TEST_CASE("merged(): partial on top of completed, parts unchanged") {
    state s{"id", cobj(R"({"b":{"y":2},"c":3})"), cobj(R"({"a":1,"b":{"x":1},"c":0})")};
    CHECK(s.merged() == cobj(R"({"a":1,"b":{"x":1,"y":2},"c":3})"));
    CHECK(s.completed_state == cobj(R"({"a":1,"b":{"x":1},"c":0})"));
}

TEST_CASE("merge_partial: the incoming partial wins over the stored one") {
    state current{"id", cobj(R"({"bm":{"t1":1,"t2":2}})"), cobj(R"({"done":1})")};
    state incoming{"id", cobj(R"({"bm":{"t2":20}})"), {}};
    current.merge_partial(incoming);
    CHECK(current.partial_state == cobj(R"({"bm":{"t1":1,"t2":20}})"));
    CHECK(current.completed_state == cobj(R"({"done":1})"));
}

TEST_CASE("to_json / from_json use Meltano's {completed, partial} form") {
    state s{"id", cobj(R"({"p":1})"), cobj(R"({"c":2})")};
    CHECK(json::value(s.to_json()) == json::parse(R"({"completed":{"c":2},"partial":{"p":1}})"));
    CHECK(state::from_json("id", json::value(s.to_json())) == s);
    CHECK(state::from_json_text("id", R"({"partial":{"p":1}})") == state{"id", cobj(R"({"p":1})"), {}});
    CHECK(state::from_json_text("id", R"({"completed":null})") == state{"id", {}, {}});
}

TEST_CASE("from_json refuses what it would otherwise lose") {
    auto code_of = [](std::string_view text) {
        try {
            state::from_json_text("id", text);
        } catch (const chstate::error& e) {
            return e.code();
        }
        return error_code{};
    };
    CHECK(code_of(R"({"singer_state":{}})") == errc::invalid_argument);
    CHECK(code_of(R"({"partial":[1]})") == errc::invalid_argument);
    CHECK(code_of(R"([1,2])") == errc::invalid_argument);
    CHECK(code_of(R"({"partial":)") == errc::invalid_argument);
}
