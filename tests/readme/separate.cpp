// docs/using-chstate.md, "Compiling chstate once": the
// chstate.cpp block between the snippet markers is the README's, verbatim
// (tests/readme/check_snippets.py compares them). Built as the README's
// CMake form builds a program (CHSTATE_SEPARATE_COMPILATION, chstate::http;
// not chstate_compiled_boost, which holds these definitions already), with
// a main that uses what <chstate/src.hpp> defines: a URI parsed, and an
// HTTP transport refusing an option before it connects (no server needed).
// tests/readme/run.sh runs it.
#ifndef CHSTATE_SEPARATE_COMPILATION
#error "build this file with CHSTATE_SEPARATE_COMPILATION, as the README says"
#endif

// [snippet separate-compilation]
// chstate.cpp — the one file that holds chstate's compiled definitions
#include <chstate/src.hpp>
// [/snippet]

#include <chstate/config.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/io_context.hpp>

#include <iostream>
#include <string>

int main() {
    int failures = 0;
    auto check = [&](bool ok, const std::string& what) {
        std::cout << (ok ? "  ok: " : "  FAILED: ") << what << "\n";
        failures += ok ? 0 : 1;
    };
    std::cout << "readme separate compilation:\n";
    const auto c = chstate::config::from_uri("clickhouse://u:p@db.example:9000/analytics?secure=true");
    check(c.host == "db.example" && c.port == 9000 && c.database == "analytics" && c.secure,
          "config::from_uri, compiled in chstate.cpp");

    boost::asio::io_context io;
    chstate::http_transport http(io.get_executor(), {.host = "db.example\r\nX-Injected: 1"});
    chstate::statement select{"SELECT 1", {}, "TabSeparated", {}, true, {}};
    chstate::diagnostics diag;
    chstate::error_code result = chstate::make_error_code(chstate::errc::protocol_error);
    http.async_execute(
        select, [](std::string_view) { return chstate::error_code{}; }, diag,
        [&](chstate::error_code ec) { result = ec; });
    io.run();
    check(result == chstate::errc::invalid_configuration && diag.message.starts_with("http_options.host"),
          "http_transport, compiled in chstate.cpp, refuses a host with CR/LF before connecting: " + diag.message);
    return failures == 0 ? 0 : 1;
}
