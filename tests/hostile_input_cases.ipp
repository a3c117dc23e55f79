// The hostile-input suite (issue 11): ids, patterns, states and URIs a
// hostile or careless user could pass, on every transport. Templated test
// cases over the data fixtures (DATA_CASE, tests/contract.hpp), included once
// per test file, inside its suite.
// Each input is one case of test::hostile() (tests/tallies.hpp): counted
// when it has run, and counted as a failure when any of its checks failed
// (each failed check is also a failed doctest check, naming the case).

namespace hostile_input {

/// The engine the running case is on, named in every failed check (the
/// cases are templated over the fixture; a case sets it with engine_scope).
inline std::string& current_engine() {
    static thread_local std::string name;
    return name;
}
/// One DATA_CASE on one engine: names the engine, and holds the case's own
/// criterion on its size — at least `at_least` inputs ran (each input is a
/// case of test::hostile()), so a class of inputs that went missing fails
/// the case that lost it, not a threshold kept elsewhere.
class engine_scope {
public:
    engine_scope(const char* name, long at_least) : at_least_(at_least), start_(test::hostile().cases.load()) {
        current_engine() = name;
    }
    engine_scope(const engine_scope&) = delete;
    engine_scope& operator=(const engine_scope&) = delete;
    ~engine_scope() {
        const long ran = test::hostile().cases.load() - start_;
        if (std::uncaught_exceptions() == 0) // (a REQUIRE that stopped the case has failed it already)
            CHECK_MESSAGE(ran >= at_least_, current_engine() << ": " << ran << " inputs ran, want at least "
                                                             << at_least_);
        current_engine().clear();
    }

private:
    long at_least_;
    long start_;
};

/// One input: counted on construction, a failure counted on destruction
/// when any check failed.
class hcase {
public:
    explicit hcase(std::string label) : label_(std::move(label)) { ++test::hostile().cases; }
    hcase(const hcase&) = delete;
    hcase& operator=(const hcase&) = delete;
    ~hcase() {
        if (failed_)
            ++test::hostile().failures;
    }
    /// A doctest check that also marks the case failed.
    bool check(bool ok, const std::string& what) {
        if (!ok) {
            failed_ = true;
            const std::string message = current_engine() + " / " + label_ + ": " + what;
            FAIL_CHECK(message);
        }
        return ok;
    }
    const std::string& label() const { return label_; }

private:
    std::string label_;
    bool failed_ = false;
};

/// Runs one case; an exception escaping `body` is that case's failure.
template <class Body>
void run_case(const std::string& label, Body&& body) {
    hcase c(label);
    try {
        body(c);
    } catch (const std::exception& e) {
        c.check(false, std::string("threw: ") + e.what());
    }
}

/// `bytes` printable in a message: C escapes for anything not printable ASCII.
inline std::string show(std::string_view bytes, std::size_t limit = 120) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out = "\"";
    for (std::size_t i = 0; i < bytes.size() && i < limit; ++i) {
        const auto b = static_cast<unsigned char>(bytes[i]);
        if (b == '"' || b == '\\') {
            out += '\\';
            out += char(b);
        } else if (b >= 0x20 && b < 0x7f) {
            out += char(b);
        } else {
            out += "\\x";
            out += hex[b >> 4];
            out += hex[b & 15];
        }
    }
    if (bytes.size() > limit)
        out += "…(" + std::to_string(bytes.size()) + " bytes)";
    return out + "\"";
}

inline std::string show(const std::vector<std::string>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i)
        out += (i ? ", " : "") + show(v[i], 40);
    return out + "]";
}

/// Runs `op`, which must throw chstate::error with `want`; returns its what().
template <class Op>
std::string expect_error(hcase& c, errc want, Op&& op, const std::string& what) {
    try {
        op();
        c.check(false, what + ": no error (expected " + std::string(make_error_code(want).message()) + ")");
    } catch (const error& e) {
        c.check(e.code() == want, what + ": " + e.code().message() + " (expected " +
                                      make_error_code(want).message() + "): " + e.what());
        return e.what();
    }
    return {};
}

struct input {
    std::string label;
    std::string bytes;
};

inline std::string hex2(unsigned char b) {
    static constexpr char hex[] = "0123456789abcdef";
    return std::string{hex[b >> 4], hex[b & 15]};
}

/// Control bytes 0x00–0x1F and 0x7F.
inline std::vector<unsigned char> control_bytes() {
    std::vector<unsigned char> out;
    for (int b = 0; b < 0x20; ++b)
        out.push_back(static_cast<unsigned char>(b));
    out.push_back(0x7f);
    return out;
}

/// The ids of the id cases (none of them empty; the empty id has its own case).
inline std::vector<input> hostile_ids() {
    std::vector<input> v;
    for (unsigned char b : control_bytes())
        v.push_back({"control byte 0x" + hex2(b), std::string("id-") + char(b) + "-end"});
    auto bytes = [&](std::string label, std::string b) { v.push_back({std::move(label), std::move(b)}); };
    // Not UTF-8.
    bytes("lone continuation 0x80", "id-\x80-end");
    bytes("lone continuation 0xbf", "id-\xbf");
    bytes("overlong NUL C0 80", "id-\xc0\x80-end");
    bytes("overlong / C1 AF", "id-\xc1\xaf-end");
    bytes("overlong 3-byte E0 80 AF", "id-\xe0\x80\xaf-end");
    bytes("overlong 4-byte F0 80 80 AF", "id-\xf0\x80\x80\xaf-end");
    bytes("truncated 2-byte C3", "id-\xc3");
    bytes("truncated 3-byte E2 82", "id-\xe2\x82-end");
    bytes("truncated 4-byte F0 9F 98", "id-\xf0\x9f\x98");
    bytes("byte 0xff", "id-\xff-end");
    bytes("bytes 0xfe 0xff", "\xfe\xff");
    bytes("beyond U+10FFFF F4 90 80 80", "id-\xf4\x90\x80\x80");
    bytes("5-byte form F8 88 80 80 80", "id-\xf8\x88\x80\x80\x80");
    bytes("WTF-8 lone high surrogate ED A0 80", "id-\xed\xa0\x80-end");
    bytes("WTF-8 lone low surrogate ED BF BF", "id-\xed\xbf\xbf");
    bytes("CESU-8 surrogate pair ED A0 BD ED B8 80", "id-\xed\xa0\xbd\xed\xb8\x80");
    bytes("only 0x80", "\x80");
    // SQL and ClickHouse metacharacters.
    bytes("quote", "id-'-end");
    bytes("quote closes a literal", "x'); DROP TABLE state; --");
    bytes("backslash", "id-\\-end");
    bytes("trailing backslash", "id-\\");
    bytes("backslash quote", "id-\\'");
    bytes("semicolon", "id;SELECT 1");
    bytes("comment --", "id -- comment");
    bytes("comment /* */", "id/* c */end");
    bytes("open comment /*", "id/*");
    bytes("backtick", "id`x`");
    bytes("double quote", "id\"x\"");
    bytes("placeholder {state_id:String}", "{state_id:String}");
    bytes("placeholder {x:UInt8}", "id{x:UInt8}");
    bytes("heredoc $$", "$$id$$");
    // LIKE wildcards and escapes.
    bytes("percent", "id%");
    bytes("underscore", "id_x");
    bytes("lone %", "%");
    bytes("lone _", "_");
    bytes("escaped percent \\%", "id\\%");
    bytes("escaped underscore \\_", "id\\_");
    bytes("glob characters [a]", "id[a]");
    // Percent-escapes and URL syntax.
    bytes("%00", "id%00");
    bytes("%2F", "id%2Fx");
    bytes("%41 (A)", "%41");
    bytes("%zz", "id%zz");
    bytes("plus", "id+x");
    bytes("ampersand equals", "id&query=SELECT 1");
    bytes("hash question", "id#frag?x=1");
    // TabSeparated syntax.
    bytes("tab", "a\tb");
    bytes("newline", "a\nb");
    bytes("CRLF", "a\r\nb");
    bytes("\\N (TSV NULL)", "\\N");
    bytes("tab newline backslash", "\t\n\\");
    bytes("NUL only", std::string(1, '\0'));
    // Unicode.
    bytes("e acute NFC", "caf\xc3\xa9");
    bytes("e acute NFD", "cafe\xcc\x81");
    bytes("emoji", "id-\xf0\x9f\x98\x80");
    bytes("BOM", "\xef\xbb\xbfid");
    bytes("NBSP", "id\xc2\xa0x");
    bytes("RTL override", "id\xe2\x80\xaex");
    bytes("U+2028", "id\xe2\x80\xa8x");
    bytes("U+FFFF", "id\xef\xbf\xbf");
    // Whitespace.
    bytes("leading space", " sentinel");
    bytes("trailing space", "sentinel ");
    bytes("only spaces", "   ");
    // Long ids.
    bytes("64 KiB id", std::string(64 << 10, 'x'));
    std::string mixed;
    while (mixed.size() < (64 << 10))
        mixed += std::string("\t'\\\n\x00\xff%_", 9) + "\xc3\xa9";
    bytes("64 KiB of hostile bytes", mixed);
    return v;
}

// ---- globs ---------------------------------------------------------------------

/// The length of the character starting at s[i] as README's `?` counts one:
/// a well-formed UTF-8 sequence, or else a single byte.
inline std::size_t char_length(std::string_view s, std::size_t i) {
    const auto b = static_cast<unsigned char>(s[i]);
    auto cont = [&](std::size_t k) {
        return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    };
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF && cont(1))
        return 2;
    if (b >= 0xE0 && b <= 0xEF && cont(1) && cont(2)) {
        const auto b1 = static_cast<unsigned char>(s[i + 1]);
        if ((b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 >= 0xA0))
            return 1;
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4 && cont(1) && cont(2) && cont(3)) {
        const auto b1 = static_cast<unsigned char>(s[i + 1]);
        if ((b == 0xF0 && b1 < 0x90) || (b == 0xF4 && b1 >= 0x90))
            return 1;
        return 4;
    }
    return 1;
}

/// A string read as README's characters: well-formed UTF-8 sequences, or else single bytes.
inline std::vector<std::string_view> characters_of(std::string_view s) {
    std::vector<std::string_view> out;
    for (std::size_t i = 0; i < s.size(); i += out.back().size())
        out.push_back(s.substr(i, char_length(s, i)));
    return out;
}

/// Reference glob (store.hpp, README): glob and id read as characters; `*`
/// any run, `?` one character, every other character only itself; an empty
/// glob matches everything.
inline bool glob_match(std::string_view glob, std::string_view id) {
    if (glob.empty() || glob == "*")
        return true;
    const auto g = characters_of(glob), s = characters_of(id);
    // Backtracking over characters (both short here).
    std::function<bool(std::size_t, std::size_t)> m = [&](std::size_t gi, std::size_t si) -> bool {
        if (gi == g.size())
            return si == s.size();
        if (g[gi] == "*") {
            for (std::size_t k = si; k <= s.size(); ++k)
                if (m(gi + 1, k))
                    return true;
            return false;
        }
        if (si == s.size())
            return false;
        return (g[gi] == "?" || g[gi] == s[si]) && m(gi + 1, si + 1);
    };
    return m(0, 0);
}

// ---- states --------------------------------------------------------------------

/// Python's json.dumps escape of each control character (0x00–0x1F, 0x7F),
/// from `json.dumps(chr(c))[1:-1]`.
inline const char* python_control_escape(unsigned char b) {
    static const char* const low[32] = {
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b",     "\\t",     "\\n",     "\\u000b", "\\f",     "\\r",     "\\u000e", "\\u000f",
        "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
        "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f"};
    return b == 0x7f ? "\\u007f" : low[b];
}

/// {"k": {"k": … {"leaf": 1} …}}: `depth` objects deep (the part is one).
inline std::string nested_objects(std::size_t depth) {
    std::string text;
    text.reserve(depth * 8 + 16);
    for (std::size_t i = 1; i < depth; ++i)
        text += "{\"k\": ";
    text += "{\"leaf\": 1";
    text += std::string(depth, '}');
    return text;
}

/// One state case: `completed` stored under `id` reads back equal; its
/// to_json_text() is Python's json.dumps of {"completed": …, "partial": {}}
/// (`python_part` is json.dumps of the part); the stored column holds
/// exactly Python's text; and Python's text parses to the same value.
template <class T>
void check_state(hcase& c, T& t, const std::string& id, const object& completed, const std::string& python_part) {
    state s{id, {}, completed};
    t.store.set(s);
    auto got = t.store.get(id);
    if (!c.check(got.has_value(), "get finds the state"))
        return;
    c.check(*got == s, "get returns the state set");
    const std::string want = "{\"completed\": " + python_part + ", \"partial\": {}}";
    const std::string text = got->to_json_text();
    c.check(text == want, "to_json_text " + show(text, 200) + " is not Python's " + show(want, 200));
    auto row = test::stored_parts(t.transport, t.table(), id);
    c.check(row.found && !row.partial, "the stored row has partial_state NULL");
    c.check(row.completed && *row.completed == python_part,
            "stored completed_state " + show(row.completed.value_or("<NULL>"), 200) + " is not Python's " +
                show(python_part, 200));
    error_code ec;
    std::string why;
    value parsed = parse_json(python_part, ec, why);
    c.check(!ec, "Python's text parses: " + why);
    c.check(!ec && parsed.is_object() && parsed.get_object() == completed, "Python's text parses to the same value");
    std::string written;
    serialize_json(completed, written, ec, why);
    c.check(!ec && written == python_part, "serialize_json " + show(written, 200) + " differs from Python's");
}

/// A write the store must refuse with invalid_argument, leaving `id` as it was.
template <class T, class Op>
void check_refused(hcase& c, T& t, const std::string& id, Op&& op) {
    auto before = t.store.get(id);
    expect_error(c, errc::invalid_argument, op, "the write");
    c.check(t.store.get(id) == before, "the state stored before is intact");
}

// ---- URIs ----------------------------------------------------------------------

constexpr const char* secret = "S3cr3tPw";
/// What a message must never hold: the start every test password shares.
constexpr const char* secret_stem = "S3cr3t";

/// A URI from_uri must refuse with invalid_configuration: the message says
/// `mention` (when given) and never holds the password, in either form.
inline void check_uri_refused(hcase& c, const std::string& uri, std::string_view mention = {}) {
    error_code ec;
    diagnostics diag;
    config::from_uri(uri, ec, diag);
    c.check(ec == errc::invalid_configuration,
            "from_uri(" + show(uri) + ") gave " + (ec ? ec.message() : std::string("success")) +
                ", not invalid_configuration");
    c.check(!diag.message.empty(), "the refusal says why");
    c.check(diag.message.find(secret_stem) == std::string::npos, "the message shows the password: " + diag.message);
    c.check(diag.message.size() < 1000, "the message is bounded (" + std::to_string(diag.message.size()) + " bytes)");
    if (!mention.empty())
        c.check(diag.message.find(mention) != std::string::npos,
                "the message " + show(diag.message, 300) + " does not name " + std::string(mention));
    try {
        config::from_uri(uri);
        c.check(false, "the throwing from_uri accepted it");
    } catch (const error& e) {
        c.check(e.code() == errc::invalid_configuration, "the throwing form's code");
        c.check(std::string(e.what()).find(secret_stem) == std::string::npos, "what() shows the password");
    }
}

/// A URI from_uri must accept; returns the config (for checks on its fields).
inline config check_uri_accepted(hcase& c, const std::string& uri) {
    error_code ec;
    diagnostics diag;
    config cfg = config::from_uri(uri, ec, diag);
    c.check(!ec, "from_uri(" + show(uri) + ") refused it: " + diag.message);
    c.check(cfg.redacted_uri().find(secret_stem) == std::string::npos, "redacted_uri shows the password");
    return cfg;
}

inline std::string percent(unsigned char b) {
    static constexpr char hex[] = "0123456789ABCDEF";
    return std::string{'%', hex[b >> 4], hex[b & 15]};
}

inline void clickhouse_uri_cases() {
    const std::string pw = secret;
    // Every control character, percent-encoded, in every setting.
    struct place {
        const char* name;      // as the message names it
        std::string before, after;
    };
    const std::vector<place> places = {
        {"the user", "clickhouse://us", "er:" + pw + "@db.example:8123/meltano"},
        {"the password", "clickhouse://user:" + pw, "x@db.example:8123/meltano"},
        {"the host", "clickhouse://user:" + pw + "@db", "example:8123/meltano"},
        {"the database", "clickhouse://user:" + pw + "@db.example:8123/melt", "ano"},
        {"parameter schema", "clickhouse://user:" + pw + "@db.example:8123/meltano?schema=sch", "ema"},
        {"parameter table", "clickhouse://user:" + pw + "@db.example:8123/meltano?table=ta", "ble"},
        {"parameter ca_file", "clickhouse://user:" + pw + "@db.example:8123/meltano?secure=true&ca_file=/ca", ".pem"},
    };
    for (const auto& p : places)
        for (unsigned char b : control_bytes())
            run_case("clickhouse URI: 0x" + hex2(b) + " in " + p.name, [&](hcase& c) {
                check_uri_refused(c, p.before + percent(b) + p.after, p.name);
            });
    auto refused = [&](const std::string& label, const std::string& uri, std::string_view mention = {}) {
        run_case("clickhouse URI: " + label, [&](hcase& c) { check_uri_refused(c, uri, mention); });
    };
    const std::string base = "clickhouse://user:" + pw + "@db.example";
    // Ports.
    for (const char* port : {"abc", "99999", "-1", "0", "65536", "8123x", "+8123", "0x50", " 8123", "4294967297",
                             "18446744073709551617", "80:80", "８１２３"})
        refused(std::string("port \"") + port + "\"", base + ":" + port + "/meltano", "port");
    refused("empty port", base + ":/meltano");
    // Hosts.
    refused("IPv6 without brackets", "clickhouse://user:" + pw + "@::1:8123/meltano");
    refused("IPv6 bracket not closed", "clickhouse://user:" + pw + "@[::1:8123/meltano");
    refused("IPv6 with a zone id", "clickhouse://user:" + pw + "@[fe80::1%25eth0]:8123/meltano");
    refused("IPvFuture literal", "clickhouse://user:" + pw + "@[v1.x]:8123/meltano");
    refused("decoded %3A in a host name", base + "%3Aevil:8123/meltano", "host");
    refused("decoded %2F in a host name", base + "%2Fevil:8123/meltano", "host");
    refused("decoded %40 in a host name", "clickhouse://user:" + pw + "@evil%40db.example/meltano", "host");
    refused("decoded space in a host name", base + "%20x/meltano", "host");
    refused("empty host", "clickhouse://user:" + pw + "@:8123/meltano");
    // Structure.
    refused("no user", "clickhouse://:" + pw + "@db.example/meltano", "user");
    refused("no database", base + ":8123/", "database");
    refused("an unencoded / in the password", "clickhouse://user:S3cr3t/Pw@db.example/meltano");
    refused("an unencoded ? in the password", "clickhouse://user:S3cr3t?Pw@db.example/meltano");
    refused("an unencoded # in the password", "clickhouse://user:S3cr3t#Pw@db.example/meltano");
    refused("unknown scheme", "postgres://user:" + pw + "@db.example/meltano", "scheme");
    refused("not a URI", "clickhouse://user:" + pw + "@db example/meltano");
    // Query parameters.
    refused("unknown parameter", base + "/meltano?password=" + pw, "unknown URI parameter");
    refused("parameter in another case", base + "/meltano?Schema=x", "unknown URI parameter");
    refused("secure not a boolean", base + "/meltano?secure=maybe", "secure");
    refused("empty schema", base + "/meltano?schema=", "empty");
    refused("empty table", base + "/meltano?table=", "empty");
    refused("ca_file without secure", base + "/meltano?ca_file=/ca.pem", "ca_file");
    refused("duplicated schema", base + "/meltano?schema=a&schema=b", "schema");
    refused("duplicated secure (true then false)", base + "/meltano?secure=true&secure=false", "secure");
    // Timeouts.
    for (const char* t : {"abc", "-1", "0", "0s", "1.5s", "1x", "8d", "169h", "604800001ms", "99999999999999999999",
                          "", "s", "%205s", "5%20s", "1e3"})
        refused(std::string("request_timeout \"") + t + "\"", base + "/meltano?request_timeout=" + t,
                "request_timeout");
    refused("connect_timeout \"-5s\"", base + "/meltano?connect_timeout=-5s", "connect_timeout");
    refused("lock_timeout \"forever\"", base + "/meltano?lock_timeout=forever", "lock_timeout");
    // Overlong values: accepted exactly, or refused (bounded, no password).
    for (int field = 0; field < 4; ++field) {
        static const char* const names[] = {"user", "password", "database", "schema"};
        run_case(std::string("clickhouse URI: 1 MiB ") + names[field], [&](hcase& c) {
            const std::string big(1 << 20, field == 1 ? 'p' : 'n');
            std::string uri = field == 0   ? "clickhouse://" + big + ":" + pw + "@db.example/meltano"
                              : field == 1 ? "clickhouse://user:" + pw + big + "@db.example/meltano"
                              : field == 2 ? base + "/" + big
                                           : base + "/meltano?schema=" + big;
            error_code ec;
            diagnostics diag;
            config cfg = config::from_uri(uri, ec, diag);
            if (ec) {
                c.check(ec == errc::invalid_configuration, "refused with " + ec.message());
                c.check(diag.message.size() < 1000, "the message is bounded");
                c.check(diag.message.find(secret_stem) == std::string::npos, "the message shows the password");
            } else {
                const std::string& got = field == 0   ? cfg.user
                                         : field == 1 ? cfg.password
                                         : field == 2 ? cfg.database
                                                      : cfg.store.schema;
                c.check(got == (field == 1 ? pw + big : big), "the value is kept exactly");
                c.check(cfg.redacted_uri().find(big.substr(0, 64)) == std::string::npos || field != 1,
                        "redacted_uri shows the password");
            }
        });
    }
    // Accepted: IPv6 in brackets, kept bare; encoded characters decoded.
    run_case("clickhouse URI: IPv6 in brackets", [&](hcase& c) {
        auto cfg = check_uri_accepted(c, "clickhouse://user:" + pw + "@[::1]:8123/meltano");
        c.check(cfg.host == "::1", "host " + show(cfg.host) + " is ::1");
        c.check(cfg.redacted_uri() == "clickhouse://user:***@[::1]:8123/meltano", "redacted " + cfg.redacted_uri());
    });
    run_case("clickhouse URI: IPv6 full form in brackets", [&](hcase& c) {
        auto cfg = check_uri_accepted(c, "clickhouse://user:" + pw + "@[2001:db8::ff00:42:8329]/meltano");
        c.check(cfg.host == "2001:db8::ff00:42:8329", "host " + show(cfg.host));
        c.check(cfg.port == 8123, "default port");
    });
    run_case("clickhouse URI: encoded @ : / ? # % in user and password", [&](hcase& c) {
        auto cfg = check_uri_accepted(c, "clickhouse://u%40s%3Ae%2Fr:" + pw + "%3F%23%25%40%3A%2F@db.example/meltano");
        c.check(cfg.user == "u@s:e/r", "user " + show(cfg.user));
        c.check(cfg.password == pw + "?#%@:/", "the password decoded");
        c.check(cfg.redacted_uri().find(secret_stem) == std::string::npos, "redacted_uri shows the password");
    });
}

inline void chdb_uri_cases() {
    for (unsigned char b : control_bytes()) {
        run_case("chdb URI: 0x" + hex2(b) + " in the data folder", [&](hcase& c) {
            check_uri_refused(c, "chdb:///var/lib/st" + percent(b) + "ate", "data folder");
        });
        run_case("chdb URI: 0x" + hex2(b) + " in the schema", [&](hcase& c) {
            check_uri_refused(c, "chdb:///var/lib/state?schema=me" + percent(b) + "ltano", "schema");
        });
        run_case("chdb URI: 0x" + hex2(b) + " in the table", [&](hcase& c) {
            check_uri_refused(c, "chdb:relative/dir?table=st" + percent(b) + "ate", "table");
        });
    }
    auto refused = [&](const std::string& label, const std::string& uri, std::string_view mention = {}) {
        run_case("chdb URI: " + label, [&](hcase& c) { check_uri_refused(c, uri, mention); });
    };
    refused("chdb://relative/dir (an authority)", "chdb://relative/dir", "chdb:relative/dir");
    refused("chdb://host:1/dir (an authority with a port)", "chdb://host:1/dir", "chdb:relative/dir");
    refused("chdb://user@host/dir", std::string("chdb://user:") + secret + "@host/dir");
    refused("chdb: without a folder", "chdb:", "data folder");
    refused("unknown parameter", "chdb:///d?threads=4", "unknown URI parameter");
    refused("request_timeout (HTTP only)", "chdb:///d?request_timeout=5s", "request_timeout");
    refused("connect_timeout (HTTP only)", "chdb:///d?connect_timeout=5s", "connect_timeout");
    refused("ca_file (HTTP only)", "chdb:///d?ca_file=/x.pem", "ca_file");
    refused("lock_timeout \"0\"", "chdb:///d?lock_timeout=0", "lock_timeout");
    refused("lock_timeout \"8d\"", "chdb:///d?lock_timeout=8d", "lock_timeout");
    refused("lock_timeout \"-1s\"", "chdb:///d?lock_timeout=-1s", "lock_timeout");
    refused("empty schema", "chdb:///d?schema=", "empty");
    refused("duplicated table", "chdb:///d?table=a&table=b", "table");
    run_case("chdb URI: chdb:relative/dir is a relative folder", [&](hcase& c) {
        auto cfg = check_uri_accepted(c, "chdb:relative/dir");
        c.check(cfg.engine == config::engine_kind::embedded, "embedded engine");
        c.check(cfg.embedded_path == "relative/dir", "folder " + show(cfg.embedded_path));
    });
    run_case("chdb URI: chdb:///abs/dir with encoded bytes", [&](hcase& c) {
        auto cfg = check_uri_accepted(c, "chdb:///abs/d%C3%A9%20x?schema=s%27q&table=t%60b");
        c.check(cfg.embedded_path == "/abs/d\xc3\xa9 x", "folder " + show(cfg.embedded_path));
        c.check(cfg.store.schema == "s'q" && cfg.store.table == "t`b", "names decoded");
    });
}

} // namespace hostile_input

// ---- ids ------------------------------------------------------------------------

DATA_CASE("hostile-input: ids round-trip byte for byte through set, get and state_ids") {
    hostile_input::engine_scope engine(fixture::name, 104); // every input below
    using namespace hostile_input;
    store_under_test<fixture> t;
    t.store.ensure_schema();
    const state sentinel{"sentinel", object{{"p", "s"}}, object{{"n", -1}}};
    t.store.set(sentinel);
    // Every id stored, in byte order (std::string compares bytes as unsigned char, as ClickHouse does).
    std::map<std::string, state> written{{sentinel.state_id, sentinel}};
    auto stored_ids = [&] {
        std::vector<std::string> ids;
        for (const auto& kv : written)
            ids.push_back(kv.first);
        return ids;
    };
    const auto inputs = hostile_ids();
    std::string previous;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const input& in = inputs[i];
        run_case("id: " + in.label, [&](hcase& c) {
            state s{in.bytes, object{{"i", static_cast<std::int64_t>(i)}}, object{{"n", static_cast<std::int64_t>(i)}}};
            t.store.set(s);
            written[in.bytes] = s;
            auto got = t.store.get(in.bytes);
            c.check(got.has_value(), "get finds " + show(in.bytes));
            c.check(got && *got == s, "get returns the state set");
            c.check(got && got->state_id == in.bytes, "the id read back is byte-exact");
            const std::vector<std::string> want = stored_ids();
            auto ids = t.store.state_ids();
            c.check(ids == want, "state_ids() " + show(ids) + " is not " + show(want));
            // The id as a glob: literal unless it holds * or ?.
            if (in.bytes.find_first_of("*?") == std::string::npos) {
                try {
                    auto exact = t.store.state_ids(in.bytes);
                    c.check(exact == std::vector<std::string>{in.bytes},
                            "state_ids(the id) " + show(exact) + " is not the id alone");
                } catch (const error& e) {
                    c.check(false, std::string("state_ids(the id as a glob) failed: ") + e.what());
                }
            }
            c.check(t.store.get(sentinel.state_id) == sentinel, "the sentinel is unaffected");
            if (!previous.empty())
                c.check(t.store.get(previous) == written[previous], "the previous id is unaffected");
            // A near miss finds nothing: the id with one more byte.
            c.check(!t.store.get(in.bytes + "\x01").has_value(), "the id plus a byte is not found");
        });
        previous = in.bytes;
    }

    run_case("id: the empty id is refused by every operation", [&](hcase& c) {
        expect_error(c, errc::invalid_argument, [&] { t.store.set(state{"", {}, object{{"n", 1}}}); }, "set");
        expect_error(c, errc::invalid_argument, [&] { t.store.get(""); }, "get");
        expect_error(c, errc::invalid_argument, [&] { t.store.update(state{"", object{{"p", 1}}, {}}); }, "update");
        expect_error(c, errc::invalid_argument, [&] { t.store.delete_state(""); }, "delete_state");
        expect_error(c, errc::invalid_argument, [&] { t.store.set_all({state{"", {}, object{{"n", 1}}}}); }, "set_all");
        expect_error(c, errc::invalid_argument, [&] { t.store.copy(sentinel.state_id, ""); }, "copy to \"\"");
        c.check(t.store.state_ids() == stored_ids(), "nothing was written");
    });

    // A few operations beyond set/get, each on hostile ids (mutations on old
    // servers: only a few).
    const std::string nul_id = std::string("id-\0-end", 8), tab_id = "a\tb", ff_id = "id-\xff-end",
                      quote_id = "x'); DROP TABLE state; --", nl_id = "a\nb";
    run_case("id: copy from a NUL id to a new id holding quote, backslash and \\xff", [&](hcase& c) {
        const std::string dst = "copy'\\\xff\n";
        t.store.copy(nul_id, dst);
        state want = written[nul_id];
        want.state_id = dst;
        c.check(t.store.get(dst) == want, "the copy equals the source");
        c.check(t.store.get(nul_id) == written[nul_id], "the source is unchanged");
        written[dst] = want;
    });
    run_case("id: update() merges into a state whose id holds a newline", [&](hcase& c) {
        state merged = t.store.update(state{nl_id, object{{"more", "yes"}}, {}});
        state want = written[nl_id];
        want.partial_state.insert_or_assign("more", "yes");
        c.check(merged == want, "update returns the merged state");
        c.check(t.store.get(nl_id) == want, "get returns the merged state");
        written[nl_id] = want;
    });
    run_case("id: delete_state of a \\xff id removes it alone", [&](hcase& c) {
        t.store.delete_state(ff_id);
        c.check(!t.store.get(ff_id).has_value(), "the id is gone");
        written.erase(ff_id);
        c.check(t.store.state_ids() == stored_ids(), "only it went");
    });
    run_case("id: move from a tab id to a quote-injection id's sibling", [&](hcase& c) {
        const std::string dst = quote_id + "\t2";
        t.store.move(tab_id, dst);
        state want = written[tab_id];
        want.state_id = dst;
        c.check(t.store.get(dst) == want, "the destination holds the state");
        c.check(!t.store.get(tab_id).has_value(), "the source is gone");
        c.check(t.store.get(quote_id) == written[quote_id], "the id the destination extends is unchanged");
        written.erase(tab_id);
        written[dst] = want;
    });
    run_case("id: clear of the id \"%\" (a LIKE wildcard) removes it alone, and no lock row stays", [&](hcase& c) {
        t.store.clear("%");
        c.check(!t.store.get("%").has_value(), "the id is gone");
        written.erase("%");
        c.check(t.store.state_ids() == stored_ids(), "only it went");
        c.check(t.raw("SELECT count() FROM " + t.lock_table()) == "0\n", "no lock row is left");
    });
    run_case("id: get_all visits every hostile id with its own state, in byte order", [&](hcase& c) {
        std::vector<std::string> seen;
        bool all_equal = true;
        t.store.get_all([&](state&& s) {
            seen.push_back(s.state_id);
            auto it = written.find(s.state_id);
            all_equal = all_equal && it != written.end() && it->second == s;
        });
        c.check(seen == stored_ids(), "get_all's ids");
        c.check(all_equal, "every state get_all delivers is the one written");
    });
}

// ---- patterns -----------------------------------------------------------------

DATA_CASE("hostile-input: state_ids(glob) matches as the reference glob does: * and ? wildcards, all else literal") {
    hostile_input::engine_scope engine(fixture::name, 52); // every input below
    using namespace hostile_input;
    store_under_test<fixture> t;
    const std::vector<std::string> ids = {
        "a", "ab", "a*b", "a%b", "a_b", "axb", "a\\b", "a'b", "a?b", "a\tb", "a\nb", std::string("a\0b", 3),
        "a\xff" "b", "a\xc3\xa9" "b", "a\xc3" "b", "a%", "a_", "%", "_", "\\", "'", "*", "?", "x\x01y", "\xff",
        "\xc3\xa9", "e", "A", "a\"b", "a`b", "a;--b", "a/*b", "a/x/b", "abb", "a\\%b", "a\\_b", "a\xed\xa0\x80" "b",
        "a\xf0\x9f\x98\x80" "b", "\xc3\xa9t\xc3\xa9", "[ab]", "a.b", "a^b$", "a(b|c)"};
    std::vector<state> all;
    for (const auto& id : ids)
        all.push_back(state{id, {}, object{{"n", 1}}});
    t.store.set_all(all);
    std::vector<std::string> sorted_ids(ids);
    std::sort(sorted_ids.begin(), sorted_ids.end());
    const std::vector<input> globs = {
        {"*", "*"},
        {"empty", ""},
        {"a*", "a*"},
        {"*b", "*b"},
        {"a*b", "a*b"},
        {"a?b", "a?b"},
        {"??", "??"},
        {"?", "?"},
        {"*?", "*?"},
        {"**", "**"},
        {"a%b (literal %)", "a%b"},
        {"a_b (literal _)", "a_b"},
        {"% alone", "%"},
        {"_ alone", "_"},
        {"*%*", "*%*"},
        {"*_*", "*_*"},
        {"a\\b (literal backslash)", "a\\b"},
        {"backslash alone", "\\"},
        {"*\\*", "*\\*"},
        {"a\\%b", "a\\%b"},
        {"a\\_b", "a\\_b"},
        {"trailing backslash a\\", "a\\"},
        {"a'b", "a'b"},
        {"*'*", "*'*"},
        {"a\"b", "a\"b"},
        {"*`*", "*`*"},
        {"*;--*", "*;--*"},
        {"a/*b (glob star after /)", "a/*b"},
        {"*\\t*", "*\t*"},
        {"*\\n*", "*\n*"},
        {"*NUL*", std::string("*\0*", 3)},
        {"a NUL b", std::string("a\0b", 3)},
        {"*\\x01*", "*\x01*"},
        {"*\\xff*", "*\xff*"},
        {"\\xff", "\xff"},
        {"a??b (two characters, or one 2-byte character)", "a??b"},
        {"*\\xc3\\xa9*", "*\xc3\xa9*"},
        {"truncated UTF-8 a\\xc3b", "a\xc3" "b"},
        {"a\\xc3?", "a\xc3?"},
        {"?t?", "?t?"},
        {"A* (case-sensitive)", "A*"},
        {"[ab] (no classes)", "[ab]"},
        {"a.b (no regex)", "a.b"},
        {"a^b$ (no regex)", "a^b$"},
        {"a(b|c) (no regex)", "a(b|c)"},
        {"no match", "zzz*"},
        {"lone surrogate a\\xed\\xa0\\x80b", "a\xed\xa0\x80" "b"},
        {"*?b", "*?b"},
        {"quote injection", "' OR 1=1 --"},
        {"placeholder {pattern:String}", "{pattern:String}"},
    };
    for (const auto& g : globs)
        run_case("pattern: " + g.label, [&](hcase& c) {
            std::vector<std::string> want;
            for (const auto& id : sorted_ids)
                if (glob_match(g.bytes, id))
                    want.push_back(id);
            auto got = t.store.state_ids(g.bytes);
            c.check(got == want, "state_ids(" + show(g.bytes) + ") gave " + show(got) + ", the reference " + show(want));
        });
    // Cost: a glob's `?` each cost a pass over every id the server returns
    // (glob.hpp): 64 is the most a glob holds; more is refused, not slow.
    run_case("pattern: 64 ? (the most)", [&](hcase& c) {
        const auto got = t.store.state_ids("*" + std::string(64, '?'));
        c.check(got.empty(), "state_ids(*{64 ?}) gave " + show(got) + ", no id is 64 characters");
    });
    run_case("pattern: 65 ? (refused)", [&](hcase& c) {
        expect_error(c, errc::invalid_argument, [&] { (void)t.store.state_ids("a*" + std::string(65, '?')); },
                     "state_ids(a*{65 ?})");
    });
}

// ---- states ---------------------------------------------------------------------

DATA_CASE("hostile-input: states round-trip exactly, as Python's json writes them") {
    hostile_input::engine_scope engine(fixture::name, 80); // every input below
    using namespace hostile_input;
    store_under_test<fixture> t;
    t.store.ensure_schema();
    auto one = [](std::string key, value v) {
        object o;
        o.insert_or_assign(std::move(key), std::move(v));
        return o;
    };
    auto value_case = [&](const std::string& label, value v, const std::string& python) {
        run_case("state: " + label, [&](hcase& c) { check_state(c, t, "s-" + label, one("x", v), python); });
    };
    const double inf = std::numeric_limits<double>::infinity();
    value_case("NaN", std::numeric_limits<double>::quiet_NaN(), R"({"x": NaN})");
    value_case("Infinity", inf, R"({"x": Infinity})");
    value_case("-Infinity", -inf, R"({"x": -Infinity})");
    value_case("-0.0", -0.0, R"({"x": -0.0})");
    value_case("0.0", 0.0, R"({"x": 0.0})");
    value_case("2**64", big_integer("18446744073709551616"), R"({"x": 18446744073709551616})");
    value_case("-2**63-1", big_integer("-9223372036854775809"), R"({"x": -9223372036854775809})");
    value_case("2**63-1", std::numeric_limits<std::int64_t>::max(), R"({"x": 9223372036854775807})");
    value_case("-2**63", std::numeric_limits<std::int64_t>::min(), R"({"x": -9223372036854775808})");
    value_case("2**63", std::uint64_t(1) << 63, R"({"x": 9223372036854775808})");
    value_case("2**64-1", std::numeric_limits<std::uint64_t>::max(), R"({"x": 18446744073709551615})");
    // json.dumps(f) for each float (Python's repr).
    const std::vector<std::pair<double, const char*>> floats = {
        {1e16, "1e+16"},
        {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {0.1 + 0.2, "0.30000000000000004"},
        {1e-7, "1e-07"},
        {123456789012345678901.0, "1.2345678901234568e+20"},
        {1e22, "1e+22"},
        {-1e-300, "-1e-300"},
        {2.5, "2.5"},
        {1e15, "1000000000000000.0"},
        {1e-5, "1e-05"},
        {0.0001, "0.0001"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"},
        {1700000000.8702567, "1700000000.8702567"},
    };
    for (const auto& f : floats)
        value_case(std::string("float ") + f.second, f.first, std::string(R"({"x": )") + f.second + "}");

    // Integers at Python's digit limit: 4,300 digits written, 4,301 refused.
    run_case("state: an integer of 4,300 digits", [&](hcase& c) {
        const std::string digits = "1" + std::string(4299, '7');
        check_state(c, t, "s-4300", one("x", big_integer(digits)), "{\"x\": " + digits + "}");
    });
    run_case("state: a negative integer of 4,300 digits", [&](hcase& c) {
        const std::string digits = "-9" + std::string(4299, '0');
        check_state(c, t, "s-4300neg", one("x", big_integer(digits)), "{\"x\": " + digits + "}");
    });
    run_case("state: an integer of 4,301 digits is refused on write; the stored state is intact", [&](hcase& c) {
        const std::string digits = "1" + std::string(4300, '7');
        check_refused(c, t, "s-4300", [&] { t.store.set(state{"s-4300", {}, one("x", big_integer(digits))}); });
        check_refused(c, t, "s-4301", [&] { t.store.set(state{"s-4301", {}, one("x", big_integer(digits))}); });
        c.check(!t.store.get("s-4301"), "nothing was written for the new id");
        // The same through update() and set_all (all or nothing).
        check_refused(c, t, "s-4300", [&] { t.store.update(state{"s-4300", one("y", big_integer(digits)), {}}); });
        check_refused(c, t, "s-4300", [&] {
            t.store.set_all({state{"s-4300", {}, object{{"ok", 1}}}, state{"s-4301", {}, one("x", big_integer(digits))}});
        });
    });

    // Depth: at the limit accepted, one over refused with the stored state intact.
    const std::size_t limit = json_limits{}.max_depth;
    run_case("state: nested exactly json_limits::max_depth deep", [&](hcase& c) {
        const std::string text = nested_objects(limit);
        object deep = parse_json(text).as_object();
        check_state(c, t, "s-depth", deep, text);
    });
    run_case("state: one level deeper than json_limits::max_depth is refused; the stored state is intact",
             [&](hcase& c) {
                 json_limits wider{limit + 1};
                 object deeper = parse_json(nested_objects(limit + 1), wider).as_object();
                 check_refused(c, t, "s-depth", [&] { t.store.set(state{"s-depth", {}, deeper}); });
                 check_refused(c, t, "s-depth", [&] { t.store.set(state{"s-depth", deeper, {}}); });
                 std::string out, why;
                 error_code ec;
                 serialize_json(deeper, out, ec, why);
                 c.check(ec == errc::invalid_argument && out.empty(), "serialize_json refuses it too");
                 parse_json(nested_objects(limit + 1), ec, why);
                 c.check(ec == errc::invalid_argument, "parse_json refuses the text");
             });
    run_case("state: arrays nested to the limit inside the part", [&](hcase& c) {
        const std::string text = "{\"a\": " + std::string(limit - 1, '[') + std::string(limit - 1, ']') + "}";
        check_state(c, t, "s-arrays", parse_json(text).as_object(), text);
    });

    // Duplicate keys: Python keeps the first position and the last value.
    run_case("state: duplicate keys keep the first position and the last value", [&](hcase& c) {
        // json.dumps(json.loads('{"a": 1, "b": 2, "a": 3, "c": {"d": 1, "d": {"e": 2}}}'))
        object o = parse_json(R"({"a": 1, "b": 2, "a": 3, "c": {"d": 1, "d": {"e": 2}}})").as_object();
        check_state(c, t, "s-dup", o, R"({"a": 3, "b": 2, "c": {"d": {"e": 2}}})");
    });
    // Surrogates (WTF-8 inside chstate, \u escapes in the text).
    const std::vector<std::pair<std::string, std::string>> surrogates = {
        // {json text, json.dumps(json.loads(text))}
        {R"({"x": "\ud800"})", R"({"x": "\ud800"})"},
        {R"({"x": "\udfff"})", R"({"x": "\udfff"})"},
        {R"({"x": "\ude00\ud83d"})", R"({"x": "\ude00\ud83d"})"},
        {R"({"x": "\ud83d\ude00"})", R"({"x": "\ud83d\ude00"})"},
        {R"({"\ud800": "key"})", R"({"\ud800": "key"})"},
        {R"({"x": "a\ud800\ud800b"})", R"({"x": "a\ud800\ud800b"})"},
    };
    for (std::size_t i = 0; i < surrogates.size(); ++i)
        run_case("state: surrogates " + surrogates[i].first, [&](hcase& c) {
            check_state(c, t, "s-sur" + std::to_string(i), parse_json(surrogates[i].first).as_object(),
                        surrogates[i].second);
        });
    // Every control character in a key and in a string.
    for (unsigned char b : control_bytes())
        run_case("state: control character 0x" + hex2(b) + " in a key and a string", [&](hcase& c) {
            const std::string ch(1, char(b));
            const std::string esc = python_control_escape(b);
            check_state(c, t, "s-ctl" + hex2(b), one("k" + ch, "v" + ch + "w"),
                        "{\"k" + esc + "\": \"v" + esc + "w\"}");
        });
    run_case("state: keys with quotes, backslashes, backticks, U+2028, non-ASCII", [&](hcase& c) {
        // json.dumps({"\"": 1, "\\": 2, "'": 3, "`": 4, "\u2028": "\u2028", "é": "😀", "": ""})
        object o;
        o.insert_or_assign("\"", 1);
        o.insert_or_assign("\\", 2);
        o.insert_or_assign("'", 3);
        o.insert_or_assign("`", 4);
        o.insert_or_assign("\xe2\x80\xa8", "\xe2\x80\xa8");
        o.insert_or_assign("\xc3\xa9", "\xf0\x9f\x98\x80");
        o.insert_or_assign("", "");
        check_state(c, t, "s-keys", o,
                    R"({"\"": 1, "\\": 2, "'": 3, "`": 4, "\u2028": "\u2028", "\u00e9": "\ud83d\ude00", "": ""})");
    });
    run_case("state: empty objects and arrays, null, booleans", [&](hcase& c) {
        const std::string text = R"({"a": {}, "b": [], "c": [{}, [], null, true, false, 0, -1, ""], "d": {"e": {}}})";
        check_state(c, t, "s-empty", parse_json(text).as_object(), text);
    });
    run_case("state: both parts empty read back as empty, stored as NULL", [&](hcase& c) {
        t.store.set(state{"s-none", {}, {}});
        auto got = t.store.get("s-none");
        c.check(got && got->partial_state.empty() && got->completed_state.empty(), "empty parts");
        c.check(got && got->to_json_text() == R"({"completed": {}, "partial": {}})", "to_json_text");
        auto row = test::stored_parts(t.transport, t.table(), "s-none");
        c.check(row.found && !row.partial && !row.completed, "both NULL");
    });
    run_case("state: a 4 MiB string of escapes, surrogate pairs and quotes", [&](hcase& c) {
        // json.dumps("é😀\n\"\\\t") == '"\\u00e9\\ud83d\\ude00\\n\\"\\\\\\t"'
        const std::string unit = "\xc3\xa9\xf0\x9f\x98\x80\n\"\\\t", escaped = R"(\u00e9\ud83d\ude00\n\"\\\t)";
        std::string raw, py;
        while (raw.size() < (4u << 20)) {
            raw += unit;
            py += escaped;
        }
        check_state(c, t, "s-long", one("s", raw), "{\"s\": \"" + py + "\"}");
    });
    run_case("state: a 64 KiB key", [&](hcase& c) {
        const std::string key(64 << 10, 'k');
        check_state(c, t, "s-longkey", one(key, 1), "{\"" + key + "\": 1}");
    });
    run_case("state: 10,000 keys keep their order", [&](hcase& c) {
        object o;
        std::string py = "{";
        for (int i = 9999; i >= 0; --i) {
            o.insert_or_assign("k" + std::to_string(i), i);
            py += (i == 9999 ? "\"k" : ", \"k") + std::to_string(i) + "\": " + std::to_string(i);
        }
        check_state(c, t, "s-keys10k", o, py + "}");
    });
    run_case("state: a string that is not UTF-8 is refused; the stored state is intact", [&](hcase& c) {
        t.store.set(state{"s-utf8", {}, object{{"ok", 1}}});
        check_refused(c, t, "s-utf8", [&] { t.store.set(state{"s-utf8", {}, one("x", "a\xff" "b")}); });
        check_refused(c, t, "s-utf8", [&] { t.store.set(state{"s-utf8", one("x", "\xc0\x80"), {}}); });
    });
    run_case("state: a key that is not UTF-8 is refused; the stored state is intact", [&](hcase& c) {
        check_refused(c, t, "s-utf8", [&] { t.store.set(state{"s-utf8", {}, one("k\xe2\x82", 1)}); });
        check_refused(c, t, "s-utf8", [&] { t.store.update(state{"s-utf8", one("\x80", 1), {}}); });
    });
    run_case("state: from_json_text of Python's text with every hostile value", [&](hcase& c) {
        const std::string py = R"({"completed": {"n": NaN, "i": -Infinity, "z": -0.0, "b": 18446744073709551616, )"
                               R"("s": "\ud800\u0000\"", "f": 1e+16}, "partial": {"\u007f": [1.7976931348623157e+308]}})";
        state s = state::from_json_text("s-fromjson", py);
        c.check(s.to_json_text() == py, "to_json_text of from_json_text is the same text");
        t.store.set(s);
        auto got = t.store.get("s-fromjson");
        c.check(got == s, "the state reads back equal");
        c.check(got && got->to_json_text() == py, "and writes Python's text");
    });
}

// ---- URIs ---------------------------------------------------------------------

DATA_CASE("hostile-input: URIs with hostile settings are refused with invalid_configuration, never showing the "
          "password") {
    using namespace hostile_input;
    const std::string_view name = fixture::name;
    // chdb: URIs alone on chDB (114), clickhouse:// alone on the server, both on the simulator.
    engine_scope engine(fixture::name, name == "embedded" ? 114 : name == "server" ? 293 : 407);
    if (name != "server")
        chdb_uri_cases();
    if (name != "embedded")
        clickhouse_uri_cases();
}
