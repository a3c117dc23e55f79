// chstate/detail/statements.hpp — the store's statements, per server dialect.
//
// On a modern server (≥ 23.3, and chDB) the schema and statements are the
// seed's: a Meltano process and a chstate process share the tables.
#pragma once

#include <chstate/detail/sql.hpp>
#include <chstate/transport.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace chstate::detail {

/// What the connected server understands; learnt once from `SELECT version()`.
struct server_features {
    int major = 0;
    int minor = 0;
    bool query_parameters = true;   ///< {name:Type} with escaped values (≥ 20.1)
    bool datetime64 = true;         ///< DateTime64 / now64 (≥ 20.1)
    bool lightweight_delete = true; ///< DELETE FROM (≥ 23.3)
    bool ttl = true;                ///< table TTL (≥ 19.6)

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
        return f;
    }
};

/// Quoted names of the two tables.
struct table_names {
    std::string database; ///< `meltano`
    std::string state;    ///< `meltano`.`state`
    std::string lock;     ///< `meltano`.`state_lock`

    table_names(std::string_view schema, std::string_view table)
        : database(quote_identifier(schema)),
          state(database + "." + quote_identifier(table)),
          lock(database + "." + quote_identifier(std::string(table) + "_lock")) {}
};

inline parameter string_param(std::string name, std::string value) {
    return {std::move(name), "String", std::move(value)};
}


/// Seconds since the epoch, as text for a UInt32 parameter.
template <class TimePoint>
std::string epoch_seconds(TimePoint t) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count());
}

class statements {
public:
    statements(table_names names, server_features features)
        : t_(std::move(names)), f_(features) {}

    const server_features& features() const noexcept { return f_; }
    const table_names& tables() const noexcept { return t_; }

    static statement select_version() { return {"SELECT version()", {}, "TabSeparated", {}, true}; }

    statement create_database() const {
        return {"CREATE DATABASE IF NOT EXISTS " + t_.database, {}, {}, {}, true};
    }

    statement create_state_table() const {
        return {"CREATE TABLE IF NOT EXISTS " + t_.state +
                    " (state_id String, partial_state Nullable(String), completed_state Nullable(String),"
                    " updated_at DateTime64(3) DEFAULT now64(3))"
                    " ENGINE = ReplacingMergeTree(updated_at) ORDER BY state_id",
                {}, {}, {}, true};
    }

    statement create_lock_table() const {
        std::string sql = "CREATE TABLE IF NOT EXISTS " + t_.lock +
                          " (state_id String, lock_id String, locked_at DateTime DEFAULT now())"
                          " ENGINE = ReplacingMergeTree(locked_at) ORDER BY state_id";
        if (f_.ttl)
            sql += " TTL locked_at + INTERVAL 300 SECOND";
        return {std::move(sql), {}, {}, {}, true};
    }

    statement select_state(std::string_view id) const {
        return {"SELECT partial_state, completed_state FROM " + t_.state +
                    " FINAL WHERE state_id = {state_id:String} LIMIT 1",
                {string_param("state_id", std::string(id))}, "JSONEachRow", {}, true};
    }

    /// Parts are JSON text, or nullopt for NULL (an empty part).
    statement insert_state(std::string_view id, std::optional<std::string> partial,
                           std::optional<std::string> completed) const {
        return {"INSERT INTO " + t_.state +
                    " (state_id, partial_state, completed_state) VALUES"
                    " ({state_id:String}, {partial_state:Nullable(String)}, {completed_state:Nullable(String)})",
                {string_param("state_id", std::string(id)),
                 {"partial_state", "Nullable(String)", std::move(partial)},
                 {"completed_state", "Nullable(String)", std::move(completed)}},
                {}, {}, false};
    }

    /// Bulk insert; `rows` is JSONEachRow text built by the caller's JSON
    /// serializer (data, never SQL).
    statement insert_states(std::string rows) const {
        return {"INSERT INTO " + t_.state + " (state_id, partial_state, completed_state) FORMAT JSONEachRow",
                {}, {}, std::move(rows), false};
    }

    statement delete_state(std::string_view id) const {
        return {"DELETE FROM " + t_.state + " WHERE state_id = {state_id:String}",
                {string_param("state_id", std::string(id))}, {}, {}, true};
    }

    statement count_states() const {
        return {"SELECT count() AS n FROM " + t_.state + " FINAL", {}, "JSONEachRow", {}, true};
    }

    statement truncate_states() const {
        return {"TRUNCATE TABLE " + t_.state, {}, {}, {}, true};
    }

    statement select_state_ids(std::string_view glob) const {
        statement s{"SELECT DISTINCT state_id FROM " + t_.state + " FINAL", {}, "JSONEachRow", {}, true};
        if (!glob_matches_all(glob)) {
            s.sql += " WHERE state_id LIKE {pattern:String}";
            s.parameters.push_back(string_param("pattern", glob_to_like(glob)));
        }
        s.sql += " ORDER BY state_id";
        return s;
    }

    /// Blocks of 1000 rows keep each streamed reply chunk small.
    statement select_all_states() const {
        return {"SELECT state_id, partial_state, completed_state FROM " + t_.state +
                    " FINAL ORDER BY state_id SETTINGS max_block_size = 1000",
                {}, "JSONEachRow", {}, true};
    }

    // --- lock table -------------------------------------------------------

    /// The current holder: the smallest lock_id among the id's rows.
    statement select_lock_holder(std::string_view id) const {
        return {"SELECT lock_id FROM " + t_.lock +
                    " FINAL WHERE state_id = {state_id:String} ORDER BY lock_id LIMIT 1",
                {string_param("state_id", std::string(id))}, "JSONEachRow", {}, true};
    }

    /// Every candidate row for the id, without FINAL (rivals not yet merged).
    statement select_lock_candidates(std::string_view id) const {
        return {"SELECT lock_id FROM " + t_.lock + " WHERE state_id = {state_id:String} ORDER BY lock_id",
                {string_param("state_id", std::string(id))}, "JSONEachRow", {}, true};
    }

    template <class TimePoint>
    statement delete_stale_locks(TimePoint cutoff) const {
        return {"DELETE FROM " + t_.lock + " WHERE locked_at < toDateTime({cutoff:UInt32})",
                {{"cutoff", "UInt32", epoch_seconds(cutoff)}}, {}, {}, true};
    }

    template <class TimePoint>
    statement insert_lock_candidate(std::string_view id, std::string_view lock_id, TimePoint at) const {
        return {"INSERT INTO " + t_.lock +
                    " (state_id, lock_id, locked_at) SELECT {state_id:String}, {lock_id:String},"
                    " toDateTime({locked_at:UInt32})",
                {string_param("state_id", std::string(id)), string_param("lock_id", std::string(lock_id)),
                 {"locked_at", "UInt32", epoch_seconds(at)}},
                {}, {}, false};
    }

    statement delete_lock(std::string_view id, std::string_view lock_id) const {
        return {"DELETE FROM " + t_.lock + " WHERE state_id = {state_id:String} AND lock_id = {lock_id:String}",
                {string_param("state_id", std::string(id)), string_param("lock_id", std::string(lock_id))},
                {}, {}, true};
    }

private:
    table_names t_;
    server_features f_;
};

} // namespace chstate::detail
