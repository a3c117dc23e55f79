// Fuzz target: http_transport end to end over a loopback socket: the real
// request/response exchange (transport/http.hpp), the server's bytes fuzzed.
//
// Input: one byte choosing the statement (reply format TabSeparated, whose
// body is searched for an exception after status 200; RowBinary, sent
// with wait_end_of_query=1, whose body is data only; or a statement with
// a small parameter, inlined, or a large one, sent as multipart/form-data),
// then the bytes a server sends
// back on every connection (status line, headers, body), after which it
// shuts its side down.
//
// Properties (the reply read whole by Beast is the oracle):
//   * the operation always completes, well within its request timeout;
//   * status 200 with a complete body: success with the sink given exactly
//     the body — unless the format's body is searched and holds
//     ClickHouse's exception (find_body_exception), which is an error
//     carrying its code when it has one (else truncated_response) and gives
//     the sink nothing;
//   * any other status, or a reply that does not parse or ends early: an
//     error, never success, and no data for a non-200 status;
//   * the password never appears in the message.
#include "fuzz_common.hpp"

#include <chstate/transport/http.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/dynamic_body.hpp>
#include <boost/beast/http/read.hpp>

#include <array>
#include <memory>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

constexpr std::string_view password = "Pw0rdMarker77";

/// A loopback server answering every request on every connection with the same bytes.
struct server {
    asio::io_context& io;
    tcp::acceptor acceptor;
    std::string reply;
    std::vector<std::shared_ptr<tcp::socket>> sockets;

    explicit server(asio::io_context& ctx) : io(ctx), acceptor(ctx, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {}

    void accept() {
        auto s = std::make_shared<tcp::socket>(io);
        acceptor.async_accept(*s, [this, s](chstate::error_code ec) {
            if (ec)
                return;
            sockets.push_back(s);
            serve(s, std::make_shared<std::string>());
            accept();
        });
    }

    void serve(std::shared_ptr<tcp::socket> s, std::shared_ptr<std::string> got) {
        auto buf = std::make_shared<std::array<char, 4096>>();
        s->async_read_some(asio::buffer(*buf), [this, s, got, buf](chstate::error_code ec, std::size_t n) {
            if (ec)
                return;
            got->append(buf->data(), n);
            const auto head_end = got->find("\r\n\r\n");
            if (head_end == std::string::npos)
                return serve(s, got);
            std::size_t length = 0;
            std::string lower = got->substr(0, head_end);
            for (auto& c : lower)
                c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            if (auto at = lower.find("\r\ncontent-length: "); at != std::string::npos)
                length = std::stoul(lower.substr(at + 18));
            if (got->size() < head_end + 4 + length)
                return serve(s, got);
            asio::async_write(*s, asio::buffer(reply), [this, s](chstate::error_code, std::size_t) {
                chstate::error_code ignored;
                s->shutdown(tcp::socket::shutdown_send, ignored);
                drain(s);
            });
        });
    }

    // Reads until the client closes, so closing never resets unread data.
    void drain(std::shared_ptr<tcp::socket> s) {
        auto buf = std::make_shared<std::array<char, 4096>>();
        s->async_read_some(asio::buffer(*buf), [this, s, buf](chstate::error_code ec, std::size_t) {
            if (!ec)
                drain(s);
        });
    }

    void close_connections() {
        for (auto& s : sockets) {
            chstate::error_code ignored;
            s->close(ignored);
        }
        sockets.clear();
    }
};

struct oracle {
    bool ok = false; // a complete reply
    unsigned status = 0;
    std::string body;
    /// The head announces a coding the transport never asks for: a
    /// Content-Encoding other than identity, or a Transfer-Encoding other
    /// than chunked (the transport must refuse it: protocol_error, no data).
    bool coded = false;
};

std::string lower(std::string_view v) {
    std::string out(v);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return out;
}

oracle read_whole(asio::io_context& io, std::string_view reply) {
    beast::test::stream ts(io, reply);
    ts.close_remote();
    beast::flat_buffer buffer;
    http::response_parser<http::dynamic_body> parser;
    parser.body_limit(boost::none);
    oracle o;
    beast::error_code ec;
    http::read(ts, buffer, parser, ec);
    if (ec)
        return o;
    o.ok = true;
    o.status = parser.get().result_int();
    o.body = beast::buffers_to_string(parser.get().body().data());
    for (const auto& f : parser.get()) {
        const std::string name = lower(std::string_view(f.name_string().data(), f.name_string().size()));
        const std::string value = lower(std::string_view(f.value().data(), f.value().size()));
        if ((name == "content-encoding" && !value.empty() && value != "identity") ||
            (name == "transfer-encoding" && value != "chunked"))
            o.coded = true;
    }
    return o;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1 || size > 12000) // bodies under the transport's 16 KiB tail: all of it is searched
        return 0;
    static asio::io_context io;
    static server srv(io);
    static bool started = [] {
        srv.accept();
        return true;
    }();
    (void)started;

    const unsigned kind = data[0] % 4;
    srv.reply.assign(reinterpret_cast<const char*>(data + 1), size - 1);

    chstate::statement stmt;
    if (kind == 0) {
        stmt = {"SELECT state_id FROM meltano.state", {}, "TabSeparated", {}, true};
    } else if (kind == 1) {
        stmt = {"SELECT state_id, partial_state, completed_state FROM meltano.state", {}, "RowBinary", {}, true};
    } else if (kind == 2) { // small: inlined as a quoted literal
        stmt = {"SELECT 1 WHERE state_id = {id:String}", {{"id", "String", std::string("dev:\t\n'x")}}, "TabSeparated",
                {}, true};
    } else { // past inline_parameter_limit: an external table
        stmt = {"SELECT 1 WHERE state_id = {id:String}",
                {{"id", "String", std::string(chstate::detail::inline_parameter_limit + 1, 'x')}}, "TabSeparated", {},
                true};
    }
    const bool searched = kind != 1;

    chstate::http_options options;
    options.host = "127.0.0.1";
    options.port = srv.acceptor.local_endpoint().port();
    options.password = std::string(password);
    options.request_timeout = std::chrono::seconds(5);
    options.connect_timeout = std::chrono::seconds(5);
    std::string got;
    chstate::diagnostics diag;
    chstate::error_code result;
    bool done = false;
    {
        chstate::http_transport transport(io.get_executor(), options);
        transport.async_execute(
            stmt,
            [&](std::string_view chunk) {
                got.append(chunk);
                return chstate::error_code{};
            },
            diag, [&](chstate::error_code ec) {
                result = ec;
                done = true;
            });
        io.restart();
        const auto start = std::chrono::steady_clock::now();
        while (!done && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
            io.run_one_for(std::chrono::milliseconds(50));
    }
    srv.close_connections();
    io.restart();
    io.poll(); // let the closed connections' handlers finish
    const std::string reply_text = srv.reply;
    FUZZ_CHECK(done, "the operation did not complete: " + fuzz::show(reply_text));
    if (reply_text.find(password) == std::string::npos) // (the server may echo anything it was sent)
        FUZZ_CHECK(diag.message.find(password) == std::string::npos, diag.message);

    const oracle o = read_whole(io, reply_text);
    const std::string where = "reply " + fuzz::show(reply_text) + " -> " + result.message() + " / " +
                              fuzz::show(diag.message) + " data " + fuzz::show(got);
    if (o.ok && o.coded) {
        FUZZ_CHECK(result == chstate::make_error_code(chstate::errc::protocol_error) && got.empty(), where);
    } else if (o.ok && o.status == 200) {
        const std::size_t at = searched ? chstate::detail::find_body_exception(o.body) : std::string::npos;
        if (at == std::string::npos) {
            FUZZ_CHECK(!result && got == o.body, where);
        } else {
            FUZZ_CHECK(result && got.empty(), where);
            const auto code = chstate::detail::exception_code(std::string_view(o.body).substr(at));
            FUZZ_CHECK(code ? result == chstate::make_clickhouse_error(*code)
                            : result == chstate::make_error_code(chstate::errc::truncated_response),
                       where);
        }
    } else {
        FUZZ_CHECK(result, where);
        if (o.ok)
            FUZZ_CHECK(got.empty(), where);
    }
    return 0;
}
