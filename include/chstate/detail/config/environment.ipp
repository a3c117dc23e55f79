// chstate/detail/config/environment.ipp — config::from_environment:
// MELTANO_STATE_BACKEND_URI, then the MELTANO_STATE_BACKEND_CLICKHOUSE_*
// overrides (config.hpp says which and how they combine). Included by
// config.hpp when header-only, by <chstate/src.hpp> under
// CHSTATE_SEPARATE_COMPILATION.
#pragma once

#include <chstate/config.hpp>
#include <chstate/detail/config/checks.hpp>
#include <chstate/detail/config/parse.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chstate {

CHSTATE_DECL config config::from_environment(const environment_lookup& env, error_code& ec, diagnostics& diag) {
    using namespace detail::config_text;
    ec = {};
    config c;
    if (auto uri = env("MELTANO_STATE_BACKEND_URI")) {
        c = from_uri(*uri, ec, diag);
        if (ec) {
            diag.message = "MELTANO_STATE_BACKEND_URI: " + diag.message;
            return c;
        }
    }
    auto fail = [&](std::string msg) {
        ec = make_error_code(errc::invalid_configuration);
        diag.message = std::move(msg);
        return c;
    };
    const std::string prefix = "MELTANO_STATE_BACKEND_CLICKHOUSE_";
    auto get = [&](const char* key) { return env((prefix + key).c_str()); };
    // Every override is checked for control characters as it is read, so
    // the message names the variable that holds one.
    auto take = [&](const char* key, std::string& field, bool secret) {
        auto v = get(key);
        if (!v)
            return true;
        if ((ec = detail::check_no_control_characters(prefix + key, *v, secret, diag)))
            return false;
        field = std::move(*v);
        return true;
    };
    // HOST: one host or a comma-separated list, each "host", "host:port",
    // "[v6]", "[v6]:port" or a bare IPv6 literal ("::1").
    const std::optional<std::string> hosts_value = get("HOST");
    if (hosts_value && (ec = detail::check_no_control_characters(prefix + "HOST", *hosts_value, false, diag)))
        return c;
    std::vector<std::pair<endpoint, bool>> listed; // the endpoint, whether it gave its port
    if (hosts_value) {
        const auto items = split_hosts(*hosts_value);
        if ((ec = detail::check_endpoint_count(prefix + "HOST", items.size(), diag)))
            return c;
        for (std::size_t i = 0; i < items.size(); ++i) {
            std::string_view item = items[i];
            const std::string which = items.size() > 1 ? " (host " + std::to_string(i + 1) + " of " +
                                                             std::to_string(items.size()) + ")"
                                                       : std::string();
            if (item.empty() && items.size() > 1)
                return fail(prefix + "HOST" + which + " is empty (hosts are separated by ',': h1:p1,h2:p2)");
            std::string_view h = item, port_given;
            bool has_port = false;
            if (item.size() >= 2 && item.front() == '[') {
                // "[::1]" as in a URI: the host is kept without brackets.
                const auto close = item.find(']');
                if (close != std::string_view::npos &&
                    (close + 1 == item.size() || item[close + 1] == ':')) {
                    h = item.substr(1, close - 1);
                    if (close + 1 < item.size()) {
                        has_port = true;
                        port_given = item.substr(close + 2);
                    }
                }
            } else if (const auto colon = item.find(':');
                       colon != std::string_view::npos && item.find(':', colon + 1) == std::string_view::npos &&
                       colon + 1 < item.size() &&
                       item.find_first_not_of("0123456789", colon + 1) == std::string_view::npos) {
                h = item.substr(0, colon); // host:port (a bare IPv6 literal has several ':')
                has_port = true;
                port_given = item.substr(colon + 1);
            }
            if (const char* why = host_problem(h))
                return fail(prefix + "HOST" + which + " \"" + printable(h, 100) + "\" " + why);
            endpoint e{std::string(h), c.port};
            if (has_port && !parse_port(port_given, e.port))
                return fail(prefix + "HOST" + which + " \"" + printable(item, 100) +
                            "\" has an invalid port (expected 1–65535)");
            listed.emplace_back(std::move(e), has_port);
        }
    }
    std::optional<std::uint16_t> port_override;
    if (auto v = get("PORT")) {
        std::uint16_t p = 0;
        if (!parse_port(*v, p))
            return fail(prefix + "PORT is not a port number: \"" + printable(*v, 40) + "\" (expected 1–65535)");
        port_override = p;
    }
    if (!listed.empty()) {
        c.endpoints.clear();
        for (auto& [e, gave_port] : listed) {
            if (!gave_port && port_override)
                e.port = *port_override;
            c.endpoints.push_back(std::move(e));
        }
    } else {
        c.endpoints = c.all_endpoints();
        if (port_override)
            for (auto& e : c.endpoints)
                e.port = *port_override;
    }
    c.host = c.endpoints.front().host;
    c.port = c.endpoints.front().port;
    if (c.engine != engine_kind::http && c.endpoints.size() == 1 && listed.empty())
        c.endpoints.clear(); // chdb: no endpoint (as from_uri leaves it)
    if (!take("DATABASE", c.database, false) || !take("USER", c.user, false) ||
        !take("PASSWORD", c.password, true))
        return c;
    // Set but empty, for a clickhouse:// connection: its URI cannot name
    // an empty user or database (from_uri refuses one), and neither can
    // these. (An empty PASSWORD is a password; chdb: ignores all three.)
    for (auto [key, field, what] : {std::tuple{"USER", &c.user, "user"}, std::tuple{"DATABASE", &c.database, "database"}})
        if (c.engine == engine_kind::http && field->empty() && get(key))
            return fail(prefix + key + " is set but empty: a ClickHouse connection names its " + what +
                        " (unset the variable to keep the URI's, or the default \"default\")");
    if (auto v = get("SECURE"); v && !parse_bool(*v, c.secure))
        return fail(prefix + "SECURE must be true or false, not \"" + printable(*v, 40) + "\"");
    if (!take("CA_FILE", c.ca_file, false) || !take("SCHEMA", c.store.schema, false) ||
        !take("TABLE", c.store.table, false))
        return c;
    for (auto [key, name] : {std::pair{"CLUSTER", "cluster"}, std::pair{"INSERT_QUORUM", "insert_quorum"}}) {
        auto v = get(key);
        if (!v)
            continue;
        if (c.engine != engine_kind::http)
            return fail(prefix + key + " applies to clickhouse:// connections only (the embedded engine has "
                                       "no replicas)");
        if (auto why = set_cluster(c.store.cluster, name, *v))
            return fail(prefix + key + ": " + *why);
    }
    for (auto [key, field] : {std::pair{"CONNECT_TIMEOUT", &c.connect_timeout},
                              std::pair{"REQUEST_TIMEOUT", &c.request_timeout},
                              std::pair{"LOCK_TIMEOUT", &c.store.lock.timeout}}) {
        if (auto v = get(key); v && !parse_duration(*v, *field))
            return fail(prefix + key + " must be a duration such as 30s, 500ms, 5m or 1h (a bare number is "
                        "seconds; at most 7 days), not \"" + printable(*v, 40) + "\"");
    }
    if (c.store.schema.empty() || c.store.table.empty())
        return fail("schema and table must not be empty");
    if (!c.ca_file.empty() && (!c.secure || c.engine != engine_kind::http))
        return fail("a CA file (" + prefix + "CA_FILE or the URI's ca_file) applies to secure clickhouse:// "
                    "connections only: set " + prefix + "SECURE=true or secure=true in the URI");
    if (c.engine == engine_kind::http) {
        // Lengths too, now that every value is in: each must fit an HTTP header.
        const std::string host = prefix + "HOST (or the URI's host)", user = prefix + "USER (or the URI's user)",
                          password = prefix + "PASSWORD (or the URI's password)",
                          database = prefix + "DATABASE (or the URI's database)";
        ec = config::check_http_settings(c, {host, user, password, database}, diag);
    }
    return c;
}

} // namespace chstate
