// chstate/config.hpp — settings, URIs and environment overrides.
//
//   clickhouse://user:password@host:port/database?secure=true
//       The HTTP interface. user and password are percent-decoded; a URI
//       without a user or without a database is refused, naming what is
//       missing. Port defaults to 8123 (1–65535). An IPv6 host is written
//       in brackets, clickhouse://u:p@[::1]:8123/db; config::host holds it
//       without them ("::1").
//   clickhouse://user:password@h1:p1,h2:p2,[::1]:p3/database?…
//       Several endpoints of one store, tried in order with failover
//       (transport/http.hpp). Each host is validated exactly as a single
//       one is; the first is also config::host/port, all are in
//       config::endpoints. A ',' separates hosts only in the authority
//       (never inside brackets; "%2C" is not a separator and no host name
//       holds one).
//   chdb:///absolute/dir      chdb:relative/dir
//       The embedded engine (chDB), storing its data in that folder so
//       state survives restarts. chdb://dir/… (a URI authority) is refused:
//       it would silently mean the folder /…, not dir/….
//   Both accept ?schema=NAME&table=NAME (defaults meltano, state).
//   clickhouse:// also ?ca_file=/path/ca.pem (percent-encoded): the PEM CA
//   bundle secure connections trust, instead of the system's default paths;
//   refused unless the connection is secure (secure=true or https://).
//   clickhouse:// also ?cluster=NAME[&insert_quorum=N][&insert_quorum_timeout=60s]:
//   the tables live replicated on that cluster (cluster_options; README
//   "Cluster"); chdb: refuses them.
//
// config::from_environment() reads MELTANO_STATE_BACKEND_URI, then the
// overrides MELTANO_STATE_BACKEND_CLICKHOUSE_{HOST,PORT,DATABASE,USER,
// PASSWORD,SECURE,CA_FILE,SCHEMA,TABLE,CLUSTER,INSERT_QUORUM}, which win
// over the URI. HOST may
// be a comma-separated list, "h1:p1,h2,[::1]:p3": a host without its own
// port takes PORT (else the URI's first port, else 8123); it replaces every
// endpoint of the URI. PORT alone sets every endpoint's port. Error
// messages never contain the password.
//
// No setting may contain a control character (0x00–0x1F, 0x7F): user,
// password and host become HTTP header values, where CR/LF would let a
// value inject headers, and no database, schema, table or folder name has
// a use for one. Such a value is refused with errc::invalid_configuration
// by from_uri, from_environment and make_http_options, naming the setting
// but never showing a user's or password's value.
#pragma once

#include <chstate/clock.hpp>
#include <chstate/error.hpp>

#include <boost/url/ipv6_address.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chstate {

namespace detail {

/// The offset of the first control character (0x00–0x1F, 0x7F) in `v`, or npos.
inline std::size_t find_control_character(std::string_view v) noexcept {
    for (std::size_t i = 0; i < v.size(); ++i) {
        const auto c = static_cast<unsigned char>(v[i]);
        if (c < 0x20 || c == 0x7F)
            return i;
    }
    return std::string_view::npos;
}

/// Refuses a setting that holds a control character: errc::invalid_configuration,
/// the message naming `what`. The value never appears in the message; for a
/// `secret` (a password) not even the offending byte or its offset does.
inline error_code check_no_control_characters(std::string_view what, std::string_view value, bool secret,
                                              diagnostics& diag) {
    const auto at = find_control_character(value);
    if (at == std::string_view::npos)
        return {};
    static constexpr char hex[] = "0123456789ABCDEF";
    const auto c = static_cast<unsigned char>(value[at]);
    diag.message = std::string(what) + " contains a control character";
    if (secret) {
        diag.message += " (not shown)";
    } else {
        diag.message += " (0x";
        diag.message += hex[c >> 4];
        diag.message += hex[c & 15];
        diag.message += " at byte " + std::to_string(at) + ")";
    }
    diag.message += "; control characters (0x00–0x1F, 0x7F) are refused";
    return make_error_code(errc::invalid_configuration);
}

/// A host is an IPv6 literal when it holds a ':' (a name or IPv4 address never does).
inline bool is_ipv6_literal(std::string_view host) noexcept {
    return host.find(':') != std::string_view::npos;
}

/// host:port as a URI authority or an HTTP Host header writes it: an IPv6
/// literal in brackets ("[::1]:8123").
inline std::string host_port(std::string_view host, std::uint16_t port) {
    std::string out;
    if (is_ipv6_literal(host) && !(host.size() >= 2 && host.front() == '[' && host.back() == ']')) {
        out += '[';
        out += host;
        out += ']';
    } else {
        out += host;
    }
    out += ':';
    out += std::to_string(port);
    return out;
}

} // namespace detail

/// One server of a store: a host (an IPv6 literal without brackets) and a port.
struct endpoint {
    std::string host;
    std::uint16_t port = 8123;
    friend bool operator==(const endpoint&, const endpoint&) = default;
};

namespace detail {

/// Every endpoint in order: `host`:`port` first (they win over a stale
/// list[0]), then list[1…]. An empty list is host:port alone.
inline std::vector<endpoint> endpoint_list(const std::string& host, std::uint16_t port,
                                           const std::vector<endpoint>& list) {
    std::vector<endpoint> out;
    out.push_back({host, port});
    for (std::size_t i = 1; i < list.size(); ++i)
        out.push_back(list[i]);
    return out;
}

/// "h1:p1,h2:p2" with IPv6 hosts in brackets (for messages and logs).
inline std::string endpoints_text(const std::vector<endpoint>& eps) {
    std::string out;
    for (const auto& e : eps) {
        if (!out.empty())
            out += ',';
        out += host_port(e.host, e.port);
    }
    return out;
}

} // namespace detail

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
    /// strict: the most the clocks of the processes sharing a lock may
    /// differ. A rival takes an expired grant over by its own clock, so a
    /// fenced write whose reply arrives at least this long before the
    /// lease's expiry (by ours) is confirmed without reading the grant
    /// table again; a later reply is confirmed by that read.
    duration clock_skew = 1s;
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

/// What one operation may hold in memory from a reply. A server (or anything
/// between it and the store) that sends more fails the operation at once
/// with errc::reply_too_large, having buffered at most the limit.
struct reply_limits {
    /// One row: a state's text (both parts), an id. Larger states are
    /// refused when read, so raise it before storing states this big.
    std::size_t max_row_bytes = std::size_t(256) << 20; // 256 MiB
    /// Everything one operation keeps at once: the ids state_ids returns,
    /// the rows of a bookkeeping query. get_all streams its states, so for
    /// it the row limit is the bound.
    std::size_t max_operation_bytes = std::size_t(1) << 30; // 1 GiB
};

/// A replicated cluster (README: "Cluster"). With a name the store keeps
/// its tables as Replicated*MergeTree on every replica of the cluster's
/// shard and writes and reads them so that a state acknowledged on one
/// replica is what a read on any replica returns. Without one (the default)
/// nothing changes: the seed's tables and statements on one server.
struct cluster_options {
    /// The cluster's name in the servers' remote_servers configuration
    /// (URI `cluster`, MELTANO_STATE_BACKEND_CLICKHOUSE_CLUSTER); every DDL
    /// statement runs ON CLUSTER it. Empty: a single server.
    std::string name;
    /// Replicas that must hold a write before it is acknowledged (URI
    /// `insert_quorum`, MELTANO_STATE_BACKEND_CLICKHOUSE_INSERT_QUORUM).
    /// 0: a majority of the connected replica's shard, counted in
    /// system.clusters when the store first connects.
    unsigned insert_quorum = 0;
    /// How long a write waits for its quorum (URI `insert_quorum_timeout`);
    /// after it the outcome is unknown (errc::outcome_unknown: the write may
    /// still reach its quorum later).
    std::chrono::milliseconds insert_quorum_timeout{60'000};
    /// Each table's ZooKeeper path. The store replaces {database} and
    /// {table} (the table's own name); {shard} and other macros are the
    /// servers'.
    std::string zookeeper_path = "/clickhouse/tables/{shard}/{database}/{table}";
    /// The replica name: the servers' {replica} macro by default.
    std::string replica = "{replica}";
    /// How long an ON CLUSTER statement (creating a missing database or
    /// table) waits for every replica to run it, sent as the statement's
    /// distributed_ddl_task_timeout (the server's default is 180 s). When
    /// it passes — a replica is down — the store goes on if the connected
    /// replica has the tables (the missing replica runs the statements
    /// from ZooKeeper's DDL queue when it returns); otherwise the
    /// operation fails with errc::replicas_unavailable. Whole seconds.
    std::chrono::seconds ddl_timeout{10};
};

/// Where the store keeps its tables and how it locks.
struct store_options {
    std::string schema = "meltano"; ///< database holding the tables
    std::string table = "state";    ///< state table; the lock table is <table>_lock
    lock_options lock;
    write_versions versions = write_versions::monotonic;
    reply_limits limits;
    cluster_options cluster; ///< a replicated cluster; none by default
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
    /// Every endpoint in order, for failover (a URI naming several hosts, or
    /// a comma-separated MELTANO_STATE_BACKEND_CLICKHOUSE_HOST). endpoints[0]
    /// is host:port; host and port win over it when they differ (a config
    /// changed by hand). Empty: host:port alone. See all_endpoints().
    std::vector<endpoint> endpoints;
    std::string database = "default";
    std::string user = "default";
    std::string password;
    bool secure = false;
    /// HTTP with secure: the PEM CA bundle to trust, instead of the system's
    /// default paths (URI `ca_file`, MELTANO_STATE_BACKEND_CLICKHOUSE_CA_FILE);
    /// empty: the default paths. Set while secure is false, from_uri and
    /// from_environment refuse it (it would do nothing).
    std::string ca_file;
    std::string embedded_path; ///< chDB data folder (engine_kind::embedded)
    /// HTTP: resolve + connect (+ TLS handshake) limit (URI `connect_timeout`).
    std::chrono::milliseconds connect_timeout{10'000};
    /// HTTP: sending one statement and reading its whole reply, a wait for
    /// a free pooled connection included (URI `request_timeout`).
    std::chrono::milliseconds request_timeout{300'000};
    store_options store;

    /// Parses a clickhouse:// or chdb: URI. On failure sets ec to
    /// errc::invalid_configuration and explains in diag. Several hosts,
    /// clickhouse://u:p@h1:p1,h2:p2/db: each is parsed and validated as the
    /// URI with that host alone; a refused one is named ("host 2 of 2").
    static config from_uri(std::string_view uri, error_code& ec, diagnostics& diag) {
        ec = {};
        const auto start = uri.find("//");
        if (start != std::string_view::npos) {
            std::string scheme(uri.substr(0, start));
            std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                           [](unsigned char ch) { return std::tolower(ch); });
            const std::size_t end = authority_end(uri);
            const std::string_view auth = uri.substr(start + 2, end - (start + 2));
            const auto at = auth.rfind('@');
            // Only after a userinfo: without one (refused anyway) a ',' could
            // be part of a password whose '/' was not percent-encoded.
            if ((scheme == "clickhouse:" || scheme == "http:" || scheme == "https:") &&
                at != std::string_view::npos && split_hosts(auth.substr(at + 1)).size() > 1) {
                const auto pieces = split_hosts(auth.substr(at + 1));
                const std::string head(uri.substr(0, start + 2 + at + 1)); // scheme://userinfo@
                const std::string tail(uri.substr(end));                 // /db?…
                config first;
                std::vector<endpoint> eps;
                for (std::size_t i = 0; i < pieces.size(); ++i) {
                    const std::string which = "clickhouse URI: host " + std::to_string(i + 1) + " of " +
                                              std::to_string(pieces.size());
                    if (pieces[i].empty()) {
                        ec = make_error_code(errc::invalid_configuration);
                        diag.message = which + " is empty (hosts are separated by ',': "
                                               "clickhouse://user:password@h1:p1,h2:p2/database)";
                        return first;
                    }
                    config one = from_single_uri(head + std::string(pieces[i]) + tail, ec, diag);
                    if (ec) {
                        diag.message = which + " (\"" + printable(pieces[i], 100) + "\") is refused: " + diag.message;
                        return one;
                    }
                    eps.push_back({one.host, one.port});
                    if (i == 0)
                        first = std::move(one);
                }
                first.endpoints = std::move(eps);
                return first;
            }
        }
        config c = from_single_uri(uri, ec, diag);
        if (!ec && c.engine == engine_kind::http)
            c.endpoints = {endpoint{c.host, c.port}};
        return c;
    }

private:
    /// The hosts of an authority's host part, split at each ',' outside brackets.
    static std::vector<std::string_view> split_hosts(std::string_view hosts) {
        std::vector<std::string_view> out;
        std::size_t from = 0;
        bool bracket = false;
        for (std::size_t i = 0; i <= hosts.size(); ++i) {
            if (i == hosts.size() || (hosts[i] == ',' && !bracket)) {
                out.push_back(hosts.substr(from, i - from));
                from = i + 1;
            } else if (hosts[i] == '[') {
                bracket = true;
            } else if (hosts[i] == ']') {
                bracket = false;
            }
        }
        return out;
    }

    static config from_single_uri(std::string_view uri, error_code& ec, diagnostics& diag) {
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
            // chdb://dir/sub has an authority ("dir") and the path "/sub": taken
            // as it parses, it would silently mean the folder /sub. Guessing
            // "relative dir/sub" would make chdb://x/y and chdb:///x/y differ by
            // one slash only, so it is refused, saying what to write instead.
            if (!u.encoded_authority().empty()) {
                std::string relative = "chdb:relative/dir";
                if (!u.has_userinfo() && !u.has_port())
                    relative = "chdb:" + printable(std::string(u.host()) + std::string(u.path()), 200);
                return fail("chdb URI has a host part, which is not a folder: write " + relative +
                            " for a folder relative to the working directory, or chdb:///absolute/dir for an "
                            "absolute one");
            }
            c.embedded_path = u.path();
            if (c.embedded_path.empty())
                return fail("chdb URI needs a data folder, e.g. chdb:///var/lib/pipeline-state");
        } else if (scheme == "clickhouse" || scheme == "http" || scheme == "https") {
            c.engine = engine_kind::http;
            c.secure = scheme == "https";
            // An '@' after the authority: a '/', '?' or '#' in the password was
            // not percent-encoded, so what precedes it is not what it seems.
            const bool stray_at = uri.substr(authority_end(uri)).find('@') != std::string_view::npos;
            const char* encode_hint =
                stray_at ? "; percent-encode '/', '?', '#' and '@' in the user and password (e.g. %2F)" : "";
            if (!u.has_userinfo() || u.user().empty())
                return fail(std::string("clickhouse URI has no user (expected "
                                        "clickhouse://user:password@host:port/database)") + encode_hint);
            c.user = u.user();
            c.password = u.password();
            if (u.host().empty())
                return fail("clickhouse URI has no host");
            // [v1.x] is an "IPvFuture" literal: its host_address() would
            // read as the DNS name v1.x, another host than the one written.
            if (u.host_type() == boost::urls::host_type::ipvfuture)
                return fail("clickhouse URI: the host \"" + printable(std::string(u.encoded_host()), 100) +
                            "\" is a bracketed literal that is not an IPv6 address");
            c.host = u.host_address(); // an IPv6 literal without its brackets
            if (const char* why = host_problem(c.host))
                return fail(std::string("clickhouse URI: the host \"") + printable(c.host, 100) + "\" " + why);
            if (u.has_port()) {
                // Boost.URL reads "host:abc/db" as an empty port and the path
                // "abc/db": the port as written is taken from the URI text.
                const std::string_view given = port_text(uri);
                if (!parse_port(given, c.port)) {
                    if (stray_at)
                        return fail(std::string("clickhouse URI has an invalid port") + encode_hint);
                    return fail("clickhouse URI has an invalid port \"" + printable(given, 40) +
                                "\" (expected 1–65535)");
                }
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
        std::vector<std::string> seen; // a setting given twice: which one was meant?
        for (auto param : u.params()) {
            std::string value = param.value;
            if (std::find(seen.begin(), seen.end(), param.key) != seen.end())
                return fail("the URI gives " + printable(param.key, 40) +
                            " twice: give each setting once (which one was meant cannot be known)");
            seen.emplace_back(param.key);
            if (param.key == "secure") {
                if (!parse_bool(value, c.secure))
                    return fail("secure must be true or false, not \"" + printable(value, 40) + "\"");
            } else if (param.key == "ca_file") {
                if (c.engine == engine_kind::embedded)
                    return fail("ca_file applies to clickhouse:// URIs only (chDB runs in-process)");
                c.ca_file = value;
            } else if (param.key == "schema") {
                c.store.schema = value;
            } else if (param.key == "table") {
                c.store.table = value;
            } else if (param.key == "connect_timeout" || param.key == "request_timeout" ||
                       param.key == "lock_timeout") {
                if (c.engine == engine_kind::embedded && param.key != "lock_timeout")
                    return fail(std::string(param.key) + " applies to clickhouse:// URIs only (chDB runs in-process)");
                std::chrono::milliseconds d{};
                if (!parse_duration(value, d))
                    return fail(std::string(param.key) + " must be a duration such as 30s, 500ms, 5m or 1h (a bare "
                                "number is seconds; at most 7 days), not \"" + printable(value, 40) + "\"");
                if (param.key == "connect_timeout")
                    c.connect_timeout = d;
                else if (param.key == "request_timeout")
                    c.request_timeout = d;
                else
                    c.store.lock.timeout = d;
            } else if (param.key == "cluster" || param.key == "insert_quorum" ||
                       param.key == "insert_quorum_timeout") {
                if (c.engine == engine_kind::embedded)
                    return fail(std::string(param.key) +
                                " applies to clickhouse:// URIs only (the embedded engine has no replicas)");
                if (auto why = set_cluster(c.store.cluster, param.key, value))
                    return fail(*why);
            } else {
                return fail("unknown URI parameter \"" + printable(param.key, 40) +
                            "\" (known: secure, ca_file, schema, table, connect_timeout, request_timeout, "
                            "lock_timeout, cluster, insert_quorum, insert_quorum_timeout)");
            }
        }
        if (c.store.schema.empty() || c.store.table.empty())
            return fail("schema and table must not be empty");
        if (!c.ca_file.empty() && !c.secure)
            return fail("ca_file applies to secure connections only: add secure=true (or use https://)");
        if (c.engine == engine_kind::embedded) {
            ec = detail::check_no_control_characters("chdb URI: the data folder", c.embedded_path, false, diag);
            if (!ec)
                ec = check_names(c, "chdb URI: parameter schema", "chdb URI: parameter table", diag);
        } else {
            ec = check_http_settings(c,
                                     {"clickhouse URI: the host", "clickhouse URI: the user",
                                      "clickhouse URI: the password", "clickhouse URI: the database"},
                                     diag);
            if (!ec)
                ec = detail::check_no_control_characters("clickhouse URI: parameter ca_file", c.ca_file, false, diag);
            if (!ec)
                ec = check_names(c, "clickhouse URI: parameter schema", "clickhouse URI: parameter table", diag);
        }
        return c;
    }

public:
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
        // Every override is checked for control characters as it is read, so
        // the message names the variable that holds one.
        auto take = [&](const char* key, std::string& field, bool secret) {
            auto v = get(key);
            if (!v)
                return true;
            if ((ec = detail::check_no_control_characters(prefix + key, *v, secret, diag)))
                return false;
            field = std::move(*v);
            return true;
        };
        // HOST: one host or a comma-separated list, each "host", "host:port",
        // "[v6]", "[v6]:port" or a bare IPv6 literal ("::1").
        const std::optional<std::string> hosts_value = get("HOST");
        if (hosts_value && (ec = detail::check_no_control_characters(prefix + "HOST", *hosts_value, false, diag)))
            return c;
        std::vector<std::pair<endpoint, bool>> listed; // the endpoint, whether it gave its port
        if (hosts_value) {
            const auto items = split_hosts(*hosts_value);
            for (std::size_t i = 0; i < items.size(); ++i) {
                std::string_view item = items[i];
                const std::string which = items.size() > 1 ? " (host " + std::to_string(i + 1) + " of " +
                                                                 std::to_string(items.size()) + ")"
                                                           : std::string();
                if (item.empty() && items.size() > 1)
                    return fail(prefix + "HOST" + which + " is empty (hosts are separated by ',': h1:p1,h2:p2)");
                std::string_view h = item, port_given;
                bool has_port = false;
                if (item.size() >= 2 && item.front() == '[') {
                    // "[::1]" as in a URI: the host is kept without brackets.
                    const auto close = item.find(']');
                    if (close != std::string_view::npos &&
                        (close + 1 == item.size() || item[close + 1] == ':')) {
                        h = item.substr(1, close - 1);
                        if (close + 1 < item.size()) {
                            has_port = true;
                            port_given = item.substr(close + 2);
                        }
                    }
                } else if (const auto colon = item.find(':');
                           colon != std::string_view::npos && item.find(':', colon + 1) == std::string_view::npos &&
                           colon + 1 < item.size() &&
                           item.find_first_not_of("0123456789", colon + 1) == std::string_view::npos) {
                    h = item.substr(0, colon); // host:port (a bare IPv6 literal has several ':')
                    has_port = true;
                    port_given = item.substr(colon + 1);
                }
                if (const char* why = host_problem(h))
                    return fail(prefix + "HOST" + which + " \"" + printable(h, 100) + "\" " + why);
                endpoint e{std::string(h), c.port};
                if (has_port && !parse_port(port_given, e.port))
                    return fail(prefix + "HOST" + which + " \"" + printable(item, 100) +
                                "\" has an invalid port (expected 1–65535)");
                listed.emplace_back(std::move(e), has_port);
            }
        }
        std::optional<std::uint16_t> port_override;
        if (auto v = get("PORT")) {
            std::uint16_t p = 0;
            if (!parse_port(*v, p))
                return fail(prefix + "PORT is not a port number: \"" + printable(*v, 40) + "\" (expected 1–65535)");
            port_override = p;
        }
        if (!listed.empty()) {
            c.endpoints.clear();
            for (auto& [e, gave_port] : listed) {
                if (!gave_port && port_override)
                    e.port = *port_override;
                c.endpoints.push_back(std::move(e));
            }
        } else {
            c.endpoints = c.all_endpoints();
            if (port_override)
                for (auto& e : c.endpoints)
                    e.port = *port_override;
        }
        c.host = c.endpoints.front().host;
        c.port = c.endpoints.front().port;
        if (c.engine != engine_kind::http && c.endpoints.size() == 1 && listed.empty())
            c.endpoints.clear(); // chdb: no endpoint (as from_uri leaves it)
        if (!take("DATABASE", c.database, false) || !take("USER", c.user, false) ||
            !take("PASSWORD", c.password, true))
            return c;
        if (auto v = get("SECURE"); v && !parse_bool(*v, c.secure))
            return fail(prefix + "SECURE must be true or false, not \"" + printable(*v, 40) + "\"");
        if (!take("CA_FILE", c.ca_file, false) || !take("SCHEMA", c.store.schema, false) ||
            !take("TABLE", c.store.table, false))
            return c;
        for (auto [key, name] : {std::pair{"CLUSTER", "cluster"}, std::pair{"INSERT_QUORUM", "insert_quorum"}}) {
            auto v = get(key);
            if (!v)
                continue;
            if (c.engine != engine_kind::http)
                return fail(prefix + key + " applies to clickhouse:// connections only (the embedded engine has "
                                           "no replicas)");
            if (auto why = set_cluster(c.store.cluster, name, *v))
                return fail(prefix + key + ": " + *why);
        }
        for (auto [key, field] : {std::pair{"CONNECT_TIMEOUT", &c.connect_timeout},
                                  std::pair{"REQUEST_TIMEOUT", &c.request_timeout},
                                  std::pair{"LOCK_TIMEOUT", &c.store.lock.timeout}}) {
            if (auto v = get(key); v && !parse_duration(*v, *field))
                return fail(prefix + key + " must be a duration such as 30s, 500ms, 5m or 1h (a bare number is "
                            "seconds; at most 7 days), not \"" + printable(*v, 40) + "\"");
        }
        if (c.store.schema.empty() || c.store.table.empty())
            return fail("schema and table must not be empty");
        if (!c.ca_file.empty() && (!c.secure || c.engine != engine_kind::http))
            return fail("a CA file (" + prefix + "CA_FILE or the URI's ca_file) applies to secure clickhouse:// "
                        "connections only: set " + prefix + "SECURE=true or secure=true in the URI");
        return c;
    }

    static config from_environment(const environment_lookup& env = process_environment) {
        error_code ec;
        diagnostics diag;
        config c = from_environment(env, ec, diag);
        throw_if(ec, diag.message);
        return c;
    }

    /// Every endpoint in order: host:port, then endpoints[1…] (see endpoints).
    std::vector<endpoint> all_endpoints() const { return detail::endpoint_list(host, port, endpoints); }

    /// The settings as a URI with the password replaced by "***", for logs;
    /// every endpoint, comma-separated.
    std::string redacted_uri() const {
        if (engine == engine_kind::embedded)
            return "chdb:" + embedded_path;
        std::string query;
        if (secure)
            query += "&secure=true";
        if (!store.cluster.name.empty())
            query += "&cluster=" + store.cluster.name; // a name: no quote, backslash or control character
        if (!query.empty())
            query[0] = '?';
        return std::string("clickhouse://") + user + (password.empty() ? "" : ":***") + "@" +
               detail::endpoints_text(all_endpoints()) + "/" + database + query;
    }

    /// Names for the settings in check_http_settings' messages.
    struct setting_names {
        std::string_view host, user, password, database;
    };

    /// Refuses a host, user, password or database holding a control character
    /// (they become HTTP header values or URL parameters): errc::invalid_configuration,
    /// naming the setting (see check_no_control_characters). Used by from_uri,
    /// from_environment and make_http_options.
    static error_code check_http_settings(const config& c, const setting_names& names, diagnostics& diag) {
        if (auto ec = detail::check_no_control_characters(names.host, c.host, false, diag))
            return ec;
        for (std::size_t i = 1; i < c.endpoints.size(); ++i)
            if (auto ec = detail::check_no_control_characters(
                    std::string(names.host) + " (endpoint " + std::to_string(i + 1) + ")", c.endpoints[i].host, false,
                    diag))
                return ec;
        if (auto ec = detail::check_no_control_characters(names.user, c.user, false, diag))
            return ec;
        if (auto ec = detail::check_no_control_characters(names.password, c.password, true, diag))
            return ec;
        return detail::check_no_control_characters(names.database, c.database, false, diag);
    }

private:
    static error_code check_names(const config& c, std::string_view schema_name, std::string_view table_name,
                                  diagnostics& diag) {
        if (auto ec = detail::check_no_control_characters(schema_name, c.store.schema, false, diag))
            return ec;
        return detail::check_no_control_characters(table_name, c.store.table, false, diag);
    }

    /// Why `host` cannot be a host to connect to (nullptr: it can): a name
    /// holding a character no host name has — a decoded "%3A" would make
    /// "h:o" look like an IPv6 address in the Host header — or a ':' that
    /// is not part of an IPv6 address.
    static const char* host_problem(std::string_view host) {
        if (host.empty())
            return "is empty";
        if (host.find(':') != std::string_view::npos)
            return boost::urls::parse_ipv6_address(host) ? nullptr : "holds ':' but is not an IPv6 address";
        if (host.find_first_of("/?#@[]\\ %,") != std::string_view::npos)
            return "is not a host name (it holds one of / ? # @ [ ] \\ % , or a space)";
        return nullptr;
    }

    /// Sets cluster option `key` (cluster, insert_quorum,
    /// insert_quorum_timeout) from its text; the reason it cannot, if not.
    static std::optional<std::string> set_cluster(cluster_options& o, std::string_view key, std::string_view v) {
        if (key == "cluster") {
            if (v.empty() || v.size() > 200 || v.find_first_of("`'\\") != std::string_view::npos ||
                detail::find_control_character(v) != std::string_view::npos)
                return "cluster must be a cluster name (1–200 bytes, no quote, backslash or control character), "
                       "not \"" + printable(v, 40) + "\"";
            o.name = std::string(v);
        } else if (key == "insert_quorum") {
            unsigned n = 0;
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
            if (v.empty() || ec != std::errc{} || p != v.data() + v.size() || n > 100)
                return "insert_quorum must be a number of replicas (0 = a majority, at most 100), not \"" +
                       printable(v, 40) + "\"";
            o.insert_quorum = n;
        } else {
            std::chrono::milliseconds d{};
            if (!parse_duration(v, d) || d.count() == 0)
                return "insert_quorum_timeout must be a duration such as 30s or 500ms (more than 0, at most "
                       "7 days), not \"" + printable(v, 40) + "\"";
            o.insert_quorum_timeout = d;
        }
        return std::nullopt;
    }

    /// `v` for a message: at most `limit` bytes, control characters as '?'.
    static std::string printable(std::string_view v, std::size_t limit) {
        std::string out(v.substr(0, limit));
        for (char& ch : out)
            if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F)
                ch = '?';
        if (v.size() > limit)
            out += "…";
        return out;
    }

    /// Where the authority of `uri` ends (the offset of the first '/', '?' or
    /// '#' after "//"), or 0 when there is no "//".
    static std::size_t authority_end(std::string_view uri) {
        auto start = uri.find("//");
        if (start == std::string_view::npos)
            return 0;
        auto end = uri.find_first_of("/?#", start + 2);
        return end == std::string_view::npos ? uri.size() : end;
    }

    /// The port as written in `uri`: the text after the host's ':' up to
    /// the end of the authority.
    static std::string_view port_text(std::string_view uri) {
        auto start = uri.find("//");
        if (start == std::string_view::npos)
            return {};
        std::string_view auth = uri.substr(start + 2, authority_end(uri) - (start + 2));
        if (auto at = auth.rfind('@'); at != std::string_view::npos)
            auth.remove_prefix(at + 1);
        if (!auth.empty() && auth.front() == '[') {
            auto close = auth.find(']');
            if (close == std::string_view::npos)
                return {};
            auth.remove_prefix(close + 1);
        }
        auto colon = auth.find(':');
        return colon == std::string_view::npos ? std::string_view{} : auth.substr(colon + 1);
    }

    static bool parse_port(std::string_view s, std::uint16_t& out) {
        unsigned v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc{} || p != s.data() + s.size() || v == 0 || v > 65535)
            return false;
        out = static_cast<std::uint16_t>(v);
        return true;
    }

    /// "250ms", "30s", "5m", "1h", or a bare number of seconds; more than
    /// zero and at most 7 days. Leaves `out` alone on failure.
    static bool parse_duration(std::string_view s, std::chrono::milliseconds& out) {
        std::uint64_t n = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (ec != std::errc{} || p == s.data() || n == 0)
            return false;
        const std::string_view unit = s.substr(static_cast<std::size_t>(p - s.data()));
        std::uint64_t ms_per = 0;
        if (unit == "ms")
            ms_per = 1;
        else if (unit.empty() || unit == "s")
            ms_per = 1000;
        else if (unit == "m")
            ms_per = 60'000;
        else if (unit == "h")
            ms_per = 3'600'000;
        else
            return false;
        constexpr std::uint64_t week_ms = 7ull * 24 * 3'600'000;
        if (n > week_ms / ms_per)
            return false;
        out = std::chrono::milliseconds(static_cast<std::int64_t>(n * ms_per));
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
