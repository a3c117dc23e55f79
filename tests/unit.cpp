// Engine-free tests: the state model and merge rules, SQL text and quoting,
// glob translation, reply parsing, configuration, errors and the manual clock.
#include "support.hpp"

#include <chstate/detail/rows.hpp>
#include <chstate/detail/server_error.hpp>
#include <chstate/detail/statements.hpp>

#include <doctest/doctest.h>

#include <map>

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

TEST_CASE("glob_to_like: * and ? are wildcards, % _ and \\ are literal") {
    CHECK(detail::glob_to_like("dev_a*") == "dev\\_a%");
    CHECK(detail::glob_to_like("100%?") == "100\\%_");
    CHECK(detail::glob_to_like("a\\b") == "a\\\\b");
    CHECK(detail::glob_matches_all(""));
    CHECK(detail::glob_matches_all("*"));
    CHECK_FALSE(detail::glob_matches_all("**x"));
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
    // fenced: written only while the grant is the newest and not released.
    auto f = mono.insert_state("id", "{}", std::nullopt, 0, 7);
    CHECK(f.sql.find(" WHERE (SELECT max(token) FROM `meltano`.`state_grant` WHERE state_id = {state_id:String}) = "
                     "{fence:UInt64} AND (SELECT count() FROM `meltano`.`state_grant` WHERE state_id = "
                     "{state_id:String} AND token = {fence:UInt64} AND kind = 'release') = 0") != std::string::npos);
    CHECK(f.parameters.back().value == "7");
    auto fd = mono.delete_state("id", 7);
    // A delete is a mutation: no parameter, the id named by its SHA-256, numbers as literals.
    const std::string id_test = "SHA256(state_id) = unhex('" + detail::sha256_hex("id") + "')";
    CHECK(fd.sql == "DELETE FROM `meltano`.`state` WHERE " + id_test + " AND (SELECT max(token) FROM "
                    "`meltano`.`state_grant` WHERE " + id_test + ") = 7 AND (SELECT count() "
                    "FROM `meltano`.`state_grant` WHERE " + id_test + " AND token = 7 AND "
                    "kind = 'release') = 0");
    CHECK(fd.parameters.empty());
    // fenced under the seed's versions: the same condition on an INSERT … SELECT.
    auto fs = seed.insert_state("id", "{}", std::nullopt, 0, 7);
    CHECK(fs.sql.starts_with("INSERT INTO `meltano`.`state` (state_id, partial_state, completed_state) SELECT "));
    CHECK(fs.sql.find("{fence:UInt64}") != std::string::npos);
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
                               st.insert_state(evil, evil, evil, 1, 2), st.select_state_ids(evil + "*"),
                               st.select_lock_holder(evil), st.select_newest_versions({evil}, 0)}) {
        CHECK(s.sql.find(evil) == std::string::npos);
        CHECK_FALSE(s.parameters.empty());
    }
    // Deletes are mutations: they carry no value at all, only the id's SHA-256.
    for (const statement& s : {st.prune_grants(evil, 3), st.delete_state(evil), st.delete_state(evil, 4),
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

TEST_CASE("statements: state_ids without a pattern has no WHERE") {
    detail::statements st(detail::table_names("m", "s"), {});
    CHECK(st.select_state_ids("*").sql == "SELECT DISTINCT state_id FROM `m`.`s` FINAL ORDER BY state_id");
    auto filtered = st.select_state_ids("dev_*");
    CHECK(filtered.sql.find("LIKE {pattern:String}") != std::string::npos);
    CHECK(filtered.parameters.at(0).value == "dev\\_%");
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

} // TEST_SUITE("unit")
