// chstate/config.hpp — settings, URIs and environment overrides.
//
//   clickhouse://user:password@host:port/database?secure=true
//       The HTTP interface. user and password are percent-decoded; a URI
//       without a user or without a database is refused, naming what is
//       missing. Port defaults to 8123.
//   chdb:///absolute/dir      chdb:relative/dir
//       The embedded engine (chDB), storing its data in that folder so
//       state survives restarts.
//   Both accept ?schema=NAME&table=NAME (defaults meltano, state).
//
// config::from_environment() reads MELTANO_STATE_BACKEND_URI, then the
// overrides MELTANO_STATE_BACKEND_CLICKHOUSE_{HOST,PORT,DATABASE,USER,
// PASSWORD,SECURE,SCHEMA,TABLE}, which win over the URI. Error messages
// never contain the password.
#pragma once

#include <chstate/clock.hpp>
#include <chstate/error.hpp>

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace chstate {

using namespace std::chrono_literals;

/// Which lock protocol the store runs (README: "The lock").
enum class lock_mode {
    /// strict where the store is certain no seed (Python Meltano) process
    /// shares the lock: the embedded engine (chDB); seed_compatible over
    /// HTTP and on the simulated server. See lock_options::mode.
    automatic,
    /// The seed's protocol on `<table>_lock`: insert a candidate, wait the
    /// settle time, the smallest lock_id wins. Shared with Python Meltano
    /// processes; best effort (see the schedule explorer's findings).
    seed_compatible,
    /// A grant decided atomically by the server on `<table>_grant`: an
    /// INSERT with insert_deduplication_token keeps exactly one grant row
    /// per (state id, token); no settle wait; leases expire after lease_ttl
    /// unless renewed and carry an increasing fencing token. Needs
    /// insert_deduplication_token (ClickHouse ≥ 22.2; chDB): on older
    /// servers acquiring fails with errc::unsupported. A seed process does
    /// not see strict grants: do not mix the modes on one state id.
    strict,
};

/// The lock protocol's durations. Every one is measured on the store's Clock.
struct lock_options {
    duration timeout = 30s;        ///< give up acquiring after this long
    duration stale_age = 300s;     ///< seed_compatible: lock rows older than this are removed
    duration settle = 1s;          ///< seed_compatible: wait between inserting a candidate and deciding
    duration retry_interval = 1s;  ///< wait between attempts
    duration lease_ttl = 60s;      ///< strict: a grant expires this long after it was taken or renewed
    /// The protocol. automatic = strict on the embedded engine, seed_compatible
    /// elsewhere (a Python Meltano process on the same server only honours
    /// the seed's lock table).
    lock_mode mode = lock_mode::automatic;
};

/// What a write's version (the state table's ReplacingMergeTree column
/// updated_at) is made of (README: "Versions").
enum class write_versions {
    /// greatest(the server's now64(3), the id's newest updated_at + 1 ms),
    /// computed by the server inside the INSERT: a write that starts after
    /// another has finished always sorts after it, however the server's or
    /// the clients' clocks step or drift. Same table as the seed's (a seed
    /// process shares it); the INSERT is an INSERT … SELECT instead of the
    /// seed's INSERT … VALUES. Needs ClickHouse ≥ 22.4 (millisecond
    /// intervals) or a server without DateTime64 (< 20.1); on 20.1–22.3 the
    /// store falls back to `clock`.
    monotonic,
    /// The seed's statements verbatim: updated_at is the server's now64(3)
    /// (on servers without DateTime64, the store's clock in milliseconds). A
    /// clock that steps back lets an older write win until the clock has
    /// caught up.
    clock,
};

/// Where the store keeps its tables and how it locks.
struct store_options {
    std::string schema = "meltano"; ///< database holding the tables
    std::string table = "state";    ///< state table; the lock table is <table>_lock
    lock_options lock;
    write_versions versions = write_versions::monotonic;
};

/// Reads an environment variable; replaceable in tests.
using environment_lookup = std::function<std::optional<std::string>(const char* name)>;

inline std::optional<std::string> process_environment(const char* name) {
    if (const char* v = std::getenv(name))
        return std::string(v);
    return std::nullopt;
}

/// Connection settings.
struct config {
    enum class engine_kind { http, embedded };

    engine_kind engine = engine_kind::http;
    std::string host = "localhost";
    std::uint16_t port = 8123;
    std::string database = "default";
    std::string user = "default";
    std::string password;
    bool secure = false;
    std::string embedded_path; ///< chDB data folder (engine_kind::embedded)
    store_options store;

    /// Parses a clickhouse:// or chdb: URI. On failure sets ec to
    /// errc::invalid_configuration and explains in diag.
    static config from_uri(std::string_view uri, error_code& ec, diagnostics& diag) {
        ec = {};
        config c;
        auto fail = [&](std::string msg) {
            ec = make_error_code(errc::invalid_configuration);
            diag.message = std::move(msg);
            return c;
        };
        auto parsed = boost::urls::parse_uri(uri);
        if (!parsed)
            return fail("not a valid URI (expected clickhouse://user:password@host:port/database or chdb:///path)");
        boost::urls::url_view u = *parsed;
        std::string scheme(u.scheme());
        std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char ch) { return std::tolower(ch); });
        if (scheme == "chdb") {
            c.engine = engine_kind::embedded;
            c.embedded_path = u.path();
            if (c.embedded_path.empty())
                return fail("chdb URI needs a data folder, e.g. chdb:///var/lib/pipeline-state");
        } else if (scheme == "clickhouse" || scheme == "http" || scheme == "https") {
            c.engine = engine_kind::http;
            c.secure = scheme == "https";
            if (!u.has_userinfo() || u.user().empty())
                return fail("clickhouse URI has no user (expected clickhouse://user:password@host:port/database)");
            c.user = u.user();
            c.password = u.password();
            if (u.host().empty())
                return fail("clickhouse URI has no host");
            c.host = u.host_address();
            if (u.has_port()) {
                if (!parse_port(u.port(), c.port))
                    return fail("clickhouse URI has an invalid port \"" + std::string(u.port()) + "\"");
            } else {
                c.port = 8123;
            }
            std::string path = u.path();
            while (!path.empty() && path.front() == '/')
                path.erase(path.begin());
            if (path.empty())
                return fail("clickhouse URI has no database (expected clickhouse://user:password@host:port/database)");
            c.database = path;
        } else {
            return fail("unknown URI scheme \"" + scheme + "\" (expected clickhouse or chdb)");
        }
        for (auto param : u.params()) {
            std::string value = param.value;
            if (param.key == "secure") {
                if (!parse_bool(value, c.secure))
                    return fail("secure must be true or false, not \"" + value + "\"");
            } else if (param.key == "schema") {
                c.store.schema = value;
            } else if (param.key == "table") {
                c.store.table = value;
            } else {
                return fail("unknown URI parameter \"" + param.key + "\" (known: secure, schema, table)");
            }
        }
        if (c.store.schema.empty() || c.store.table.empty())
            return fail("schema and table must not be empty");
        return c;
    }

    /// Throwing form.
    static config from_uri(std::string_view uri) {
        error_code ec;
        diagnostics diag;
        config c = from_uri(uri, ec, diag);
        throw_if(ec, diag.message);
        return c;
    }

    /// MELTANO_STATE_BACKEND_URI (if set) with the per-setting overrides
    /// applied on top. Without a URI, the defaults are the seed's: host
    /// localhost, port 8123, user and database "default", schema meltano,
    /// table state.
    static config from_environment(const environment_lookup& env, error_code& ec, diagnostics& diag) {
        ec = {};
        config c;
        if (auto uri = env("MELTANO_STATE_BACKEND_URI")) {
            c = from_uri(*uri, ec, diag);
            if (ec) {
                diag.message = "MELTANO_STATE_BACKEND_URI: " + diag.message;
                return c;
            }
        }
        auto fail = [&](std::string msg) {
            ec = make_error_code(errc::invalid_configuration);
            diag.message = std::move(msg);
            return c;
        };
        const std::string prefix = "MELTANO_STATE_BACKEND_CLICKHOUSE_";
        auto get = [&](const char* key) { return env((prefix + key).c_str()); };
        if (auto v = get("HOST")) c.host = *v;
        if (auto v = get("PORT"); v && !parse_port(*v, c.port))
            return fail(prefix + "PORT is not a port number: \"" + *v + "\"");
        if (auto v = get("DATABASE")) c.database = *v;
        if (auto v = get("USER")) c.user = *v;
        if (auto v = get("PASSWORD")) c.password = *v;
        if (auto v = get("SECURE"); v && !parse_bool(*v, c.secure))
            return fail(prefix + "SECURE must be true or false, not \"" + *v + "\"");
        if (auto v = get("SCHEMA")) c.store.schema = *v;
        if (auto v = get("TABLE")) c.store.table = *v;
        if (c.store.schema.empty() || c.store.table.empty())
            return fail("schema and table must not be empty");
        return c;
    }

    static config from_environment(const environment_lookup& env = process_environment) {
        error_code ec;
        diagnostics diag;
        config c = from_environment(env, ec, diag);
        throw_if(ec, diag.message);
        return c;
    }

    /// The settings as a URI with the password replaced by "***", for logs.
    std::string redacted_uri() const {
        if (engine == engine_kind::embedded)
            return "chdb:" + embedded_path;
        return std::string("clickhouse://") + user + (password.empty() ? "" : ":***") + "@" + host + ":" +
               std::to_string(port) + "/" + database + (secure ? "?secure=true" : "");
    }

private:
    static bool parse_port(std::string_view s, std::uint16_t& out) {
        unsigned v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc{} || p != s.data() + s.size() || v == 0 || v > 65535)
            return false;
        out = static_cast<std::uint16_t>(v);
        return true;
    }

    static bool parse_bool(std::string_view s, bool& out) {
        std::string v(s);
        std::transform(v.begin(), v.end(), v.begin(), [](unsigned char ch) { return std::tolower(ch); });
        if (v == "true" || v == "1" || v == "yes" || v == "on") { out = true; return true; }
        if (v == "false" || v == "0" || v == "no" || v == "off" || v.empty()) { out = false; return true; }
        return false;
    }
};

} // namespace chstate
