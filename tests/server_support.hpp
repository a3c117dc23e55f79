// The single ClickHouse server the `server` suite runs against (server.cpp)
// and what the cluster suite (cluster.cpp) borrows from it: where the
// server is (CHSTATE_TEST_SERVER_DIR, scripts/clickhouse-server.sh), the
// transport's thread pool, the HTTP and HTTPS fixtures, small helpers.
#pragma once

#include "support.hpp"

#include <chstate/detail/http/request.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/thread_pool.hpp>
#ifndef CHSTATE_NO_TLS
#include <openssl/ssl.h>
#endif

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#ifndef CHSTATE_SOURCE_DIR
#define CHSTATE_SOURCE_DIR "."
#endif

namespace server_tests {

using namespace chstate;
namespace asio = boost::asio;
using namespace std::chrono_literals;

/// For a URI: everything but RFC 3986's unreserved characters percent-encoded.
inline std::string uri_encode(std::string_view s) {
    std::string out;
    detail::append_url_encoded(out, s);
    return out;
}

struct server_env {
    std::string dir, host, user, password, problem;
    std::uint16_t port = 0;
    /// HTTPS: the name in the server's certificate (localhost), the port and
    /// the throwaway CA's PEM file.
    std::string https_host, ca_file;
    std::uint16_t https_port = 0;
};

inline std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Reads CHSTATE_TEST_SERVER_DIR/env (shell exports) once.
inline const server_env& env() {
    static const server_env e = [] {
        server_env e;
        const char* dir = std::getenv("CHSTATE_TEST_SERVER_DIR");
        if (!dir || !*dir) {
            e.problem = "CHSTATE_TEST_SERVER_DIR is not set: the server suite needs a running ClickHouse "
                        "(bash scripts/clickhouse-server.sh start DIR; export CHSTATE_TEST_SERVER_DIR=DIR)";
            return e;
        }
        e.dir = dir;
        std::ifstream in(e.dir + "/env");
        if (!in) {
            e.problem = e.dir + "/env cannot be read: was the server started with scripts/clickhouse-server.sh?";
            return e;
        }
        std::string line, password_file;
        while (std::getline(in, line)) {
            if (line.starts_with("export "))
                line.erase(0, 7);
            auto eq = line.find('=');
            if (eq == std::string::npos)
                continue;
            std::string k = line.substr(0, eq), v = line.substr(eq + 1);
            if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
                v = v.substr(1, v.size() - 2);
            if (k == "CHSTATE_TEST_HTTP_HOST")
                e.host = v;
            else if (k == "CHSTATE_TEST_HTTP_PORT")
                e.port = static_cast<std::uint16_t>(std::stoi(v));
            else if (k == "CHSTATE_TEST_HTTP_USER")
                e.user = v;
            else if (k == "CHSTATE_TEST_HTTP_PASSWORD_FILE")
                password_file = v;
            else if (k == "CHSTATE_TEST_HTTPS_HOST")
                e.https_host = v;
            else if (k == "CHSTATE_TEST_HTTPS_PORT")
                e.https_port = static_cast<std::uint16_t>(std::stoi(v));
            else if (k == "CHSTATE_TEST_CA_FILE")
                e.ca_file = v;
        }
        e.password = read_file(password_file);
        while (!e.password.empty() && (e.password.back() == '\n' || e.password.back() == '\r'))
            e.password.pop_back();
        if (e.host.empty() || e.port == 0 || e.user.empty())
            e.problem = e.dir + "/env lacks CHSTATE_TEST_HTTP_HOST/PORT/USER";
        return e;
    }();
    return e;
}

/// The process-wide threads that run every http_transport of this suite.
inline asio::thread_pool& threads() {
#ifndef CHSTATE_NO_TLS
    // OpenSSL first: its exit handler (OPENSSL_cleanup, registered by its
    // initialisation) then runs after the pool's destructor has joined the
    // threads, whose per-thread OpenSSL state (error queue, random
    // generators) is freed as each thread exits. The other way round, that
    // state (~12 KB after a TLS case) outlives OpenSSL and LeakSanitizer
    // reports it (see the TLS notes in chstate/transport/http.hpp).
    static const bool openssl_ready = OPENSSL_init_ssl(0, nullptr) == 1;
    (void)openssl_ready;
#endif
    static asio::thread_pool pool(4);
    return pool;
}

inline http_options server_options() {
    const auto& e = env();
    if (!e.problem.empty())
        throw std::runtime_error("server suite: " + e.problem);
    http_options o;
    o.host = e.host;
    o.port = e.port;
    o.user = e.user;
    o.password = e.password;
    o.connect_timeout = 5s;
    o.request_timeout = 120s;
    return o;
}

inline std::string run_sql(http_transport& t, const std::string& sql, std::string format = {}) {
    return test::raw_sql(t, sql, std::move(format));
}

/// Throws (failing the case loudly) unless the server answers.
inline void require_server() {
    static std::string verdict = [] {
        if (!env().problem.empty())
            return "server suite: " + env().problem;
        try {
            http_transport t(threads().get_executor(), server_options());
            run_sql(t, "SELECT 1");
            return std::string();
        } catch (const std::exception& e) {
            return std::string("server suite: ClickHouse at ") + env().host + ":" + std::to_string(env().port) +
                   " does not answer: " + e.what();
        }
    }();
    if (!verdict.empty())
        throw std::runtime_error(verdict);
}

struct server_fixture {
    using transport_type = http_transport;
    static constexpr const char* name = "server";
    transport_type make_transport() {
        require_server();
        return http_transport(threads().get_executor(), server_options());
    }
};

/// The same server over HTTPS: its certificate's name (localhost), the
/// HTTPS port, verification on with the throwaway CA given as ca_file.
inline http_options tls_options() {
    const auto& e = env();
    if (e.https_port == 0 || e.https_host.empty() || e.ca_file.empty())
        throw std::runtime_error("server suite: " + e.dir + "/env lacks CHSTATE_TEST_HTTPS_HOST/PORT/CA_FILE "
                                 "(a server started by an older scripts/clickhouse-server.sh: stop and start it)");
    http_options o = server_options();
    o.host = e.https_host;
    o.port = e.https_port;
    o.secure = true;
    o.ca_file = e.ca_file;
    return o;
}

struct https_fixture {
    using transport_type = http_transport;
    static constexpr const char* name = "https";
    transport_type make_transport() {
        require_server();
        return http_transport(threads().get_executor(), tls_options());
    }
};

/// bash scripts/clickhouse-server.sh CMD $CHSTATE_TEST_SERVER_DIR
inline void server_script(const std::string& cmd) {
    std::string line = "bash '" CHSTATE_SOURCE_DIR "/scripts/clickhouse-server.sh' " + cmd + " '" + env().dir +
                       "' >/dev/null";
    int rc = std::system(line.c_str());
    if (rc != 0)
        throw std::runtime_error("'" + line + "' failed with status " + std::to_string(rc));
}

/// Runs `stmt` and reports the error code (and the message).
inline error_code try_sql(http_transport& t, const std::string& sql, diagnostics& diag, std::string* out = nullptr,
                          bool idempotent = true) {
    return test::run_statement(t, statement{sql, {}, "TabSeparated", {}, idempotent}, diag, out);
}

} // namespace server_tests
