// chstate/transport/chdb.hpp — the embedded ClickHouse engine (chDB).
//
// chDB is ClickHouse's engine as a shared library. chstate loads
// libchdb.so at run time (dlopen), so nothing links against it and a
// program that never opens an embedded store does not need it.
//
//   auto engine = chstate::chdb_engine::open({.path = "/var/lib/my-pipeline"});
//   chstate::embedded_state_store store{chstate::chdb_transport{engine}};
//
// Where libchdb.so is looked for: chdb_options::library, else the
// CHSTATE_CHDB_LIBRARY environment variable — a path given there is the only
// one tried, and not loadable it is the error (no fall back). Given none, in
// order: CHSTATE_CHDB_DEFAULT_LIBRARY
// (a path the build may define: chstate's CMake and Meson point it at the
// copy scripts/fetch-chdb.sh caches in chstate's source tree, for its own
// builds and for a project that builds chstate from source — add_subdirectory,
// FetchContent, a Meson subproject — which then also defines
// CHSTATE_CHDB_FETCH_COMMAND, the command the error names); the per-user cache
// ${XDG_CACHE_HOME:-$HOME/.cache}/chstate/chdb/<version>/libchdb.so that an
// installed chstate-fetch-chdb fills; finally "libchdb.so" through the
// dynamic loader's search path. A failure names every path tried and how
// to fetch the library.
//
// One data folder per process (a chDB rule): opening a second folder while
// one is open fails with errc::engine_unavailable. Opening the same folder
// again shares the open engine.
//
// Engine calls block, so they run on the engine's own threads
// (chdb_options::threads, each with its own connection); completions go to
// the handler's associated executor and the caller's executor is never
// stalled. A result sink is called on an engine thread while the operation
// is pending: once with the whole reply (one buffered chdb_query call, the
// engine's cheapest), or chunk by chunk through the streaming calls for a
// statement marked streamed_reply (get_all's). The engine must outlive every operation started on it (as
// with any Asio I/O object); destroy it from outside its own threads.
// A statement, once sent, runs to its end: cancellation is not
// supported for embedded statements. Every connection is closed when the
// last transport referring to the engine is destroyed (chDB hangs at exit
// when connections are left open).
#pragma once

/// The chDB release chstate is built and tested against, and the one that
/// scripts/fetch-chdb.sh (installed as chstate-fetch-chdb) fetches. The one
/// place it is named: the scripts, CMake and Meson read it from here.
#define CHSTATE_CHDB_VERSION "26.5.3"

#include <chstate/detail/server_error.hpp>
#include <chstate/detail/shown.hpp>
#include <chstate/detail/sql.hpp>
#include <chstate/error.hpp>
#include <chstate/clock.hpp>
#include <chstate/transport.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chstate {

struct chdb_options {
    /// Data folder (created if absent). State written here survives restarts.
    std::string path{};
    /// libchdb.so to load; empty: see the header comment.
    std::string library{};
    /// Engine threads, i.e. statements in flight at once.
    std::size_t threads = 2;
    /// chDB installs handlers for SIGSEGV, SIGABRT and other fatal signals
    /// that sleep for minutes before re-raising; false (the default) opts
    /// out before the engine starts, leaving those signals to the host.
    bool engine_signal_handlers = false;
};

/// The loaded engine: one per process and data folder. Shared by transports.
class chdb_engine {
public:
    /// The C API of chDB (programs/local/chdb.h upstream), declared here so
    /// no chDB header is needed at build time. Public only for
    /// with_connection() (measuring the engine's own floor).
    struct api {
        using connection = void*; // chdb_connection: pointer to an opaque struct
        using result = void;      // chdb_result
        connection* (*connect)(int, char**);
        void (*close_conn)(connection*);
        result* (*query_with_params_n)(connection, const char*, std::size_t, const char*, std::size_t,
                                       const char* const*, const std::size_t*, const char* const*,
                                       const std::size_t*, std::size_t);
        result* (*stream_query_with_params_n)(connection, const char*, std::size_t, const char*, std::size_t,
                                              const char* const*, const std::size_t*, const char* const*,
                                              const std::size_t*, std::size_t);
        result* (*stream_fetch_result)(connection, result*);
        void (*stream_cancel_query)(connection, result*);
        char* (*result_buffer)(result*);
        std::size_t (*result_length)(result*);
        const char* (*result_error)(result*);
        void (*destroy_query_result)(result*);
        void (*set_signal_handlers_enabled)(int); // optional (chDB ≥ 26.3)
        std::uint64_t (*result_rows_written)(result*); // optional: rows an INSERT wrote, after deduplication
    };

    /// Loads the library (once per process) and opens `options.path`.
    static std::shared_ptr<chdb_engine> open(const chdb_options& options, error_code& ec, diagnostics& diag) {
        ec = {};
        auto fail = [&](std::string msg) -> std::shared_ptr<chdb_engine> {
            ec = make_error_code(errc::engine_unavailable);
            diag.message = std::move(msg);
            return nullptr;
        };
        if (options.path.empty())
            return fail("chdb_options::path is empty: the embedded engine needs a data folder");
        std::error_code fs_ec;
        std::filesystem::create_directories(options.path, fs_ec);
        if (fs_ec)
            return fail("cannot create data folder " + detail::shown(options.path) + ": " + fs_ec.message());
        std::string path = std::filesystem::absolute(options.path, fs_ec).lexically_normal().string();

        std::lock_guard lk(registry_mutex());
        if (auto open = registry().lock()) {
            if (open->path_ == path)
                return open;
            return fail("chDB allows one data folder per process: " + detail::shown(open->path_) + " is open, cannot open " +
                        detail::shown(path));
        }
        const api* functions = load_library(options.library, diag);
        if (!functions)
            return fail(diag.message);
        if (!options.engine_signal_handlers && functions->set_signal_handlers_enabled)
            functions->set_signal_handlers_enabled(0);
        auto engine = std::shared_ptr<chdb_engine>(new chdb_engine(*functions, path, options.threads));
        // Open the first connection now, so a bad folder fails here.
        api::connection* c = engine->connect();
        if (!c)
            return fail("chDB could not open data folder " + detail::shown(path));
        engine->free_.push_back(c);
        registry() = engine;
        return engine;
    }

    static std::shared_ptr<chdb_engine> open(const chdb_options& options) {
        error_code ec;
        diagnostics diag;
        auto engine = open(options, ec, diag);
        throw_if(ec, diag.message);
        return engine;
    }

    chdb_engine(const chdb_engine&) = delete;
    chdb_engine& operator=(const chdb_engine&) = delete;

    /// Waits for the engine's queued work (completion handlers included),
    /// then closes its connections. The last reference may go on one of the
    /// engine's own threads — a store destroyed with operations in flight
    /// lets go when its last operation completes, there — and a thread
    /// cannot join its own pool (joining there returned at once, and the
    /// pool's destruction then dropped the handlers still queued). Then no
    /// statement is running (each holds a reference): the connections are
    /// closed here, at once, before the operation's handler is called — a
    /// program that exits after its last handler does not race chDB's
    /// teardown — and the pool, with the handlers still queued on it, is
    /// joined by a thread of its own (reaper).
    ~chdb_engine() {
        const bool on_own_thread = pool_->get_executor().running_in_this_thread();
        if (!on_own_thread)
            pool_->join();
        for (api::connection* c : free_)
            api_.close_conn(c);
        if (on_own_thread)
            reaper::instance().run([pool = std::move(pool_)] { pool->join(); });
    }

    const std::string& path() const noexcept { return path_; }
    asio::thread_pool::executor_type get_executor() noexcept { return pool_->get_executor(); }

    /// Runs `stmt` on the calling thread (an engine thread), the reply into
    /// `sink`: in pieces as the engine streams it for a statement with
    /// streamed_reply, else whole from one buffered call.
    error_code run(const statement& stmt, const result_sink& sink, diagnostics& diag) {
        if (!stmt.settings.empty()) {
            diag.message = "the embedded engine has no replicas: statement setting " + stmt.settings.front().name +
                           " (cluster mode) cannot apply";
            return make_error_code(errc::unsupported);
        }
        api::connection* c = checkout();
        if (!c) {
            diag.message = "chDB could not open another connection to " + path_;
            return make_error_code(errc::engine_unavailable);
        }
        error_code ec = run_on(*c, stmt, sink, diag);
        checkin(c);
        return ec;
    }

    /// Calls f(const api&, api::connection) on the calling thread with the
    /// loaded C API and a connection checked out of the engine's pool (the
    /// same connections the transport uses: with threads = 1 and nothing in
    /// flight, the very one), returned afterwards; returns what f returns.
    /// For measuring the engine's own floor (benchmarks/suite.cpp): calls
    /// made here bypass chstate entirely. Throws chstate::error when no
    /// connection can be opened.
    template <class F>
    decltype(auto) with_connection(F&& f) {
        api::connection* c = checkout();
        if (!c)
            throw_if(make_error_code(errc::engine_unavailable), "chDB could not open another connection to " + path_);
        struct give_back {
            chdb_engine* e;
            api::connection* c;
            ~give_back() { e->checkin(c); }
        } guard{this, c};
        return std::forward<F>(f)(static_cast<const api&>(api_), *c);
    }

private:
    chdb_engine(const api& functions, std::string path, std::size_t threads)
        : api_(functions), path_(std::move(path)),
          pool_(std::make_unique<asio::thread_pool>(threads == 0 ? 1 : threads)) {}

    /// The threads that join the pools of engines let go on their own
    /// threads (see ~chdb_engine); joined, in turn, at exit.
    class reaper {
    public:
        static reaper& instance() {
            static reaper r;
            return r;
        }
        template <class F>
        void run(F f) {
            std::lock_guard lk(mutex_);
            std::erase_if(threads_, [](job& j) {
                if (!j.done->load())
                    return false;
                j.thread.join();
                return true;
            });
            auto done = std::make_shared<std::atomic<bool>>(false);
            threads_.push_back({std::thread([f = std::move(f), done]() mutable {
                                    f();
                                    done->store(true);
                                }),
                                done});
        }
        ~reaper() {
            std::lock_guard lk(mutex_);
            for (job& j : threads_)
                j.thread.join();
        }

    private:
        struct job {
            std::thread thread;
            std::shared_ptr<std::atomic<bool>> done;
        };
        std::mutex mutex_;
        std::vector<job> threads_;
    };

    static std::mutex& registry_mutex() {
        static std::mutex m;
        return m;
    }
    static std::weak_ptr<chdb_engine>& registry() {
        static std::weak_ptr<chdb_engine> r;
        return r;
    }

    static const api* load_library(const std::string& explicit_path, diagnostics& diag) {
        static std::mutex m;
        static std::optional<api> loaded;
        std::lock_guard lk(m);
        if (loaded)
            return &*loaded;
        std::vector<std::string> candidates;
        // A path given (chdb_options::library, else CHSTATE_CHDB_LIBRARY) is
        // the one wanted: if it cannot be loaded, that is the error — never a
        // silent fall back to another copy found further down the list.
        const char* env = std::getenv("CHSTATE_CHDB_LIBRARY");
        const char* given_by = !explicit_path.empty() ? "chdb_options::library"
                               : env && *env          ? "CHSTATE_CHDB_LIBRARY"
                                                      : nullptr;
        if (given_by) {
            candidates.emplace_back(!explicit_path.empty() ? explicit_path : std::string(env));
        } else {
#ifdef CHSTATE_CHDB_DEFAULT_LIBRARY
            candidates.emplace_back(CHSTATE_CHDB_DEFAULT_LIBRARY);
#endif
            // Where an installed chstate-fetch-chdb puts it (per user; the
            // version is the one that script fetches). XDG: a relative
            // XDG_CACHE_HOME is ignored.
            constexpr const char* fetched_version = CHSTATE_CHDB_VERSION;
            std::string cache_home;
            if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/')
                cache_home = xdg;
            else if (const char* home = std::getenv("HOME"); home && *home)
                cache_home = std::string(home) + "/.cache";
            if (!cache_home.empty())
                candidates.push_back(cache_home + "/chstate/chdb/" + fetched_version + "/libchdb.so");
            candidates.emplace_back("libchdb.so");
        }
        std::string tried;
        for (const auto& candidate : candidates) {
            void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (!handle) {
                const char* why = ::dlerror();
                tried += "\n  " + candidate + ": " + (why ? why : "not loadable");
                continue;
            }
            api a{};
            bool ok = true;
            auto sym = [&](auto& fn, const char* name) {
                fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
                if (!fn) {
                    ok = false;
                    tried += "\n  " + candidate + ": has no symbol " + name + " (chDB too old?)";
                }
            };
            sym(a.connect, "chdb_connect");
            sym(a.close_conn, "chdb_close_conn");
            sym(a.query_with_params_n, "chdb_query_with_params_n");
            sym(a.stream_query_with_params_n, "chdb_stream_query_with_params_n");
            sym(a.stream_fetch_result, "chdb_stream_fetch_result");
            sym(a.stream_cancel_query, "chdb_stream_cancel_query");
            sym(a.result_buffer, "chdb_result_buffer");
            sym(a.result_length, "chdb_result_length");
            sym(a.result_error, "chdb_result_error");
            sym(a.destroy_query_result, "chdb_destroy_query_result");
            a.set_signal_handlers_enabled =
                reinterpret_cast<void (*)(int)>(::dlsym(handle, "chdb_set_signal_handlers_enabled"));
            a.result_rows_written =
                reinterpret_cast<std::uint64_t (*)(api::result*)>(::dlsym(handle, "chdb_result_rows_written"));
            if (!ok)
                continue; // the library stays loaded; harmless
            loaded = a;
            return &*loaded;
        }
        if (given_by) {
            diag.message = std::string("could not load the chDB engine named by ") + given_by + ":" + tried;
            return nullptr;
        }
#ifdef CHSTATE_CHDB_FETCH_COMMAND
        // (chstate built from its sources inside another project: the build
        // names the command that fetches the engine where it looks first)
        diag.message = "could not load the chDB engine (libchdb.so). Run " CHSTATE_CHDB_FETCH_COMMAND
                       " (it caches the engine where this program looks), or set CHSTATE_CHDB_LIBRARY or "
                       "chdb_options::library. Tried:" + tried;
#else
        diag.message = "could not load the chDB engine (libchdb.so). Run chstate-fetch-chdb (installed with "
                       "chstate; in chstate's repository: scripts/fetch-chdb.sh), or set CHSTATE_CHDB_LIBRARY "
                       "or chdb_options::library. Tried:" + tried;
#endif
        return nullptr;
    }

    api::connection* connect() {
        std::string arg0 = "chstate";
        std::string arg1 = "--path=" + path_;
        char* argv[] = {arg0.data(), arg1.data()};
        return api_.connect(2, argv);
    }

    api::connection* checkout() {
        {
            std::lock_guard lk(mutex_);
            if (!free_.empty()) {
                api::connection* c = free_.back();
                free_.pop_back();
                return c;
            }
        }
        return connect();
    }

    void checkin(api::connection* c) {
        std::lock_guard lk(mutex_);
        free_.push_back(c);
    }

    error_code run_on(api::connection conn, const statement& stmt, const result_sink& sink, diagnostics& diag) {
        // No rows after the text, ever: chDB would read this process's
        // standard input as more of them (detail::sql_without_inline_data).
        std::string text;
        if (auto ec = detail::sql_without_inline_data(stmt, text, diag))
            return ec;
        const std::string format = stmt.format.empty() ? "TabSeparated" : stmt.format;
        std::vector<std::string> values;
        std::vector<const char*> names_p, values_p;
        std::vector<std::size_t> names_n, values_n;
        values.reserve(stmt.parameters.size() + 1);
        for (const auto& p : stmt.parameters) {
            values.push_back(detail::escape_parameter_value(p));
            names_p.push_back(p.name.data());
            names_n.push_back(p.name.size());
        }
        if (!stmt.data.empty()) {
            std::string& rows = values.emplace_back();
            rows.reserve(stmt.data.size());
            detail::append_escaped(rows, stmt.data, '\0' /* as escape_parameter_value */);
            names_p.push_back(detail::inline_rows_parameter.data());
            names_n.push_back(detail::inline_rows_parameter.size());
        }
        for (const auto& v : values) {
            values_p.push_back(v.data());
            values_n.push_back(v.size());
        }
        const std::size_t n = names_p.size();

        if (!stmt.streamed_reply) {
            api::result* r = api_.query_with_params_n(conn, text.data(), text.size(), format.data(), format.size(),
                                                      names_p.data(), names_n.data(), values_p.data(),
                                                      values_n.data(), n);
            error_code ec = check(r, diag);
            // 0 for an INSERT … SELECT that selected nothing and for a block
            // resent with the same deduplication token and bytes; a block of
            // other bytes dropped as a duplicate is still counted (measured on
            // chDB 26.5: tests/embedded.cpp, "written_rows, as the strict lock
            // reads it"; the strict lock relies on the zeros only).
            if (!ec && r && api_.result_rows_written)
                diag.written_rows = api_.result_rows_written(r);
            if (!ec && api_.result_length(r) > 0)
                ec = sink(std::string_view(api_.result_buffer(r), api_.result_length(r)));
            api_.destroy_query_result(r);
            return ec;
        }

        api::result* stream = api_.stream_query_with_params_n(conn, text.data(), text.size(), format.data(),
                                                              format.size(), names_p.data(), names_n.data(),
                                                              values_p.data(), values_n.data(), n);
        error_code ec = check(stream, diag);
        while (!ec) {
            api::result* chunk = api_.stream_fetch_result(conn, stream);
            ec = check(chunk, diag);
            std::size_t len = ec ? 0 : api_.result_length(chunk);
            if (!ec && len > 0)
                ec = sink(std::string_view(api_.result_buffer(chunk), len));
            if (chunk)
                api_.destroy_query_result(chunk);
            if (len == 0)
                break;
        }
        if (ec && stream)
            api_.stream_cancel_query(conn, stream);
        if (stream)
            api_.destroy_query_result(stream);
        return ec;
    }

    error_code check(api::result* r, diagnostics& diag) {
        if (!r) {
            diag.message = "chDB returned no result";
            return make_error_code(errc::engine_unavailable);
        }
        const char* err = api_.result_error(r);
        if (!err || !*err)
            return {};
        std::string_view text = err;
        diag.message = std::string(detail::trim_message(text));
        if (auto code = detail::exception_code(text))
            return make_clickhouse_error(*code);
        return make_error_code(errc::server_error);
    }

    api api_;
    std::string path_;
    std::unique_ptr<asio::thread_pool> pool_; // (moved out by the destructor: see there)
    std::mutex mutex_;
    std::vector<api::connection*> free_;
};

/// Transport over an embedded chdb_engine. Cheap to copy (shares the engine).
class chdb_transport {
public:
    using executor_type = asio::thread_pool::executor_type;
    /// The embedded engine: no Python Meltano process shares its lock
    /// table, so lock_mode::automatic runs the strict protocol here.
    static constexpr bool embedded_engine = true;

    explicit chdb_transport(std::shared_ptr<chdb_engine> engine) : engine_(std::move(engine)) {}

    /// Opens (or shares) the engine for `options.path`; throws chstate::error.
    explicit chdb_transport(const chdb_options& options) : engine_(chdb_engine::open(options)) {}

    /// The engine's own threads; always running, so blocking store calls work.
    executor_type get_executor() const noexcept { return engine_->get_executor(); }

    const std::shared_ptr<chdb_engine>& engine() const noexcept { return engine_; }

    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [this](auto handler, const statement* stmt, result_sink sink, diagnostics* diag) {
                auto work = asio::make_work_guard(asio::get_associated_executor(handler, get_executor()));
                asio::post(engine_->get_executor(),
                           [engine = engine_.get(), stmt, sink = std::move(sink), diag, h = std::move(handler),
                            work = std::move(work)]() mutable {
                               error_code ec = engine->run(*stmt, sink, *diag);
                               // The work guard travels with the completion and is
                               // released on the handler's executor: releasing it here,
                               // after the post, could touch an io_context its owner
                               // has already destroyed.
                               auto ex = work.get_executor();
                               asio::post(ex, [h = std::move(h), ec, work = std::move(work)]() mutable {
                                   work.reset();
                                   std::move(h)(ec);
                               });
                           });
            },
            token, &stmt, std::move(sink), &diag);
    }

private:
    std::shared_ptr<chdb_engine> engine_;
};

static_assert(transport<chdb_transport>);

template <transport Transport, clock Clock>
class basic_state_store;

/// The store on the embedded engine with the real clock.
using embedded_state_store = basic_state_store<chdb_transport, real_clock>;

} // namespace chstate
