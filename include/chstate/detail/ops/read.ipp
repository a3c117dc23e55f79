// chstate/detail/ops/read.ipp — the definitions of ops/read.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/ops/read.hpp>

namespace chstate::detail {

CHSTATE_DECL op<std::optional<state>> get(session& s, std::string id, diagnostics& diag) {
    co_return co_await read_state(s, std::move(id), diag, nullptr);
}

CHSTATE_DECL op<std::optional<state>> read_state(session& s, std::string id, diagnostics& diag,
                                                 std::uint64_t* newest_ms) {
    if (auto ec = check_id(id, diag))
        co_return std::tuple{ec, std::nullopt};
    if (auto [ec] = co_await prepare(s, diag); ec)
        co_return std::tuple{ec, std::nullopt};
    const bool with_version = newest_ms != nullptr;
    if (newest_ms)
        *newest_ms = 0;
    // Not a ?: of temporaries inside the co_await: GCC 12 destroys such a
    // temporary twice.
    std::vector<rb_type> columns = with_version ? state_parts_version_columns() : state_parts_columns();
    std::optional<state> found;
    auto [ec] = co_await s.read_rows(
        s.sql().select_state(id, with_version), std::move(columns),
        [&](std::span<const rb_field> row) {
            if (found) // the statement says LIMIT 1
                return fail(diag, errc::protocol_error, "the reply to a get holds more than one row");
            found.emplace();
            found->state_id = id;
            if (newest_ms)
                *newest_ms = row[2].number;
            return parse_state_parts(row[0], row[1], *found, diag);
        },
        diag);
    if (ec || !found)
        co_return std::tuple{ec, std::nullopt};
    co_return std::tuple{error_code{}, std::move(found)};
}

CHSTATE_DECL op<std::vector<std::string>> state_ids(session& s, std::string glob, diagnostics& diag) {
    std::vector<std::string> ids;
    // Each `?` costs a pass over every id the server returns (glob.hpp): a
    // bound, so that whoever writes a glob cannot choose a listing's cost.
    if (const std::size_t singles = glob_single_wildcards(glob); singles > glob_max_single_wildcards)
        co_return std::tuple{fail(diag, errc::invalid_argument,
                                  "state_ids: the glob holds " + std::to_string(singles) + " `?`; at most " +
                                      std::to_string(glob_max_single_wildcards) +
                                      " are allowed (each costs one pass over every id)"),
                             std::move(ids)};
    if (auto [ec] = co_await prepare(s, diag); ec)
        co_return std::tuple{ec, std::move(ids)};
    std::size_t heap = 0;
    auto [ec] = co_await s.read_rows(
        s.sql().select_state_ids(glob), state_id_columns(),
        [&](std::span<const rb_field> row) {
            if (!glob_match(glob, row[0].bytes))
                return error_code{}; // the server narrowed by prefix only
            // What the listing holds, not what crossed the wire: each id's
            // heap block (none within std::string's own 15 bytes; else the
            // bytes, the terminator and malloc's header, in 16-byte steps),
            // and three std::string slots per id, since growing the vector
            // holds its old array beside one twice as long. (Counting the
            // wire bytes let 24-byte ids hold 449 MiB under a 256 MiB bound.)
            const std::size_t n = row[0].bytes.size();
            heap += n < 16 ? 0 : (n + 1 + 8 + 15) / 16 * 16;
            if (const std::size_t held = heap + (ids.size() + 1) * 3 * sizeof(std::string);
                held > s.options().limits.max_operation_bytes)
                return s.over_operation_limit(held, diag);
            ids.emplace_back(row[0].bytes);
            return error_code{};
        },
        diag);
    if (ec)
        ids.clear();
    co_return std::tuple{ec, std::move(ids)};
}

CHSTATE_DECL op<std::uint64_t> get_all(session& s, state_visitor visitor, unreadable_visitor on_unreadable,
                                 diagnostics& diag) {
    if (auto [ec] = co_await prepare(s, diag); ec)
        co_return std::tuple{ec, std::uint64_t{0}};
    std::uint64_t count = 0;
    std::uint64_t unreadable = 0;
    std::string unreadable_reasons; // the first few, for the message
    auto on_row = [&](std::span<const rb_field> row) -> error_code {
        state st;
        st.state_id = std::string(row[0].bytes);
        diagnostics why;
        try {
            if (auto ec = parse_state_parts(row[1], row[2], st, why)) {
                ++unreadable;
                if (unreadable <= 5)
                    unreadable_reasons += (unreadable > 1 ? "; " : "") + why.message;
                if (on_unreadable)
                    on_unreadable(unreadable_state{std::move(st.state_id), ec, std::move(why.message)});
                return {};
            }
            ++count;
            visitor(std::move(st));
        } catch (const std::exception& e) {
            return fail(diag, errc::callback_failed, std::string("the get_all visitor threw: ") + e.what());
        } catch (...) {
            return fail(diag, errc::callback_failed, "the get_all visitor threw an exception");
        }
        return {};
    };
    auto [ec] = co_await s.read_rows(s.sql().select_all_states(), state_row_columns(), on_row, diag);
    if (!ec && unreadable && !on_unreadable)
        ec = fail(diag, errc::corrupt_state,
                  std::to_string(unreadable) + " stored state(s) could not be read (the other " +
                      std::to_string(count) + " were delivered): " + unreadable_reasons +
                      (unreadable > 5 ? "; …" : ""));
    co_return std::tuple{ec, count};
}

} // namespace chstate::detail
