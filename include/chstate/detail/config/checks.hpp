// chstate/detail/config/checks.hpp — what every setting that travels is
// checked for (control characters), and how host:port is written. Shared
// by config (from_uri, from_environment) and the HTTP transport.
#pragma once

#include <chstate/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace chstate {

namespace detail {

/// The offset of the first control character (0x00–0x1F, 0x7F) in `v`, or npos.
inline std::size_t find_control_character(std::string_view v) noexcept {
    for (std::size_t i = 0; i < v.size(); ++i) {
        const auto c = static_cast<unsigned char>(v[i]);
        if (c < 0x20 || c == 0x7F)
            return i;
    }
    return std::string_view::npos;
}

/// Refuses a setting that holds a control character: errc::invalid_configuration,
/// the message naming `what`. The value never appears in the message; for a
/// `secret` (a password) not even the offending byte or its offset does.
inline error_code check_no_control_characters(std::string_view what, std::string_view value, bool secret,
                                              diagnostics& diag) {
    const auto at = find_control_character(value);
    if (at == std::string_view::npos)
        return {};
    static constexpr char hex[] = "0123456789ABCDEF";
    const auto c = static_cast<unsigned char>(value[at]);
    diag.message = std::string(what) + " contains a control character";
    if (secret) {
        diag.message += " (not shown)";
    } else {
        diag.message += " (0x";
        diag.message += hex[c >> 4];
        diag.message += hex[c & 15];
        diag.message += " at byte " + std::to_string(at) + ")";
    }
    diag.message += "; control characters (0x00–0x1F, 0x7F) are refused";
    return make_error_code(errc::invalid_configuration);
}

/// The longest value an HTTP header can carry here: Boost.Beast keeps each
/// field's offsets in 16 bits (name or value + 2 <= 65535) and throws
/// std::length_error past that, so a longer user, password or host must be
/// refused when the settings are made, not found out on the first request.
/// (A server may accept much less: ClickHouse answers for itself.)
inline constexpr std::size_t max_http_header_value = 65533;

/// Refuses a setting that becomes an HTTP header value of `header_size`
/// bytes when that is more than max_http_header_value:
/// errc::invalid_configuration naming `what` and the sizes, never the value.
inline error_code check_header_value_length(std::string_view what, std::size_t header_size, diagnostics& diag) {
    if (header_size <= max_http_header_value)
        return {};
    diag.message = std::string(what) + " is too long to send: " + std::to_string(header_size) +
                   " bytes as an HTTP header value, at most " + std::to_string(max_http_header_value);
    return make_error_code(errc::invalid_configuration);
}

/// The most endpoints one store may name. Each is tried in turn when the
/// ones before it fail (a name lookup and a connect apiece), so a list of
/// thousands would make one failing operation take hours and its message
/// name every host; a replicated cluster has a handful of replicas.
inline constexpr std::size_t max_endpoints = 32;

/// Refuses `count` endpoints when that is more than max_endpoints:
/// errc::invalid_configuration naming `what` and both counts.
inline error_code check_endpoint_count(std::string_view what, std::size_t count, diagnostics& diag) {
    if (count <= max_endpoints)
        return {};
    diag.message = std::string(what) + " names " + std::to_string(count) + " endpoints, at most " +
                   std::to_string(max_endpoints) + " (each is tried in turn when the ones before it fail)";
    return make_error_code(errc::invalid_configuration);
}

/// A host is an IPv6 literal when it holds a ':' (a name or IPv4 address never does).
inline bool is_ipv6_literal(std::string_view host) noexcept {
    return host.find(':') != std::string_view::npos;
}

/// host:port as a URI authority or an HTTP Host header writes it: an IPv6
/// literal in brackets ("[::1]:8123").
inline std::string host_port(std::string_view host, std::uint16_t port) {
    std::string out;
    if (is_ipv6_literal(host) && !(host.size() >= 2 && host.front() == '[' && host.back() == ']')) {
        out += '[';
        out += host;
        out += ']';
    } else {
        out += host;
    }
    out += ':';
    out += std::to_string(port);
    return out;
}

} // namespace detail

} // namespace chstate
