// Helpers shared by the test translation units.
#pragma once

#include "shutdown.hpp"

#include <chstate/chstate.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
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

/// Lock durations shortened for tests on the real clock.
inline lock_options fast_locks() {
    lock_options o;
    o.settle = std::chrono::milliseconds(20);
    o.retry_interval = std::chrono::milliseconds(20);
    o.timeout = std::chrono::seconds(20);
    return o;
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
                std::size_t prev = c->largest_chunk.load();
                while (chunk.size() > prev && !c->largest_chunk.compare_exchange_weak(prev, chunk.size())) {
                }
                return sink(chunk);
            },
            diag, std::forward<CompletionToken>(token));
    }

private:
    Inner inner_;
    std::shared_ptr<counters> counters_;
};

/// Runs one statement straight through a transport (no store): for tests
/// that act as the seed or inspect tables. Without a format the reply is
/// TabSeparated, unstreamed. Throws on error.
template <class Transport>
std::string raw_sql(Transport& t, std::string sql, std::string format = {}) {
    statement s{std::move(sql), {}, std::move(format), {}, false};
    std::string out;
    diagnostics diag;
    auto fut = t.async_execute(
        s,
        [&](std::string_view chunk) {
            out.append(chunk);
            return error_code{};
        },
        diag, asio::use_future);
    try {
        fut.get();
    } catch (const boost::system::system_error& e) {
        throw error(e.code(), diag.message);
    }
    return out;
}

} // namespace chstate::test
