// chstate/testing/detail/execute.hpp — runs one statement on a simulated
// server: parses it in the server's dialect (parser.hpp) and carries it
// out on the current replica's tables. The reply's bytes, the rows an
// INSERT wrote and, for a quorum INSERT, the block it waits for come back
// in an `outcome`; a ClickHouse error as a thrown sim_error. An INSERT …
// SELECT may stop between its SELECT and its commit (staged_block).
#pragma once

#include <chstate/testing/detail/parser.hpp>
#include <chstate/testing/detail/select.hpp>

#include <chstate/transport.hpp>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace chstate::detail::sim {

/// An INSERT's block between its evaluation and its commit.
///
/// ClickHouse runs INSERT … SELECT as one pipeline: the SELECT feeds the
/// table's sink (InterpreterInsertQuery::execute: the SELECT's
/// buildQueryPipeline(), then pipeline.addChains(sink chains)), its scalar
/// subqueries replaced by constants during analysis, before the pipeline
/// runs (Interpreters/ExecuteScalarSubqueriesVisitor.h: "A replacement
/// occurs during query analysis, and not during the main runtime"). The
/// sink writes the block as a temporary part, and only then, under the
/// table's parts lock, checks the deduplication log and commits the part
/// (MergeTreeSink::finishDelayedChunk: lockParts(),
/// deduplication_log->addPart(block_id), renameTempPartAndAdd,
/// transaction.commit; ReplicatedMergeTreeSink::commitPart: the block id
/// and the part in one ZooKeeper multi-op). Other INSERTs commit in
/// between: a WHERE that held when the SELECT ran may no longer hold when
/// the row lands. Two-phase inserts (delivery.hpp) keep the block here
/// between two steps the test schedules.
struct staged_block {
    std::string table;                ///< db.t, looked up again at commit
    std::vector<row> rows;            ///< defaults filled in; insertion order (row::seq) given at commit
    std::string bytes;                ///< the block's content: its id when there is no token
    std::optional<std::string> token; ///< insert_deduplication_token
};

struct outcome {
    std::vector<std::string> chunks; ///< the reply, as streamed
    /// An INSERT … SELECT stopped before its commit (interpreter::run's
    /// `stage_insert_select`): its block, for interpreter::commit.
    std::optional<staged_block> staged;
    std::uint64_t written_rows = 0;  ///< rows INSERTed (after deduplication)
    /// A quorum INSERT whose quorum is not reached yet: its table and block.
    std::string wait_table;
    std::uint64_t wait_block = 0;
    bool wait_parallel = false;
    std::int64_t wait_timeout_ms = 0; ///< insert_quorum_timeout
};

class interpreter {
public:
    interpreter(server_state& s, const statement& st)
        : s_(s), stmt_(st), quorum_(quorum_settings::of(st, s)), select_(s, quorum_, st.sql) {}

    /// Runs the statement. `stage_insert_select`: an INSERT … SELECT whose
    /// SELECT produced rows stops before its commit and returns its block
    /// in outcome::staged (nothing written, nothing deduplicated yet).
    outcome run(bool stage_insert_select = false) {
        stage_insert_select_ = stage_insert_select;
        query q = parse(stmt_, s_.sql_dialect);
        std::visit([this](auto& parsed) { (*this)(parsed); }, q);
        if (s_.mutations_read && !s_.mutations_held) // as if they took the moment until the reply
            for (auto& tables : s_.replica_tables)
                for (auto& [_, t] : tables)
                    apply_mutations(t, s_.eval(), true);
        return std::move(out_);
    }

    /// The second step of a staged INSERT: commits its block, deduplication
    /// decided now, after whatever was committed since the SELECT ran.
    outcome commit(staged_block b) {
        commit_block(std::move(b));
        return std::move(out_);
    }

    void operator()(select_statement& q) {
        check_settings(q.settings);
        selection sel = select_.run(std::move(q.query));
        std::string format = !q.format.empty() ? q.format : !stmt_.format.empty() ? stmt_.format : "TabSeparated";
        if (format != "TabSeparated" && format != "JSONEachRow" && format != "RowBinary")
            not_understood(stmt_.sql);
        std::size_t block = 1000;
        if (auto it = q.settings.find("max_block_size"); it != q.settings.end() && it->second.n > 0)
            block = static_cast<std::size_t>(it->second.n);
        out_.chunks = encode_rows(sel.columns, sel.rows, format, block);
    }

    void operator()(insert_statement& q) {
        check_settings(q.settings);
        table& t = s_.lookup(q.table);
        std::vector<std::size_t> cols;
        for (const auto& c : q.columns) {
            auto idx = t.find(c);
            if (!idx)
                throw sim_error{16, "No such column " + c + " in table " + t.qualified_name()};
            cols.push_back(*idx);
        }
        if (q.columns.empty())
            for (std::size_t k = 0; k < t.columns.size(); ++k)
                cols.push_back(k);
        const evaluator eval = s_.eval();
        const std::vector<value> no_row(t.columns.size());
        auto values_of = [&](std::vector<expr>& items) {
            std::vector<value> r;
            for (auto& e : items) {
                select_.resolve(e);
                r.push_back(eval(e, t, no_row));
            }
            return r;
        };
        std::vector<std::vector<value>> given;
        if (q.source == insert_statement::values) {
            for (auto& r : q.rows)
                given.push_back(values_of(r));
        } else if (q.source == insert_statement::select) {
            auto r = values_of(q.select_items);
            select_.resolve(q.where);
            if (!q.where || truthy(eval(*q.where, t, no_row))) // WHERE false: no row, no block
                given.push_back(std::move(r));
        } else {
            given = read_tab_separated(stmt_.data, cols.size());
        }
        staged_block b{t.qualified_name(), {}, block_bytes(given), std::nullopt};
        if (auto it = q.settings.find("insert_deduplication_token"); it != q.settings.end())
            b.token = it->second.s;
        for (auto& g : given) {
            if (g.size() != cols.size())
                throw sim_error{20, "Number of columns doesn't match in: " + stmt_.sql};
            b.rows.push_back(make_row(t, cols, std::move(g), eval, 0));
        }
        // No row, no block: nothing reaches the sink, so nothing to commit later.
        if (stage_insert_select_ && q.source == insert_statement::select && !b.rows.empty()) {
            out_.staged = std::move(b);
            return;
        }
        commit_block(std::move(b));
    }

    void operator()(create_database& q) {
        if (q.cluster)
            check_cluster(*q.cluster); // the replicas share the set of databases
        if (!s_.databases.insert(q.name).second && !q.if_not_exists)
            throw sim_error{82, "Database " + q.name + " already exists"};
    }

    void operator()(create_table& q) {
        if (q.cluster)
            check_cluster(*q.cluster);
        table t;
        t.database = q.database;
        t.name = q.name;
        t.columns = std::move(q.columns);
        t.engine = q.engine;
        t.engine_full = q.engine_full;
        t.replicated = q.engine.starts_with("Replicated");
        if (t.replicated && s_.cluster.empty())
            not_understood(stmt_.sql); // Replicated engines: cluster mode only
        for (const auto& c : t.columns) {
            if (!s_.sql_dialect.datetime64 && c.type.find("DateTime64") != std::string::npos)
                throw sim_error{50, "Unknown data type family: DateTime64 (as ClickHouse 18.16)"};
            if (c.default_value) // analysed as the server does: an unknown function fails now
                s_.eval()(*c.default_value, t, std::vector<value>(t.columns.size()));
        }
        auto column = [&](const std::string& name) {
            auto idx = t.find(name);
            if (!idx)
                throw sim_error{47, "Missing column " + name};
            return *idx;
        };
        if (q.version_column)
            t.version_col = column(*q.version_column);
        for (const auto& k : q.order_by)
            t.key_cols.push_back(column(k));
        if (q.ttl_column) {
            t.ttl_col = column(*q.ttl_column);
            t.ttl_ms = q.ttl_ms;
        }
        if (t.replicated)
            t.dedup_window = 1000; // replicated_deduplication_window's default (100 before 23.x)
        for (const auto& [name, v] : q.settings) {
            if (name == "non_replicated_deduplication_window" && !s_.sql_dialect.deduplication_window)
                throw sim_error{36, "Unknown setting " + name + " for storage MergeTree (as ClickHouse 18.16)"};
            if (name == (t.replicated ? "replicated_deduplication_window" : "non_replicated_deduplication_window"))
                t.dedup_window = v.n;
        }
        if (!s_.databases.count(t.database))
            throw sim_error{81, "Database " + t.database + " does not exist"};
        const std::string key = t.qualified_name();
        if (s_.tables().count(key)) {
            if (q.if_not_exists)
                return;
            throw sim_error{57, "Table " + key + " already exists"};
        }
        if (q.cluster) // distributed DDL: modelled as done on every replica before the reply
            for (auto& tables : s_.replica_tables)
                tables.emplace(key, t);
        else
            s_.tables().emplace(key, std::move(t));
    }

    void operator()(delete_statement& q) {
        table& t = s_.lookup(q.table);
        select_.resolve(q.where);
        const evaluator eval = s_.eval();
        if (!q.lightweight || t.replicated)
            eval(q.where, t, std::vector<value>(t.columns.size())); // a missing column fails now
        if (t.replicated)
            replicated_mutation(s_, t, std::move(q.where), q.lightweight);
        else if (q.lightweight)
            delete_where(t, q.where, eval);
        else
            t.mutations.push_back({std::move(q.where), s_.seq});
    }

    void operator()(truncate_statement& q) { s_.lookup(q.table).parts.clear(); }

    void operator()(merges_statement& q) { s_.lookup(q.table).merges_stopped = q.stop; }

private:
    /// The part's commit: the deduplication check, then the part, as the
    /// table's sink does (staged_block).
    void commit_block(staged_block b) {
        table& t = s_.lookup(b.table);
        if (!t.replicated && !admit_block(t, b.token, std::move(b.bytes), b.rows.size(), out_.written_rows))
            return;
        part p{std::move(b.rows)};
        for (auto& r : p.rows) // commit order: FINAL's tie-break, and which rows a mutation reaches
            r.seq = ++s_.seq;
        if (t.replicated) {
            std::uint64_t wait = 0;
            out_.written_rows += replicated_insert(s_, t, std::move(p), b.token, quorum_, wait);
            if (wait) {
                out_.wait_table = t.qualified_name();
                out_.wait_block = wait;
                out_.wait_parallel = quorum_.parallel;
                out_.wait_timeout_ms = quorum_.timeout_ms;
            }
            return;
        }
        out_.written_rows += p.rows.size();
        if (!p.rows.empty())
            t.parts.push_back(std::move(p));
    }

    /// ON CLUSTER names the server's cluster (701 otherwise, and on one server).
    void check_cluster(const std::string& name) const {
        if (s_.cluster.empty() || name != s_.cluster)
            throw sim_error{701, "Requested cluster '" + name + "' not found"};
    }

    /// Settings a query may carry in its text, as the server's version knows them.
    void check_settings(const settings_map& settings) const {
        if (!s_.sql_dialect.deduplication_token && settings.count("insert_deduplication_token"))
            throw sim_error{115, "Unknown setting insert_deduplication_token (as ClickHouse 18.16)"};
    }

    server_state& s_;
    const statement& stmt_;
    quorum_settings quorum_;
    select_runner select_;
    outcome out_;
    bool stage_insert_select_ = false;
};

} // namespace chstate::detail::sim
