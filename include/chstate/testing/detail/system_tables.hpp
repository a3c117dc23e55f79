// chstate/testing/detail/system_tables.hpp — the system tables the store
// and tests read, as seen from the current replica:
//   system.tables    (database, name, engine, engine_full)
//   system.columns   (database, table, name, type[, position: not on 18.16])
//   system.mutations (database, table, is_done)
//   system.clusters  (cluster, shard_num, replica_num, host_name, is_local): cluster mode
//   system.settings  (name, value): insert_quorum_parallel only, cluster mode
//   system.merge_tree_settings (name, value): the deduplication windows' defaults
#pragma once

#include <chstate/testing/detail/state.hpp>

#include <string>
#include <vector>

namespace chstate::detail::sim {

inline bool is_system_table(const std::string& name) {
    return name == "system.tables" || name == "system.columns" || name == "system.mutations" ||
           name == "system.clusters" || name == "system.settings" || name == "system.merge_tree_settings";
}

/// Fills `scratch` with the columns of system table `name` and `rows` with
/// its rows. Reading system.mutations is noted (mutations_read): queued
/// mutations it shows unfinished finish once the statement is answered.
inline void read_system_table(server_state& s, const std::string& name, table& scratch,
                              std::vector<std::vector<value>>& rows) {
    auto col = [&](std::string n, std::string type) { scratch.columns.push_back({std::move(n), std::move(type), {}}); };
    auto text = [](const std::string& t) { return value::of_text(t); };
    auto number = [](std::size_t n) { return value::of_number(static_cast<std::int64_t>(n)); };
    if (name == "system.clusters") { // one shard, a replica per row
        col("cluster", "String");
        col("shard_num", "UInt32");
        col("replica_num", "UInt32");
        col("host_name", "String");
        col("is_local", "UInt8");
        if (!s.cluster.empty())
            for (std::size_t k = 0; k < s.replica_tables.size(); ++k)
                rows.push_back({text(s.cluster), number(1), number(k + 1), text("replica" + std::to_string(k + 1)),
                                number(k == s.current ? 1 : 0)});
    } else if (name == "system.settings") { // the one setting the store asks about
        col("name", "String");
        col("value", "String");
        if (!s.cluster.empty())
            rows.push_back({text("insert_quorum_parallel"), text(s.quorum_parallel_default ? "1" : "0")});
    } else if (name == "system.merge_tree_settings") { // the defaults a table gets when it states none
        col("name", "String");
        col("value", "String");
        rows.push_back({text("non_replicated_deduplication_window"), text("0")});
        rows.push_back({text("replicated_deduplication_window"), text("1000")});
    } else if (name == "system.mutations") {
        col("database", "String");
        col("table", "String");
        col("is_done", "UInt8");
        s.mutations_read = true;
        for (auto& [key, t] : s.tables()) {
            for (auto& m : t.mutations) {
                rows.push_back({text(t.database), text(t.name), number(0)});
                m.seen = true;
            }
            if (auto z = s.zookeeper.find(key); t.replicated && z != s.zookeeper.end()) // done: applied here
                for (std::size_t k = 0; k < z->second.mutations.size(); ++k)
                    rows.push_back({text(t.database), text(t.name), number(k < t.mutations_done ? 1 : 0)});
        }
    } else if (name == "system.tables") {
        col("database", "String");
        col("name", "String");
        col("engine", "String");
        col("engine_full", "String");
        for (const auto& [_, t] : s.tables())
            rows.push_back({text(t.database), text(t.name), text(t.engine), text(t.engine_full)});
    } else {
        col("database", "String");
        col("table", "String");
        col("name", "String");
        col("type", "String");
        if (s.sql_dialect.column_positions)
            col("position", "UInt64");
        for (const auto& [_, t] : s.tables())
            for (std::size_t k = 0; k < t.columns.size(); ++k) {
                rows.push_back({text(t.database), text(t.name), text(t.columns[k].name), text(t.columns[k].type)});
                if (s.sql_dialect.column_positions)
                    rows.back().push_back(number(k + 1));
            }
    }
}

} // namespace chstate::detail::sim
