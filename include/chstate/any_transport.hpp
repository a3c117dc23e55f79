// chstate/any_transport.hpp — one transport type for every engine.
//
// any_transport holds any type that models the Transport concept
// (transport.hpp): the embedded engine, HTTP, the simulator, or one of
// yours. basic_state_store<any_transport> is therefore one store type for
// whatever engine a URI names; chstate::open (open.hpp) builds one:
//
//     auto store = chstate::open(chstate::config::from_environment());
//     auto saved = store.get("dev:tap-x-to-target-y");
//
// It costs one virtual call and one type-erased completion handler per
// statement. The typed stores (embedded_state_store, http_state_store,
// basic_state_store<YourTransport>) remain for code that knows its engine.
//
// What the store asks of a transport at compile time elsewhere —
// `binds_parameters` and `embedded_engine` — any_transport answers at run
// time from the transport it holds (traits()), so a store over it behaves
// exactly as a store over the held transport: the same statements, the
// same lock mode under lock_mode::automatic, the same errors.
//
// Copies share the held transport (as copies of every chstate transport
// do). `keep_alive` lets the holder own what the transport runs on, e.g.
// the thread pool open() starts for HTTP; it is released after the
// transport, when the last copy goes.
#pragma once

#include <chstate/transport.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <memory>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace chstate {

namespace detail {

/// A completion handler of any type behind one concrete type, keeping its
/// associated executor (as any_io_executor, which a transport can track work
/// on) and its cancellation slot. Asio's any_completion_handler offers only
/// an executor without work tracking, which transports need.
class erased_handler {
    struct base {
        virtual ~base() = default;
        virtual void call(error_code ec) = 0;
    };
    template <class H>
    struct impl final : base {
        H h;
        explicit impl(H&& handler) : h(std::move(handler)) {}
        void call(error_code ec) override { std::move(h)(ec); }
    };

public:
    using executor_type = asio::any_io_executor;
    using cancellation_slot_type = asio::cancellation_slot;

    template <class Handler>
    erased_handler(Handler&& h, const asio::any_io_executor& fallback)
        : ex_(asio::get_associated_executor(h, fallback)),
          slot_(asio::get_associated_cancellation_slot(h)),
          fn_(std::make_unique<impl<std::decay_t<Handler>>>(std::forward<Handler>(h))) {}

    executor_type get_executor() const noexcept { return ex_; }
    cancellation_slot_type get_cancellation_slot() const noexcept { return slot_; }

    void operator()(error_code ec) {
        auto fn = std::move(fn_);
        fn->call(ec);
    }

private:
    executor_type ex_;
    cancellation_slot_type slot_;
    std::unique_ptr<base> fn_;
};

} // namespace detail

class any_transport {
    using handler_type = detail::erased_handler;

    struct holder_base {
        virtual ~holder_base() = default;
        virtual asio::any_io_executor get_executor() const = 0;
        virtual void execute(const statement& stmt, result_sink sink, diagnostics& diag, handler_type handler) = 0;
        virtual const std::type_info& type() const noexcept = 0;
        virtual void* target() noexcept = 0;
    };

public:
    using executor_type = asio::any_io_executor;

    /// Holds `t`. `keep_alive` (optional) is released after `t` is destroyed.
    template <class T>
        requires(!std::same_as<std::remove_cvref_t<T>, any_transport> && transport<std::remove_cvref_t<T>>)
    any_transport(T&& t, std::shared_ptr<void> keep_alive = {})
        : impl_(std::make_shared<owner<std::remove_cvref_t<T>>>(std::forward<T>(t), std::move(keep_alive))),
          traits_(traits_of<std::remove_cvref_t<T>>()) {}

    executor_type get_executor() const { return impl_->get_executor(); }

    /// How the store must treat the held transport (see the header comment).
    transport_traits traits() const noexcept { return traits_; }

    /// The held transport if it is a T, else nullptr.
    template <class T>
    T* target() noexcept {
        return impl_->type() == typeid(T) ? static_cast<T*>(impl_->target()) : nullptr;
    }
    template <class T>
    const T* target() const noexcept {
        return impl_->type() == typeid(T) ? static_cast<const T*>(impl_->target()) : nullptr;
    }

    /// As the held transport's async_execute (transport.hpp); the handler's
    /// associated executor and cancellation slot reach the held transport.
    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [impl = impl_](auto handler, const statement* stmt, result_sink sink, diagnostics* diag) {
                auto fallback = impl->get_executor();
                impl->execute(*stmt, std::move(sink), *diag, handler_type(std::move(handler), fallback));
            },
            token, &stmt, std::move(sink), &diag);
    }

private:
    template <class T>
    struct owner final : holder_base {
        // Declared first, so destroyed after the transport: what the
        // transport runs on outlives it.
        std::shared_ptr<void> keep_alive;
        T transport;

        owner(T t, std::shared_ptr<void> k) : keep_alive(std::move(k)), transport(std::move(t)) {}
        asio::any_io_executor get_executor() const override { return transport.get_executor(); }
        void execute(const statement& stmt, result_sink sink, diagnostics& diag, handler_type handler) override {
            transport.async_execute(stmt, std::move(sink), diag, std::move(handler));
        }
        const std::type_info& type() const noexcept override { return typeid(T); }
        void* target() noexcept override { return &transport; }
    };

    std::shared_ptr<holder_base> impl_;
    transport_traits traits_;
};

static_assert(transport<any_transport>);

} // namespace chstate
