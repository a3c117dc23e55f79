// README "Quickstart": the block between the snippet markers is the
// README's, verbatim (tests/readme/check_snippets.py compares them). It runs:
// tests/readme/run.sh starts it twice in one folder; the second run must
// resume from the first run's bookmark.
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <iostream>

// Stands in for the reader's pipeline step: "copies" ten users newer than
// `since` and says where it started, so the runner can check the bookmark.
boost::asio::awaitable<std::int64_t> copy_users_after(std::int64_t since) {
    std::cout << "copy_users_after " << since << "\n";
    co_return since + 10;
}

// [snippet quickstart]
#include <chstate/chstate.hpp>
namespace asio = boost::asio;

asio::awaitable<void> sync_users(chstate::embedded_state_store& store) {
    auto saved = co_await store.async_get("dev:tap-github-to-target-ch", asio::use_awaitable);
    // Meltano's shape: {"singer_state": {"bookmarks": {"users": N}}}
    std::int64_t since = saved ? saved->merged()["singer_state"].at("bookmarks").at("users").as_int64() : 0;

    std::int64_t newest = co_await copy_users_after(since);    // your pipeline step

    chstate::state progress{"dev:tap-github-to-target-ch"};
    progress.partial_state["singer_state"] = {{"bookmarks", {{"users", newest}}}};
    co_await store.async_update(progress, asio::use_awaitable); // locked merge, Meltano's rules
}

int main() {
    chstate::embedded_state_store store{chstate::chdb_transport({.path = "my-pipeline-state"})};
    asio::io_context ioc;
    asio::co_spawn(ioc, sync_users(store), [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
    ioc.run();
}
// [/snippet]
