// chstate/testing/detail/ast.hpp — a parsed statement: what the parser
// (parser.hpp) produces and the interpreter (execute.hpp) runs. Names are
// as written (a table is "db.t", back quotes removed); nothing here has
// been looked up on the server yet.
#pragma once

#include <chstate/testing/detail/cell.hpp>
#include <chstate/testing/detail/lexer.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace chstate::detail::sim {

struct select_query;

/// An expression. Placeholders are bound while parsing (literals);
/// INTERVAL n UNIT is a literal number of milliseconds.
struct expr {
    enum kind_t {
        literal,
        column,
        call,     ///< name(args…)
        binary,   ///< args[0] name args[1]: AND OR = != < <= > >= + - * IN
        array,    ///< ['a', …]: args are literals
        subquery, ///< (SELECT …), a scalar: run before its statement (resolve_subqueries)
    } kind = literal;
    value v;
    std::string name;
    std::vector<expr> args;
    std::shared_ptr<const select_query> query;
    std::string text; ///< as written: a result column's name when it has no alias
};

using settings_map = std::map<std::string, value>;

struct select_item {
    expr e;
    std::string name;
    /// Without GROUP BY. `nested`: aggregates inside an expression, e.g.
    /// max(token) = maxIf(token, kind = 'grant') AND countIf(…) = 0.
    enum aggregate_t { none, count, max, min, any, nested } aggregate = none;
};

/// count(), countIf(c), max/min/any(x), maxIf/minIf(x, c): the aggregate
/// functions the simulator evaluates (without GROUP BY: one row).
inline bool is_aggregate_call(const expr& e) {
    if (e.kind != expr::call)
        return false;
    const std::string f = upper(e.name);
    return (f == "COUNT" && e.args.empty()) || (f == "COUNTIF" && e.args.size() == 1) ||
           ((f == "MAX" || f == "MIN" || f == "ANY") && e.args.size() == 1) ||
           ((f == "MAXIF" || f == "MINIF") && e.args.size() == 2);
}

inline bool has_aggregate(const expr& e) {
    if (is_aggregate_call(e))
        return true;
    for (const auto& a : e.args)
        if (has_aggregate(a))
            return true;
    return false;
}

struct order_term {
    expr e;
    bool descending = false;
};

/// SELECT [DISTINCT] items [FROM t [FINAL] [PREWHERE]] [WHERE] [ORDER BY] [LIMIT].
struct select_query {
    bool distinct = false;
    std::vector<select_item> items;
    std::optional<std::string> from; ///< a table or system.<name>; none: one row of no columns
    bool final = false;
    /// Filters the stored rows before FINAL collapses them (as ClickHouse
    /// reads: a filter on the sorting key drops whole groups, so it gives
    /// the same rows as WHERE; on any other column it may not).
    std::optional<expr> prewhere;
    std::optional<expr> where;
    std::vector<order_term> order;
    std::optional<std::int64_t> limit;
};

/// A top-level SELECT with its trailing SETTINGS and FORMAT.
struct select_statement {
    select_query query;
    settings_map settings;
    std::string format; ///< FORMAT in the text; empty: statement::format, else TabSeparated
};

struct insert_statement {
    std::string table;
    std::vector<std::string> columns; ///< empty: every column, in order
    settings_map settings;            ///< before the data and after it
    enum source_t { values, select, tab_separated } source = values;
    std::vector<std::vector<expr>> rows; ///< VALUES (…), (…)
    std::vector<expr> select_items;      ///< INSERT … SELECT items [WHERE]: one row or none
    std::optional<expr> where;
};

struct create_database {
    std::string name;
    bool if_not_exists = false;
    std::optional<std::string> cluster; ///< ON CLUSTER
};

struct column_def {
    std::string name;
    std::string type; ///< as written
    std::optional<expr> default_value;
};

struct create_table {
    std::string database, name;
    bool if_not_exists = false;
    std::optional<std::string> cluster; ///< ON CLUSTER
    std::vector<column_def> columns;
    std::string engine;                 ///< MergeTree, ReplacingMergeTree, Replicated…
    std::optional<std::string> version_column;
    std::vector<std::string> order_by;
    std::optional<std::string> ttl_column;
    std::int64_t ttl_ms = 0;
    settings_map settings;
    std::string engine_full; ///< the text from the engine's name on
};

/// DELETE FROM t WHERE (lightweight) or ALTER TABLE t DELETE WHERE (a mutation).
struct delete_statement {
    std::string table;
    expr where;
    bool lightweight = false;
};

struct truncate_statement {
    std::string table;
};

/// SYSTEM STOP MERGES t / SYSTEM START MERGES t.
struct merges_statement {
    std::string table;
    bool stop = false;
};

/// A statement the simulator does not model: 48 (NOT_IMPLEMENTED), naming it.
[[noreturn]] inline void not_understood(const std::string& sql) {
    throw sim_error{48, "simulated_clickhouse does not understand this statement (see "
                        "chstate/testing/simulated.hpp for those it does): " + sql};
}

using query = std::variant<select_statement, insert_statement, create_database, create_table, delete_statement,
                           truncate_statement, merges_statement>;

} // namespace chstate::detail::sim
