// docs/values.md and the GCC 12 note under "In fifteen lines": the
// blocks between the snippet markers are the README's, verbatim
// (tests/readme/check_snippets.py compares them). Both run here, on the
// simulator, and their results are checked.
#include <chstate/chstate.hpp>
#include <chstate/transport/simulated.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <iostream>
#include <string>

namespace asio = boost::asio;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    std::cout << (ok ? "  ok: " : "  FAILED: ") << what << "\n";
    failures += ok ? 0 : 1;
}

std::string exact_values() {
// [snippet exact-values]
chstate::state s{"dev:job"};
s.partial_state = {{"bookmarks", {{"users", {{"since", 1700000000.8702567}}}}}};
boost::json::object view = s.merged();   // Boost's view; throws once a big integer is in it
s.partial_state["bookmarks"].as_object()["orders"] = chstate::big_integer("18446744073709551616");
std::string text = chstate::serialize_json(chstate::value(s.partial_state));
// [/snippet]
    check(view.at("bookmarks").at("users").at("since").as_double() == 1700000000.8702567,
          "Boost's view holds the double exactly");
    try {
        boost::json::object again = s.merged();
        check(false, "Boost's view of a big integer throws");
    } catch (const chstate::error& e) {
        check(e.code() == chstate::errc::invalid_argument, "Boost's view of a big integer throws invalid_argument");
    }
    return text;
}

using sim_store = chstate::basic_state_store<chstate::simulated_transport, chstate::manual_clock>;

// The GCC 12 note's lines, inside a coroutine as a reader would have them.
asio::awaitable<void> bookmark(sim_store& store, std::int64_t newest) {
// [snippet gcc12-named-local]
// GCC 12 rejects a braced value in the co_await expression ("error: array used as initializer",
// reported at the coroutine's closing brace):
//   co_await store.async_update(chstate::state{"dev:job", {{"users", newest}}}, asio::use_awaitable);
chstate::state progress{"dev:job", {{"users", newest}}};   // a named local compiles everywhere
co_await store.async_update(progress, asio::use_awaitable);
// [/snippet]
}

} // namespace

int main() {
    std::cout << "readme values:\n";
    const std::string text = exact_values();
    check(text == R"({"bookmarks": {"users": {"since": 1700000000.8702567}, "orders": 18446744073709551616}})",
          "serialize_json wrote " + text);

    asio::io_context ioc;
    chstate::manual_clock clock;
    sim_store store(ioc.get_executor(),
                    chstate::simulated_transport(chstate::simulated_clickhouse::create(clock), ioc.get_executor()),
                    {}, clock);
    auto done = asio::co_spawn(ioc, bookmark(store, 42), asio::use_future);
    clock.run(ioc);
    done.get();
    auto saved = store.async_get("dev:job", asio::use_future);
    clock.run(ioc);
    auto got = saved.get();
    check(got && got->merged().at("users").as_int64() == 42, "the named local was written: users = 42");

    std::cout << "readme values: " << (failures ? "FAILED" : "ok") << "\n";
    return failures ? 1 : 0;
}
