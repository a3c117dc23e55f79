// chstate/detail/session.ipp — the definitions of session.hpp (header-only:
// included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/session.hpp>

namespace chstate::detail {

CHSTATE_DECL op<> session::execute(statement s, const result_sink& sink, diagnostics& diag,
                 cancellation c) {
    if (c == cancellation::honour) {
        const bool stop = co_await cancelled();
        if (stop)
            co_return std::tuple{make_error_code(asio::error::operation_aborted)};
    }
    if (!engine_.traits().binds_parameters) {
        if (auto r = known(); r && !r->sql.features().query_parameters)
            if (auto ec = inline_parameters(s, diag))
                co_return std::tuple{ec};
    }
    const error_code ec = co_await send(s, sink, diag, c);
    co_return std::tuple{ec};
}

CHSTATE_DECL op<> session::execute(statement s, diagnostics& diag, cancellation c) {
    const std::string name = s.name;
    std::size_t seen = 0;
    auto [ec] = co_await execute(
        std::move(s),
        [&](std::string_view chunk) {
            if ((seen += chunk.size()) <= max_reply_without_output)
                return error_code{};
            return fail(diag, errc::protocol_error,
                        "the reply to " + name + ", a statement without output, holds more than " +
                            std::to_string(max_reply_without_output) + " bytes (not read further)");
        },
        diag, c);
    co_return std::tuple{ec};
}

CHSTATE_DECL op<std::vector<json::object>> session::rows(statement s, diagnostics& diag, cancellation c) {
    std::vector<json::object> out;
    row_reader reader(options_.limits.max_row_bytes);
    // What the rows hold, not the reply's bytes: each object's table, keys
    // and long strings, plus three slots per row, since growing the vector
    // holds its old array beside one twice as long. (Counting wire bytes
    // let endless small rows hold twice the bound and more.)
    std::size_t held = 0;
    auto on_row = [&](json::object&& row) {
        held += json_held_bytes(row) + 3 * sizeof(json::object);
        if (held > options_.limits.max_operation_bytes)
            return over_operation_limit(held, diag);
        out.push_back(std::move(row));
        return error_code{};
    };
    std::size_t kept = 0;
    auto [ec] = co_await execute(
        std::move(s),
        [&](std::string_view chunk) {
            if ((kept += chunk.size()) > options_.limits.max_operation_bytes)
                return over_operation_limit(kept, diag);
            return reader.feed(chunk, on_row, diag);
        },
        diag, c);
    if (!ec)
        ec = reader.finish(on_row, diag);
    co_return std::tuple{ec, std::move(out)};
}

CHSTATE_DECL op<std::uint64_t> session::count(statement s, diagnostics& diag, cancellation c) {
    const std::string name = s.name;
    auto [ec, found] = co_await rows(std::move(s), diag, c);
    if (ec)
        co_return std::tuple{ec, std::uint64_t{0}};
    auto n = found.empty() ? std::nullopt : uint_field(found.front(), "n");
    if (!n)
        co_return std::tuple{fail(diag, errc::protocol_error, "the reply to " + name + " has no count"),
                             std::uint64_t{0}};
    co_return std::tuple{error_code{}, *n};
}

CHSTATE_DECL op<> session::read_rows(statement s, std::vector<rb_type> columns, row_handler on_row, diagnostics& diag) {
    row_binary_reader reader(std::move(columns), options_.limits.max_row_bytes);
    auto [ec] = co_await execute(
        std::move(s),
        [&](std::string_view chunk) {
            error_code fec = reader.feed(chunk, on_row);
            if (fec == errc::reply_too_large && !reader.problem().empty())
                diag.message = reader.problem(); // the reader's own limit, not on_row's
            return fec;
        },
        diag);
    if (!ec)
        ec = reader.finish(diag);
    co_return std::tuple{ec};
}

CHSTATE_DECL op<> session::wait(duration d, cancellation c) {
    if (c == cancellation::honour) {
        const bool stop = co_await cancelled();
        if (stop)
            co_return std::tuple{make_error_code(asio::error::operation_aborted)};
    }
    const error_code ec = co_await engine_.wait(d, c);
    co_return std::tuple{ec};
}

CHSTATE_DECL asio::awaitable<error_code> session::send(const statement& s, const result_sink& sink, diagnostics& diag, cancellation c) {
    auto r = known();
    if (!r || !r->sql.replicated().enabled())
        co_return co_await engine_.send(s, sink, diag, c);
    statement with = s;
    const auto& extra = r->sql.replicated().settings;
    with.settings.insert(with.settings.end(), extra.begin(), extra.end());
    const time_point start = now();
    const time_point give_up = start + std::chrono::duration_cast<duration>(options_.cluster.insert_quorum_timeout);
    const time_point catch_up_ends = start + replica_catch_up;
    for (unsigned attempt = 1;; ++attempt) {
        error_code ec = co_await engine_.send(with, sink, diag, c);
        const time_point t = now();
        const bool again =
            (ec == make_clickhouse_error(clickhouse_code::unsatisfied_quorum_for_previous_write) && t < give_up) ||
            (ec == make_clickhouse_error(clickhouse_code::replica_is_not_in_quorum) && t < catch_up_ends);
        if (!again)
            co_return ec;
        const unsigned cap = std::min(5u * attempt, 100u);
        if (auto [wec] = co_await wait(duration(1 + random_below(cap)), c); wec)
            co_return wec;
    }
}

} // namespace chstate::detail
