// 02 — the README's fifteen-line coroutine example, compiled so it cannot rot.
// Each run bookmarks the newest "user" it copied; run it twice and the
// second run starts after the first run's bookmark.
//
//   02_coroutine_quickstart [DATA_DIR]     (default .cache/quickstart-state)
#include <chstate/chstate.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <iostream>

namespace asio = boost::asio;

// Stands in for the pipeline step: "copies" ten users newer than `since`.
asio::awaitable<std::int64_t> copy_users_after(std::int64_t since) {
    std::cout << "copying users after id " << since << "\n";
    co_return since + 10;
}

// --- as in the README ---
asio::awaitable<void> sync_users(chstate::embedded_state_store& store) {
    auto saved = co_await store.async_get("dev:tap-github-to-target-ch", asio::use_awaitable);
    std::int64_t since = saved ? saved->merged()["bookmarks"].at("users").as_int64() : 0;

    std::int64_t newest = co_await copy_users_after(since);    // your pipeline step

    chstate::state progress{"dev:tap-github-to-target-ch"};
    progress.partial_state["bookmarks"] = {{"users", newest}};
    co_await store.async_update(progress, asio::use_awaitable); // locked merge, Meltano's rules
}
// ---

int main(int argc, char** argv) {
    std::string path = argc > 1 ? argv[1] : ".cache/quickstart-state";
    chstate::embedded_state_store store{chstate::chdb_transport({.path = path})};
    asio::io_context ioc;
    asio::co_spawn(ioc, sync_users(store), [](std::exception_ptr e) {
        if (e)
            std::rethrow_exception(e);
    });
    ioc.run();
    std::cout << "bookmark now: " << boost::json::serialize(store.get("dev:tap-github-to-target-ch")->merged())
              << "\n";
}
