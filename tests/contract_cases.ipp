// The store contract, written once: doctest templated test cases over a
// fixture (tests/contract.hpp says what a fixture provides). Each transport's
// test file includes it once, inside its suite, with
// CHSTATE_CONTRACT_FIXTURES naming its fixtures. No #include here
// (contract.hpp and support.hpp have them all).

using namespace chstate;
namespace asio = boost::asio;
using namespace std::chrono_literals;

using namespace chstate::test::contract;

CONTRACT_CASE("get of an unknown id is 'no state', not an empty state") {
    store_under_test<fixture> t;
    CHECK_FALSE(t.store.get("nobody").has_value());
}

CONTRACT_CASE("set then get round-trips both parts") {
    store_under_test<fixture> t;
    auto s = make_state("dev:tap-a-to-target-b", R"({"singer_state":{"bookmarks":{"users":{"id":41}}}})",
                        R"({"singer_state":{"bookmarks":{"users":{"id":40}}}})");
    t.store.set(s);
    auto got = t.store.get(s.state_id);
    REQUIRE(got.has_value());
    CHECK(*got == s);
}

CONTRACT_CASE("empty parts are stored as NULL and read back as {}") {
    store_under_test<fixture> t;
    t.store.set(state{"only-id", {}, {}});
    CHECK(t.raw("SELECT isNull(partial_state), isNull(completed_state) FROM " + t.table()) == "1\t1\n");
    auto got = t.store.get("only-id");
    REQUIRE(got.has_value());
    CHECK(got->partial_state.empty());
    CHECK(got->completed_state.empty());
}

CONTRACT_CASE("the newest write wins") {
    store_under_test<fixture> t;
    for (int i = 0; i < 5; ++i)
        t.store.set(make_state("job", "{}", R"({"n":)" + std::to_string(i) + "}"));
    auto got = t.store.get("job");
    REQUIRE(got);
    CHECK(got->completed_state.at("n").as_int64() == 4);
}

CONTRACT_CASE("update with an incomplete state merges its partial onto the stored partial") {
    store_under_test<fixture> t;
    t.store.set(make_state("job", R"({"a":{"x":1,"y":2},"keep":true})", R"({"done":1})"));
    auto written = t.store.update(make_state("job", R"({"a":{"y":20,"z":30},"list":[1]})", "{}"));
    auto expected = make_state("job", R"({"a":{"x":1,"y":20,"z":30},"keep":true,"list":[1]})", R"({"done":1})");
    CHECK(written == expected);
    CHECK(t.store.get("job") == expected);
}

CONTRACT_CASE("update with a complete state replaces the stored state") {
    store_under_test<fixture> t;
    t.store.set(make_state("job", R"({"old":1})", R"({"done":1})"));
    auto incoming = make_state("job", "{}", R"({"done":2})");
    CHECK(t.store.update(incoming) == incoming);
    CHECK(t.store.get("job") == incoming);
}

CONTRACT_CASE("update of an unknown id writes the incoming state") {
    store_under_test<fixture> t;
    auto incoming = make_state("fresh", R"({"p":1})", "{}");
    t.store.update(incoming);
    CHECK(t.store.get("fresh") == incoming);
}

CONTRACT_CASE("update leaves no lock row behind") {
    store_under_test<fixture> t;
    t.store.update(make_state("job", R"({"p":1})", "{}"));
    CHECK(t.raw("SELECT count() FROM " + t.lock_table() + " WHERE state_id = 'job'") == "0\n");
}

CONTRACT_CASE("delete_state removes the state") {
    store_under_test<fixture> t;
    t.store.set(make_state("a", R"({"p":1})", "{}"));
    t.store.set(make_state("b", R"({"p":2})", "{}"));
    t.store.delete_state("a");
    CHECK_FALSE(t.store.get("a"));
    CHECK(t.store.get("b"));
    CHECK(t.store.state_ids() == std::vector<std::string>{"b"});
}

CONTRACT_CASE("clear deletes under the lock") {
    store_under_test<fixture> t;
    t.store.set(make_state("a", R"({"p":1})", "{}"));
    t.store.clear("a");
    CHECK_FALSE(t.store.get("a"));
    CHECK(t.raw("SELECT count() FROM " + t.lock_table()) == "0\n");
}

CONTRACT_CASE("clear_all counts the states it removes") {
    store_under_test<fixture> t;
    CHECK(t.store.clear_all() == 0);
    for (int i = 0; i < 7; ++i)
        t.store.set(make_state("id" + std::to_string(i), R"({"p":1})", "{}"));
    t.store.set(make_state("id0", R"({"p":2})", "{}")); // a second version counts once
    CHECK(t.store.clear_all() == 7);
    CHECK(t.store.state_ids().empty());
    CHECK(t.store.clear_all() == 0);
}

CONTRACT_CASE("state_ids: no pattern and * list every id, sorted and distinct") {
    store_under_test<fixture> t;
    for (auto id : {"b", "a", "c", "a"})
        t.store.set(make_state(id, "{}", R"({"x":1})"));
    std::vector<std::string> all{"a", "b", "c"};
    CHECK(t.store.state_ids() == all);
    CHECK(t.store.state_ids("*") == all);
    CHECK(t.store.state_ids("") == all);
}

CONTRACT_CASE("state_ids: dev_a* does not match devXa (underscore is literal)") {
    store_under_test<fixture> t;
    for (auto id : {"dev_a1", "dev_a2", "devXa1", "dev_b1"})
        t.store.set(make_state(id, "{}", R"({"x":1})"));
    CHECK(t.store.state_ids("dev_a*") == std::vector<std::string>{"dev_a1", "dev_a2"});
}

CONTRACT_CASE("state_ids: % and backslash in ids are literal; ? matches one character") {
    store_under_test<fixture> t;
    for (auto id : {"100%done", "100xdone", "a\\b", "a\\\\b", "axb", "job1", "job12"})
        t.store.set(make_state(id, "{}", R"({"x":1})"));
    CHECK(t.store.state_ids("100%*") == std::vector<std::string>{"100%done"});
    CHECK(t.store.state_ids("a\\b") == std::vector<std::string>{"a\\b"});
    CHECK(t.store.state_ids("job?") == std::vector<std::string>{"job1"});
    CHECK(t.store.state_ids("job??") == std::vector<std::string>{"job12"});
    CHECK(t.store.state_ids("nomatch*").empty());
}

CONTRACT_CASE("get_all visits every state in id order") {
    store_under_test<fixture> t;
    std::vector<state> written;
    for (int i = 0; i < 50; ++i)
        written.push_back(make_state("s" + std::to_string(1000 + i), R"({"i":)" + std::to_string(i) + "}", "{}"));
    t.store.set_all(written);
    std::vector<state> seen;
    auto n = t.store.get_all([&](state&& s) { seen.push_back(std::move(s)); });
    CHECK(n == 50);
    CHECK(seen == written);
}

CONTRACT_CASE("get_all streams: the reply arrives in chunks smaller than the table") {
    fixture fx;
    test::counting_transport<typename fixture::transport_type> counting(fx.make_transport());
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    basic_state_store<decltype(counting)> store(counting, o);
    std::vector<state> many;
    const std::string padding(200, 'x');
    for (int i = 0; i < 40000; ++i)
        many.push_back(state{"s" + std::to_string(100000 + i), json::object{{"pad", padding}, {"i", i}}, {}});
    store.set_all(std::move(many));
    counting.stats().chunks = 0;
    counting.stats().largest_chunk = 0;
    counting.stats().bytes = 0;
    std::uint64_t sum = 0;
    auto n = store.get_all([&](state&& s) { sum += s.partial_state.at("i").as_int64(); });
    CHECK(n == 40000);
    CHECK(sum == 39999ULL * 40000 / 2);
    INFO("chunks=", counting.stats().chunks.load(), " largest=", counting.stats().largest_chunk.load(),
         " bytes=", counting.stats().bytes.load());
    CHECK(counting.stats().chunks > 1);
    CHECK(counting.stats().largest_chunk < counting.stats().bytes / 2);
}

CONTRACT_CASE("set_all writes every state with one INSERT (monotonic: after one version read)") {
    for (auto versions : {write_versions::monotonic, write_versions::clock}) {
        CAPTURE(int(versions));
        fixture fx;
        test::counting_transport<typename fixture::transport_type> counting(fx.make_transport());
        store_options o;
        o.schema = test::unique_schema(fixture::name);
        o.versions = versions;
        basic_state_store<decltype(counting)> store(counting, o);
        store.ensure_schema();
        store.set(make_state("bulk42", R"({"old":true})", "{}")); // the bulk write must supersede it
        auto before = counting.stats().statements.load();
        std::vector<state> states;
        for (int i = 0; i < 100; ++i)
            states.push_back(make_state("bulk" + std::to_string(i), R"({"i":)" + std::to_string(i) + "}", "{}"));
        store.set_all(states);
        CHECK(counting.stats().statements.load() - before == (versions == write_versions::monotonic ? 2 : 1));
        CHECK(store.state_ids("bulk*").size() == 100);
        CHECK(store.get("bulk42") == states[42]);
        store.set(make_state("bulk42", R"({"after":true})", "{}")); // and a later write supersedes the bulk one
        CHECK(store.get("bulk42")->partial_state == obj(R"({"after":true})"));
    }
}

CONTRACT_CASE("set_all refuses the whole batch when one state is invalid") {
    store_under_test<fixture> t;
    std::vector<state> states{make_state("ok", "{}", R"({"x":1})"), state{"", {}, {}}};
    CHECK_THROWS_AS(t.store.set_all(states), chstate::error);
    CHECK(t.store.state_ids().empty());
}

CONTRACT_CASE("copy copies both parts and keeps the source") {
    store_under_test<fixture> t;
    auto src = make_state("src", R"({"p":1})", R"({"c":1})");
    t.store.set(src);
    t.store.copy("src", "dst");
    CHECK(t.store.get("src") == src);
    auto dst = t.store.get("dst");
    REQUIRE(dst);
    CHECK(dst->partial_state == src.partial_state);
    CHECK(dst->completed_state == src.completed_state);
}

CONTRACT_CASE("move copies, then clears the source") {
    store_under_test<fixture> t;
    t.store.set(make_state("src", R"({"p":1})", R"({"c":1})"));
    t.store.move("src", "dst");
    CHECK_FALSE(t.store.get("src"));
    CHECK(t.store.get("dst"));
}

CONTRACT_CASE("merge folds the source's merged view into the destination as a partial update") {
    store_under_test<fixture> t;
    t.store.set(make_state("src", R"({"b":{"y":2}})", R"({"a":1,"b":{"x":1}})"));
    t.store.set(make_state("dst", R"({"b":{"z":3}})", R"({"done":true})"));
    auto written = t.store.merge("src", "dst");
    // Python's dict order, as Meltano's merge leaves it: dst's keys keep their place, new ones follow.
    auto expected = make_state("dst", R"({"b":{"z":3,"x":1,"y":2},"a":1})", R"({"done":true})");
    CHECK(written == expected);
    CHECK(t.store.get("dst") == expected);
}

CONTRACT_CASE("copy, move and merge from an unknown source fail with state_not_found") {
    store_under_test<fixture> t;
    auto expect_not_found = [](auto&& call) {
        try {
            call();
            FAIL("no error");
        } catch (const chstate::error& e) {
            CHECK(e.code() == errc::state_not_found);
        }
    };
    expect_not_found([&] { t.store.copy("nope", "dst"); });
    expect_not_found([&] { t.store.move("nope", "dst"); });
    expect_not_found([&] { t.store.merge("nope", "dst"); });
    CHECK_FALSE(t.store.get("dst"));
}

CONTRACT_CASE("hostile ids and values round-trip and never reach SQL text") {
    store_under_test<fixture> t;
    const std::string ids[] = {"x'); DROP TABLE state; --", "quote ' back \\ tab \t nl \n end",
                               "{state_id:String}", "`backtick`", "unicode ✓ 状态", std::string("nul\0inside", 10)};
    for (const auto& id : ids) {
        state s{id, json::object{{"v", id}}, json::object{{"k", "\\N"}}};
        t.store.set(s);
        auto got = t.store.get(id);
        REQUIRE(got);
        CHECK(*got == s);
    }
    CHECK(t.store.state_ids().size() == std::size(ids));
}

CONTRACT_CASE("a row written the way the seed writes it is read by the store") {
    store_under_test<fixture> t;
    t.store.ensure_schema();
    t.raw("INSERT INTO " + t.table() +
          " (state_id, partial_state, completed_state) VALUES "
          "('dev:seed', '{\"singer_state\":{\"bookmarks\":{\"t\":{\"v\":7}}}}', NULL)");
    auto got = t.store.get("dev:seed");
    REQUIRE(got);
    CHECK(got->partial_state == obj(R"({"singer_state":{"bookmarks":{"t":{"v":7}}}})"));
    CHECK(got->completed_state.empty());
    CHECK_FALSE(got->is_complete());
}

CONTRACT_CASE("a state written by the store is read by the seed's SELECT") {
    store_under_test<fixture> t;
    t.store.set(make_state("dev:ours", R"({"p":1})", R"({"c":{"d":2}})"));
    auto row = t.raw("SELECT partial_state, completed_state FROM " + t.table() +
                         " FINAL WHERE state_id = 'dev:ours' LIMIT 1",
                     "JSONEachRow");
    auto v = json::parse(row).as_object();
    CHECK(json::parse(v.at("partial_state").as_string()) == json::parse(R"({"p":1})"));
    CHECK(json::parse(v.at("completed_state").as_string()) == json::parse(R"({"c":{"d":2}})"));
}

CONTRACT_CASE("ensure_schema creates the seed's tables") {
    store_under_test<fixture> t;
    t.store.ensure_schema();
    t.store.ensure_schema(); // idempotent
    // Servers without DateTime64 (< 20.1) get chstate's own version column
    // (milliseconds since the epoch, see detail/statements.hpp); their
    // system.columns has no `position` (rows come in table order).
    const bool old_server = !detail::server_features::from_version(t.raw("SELECT version()")).datetime64;
    const std::string by_position = old_server ? "" : " ORDER BY position";
    auto engine = t.raw("SELECT engine_full FROM system.tables WHERE database = '" + t.options.schema +
                        "' AND name = 'state'");
    CHECK(engine.find("ReplacingMergeTree(updated_at)") != std::string::npos);
    CHECK(engine.find("ORDER BY state_id") != std::string::npos);
    auto columns = t.raw("SELECT name, type FROM system.columns WHERE database = '" + t.options.schema +
                         "' AND table = 'state'" + by_position);
    CHECK(columns == std::string("state_id\tString\npartial_state\tNullable(String)\ncompleted_state\tNullable(String)\n") +
                         (old_server ? "updated_at\tUInt64\n" : "updated_at\tDateTime64(3)\n"));
    auto lock_columns = t.raw("SELECT name, type FROM system.columns WHERE database = '" + t.options.schema +
                              "' AND table = 'state_lock'" + by_position);
    CHECK(lock_columns == "state_id\tString\nlock_id\tString\nlocked_at\tDateTime\n");
}

CONTRACT_CASE("bad input is a typed error and writes nothing") {
    store_under_test<fixture> t;
    auto expect_invalid = [](auto&& call) {
        try {
            call();
            FAIL("no error");
        } catch (const chstate::error& e) {
            CHECK(e.code() == errc::invalid_argument);
        }
    };
    expect_invalid([&] { t.store.set(state{"", {}, {}}); });
    expect_invalid([&] { t.store.get(""); });
    expect_invalid([&] { t.store.update(state{"", {}, {}}); });
    expect_invalid([&] { t.store.delete_state(""); });
    expect_invalid([&] { t.store.acquire_lock(""); });
    CHECK(t.store.state_ids().empty());
}

CONTRACT_CASE("a stored part that is not a JSON object is reported as corrupt_state") {
    store_under_test<fixture> t;
    t.store.ensure_schema();
    t.raw("INSERT INTO " + t.table() + " (state_id, partial_state, completed_state) VALUES ('bad', '[1,2', NULL)");
    try {
        t.store.get("bad");
        FAIL("no error");
    } catch (const chstate::error& e) {
        CHECK(e.code() == errc::corrupt_state);
        CHECK(std::string(e.what()).find("bad") != std::string::npos);
    }
}

CONTRACT_CASE("operations accept any completion token: coroutine, future, callback") {
    store_under_test<fixture> t;
    asio::io_context ioc;
    auto s = make_state("tokens", R"({"p":1})", "{}");
    // coroutine
    auto fut = asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<std::optional<state>> {
            co_await t.store.async_set(s, asio::use_awaitable);
            co_return co_await t.store.async_get("tokens", asio::use_awaitable);
        },
        asio::use_future);
    ioc.run();
    CHECK(fut.get() == s);
    // future
    auto ids = t.store.async_state_ids("tok*", asio::use_future).get();
    CHECK(ids == std::vector<std::string>{"tokens"});
    // callback, completing on the caller's io_context
    ioc.restart();
    std::optional<state> seen;
    bool on_ioc = false;
    t.store.async_get("tokens", asio::bind_executor(ioc, [&](error_code ec, std::optional<state> got) {
                          CHECK_FALSE(ec);
                          on_ioc = ioc.get_executor().running_in_this_thread();
                          seen = std::move(got);
                      }));
    ioc.run();
    CHECK(on_ioc);
    CHECK(seen == s);
    // deferred (the default token), awaited in a coroutine
    ioc.restart();
    auto fut2 = asio::co_spawn(
        ioc, [&]() -> asio::awaitable<std::uint64_t> { co_return co_await t.store.async_clear_all(); },
        asio::use_future);
    ioc.run();
    CHECK(fut2.get() == 1);
}

CONTRACT_CASE("diagnostics carry the server's message for a failing statement") {
    store_under_test<fixture> t;
    diagnostics diag;
    std::string out;
    statement bad{"SELECT nosuchfunction_xyz()", {}, "TabSeparated", {}, true};
    auto fut = t.transport.async_execute(
        bad, [&](std::string_view c) { out.append(c); return error_code{}; }, diag, asio::use_future);
    try {
        fut.get();
        FAIL("no error");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code().category() == clickhouse_category());
        CHECK(e.code().value() == 46);
        CHECK(e.code() == errc::server_error);
    }
    CHECK(diag.message.find("nosuchfunction_xyz") != std::string::npos);
}

// ---- the lock, on simulated time ------------------------------------------

CONTRACT_CASE("lock: an uncontended acquire takes exactly the settle time") {
    fixture fx;
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    o.lock.mode = lock_mode::seed_compatible; // the seed protocol's timings
    timed_store<fixture> ts(fx.make_transport(), o);
    auto fut = ts.store.async_acquire_lock("job", asio::use_future);
    auto elapsed = ts.clock.run(ts.ioc);
    auto lease = fut.get();
    CHECK(lease.held());
    CHECK(lease.state_id() == "job");
    CHECK(lease.lock_id().size() == 36);
    CHECK(elapsed == o.lock.settle);
    auto rel = lease.async_release(asio::use_future);
    ts.clock.run(ts.ioc);
    rel.get();
    CHECK_FALSE(lease.held());
}

CONTRACT_CASE("lock: lock.timeout 0 is a try-lock: a free id is taken, a held one refused at once, naming its holder") {
    store_under_test<fixture> t;
    store_options o = t.options;
    o.lock.timeout = std::chrono::milliseconds(0);
    contract_store<fixture> try_store{t.transport, o};
    try_store.ensure_schema();
    // However long the round's statements take, a free id is taken.
    auto lease = try_store.acquire_lock("try");
    CHECK(lease.held());
    try {
        (void)try_store.acquire_lock("try");
        FAIL("a held lock was acquired");
    } catch (const chstate::error& e) {
        CHECK(e.code() == errc::state_id_locked);
        CHECK(std::string(e.what()).find("Could not acquire lock for state_id: try (held by lock_id " +
                                         lease.lock_id()) != std::string::npos);
    }
    lease.release();
    CHECK(try_store.acquire_lock("try").held());
}

CONTRACT_CASE("lock: a second client gives up after the 30 s timeout with state_id_locked") {
    fixture fx;
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    o.lock.mode = lock_mode::seed_compatible; // the seed protocol's timings
    timed_store<fixture> ts(fx.make_transport(), o);
    auto first = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto lease = first.get();
    const auto wall_start = std::chrono::steady_clock::now();
    diagnostics diag;
    error_code second_ec;
    ts.store.async_acquire_lock("job", diag, [&](error_code ec, auto) { second_ec = ec; });
    auto elapsed = ts.clock.run(ts.ioc);
    CHECK(second_ec == errc::state_id_locked);
    // The seed's words, then who held it (the holder was seen).
    CHECK(diag.message.starts_with("Could not acquire lock for state_id: job (held by lock_id " + lease.lock_id()));
    CHECK(diag.message.ends_with("at the last check; lock.timeout of " + std::to_string(o.lock.timeout.count()) +
                                 " ms passed)"));
    CHECK(elapsed >= o.lock.timeout);
    CHECK(elapsed <= o.lock.timeout + o.lock.settle + o.lock.retry_interval);
    // Simulated time: the 30 s were not slept out (each retry is a statement
    // or two, so the real time is far below; compared with the simulated
    // time that passed, not a fixed limit: the machine may be busy).
    CHECK(std::chrono::steady_clock::now() - wall_start < elapsed);
}

CONTRACT_CASE("lock: a released lock is acquired by the next client") {
    fixture fx;
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    o.lock.mode = lock_mode::seed_compatible; // the seed protocol's timings
    timed_store<fixture> ts(fx.make_transport(), o);
    auto first = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto lease = first.get();
    auto rel = lease.async_release(asio::use_future);
    ts.clock.run(ts.ioc);
    rel.get();
    auto second = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    CHECK(second.get().held());
}

CONTRACT_CASE("lock: a lease destroyed without release frees the lock in the background") {
    fixture fx;
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    o.lock.mode = lock_mode::seed_compatible; // the seed protocol's timings
    timed_store<fixture> ts(fx.make_transport(), o);
    {
        auto first = ts.store.async_acquire_lock("job", asio::use_future);
        ts.clock.run(ts.ioc);
        auto lease = first.get();
    } // destroyed here: release starts on the store's executor
    ts.clock.run(ts.ioc);
    auto second = ts.store.async_acquire_lock("job", asio::use_future);
    auto elapsed = ts.clock.run(ts.ioc);
    CHECK(second.get().held());
    CHECK(elapsed == o.lock.settle); // no retry was needed
}

CONTRACT_CASE("lock: a holder older than the stale age is cleaned up and the lock taken") {
    fixture fx;
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    o.lock.mode = lock_mode::seed_compatible; // the seed protocol's timings
    timed_store<fixture> ts(fx.make_transport(), o);
    auto first = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto abandoned = first.get();
    ts.clock.advance(o.lock.stale_age - o.lock.settle + 1s);
    // The first holder is now stale (locked_at is older than 5 minutes).
    auto second = ts.store.async_acquire_lock("job", asio::use_future);
    auto elapsed = ts.clock.run(ts.ioc);
    auto lease = second.get();
    CHECK(lease.held());
    CHECK(lease.lock_id() != abandoned.lock_id());
    // No retry was needed. (On servers whose DELETE is a background
    // mutation, the store's wait for it takes its few milliseconds of
    // simulated time too: every pause is on the store's clock.)
    CHECK(elapsed >= o.lock.settle);
    CHECK(elapsed < o.lock.settle + o.lock.retry_interval);
}

CONTRACT_CASE("lock: a holder younger than the stale age is not cleaned up") {
    fixture fx;
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    o.lock.mode = lock_mode::seed_compatible; // the seed protocol's timings
    o.lock.timeout = 5s;
    timed_store<fixture> ts(fx.make_transport(), o);
    auto first = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto lease = first.get();
    ts.clock.advance(o.lock.stale_age - 10s);
    error_code ec;
    ts.store.async_acquire_lock("job", [&](error_code e, auto) { ec = e; });
    ts.clock.run(ts.ioc);
    CHECK(ec == errc::state_id_locked);
}

CONTRACT_CASE("lock: clients with skewed clocks can be expressed (a clock 6 min ahead sees the holder as stale)") {
    fixture fx;
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    o.lock.mode = lock_mode::seed_compatible; // the seed protocol's timings
    timed_store<fixture> holder(fx.make_transport(), o);
    auto first = holder.store.async_acquire_lock("job", asio::use_future);
    holder.clock.run(holder.ioc);
    auto lease = first.get();
    timed_store<fixture> ahead(fx.make_transport(), o, holder.clock.skewed(6min));
    auto second = ahead.store.async_acquire_lock("job", asio::use_future);
    ahead.clock.run(ahead.ioc);
    // The seed's protocol trusts each client's clock: the skewed client
    // deletes the live holder's row as stale and takes the lock.
    CHECK(second.get().held());
}

CONTRACT_CASE("lock: cancelling an acquire withdraws its candidate row") {
    store_under_test<fixture> t; // for raw SQL on the same schema
    store_options seed_options = t.options;
    seed_options.lock.mode = lock_mode::seed_compatible;
    timed_store<fixture> ts(t.fx.make_transport(), seed_options);
    auto ready = ts.store.async_ensure_schema(asio::use_future);
    ts.clock.run(ts.ioc);
    ready.get();
    asio::cancellation_signal cancel;
    error_code ec;
    ts.store.async_acquire_lock("job", asio::bind_cancellation_slot(cancel.slot(), [&](error_code e, auto) { ec = e; }));
    // Run until the candidate is inserted (the settle wait begins then).
    while (t.raw("SELECT count() FROM " + t.lock_table()) == "0\n") {
        ts.ioc.restart();
        ts.ioc.run_one();
    }
    CHECK(t.raw("SELECT count() FROM " + t.lock_table()) == "1\n");
    cancel.emit(asio::cancellation_type::terminal);
    ts.clock.run(ts.ioc);
    CHECK(ec == asio::error::operation_aborted);
    CHECK(t.raw("SELECT count() FROM " + t.lock_table()) == "0\n");
}

// ---- the strict lock (lock_mode::strict), on simulated time -----------------

CONTRACT_CASE("strict lock: an uncontended acquire takes no simulated time; tokens increase per id") {
    fixture fx;
    auto o = strict_options<fixture>();
    timed_store<fixture> ts(fx.make_transport(), o);
    if (!strict_supported(fx)) {
        diagnostics diag;
        error_code ec;
        ts.store.async_acquire_lock("job", diag, [&](error_code e, auto) { ec = e; });
        ts.clock.run(ts.ioc);
        CHECK(ec == errc::unsupported);
        CHECK(diag.message.find("22.2") != std::string::npos);
        return;
    }
    for (std::uint64_t expected = 1; expected <= 3; ++expected) {
        auto fut = ts.store.async_acquire_lock("job", asio::use_future);
        auto elapsed = ts.clock.run(ts.ioc);
        auto lease = fut.get();
        CHECK(elapsed == duration::zero());
        CHECK(lease.held());
        CHECK(lease.token() == expected);
        CHECK(lease.lock_id().size() == 36);
        auto rel = lease.async_release(asio::use_future);
        ts.clock.run(ts.ioc);
        rel.get();
    }
    // another id has its own sequence
    auto other = ts.store.async_acquire_lock("other", asio::use_future);
    ts.clock.run(ts.ioc);
    CHECK(other.get().token() == 1);
}

CONTRACT_CASE("strict lock: uncontended update() and clear() take no simulated time") {
    fixture fx;
    if (!strict_or_unsupported(fx))
        return;
    auto o = strict_options<fixture>();
    timed_store<fixture> ts(fx.make_transport(), o);
    auto fut = ts.store.async_update(make_state("job", R"({"a":1})", "{}"), asio::use_future);
    CHECK(ts.clock.run(ts.ioc) == duration::zero());
    CHECK(fut.get().partial_state == obj(R"({"a":1})"));
    auto upd = ts.store.async_update(make_state("job", R"({"b":2})", "{}"), asio::use_future);
    CHECK(ts.clock.run(ts.ioc) == duration::zero());
    CHECK(upd.get().partial_state == obj(R"({"a":1,"b":2})"));
    auto clr = ts.store.async_clear("job", asio::use_future);
    CHECK(ts.clock.run(ts.ioc) == duration::zero());
    clr.get();
    auto got = ts.store.async_get("job", asio::use_future);
    ts.clock.run(ts.ioc);
    CHECK_FALSE(got.get().has_value());
}

CONTRACT_CASE("strict lock: a second client gives up after the timeout with state_id_locked") {
    fixture fx;
    if (!strict_or_unsupported(fx))
        return;
    auto o = strict_options<fixture>();
    timed_store<fixture> ts(fx.make_transport(), o);
    auto first = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto lease = first.get();
    diagnostics diag;
    error_code second_ec;
    ts.store.async_acquire_lock("job", diag, [&](error_code ec, auto) { second_ec = ec; });
    auto elapsed = ts.clock.run(ts.ioc);
    CHECK(second_ec == errc::state_id_locked);
    // The seed's words, then who held it (the holder was seen).
    CHECK(diag.message.starts_with("Could not acquire lock for state_id: job (held by lock_id " + lease.lock_id()));
    CHECK(diag.message.ends_with("at the last check; lock.timeout of " + std::to_string(o.lock.timeout.count()) +
                                 " ms passed)"));
    CHECK(elapsed >= o.lock.timeout);
    CHECK(elapsed <= o.lock.timeout + o.lock.retry_interval);
}

CONTRACT_CASE("strict lock: an expired lease is taken over and the old holder is fenced off") {
    fixture fx;
    if (!strict_or_unsupported(fx))
        return;
    auto o = short_lease_options<fixture>();
    timed_store<fixture> ts(fx.make_transport(), o);
    auto first = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto old = first.get();
    auto ok = old.async_verify(asio::use_future);
    ts.clock.run(ts.ioc);
    CHECK_NOTHROW(ok.get());
    // A takeover waits for the expiry plus the clock-skew grace, on the server's clock.
    let_leases_age(fx, ts, o.lock.lease_ttl + o.lock.clock_skew + 1ms);
    auto second = ts.store.async_acquire_lock("job", asio::use_future);
    CHECK(ts.clock.run(ts.ioc) == duration::zero());
    auto lease = second.get();
    CHECK(lease.token() == old.token() + 1);
    error_code verify_ec, renew_ec;
    old.async_verify([&](error_code e) { verify_ec = e; });
    old.async_renew([&](error_code e) { renew_ec = e; });
    ts.clock.run(ts.ioc);
    CHECK(verify_ec == errc::lock_lost);
    CHECK(renew_ec == errc::lock_lost);
    // the old holder's release does not free the new grant
    auto rel = old.async_release(asio::use_future);
    ts.clock.run(ts.ioc);
    rel.get();
    error_code third_ec;
    auto o2 = o;
    o2.lock.timeout = 2s;
    timed_store<fixture> other(fx.make_transport(), o2, ts.clock);
    other.store.async_acquire_lock("job", [&](error_code e, auto) { third_ec = e; });
    other.clock.run(other.ioc);
    CHECK(third_ec == errc::state_id_locked);
}

CONTRACT_CASE("strict lock: set(lease, s) writes while the grant is current; once it expires, or after a takeover, it is refused") {
    fixture fx;
    if (!strict_or_unsupported(fx))
        return;
    auto o = short_lease_options<fixture>();
    timed_store<fixture> ts(fx.make_transport(), o);
    auto run = [&](auto fut) {
        ts.clock.run(ts.ioc);
        return fut.get();
    };
    auto old = run(ts.store.async_acquire_lock("job", asio::use_future));
    run(ts.store.async_set(old, make_state("job", "{}", R"({"n":1})"), asio::use_future));
    CHECK(run(ts.store.async_get("job", asio::use_future))->completed_state == obj(R"({"n":1})"));
    // Past its lease on the server's clock, not yet taken over: refused all
    // the same — a lease ends when it expires, not when a rival notices —
    // and the error names the setting.
    diagnostics diag;
    error_code ec;
    let_leases_age(fx, ts, o.lock.lease_ttl + 1ms);
    ts.store.async_set(old, make_state("job", "{}", R"({"n":2})"), diag, [&](error_code e) { ec = e; });
    ts.clock.run(ts.ioc);
    CHECK(ec == errc::lock_lost);
    CHECK(diag.message.find("lock.lease_ttl") != std::string::npos);
    let_leases_age(fx, ts, o.lock.clock_skew);
    auto lease = run(ts.store.async_acquire_lock("job", asio::use_future));
    CHECK(lease.token() == old.token() + 1);
    ec = {};
    ts.store.async_set(old, make_state("job", "{}", R"({"n":99})"), diag, [&](error_code e) { ec = e; });
    ts.clock.run(ts.ioc);
    CHECK(ec == errc::lock_lost);
    CHECK(diag.message.find("superseded by fencing token " + std::to_string(lease.token())) != std::string::npos);
    CHECK(run(ts.store.async_get("job", asio::use_future))->completed_state == obj(R"({"n":1})")); // both refused
    run(ts.store.async_set(lease, make_state("job", "{}", R"({"n":3})"), asio::use_future));
    CHECK(run(ts.store.async_get("job", asio::use_future))->completed_state == obj(R"({"n":3})"));
}

CONTRACT_CASE("strict lock: release prunes an id's older grant events, tokens keep increasing") {
    fixture fx;
    if (!strict_or_unsupported(fx))
        return;
    timed_store<fixture> ts(fx.make_transport(), strict_options<fixture>());
    std::uint64_t last = 0;
    for (int i = 0; i < 70; ++i) {
        auto fut = ts.store.async_acquire_lock("job", asio::use_future);
        ts.clock.run(ts.ioc);
        auto lease = fut.get();
        CHECK(lease.token() == last + 1);
        last = lease.token();
        auto rel = lease.async_release(asio::use_future);
        ts.clock.run(ts.ioc);
        rel.get();
    }
    auto t = fx.make_transport();
    const std::string grant = "`" + ts.store.options().schema + "`.`state_grant`";
    // 70 grants and releases = 140 events; the prune at token 64 left tokens 64..70.
    CHECK(test::raw_sql(t, "SELECT min(token), count() FROM " + grant) == "64\t14\n");
}

CONTRACT_CASE("set(lease, s): a lease for another id is invalid_argument; a released one is lock_lost") {
    store_under_test<fixture> t;
    auto lease = t.store.acquire_lock("job");
    diagnostics diag;
    CHECK_THROWS_WITH_AS(t.store.set(lease, make_state("other", "{}", "{}")),
                         doctest::Contains("the lease is for state_id job"), chstate::error);
    t.store.set(lease, make_state("job", R"({"a":1})", "{}"));
    CHECK(t.store.get("job")->partial_state == obj(R"({"a":1})"));
    lease.release();
    try {
        t.store.set(lease, make_state("job", "{}", "{}"));
        FAIL("set under a released lease succeeded");
    } catch (const chstate::error& e) {
        CHECK(e.code() == errc::lock_lost);
    }
    CHECK(t.store.get("job")->partial_state == obj(R"({"a":1})"));
}

CONTRACT_CASE("strict lock: renewing extends the lease past its first expiry") {
    fixture fx;
    if (!strict_or_unsupported(fx))
        return;
    auto o = strict_options<fixture>();
    o.lock.timeout = 5s;
    timed_store<fixture> ts(fx.make_transport(), o);
    auto first = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto lease = first.get();
    ts.clock.advance(o.lock.lease_ttl - 10s);
    auto renewed = lease.async_renew(asio::use_future);
    ts.clock.run(ts.ioc);
    CHECK_NOTHROW(renewed.get());
    ts.clock.advance(20s); // past the first expiry, within the renewed one
    error_code ec;
    ts.store.async_acquire_lock("job", [&](error_code e, auto) { ec = e; });
    ts.clock.run(ts.ioc);
    CHECK(ec == errc::state_id_locked);
    auto still = lease.async_verify(asio::use_future);
    ts.clock.run(ts.ioc);
    CHECK_NOTHROW(still.get());
}

CONTRACT_CASE("strict lock: hostile ids reach the deduplication token only through quote_string") {
    fixture fx;
    if (!strict_or_unsupported(fx))
        return;
    auto o = strict_options<fixture>();
    timed_store<fixture> ts(fx.make_transport(), o);
    for (std::string id : {std::string("it's"), std::string("a\\'; DROP TABLE x; --"), std::string("x/1"),
                           std::string("x"), std::string("new\nline")}) {
        for (std::uint64_t expected = 1; expected <= 2; ++expected) {
            auto fut = ts.store.async_acquire_lock(id, asio::use_future);
            ts.clock.run(ts.ioc);
            auto lease = fut.get();
            CHECK(lease.token() == expected);
            auto rel = lease.async_release(asio::use_future);
            ts.clock.run(ts.ioc);
            rel.get();
        }
    }
}

CONTRACT_CASE("lock_mode::automatic: strict on the embedded engine only") {
    fixture fx;
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    timed_store<fixture> ts(fx.make_transport(), o);
    auto fut = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto lease = fut.get();
    const bool embedded = std::string_view(fixture::name).ends_with("embedded");
    CHECK((lease.token() != 0) == embedded);
}

CONTRACT_CASE("strict lock: a heartbeat keeps the lease past lease_ttl and stops with the release") {
    fixture fx;
    if (!strict_or_unsupported(fx))
        return;
    auto o = strict_options<fixture>();
    timed_store<fixture> ts(fx.make_transport(), o);
    auto first = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto lease = first.get();
    int lost = 0;
    lease.start_heartbeat(o.lock.lease_ttl / 3, [&](error_code) { ++lost; });
    ts.clock.run(ts.ioc, 5 * o.lock.lease_ttl); // stops early: the heartbeat keeps waiting
    CHECK(lost == 0);
    auto o2 = o;
    o2.lock.timeout = 1s;
    timed_store<fixture> other(fx.make_transport(), o2, ts.clock);
    error_code ec;
    other.store.async_acquire_lock("job", [&](error_code e, auto) { ec = e; });
    other.clock.run(other.ioc, 10s);
    CHECK(ec == errc::state_id_locked);
    auto rel = lease.async_release(asio::use_future);
    CHECK(ts.clock.run(ts.ioc) < o.lock.lease_ttl); // nothing left waiting: the heartbeat ended
    rel.get();
    CHECK(lost == 0);
}

CONTRACT_CASE("strict lock: a heartbeat that cannot renew reports the loss once") {
    fixture fx;
    if (!strict_or_unsupported(fx))
        return;
    auto o = strict_options<fixture>();
    timed_store<fixture> ts(fx.make_transport(), o);
    auto first = ts.store.async_acquire_lock("job", asio::use_future);
    ts.clock.run(ts.ioc);
    auto lease = first.get();
    std::vector<error_code> lost;
    lease.start_heartbeat(o.lock.lease_ttl + 1s, [&](error_code e) { lost.push_back(e); });
    ts.clock.run(ts.ioc, 10 * o.lock.lease_ttl); // the first renewal comes too late
    REQUIRE(lost.size() == 1);
    CHECK(lost.front() == errc::lock_lost);
}
