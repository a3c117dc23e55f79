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
//       holds one). At most 32 endpoints: each is tried in turn when those
//       before it fail, so more are refused (errc::invalid_configuration),
//       here, in the HOST override and in http_options.
//   chdb:///absolute/dir      chdb:relative/dir
//       The embedded engine (chDB), storing its data in that folder so
//       state survives restarts. chdb://dir/… (a URI authority) is refused:
//       it would silently mean the folder /…, not dir/…; so is chdb:///
//       (chDB would write its databases straight into /).
//   Both accept ?schema=NAME&table=NAME (defaults meltano, state), and
//   refuse a '#' fragment (no setting reads it; %23 in a value).
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
//
// Header-only, the parsing (detail/config/uri.ipp, environment.ipp, on
// Boost.URL) is included here; with CHSTATE_SEPARATE_COMPILATION it is
// compiled once, in the file that includes <chstate/src.hpp>.
#pragma once

#include <chstate/clock.hpp>
#include <chstate/detail/config/checks.hpp>
#include <chstate/detail/separate_compilation.hpp>
#include <chstate/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chstate {

/// One server of a store: a host (an IPv6 literal without brackets) and a port.
struct endpoint {
    std::string host{};
    std::uint16_t port = 8123;
    friend bool operator==(const endpoint&, const endpoint&) = default;
};

using namespace std::chrono_literals;

/// Which lock protocol the store runs (docs/lock.md).
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
    duration lease_ttl = 60s;      ///< strict: a grant expires this long after it was taken or renewed (server's clock)
    /// The protocol. automatic = strict on the embedded engine, seed_compatible
    /// elsewhere (a Python Meltano process on the same server only honours
    /// the seed's lock table).
    lock_mode mode = lock_mode::automatic;
    /// strict: the grace a rival waits past a grant's expiry, on the
    /// server's clock, before taking it over — room for the holder's steady
    /// clock running slower than the server's (and, on a cluster, for
    /// replicas' clocks that differ). Clients' wall clocks decide nothing.
    /// A fenced write whose reply arrives at least this long before the
    /// holder's own bound on its lease is confirmed without reading the
    /// grant table again; a later reply is confirmed by that read.
    duration clock_skew = 1s;
};

/// What a write's version (the state table's ReplacingMergeTree column
/// updated_at) is made of (docs/versions.md).
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
    /// Everything one operation keeps at once, counted as held in memory:
    /// the ids state_ids returns, the parsed rows of a bookkeeping query
    /// (lock and grant reads). get_all streams its states, so for
    /// it the row limit is the bound. (A million ids of 100 bytes keep
    /// ~130 MB; a larger default would let any proxy make every listing
    /// cost that much.)
    std::size_t max_operation_bytes = std::size_t(256) << 20; // 256 MiB
};

/// A replicated cluster (docs/cluster.md). With a name the store keeps
/// its tables as Replicated*MergeTree on every replica of the cluster's
/// shard and writes and reads them so that a state acknowledged on one
/// replica is what a read on any replica returns. Without one (the default)
/// nothing changes: the seed's tables and statements on one server.
struct cluster_options {
    /// The cluster's name in the servers' remote_servers configuration
    /// (URI `cluster`, MELTANO_STATE_BACKEND_CLICKHOUSE_CLUSTER); every DDL
    /// statement runs ON CLUSTER it. Empty: a single server.
    std::string name{};
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
    lock_options lock{};
    write_versions versions = write_versions::monotonic;
    reply_limits limits{};
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
    std::vector<endpoint> endpoints{};
    std::string database = "default";
    std::string user = "default";
    std::string password{};
    bool secure = false;
    /// HTTP with secure: the PEM CA bundle to trust, instead of the system's
    /// default paths (URI `ca_file`, MELTANO_STATE_BACKEND_CLICKHOUSE_CA_FILE);
    /// empty: the default paths. Set while secure is false, from_uri and
    /// from_environment refuse it (it would do nothing).
    std::string ca_file{};
    std::string embedded_path; ///< chDB data folder (engine_kind::embedded)
    /// HTTP: resolve + connect (+ TLS handshake) limit (URI `connect_timeout`).
    std::chrono::milliseconds connect_timeout{10'000};
    /// HTTP: sending one statement and reading its whole reply, a wait for
    /// a free pooled connection included (URI `request_timeout`).
    std::chrono::milliseconds request_timeout{300'000};
    store_options store{};

    /// Parses a clickhouse:// or chdb: URI. On failure sets ec to
    /// errc::invalid_configuration and explains in diag. Several hosts,
    /// clickhouse://u:p@h1:p1,h2:p2/db: each is parsed and validated as the
    /// URI with that host alone; a refused one is named ("host 2 of 2").
    CHSTATE_DECL static config from_uri(std::string_view uri, error_code& ec, diagnostics& diag);

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
    CHSTATE_DECL static config from_environment(const environment_lookup& env, error_code& ec, diagnostics& diag);

    static config from_environment(const environment_lookup& env = process_environment) {
        error_code ec;
        diagnostics diag;
        config c = from_environment(env, ec, diag);
        throw_if(ec, diag.message);
        return c;
    }

    /// Every endpoint in order: host:port, then endpoints[1…] (see endpoints).
    CHSTATE_DECL std::vector<endpoint> all_endpoints() const;

    /// The settings as a URI with the password replaced by "***", for logs;
    /// every endpoint, comma-separated.
    CHSTATE_DECL std::string redacted_uri() const;

    /// Names for the settings in check_http_settings' messages.
    struct setting_names {
        std::string_view host, user, password, database;
    };

    /// Refuses a host, user, password or database holding a control character
    /// (they become HTTP header values or URL parameters): errc::invalid_configuration,
    /// naming the setting (see check_no_control_characters). Used by from_uri,
    /// from_environment and make_http_options.
    CHSTATE_DECL static error_code check_http_settings(const config& c, const setting_names& names,
                                                       diagnostics& diag);
};

} // namespace chstate

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/config/environment.ipp>
#include <chstate/detail/config/uri.ipp>
#endif
