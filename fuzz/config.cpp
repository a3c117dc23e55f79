// Fuzz target: URI and environment parsing (include/chstate/config.hpp).
//
// Input: a URI, then optionally 0xFF-separated environment settings
// "NAME=VALUE", NAME being URI (MELTANO_STATE_BACKEND_URI) or a suffix of
// MELTANO_STATE_BACKEND_CLICKHOUSE_ (HOST, PORT, PASSWORD, …).
//
// Properties:
//   * the error_code forms never throw; the throwing form throws only chstate::error;
//   * a parsed config holds no control character in any setting that
//     becomes a header, URL or path (every endpoint's host included); schema and table are non-empty; an
//     HTTP config has a user, a host and a database; timeouts are in (0, 7 days];
//   * redacted_uri does not depend on the password (so never contains it)
//     and holds no control character;
//   * a password never appears in an error message: the URI's password
//     (and the PASSWORD override) replaced by a marker, the message never
//     contains the marker;
//   * an HTTP config written back as a percent-encoded URI parses to the
//     same config.
#include "fuzz_common.hpp"

#include <chstate/config.hpp>

#include <boost/url/parse.hpp>

#include <map>
#include <optional>

namespace {

using chstate::config;

constexpr std::string_view marker = "Mk7rQ2zPw9"; // letters and digits: a password of its own

/// `v` with every %XX replaced by its byte (once, as the URI parser does).
std::string percent_decoded(std::string_view v) {
    auto hex = [](char ch) -> int {
        if (ch >= '0' && ch <= '9')
            return ch - '0';
        if (ch >= 'a' && ch <= 'f')
            return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
            return ch - 'A' + 10;
        return -1;
    };
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] == '%' && i + 2 < v.size() && hex(v[i + 1]) >= 0 && hex(v[i + 2]) >= 0) {
            out += static_cast<char>(hex(v[i + 1]) * 16 + hex(v[i + 2]));
            i += 2;
        } else {
            out += v[i];
        }
    }
    return out;
}

void check_invariants(const config& c, std::string_view input) {
    using fuzz::has_control_character;
    const std::string where = "input " + fuzz::show(input);
    FUZZ_CHECK(!c.store.schema.empty() && !c.store.table.empty(), where);
    if (c.engine == config::engine_kind::embedded) {
        FUZZ_CHECK(!has_control_character(c.embedded_path), where);
    } else {
        FUZZ_CHECK(!has_control_character(c.host), where + " host " + fuzz::show(c.host));
        FUZZ_CHECK(!has_control_character(c.user), where);
        FUZZ_CHECK(!has_control_character(c.password), where);
        FUZZ_CHECK(!has_control_character(c.database), where);
        FUZZ_CHECK(c.port != 0, where);
        // Several endpoints: the first is host:port, none holds a control character or port 0.
        FUZZ_CHECK(!c.endpoints.empty() && c.endpoints.front().host == c.host && c.endpoints.front().port == c.port,
                   where);
        for (const auto& e : c.endpoints)
            FUZZ_CHECK(!e.host.empty() && !has_control_character(e.host) && e.port != 0,
                       where + " endpoint " + fuzz::show(e.host));
    }
    constexpr auto week = std::chrono::milliseconds(7ll * 24 * 3600 * 1000);
    for (auto d : {c.connect_timeout, c.request_timeout,
                   std::chrono::duration_cast<std::chrono::milliseconds>(c.store.lock.timeout)})
        FUZZ_CHECK(d.count() > 0 && d <= week, where);
    // redacted_uri: the same whatever the (non-empty) password.
    const std::string redacted = c.redacted_uri();
    config other = c;
    other.password = c.password.empty() ? "" : std::string(marker);
    FUZZ_CHECK(other.redacted_uri() == redacted, where + " redacted " + fuzz::show(redacted));
    // The marker may reach the redacted URI only through a field other than
    // the password that the input spelled, plainly or percent-encoded
    // (a database "Mk%37rQ2zPw9" is shown decoded).
    if (input.find(marker) == std::string_view::npos && percent_decoded(input).find(marker) == std::string::npos)
        FUZZ_CHECK(redacted.find(marker) == std::string::npos, where);
}

/// Percent-encodes every byte but RFC 3986 unreserved characters.
std::string pct(std::string_view v) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char ch : v) {
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
            ch == '.' || ch == '_' || ch == '~') {
            out += static_cast<char>(ch);
        } else {
            out += '%';
            out += hex[ch >> 4];
            out += hex[ch & 15];
        }
    }
    return out;
}

void check_round_trip(const config& c, std::string_view input) {
    if (c.engine != config::engine_kind::http)
        return;
    // A registered name in percent-encoding; an IP literal in brackets as parsed.
    std::string host;
    if (c.host.find(':') != std::string::npos)
        host = "[" + c.host + "]";
    else
        host = pct(c.host);
    std::string uri = "clickhouse://" + pct(c.user) + ":" + pct(c.password) + "@" + host + ":" +
                      std::to_string(c.port) + "/" + pct(c.database) + "?schema=" + pct(c.store.schema) +
                      "&table=" + pct(c.store.table) + "&secure=" + (c.secure ? "true" : "false") +
                      "&connect_timeout=" + std::to_string(c.connect_timeout.count()) + "ms" +
                      "&request_timeout=" + std::to_string(c.request_timeout.count()) + "ms" + "&lock_timeout=" +
                      std::to_string(
                          std::chrono::duration_cast<std::chrono::milliseconds>(c.store.lock.timeout).count()) +
                      "ms";
    chstate::error_code ec;
    chstate::diagnostics diag;
    config again = config::from_uri(uri, ec, diag);
    const std::string where = "input " + fuzz::show(input) + " rewritten " + fuzz::show(uri) + ": " + diag.message;
    FUZZ_CHECK(!ec, where);
    FUZZ_CHECK(again.host == c.host, where + " host " + fuzz::show(again.host) + " vs " + fuzz::show(c.host));
    FUZZ_CHECK(again.user == c.user && again.password == c.password && again.database == c.database, where);
    FUZZ_CHECK(again.port == c.port && again.secure == c.secure, where);
    FUZZ_CHECK(again.store.schema == c.store.schema && again.store.table == c.store.table, where);
    FUZZ_CHECK(again.connect_timeout == c.connect_timeout && again.request_timeout == c.request_timeout &&
                   again.store.lock.timeout == c.store.lock.timeout,
               where);
}

/// The URI with its password (as written, still encoded) replaced by `with`; nullopt without one.
std::optional<std::string> replace_password(std::string_view uri, std::string_view with) {
    auto parsed = boost::urls::parse_uri(uri);
    if (!parsed || !parsed->has_password())
        return std::nullopt;
    std::string_view pw = parsed->encoded_password();
    // encoded_password() is a view into `uri`.
    const auto at = static_cast<std::size_t>(pw.data() - uri.data());
    if (at > uri.size() || at + pw.size() > uri.size())
        return std::nullopt;
    return std::string(uri.substr(0, at)) + std::string(with) + std::string(uri.substr(at + pw.size()));
}

chstate::environment_lookup make_env(const std::map<std::string, std::string>& vars) {
    return [vars](const char* name) -> std::optional<std::string> {
        if (auto it = vars.find(name); it != vars.end())
            return it->second;
        return std::nullopt;
    };
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto parts = fuzz::split(input, '\xff');
    const std::string_view uri = parts[0];

    // 1. from_uri, error_code form: never throws.
    chstate::error_code ec;
    chstate::diagnostics diag;
    config c;
    try {
        c = config::from_uri(uri, ec, diag);
    } catch (const std::exception& e) {
        FUZZ_CHECK(false, std::string("from_uri(ec) threw: ") + e.what() + " for " + fuzz::show(uri));
    }
    if (!ec) {
        check_invariants(c, uri);
        check_round_trip(c, uri);
    } else {
        FUZZ_CHECK(ec == chstate::make_error_code(chstate::errc::invalid_configuration), fuzz::show(uri));
        FUZZ_CHECK(!diag.message.empty(), fuzz::show(uri));
    }
    // The throwing form agrees and throws chstate::error only.
    try {
        (void)config::from_uri(uri);
        FUZZ_CHECK(!ec, "throwing form succeeded where the ec form failed: " + fuzz::show(uri));
    } catch (const chstate::error& e) {
        FUZZ_CHECK(ec && e.code() == ec, "throwing form failed where the ec form did not: " + fuzz::show(uri));
    }

    // 2. The password never reaches a message or the redacted URI.
    for (std::string with : {std::string(marker), std::string(marker) + "%0A", std::string(marker) + "%00x"}) {
        if (uri.find(marker) != std::string_view::npos)
            break;
        if (auto replaced = replace_password(uri, with)) {
            chstate::error_code ec2;
            chstate::diagnostics diag2;
            config c2 = config::from_uri(*replaced, ec2, diag2);
            FUZZ_CHECK(diag2.message.find(marker) == std::string::npos,
                       "password in message: " + fuzz::show(diag2.message) + " for " + fuzz::show(*replaced));
            if (!ec2)
                FUZZ_CHECK(c2.redacted_uri().find(marker) == std::string::npos, fuzz::show(*replaced));
        }
    }

    // 3. from_environment with the overrides.
    if (parts.size() > 1) {
        std::map<std::string, std::string> vars;
        std::string password_key;
        for (std::size_t i = 1; i < parts.size(); ++i) {
            const auto eq = parts[i].find('=');
            if (eq == std::string_view::npos)
                continue;
            const std::string key(parts[i].substr(0, eq));
            const std::string name = key == "URI" ? "MELTANO_STATE_BACKEND_URI" : "MELTANO_STATE_BACKEND_CLICKHOUSE_" + key;
            vars[name] = std::string(parts[i].substr(eq + 1));
        }
        chstate::error_code eec;
        chstate::diagnostics ediag;
        config ec_cfg;
        try {
            ec_cfg = config::from_environment(make_env(vars), eec, ediag);
        } catch (const std::exception& e) {
            FUZZ_CHECK(false, std::string("from_environment(ec) threw: ") + e.what() + " for " + fuzz::show(input));
        }
        if (!eec) {
            // Overrides are checked for control characters as read; a URI's by from_uri.
            FUZZ_CHECK(!fuzz::has_control_character(ec_cfg.host) && !fuzz::has_control_character(ec_cfg.user) &&
                           !fuzz::has_control_character(ec_cfg.password) &&
                           !fuzz::has_control_character(ec_cfg.database) &&
                           !fuzz::has_control_character(ec_cfg.store.schema) &&
                           !fuzz::has_control_character(ec_cfg.store.table),
                       fuzz::show(input));
            FUZZ_CHECK(!ec_cfg.store.schema.empty() && !ec_cfg.store.table.empty(), fuzz::show(input));
        }
        // The password override (kept, with a marker in front) never reaches the message.
        const std::string pw_name = "MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD";
        if (auto it = vars.find(pw_name); it != vars.end()) {
            it->second = std::string(marker) + it->second;
            chstate::error_code e2;
            chstate::diagnostics d2;
            (void)config::from_environment(make_env(vars), e2, d2);
            bool marker_elsewhere = false;
            for (const auto& [k, v] : vars)
                marker_elsewhere = marker_elsewhere || (k != pw_name && v.find(marker) != std::string::npos);
            if (!marker_elsewhere)
                FUZZ_CHECK(d2.message.find(marker) == std::string::npos,
                           "password override in message: " + fuzz::show(d2.message));
        }
    }
    return 0;
}
