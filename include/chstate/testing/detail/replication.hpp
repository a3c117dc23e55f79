// chstate/testing/detail/replication.hpp — cluster mode: Replicated*
// tables on the replicas of one shard, after ClickHouse's
// ReplicatedMergeTreeSink and StorageReplicatedMergeTree. Blocks written on
// one replica and fetched by the others as background tasks; block ids in
// ZooKeeper shared by the replicas (deduplication); quorum INSERTs and
// sequentially consistent reads; mutations through the replication log.
// The public header's "Cluster mode" says what is modelled and what not.
#pragma once

#include <chstate/testing/detail/state.hpp>
#include <chstate/testing/detail/storage.hpp>

#include <chstate/transport.hpp>

#include <optional>
#include <string>
#include <vector>

namespace chstate::detail::sim {

/// A statement's quorum settings (statement::settings; checked beforehand).
struct quorum_settings {
    std::size_t quorum = 0;            ///< insert_quorum (< 2: no quorum)
    bool parallel = true;              ///< insert_quorum_parallel
    bool sequential = false;           ///< select_sequential_consistency
    std::int64_t timeout_ms = 600'000; ///< insert_quorum_timeout

    static quorum_settings of(const statement& st, const server_state& s) {
        quorum_settings q;
        q.parallel = s.quorum_parallel_default;
        for (const auto& set : st.settings) {
            auto n = to_int(set.value);
            if (set.name == "insert_quorum") // 'auto': a majority
                q.quorum = n ? static_cast<std::size_t>(*n) : s.replica_tables.size() / 2 + 1;
            else if (set.name == "select_sequential_consistency")
                q.sequential = n && *n != 0;
            else if (set.name == "insert_quorum_parallel")
                q.parallel = n && *n != 0;
            else if (set.name == "insert_quorum_timeout" && n)
                q.timeout_ms = *n;
        }
        return q;
    }
};

/// True unless a quorum for `block` of table `key` is still being gathered.
inline bool quorum_done(const server_state& s, const std::string& key, std::uint64_t block) {
    auto it = s.zookeeper.find(key);
    if (it == s.zookeeper.end())
        return true;
    const auto& z = it->second;
    return !(z.quorum && z.quorum->block == block) && !z.parallel.count(block);
}

/// `replica` now holds `block`: it counts for a pending quorum. A quorum
/// reached is noted in quorums_reached (its INSERT is acknowledged by the
/// delivery): quorum/status goes and quorum/last_part names the part; a
/// parallel quorum updates no last_part (StorageReplicatedMergeTree::updateQuorum).
inline void quorum_ack(server_state& s, const std::string& key, std::size_t replica, std::uint64_t block) {
    auto& z = s.zookeeper[key];
    quorum_entry* e = z.quorum && z.quorum->block == block ? &*z.quorum : nullptr;
    if (auto it = z.parallel.find(block); !e && it != z.parallel.end())
        e = &it->second;
    if (!e)
        return;
    e->replicas.insert(replica);
    if (e->replicas.size() < e->required)
        return;
    if (e->parallel)
        z.parallel.erase(block);
    else {
        z.last_quorum_block = block;
        z.quorum.reset();
    }
    s.quorums_reached.emplace_back(key, block);
}

/// Deletes the rows of `rows` that mutation `m` removes.
inline void mutate_rows(const table& t, const mutation_entry& m, std::vector<row>& rows, const evaluator& eval) {
    std::erase_if(rows, [&](const row& r) { return r.block <= m.max_block && truthy(eval(m.condition, t, r.cells)); });
}

/// Adds `block` to this replica's `t`: the block as first written (a
/// fetch), or `own` rows under its number (a duplicate block written
/// here), as mutated by the mutations this replica has already applied.
inline void copy_block(server_state& s, table& t, const shared_table& z, std::uint64_t block,
                       std::optional<std::vector<row>> own = std::nullopt) {
    if (t.have.count(block))
        return;
    t.have.insert(block);
    auto it = z.blocks.find(block);
    if (it == z.blocks.end() && !own)
        return;
    auto rows = own ? std::move(*own) : it->second.rows;
    for (auto& r : rows)
        r.block = block;
    for (std::size_t k = 0; k < t.mutations_done && k < z.mutations.size(); ++k)
        mutate_rows(t, z.mutations[k], rows, s.eval());
    if (!rows.empty())
        t.parts.push_back({std::move(rows)});
}

/// Applies the replicated mutations up to (excluding) `upto`, in order.
inline void apply_upto(server_state& s, table& t, const shared_table& z, std::size_t upto) {
    for (; t.mutations_done < upto && t.mutations_done < z.mutations.size(); ++t.mutations_done)
        for (auto& p : t.parts)
            mutate_rows(t, z.mutations[t.mutations_done], p.rows, s.eval());
    std::erase_if(t.parts, [](const part& p) { return p.rows.empty(); });
}

/// Runs one background task: a fetch (which may complete a quorum) or a mutation.
inline void run_task(server_state& s, const replication_task& task) {
    auto& tables = s.replica_tables.at(task.replica);
    auto it = tables.find(task.table);
    if (it == tables.end())
        return;
    auto& z = s.zookeeper[task.table];
    if (task.kind == replication_task::fetch) {
        copy_block(s, it->second, z, task.block);
        quorum_ack(s, task.table, task.replica, task.block);
    } else {
        apply_upto(s, it->second, z, task.mutation + 1);
    }
}

/// The rows a read of `t` sees on the current replica. With
/// select_sequential_consistency (ClickHouse's
/// StorageReplicatedMergeTree::getMaxAddedBlocks): 289 when the replica
/// lacks quorum/last_part; blocks after a pending (non-parallel) quorum
/// part and after the last quorum part are not read.
inline std::vector<row> visible_rows(const server_state& s, const table& t, bool sequential) {
    std::vector<row> all;
    std::optional<std::uint64_t> max_block;
    if (t.replicated && sequential) {
        if (auto zit = s.zookeeper.find(t.qualified_name()); zit != s.zookeeper.end()) {
            const auto& z = zit->second;
            if (z.last_quorum_block && !t.have.count(z.last_quorum_block))
                throw sim_error{289, "Replica doesn't have part " + std::to_string(z.last_quorum_block) +
                                         " which was successfully written to quorum of other replicas. Send query "
                                         "to another replica or disable 'select_sequential_consistency' setting."};
            if (z.quorum)
                max_block = z.quorum->block - 1;
            if (z.last_quorum_block)
                max_block = z.last_quorum_block;
        }
    }
    for (const auto& p : t.parts)
        for (const auto& r : p.rows)
            if (!max_block || r.block <= *max_block)
                all.push_back(r);
    return all;
}

/// An INSERT's part into a replicated table (ReplicatedMergeTreeSink):
/// the quorum preconditions, deduplication by block id in ZooKeeper
/// (shared by the replicas), the part on this replica and a fetch queued
/// for each other one; with a quorum, `wait` names the block to wait for.
/// Returns the rows counted as written.
inline std::uint64_t replicated_insert(server_state& s, table& t, part p, const std::optional<std::string>& token,
                                       const quorum_settings& q, std::uint64_t& wait) {
    const std::string key = t.qualified_name();
    auto& z = s.zookeeper[key];
    const bool quorum = q.quorum >= 2;
    if (p.rows.empty()) // no block reaches the sink: nothing checked, nothing written
        return 0;
    if (quorum && q.quorum > s.replica_tables.size())
        throw sim_error{285, "Number of alive replicas (" + std::to_string(s.replica_tables.size()) +
                                 ") is less than requested quorum (" + std::to_string(q.quorum) + ")."};
    if (quorum && !q.parallel && z.quorum)
        throw sim_error{286, "Quorum for previous write has not been satisfied yet. Status: part_name: " +
                                 std::to_string(z.quorum->block) + ", required_number_of_replicas: " +
                                 std::to_string(z.quorum->required) + ", actual_number_of_replicas: " +
                                 std::to_string(z.quorum->replicas.size())};
    std::string bytes;
    for (const auto& r : p.rows)
        append_block_bytes(bytes, r.cells);
    const std::string id = block_id(token, bytes);
    if (auto it = z.block_of_id.find(id); it != z.block_of_id.end() && t.dedup_window > 0) {
        // A duplicate. On this replica: ignored. Not here: THIS insert's
        // rows are written here under the existing part's name
        // (ReplicatedMergeTreeSink::commitPart: "already exists on other
        // replicas as part …; will write it locally with that name") — for
        // a deduplication token with other rows, this replica's copy of
        // the part then differs from the others', for good (its later
        // fetch of the part finds it present). Either way it counts for
        // that part's quorum, and a quorum INSERT waits for it.
        const std::uint64_t block = it->second;
        const std::uint64_t written = z.id_bytes[id] == bytes ? 0 : p.rows.size();
        if (!t.have.count(block))
            copy_block(s, t, z, block, std::move(p.rows));
        quorum_ack(s, key, s.current, block);
        if (quorum && !quorum_done(s, key, block))
            wait = block;
        return written;
    }
    const std::uint64_t block = ++s.block_seq;
    for (auto& r : p.rows)
        r.block = block;
    if (t.dedup_window > 0) {
        z.block_ids.push_back(id);
        z.block_of_id[id] = block;
        z.id_bytes[id] = bytes;
        while (static_cast<std::int64_t>(z.block_ids.size()) > t.dedup_window) {
            z.block_of_id.erase(z.block_ids.front());
            z.id_bytes.erase(z.block_ids.front());
            z.block_ids.erase(z.block_ids.begin());
        }
    }
    z.blocks[block] = p;
    const std::uint64_t written = p.rows.size();
    t.have.insert(block);
    t.parts.push_back(std::move(p));
    for (std::size_t k = 0; k < s.replica_tables.size(); ++k)
        if (k != s.current)
            s.tasks.push_back({replication_task::fetch, k, key, block, 0});
    if (quorum) {
        quorum_entry e{block, q.quorum, {s.current}, q.parallel};
        if (q.parallel)
            z.parallel[block] = std::move(e);
        else
            z.quorum = std::move(e);
        wait = block;
    }
    return written;
}

/// ALTER TABLE … DELETE / DELETE FROM on a replicated table: a mutation
/// in the replication log for every block written so far; each replica
/// applies it when its task runs. `here_now` (DELETE FROM): applied on
/// the receiving replica at once.
inline void replicated_mutation(server_state& s, table& t, expr condition, bool here_now) {
    const std::string key = t.qualified_name();
    auto& z = s.zookeeper[key];
    z.mutations.push_back({std::move(condition), s.block_seq});
    const std::size_t index = z.mutations.size() - 1;
    for (std::size_t k = 0; k < s.replica_tables.size(); ++k) {
        if (here_now && k == s.current)
            apply_upto(s, t, z, index + 1);
        else
            s.tasks.push_back({replication_task::mutate, k, key, 0, index});
    }
}

/// A block id recorded in ZooKeeper without a block behind it
/// (simulated_clickhouse::record_deduplication_token).
inline void record_block_id(server_state& s, const table& t, const std::string& token) {
    auto& z = s.zookeeper[t.qualified_name()];
    const std::string id = block_id(token, {});
    z.block_ids.push_back(id);
    z.block_of_id[id] = 0;
}

} // namespace chstate::detail::sim
