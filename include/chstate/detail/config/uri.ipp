// chstate/detail/config/uri.ipp — config::from_uri: clickhouse://, http(s)://
// and chdb: URIs on Boost.URL (config.hpp says what each accepts and
// refuses), and the endpoint list and redacted URI. Included by config.hpp
// when header-only, by <chstate/src.hpp> under CHSTATE_SEPARATE_COMPILATION.
#pragma once

#include <chstate/config.hpp>
#include <chstate/detail/config/checks.hpp>
#include <chstate/detail/config/endpoints.hpp>
#include <chstate/detail/config/parse.hpp>

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace chstate {

namespace detail::config_text {

/// One URI naming one host (from_uri splits a list of hosts first).
CHSTATE_DECL config from_single_uri(std::string_view uri, error_code& ec, diagnostics& diag) {
    using engine_kind = config::engine_kind;
    ec = {};
    config c;
    auto fail = [&](std::string msg) {
        ec = make_error_code(errc::invalid_configuration);
        diag.message = std::move(msg);
        return c;
    };
    auto parsed = boost::urls::parse_uri(uri);
    if (!parsed)
        return fail("not a valid URI (expected clickhouse://user:password@host:port/database or chdb:///path)");
    boost::urls::url_view u = *parsed;
    std::string scheme(u.scheme());
    // A '#' ends what any setting reads: the rest would be dropped unseen.
    // (Its text is not shown: it may be a password's tail.)
    if (u.has_fragment() && uri.substr(authority_end(uri)).find('@') == std::string_view::npos)
        return fail("the URI has a '#' fragment, which no setting reads: percent-encode '#' (%23) where it is part "
                    "of a value");
    std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (scheme == "chdb") {
        c.engine = engine_kind::embedded;
        // chdb://dir/sub has an authority ("dir") and the path "/sub": taken
        // as it parses, it would silently mean the folder /sub. Guessing
        // "relative dir/sub" would make chdb://x/y and chdb:///x/y differ by
        // one slash only, so it is refused, saying what to write instead.
        if (!u.encoded_authority().empty()) {
            std::string relative = "chdb:relative/dir";
            if (!u.has_userinfo() && !u.has_port())
                relative = "chdb:" + printable(std::string(u.host()) + std::string(u.path()), 200);
            return fail("chdb URI has a host part, which is not a folder: write " + relative +
                        " for a folder relative to the working directory, or chdb:///absolute/dir for an "
                        "absolute one");
        }
        c.embedded_path = u.path();
        if (c.embedded_path.empty())
            return fail("chdb URI needs a data folder, e.g. chdb:///var/lib/pipeline-state");
        // chDB keeps its databases, metadata and temporary files directly in
        // the folder: the root (chdb:///) would fill / with them.
        if (c.embedded_path.find_first_not_of('/') == std::string::npos)
            return fail("chdb URI names the root folder /, where chDB would write its databases and metadata "
                        "directly: name a folder of its own, e.g. chdb:///var/lib/pipeline-state");
    } else if (scheme == "clickhouse" || scheme == "http" || scheme == "https") {
        c.engine = engine_kind::http;
        c.secure = scheme == "https";
        // An '@' after the authority: a '/', '?' or '#' in the password was
        // not percent-encoded, so what precedes it is not what it seems.
        const bool stray_at = uri.substr(authority_end(uri)).find('@') != std::string_view::npos;
        const char* encode_hint =
            stray_at ? "; percent-encode '/', '?', '#' and '@' in the user and password (e.g. %2F)" : "";
        // Two '@' in the authority: an '@' of the user or password was not
        // percent-encoded. Read as it parses, the text between them would be
        // the host (clickhouse://u:p@ss@host/db: host "ss", password "p") —
        // the password's first part sent to a host the user never named.
        {
            const auto from = uri.find("//") + 2;
            const std::string_view authority = uri.substr(from, authority_end(uri) - from);
            if (authority.find('@') != authority.rfind('@'))
                return fail("clickhouse URI has more than one '@' before the host: percent-encode '@' in the "
                            "user and password (%40), and '/', '?', '#' (e.g. %2F)");
        }
        if (!u.has_userinfo() || u.user().empty())
            return fail(std::string("clickhouse URI has no user (expected "
                                    "clickhouse://user:password@host:port/database)") + encode_hint);
        c.user = u.user();
        c.password = u.password();
        if (u.host().empty())
            return fail("clickhouse URI has no host");
        // [v1.x] is an "IPvFuture" literal: its host_address() would
        // read as the DNS name v1.x, another host than the one written.
        if (u.host_type() == boost::urls::host_type::ipvfuture)
            return fail("clickhouse URI: the host \"" + printable(std::string(u.encoded_host()), 100) +
                        "\" is a bracketed literal that is not an IPv6 address");
        c.host = u.host_address(); // an IPv6 literal without its brackets
        if (const char* why = host_problem(c.host))
            return fail(std::string("clickhouse URI: the host \"") + printable(c.host, 100) + "\" " + why);
        if (u.has_port()) {
            // Boost.URL reads "host:abc/db" as an empty port and the path
            // "abc/db": the port as written is taken from the URI text.
            const std::string_view given = port_text(uri);
            if (!parse_port(given, c.port)) {
                if (stray_at)
                    return fail(std::string("clickhouse URI has an invalid port") + encode_hint);
                return fail("clickhouse URI has an invalid port \"" + printable(given, 40) +
                            "\" (expected 1–65535)");
            }
        } else {
            c.port = 8123;
        }
        std::string path = u.path();
        while (!path.empty() && path.front() == '/')
            path.erase(path.begin());
        // One path segment, the database (a trailing '/' is forgiven); a
        // '/' inside it is part of the name only when percent-encoded.
        std::string_view encoded = u.encoded_path();
        while (!encoded.empty() && encoded.front() == '/')
            encoded.remove_prefix(1);
        while (!encoded.empty() && encoded.back() == '/') {
            encoded.remove_suffix(1);
            path.pop_back();
        }
        if (encoded.find('/') != std::string_view::npos)
            return fail("clickhouse URI path holds more than a database name (\"" + printable(std::string(encoded), 200) +
                        "\"): expected clickhouse://user:password@host:port/database; percent-encode '/' (%2F) "
                        "where it is part of the name");
        if (path.empty())
            return fail("clickhouse URI has no database (expected clickhouse://user:password@host:port/database)");
        c.database = path;
    } else {
        return fail("unknown URI scheme \"" + scheme + "\" (expected clickhouse or chdb)");
    }
    std::vector<std::string> seen; // a setting given twice: which one was meant?
    for (auto param : u.params()) {
        std::string value = param.value;
        if (std::find(seen.begin(), seen.end(), param.key) != seen.end())
            return fail("the URI gives " + printable(param.key, 40) +
                        " twice: give each setting once (which one was meant cannot be known)");
        seen.emplace_back(param.key);
        if (param.key == "secure") {
            if (!parse_bool(value, c.secure))
                return fail("secure must be true or false, not \"" + printable(value, 40) + "\"");
        } else if (param.key == "ca_file") {
            if (c.engine == engine_kind::embedded)
                return fail("ca_file applies to clickhouse:// URIs only (chDB runs in-process)");
            c.ca_file = value;
        } else if (param.key == "schema") {
            c.store.schema = value;
        } else if (param.key == "table") {
            c.store.table = value;
        } else if (param.key == "connect_timeout" || param.key == "request_timeout" ||
                   param.key == "lock_timeout") {
            if (c.engine == engine_kind::embedded && param.key != "lock_timeout")
                return fail(std::string(param.key) + " applies to clickhouse:// URIs only (chDB runs in-process)");
            std::chrono::milliseconds d{};
            if (!parse_duration(value, d))
                return fail(std::string(param.key) + " must be a duration such as 30s, 500ms, 5m or 1h (a bare "
                            "number is seconds; at most 7 days), not \"" + printable(value, 40) + "\"");
            if (param.key == "connect_timeout")
                c.connect_timeout = d;
            else if (param.key == "request_timeout")
                c.request_timeout = d;
            else
                c.store.lock.timeout = d;
        } else if (param.key == "cluster" || param.key == "insert_quorum" ||
                   param.key == "insert_quorum_timeout") {
            if (c.engine == engine_kind::embedded)
                return fail(std::string(param.key) +
                            " applies to clickhouse:// URIs only (the embedded engine has no replicas)");
            if (auto why = set_cluster(c.store.cluster, param.key, value))
                return fail(*why);
        } else {
            return fail("unknown URI parameter \"" + printable(param.key, 40) +
                        "\" (known: secure, ca_file, schema, table, connect_timeout, request_timeout, "
                        "lock_timeout, cluster, insert_quorum, insert_quorum_timeout)");
        }
    }
    if (c.store.schema.empty() || c.store.table.empty())
        return fail("schema and table must not be empty");
    if (!c.ca_file.empty() && !c.secure)
        return fail("ca_file applies to secure connections only: add secure=true (or use https://)");
    if (c.engine == engine_kind::embedded) {
        ec = detail::check_no_control_characters("chdb URI: the data folder", c.embedded_path, false, diag);
        if (!ec)
            ec = check_names(c, "chdb URI: parameter schema", "chdb URI: parameter table", diag);
    } else {
        ec = config::check_http_settings(c,
                                 {"clickhouse URI: the host", "clickhouse URI: the user",
                                  "clickhouse URI: the password", "clickhouse URI: the database"},
                                 diag);
        if (!ec)
            ec = detail::check_no_control_characters("clickhouse URI: parameter ca_file", c.ca_file, false, diag);
        if (!ec)
            ec = check_names(c, "clickhouse URI: parameter schema", "clickhouse URI: parameter table", diag);
    }
    return c;
}

} // namespace detail::config_text

CHSTATE_DECL config config::from_uri(std::string_view uri, error_code& ec, diagnostics& diag) {
    using namespace detail::config_text;
    ec = {};
    const auto start = uri.find("//");
    if (start != std::string_view::npos) {
        std::string scheme(uri.substr(0, start));
        std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                       [](unsigned char ch) { return std::tolower(ch); });
        const std::size_t end = authority_end(uri);
        const std::string_view auth = uri.substr(start + 2, end - (start + 2));
        const auto at = auth.rfind('@');
        // Only after a userinfo: without one (refused anyway) a ',' could
        // be part of a password whose '/' was not percent-encoded.
        if ((scheme == "clickhouse:" || scheme == "http:" || scheme == "https:") &&
            at != std::string_view::npos && split_hosts(auth.substr(at + 1)).size() > 1) {
            const auto pieces = split_hosts(auth.substr(at + 1));
            if ((ec = detail::check_endpoint_count("clickhouse URI", pieces.size(), diag)))
                return config{};
            const std::string head(uri.substr(0, start + 2 + at + 1)); // scheme://userinfo@
            const std::string tail(uri.substr(end));                 // /db?…
            config first;
            std::vector<endpoint> eps;
            for (std::size_t i = 0; i < pieces.size(); ++i) {
                const std::string which = "clickhouse URI: host " + std::to_string(i + 1) + " of " +
                                          std::to_string(pieces.size());
                if (pieces[i].empty()) {
                    ec = make_error_code(errc::invalid_configuration);
                    diag.message = which + " is empty (hosts are separated by ',': "
                                           "clickhouse://user:password@h1:p1,h2:p2/database)";
                    return first;
                }
                config one = from_single_uri(head + std::string(pieces[i]) + tail, ec, diag);
                if (ec) {
                    diag.message = which + " (\"" + printable(pieces[i], 100) + "\") is refused: " + diag.message;
                    return one;
                }
                eps.push_back({one.host, one.port});
                if (i == 0)
                    first = std::move(one);
            }
            first.endpoints = std::move(eps);
            return first;
        }
    }
    config c = from_single_uri(uri, ec, diag);
    if (!ec && c.engine == engine_kind::http)
        c.endpoints = {endpoint{c.host, c.port}};
    return c;
}

CHSTATE_DECL std::vector<endpoint> config::all_endpoints() const {
    return detail::endpoint_list(host, port, endpoints);
}

CHSTATE_DECL std::string config::redacted_uri() const {
    if (engine == engine_kind::embedded)
        return "chdb:" + embedded_path;
    std::string query;
    if (secure)
        query += "&secure=true";
    if (!store.cluster.name.empty())
        query += "&cluster=" + store.cluster.name; // a name: no quote, backslash or control character
    if (!query.empty())
        query[0] = '?';
    return std::string("clickhouse://") + user + (password.empty() ? "" : ":***") + "@" +
           detail::endpoints_text(all_endpoints()) + "/" + database + query;
}

CHSTATE_DECL error_code config::check_http_settings(const config& c, const setting_names& names,
                                                    diagnostics& diag) {
    if (auto ec = detail::check_no_control_characters(names.host, c.host, false, diag))
        return ec;
    if (auto ec = detail::check_header_value_length(names.host, detail::host_port(c.host, c.port).size(), diag))
        return ec;
    if (auto ec = detail::check_endpoint_count(names.host, c.endpoints.size(), diag))
        return ec;
    for (std::size_t i = 1; i < c.endpoints.size(); ++i) {
        const std::string name = std::string(names.host) + " (endpoint " + std::to_string(i + 1) + ")";
        if (auto ec = detail::check_no_control_characters(name, c.endpoints[i].host, false, diag))
            return ec;
        if (auto ec = detail::check_header_value_length(
                name, detail::host_port(c.endpoints[i].host, c.endpoints[i].port).size(), diag))
            return ec;
    }
    if (auto ec = detail::check_no_control_characters(names.user, c.user, false, diag))
        return ec;
    if (auto ec = detail::check_header_value_length(names.user, c.user.size(), diag))
        return ec;
    if (auto ec = detail::check_no_control_characters(names.password, c.password, true, diag))
        return ec;
    if (auto ec = detail::check_header_value_length(names.password, c.password.size(), diag))
        return ec;
    return detail::check_no_control_characters(names.database, c.database, false, diag);
}

} // namespace chstate
