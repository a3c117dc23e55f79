// chstate/detail/lock/lease.ipp — the definitions of lock/lease.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/lock/lease.hpp>

namespace chstate::detail {

CHSTATE_DECL op<> renew_lease(session& s, lease_state& st, diagnostics& diag) {
    held_lock h;
    {
        std::lock_guard lk(st.mutex);
        if (st.released)
            co_return std::tuple{lease_not_held(diag, st.held)};
        if (!st.held.strict())
            co_return std::tuple{error_code{}};
        ++st.renewing;
        h = st.held;
    }
    auto [ec, renewed] = co_await renew_grant(s, std::move(h), diag);
    std::lock_guard lk(st.mutex);
    --st.renewing;
    if (!ec && renewed.token > st.held.token)
        st.held = std::move(renewed);
    else if (renewed.renewal_unknown)
        st.held.renewal_unknown = true; // the release will look for the newer token
    co_return std::tuple{ec};
}

CHSTATE_DECL op<> verify_lease(session& s, lease_state& st, diagnostics& diag) {
    held_lock h;
    {
        std::lock_guard lk(st.mutex);
        if (st.released)
            co_return std::tuple{lease_not_held(diag, st.held)};
        h = st.held;
    }
    if (!h.strict())
        co_return std::tuple{error_code{}};
    co_return co_await verify_grant(s, h, diag);
}

CHSTATE_DECL op<> release_lease(session& s, lease_state& st, diagnostics& diag) {
    {
        std::lock_guard lk(st.mutex);
        if (st.released)
            co_return std::tuple{lease_not_held(diag, st.held)};
        st.released = true;
    }
    stop_heartbeat(st);
    for (;;) { // a renewal in flight lands first, then its token is released
        {
            std::lock_guard lk(st.mutex);
            if (st.renewing == 0)
                break;
        }
        co_await s.wait(duration(2), cancellation::ignore);
    }
    co_return co_await release(s, st.snapshot(), diag);
}

CHSTATE_DECL op<> heartbeat(session& s, std::shared_ptr<lease_state> st, duration interval,
                      std::function<void(error_code)> on_lost, diagnostics&) {
    for (;;) {
        if (auto [wec] = co_await s.wait(interval); wec)
            co_return std::tuple{error_code{}}; // stopped
        diagnostics diag;
        auto [ec] = co_await renew_lease(s, *st, diag);
        const bool stopped = co_await cancelled();
        if (ec == asio::error::operation_aborted || stopped)
            co_return std::tuple{error_code{}}; // stopped mid-renewal
        bool released;
        {
            std::lock_guard lk(st->mutex);
            released = st->released;
        }
        if (released)
            co_return std::tuple{error_code{}};
        if (ec) {
            if (on_lost)
                on_lost(ec);
            co_return std::tuple{error_code{}};
        }
    }
}

} // namespace chstate::detail
