// docs/simulated-time.md, first block: the lines
// between the snippet markers are the README's, verbatim
// (tests/readme/check_snippets.py compares them). It runs, and what the
// README says of it is checked after it.
#include <chstate/chstate.hpp>
#include <chstate/testing/simulated.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <iostream>

namespace asio = boost::asio;

int main() {
    const auto wall_start = std::chrono::steady_clock::now();
// [snippet simulated-settle]
asio::io_context ioc;
chstate::manual_clock clock;                                 // shared timeline; copies see the same time
auto server = chstate::simulated_clickhouse::create(clock);   // in-memory ClickHouse on that timeline
chstate::store_options opts;
opts.lock.mode = chstate::lock_mode::seed_compatible;
chstate::basic_state_store<chstate::simulated_transport, chstate::manual_clock>
    store(ioc.get_executor(), chstate::simulated_transport(server, ioc.get_executor()), opts, clock);
auto lease = store.async_acquire_lock("job", asio::use_future);
auto elapsed = clock.run(ioc);   // runs ioc; jumps time when only waits remain
// elapsed == std::chrono::seconds(1): exactly the settle time, in microseconds of real time
// [/snippet]
    const auto real = std::chrono::steady_clock::now() - wall_start;
    int failures = 0;
    auto check = [&](bool ok, const char* what) {
        std::cout << (ok ? "  ok: " : "  FAILED: ") << what << "\n";
        failures += ok ? 0 : 1;
    };
    std::cout << "readme simulated-settle:\n";
    check(lease.get().held(), "the lease is held");
    check(elapsed == std::chrono::seconds(1), "clock.run returned exactly 1 s of simulated time");
    // (no fixed wall-clock limit: a busy machine may take its time; a store
    // that slept the settle out would take at least the simulated second)
    check(real < elapsed, "in less real time than the simulated time that passed");
    std::cout << "readme simulated-settle: "
              << std::chrono::duration_cast<std::chrono::microseconds>(real).count() << " us real; "
              << (failures ? "FAILED" : "ok") << "\n";
    return failures ? 1 : 0;
}
