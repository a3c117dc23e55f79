// README "In fifteen lines", the HTTP block: the lines between the snippet
// markers are the README's, verbatim (tests/readme/check_snippets.py
// compares them). The only README file that includes transport/http.hpp
// (Boost.Beast is slow to compile). tests/readme/run.sh runs it against the
// test server (CHSTATE_TEST_SERVER_DIR), the settings coming from the
// environment as the snippet's comment says.
#include <chstate/chstate.hpp>

#include <boost/asio/thread_pool.hpp>

#include <iostream>

namespace asio = boost::asio;

// [snippet http]
#include <chstate/transport/http.hpp>   // Boost.Beast + OpenSSL; not in chstate.hpp

asio::thread_pool threads(2);
auto cfg = chstate::config::from_environment();   // MELTANO_STATE_BACKEND_URI + overrides
chstate::http_state_store store{chstate::http_transport(threads.get_executor(),
                                                        chstate::make_http_options(cfg)),
                                cfg.store};
// [/snippet]

int main() {
    try {
        std::cout << "readme http: " << cfg.redacted_uri() << ", schema " << cfg.store.schema << "\n";
        chstate::state s{"readme:http"};
        s.partial_state = {{"bookmarks", {{"users", 7}}}};
        store.set(s);
        auto got = store.get("readme:http");
        const bool ok = got && got->merged()["bookmarks"].at("users").as_int64() == 7;
        store.delete_state("readme:http");
        std::cout << "readme http: " << (ok ? "ok" : "FAILED: the state read back differs") << "\n";
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::cout << "readme http: FAILED: " << e.what() << "\n";
        return 1;
    }
}
