// chstate/detail/dialect.hpp — what the connected server understands, and
// where the store's tables are.
//
// On a modern server (≥ 23.3, and chDB) the schema is the seed's: a Meltano
// process and a chstate process share the tables. Older servers (down to
// 18.16) get what they understand:
//   * no DateTime64/now64 (< 20.1): the version column is `updated_at
//     UInt64` holding milliseconds since the epoch (versions.hpp);
//   * DateTime64 without millisecond intervals (20.1–22.3): monotonic
//     versions fall back to the clock's;
//   * no {name:Type} parameters (< 20.1): the store inlines quoted literals
//     (sql.hpp, inline_parameters) unless the transport binds them itself;
//   * no lightweight DELETE (< 23.3): `ALTER TABLE … DELETE`, a background
//     mutation the store waits for (deletes.hpp);
//   * no TTL (< 19.6): the lock table has none (the lock protocol still
//     removes stale rows);
//   * no insert_deduplication_token (< 22.2): no strict lock.
#pragma once

#include <chstate/detail/sql.hpp>
#include <chstate/transport.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail {

/// What the connected server understands; learnt once from `SELECT version()`.
struct server_features {
    int major = 0;
    int minor = 0;
    bool query_parameters = true;   ///< {name:Type} with escaped values (≥ 20.1)
    bool datetime64 = true;         ///< DateTime64 / now64 (≥ 20.1)
    bool lightweight_delete = true; ///< DELETE FROM (≥ 23.3)
    bool ttl = true;                ///< table TTL (≥ 19.6)
    /// insert_deduplication_token (≥ 22.2) with non_replicated_deduplication_window
    /// (≥ 21.5): the strict lock's atomic grant.
    bool dedup_token = true;
    /// INTERVAL n MILLISECOND on DateTime64 (≥ 22.4): monotonic versions.
    bool subsecond_intervals = true;
    /// The query setting deduplicate_insert_select (≥ 25.12): an INSERT …
    /// SELECT is deduplicated only where the server proves it can be.
    bool deduplicate_insert_select = true;

    static server_features from_version(std::string_view version) {
        server_features f;
        auto read = [&](int& out) {
            auto [p, ec] = std::from_chars(version.data(), version.data() + version.size(), out);
            version.remove_prefix(static_cast<std::size_t>(p - version.data()));
            if (!version.empty() && version.front() == '.')
                version.remove_prefix(1);
            return ec == std::errc{};
        };
        if (!read(f.major) || !read(f.minor))
            return f; // unknown text: assume a modern server
        auto at_least = [&](int maj, int min) { return f.major > maj || (f.major == maj && f.minor >= min); };
        f.query_parameters = at_least(20, 1);
        f.datetime64 = at_least(20, 1);
        f.lightweight_delete = at_least(23, 3);
        f.ttl = at_least(19, 6);
        f.dedup_token = at_least(22, 2);
        f.subsecond_intervals = at_least(22, 4);
        f.deduplicate_insert_select = at_least(25, 12);
        return f;
    }
};

/// The store's three tables: quoted names for SQL, plain ones for system tables.
struct table_names {
    std::string database; ///< `meltano`
    std::string state;    ///< `meltano`.`state`
    std::string lock;     ///< `meltano`.`state_lock`
    std::string grant;    ///< `meltano`.`state_grant` (strict lock)
    std::string schema_name; ///< meltano
    std::string state_name;  ///< state
    std::string lock_name;   ///< state_lock
    std::string grant_name;  ///< state_grant

    table_names(std::string_view schema, std::string_view table)
        : database(quote_identifier(schema)),
          state(database + "." + quote_identifier(table)),
          lock(database + "." + quote_identifier(std::string(table) + "_lock")),
          grant(database + "." + quote_identifier(std::string(table) + "_grant")),
          schema_name(schema),
          state_name(table),
          lock_name(std::string(table) + "_lock"),
          grant_name(std::string(table) + "_grant") {}
};

/// Which of the store's tables a statement is about.
enum class table_kind { state, lock, grant };

/// Cluster mode (config.hpp, cluster_options): where the replicated tables
/// live and what every statement is sent with. Empty `cluster`: one server.
struct replication {
    std::string cluster;        ///< remote_servers name (unquoted)
    std::string zookeeper_path; ///< with {database} and {table} still to replace
    std::string replica;        ///< the replica name ({replica})
    /// insert_quorum, insert_quorum_timeout, select_sequential_consistency:
    /// a write is acknowledged once `quorum` replicas hold it, and a read
    /// fails rather than answer from a replica that lacks a quorum write.
    std::vector<setting> settings;

    bool enabled() const noexcept { return !cluster.empty(); }
};

inline parameter string_param(std::string name, std::string value) {
    return {std::move(name), "String", std::move(value)};
}

inline parameter uint_param(std::string name, std::uint64_t value) {
    return {std::move(name), "UInt64", std::to_string(value)};
}

/// Seconds since the epoch, as text for a UInt32 parameter or literal.
template <class TimePoint>
std::string epoch_seconds(TimePoint t) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count());
}

/// `[ 'a', 'b' ]` as an Array(String) parameter's value: quoted literals.
inline std::string string_array(const std::vector<std::string>& items) {
    std::string list = "[";
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i)
            list += ',';
        list += quote_string(items[i]);
    }
    list += ']';
    return list;
}

} // namespace chstate::detail
