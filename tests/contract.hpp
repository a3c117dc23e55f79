// The store contract's fixture-generic parts. The contract itself
// (contract_cases.ipp, and the data cases: fidelity, lossless, large values,
// hostile input) is written once as doctest templated test cases over a
// *fixture*; each transport's test file names its fixtures and includes the
// cases once:
//
//   #define CHSTATE_CONTRACT_FIXTURES embedded_fixture, any_embedded_fixture
//   #define CHSTATE_DATA_FIXTURES embedded_fixture
//   TEST_SUITE("embedded") {
//   #include "contract_cases.ipp"
//   #include "lossless_cases.ipp"
//   }
//
// A case is named "<what it checks><fixture's name>", e.g.
// "lock: a held lock blocks a rival<server>", so `-tc='lock:*<server>'`
// picks one transport's instantiation.
//
// A fixture is a default-constructible type with
//   using transport_type = …;                      // a chstate Transport
//   static constexpr const char* name = "…";       // also the case-name suffix
//   transport_type make_transport();
#pragma once

#include "support.hpp"

#include <chstate/chstate.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <string_view>

/// One case of the store contract, instantiated for every fixture in
/// CHSTATE_CONTRACT_FIXTURES (defined by the including test file).
#define CONTRACT_CASE(name) TEST_CASE_TEMPLATE(name, fixture, CHSTATE_CONTRACT_FIXTURES)
/// One case of the data suites (fidelity, lossless, large values, hostile
/// input), instantiated for every fixture in CHSTATE_DATA_FIXTURES.
#define DATA_CASE(name) TEST_CASE_TEMPLATE(name, fixture, CHSTATE_DATA_FIXTURES)
/// Names a fixture's instantiations after the fixture (`fixture::name`).
#define CHSTATE_FIXTURE_NAME(type) TYPE_TO_STRING_AS(type::name, type)

namespace chstate::test::contract {

template <class fixture>
using contract_store = basic_state_store<typename fixture::transport_type>;
template <class fixture>
using manual_store = basic_state_store<typename fixture::transport_type, manual_clock>;

/// A store on its own schema with short real-clock lock timings.
template <class fixture>
struct store_under_test {
    fixture fx;
    typename fixture::transport_type transport = fx.make_transport();
    store_options options = [] {
        store_options o;
        o.schema = test::unique_schema(fixture::name);
        o.lock = test::fast_locks();
        return o;
    }();
    contract_store<fixture> store{transport, options};

    std::string raw(const std::string& sql, std::string format = {}) {
        return test::raw_sql(transport, sql, std::move(format));
    }
    std::string table() const { return "`" + options.schema + "`.`state`"; }
    std::string lock_table() const { return "`" + options.schema + "`.`state_lock`"; }
};

/// A store on the same transport under simulated time, driven by `ioc`.
template <class fixture>
struct timed_store {
    boost::asio::io_context ioc;
    manual_clock clock;
    manual_store<fixture> store;
    timed_store(typename fixture::transport_type t, store_options o)
        : store(ioc.get_executor(), std::move(t), std::move(o), clock) {}
    timed_store(typename fixture::transport_type t, store_options o, manual_clock c)
        : clock(c), store(ioc.get_executor(), std::move(t), std::move(o), clock) {}
    // Let background releases and in-flight statements finish before the
    // io_context they complete on goes away.
    ~timed_store() { clock.run(ioc); }
};

inline boost::json::object obj(std::string_view text) { return boost::json::parse(text).as_object(); }

inline state make_state(std::string id, std::string_view partial, std::string_view completed) {
    return state{std::move(id), obj(partial), obj(completed)};
}

/// Lets `d` pass for the strict lock's leases, whose expiry the server
/// judges on its own clock: the store's manual clock moves by `d`, and the
/// server's — a simulated server's clock is advanced, a real engine's is
/// waited for in real time (keep `d` to seconds there).
template <class fixture>
void let_leases_age(fixture& fx, timed_store<fixture>& ts, duration d) {
    ts.clock.advance(d);
    if constexpr (requires { fx.server->server_clock(); })
        fx.server->server_clock().advance(d);
    else
        std::this_thread::sleep_for(d);
}

/// Strict options with a lease short enough for let_leases_age to wait out
/// on a real engine: 3 s, a 1 s grace.
template <class fixture>
store_options short_lease_options();

/// True when the transport's server has insert_deduplication_token.
template <class fixture>
bool strict_supported(fixture& fx) {
    auto t = fx.make_transport();
    auto v = test::raw_sql(t, "SELECT version()");
    return detail::server_features::from_version(v).dedup_token;
}

template <class fixture>
store_options strict_options() {
    store_options o;
    o.schema = test::unique_schema(fixture::name);
    o.lock.mode = lock_mode::strict;
    return o;
}

template <class fixture>
store_options short_lease_options() {
    store_options o = strict_options<fixture>();
    o.lock.lease_ttl = 3s;
    o.lock.clock_skew = 1s;
    return o;
}

/// True when strict mode can run here; otherwise checks that asking for it
/// fails with errc::unsupported (so no strict case passes without asserting).
template <class fixture>
bool strict_or_unsupported(fixture& fx) {
    if (strict_supported(fx))
        return true;
    timed_store<fixture> ts(fx.make_transport(), strict_options<fixture>());
    error_code ec;
    ts.store.async_acquire_lock("job", [&](error_code e, auto) { ec = e; });
    ts.clock.run(ts.ioc);
    CHECK(ec == errc::unsupported);
    return false;
}

} // namespace chstate::test::contract
