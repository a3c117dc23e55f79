// Tests of include/chstate/config.hpp: URIs, environment variables, checks; hostile values refused.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

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

TEST_CASE("config: a user, password or host longer than an HTTP header value is refused when read") {
    const std::size_t most = detail::max_http_header_value;
    const auto uri_with = [](const std::string& user, const std::string& password, const std::string& host) {
        return "clickhouse://" + user + ":" + password + "@" + host + ":8123/db";
    };
    // The most a header carries (the Host header is host:port).
    {
        error_code ec;
        diagnostics d;
        const auto c = config::from_uri(uri_with(std::string(most, 'u'), std::string(most, 'p'), "h"), ec, d);
        CHECK_FALSE(ec);
        CHECK(c.password.size() == most);
        config::from_uri(uri_with("u", "p", std::string(most - 5, 'h')), ec, d); // "h…h:8123"
        CHECK_FALSE(ec);
    }
    for (const std::size_t over : {std::size_t(1), std::size_t(40'000)}) {
        const std::string user(most + over, 'u'), password(most + over, 'p');
        for (const auto& uri : {uri_with(user, "p", "h"), uri_with("u", password, "h"),
                                uri_with("u", "p", std::string(most - 4, 'h'))}) {
            error_code ec;
            diagnostics d;
            config::from_uri(uri, ec, d);
            CHECK(ec == errc::invalid_configuration);
            CHECK(d.message.find("too long") != std::string::npos);
            CHECK(d.message.find("pppppppp") == std::string::npos);
            CHECK(d.message.size() < 300);
        }
    }
    // The environment, as the CLI and Meltano set it.
    std::map<std::string, std::string> env = {{"MELTANO_STATE_BACKEND_URI", "clickhouse://u@h/db"},
                                              {"MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD", std::string(100'000, 'p')}};
    error_code ec;
    diagnostics d;
    config::from_environment(
        [&](const char* k) -> std::optional<std::string> {
            auto it = env.find(k);
            return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
        },
        ec, d);
    CHECK(ec == errc::invalid_configuration);
    CHECK(d.message.find("pppppppp") == std::string::npos);
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

TEST_CASE("config: an environment override set but empty is refused for USER and DATABASE, kept for PASSWORD") {
    // The URI cannot name an empty user or database (from_uri refuses
    // both); an empty override once slipped through and sent an empty
    // X-ClickHouse-User.
    for (const char* key : {"USER", "DATABASE"}) {
        CAPTURE(key);
        const std::string var = std::string("MELTANO_STATE_BACKEND_CLICKHOUSE_") + key;
        for (const char* uri : {"clickhouse://u:p@h:8123/db", ""}) {
            CAPTURE(uri);
            std::map<std::string, std::string> env{{var, ""}};
            if (*uri)
                env["MELTANO_STATE_BACKEND_URI"] = uri;
            else
                env["MELTANO_STATE_BACKEND_CLICKHOUSE_HOST"] = "h";
            error_code ec;
            diagnostics d;
            config::from_environment(lookup_in(env), ec, d);
            CHECK(ec == errc::invalid_configuration);
            CHECK(contains(d.message, var + " is set but empty"));
        }
    }
    std::map<std::string, std::string> env{{"MELTANO_STATE_BACKEND_URI", "clickhouse://u:p@h:8123/db"},
                                           {"MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD", ""}};
    error_code ec;
    diagnostics d;
    const config c = config::from_environment(lookup_in(env), ec, d);
    CHECK_FALSE(ec);
    CHECK(c.password.empty());
    CHECK(c.user == "u");
    // chdb: has no user or database: the variables are not read.
    std::map<std::string, std::string> embedded{{"MELTANO_STATE_BACKEND_URI", "chdb:///tmp/x"},
                                                {"MELTANO_STATE_BACKEND_CLICKHOUSE_USER", ""}};
    config::from_environment(lookup_in(embedded), ec, d);
    CHECK_FALSE(ec);
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

TEST_CASE("config: chdb:/// (the root folder) and a '#' fragment are refused") {
    for (const char* root : {"chdb:///", "chdb:/", "chdb:////"}) {
        CAPTURE(std::string(root));
        auto r = parse_uri(root);
        CHECK(r.ec == errc::invalid_configuration);
        CHECK(contains(r.message, "root folder"));
    }
    for (const char* uri : {"chdb:///var/lib/state#x", "clickhouse://u:p@host:8123/default#secretfrag",
                            "clickhouse://u:p@host/db?schema=s#"}) {
        CAPTURE(std::string(uri));
        auto r = parse_uri(uri);
        CHECK(r.ec == errc::invalid_configuration);
        CHECK(contains(r.message, "fragment"));
        CHECK_FALSE(contains(r.message, "secretfrag"));
    }
    // The path is one database name: more segments are refused, a trailing
    // '/' forgiven, an encoded '/' part of the name.
    CHECK(contains(parse_uri("clickhouse://u:p@host/default/extra").message, "more than a database name"));
    CHECK(config::from_uri("clickhouse://u:p@host/db/").database == "db");
    CHECK(config::from_uri("clickhouse://u:p@host/a%2Fb").database == "a/b");
    CHECK(parse_uri("clickhouse://u:p@host//").ec == errc::invalid_configuration);
    // A '#' inside a password with an '@' after it keeps its own message.
    CHECK(contains(parse_uri("clickhouse://u:p#w@host/db").message, "percent-encode"));
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
    // An unencoded '@' in the password: refused, never read as another host
    // (found by fuzz/config.cpp: clickhouse://u:p@ss@host/db parsed as host
    // "ss" with password "p"). The message shows no part of the password.
    for (const char* uri : {"clickhouse://u:p@s3cr3t@host:8123/db", "clickhouse://u:p@s3cr3t@host/db",
                            "clickhouse://u:p@s3cr3t@host", "https://u@x:s3cr3t@host/db",
                            "clickhouse://u:p@s3cr3t@b,c:9000/db"}) {
        CAPTURE(uri);
        auto at = parse_uri(uri);
        CHECK(at.ec == errc::invalid_configuration);
        CHECK(contains(at.message, "%40"));
        CHECK_FALSE(contains(at.message, "s3cr3t"));
    }
    CHECK(config::from_uri("clickhouse://u:p%40ss@host/db").password == "p@ss");
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

TEST_CASE("config: more than 32 endpoints are refused where they are named, in one short message") {
    // Each endpoint is tried in turn when those before it fail: 20,000 host
    // names made one failing operation spend hours on name lookups and its
    // message name every host.
    const auto hosts = [](std::size_t n) {
        std::string out;
        for (std::size_t i = 0; i < n; ++i)
            out += (i ? ",h" : "h") + std::to_string(i) + ":8123";
        return out;
    };
    auto ok = parse_uri("clickhouse://u:p@" + hosts(detail::max_endpoints) + "/db");
    CHECK_FALSE(ok.ec);
    for (const std::size_t n : {detail::max_endpoints + 1, std::size_t{20000}}) {
        CAPTURE(n);
        auto r = parse_uri("clickhouse://u:p@" + hosts(n) + "/db");
        CHECK(r.ec == errc::invalid_configuration);
        CHECK(contains(r.message, std::to_string(n) + " endpoints, at most 32"));
        CHECK(r.message.size() < 200);
        std::map<std::string, std::string> env{{"MELTANO_STATE_BACKEND_URI", "clickhouse://u:p@h:8123/db"},
                                               {"MELTANO_STATE_BACKEND_CLICKHOUSE_HOST", hosts(n)}};
        error_code ec;
        diagnostics d;
        config::from_environment(lookup_in(env), ec, d);
        CHECK(ec == errc::invalid_configuration);
        CHECK(contains(d.message, "MELTANO_STATE_BACKEND_CLICKHOUSE_HOST names " + std::to_string(n) + " endpoints"));
        CHECK(d.message.size() < 200);
    }
    // Hand-made: a config, and the transport's own options.
    config c;
    c.user = "u";
    c.endpoints.assign(detail::max_endpoints + 1, endpoint{"h", 8123});
    error_code ec;
    diagnostics d;
    make_http_options(c, ec, d);
    CHECK(ec == errc::invalid_configuration);
    CHECK(contains(d.message, "33 endpoints"));
    http_options o;
    o.endpoints.assign(detail::max_endpoints + 1, endpoint{"h", 8123});
    CHECK(detail::validate_http_options(o, d) == errc::invalid_configuration);
    CHECK(contains(d.message, "http_options.endpoints names 33 endpoints"));
    o.endpoints.resize(detail::max_endpoints);
    CHECK_FALSE(detail::validate_http_options(o, d));
}

TEST_CASE("config: hostile values in every URI setting and environment override end in a config or a typed error") {
    // Each (setting, value) pair is a hostile-input case: from_uri and
    // from_environment give a config or errc::invalid_configuration with a
    // short message that never shows a password; an accepted HTTP config
    // becomes http_options the transport accepts, and a request is built
    // from them — nothing throws past the error-code forms (a 100 KB
    // password once aborted the process at its first request).
    const std::vector<std::pair<const char*, std::string>> values = {
        {"empty", ""},
        {"space", " "},
        {"NUL", std::string("a\0b", 3)},
        {"CR LF", "a\r\nX-Injected: 1"},
        {"DEL", "a\x7f"},
        {"non-UTF-8", "\xff\xfe"},
        {"overlong UTF-8", "\xc0\xaf"},
        {"unicode", "\xc3\xbc\xe6\x97\xa5"},
        {"64 KiB", std::string(65536, 'x')},
        {"1 MiB", std::string(std::size_t(1) << 20, 'y')},
        {"percent garbage", "%zz%"},
        {"negative", "-1"},
        {"zero", "0"},
        {"huge number", "99999999999999999999999"},
        {"fraction", "1.5"},
        {"unit overflow", "9999999999999h"},
        {"quotes", "'\"`"},
        {"comma", "a,b"},
        {"at sign", "u@h"},
        {"bracket", "[::1"},
        {"slash", "a/b"},
        {"question mark", "a?b=c"},
        {"hash", "a#b"},
        {"semicolon", "a;DROP TABLE x"},
    };
    auto encoded = [](std::string_view v) {
        std::string out;
        detail::append_url_encoded(out, v);
        return out;
    };
    long cases = 0, failures = 0;
    // The checks on one outcome; false (and a failed check) when one fails.
    auto judge = [&](const std::string& where, const std::string& value, bool secret,
                     const std::function<config(error_code&, diagnostics&)>& make) {
        ++cases;
        bool ok = true;
        auto expect = [&](bool cond, const std::string& what) {
            if (!cond) {
                ok = false;
                FAIL_CHECK(where << ": " << what);
            }
        };
        try {
            error_code ec;
            diagnostics diag;
            config c = make(ec, diag);
            if (ec) {
                expect(ec == errc::invalid_configuration, "not invalid_configuration: " + ec.message());
                expect(!diag.message.empty() && diag.message.size() < 1000,
                       "message of " + std::to_string(diag.message.size()) + " bytes");
            } else if (c.engine == config::engine_kind::http) {
                error_code hec;
                diagnostics hdiag;
                http_options o = make_http_options(c, hec, hdiag);
                if (hec) {
                    expect(hec == errc::invalid_configuration, "make_http_options: " + hec.message());
                    diag.message = hdiag.message;
                } else {
                    expect(!detail::validate_http_options(o, hdiag), "accepted options the transport refuses");
                    detail::request_parts parts;
                    statement st{.sql = "SELECT 1", .format = "JSONEachRow", .idempotent = true, .name = "t"};
                    expect(!detail::build_request(o, st, parts, hdiag), "no request: " + hdiag.message);
                }
            }
            if (secret && value.size() >= 4)
                expect(diag.message.find(value) == std::string::npos, "the message shows the password");
        } catch (const std::exception& e) {
            expect(false, std::string("threw: ") + e.what());
        }
        if (!ok)
            ++failures;
    };
    const std::string base = "clickhouse://u:p@h:8123/db";
    // (Named copies, not structured bindings, inside the lambdas below:
    // Clang 14 cannot capture a structured binding.)
    for (const auto& entry : values) {
        const char* const name = entry.first;
        const std::string& v = entry.second;
        const std::string e = encoded(v);
        const std::vector<std::tuple<std::string, std::string, bool>> uris = {
            {"user", "clickhouse://" + e + ":p@h:8123/db", false},
            {"password", "clickhouse://u:" + e + "@h:8123/db", true},
            {"host", "clickhouse://u:p@" + e + ":8123/db", false},
            {"port", "clickhouse://u:p@h:" + e + "/db", false},
            {"database", "clickhouse://u:p@h:8123/" + e, false},
            {"chdb path", "chdb:///tmp/" + e, false},
        };
        for (const auto& u : uris) {
            const std::string& uri = std::get<1>(u);
            judge(std::string("URI ") + std::get<0>(u) + " = " + name, v, std::get<2>(u),
                  [&](error_code& ec, diagnostics& d) { return config::from_uri(uri, ec, d); });
        }
        for (const char* key : {"secure", "ca_file", "schema", "table", "connect_timeout", "request_timeout",
                                "lock_timeout", "cluster", "insert_quorum", "insert_quorum_timeout"})
            judge(std::string("URI ") + key + " = " + name, v, false, [&](error_code& ec, diagnostics& d) {
                return config::from_uri(base + "?" + key + "=" + e, ec, d);
            });
        for (const char* var : {"HOST", "PORT", "USER", "PASSWORD", "DATABASE", "SCHEMA", "TABLE", "SECURE", "CA_FILE",
                                "CONNECT_TIMEOUT", "REQUEST_TIMEOUT", "LOCK_TIMEOUT", "CLUSTER", "INSERT_QUORUM"}) {
            const std::map<std::string, std::string> env = {
                {"MELTANO_STATE_BACKEND_URI", base}, {std::string("MELTANO_STATE_BACKEND_CLICKHOUSE_") + var, v}};
            judge(std::string("environment ") + var + " = " + name, v, std::string_view(var) == "PASSWORD",
                  [&](error_code& ec, diagnostics& d) { return config::from_environment(lookup_in(env), ec, d); });
        }
        judge(std::string("MELTANO_STATE_BACKEND_URI = ") + name, v, false, [&](error_code& ec, diagnostics& d) {
            const std::map<std::string, std::string> env = {{"MELTANO_STATE_BACKEND_URI", v}};
            return config::from_environment(lookup_in(env), ec, d);
        });
    }
    test::hostile().cases += cases;
    test::hostile().failures += failures;
    MESSAGE("hostile configuration values: " << cases << " cases, " << failures << " failures");
    CHECK(failures == 0);
    CHECK(cases >= 700);
}
