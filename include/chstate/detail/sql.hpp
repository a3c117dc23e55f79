// chstate/detail/sql.hpp — the quoting rules that keep values out of SQL
// text: identifiers, string literals, parameter values, TSV fields.
//
// Values travel as {name:Type} parameters (the statements themselves are
// built in detail/statements.hpp). For a server without query parameters
// (before 20.1: detail/dialect.hpp's server_features), and over HTTP for
// values of at most inline_parameter_limit bytes, inline_parameters()
// (detail/dialect.hpp) turns them into literals quoted here, the only
// place a value is ever written into SQL text.
#pragma once

#include <chstate/error.hpp>
#include <chstate/transport.hpp>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail {

/// `name` as a back-quoted identifier.
inline std::string quote_identifier(std::string_view name) {
    std::string out;
    out.reserve(name.size() + 2);
    out += '`';
    for (char c : name) {
        if (c == '`' || c == '\\')
            out += '\\';
        out += c;
    }
    out += '`';
    return out;
}

/// Escapes shared by string literals and TSV: backslash and control characters.
inline void append_escaped(std::string& out, std::string_view v, char quote) {
    for (char c : v) {
        switch (c) {
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        case '\0': out += "\\0"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
            if (c == quote)
                out += '\\';
            out += c;
        }
    }
}

/// The character an escape `\e` written by append_escaped stands for (its
/// inverse; any other escaped character stands for itself).
constexpr char unescaped(char e) noexcept {
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case '0': return '\0';
    case 'b': return '\b';
    case 'f': return '\f';
    default: return e;
    }
}

/// `v` as a single-quoted ClickHouse string literal.
inline std::string quote_string(std::string_view v) {
    std::string out;
    out.reserve(v.size() + 2);
    out += '\'';
    append_escaped(out, v, '\'');
    out += '\'';
    return out;
}

/// A parameter value in the escaped (TSV) text form the engine parses
/// `param_<name>` values in (ClickHouse ≥ 20.1, chDB): backslash doubled,
/// control characters escaped, NULL written as \N.
inline std::string escape_parameter_value(const std::optional<std::string>& v) {
    if (!v)
        return "\\N";
    std::string out;
    out.reserve(v->size());
    append_escaped(out, *v, '\0' /* no quote character in TSV */);
    return out;
}

/// The same for a typed parameter. An array's value is its text form
/// (`['a','b\'c']`, built with quote_string), which the engine parses as
/// it stands — in a TSV field too: quoting already escapes every tab,
/// newline and backslash, and escaping it again would change the elements.
inline std::string escape_parameter_value(const parameter& p) {
    if (p.value && p.type.starts_with("Array("))
        return *p.value;
    return escape_parameter_value(p.value);
}

/// One TabSeparated field: the bytes escaped so that the engine reads
/// back exactly `v`; nullopt is NULL (\N).
inline void append_tsv_field(std::string& out, const std::optional<std::string>& v) {
    if (!v)
        out += "\\N";
    else
        append_escaped(out, *v, '\0');
}

/// Walks `sql`: on_text(run) for text between placeholders, and
/// on_placeholder(name) for each {name:Type}, which must be bound in
/// `params`. The one place placeholders are recognised.
template <class OnText, class OnPlaceholder>
error_code for_each_placeholder(std::string_view sql, const std::vector<parameter>& params, OnText on_text,
                                OnPlaceholder on_placeholder, diagnostics& diag) {
    std::size_t pos = 0;
    while (pos < sql.size()) {
        std::size_t open = sql.find('{', pos);
        if (open == std::string_view::npos) {
            on_text(sql.substr(pos));
            break;
        }
        on_text(sql.substr(pos, open - pos));
        std::size_t close = sql.find('}', open);
        std::size_t colon = sql.find(':', open);
        if (close == std::string_view::npos || colon == std::string_view::npos || colon > close) {
            diag.message = "malformed placeholder in statement";
            return make_error_code(errc::invalid_argument);
        }
        std::string_view name = sql.substr(open + 1, colon - open - 1);
        const parameter* bound = nullptr;
        for (const auto& candidate : params)
            if (candidate.name == name)
                bound = &candidate;
        if (!bound) {
            diag.message = "no value bound for placeholder " + std::string(name);
            return make_error_code(errc::invalid_argument);
        }
        if (auto ec = on_placeholder(*bound))
            return ec;
        pos = close + 1;
    }
    return {};
}

/// Replaces each {name:Type} placeholder in stmt.sql by the quoted literal of
/// its value, for servers without query parameters. Numbers are validated,
/// strings quoted; an unknown placeholder is an error.
inline error_code inline_parameters(statement& stmt, diagnostics& diag) {
    std::string out;
    out.reserve(stmt.sql.size() + 64);
    auto literal = [&](const parameter& p) -> error_code {
        if (!p.value) {
            out += "NULL";
        } else if (p.type.starts_with("Array(")) {
            out += *p.value; // built by the store from quoted literals
        } else if (p.type.starts_with("UInt") || p.type.starts_with("Int")) {
            std::int64_t n = 0;
            auto [end, ec] = std::from_chars(p.value->data(), p.value->data() + p.value->size(), n);
            if (ec != std::errc{} || end != p.value->data() + p.value->size()) {
                diag.message = "parameter " + p.name + " is not an integer";
                return make_error_code(errc::invalid_argument);
            }
            out += *p.value;
        } else {
            out += quote_string(*p.value);
        }
        return {};
    };
    if (auto ec = for_each_placeholder(stmt.sql, stmt.parameters, [&](std::string_view run) { out.append(run); },
                                       literal, diag))
        return ec;
    stmt.sql = std::move(out);
    stmt.parameters.clear();
    return {};
}

/// Bytes of all a statement's parameter values.
inline std::size_t parameter_bytes(const statement& stmt) {
    std::size_t n = 0;
    for (const auto& p : stmt.parameters)
        n += p.value ? p.value->size() : 0;
    return n;
}

/// Parameter values up to this many bytes in all are sent as quoted
/// literals in the statement's text (transport/http.hpp); larger ones as
/// an external table, so no value meets max_query_size (256 KiB).
inline constexpr std::size_t inline_parameter_limit = 16 * 1024;

/// A statement's parameters as one external table, for a transport that
/// sends them in the request body (transport/http.hpp): every {name:Type}
/// placeholder becomes the scalar subquery `(SELECT name FROM <table>)`,
/// and the values one TabSeparated row of a table of that structure. The
/// SQL text then holds no value at all, so no value meets a limit on the
/// query's or the URL's size.
struct parameter_table {
    std::string sql;       ///< the statement, placeholders replaced
    std::string structure; ///< "name Type, …", as the server wants it
    std::string row;       ///< one TabSeparated row, '\n'-terminated
};

/// A one-row `INSERT … VALUES (…)` as `INSERT … SELECT …` (the same row:
/// placeholders and expressions only); nullopt for any other text.
inline std::optional<std::string> values_as_select(std::string_view sql) {
    if (!sql.starts_with("INSERT ") || !sql.ends_with(")"))
        return std::nullopt;
    const auto at = sql.rfind(" VALUES (");
    if (at == std::string_view::npos)
        return std::nullopt;
    return std::string(sql.substr(0, at)) + " SELECT " + std::string(sql.substr(at + 9, sql.size() - at - 10));
}

/// A one-row `INSERT … VALUES (…)` becomes `INSERT … SELECT …`: VALUES
/// takes no subqueries.
inline error_code bind_parameters_as_table(const statement& stmt, std::string_view table, parameter_table& out,
                                           diagnostics& diag) {
    out = {};
    std::string_view sql = stmt.sql;
    const auto as_select = values_as_select(sql);
    if (as_select)
        sql = *as_select;
    auto subquery = [&](const parameter& p) -> error_code {
        out.sql += "(SELECT ";
        out.sql += p.name;
        out.sql += " FROM ";
        out.sql += table;
        out.sql += ')';
        return {};
    };
    if (auto ec = for_each_placeholder(sql, stmt.parameters, [&](std::string_view run) { out.sql.append(run); },
                                       subquery, diag))
        return ec;
    for (std::size_t i = 0; i < stmt.parameters.size(); ++i) {
        const parameter& p = stmt.parameters[i];
        if (i) {
            out.structure += ", ";
            out.row += '\t';
        }
        out.structure += p.name + " " + p.type;
        out.row += escape_parameter_value(p);
    }
    out.row += '\n';
    return {};
}

/// The name of the parameter that carries an INSERT's rows on the embedded
/// engine (sql_without_inline_data).
inline constexpr std::string_view inline_rows_parameter = "chstate_rows";

/// The statement with no data after its text, for chDB. chDB runs SQL through
/// ClickHouse's client code, which treats the host process's standard input
/// as more rows for an INSERT that carries its data inline (`VALUES …`, or
/// `FORMAT …` followed by rows): with async_insert on (chDB 26.5's default)
/// such an INSERT fails with code 48 whenever standard input has data, and
/// with it off the INSERT reads standard input as rows — a host program's
/// own input taken as state. An INSERT … SELECT never reads it. So:
///  - one-row `INSERT … VALUES (…)` becomes `INSERT … SELECT …`;
///  - `INSERT INTO t (c, …) FORMAT TabSeparated` with rows becomes
///    `INSERT INTO t (c, …) SELECT * FROM format(TabSeparated,
///    'c Nullable(String), …', {chstate_rows:String})`: each field read
///    as text, then cast to its column as an INSERT … SELECT casts
///    (\N stays NULL);
///  - anything else with data is refused (errc::unsupported) rather than
///    run with the host's standard input as part of it.
/// `sql` is the text to run; when `stmt.data` is not empty, the caller binds
/// it as the String parameter inline_rows_parameter (the statement itself is
/// not copied: its values can be megabytes).
inline error_code sql_without_inline_data(const statement& stmt, std::string& sql_out, diagnostics& diag) {
    if (!stmt.data.empty()) {
        constexpr std::string_view tail = ") FORMAT TabSeparated";
        const std::string_view sql = stmt.sql;
        const auto open = sql.find(" (");
        if (!sql.starts_with("INSERT INTO ") || !sql.ends_with(tail) || open == std::string_view::npos) {
            diag.message = "the embedded engine cannot take an INSERT's rows after its text (it would read this "
                           "process's standard input as more rows): only INSERT INTO t (columns) FORMAT "
                           "TabSeparated is rewritten; statement " + stmt.name;
            return make_error_code(errc::unsupported);
        }
        const std::string_view columns = sql.substr(open + 2, sql.size() - tail.size() - open - 2);
        std::string structure;
        for (std::size_t from = 0; from <= columns.size();) {
            auto comma = columns.find(',', from);
            if (comma == std::string_view::npos)
                comma = columns.size();
            std::string_view name = columns.substr(from, comma - from);
            while (!name.empty() && name.front() == ' ')
                name.remove_prefix(1);
            while (!name.empty() && name.back() == ' ')
                name.remove_suffix(1);
            if (!structure.empty())
                structure += ", ";
            structure += std::string(name) + " Nullable(String)";
            from = comma + 1;
        }
        sql_out = std::string(sql.substr(0, sql.size() - std::string_view(" FORMAT TabSeparated").size())) +
                  " SELECT * FROM format(TabSeparated, " + quote_string(structure) + ", {" +
                  std::string(inline_rows_parameter) + ":String})";
        return {};
    }
    auto as_select = values_as_select(stmt.sql);
    sql_out = as_select ? std::move(*as_select) : stmt.sql;
    return {};
}

} // namespace chstate::detail
