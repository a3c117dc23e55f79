// Fuzz target: quoting values into SQL text and TSV (detail/sql.hpp).
//
// Input: values separated by the two bytes 0xFF '|' (each value any bytes); the first one
// also serves as a glob and the second as an id matched against it.
//
// Properties, each checked with an independent reader written here from
// ClickHouse's rules (docs: "Syntax", string literals and identifiers;
// "TabSeparated" escaping), not from chstate's code:
//   * quote_string(v) is one string literal that reads back as v, and the
//     quote never appears unescaped inside it;
//   * quote_identifier(v) is one back-quoted identifier that reads back as v;
//   * a TSV field (append_tsv_field, escape_parameter_value) holds no raw
//     tab or newline and reads back as v; nullopt is \N;
//   * inline_parameters replaces each {name:String} placeholder by a
//     literal, and the statement's literals read back, in order, as the values;
//   * bind_parameters_as_table's row is one TSV line whose fields read back
//     as the values, and its SQL holds none of the values' bytes beyond
//     what the statement text itself had;
//   * glob_to_like(g) as a LIKE pattern matches an id exactly when the glob
//     does (`*` any run, `?` one byte here; every other byte literal).
#include "fuzz_common.hpp"

#include <chstate/detail/sql.hpp>

#include <optional>

namespace {

using chstate::detail::quote_identifier;
using chstate::detail::quote_string;

/// What a backslash escape `\c` stands for in a ClickHouse quoted string or
/// identifier: the named escapes, and otherwise the character itself.
/// (ClickHouse keeps the backslash for an unknown escape of a printable
/// character other than \ ' " ` / = — e.g. '\%' stays two bytes — which the
/// quoting under test never writes; treated as an error here so a change
/// that starts writing one is noticed.)
std::optional<std::string> escape_value(char c) {
    switch (c) {
    case 'b': return std::string(1, '\b');
    case 'f': return std::string(1, '\f');
    case 'r': return std::string(1, '\r');
    case 'n': return std::string(1, '\n');
    case 't': return std::string(1, '\t');
    case '0': return std::string(1, '\0');
    case 'a': return std::string(1, '\a');
    case 'v': return std::string(1, '\v');
    case 'e': return std::string(1, '\x1b');
    case '\\': case '\'': case '"': case '`': case '/': case '=': return std::string(1, c);
    default: return std::nullopt;
    }
}

/// Reads one quoted token (quote character q) at `pos`; advances pos past it.
std::optional<std::string> read_quoted(std::string_view s, std::size_t& pos, char q) {
    if (pos >= s.size() || s[pos] != q)
        return std::nullopt;
    std::string out;
    for (std::size_t i = pos + 1; i < s.size(); ++i) {
        const char c = s[i];
        if (c == q) {
            if (i + 1 < s.size() && s[i + 1] == q) { // doubled quote
                out += q;
                ++i;
                continue;
            }
            pos = i + 1;
            return out;
        }
        if (c == '\\') {
            if (i + 1 == s.size())
                return std::nullopt;
            const char e = s[++i];
            if (e == 'x') {
                auto hexval = [](char h) {
                    return h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                                      : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                };
                if (i + 2 >= s.size() || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0)
                    return std::nullopt;
                out += static_cast<char>(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
                i += 2;
                continue;
            }
            auto v = escape_value(e);
            if (!v)
                return std::nullopt;
            out += *v;
            continue;
        }
        out += c;
    }
    return std::nullopt; // unterminated
}

/// One TabSeparated field as ClickHouse reads it: \N alone is NULL; escapes
/// as in string literals (the quote needs none).
std::optional<std::optional<std::string>> read_tsv_field(std::string_view f) {
    if (f == "\\N")
        return std::optional<std::string>();
    std::string out;
    for (std::size_t i = 0; i < f.size(); ++i) {
        if (f[i] == '\t' || f[i] == '\n')
            return std::nullopt;
        if (f[i] != '\\') {
            out += f[i];
            continue;
        }
        if (i + 1 == f.size())
            return std::nullopt;
        auto v = escape_value(f[++i]);
        if (!v)
            return std::nullopt;
        out += *v;
    }
    return std::optional<std::string>(std::move(out));
}

/// The string literals in a statement, in order (outside literals, the text
/// is the statement's own, which holds no quote).
std::optional<std::vector<std::string>> literals_of(std::string_view sql) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos < sql.size()) {
        if (sql[pos] == '\'') {
            auto lit = read_quoted(sql, pos, '\'');
            if (!lit)
                return std::nullopt;
            out.push_back(std::move(*lit));
        } else {
            ++pos;
        }
    }
    return out;
}

/// Glob matching over bytes: `*` any run, `?` one byte.
bool glob_match(std::string_view g, std::string_view s) {
    // Iterative with single backtrack point (standard wildcard algorithm).
    std::size_t gi = 0, si = 0, star = std::string_view::npos, mark = 0;
    while (si < s.size()) {
        if (gi < g.size() && (g[gi] == '?' || (g[gi] != '*' && g[gi] == s[si]))) {
            ++gi;
            ++si;
        } else if (gi < g.size() && g[gi] == '*') {
            star = gi++;
            mark = si;
        } else if (star != std::string_view::npos) {
            gi = star + 1;
            si = ++mark;
        } else {
            return false;
        }
    }
    while (gi < g.size() && g[gi] == '*')
        ++gi;
    return gi == g.size();
}

/// SQL LIKE over bytes: `%` any run, `_` one byte, `\x` the byte x.
bool like_match(std::string_view p, std::string_view s) {
    // Tokenise the pattern: (kind, byte); kind 0 literal, 1 one, 2 any.
    std::vector<std::pair<int, char>> t;
    for (std::size_t i = 0; i < p.size(); ++i) {
        if (p[i] == '\\' && i + 1 < p.size())
            t.push_back({0, p[++i]});
        else if (p[i] == '%')
            t.push_back({2, 0});
        else if (p[i] == '_')
            t.push_back({1, 0});
        else
            t.push_back({0, p[i]});
    }
    std::size_t ti = 0, si = 0, star = std::string::npos, mark = 0;
    while (si < s.size()) {
        if (ti < t.size() && (t[ti].first == 1 || (t[ti].first == 0 && t[ti].second == s[si]))) {
            ++ti;
            ++si;
        } else if (ti < t.size() && t[ti].first == 2) {
            star = ti++;
            mark = si;
        } else if (star != std::string::npos) {
            ti = star + 1;
            si = ++mark;
        } else {
            return false;
        }
    }
    while (ti < t.size() && t[ti].first == 2)
        ++ti;
    return ti == t.size();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto values = fuzz::split(input, std::string_view("\xff|"));

    for (std::string_view v : values) {
        // String literal.
        const std::string lit = quote_string(v);
        std::size_t pos = 0;
        auto back = read_quoted(lit, pos, '\'');
        FUZZ_CHECK(back && pos == lit.size() && *back == v,
                   "quote_string " + fuzz::show(v) + " -> " + fuzz::show(lit));
        // Identifier.
        const std::string id = quote_identifier(v);
        pos = 0;
        back = read_quoted(id, pos, '`');
        FUZZ_CHECK(back && pos == id.size() && *back == v,
                   "quote_identifier " + fuzz::show(v) + " -> " + fuzz::show(id));
        // TSV.
        std::string field;
        chstate::detail::append_tsv_field(field, std::string(v));
        auto tsv = read_tsv_field(field);
        FUZZ_CHECK(tsv && *tsv && **tsv == v, "append_tsv_field " + fuzz::show(v) + " -> " + fuzz::show(field));
        FUZZ_CHECK(chstate::detail::escape_parameter_value(std::optional<std::string>(std::string(v))) == field,
                   fuzz::show(v));
    }
    std::string null_field;
    chstate::detail::append_tsv_field(null_field, std::nullopt);
    FUZZ_CHECK(null_field == "\\N", null_field);

    // inline_parameters: every value as a literal, in order.
    chstate::statement stmt;
    stmt.sql = "SELECT 1 FROM t WHERE ";
    for (std::size_t i = 0; i < values.size(); ++i) {
        const std::string name = "p" + std::to_string(i);
        stmt.sql += (i ? " AND c = {" : "c = {") + name + ":String}";
        stmt.parameters.push_back({name, "String", std::string(values[i])});
    }
    chstate::statement bound_stmt = stmt;
    chstate::diagnostics diag;
    auto ec = chstate::detail::inline_parameters(bound_stmt, diag);
    FUZZ_CHECK(!ec, diag.message);
    FUZZ_CHECK(bound_stmt.parameters.empty(), "parameters left");
    auto lits = literals_of(bound_stmt.sql);
    FUZZ_CHECK(lits && lits->size() == values.size(), "inline_parameters: " + fuzz::show(bound_stmt.sql));
    for (std::size_t i = 0; i < values.size(); ++i)
        FUZZ_CHECK((*lits)[i] == values[i], "literal " + std::to_string(i) + " of " + fuzz::show(bound_stmt.sql));

    // bind_parameters_as_table: one TSV row of the values.
    chstate::detail::parameter_table table;
    ec = chstate::detail::bind_parameters_as_table(stmt, "_chstate_values", table, diag);
    FUZZ_CHECK(!ec, diag.message);
    FUZZ_CHECK(!table.row.empty() && table.row.back() == '\n' &&
                   table.row.find('\n') == table.row.size() - 1,
               "row is not one line: " + fuzz::show(table.row));
    const auto fields = fuzz::split(std::string_view(table.row).substr(0, table.row.size() - 1), '\t');
    FUZZ_CHECK(fields.size() == values.size(), "fields " + std::to_string(fields.size()));
    for (std::size_t i = 0; i < values.size(); ++i) {
        auto f = read_tsv_field(fields[i]);
        FUZZ_CHECK(f && *f && **f == values[i], "field " + std::to_string(i) + " " + fuzz::show(fields[i]));
    }
    FUZZ_CHECK(table.sql.find('\'') == std::string::npos && table.sql.find('{') == std::string::npos,
               "values or placeholders in the SQL: " + fuzz::show(table.sql));

    // glob_to_like agrees with glob matching (ids: the other values).
    const std::string like = chstate::detail::glob_to_like(values[0]);
    for (std::size_t i = 1; i < values.size(); ++i)
        FUZZ_CHECK(like_match(like, values[i]) == glob_match(values[0], values[i]),
                   "glob " + fuzz::show(values[0]) + " like " + fuzz::show(like) + " id " + fuzz::show(values[i]));
    return 0;
}
