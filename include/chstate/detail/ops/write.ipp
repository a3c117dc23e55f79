// chstate/detail/ops/write.ipp — the definitions of ops/write.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/ops/write.hpp>

namespace chstate::detail {

CHSTATE_DECL op<> write_state(session& s, const state& st, diagnostics& diag,
                        std::optional<std::string> fence, std::optional<std::uint64_t> newest_ms) {
    if (auto ec = check_id(st.state_id, diag))
        co_return std::tuple{ec};
    serialized_parts parts;
    if (auto ec = serialize_parts(st, parts, diag))
        co_return std::tuple{ec};
    if (auto [ec] = co_await prepare(s, diag); ec)
        co_return std::tuple{ec};
    const statements& sql = s.sql();
    co_return co_await s.execute(sql.insert_state(st.state_id, std::move(parts.partial), std::move(parts.completed),
                                                  sql.store_versions() ? s.next_client_version() : 0,
                                                  std::move(fence), newest_ms),
                                 diag);
}

CHSTATE_DECL op<> set(session& s, state st, diagnostics& diag) { co_return co_await write_state(s, st, diag); }

CHSTATE_DECL op<> delete_fenced(session& s, std::string id, std::optional<std::string> fence, diagnostics& diag) {
    if (auto ec = check_id(id, diag))
        co_return std::tuple{ec};
    if (auto [ec] = co_await prepare(s, diag); ec)
        co_return std::tuple{ec};
    co_return co_await delete_rows(s, s.sql().delete_state(id, std::move(fence)), table_kind::state, diag);
}

CHSTATE_DECL op<> delete_state(session& s, std::string id, diagnostics& diag) {
    co_return co_await delete_fenced(s, std::move(id), std::nullopt, diag);
}

CHSTATE_DECL op<std::uint64_t> clear_all(session& s, diagnostics& diag) {
    if (auto [ec] = co_await prepare(s, diag); ec)
        co_return std::tuple{ec, std::uint64_t{0}};
    const statements& sql = s.sql();
    auto [ec, n] = co_await s.count(sql.count_states(), diag);
    if (ec)
        co_return std::tuple{ec, std::uint64_t{0}};
    if (sql.replicated().enabled())
        std::tie(ec) = co_await delete_rows(s, sql.delete_all_states(), table_kind::state, diag);
    else
        std::tie(ec) = co_await s.execute(sql.truncate_states(), diag);
    co_return std::tuple{ec, ec ? std::uint64_t{0} : n};
}

CHSTATE_DECL op<> set_all(session& s, std::vector<state> states, diagnostics& diag) {
    for (const auto& st : states)
        if (auto ec = check_id(st.state_id, diag))
            co_return std::tuple{ec};
    if (states.empty())
        co_return std::tuple{error_code{}};
    std::vector<serialized_parts> parts(states.size());
    for (std::size_t i = 0; i < states.size(); ++i)
        if (auto ec = serialize_parts(states[i], parts[i], diag))
            co_return std::tuple{ec};
    if (auto [ec] = co_await prepare(s, diag); ec)
        co_return std::tuple{ec};
    const statements& sql = s.sql();
    batch_versions batch;
    if (sql.monotonic_versions()) {
        std::vector<std::string> ids;
        ids.reserve(states.size());
        for (const auto& st : states)
            ids.push_back(st.state_id);
        auto [ec] = co_await s.read_rows(
            sql.select_newest_versions(ids, s.next_client_version()), version_floor_columns(),
            [&](std::span<const rb_field> row) {
                batch.add_stored(std::string(row[0].bytes), row[1].number, row[2].number);
                return error_code{};
            },
            diag);
        if (ec)
            co_return std::tuple{ec};
    }
    const bool with_versions = batch.any_stored() || sql.store_versions();
    std::string body;
    for (std::size_t i = 0; i < states.size(); ++i) {
        append_tsv_field(body, states[i].state_id);
        body += '\t';
        append_tsv_field(body, parts[i].partial);
        body += '\t';
        append_tsv_field(body, parts[i].completed);
        if (with_versions) {
            const std::uint64_t v =
                batch.any_stored() ? batch.version_of(states[i].state_id) : s.next_client_version();
            body += '\t';
            body += version_text(v, sql.features().datetime64);
        }
        body += '\n';
    }
    co_return co_await s.execute(sql.insert_states(std::move(body), with_versions), diag);
}

} // namespace chstate::detail
