// chstate/open.hpp — one store for whatever engine a URI names.
//
//     auto store = chstate::open(chstate::config::from_environment());
//     store.set(s);                                  // chDB or HTTP: same calls, same errors
//
// open(config) returns a state_store, i.e. basic_state_store<any_transport>:
// over the embedded engine for a chdb: URI, over ClickHouse's HTTP
// interface for a clickhouse:// URI. The store runs on threads it owns —
// the embedded engine's, or a small pool open() starts for HTTP and stops
// when the store is destroyed — so the blocking forms work from any thread
// that is not one of them, and coroutines may co_await the async forms from
// any executor.
//
// The store is not movable; `auto store = chstate::open(…);` constructs it
// in place. Hold it in a std::unique_ptr with open_unique() when it must
// live elsewhere.
//
// This header brings Boost.Beast and OpenSSL (transport/http.hpp): link
// chstate::http. Code that wants no HTTP uses embedded_state_store.
#pragma once

#include <chstate/any_transport.hpp>
#include <chstate/config.hpp>
#include <chstate/store.hpp>
#include <chstate/transport/chdb.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/thread_pool.hpp>

#include <cstddef>
#include <memory>
#include <string_view>
#include <thread>

namespace chstate {

/// The store open() returns: any engine, the real clock.
using state_store = basic_state_store<any_transport, real_clock>;

/// What a URI does not say.
struct open_options {
    /// Threads running HTTP I/O (the store owns them). At least 1.
    std::size_t http_threads = 1;
    /// Embedded engine settings; `path` is taken from the config
    /// (config::embedded_path) when the URI names one.
    chdb_options embedded = {};
};

namespace detail {

/// Threads that belong to one HTTP store. Joined when the last user lets
/// go; if that happens on one of these threads (a handler dropped the last
/// reference), the join moves to a thread of its own instead of waiting on
/// itself.
struct owned_threads {
    asio::thread_pool pool;
    explicit owned_threads(std::size_t n) : pool(n) {}

    static std::shared_ptr<owned_threads> start(std::size_t n) {
        return std::shared_ptr<owned_threads>(new owned_threads(n), [](owned_threads* t) {
            if (t->pool.get_executor().running_in_this_thread())
                std::thread([t] { delete t; }).detach();
            else
                delete t;
        });
    }
};

} // namespace detail

/// The transport `c` names: chdb_transport for config::engine_kind::embedded,
/// http_transport (on threads it owns) for engine_kind::http. Throws
/// chstate::error: errc::invalid_configuration for settings that cannot be
/// used, errc::engine_unavailable when libchdb.so cannot be loaded.
inline any_transport make_transport(const config& c, const open_options& options = {}) {
    if (c.engine == config::engine_kind::embedded) {
        chdb_options o = options.embedded;
        if (!c.embedded_path.empty())
            o.path = c.embedded_path;
        return any_transport(chdb_transport(o));
    }
    if (options.http_threads == 0)
        throw error(make_error_code(errc::invalid_configuration), "open_options::http_threads must be at least 1");
    http_options http = make_http_options(c);
    auto threads = detail::owned_threads::start(options.http_threads);
    return any_transport(http_transport(threads->pool.get_executor(), std::move(http)), threads);
}

/// A store over the engine `c` names, with `c.store`'s schema, table, lock
/// and version settings. Connects on first use, not here: a server that is
/// down is reported by the first operation. Throws as make_transport.
inline state_store open(const config& c, const open_options& options = {}) {
    return state_store(make_transport(c, options), c.store);
}

/// open(config::from_uri(uri), options).
inline state_store open(std::string_view uri, const open_options& options = {}) {
    return open(config::from_uri(uri), options);
}

/// open(), for a store that must live on the heap.
inline std::unique_ptr<state_store> open_unique(const config& c, const open_options& options = {}) {
    return std::make_unique<state_store>(make_transport(c, options), c.store);
}

} // namespace chstate
