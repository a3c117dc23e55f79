// tests/consumers: a program using chstate over HTTP, built against chstate
// with nothing but chstate::http (CMake), dependency('chstate-http') (Meson)
// or `pkg-config chstate-http`. scripts/check-consumers.sh builds and runs it.
//
//   http_check             build the README's HTTP store from the environment
//                          (MELTANO_STATE_BACKEND_*); sends nothing
//   http_check get ID      also set ID, read it back and compare (one round
//                          trip through Boost.JSON, Boost.URL and Beast)
#include <chstate/chstate.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/thread_pool.hpp>

#include <iostream>
#include <string_view>

namespace asio = boost::asio;

int main(int argc, char** argv) {
    const bool get = argc == 3 && std::string_view(argv[1]) == "get";
    if (!get && argc != 1) {
        std::cerr << "usage: http_check [get ID]\n";
        return 2;
    }
    try {
        asio::thread_pool threads(2);
        auto cfg = chstate::config::from_environment();
        chstate::http_state_store store{chstate::http_transport(threads.get_executor(),
                                                                chstate::make_http_options(cfg)),
                                        cfg.store};
        if (!get) {
            std::cout << "http_check: store for " << cfg.redacted_uri() << " built (no request sent)\n";
            return 0;
        }
        chstate::state s{argv[2]};
        s.partial_state = {{"bookmarks", {{"consumer", 1}}}};
        store.set(s);
        auto back = store.get(argv[2]);
        const bool ok = back && back->merged()["bookmarks"].at("consumer").as_int64() == 1;
        store.delete_state(argv[2]);
        std::cout << "http_check: get " << argv[2] << " from " << cfg.redacted_uri() << ": "
                  << (ok ? "ok" : "FAILED (the state read back differs)") << "\n";
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "http_check: error: " << e.what() << "\n";
        return 1;
    }
}
