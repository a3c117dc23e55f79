// chstate::value and the JSON text it reads and writes (value.hpp,
// json_text.hpp): exact numbers, key order, lone surrogates, nesting far
// deeper than the call stack allows, and text byte-identical to what
// Python's json.dumps writes — checked against python3 itself.
#include <chstate/json_text.hpp> // and value.hpp

#include "complexity.hpp"

#include <boost/json/parse.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace chstate;

namespace {

std::string roundtrip(std::string_view text) { return serialize_json(parse_json(text)); }

/// what() of the E that f() throws, or "(nothing thrown)".
template <class E = chstate::error, class F>
std::string thrown(F f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    return "(nothing thrown)";
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

/// Checks that each text reads and writes back as the expected text.
void check_roundtrips(std::initializer_list<std::pair<std::string, std::string>> cases) {
    for (const auto& c : cases) { // (clang 14 cannot capture a structured binding in CAPTURE's lambda)
        CAPTURE(c.first);
        CHECK(roundtrip(c.first) == c.second);
    }
}

/// Checks that each text reads and writes back unchanged.
void check_unchanged(std::initializer_list<std::string> texts) {
    for (const std::string& text : texts) {
        CAPTURE(text);
        CHECK(roundtrip(text) == text);
    }
}

/// The `why` of a failed parse_json / serialize_json.
std::string parse_error(std::string_view text, json_limits limits = {}) {
    error_code ec;
    std::string why;
    CHECK(parse_json(text, ec, why, limits).is_null());
    CHECK(ec == errc::invalid_argument);
    return why;
}
std::string write_error(const value& v, json_limits limits = {}) {
    error_code ec;
    std::string why, out = "previous";
    serialize_json(v, out, ec, why, limits);
    CHECK((ec == errc::invalid_argument && out.empty()));
    return why;
}

/// `depth` arrays nested in one another ([[[]]]), or `depth` objects
/// nested under the key "k" with 1 innermost.
value nested(std::size_t depth, bool objects = false) {
    value v = objects ? value(1) : value(array());
    for (std::size_t i = objects ? 0 : 1; i < depth; ++i) {
        value outer = objects ? value(object()) : value(array());
        if (objects)
            outer.get_object().insert_or_assign("k", std::move(v));
        else
            outer.get_array().push_back(std::move(v));
        v = std::move(outer);
    }
    return v;
}

value& innermost(value& v) {
    value* p = &v;
    while (true) {
        if (p->is_array() && !p->get_array().empty())
            p = &p->get_array()[0];
        else if (p->is_object() && !p->get_object().empty())
            p = &p->get_object().begin()->second;
        else
            return *p;
    }
}

/// Runs `f` on a thread whose stack is only 256 KiB.
template <class F>
void run_on_small_stack(F& f) {
    pthread_attr_t attr;
    REQUIRE((pthread_attr_init(&attr) == 0 && pthread_attr_setstacksize(&attr, 256 * 1024) == 0));
    pthread_t thread;
    auto entry = [](void* p) -> void* { return (*static_cast<F*>(p))(), nullptr; };
    REQUIRE(pthread_create(&thread, &attr, entry, &f) == 0);
    pthread_attr_destroy(&attr);
    pthread_join(thread, nullptr);
}

/// Runs `command` through the shell; returns its standard output and exit status.
std::pair<std::string, int> run_command(const std::string& command) {
    std::string output;
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[65536];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe))
        output.append(buffer, n);
    const int status = ::pclose(pipe);
    return {output, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

std::filesystem::path temp_file(std::string name) {
    return std::filesystem::temp_directory_path() / ("chstate_value_" + std::to_string(::getpid()) + "_" + name);
}

// Prints json.dumps of 901 random values, one per line, covering what
// Meltano state holds: integers of every size; floats from random(), from
// random 64-bit patterns (NaN and ±inf included), around epoch seconds and
// across the exponent range; text with every kind of character (astral ones
// and lone surrogates included); nested lists and dicts. Given a file, it
// prints json.dumps(json.loads(line)) for each of its lines instead.
constexpr const char* python_generator = R"PY(
import json, random, struct, sys
rng = random.Random(20240611)
def rand_float():
    return rng.choice([
        lambda: rng.random(), lambda: struct.unpack('<d', rng.getrandbits(64).to_bytes(8, 'little'))[0],
        lambda: 1.7e9 + rng.random() * 1e8, lambda: rng.uniform(-1e6, 1e6),
        lambda: rng.randrange(-10**6, 10**6) / 10 ** rng.randrange(0, 8),
        lambda: rng.random() * 10.0 ** rng.randrange(-330, 308),
        lambda: rng.choice([0.0, -0.0, float('nan'), float('inf'), float('-inf'), 1e16, 1e15, 1e-5, 1e-4,
                            5e-324, 1.7976931348623157e308, 1e22, 123456789012345680.0, 0.1, 100.0])])()
def rand_int():
    return rng.choice([1, -1]) * rng.getrandbits(rng.choice([1, 7, 8, 16, 31, 32, 53, 62, 63, 64, 65, 100, 200, 1000]))
def rand_char():
    return rng.choice([
        lambda: chr(rng.randrange(0x20, 0x7f)), lambda: chr(rng.randrange(0, 0x80)),
        lambda: chr(rng.randrange(0x80, 0x800)), lambda: chr(rng.randrange(0x800, 0x10000)),
        lambda: chr(rng.randrange(0x10000, 0x110000)),
        lambda: chr(rng.choice([0xd800, 0xdbff, 0xdc00, 0xdfff, 0xd83d])),
        lambda: rng.choice('"\\/\b\f\n\r\t\x7f\x00 ')])()
rand_str = lambda: ''.join(rand_char() for _ in range(rng.randrange(0, 12)))
def rand_value(depth):
    nested = [lambda: [rand_value(depth + 1) for _ in range(rng.randrange(0, 5))],
              lambda: {rand_str(): rand_value(depth + 1) for _ in range(rng.randrange(0, 5))}]
    return rng.choice([lambda: None, lambda: rng.random() < 0.5, rand_int, rand_int, rand_float, rand_float,
                       rand_str] + (nested if depth < 4 else []))()
values = [rand_value(0) for _ in range(400)]
values += [rand_float() for _ in range(300)] + [rand_int() for _ in range(100)] + [rand_str() for _ in range(100)]
values.append({"bookmarks": {"users": {"replication_key": "updated_at", "replication_key_value": "2024-01-01"}},
               "epoch": 1700000000.8702567, "ids": [2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**63, -2**63 - 1, 10**400]})
if len(sys.argv) > 1: # echo mode: json.dumps(json.loads(line)) for each line of the file argv[1]
    values = [json.loads(line) for line in open(sys.argv[1], encoding='utf-8')]
for v in values:
    print(json.dumps(v))
)PY";

} // namespace

TEST_SUITE("json") {

// ---- value ------------------------------------------------------------------

TEST_CASE("value: kinds, accessors and normalised integers") {
    using k = value_kind;
    const std::pair<value, value_kind> kinds[] = {
        {value(), k::null}, {nullptr, k::null}, {true, k::boolean}, {"text", k::string} /* not bool */,
        {std::string("s"), k::string}, {std::string_view("sv"), k::string}, {-5, k::int64},
        {5u, k::int64} /* fits int64: stored as int64 */, {std::uint64_t(1) << 63, k::uint64},
        {short(7), k::int64}, {1.5f, k::float64}, {array{1, "two"}, k::array}, {object(), k::object}};
    for (const auto& [v, kind] : kinds)
        CHECK(to_string(v.kind()) == to_string(kind));
    CHECK(value(5) == value(5u));

    value v = 3;
    CHECK((v.is_number() && v.if_int64() && !v.if_double() && !v.if_contains("k")));
    CHECK_THROWS_AS(v.as_string(), chstate::error);
    CHECK(contains(thrown([&] { v.as_object(); }), "JSON value is int64, not object: invalid argument"));
    v.as_int64() = 4;
    CHECK(v == 4);
    v = "now a string";
    CHECK(v.as_string() == "now a string");
    v.emplace_object()["x"] = 1;
    CHECK((v.at("x") == 1 && v.if_contains("x") == &v.at("x")));
    CHECK_THROWS_AS(v.at("y"), std::out_of_range);
    v.emplace_array().push_back(9);
    CHECK(v.at(0) == 9);
    CHECK_THROWS_AS(v.at(1), std::out_of_range);

    // Assigning a value its own descendant.
    value tree = parse_json(R"({"a": {"b": [1, 2]}})");
    tree = tree.at("a").at("b");
    CHECK(serialize_json(tree) == "[1, 2]");
    tree = std::move(tree.at(1));
    CHECK(tree == 2);
    value moved_from = "x", target = std::move(moved_from);
    CHECK((moved_from.is_null() && target == "x"));
}

TEST_CASE("value: big_integer validates and normalises") {
    CHECK(value(big_integer("-0")) == 0);
    CHECK(value(big_integer("-9223372036854775808")) == std::numeric_limits<std::int64_t>::min());
    CHECK(value(big_integer("18446744073709551615")) == std::numeric_limits<std::uint64_t>::max());
    value big(big_integer("18446744073709551616"));
    CHECK((big.is_big_integer() && big.is_number()));
    CHECK(big.big_integer_text() == "18446744073709551616");
    CHECK(value(big_integer("-9223372036854775809")).big_integer_text() == "-9223372036854775809");
    CHECK((big == value(big_integer("18446744073709551616")) && !(big == value(big_integer("18446744073709551617")))));
    CHECK_THROWS_AS(value(5).big_integer_text(), chstate::error);
    for (const char* bad : {"", "-", "01", "+1", "1.0", "1e5", " 1", "12a", "--1", "-01"})
        CHECK_THROWS_AS((void)big_integer{bad}, chstate::error);
}

TEST_CASE("value: object keeps insertion order with Python dict semantics") {
    object o;
    o["b"] = 1;
    o["a"] = 2;
    o.insert_or_assign("c", 3);
    auto [it, inserted] = o.insert_or_assign("b", "replaced");
    CHECK((!inserted && it->first == "b"));
    for (auto& [key, v] : o) // structured bindings
        v = key;
    CHECK(serialize_json(o) == R"({"b": "b", "a": "a", "c": "c"})");
    CHECK((o.contains("a") && o.find("zz") == o.end() && o.find("c")->second == "c"));
    CHECK((o.erase("a") == 1 && o.erase("a") == 0));
    CHECK(serialize_json(o) == R"({"b": "b", "c": "c"})");
    CHECK(contains(thrown<std::out_of_range>([&] { o.at("missing key"); }), "no key \"missing key\""));
    CHECK((o["new"].is_null() && o.size() == 3)); // operator[] appends null
    // Order is part of the value.
    CHECK_FALSE(parse_json(R"({"a": 1, "b": 2})") == parse_json(R"({"b": 2, "a": 1})"));
    CHECK(parse_json(R"({"a": 1, "b": 2})") == parse_json(R"({"a": 1, "b": 2})"));
    o.clear();
    CHECK(o.empty());
}

TEST_CASE("value: large objects stay indexed through growth, erase and copy") {
    object o;
    const int n = 20000;
    for (int i = 0; i < n; ++i)
        o.insert_or_assign("key" + std::to_string(i), i);
    CHECK(o.size() == std::size_t(n));
    for (int i = 0; i < n; i += 97)
        CHECK(o.at("key" + std::to_string(i)) == i);
    CHECK_FALSE(o.contains("key" + std::to_string(n)));
    for (int i = 0; i < n; i += 1000)
        CHECK(o.erase("key" + std::to_string(i)) == 1);
    CHECK((o.size() == std::size_t(n - n / 1000) && !o.contains("key0")));
    CHECK((o.begin()->first == "key1" && std::next(o.begin(), 999)->first == "key1001"));
    object copy = o;
    CHECK(copy == o);
    copy.insert_or_assign("key1001", "changed");
    CHECK((copy.at("key1001") == "changed" && o.at("key1001") == 1001 && !(copy == o)));
    // Shrinking below the index threshold and growing again.
    object small;
    for (int i = 0; i < 20; ++i)
        small["k" + std::to_string(i)] = i;
    for (int i = 0; i < 18; ++i)
        small.erase("k" + std::to_string(i));
    CHECK((small.size() == 2 && small.at("k19") == 19));
    for (int i = 0; i < 40; ++i)
        small["n" + std::to_string(i)] = i;
    CHECK((small.at("n39") == 39 && small.at("k18") == 18));
    CHECK(std::next(small.begin(), 2)->first == "n0");
}

TEST_CASE("value: equality is type-strict, bitwise for doubles") {
    const std::tuple<value, value, bool> cases[] = {
        {1, 1.0, false}, {0, false, false}, {value(), 0, false}, {0.0, -0.0, false}, {-0.0, -0.0, true},
        {parse_json("NaN"), parse_json("NaN"), true}, {"1", 1, false}, {array{1}, array{1, 2}, false},
        {array{1, array{2}}, array{1, array{2}}, true}};
    for (const auto& [a, b, equal] : cases)
        CHECK((a == b) == equal);
    value small_uint = std::uint64_t(1) << 63;
    small_uint.as_uint64() = 7; // a small number stored as uint64 still equals int64 7
    CHECK((small_uint == value(7) && value(7) == small_uint));
}

TEST_CASE("value: Boost literal syntax and conversions to and from boost::json") {
    object o = {{"bookmarks", {{"users", 5}}}};
    CHECK(o.at("bookmarks").at("users") == 5);
    value v = {{"a", 1}, {"b", {1, 2, "x"}}, {"c", nullptr}, {"d", 2.5}, {"e", true}};
    CHECK(serialize_json(v) == R"({"a": 1, "b": [1, 2, "x"], "c": null, "d": 2.5, "e": true})");
    CHECK(value({1, "two", 3.0}).is_array());
    object dup = {{"k", 1}, {"other", 2}, {"k", 3}}; // a Python dict literal: first position, last value
    CHECK(serialize_json(dup) == R"({"k": 3, "other": 2})");

    const char* text = R"({"z": 1, "a": [18446744073709551615, 9223372036854775807, -1.5, "s", null, true], "m": {}})";
    boost::json::value b = boost::json::parse(text);
    value from_boost(b);
    CHECK(serialize_json(from_boost) == text);
    CHECK((from_boost.at("a").at(1).is_int64() && from_boost.to_boost() == b));
    const boost::json::object& bo = b.as_object();
    object converted = bo; // implicit, and back through the conversion operator
    CHECK((converted.at("z") == 1 && boost::json::object(converted) == bo && value(bo) == from_boost));
    CHECK(array(b.at("a").as_array()).to_boost() == b.at("a").as_array());

    // A big integer has no Boost equivalent: the error names its path.
    value big = parse_json(R"({"a": [1, 100000000000000000000000], "b": 2})");
    CHECK(thrown([&] { (void)big.to_boost(); }).starts_with(
          R"(the integer 100000000000000000000000 at $["a"][1] is outside int64/uint64 and cannot be converted )"
          R"(to boost::json: invalid argument)"));
    CHECK_THROWS_AS((void)boost::json::object(big.as_object()), chstate::error);
    CHECK_THROWS_AS((void)value(big_integer("-100000000000000000000")).to_boost(), chstate::error);
}

TEST_CASE("value: to_number converts exactly or refuses") {
    constexpr auto u64_max = std::numeric_limits<std::uint64_t>::max();
    constexpr auto i64_min = std::numeric_limits<std::int64_t>::min();
    CHECK((value(300).to_number<int>() == 300 && value(u64_max).to_number<std::uint64_t>() == u64_max));
    CHECK((value(3.0).to_number<int>() == 3 && value(-9223372036854775808.0).to_number<std::int64_t>() == i64_min));
    CHECK((value(1.5).to_number<double>() == 1.5 && value(0.5).to_number<float>() == 0.5f));
    CHECK(std::isinf(parse_json("Infinity").to_number<float>()));
    CHECK(value(std::int64_t(1) << 53).to_number<double>() == 9007199254740992.0);
    CHECK(value(i64_min).to_number<double>() == -9223372036854775808.0);
    CHECK(parse_json("1180591620717411303424").to_number<double>() == 1180591620717411303424.0); // 2**70
    // Refused: out of range, not integral, not representable, not a number.
    for (const value& v : {value(300), value(-1), value(3.5), parse_json("NaN"), value("7"), parse_json("1e400")})
        CHECK_THROWS_AS(v.to_number<std::uint8_t>(), chstate::error);
    for (const value& v : {value(u64_max), value(9223372036854775808.0), parse_json("18446744073709551616")})
        CHECK_THROWS_AS(v.to_number<std::int64_t>(), chstate::error);
    for (const value& v : {value(0.1), value(1e300), value(true), parse_json("1180591620717411303425")})
        CHECK_THROWS_AS(v.to_number<float>(), chstate::error);
    CHECK_THROWS_AS(value((std::int64_t(1) << 53) + 1).to_number<double>(), chstate::error);
    CHECK_THROWS_AS(parse_json("1180591620717411303425").to_number<double>(), chstate::error);
    CHECK_THROWS_AS(parse_json("1180591620717411303424").to_number<std::uint64_t>(), chstate::error);
    error_code ec;
    CHECK((value(true).to_number<int>(ec) == 0 && ec == errc::invalid_argument));
    CHECK((value(7).to_number<long>(ec) == 7 && !ec));
}

TEST_CASE("value: 1,000,000 levels are built, copied, compared and destroyed on a 256 KiB stack") {
    constexpr std::size_t depth = 1'000'000;
    std::vector<std::pair<const char*, bool>> results; // checked on this thread
    std::string failure;
    auto work = [&] {
        try {
            for (bool objects : {false, true}) {
                value a = nested(depth, objects), b = a;
                results.emplace_back("a copy is equal", a == b);
                innermost(b) = "changed";
                results.emplace_back("a changed copy differs", !(a == b));
                value c;
                c = b;
                results.emplace_back("a copy-assigned value is equal", c == b);
                array holder;
                holder.push_back(std::move(b)); // freed through ~array
            } // a, c and holder are freed here
            const std::string text = std::string(depth, '[') + std::string(depth, ']');
            results.emplace_back("text round-trips", serialize_json(parse_json(text, {depth}), {depth}) == text);
        } catch (const std::exception& e) {
            failure = e.what();
        }
    };
    run_on_small_stack(work);
    CHECK(failure == "");
    CHECK(results.size() == 7);
    for (const auto& result : results) {
        CAPTURE(result.first);
        CHECK(result.second);
    }
}

// ---- json_text --------------------------------------------------------------

TEST_CASE("json_text: floats round-trip exactly and are written as Python's repr") {
    check_unchanged({"1700000000.8702567", "[0.1, 0.2, 0.30000000000000004]", "2.2250738585072014e-308"});
    CHECK(parse_json("1700000000.8702567").as_double() == 1700000000.8702567);
    std::mt19937_64 rng(12345); // 10,000 random bit patterns
    for (int i = 0; i < 10000; ++i) {
        const double d = std::bit_cast<double>(rng());
        const std::string text = serialize_json(value(d));
        const value back = parse_json(text);
        REQUIRE(back.is_double());
        if (std::isnan(d))
            CHECK((text == "NaN" && std::isnan(back.get_double())));
        else
            CHECK(std::bit_cast<std::uint64_t>(back.get_double()) == std::bit_cast<std::uint64_t>(d));
        CHECK(serialize_json(back) == text);
    }
    // Python's repr(float): fixed notation from 1e-4 to below 1e16, then d.ddde±XX.
    constexpr double inf = std::numeric_limits<double>::infinity();
    const std::pair<double, const char*> cases[] = {
        {1.0, "1.0"}, {100.0, "100.0"}, {0.0, "0.0"}, {-0.0, "-0.0"}, {0.0001, "0.0001"}, {0.00001, "1e-05"},
        {1.5e-5, "1.5e-05"}, {1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1.5e16, "1.5e+16"},
        {123456789012345.6, "123456789012345.6"}, {1.2345e100, "1.2345e+100"}, {1e22, "1e+22"}, {-2.5, "-2.5"},
        {0.1, "0.1"}, {1.0 / 3, "0.3333333333333333"}, {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"}, {9007199254740993.0, "9007199254740992.0"},
        {1700000000.8702567, "1700000000.8702567"}, {inf, "Infinity"}, {-inf, "-Infinity"},
        {std::numeric_limits<double>::quiet_NaN(), "NaN"}};
    for (const auto& c : cases) {
        CAPTURE(c.second);
        CHECK(serialize_json(value(c.first)) == c.second);
    }
}

TEST_CASE("json_text: integers of any size keep every digit") {
    const std::string ten_400 = "1" + std::string(400, '0');
    check_unchanged({"0", "-1", ten_400, "[-" + ten_400 + "]", "9223372036854775807", "-9223372036854775808",
                     "9223372036854775808", "18446744073709551615", "18446744073709551616" /* 2**64 */,
                     "1180591620717411303424" /* 2**70 */, "-9223372036854775809" /* -2**63 - 1 */});
    check_roundtrips({{"-0", "0"}, {"1E2", "100.0"}});
    using k = value_kind;
    for (auto [text, kind] : {std::pair{"9223372036854775807", k::int64}, {"9223372036854775808", k::uint64},
                              {"18446744073709551616", k::big_integer}, {"-9223372036854775809", k::big_integer},
                              {"-0", k::int64}, {"1.0", k::float64}, {"1e2", k::float64}, {"-1E-2", k::float64}})
        CHECK(to_string(parse_json(text).kind()) == to_string(kind));
}

TEST_CASE("json_text: NaN, Infinity, overflow and underflow") {
    CHECK(std::isnan(parse_json("NaN").as_double()));
    CHECK(parse_json("[Infinity, -Infinity]") == value(array{HUGE_VAL, -HUGE_VAL}));
    // As Python's float(): "1e400" is inf, "1e-400" is 0.0.
    check_unchanged({"[NaN, Infinity, -Infinity]", "-0.0"});
    check_roundtrips({{"1e400", "Infinity"}, {"-1e400", "-Infinity"}, {"1e-400", "0.0"}, {"-1e-400", "-0.0"},
                      {"0.0000001e-99999999999999999999", "0.0"}, {"123.0e99999999999999999999", "Infinity"},
                      {"1" + std::string(400, '0') + ".0", "Infinity"}, {"0." + std::string(400, '0') + "1", "0.0"},
                      {"2.4703282292062328e-324", "5e-324"}, {"0e999999", "0.0"}});
    for (const char* bad : {"nan", "inf", "-NaN", "+1", "Infinit", "-", "1.", ".5", "1e", "1e+", "01", "-01", "0x1"})
        CHECK_THROWS_AS(parse_json(bad), chstate::error);
}

TEST_CASE("json_text: strings, escapes and surrogates") {
    CHECK(parse_json(R"("a\"\\\/\b\f\n\r\t")").as_string() == "a\"\\/\b\f\n\r\t");
    CHECK(serialize_json(value(std::string("\x00\x01\x1f\x7f", 4))) == R"("\u0000\u0001\u001f\u007f")");
    CHECK(serialize_json(value("caf\xC3\xA9 \xE2\x82\xAC")) == R"("caf\u00e9 \u20ac")");
    CHECK(parse_json(R"("\u00e9\u00E9")").as_string() == "\xC3\xA9\xC3\xA9");
    // Astral characters: raw UTF-8 in, a surrogate pair out.
    CHECK(serialize_json(value("\xF0\x9F\x98\x80")) == R"("\ud83d\ude00")");
    CHECK(parse_json(R"("\ud83d\ude00")").as_string() == "\xF0\x9F\x98\x80");
    // Lone surrogates are held in WTF-8 and written back as they came.
    CHECK(parse_json(R"(["\ud800", "\udfff"])") == value(array{"\xED\xA0\x80", "\xED\xBF\xBF"}));
    check_unchanged({R"("\ud800")", R"("\udfff")", R"("x\udc00y")", R"(["\udbff", "\ud800\ud800"])",
                     R"("\udc00\ud800")", R"("\ud800A")", R"({"\ud800": "\udfff"})"});
    check_roundtrips({{R"("a\"\\\/\b\f\n\r\t")", R"("a\"\\/\b\f\n\r\t")"},
                      {R"("\ud800\u0041")", R"("\ud800A")"}, // Python: '\ud800A'
                      {"\"\xE6\x97\xA5\xE6\x9C\xAC\"", R"("\u65e5\u672c")"}}); // raw non-ASCII comes out escaped
    // A surrogate pair encoded as two WTF-8 halves is not a valid string.
    CHECK(write_error(std::string("\xED\xA0\xBD\xED\xB8\x80")) ==
          "the string at $ is not valid UTF-8 (byte 3 of the string)");
}

TEST_CASE("json_text: duplicate keys and key order follow Python's dict") {
    check_unchanged({R"({"z": 1, "y": 2, "x": 3})", "[]", "{}", "[[], {}, [{}]]"});
    check_roundtrips({{R"({"a": 1, "b": 2, "a": 3})", R"({"a": 3, "b": 2})"},
                      {R"({"a": {"x": 1}, "a": [2]})", R"({"a": [2]})"},
                      {" \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\":{}}\n ", R"({"a": [1, 2], "b": {}})"}});
    std::string text = "{"; // 100 entries over 40 keys: indexed, with duplicates
    for (int i = 0; i < 100; ++i)
        text += "\"k" + std::to_string(i % 40) + "\": " + std::to_string(i) + ",";
    text.back() = '}';
    const value v = parse_json(text);
    REQUIRE(v.as_object().size() == 40);
    CHECK((v.as_object().begin()->first == "k0" && v.at("k0") == 80 && v.at("k39") == 79));
}

TEST_CASE("json_text: depth 10,000 and 100,000 parse, write, copy, compare and destroy") {
    for (std::size_t depth : {std::size_t(10'000), std::size_t(100'000)}) {
        CAPTURE(depth);
        std::string objects;
        for (std::size_t i = 0; i < depth; ++i)
            objects += "{\"k\": ";
        objects += "1" + std::string(depth, '}');
        for (const std::string& text : {std::string(depth, '[') + std::string(depth, ']'), objects}) {
            value v = parse_json(text);
            CHECK(serialize_json(v) == text);
            value copy = v;
            CHECK(copy == v);
            innermost(copy) = "changed";
            CHECK_FALSE(copy == v);
        }
    }
    // One level more than the limit is refused on both sides.
    const std::string too_deep = std::string(100'001, '[') + std::string(100'001, ']');
    CHECK(parse_error(too_deep) == "nested deeper than 100000 levels at byte 100000");
    CHECK(parse_error("[[{\"a\": []}]]", json_limits{3}) == "nested deeper than 3 levels at byte 8");
    CHECK(parse_json("[[{\"a\": 1}]]", json_limits{3}).is_array());
    CHECK(parse_json("5", json_limits{0}) == 5);
    const std::string why = write_error(nested(100'001));
    CHECK(why.starts_with("nested deeper than the limit of 100000 levels at $[0][0][0]"));
    CHECK(contains(why, "more levels"));
    CHECK(write_error(parse_json(R"({"a": [[1]]})"), json_limits{2}) ==
          R"(nested deeper than the limit of 2 levels at $["a"][0])");
    CHECK(serialize_json(parse_json(R"({"a": [1]})"), json_limits{2}) == R"({"a": [1]})");
}

TEST_CASE("json_text: errors say what and where") {
    // Not UTF-8: a stray byte, a truncated sequence, an overlong form, an
    // encoded surrogate, a code point above U+10FFFF, a byte outside strings.
    // A BOM is refused, as by Python's json.loads of a str.
    const std::pair<std::string, const char*> cases[] = {
        {"\"ab\xFF\"", "invalid UTF-8 at byte 3"}, {"[\"\xC3\"]", "invalid UTF-8 at byte 2"},
        {"\"\xC0\xAF\"", "invalid UTF-8 at byte 1"}, {"\"\xED\xA0\x80\"", "invalid UTF-8 at byte 1"},
        {"\"\xF4\x90\x80\x80\"", "invalid UTF-8 at byte 1"}, {"[1, \xFF]", "invalid UTF-8 at byte 4"},
        {"\"a\nb\"", "invalid control character in string at byte 2"},
        {"\"\x01\"", "invalid control character in string at byte 1"},
        {"[1, 2] x", "extra data after the JSON value at byte 7"},
        {std::string("[1]\0", 4), "extra data after the JSON value at byte 3"}, {"{\"a\" 1}", "expected ':' at byte 5"},
        {"{\"a\": 1,}", "expected a string key at byte 8"}, {"[1,]", "expected a JSON value at byte 3"},
        {"[1 2]", "expected ',' or ']' at byte 3"}, {"", "expected a JSON value but the text ended at byte 0"},
        {"[1, 2", "the text ended inside an array at byte 5"}, {"\"abc", "unterminated string starting at byte 0"},
        {R"("\x")", "invalid escape at byte 1"}, {R"("\u12g4")", "invalid \\u escape at byte 1"},
        {R"("\ud800\u12g4")", "invalid \\u escape at byte 7"}, {"\xEF\xBB\xBF{}", "expected a JSON value at byte 0"},
        {"tru", "expected a JSON value at byte 0"}};
    for (const auto& c : cases) {
        CAPTURE(c.first);
        CHECK(parse_error(c.first) == c.second);
    }
    CHECK(thrown([] { parse_json("[1, 2"); })
              .starts_with("invalid JSON: the text ended inside an array at byte 5: invalid argument"));

    value v = {{"a", {1, 2, 3, "x"}}};
    v.at("a").at(3).as_string() = "ab\xFF";
    CHECK(write_error(v) == R"(the string at $["a"][3] is not valid UTF-8 (byte 2 of the string))");
    CHECK(thrown([&] { serialize_json(v); })
              .starts_with(R"(cannot write JSON: the string at $["a"][3] is not valid UTF-8 (byte 2 of the string): )"));
    object bad_key;
    bad_key["ok"].emplace_object()["k\xC3"] = 1;
    CHECK(write_error(bad_key) == R"(the key at $["ok"]["k\xc3"] is not valid UTF-8 (byte 1 of the key))");
}

TEST_CASE("json_text: an object of 1,000,000 keys parses in linear time") {
    // Linear, checked as a ratio (tests/complexity.hpp): twice the keys may
    // cost at most 3.5x the user CPU time (a quadratic parse costs 4x and
    // more); the best of 5 rounds. Measured: 2.19-2.34 beside a full test
    // run, 2.74 inside one on a fresh clone (the larger object's cache and
    // TLB misses are user time too); with the kernel's time counted as well,
    // 3.02 and 3.03 there, which failed a bound of 3. Not 250,000 against 1,000,000 keys: that measured
    // 4.2 idle and 12.7 on a fresh clone, where the small parse reused
    // memory already faulted in and the large one faulted in its own.
    auto object_text = [](int n) {
        std::string text = "{";
        for (int i = 0; i < n; ++i)
            text += "\"key_" + std::to_string(i) + "\": " + std::to_string(i) + (i + 1 < n ? ", " : "}");
        return text;
    };
    constexpr int n = 1'000'000;
    const std::string half = object_text(n / 2), text = object_text(n);
    const auto g = test::growth_of([&] { (void)parse_json(half); }, [&] { (void)parse_json(text); }, 5);
    MESSAGE("500,000 vs 1,000,000 keys: " << g);
    CHECK(g.ratio() < 3.5);
    value v = parse_json(text);
    REQUIRE(v.as_object().size() == std::size_t(n));
    CHECK((v.at("key_999999") == 999999 && std::next(v.as_object().begin(), 500000)->first == "key_500000"));
    CHECK(serialize_json(v) == text);
}

TEST_CASE("json_text: byte-identical to Python's json.dumps (needs python3)") {
    // Python's text, read and written back.
    const auto script = temp_file("generate.py");
    std::ofstream(script) << python_generator;
    const auto [generated, status] = run_command("python3 " + script.string());
    REQUIRE_MESSAGE(status == 0, "python3 must be installed to run this test");
    std::istringstream lines(generated);
    int count = 0, identical = 0;
    for (std::string line; std::getline(lines, line); ++count) {
        std::string back;
        const std::string error = thrown([&] { back = roundtrip(line); });
        CHECK_MESSAGE(back == line, "python wrote: ", line, "; ", error);
        identical += back == line;
    }
    CHECK(count == 901);
    MESSAGE(identical << " of " << count << " json.dumps texts reproduced byte for byte");

    // Our text, read and written back by Python: 10,000 random doubles and
    // strings of every kind of character.
    std::mt19937_64 rng(777);
    std::string ours;
    for (int line = 0; line < 100; ++line) {
        array a;
        for (int k = 0; k < 100; ++k)
            a.push_back(std::bit_cast<double>(rng()));
        std::string s;
        for (int k = 0; k < 20; ++k) {
            const auto cp = static_cast<char32_t>(rng() % 0x110000);
            detail::append_utf8(s, cp);
            if (cp >= 0xD800 && cp <= 0xDBFF)
                s += 'x'; // keep a high surrogate lone (a following low one would make a pair)
        }
        a.push_back(std::move(s));
        ours += serialize_json(value(std::move(a))) + "\n";
    }
    const auto data = temp_file("ours.json");
    std::ofstream(data) << ours;
    const auto [echoed, echo_status] = run_command("python3 " + script.string() + " " + data.string());
    std::filesystem::remove(script);
    std::filesystem::remove(data);
    REQUIRE(echo_status == 0);
    CHECK(echoed == ours);
}

} // TEST_SUITE
