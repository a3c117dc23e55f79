// docs/simulated-time.md, second block: a whole
// program, verbatim between the snippet markers
// (tests/readme/check_snippets.py compares them); tests/readme/run.sh runs
// it and fails when it returns non-zero.
// [snippet simulated-job]
#include <chstate/chstate.hpp>
#include <chstate/testing/simulated.hpp>   // simulated_clickhouse, simulated_transport

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <iostream>

namespace asio = boost::asio;

// Your code: bookmarks progress with update(), which takes the state id's lock.
// A template, so production passes a chstate::embedded_state_store or an
// http_state_store and the test a store on simulated time.
template <class Store>
asio::awaitable<chstate::error_code> save_bookmark(Store& store, std::int64_t last_id) {
    chstate::state progress{"dev:orders"};
    progress.partial_state["bookmarks"] = {{"orders", last_id}};
    auto [ec, written] = co_await store.async_update(progress, asio::as_tuple(asio::use_awaitable));
    co_return ec;   // errc::state_id_locked: another run holds the lock
}

// The test: a rival holds the lock and never releases it.
int main() {
    const auto wall_start = std::chrono::steady_clock::now();
    int failures = 0;
    auto check = [&](bool ok, const char* what) {
        std::cout << (ok ? "ok: " : "FAILED: ") << what << "\n";
        failures += ok ? 0 : 1;
    };

    asio::io_context ioc;
    chstate::manual_clock clock;                                 // simulated time
    const auto simulated_start = clock.now();
    auto server = chstate::simulated_clickhouse::create(clock);   // one in-memory ClickHouse
    chstate::store_options opts;                                 // timeout 30 s, stale_age 300 s, settle 1 s
    opts.lock.mode = chstate::lock_mode::seed_compatible;        // the protocol Meltano shares
    using sim_store = chstate::basic_state_store<chstate::simulated_transport, chstate::manual_clock>;
    sim_store mine(ioc.get_executor(), chstate::simulated_transport(server, ioc.get_executor(), 0), opts, clock);
    sim_store rival(ioc.get_executor(), chstate::simulated_transport(server, ioc.get_executor(), 1), opts, clock);

    // A rival run takes the lock and dies without releasing it.
    auto taken = rival.async_acquire_lock("dev:orders", asio::use_future);
    clock.run(ioc);
    auto abandoned = taken.get();

    // Your job waits for the lock, retrying each second, and gives up after the timeout.
    auto job = asio::co_spawn(ioc, save_bookmark(mine, 40), asio::use_future);
    auto waited = clock.run(ioc);   // jumps from wait to wait
    check(job.get() == chstate::errc::state_id_locked, "the job fails with state_id_locked");
    check(waited == opts.lock.timeout, "after exactly the 30 s lock timeout");

    // Five minutes on, the rival's lock is older than the stale age: the job
    // deletes it, takes the lock and writes.
    clock.advance(opts.lock.stale_age);
    job = asio::co_spawn(ioc, save_bookmark(mine, 40), asio::use_future);
    waited = clock.run(ioc);
    check(!job.get(), "past the stale age the job proceeds");
    check(waited == opts.lock.settle, "after the 1 s settle, without a retry");
    auto saved = mine.async_get("dev:orders", asio::use_future);
    clock.run(ioc);
    auto stored = saved.get();
    check(stored && stored->merged()["bookmarks"].at("orders").as_int64() == 40, "the bookmark is 40");

    using namespace std::chrono;
    std::cout << duration_cast<seconds>(clock.now() - simulated_start).count() << " s of simulated time in "
              << duration_cast<microseconds>(steady_clock::now() - wall_start).count() << " us\n";
    return failures ? 1 : 0;
}
// [/snippet]
