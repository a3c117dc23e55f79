// chstate/testing/detail/select.hpp — running a SELECT: the rows of its
// table (FINAL collapsed, as the current replica sees them) or of a system
// table, WHERE, ORDER BY, the items (count(), max, min and any without
// GROUP BY: one row, even for no input, as ClickHouse returns), DISTINCT,
// LIMIT; aggregates inside expressions too (max(x) = maxIf(x, c) AND
// countIf(c2) = 0). Scalar subqueries run first, as ClickHouse runs them before the
// query that holds them.
#pragma once

#include <chstate/testing/detail/formats.hpp>
#include <chstate/testing/detail/replication.hpp>
#include <chstate/testing/detail/system_tables.hpp>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace chstate::detail::sim {

/// A SELECT's result: its columns and rows.
struct selection {
    std::vector<result_column> columns;
    std::vector<std::vector<value>> rows;
};

class select_runner {
public:
    /// `sql`: the statement's text, named by errors. `q`: its settings
    /// (select_sequential_consistency applies to every read, subqueries too).
    select_runner(server_state& s, const quorum_settings& q, const std::string& sql) : s_(s), q_(q), sql_(sql) {}

    /// Replaces the scalar subqueries in `e` by their values.
    void resolve(expr& e) {
        for (auto& a : e.args)
            resolve(a);
        if (e.kind != expr::subquery)
            return;
        selection sel = run(*e.query);
        expr v;
        v.v = sel.rows.empty() || sel.rows.front().empty() ? value::of_null() : sel.rows.front().front();
        v.v.quoted64 = false;
        v.text = std::move(e.text);
        e = std::move(v);
    }
    void resolve(std::optional<expr>& e) {
        if (e)
            resolve(*e);
    }

    selection run(select_query q) {
        for (auto& it : q.items)
            resolve(it.e);
        resolve(q.prewhere);
        resolve(q.where);
        for (auto& o : q.order)
            resolve(o.e);

        const evaluator eval = s_.eval();
        table scratch; // a system table's columns, or none (SELECT without FROM)
        const table* src = &scratch;
        std::vector<std::vector<value>> rows;
        if (!q.from) {
            rows.emplace_back(); // one row, no columns
        } else if (is_system_table(*q.from)) {
            if (q.final)
                throw sim_error{181, "Storage " + *q.from + " doesn't support FINAL"};
            if (q.prewhere)
                throw sim_error{182, "Storage " + *q.from + " doesn't support PREWHERE"};
            read_system_table(s_, *q.from, scratch, rows);
        } else {
            const table& t = s_.lookup(*q.from);
            src = &t;
            std::vector<row> all = visible_rows(s_, t, q_.sequential);
            if (q.prewhere) {
                eval(*q.prewhere, t, std::vector<value>(t.columns.size())); // fails even where no row reaches it
                std::erase_if(all, [&](const row& r) { return !truthy(eval(*q.prewhere, t, r.cells)); });
            }
            if (q.final)
                all = collapse(t, std::move(all));
            for (auto& r : all)
                rows.push_back(std::move(r.cells));
        }
        // Every expression once up front, so a missing column or function
        // fails even where no row reaches it.
        const std::vector<value> probe(src->columns.size());
        if (q.where)
            eval(*q.where, *src, probe);
        for (const auto& o : q.order)
            eval(o.e, *src, probe);
        if (q.where)
            std::erase_if(rows, [&](const std::vector<value>& r) { return !truthy(eval(*q.where, *src, r)); });
        if (!q.order.empty())
            std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
                for (const auto& o : q.order) {
                    auto c = compare(eval(o.e, *src, a), eval(o.e, *src, b));
                    if (int ci = c ? *c : 0; ci != 0)
                        return o.descending ? ci > 0 : ci < 0;
                }
                return false;
            });
        for (const auto& it : q.items)
            if (it.aggregate == select_item::nested)
                probe_aggregated(it.e, *src, probe, eval);
            else if (it.aggregate != select_item::count)
                eval(it.e, *src, rows.empty() ? probe : rows.front());

        selection out;
        for (const auto& it : q.items)
            out.columns.push_back({it.name, result_type(it, *src)});
        const bool aggregate = std::any_of(q.items.begin(), q.items.end(),
                                           [](const select_item& it) { return it.aggregate != select_item::none; });
        if (aggregate)
            out.rows.push_back(aggregates(q.items, *src, rows, eval));
        else
            project(q, *src, rows, eval, out.rows);
        if (q.limit && static_cast<std::int64_t>(out.rows.size()) > *q.limit)
            out.rows.resize(static_cast<std::size_t>(*q.limit));
        return out;
    }

private:
    /// The column type a result is written as: a bare column's (or max/min
    /// of one), DateTime for toDateTime(…); none for other expressions.
    static std::string result_type(const select_item& it, const table& src) {
        if (it.e.kind == expr::column && it.aggregate != select_item::count)
            if (auto idx = src.find(it.e.name))
                return src.columns[*idx].type;
        if (it.e.kind == expr::call && upper(it.e.name) == "TODATETIME")
            return "DateTime";
        return {};
    }

    /// One row of aggregates over `rows` (no GROUP BY).
    std::vector<value> aggregates(const std::vector<select_item>& items, const table& src,
                                  const std::vector<std::vector<value>>& rows, const evaluator& eval) const {
        std::vector<value> r;
        for (const auto& it : items) {
            if (it.aggregate == select_item::none)
                not_understood(sql_); // a column beside an aggregate needs GROUP BY, not modelled
            if (it.aggregate == select_item::nested) {
                expr folded = it.e;
                fold_aggregates(folded, src, rows, eval);
                r.push_back(eval(folded, src, std::vector<value>(src.columns.size())));
                continue;
            }
            if (it.aggregate == select_item::count) {
                value v = value::of_number(static_cast<std::int64_t>(rows.size()));
                v.quoted64 = true;
                r.push_back(v);
                continue;
            }
            r.push_back(best_of(it.aggregate == select_item::max ? 1 : it.aggregate == select_item::min ? -1 : 0,
                                it.e, nullptr, src, rows, eval));
        }
        return r;
    }

    /// max (`direction` 1), min (-1) or any (0) of `arg` over the rows
    /// where `condition` (if any) holds; over none, the type's default
    /// (0, the epoch, '').
    static value best_of(int direction, const expr& arg, const expr* condition, const table& src,
                         const std::vector<std::vector<value>>& rows, const evaluator& eval) {
        std::optional<value> best;
        for (const auto& row : rows) {
            if (condition && !truthy(eval(*condition, src, row)))
                continue;
            value v = eval(arg, src, row);
            if (!best)
                best = std::move(v);
            else if (direction == 0)
                break;
            else if (auto c = compare(v, *best); c && (direction > 0 ? *c > 0 : *c < 0))
                best = std::move(v);
        }
        if (best)
            return std::move(*best);
        if (arg.kind == expr::column)
            if (auto idx = src.find(arg.name); idx && src.columns[*idx].type.find("String") != std::string::npos)
                return value::of_text("");
        return value::of_number(0);
    }

    /// An aggregate's arguments, evaluated once against `probe` so a
    /// missing column or function fails even over no rows.
    static void probe_aggregated(const expr& e, const table& src, const std::vector<value>& probe,
                                 const evaluator& eval) {
        if (!is_aggregate_call(e)) {
            for (const auto& a : e.args)
                probe_aggregated(a, src, probe, eval);
            return;
        }
        for (const auto& a : e.args)
            eval(a, src, probe);
    }

    /// Replaces each aggregate call in `e` by its value over `rows`:
    /// count()/countIf a number; max/min/any(If) the best value, or over
    /// no rows the type's default (0, the epoch, '').
    static void fold_aggregates(expr& e, const table& src, const std::vector<std::vector<value>>& rows,
                                const evaluator& eval) {
        if (!is_aggregate_call(e)) {
            for (auto& a : e.args)
                fold_aggregates(a, src, rows, eval);
            return;
        }
        const std::string f = upper(e.name);
        const bool conditional = f.ends_with("IF");
        value result;
        if (f.starts_with("COUNT")) {
            result = value::of_number(static_cast<std::int64_t>(
                std::count_if(rows.begin(), rows.end(), [&](const std::vector<value>& row) {
                    return !conditional || truthy(eval(e.args.back(), src, row));
                })));
        } else {
            result = best_of(f.starts_with("MAX") ? 1 : f.starts_with("MIN") ? -1 : 0, e.args.front(),
                             conditional ? &e.args.back() : nullptr, src, rows, eval);
        }
        result.quoted64 = false;
        expr literal;
        literal.v = std::move(result);
        literal.text = std::move(e.text);
        e = std::move(literal);
    }

    /// The items of every row; DISTINCT drops repeated result rows.
    void project(const select_query& q, const table& src, const std::vector<std::vector<value>>& rows,
                 const evaluator& eval, std::vector<std::vector<value>>& out) const {
        std::set<std::vector<std::string>> seen;
        for (const auto& row : rows) {
            std::vector<value> r;
            for (const auto& it : q.items)
                r.push_back(eval(it.e, src, row));
            if (q.distinct) {
                std::vector<std::string> key;
                for (const auto& v : r)
                    key.push_back(std::to_string(v.kind) + ":" + v.s + ":" + std::to_string(v.n));
                if (!seen.insert(key).second)
                    continue;
            }
            out.push_back(std::move(r));
        }
    }

    server_state& s_;
    const quorum_settings& q_;
    const std::string& sql_;
};

} // namespace chstate::detail::sim
