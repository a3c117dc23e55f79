// chstate/testing/detail/table.hpp — what a simulated table holds: its
// columns, engine and sorting key, its parts (one per INSERT until merged)
// of rows in insertion order, its deduplication log and queued mutations.
// What is done to them is storage.hpp's.
#pragma once

#include <chstate/testing/detail/ast.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail::sim {

struct row {
    std::vector<value> cells;
    std::uint64_t seq = 0;   ///< insertion order, across the server
    std::uint64_t block = 0; ///< cluster mode: the block (INSERT) that wrote it
};

struct part {
    std::vector<row> rows;
};

/// An ALTER TABLE … DELETE not yet applied. As in ClickHouse it applies to
/// the rows that existed when it was created, not to later INSERTs.
struct queued_mutation {
    expr condition;
    std::uint64_t last_seq = 0; ///< the newest row it applies to (row::seq)
    /// A read of system.mutations has shown it unfinished: it finishes
    /// once that read is answered (unless mutations are held).
    bool seen = false;
};

struct table {
    std::string database, name;
    std::vector<column_def> columns;
    std::string engine;      ///< MergeTree, ReplacingMergeTree, Replicated…
    std::string engine_full; ///< as created, for system.tables
    std::optional<std::size_t> version_col;
    std::vector<std::size_t> key_cols;
    std::optional<std::size_t> ttl_col;
    std::int64_t ttl_ms = 0;
    std::vector<part> parts;
    std::vector<queued_mutation> mutations;
    bool merges_stopped = false; ///< SYSTEM STOP MERGES

    /// Deduplication: the ids of the last non_replicated_deduplication_window
    /// blocks (storage.hpp, block_id); a replicated table keeps its log in
    /// ZooKeeper (replication.hpp).
    std::int64_t dedup_window = 0;
    std::vector<std::string> dedup_log;
    /// The bytes of each remembered block (absent: recorded without a block).
    std::map<std::string, std::string> dedup_bytes;

    // Cluster mode, Replicated*MergeTree: this replica's copy.
    bool replicated = false;
    std::set<std::uint64_t> have;   ///< blocks this replica holds (fetched or written here)
    std::size_t mutations_done = 0; ///< replicated mutations applied here, in log order

    std::string qualified_name() const { return database + "." + name; }

    std::optional<std::size_t> find(std::string_view col) const {
        for (std::size_t i = 0; i < columns.size(); ++i)
            if (columns[i].name == col)
                return i;
        return std::nullopt;
    }

    /// Records a block's id; the oldest falls out of the window.
    void remember_block(std::string id, std::optional<std::string> bytes = std::nullopt) {
        if (bytes)
            dedup_bytes[id] = std::move(*bytes);
        dedup_log.push_back(std::move(id));
        if (static_cast<std::int64_t>(dedup_log.size()) > dedup_window) {
            if (std::find(dedup_log.begin() + 1, dedup_log.end(), dedup_log.front()) == dedup_log.end())
                dedup_bytes.erase(dedup_log.front());
            dedup_log.erase(dedup_log.begin());
        }
    }
};

/// The bytes of a block's cells, as deduplication compares blocks.
inline void append_block_bytes(std::string& bytes, const std::vector<value>& cells) {
    for (const auto& v : cells)
        bytes += std::to_string(int(v.kind)) + ':' + std::to_string(v.s.size()) + ':' + v.s + ':' +
                 std::to_string(v.n) + ';';
}

} // namespace chstate::detail::sim
