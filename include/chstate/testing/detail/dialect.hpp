// chstate/testing/detail/dialect.hpp — what a simulated server's version
// understands.
//
// The simulator speaks two dialects: a modern server's (23.3 and later: the
// default, "25.3.1.1") and ClickHouse 18.16's, the oldest server the store
// supports (Debian's, which tests/server.cpp runs against). Where 18.16
// lacks something the modern dialect has, the simulator refuses it with the
// code 18.16 answers with (measured on Debian's 18.16.1), so a statement of
// the wrong dialect fails here as it would there.
#pragma once

#include <charconv>
#include <stdexcept>
#include <string>
#include <string_view>

namespace chstate::detail::sim {

struct dialect {
    /// {name:Type} placeholders (19.11). 18.16: 62, "Unrecognized token".
    bool query_parameters = true;
    /// The DateTime64 type (20.1). 18.16: 50, "Unknown data type family".
    bool datetime64 = true;
    /// now64, toUnixTimestamp64Milli (20.1). 18.16: 46, "Unknown function".
    bool datetime64_functions = true;
    /// INTERVAL n MILLISECOND (22.4). 18.16: 62.
    bool millisecond_intervals = true;
    /// Lightweight DELETE FROM (23.3). 18.16: 62.
    bool lightweight_delete = true;
    /// A table's TTL (19.6). 18.16: 62.
    bool ttl = true;
    /// INSERT INTO t (…) SETTINGS … VALUES|SELECT (a later server). 18.16: 62.
    bool insert_settings = true;
    /// The MergeTree setting non_replicated_deduplication_window (21.5).
    /// 18.16: 36, "Unknown setting … for storage MergeTree".
    bool deduplication_window = true;
    /// The query setting insert_deduplication_token (22.2). 18.16: 115.
    bool deduplication_token = true;
    /// system.columns.position (a later server). 18.16: 47, as any missing column.
    bool column_positions = true;

    static dialect modern() { return {}; }

    static dialect clickhouse_18_16() {
        return {.query_parameters = false,
                .datetime64 = false,
                .datetime64_functions = false,
                .millisecond_intervals = false,
                .lightweight_delete = false,
                .ttl = false,
                .insert_settings = false,
                .deduplication_window = false,
                .deduplication_token = false,
                .column_positions = false};
    }

    /// The dialect of `version` ("major.minor…"): 18.x speaks 18.16's,
    /// 23.3 and later the modern one. Versions in between are refused: the
    /// simulator would claim them while speaking another dialect.
    static dialect of_version(std::string_view version) {
        int major = 0, minor = 0;
        const char* p = version.data();
        const char* end = p + version.size();
        auto r = std::from_chars(p, end, major);
        if (r.ec == std::errc{} && r.ptr < end && *r.ptr == '.')
            r = std::from_chars(r.ptr + 1, end, minor);
        else
            r.ec = std::errc::invalid_argument;
        if (r.ec == std::errc{} && major == 18)
            return clickhouse_18_16();
        if (r.ec == std::errc{} && (major > 23 || (major == 23 && minor >= 3)))
            return modern();
        throw std::invalid_argument("simulated_clickhouse: version '" + std::string(version) +
                                    "' is not one the simulator models (18.x, with 18.16's dialect, or 23.3 and later)");
    }
};

} // namespace chstate::detail::sim
