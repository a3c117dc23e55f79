// chstate/transport/http_options.hpp — the settings of an http_transport
// (transport/http.hpp, which includes this header): where it connects,
// as whom, and its pool and time limits. make_http_options
// (transport/http.hpp) fills them from a config (config.hpp). A header of
// its own, without Boost.Beast, so that code which only passes settings
// around need not include the transport.
#pragma once

#include <chstate/config.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chstate {

/// Settings of an http_transport.
struct http_options {
    std::string host = "localhost";
    std::uint16_t port = 8123;
    /// `database` URL parameter; empty: the user's default database.
    std::string database{};
    std::string user = "default";
    std::string password{};
    /// HTTPS with certificate and host-name verification.
    bool secure = false;
    /// CA bundle (PEM) trusted by secure connections, instead of the
    /// system's default paths; empty: those default paths.
    std::string ca_file{};
    /// Connections open at once (in use or idle), shared by all operations.
    std::size_t pool_size = 4;
    /// Resolve + connect (+ TLS handshake) limit.
    std::chrono::milliseconds connect_timeout{10'000};
    /// Limit for sending a request and reading its whole reply, including
    /// any wait for a free pool slot.
    std::chrono::milliseconds request_timeout{300'000};
    /// An idle connection is not reused once idle for keep-alive − margin.
    std::chrono::milliseconds idle_close_margin{1'000};
    /// Keep-alive assumed when the server does not advertise one.
    std::chrono::milliseconds default_keep_alive{3'000};
    /// Send wait_end_of_query=1 (the server buffers the reply; its status
    /// is then trustworthy). Accepted by 18.16 and later.
    bool wait_end_of_query = false;
    /// Every endpoint of the store in order, for failover (transport/http.hpp's
    /// header comment): endpoints[0] is host:port, and host and port win over it
    /// when they differ. Empty: host:port alone. make_http_options fills it
    /// from config::endpoints.
    std::vector<endpoint> endpoints{};
};

} // namespace chstate
