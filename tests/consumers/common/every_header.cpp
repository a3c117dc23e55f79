// tests/consumers: every public header, each store's every operation in its
// blocking and coroutine forms, compiled as a project with strict warnings
// would compile them (scripts/check-consumers.sh: `-Wall -Wextra -Wpedantic
// -Werror` on GCC 12 and Clang 14, header-only). It is compiled, not run:
// what it checks is that including chstate adds no warning to a program's
// build. Templates warn only where they are instantiated, so each store type
// is instantiated whole and each async_ member is called once.
#include <chstate/any_transport.hpp>
#include <chstate/chstate.hpp>
#include <chstate/clock.hpp>
#include <chstate/config.hpp>
#include <chstate/error.hpp>
#include <chstate/json_text.hpp>
#include <chstate/lock.hpp>
#include <chstate/manual_clock.hpp>
#include <chstate/open.hpp>
#include <chstate/state.hpp>
#include <chstate/store.hpp>
#include <chstate/testing/simulated.hpp>
#include <chstate/transport.hpp>
#include <chstate/transport/chdb.hpp>
#include <chstate/transport/http.hpp>
#include <chstate/transport/http_options.hpp>
#include <chstate/transport/simulated.hpp>
#include <chstate/value.hpp>
#include <chstate/with_diagnostics.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <string>
#include <utility>
#include <vector>

namespace asio = boost::asio;

// Every blocking member of each store a program can name.
template class chstate::basic_state_store<chstate::chdb_transport, chstate::real_clock>;
template class chstate::basic_state_store<chstate::http_transport, chstate::real_clock>;
template class chstate::basic_state_store<chstate::any_transport, chstate::real_clock>;
template class chstate::basic_state_store<chstate::simulated_transport, chstate::manual_clock>;

namespace {

// Every async_ member, with and without diagnostics.
template <class Store>
asio::awaitable<void> every_async(Store& store) {
    auto t = asio::use_awaitable;
    chstate::diagnostics diag;
    co_await store.async_ensure_schema(t);
    co_await store.async_ensure_schema(diag, t);
    auto got = co_await store.async_get("a", t);
    got = co_await store.async_get("a", diag, t);
    co_await store.async_set(chstate::state{"a", {}, {}}, t);
    co_await store.async_set(chstate::state{"a", {}, {}}, diag, t);
    auto merged = co_await store.async_update(chstate::state{"a", {}, {}}, t);
    merged = co_await store.async_update(chstate::state{"a", {}, {}}, diag, t);
    co_await store.async_delete_state("a", t);
    co_await store.async_delete_state("a", diag, t);
    co_await store.async_clear("a", t);
    co_await store.async_clear("a", diag, t);
    auto cleared = co_await store.async_clear_all(t);
    cleared = co_await store.async_clear_all(diag, t);
    auto ids = co_await store.async_state_ids("*", t);
    ids = co_await store.async_state_ids("*", diag, t);
    auto visit = [](chstate::state&&) {};
    co_await store.async_get_all(visit, t);
    co_await store.async_get_all(visit, diag, t);
    co_await store.async_get_all(visit, [](chstate::unreadable_state&&) {}, t);
    co_await store.async_get_all(visit, [](chstate::unreadable_state&&) {}, diag, t);
    co_await store.async_set_all(std::vector<chstate::state>{}, t);
    co_await store.async_set_all(std::vector<chstate::state>{}, diag, t);
    co_await store.async_copy("a", "b", t);
    co_await store.async_copy("a", "b", diag, t);
    co_await store.async_move("a", "b", t);
    co_await store.async_move("a", "b", diag, t);
    merged = co_await store.async_merge("a", "b", t);
    merged = co_await store.async_merge("a", "b", diag, t);
    auto lease = co_await store.async_acquire_lock("a", t);
    co_await store.async_set(lease, chstate::state{"a", {}, {}}, t);
    co_await store.async_set(lease, chstate::state{"a", {}, {}}, diag, t);
    co_await lease.async_release(t);
    lease = co_await store.async_acquire_lock("a", diag, t);
    (void)got;
    (void)merged;
    (void)cleared;
    (void)ids;
}

template <class Store>
void spawn_every_async(asio::io_context& ioc, Store& store) {
    asio::co_spawn(ioc, every_async(store), asio::detached);
}

} // namespace

int main(int argc, char**) {
    if (argc > 0)
        return 0; // compiled, not run
    asio::io_context ioc;
    auto cfg = chstate::config::from_environment();
    auto store = chstate::open(cfg);
    spawn_every_async(ioc, store);
    chstate::embedded_state_store embedded{chstate::chdb_transport(chstate::chdb_engine::open({}))};
    spawn_every_async(ioc, embedded);
    chstate::http_state_store http{chstate::http_transport(ioc.get_executor(), chstate::make_http_options(cfg))};
    spawn_every_async(ioc, http);
    chstate::manual_clock clock;
    auto server = chstate::simulated_clickhouse::create(clock);
    chstate::basic_state_store<chstate::simulated_transport, chstate::manual_clock> simulated(
        ioc.get_executor(), chstate::simulated_transport(server, ioc.get_executor()), {}, clock);
    spawn_every_async(ioc, simulated);
    clock.run(ioc);
    return chstate::parse_json("{}").is_object() ? 0 : 1;
}
