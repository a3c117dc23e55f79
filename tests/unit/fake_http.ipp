// Loopback fakes and runners the HTTP files below share (a one-connection server, run_http).
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

// ---- http request -------------------------------------------------------------------------

namespace {
/// A one-connection HTTP server on a loopback address: keeps the request it
/// receives (head and Content-Length body), answers with `reply`, closes.
class fake_http_server {
public:
    /// False when the address cannot be bound (no IPv6 loopback, say).
    bool start(const asio::ip::address& address, std::string reply) {
        reply_ = std::move(reply);
        asio::ip::tcp::endpoint ep(address, 0);
        error_code ec;
        acceptor_.open(ep.protocol(), ec);
        if (!ec)
            acceptor_.bind(ep, ec);
        if (!ec)
            acceptor_.listen(8, ec);
        if (ec)
            return false;
        port_ = acceptor_.local_endpoint().port();
        acceptor_.async_accept(socket_, [this](error_code aec) {
            if (aec)
                return;
            ++accepted_;
            read_more();
        });
        thread_ = std::thread([this] { io_.run(); });
        return true;
    }
    std::uint16_t port() const { return port_; }
    /// Stops the server; afterwards received() and accepted() are final.
    void stop() {
        asio::post(io_, [this] {
            error_code ignored;
            acceptor_.close(ignored);
            socket_.close(ignored);
        });
        if (thread_.joinable())
            thread_.join();
    }
    const std::string& received() const { return received_; }
    int accepted() const { return accepted_; }
    ~fake_http_server() { stop(); }

private:
    void read_more() {
        socket_.async_read_some(asio::buffer(buf_), [this](error_code ec, std::size_t n) {
            if (ec)
                return;
            received_.append(buf_.data(), n);
            auto head_end = received_.find("\r\n\r\n");
            if (head_end == std::string::npos)
                return read_more();
            std::size_t length = 0;
            std::string lower = received_.substr(0, head_end);
            std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
            if (auto at = lower.find("\r\ncontent-length: "); at != std::string::npos)
                length = std::stoul(lower.substr(at + 18));
            if (received_.size() < head_end + 4 + length)
                return read_more();
            asio::async_write(socket_, asio::buffer(reply_), [this](error_code, std::size_t) {
                error_code ignored;
                socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
                socket_.close(ignored);
            });
        });
    }

    asio::io_context io_;
    asio::ip::tcp::acceptor acceptor_{io_};
    asio::ip::tcp::socket socket_{io_};
    std::array<char, 4096> buf_{};
    std::string reply_, received_;
    int accepted_ = 0;
    std::uint16_t port_ = 0;
    std::thread thread_;
};

struct http_outcome {
    error_code ec;
    std::string message, data;
};

/// Runs `stmt` on `t`, driving `io` (restarted first) for at most 20 s.
http_outcome run_on(http_transport& t, asio::io_context& io, const statement& stmt) {
    http_outcome out;
    diagnostics d;
    bool done = false;
    t.async_execute(
        stmt,
        [&](std::string_view chunk) {
            out.data.append(chunk);
            return error_code{};
        },
        d, [&](error_code ec) {
            out.ec = ec;
            done = true;
        });
    io.restart();
    io.run_for(std::chrono::seconds(20));
    CHECK(done);
    out.message = d.message;
    return out;
}

/// Runs one statement on an http_transport with `options`.
http_outcome run_http(http_options options) {
    asio::io_context io;
    http_transport t(io.get_executor(), std::move(options));
    return run_on(t, io, statement{"SELECT 1", {}, "TabSeparated", {}, true});
}

std::string http_reply(std::string status, std::string body, std::string extra_headers = {}) {
    return "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n" + extra_headers + "\r\n" + body;
}

const auto loopback = asio::ip::make_address("127.0.0.1");
}
