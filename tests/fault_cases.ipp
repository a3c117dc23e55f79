// The fault suite (issue 11): the server killed, stopped past the timeout or
// restarted under a stream of writes; idle connections the server closed;
// an exception after status 200. Counted in test::faults() (tests/tallies.hpp):
//
//   faults: cases=N lost=L partial=P
//
// Each writer keeps a ledger of what it attempted and what the store
// answered: acknowledged, outcome_unknown (the write may have landed), or
// refused (any other error: it must not have landed). Afterwards a fresh
// store reads every id back, and for each the value found must be one the
// ledger allows:
//   - absent only if no write to it was acknowledged;
//   - otherwise the value of the last acknowledged write or of a later
//     attempt that was not refused, whole (every key as written).
// A value older than the last acknowledged one (or none) is `lost`; a value
// no attempt wrote, a torn one, or one whose write was refused is `partial`.
//
// Included at the end of server.cpp; the server is the suite's shared one
// (CHSTATE_TEST_SERVER_DIR), killed, paused and restarted through
// scripts/clickhouse-server.sh, always running again when a case ends.

namespace fault_tests {

using namespace chstate;
using namespace server_tests;
using namespace std::chrono_literals;

enum class outcome { acknowledged, unknown, refused };

inline outcome classify(const std::exception_ptr& failure) {
    if (!failure)
        return outcome::acknowledged;
    try {
        std::rethrow_exception(failure);
    } catch (const chstate::error& e) {
        return e.code() == errc::outcome_unknown ? outcome::unknown : outcome::refused;
    } catch (...) {
        return outcome::refused;
    }
}

/// What one writer attempted, per id, in order.
class ledger {
public:
    struct attempt {
        long seq;
        outcome result;
    };

    void record(const std::string& id, long seq, outcome result) {
        std::lock_guard lk(mutex_);
        by_id_[id].push_back({seq, result});
        ++counts_[static_cast<int>(result)];
    }
    long count(outcome o) const {
        std::lock_guard lk(mutex_);
        return counts_[static_cast<int>(o)];
    }
    std::map<std::string, std::vector<attempt>> snapshot() const {
        std::lock_guard lk(mutex_);
        return by_id_;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::vector<attempt>> by_id_;
    long counts_[3] = {0, 0, 0};
};

/// The state writer `seq` wrote to `id`: whole or not at all.
inline object written_value(const std::string& id, long seq) {
    return object{{"id", id}, {"seq", seq}, {"pad", std::string(200 + seq % 97, char('a' + seq % 26))}};
}

struct verdict {
    long lost = 0, partial = 0, checked = 0;
};

/// Checks what `read` returns for each id of `l` against the ledger's rules
/// (see the top of this file); `read` gives the state's partial part, or
/// nothing when the id has no state.
template <class Read>
verdict check_ledger(const ledger& l, Read read) {
    verdict v;
    for (const auto& [id, attempts] : l.snapshot()) {
        ++v.checked;
        std::optional<std::size_t> last_ack;
        for (std::size_t i = 0; i < attempts.size(); ++i)
            if (attempts[i].result == outcome::acknowledged)
                last_ack = i;
        const std::optional<object> found = read(id);
        if (!found) {
            if (last_ack) {
                ++v.lost;
                MESSAGE("lost: '" << id << "' is absent after seq " << attempts[*last_ack].seq << " was acknowledged");
            }
            continue;
        }
        const value* seq = found->if_contains("seq");
        std::optional<std::size_t> at;
        if (seq && seq->is_int64())
            for (std::size_t i = 0; i < attempts.size(); ++i)
                if (attempts[i].seq == seq->as_int64())
                    at = i;
        if (!at || *found != written_value(id, attempts[*at].seq)) {
            ++v.partial;
            MESSAGE("partial: '" << id << "' holds a value no attempt wrote whole: " << serialize_json(value(*found)));
        } else if (attempts[*at].result == outcome::refused) {
            ++v.partial;
            MESSAGE("partial: '" << id << "' holds seq " << attempts[*at].seq << ", whose write was refused");
        } else if (last_ack && *at < *last_ack) {
            ++v.lost;
            MESSAGE("lost: '" << id << "' holds seq " << attempts[*at].seq << " though seq "
                              << attempts[*last_ack].seq << " was acknowledged after it");
        }
    }
    return v;
}

/// The writers' connection settings: short timeouts, so a fault shows as an
/// error within seconds rather than a hang.
inline http_options fault_options() {
    http_options o = server_options();
    o.connect_timeout = 1s;
    o.request_timeout = 2s;
    return o;
}

inline store_options fault_store_options(const std::string& schema) {
    store_options so;
    so.schema = schema;
    so.lock = test::fast_locks();
    return so;
}

/// The server is running again when a case ends, whatever happened in it.
struct server_back_at_exit {
    ~server_back_at_exit() {
        try {
            server_script("resume");
        } catch (...) {
        }
        try {
            server_script("start");
        } catch (...) {
        }
    }
};

/// Runs `writers` threads, each calling `step(writer, n, store)` for
/// n = 0, 1, … (a failed step is recorded by the step itself; after one the
/// writer pauses 20 ms so a dead server is not hammered). Once every writer
/// has `before` acknowledged steps, `fault()` runs; then the writers go on
/// until each has `after` more acknowledged steps (or 60 s pass: a writer
/// that cannot write again is a failure), and stop.
struct stream_result {
    std::vector<long> acks_before_fault, acks_at_end;
    bool recovered = true;
    std::chrono::milliseconds longest_step{0};
};

template <class Step, class Fault>
stream_result run_stream(const std::string& schema, int writers, long before, long after, Step step, Fault fault,
                         const http_options& options = fault_options()) {
    stream_result res;
    std::vector<std::atomic<long>> acks(writers);
    std::atomic<bool> stop{false};
    std::atomic<long> longest_ms{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w)
        threads.emplace_back([&, w] {
            http_transport t(server_tests::threads().get_executor(), options);
            basic_state_store<http_transport> store(t, fault_store_options(schema));
            for (long n = 0; !stop; ++n) {
                const auto t0 = std::chrono::steady_clock::now();
                const bool ok = step(w, n, store);
                const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - t0);
                test::atomic_max(longest_ms, static_cast<long>(took.count()));
                if (ok)
                    ++acks[w];
                else
                    std::this_thread::sleep_for(20ms);
            }
        });
    auto wait_for = [&](const std::vector<long>& floor, long more) {
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        for (;;) {
            bool all = true;
            for (int w = 0; w < writers; ++w)
                all = all && acks[w] >= floor[w] + more;
            if (all)
                return true;
            if (std::chrono::steady_clock::now() > deadline)
                return false;
            std::this_thread::sleep_for(5ms);
        }
    };
    const std::vector<long> zero(writers, 0);
    res.recovered = wait_for(zero, before);
    for (int w = 0; w < writers; ++w)
        res.acks_before_fault.push_back(acks[w]);
    std::exception_ptr fault_failed; // rethrown once the writers are joined
    if (res.recovered) {
        try {
            fault();
            std::vector<long> at_fault;
            for (int w = 0; w < writers; ++w)
                at_fault.push_back(acks[w]);
            res.recovered = wait_for(at_fault, after);
        } catch (...) {
            fault_failed = std::current_exception();
        }
    }
    stop = true;
    for (auto& t : threads)
        t.join();
    if (fault_failed)
        std::rethrow_exception(fault_failed);
    for (int w = 0; w < writers; ++w)
        res.acks_at_end.push_back(acks[w]);
    res.longest_step = std::chrono::milliseconds(longest_ms.load());
    return res;
}

/// Reads every id of the ledger through a fresh store and tallies the verdict.
inline verdict verify_and_tally(const std::string& schema, const ledger& l, const char* name) {
    http_transport t(server_tests::threads().get_executor(), server_options());
    basic_state_store<http_transport> store(t, fault_store_options(schema));
    verdict v = check_ledger(l, [&](const std::string& id) -> std::optional<object> {
        auto s = store.get(id);
        if (!s)
            return std::nullopt;
        return s->partial_state;
    });
    test::faults().cases += 1;
    test::faults().lost += v.lost;
    test::faults().partial += v.partial;
    std::printf("faults[%s]: ids=%ld acknowledged=%ld unknown=%ld refused=%ld lost=%ld partial=%ld\n", name,
                v.checked, l.count(outcome::acknowledged), l.count(outcome::unknown), l.count(outcome::refused),
                v.lost, v.partial);
    return v;
}

/// SIGKILL (a crash: nothing flushed, connections reset), 300 ms down, restart.
inline void kill_and_restart() {
    server_script("kill");
    std::this_thread::sleep_for(300ms);
    server_script("restart");
}

inline void pause_then_resume(std::chrono::milliseconds paused) {
    server_script("pause");
    std::this_thread::sleep_for(paused);
    server_script("resume");
}

/// A step writing one state: `set` of written_value(id, n) to one of
/// `ids_per_writer` ids of writer w.
inline auto set_step(ledger& l, int ids_per_writer) {
    return [&l, ids_per_writer](int w, long n, basic_state_store<http_transport>& store) {
        const std::string id = "w" + std::to_string(w) + "-" + std::to_string(n % ids_per_writer);
        std::exception_ptr failure;
        try {
            store.set(state{id, written_value(id, n), {}});
        } catch (...) {
            failure = std::current_exception();
        }
        l.record(id, n, classify(failure));
        return !failure;
    };
}

} // namespace fault_tests

TEST_SUITE("server") {
using namespace fault_tests;

TEST_CASE("faults: server SIGKILLed during a stream of set, restarted: nothing acknowledged is lost") {
    require_server();
    server_back_at_exit guard;
    const std::string schema = test::unique_schema("fault_set_kill");
    ledger l;
    auto r = run_stream(schema, 3, 30, 30, set_step(l, 7), kill_and_restart);
    CHECK(r.recovered);
    auto v = verify_and_tally(schema, l, "set, SIGKILL");
    CHECK(v.lost == 0);
    CHECK(v.partial == 0);
    CHECK(l.count(outcome::refused) + l.count(outcome::unknown) > 0); // the fault was felt
}

TEST_CASE("faults: server stopped (TERM) and restarted during a stream of set") {
    require_server();
    server_back_at_exit guard;
    const std::string schema = test::unique_schema("fault_set_term");
    ledger l;
    auto r = run_stream(schema, 3, 30, 30, set_step(l, 7), [] { server_script("restart"); });
    CHECK(r.recovered);
    auto v = verify_and_tally(schema, l, "set, TERM + restart");
    CHECK(v.lost == 0);
    CHECK(v.partial == 0);
}

TEST_CASE("faults: server SIGSTOPped past the request timeout during a stream of set, then resumed") {
    require_server();
    server_back_at_exit guard;
    const std::string schema = test::unique_schema("fault_set_stop");
    ledger l;
    const auto timeout = fault_options().request_timeout;
    auto r = run_stream(schema, 3, 30, 30, set_step(l, 7), [&] { pause_then_resume(timeout + 1500ms); });
    CHECK(r.recovered);
    // A write in flight when the server froze ends at its request timeout,
    // never later (a little slack for the machine).
    INFO("longest step " << r.longest_step.count() << " ms");
    CHECK(r.longest_step <= timeout + 1500ms);
    CHECK(l.count(outcome::unknown) + l.count(outcome::refused) > 0);
    auto v = verify_and_tally(schema, l, "set, SIGSTOP");
    CHECK(v.lost == 0);
    CHECK(v.partial == 0);
}

#ifndef CHSTATE_NO_TLS
TEST_CASE("faults: over HTTPS, server SIGKILLed during a stream of set, restarted") {
    require_server();
    server_back_at_exit guard;
    const std::string schema = test::unique_schema("fault_tls_kill");
    auto o = tls_options();
    o.connect_timeout = 1s;
    o.request_timeout = 2s;
    ledger l;
    auto r = run_stream(
        schema, 2, 20, 20, set_step(l, 5),
        kill_and_restart,
        o);
    CHECK(r.recovered);
    auto v = verify_and_tally(schema, l, "set over HTTPS, SIGKILL");
    CHECK(v.lost == 0);
    CHECK(v.partial == 0);
}
#endif

/// A step writing one batch: set_all of written_value(id, n) to `batch`
/// ids of writer w, the whole batch recorded with its one outcome.
inline auto set_all_step(ledger& l, int batch) {
    return [&l, batch](int w, long n, basic_state_store<http_transport>& store) {
        std::vector<state> states;
        std::vector<std::string> ids;
        for (int i = 0; i < batch; ++i) {
            ids.push_back("w" + std::to_string(w) + "-" + std::to_string(i));
            states.push_back(state{ids.back(), written_value(ids.back(), n), {}});
        }
        std::exception_ptr failure;
        try {
            store.set_all(std::move(states));
        } catch (...) {
            failure = std::current_exception();
        }
        for (const auto& id : ids)
            l.record(id, n, classify(failure));
        return !failure;
    };
}

TEST_CASE("faults: server SIGSTOPped past the request timeout during a stream of set_all batches") {
    require_server();
    server_back_at_exit guard;
    const std::string schema = test::unique_schema("fault_set_all_stop");
    ledger l;
    const auto timeout = fault_options().request_timeout;
    auto r = run_stream(schema, 2, 8, 8, set_all_step(l, 300), [&] { pause_then_resume(timeout + 1500ms); });
    CHECK(r.recovered);
    INFO("longest step " << r.longest_step.count() << " ms");
    CHECK(r.longest_step <= timeout + 1500ms);
    auto v = verify_and_tally(schema, l, "set_all, SIGSTOP");
    CHECK(v.lost == 0);
    CHECK(v.partial == 0);
}

TEST_CASE("faults: server SIGKILLed during a stream of set_all batches, restarted") {
    require_server();
    server_back_at_exit guard;
    const std::string schema = test::unique_schema("fault_set_all_kill");
    ledger l;
    auto r = run_stream(schema, 2, 8, 8, set_all_step(l, 300), kill_and_restart);
    CHECK(r.recovered);
    auto v = verify_and_tally(schema, l, "set_all, SIGKILL");
    CHECK(v.lost == 0);
    CHECK(v.partial == 0);
}

TEST_CASE("faults: server SIGKILLed during a stream of locked update(), restarted; orphaned locks do not block") {
    require_server();
    server_back_at_exit guard;
    const std::string schema = test::unique_schema("fault_update_kill");
    // update() merges: writer w adds key "k<n>" to one of its ids. A key
    // acknowledged must be there at the end (else lost); a key whose
    // update was refused must not (else partial). The lock rows a killed
    // update leaves are withdrawn by their owner's next statement: the
    // writers' further updates on the same ids must succeed well before
    // the stale age (300 s) — run_stream gives them 60 s.
    std::mutex m;
    std::map<std::string, std::vector<std::pair<long, outcome>>> keys;
    auto step = [&](int w, long n, basic_state_store<http_transport>& store) {
        const std::string id = "w" + std::to_string(w) + "-" + std::to_string(n % 3);
        std::exception_ptr failure;
        try {
            store.update(state{id, object{{"k" + std::to_string(n), n}}, {}});
        } catch (...) {
            failure = std::current_exception();
        }
        std::lock_guard lk(m);
        keys[id].emplace_back(n, classify(failure));
        return !failure;
    };
    auto r = run_stream(schema, 2, 6, 6, step, kill_and_restart);
    CHECK(r.recovered);
    http_transport t(server_tests::threads().get_executor(), server_options());
    basic_state_store<http_transport> store(t, fault_store_options(schema));
    long lost = 0, partial = 0, acknowledged = 0, unknown = 0, refused = 0;
    for (const auto& [id, attempts] : keys) {
        auto s = store.get(id);
        const object empty;
        const object& got = s ? s->partial_state : empty;
        for (const auto& [n, result] : attempts) {
            const std::string key = "k" + std::to_string(n);
            const value* v = got.if_contains(key);
            const bool there = v != nullptr;
            if (there && !(v->is_int64() && v->as_int64() == n)) {
                ++partial;
                MESSAGE("partial: '" << id << "' key " << key << " holds " << serialize_json(*v));
            }
            if (result == outcome::acknowledged) {
                ++acknowledged;
                if (!there) {
                    ++lost;
                    MESSAGE("lost: '" << id << "' lacks acknowledged key " << key);
                }
            } else if (result == outcome::refused) {
                ++refused;
                if (there) {
                    ++partial;
                    MESSAGE("partial: '" << id << "' holds key " << key << " whose update was refused");
                }
            } else {
                ++unknown;
            }
        }
    }
    test::faults().cases += 1;
    test::faults().lost += lost;
    test::faults().partial += partial;
    std::printf("faults[update, SIGKILL]: ids=%zu acknowledged=%ld unknown=%ld refused=%ld lost=%ld partial=%ld\n",
                keys.size(), acknowledged, unknown, refused, lost, partial);
    CHECK(lost == 0);
    CHECK(partial == 0);
}

TEST_CASE("faults: server SIGKILLed while get_all streams: an error, never a short listing taken as whole") {
    require_server();
    server_back_at_exit guard;
    const std::string schema = test::unique_schema("fault_get_all_kill");
    http_transport t(server_tests::threads().get_executor(), fault_options());
    basic_state_store<http_transport> store(t, fault_store_options(schema));
    constexpr std::size_t total = 20'000;
    std::vector<state> states;
    for (std::size_t i = 0; i < total; ++i)
        states.push_back(state{"s" + std::to_string(i), written_value("s" + std::to_string(i), long(i)), {}});
    store.set_all(std::move(states));
    std::atomic<bool> stop{false};
    std::atomic<long> whole{0}, errors{0}, short_listings{0};
    std::thread reader([&] {
        while (!stop) {
            std::size_t seen = 0;
            try {
                store.get_all([&](const state&) { ++seen; });
                if (seen == total)
                    ++whole;
                else
                    ++short_listings;
            } catch (const chstate::error&) {
                ++errors;
                std::this_thread::sleep_for(20ms);
            }
        }
    });
    const auto until = [&](auto pred) {
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (!pred() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(5ms);
        return pred();
    };
    CHECK(until([&] { return whole >= 2; }));
    for (int k = 0; k < 3; ++k) { // kill at three points of the stream
        std::this_thread::sleep_for(std::chrono::milliseconds(40 * k));
        server_script("kill");
        std::this_thread::sleep_for(200ms);
        server_script("restart");
        const long w = whole;
        CHECK(until([&] { return whole > w; }));
    }
    stop = true;
    reader.join();
    test::faults().cases += 1;
    test::faults().partial += short_listings;
    std::printf("faults[get_all, SIGKILL]: whole=%ld errors=%ld short=%ld\n", whole.load(), errors.load(),
                short_listings.load());
    CHECK(short_listings == 0);
    CHECK(errors > 0);
}

TEST_CASE("faults: a get while the server is SIGSTOPped ends at the request timeout; resumed, the next succeeds") {
    require_server();
    server_back_at_exit guard;
    const std::string schema = test::unique_schema("fault_get_stop");
    http_transport t(server_tests::threads().get_executor(), fault_options());
    basic_state_store<http_transport> store(t, fault_store_options(schema));
    store.set(state{"g", written_value("g", 1), {}});
    server_script("pause");
    const auto t0 = std::chrono::steady_clock::now();
    error_code ec;
    try {
        store.get("g");
    } catch (const chstate::error& e) {
        ec = e.code();
    }
    const auto took = std::chrono::steady_clock::now() - t0;
    server_script("resume");
    CHECK(ec == errc::timeout);
    CHECK(took >= fault_options().request_timeout - 100ms);
    CHECK(took <= fault_options().request_timeout + 1500ms);
    auto back = store.get("g");
    const bool whole = back && back->partial_state == written_value("g", 1);
    CHECK(whole);
    test::faults().cases += 1;
    test::faults().lost += whole ? 0 : 1;
}

TEST_CASE("faults: writes after idling across the server's keep-alive timeout all land") {
    // 18.16 closes a connection idle for 3 s (Keep-Alive: timeout=3); a
    // kept-alive connection is reused only while idle for less than that
    // minus idle_close_margin (1 s), and only after the request is built
    // (a large body takes long to build: a connection checked before that
    // could be closed by the time the request goes out, a write that never
    // ran then looking as if it might have landed). Writes of 30 MB after
    // 1.9 s (reused), 2.2 s (inside the server's timeout, past the margin)
    // and 3.5 s (closed by the server) of idling: each is acknowledged.
    require_server();
    auto o = fault_options();
    // Only a hang guard: what is under test is which connection carries each
    // write, not how fast a busy 18.16 takes 30 MB (a fresh-clone run beside
    // the other suites timed out two of them at 60 s).
    o.request_timeout = std::chrono::minutes(10);
    // (the new connection after 3.5 s is under test, not how fast a busy
    // machine connects: fault_options()' 1 s connect timeout is for the
    // cases that kill the server)
    o.connect_timeout = 20s;
    http_transport t(server_tests::threads().get_executor(), o);
    basic_state_store<http_transport> store(t, fault_store_options(test::unique_schema("fault_idle")));
    long lost = 0;
    int round = 0;
    for (auto idle : {1900ms, 2200ms, 3500ms}) {
        ++round;
        store.set(state{"small", object{{"round", round}}, {}});
        std::this_thread::sleep_for(idle);
        object big{{"round", round}, {"blob", std::string(30u << 20, char('a' + round))}};
        try {
            store.set(state{"big", big, {}});
        } catch (const chstate::error& e) {
            MESSAGE("after " << idle.count() << " ms idle: " << e.code().message() << ": " << std::string(e.what()));
            ++lost;
            continue;
        }
        auto back = store.get("big");
        if (!back || back->partial_state != big)
            ++lost;
    }
    test::faults().cases += 1;
    test::faults().lost += lost;
    CHECK(lost == 0);
}

TEST_CASE("faults: an exception after status 200 is an error, never a short reply taken as whole") {
    // Without wait_end_of_query the server sends 200 and streams rows; an
    // exception on row 1,500,000 arrives as text at the end of the body.
    require_server();
    http_transport t(server_tests::threads().get_executor(), server_options());
    long partial = 0;
    for (const char* format : {"TabSeparated", "JSONEachRow"}) {
        diagnostics diag;
        std::string data;
        statement s{"SELECT number, throwIf(number = 1500000) AS x FROM system.numbers LIMIT 2000000", {}, format, {}, true};
        auto ec = test::run_statement(t, s, diag, &data);
        INFO(format << ": " << diag.message);
        CHECK(ec);
        CHECK(diag.message.find("throwIf") != std::string::npos);
        // What reached the sink is rows only: the exception's text was held back.
        CHECK(data.find("Code: 395") == std::string::npos);
        CHECK(data.find("throwIf") == std::string::npos);
        if (!ec)
            ++partial;
    }
    test::faults().cases += 1;
    test::faults().partial += partial;
}

} // TEST_SUITE("server")
