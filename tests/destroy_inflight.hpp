// A store destroyed while its operations are in flight: every operation's
// handler is still called, exactly once — with its result, or with
// operation_aborted — whatever the engine, the store type (typed, or
// chstate::open()'s) and the moment of destruction. A handler never called
// leaves a coroutine waiting forever and a shutdown that hangs.
//
// destroy_inflight(label, make_store) runs each operation kind several
// times at once, with handlers of three kinds (a plain callback, one bound
// to an executor that outlives the store, and one with a cancellation slot
// of the caller's), destroys the store after a delay, then waits for the
// handlers. The wait is bounded only as a hang guard (a lost handler is a
// count, not a timeout verdict). It prints
//   destroy-inflight[label]: operations=N lost_handlers=L called_twice=T
// and returns the tally; scripts/test.sh adds the lines up.
#pragma once

#include "support.hpp"

#include <chstate/store.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace chstate::test {

struct destroy_tally {
    std::size_t operations = 0;
    std::size_t lost_handlers = 0;
    std::size_t called_twice = 0;
};

namespace destroy_detail {

/// One handler's calls, counted.
struct calls {
    std::atomic<int> n{0};
};

} // namespace destroy_detail

/// See the top of this file. `make_store()` returns a std::unique_ptr to a
/// store whose schema exists; `rounds` delays are tried, each with every
/// operation kind `copies` times for each handler kind.
template <class MakeStore>
destroy_tally destroy_inflight(const std::string& label, MakeStore make_store, int copies = 2) {
    namespace asio = boost::asio;
    using namespace std::chrono_literals;
    destroy_tally tally;
    // The caller's own executor, which outlives every store below.
    asio::io_context caller;
    auto keep = asio::make_work_guard(caller);
    std::thread caller_thread([&] { caller.run(); });
    std::vector<std::shared_ptr<destroy_detail::calls>> handlers;
    std::deque<asio::cancellation_signal> slots; // the caller's signals, never emitted

    // Hang guard only (the whole run): every handler is expected; one
    // still missing then is counted, not waited for.
    const auto give_up = std::chrono::steady_clock::now() + 300s;
    const std::vector<std::chrono::microseconds> delays = {0us, 300us, 3ms, 10ms, 40ms};
    for (const auto delay : delays) {
        {
            auto store = make_store();
            // Something to read, merge, copy and move.
            for (int i = 0; i < 4; ++i)
                store->set(state{"d" + std::to_string(i), object{{"p", i}}, object{{"c", i}}});
            int kind_of_handler = 0;
            // Calls `start(token)` with a handler of the next kind.
            const auto launch = [&](auto start) {
                auto h = handlers.emplace_back(std::make_shared<destroy_detail::calls>());
                ++tally.operations;
                auto count = [h](auto&&...) { h->n.fetch_add(1); };
                switch (kind_of_handler++ % 3) {
                case 0:
                    start(count);
                    break;
                case 1:
                    start(asio::bind_executor(caller.get_executor(), count));
                    break;
                default:
                    start(asio::bind_cancellation_slot(slots.emplace_back().slot(), count));
                    break;
                }
            };
            for (int c = 0; c < copies; ++c) {
                for (int k = 0; k < 3; ++k) { // each handler kind for each operation
                    const std::string n = std::to_string(c * 3 + k);
                    launch([&](auto t) { store->async_get("d1", t); });
                    launch([&](auto t) { store->async_set(state{"w" + n, {}, object{{"x", 1}}}, t); });
                    launch([&](auto t) { store->async_update(state{"d2", object{{"u", 1}}, {}}, t); });
                    launch([&](auto t) { store->async_state_ids("d*", t); });
                    launch([&](auto t) { store->async_get_all([](state&&) {}, t); });
                    launch([&](auto t) { store->async_set_all({state{"sa" + n, {}, object{{"x", 2}}}}, t); });
                    launch([&](auto t) { store->async_merge("d0", "m" + n, t); });
                    launch([&](auto t) { store->async_copy("d3", "c" + n, t); });
                    launch([&](auto t) { store->async_move("c" + n, "mv" + n, t); });
                    launch([&](auto t) { store->async_clear("w" + n, t); });
                    launch([&](auto t) { store->async_delete_state("sa" + n, t); });
                    launch([&](auto t) { store->async_acquire_lock("l" + n, t); });
                }
            }
            std::this_thread::sleep_for(delay);
            // The store goes here, its operations in flight.
        }
        const auto all_called = [&] {
            for (auto& h : handlers)
                if (h->n.load() == 0)
                    return false;
            return true;
        };
        while (!all_called() && std::chrono::steady_clock::now() < give_up)
            std::this_thread::sleep_for(5ms);
    }
    for (auto& h : handlers) {
        tally.lost_handlers += h->n.load() == 0;
        tally.called_twice += h->n.load() > 1;
    }
    // The caller's run() returns by itself once nothing holds work on it. A
    // completion still releasing its work guard after its handler returned
    // is waited for: stop() here (as before) let this function destroy the
    // io_context under it (UBSan: a call through a dead scheduler) — the
    // rule every Asio I/O object sets its callers. stop() is the hang guard.
    keep.reset();
    while (!caller.stopped() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(5ms);
    if (!caller.stopped()) // work never released: a completion that never ended
        ++tally.lost_handlers;
    caller.stop();
    caller_thread.join();
    std::cout << "destroy-inflight[" << label << "]: operations=" << tally.operations
              << " lost_handlers=" << tally.lost_handlers << " called_twice=" << tally.called_twice << std::endl;
    return tally;
}

/// A make_store for destroy_inflight: typed stores over copies of
/// `transport` (which share its engine or pool), in `schema`.
template <class Transport>
auto typed_stores(Transport transport, std::string schema) {
    return [transport = std::move(transport), schema = std::move(schema)] {
        store_options o;
        o.schema = schema;
        o.lock = fast_locks();
        auto store = std::make_unique<basic_state_store<Transport>>(transport, o);
        store->ensure_schema();
        return store;
    };
}

} // namespace chstate::test
