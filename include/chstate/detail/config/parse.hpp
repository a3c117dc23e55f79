// chstate/detail/config/parse.hpp — the pieces of text config reads from a
// URI and from the environment alike: ports, durations, booleans, host
// names and lists, cluster settings. Used by detail/config/uri.ipp and
// environment.ipp (and so compiled where they are).
#pragma once

#include <chstate/config.hpp>
#include <chstate/detail/config/checks.hpp>

#include <boost/url/ipv6_address.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail::config_text {

/// The hosts of an authority's host part, split at each ',' outside brackets.
inline std::vector<std::string_view> split_hosts(std::string_view hosts) {
    std::vector<std::string_view> out;
    std::size_t from = 0;
    bool bracket = false;
    for (std::size_t i = 0; i <= hosts.size(); ++i) {
        if (i == hosts.size() || (hosts[i] == ',' && !bracket)) {
            out.push_back(hosts.substr(from, i - from));
            from = i + 1;
        } else if (hosts[i] == '[') {
            bracket = true;
        } else if (hosts[i] == ']') {
            bracket = false;
        }
    }
    return out;
}

/// Refuses a schema or table name holding a control character, naming it.
inline error_code check_names(const config& c, std::string_view schema_name, std::string_view table_name,
                              diagnostics& diag) {
    if (auto ec = detail::check_no_control_characters(schema_name, c.store.schema, false, diag))
        return ec;
    return detail::check_no_control_characters(table_name, c.store.table, false, diag);
}

/// `v` for a message: at most `limit` bytes, control characters as '?'.
inline std::string printable(std::string_view v, std::size_t limit) {
    std::string out(v.substr(0, limit));
    for (char& ch : out)
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F)
            ch = '?';
    if (v.size() > limit)
        out += "…";
    return out;
}

/// Where the authority of `uri` ends (the offset of the first '/', '?' or
/// '#' after "//"), or 0 when there is no "//".
inline std::size_t authority_end(std::string_view uri) {
    auto start = uri.find("//");
    if (start == std::string_view::npos)
        return 0;
    auto end = uri.find_first_of("/?#", start + 2);
    return end == std::string_view::npos ? uri.size() : end;
}

/// The port as written in `uri`: the text after the host's ':' up to
/// the end of the authority.
inline std::string_view port_text(std::string_view uri) {
    auto start = uri.find("//");
    if (start == std::string_view::npos)
        return {};
    std::string_view auth = uri.substr(start + 2, authority_end(uri) - (start + 2));
    if (auto at = auth.rfind('@'); at != std::string_view::npos)
        auth.remove_prefix(at + 1);
    if (!auth.empty() && auth.front() == '[') {
        auto close = auth.find(']');
        if (close == std::string_view::npos)
            return {};
        auth.remove_prefix(close + 1);
    }
    auto colon = auth.find(':');
    return colon == std::string_view::npos ? std::string_view{} : auth.substr(colon + 1);
}

/// A port number, 1–65535, and nothing else.
inline bool parse_port(std::string_view s, std::uint16_t& out) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size() || v == 0 || v > 65535)
        return false;
    out = static_cast<std::uint16_t>(v);
    return true;
}

/// "250ms", "30s", "5m", "1h", or a bare number of seconds; more than
/// zero and at most 7 days. Leaves `out` alone on failure.
inline bool parse_duration(std::string_view s, std::chrono::milliseconds& out) {
    std::uint64_t n = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc{} || p == s.data() || n == 0)
        return false;
    const std::string_view unit = s.substr(static_cast<std::size_t>(p - s.data()));
    std::uint64_t ms_per = 0;
    if (unit == "ms")
        ms_per = 1;
    else if (unit.empty() || unit == "s")
        ms_per = 1000;
    else if (unit == "m")
        ms_per = 60'000;
    else if (unit == "h")
        ms_per = 3'600'000;
    else
        return false;
    constexpr std::uint64_t week_ms = 7ull * 24 * 3'600'000;
    if (n > week_ms / ms_per)
        return false;
    out = std::chrono::milliseconds(static_cast<std::int64_t>(n * ms_per));
    return true;
}

/// true/1/yes/on or false/0/no/off/empty, in any case.
inline bool parse_bool(std::string_view s, bool& out) {
    std::string v(s);
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (v == "true" || v == "1" || v == "yes" || v == "on") { out = true; return true; }
    if (v == "false" || v == "0" || v == "no" || v == "off" || v.empty()) { out = false; return true; }
    return false;
}

/// Why `host` cannot be a host to connect to (nullptr: it can): a name
/// holding a character no host name has — a decoded "%3A" would make
/// "h:o" look like an IPv6 address in the Host header — or a ':' that
/// is not part of an IPv6 address.
inline const char* host_problem(std::string_view host) {
    if (host.empty())
        return "is empty";
    if (host.find(':') != std::string_view::npos)
        return boost::urls::parse_ipv6_address(host) ? nullptr : "holds ':' but is not an IPv6 address";
    if (host.find_first_of("/?#@[]\\ %,") != std::string_view::npos)
        return "is not a host name (it holds one of / ? # @ [ ] \\ % , or a space)";
    return nullptr;
}

/// Sets cluster option `key` (cluster, insert_quorum,
/// insert_quorum_timeout) from its text; the reason it cannot, if not.
inline std::optional<std::string> set_cluster(cluster_options& o, std::string_view key, std::string_view v) {
    if (key == "cluster") {
        if (v.empty() || v.size() > 200 || v.find_first_of("`'\\") != std::string_view::npos ||
            detail::find_control_character(v) != std::string_view::npos)
            return "cluster must be a cluster name (1–200 bytes, no quote, backslash or control character), "
                   "not \"" + printable(v, 40) + "\"";
        o.name = std::string(v);
    } else if (key == "insert_quorum") {
        unsigned n = 0;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (v.empty() || ec != std::errc{} || p != v.data() + v.size() || n > 100)
            return "insert_quorum must be a number of replicas (0 = a majority, at most 100), not \"" +
                   printable(v, 40) + "\"";
        o.insert_quorum = n;
    } else {
        std::chrono::milliseconds d{};
        if (!parse_duration(v, d) || d.count() == 0)
            return "insert_quorum_timeout must be a duration such as 30s or 500ms (more than 0, at most "
                   "7 days), not \"" + printable(v, 40) + "\"";
        o.insert_quorum_timeout = d;
    }
    return std::nullopt;
}

} // namespace chstate::detail::config_text
