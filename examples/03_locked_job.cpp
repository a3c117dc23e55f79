// 03 — a job that holds its state id's lock for its whole run.
//
// On the embedded engine the store runs the strict lock (lock_mode::automatic):
// the lease carries a fencing token, a heartbeat renews it in the background,
// and each batch's bookmark is written under the lease with set(lease, s),
// which the server refuses once a newer grant exists. A lost lease stops
// the job before its next batch.
//
//   03_locked_job [DATA_DIR]     (default .cache/locked-job-state)
#include <chstate/chstate.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <iostream>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<void> run_job(chstate::embedded_state_store& store) {
    const std::string id = "dev:tap-orders-to-target-stdout";
    auto lease = co_await store.async_acquire_lock(id, asio::use_awaitable);
    std::cout << "holding " << id << ", fencing token " << lease.token() << "\n";

    // Renew every 20 s (a third of lease_ttl); on_lost runs once if a renewal fails.
    auto lost = std::make_shared<std::atomic<bool>>(false);
    lease.start_heartbeat(20s, [lost](chstate::error_code ec) {
        lost->store(true);
        std::cout << "lease lost: " << ec.message() << "\n";
    });

    auto saved = co_await store.async_get(id, asio::use_awaitable);
    std::int64_t last = 0;
    if (saved)
        if (auto* v = saved->merged().if_contains("last_id"))
            last = v->as_int64();

    for (int batch = 0; batch < 3 && !lost->load(); ++batch) {
        last += 10; // stands in for copying ten rows
        chstate::state bookmark{id, {}, {{"last_id", last}}};
        co_await store.async_set(lease, bookmark, asio::use_awaitable); // throws errc::lock_lost if superseded
        std::cout << "  batch " << batch + 1 << ": bookmark last_id = " << last << "\n";
    }
    co_await lease.async_release(asio::use_awaitable);
    std::cout << "released; the next run starts after last_id = " << last << "\n";
}

int main(int argc, char** argv) {
    std::string path = argc > 1 ? argv[1] : ".cache/locked-job-state";
    chstate::embedded_state_store store{chstate::chdb_transport({.path = path})};
    asio::io_context ioc;
    asio::co_spawn(ioc, run_job(store), [](std::exception_ptr e) {
        if (e)
            std::rethrow_exception(e);
    });
    ioc.run();
}
