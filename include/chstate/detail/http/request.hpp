// chstate/detail/http/request.hpp — what http_transport sends for one
// statement, as text: the URL target (`database`, `default_format`,
// `wait_end_of_query`, statement settings, `query`), the body (the
// statement, INSERT data, or the multipart form carrying the values' external
// table) and its content type, chosen as transport/http.hpp's header
// comment describes; and the check that options can travel at all. Pure:
// no I/O, no Boost.Beast.
#pragma once

#include <chstate/detail/config/checks.hpp>
#include <chstate/detail/sql.hpp>
#include <chstate/error.hpp>
#include <chstate/transport.hpp>
#include <chstate/transport/http_options.hpp>

#include <algorithm>
#include <string>
#include <string_view>

namespace chstate::detail {

/// Percent-encodes everything but RFC 3986 unreserved characters (so '+'
/// is never read as a space by the server's form decoder).
inline void append_url_encoded(std::string& out, std::string_view v) {
    static constexpr char hex[] = "0123456789ABCDEF";
    for (unsigned char c : v) {
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
            c == '.' || c == '_' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
}

/// The external table that carries a statement's values.
inline constexpr std::string_view http_values_table = "_chstate_values";

/// The request for one statement: the URL target, the body and its
/// content type (transport/http.hpp's header comment).
struct request_parts {
    std::string target;
    std::string body;
    std::string content_type = "text/plain; charset=UTF-8";
    /// wait_end_of_query=1 was sent: the status is final, and a body
    /// under status 200 is data only (never searched for an exception).
    bool buffered = false;
};

/// Builds the request for `stmt` under options `o`. errc::invalid_argument
/// (nothing to send) for a statement setting the transport sets itself or
/// whose name or value cannot travel, and for a statement with both
/// parameters and INSERT data; inline_parameters' and
/// bind_parameters_as_table's errors as they give them.
inline error_code build_request(const http_options& o, const statement& stmt, request_parts& out,
                                diagnostics& diag) {
    std::string t = "/?";
    auto add = [&](std::string_view name, std::string_view value) {
        if (t.size() > 2)
            t += '&';
        append_url_encoded(t, name);
        t += '=';
        append_url_encoded(t, value);
    };
    if (!o.database.empty())
        add("database", o.database);
    if (!stmt.format.empty())
        add("default_format", stmt.format);
    // RowBinary replies carry ids and state text as raw bytes, which may
    // hold anything — text that looks like an exception included — and
    // an old server appends an exception right after the last row: the
    // server buffers such a reply, so its status is final.
    out.buffered = o.wait_end_of_query || stmt.format == "RowBinary";
    if (out.buffered)
        add("wait_end_of_query", "1");
    for (const auto& st : stmt.settings) {
        // A name the transport sets itself, or one that is not a plain
        // setting name, could change what the request means.
        const bool plain = !st.name.empty() && std::all_of(st.name.begin(), st.name.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        });
        if (!plain || st.name == "database" || st.name == "default_format" || st.name == "query" ||
            st.name == "wait_end_of_query" || st.name.starts_with(http_values_table) || st.name == "user" ||
            st.name == "password") {
            diag.message = plain ? "statement setting " + st.name + " is one the HTTP transport sets itself"
                                 : std::string("a statement setting's name is not lower-case letters, digits "
                                               "and '_'");
            return make_error_code(errc::invalid_argument);
        }
        if (detail::find_control_character(st.value) != std::string_view::npos) {
            diag.message = "statement setting " + st.name + " has a control character in its value";
            return make_error_code(errc::invalid_argument);
        }
        add(st.name, st.value);
    }
    if (stmt.parameters.empty() && stmt.data.empty()) {
        out.body = stmt.sql; // no value in it, but any length: the body, not the URL
    } else if (stmt.data.empty() && detail::parameter_bytes(stmt) <= detail::inline_parameter_limit) {
        statement inlined = stmt; // small values: quoted literals in the body's SQL, as any client sends them
        if (auto ec = detail::inline_parameters(inlined, diag))
            return ec;
        out.body = std::move(inlined.sql);
    } else if (stmt.parameters.empty()) {
        add("query", stmt.sql);
        out.body = stmt.data;
    } else {
        if (!stmt.data.empty()) {
            diag.message = "a statement cannot carry both parameters and INSERT data over HTTP";
            return make_error_code(errc::invalid_argument);
        }
        detail::parameter_table bound;
        if (auto ec = detail::bind_parameters_as_table(stmt, http_values_table, bound, diag))
            return ec;
        add("query", bound.sql);
        add(std::string(http_values_table) + "_structure", bound.structure);
        add(std::string(http_values_table) + "_format", "TabSeparated");
        // A boundary that the values do not contain.
        std::string boundary = "chstate-values-boundary";
        for (unsigned n = 0; bound.row.find(boundary) != std::string::npos; ++n)
            boundary = "chstate-values-boundary-" + std::to_string(n);
        out.content_type = "multipart/form-data; boundary=" + boundary;
        out.body.reserve(bound.row.size() + 256);
        out.body += "--" + boundary + "\r\n";
        out.body += "Content-Disposition: form-data; name=\"" + std::string(http_values_table) + "\"; filename=\"" +
                    std::string(http_values_table) + "\"\r\n";
        out.body += "Content-Type: application/octet-stream\r\n\r\n";
        out.body += bound.row;
        out.body += "\r\n--" + boundary + "--\r\n";
    }
    out.target = std::move(t);
    return {};
}

/// Refuses options whose values cannot travel: the host, user and password
/// become header values (Host, X-ClickHouse-User, X-ClickHouse-Key), where a
/// CR or LF would inject headers and more than max_http_header_value bytes
/// cannot be carried, and no database name has a use for a
/// control character (it travels percent-encoded in any case).
/// errc::invalid_configuration naming the option, never showing the user's or
/// password's value.
inline error_code validate_http_options(const http_options& o, diagnostics& diag) {
    if (auto ec = check_no_control_characters("http_options.host", o.host, false, diag))
        return ec;
    if (auto ec = check_header_value_length("http_options.host", host_port(o.host, o.port).size(), diag))
        return ec;
    if (auto ec = check_no_control_characters("http_options.user", o.user, false, diag))
        return ec;
    if (auto ec = check_header_value_length("http_options.user", o.user.size(), diag))
        return ec;
    if (auto ec = check_no_control_characters("http_options.password", o.password, true, diag))
        return ec;
    if (auto ec = check_header_value_length("http_options.password", o.password.size(), diag))
        return ec;
    if (auto ec = check_no_control_characters("http_options.database", o.database, false, diag))
        return ec;
    if (auto ec = check_no_control_characters("http_options.ca_file", o.ca_file, false, diag))
        return ec;
    if (o.host.empty() || o.port == 0) {
        diag.message = o.host.empty() ? "http_options.host is empty" : "http_options.port is 0 (expected 1–65535)";
        return make_error_code(errc::invalid_configuration);
    }
    if (auto ec = check_endpoint_count("http_options.endpoints", o.endpoints.size(), diag))
        return ec;
    for (std::size_t i = 1; i < o.endpoints.size(); ++i) {
        const std::string name = "http_options.endpoints[" + std::to_string(i) + "]";
        if (auto ec = check_no_control_characters(name + ".host", o.endpoints[i].host, false, diag))
            return ec;
        if (auto ec = check_header_value_length(name + ".host",
                                                host_port(o.endpoints[i].host, o.endpoints[i].port).size(), diag))
            return ec;
        if (o.endpoints[i].host.empty() || o.endpoints[i].port == 0) {
            diag.message = o.endpoints[i].host.empty() ? name + ".host is empty"
                                                       : name + ".port is 0 (expected 1–65535)";
            return make_error_code(errc::invalid_configuration);
        }
    }
    return {};
}

} // namespace chstate::detail
