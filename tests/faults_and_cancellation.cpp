// Every failure point and every cancellation point of every operation.
//
// Each operation runs on a fresh store over the simulated server (both lock
// modes; both server dialects) once untouched, to learn its statements and
// waits; then once per statement with that statement failing before it is
// sent, once failing after the server ran it (its reply lost), and once per
// statement and wait with the operation cancelled right then. Each run
// must complete — with a typed error where a statement it depends on
// failed, with operation_aborted where it was cancelled — without throwing
// out of io_context::run(), without starting another statement it could
// skip after a cancellation, and without leaving behind a lock row or a
// grant that it (or the store's next operation) could have given back.
//
// Prints
//   fault-injection: operations=N points=M unhandled=0 leaked=0
//   cancellation: operations=N points=M threw=0 ignored=0
#include "scripted.hpp"
#include "support.hpp"
#include "tallies.hpp"

#include <chstate/store.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace faults_tests {

using namespace chstate;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using test::injected;

enum class dialect { modern, v18_16 };

const char* name_of(dialect d) { return d == dialect::modern ? "modern" : "18.16"; }
const char* name_of(lock_mode m) { return m == lock_mode::strict ? "strict" : "seed_compatible"; }

using store_t = basic_state_store<test::scripted_transport, test::counting_clock>;

/// One run: a fresh simulated server, store and script.
struct harness {
    asio::io_context ioc;
    manual_clock base{time_point(std::chrono::seconds(1'700'000'000))};
    std::shared_ptr<test::counting_clock::shared> waits = std::make_shared<test::counting_clock::shared>();
    std::shared_ptr<simulated_clickhouse> server;
    std::shared_ptr<test::script_state> script = std::make_shared<test::script_state>();
    std::unique_ptr<store_t> store;
    std::optional<store_t::lock_lease> lease;
    asio::cancellation_signal signal;
    store_options options;

    harness(dialect d, lock_mode m, duration lock_timeout = 5s) {
        server = simulated_clickhouse::create(base);
        if (d == dialect::v18_16)
            server->set_version("18.16.1");
        options.schema = "sweep";
        options.lock.mode = m;
        options.lock.settle = 1s;
        options.lock.retry_interval = 1s;
        options.lock.timeout = lock_timeout;
        store = std::make_unique<store_t>(ioc.get_executor(),
                                          test::scripted_transport(simulated_transport(server, ioc.get_executor()), script),
                                          options, test::counting_clock(base, waits));
        script->cancel = waits->cancel = [this] { signal.emit(asio::cancellation_type::terminal); };
    }
    ~harness() {
        lease.reset();
        run();
    }

    /// Runs until nothing is left; false when an exception escaped run().
    bool run() {
        try {
            base.run(ioc);
            return true;
        } catch (...) {
            return false;
        }
    }

    std::string raw(const std::string& sql) {
        std::string reply;
        diagnostics d;
        server->execute(statement{.sql = sql, .format = "TabSeparated"}, reply, d);
        return reply;
    }

    /// What is left of the id's lock: a lock row, or an unreleased grant.
    std::string held_by_nobody_check(const std::string& id) {
        if (raw("SELECT count() FROM sweep.state_lock WHERE state_id = '" + id + "'") != "0\n")
            return "a lock row is left";
        if (store->options().lock.mode == lock_mode::strict &&
            raw("SELECT count() FROM system.tables WHERE database = 'sweep' AND name = 'state_grant'") == "1\n") {
            auto latest = raw("SELECT kind FROM sweep.state_grant WHERE state_id = '" + id +
                              "' ORDER BY token DESC, kind DESC LIMIT 1");
            if (!latest.empty() && latest != "release\n")
                return "an unreleased grant is left";
        }
        return {};
    }
};

/// What an operation completed with.
struct outcome {
    bool completed = false;
    error_code ec;
};

struct operation {
    const char* name;
    bool needs_lease;
    /// Before the operation, untouched by the script (stored states, a lease).
    std::function<void(harness&)> setup;
    /// Starts it; `done(ec)` when it completes.
    std::function<void(harness&, std::function<void(error_code)>)> start;
    /// lock.timeout: longer than any jump of the clock `setup` arranges.
    duration lock_timeout = 5s;
    /// strict: a statement the untouched run must send (what `setup` arranges).
    const char* strict_sends = nullptr;
};

template <class... Ts>
auto bound(harness& h, std::function<void(error_code)> done) {
    return asio::bind_cancellation_slot(h.signal.slot(), [done = std::move(done)](error_code ec, Ts...) { done(ec); });
}

state job(std::string_view partial) { return state{"job", json::parse(partial).as_object(), {}}; }

std::vector<operation> operations() {
    auto stored = [](harness& h) {
        h.store->async_set(job(R"({"n":1})"), [](error_code) {});
        h.run();
    };
    auto with_lease = [](harness& h) {
        h.store->async_acquire_lock("job", [&h](error_code ec, store_t::lock_lease l) {
            if (!ec)
                h.lease.emplace(std::move(l));
        });
        h.run();
    };
    auto none = [](harness&) {};
    // A slow operation (strict): two thirds of its claim's lease are gone
    // once the claim is sent (lock.timeout is longer than that, so the
    // acquire itself does not give up), and it renews before it writes —
    // the renewal's every point is swept too, a lost renewal reply among
    // them (the release must then give back the newer token).
    auto stored_then_slow = [stored](harness& h) {
        stored(h);
        h.script->on_send = [&h, moved = false](const std::string& name) mutable {
            if (name == "grant.claim" && !std::exchange(moved, true))
                h.base.advance(h.options.lock.lease_ttl * 2 / 3);
        };
    };
    using done_fn = std::function<void(error_code)>;
    return {
        {"ensure_schema", false, none, [](harness& h, done_fn d) { h.store->async_ensure_schema(bound<>(h, d)); }},
        {"get", false, stored, [](harness& h, done_fn d) { h.store->async_get("job", bound<std::optional<state>>(h, d)); }},
        {"set", false, none, [](harness& h, done_fn d) { h.store->async_set(job(R"({"n":2})"), bound<>(h, d)); }},
        {"update (partial)", false, stored,
         [](harness& h, done_fn d) { h.store->async_update(job(R"({"m":2})"), bound<state>(h, d)); }},
        {"update (complete)", false, stored,
         [](harness& h, done_fn d) {
             h.store->async_update(state{"job", {}, json::object{{"n", 3}}}, bound<state>(h, d));
         }},
        {"update (renewal due)", false, stored_then_slow,
         [](harness& h, done_fn d) { h.store->async_update(job(R"({"m":2})"), bound<state>(h, d)); }, 60s, "grant.renew"},
        {"clear (renewal due)", false, stored_then_slow,
         [](harness& h, done_fn d) { h.store->async_clear("job", bound<>(h, d)); }, 60s, "grant.renew"},
        {"delete_state", false, stored, [](harness& h, done_fn d) { h.store->async_delete_state("job", bound<>(h, d)); }},
        {"clear", false, stored, [](harness& h, done_fn d) { h.store->async_clear("job", bound<>(h, d)); }},
        {"clear_all", false, stored, [](harness& h, done_fn d) { h.store->async_clear_all(bound<std::uint64_t>(h, d)); }},
        {"state_ids", false, stored,
         [](harness& h, done_fn d) { h.store->async_state_ids("j*", bound<std::vector<std::string>>(h, d)); }},
        {"get_all", false, stored,
         [](harness& h, done_fn d) { h.store->async_get_all([](state&&) {}, bound<std::uint64_t>(h, d)); }},
        {"set_all", false, stored,
         [](harness& h, done_fn d) {
             h.store->async_set_all({job(R"({"n":4})"), state{"other", {{"x", 1}}, {}}}, bound<>(h, d));
         }},
        {"copy", false, stored, [](harness& h, done_fn d) { h.store->async_copy("job", "copied", bound<>(h, d)); }},
        {"move", false, stored, [](harness& h, done_fn d) { h.store->async_move("job", "moved", bound<>(h, d)); }},
        {"merge", false, [](harness& h) {
             h.store->async_set(state{"src", {{"s", 1}}, {}}, [](error_code) {});
             h.run();
         },
         [](harness& h, done_fn d) { h.store->async_merge("src", "job", bound<state>(h, d)); }},
        {"acquire_lock", false, none,
         [](harness& h, done_fn d) {
             h.store->async_acquire_lock("job", asio::bind_cancellation_slot(
                                                    h.signal.slot(), [&h, d](error_code ec, store_t::lock_lease l) {
                                                        if (!ec)
                                                            h.lease.emplace(std::move(l));
                                                        d(ec);
                                                    }));
         }},
        {"set(lease)", true, with_lease,
         [](harness& h, done_fn d) { h.store->async_set(*h.lease, job(R"({"n":5})"), bound<>(h, d)); }},
        {"lease.renew", true, with_lease, [](harness& h, done_fn d) { h.lease->async_renew(bound<>(h, d)); }},
        {"lease.verify", true, with_lease, [](harness& h, done_fn d) { h.lease->async_verify(bound<>(h, d)); }},
        {"lease.release", true, with_lease, [](harness& h, done_fn d) { h.lease->async_release(bound<>(h, d)); }},
    };
}

struct sweep_totals {
    int operations = 0;
    int fault_points = 0, unhandled = 0, leaked = 0;
    int cancel_points = 0, threw = 0, ignored = 0;
};

/// Runs `op` once with `plan` applied; fills `o`, `log`; returns the leak
/// (empty: none) after giving the store's next operation a chance to give
/// back what it remembered.
struct run_result {
    bool ran_clean = true; ///< no exception out of run()
    outcome o;
    std::vector<test::script_state::sent> log;
    int waits = 0;
    bool cancel_emitted = false;
    int cancellable_after_cancel = 0;
    std::string leak;
};

run_result run_once(dialect d, lock_mode m, const operation& op, int at, injected what, int cancel_wait_at) {
    harness h(d, m, op.lock_timeout);
    run_result r;
    op.setup(h);
    h.script->reset_log();
    h.waits->waits = 0;
    h.script->at = at;
    h.script->what = what;
    h.waits->cancel_at = cancel_wait_at;
    op.start(h, [&r](error_code ec) {
        r.o.completed = true;
        r.o.ec = ec;
    });
    r.ran_clean = h.run();
    r.log = h.script->log;
    r.waits = h.waits->waits;
    r.cancel_emitted = h.script->cancel_emitted || h.waits->cancel_emitted;
    r.cancellable_after_cancel = h.script->cancellable_after_cancel;
    // Undo what the operation legitimately holds, then one more operation,
    // untouched, which gives back what the failed one remembered.
    h.script->at = 0;
    h.waits->cancel_at = 0;
    if (h.lease && h.lease->held()) {
        h.lease->async_release([](error_code) {});
        h.run();
    }
    h.lease.reset();
    h.store->async_get("follow-up", [](error_code, std::optional<state>) {});
    h.run();
    r.leak = h.held_by_nobody_check("job");
    if (r.leak.empty())
        r.leak = h.held_by_nobody_check("src");
    return r;
}

std::string describe(const char* op, dialect d, lock_mode m, const char* what, int k, const run_result& r) {
    std::string s = std::string(op) + " [" + name_of(m) + ", " + name_of(d) + "] " + what + " " + std::to_string(k) +
                    ": completed=" + (r.o.completed ? "yes" : "no") + " ec=" + r.o.ec.message() + " statements:";
    for (const auto& e : r.log)
        s += " " + e.name + (e.cancellable ? "" : "(cleanup)");
    if (!r.leak.empty())
        s += "; " + r.leak;
    return s;
}

void sweep(dialect d, lock_mode m, sweep_totals& t) {
    // strict on 18.16 refuses every lock (errc::unsupported, asserted below
    // for acquire_lock, update, clear…): no lease exists there to operate on.
    const bool no_leases = m == lock_mode::strict && d == dialect::v18_16;
    for (const operation& op : operations()) {
        if (no_leases && op.needs_lease)
            continue;
        ++t.operations;
        const run_result base = run_once(d, m, op, 0, injected::nothing, 0);
        INFO(describe(op.name, d, m, "untouched", 0, base));
        REQUIRE(base.ran_clean);
        REQUIRE(base.o.completed);
        // strict on a server without it refuses the locked operations, typed
        const bool refused = m == lock_mode::strict && d == dialect::v18_16 && base.o.ec == errc::unsupported;
        if (!refused)
            REQUIRE_FALSE(base.o.ec);
        CHECK(base.leak.empty());
        if (op.strict_sends && m == lock_mode::strict && !refused)
            CHECK(std::any_of(base.log.begin(), base.log.end(),
                              [&](const auto& sent) { return sent.name == op.strict_sends; }));
        const int statements = int(base.log.size());
        for (int k = 1; k <= statements; ++k) {
            const bool cleanup = !base.log[std::size_t(k - 1)].cancellable;
            for (injected what : {injected::fail_before_send, injected::fail_after_send}) {
                ++t.fault_points;
                const run_result r = run_once(d, m, op, k, what, 0);
                // A cleanup's failure is remembered and retried, not the caller's error.
                const bool handled = r.ran_clean && r.o.completed && (cleanup || r.o.ec);
                const char* label = what == injected::fail_before_send ? "fail before send of statement"
                                                                        : "fail after send of statement";
                if (!handled) {
                    ++t.unhandled;
                    FAIL_CHECK(describe(op.name, d, m, label, k, r));
                }
                if (!r.leak.empty()) {
                    ++t.leaked;
                    FAIL_CHECK(describe(op.name, d, m, label, k, r));
                }
            }
            if (cleanup)
                continue; // nothing may cut a cleanup statement short
            ++t.cancel_points;
            const run_result r = run_once(d, m, op, k, injected::cancel, 0);
            if (!r.ran_clean) {
                ++t.threw;
                FAIL_CHECK(describe(op.name, d, m, "cancel during statement", k, r));
            } else if (!r.o.completed || r.o.ec != asio::error::operation_aborted || r.cancellable_after_cancel > 0 ||
                       !r.leak.empty()) {
                ++t.ignored;
                FAIL_CHECK(describe(op.name, d, m, "cancel during statement", k, r));
            }
        }
        for (int w = 1; w <= base.waits; ++w) {
            ++t.cancel_points;
            const run_result r = run_once(d, m, op, 0, injected::nothing, w);
            if (!r.ran_clean) {
                ++t.threw;
                FAIL_CHECK(describe(op.name, d, m, "cancel during wait", w, r));
            } else if (!r.o.completed || r.o.ec != asio::error::operation_aborted || r.cancellable_after_cancel > 0 ||
                       !r.leak.empty()) {
                ++t.ignored;
                FAIL_CHECK(describe(op.name, d, m, "cancel during wait", w, r));
            }
        }
    }
}

TEST_SUITE("unit") {
    TEST_CASE("fault injection and cancellation at every statement and wait of every operation") {
        sweep_totals t;
        for (dialect d : {dialect::modern, dialect::v18_16})
            for (lock_mode m : {lock_mode::seed_compatible, lock_mode::strict})
                sweep(d, m, t);
        std::printf("fault-injection: operations=%d points=%d unhandled=%d leaked=%d\n", t.operations,
                    t.fault_points, t.unhandled, t.leaked);
        std::printf("cancellation: operations=%d points=%d threw=%d ignored=%d\n", t.operations, t.cancel_points,
                    t.threw, t.ignored);
        CHECK(t.fault_points >= 200);
        CHECK(t.cancel_points >= 200);
    }

    TEST_CASE("strict update(): claim, read, fenced write, release — four statements; three for a complete state") {
        // The claim is not read back (acquire_request::optimistic): the fenced
        // write proves it. The store knows the newest token from its own
        // last release, so it reads no grant first either.
        harness h(dialect::modern, lock_mode::strict);
        auto update = [&](state s) {
            auto done = h.store->async_update(std::move(s), asio::use_future);
            REQUIRE(h.run());
            return done.get();
        };
        update(state{"job", object{{"n", 0}}, {}});
        auto sent = [&] {
            std::vector<std::string> names;
            for (const auto& st : h.script->log)
                names.push_back(st.name);
            h.script->reset_log();
            return names;
        };
        sent();
        CHECK(update(state{"job", object{{"n", 1}}, {}}).partial_state.at("n").as_int64() == 1);
        CHECK(sent() == std::vector<std::string>{"grant.claim", "state.select_with_version", "state.insert_fenced",
                                                 "grant.release"});
        update(state{"job", {}, object{{"done", true}}});
        CHECK(sent() == std::vector<std::string>{"grant.claim", "state.insert_fenced", "grant.release"});
        CHECK(h.held_by_nobody_check("job").empty());
    }
}

} // namespace faults_tests
