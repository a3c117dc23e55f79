// Compile-cost probe (scripts/compile-cost.sh): the floor for http_store.cpp
// — a hand-written synchronous Boost.Beast client that POSTs the same two
// statements the store sends for set and get (the seed's INSERT … VALUES,
// then the SELECT … FINAL, values inlined as quoted literals) to
// ClickHouse's HTTP port on one kept-alive connection, and prints the
// reply. No chstate. Compiled, never run by the script.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <iostream>
#include <string>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

static std::string post(beast::tcp_stream& stream, beast::flat_buffer& buffer, const std::string& target,
                        const std::string& sql) {
    http::request<http::string_body> req{http::verb::post, target, 11};
    req.set(http::field::host, "localhost:8123");
    req.set("X-ClickHouse-User", "default");
    req.set("X-ClickHouse-Key", "");
    req.keep_alive(true);
    req.body() = sql;
    req.prepare_payload();
    http::write(stream, req);
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    if (res.result() != http::status::ok)
        throw std::runtime_error("HTTP " + std::to_string(res.result_int()) + ": " + res.body());
    return res.body();
}

int main() {
    asio::io_context ioc;
    asio::ip::tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    stream.connect(resolver.resolve("localhost", "8123"));
    beast::flat_buffer buffer;
    post(stream, buffer, "/?database=default",
         "INSERT INTO `meltano`.`state` (state_id, partial_state, completed_state) VALUES "
         "('compile-cost:job', '{\"bookmarks\": {\"users\": 42}}', NULL)");
    std::cout << post(stream, buffer, "/?database=default&default_format=RowBinary&wait_end_of_query=1",
                      "SELECT partial_state, completed_state FROM `meltano`.`state` FINAL "
                      "WHERE state_id = 'compile-cost:job' LIMIT 1")
              << "\n";
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
}
