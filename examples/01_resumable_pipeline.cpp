// 01 — a resumable incremental pipeline on the embedded engine.
//
// The "source" is a table of 100 orders. Each run copies at most
// --batches batches of 10 orders to the "destination" (stdout), and after
// every batch bookmarks the last order id in chstate with update(): a
// partial state, merged onto what is stored, exactly as a Singer tap's
// bookmarks are. Stop it part-way (the batch limit stands in for a crash or
// a deploy) and run it again: it resumes from the bookmark. When the source
// is exhausted it writes a completed state.
//
//   01_resumable_pipeline [--batches N] [--reset] [URI]
//   URI defaults to $MELTANO_STATE_BACKEND_URI, else chdb:.cache/example-state
#include <chstate/chstate.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr std::int64_t source_rows = 100;
constexpr std::int64_t batch_size = 10;
const std::string state_id = "dev:tap-orders-to-target-stdout";

asio::awaitable<void> run_pipeline(chstate::embedded_state_store& store, int max_batches) {
    // Where did the last run get to?
    std::optional<chstate::state> saved = co_await store.async_get(state_id, asio::use_awaitable);
    std::int64_t bookmark = 0;
    if (saved) {
        json::object view = saved->merged();
        if (auto* b = view.if_contains("singer_state"))
            bookmark = b->at("bookmarks").at("orders").at("last_id").to_number<std::int64_t>();
        std::cout << "resuming from bookmark: orders.last_id = " << bookmark
                  << (saved->is_complete() ? " (previous sync completed)" : "") << "\n";
    } else {
        std::cout << "no bookmark for " << state_id << ": starting from the beginning\n";
    }

    int batches = 0;
    while (bookmark < source_rows && batches < max_batches) {
        std::int64_t last = std::min(bookmark + batch_size, source_rows);
        std::cout << "  copied orders " << bookmark + 1 << ".." << last << "\n";
        bookmark = last;
        ++batches;
        // Bookmark progress: a partial state, deep-merged under the lock.
        chstate::state progress;
        progress.state_id = state_id;
        progress.partial_state = {{"singer_state", {{"bookmarks", {{"orders", {{"last_id", bookmark}}}}}}}};
        co_await store.async_update(std::move(progress), asio::use_awaitable);
    }

    if (bookmark >= source_rows) {
        chstate::state done;
        done.state_id = state_id;
        done.completed_state = {{"singer_state", {{"bookmarks", {{"orders", {{"last_id", bookmark}}}}}}}};
        co_await store.async_set(std::move(done), asio::use_awaitable);
        std::cout << "source exhausted: completed state written (orders.last_id = " << bookmark << ")\n";
    } else {
        std::cout << "stopped after " << batches << " batches at orders.last_id = " << bookmark
                  << "; run again to resume\n";
    }
}

} // namespace

constexpr const char* usage = "usage: 01_resumable_pipeline [--batches N] [--reset] [URI]\n"
                              "  copies 100 orders in batches of 10, bookmarking after each; stops after N\n"
                              "  batches (default 4); run it again to resume. --reset starts over.\n"
                              "  URI: a chdb: URI (default: $MELTANO_STATE_BACKEND_URI, else chdb:.cache/example-state)\n";

int main(int argc, char** argv) {
    int max_batches = 4;
    bool reset = false;
    std::string uri;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            std::cout << usage;
            return 0;
        }
        if (arg == "--batches") {
            char* end = nullptr;
            const long n = i + 1 < argc ? std::strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *end != '\0' || n < 1 || n > 1000) {
                std::cerr << "--batches takes a number from 1 to 1000\n" << usage;
                return 2;
            }
            max_batches = static_cast<int>(n);
            ++i;
        } else if (arg == "--reset") {
            reset = true;
        } else if (arg.starts_with("-") || !uri.empty()) {
            std::cerr << "unexpected argument \"" << arg << "\"\n" << usage;
            return 2;
        } else {
            uri = arg;
        }
    }
    if (uri.empty()) {
        const char* env = std::getenv("MELTANO_STATE_BACKEND_URI");
        uri = env ? env : "chdb:.cache/example-state";
    }
    try {
        chstate::config cfg = chstate::config::from_uri(uri);
        if (cfg.engine != chstate::config::engine_kind::embedded) {
            std::cerr << "this example runs on the embedded engine; give a chdb: URI\n";
            return 2;
        }
        std::cout << "state store: " << cfg.redacted_uri() << "\n";
        chstate::embedded_state_store store{chstate::chdb_transport({.path = cfg.embedded_path}), cfg.store};
        if (reset)
            store.delete_state(state_id);

        asio::io_context ioc;
        auto done = asio::co_spawn(ioc, run_pipeline(store, max_batches), asio::use_future);
        ioc.run();
        done.get();
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
