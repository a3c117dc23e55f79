// chstate/testing/detail/state.hpp — everything a simulated server holds:
// its clock, version and dialect, databases, each replica's tables, and in
// cluster mode what ZooKeeper holds and the replicas' pending background
// tasks. Guarded by the server's mutex (simulated_clickhouse).
#pragma once

#include <chstate/manual_clock.hpp>
#include <chstate/testing/detail/dialect.hpp>
#include <chstate/testing/detail/eval.hpp>
#include <chstate/testing/detail/table.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chstate::detail::sim {

/// Cluster mode: a background step of one replica's replication queue.
struct replication_task {
    enum kind_t { fetch, mutate } kind = fetch;
    std::size_t replica = 0;
    std::string table;        ///< db.t
    std::uint64_t block = 0;  ///< fetch: the block (part) to fetch
    std::size_t mutation = 0; ///< mutate: its index in the table's log
};

/// A quorum INSERT's status node in ZooKeeper: the replicas that hold the part.
struct quorum_entry {
    std::uint64_t block = 0;
    std::size_t required = 0;
    std::set<std::size_t> replicas;
    bool parallel = false;
};

/// A replicated ALTER … DELETE (or DELETE FROM) in the replication log.
struct mutation_entry {
    expr condition;
    std::uint64_t max_block = 0; ///< applies to blocks up to this one
};

/// What ZooKeeper holds for one replicated table, shared by its replicas.
struct shared_table {
    std::vector<std::string> block_ids;               ///< deduplication log, oldest first
    std::map<std::string, std::uint64_t> block_of_id; ///< id → block number
    std::map<std::string, std::string> id_bytes;      ///< id → the block's bytes (written rows)
    std::map<std::uint64_t, part> blocks;             ///< each block as inserted (what a fetch copies)
    std::optional<quorum_entry> quorum;               ///< quorum/status (insert_quorum_parallel = 0)
    std::map<std::uint64_t, quorum_entry> parallel;   ///< quorum/parallel/<part>
    std::uint64_t last_quorum_block = 0;              ///< quorum/last_part (0: none)
    std::vector<mutation_entry> mutations;            ///< the replication log's mutations
};

struct server_state {
    explicit server_state(manual_clock c) : clock(std::move(c)) {}

    manual_clock clock; ///< now(), now64(), TTL; insert_quorum_timeout
    std::string version = "25.3.1.1";
    dialect sql_dialect = dialect::modern();
    bool mutations_held = false; ///< ALTER … DELETE waits for apply_mutations() alone
    bool mutations_read = false; ///< the statement under way read system.mutations
    string_arrays arrays;
    std::set<std::string> databases{"default", "system"};
    /// One map of tables per replica (one server: one replica); `current`
    /// is the replica the statement under way was sent to.
    std::vector<std::map<std::string, table>> replica_tables = std::vector<std::map<std::string, table>>(1);
    std::size_t current = 0;
    std::uint64_t seq = 0; ///< rows inserted

    // Cluster mode (simulated_clickhouse::create_cluster).
    std::string cluster; ///< the cluster's name; empty: one server
    bool quorum_parallel_default = true;
    std::map<std::string, shared_table> zookeeper; ///< by db.t
    std::uint64_t block_seq = 0;
    std::vector<replication_task> tasks;
    /// Quorums reached (table, block) that the delivery has not yet acknowledged.
    std::vector<std::pair<std::string, std::uint64_t>> quorums_reached;

    std::map<std::string, table>& tables() { return replica_tables[current]; }
    const std::map<std::string, table>& tables() const { return replica_tables[current]; }

    evaluator eval() { return evaluator(clock, version, sql_dialect, arrays); }
    std::int64_t now_ms() const {
        return std::chrono::duration_cast<std::chrono::milliseconds>(clock.now().time_since_epoch()).count();
    }

    /// `db.t` with or without back quotes, as the maps key it.
    static std::string normalize(std::string_view name) {
        std::string out;
        for (char c : name)
            if (c != '`')
                out += c;
        return out;
    }

    /// The table on the current replica; 81 for an unknown database, 60 for
    /// an unknown table.
    table& lookup(std::string_view name) {
        const std::string n = normalize(name);
        auto it = tables().find(n);
        if (it != tables().end())
            return it->second;
        const auto dot = n.find('.');
        if (dot != std::string::npos && !databases.count(n.substr(0, dot)))
            throw sim_error{81, "Database " + n.substr(0, dot) + " does not exist"};
        throw sim_error{60, "Table " + n + " does not exist"};
    }
};

} // namespace chstate::detail::sim
