// chstate/detail/launch.hpp — running an operation (a coroutine over the
// session) as an Asio asynchronous operation that takes any completion
// token, or as a blocking call.
//
// async_run(core, token, body) and async_run_with(core, &diag, token, body)
// — every async_xxx is one call to one of them:
//   * the operation runs on a strand of the store's executor and completes
//     on the handler's associated executor (work is kept on it meanwhile);
//   * the handler's cancellation slot reaches the operation through the
//     strand, whatever thread emits it; terminal, partial and total
//     cancellation all stop it at its next statement or wait, and it
//     completes with operation_aborted (cleanup still runs);
//   * nothing is ever thrown through the executor: an exception inside
//     (bad_alloc, a throwing callback of the caller's) becomes an error;
//   * with_diagnostics tokens (the default) complete with an exception
//     carrying the diagnostics' message instead of a bare error_code.
// run_blocking(core, body) — every blocking form: runs the operation on the
// calling thread (an io_context of its own, run until the operation ends),
// so it needs nobody to run the store's executor; called from one of the
// transport's own threads (where it would wait for itself) it fails at
// once with errc::would_deadlock.
#pragma once

#include <chstate/detail/store_core.hpp>
#include <chstate/with_diagnostics.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <exception>
#include <future>
#include <new>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace chstate::detail {

template <class... Ts>
using result_of_op = std::tuple<error_code, Ts...>;

/// An exception that escaped an operation, as an error.
template <class... Ts>
result_of_op<Ts...> as_error(std::exception_ptr e, diagnostics& diag) {
    error_code ec;
    try {
        std::rethrow_exception(e);
    } catch (const boost::system::system_error& x) {
        ec = x.code();
        diag.message = x.what();
    } catch (const std::bad_alloc&) {
        ec = make_error_code(boost::system::errc::not_enough_memory);
        diag.message = "out of memory";
    } catch (const std::exception& x) {
        ec = make_error_code(errc::callback_failed);
        diag.message = std::string("an exception stopped the operation: ") + x.what();
    } catch (...) {
        ec = make_error_code(errc::callback_failed);
        diag.message = "an exception stopped the operation";
    }
    return result_of_op<Ts...>(ec, Ts{}...);
}

/// The operation's coroutine: `body(session&, diagnostics&)` with the
/// store's rules for cancellation and exceptions.
template <class... Ts, class Body>
asio::awaitable<result_of_op<Ts...>> run_body(std::shared_ptr<store_core> core, diagnostics* diag, Body body) {
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    diagnostics local;
    diagnostics& d = diag ? *diag : local;
    std::exception_ptr escaped;
    try {
        co_return co_await body(core->sess(), d);
    } catch (...) {
        escaped = std::current_exception();
    }
    co_return as_error<Ts...>(escaped, d);
}

/// Starts `body` on a strand of `run_on`; `handler(error_code, Ts…)`
/// runs on its associated executor (default: the store's).
template <class... Ts, class Body, class Handler>
std::shared_ptr<op_control> start_op(const std::shared_ptr<store_core>& core, const asio::any_io_executor& run_on, diagnostics* diag,
              Body body, Handler handler) {
    auto ctl = std::make_shared<op_control>(asio::make_strand(run_on));
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto work = asio::prefer(asio::get_associated_executor(handler, core->executor()),
                             asio::execution::outstanding_work.tracked);
    if (slot.is_connected())
        slot.assign([weak = std::weak_ptr<op_control>(ctl)](asio::cancellation_type type) {
            if (auto c = weak.lock())
                c->request_cancel(type);
        });
    core->add(ctl);
    asio::co_spawn(
        ctl->strand(), run_body<Ts...>(core, diag, std::move(body)),
        asio::bind_cancellation_slot(
            ctl->slot(), [core = std::shared_ptr<store_core>(core), ctl, slot, work = std::move(work), h = std::move(handler)](
                             std::exception_ptr e, result_of_op<Ts...> r) mutable {
                ctl->finish();
                core->remove(ctl);
                // The operation lets go of the store before its caller
                // hears: a blocking caller may destroy the store and leave
                // main() at once, and a last reference dropped here, after
                // that, would tear down the engine (chDB's connection)
                // during exit on this thread (seen as a SIGSEGV in
                // chdb_close_conn at the CLI's exit, under load).
                core.reset();
                ctl.reset();
                if (e) { // only co_spawn's own machinery could get here
                    diagnostics ignored;
                    r = as_error<Ts...>(e, ignored);
                }
                auto ex = work;
                asio::dispatch(ex, [slot, h = std::move(h), r = std::move(r), work = std::move(work)]() mutable {
                    if (slot.is_connected())
                        slot.clear();
                    std::apply(std::move(h), std::move(r));
                });
            }));
    return ctl;
}

/// `fn(session&, args…, diagnostics&)` as an operation body: the arguments
/// are moved into the operation once, when it starts.
template <class Fn, class... Args>
auto bind_op(Fn fn, Args... args) {
    return [fn, ... args = std::move(args)](session& s, diagnostics& d) mutable { return fn(s, std::move(args)..., d); };
}

template <class T>
struct is_with_diagnostics : std::false_type {};
template <class T>
struct is_with_diagnostics<with_diagnostics_t<T>> : std::true_type {};

/// Tokens that turn an error into an exception anyway: given without a
/// diagnostics&, the store completes them with_diagnostics.
template <class T>
struct throws_errors : std::false_type {};
template <class Executor>
struct throws_errors<asio::use_awaitable_t<Executor>> : std::true_type {};
template <class Allocator>
struct throws_errors<asio::use_future_t<Allocator>> : std::true_type {};

/// (error_code, Ts…) → (exception_ptr, Ts…), the exception carrying `diag`.
template <class... Ts, class Handler>
auto to_exception(std::shared_ptr<diagnostics> diag, Handler handler, const asio::any_io_executor& fallback) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto hex = asio::get_associated_executor(handler, fallback);
    return asio::bind_cancellation_slot(
        slot, asio::bind_executor(hex, [diag, h = std::move(handler)](error_code ec, Ts... values) mutable {
            std::exception_ptr e;
            if (ec)
                e = std::make_exception_ptr(diag->message.empty() ? error(ec) : error(ec, diag->message));
            std::move(h)(e, std::move(values)...);
        }));
}

/// Starts `body` as an operation completing the way `token` asks. `diag`:
/// the caller's diagnostics, or null. `Ts…`: the completion's values after
/// the error.
template <class... Ts, class CompletionToken, class Body>
auto async_run_with(std::shared_ptr<store_core> core, diagnostics* diag, CompletionToken&& token, Body body) {
    if constexpr (is_with_diagnostics<std::decay_t<CompletionToken>>::value) {
        return asio::async_initiate<decltype(token.token), void(std::exception_ptr, Ts...)>(
            [core = std::move(core), diag](auto handler, Body body) mutable {
                // The caller's diagnostics, not owned; or our own.
                auto d = diag ? std::shared_ptr<diagnostics>(std::shared_ptr<void>(), diag)
                              : std::make_shared<diagnostics>();
                auto* raw = d.get();
                auto ex = core->executor();
                start_op<Ts...>(core, ex, raw, std::move(body), to_exception<Ts...>(std::move(d), std::move(handler), ex));
            },
            token.token, std::move(body));
    } else {
        return asio::async_initiate<CompletionToken, void(error_code, Ts...)>(
            [core = std::move(core), diag](auto handler, Body body) mutable {
                auto ex = core->executor();
                start_op<Ts...>(core, ex, diag, std::move(body), std::move(handler));
            },
            token, std::move(body));
    }
}

/// The token-only forms: as async_run_with, and tokens that turn errors
/// into exceptions anyway (the default, use_awaitable, use_future)
/// complete with_diagnostics.
template <class... Ts, class CompletionToken, class Body>
auto async_run(std::shared_ptr<store_core> core, CompletionToken&& token, Body body) {
    if constexpr (throws_errors<std::decay_t<CompletionToken>>::value)
        return async_run_with<Ts...>(std::move(core), nullptr, with_diagnostics(std::forward<CompletionToken>(token)),
                                     std::move(body));
    else
        return async_run_with<Ts...>(std::move(core), nullptr, std::forward<CompletionToken>(token), std::move(body));
}

/// Every blocking form: runs `body` to completion and returns its value
/// (or nothing, or a tuple of several); throws chstate::error with the
/// diagnostics' message on failure. The operation runs on the calling
/// thread, on an io_context of its own that the call runs until the
/// operation completes (what it leaves running goes on on a background
/// thread of the store's, store_core.hpp): it needs nobody to run the store's executor (only the
/// transport's own threads, which chDB and http_transport have), and the
/// caller is woken once, by the last statement's reply, instead of handing
/// the operation to another thread and waiting on a future for it
/// (BM_get: one thread hop each way fewer).
template <class... Ts, class Body>
auto run_blocking(const std::shared_ptr<store_core>& core, Body body) {
    if (core->eng().runs_transport_here())
        throw error(make_error_code(errc::would_deadlock),
                    "a blocking chstate call was made on one of the transport's own threads (e.g. inside a "
                    "completion handler or a get_all visitor running there), where it would wait for itself: use "
                    "the async_ form, or call it from another thread");
    diagnostics diag;
    std::optional<result_of_op<Ts...>> done;
    blocking_call call;
    {
        struct mark { // this thread's blocking call, for the engine's clock waits
            blocking_call* outer;
            explicit mark(blocking_call* c) : outer(std::exchange(blocking_call_here(), c)) {}
            mark(const mark&) = delete;
            mark& operator=(const mark&) = delete;
            ~mark() { blocking_call_here() = outer; }
        } here_is(&call);
        auto here = std::make_shared<asio::io_context>(1);
        start_op<Ts...>(core, here->get_executor(), &diag, std::move(body),
                        asio::bind_executor(here->get_executor(), [&done](error_code ec, Ts... values) {
                            done.emplace(ec, std::move(values)...);
                        }));
        while (!done && here->run_one() != 0) {
        }
        // Work left once the operation has completed is an acquire's claim
        // that lock.timeout stopped waiting for (lock/acquire.hpp): it
        // finishes, and gives back what lands, on a thread of the store's.
        if (done && !here->stopped())
            here->poll(); // what is ready now (a strand's last hop) runs here
        if (!here->stopped())
            core->run_in_background(std::move(here));
    }
    if (!done) // the operation's handler was destroyed uncalled (its transport went away under it)
        throw error(make_error_code(asio::error::operation_aborted),
                    "the operation was abandoned before it completed (its transport was destroyed)");
    auto& result = *done;
    if (std::get<0>(result) == errc::would_deadlock && call.refused_undriven_wait)
        throw error(make_error_code(errc::would_deadlock),
                    "a blocking chstate call had to wait on the store's simulated clock (manual_clock), which "
                    "nothing was advancing: it would have waited forever. Use the async_ form and drive the "
                    "clock with clock.run(io_context), or hold clock.drive() on the thread that advances it "
                    "while this call runs (manual_clock.hpp)");
    throw_if(std::get<0>(result), diag.message);
    if constexpr (sizeof...(Ts) == 1)
        return std::move(std::get<1>(result));
    else if constexpr (sizeof...(Ts) > 1)
        return result;
}

} // namespace chstate::detail
