// chstate/detail/async.hpp — running the store's coroutines as Asio
// asynchronous operations that accept any completion token.
//
// Each public async_xxx(…, token) builds a lazy asio::awaitable that yields
// std::tuple<error_code, T…> and hands it to launch(). launch() initiates
// through asio::async_initiate, so the caller's token decides the shape:
// use_awaitable / deferred / use_future / a callback. The handler's
// associated executor and cancellation slot are kept: the completion runs
// where the caller expects, and cancelling the caller's slot cancels the
// coroutine's current wait.
#pragma once

#include <chstate/error.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>

#include <exception>
#include <future>
#include <tuple>
#include <utility>

namespace chstate::detail {

namespace asio = boost::asio;

template <class Tuple>
struct signature_of;

template <class... Ts>
struct signature_of<std::tuple<error_code, Ts...>> {
    using type = void(error_code, Ts...);
};

template <class Executor, class Result, class CompletionToken>
auto launch(Executor ex, asio::awaitable<Result> op, CompletionToken&& token) {
    using signature = typename signature_of<Result>::type;
    return asio::async_initiate<CompletionToken, signature>(
        [ex](auto handler, asio::awaitable<Result> op) {
            auto slot = asio::get_associated_cancellation_slot(handler);
            auto hex = asio::get_associated_executor(handler, ex);
            asio::co_spawn(
                ex, std::move(op),
                asio::bind_cancellation_slot(
                    slot, asio::bind_executor(hex, [h = std::move(handler)](std::exception_ptr e,
                                                                            Result r) mutable {
                        if (e)
                            std::rethrow_exception(e); // a bug or bad_alloc: let it surface
                        std::apply(std::move(h), std::move(r));
                    })));
        },
        token, std::move(op));
}

/// Runs an async operation to completion from a plain thread and returns its
/// values; throws chstate::error carrying diag's message on failure.
/// `initiate(diag, handler)` must start the operation. The operation's
/// executor must be run by some other thread.
template <class... Ts, class Initiate>
auto run_blocking(Initiate&& initiate) {
    diagnostics diag;
    std::promise<std::tuple<error_code, Ts...>> promise;
    auto future = promise.get_future();
    initiate(diag, [&promise](error_code ec, Ts... values) {
        promise.set_value(std::tuple<error_code, Ts...>(ec, std::move(values)...));
    });
    auto result = future.get();
    throw_if(std::get<0>(result), diag.message);
    if constexpr (sizeof...(Ts) == 1)
        return std::move(std::get<1>(result));
    else if constexpr (sizeof...(Ts) > 1)
        return result;
}

} // namespace chstate::detail
