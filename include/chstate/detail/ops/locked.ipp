// chstate/detail/ops/locked.ipp — the definitions of ops/locked.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/ops/locked.hpp>

namespace chstate::detail {

CHSTATE_DECL op<> fenced_set(session& s, const state& st, const held_lock& h, diagnostics& diag,
                             std::optional<std::uint64_t> newest_ms) {
    if (!h.strict())
        co_return co_await write_state(s, st, diag, std::nullopt, newest_ms);
    if (auto [ec] = co_await write_state(s, st, diag, h.lock_id, newest_ms); ec)
        co_return std::tuple{ec};
    co_return co_await settle_fenced_write(s, h, diag);
}

CHSTATE_DECL op<held_lock> keep_alive(session& s, held_lock h, diagnostics& diag) {
    if (!h.strict() || h.expires_ms == 0 || s.now_ms() + lease_ttl_ms(s) / 2 < h.expires_ms)
        co_return std::tuple{error_code{}, std::move(h)};
    co_return co_await renew_grant(s, std::move(h), diag);
}

CHSTATE_DECL op<state> update(session& s, state incoming, diagnostics& diag) {
    if (auto ec = check_id(incoming.state_id, diag))
        co_return std::tuple{ec, state{}};
    const std::string id = incoming.state_id;
    co_return co_await under_lock<state>(s, id, diag, [&](held_lock& held) -> op<state> {
        state written;
        // The stored version, read under the lock with the state: the
        // write's monotonic version starts from it and reads nothing more.
        // Every later writer of the id either holds this lock after us or
        // started before our write finished (versions.hpp).
        std::optional<std::uint64_t> newest_ms;
        if (!incoming.is_complete()) {
            std::uint64_t newest = 0;
            auto [ec, current] = co_await read_state(s, id, diag, &newest);
            if (ec)
                co_return std::tuple{ec, state{}};
            newest_ms = newest;
            written = current ? std::move(current->merge_partial(incoming)) : std::move(incoming);
        } else {
            written = std::move(incoming);
        }
        auto [kec, kept] = co_await keep_alive(s, held, diag);
        if (kec)
            co_return std::tuple{kec, state{}};
        held = std::move(kept);
        auto [ec] = co_await fenced_set(s, written, held, diag, newest_ms);
        co_return std::tuple{ec, std::move(written)};
    });
}

CHSTATE_DECL op<> clear(session& s, std::string id, diagnostics& diag) {
    if (auto ec = check_id(id, diag))
        co_return std::tuple{ec};
    auto [ec, done] = co_await under_lock<nothing>(s, id, diag, [&](held_lock& held) -> op<nothing> {
        auto [kec, kept] = co_await keep_alive(s, held, diag);
        if (kec)
            co_return std::tuple{kec, nothing{}};
        held = std::move(kept);
        std::optional<std::string> fence;
        if (held.strict())
            fence = held.lock_id;
        auto [dec] = co_await delete_fenced(s, id, fence, diag);
        if (!dec && held.strict())
            std::tie(dec) = co_await confirm_grant(s, held, "delete", diag);
        co_return std::tuple{dec, nothing{}};
    });
    co_return std::tuple{ec};
}

CHSTATE_DECL op<state> stored_source(session& s, const std::string& src, diagnostics& diag) {
    auto [ec, found] = co_await get(s, src, diag);
    if (ec)
        co_return std::tuple{ec, state{}};
    if (!found)
        co_return std::tuple{fail(diag, errc::state_not_found, "no state stored for \"" + src + "\""), state{}};
    co_return std::tuple{error_code{}, std::move(*found)};
}

CHSTATE_DECL op<> copy(session& s, std::string src, std::string dst, then after, diagnostics& diag) {
    if (auto ec = check_id(dst, diag))
        co_return std::tuple{ec};
    if (auto ec = check_distinct(src, dst, after == then::clear_source ? "move" : "copy", diag))
        co_return std::tuple{ec};
    auto [ec, found] = co_await stored_source(s, src, diag);
    if (ec)
        co_return std::tuple{ec};
    found.state_id = dst;
    if (std::tie(ec) = co_await write_state(s, found, diag); ec || after == then::keep_source)
        co_return std::tuple{ec};
    co_return co_await clear(s, src, diag);
}

CHSTATE_DECL op<state> merge(session& s, std::string src, std::string dst, diagnostics& diag) {
    if (auto ec = check_id(dst, diag))
        co_return std::tuple{ec, state{}};
    if (auto ec = check_distinct(src, dst, "merge", diag))
        co_return std::tuple{ec, state{}};
    auto [ec, found] = co_await stored_source(s, src, diag);
    if (ec)
        co_return std::tuple{ec, state{}};
    state incoming;
    incoming.state_id = std::move(dst);
    incoming.partial_state = found.merged();
    co_return co_await update(s, std::move(incoming), diag);
}

CHSTATE_DECL op<> set_under_lease(session& s, bool held, held_lock h, state st, diagnostics& diag) {
    if (auto ec = check_id(st.state_id, diag))
        co_return std::tuple{ec};
    if (!held)
        co_return std::tuple{fail(diag, errc::lock_lost,
                                  "set(lease, state): the lease does not hold a lock (released or moved from)")};
    if (h.state_id != st.state_id)
        co_return std::tuple{fail(diag, errc::invalid_argument,
                                  "set(lease, state): the lease is for state_id " + h.state_id +
                                      ", the state is for state_id " + st.state_id)};
    co_return co_await fenced_set(s, st, h, diag);
}

} // namespace chstate::detail
