// chstate/with_diagnostics.hpp — a completion token adapter that turns an
// operation's error into a chstate::error carrying the server's message.
//
// Every store and lease operation completes with (error_code, T…). Where
// that error becomes an exception anyway (co_await with use_awaitable, a
// future), the bare code would lose what the server said ("no state stored
// for this id [chstate:4]"). Through with_diagnostics(token) the operation
// completes with (std::exception_ptr, T…) instead, the exception a
// chstate::error whose what() holds the diagnostics' message:
//
//     auto s = co_await store.async_get(id, chstate::with_diagnostics(asio::use_awaitable));
//
// The store applies it by itself to the default token (asio::deferred),
// and to asio::use_awaitable and asio::use_future given without a
// diagnostics& argument. Tokens that hand the error_code to your code
// (callbacks, as_tuple, redirect_error) keep (error_code, T…); for them,
// pass a diagnostics& to read the message.
#pragma once

#include <chstate/detail/awaitable_fix.hpp>

#include <boost/asio/deferred.hpp>

#include <type_traits>
#include <utility>

namespace chstate {

template <class CompletionToken>
struct with_diagnostics_t {
    CompletionToken token;

    constexpr with_diagnostics_t() = default;
    template <class T>
    constexpr explicit with_diagnostics_t(T&& t) : token(std::forward<T>(t)) {}
};

template <class CompletionToken>
constexpr auto with_diagnostics(CompletionToken&& token) {
    return with_diagnostics_t<std::decay_t<CompletionToken>>(std::forward<CompletionToken>(token));
}

/// The default completion token of every store and lease operation:
/// asio::deferred, with errors carrying their diagnostics.
using default_token = with_diagnostics_t<boost::asio::deferred_t>;

} // namespace chstate
