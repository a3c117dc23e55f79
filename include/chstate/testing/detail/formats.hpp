// chstate/testing/detail/formats.hpp — the bytes of replies and of
// INSERT data: TabSeparated (the default), JSONEachRow (UInt64 results
// quoted, as ClickHouse writes them by default) and RowBinary out;
// TabSeparated in. A large reply is cut into chunks of max_block_size rows,
// as the server streams it.
#pragma once

#include <chstate/detail/sql.hpp>
#include <chstate/testing/detail/cell.hpp>

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail::sim {

/// A result column: its name and the column type it came from (empty for
/// an expression), which decides how times are written.
struct result_column {
    std::string name;
    std::string type;
};

inline std::string text_of(const value& v, const std::string& type) {
    if (v.kind == value::text)
        return v.s;
    if (type == "DateTime")
        return format_time(v.n, false);
    if (type.starts_with("DateTime64"))
        return format_time(v.n, true);
    return std::to_string(v.n);
}

/// RowBinary: Nullable columns get a flag byte; text is a LEB128 length and
/// the bytes; numbers (times in milliseconds, as a DateTime64(3)) eight
/// bytes little-endian.
inline void append_row_binary(std::string& out, const value& v, const std::string& type) {
    if (type.starts_with("Nullable")) {
        out += v.kind == value::null ? '\1' : '\0';
        if (v.kind == value::null)
            return;
    }
    if (v.kind == value::number) {
        auto n = static_cast<std::uint64_t>(v.n);
        for (int b = 0; b < 8; ++b)
            out += static_cast<char>((n >> (8 * b)) & 0xff);
        return;
    }
    std::size_t len = v.s.size();
    do {
        unsigned char byte = len & 0x7f;
        len >>= 7;
        out += static_cast<char>(len ? byte | 0x80 : byte);
    } while (len);
    out += v.s;
}

inline void append_json(std::string& out, const value& v, const std::string& type) {
    if (v.kind == value::null)
        out += "null";
    else if (v.kind == value::number && !v.quoted64 && type.find("DateTime") == std::string::npos)
        out += std::to_string(v.n);
    else
        out += boost::json::serialize(boost::json::string(text_of(v, type)));
}

inline void append_tsv(std::string& out, const value& v, const std::string& type) {
    if (v.kind == value::null) {
        out += "\\N";
        return;
    }
    for (char c : text_of(v, type)) {
        switch (c) {
        case '\\': out += "\\\\"; break;
        case '\t': out += "\\t"; break;
        case '\n': out += "\\n"; break;
        default: out += c;
        }
    }
}

/// The reply to a SELECT: `rows` in `format` (TabSeparated, JSONEachRow
/// or RowBinary, checked by the caller), `block` rows per chunk.
inline std::vector<std::string> encode_rows(const std::vector<result_column>& columns,
                                            const std::vector<std::vector<value>>& rows, const std::string& format,
                                            std::size_t block) {
    std::vector<std::string> out;
    std::string chunk;
    std::size_t in_chunk = 0;
    for (const auto& r : rows) {
        for (std::size_t k = 0; k < r.size(); ++k) {
            const auto& type = columns[k].type;
            if (format == "RowBinary") {
                append_row_binary(chunk, r[k], type);
            } else if (format == "JSONEachRow") {
                chunk += k ? "," : "{";
                chunk += boost::json::serialize(boost::json::string(columns[k].name));
                chunk += ':';
                append_json(chunk, r[k], type);
            } else {
                if (k)
                    chunk += '\t';
                append_tsv(chunk, r[k], type);
            }
        }
        if (format == "JSONEachRow")
            chunk += r.empty() ? "{}\n" : "}\n";
        else if (format != "RowBinary")
            chunk += '\n';
        if (++in_chunk == block) {
            out.push_back(std::move(chunk));
            chunk.clear();
            in_chunk = 0;
        }
    }
    if (!chunk.empty())
        out.push_back(std::move(chunk));
    return out;
}

/// INSERT … FORMAT TabSeparated's rows: `\N` is NULL, escapes as ClickHouse
/// reads them; every row has `columns` fields (else 117).
inline std::vector<std::vector<value>> read_tab_separated(std::string_view data, std::size_t columns) {
    std::vector<std::vector<value>> rows;
    while (!data.empty()) {
        const auto nl = data.find('\n');
        const std::string_view line = data.substr(0, nl);
        data.remove_prefix(nl == std::string_view::npos ? data.size() : nl + 1);
        std::vector<value> r;
        for (std::size_t start = 0;;) {
            const auto tab = line.find('\t', start);
            const std::string_view field = line.substr(start, tab == std::string_view::npos ? tab : tab - start);
            if (field == "\\N") {
                r.push_back(value::of_null());
            } else {
                std::string text;
                for (std::size_t k = 0; k < field.size(); ++k)
                    text += field[k] != '\\' || k + 1 == field.size() ? field[k] : unescaped(field[++k]);
                r.push_back(value::of_text(std::move(text)));
            }
            if (tab == std::string_view::npos)
                break;
            start = tab + 1;
        }
        if (r.size() != columns)
            throw sim_error{117, "Cannot parse TabSeparated input: expected " + std::to_string(columns) +
                                     " fields in: " + std::string(line.substr(0, 100))};
        rows.push_back(std::move(r));
    }
    return rows;
}

} // namespace chstate::detail::sim
