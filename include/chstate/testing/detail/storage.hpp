// chstate/testing/detail/storage.hpp — what happens to a table's rows:
// values stored into typed columns, ReplacingMergeTree's collapse (FINAL
// and merges), TTL at merge time, mutations, and one server's insert
// deduplication. Replicated tables add replication.hpp.
#pragma once

#include <chstate/testing/detail/eval.hpp>
#include <chstate/testing/detail/table.hpp>

#include <algorithm>
#include <limits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chstate::detail::sim {

// ---- typed columns ------------------------------------------------------------

inline bool nullable(const std::string& type) { return type.starts_with("Nullable"); }
inline bool is_time(const std::string& type) { return type.find("DateTime") != std::string::npos; }

/// A column's value when an INSERT gives none and it has no DEFAULT.
inline value default_of(const std::string& type) {
    if (nullable(type))
        return value::of_null();
    if (type == "String")
        return value::of_text("");
    return value::of_number(0);
}

/// `v` as column `c` stores it: text for String columns; numbers for the
/// rest, a DateTime's in whole seconds (as milliseconds). Text for a time
/// column is seconds, or "seconds.mmm" as a DateTime64(3) reads it.
inline value coerce(const column_def& c, value v) {
    if (v.kind == value::null) {
        if (!nullable(c.type))
            throw sim_error{53, "Cannot insert NULL into non-Nullable column " + c.name};
        return v;
    }
    if (c.type.find("String") != std::string::npos)
        return v.kind == value::number ? value::of_text(std::to_string(v.n)) : v;
    if (v.kind == value::text) {
        if (auto dot = v.s.find('.'); is_time(c.type) && dot != std::string::npos && v.s.size() - dot == 4) {
            auto secs = to_int(std::string_view(v.s).substr(0, dot));
            auto ms = to_int(std::string_view(v.s).substr(dot + 1));
            if (secs && ms && *ms >= 0)
                return value::of_number(*secs * 1000 + *ms);
        }
        auto n = to_int(v.s);
        if (!n)
            throw sim_error{41, "Cannot parse " + c.type + " from '" + v.s + "' (simulated)"};
        return value::of_number(is_time(c.type) ? *n * 1000 : *n);
    }
    v.quoted64 = false;
    if (c.type == "DateTime")
        v.n = v.n / 1000 * 1000;
    return v;
}

/// A row of `t` from the values `given` for the columns `cols` (indexes):
/// the others take their DEFAULT, else their type's default.
inline row make_row(const table& t, const std::vector<std::size_t>& cols, std::vector<value> given,
                    const evaluator& eval, std::uint64_t seq) {
    row r;
    r.seq = seq;
    r.cells.resize(t.columns.size());
    std::vector<bool> set(t.columns.size(), false);
    for (std::size_t k = 0; k < cols.size(); ++k) {
        r.cells[cols[k]] = coerce(t.columns[cols[k]], std::move(given[k]));
        set[cols[k]] = true;
    }
    const std::vector<value> no_row(t.columns.size());
    for (std::size_t k = 0; k < t.columns.size(); ++k) {
        if (set[k])
            continue;
        const auto& c = t.columns[k];
        r.cells[k] = c.default_value ? coerce(c, eval(*c.default_value, t, no_row)) : default_of(c.type);
    }
    return r;
}

// ---- one server's insert deduplication --------------------------------------------

/// A block's id in a deduplication log: its token, else its content.
inline std::string block_id(const std::optional<std::string>& token, const std::string& bytes) {
    return token ? "token:" + *token : "hash:" + bytes;
}

/// The bytes of a block given as values, as deduplication compares blocks.
inline std::string block_bytes(const std::vector<std::vector<value>>& given) {
    std::string bytes;
    for (const auto& g : given)
        append_block_bytes(bytes, g);
    return bytes;
}

/// Whether a block of `rows` rows (its content `bytes`, deduplication
/// `token`, if any) is written into a non-replicated `t`. Within the last
/// non_replicated_deduplication_window blocks, one with the same id is
/// dropped, the INSERT still succeeding; a new id is recorded (before the
/// block is written, as ClickHouse's MergeTreeSink records it).
/// `counted`: rows a dropped duplicate still reports as written — as chDB
/// 26.5 counts them for INSERT … SELECT, none for the same bytes again,
/// all for other bytes.
inline bool admit_block(table& t, const std::optional<std::string>& token, std::string bytes, std::size_t rows,
                        std::uint64_t& counted) {
    if (t.dedup_window <= 0 || rows == 0) // no block, no id
        return true;
    std::string id = block_id(token, bytes);
    if (std::find(t.dedup_log.begin(), t.dedup_log.end(), id) != t.dedup_log.end()) {
        auto same = t.dedup_bytes.find(id);
        if (same == t.dedup_bytes.end() || same->second != bytes)
            counted += rows;
        return false;
    }
    t.remember_block(std::move(id), std::move(bytes));
    return true;
}

// ---- collapse, merges, mutations --------------------------------------------------

/// The ReplacingMergeTree collapse of `rows` (any order): sorted by the
/// key, one row per key — the highest version, among equal versions the
/// last inserted. A plain MergeTree only sorts.
inline std::vector<row> collapse(const table& t, std::vector<row> rows) {
    auto key_less = [&](const row& a, const row& b) {
        for (auto k : t.key_cols) {
            auto c = compare(a.cells[k], b.cells[k]);
            int ci = c ? *c : (a.cells[k].kind == value::null) - (b.cells[k].kind == value::null);
            if (ci != 0)
                return ci < 0;
        }
        return false;
    };
    std::stable_sort(rows.begin(), rows.end(), key_less);
    if (t.engine.find("ReplacingMergeTree") == std::string::npos)
        return rows;
    std::vector<row> out;
    for (auto& r : rows) {
        if (out.empty() || key_less(out.back(), r) || key_less(r, out.back())) {
            out.push_back(r);
            continue;
        }
        auto& cur = out.back();
        bool replace = r.seq > cur.seq;
        if (t.version_col) {
            auto c = compare(r.cells[*t.version_col], cur.cells[*t.version_col]);
            int ci = c ? *c : 0;
            replace = ci > 0 || (ci == 0 && r.seq > cur.seq);
        }
        if (replace)
            cur = r;
    }
    return out;
}

/// A background merge of every part of `t` into one: collapsed as FINAL
/// does, rows whose TTL has passed at `now_ms` dropped. Returns the rows
/// removed. Nothing after SYSTEM STOP MERGES.
inline std::size_t merge(table& t, std::int64_t now_ms) {
    if (t.merges_stopped)
        return 0;
    std::vector<row> all;
    for (auto& p : t.parts)
        for (auto& r : p.rows)
            all.push_back(r);
    const std::size_t before = all.size();
    auto merged = collapse(t, std::move(all));
    if (t.ttl_col)
        std::erase_if(merged, [&](const row& r) {
            const auto& c = r.cells[*t.ttl_col];
            return c.kind == value::number && c.n + t.ttl_ms <= now_ms;
        });
    const std::size_t removed = before - merged.size();
    t.parts.clear();
    if (!merged.empty())
        t.parts.push_back({std::move(merged)});
    return removed;
}

/// Deletes the rows of `t` (up to row::seq `last_seq`) for which
/// `condition` holds; returns how many.
inline std::size_t delete_where(table& t, const expr& condition, const evaluator& eval,
                                std::uint64_t last_seq = std::numeric_limits<std::uint64_t>::max()) {
    std::size_t n = 0;
    for (auto& p : t.parts) {
        const auto before = p.rows.size();
        std::erase_if(p.rows,
                      [&](const row& r) { return r.seq <= last_seq && truthy(eval(condition, t, r.cells)); });
        n += before - p.rows.size();
    }
    std::erase_if(t.parts, [](const part& p) { return p.rows.empty(); });
    return n;
}

/// Applies `t`'s queued mutations (only those a system.mutations read has
/// seen, when `seen_only`), in order; returns the rows removed.
inline std::size_t apply_mutations(table& t, const evaluator& eval, bool seen_only = false) {
    std::size_t n = 0, k = 0;
    for (; k < t.mutations.size() && (!seen_only || t.mutations[k].seen); ++k)
        n += delete_where(t, t.mutations[k].condition, eval, t.mutations[k].last_seq);
    t.mutations.erase(t.mutations.begin(), t.mutations.begin() + static_cast<std::ptrdiff_t>(k));
    return n;
}

} // namespace chstate::detail::sim
