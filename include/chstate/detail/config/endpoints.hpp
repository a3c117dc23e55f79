// chstate/detail/config/endpoints.hpp — a store's endpoints in order, and
// as text. Used by config (all_endpoints, redacted_uri) and the HTTP
// transport's pool.
#pragma once

#include <chstate/config.hpp>
#include <chstate/detail/config/checks.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chstate::detail {

/// Every endpoint in order: `host`:`port` first (they win over a stale
/// list[0]), then list[1…]. An empty list is host:port alone.
inline std::vector<endpoint> endpoint_list(const std::string& host, std::uint16_t port,
                                           const std::vector<endpoint>& list) {
    std::vector<endpoint> out;
    out.push_back({host, port});
    for (std::size_t i = 1; i < list.size(); ++i)
        out.push_back(list[i]);
    return out;
}

/// "h1:p1,h2:p2" with IPv6 hosts in brackets (for messages and logs).
inline std::string endpoints_text(const std::vector<endpoint>& eps) {
    std::string out;
    for (const auto& e : eps) {
        if (!out.empty())
            out += ',';
        out += host_port(e.host, e.port);
    }
    return out;
}

} // namespace chstate::detail
