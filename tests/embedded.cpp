// The store contract on the embedded engine (chDB), plus embedded-only cases.
//
// A missing libchdb.so fails every case here with the loader's message
// (run scripts/fetch-chdb.sh, or the README's test command, which does).
#include "contract.hpp"
#include "destroy_inflight.hpp"
#include "lock_timeout.hpp"
#include "move_race.hpp"
#include "simulator_self_check.hpp"
#include "support.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <mutex>
#include <optional>

#include <unistd.h>

namespace embedded_tests {

using namespace chstate;

/// The process-wide engine: one data folder per process (a chDB rule).
/// Closed by main() after the tests (test::shutdown_hooks).
std::shared_ptr<chdb_engine> shared_engine() {
    static std::shared_ptr<chdb_engine> engine = [] {
        const char* base = std::getenv("CHSTATE_TEST_DIR");
        std::filesystem::path dir = base ? base : std::filesystem::temp_directory_path();
        dir /= "chstate-embedded-" + std::to_string(::getpid());
        std::filesystem::remove_all(dir);
        test::at_shutdown([] { engine.reset(); });
        return chdb_engine::open({.path = dir.string(), .library = {}, .threads = 4});
    }();
    return engine;
}

struct embedded_fixture {
    using transport_type = chdb_transport;
    static constexpr const char* name = "embedded";
    transport_type make_transport() { return chdb_transport(shared_engine()); }
};

/// The same engine behind the type-erased transport chstate::open() uses:
/// the contract must hold unchanged through it.
struct any_embedded_fixture {
    using transport_type = any_transport;
    static constexpr const char* name = "any-embedded";
    transport_type make_transport() { return any_transport(chdb_transport(shared_engine())); }
};

} // namespace embedded_tests

// The contract on chDB, and again through any_transport (what
// chstate::open() returns): one templated case per fixture.
CHSTATE_FIXTURE_NAME(embedded_tests::embedded_fixture);
CHSTATE_FIXTURE_NAME(embedded_tests::any_embedded_fixture);
#define CHSTATE_CONTRACT_FIXTURES embedded_tests::embedded_fixture, embedded_tests::any_embedded_fixture
#define CHSTATE_DATA_FIXTURES embedded_tests::embedded_fixture
namespace embedded_contract {
TEST_SUITE("embedded") {
#include "contract_cases.ipp"
#include "fidelity_cases.ipp"
#include "lossless_cases.ipp"
#include "large_values_cases.ipp"
#include "hostile_input_cases.ipp"
}
} // namespace embedded_contract
#undef CHSTATE_CONTRACT_FIXTURES
#undef CHSTATE_DATA_FIXTURES

namespace embedded_strict {
using namespace chstate;
TEST_SUITE("embedded") {

TEST_CASE("destroy-inflight: a store destroyed with operations in flight calls every handler (chDB)") {
    const std::string schema = test::unique_schema("destroy_chdb");
    const auto typed =
        test::destroy_inflight("embedded", test::typed_stores(chdb_transport(embedded_tests::shared_engine()), schema));
    CHECK(typed.lost_handlers == 0);
    CHECK(typed.called_twice == 0);
    CHECK(typed.operations >= 300);
}

TEST_CASE("embedded: this process's standard input is never read, whatever it holds") {
    // chDB runs SQL through ClickHouse's client code, which takes standard
    // input as more rows of an INSERT that carries rows inline: with data
    // waiting there every such INSERT failed (code 48, async_insert on) or
    // would have read it as state. Every write here runs with a pipe full of
    // rows as standard input; each must land as written, and every byte of
    // the pipe must still be there for the program that owns it.
    // (The engine is opened before standard input is swapped, as a program
    // opens it once: chDB set up under one standard input and shut down
    // under another fails its own exit.)
    store_options o;
    o.schema = test::unique_schema("stdin");
    o.lock = test::fast_locks();
    embedded_state_store store(chdb_transport(embedded_tests::shared_engine()), o);
    store.ensure_schema();
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    const std::string waiting = "('stdin-row')\nstdin-row\t\\N\t\\N\n{\"stdin\": true}\n";
    REQUIRE(::write(pipe_fds[1], waiting.data(), waiting.size()) == static_cast<ssize_t>(waiting.size()));
    ::close(pipe_fds[1]);
    const int saved_stdin = ::dup(0);
    REQUIRE(saved_stdin >= 0);
    REQUIRE(::dup2(pipe_fds[0], 0) == 0);
    const int reader = pipe_fds[0]; // the same pipe, read below
    struct restore {
        int saved;
        ~restore() {
            ::dup2(saved, 0);
            ::close(saved);
        }
    };
    std::optional<restore> restore_stdin(restore{saved_stdin});

    // Every write shape: the seed's VALUES, set_all's rows, the versioned
    // and fenced SELECTs, the strict lock's grant events, merge and copy.
    store.set(state{"one", object{{"p", 1}}, {}});
    std::vector<state> batch;
    for (int i = 0; i < 3; ++i)
        batch.push_back(state{"b" + std::to_string(i), {}, object{{"c", i}}});
    store.set_all(batch);
    store.update(state{"one", object{{"q", 2}}, {}});
    {
        auto lease = store.acquire_lock("one");
        CHECK(lease.token() != 0); // the strict protocol: grant events inserted
        store.set(lease, state{"one", object{{"r", 3}}, {}});
    }
    store.merge("one", "merged");
    store.copy("b1", "copied");
    CHECK(store.get("one")->to_json_text() == R"({"completed": {}, "partial": {"r": 3}})");
    CHECK(store.get("b2")->to_json_text() == R"({"completed": {"c": 2}, "partial": {}})");
    CHECK(store.get("copied")->to_json_text() == R"({"completed": {"c": 1}, "partial": {}})");
    CHECK(store.state_ids().size() == 6);

    restore_stdin.reset(); // standard input back; what the pipe still holds:
    std::string left;
    char buf[256];
    for (ssize_t n; (n = ::read(reader, buf, sizeof buf)) > 0;)
        left.append(buf, static_cast<std::size_t>(n));
    ::close(reader);
    CHECK(left == waiting);
}

TEST_CASE("move-race: a move while others update() its source loses no confirmed update (chDB, both lock modes)") {
    // (tests/move_race.hpp) The strict mode is chDB's default: its line is
    // the headline one; the seed-compatible mode's takes a settle per lock.
    for (const auto mode : {lock_mode::strict, lock_mode::seed_compatible}) {
        const bool strict = mode == lock_mode::strict;
        store_options o;
        o.schema = test::unique_schema("move_race");
        o.lock = test::fast_locks();
        o.lock.mode = mode;
        o.lock.timeout = std::chrono::minutes(2); // a hang guard: who waits how long is not under test
        // The seed-compatible lock is exclusive only while every rival's
        // check→insert gap is shorter than the settle time (README): one
        // updater against the mover, and a settle a busy machine keeps to,
        // so what is measured is the move, not that protocol's known races.
        if (!strict)
            o.lock.settle = std::chrono::milliseconds(250);
        // Strict: 50 rounds of 20 or more confirmed updates around a move,
        // at least 1,000 in all (issue 27's bar; the move that lost them
        // lost most of every round's, 1,504 of 1,664). Seed-compatible: a
        // settle per lock makes each update cost 250 ms; 3 rounds show that
        // mode's move keeps them too.
        const int rounds = strict ? 50 : 3;
        const int updaters = strict ? 2 : 1, each_side = strict ? 10 : 5;
        const auto r = test::move_race([] { return chdb_transport(embedded_tests::shared_engine()); }, o, rounds,
                                       updaters, each_side, each_side);
        test::print_move_race(strict ? "" : "[embedded, seed_compatible]", r);
        CHECK_MESSAGE(r.lost == 0, "the first lost: " << r.first_lost);
        CHECK(r.rounds == rounds);
        CHECK(r.confirmed >= 2L * each_side * rounds);
        if (strict)
            CHECK(r.confirmed >= 1000);
    }
}

TEST_CASE("lock-timeout: a locked call returns at lock.timeout while its claim is in flight; what lands late is given back (chDB, both lock modes)") {
    // (tests/lock_timeout.hpp) Every claim is held until its call has
    // returned: strict 4 threads x 126 calls (issue 27's bar: 500 or more),
    // seed-compatible 2 x 20 (its candidates wait a settle each).
    for (const auto mode : {lock_mode::strict, lock_mode::seed_compatible}) {
        const bool strict = mode == lock_mode::strict;
        const store_options o = test::lock_timeout_options(mode, "lock_timeout");
        auto inspect = chdb_transport(embedded_tests::shared_engine());
        const std::string table = "`" + o.schema + "`.`state_" + (strict ? "grant" : "lock") + "`";
        // Locked: an id whose newest grant is not a release (strict); an id
        // with a lock row (seed-compatible).
        const std::string locked_sql =
            strict ? "SELECT count() FROM (SELECT state_id, argMax(kind, (token, kind)) AS k FROM " + table +
                         " GROUP BY state_id) WHERE k = 'grant'"
                   : "SELECT uniqExact(state_id) FROM " + table;
        const int threads = strict ? 4 : 2, calls_each = strict ? 126 : 20;
        const auto r = test::lock_timeout_run([] { return chdb_transport(embedded_tests::shared_engine()); }, o,
                                              threads, calls_each,
                                              [&] { return std::stol(test::raw_sql(inspect, locked_sql)); });
        test::print_lock_timeout(strict ? "" : "[embedded, seed_compatible]", o, r);
        test::check_lock_timeout(r, threads * calls_each);
        if (strict)
            CHECK(r.calls >= 500);
    }
}

TEST_CASE("embedded: strict lock torture, 8 threads on separate stores, real clock") {
    store_options o;
    o.schema = test::unique_schema("torture");
    o.lock = test::fast_locks();
    o.lock.retry_interval = std::chrono::milliseconds(2);
    o.lock.mode = lock_mode::strict;
    // Exclusion is under test, not how soon a waiter gets its turn: on a busy
    // machine one of 8 contending threads waited past fast_locks()' 20 s
    // (test-under-load.sh --quick). The timeout only guards against a hang.
    o.lock.timeout = std::chrono::minutes(5);
    const int K = 8, M = 5;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = test::lock_torture([] { return chdb_transport(embedded_tests::shared_engine()); }, o, K, M);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("lock-torture[embedded, strict]: K=%d M=%d counter=%lld max_inside=%d merged_keys=%zu "
                "last_token=%llu (%.2f s)\n",
                K, M, (long long)r.counter, r.max_inside, r.merged_keys, (unsigned long long)r.last_token, secs);
    CHECK(r.counter == K * M);
    CHECK(r.max_inside == 1);
    CHECK(r.merged_keys == std::size_t(K * M));
    CHECK(r.last_token == std::uint64_t(2 * K * M + 1)); // every grant took the next token, none was lost
}

/// A fresh schema with the strict lock's grant table; its statements.
inline detail::statements make_grant_table(chdb_transport& t, const std::string& schema) {
    test::raw_sql(t, "CREATE DATABASE IF NOT EXISTS `" + schema + "`");
    detail::statements stm(detail::table_names(schema, "state"), detail::server_features::from_version("24.1"));
    test::raw_sql(t, stm.create_grant_table().sql);
    return stm;
}

TEST_CASE("embedded: strict grants race on one token: exactly one winner per round") {
    // The atomicity claim itself: several threads insert the same
    // (state_id, token) grant with the same deduplication token at once;
    // exactly one row survives every round.
    auto engine = embedded_tests::shared_engine();
    chdb_transport t(engine);
    const std::string schema = test::unique_schema("dedup");
    const detail::statements stm = make_grant_table(t, schema);
    const int threads = 8, rounds = 20;
    std::atomic<int> failed{0};
    std::mutex first_failure_mutex;
    std::string first_failure;
    for (int r = 1; r <= rounds; ++r) {
        std::vector<std::thread> ts;
        for (int k = 0; k < threads; ++k)
            ts.emplace_back([&, k] {
                chdb_transport mine(engine);
                statement s = stm.insert_grant_event("job", std::uint64_t(r), "client-" + std::to_string(k), detail::grant_event::grant, 1,
                                                     "job/" + std::to_string(r));
                diagnostics d;
                try { // (an exception leaving a thread would end the whole run)
                    mine.async_execute(s, [](std::string_view) { return error_code{}; }, d, asio::use_future).get();
                } catch (const std::exception& e) {
                    if (failed++ == 0) {
                        std::lock_guard lk(first_failure_mutex);
                        first_failure = e.what();
                    }
                }
            });
        for (auto& x : ts)
            x.join();
    }
    CHECK_MESSAGE(failed == 0, failed << " inserts failed; the first: " << first_failure);
    CHECK(test::raw_sql(t, "SELECT count(), uniqExact(token) FROM `" + schema + "`.`state_grant`") ==
          std::to_string(rounds) + "\t" + std::to_string(rounds) + "\n");
}

TEST_CASE("dedup-guard: the strict lock refuses a grant table that does not deduplicate; a session without deduplication changes nothing (chDB)") {
    // The strict lock's grants are atomic only through insert
    // deduplication. A grant table chstate did not make (by hand, from a
    // backup, a plain MergeTree's default window of 0) once ran strict mode
    // unchecked: 6 threads x 25 update() calls lost 9 of 150 confirmed
    // updates in an outside test. Each such table must now be refused with
    // the statement that fixes it; after that statement the store works.
    auto engine = embedded_tests::shared_engine();
    chdb_transport t(engine);
    const std::string columns = "(state_id String, token UInt64, lock_id String, kind String, expires_ms UInt64)";
    struct made {
        const char* what;
        std::string engine; // after ENGINE =
        bool fixable;       // by the ALTER the message names
    };
    const std::vector<made> tables{
        {"a plain MergeTree (default window 0)", "MergeTree ORDER BY (state_id, token)", true},
        {"a MergeTree with the window set to 0", "MergeTree ORDER BY (state_id, token) SETTINGS non_replicated_deduplication_window = 0", true},
        {"a MergeTree with a window of 10", "MergeTree ORDER BY (state_id, token) SETTINGS non_replicated_deduplication_window = 10", true},
        {"a Memory table", "Memory", false},
        {"a Log table", "Log", false},
    };
    int refused = 0;
    long lost_confirmed = 0;
    for (const auto& m : tables) {
        const std::string what = m.what;
        CAPTURE(what);
        const std::string schema = test::unique_schema("dedup_guard");
        test::raw_sql(t, "CREATE DATABASE `" + schema + "`");
        test::raw_sql(t, "CREATE TABLE `" + schema + "`.`state_grant` " + columns + " ENGINE = " + m.engine);
        store_options o;
        o.schema = schema;
        o.lock = test::fast_locks();
        o.lock.mode = lock_mode::strict;
        embedded_state_store store(chdb_transport(engine), o);
        std::string message;
        try {
            store.update(state{"job", object{{"k", 1}}, {}});
        } catch (const chstate::error& e) {
            CHECK(e.code() == errc::invalid_configuration);
            message = e.what();
        }
        CHECK_MESSAGE(!message.empty(), "the table was accepted");
        if (message.empty())
            continue;
        ++refused;
        CHECK(message.find("`" + schema + "`.`state_grant`") != std::string::npos);
        CHECK(message.find("does not deduplicate inserts") != std::string::npos);
        CHECK_THROWS_AS((void)store.get("job"), chstate::error); // (every operation refuses: get too)
        if (!m.fixable)
            continue;
        const auto fix_at = message.find("Fix: ");
        REQUIRE(fix_at != std::string::npos);
        const auto fix_end = message.find(" = 10000", fix_at);
        REQUIRE(fix_end != std::string::npos);
        test::raw_sql(t, message.substr(fix_at + 5, fix_end + 8 - (fix_at + 5)));
        // Fixed: the same store now runs (it checks again at its next call).
        auto r = test::lock_torture([&] { return chdb_transport(engine); }, o, 3, 4);
        lost_confirmed += 3 * 4 - static_cast<long>(r.merged_keys);
        CHECK(r.counter == 3 * 4);
        CHECK(r.max_inside == 1);
    }

    // A profile or session with insert_deduplicate = 0 turns deduplication
    // off for an INSERT that does not ask for it. On one connection with
    // that setting: an identical untokened INSERT, three times, lands three
    // times (the setting is in force); the grant the strict lock sends (it
    // asks) lands once. The same grant without the request is counted and
    // shown: chDB 26.5 deduplicates a tokened INSERT even then (measured
    // here, not assumed: older servers are why the lock asks).
    const std::string schema = test::unique_schema("dedup_session");
    const detail::statements stm = make_grant_table(t, schema);
    auto as_chdb_runs_it = [](statement st) {
        diagnostics d;
        REQUIRE_FALSE(detail::inline_parameters(st, d));
        auto select = detail::values_as_select(st.sql);
        REQUIRE(select);
        return *select;
    };
    const std::string asked = as_chdb_runs_it(stm.insert_grant_event("job", 2, "B", detail::grant_event::grant, 1, "job/2"));
    std::string unasked = as_chdb_runs_it(stm.insert_grant_event("job", 1, "A", detail::grant_event::grant, 1, "job/1"));
    const std::string setting = ", insert_deduplicate = 1";
    const auto at = unasked.find(setting);
    REQUIRE(at != std::string::npos); // (what the lock sends)
    unasked.erase(at, setting.size());
    const std::string untokened = "INSERT INTO `" + schema + "`.`state_grant` SELECT 'job', 3, 'C', 'grant', 1";
    engine->with_connection([&](const chdb_engine::api& api, chdb_engine::api::connection conn) {
        auto run = [&](const std::string& sql) {
            auto* r = api.query_with_params_n(conn, sql.data(), sql.size(), "TabSeparated", 12, nullptr, nullptr,
                                              nullptr, nullptr, 0);
            REQUIRE(r);
            const char* err = api.result_error(r);
            const std::string error = err ? err : "";
            api.destroy_query_result(r);
            CHECK_MESSAGE(error.empty(), sql << ": " << error);
        };
        run("SET insert_deduplicate = 0");
        for (int k = 0; k < 3; ++k) {
            run(untokened);
            run(unasked);
            run(asked);
        }
        run("SET insert_deduplicate = 1"); // (the connection goes back to the engine's pool)
    });
    const std::string counts =
        test::raw_sql(t, "SELECT token, count() FROM `" + schema + "`.`state_grant` GROUP BY token ORDER BY token");
    auto rows_of = [&](int token) {
        const std::string head = std::to_string(token) + "\t";
        const auto p = counts.find(head);
        return p == std::string::npos ? std::string("0") : counts.substr(p + head.size(), counts.find('\n', p) - p - head.size());
    };
    CHECK_MESSAGE(rows_of(3) == "3", "the session's insert_deduplicate = 0 was not in force: " << counts);
    CHECK_MESSAGE(rows_of(2) == "1", "the lock's grant was not deduplicated: " << counts);
    std::printf("dedup-guard: tables=%zu refused=%d lost_confirmed=%ld (chDB; a session with insert_deduplicate = 0: "
                "3 untokened copies kept %s, the lock's grant %s of 3, the same grant not asking %s of 3)\n",
                tables.size(), refused, lost_confirmed, rows_of(3).c_str(), rows_of(2).c_str(), rows_of(1).c_str());
    std::fflush(stdout);
    CHECK(refused == static_cast<int>(tables.size()));
    CHECK(lost_confirmed == 0);
}

TEST_CASE("embedded: written_rows, as the strict lock reads it") {
    // The strict lock learns a conditional INSERT's outcome from the engine's
    // written-rows count (diagnostics::written_rows). What it relies on:
    // a check that fails writes 0, and so does an INSERT resent with the same
    // deduplication token and bytes. What it must not rely on: chDB counts a
    // block that deduplication then drops when its bytes differ (a rival's
    // grant of the same token), so a count of 1 is read back.
    auto engine = embedded_tests::shared_engine();
    chdb_transport t(engine);
    const std::string schema = test::unique_schema("written");
    const detail::statements stm = make_grant_table(t, schema);
    auto written = [&](const statement& s) {
        diagnostics d;
        t.async_execute(s, [](std::string_view) { return error_code{}; }, d, asio::use_future).get();
        REQUIRE(d.written_rows.has_value());
        return *d.written_rows;
    };
    auto rows_of_token = [&](int token) {
        return test::raw_sql(t, "SELECT count() FROM `" + schema + "`.`state_grant` WHERE token = " +
                                    std::to_string(token));
    };
    const std::string key = "sha256:" + detail::sha256_hex("job") + "/1";
    auto mine = stm.claim_grant("job", 1, "A", 60000, key, 0, 0);
    CHECK(written(mine) == 1);                                        // free: the grant lands
    CHECK(written(mine) == 0);                                        // resent: same token, same bytes
    CHECK(written(stm.claim_grant("job", 1, "B", 60000, key, 0, 0)) == 0); // max(token) is 1 now: refused
    CHECK(written(stm.claim_grant("job", 2, "B", 60000, "sha256:x/2", 1, 0)) == 0); // token 1 unexpired
    CHECK(rows_of_token(1) == "1\n");
    CHECK(rows_of_token(2) == "0\n");
    // The expiry is the server's now plus the lease, whatever the client's clock says.
    CHECK(test::raw_sql(t, "SELECT expires_ms > toUnixTimestamp64Milli(now64(3)) + 50000 AND expires_ms <= "
                           "toUnixTimestamp64Milli(now64(3)) + 60000 FROM `" + schema +
                               "`.`state_grant` WHERE state_id = 'job'") == "1\n");
    // A grant that expired 10 s ago on the server's clock: free once the grace is past.
    const auto wall_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    CHECK(written(stm.insert_grant_event("old", 1, "A", detail::grant_event::grant, wall_ms - 10000, "old/1")) == 1);
    CHECK(written(stm.claim_grant("old", 2, "B", 60000, "sha256:y/2", 1, 3600000)) == 0); // inside an hour's grace
    CHECK(written(stm.claim_grant("old", 2, "B", 60000, "sha256:y/2", 1, 1000)) == 1);    // past a second's
    // The same token with other bytes: dropped as a duplicate, yet counted.
    const auto counted = written(stm.insert_grant_event("old", 2, "C", detail::grant_event::grant, 9000, "sha256:y/2"));
    CHECK(test::raw_sql(t, "SELECT count() FROM `" + schema + "`.`state_grant` WHERE state_id = 'old' AND token = 2") ==
          "1\n");
    MESSAGE("chDB counts a deduplicated block of other bytes as written: " << counted);
}

TEST_CASE("embedded: the fence lets through only the holder of the id's newest unreleased grant") {
    // fence_condition is one scalar subquery of aggregates over the id's
    // grant events; renew_grant is the fenced INSERT that shows it alone.
    auto engine = embedded_tests::shared_engine();
    chdb_transport t(engine);
    const detail::statements stm = make_grant_table(t, test::unique_schema("fence"));
    auto written = [&](const statement& s) {
        diagnostics d;
        t.async_execute(s, [](std::string_view) { return error_code{}; }, d, asio::use_future).get();
        REQUIRE(d.written_rows.has_value());
        return *d.written_rows;
    };
    auto renew = [&](const std::string& id, std::uint64_t token, const std::string& who) {
        return written(stm.renew_grant(id, token, who, 9000, id + "/" + std::to_string(token) + "/" + who));
    };
    CHECK(renew("fresh", 1, "A") == 0); // no grant at all: nobody holds the id
    CHECK(written(stm.claim_grant("job", 1, "A", 60000, "job/1", 0, 0)) == 1);
    CHECK(renew("job", 2, "B") == 0); // not the holder
    CHECK(renew("job", 2, "A") == 1); // the holder moves its lease to token 2
    CHECK(written(stm.insert_grant_event("job", 2, "A", detail::grant_event::release, 0, "job/2/release")) == 1);
    CHECK(renew("job", 3, "A") == 0); // released
    // A grant expired on the server's clock fences nothing, taken over or not.
    const auto wall_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    CHECK(written(stm.insert_grant_event("lapsed", 1, "A", detail::grant_event::grant, wall_ms - 1000, "lapsed/1")) ==
          1);
    CHECK(renew("lapsed", 2, "A") == 0);
    CHECK(written(stm.insert_grant_event("live", 1, "A", detail::grant_event::grant, wall_ms + 600000, "live/1")) == 1);
    CHECK(renew("live", 2, "A") == 1);
}

TEST_CASE("embedded: a streamed_reply statement reaches the sink in pieces, any other whole") {
    // get_all's statement (streamed_reply) must never be held whole: the
    // engine streams it block by block. A bounded reply is one buffered
    // chdb_query call, the engine's cheapest (benchmarks: BM_get).
    chdb_transport t(embedded_tests::shared_engine());
    auto pieces = [&](bool streamed) {
        statement s{.sql = "SELECT number FROM numbers(200000) SETTINGS max_block_size = 1000",
                    .format = "RowBinary",
                    .idempotent = true,
                    .name = "test.numbers",
                    .streamed_reply = streamed};
        std::size_t calls = 0, bytes = 0, largest = 0;
        diagnostics d;
        t.async_execute(
             s,
             [&](std::string_view piece) {
                 ++calls;
                 bytes += piece.size();
                 largest = std::max(largest, piece.size());
                 return error_code{};
             },
             d, asio::use_future)
            .get();
        CHECK(bytes == 200000 * 8);
        return std::pair{calls, largest};
    };
    auto [streamed_calls, streamed_largest] = pieces(true);
    CHECK(streamed_calls > 1);
    CHECK(streamed_largest < 200000 * 8);
    auto [whole_calls, whole_largest] = pieces(false);
    CHECK(whole_calls == 1);
    CHECK(whole_largest == 200000 * 8);
}

} // TEST_SUITE
} // namespace embedded_strict

// ---- the simulator against chDB ------------------------------------------------

namespace simulator_differential {
using namespace chstate;
TEST_SUITE("embedded") {

TEST_CASE("embedded: the simulator's self-check gives chDB's answers (a differential test)") {
    // The steps and what is not compared, and why: simulator_self_check.hpp.
    namespace check = test::self_check;
    chdb_transport chdb(embedded_tests::shared_engine());
    const std::string db = test::unique_schema("simcheck");
    manual_clock clock(time_point{} + std::chrono::seconds(1'700'000'000));
    auto sim = simulated_clickhouse::create(clock);
    auto on_chdb = [&](const std::string& sql, const check::step* st = nullptr) {
        statement s{sql, {}, {}, {}, false};
        if (st) {
            s.parameters = st->parameters;
            s.format = st->format;
            s.data = st->data;
            s.settings = st->settings;
        }
        std::string reply;
        diagnostics diag;
        auto ec = test::run_statement(chdb, s, diag, &reply);
        return check::answer_of(ec, reply);
    };
    // chDB merges only when asked, like the simulator: merges stay stopped
    // but for a merge step and a DELETE (a synchronous mutation).
    auto merges = [&](bool on, const std::string& table) {
        REQUIRE(on_chdb(std::string(on ? "SYSTEM START" : "SYSTEM STOP") + " MERGES " + table).empty());
    };
    std::size_t compared = 0, mismatches = 0, excluded = 0;
    for (const auto& st : check::steps(db)) {
        const std::string simulated = check::run_on_simulator(*sim, clock, st);
        INFO(st.text, " ", st.table);
        CHECK(simulated == st.expected);
        std::string engine;
        if (st.kind == check::step::sql && st.simulator_only.empty()) {
            const bool deletes = st.text.starts_with("ALTER") || st.text.starts_with("DELETE");
            if (deletes)
                merges(true, st.table);
            engine = on_chdb(st.text, &st);
            if (deletes)
                merges(false, st.table);
            if (st.text.starts_with("CREATE TABLE") && engine.empty())
                merges(false, st.table);
        } else if (st.kind == check::step::parts) {
            const auto dot = st.table.find("`.`");
            engine = on_chdb("SELECT count() FROM system.parts WHERE database = '" + db + "' AND table = '" +
                             st.table.substr(dot + 3, st.table.size() - dot - 4) + "' AND active");
        } else if (st.kind == check::step::merge && st.simulator_only.empty()) {
            merges(true, st.table);
            CHECK(on_chdb("OPTIMIZE TABLE " + st.table + " FINAL").empty());
            merges(false, st.table);
        }
        if (!st.compared()) {
            excluded += !st.simulator_only.empty();
            continue;
        }
        ++compared;
        if (engine != simulated) {
            ++mismatches;
            MESSAGE("simulator and chDB differ on: " << (st.text.empty() ? st.table : st.text) << "\n  simulator: "
                                                    << simulated << "\n  chDB:      " << engine);
        }
    }
    std::printf("simulator-differential: statements=%zu mismatches=%zu excluded=%zu\n", compared, mismatches,
                excluded);
    CHECK(mismatches == 0);
    CHECK(compared >= 50);
}

} // TEST_SUITE
} // namespace simulator_differential
