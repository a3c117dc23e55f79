// chstate/detail/awaitable_fix.hpp — lets a coroutine co_await an operation
// whose completion is (std::exception_ptr, T) directly, on the Boost
// versions where Asio cannot.
//
// The store's default token completes with_diagnostics: (exception_ptr, T).
// Awaiting such an operation (a deferred one, say) goes through
// asio::detail::awaitable_async_op_handler<R(std::exception_ptr, T)>, whose
// resume() in Boost 1.81 tests `*result` — a struct — instead of
// `*result.ex_`, and so does not compile. chstate's value types get a
// specialisation that does the same as the intended one; other types are
// untouched. Remove when the oldest supported Boost has the fix.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/version.hpp>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#if BOOST_VERSION >= 108100 && BOOST_VERSION < 109000 && !defined(CHSTATE_NO_AWAITABLE_FIX)

namespace chstate {
struct state;
template <class Store>
class basic_lock_lease;
} // namespace chstate

namespace boost::asio::detail {

// The body of Asio's own specialisation, with the test fixed. Written out
// per specialisation: Asio befriends awaitable_async_op_handler only.
#define CHSTATE_AWAITABLE_FIX_BODY(T)                                                                               \
public:                                                                                                             \
    struct result_type {                                                                                            \
        std::exception_ptr* ex_;                                                                                    \
        T* value_;                                                                                                  \
    };                                                                                                              \
    awaitable_async_op_handler(awaitable_thread<Executor>* h, result_type& result)                                  \
        : awaitable_thread<Executor>(std::move(*h)), result_(result) {}                                             \
    void operator()(std::exception_ptr ex, T value) {                                                               \
        result_.ex_ = &ex;                                                                                          \
        result_.value_ = &value;                                                                                    \
        this->entry_point()->top_of_stack_->attach_thread(this);                                                    \
        this->entry_point()->top_of_stack_->clear_cancellation_slot();                                              \
        this->pump();                                                                                               \
    }                                                                                                               \
    static T resume(result_type& result) {                                                                          \
        if (*result.ex_) {                                                                                          \
            std::exception_ptr ex = std::exchange(*result.ex_, nullptr);                                            \
            std::rethrow_exception(ex);                                                                             \
        }                                                                                                           \
        return std::move(*result.value_);                                                                           \
    }                                                                                                               \
                                                                                                                    \
private:                                                                                                            \
    result_type& result_;

#define CHSTATE_FIX_AWAITABLE_FOR(...)                                                                              \
    template <typename R, typename Executor>                                                                        \
    class awaitable_async_op_handler<R(std::exception_ptr, __VA_ARGS__), Executor>                                 \
        : public awaitable_thread<Executor> {                                                                       \
        CHSTATE_AWAITABLE_FIX_BODY(__VA_ARGS__)                                                                     \
    };

CHSTATE_FIX_AWAITABLE_FOR(std::optional<chstate::state>)
CHSTATE_FIX_AWAITABLE_FOR(chstate::state)
CHSTATE_FIX_AWAITABLE_FOR(std::uint64_t)
CHSTATE_FIX_AWAITABLE_FOR(std::vector<std::string>)

template <typename R, typename Store, typename Executor>
class awaitable_async_op_handler<R(std::exception_ptr, chstate::basic_lock_lease<Store>), Executor>
    : public awaitable_thread<Executor> {
    CHSTATE_AWAITABLE_FIX_BODY(chstate::basic_lock_lease<Store>)
};

#undef CHSTATE_FIX_AWAITABLE_FOR
#undef CHSTATE_AWAITABLE_FIX_BODY

} // namespace boost::asio::detail

#endif
