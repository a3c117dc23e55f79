// Compile-cost probe (scripts/compile-cost.sh): the smallest program that
// uses chstate's store over HTTP — get and set through http_state_store, as
// the README's HTTP snippet builds it. Compiled, never run by the script
// (it would need a server; CHSTATE_COMPILE_COST_URI names one if you run it).
#include <chstate/transport/http.hpp>
#include <chstate/store.hpp>

#include <boost/asio/thread_pool.hpp>

#include <cstdlib>
#include <iostream>

int main() {
    boost::asio::thread_pool threads(2);
    const char* uri = std::getenv("CHSTATE_COMPILE_COST_URI");
    auto cfg = chstate::config::from_uri(uri ? uri : "clickhouse://default:@localhost:8123/default");
    chstate::http_state_store store{chstate::http_transport(threads.get_executor(), chstate::make_http_options(cfg)),
                                    cfg.store};
    chstate::state s{"compile-cost:job"};
    s.partial_state = {{"bookmarks", {{"users", 42}}}};
    store.set(s);
    auto saved = store.get("compile-cost:job");
    std::cout << (saved ? chstate::serialize_json(saved->merged()) : std::string("no state")) << "\n";
    threads.join();
}
