// chstate/detail/http/exchange.ipp — one request and its reply on one
// connection: the Beast request built from request_parts, the write, the
// head, the body read through body_feeder into the sink (held_back_tail)
// or, for another status, kept (at most 64 KiB) for read_error_reply, and
// what the exchange came to (exchange_result), which transport.ipp's
// failover and retry decisions read. Included by transport.ipp.
#pragma once

#include <chstate/detail/body_feeder.hpp>
#include <chstate/detail/http/body_filter.hpp>
#include <chstate/detail/http/pool.hpp>
#include <chstate/detail/http/reply.hpp>
#include <chstate/detail/http/request.hpp>
#include <chstate/detail/http/stream.hpp>
#include <chstate/detail/separate_compilation.hpp>
#include <chstate/detail/server_error.hpp>
#include <chstate/error.hpp>
#include <chstate/transport.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail {

namespace http = boost::beast::http;

/// Every awaited step completes with its error as a value, never a throw.
inline constexpr auto as_tuple_awaitable = asio::as_tuple(asio::use_awaitable);

using http_request = http::request<http::string_body>;

/// The whole request, built once per operation before a connection is
/// taken: a large body takes long to build, and a kept-alive connection
/// checked before that could have been closed by the server meanwhile
/// (its write then fails after part of the body went out, and a write
/// that never ran would look as if it might have landed).
CHSTATE_DECL error_code make_request(const http_options& o, const statement& stmt, http_request& req,
                                     bool& status_final, diagnostics& diag) {
    request_parts parts;
    if (auto ec = build_request(o, stmt, parts, diag))
        return ec;
    status_final = parts.buffered;
    req = http_request{http::verb::post, std::move(parts.target), 11};
    req.set(http::field::host, host_port(o.host, o.port)); // [::1]:8123 for IPv6
    req.set(http::field::user_agent, "chstate");
    req.set("X-ClickHouse-User", o.user);
    req.set("X-ClickHouse-Key", o.password);
    req.set(http::field::content_type, parts.content_type);
    req.keep_alive(true);
    req.body() = std::move(parts.body);
    req.prepare_payload();
    return {};
}

/// What one exchange came to.
struct exchange_result {
    error_code ec;
    bool response_started = false; ///< any response byte read
    bool request_sent = false;     ///< any request byte written: the server may have run it
    bool reusable = false;
    /// 400 without a ClickHouse exception: the server's HTTP layer could
    /// not parse the request, so no query ran (seen once in ~10^4
    /// requests on a kept-alive connection to 18.16).
    bool not_parsed = false;
    /// The connection failed (writing, or reading the reply), not the server's answer.
    bool io_failed = false;
    /// Reply data reached the sink: the statement cannot be sent again.
    bool delivered = false;
};

/// The error of a step that failed: operation_aborted when the operation
/// was cancelled, errc::timeout when its watchdog fired, else `fallback`;
/// diag says what failed.
CHSTATE_DECL error_code fail_or_interrupt(const http_op_state& st, error_code fallback, diagnostics& diag,
                                          std::string what) {
    if (st.cancelled) {
        diag.message = "operation cancelled";
        return asio::error::operation_aborted;
    }
    if (st.timed_out) {
        diag.message = what + ": timed out";
        return make_error_code(errc::timeout);
    }
    diag.message = std::move(what);
    return fallback;
}

using response_parser = http::response_parser<http::buffer_body>;

/// Reads and parses body bytes until the parser makes progress, fills
/// the body buffer (need_buffer) or fails; detail::body_feeder says
/// why this is not http::async_read.
CHSTATE_DECL asio::awaitable<error_code> read_body_some(connection_stream& stream, beast::flat_buffer& buffer,
                                                        response_parser& parser, body_feeder& feeder) {
    for (;;) {
        while (buffer.size() < feeder.wanted()) {
            auto [ec, n] = co_await stream.async_read_some(buffer.prepare(body_feeder::read_size), as_tuple_awaitable);
            buffer.commit(n);
            if (ec == asio::error::eof)
                co_return feeder.eof(parser, buffer);
            if (ec)
                co_return ec;
        }
        error_code ec = feeder.put(parser, buffer);
        if (ec != http::error::need_more)
            co_return ec;
    }
}

/// Where a reply's body goes as it is read: with status 200, through the
/// held-back tail to the sink; with another status, the first 64 KiB are
/// kept for the error message (read_error_reply).
class reply_body {
public:
    reply_body(bool ok, bool status_final, const result_sink& sink) noexcept
        : ok_(ok), tail_(status_final), sink_(sink) {}

    /// Takes the next bytes of the body. An error (the sink's) abandons
    /// the reply: the connection is then in an unknown state.
    error_code take(std::string_view bytes) {
        if (!ok_) {
            const std::size_t room = error_text_limit - std::min(error_text_.size(), error_text_limit);
            error_text_.append(bytes.substr(0, room));
            if (bytes.size() > room) {
                // A message longer than anything ClickHouse writes: the
                // rest is not read (a server could send it for ever); the
                // error is the one the kept start of it names.
                error_text_cut_ = true;
                return make_error_code(errc::reply_too_large);
            }
            return {};
        }
        const std::string_view ready = tail_.put(bytes);
        if (ready.empty())
            return {};
        delivered_ = true;
        return sink_(ready);
    }

    /// Reply data reached the sink.
    bool delivered() const noexcept { return delivered_; }
    held_back_tail& tail() noexcept { return tail_; }
    const std::string& error_text() const noexcept { return error_text_; }
    /// An error reply's body ran past the 64 KiB kept of it (not read further).
    bool error_text_cut() const noexcept { return error_text_cut_; }

private:
    static constexpr std::size_t error_text_limit = 64 * 1024;
    bool ok_;
    bool error_text_cut_ = false;
    bool delivered_ = false;
    held_back_tail tail_;
    std::string error_text_;
    const result_sink& sink_;
};

/// Reads the rest of the body into `body`, 64 KiB at a time. False, with
/// r.ec set, when it did not complete.
CHSTATE_DECL asio::awaitable<bool> read_body(connection_stream& stream, http_connection& c, const http_op_state& st,
                                             response_parser& parser, reply_body& body, exchange_result& r,
                                             diagnostics& diag) {
    std::vector<char> buf(64 * 1024);
    body_feeder feeder;
    while (!parser.is_done()) {
        parser.get().body().data = buf.data();
        parser.get().body().size = buf.size();
        error_code rec = co_await read_body_some(stream, c.buffer, parser, feeder);
        if (rec == http::error::need_buffer)
            rec = {};
        if (rec || st.cancelled || st.timed_out) {
            const bool framing = rec == http::error::buffer_overflow;
            r.io_failed = rec && !framing;
            r.ec = fail_or_interrupt(st, make_error_code(framing ? errc::protocol_error : errc::truncated_response),
                                     diag,
                                     framing ? "the reply's chunk framing holds more than 64 KiB that is not data"
                                     : rec   ? "the reply ended early: " + rec.message()
                                             : std::string("the reply's body was still arriving"));
            co_return false;
        }
        const std::size_t got = buf.size() - parser.get().body().size;
        r.ec = body.take(std::string_view(buf.data(), got));
        r.delivered = body.delivered();
        if (r.ec)
            co_return false;
    }
    co_return true;
}

/// Sends the request and streams the reply on one connection.
/// `status_final`: wait_end_of_query=1 was sent (held_back_tail).
CHSTATE_DECL asio::awaitable<exchange_result> exchange(connection_stream& stream, http_connection& c,
                                                       const http_op_state& st, const http_request& req,
                                                       const bool status_final, const result_sink& sink,
                                                       diagnostics& diag) {
    exchange_result r;
    auto [wec, wn] = co_await http::async_write(stream, req, as_tuple_awaitable);
    r.request_sent = wn > 0;
    r.io_failed = bool(wec);
    if (wec || st.cancelled || st.timed_out) {
        r.ec = fail_or_interrupt(st, make_error_code(errc::connection_failed), diag,
                                 "sending the request failed: " + wec.message());
        co_return r;
    }
    response_parser parser;
    parser.body_limit(boost::none);
    std::size_t before = c.buffer.size();
    auto [hec, hn] = co_await http::async_read_header(stream, c.buffer, parser, as_tuple_awaitable);
    r.response_started = hn > 0 || c.buffer.size() != before || parser.got_some();
    r.io_failed = bool(hec);
    if (hec || st.cancelled || st.timed_out) {
        const auto fallback = r.response_started ? errc::protocol_error : errc::connection_failed;
        r.ec = fail_or_interrupt(st, make_error_code(fallback), diag, "reading the reply failed: " + hec.message());
        co_return r;
    }
    const auto& head = parser.get();
    const bool ok = head.result() == http::status::ok;
    // chstate never asks for a coding (no Accept-Encoding, no
    // enable_http_compression): a coded body would be taken for rows.
    if (auto why = unasked_coding(head); !why.empty()) {
        diag.message = std::move(why);
        r.ec = make_error_code(errc::protocol_error);
        co_return r;
    }

    reply_body body(ok, status_final, sink);
    const bool complete = co_await read_body(stream, c, st, parser, body, r, diag);
    if (!complete && !body.error_text_cut())
        co_return r;

    // Keep-alive bookkeeping (an error reply left unread: the connection goes).
    r.reusable = complete && head.keep_alive();
    if (auto ka = head.find(http::field::keep_alive); complete && ka != head.end()) {
        if (auto t = keep_alive_timeout(ka->value()))
            c.keep_alive = *t;
    }

    if (!ok) {
        std::optional<std::string_view> code_header;
        if (auto h = head.find("X-ClickHouse-Exception-Code"); h != head.end())
            code_header = std::string_view(h->value().data(), h->value().size());
        const auto reason = head.reason();
        auto reply = read_error_reply(head.result_int(), std::string_view(reason.data(), reason.size()), code_header,
                                      body.error_text());
        r.ec = error_reply_code(head.result_int(), reply);
        r.not_parsed = not_parsed(head.result_int(), reply);
        diag.message = std::move(reply.message);
        if (body.error_text_cut())
            diag.message += " (rest unread)"; // (a body past 64 KiB: not read further)
        co_return r;
    }
    const auto end = body.tail().finish();
    if (end.has_exception) {
        diag.message = std::string(trim_message(end.exception));
        auto code = exception_code(end.exception);
        r.ec = code ? make_clickhouse_error(*code) : make_error_code(errc::truncated_response);
        r.reusable = false;
        co_return r;
    }
    if (!end.data.empty())
        r.ec = sink(end.data);
    if (r.ec)
        r.reusable = false;
    co_return r;
}

} // namespace chstate::detail
