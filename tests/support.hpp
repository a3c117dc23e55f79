// Helpers shared by the test translation units.
#pragma once

#include "shutdown.hpp"
#include "tallies.hpp"

#include <chstate/chstate.hpp>
#include <chstate/detail/row_binary.hpp>
#include <chstate/detail/sql.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <filesystem>
#include <fstream>
#include <span>
#include <sys/wait.h>
#include <functional>
#include <future>
#include <vector>
#include <string>
#include <unistd.h>

namespace chstate::test {

namespace asio = boost::asio;

/// A schema name no other test case (or process) uses.
inline std::string unique_schema(std::string_view prefix = "t") {
    static std::atomic<int> counter{0};
    return std::string(prefix) + "_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
}

/// A whole number from the environment, or `fallback` when the variable is
/// unset or empty: how a test's size is scaled by hand or by a script.
inline long env_or(const char* name, long fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

/// Lock durations shortened for tests on the real clock.
inline lock_options fast_locks() {
    lock_options o;
    o.settle = std::chrono::milliseconds(20);
    o.retry_interval = std::chrono::milliseconds(20);
    o.timeout = std::chrono::seconds(20);
    return o;
}

/// Peak resident set since the last reset_peak_rss(), in bytes (Linux).
inline std::size_t peak_rss() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("VmHWM:"))
            return std::stoull(line.substr(6)) * 1024;
    return 0;
}
inline void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// The bound on peak RSS growth the hostile-server cases assert, while a
// server sends without end. Plain builds: 64 MiB. Under AddressSanitizer
// freed memory waits in a quarantine (256 MiB by default), each buffer a
// doubling vector outgrew stays there, and every byte has shadow and
// redzones: one capped 64 MiB reply measured 453 MiB of peak growth on CI.
// There the bound only tells a bounded read from an unbounded one (the
// bodies are 10 GB), and says so.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHSTATE_TEST_SANITIZED_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CHSTATE_TEST_SANITIZED_HEAP 1
#endif
#endif
#ifdef CHSTATE_TEST_SANITIZED_HEAP
inline constexpr bool sanitized_build = true;
inline constexpr std::size_t peak_rss_bound = std::size_t(1) << 30;
#else
inline constexpr bool sanitized_build = false;
inline constexpr std::size_t peak_rss_bound = std::size_t(64) << 20;
#endif

/// Raises `target` to at least `value`.
template <class T>
void atomic_max(std::atomic<T>& target, T value) {
    T prev = target.load();
    while (value > prev && !target.compare_exchange_weak(prev, value)) {
    }
}

/// Counts what passes through a transport: statements and reply chunks.
template <class Inner>
class counting_transport {
public:
    struct counters {
        std::atomic<std::size_t> statements{0};
        std::atomic<std::size_t> chunks{0};
        std::atomic<std::size_t> largest_chunk{0};
        std::atomic<std::size_t> bytes{0};
        std::string last_sql;
    };

    static constexpr bool binds_parameters = [] {
        if constexpr (requires { Inner::binds_parameters; })
            return Inner::binds_parameters;
        else
            return false;
    }();

    explicit counting_transport(Inner inner) : inner_(std::move(inner)), counters_(std::make_shared<counters>()) {}

    auto get_executor() const { return inner_.get_executor(); }
    counters& stats() { return *counters_; }

    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        ++counters_->statements;
        counters_->last_sql = stmt.sql;
        auto c = counters_;
        return inner_.async_execute(
            stmt,
            [c, sink = std::move(sink)](std::string_view chunk) {
                ++c->chunks;
                c->bytes += chunk.size();
                atomic_max(c->largest_chunk, chunk.size());
                return sink(chunk);
            },
            diag, std::forward<CompletionToken>(token));
    }

private:
    Inner inner_;
    std::shared_ptr<counters> counters_;
};

/// Runs one statement straight through a transport (no store), appending
/// the reply to `out` when given; returns the transport's error.
template <class Transport>
error_code run_statement(Transport& t, const statement& s, diagnostics& diag, std::string* out = nullptr) {
    std::promise<error_code> done;
    auto fut = done.get_future();
    t.async_execute(
        s,
        [out](std::string_view chunk) {
            if (out)
                out->append(chunk);
            return error_code{};
        },
        diag, [&done](error_code ec) { done.set_value(ec); });
    return fut.get();
}

/// For tests that act as the seed or inspect tables. Without a format the
/// reply is TabSeparated, unstreamed. Throws on error.
template <class Transport>
std::string raw_sql(Transport& t, std::string sql, std::string format = {}) {
    statement s{std::move(sql), {}, std::move(format), {}, false};
    std::string out;
    diagnostics diag;
    if (auto ec = run_statement(t, s, diag, &out))
        throw error(ec, diag.message);
    return out;
}

/// The seed's INSERT, as a Meltano process sends it: the texts as they are.
inline statement seed_insert(const std::string& table, const std::string& id, std::optional<std::string> partial,
                             std::optional<std::string> completed) {
    return {"INSERT INTO " + table + " (state_id, partial_state, completed_state) VALUES ({state_id:String}, "
            "{partial_state:Nullable(String)}, {completed_state:Nullable(String)})",
            {{"state_id", "String", id}, {"partial_state", "Nullable(String)", std::move(partial)},
             {"completed_state", "Nullable(String)", std::move(completed)}},
            {}, {}, false};
}

/// A state's row as another client reads it: the exact texts, nullopt for NULL.
struct stored_row {
    bool found = false;
    std::optional<std::string> partial;
    std::optional<std::string> completed;
};

/// The stored row of `id` (FINAL). Throws on error.
template <class Transport>
stored_row stored_parts(Transport& t, const std::string& table, const std::string& id) {
    statement s{"SELECT partial_state, completed_state FROM " + table + " FINAL PREWHERE state_id = {id:String}",
                {{"id", "String", id}}, "RowBinary", {}, true};
    std::string reply;
    diagnostics diag;
    if (auto ec = run_statement(t, s, diag, &reply))
        throw error(ec, diag.message);
    stored_row out;
    detail::row_binary_reader reader(detail::state_parts_columns());
    reader.feed(reply, [&](std::span<const detail::rb_field> row) {
        out.found = true;
        if (!row[0].null)
            out.partial = std::string(row[0].bytes);
        if (!row[1].null)
            out.completed = std::string(row[1].bytes);
        return error_code{};
    });
    return out;
}

struct torture_result {
    std::int64_t counter = 0;      ///< final completed_state.n
    int max_inside = 0;            ///< most clients ever inside a critical section at once
    std::size_t merged_keys = 0;   ///< keys update() merged into partial_state
    std::uint64_t last_token = 0;  ///< the token of one more grant taken after all threads ended
};

/// K threads, each with its own store on a transport from `make()`, run M
/// rounds of: acquire_lock → read the counter → fencing check → write n+1 →
/// release; then one update() merging a key of its own. With a sound lock
/// the counter ends at exactly K×M, no two critical sections overlap and
/// all K×M keys are merged. Throws the first error a thread met.
template <class Make>
torture_result lock_torture(Make make, const store_options& o, int K, int M) {
    using store_t = basic_state_store<decltype(make())>;
    const std::string id = "counter";
    {
        store_t st(make(), o);
        st.set(state{id, {}, json::object{{"n", 0}}});
    }
    std::atomic<int> inside{0}, max_inside{0};
    std::mutex m;
    std::string first_error;
    std::vector<std::thread> threads;
    for (int k = 0; k < K; ++k)
        threads.emplace_back([&, k] {
            try {
                store_t st(make(), o);
                for (int r = 0; r < M; ++r) {
                    auto lease = st.acquire_lock(id);
                    atomic_max(max_inside, ++inside);
                    auto cur = st.get(id);
                    std::int64_t n = cur->completed_state.at("n").as_int64();
                    lease.async_verify(asio::use_future).get();
                    st.set(state{id, cur->partial_state, json::object{{"n", n + 1}}});
                    --inside;
                    lease.release();
                    st.update(state{id, json::object{{"k" + std::to_string(k) + "_" + std::to_string(r), 1}}, {}});
                }
            } catch (const std::exception& e) {
                std::lock_guard lk(m);
                if (first_error.empty())
                    first_error = e.what();
            }
        });
    for (auto& t : threads)
        t.join();
    if (!first_error.empty())
        throw std::runtime_error(first_error);
    torture_result r;
    store_t st(make(), o);
    auto final_state = st.get(id);
    r.counter = final_state->completed_state.at("n").as_int64();
    r.merged_keys = final_state->partial_state.size();
    r.max_inside = max_inside.load();
    auto after = st.acquire_lock(id); // one grant after all of theirs
    r.last_token = after.token();
    after.release(); // before `st` goes: a background release would outlive it
    return r;
}

} // namespace chstate::test
