// Tests of include/chstate/transport/http.hpp with several endpoints
// (config.hpp's host lists): failover.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

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
