// Tests of include/chstate/manual_clock.hpp and clock.hpp: simulated and real time.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

// ---- clocks ---------------------------------------------------------------------------

TEST_CASE("manual_clock: waits complete in deadline order when time is advanced") {
    asio::io_context ioc;
    const time_point start{std::chrono::seconds{1767225600}};
    manual_clock clock(start);
    CHECK(clock.now() == start);
    std::vector<int> order;
    clock.async_wait(ioc.get_executor(), 3s, [&](error_code) { order.push_back(3); });
    clock.async_wait(ioc.get_executor(), 1s, [&](error_code) { order.push_back(1); });
    clock.async_wait(ioc.get_executor(), 2s, [&](error_code) { order.push_back(2); });
    ioc.run(); // returns at once: waits are not outstanding work
    CHECK(order.empty());
    clock.advance(2s);
    ioc.restart();
    ioc.run();
    CHECK(order == std::vector<int>{1, 2});
    CHECK(clock.pending_waits() == 1);
    clock.advance(1s);
    ioc.restart();
    ioc.run();
    CHECK(order == std::vector<int>{1, 2, 3});
    CHECK(clock.now() == start + 3s);
}

TEST_CASE("manual_clock: run() jumps time forward, no real sleeping") {
    asio::io_context ioc;
    manual_clock clock;
    int ticks = 0;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < 10; ++i) {
                co_await clock.async_wait(co_await asio::this_coro::executor, 5min, asio::use_awaitable);
                ++ticks;
            }
        },
        asio::detached);
    auto wall = std::chrono::steady_clock::now();
    auto elapsed = clock.run(ioc);
    CHECK(ticks == 10);
    CHECK(elapsed == 50min);
    CHECK(std::chrono::steady_clock::now() - wall < 5min); // not one of the waits was slept out
}

TEST_CASE("manual_clock: copies share time; skewed() reads an offset") {
    manual_clock a;
    manual_clock b = a;
    auto ahead = a.skewed(90s);
    a.advance(10s);
    CHECK(b.now() == a.now());
    CHECK(ahead.now() == a.now() + 90s);
    CHECK(a.skewed(-5s).now() == a.now() - 5s);
}

TEST_CASE("manual_clock: with_wall_steps() steps the wall clock of every copy; steady_now() never steps") {
    manual_clock base;
    manual_clock wall = base.skewed(1h).with_wall_steps();
    manual_clock held = wall; // as a store holds its copy
    const auto steady = held.steady_now();
    CHECK(steady == base.steady_now());
    CHECK(steady == std::chrono::duration_cast<duration>(base.now().time_since_epoch()));
    wall.step_wall(-90min);
    CHECK(held.now() == base.now() - 30min);
    CHECK(held.steady_now() == steady); // neither skew nor steps
    base.advance(5s);
    CHECK(held.steady_now() == steady + 5s);
    CHECK(held.now() == base.now() - 30min);
    CHECK(detail::steady_ms(held) == static_cast<std::uint64_t>((steady + 5s).count()));
    CHECK_THROWS_AS(base.step_wall(1s), std::logic_error); // a plain handle has no steps
    // real_clock: steady time from steady_clock, whatever the wall clock does
    real_clock real;
    const auto a = real.steady_now();
    CHECK(real.steady_now() >= a);
}

TEST_CASE("manual_clock: a cancelled wait completes with operation_aborted") {
    asio::io_context ioc;
    manual_clock clock;
    asio::cancellation_signal sig;
    error_code got;
    clock.async_wait(ioc.get_executor(), 10s, asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { got = ec; }));
    sig.emit(asio::cancellation_type::terminal);
    ioc.run();
    CHECK(got == asio::error::operation_aborted);
    CHECK(clock.pending_waits() == 0);
}

TEST_CASE("manual_clock: run() stops at its simulated limit") {
    asio::io_context ioc;
    manual_clock clock;
    bool fired = false;
    clock.async_wait(ioc.get_executor(), 2h, [&](error_code) { fired = true; });
    clock.run(ioc, 1h);
    CHECK_FALSE(fired);
    CHECK(clock.pending_waits() == 1);
}

TEST_CASE("real_clock waits on a steady timer") {
    asio::io_context ioc;
    real_clock clock;
    auto start = std::chrono::steady_clock::now();
    bool done = false;
    clock.async_wait(ioc.get_executor(), 20ms, [&](error_code ec) { done = !ec; });
    ioc.run();
    CHECK(done);
    CHECK(std::chrono::steady_clock::now() - start >= 20ms);
}
