// Test doubles that let a test decide, statement by statement and wait by
// wait, what the store meets:
//
//   scripted_transport — a Transport over a backing transport (the
//     simulator). Every statement is logged by name; at statement n it can
//     fail before sending (nothing reaches the server), fail after sending
//     (the server ran it, the reply is lost: errc::outcome_unknown for a
//     write), or cancel the operation while the statement is in flight.
//     With expectations queued (expect("state.select").reply(bytes)) it
//     answers from them instead, checking each statement's name.
//   counting_clock — a manual_clock whose waits are counted, and which can
//     cancel the operation when wait n begins.
//
// Cancelling means emitting the signal the test bound to the operation's
// handler; a statement in flight is then completed with operation_aborted
// after it ran (as an HTTP request abandoned after sending would be: the
// worst case for what it leaves behind).
#pragma once

#include <chstate/manual_clock.hpp>
#include <chstate/transport.hpp>
#include <chstate/testing/simulated.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/post.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace chstate::test {

namespace asio = boost::asio;

/// What happens at the chosen statement.
enum class injected { nothing, fail_before_send, fail_after_send, cancel };

struct script_state {
    // the plan
    int at = 0; ///< 1-based statement number (0: none)
    injected what = injected::nothing;
    std::function<void()> cancel; ///< emits the operation's cancellation signal
    /// Called with each statement's name as it is sent (e.g. to move the clock).
    std::function<void(const std::string&)> on_send;
    // canned replies: when non-empty, statements are answered from here
    struct expectation {
        std::string name;
        std::string reply;
        error_code ec;
    };
    std::deque<expectation> expected;
    // what happened
    struct sent {
        std::string name;
        bool cancellable = false; ///< the operation may cut it short
        bool writes = false;
    };
    std::vector<sent> log;
    bool cancel_emitted = false;
    int cancellable_after_cancel = 0; ///< statements the operation started after it was cancelled
    std::string unexpected;           ///< a statement that did not match the expectations

    void reset_log() {
        log.clear();
        cancel_emitted = false;
        cancellable_after_cancel = 0;
    }
};

/// Queues a canned reply: script.expect("state.select").reply("…").
struct expect_builder {
    script_state& s;
    std::size_t index;
    expect_builder& reply(std::string bytes) {
        s.expected[index].reply = std::move(bytes);
        return *this;
    }
    expect_builder& fail(error_code ec) {
        s.expected[index].ec = ec;
        return *this;
    }
};
inline expect_builder expect(script_state& s, std::string name) {
    s.expected.push_back({std::move(name), {}, {}});
    return {s, s.expected.size() - 1};
}

class scripted_transport {
public:
    scripted_transport(simulated_transport backing, std::shared_ptr<script_state> script)
        : backing_(std::move(backing)), script_(std::move(script)) {}

    asio::any_io_executor get_executor() const { return backing_.get_executor(); }
    script_state& script() { return *script_; }
    simulated_transport& backing() { return backing_; }

    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [this](auto handler, const statement* stmt, result_sink sink, diagnostics* diag) {
                start(std::move(handler), *stmt, std::move(sink), *diag);
            },
            token, &stmt, std::move(sink), &diag);
    }

private:
    template <class Handler>
    void start(Handler handler, const statement& stmt, result_sink sink, diagnostics& diag) {
        script_state& s = *script_;
        const bool cancellable = asio::get_associated_cancellation_slot(handler).is_connected();
        s.log.push_back({stmt.name, cancellable, writes_data(stmt)});
        if (s.cancel_emitted && cancellable)
            ++s.cancellable_after_cancel;
        const int n = int(s.log.size());
        if (s.on_send)
            s.on_send(stmt.name);
        auto ex = asio::get_associated_executor(handler, get_executor());
        auto complete = [ex, h = std::move(handler)](error_code ec) mutable {
            asio::post(ex, [h = std::move(h), ec]() mutable { std::move(h)(ec); });
        };
        if (!s.expected.empty()) {
            auto e = std::move(s.expected.front());
            s.expected.pop_front();
            if (e.name != stmt.name && s.unexpected.empty())
                s.unexpected = "expected " + e.name + ", the store sent " + stmt.name + ": " + stmt.sql;
            error_code ec = e.ec;
            if (!ec && !e.reply.empty())
                ec = sink(e.reply);
            complete(ec);
            return;
        }
        injected what = n == s.at ? s.what : injected::nothing;
        if (what == injected::cancel && !cancellable)
            what = injected::nothing; // a cleanup statement: the operation does not let it be cut short
        if (what == injected::fail_before_send) {
            diag.message = "injected: connection refused before statement " + std::to_string(n);
            complete(make_error_code(errc::connection_failed));
            return;
        }
        if (what == injected::cancel) {
            s.cancel_emitted = true;
            s.cancel();
        }
        const bool write = writes_data(stmt);
        backing_.async_execute(stmt, std::move(sink), diag,
                               [complete = std::move(complete), what, write, n, &diag](error_code ec) mutable {
                                   if (what == injected::fail_after_send) {
                                       diag.message = "injected: reply lost after statement " + std::to_string(n);
                                       ec = make_error_code(write ? errc::outcome_unknown : errc::connection_failed);
                                   } else if (what == injected::cancel) {
                                       ec = asio::error::operation_aborted;
                                   }
                                   complete(ec);
                               });
    }

    simulated_transport backing_;
    std::shared_ptr<script_state> script_;
};

static_assert(transport<scripted_transport>);

/// A manual_clock whose waits are counted; at wait `cancel_at` (1-based) it
/// calls `cancel` as the wait begins.
class counting_clock {
public:
    struct shared {
        int waits = 0;
        int cancel_at = 0;
        std::function<void()> cancel;
        bool cancel_emitted = false;
    };
    explicit counting_clock(manual_clock base, std::shared_ptr<shared> s = std::make_shared<shared>())
        : base_(std::move(base)), s_(std::move(s)) {}

    time_point now() const { return base_.now(); }
    auto begin_activity() const { return base_.begin_activity(); }
    manual_clock& base() { return base_; }
    shared& counts() { return *s_; }

    template <class CompletionToken>
    auto async_wait(asio::any_io_executor ex, duration d, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [base = base_, s = s_](auto handler, asio::any_io_executor ex, duration d) mutable {
                // Only waits the operation may cut short are cancellation points.
                if (asio::get_associated_cancellation_slot(handler).is_connected() && ++s->waits == s->cancel_at &&
                    s->cancel) {
                    s->cancel_emitted = true;
                    s->cancel();
                }
                base.async_wait(std::move(ex), d, std::move(handler));
            },
            token, std::move(ex), d);
    }

private:
    manual_clock base_;
    std::shared_ptr<shared> s_;
};

static_assert(clock<counting_clock>);

} // namespace chstate::test
