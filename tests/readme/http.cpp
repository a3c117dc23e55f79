// README "Quickstart", the HTTP block: the lines between the snippet
// markers are the README's, verbatim (tests/readme/check_snippets.py
// compares them). The only README file that includes transport/http.hpp
// (Boost.Beast is slow to compile). tests/readme/run.sh runs it against the
// test server (CHSTATE_TEST_SERVER_DIR), the settings coming from the
// environment as the snippet's comment says.
#include <chstate/chstate.hpp>

#include <boost/asio/thread_pool.hpp>

#include <iostream>

#include <unistd.h>

namespace asio = boost::asio;

// [snippet http]
#include <chstate/transport/http.hpp>   // Boost.Beast + OpenSSL; not in chstate.hpp

asio::thread_pool threads(2);
auto cfg = chstate::config::from_environment();   // MELTANO_STATE_BACKEND_URI + overrides
chstate::http_state_store store{chstate::http_transport(threads.get_executor(),
                                                        chstate::make_http_options(cfg)),
                                cfg.store};
// [/snippet]

// [snippet open]
#include <chstate/open.hpp>   // link chstate::http: Boost.Beast + OpenSSL

// MELTANO_STATE_BACKEND_URI=chdb:///var/lib/pipeline-state, or clickhouse://user:pw@host:8123/db
std::string bookmarks_of(const std::string& state_id) {
    auto store = chstate::open(chstate::config::from_environment());
    auto saved = store.get(state_id);
    return saved ? chstate::serialize_json(saved->merged()["singer_state"]) : "no state";
}
// [/snippet]

#include <cstdlib>
#include <filesystem>

/// The open snippet on the embedded engine: the same function, a chdb: URI.
bool open_on_chdb() {
    auto dir = std::filesystem::temp_directory_path() / ("chstate-readme-open-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    ::setenv("MELTANO_STATE_BACKEND_URI", ("chdb://" + dir.string()).c_str(), 1);
    {
        auto store = chstate::open(chstate::config::from_environment());
        chstate::state s{"readme:open"};
        s.partial_state = {{"singer_state", {{"bookmarks", {{"users", 8}}}}}};
        store.set(s);
    }
    const std::string got = bookmarks_of("readme:open");
    const std::string missing = bookmarks_of("readme:none");
    std::filesystem::remove_all(dir);
    std::cout << "readme open (chdb): " << got << ", " << missing << "\n";
    return got == R"({"bookmarks": {"users": 8}})" && missing == "no state";
}

int main() {
    try {
        std::cout << "readme http: " << cfg.redacted_uri() << ", schema " << cfg.store.schema << "\n";
        chstate::state s{"readme:http"};
        s.partial_state = {{"singer_state", {{"bookmarks", {{"users", 7}}}}}};
        store.set(s);
        auto got = store.get("readme:http");
        bool ok = got && got->merged()["singer_state"].at("bookmarks").at("users").as_int64() == 7;
        // The open snippet over the same HTTP settings, then on chDB.
        const std::string via_open = bookmarks_of("readme:http");
        std::cout << "readme open (http): " << via_open << "\n";
        ok = ok && via_open == R"({"bookmarks": {"users": 7}})" && open_on_chdb();
        store.delete_state("readme:http");
        std::cout << "readme http: " << (ok ? "ok" : "FAILED: the state read back differs") << "\n";
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::cout << "readme http: FAILED: " << e.what() << "\n";
        return 1;
    }
}
