// The HTTP transport's pure parts (include/chstate/detail/http/), without a
// socket: the held-back tail fed every way a reply can arrive in pieces,
// the search for an exception appended to a body, the Keep-Alive timeout,
// the request (URL target, body, content type) for each form a statement
// can take, and what a reply with another status completes with. The
// transport over real and fake servers is tested in unit.cpp ("http:"
// cases) and server.cpp.
#include <chstate/detail/http/body_filter.hpp>
#include <chstate/detail/http/reply.hpp>
#include <chstate/detail/http/request.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

using namespace chstate;

namespace {

/// What a held_back_tail gave the sink and what it found at the end, for
/// `body` fed in the pieces `cuts` marks (offsets where a new piece starts).
struct filtered {
    std::string delivered; ///< every put() result, then finish()'s data
    std::string exception;
    bool has_exception = false;
    bool ahead = false;      ///< put() returned more than it had been given
};

filtered feed(std::string_view body, const std::vector<std::size_t>& cuts, bool status_final, std::size_t hold) {
    detail::held_back_tail tail(status_final, hold);
    filtered out;
    std::size_t from = 0;
    std::size_t given = 0;
    auto put = [&](std::size_t to) {
        given += to - from;
        const std::string_view ready = tail.put(body.substr(from, to - from));
        out.delivered += ready;
        if (out.delivered.size() > given)
            out.ahead = true;
        from = to;
    };
    for (std::size_t cut : cuts)
        put(cut);
    put(body.size());
    const auto end = tail.finish();
    out.delivered += end.data;
    out.has_exception = end.has_exception;
    out.exception = std::string(end.exception);
    return out;
}

/// `n` bytes of rows, each line "row <i>\n".
std::string rows(std::size_t n) {
    std::string out;
    for (int i = 0; out.size() < n; ++i)
        out += "row " + std::to_string(i) + "\n";
    out.resize(n);
    out.back() = '\n';
    return out;
}

const std::string old_exception =
    "Code: 241, e.displayText() = DB::Exception: Memory limit (for query) exceeded: would use 9.31 GiB, "
    "maximum: 9.31 GiB, e.what() = DB::Exception\n";
const std::string new_exception = "__exception__\r\nCode: 241. DB::Exception: Memory limit exceeded. "
                                  "(MEMORY_LIMIT_EXCEEDED) (version 25.1.1)\n257 __exception__\r\n";

/// Checks one chunking of `data` + `exception` (empty: a clean body).
void check_chunking(const std::string& data, const std::string& exception, const std::vector<std::size_t>& cuts,
                    std::size_t hold) {
    const std::string body = data + exception;
    const filtered f = feed(body, cuts, false, hold);
    CAPTURE(cuts.size());
    CAPTURE(hold);
    REQUIRE_FALSE(f.ahead);
    if (exception.empty()) {
        REQUIRE_FALSE(f.has_exception);
        REQUIRE(f.delivered == body); // every byte, in order, once
        return;
    }
    // No byte of the exception ever reaches the sink; the data before it
    // that did is a prefix of the data; the exception is found whole.
    REQUIRE(f.has_exception);
    REQUIRE(f.exception == exception);
    REQUIRE(f.delivered.size() <= data.size());
    REQUIRE(data.compare(0, f.delivered.size(), f.delivered) == 0);
}

} // namespace

TEST_SUITE("unit") {

TEST_CASE("held_back_tail: a trailing exception is never passed on, in every chunking into at most three pieces") {
    // A small hold, so that a short body already passes data on.
    const std::size_t hold = old_exception.size() + 8;
    for (const std::string& exception : {old_exception, new_exception, std::string()}) {
        const std::string data = rows(3 * hold);
        const std::size_t n = data.size() + exception.size();
        for (std::size_t a = 0; a <= n; ++a)
            for (std::size_t b = a; b <= n; ++b)
                check_chunking(data, exception, {a, b}, hold);
    }
}

TEST_CASE("held_back_tail: every chunk size, at the transport's 16 KiB hold") {
    const std::size_t hold = detail::held_back_tail::default_hold;
    for (const std::string& exception : {old_exception, new_exception, std::string()}) {
        const std::string data = rows(2 * hold + 3000);
        const std::size_t n = data.size() + exception.size();
        for (std::size_t size = 1; size <= n; size += size < 200 ? 1 : 97) {
            std::vector<std::size_t> cuts;
            for (std::size_t at = size; at < n; at += size)
                cuts.push_back(at);
            check_chunking(data, exception, cuts, hold);
        }
        for (std::size_t at = 0; at <= n; at += 13) // every split into two pieces, in steps
            check_chunking(data, exception, {at}, hold);
    }
}

TEST_CASE("held_back_tail: data passes on in whole lines, all but the last hold bytes") {
    detail::held_back_tail tail(false, 10);
    CHECK(tail.put("aaaa\nbbbb\n").empty()); // 10 bytes: nothing above 2 × hold yet
    CHECK(tail.put("cccc\ndddd\n").empty()); // 20
    // 25 pending: all but the last 10 bytes, cut after the last line break
    // within them (offset 14, "cccc\n" ends there).
    CHECK(tail.put("eeee\n") == "aaaa\nbbbb\ncccc\n");
    // The last line break within all but the last 10 bytes ends what passes.
    CHECK(tail.put(std::string(25, 'x')) == "dddd\neeee\n");
    // No line break in what may pass: cut at the hold.
    CHECK(tail.put(std::string(25, 'x')) == std::string(40, 'x'));
    const auto end = tail.finish();
    CHECK_FALSE(end.has_exception);
    CHECK(end.data == std::string(10, 'x'));
}

TEST_CASE("held_back_tail: a final status (wait_end_of_query=1) passes everything at once and searches nothing") {
    detail::held_back_tail tail(true);
    CHECK(tail.put("a\n") == "a\n");
    CHECK(tail.put(old_exception) == old_exception); // RowBinary data may look like anything
    CHECK(tail.put("") == "");
    const auto end = tail.finish();
    CHECK_FALSE(end.has_exception);
    CHECK(end.data.empty());
}

TEST_CASE("find_body_exception: the last line that is ClickHouse's exception, or npos") {
    CHECK(detail::find_body_exception(old_exception) == 0);
    CHECK(detail::find_body_exception("1\n2\n" + old_exception) == 4);
    CHECK(detail::find_body_exception("{\"n\":1}\n" + new_exception) == 8); // the __exception__ marker
    CHECK(detail::find_body_exception("x" + old_exception) == std::string::npos);          // not at a line's start
    CHECK(detail::find_body_exception("Code: 241, not an exception\n") == std::string::npos); // names none
    CHECK(detail::find_body_exception("Code: x, e.displayText() = DB::Exception: y\n") == std::string::npos);
    CHECK(detail::find_body_exception("") == std::string::npos);
    const std::string two = old_exception + "Code: 999, e.displayText() = Coordination::Exception: Session expired\n";
    CHECK(detail::find_body_exception(two) == old_exception.size());
}

TEST_CASE("keep_alive_timeout: only timeout=N counts") {
    CHECK(detail::keep_alive_timeout("timeout=5, max=1000") == std::chrono::milliseconds(5'000));
    CHECK(detail::keep_alive_timeout("timeout=0") == std::chrono::milliseconds(0));
    CHECK_FALSE(detail::keep_alive_timeout("timeout="));
    CHECK_FALSE(detail::keep_alive_timeout("timeout=x"));
    CHECK_FALSE(detail::keep_alive_timeout(""));
}

TEST_CASE("build_request: the URL target and body for each form of statement") {
    http_options o;
    o.database = "my db+ä";
    diagnostics d;
    detail::request_parts r;

    SUBCASE("no values: the statement is the body; database and format in the target, percent-encoded") {
        statement s{"SELECT 1", {}, "JSONEachRow", {}, true};
        REQUIRE_FALSE(detail::build_request(o, s, r, d));
        CHECK(r.target == "/?database=my%20db%2B%C3%A4&default_format=JSONEachRow");
        CHECK(r.body == "SELECT 1");
        CHECK(r.content_type == "text/plain; charset=UTF-8");
        CHECK_FALSE(r.buffered);
    }
    SUBCASE("RowBinary, or wait_end_of_query set: the server buffers the reply") {
        o.database.clear();
        statement s{"SELECT 1", {}, "RowBinary", {}, true};
        REQUIRE_FALSE(detail::build_request(o, s, r, d));
        CHECK(r.target == "/?default_format=RowBinary&wait_end_of_query=1");
        CHECK(r.buffered);
        o.wait_end_of_query = true;
        statement t{"SELECT 1", {}, {}, {}, true};
        REQUIRE_FALSE(detail::build_request(o, t, r, d));
        CHECK(r.target == "/?wait_end_of_query=1");
        CHECK(r.buffered);
    }
    SUBCASE("small values: quoted literals in the body's statement, nothing in the target") {
        o.database.clear();
        statement s{"SELECT {id:String}, {n:UInt64}", {{"id", "String", std::string("it's")}, {"n", "UInt64", "7"}},
                    "TabSeparated", {}, true};
        REQUIRE_FALSE(detail::build_request(o, s, r, d));
        CHECK(r.target == "/?default_format=TabSeparated");
        CHECK(r.body == "SELECT 'it\\'s', 7");
    }
    SUBCASE("INSERT data: the statement in `query`, the data as the body") {
        o.database.clear();
        statement s{"INSERT INTO t FORMAT TabSeparated", {}, {}, "a\tb\n", false};
        REQUIRE_FALSE(detail::build_request(o, s, r, d));
        CHECK(r.target == "/?query=INSERT%20INTO%20t%20FORMAT%20TabSeparated");
        CHECK(r.body == "a\tb\n");
    }
    SUBCASE("large values: an external table in a multipart body, the statement in `query`") {
        o.database.clear();
        const std::string big(detail::inline_parameter_limit + 1, 'v');
        statement s{"SELECT {id:String}", {{"id", "String", big}}, {}, {}, true};
        REQUIRE_FALSE(detail::build_request(o, s, r, d));
        CHECK(r.target == "/?query=SELECT%20%28SELECT%20id%20FROM%20_chstate_values%29"
                          "&_chstate_values_structure=id%20String&_chstate_values_format=TabSeparated");
        CHECK(r.content_type == "multipart/form-data; boundary=chstate-values-boundary");
        CHECK(r.body == "--chstate-values-boundary\r\nContent-Disposition: form-data; name=\"_chstate_values\"; "
                        "filename=\"_chstate_values\"\r\nContent-Type: application/octet-stream\r\n\r\n" +
                            big + "\n\r\n--chstate-values-boundary--\r\n");
        // A value holding the boundary gets another one.
        s.parameters[0].value = big + "chstate-values-boundary";
        REQUIRE_FALSE(detail::build_request(o, s, r, d));
        CHECK(r.content_type == "multipart/form-data; boundary=chstate-values-boundary-0");
    }
    SUBCASE("statement settings travel as URL parameters after the transport's own") {
        statement s{"SELECT 1", {}, {}, {}, true, {{"insert_quorum", "2"}, {"select_sequential_consistency", "1"}}};
        REQUIRE_FALSE(detail::build_request(o, s, r, d));
        CHECK(r.target == "/?database=my%20db%2B%C3%A4&insert_quorum=2&select_sequential_consistency=1");
    }
    SUBCASE("refused, nothing built: reserved or odd setting names, control characters, values with data") {
        for (const char* name : {"database", "default_format", "query", "wait_end_of_query", "user", "password",
                                 "_chstate_values_structure", "Upper", "", "a-b"}) {
            CAPTURE(name);
            statement s{"SELECT 1", {}, {}, {}, true, {{name, "1"}}};
            CHECK(detail::build_request(o, s, r, d) == errc::invalid_argument);
        }
        statement ctl{"SELECT 1", {}, {}, {}, true, {{"max_threads", "1\r\nX-Evil: 1"}}};
        CHECK(detail::build_request(o, ctl, r, d) == errc::invalid_argument);
        statement both{"INSERT INTO t FORMAT TabSeparated",
                       {{"id", "String", std::string(detail::inline_parameter_limit + 1, 'v')}}, {}, "x\n", false};
        CHECK(detail::build_request(o, both, r, d) == errc::invalid_argument);
    }
}

TEST_CASE("append_url_encoded: everything but RFC 3986 unreserved characters") {
    std::string out;
    detail::append_url_encoded(out, "aZ09-._~ +/?&=%\x01\xff");
    CHECK(out == "aZ09-._~%20%2B%2F%3F%26%3D%25%01%FF");
}

TEST_CASE("error_reply_code: ClickHouse's code, else authentication for 401/403, else server_error") {
    detail::error_reply clickhouse{81, "Code: 81 …"};
    detail::error_reply page{std::nullopt, "HTTP status 400 …"};
    CHECK(detail::error_reply_code(500, clickhouse) == make_clickhouse_error(81));
    CHECK(detail::error_reply_code(403, page) == errc::authentication_failed);
    CHECK(detail::error_reply_code(401, page) == errc::authentication_failed);
    CHECK(detail::error_reply_code(502, page) == errc::server_error);
    CHECK(detail::not_parsed(400, page));
    CHECK_FALSE(detail::not_parsed(400, clickhouse));
    CHECK_FALSE(detail::not_parsed(500, page));
}

TEST_CASE("unasked_coding: a Content-Encoding or a Transfer-Encoding chstate never asks for") {
    struct field {
        std::string n, v;
        std::string_view name_string() const { return n; }
        std::string_view value() const { return v; }
    };
    using head = std::vector<field>;
    CHECK(detail::unasked_coding(head{{"Content-Type", "text/plain"}}).empty());
    CHECK(detail::unasked_coding(head{{"transfer-encoding", "Chunked"}, {"Content-Encoding", "identity"}}).empty());
    CHECK(detail::unasked_coding(head{{"Content-Encoding", "gzip"}}) ==
          "the reply is encoded (Content-Encoding: gzip), which chstate never asks for: not read as rows");
    CHECK(detail::unasked_coding(head{{"TRANSFER-ENCODING", "gzip, chunked\r\n"}}) ==
          "the reply has a transfer coding chstate does not read (Transfer-Encoding: gzip, chunked?" "?): not read "
          "as rows");
}

} // TEST_SUITE("unit")
