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
//   * glob_match(g, id) (detail/glob.hpp) agrees with a memoised recursive
//     matcher written here over both strings read as characters — a
//     well-formed UTF-8 sequence (RFC 3629: no overlong form, no surrogate,
//     at most U+10FFFF) or else one byte: `*` any run of characters, `?`
//     one character, every other character only itself; and a match always
//     starts with glob_literal_prefix(g).
#include "fuzz_common.hpp"

#include <chstate/detail/glob.hpp>
#include <chstate/detail/sql.hpp>

#include <functional>
#include <optional>
#include <vector>

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

/// The byte length of the character at s[i], from RFC 3629's table of
/// well-formed sequences; 1 for a byte that starts none.
std::size_t utf8_length(std::string_view s, std::size_t i) {
    auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0x100u; };
    auto in = [](unsigned v, unsigned lo, unsigned hi) { return v >= lo && v <= hi; };
    const unsigned b0 = at(0), b1 = at(1), b2 = at(2), b3 = at(3);
    if (b0 <= 0x7F)
        return 1;
    if (in(b0, 0xC2, 0xDF) && in(b1, 0x80, 0xBF))
        return 2;
    if (b0 == 0xE0 && in(b1, 0xA0, 0xBF) && in(b2, 0x80, 0xBF))
        return 3;
    if ((in(b0, 0xE1, 0xEC) || in(b0, 0xEE, 0xEF)) && in(b1, 0x80, 0xBF) && in(b2, 0x80, 0xBF))
        return 3;
    if (b0 == 0xED && in(b1, 0x80, 0x9F) && in(b2, 0x80, 0xBF))
        return 3;
    if (b0 == 0xF0 && in(b1, 0x90, 0xBF) && in(b2, 0x80, 0xBF) && in(b3, 0x80, 0xBF))
        return 4;
    if (in(b0, 0xF1, 0xF3) && in(b1, 0x80, 0xBF) && in(b2, 0x80, 0xBF) && in(b3, 0x80, 0xBF))
        return 4;
    if (b0 == 0xF4 && in(b1, 0x80, 0x8F) && in(b2, 0x80, 0xBF) && in(b3, 0x80, 0xBF))
        return 4;
    return 1;
}

/// A string's characters, each a well-formed sequence or one byte.
std::vector<std::string_view> characters(std::string_view s) {
    std::vector<std::string_view> out;
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = utf8_length(s, i);
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

/// Glob matching by the definition, memoised over (glob character, id character).
bool glob_reference(std::string_view glob, std::string_view id) {
    if (glob.empty() || glob == "*")
        return true;
    const auto g = characters(glob), s = characters(id);
    std::vector<signed char> memo((g.size() + 1) * (s.size() + 1), -1);
    std::function<bool(std::size_t, std::size_t)> m = [&](std::size_t gi, std::size_t si) -> bool {
        signed char& slot = memo[gi * (s.size() + 1) + si];
        if (slot >= 0)
            return slot;
        bool r;
        if (gi == g.size())
            r = si == s.size();
        else if (g[gi] == "*")
            r = m(gi + 1, si) || (si < s.size() && m(gi, si + 1)); // the empty run, or one more character
        else if (si == s.size())
            r = false;
        else if (g[gi] == "?")
            r = m(gi + 1, si + 1);
        else
            r = g[gi] == s[si] && m(gi + 1, si + 1);
        slot = r;
        return r;
    };
    return m(0, 0);
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

    // glob_match agrees with the reference (ids: the other values, kept
    // short so the memo stays small); every match starts with the prefix.
    for (std::size_t i = 1; i < values.size(); ++i) {
        if (values[0].size() * values[i].size() > 1'000'000)
            continue;
        const bool got = chstate::detail::glob_match(values[0], values[i]);
        FUZZ_CHECK(got == glob_reference(values[0], values[i]),
                   "glob " + fuzz::show(values[0]) + " id " + fuzz::show(values[i]) + " glob_match " +
                       (got ? "true" : "false"));
        FUZZ_CHECK(!got || values[i].starts_with(chstate::detail::glob_literal_prefix(values[0])),
                   "a match without the literal prefix: " + fuzz::show(values[0]));
    }
    return 0;
}
