// What the HTTP transport and the store add over the wire itself. The floor
// is the same SELECT sent raw over ONE kept-alive connection with a minimal
// synchronous Beast client, measured in the same run against the same server.
// Prints medians and ratios; the machines are shared and noisy.
//
//   http_overhead DIR [iterations]
// DIR is a server folder made by `scripts/clickhouse-server.sh start DIR`.
#include "test_server.hpp"
#include "timing.hpp"

#include <chstate/chstate.hpp>
#include <chstate/detail/statements.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace chstate;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: http_overhead SERVER_DIR [iterations]\n");
        return 2;
    }
    const int n = argc > 2 ? std::atoi(argv[2]) : 500;
    http_options o = bench::test_server_options(argv[1]);
    o.pool_size = 1;

    asio::thread_pool threads(1);
    http_transport transport(threads.get_executor(), o);
    store_options so;
    so.schema = "bench_http";
    http_state_store store(transport, so);
    store.ensure_schema();
    state s{"dev:bench", json::object{{"bookmarks", json::object{{"t", 1}}}}, json::object{{"done", true}}};
    store.set(s);

    // The store's SELECT for this server, with literals inlined as it sends them.
    std::string version;
    {
        diagnostics d;
        statement v{"SELECT version()", {}, "TabSeparated", {}, true};
        transport.async_execute(v, [&](std::string_view c) { version.append(c); return error_code{}; }, d,
                                asio::use_future).get();
    }
    auto features = detail::server_features::from_version(version);
    detail::statements st(detail::table_names("bench_http", "state"), features);
    statement select = st.select_state("dev:bench");
    diagnostics d;
    if (!features.query_parameters)
        detail::inline_parameters(select, d);

    // The floor: one socket, kept alive, synchronous Beast.
    asio::io_context ioc;
    asio::ip::tcp::socket sock(ioc);
    asio::connect(sock, asio::ip::tcp::resolver(ioc).resolve(o.host, std::to_string(o.port)));
    beast::flat_buffer buf;
    auto raw = [&] {
        http::request<http::string_body> req{http::verb::post, "/?default_format=JSONEachRow", 11};
        req.set(http::field::host, o.host);
        req.set("X-ClickHouse-User", o.user);
        req.set("X-ClickHouse-Key", o.password);
        req.keep_alive(true);
        req.body() = select.sql;
        req.prepare_payload();
        http::write(sock, req);
        http::response<http::string_body> res;
        http::read(sock, buf, res);
        if (res.result() != http::status::ok || res.body().empty())
            throw std::runtime_error("raw request failed");
    };
    auto via_transport = [&] {
        diagnostics dd;
        transport.async_execute(select, [](std::string_view) { return error_code{}; }, dd, asio::use_future).get();
    };
    auto via_store = [&] {
        if (!store.get("dev:bench"))
            throw std::runtime_error("no state");
    };
    for (int i = 0; i < 30; ++i) {
        raw();
        via_transport();
        via_store();
    }
    std::vector<double> r, t, g;
    for (int round = 0; round < 5; ++round) { // interleaved rounds: noise hits all three alike
        bench::append(r, bench::sample(n / 5, [&](int) { raw(); }));
        bench::append(t, bench::sample(n / 5, [&](int) { via_transport(); }));
        bench::append(g, bench::sample(n / 5, [&](int) { via_store(); }));
    }
    double fr = bench::median(r), ft = bench::median(t), fg = bench::median(g);
    std::printf("http_overhead: ClickHouse %s over HTTP, %d iterations each\n", version.substr(0, version.find('\n')).c_str(), n);
    std::printf("raw one kept-alive connection median %7.1f us (floor)\n", fr);
    std::printf("http_transport                median %7.1f us | ratio %.2f\n", ft, ft / fr);
    std::printf("store.get (blocking)          median %7.1f us | ratio %.2f\n", fg, fg / fr);
    std::printf("connections opened by the transport: %zu\n", transport.connections_opened());
}
