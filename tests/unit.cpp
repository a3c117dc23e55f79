// Engine-free tests: the state model and merge rules, SQL text and quoting,
// glob translation, reply parsing, configuration, errors and the manual clock.
#include "support.hpp"

#include <chstate/detail/http/reply.hpp>
#include <chstate/detail/http/request.hpp>
#include <chstate/detail/rows.hpp>
#include <chstate/detail/server_error.hpp>
#include <chstate/detail/statements.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <doctest/doctest.h>

#include <array>
#include <map>
#include <mutex>

using namespace chstate;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {
json::object obj(std::string_view text) { return json::parse(text).as_object(); }
object cobj(std::string_view text) { return parse_json(text).as_object(); }
}

TEST_SUITE("unit") {

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

TEST_CASE("glob_match: * any run, ? one character (a UTF-8 sequence or a lone byte), all else literal bytes") {
    using detail::glob_match;
    CHECK(detail::glob_matches_all(""));
    CHECK(detail::glob_matches_all("*"));
    CHECK_FALSE(detail::glob_matches_all("**x"));
    CHECK(glob_match("dev_a*", "dev_abc"));
    CHECK_FALSE(glob_match("dev_a*", "devXabc")); // _ and % are literal
    CHECK(glob_match("100%?", "100%x"));
    CHECK_FALSE(glob_match("100%?", "1000x"));
    CHECK(glob_match("a\\b", "a\\b"));
    CHECK(glob_match("a*b", "a\xff" "b"));          // LIKE missed this: not UTF-8
    CHECK(glob_match("a?b", "a\xff" "b"));          // a lone byte is one character
    CHECK(glob_match("a?b", "a\xc3\xa9" "b"));     // é: one character of two bytes
    CHECK_FALSE(glob_match("a?b", "a\xc3\xa9\xa9" "b"));
    CHECK(glob_match("a??b", "a\xed\xa0" "b"));    // a truncated surrogate: two lone bytes
    CHECK(glob_match("a???b", "a\xed\xa0\x80" "b")); // a WTF-8 surrogate is three lone bytes
    CHECK(glob_match("*", std::string("\0", 1)));
    CHECK(glob_match("?", std::string("\0", 1)));
    CHECK_FALSE(glob_match("?", ""));
    CHECK(glob_match("*?*", "x"));
    CHECK_FALSE(glob_match("*?*?*", "x"));
    CHECK(glob_match("a*b*c", "a-b-b-c"));
    CHECK_FALSE(glob_match("a*b*c", "a-b-b-"));
    CHECK(glob_match("exact", "exact"));
    CHECK_FALSE(glob_match("exact", "exactly"));
    CHECK(detail::glob_literal_prefix("ab?c*") == "ab");
    CHECK(detail::glob_literal_prefix("*ab") == "");
    CHECK(detail::glob_literal_prefix("abc") == "abc");
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

TEST_CASE("statements: the seed's DDL on a modern server") {
    detail::statements st(detail::table_names("meltano", "state"), detail::server_features::from_version("26.5.1.1"));
    CHECK(st.create_database().sql == "CREATE DATABASE IF NOT EXISTS `meltano`");
    CHECK(st.create_state_table().sql ==
          "CREATE TABLE IF NOT EXISTS `meltano`.`state` (state_id String, partial_state Nullable(String), "
          "completed_state Nullable(String), updated_at DateTime64(3) DEFAULT now64(3)) "
          "ENGINE = ReplacingMergeTree(updated_at) ORDER BY state_id");
    CHECK(st.create_lock_table().sql ==
          "CREATE TABLE IF NOT EXISTS `meltano`.`state_lock` (state_id String, lock_id String, locked_at DateTime "
          "DEFAULT now()) ENGINE = ReplacingMergeTree(locked_at) ORDER BY state_id TTL locked_at + INTERVAL 300 SECOND");
}

TEST_CASE("statements: the state INSERT per write_versions and server") {
    const detail::table_names names("meltano", "state");
    const auto modern = detail::server_features::from_version("26.5.1.1");
    // clock: the seed's statement, verbatim.
    detail::statements seed(names, modern, false);
    CHECK_FALSE(seed.monotonic_versions());
    CHECK(seed.insert_state("id", "{}", std::nullopt).sql ==
          "INSERT INTO `meltano`.`state` (state_id, partial_state, completed_state) VALUES ({state_id:String}, "
          "{partial_state:Nullable(String)}, {completed_state:Nullable(String)})");
    // monotonic (default): the server computes the version inside the INSERT.
    detail::statements mono(names, modern);
    CHECK(mono.monotonic_versions());
    auto m = mono.insert_state("id", "{}", std::nullopt);
    CHECK(m.sql ==
          "INSERT INTO `meltano`.`state` (state_id, partial_state, completed_state, updated_at) SELECT "
          "{state_id:String}, {partial_state:Nullable(String)}, {completed_state:Nullable(String)}, "
          "greatest(now64(3), (SELECT max(updated_at) FROM `meltano`.`state` WHERE state_id = {state_id:String}) "
          "+ INTERVAL 1 MILLISECOND)");
    CHECK(m.parameters.size() == 3);
    // fenced: written only while the lease (its lock_id) holds the newest
    // grant and has not released it; renewals move it to newer tokens, so
    // the holder is named by lock_id, not by token.
    const std::string lease_id = "8a0c7e1e-0000-4000-8000-000000000001";
    auto f = mono.insert_state("id", "{}", std::nullopt, 0, lease_id);
    CHECK(f.sql.find(" WHERE (SELECT max(token) FROM `meltano`.`state_grant` WHERE state_id = {state_id:String}) = "
                     "(SELECT max(token) FROM `meltano`.`state_grant` WHERE state_id = {state_id:String} AND kind = "
                     "'grant' AND lock_id = {lock_id:String}) AND (SELECT count() FROM `meltano`.`state_grant` WHERE "
                     "state_id = {state_id:String} AND kind = 'release' AND lock_id = {lock_id:String}) = 0") !=
          std::string::npos);
    CHECK(f.parameters.back().name == "lock_id");
    CHECK(f.parameters.back().value == lease_id);
    CHECK(f.name == "state.insert_fenced");
    auto fd = mono.delete_state("id", lease_id);
    // A delete is a mutation: no parameter, the id named by its SHA-256, the
    // lease's own UUID as a quoted literal.
    const std::string id_test = "SHA256(state_id) = unhex('" + detail::sha256_hex("id") + "')";
    CHECK(fd.sql == "DELETE FROM `meltano`.`state` WHERE " + id_test + " AND (SELECT max(token) FROM "
                    "`meltano`.`state_grant` WHERE " + id_test + ") = (SELECT max(token) FROM `meltano`.`state_grant` "
                    "WHERE " + id_test + " AND kind = 'grant' AND lock_id = '" + lease_id + "') AND (SELECT count() "
                    "FROM `meltano`.`state_grant` WHERE " + id_test + " AND kind = 'release' AND lock_id = '" +
                    lease_id + "') = 0");
    CHECK(fd.parameters.empty());
    // fenced under the seed's versions: the same condition on an INSERT … SELECT.
    auto fs = seed.insert_state("id", "{}", std::nullopt, 0, lease_id);
    CHECK(fs.sql.starts_with("INSERT INTO `meltano`.`state` (state_id, partial_state, completed_state) SELECT "));
    CHECK(fs.sql.find("{lock_id:String}") != std::string::npos);
    // No DateTime64 (18.16): the store's milliseconds, raised above the id's newest.
    const auto old = detail::server_features::from_version("18.16.1");
    auto o = detail::statements(names, old).insert_state("id", "{}", std::nullopt, 1767225600123);
    CHECK(o.sql.find("greatest({updated_at:UInt64}, (SELECT max(updated_at) FROM `meltano`.`state` WHERE "
                     "state_id = {state_id:String}) + 1)") != std::string::npos);
    CHECK(o.parameters.back().value == "1767225600123");
    auto oc = detail::statements(names, old, false).insert_state("id", "{}", std::nullopt, 1767225600123);
    CHECK(oc.sql.ends_with("{updated_at:UInt64})"));
    CHECK(oc.sql.find("VALUES") != std::string::npos);
    // DateTime64 without millisecond intervals (20.1–22.3): falls back to the clock.
    CHECK_FALSE(detail::statements(names, detail::server_features::from_version("21.8.1")).monotonic_versions());
    CHECK(detail::statements(names, detail::server_features::from_version("22.4.1")).monotonic_versions());
}

TEST_CASE("statements: values are only ever bound parameters") {
    detail::statements st(detail::table_names("meltano", "state"), {});
    const std::string evil = "x' OR 1=1 --";
    for (const statement& s : {st.select_state(evil), st.insert_state(evil, evil, std::nullopt),
                               st.insert_state(evil, evil, evil, 1, evil), st.select_state_ids(evil + "*"),
                               st.select_lock_holder(evil), st.select_newest_versions({evil}, 0)}) {
        CHECK(s.sql.find(evil) == std::string::npos);
        CHECK_FALSE(s.parameters.empty());
    }
    // Deletes are mutations: they carry no value at all, only the id's SHA-256.
    for (const statement& s : {st.prune_grants(evil, 3), st.delete_state(evil),
                               st.delete_state(evil, std::string("8a0c7e1e-0000-4000-8000-000000000002")),
                               st.delete_lock(evil, "8a0c7e1e-0000-4000-8000-000000000001")}) {
        CHECK(s.sql.find(evil) == std::string::npos);
        CHECK(s.sql.find(detail::sha256_hex(evil)) != std::string::npos);
        CHECK(s.parameters.empty());
    }
    const std::string huge(1 << 20, 'x'); // a 1 MiB id: derived text stays small
    CHECK(st.delete_state(huge).sql.size() < 200);
    auto get = st.select_state("dev:job");
    CHECK(get.sql == "SELECT partial_state, completed_state FROM `meltano`.`state` FINAL WHERE state_id = "
                     "{state_id:String} LIMIT 1");
    CHECK(get.parameters.at(0).value == "dev:job");
}

TEST_CASE("statements: state_ids narrows by the glob's literal prefix, never with LIKE") {
    detail::statements st(detail::table_names("m", "s"), {});
    CHECK(st.select_state_ids("*").sql == "SELECT DISTINCT state_id FROM `m`.`s` FINAL ORDER BY state_id");
    CHECK(st.select_state_ids("").sql == st.select_state_ids("*").sql);
    auto filtered = st.select_state_ids("dev_*");
    CHECK(filtered.sql == "SELECT DISTINCT state_id FROM `m`.`s` FINAL WHERE startsWith(state_id, "
                          "{prefix:String}) ORDER BY state_id");
    CHECK(filtered.parameters.at(0).value == "dev_");
    auto exact = st.select_state_ids("dev_a");
    CHECK(exact.sql.find("WHERE state_id = {state_id:String}") != std::string::npos);
    CHECK(exact.parameters.at(0).value == "dev_a");
    // A leading wildcard: every id comes back, the library decides.
    CHECK(st.select_state_ids("*x").sql == st.select_state_ids("*").sql);
}

TEST_CASE("statements: lock times are whole epoch seconds from the caller's clock") {
    detail::statements st(detail::table_names("m", "s"), {});
    auto t = time_point{std::chrono::seconds{1767225600}} + 900ms;
    auto ins = st.insert_lock_candidate("id", "L", t);
    CHECK(ins.parameters.at(2).value == "1767225600");
    auto stale = st.delete_stale_locks(t - 300s);
    CHECK(stale.sql.ends_with("WHERE locked_at < toDateTime(1767225300)"));
}

TEST_CASE("sha256: FIPS 180-4 test vectors") {
    CHECK(detail::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(detail::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(detail::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(detail::sha256_hex(std::string(1000000, 'a')) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    // 55, 56 and 64 bytes: the padding edges.
    CHECK(detail::sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    CHECK(detail::sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    CHECK(detail::sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST_CASE("http: parameters travel as one external table, never in the SQL text") {
    statement st{"INSERT INTO t (a, b) VALUES ({a:String}, {b:Nullable(String)})",
                 {{"a", "String", std::string("x\ty\\z\n")}, {"b", "Nullable(String)", std::nullopt}}, {}, {}, false};
    detail::parameter_table out;
    diagnostics d;
    REQUIRE_FALSE(detail::bind_parameters_as_table(st, "_v", out, d));
    CHECK(out.sql == "INSERT INTO t (a, b) SELECT (SELECT a FROM _v), (SELECT b FROM _v)");
    CHECK(out.structure == "a String, b Nullable(String)");
    CHECK(out.row == "x\\ty\\\\z\\n\t\\N\n");
    statement unbound{"SELECT {c:String}", {}, {}, {}, true};
    CHECK(detail::bind_parameters_as_table(unbound, "_v", out, d) == errc::invalid_argument);
}

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

TEST_CASE("exception_code reads old and new exception texts") {
    CHECK(detail::exception_code("Code: 46, e.displayText() = DB::Exception: Unknown function nosuchfn") == 46);
    CHECK(detail::exception_code("Code: 81. DB::Exception: Database x does not exist. (UNKNOWN_DATABASE)") == 81);
    CHECK_FALSE(detail::exception_code("no code here"));
    CHECK_FALSE(detail::exception_code("Code: abc"));
}

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

// ---- configuration ------------------------------------------------------------------

TEST_CASE("config: a full clickhouse URI, percent-decoded") {
    auto c = config::from_uri("clickhouse://us%40er:p%3Ass%2Fw@db.example:9000/analytics?secure=true");
    CHECK(c.engine == config::engine_kind::http);
    CHECK(c.user == "us@er");
    CHECK(c.password == "p:ss/w");
    CHECK(c.host == "db.example");
    CHECK(c.port == 9000);
    CHECK(c.database == "analytics");
    CHECK(c.secure);
    CHECK(c.store.schema == "meltano");
    CHECK(c.store.table == "state");
}

TEST_CASE("config: defaults follow the seed") {
    auto c = config::from_uri("clickhouse://u@h/d");
    CHECK(c.port == 8123);
    CHECK(c.password.empty());
    CHECK_FALSE(c.secure);
    config d;
    CHECK(d.host == "localhost");
    CHECK(d.store.lock.timeout == 30s);
    CHECK(d.store.lock.stale_age == 300s);
    CHECK(d.store.lock.settle == 1s);
}

TEST_CASE("config: a URI without user or database names what is missing") {
    auto message_of = [](std::string_view uri) {
        error_code ec;
        diagnostics d;
        config::from_uri(uri, ec, d);
        CHECK(ec == errc::invalid_configuration);
        return d.message;
    };
    CHECK(message_of("clickhouse://host:8123/db").find("no user") != std::string::npos);
    CHECK(message_of("clickhouse://u:secretpw@host:8123").find("no database") != std::string::npos);
    CHECK(message_of("clickhouse://u:secretpw@host:99999/db").find("port") != std::string::npos);
    CHECK(message_of("ftp://u@h/d").find("scheme") != std::string::npos);
    CHECK(message_of("clickhouse://u@h/d?secure=maybe").find("secure") != std::string::npos);
    CHECK(message_of("clickhouse://u:secretpw@h/d?color=red").find("color") != std::string::npos);
    CHECK(message_of("chdb:").find("folder") != std::string::npos);
}

TEST_CASE("config: errors and redacted URIs never show the password") {
    error_code ec;
    diagnostics d;
    config::from_uri("clickhouse://u:hunter2@host:notaport/db", ec, d);
    CHECK(ec);
    CHECK(d.message.find("hunter2") == std::string::npos);
    auto c = config::from_uri("clickhouse://u:hunter2@host/db");
    CHECK(c.redacted_uri() == "clickhouse://u:***@host:8123/db");
}

TEST_CASE("config: chdb URIs select the embedded engine") {
    auto abs = config::from_uri("chdb:///var/lib/state?schema=pipes&table=bookmarks");
    CHECK(abs.engine == config::engine_kind::embedded);
    CHECK(abs.embedded_path == "/var/lib/state");
    CHECK(abs.store.schema == "pipes");
    CHECK(abs.store.table == "bookmarks");
    CHECK(config::from_uri("chdb:relative/dir").embedded_path == "relative/dir");
}

TEST_CASE("config: environment overrides win over the URI") {
    std::map<std::string, std::string> env{
        {"MELTANO_STATE_BACKEND_URI", "clickhouse://u:p@h:8123/db"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_HOST", "other"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_PORT", "18123"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_SCHEMA", "s2"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_TABLE", "t2"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_SECURE", "TRUE"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD", "p2"},
    };
    auto lookup = [&](const char* k) -> std::optional<std::string> {
        auto it = env.find(k);
        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    auto c = config::from_environment(lookup);
    CHECK(c.host == "other");
    CHECK(c.port == 18123);
    CHECK(c.store.schema == "s2");
    CHECK(c.store.table == "t2");
    CHECK(c.secure);
    CHECK(c.password == "p2");
    CHECK(c.user == "u");
    env["MELTANO_STATE_BACKEND_CLICKHOUSE_PORT"] = "eighty";
    error_code ec;
    diagnostics d;
    config::from_environment(lookup, ec, d);
    CHECK(ec == errc::invalid_configuration);
    CHECK(d.message.find("PORT") != std::string::npos);
}

// ---- configuration: hostile values ----------------------------------------------------

namespace {
/// The control characters: 0x00–0x1F and 0x7F.
std::vector<char> control_characters() {
    std::vector<char> out;
    for (int c = 0; c < 0x20; ++c)
        out.push_back(static_cast<char>(c));
    out.push_back(static_cast<char>(0x7F));
    return out;
}

std::string percent(char c) {
    static constexpr char hex[] = "0123456789ABCDEF";
    const auto u = static_cast<unsigned char>(c);
    return std::string("%") + hex[u >> 4] + hex[u & 15];
}

struct uri_result {
    error_code ec;
    std::string message;
};

uri_result parse_uri(const std::string& uri) {
    uri_result r;
    diagnostics d;
    config::from_uri(uri, r.ec, d);
    r.message = d.message;
    return r;
}

environment_lookup lookup_in(const std::map<std::string, std::string>& env) {
    return [&env](const char* k) -> std::optional<std::string> {
        auto it = env.find(k);
        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }
}

TEST_CASE("config: the issue's header injection through the password is refused, value unshown") {
    auto r = parse_uri("clickhouse://u:a%0D%0AX-Injected%3A%201@host:27432/default");
    CHECK(r.ec == errc::invalid_configuration);
    CHECK(contains(r.message, "password"));
    CHECK_FALSE(contains(r.message, "X-Injected"));
    CHECK_FALSE(contains(r.message, "\r"));
    CHECK_FALSE(contains(r.message, "0x0D")); // not even the byte, for a password
}

TEST_CASE("config: every control character in every URI setting is refused, naming the setting") {
    for (char ch : control_characters()) {
        const std::string c = percent(ch);
        CAPTURE(static_cast<int>(static_cast<unsigned char>(ch)));
        struct probe {
            std::string uri, names, hidden;
        };
        const probe probes[] = {
            {"clickhouse://ali" + c + "ce:pw@h/db", "the user", "ali"},
            {"clickhouse://u:hun" + c + "ter2@h/db", "the password", "hun"},
            {"clickhouse://u:p@ho" + c + "st/db", "the host", ""},
            {"clickhouse://u:p@h/d" + c + "b", "the database", ""},
            {"clickhouse://u:p@h/db?schema=s" + c + "x", "parameter schema", ""},
            {"clickhouse://u:p@h/db?table=t" + c + "x", "parameter table", ""},
            {"chdb:///var/li" + c + "b/state", "the data folder", ""},
            {"chdb:rel/dir?schema=s" + c + "x", "parameter schema", ""},
            {"chdb:rel/dir?table=t" + c + "x", "parameter table", ""},
        };
        for (const auto& p : probes) {
            CAPTURE(p.uri);
            auto r = parse_uri(p.uri);
            CHECK(r.ec == errc::invalid_configuration);
            CHECK(contains(r.message, p.names));
            CHECK(contains(r.message, "control character"));
            CHECK(detail::find_control_character(r.message) == std::string::npos);
            if (!p.hidden.empty())
                CHECK_FALSE(contains(r.message, p.hidden));
        }
    }
    // The printable neighbours pass.
    auto ok = config::from_uri("clickhouse://al%20ice:p%C3%A4ss%20w@h/d%20b?schema=s%7Ex&table=t%C3%A9");
    CHECK(ok.user == "al ice");
    CHECK(ok.password == "p\xC3\xA4ss w");
    CHECK(ok.database == "d b");
}

TEST_CASE("config: a control character in an environment override is refused, naming the variable") {
    const char* keys[] = {"HOST", "USER", "PASSWORD", "DATABASE", "SCHEMA", "TABLE"};
    for (char ch : control_characters()) {
        CAPTURE(static_cast<int>(static_cast<unsigned char>(ch)));
        for (const char* key : keys) {
            CAPTURE(key);
            const std::string var = std::string("MELTANO_STATE_BACKEND_CLICKHOUSE_") + key;
            std::map<std::string, std::string> env{{"MELTANO_STATE_BACKEND_URI", "clickhouse://u:p@h:8123/db"},
                                                   {var, std::string("secr") + ch + "etvalue"}};
            error_code ec;
            diagnostics d;
            config::from_environment(lookup_in(env), ec, d);
            CHECK(ec == errc::invalid_configuration);
            CHECK(contains(d.message, var));
            CHECK_FALSE(contains(d.message, "secr"));
            CHECK_FALSE(contains(d.message, "etvalue"));
            CHECK(detail::find_control_character(d.message) == std::string::npos);
        }
    }
    // Through the URI, the message says where it came from.
    std::map<std::string, std::string> env{{"MELTANO_STATE_BACKEND_URI", "clickhouse://u:p%0A@h/db"}};
    error_code ec;
    diagnostics d;
    config::from_environment(lookup_in(env), ec, d);
    CHECK(ec == errc::invalid_configuration);
    CHECK(contains(d.message, "MELTANO_STATE_BACKEND_URI"));
    CHECK(contains(d.message, "password"));
}

TEST_CASE("config: make_http_options refuses a hand-made config with a control character") {
    config c;
    c.password = "a\r\nX-Injected: 1";
    error_code ec;
    diagnostics d;
    make_http_options(c, ec, d);
    CHECK(ec == errc::invalid_configuration);
    CHECK(contains(d.message, "config.password"));
    CHECK_FALSE(contains(d.message, "X-Injected"));
    CHECK_THROWS_AS(make_http_options(c), chstate::error);
    c.password = "fine";
    c.user = "u\n";
    make_http_options(c, ec, d);
    CHECK(contains(d.message, "config.user"));
    c.user = "u";
    c.host = "h\rX: 1";
    make_http_options(c, ec, d);
    CHECK(contains(d.message, "config.host"));
    c.host = "h";
    c.database = std::string("d\0b", 3);
    make_http_options(c, ec, d);
    CHECK(contains(d.message, "config.database"));
    c.database = "db";
    auto o = make_http_options(c, ec, d);
    CHECK_FALSE(ec);
    CHECK(o.password == "fine");
}

TEST_CASE("config: chdb://dir/… (a URI authority) is refused, saying what to write") {
    auto r = parse_uri("chdb://relative/dir");
    CHECK(r.ec == errc::invalid_configuration);
    CHECK(contains(r.message, "chdb:relative/dir"));
    CHECK(contains(r.message, "chdb:///absolute/dir"));
    auto other = parse_uri("chdb://pipeline/state?table=t");
    CHECK(other.ec == errc::invalid_configuration);
    CHECK(contains(other.message, "write chdb:pipeline/state for a folder relative"));
    CHECK(parse_uri("chdb://u:secretpw@x/dir").message.find("secretpw") == std::string::npos);
    CHECK(parse_uri("chdb://localhost/var/lib").ec == errc::invalid_configuration);
    // The documented forms still work.
    CHECK(config::from_uri("chdb:relative/dir").embedded_path == "relative/dir");
    CHECK(config::from_uri("chdb:///absolute/dir").embedded_path == "/absolute/dir");
    CHECK(config::from_uri("chdb:/absolute/dir").embedded_path == "/absolute/dir");
}

TEST_CASE("config: an invalid port is reported as written") {
    CHECK(parse_uri("clickhouse://u:p@host:abc/db").message ==
          "clickhouse URI has an invalid port \"abc\" (expected 1–65535)");
    CHECK(parse_uri("clickhouse://u:p@host:0/db").message ==
          "clickhouse URI has an invalid port \"0\" (expected 1–65535)");
    CHECK(parse_uri("clickhouse://u:p@host:65536/db").message ==
          "clickhouse URI has an invalid port \"65536\" (expected 1–65535)");
    CHECK(parse_uri("clickhouse://u:p@host:/db").message ==
          "clickhouse URI has an invalid port \"\" (expected 1–65535)");
    CHECK(parse_uri("clickhouse://u:p@[::1]:8x/db").message ==
          "clickhouse URI has an invalid port \"8x\" (expected 1–65535)");
    CHECK(parse_uri("clickhouse://u:p@host:12abc?secure=true").message ==
          "clickhouse URI has an invalid port \"12abc\" (expected 1–65535)");
    CHECK(parse_uri("clickhouse://u:p@host:abc/db").ec == errc::invalid_configuration);
    CHECK(config::from_uri("clickhouse://u:p@host:65535/db").port == 65535);
    CHECK(config::from_uri("clickhouse://u:p@host:1/db").port == 1);
    // A '/' in an unencoded password: the text that looks like a port is not shown.
    auto slash = parse_uri("clickhouse://u:hun/ter2@host/db");
    CHECK(slash.ec == errc::invalid_configuration);
    CHECK_FALSE(contains(slash.message, "hun"));
    CHECK(contains(slash.message, "percent-encode"));
    auto hidden = parse_uri("clickhouse://u:p@host:hun/ter2@x/db");
    CHECK(hidden.ec == errc::invalid_configuration);
    CHECK_FALSE(contains(hidden.message, "hun"));
    // The environment's port, likewise.
    for (const char* bad : {"eighty", "0", "65536", "", "-1", "80 "}) {
        CAPTURE(bad);
        std::map<std::string, std::string> env{{"MELTANO_STATE_BACKEND_CLICKHOUSE_PORT", bad}};
        error_code ec;
        diagnostics d;
        config::from_environment(lookup_in(env), ec, d);
        CHECK(ec == errc::invalid_configuration);
        CHECK(d.message == std::string("MELTANO_STATE_BACKEND_CLICKHOUSE_PORT is not a port number: \"") + bad +
                               "\" (expected 1–65535)");
    }
}

TEST_CASE("config: timeouts from the URI and the environment reach the HTTP transport") {
    using std::chrono::milliseconds;
    auto c = config::from_uri("clickhouse://u:p@h/db?connect_timeout=2s&request_timeout=1500ms&lock_timeout=5m");
    CHECK(c.connect_timeout == milliseconds(2000));
    CHECK(c.request_timeout == milliseconds(1500));
    CHECK(c.store.lock.timeout == milliseconds(300'000));
    auto h = make_http_options(c);
    CHECK(h.connect_timeout == milliseconds(2000));
    CHECK(h.request_timeout == milliseconds(1500));
    // Defaults, and a bare number is seconds.
    auto d = config::from_uri("clickhouse://u:p@h/db?request_timeout=45");
    CHECK(d.connect_timeout == milliseconds(10'000));
    CHECK(d.request_timeout == milliseconds(45'000));
    CHECK(d.store.lock.timeout == milliseconds(30'000));
    CHECK(config::from_uri("chdb:///x?lock_timeout=1h").store.lock.timeout == milliseconds(3'600'000));
    // chDB has no connection to time out: said so rather than ignored.
    CHECK(parse_uri("chdb:///x?request_timeout=5s").message ==
          "request_timeout applies to clickhouse:// URIs only (chDB runs in-process)");
    for (const char* bad : {"0", "-5s", "5x", "s", "", "1.5s", "8d", "169h", "99999999999999999999", "5%20s"}) {
        INFO("value: " << bad);
        auto r = parse_uri(std::string("clickhouse://u:p@h/db?connect_timeout=") + bad);
        CHECK(r.ec == errc::invalid_configuration);
        CHECK(contains(r.message, "connect_timeout must be a duration"));
    }
    CHECK(config::from_uri("clickhouse://u:p@h/db?lock_timeout=168h").store.lock.timeout ==
          milliseconds(7ll * 24 * 3'600'000));
    std::map<std::string, std::string> env{
        {"MELTANO_STATE_BACKEND_URI", "clickhouse://u:p@h/db?request_timeout=9s"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_CONNECT_TIMEOUT", "250ms"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_LOCK_TIMEOUT", "90"},
    };
    auto e = config::from_environment(lookup_in(env));
    CHECK(e.connect_timeout == milliseconds(250));
    CHECK(e.request_timeout == milliseconds(9000)); // from the URI: no override
    CHECK(e.store.lock.timeout == milliseconds(90'000));
    env["MELTANO_STATE_BACKEND_CLICKHOUSE_REQUEST_TIMEOUT"] = "soon";
    error_code ec;
    diagnostics diag;
    config::from_environment(lookup_in(env), ec, diag);
    CHECK(ec == errc::invalid_configuration);
    CHECK(diag.message == "MELTANO_STATE_BACKEND_CLICKHOUSE_REQUEST_TIMEOUT must be a duration such as 30s, 500ms, "
                          "5m or 1h (a bare number is seconds; at most 7 days), not \"soon\"");
}

TEST_CASE("config: cluster, insert_quorum and insert_quorum_timeout from the URI and the environment") {
    using std::chrono::milliseconds;
    auto none = config::from_uri("clickhouse://u:p@h/db");
    CHECK(none.store.cluster.name.empty()); // no cluster: nothing changes
    CHECK(none.store.cluster.insert_quorum == 0);
    auto c = config::from_uri("clickhouse://u:p@h1:1,h2:2/db?cluster=prod_1&insert_quorum=2&insert_quorum_timeout=5s");
    CHECK(c.store.cluster.name == "prod_1");
    CHECK(c.store.cluster.insert_quorum == 2);
    CHECK(c.store.cluster.insert_quorum_timeout == milliseconds(5000));
    CHECK(c.store.cluster.zookeeper_path == "/clickhouse/tables/{shard}/{database}/{table}");
    CHECK(c.store.cluster.replica == "{replica}");
    CHECK(c.redacted_uri() == "clickhouse://u:***@h1:1,h2:2/db?cluster=prod_1");
    CHECK(config::from_uri("https://u:p@h/db?cluster=c").redacted_uri() == "clickhouse://u:***@h:8123/db?secure=true&cluster=c");
    for (const char* bad : {"cluster=", "cluster=a%60b", "cluster=a'b", "cluster=a%0Ab", "insert_quorum=x",
                            "insert_quorum=-1", "insert_quorum=101", "insert_quorum=", "insert_quorum_timeout=0",
                            "insert_quorum_timeout=soon"}) {
        INFO(bad);
        auto r = parse_uri(std::string("clickhouse://u:p@h/db?") + bad);
        CHECK(r.ec == errc::invalid_configuration);
        CHECK_FALSE(contains(r.message, "p@"));
    }
    // The embedded engine has no replicas: said so rather than ignored.
    for (const char* p : {"cluster=c", "insert_quorum=2", "insert_quorum_timeout=1s"}) {
        auto r = parse_uri(std::string("chdb:///x?") + p);
        CHECK(r.ec == errc::invalid_configuration);
        CHECK(contains(r.message, "the embedded engine has no replicas"));
    }
    std::map<std::string, std::string> env{
        {"MELTANO_STATE_BACKEND_URI", "clickhouse://u:p@h/db?cluster=from_uri"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_CLUSTER", "from_env"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_INSERT_QUORUM", "3"},
    };
    auto e = config::from_environment(lookup_in(env));
    CHECK(e.store.cluster.name == "from_env");
    CHECK(e.store.cluster.insert_quorum == 3);
    env["MELTANO_STATE_BACKEND_CLICKHOUSE_INSERT_QUORUM"] = "most";
    error_code ec;
    diagnostics diag;
    config::from_environment(lookup_in(env), ec, diag);
    CHECK(ec == errc::invalid_configuration);
    CHECK(contains(diag.message, "MELTANO_STATE_BACKEND_CLICKHOUSE_INSERT_QUORUM: insert_quorum must be a number"));
    std::map<std::string, std::string> chdb_env{{"MELTANO_STATE_BACKEND_URI", "chdb:///tmp/x"},
                                                {"MELTANO_STATE_BACKEND_CLICKHOUSE_CLUSTER", "c"}};
    config::from_environment(lookup_in(chdb_env), ec, diag);
    CHECK(ec == errc::invalid_configuration);
    CHECK(contains(diag.message, "no replicas"));
}

TEST_CASE("statements: cluster mode runs DDL ON CLUSTER with Replicated engines; one server keeps the seed's") {
    detail::table_names names("meltano", "state");
    const auto f = detail::server_features::from_version("18.16.1");
    detail::statements single(names, f);
    CHECK(single.create_state_table().sql.find("ENGINE = ReplacingMergeTree(updated_at) ORDER BY state_id") !=
          std::string::npos);
    CHECK_FALSE(contains(single.create_database().sql, "ON CLUSTER"));
    CHECK_FALSE(contains(single.select_state_ids("*").sql, "state_id != ''"));
    CHECK_FALSE(single.replicated().enabled());
    detail::replication r{"c1", "/ch/{shard}/{database}/{table}", "{replica}", {{"insert_quorum", "2"}}};
    detail::statements cl(names, f, true, r);
    CHECK(cl.create_database().sql == "CREATE DATABASE IF NOT EXISTS `meltano` ON CLUSTER `c1`");
    CHECK(contains(cl.create_state_table().sql, "`meltano`.`state` ON CLUSTER `c1` ("));
    CHECK(contains(cl.create_state_table().sql,
                   "ENGINE = ReplicatedReplacingMergeTree('/ch/{shard}/meltano/state', '{replica}', updated_at)"));
    CHECK(contains(cl.create_lock_table().sql,
                   "ReplicatedReplacingMergeTree('/ch/{shard}/meltano/state_lock', '{replica}', locked_at) ORDER BY "
                   "(state_id, lock_id)"));
    CHECK(contains(cl.create_grant_table().sql, "ReplicatedMergeTree('/ch/{shard}/meltano/state_grant', '{replica}')"));
    CHECK(contains(cl.create_grant_table().sql, "replicated_deduplication_window"));
    // The delete nudges' empty id is never listed or counted.
    CHECK(contains(cl.select_state_ids("*").sql, "WHERE state_id != ''"));
    CHECK(contains(cl.select_all_states().sql, "WHERE state_id != ''"));
    CHECK(contains(cl.count_states().sql, "WHERE state_id != ''"));
    // A delete's leftover rows are counted with the delete's own condition.
    const auto del = cl.delete_lock("id", "lock-1");
    const auto left = detail::statements::rows_left_by(del);
    CHECK(left.sql == "SELECT count() AS n FROM `meltano`.`state_lock`" + del.sql.substr(del.sql.find(" WHERE ")));
    // A lock-table delete also removes nudges older than its cutoff, in
    // one parenthesised condition; only the delete's own rows are counted.
    const auto cleaned = cl.with_lock_nudges_removed(del, std::chrono::system_clock::time_point(std::chrono::seconds(1000)));
    CHECK(cleaned.sql == del.sql.substr(0, del.sql.find(" WHERE ")) + " WHERE (" +
                             del.sql.substr(del.sql.find(" WHERE ") + 7) +
                             ") OR (state_id = '' AND locked_at < toDateTime(1000))");
    // clear_all on a cluster: a replicated DELETE of every state, no TRUNCATE.
    CHECK(cl.delete_all_states().sql == "ALTER TABLE `meltano`.`state` DELETE WHERE state_id != ''");
    CHECK(detail::statements::rows_left_by(cl.delete_all_states()).sql ==
          "SELECT count() AS n FROM `meltano`.`state` WHERE state_id != ''");
    detail::statements modern(names, detail::server_features::from_version("24.3.1"), true, r);
    CHECK(detail::statements::rows_left_by(modern.delete_state("id")).sql.starts_with(
        "SELECT count() AS n FROM `meltano`.`state` WHERE SHA256(state_id) = unhex('"));
    // A quote in a path or replica name stays inside its literal.
    detail::statements odd(names, f, true, {"c", "/x'y/{table}", "r'1", {}});
    CHECK(contains(odd.create_state_table().sql, "('/x\\'y/state', 'r\\'1', updated_at)"));
}

TEST_CASE("config: a CA file from the URI (ca_file) and the environment (CA_FILE) reaches the HTTP transport") {
    // Percent-decoded like every URI value; secure by parameter or by https://.
    auto c = config::from_uri("clickhouse://u:p@h:8443/db?secure=true&ca_file=%2Fetc%2Fmy%20ca%2Fca.pem");
    CHECK(c.secure);
    CHECK(c.ca_file == "/etc/my ca/ca.pem");
    auto h = make_http_options(c);
    CHECK(h.secure);
    CHECK(h.ca_file == "/etc/my ca/ca.pem");
    CHECK(config::from_uri("https://u:p@h/db?ca_file=/ca.pem").ca_file == "/ca.pem");
    CHECK(config::from_uri("clickhouse://u:p@h/db?ca_file=/ca.pem&secure=1").ca_file == "/ca.pem"); // any order
    CHECK(config::from_uri("clickhouse://u:p@h/db?secure=true").ca_file.empty()); // default: system paths
    CHECK(make_http_options(config::from_uri("clickhouse://u:p@h/db?secure=true")).ca_file.empty());
    // A CA file on a connection that is not secure would do nothing: refused, not ignored.
    auto plain = parse_uri("clickhouse://u:p@h/db?ca_file=/ca.pem");
    CHECK(plain.ec == errc::invalid_configuration);
    CHECK(plain.message == "ca_file applies to secure connections only: add secure=true (or use https://)");
    CHECK(parse_uri("clickhouse://u:p@h/db?ca_file=/ca.pem&secure=false").ec == errc::invalid_configuration);
    CHECK(parse_uri("chdb:///x?ca_file=/ca.pem").message ==
          "ca_file applies to clickhouse:// URIs only (chDB runs in-process)");
    // Control characters refused like every other setting, naming it.
    for (char ch : control_characters()) {
        CAPTURE(static_cast<int>(static_cast<unsigned char>(ch)));
        auto r = parse_uri("clickhouse://u:p@h/db?secure=true&ca_file=/etc/c" + percent(ch) + "a.pem");
        CHECK(r.ec == errc::invalid_configuration);
        CHECK(contains(r.message, "clickhouse URI: parameter ca_file contains a control character"));
        CHECK(detail::find_control_character(r.message) == std::string::npos);
        std::map<std::string, std::string> env{{"MELTANO_STATE_BACKEND_URI", "clickhouse://u:p@h/db?secure=true"},
                                               {"MELTANO_STATE_BACKEND_CLICKHOUSE_CA_FILE", std::string("/c") + ch + "a"}};
        error_code ec;
        diagnostics d;
        config::from_environment(lookup_in(env), ec, d);
        CHECK(ec == errc::invalid_configuration);
        CHECK(contains(d.message, "MELTANO_STATE_BACKEND_CLICKHOUSE_CA_FILE contains a control character"));
        CHECK(detail::find_control_character(d.message) == std::string::npos);
    }
    // The environment's CA_FILE wins over the URI's, and needs a secure connection too.
    std::map<std::string, std::string> env{
        {"MELTANO_STATE_BACKEND_URI", "clickhouse://u:p@h/db?secure=true&ca_file=/from-uri.pem"},
        {"MELTANO_STATE_BACKEND_CLICKHOUSE_CA_FILE", "/from-env.pem"},
    };
    CHECK(config::from_environment(lookup_in(env)).ca_file == "/from-env.pem");
    CHECK(make_http_options(config::from_environment(lookup_in(env))).ca_file == "/from-env.pem");
    env.erase("MELTANO_STATE_BACKEND_CLICKHOUSE_CA_FILE");
    CHECK(config::from_environment(lookup_in(env)).ca_file == "/from-uri.pem");
    std::map<std::string, std::string> bare{{"MELTANO_STATE_BACKEND_CLICKHOUSE_HOST", "h"},
                                            {"MELTANO_STATE_BACKEND_CLICKHOUSE_CA_FILE", "/ca.pem"}};
    error_code ec;
    diagnostics d;
    config::from_environment(lookup_in(bare), ec, d);
    CHECK(ec == errc::invalid_configuration);
    CHECK(contains(d.message, "MELTANO_STATE_BACKEND_CLICKHOUSE_SECURE=true"));
    bare["MELTANO_STATE_BACKEND_CLICKHOUSE_SECURE"] = "true";
    auto e = config::from_environment(lookup_in(bare));
    CHECK(e.secure);
    CHECK(e.ca_file == "/ca.pem");
    // A hand-made config: make_http_options checks it like the other settings.
    config hand;
    hand.secure = true;
    hand.ca_file = "/ca\n.pem";
    make_http_options(hand, ec, d);
    CHECK(ec == errc::invalid_configuration);
    CHECK(contains(d.message, "config.ca_file"));
    // And the transport refuses one before connecting.
    http_options o;
    o.ca_file = "/ca\r.pem";
    CHECK(detail::validate_http_options(o, d) == errc::invalid_configuration);
    CHECK(contains(d.message, "http_options.ca_file"));
}

TEST_CASE("config: a host that no host name can be is refused (a decoded %3A would pose as IPv6)") {
    // Found by the config fuzzer: "h%3Ao" decoded to "h:o", which the Host
    // header would have written as an IPv6 literal.
    CHECK(parse_uri("clickhouse://u:p@h%3Ao:8123/db").message ==
          "clickhouse URI: the host \"h:o\" holds ':' but is not an IPv6 address");
    for (const char* bad : {"h%2Fx", "h%20x", "h%40x", "h%5Bx", "h%25x"}) {
        INFO("host: " << bad);
        auto r = parse_uri(std::string("clickhouse://u:p@") + bad + "/db");
        CHECK(r.ec == errc::invalid_configuration);
        CHECK(contains(r.message, "is not a host name"));
    }
    CHECK(config::from_uri("clickhouse://u:p@[::1]:8123/db").host == "::1");
    CHECK(config::from_uri("clickhouse://u:p@ch-1.internal/db").host == "ch-1.internal");
    std::map<std::string, std::string> env{{"MELTANO_STATE_BACKEND_CLICKHOUSE_HOST", "h:o"}};
    error_code ec;
    diagnostics d;
    config::from_environment(lookup_in(env), ec, d);
    CHECK(ec == errc::invalid_configuration);
    CHECK(d.message == "MELTANO_STATE_BACKEND_CLICKHOUSE_HOST \"h:o\" holds ':' but is not an IPv6 address");
    env["MELTANO_STATE_BACKEND_CLICKHOUSE_HOST"] = "[::1]";
    CHECK(config::from_environment(lookup_in(env)).host == "::1");
}

TEST_CASE("config: IPv6 hosts are kept bare and printed in brackets") {
    auto c = config::from_uri("clickhouse://u:p@[::1]:8123/db");
    CHECK(c.host == "::1");
    CHECK(c.port == 8123);
    CHECK(c.redacted_uri() == "clickhouse://u:***@[::1]:8123/db");
    auto full = config::from_uri("clickhouse://u@[2001:db8::7]/db");
    CHECK(full.host == "2001:db8::7");
    CHECK(full.redacted_uri() == "clickhouse://u@[2001:db8::7]:8123/db");
    CHECK(config::from_uri("clickhouse://u@127.0.0.1:9/db").redacted_uri() == "clickhouse://u@127.0.0.1:9/db");
    CHECK(detail::host_port("::1", 27432) == "[::1]:27432");
    CHECK(detail::host_port("[::1]", 27432) == "[::1]:27432");
    CHECK(detail::host_port("db.example", 1) == "db.example:1");
    CHECK(detail::host_port("10.0.0.1", 8123) == "10.0.0.1:8123");
    for (const char* host : {"::1", "[::1]"}) {
        std::map<std::string, std::string> env{{"MELTANO_STATE_BACKEND_CLICKHOUSE_HOST", host},
                                               {"MELTANO_STATE_BACKEND_CLICKHOUSE_PORT", "27432"}};
        auto e = config::from_environment(lookup_in(env));
        CHECK(e.host == "::1");
        CHECK(e.redacted_uri() == "clickhouse://default@[::1]:27432/default");
        CHECK(make_http_options(e).host == "::1");
    }
}

// ---- http request -------------------------------------------------------------------------

namespace {
/// A one-connection HTTP server on a loopback address: keeps the request it
/// receives (head and Content-Length body), answers with `reply`, closes.
class fake_http_server {
public:
    /// False when the address cannot be bound (no IPv6 loopback, say).
    bool start(const asio::ip::address& address, std::string reply) {
        reply_ = std::move(reply);
        asio::ip::tcp::endpoint ep(address, 0);
        error_code ec;
        acceptor_.open(ep.protocol(), ec);
        if (!ec)
            acceptor_.bind(ep, ec);
        if (!ec)
            acceptor_.listen(8, ec);
        if (ec)
            return false;
        port_ = acceptor_.local_endpoint().port();
        acceptor_.async_accept(socket_, [this](error_code aec) {
            if (aec)
                return;
            ++accepted_;
            read_more();
        });
        thread_ = std::thread([this] { io_.run(); });
        return true;
    }
    std::uint16_t port() const { return port_; }
    /// Stops the server; afterwards received() and accepted() are final.
    void stop() {
        asio::post(io_, [this] {
            error_code ignored;
            acceptor_.close(ignored);
            socket_.close(ignored);
        });
        if (thread_.joinable())
            thread_.join();
    }
    const std::string& received() const { return received_; }
    int accepted() const { return accepted_; }
    ~fake_http_server() { stop(); }

private:
    void read_more() {
        socket_.async_read_some(asio::buffer(buf_), [this](error_code ec, std::size_t n) {
            if (ec)
                return;
            received_.append(buf_.data(), n);
            auto head_end = received_.find("\r\n\r\n");
            if (head_end == std::string::npos)
                return read_more();
            std::size_t length = 0;
            std::string lower = received_.substr(0, head_end);
            std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
            if (auto at = lower.find("\r\ncontent-length: "); at != std::string::npos)
                length = std::stoul(lower.substr(at + 18));
            if (received_.size() < head_end + 4 + length)
                return read_more();
            asio::async_write(socket_, asio::buffer(reply_), [this](error_code, std::size_t) {
                error_code ignored;
                socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
                socket_.close(ignored);
            });
        });
    }

    asio::io_context io_;
    asio::ip::tcp::acceptor acceptor_{io_};
    asio::ip::tcp::socket socket_{io_};
    std::array<char, 4096> buf_{};
    std::string reply_, received_;
    int accepted_ = 0;
    std::uint16_t port_ = 0;
    std::thread thread_;
};

struct http_outcome {
    error_code ec;
    std::string message, data;
};

/// Runs `stmt` on `t`, driving `io` (restarted first) for at most 20 s.
http_outcome run_on(http_transport& t, asio::io_context& io, const statement& stmt) {
    http_outcome out;
    diagnostics d;
    bool done = false;
    t.async_execute(
        stmt,
        [&](std::string_view chunk) {
            out.data.append(chunk);
            return error_code{};
        },
        d, [&](error_code ec) {
            out.ec = ec;
            done = true;
        });
    io.restart();
    io.run_for(std::chrono::seconds(20));
    CHECK(done);
    out.message = d.message;
    return out;
}

/// Runs one statement on an http_transport with `options`.
http_outcome run_http(http_options options) {
    asio::io_context io;
    http_transport t(io.get_executor(), std::move(options));
    return run_on(t, io, statement{"SELECT 1", {}, "TabSeparated", {}, true});
}

std::string http_reply(std::string status, std::string body, std::string extra_headers = {}) {
    return "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n" + extra_headers + "\r\n" + body;
}

const auto loopback = asio::ip::make_address("127.0.0.1");
}

TEST_CASE("http: a control character in host, user, password or database is refused before any byte is sent") {
    fake_http_server server;
    REQUIRE(server.start(loopback, http_reply("200 OK", "1\n")));
    for (char ch : control_characters()) {
        CAPTURE(static_cast<int>(static_cast<unsigned char>(ch)));
        const std::string bad = std::string("a") + ch + "X-Injected: 1";
        struct probe {
            std::string http_options::*field;
            const char* name;
        };
        for (auto p : {probe{&http_options::user, "http_options.user"},
                       probe{&http_options::password, "http_options.password"},
                       probe{&http_options::database, "http_options.database"}}) {
            CAPTURE(p.name);
            http_options o{.host = "127.0.0.1", .port = server.port()};
            o.*p.field = bad;
            auto r = run_http(o);
            CHECK(r.ec == errc::invalid_configuration);
            CHECK(contains(r.message, p.name));
            CHECK_FALSE(contains(r.message, "X-Injected"));
        }
        // The host: 127.0.0.1 followed by a header.
        auto r = run_http({.host = "127.0.0.1" + std::string(1, ch) + "X-Injected: 1", .port = server.port()});
        CHECK(r.ec == errc::invalid_configuration);
        CHECK(contains(r.message, "http_options.host"));
    }
    CHECK(run_http({.host = "", .port = server.port()}).ec == errc::invalid_configuration);
    CHECK(run_http({.host = "127.0.0.1", .port = 0}).ec == errc::invalid_configuration);
    server.stop();
    CHECK(server.accepted() == 0);
    CHECK(server.received().empty());
}

TEST_CASE("http: the Host header and the headers carry the options as given; IPv6 in brackets") {
    {
        fake_http_server server;
        REQUIRE(server.start(loopback, http_reply("200 OK", "1\n")));
        auto r = run_http({.host = "127.0.0.1", .port = server.port(), .database = "d\xC3\xA9 b",
                           .user = "us er", .password = "p\xC3\xA4ss"});
        CHECK_FALSE(r.ec);
        CHECK(r.data == "1\n");
        server.stop();
        const std::string& req = server.received();
        CHECK(contains(req, "\r\nHost: 127.0.0.1:" + std::to_string(server.port()) + "\r\n"));
        CHECK(contains(req, "\r\nX-ClickHouse-User: us er\r\n"));
        CHECK(contains(req, "\r\nX-ClickHouse-Key: p\xC3\xA4ss\r\n"));
        CHECK(contains(req, "database=d%C3%A9%20b"));
    }
    fake_http_server server6;
    if (!server6.start(asio::ip::make_address("::1"), http_reply("200 OK", "1\n"))) {
        MESSAGE("no IPv6 loopback here: the Host header's brackets are checked through detail::host_port only");
        return;
    }
    auto r = run_http({.host = "::1", .port = server6.port()});
    server6.stop();
    if (r.ec == errc::connection_failed) {
        MESSAGE("cannot connect to [::1]: " << r.message);
        return;
    }
    CHECK_FALSE(r.ec);
    CHECK(contains(server6.received(), "\r\nHost: [::1]:" + std::to_string(server6.port()) + "\r\n"));
}

TEST_CASE("http: statement settings travel as URL parameters; a reserved or odd name is refused, nothing sent") {
    {
        fake_http_server server;
        REQUIRE(server.start(loopback, http_reply("200 OK", "1\n")));
        asio::io_context io;
        http_transport t(io.get_executor(), http_options{.host = "127.0.0.1", .port = server.port()});
        statement st{"SELECT 1", {}, "TabSeparated", {}, true};
        st.settings = {{"insert_quorum", "2"}, {"select_sequential_consistency", "1"}};
        auto r = run_on(t, io, st);
        CHECK_FALSE(r.ec);
        server.stop();
        CHECK(contains(server.received(), "insert_quorum=2&select_sequential_consistency=1"));
    }
    for (const char* name : {"query", "database", "default_format", "wait_end_of_query", "_chstate_values_format",
                             "user", "password", "Insert_quorum", "a&b", "x=1", "", "max threads"}) {
        INFO("setting name: " << name);
        fake_http_server server;
        REQUIRE(server.start(loopback, http_reply("200 OK", "1\n")));
        asio::io_context io;
        http_transport t(io.get_executor(), http_options{.host = "127.0.0.1", .port = server.port()});
        statement st{"SELECT 1", {}, "TabSeparated", {}, true};
        st.settings = {{name, "1"}};
        auto r = run_on(t, io, st);
        CHECK(r.ec == errc::invalid_argument);
        CHECK(contains(r.message, "statement setting"));
        server.stop();
        CHECK(server.received().empty());
    }
    fake_http_server server;
    REQUIRE(server.start(loopback, http_reply("200 OK", "1\n")));
    asio::io_context io;
    http_transport t(io.get_executor(), http_options{.host = "127.0.0.1", .port = server.port()});
    statement st{"SELECT 1", {}, "TabSeparated", {}, true};
    st.settings = {{"insert_quorum", "2\r\nX-Evil: 1"}};
    auto r = run_on(t, io, st);
    CHECK(r.ec == errc::invalid_argument);
    server.stop();
    CHECK(server.received().empty());
}

TEST_CASE("http: another server's error page reaches diagnostics bounded and printable") {
    std::string page = "<!DOCTYPE html>\r\n<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\t\x01\x1b[31m";
    for (int i = 0; i < 200; ++i)
        page += "<p>Code: 12. upstream said DB::Exception-ish things, line " + std::to_string(i) + "</p>\n";
    page += "</body></html>\n";
    fake_http_server server;
    REQUIRE(server.start(loopback, http_reply("502 Bad Gateway", page, "Content-Type: text/html\r\n")));
    auto r = run_http({.host = "127.0.0.1", .port = server.port()});
    CHECK(r.ec == errc::server_error); // no ClickHouse code mined from the page
    CHECK(r.message.starts_with("HTTP status 502 Bad Gateway without a ClickHouse exception; the reply begins: "
                                "<!DOCTYPE html> <html> <head><title>502 Bad Gateway</title></head> <body> [31m"));
    CHECK(r.message.size() <= 450);
    CHECK(r.message.ends_with("…"));
    CHECK(detail::find_control_character(r.message) == std::string::npos);
}

TEST_CASE("http: ClickHouse's own exception text stays whole") {
    const std::string text = "Code: 60. DB::Exception: Table meltano.state does not exist. " + std::string(600, 'x') +
                             " (UNKNOWN_TABLE) (version 24.8.1.1)";
    fake_http_server server;
    REQUIRE(server.start(loopback, http_reply("404 Not Found", text + "\n", "X-ClickHouse-Exception-Code: 60\r\n")));
    auto r = run_http({.host = "127.0.0.1", .port = server.port()});
    CHECK(r.ec == make_clickhouse_error(60));
    CHECK(r.message == text);
}

TEST_CASE("an exception with code 0 is an error, not success (found by fuzz/http_exchange)") {
    // make_clickhouse_error(0) was an error_code of value 0, i.e. success:
    // "Code: 0 … DB::Exception" after status 200 completed the statement
    // successfully with no data.
    CHECK(make_clickhouse_error(0));
    CHECK(make_clickhouse_error(0) == errc::server_error);
    CHECK(make_clickhouse_error(60).value() == 60);
    fake_http_server server;
    REQUIRE(server.start(loopback, http_reply("200 OK", "1\nCode: 0, e.displayText() = DB::Exception: x\n")));
    auto r = run_http({.host = "127.0.0.1", .port = server.port()});
    CHECK(r.ec == errc::server_error);
    CHECK(r.data.empty());
    fake_http_server server500;
    REQUIRE(server500.start(loopback, http_reply("500 Internal Server Error", "", "X-ClickHouse-Exception-Code: 0\r\n")));
    CHECK(run_http({.host = "127.0.0.1", .port = server500.port()}).ec == errc::server_error);
}

TEST_CASE("http: read_error_reply tells ClickHouse's exceptions from other bodies") {
    const std::string old_text = "Code: 516, e.displayText() = DB::Exception: default: Authentication failed\n";
    auto old = detail::read_error_reply(500, "Internal Server Error", std::nullopt, old_text);
    CHECK(old.code == 516);
    CHECK(old.message == "Code: 516, e.displayText() = DB::Exception: default: Authentication failed");
    // ZooKeeper's errors on a replicated table (18.16, ZooKeeper stopped)
    // name Coordination::Exception, not DB::Exception: still the server's.
    const std::string keeper_text = "Code: 999, e.displayText() = Coordination::Exception: Session expired "
                                    "(Session expired), e.what() = Coordination::Exception\n";
    auto keeper = detail::read_error_reply(500, "Internal Server Error", std::nullopt, keeper_text);
    CHECK(keeper.code == 999);
    CHECK(make_clickhouse_error(*keeper.code) == errc::replicas_unavailable);
    CHECK(detail::find_body_exception("{\"n\":1}\n" + keeper_text) == 8);
    auto header_only = detail::read_error_reply(500, "", std::string_view("81"), "");
    CHECK(header_only.code == 81);
    CHECK(header_only.message == "HTTP status 500");
    auto proxy = detail::read_error_reply(403, "Forbidden", std::nullopt, "<h1>Code: 403. Forbidden</h1>");
    CHECK_FALSE(proxy.code);
    CHECK(proxy.message == "HTTP status 403 Forbidden without a ClickHouse exception; the reply begins: "
                           "<h1>Code: 403. Forbidden</h1>");
    auto empty = detail::read_error_reply(502, "Bad\x01Gateway", std::nullopt, "");
    CHECK(empty.message == "HTTP status 502 Bad Gateway without a ClickHouse exception");
    auto big = detail::read_error_reply(500, "", std::nullopt, std::string(100000, 'y'));
    CHECK(big.message.size() < 400);
}

TEST_CASE("http: keep_alive_timeout reads timeout=N, at most a day (fuzz/corpus/http_reply/keep_alive_huge)") {
    CHECK(detail::keep_alive_timeout("timeout=10") == std::chrono::milliseconds(10'000));
    CHECK(detail::keep_alive_timeout("max=100, timeout=3") == std::chrono::milliseconds(3'000));
    CHECK_FALSE(detail::keep_alive_timeout("timeout=-1"));
    CHECK_FALSE(detail::keep_alive_timeout("max=5"));
    // Found by fuzz/http_reply: seconds(N) * 1000 overflowed (undefined
    // behaviour; a negative or wrapped keep-alive) for N above ~9.2e15.
    CHECK(detail::keep_alive_timeout("timeout=9223372036854775807") == std::chrono::milliseconds(86'400'000));
    CHECK(detail::keep_alive_timeout("timeout=86401") == std::chrono::milliseconds(86'400'000));
    CHECK_FALSE(detail::keep_alive_timeout("timeout=99999999999999999999")); // beyond long: ignored
}

TEST_CASE("http: printable_excerpt bounds, cleans and cuts between characters") {
    CHECK(detail::printable_excerpt("  a\r\n\tb\x7f\x01 c \n") == "a b c");
    CHECK(detail::printable_excerpt("abcdef", 3) == "abc…");
    CHECK(detail::printable_excerpt("abc", 3) == "abc");
    CHECK(detail::printable_excerpt("ab\xC3\xA9", 3) == "ab…");  // é would be cut
    CHECK(detail::printable_excerpt("a\xFF" "b\xC3") == "a?b?"); // not UTF-8
    std::string all;
    for (char ch : control_characters())
        all += std::string("x") + ch;
    CHECK(detail::printable_excerpt(all, 1000) == "x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x");
}

// ---- errors -----------------------------------------------------------------------------

TEST_CASE("ClickHouse codes map onto chstate conditions") {
    CHECK(make_clickhouse_error(516) == errc::authentication_failed);
    CHECK(make_clickhouse_error(193) == errc::authentication_failed);
    CHECK(make_clickhouse_error(81) == errc::unknown_database);
    CHECK(make_clickhouse_error(46) == errc::server_error);
    CHECK(make_error_code(errc::state_id_locked) == errc::state_id_locked);
    CHECK(make_error_code(errc::state_id_locked) != errc::timeout);
    CHECK(make_error_code(errc::state_id_locked).message() == "state id is locked by another client");
}

// ---- clocks ---------------------------------------------------------------------------

TEST_CASE("manual_clock: waits complete in deadline order when time is advanced") {
    asio::io_context ioc;
    const time_point start{std::chrono::seconds{1767225600}};
    manual_clock clock(start);
    CHECK(clock.now() == start);
    std::vector<int> order;
    clock.async_wait(ioc.get_executor(), 3s, [&](error_code) { order.push_back(3); });
    clock.async_wait(ioc.get_executor(), 1s, [&](error_code) { order.push_back(1); });
    clock.async_wait(ioc.get_executor(), 2s, [&](error_code) { order.push_back(2); });
    ioc.run(); // returns at once: waits are not outstanding work
    CHECK(order.empty());
    clock.advance(2s);
    ioc.restart();
    ioc.run();
    CHECK(order == std::vector<int>{1, 2});
    CHECK(clock.pending_waits() == 1);
    clock.advance(1s);
    ioc.restart();
    ioc.run();
    CHECK(order == std::vector<int>{1, 2, 3});
    CHECK(clock.now() == start + 3s);
}

TEST_CASE("manual_clock: run() jumps time forward, no real sleeping") {
    asio::io_context ioc;
    manual_clock clock;
    int ticks = 0;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < 10; ++i) {
                co_await clock.async_wait(co_await asio::this_coro::executor, 5min, asio::use_awaitable);
                ++ticks;
            }
        },
        asio::detached);
    auto wall = std::chrono::steady_clock::now();
    auto elapsed = clock.run(ioc);
    CHECK(ticks == 10);
    CHECK(elapsed == 50min);
    CHECK(std::chrono::steady_clock::now() - wall < 1s);
}

TEST_CASE("manual_clock: copies share time; skewed() reads an offset") {
    manual_clock a;
    manual_clock b = a;
    auto ahead = a.skewed(90s);
    a.advance(10s);
    CHECK(b.now() == a.now());
    CHECK(ahead.now() == a.now() + 90s);
    CHECK(a.skewed(-5s).now() == a.now() - 5s);
}

TEST_CASE("manual_clock: a cancelled wait completes with operation_aborted") {
    asio::io_context ioc;
    manual_clock clock;
    asio::cancellation_signal sig;
    error_code got;
    clock.async_wait(ioc.get_executor(), 10s, asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { got = ec; }));
    sig.emit(asio::cancellation_type::terminal);
    ioc.run();
    CHECK(got == asio::error::operation_aborted);
    CHECK(clock.pending_waits() == 0);
}

TEST_CASE("manual_clock: run() stops at its simulated limit") {
    asio::io_context ioc;
    manual_clock clock;
    bool fired = false;
    clock.async_wait(ioc.get_executor(), 2h, [&](error_code) { fired = true; });
    clock.run(ioc, 1h);
    CHECK_FALSE(fired);
    CHECK(clock.pending_waits() == 1);
}

TEST_CASE("real_clock waits on a steady timer") {
    asio::io_context ioc;
    real_clock clock;
    auto start = std::chrono::steady_clock::now();
    bool done = false;
    clock.async_wait(ioc.get_executor(), 20ms, [&](error_code ec) { done = !ec; });
    ioc.run();
    CHECK(done);
    CHECK(std::chrono::steady_clock::now() - start >= 20ms);
}

TEST_CASE("random_uuid: version 4 text, distinct") {
    auto a = detail::random_uuid();
    auto b = detail::random_uuid();
    CHECK(a.size() == 36);
    CHECK(a[14] == '4');
    CHECK(a != b);
}


// ---- hostile servers: each distinct behaviour is one case of test::hostile() --------
//
// Every case in this section (the bounded-reply cases above included) is one
// hostile-server behaviour: it counts one case, and a failure when any check
// made inside it failed (a listener counts failed doctest assertions).

namespace {

std::atomic<long> failed_assertions{0};

/// Counts failed assertions, so a scope can tell whether a check inside it failed.
struct failed_assertion_counter : doctest::IReporter {
    explicit failed_assertion_counter(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override { ++failed_assertions; }
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData& ad) override {
        if (ad.m_failed)
            ++failed_assertions;
    }
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("chstate-failed-assertions", 1, failed_assertion_counter);

/// One hostile-server case: counted now, a failure if an assertion failed
/// (or an exception escaped) before the end of its scope.
class hostile_server_case {
public:
    hostile_server_case() { ++test::hostile().cases; }
    hostile_server_case(const hostile_server_case&) = delete;
    hostile_server_case& operator=(const hostile_server_case&) = delete;
    ~hostile_server_case() {
        if (failed_assertions.load() != before_ || std::uncaught_exceptions() > uncaught_)
            ++test::hostile().failures;
    }

private:
    long before_ = failed_assertions.load();
    int uncaught_ = std::uncaught_exceptions();
};

} // namespace

// ---- bounded replies: a hostile server cannot grow the client ----------------

namespace {

/// A loopback server that answers like ClickHouse 18.16 until a request's
/// text holds `trigger`, and answers that one with its script: each step's
/// bytes, then the step's pause; then `endless` repeated until the client
/// hangs up (when not empty); then it closes the connection, or with `hold`
/// keeps it open, silent, until the server is destroyed.
class scripted_server {
public:
    struct step {
        std::string bytes;
        std::chrono::milliseconds pause{0};
    };
    struct script {
        std::vector<step> steps;
        std::string endless;
        bool hold = false;
        bool reset = false; ///< close with an RST (SO_LINGER 0) instead of a FIN
    };

    scripted_server(std::string trigger, script s) : trigger_(std::move(trigger)), script_(std::move(s)) {
        acceptor_.open(asio::ip::tcp::v4());
        acceptor_.bind({loopback, 0});
        acceptor_.listen(16);
        port_ = acceptor_.local_endpoint().port();
        thread_ = std::thread([this] { serve(); });
    }
    ~scripted_server() {
        stop_ = true;
        error_code ignored;
        asio::ip::tcp::socket poke(io_);
        poke.connect({loopback, port_}, ignored); // unblocks accept()
        poke.close(ignored);
        thread_.join();
    }
    std::uint16_t port() const { return port_; }
    int triggered() const { return triggered_; }
    /// The last request that held the trigger, as received.
    std::string scripted_request() const {
        std::lock_guard lock(mutex_);
        return scripted_request_;
    }

private:
    void serve() {
        while (!stop_) {
            asio::ip::tcp::socket s(io_);
            error_code ec;
            acceptor_.accept(s, ec);
            if (ec || stop_)
                return;
            std::string in;
            std::array<char, 65536> buf;
            for (;;) {
                auto head_end = in.find("\r\n\r\n");
                if (head_end != std::string::npos) {
                    std::string lower = in.substr(0, head_end);
                    std::transform(lower.begin(), lower.end(), lower.begin(),
                                   [](unsigned char c) { return std::tolower(c); });
                    std::size_t length = 0;
                    if (auto at = lower.find("\r\ncontent-length: "); at != std::string::npos)
                        length = std::stoul(lower.substr(at + 18));
                    if (in.size() >= head_end + 4 + length)
                        break;
                }
                std::size_t n = s.read_some(asio::buffer(buf), ec);
                if (ec)
                    break;
                in.append(buf.data(), n);
            }
            if (ec)
                continue;
            if (in.find(trigger_) == std::string::npos) {
                const std::string plain = in.find("version()") != std::string::npos ? "18.16.1\n" : "";
                std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(plain.size()) +
                                    "\r\nConnection: close\r\n\r\n" + plain;
                asio::write(s, asio::buffer(reply), ec);
                continue;
            }
            {
                std::lock_guard lock(mutex_);
                scripted_request_ = in;
            }
            ++triggered_;
            for (const auto& st : script_.steps) {
                if (!st.bytes.empty())
                    asio::write(s, asio::buffer(st.bytes), ec);
                if (st.pause.count())
                    sleep_unless_stopped(st.pause);
                if (ec || stop_)
                    break;
            }
            if (!script_.endless.empty()) {
                std::string block;
                while (block.size() < (1 << 16))
                    block += script_.endless;
                while (!ec && !stop_)
                    asio::write(s, asio::buffer(block), ec);
            }
            if (script_.hold)
                sleep_unless_stopped(std::chrono::hours(1));
            if (script_.reset) {
                s.set_option(asio::socket_base::linger(true, 0), ec);
                s.close(ec);
            }
        }
    }
    void sleep_unless_stopped(std::chrono::milliseconds d) {
        const auto until = std::chrono::steady_clock::now() + d;
        while (!stop_ && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }

    std::string trigger_;
    script script_;
    asio::io_context io_;
    asio::ip::tcp::acceptor acceptor_{io_};
    std::uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> triggered_{0};
    mutable std::mutex mutex_;
    std::string scripted_request_;
    std::thread thread_;
};

/// A server that answers the request holding `trigger` with status 200, a
/// 10 GB Content-Length, `head_of_body`, then `pattern` repeated until the
/// client hangs up.
scripted_server endless_server(std::string trigger, const std::string& head_of_body, std::string pattern) {
    return scripted_server(
        std::move(trigger),
        {{{"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\nConnection: close\r\n\r\n" + head_of_body, {}}},
         std::move(pattern),
         false,
         false});
}

/// Peak resident set since the last reset_peak_rss(), in bytes (Linux).
std::size_t peak_rss() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("VmHWM:"))
            return std::stoull(line.substr(6)) * 1024;
    return 0;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// The bound on peak RSS growth the limits tests assert. Under AddressSanitizer
// freed memory waits in a quarantine (256 MiB by default) and every byte has
// shadow, so RSS there says little: the bound is looser, and says so.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHSTATE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CHSTATE_TEST_ASAN 1
#endif
#endif
#ifdef CHSTATE_TEST_ASAN
constexpr std::size_t rss_bound = std::size_t(512) << 20;
#else
constexpr std::size_t rss_bound = std::size_t(64) << 20;
#endif

struct hostile_outcome {
    error_code ec;
    std::string message;
    std::size_t rss_growth = 0;
    double seconds = 0;
};

/// Runs `op` on a store over HTTP to `server`, limits as given.
template <class Op>
hostile_outcome against(scripted_server& server, reply_limits limits, Op op) {
    asio::thread_pool threads(1);
    http_options h;
    h.host = "127.0.0.1";
    h.port = server.port();
    h.request_timeout = std::chrono::seconds(60);
    store_options o;
    o.limits = limits;
    basic_state_store<http_transport> store(http_transport(threads.get_executor(), h), o);
    hostile_outcome out;
    reset_peak_rss();
    const std::size_t before = peak_rss();
    const auto t0 = std::chrono::steady_clock::now();
    try {
        op(store);
    } catch (const chstate::error& e) {
        out.ec = e.code();
        out.message = e.what();
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::size_t after = peak_rss();
    out.rss_growth = after > before ? after - before : 0;
    return out;
}

} // namespace

TEST_CASE("limits: endless ids from a hostile server stop at max_operation_bytes, memory bounded") {
    hostile_server_case hc;
    // Rows of RowBinary: varint length 8, then 8 bytes — forever.
    scripted_server server = endless_server("RowBinary", "", std::string("\x08", 1) + "id-bytes");
    reply_limits limits;
    limits.max_operation_bytes = 16 << 20;
    auto r = against(server, limits, [](auto& store) { store.state_ids("*"); });
    INFO(r.message);
    CHECK(r.ec == errc::reply_too_large);
    CHECK(contains(r.message, "max_operation_bytes"));
    CHECK(r.rss_growth < rss_bound);
    CHECK(r.seconds < 30);
    MESSAGE("endless ids: stopped after " << r.seconds << " s, peak RSS +" << (r.rss_growth >> 20) << " MiB");
}

TEST_CASE("limits: a row declaring 10 GB fails at once, before its bytes are read (default limits)") {
    hostile_server_case hc;
    // The partial state, a Nullable(String), declaring 10^10 bytes.
    std::string head = std::string("\x00", 1);
    std::uint64_t n = 10'000'000'000ull;
    while (n >= 0x80) {
        head += char((n & 0x7f) | 0x80);
        n >>= 7;
    }
    head += char(n);
    scripted_server server = endless_server("RowBinary", head, "x");
    auto r = against(server, reply_limits{}, [](auto& store) { store.get("x"); });
    INFO(r.message);
    CHECK(r.ec == errc::reply_too_large);
    CHECK(contains(r.message, "10000000000 bytes"));
    CHECK(contains(r.message, "max_row_bytes"));
    CHECK(r.rss_growth < rss_bound);
}

TEST_CASE("limits: endless rows to get are refused at the second row; to get_all, memory stays flat until the timeout") {
    // (partial NULL, completed "{}") as RowBinary, forever.
    const std::string row = std::string("\x01\x00\x02{}", 5);
    {
        hostile_server_case hc; // endless rows to get
        scripted_server server = endless_server("RowBinary", "", row);
        auto r = against(server, reply_limits{}, [](auto& store) { store.get("x"); });
        INFO(r.message);
        CHECK(r.ec == errc::protocol_error);
        CHECK(contains(r.message, "more than one row"));
    }
    // get_all streams: the rows reach the visitor one by one, nothing piles
    // up, and the request timeout ends the stream.
    hostile_server_case hc; // endless rows to get_all
    const std::string id_row = std::string("\x01x", 2) + row;
    scripted_server server = endless_server("RowBinary", "", id_row);
    asio::thread_pool threads(1);
    http_options h;
    h.host = "127.0.0.1";
    h.port = server.port();
    h.request_timeout = std::chrono::seconds(3);
    basic_state_store<http_transport> store(http_transport(threads.get_executor(), h));
    std::uint64_t seen = 0;
    reset_peak_rss();
    const std::size_t before = peak_rss();
    error_code ec;
    try {
        store.get_all([&](state&&) { ++seen; });
    } catch (const chstate::error& e) {
        ec = e.code();
    }
    CHECK(ec == errc::timeout);
    CHECK(seen > 1000);
    // Clamped: the kernel keeps the high-water mark lazily, so when the
    // resident set grew between the reset and the first read and shrank
    // again, VmHWM can read below `before` (an unsigned wrap failed a CI run).
    const std::size_t after = peak_rss();
    const std::size_t growth = after > before ? after - before : 0;
    CHECK(growth < rss_bound);
    MESSAGE("get_all of an endless reply: " << seen << " states visited in 3 s, peak RSS +" << (growth >> 20)
                                            << " MiB");
}

TEST_CASE("limits: a bookkeeping reply with no newline stops at max_row_bytes") {
    hostile_server_case hc;
    // clear_all counts the states (a JSONEachRow reply): one endless line.
    scripted_server server = endless_server("JSONEachRow", "{\"n\":\"", "0123456789");
    reply_limits limits;
    limits.max_row_bytes = 4 << 20;
    auto r = against(server, limits, [](auto& store) { store.clear_all(); });
    INFO(r.message);
    CHECK(r.ec == errc::reply_too_large);
    CHECK(contains(r.message, "max_row_bytes"));
    CHECK(r.rss_growth < rss_bound);
}

TEST_CASE("limits: a version() reply that never ends is refused") {
    hostile_server_case hc;
    scripted_server server = endless_server("version()", "18.16.1", "0");
    auto r = against(server, reply_limits{}, [](auto& store) { store.get("x"); });
    CHECK(r.ec == errc::protocol_error);
    CHECK(contains(r.message, "version()"));
}

// ---- hostile servers: replies no ClickHouse sends ------------------------------

namespace {

struct scripted_outcome {
    error_code ec;
    std::string message;
    bool returned = false; ///< the operation completed with a result
    std::size_t rss_growth = 0;
    double seconds = 0;
};

/// state_ids("*") (a RowBinary reply) on a store over HTTP to `server`, or
/// with `count`, clear_all() (its count() is a JSONEachRow reply, streamed
/// without wait_end_of_query); request_timeout 1 s.
scripted_outcome state_ids_from(scripted_server& server, bool count = false) {
    asio::thread_pool threads(1);
    http_options h;
    h.host = "127.0.0.1";
    h.port = server.port();
    h.request_timeout = std::chrono::seconds(1);
    basic_state_store<http_transport> store(http_transport(threads.get_executor(), h));
    scripted_outcome out;
    reset_peak_rss();
    const std::size_t before = peak_rss();
    const auto t0 = std::chrono::steady_clock::now();
    try {
        if (count) {
            out.message = "returned " + std::to_string(store.clear_all()) + " states cleared";
        } else {
            auto ids = store.state_ids("*");
            out.message = "returned " + std::to_string(ids.size()) + " ids";
        }
        out.returned = true;
    } catch (const chstate::error& e) {
        out.ec = e.code();
        out.message = e.what();
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::size_t after = peak_rss();
    out.rss_growth = after > before ? after - before : 0;
    return out;
}

/// A RowBinary reply of one id, "id-1", as ClickHouse sends it.
const std::string one_id_row = std::string("\x04", 1) + "id-1";

struct scripted_case {
    const char* name;
    scripted_server::script script;
    std::vector<errc> expected; ///< any of these
    bool count = false;         ///< clear_all() (JSONEachRow) instead of state_ids() (RowBinary)
};

std::string head(std::string status_line, std::string headers) {
    return status_line + "\r\n" + headers + "\r\n";
}

std::vector<scripted_case> scripted_cases() {
    using ms = std::chrono::milliseconds;
    const std::string ok_close = "Connection: close\r\n";
    auto once = [](std::string bytes) { return scripted_server::script{{{std::move(bytes), ms(0)}}, {}, false, false}; };
    std::vector<scripted_case> v;
    v.push_back({"absurd Content-Length (10 GB), 5 bytes, then close",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 10000000000\r\n" + ok_close) + one_id_row),
                 {errc::truncated_response, errc::connection_failed}});
    v.push_back({"Content-Length: -1", once(head("HTTP/1.1 200 OK", "Content-Length: -1\r\n" + ok_close) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"Content-Length beyond 64 bits",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 99999999999999999999999\r\n" + ok_close) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"two different Content-Lengths",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 5\r\nContent-Length: 3\r\n" + ok_close) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"Content-Length 100, 5 bytes, then close (closing mid-body)",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 100\r\n" + ok_close) + one_id_row),
                 {errc::truncated_response, errc::connection_failed}});
    v.push_back({"Content-Length 100, 5 bytes, then a reset",
                 {{{head("HTTP/1.1 200 OK", "Content-Length: 100\r\n" + ok_close) + one_id_row, ms(50)}}, {}, false, true},
                 {errc::truncated_response, errc::connection_failed}});
    v.push_back({"chunked: a chunk size that is not hex",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) + "zz\r\n" + one_id_row +
                      "\r\n0\r\n\r\n"),
                 {errc::protocol_error, errc::truncated_response}});
    v.push_back({"chunked: a chunk size beyond 64 bits",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) +
                      "fffffffffffffffffffff\r\n" + one_id_row),
                 {errc::protocol_error, errc::truncated_response}});
    v.push_back({"chunked: closed before the last chunk",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) + "5\r\n" + one_id_row +
                      "\r\n"),
                 {errc::truncated_response, errc::connection_failed}});
    v.push_back({"chunked: a chunk longer than its size (no CRLF where one must be)",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) + "2\r\n" + one_id_row +
                      "\r\n0\r\n\r\n"),
                 {errc::protocol_error, errc::truncated_response}});
    v.push_back({"chunked: an endless chunk extension (framing that is never data)",
                 {{{head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) + "5;x=", ms(0)}},
                  "aaaaaaaa",
                  false,
                  false},
                 {errc::protocol_error}});
    v.push_back({"chunked and Content-Length together",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n" + ok_close) + "5\r\n" +
                      one_id_row + "\r\n0\r\n\r\n"),
                 {errc::protocol_error}});
    v.push_back({"an unknown Transfer-Encoding (gzip) on a body that is not gzip",
                 once(head("HTTP/1.1 200 OK", "Transfer-Encoding: gzip\r\n" + ok_close) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"never answers (the request timeout ends it)", {{}, {}, true, false}, {errc::timeout}});
    v.push_back({"stalls mid-body, connection open",
                 {{{head("HTTP/1.1 200 OK", "Content-Length: 100\r\n" + ok_close) + one_id_row, ms(0)}}, {}, true, false},
                 {errc::timeout}});
    v.push_back({"stalls mid-header, connection open", {{{"HTTP/1.1 200 OK\r\nContent-Le", ms(0)}}, {}, true, false},
                 {errc::timeout}});
    v.push_back({"closes without a byte", {{}, {}, false, false}, {errc::connection_failed}});
    v.push_back({"resets without a byte", {{}, {}, false, true}, {errc::connection_failed}});
    const std::string page = "<html><body><h1>Code: 503. Try later</h1>\r\n<p>DB::Exception</p></body></html>\n";
    v.push_back({"HTML error page (503, text/html)",
                 once(head("HTTP/1.1 503 Service Unavailable", "Content-Type: text/html\r\nContent-Length: " +
                                                                   std::to_string(page.size()) + "\r\n" + ok_close) +
                      page),
                 {errc::server_error}});
    v.push_back({"status 200 with a Content-Encoding the client did not ask for (gzip)",
                 once(head("HTTP/1.1 200 OK", "Content-Encoding: gzip\r\nContent-Length: 5\r\n" + ok_close) +
                      one_id_row),
                 {errc::protocol_error}});
    v.push_back({"redirect (302 with Location) is not followed",
                 once(head("HTTP/1.1 302 Found", "Location: http://evil.example/\r\nContent-Length: 0\r\n" + ok_close)),
                 {errc::server_error}});
    // RowBinary replies ask for wait_end_of_query (a 200 is final): an
    // exception after 200 is looked for in streamed replies, clear_all's count.
    const std::string count_row = "{\"n\":\"7\"}\n";
    const std::string old_text = "Code: 241, e.displayText() = DB::Exception: Memory limit exceeded\n";
    v.push_back({"exception after status 200 (the old text)",
                 once(head("HTTP/1.1 200 OK", ok_close) + count_row + old_text),
                 {errc::server_error},
                 true});
    v.push_back({"exception after status 200 (the __exception__ block)",
                 once(head("HTTP/1.1 200 OK", ok_close) + count_row +
                      "__exception__\r\nCode: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_EXCEEDED)\n"
                      "70 __exception__\n"),
                 {errc::server_error, errc::truncated_response},
                 true});
    {
        auto hex_size = [](const std::string& chunk) {
            char size[24];
            std::snprintf(size, sizeof size, "%zx", chunk.size());
            return std::string(size);
        };
        const std::string size = hex_size(old_text);
        v.push_back({"exception after status 200, chunked, in a later chunk",
                     once(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\n" + ok_close) +
                          hex_size(count_row) + "\r\n" + count_row + "\r\n" + size + "\r\n" + old_text +
                          "\r\n0\r\n\r\n"),
                     {errc::server_error},
                     true});
    }
    v.push_back({"exception after status 200 on a RowBinary reply (wait_end_of_query ignored)",
                 once(head("HTTP/1.1 200 OK", ok_close) + one_id_row + "\n" + old_text),
                 {errc::server_error, errc::truncated_response, errc::protocol_error}});
    v.push_back({"no status line (an HTTP/0.9 body)", once(one_id_row + "\n"), {errc::protocol_error}});
    v.push_back({"garbage status line", once("HTTP/1.1 2OO OK\r\nContent-Length: 5\r\n\r\n" + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"status line of another protocol", once("SSH-2.0-OpenSSH_9.6\r\n"), {errc::protocol_error}});
    v.push_back({"a TLS alert to a plain request", once(std::string("\x15\x03\x01\x00\x02\x02\x46", 7)),
                 {errc::protocol_error}});
    v.push_back({"HTTP/9.9", once("HTTP/9.9 200 OK\r\nContent-Length: 5\r\n\r\n" + one_id_row), {errc::protocol_error}});
    v.push_back({"status 999", once("HTTP/1.1 999 Odd\r\nContent-Length: 5\r\n\r\n" + one_id_row),
                 {errc::protocol_error, errc::server_error}});
    v.push_back({"a header line without a colon",
                 once(head("HTTP/1.1 200 OK", "Content-Length: 5\r\nX-ClickHouse-Exception-Code 60\r\n") + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"a bare CR inside a header value",
                 once(head("HTTP/1.1 200 OK", "X-Note: a\rX-ClickHouse-Exception-Code: 60\r\nContent-Length: 5\r\n") +
                      one_id_row),
                 {errc::protocol_error}});
    v.push_back({"a NUL inside a header value",
                 once(head("HTTP/1.1 200 OK", std::string("X-Note: a\0b\r\nContent-Length: 5\r\n", 31)) + one_id_row),
                 {errc::protocol_error}});
    v.push_back({"a space before a header's colon",
                 once(head("HTTP/1.1 200 OK", "Content-Length : 5\r\n") + one_id_row), {errc::protocol_error}});
    v.push_back({"an endless header line", {{{"HTTP/1.1 200 OK\r\nX-Long: ", ms(0)}}, "aaaaaaaa", false, false},
                 {errc::protocol_error, errc::reply_too_large}});
    v.push_back({"endless header lines", {{{"HTTP/1.1 200 OK\r\n", ms(0)}}, "X-A: b\r\n", false, false},
                 {errc::protocol_error, errc::reply_too_large}});
    v.push_back({"100 Continue, then close", once("HTTP/1.1 100 Continue\r\n\r\n"),
                 {errc::connection_failed, errc::truncated_response, errc::protocol_error, errc::server_error}});
    v.push_back({"endless 100 Continue replies", {{}, "HTTP/1.1 100 Continue\r\n\r\n", false, false},
                 {errc::protocol_error, errc::timeout, errc::reply_too_large, errc::server_error}});
    v.push_back({"a 500 with an exception code header and a gigabyte of body",
                 {{{head("HTTP/1.1 500 Internal Server Error",
                         "X-ClickHouse-Exception-Code: 241\r\nContent-Length: 1000000000\r\n" + ok_close),
                    ms(0)}},
                  "Code: 241. DB::Exception: ",
                  false,
                  false},
                 {errc::server_error, errc::reply_too_large, errc::timeout}});
    return v;
}

} // namespace

TEST_CASE("hostile servers: every reply no ClickHouse sends is a typed error: never data, never a hang, memory "
          "bounded") {
    for (const auto& sc : scripted_cases()) {
        hostile_server_case hc;
        CAPTURE(std::string(sc.name));
        scripted_server server(sc.count ? "JSONEachRow" : "RowBinary", sc.script);
        auto r = state_ids_from(server, sc.count);
        INFO(r.message);
        MESSAGE(std::string(sc.name) << " -> " << (r.ec ? r.ec.message() : std::string("success")) << " in " << r.seconds
                        << " s: " << r.message.substr(0, 200));
        CHECK_FALSE(r.returned);
        CHECK(std::any_of(sc.expected.begin(), sc.expected.end(), [&](errc e) { return r.ec == e; }));
        CHECK(server.triggered() >= 1);
        CHECK(r.seconds < 10);
        CHECK(r.rss_growth < rss_bound);
        CHECK(r.message.size() < 2100); // the server's text is cut at 2000 bytes (trim_message), then the code is named
        // No control character but the line breaks and tabs of ClickHouse's own exception text (kept whole).
        CHECK(std::none_of(r.message.begin(), r.message.end(), [](char ch) {
            const auto b = static_cast<unsigned char>(ch);
            return (b < 0x20 && b != '\n' && b != '\r' && b != '\t') || b == 0x7f;
        }));
    }
}

TEST_CASE("http: a reply that arrives a few bytes at a time is read whole") {
    // Beast before 1.86 asserts when the last chunk's "0\r\n" and the next
    // byte arrive in separate reads (detail/body_feeder.hpp): this aborted
    // the sanitizer build (assertions on) before the transport fed the
    // parser itself.
    using ms = std::chrono::milliseconds;
    const ms gap(60); // longer than a delayed ACK, so each piece is a read of its own
    const std::string chunked = head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked\r\nConnection: close\r\n");
    struct piecewise {
        const char* name;
        std::vector<std::string> pieces;
        std::size_t ids;
    };
    const std::vector<piecewise> cases = {
        {"empty body: 0\\r\\n, \\r, \\n", {chunked + "0\r\n", "\r", "\n"}, 0},
        {"empty body: 0, \\r\\n\\r, \\n", {chunked + "0", "\r\n\r", "\n"}, 0},
        {"one row, then the last chunk byte by byte",
         {chunked + "5\r\n" + one_id_row + "\r\n", "0", "\r", "\n", "\r", "\n"},
         1},
        {"one row, its CRLF and the last chunk split",
         {chunked + "5\r\n" + one_id_row, "\r", "\n0\r\n", "\r", "\n"},
         1},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        scripted_server::script script;
        for (const auto& piece : c.pieces)
            script.steps.push_back({piece, gap});
        scripted_server server("RowBinary", script);
        auto r = state_ids_from(server);
        INFO(r.message);
        CHECK(r.returned);
        CHECK(r.message == "returned " + std::to_string(c.ids) + " ids");
        CHECK(server.triggered() == 1);
    }
}

TEST_CASE("http: values of at most 16 KiB travel as quoted literals in the statement, larger ones as an external "
          "table") {
    const std::string empty_reply = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    auto request_for = [&](const std::string& id) {
        scripted_server server("RowBinary", {{{empty_reply, {}}}, {}, false, false});
        asio::thread_pool threads(1);
        http_options h;
        h.host = "127.0.0.1";
        h.port = server.port();
        basic_state_store<http_transport> store(http_transport(threads.get_executor(), h));
        CHECK_FALSE(store.get(id).has_value());
        REQUIRE(server.triggered() == 1);
        return server.scripted_request();
    };
    // Every byte the quoting escapes, a quote and a byte that is not UTF-8.
    const std::string small = std::string("dev:'\\\n\t\r\0\b\f\xff x", 15);
    const std::string request = request_for(small);
    CHECK(contains(request, detail::quote_string(small)));
    CHECK_FALSE(contains(request, "multipart/form-data"));
    CHECK_FALSE(contains(request, "_chstate_values"));
    CHECK_FALSE(contains(request, "{state_id:String}"));

    const std::string large(detail::inline_parameter_limit + 1, 'x');
    const std::string large_request = request_for(large);
    CHECK(contains(large_request, "multipart/form-data"));
    CHECK(contains(large_request, "_chstate_values"));
    CHECK_FALSE(contains(large_request, "'" + large + "'"));
}

// ---- outcome_unknown: a write whose reply was lost may have landed ----------

namespace {
/// Runs `stmt` against a one-connection server that reads the request and
/// then closes without a word (or never answers, `silent`).
http_outcome run_lost_reply(statement stmt, bool silent) {
    asio::io_context server_io;
    asio::ip::tcp::acceptor acceptor(server_io, {loopback, 0});
    const auto port = acceptor.local_endpoint().port();
    std::thread server([&] {
        asio::ip::tcp::socket s(server_io);
        error_code ec;
        acceptor.accept(s, ec);
        std::array<char, 65536> buf;
        std::string in;
        while (!ec && in.find("\r\n\r\n") == std::string::npos)
            in.append(buf.data(), s.read_some(asio::buffer(buf), ec));
        if (silent)
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        s.close(ec);
    });
    asio::io_context io;
    http_options o;
    o.host = "127.0.0.1";
    o.port = port;
    o.request_timeout = std::chrono::milliseconds(500);
    http_transport t(io.get_executor(), o);
    http_outcome out;
    diagnostics d;
    t.async_execute(stmt, [](std::string_view) { return error_code{}; }, d, [&](error_code ec) { out.ec = ec; });
    io.run();
    server.join();
    out.message = d.message;
    return out;
}
} // namespace

TEST_CASE("http: a write sent and then cut off is outcome_unknown; a read stays a connection failure") {
    for (bool silent : {false, true}) {
        CAPTURE(silent);
        auto insert = run_lost_reply({"INSERT INTO t (a) VALUES (1)", {}, {}, {}, false}, silent);
        CHECK(insert.ec == errc::outcome_unknown);
        CHECK(contains(insert.message, "may have landed"));
        auto mutation = run_lost_reply({"ALTER TABLE t DELETE WHERE 1", {}, {}, {}, true}, silent);
        CHECK(mutation.ec == errc::outcome_unknown);
        auto read = run_lost_reply({"SELECT 1", {}, "TabSeparated", {}, true}, silent);
        CHECK(read.ec == (silent ? make_error_code(errc::timeout) : make_error_code(errc::connection_failed)));
        CHECK_FALSE(contains(read.message, "may have landed"));
    }
    CHECK(writes_data({" insert into t values (1)", {}, {}, {}, false}));
    CHECK(writes_data({"TRUNCATE TABLE t", {}, {}, {}, false}));
    CHECK(writes_data({"DELETE FROM t WHERE 1", {}, {}, {}, false}));
    CHECK_FALSE(writes_data({"SELECT 'INSERT'", {}, {}, {}, false}));
    CHECK_FALSE(writes_data({"INSERTS", {}, {}, {}, false}));
    CHECK_FALSE(writes_data({"CREATE TABLE t (a Int8) ENGINE = Memory", {}, {}, {}, false}));
}


// ---- failover: several endpoints -------------------------------------------------------

TEST_CASE("failover: a URI with several hosts gives every endpoint in order, the first in host/port") {
    auto c = config::from_uri("clickhouse://u:secretpw@h1:9001,[::1]:9002,h3/db?secure=true");
    CHECK(c.host == "h1");
    CHECK(c.port == 9001);
    REQUIRE(c.endpoints.size() == 3);
    CHECK(c.endpoints[0] == endpoint{"h1", 9001});
    CHECK(c.endpoints[1] == endpoint{"::1", 9002});
    CHECK(c.endpoints[2] == endpoint{"h3", 8123});
    CHECK(c.user == "u");
    CHECK(c.password == "secretpw");
    CHECK(c.database == "db");
    CHECK(c.secure);
    CHECK(c.redacted_uri() == "clickhouse://u:***@h1:9001,[::1]:9002,h3:8123/db?secure=true");
    auto o = make_http_options(c);
    CHECK(o.host == "h1");
    CHECK(o.port == 9001);
    CHECK(o.endpoints == c.endpoints);
    // A single host: one endpoint, the redacted URI as before.
    auto one = config::from_uri("clickhouse://u:p%2Cw@host/db");
    CHECK(one.password == "p,w");
    REQUIRE(one.endpoints.size() == 1);
    CHECK(one.endpoints[0] == endpoint{"host", 8123});
    CHECK(one.redacted_uri() == "clickhouse://u:***@host:8123/db");
    // host/port changed by hand win over endpoints[0].
    c.host = "other";
    c.port = 1;
    CHECK(c.all_endpoints().front() == endpoint{"other", 1});
    CHECK(c.redacted_uri() == "clickhouse://u:***@other:1,[::1]:9002,h3:8123/db?secure=true");
    CHECK(make_http_options(c).endpoints.front() == endpoint{"other", 1});
    // A percent-encoded ',' is no separator, and no host name holds one.
    auto r = parse_uri("clickhouse://u:secretpw@h1%2Ch2/db");
    CHECK(r.ec == errc::invalid_configuration);
    CHECK(contains(r.message, "is not a host name"));
    // IPv6 literals only, bracketed, several of them.
    auto v6 = config::from_uri("clickhouse://u:p@[::1],[2001:db8::7]:9000/db");
    REQUIRE(v6.endpoints.size() == 2);
    CHECK(v6.endpoints[0] == endpoint{"::1", 8123});
    CHECK(v6.endpoints[1] == endpoint{"2001:db8::7", 9000});
    CHECK(v6.redacted_uri() == "clickhouse://u:***@[::1]:8123,[2001:db8::7]:9000/db");
}

TEST_CASE("failover: a bad second host is refused with invalid_configuration naming it, never the password") {
    struct bad_case {
        const char* uri;
        const char* names;
    };
    for (auto b : {bad_case{"clickhouse://u:secretpw@h1:1,h:o/db", "host 2 of 2 (\"h:o\")"},
                   bad_case{"clickhouse://u:secretpw@h1,ho%3Ast/db", "host 2 of 2 (\"ho%3Ast\")"},
                   bad_case{"clickhouse://u:secretpw@h1,h2:99999/db", "host 2 of 2 (\"h2:99999\")"},
                   bad_case{"clickhouse://u:secretpw@h1,h%0D2/db", "host 2 of 2 (\"h%0D2\")"},
                   bad_case{"clickhouse://u:secretpw@h1,[v1.x]/db", "host 2 of 2 (\"[v1.x]\")"},
                   bad_case{"clickhouse://u:secretpw@h1,h%20x,h3/db", "host 2 of 3 (\"h%20x\")"},
                   bad_case{"clickhouse://u:secretpw@h1,/db", "host 2 of 2 is empty"},
                   bad_case{"clickhouse://u:secretpw@,h2/db", "host 1 of 2 is empty"}}) {
        CAPTURE(b.uri);
        auto r = parse_uri(b.uri);
        CHECK(r.ec == errc::invalid_configuration);
        CHECK(contains(r.message, b.names));
        CHECK_FALSE(contains(r.message, "secretpw"));
    }
    // The second host's own problem is in the message, as for a single host.
    auto r = parse_uri("clickhouse://u:secretpw@h1,ho%3Ast/db");
    CHECK(contains(r.message, "holds ':' but is not an IPv6 address"));
    // A password with an unencoded '/' and a ',' keeps today's hint, not a host split.
    auto slash = parse_uri("clickhouse://u:hun/te,r2@h1,h2/db");
    CHECK(slash.ec == errc::invalid_configuration);
    CHECK(contains(slash.message, "percent-encode"));
    CHECK_FALSE(contains(slash.message, "te,r2"));
}

TEST_CASE("failover: MELTANO_STATE_BACKEND_CLICKHOUSE_HOST takes a comma-separated list") {
    std::map<std::string, std::string> env{{"MELTANO_STATE_BACKEND_CLICKHOUSE_HOST", "a:1,[::1]:2,b,::1"}};
    auto c = config::from_environment(lookup_in(env));
    REQUIRE(c.endpoints.size() == 4);
    CHECK(c.endpoints[0] == endpoint{"a", 1});
    CHECK(c.endpoints[1] == endpoint{"::1", 2});
    CHECK(c.endpoints[2] == endpoint{"b", 8123});
    CHECK(c.endpoints[3] == endpoint{"::1", 8123});
    CHECK(c.host == "a");
    CHECK(c.port == 1);
    // Hosts without a port share PORT; the list replaces the URI's hosts.
    env = {{"MELTANO_STATE_BACKEND_URI", "clickhouse://u:secretpw@u1:7,u2:8/db"},
           {"MELTANO_STATE_BACKEND_CLICKHOUSE_HOST", "h1,h2:9"},
           {"MELTANO_STATE_BACKEND_CLICKHOUSE_PORT", "5"}};
    c = config::from_environment(lookup_in(env));
    CHECK(c.all_endpoints() == std::vector<endpoint>{{"h1", 5}, {"h2", 9}});
    CHECK(c.redacted_uri() == "clickhouse://u:***@h1:5,h2:9/db");
    // PORT alone: every endpoint of the URI.
    env.erase("MELTANO_STATE_BACKEND_CLICKHOUSE_HOST");
    c = config::from_environment(lookup_in(env));
    CHECK(c.all_endpoints() == std::vector<endpoint>{{"u1", 5}, {"u2", 5}});
    // Without PORT, a host without a port takes the URI's first port.
    env = {{"MELTANO_STATE_BACKEND_URI", "clickhouse://u:secretpw@u1:7/db"},
           {"MELTANO_STATE_BACKEND_CLICKHOUSE_HOST", "h1,h2:9"}};
    CHECK(config::from_environment(lookup_in(env)).all_endpoints() == std::vector<endpoint>{{"h1", 7}, {"h2", 9}});
    // Refused items, each named.
    // (No structured binding: clang 14 cannot capture one in CAPTURE's lambda.)
    for (const auto& refused : {std::pair{"h1,h:o", "HOST (host 2 of 2) \"h:o\" holds ':'"},
                                std::pair{"h1,", "HOST (host 2 of 2) is empty"},
                                std::pair{"h1,h2:0", "HOST (host 2 of 2) \"h2:0\" has an invalid port"},
                                std::pair{"h1,h 2", "HOST (host 2 of 2) \"h 2\" is not a host name"},
                                std::pair{"h1,[::1", "HOST (host 2 of 2) \"[::1\""}}) {
        const char* const value = refused.first;
        const char* const names = refused.second;
        CAPTURE(value);
        env["MELTANO_STATE_BACKEND_CLICKHOUSE_HOST"] = value;
        error_code ec;
        diagnostics d;
        config::from_environment(lookup_in(env), ec, d);
        CHECK(ec == errc::invalid_configuration);
        CHECK(contains(d.message, names));
        CHECK_FALSE(contains(d.message, "secretpw"));
    }
}

namespace {
/// A loopback TCP port that nothing listens on (bound, then closed).
std::uint16_t closed_port() {
    asio::io_context io;
    asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(loopback, 0));
    const auto port = a.local_endpoint().port();
    a.close();
    return port;
}

}

TEST_CASE("failover: a closed first endpoint → the statement is served by the second, which stays current") {
    fake_http_server server;
    REQUIRE(server.start(loopback, http_reply("200 OK", "1\n")));
    const auto dead = closed_port();
    asio::io_context io;
    http_transport t(io.get_executor(), {.host = "127.0.0.1", .port = dead, .password = "secretpw",
                                         .endpoints = {{"127.0.0.1", dead}, {"127.0.0.1", server.port()}}});
    CHECK(t.endpoints().size() == 2);
    CHECK(t.current_endpoint() == 0);
    auto r = run_on(t, io, statement{"SELECT 1", {}, "TabSeparated", {}, false}); // failover before sending: any statement
    INFO(r.message);
    CHECK_FALSE(r.ec);
    CHECK(r.data == "1\n");
    CHECK(t.failovers() == 1);
    CHECK(t.current_endpoint() == 1);
    server.stop();
    // The Host header names the endpoint that served.
    CHECK(contains(server.received(), "\r\nHost: 127.0.0.1:" + std::to_string(server.port()) + "\r\n"));
}

TEST_CASE("failover: every endpoint closed → connection_failed naming each, never the password") {
    const auto a = closed_port(), b = closed_port();
    asio::io_context io;
    http_transport t(io.get_executor(), {.host = "127.0.0.1", .port = a, .password = "secretpw",
                                         .endpoints = {{"127.0.0.1", a}, {"127.0.0.1", b}}});
    auto r = run_on(t, io, statement{"SELECT 1", {}, "TabSeparated", {}, true});
    CHECK(r.ec == errc::connection_failed);
    CHECK(contains(r.message, "127.0.0.1:" + std::to_string(a)));
    CHECK(contains(r.message, "127.0.0.1:" + std::to_string(b)));
    CHECK(contains(r.message, "2 of 2 tried"));
    CHECK_FALSE(contains(r.message, "secretpw"));
    CHECK(t.failovers() == 1); // moved once, to b; at most once per endpoint
}

TEST_CASE("failover: a reply lost after the request was sent: a write is outcome_unknown and not re-sent; "
          "an idempotent read moves on") {
    for (bool idempotent : {false, true}) {
        CAPTURE(idempotent);
        fake_http_server silent, good; // silent reads the request and closes without a reply
        REQUIRE(silent.start(loopback, ""));
        REQUIRE(good.start(loopback, http_reply("200 OK", "1\n")));
        asio::io_context io;
        http_transport t(io.get_executor(),
                         {.host = "127.0.0.1", .port = silent.port(), .password = "secretpw",
                          .endpoints = {{"127.0.0.1", silent.port()}, {"127.0.0.1", good.port()}}});
        const std::string sql = idempotent ? "SELECT 1" : "INSERT INTO t VALUES (1)";
        auto r = run_on(t, io, statement{sql, {}, idempotent ? "TabSeparated" : "", {}, idempotent});
        INFO(r.message);
        silent.stop();
        good.stop();
        CHECK(contains(silent.received(), sql));
        if (idempotent) {
            CHECK_FALSE(r.ec);
            CHECK(t.failovers() == 1);
            CHECK(good.accepted() == 1);
        } else {
            CHECK(r.ec == errc::outcome_unknown);
            CHECK(t.failovers() == 0);
            CHECK(good.accepted() == 0); // never sent to the second server
            CHECK(t.current_endpoint() == 0);
        }
        CHECK_FALSE(contains(r.message, "secretpw"));
    }
}

TEST_CASE("failover: a bad extra endpoint in http_options is refused before any byte is sent") {
    fake_http_server server;
    REQUIRE(server.start(loopback, http_reply("200 OK", "1\n")));
    auto r = run_http({.host = "127.0.0.1", .port = server.port(),
                       .endpoints = {{"127.0.0.1", server.port()}, {"h\r\nX-Injected: 1", 1}}});
    CHECK(r.ec == errc::invalid_configuration);
    CHECK(contains(r.message, "http_options.endpoints[1].host"));
    CHECK_FALSE(contains(r.message, "X-Injected"));
    r = run_http({.host = "127.0.0.1", .port = server.port(), .endpoints = {{"127.0.0.1", server.port()}, {"h", 0}}});
    CHECK(r.ec == errc::invalid_configuration);
    server.stop();
    CHECK(server.accepted() == 0);
}

} // TEST_SUITE("unit")
