// The strict lock's lease contract on chDB, on the real clock, under chaos
// (docs/development.md: the lease torture). Part of the `embedded` suite.
//
// Threads, each with its own store over this process's chDB engine, take
// the lock of one state id again and again and, per holder, do something
// chosen at random (seeded; the seed is printed and CHSTATE_TORTURE_SEED
// replays it): renew late (a few ms before the lease's expiry, sometimes
// after it), renew by a heartbeat, cancel an acquire a few ms in, abandon
// a lease (kept, never released: it must expire), read-modify-write the
// state through store.set(lease, s) appending a unique write id to a log,
// or run update()/merge() on the same id; meanwhile `OPTIMIZE TABLE …
// FINAL` merges the grant table now and then.
//
// What is measured, on the one clock all threads share: each lease's
// validity window, [when its acquire returned, its expires_at()] extended
// by each renewal that succeeded and cut short when its release begins.
// Two windows that intersect are a live overlap (equivalently: an acquire
// returned a live lease inside another lease's window). Every write id
// whose set(lease, s) succeeded must be in the final state's log
// (lost_confirmed). A grant whose lock_id no lease was handed (an update's
// or a cancelled acquire's) must have been released (left_behind; the
// grant table's rows are polled into a history, since releases prune it).
//
// Prints `lease-torture: holders=N live_overlaps=L lost_confirmed=C` and a
// detail line; scripts/test.sh requires the first on a full run.
#include "support.hpp"

#include <doctest/doctest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <sstream>

namespace embedded_tests {
std::shared_ptr<chstate::chdb_engine> shared_engine(); // embedded.cpp: this process's chDB folder
}

namespace lease_torture {
using namespace chstate;
using namespace std::chrono_literals;
using store_t = basic_state_store<chdb_transport>;
using lease_t = store_t::lock_lease;

using test::env_or;

/// Milliseconds since the epoch on the stores' clock (real_clock: the system clock).
inline std::int64_t ms_of(time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline time_point now() { return real_clock{}.now(); }

/// One lease's validity window on the shared clock.
struct window {
    int thread = 0;
    std::string how; ///< which chaos it went through
    std::string lock_id;
    std::uint64_t first_token = 0, last_token = 0;
    time_point acquired;     ///< when its acquire returned
    time_point ends;         ///< its newest expiry, or when its release began if earlier
    bool live() const { return acquired < ends; }
};

/// The grant table's rows as the monitor saw them (the releases prune it).
struct grant_event_row {
    std::uint64_t token;
    std::string lock_id, kind;
    std::uint64_t expires_ms;
    auto operator<=>(const grant_event_row&) const = default;
};

struct tallies {
    std::atomic<int> holders{0}, renew_ok{0}, renew_refused{0}, late_renew_ok{0}, late_renew_refused{0},
        after_expiry_refused{0}, after_expiry_ok{0}, heartbeat_lost{0}, cancels{0}, cancel_aborted{0},
        cancel_leased{0}, cancel_both{0}, cancel_neither{0}, abandoned{0}, writes_ok{0}, writes_refused{0},
        updates_ok{0}, updates_refused{0}, merges_ok{0}, merges_refused{0}, timeouts{0}, releases_refused{0},
        optimizes{0}, stale_grants{0};
};

struct torture {
    store_options options;
    std::string id = "torture";
    std::string source_id = "torture-source"; ///< merge()'s source
    std::chrono::steady_clock::time_point deadline;
    int target_holders = 0;
    std::atomic<bool> stopping{false}; ///< the holders finish what they are doing, then stop
    /// Set once every holder thread has returned: only then has the grant
    /// table seen its last event (a holder that saw `stopping` still ends
    /// its acquire, update or hold, releases included), so the monitor's
    /// final poll waits for it.
    std::atomic<bool> holders_done{false};
    std::atomic<std::int64_t> next_write_id{1};
    tallies n;

    std::mutex m; // guards what follows
    std::vector<window> windows;
    std::vector<std::int64_t> confirmed;
    std::vector<std::string> unexpected;
    std::vector<lease_t> abandoned; ///< kept alive, never released, until the end
    std::set<grant_event_row> history;

    bool stop() {
        if (!stopping && (n.holders >= target_holders || std::chrono::steady_clock::now() >= deadline))
            stopping = true;
        return stopping;
    }
    void record(window w) {
        std::lock_guard lk(m);
        windows.push_back(std::move(w));
    }
    void fail(const std::string& what) {
        std::lock_guard lk(m);
        unexpected.push_back(what);
    }
};

/// What each thread is doing, for the watchdog's report on a hang.
struct activity {
    std::atomic<const char*> what{"starting"};
    std::atomic<std::int64_t> since_ms{0};
    void set(const char* w) {
        what = w;
        since_ms = ms_of(now());
    }
};

class holder {
public:
    holder(torture& t, int k, std::uint64_t seed, activity& act)
        : t_(t), k_(k), rng_(seed * 1000003u + static_cast<std::uint64_t>(k)), act_(act),
          store_(chdb_transport(embedded_tests::shared_engine()), t.options) {}

    void run() {
        while (!t_.stop()) {
            const int roll = uniform(0, 99);
            try {
                if (roll < 4)
                    update_or_merge();
                else if (roll < 12)
                    cancelled_acquire();
                else
                    acquire_and_hold();
            } catch (const chstate::error& e) {
                if (e.code() == errc::state_id_locked)
                    ++t_.n.timeouts;
                else
                    t_.fail(std::string(act_.what.load()) + ": " + e.what());
            } catch (const std::exception& e) {
                t_.fail(std::string(act_.what.load()) + ": " + e.what());
            }
        }
        // One more operation gives back what a failed release left (orphans).
        act_.set("final get");
        try {
            store_.get(t_.id);
        } catch (const std::exception& e) {
            t_.fail(std::string("final get: ") + e.what());
        }
        act_.set("done");
    }

private:
    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    const lock_options& lo() const { return t_.options.lock; }

    /// update() or merge() of the same id: takes the lock inside the store.
    void update_or_merge() {
        try {
            if (uniform(0, 1) == 0) {
                act_.set("update");
                store_.update(state{t_.id, json::object{{"u" + std::to_string(k_), ++updates_}}, {}});
                ++t_.n.updates_ok;
            } else {
                act_.set("merge");
                store_.merge(t_.source_id, t_.id);
                ++t_.n.merges_ok;
            }
        } catch (const chstate::error& e) {
            if (e.code() != errc::lock_lost)
                throw;
            ++(std::string(act_.what.load()) == "update" ? t_.n.updates_refused : t_.n.merges_refused);
        }
    }

    /// An acquire raced against a short timer: operation_aborted or a lease, never both.
    void cancelled_acquire() {
        act_.set("cancelled acquire");
        ++t_.n.cancels;
        asio::io_context ioc; // the completion and the timer's cancel both run here: no race on the signal
        asio::cancellation_signal cancel;
        bool done = false;
        error_code got;
        lease_t won;
        time_point returned;
        asio::steady_timer timer(ioc, std::chrono::milliseconds(uniform(0, 40)));
        store_.async_acquire_lock(
            t_.id, asio::bind_cancellation_slot(cancel.slot(), asio::bind_executor(ioc, [&](error_code ec, lease_t l) {
                                                    returned = now();
                                                    done = true;
                                                    got = ec;
                                                    won = std::move(l);
                                                    timer.cancel();
                                                })));
        timer.async_wait([&](error_code) {
            if (!done)
                cancel.emit(asio::cancellation_type::terminal);
        });
        ioc.run();
        if (got == asio::error::operation_aborted && !won.held()) {
            ++t_.n.cancel_aborted;
            return;
        }
        if (got == asio::error::operation_aborted) { // both: a lease that nobody asked for
            ++t_.n.cancel_both;
            t_.fail("cancelled acquire completed with operation_aborted and a lease, token " +
                    std::to_string(won.token()));
            hold(std::move(won), returned, "cancel-both");
            return;
        }
        if (got == errc::state_id_locked) {
            ++t_.n.timeouts;
            return;
        }
        if (got || !won.held()) {
            ++t_.n.cancel_neither;
            t_.fail("cancelled acquire: " + got.message() + (won.held() ? " with a lease" : " without a lease"));
            return;
        }
        ++t_.n.cancel_leased;
        hold(std::move(won), returned, "cancel-won");
    }

    void acquire_and_hold() {
        act_.set("acquire");
        lease_t lease = store_.acquire_lock(t_.id);
        const time_point returned = now();
        const int roll = uniform(0, 99);
        const char* how = roll < 2 ? "abandoned" : roll < 7 ? "late-renew" : roll < 11 ? "heartbeat" : "plain";
        hold(std::move(lease), returned, how);
    }

    /// One fenced read-modify-write: appends a fresh write id to the log.
    void fenced_write(const lease_t& lease) {
        act_.set("fenced write");
        const std::int64_t wid = t_.next_write_id++;
        auto cur = store_.get(t_.id);
        if (!cur)
            throw std::runtime_error("the state vanished");
        object completed = cur->completed_state;
        completed["log"].as_array().push_back(wid);
        try {
            store_.set(lease, state{t_.id, cur->partial_state, std::move(completed)});
        } catch (const chstate::error& e) {
            if (e.code() != errc::lock_lost)
                throw;
            ++t_.n.writes_refused;
            return;
        }
        ++t_.n.writes_ok;
        std::lock_guard lk(t_.m);
        t_.confirmed.push_back(wid);
    }

    /// renew(); true when it succeeded (lock_lost: refused).
    bool renew(lease_t& lease) {
        act_.set("renew");
        try {
            lease.renew();
        } catch (const chstate::error& e) {
            if (e.code() != errc::lock_lost)
                throw;
            ++t_.n.renew_refused;
            return false;
        }
        ++t_.n.renew_ok;
        return true;
    }

    void sleep_until(time_point t) {
        act_.set("sleep");
        std::this_thread::sleep_until(t);
    }

    void hold(lease_t lease, time_point returned, std::string how) {
        ++t_.n.holders;
        window w{k_, how, lease.lock_id(), lease.token(), lease.token(), returned, lease.expires_at()};
        if (!w.live())
            ++t_.n.stale_grants;
        // The window so far: it only grows (renewals) until the release starts.
        auto extend = [&] {
            w.ends = std::max(w.ends, lease.expires_at());
            w.last_token = std::max(w.last_token, lease.token());
        };
        if (how == "abandoned") {
            ++t_.n.abandoned;
            if (uniform(0, 1) == 0)
                fenced_write(lease);
            extend();
            t_.record(std::move(w));
            std::lock_guard lk(t_.m);
            t_.abandoned.push_back(std::move(lease));
            return;
        }
        if (how == "late-renew") {
            fenced_write(lease);
            const bool after = uniform(0, 4) == 0; // one in five: after the expiry
            sleep_until(lease.expires_at() + (after ? std::chrono::milliseconds(uniform(0, 30))
                                                    : -std::chrono::milliseconds(uniform(2, 15))));
            const bool ok = renew(lease);
            ++(after ? (ok ? t_.n.after_expiry_ok : t_.n.after_expiry_refused)
                     : (ok ? t_.n.late_renew_ok : t_.n.late_renew_refused));
            if (ok)
                extend();
            fenced_write(lease); // refused when the lease was lost
        } else if (how == "heartbeat") {
            lease.start_heartbeat(std::chrono::milliseconds(lo().lease_ttl.count() / 3),
                                  [lost = &t_.n.heartbeat_lost](error_code) { ++*lost; });
            const int writes = uniform(2, 3);
            for (int i = 0; i < writes; ++i) {
                fenced_write(lease);
                extend();
                if (uniform(0, 3) == 0 && renew(lease)) // an explicit renewal racing the heartbeat's
                    extend();
                sleep_until(now() + std::chrono::milliseconds(uniform(60, 160)));
                extend();
            }
        } else {
            const int roll_writes = uniform(0, 99), writes = roll_writes < 40 ? 0 : roll_writes < 85 ? 1 : 2;
            for (int i = 0; i < writes; ++i) {
                fenced_write(lease);
                if (uniform(0, 9) == 0 && renew(lease))
                    extend();
            }
        }
        extend();
        w.ends = std::min(w.ends, now()); // the release begins: the window closes
        t_.record(std::move(w));
        act_.set("release");
        try {
            lease.release();
        } catch (const chstate::error& e) {
            if (e.code() != errc::lock_lost)
                throw;
            ++t_.n.releases_refused;
        }
    }

    torture& t_;
    int k_;
    std::mt19937_64 rng_;
    activity& act_;
    store_t store_;
    std::int64_t updates_ = 0;
};

/// Polls the grant table into the history, and merges it now and then.
inline void monitor(torture& t, const std::string& grant_table, std::uint64_t seed, activity& act) {
    chdb_transport tr(embedded_tests::shared_engine());
    std::mt19937_64 rng(seed ^ 0x5eedULL);
    auto next_optimize = std::chrono::steady_clock::now() + 300ms;
    // A release of a token that is a multiple of 64 prunes the older rows
    // (strict.hpp, grant_prune_interval): near one, poll every few ms.
    std::uint64_t newest = 0;
    auto poll = [&] {
        act.set("poll");
        std::istringstream rows(test::raw_sql(tr, "SELECT token, lock_id, kind, expires_ms FROM " + grant_table +
                                                      " WHERE state_id = '" + t.id + "'"));
        std::string line;
        std::lock_guard lk(t.m);
        while (std::getline(rows, line)) {
            grant_event_row r;
            std::istringstream f(line);
            f >> r.token >> r.lock_id >> r.kind >> r.expires_ms;
            newest = std::max(newest, r.token);
            t.history.insert(std::move(r));
        }
    };
    auto near_prune = [&] {
        const std::uint64_t to_next = detail::grant_prune_interval - newest % detail::grant_prune_interval;
        return to_next <= 3 || newest % detail::grant_prune_interval == 0;
    };
    while (!t.holders_done) {
        try {
            poll();
            if (std::chrono::steady_clock::now() >= next_optimize) {
                act.set("optimize");
                test::raw_sql(tr, "OPTIMIZE TABLE " + grant_table + " FINAL");
                ++t.n.optimizes;
                next_optimize = std::chrono::steady_clock::now() +
                                std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1200)(rng));
            }
        } catch (const std::exception& e) {
            t.fail(std::string("monitor: ") + e.what());
        }
        act.set("sleep");
        std::this_thread::sleep_for(near_prune() ? 10ms : 100ms);
    }
    try {
        poll();
    } catch (const std::exception& e) {
        t.fail(std::string("monitor: ") + e.what());
    }
    act.set("done");
}

/// The history's rows around `token`, for a report.
inline std::string history_around(const torture& t, std::uint64_t lo, std::uint64_t hi, std::int64_t t0_ms) {
    std::string out;
    for (const auto& r : t.history)
        if (r.token + 1 >= lo && r.token <= hi + 1)
            out += "    token " + std::to_string(r.token) + " " + r.kind + " " + r.lock_id.substr(0, 8) +
                   " expires_ms=" + std::to_string(std::int64_t(r.expires_ms) - t0_ms) + "\n";
    return out;
}

} // namespace lease_torture

namespace lease_torture_cases {
using namespace chstate;
using namespace lease_torture;

TEST_SUITE("embedded") {

TEST_CASE("embedded: the strict lease contract under a real-time torture (lease-torture)") {
    const std::uint64_t seed = env_or("CHSTATE_TORTURE_SEED", 0) != 0
                                   ? static_cast<std::uint64_t>(env_or("CHSTATE_TORTURE_SEED", 0))
                                   : std::random_device{}() % 1000000000u + 1;
    const int threads = static_cast<int>(env_or("CHSTATE_TORTURE_THREADS", 8));
    // The run ends at its holder count. The budget only guards against a
    // hang (a machine so busy that 520 holders take longer fails the count,
    // and says so): a pass never depends on the machine's speed. About 50 s
    // alone on 2 cores, 3-4x that beside the other suites or CPU burners.
    const auto budget = std::chrono::seconds(env_or("CHSTATE_TORTURE_SECONDS", 900));
    std::printf("lease-torture: seed=%" PRIu64 " (CHSTATE_TORTURE_SEED replays the choices)\n", seed);
    std::fflush(stdout);

    torture t;
    t.options.schema = test::unique_schema("lease_torture");
    t.options.lock.mode = lock_mode::strict;
    t.options.lock.lease_ttl = 300ms;
    t.options.lock.clock_skew = 20ms; // one clock for all: only the grace matters
    t.options.lock.retry_interval = std::chrono::milliseconds(env_or("CHSTATE_TORTURE_RETRY_MS", 100));
    t.options.lock.timeout = 20s;
    t.target_holders = static_cast<int>(env_or("CHSTATE_TORTURE_HOLDERS", 520));
    const std::string grant_table = "`" + t.options.schema + "`.`state_grant`";
    {
        store_t setup(chdb_transport(embedded_tests::shared_engine()), t.options);
        setup.set(state{t.id, {}, json::object{{"log", json::array{}}}});
        setup.set(state{t.source_id, json::object{{"merged", json::object{{"from", "source"}}}}, {}});
        setup.acquire_lock(t.id).release(); // creates the grant table
    }

    const auto started = std::chrono::steady_clock::now();
    const std::int64_t t0_ms = ms_of(now());
    t.deadline = started + budget;
    std::vector<activity> acts(static_cast<std::size_t>(threads) + 1);
    std::atomic<bool> finished{false};
    // A hang is a finding too: report who is stuck where, then fail the run.
    std::thread watchdog([&] {
        while (!finished) {
            std::this_thread::sleep_for(100ms);
            if (std::chrono::steady_clock::now() < t.deadline + 90s)
                continue;
            std::fprintf(stderr, "lease-torture: still running 90 s past its budget (seed %" PRIu64 "):\n", seed);
            for (std::size_t i = 0; i < acts.size(); ++i)
                std::fprintf(stderr, "  %s %zu: %s for %lld ms\n", i < std::size_t(threads) ? "thread" : "monitor", i,
                             acts[i].what.load(), static_cast<long long>(ms_of(now()) - acts[i].since_ms));
            std::fflush(stderr);
            std::abort();
        }
    });
    std::vector<std::thread> pool;
    for (int k = 0; k < threads; ++k)
        pool.emplace_back([&, k] {
            try {
                holder(t, k, seed, acts[std::size_t(k)]).run();
            } catch (const std::exception& e) {
                t.fail("thread " + std::to_string(k) + ": " + e.what());
            }
        });
    std::thread mon([&] { monitor(t, grant_table, seed, acts.back()); });
    for (auto& th : pool)
        th.join(); // each returned after seeing t.stopping
    t.holders_done = true;
    mon.join();
    finished = true;
    watchdog.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    // Live overlaps: two leases' windows intersect.
    std::sort(t.windows.begin(), t.windows.end(), [](const window& a, const window& b) { return a.acquired < b.acquired; });
    int overlaps = 0;
    for (std::size_t i = 0; i < t.windows.size(); ++i) {
        const window& a = t.windows[i];
        for (std::size_t j = i + 1; j < t.windows.size() && t.windows[j].acquired < a.ends; ++j) {
            const window& b = t.windows[j];
            if (!a.live() || !b.live())
                continue;
            ++overlaps;
            MESSAGE("live overlap: thread " << a.thread << " (" << a.how << ", tokens " << a.first_token << ".."
                                            << a.last_token << ", " << a.lock_id.substr(0, 8) << ") valid "
                                            << ms_of(a.acquired) - t0_ms << ".." << ms_of(a.ends) - t0_ms
                                            << " ms; thread " << b.thread << " (" << b.how << ", tokens "
                                            << b.first_token << ".." << b.last_token << ", "
                                            << b.lock_id.substr(0, 8) << ") acquired at "
                                            << ms_of(b.acquired) - t0_ms << " ms, valid to "
                                            << ms_of(b.ends) - t0_ms << " ms\n  grant history:\n"
                                            << history_around(t, std::min(a.first_token, b.first_token),
                                                              std::max(a.last_token, b.last_token), t0_ms));
        }
    }

    // Lost confirmed writes: each must be in the final log.
    std::set<std::int64_t> logged;
    std::uint64_t last_token = 0;
    {
        store_t check(chdb_transport(embedded_tests::shared_engine()), t.options);
        auto final_state = check.get(t.id);
        REQUIRE(final_state.has_value());
        for (const auto& v : final_state->completed_state.at("log").as_array())
            logged.insert(v.as_int64());
        auto after = check.acquire_lock(t.id); // every abandoned lease has expired by now
        last_token = after.token();
        after.release();
    }
    int lost = 0;
    for (std::int64_t wid : t.confirmed)
        if (!logged.contains(wid)) {
            ++lost;
            MESSAGE("confirmed write " << wid << " is not in the final state's log");
        }

    // Grants left behind: a lock_id no lease was handed, granted and never released.
    std::set<std::string> leased;
    for (const auto& w : t.windows)
        leased.insert(w.lock_id);
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> events; // lock_id -> newest grant, newest release
    for (const auto& r : t.history) {
        auto& [granted, released] = events[r.lock_id];
        (r.kind == "grant" ? granted : released) = std::max(r.kind == "grant" ? granted : released, r.token);
    }
    int left_behind = 0;
    for (const auto& [lock_id, ev] : events)
        if (ev.first != 0 && ev.second < ev.first && !leased.contains(lock_id)) {
            ++left_behind;
            MESSAGE("grant left behind: " << lock_id << " token " << ev.first << "\n"
                                          << history_around(t, ev.first, ev.first, t0_ms));
        }
    // An abandoned lease was never renewed: it must have expired (or been superseded).
    int abandoned_valid = 0;
    for (auto& l : t.abandoned) {
        try {
            l.verify();
            ++abandoned_valid;
            MESSAGE("abandoned lease (token " << l.token() << ") still verifies at the end");
        } catch (const chstate::error& e) {
            CHECK(e.code() == errc::lock_lost);
        }
        try {
            l.release();
        } catch (const chstate::error&) {
        }
    }

    const auto& n = t.n;
    std::printf("lease-torture: holders=%d live_overlaps=%d lost_confirmed=%d\n", n.holders.load(), overlaps, lost);
    std::printf("lease-torture detail: seed=%" PRIu64 " threads=%d lease_ttl=300ms clock_skew=20ms "
                "renewals ok=%d refused=%d (late: ok=%d refused=%d; after expiry: refused=%d ok=%d; "
                "heartbeats lost=%d) cancels=%d (aborted=%d leased=%d both=%d) abandoned=%d "
                "fenced_writes ok=%d refused=%d updates ok=%d refused=%d merges ok=%d refused=%d "
                "timeouts=%d releases_refused=%d stale_grants=%d left_behind=%d optimize=%d last_token=%" PRIu64
                " unexpected=%zu time=%.1fs\n",
                seed, threads, n.renew_ok.load(), n.renew_refused.load(), n.late_renew_ok.load(),
                n.late_renew_refused.load(), n.after_expiry_refused.load(), n.after_expiry_ok.load(),
                n.heartbeat_lost.load(), n.cancels.load(), n.cancel_aborted.load(), n.cancel_leased.load(),
                n.cancel_both.load(), n.abandoned.load(), n.writes_ok.load(), n.writes_refused.load(),
                n.updates_ok.load(), n.updates_refused.load(), n.merges_ok.load(), n.merges_refused.load(),
                n.timeouts.load(), n.releases_refused.load(), n.stale_grants.load(), left_behind, n.optimizes.load(),
                last_token, t.unexpected.size(), secs);
    std::fflush(stdout);
    for (const auto& u : t.unexpected)
        MESSAGE("unexpected: " << u);
    CHECK_MESSAGE(n.holders >= 500, "the budget ran out before 500 holders (" << budget.count()
                                                                             << " s, CHSTATE_TORTURE_SECONDS): a hang?");
    CHECK(overlaps == 0);
    CHECK(lost == 0);
    CHECK(left_behind == 0);
    CHECK(n.cancel_both == 0);
    CHECK(n.cancel_neither == 0);
    CHECK(n.after_expiry_ok == 0); // a lapsed lease is never renewed
    CHECK(abandoned_valid == 0);
    CHECK(t.unexpected.empty());
}

} // TEST_SUITE
} // namespace lease_torture_cases

namespace short_lease_updates {
using namespace chstate;
using namespace lease_torture;

TEST_SUITE("embedded") {

TEST_CASE("embedded: update() with lease_ttl below an update's own latency (update-short-lease)") {
    // The livelock: a lease shorter than one update() (acquire, read,
    // write, confirm) would be taken over midway, every time. update() renews
    // its lease itself once half of it is gone; this measures what that buys
    // on chDB with 8 threads, and checks that no update reported as done was
    // lost.
    const int threads = static_cast<int>(env_or("CHSTATE_SHORT_LEASE_THREADS", 8)), per_thread = static_cast<int>(env_or("CHSTATE_SHORT_LEASE_UPDATES", 10));
    store_options o;
    o.schema = test::unique_schema("short_lease");
    o.lock.mode = lock_mode::strict;
    o.lock.lease_ttl = std::chrono::milliseconds(env_or("CHSTATE_SHORT_LEASE_TTL_MS", 30));
    o.lock.clock_skew = 5ms;
    o.lock.retry_interval = 2ms;
    o.lock.timeout = 5s;
    const std::string id = "short";
    {
        store_t setup(chdb_transport(embedded_tests::shared_engine()), o);
        setup.set(state{id, json::object{{"start", 0}}, {}});
    }
    std::atomic<int> ok{0}, lock_lost{0}, timeouts{0};
    std::mutex m;
    std::vector<std::string> done_keys, other;
    std::map<std::string, int> why_lost; // the lock_lost messages' reasons
    const auto started = std::chrono::steady_clock::now();
    const auto budget = started + 30s;
    std::vector<std::thread> pool;
    for (int k = 0; k < threads; ++k)
        pool.emplace_back([&, k] {
            store_t store(chdb_transport(embedded_tests::shared_engine()), o);
            for (int i = 0; i < per_thread && std::chrono::steady_clock::now() < budget; ++i) {
                const std::string key = "k" + std::to_string(k) + "_" + std::to_string(i);
                try {
                    store.update(state{id, json::object{{key, i}}, {}});
                    ++ok;
                    std::lock_guard lk(m);
                    done_keys.push_back(key);
                } catch (const chstate::error& e) {
                    if (e.code() == errc::lock_lost) {
                        ++lock_lost;
                        std::string why = e.what();
                        if (auto at = why.find("no longer held: "); at != std::string::npos)
                            why = why.substr(at + 16);
                        if (auto digit = why.find_first_of("0123456789"); digit != std::string::npos)
                            why = why.substr(0, digit) + "N";
                        std::lock_guard lk(m);
                        ++why_lost[why];
                    } else if (e.code() == errc::state_id_locked)
                        ++timeouts;
                    else {
                        std::lock_guard lk(m);
                        other.push_back(e.what());
                    }
                }
            }
        });
    for (auto& th : pool)
        th.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    store_t check(chdb_transport(embedded_tests::shared_engine()), o);
    auto final_state = check.get(id);
    REQUIRE(final_state.has_value());
    int lost = 0;
    for (const auto& key : done_keys)
        if (!final_state->partial_state.contains(key)) {
            ++lost;
            MESSAGE("update " << key << " succeeded but is not in the final state");
        }
    const int attempts = ok + lock_lost + timeouts + static_cast<int>(other.size());
    std::printf("update-short-lease: threads=%d lease_ttl=%lldms clock_skew=%lldms attempts=%d ok=%d lock_lost=%d "
                "timeouts=%d other=%zu lost_confirmed=%d time=%.1fs (%.0f ms per successful update)\n",
                threads, static_cast<long long>(o.lock.lease_ttl.count()),
                static_cast<long long>(o.lock.clock_skew.count()), attempts, ok.load(), lock_lost.load(), timeouts.load(), other.size(), lost, secs,
                ok ? 1000.0 * secs / ok : 0.0);
    std::fflush(stdout);
    for (const auto& [why, count] : why_lost)
        std::printf("update-short-lease: lock_lost %dx: %s\n", count, why.c_str());
    std::fflush(stdout);
    for (const auto& e : other)
        MESSAGE("unexpected: " << e);
    CHECK(lost == 0);
    CHECK(other.empty());
}

} // TEST_SUITE
} // namespace short_lease_updates
