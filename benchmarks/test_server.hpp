// The server scripts/clickhouse-server.sh started, as the `env` file in its
// folder describes it (shell `export NAME='value'` lines).
#pragma once

#include <chstate/transport/http.hpp>

#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>

namespace chstate::bench {

/// Host, port, user and password of the server in `dir`; std::runtime_error
/// naming the file when it describes none.
inline http_options test_server_options(const std::string& dir) {
    std::map<std::string, std::string> env;
    std::ifstream in(dir + "/env");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("export ", 0) == 0)
            line = line.substr(7);
        auto eq = line.find('=');
        if (eq == std::string::npos)
            continue;
        std::string v = line.substr(eq + 1);
        if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"'))
            v = v.substr(1, v.size() - 2);
        env[line.substr(0, eq)] = v;
    }
    if (env["CHSTATE_TEST_HTTP_HOST"].empty() || env["CHSTATE_TEST_HTTP_PORT"].empty())
        throw std::runtime_error("no server described in " + dir + "/env");
    std::ifstream pw(env["CHSTATE_TEST_HTTP_PASSWORD_FILE"]);
    std::string password((std::istreambuf_iterator<char>(pw)), {});
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r'))
        password.pop_back();
    http_options o;
    o.host = env["CHSTATE_TEST_HTTP_HOST"];
    o.port = static_cast<std::uint16_t>(std::stoi(env["CHSTATE_TEST_HTTP_PORT"]));
    o.user = env["CHSTATE_TEST_HTTP_USER"];
    o.password = password;
    return o;
}

} // namespace chstate::bench
