// Tests of include/chstate/detail/http/request.hpp: what a request carries,
// checked before any byte is sent.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

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
