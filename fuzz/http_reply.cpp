// Fuzz target: reading ClickHouse's HTTP replies (detail/http/reply.hpp,
// detail/server_error.hpp) and Beast's response parser configured as
// http_transport configures it.
//
// Input: one byte (read size for the stream, and an excerpt limit), then the
// bytes the server sends: status line, headers, a body (chunked or not).
//
// Properties:
//   * the reply read through a response_parser<buffer_body> with no body
//     limit, from a stream handing out a few bytes per read and into a
//     small body buffer (detail/http/exchange.ipp's loop through
//     detail::body_feeder: need_buffer is not an error), gives the same
//     status, headers, body and success as Beast's own http::read reading
//     it whole, and never trips an assertion in Beast (this file is built
//     with assertions on);
//   * keep_alive_timeout, exception_code and find_body_exception equal
//     independent readers written here; keep_alive_timeout is never
//     negative and at most a day (it overflowed for huge N: see
//     corpus/http_reply/keep_alive_huge and tests/unit.cpp);
//   * trim_message is a prefix without trailing blanks, within its limit;
//   * printable_excerpt never contains a control character, never begins
//     or ends with a space, and stays within its limit (plus "…");
//   * read_error_reply: a reply that is not ClickHouse's exception (no
//     X-ClickHouse-Exception-Code header, body not starting with "Code: N"
//     naming a DB::Exception or Coordination::Exception) has no code and a
//     message with no control character and of bounded size; one that is
//     has the header's code (else the body's) and ClickHouse's text.
// (The readers here learnt Coordination::Exception after the library did:
// corpus/http_reply/coordination_exception_line is the input that showed it.)
#include "fuzz_common.hpp"

#include <chstate/detail/body_feeder.hpp>
#include <chstate/detail/http/reply.hpp>
#include <chstate/detail/server_error.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/dynamic_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include <climits>
#include <optional>

namespace {

namespace http = boost::beast::http;
namespace beast = boost::beast;

std::optional<int> ref_exception_code(std::string_view t) {
    auto pos = t.find("Code: ");
    if (pos == std::string_view::npos)
        return std::nullopt;
    std::size_t i = pos + 6;
    bool negative = false;
    if (i < t.size() && t[i] == '-') {
        negative = true;
        ++i;
    }
    const std::size_t digits_start = i;
    long long n = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
        n = n * 10 + (t[i] - '0');
        if (n > static_cast<long long>(INT_MAX) + 1)
            return std::nullopt; // out of int's range
        ++i;
    }
    if (i == digits_start)
        return std::nullopt;
    if (negative)
        n = -n;
    if (n > INT_MAX || n < INT_MIN)
        return std::nullopt;
    if (i < t.size() && t[i] != '.' && t[i] != ',')
        return std::nullopt;
    return static_cast<int>(n);
}

/// ClickHouse's exception classes: DB::Exception, and ZooKeeper's
/// Coordination::Exception (code 999 on a replicated table).
bool ref_names_exception(std::string_view t) {
    return t.find("DB::Exception") != std::string_view::npos ||
           t.find("Coordination::Exception") != std::string_view::npos;
}

std::size_t ref_find_body_exception(std::string_view t) {
    if (auto m = t.find("__exception__"); m != std::string_view::npos)
        return m;
    std::size_t found = std::string_view::npos;
    for (std::size_t p = 0; p + 6 <= t.size(); ++p) {
        if (t.compare(p, 6, "Code: ") != 0 || (p > 0 && t[p - 1] != '\n'))
            continue;
        if (ref_exception_code(t.substr(p)) && ref_names_exception(t.substr(p)))
            found = p; // the last one
    }
    return found;
}

std::optional<long long> ref_keep_alive_seconds(std::string_view h) {
    auto pos = h.find("timeout=");
    if (pos == std::string_view::npos)
        return std::nullopt;
    std::size_t i = pos + 8;
    const bool negative = i < h.size() && h[i] == '-';
    if (negative)
        ++i;
    const std::size_t start = i;
    long long n = 0;
    bool overflow = false;
    while (i < h.size() && h[i] >= '0' && h[i] <= '9') {
        const int d = h[i] - '0';
        if (n > (LLONG_MAX - d) / 10)
            overflow = true;
        else
            n = n * 10 + d;
        ++i;
    }
    if (i == start || overflow || (negative && n != 0))
        return std::nullopt;
    return n;
}

void check_excerpt(std::string_view text, std::size_t limit) {
    const std::string e = chstate::detail::printable_excerpt(text, limit);
    const std::string where = fuzz::show(text) + " -> " + fuzz::show(e);
    FUZZ_CHECK(!fuzz::has_control_character(e), where);
    FUZZ_CHECK(e.empty() || (e.front() != ' ' && e.back() != ' '), where);
    FUZZ_CHECK(e.size() <= limit + std::string_view("…").size(), where);
}

void check_helpers(std::string_view text, std::size_t limit) {
    // exception_code
    FUZZ_CHECK(chstate::detail::exception_code(text) == ref_exception_code(text), fuzz::show(text));
    // find_body_exception
    const std::size_t at = chstate::detail::find_body_exception(text);
    FUZZ_CHECK(at == ref_find_body_exception(text),
               fuzz::show(text) + " at " + std::to_string(at) + " expected " + std::to_string(ref_find_body_exception(text)));
    // keep_alive_timeout
    const auto ka = chstate::detail::keep_alive_timeout(text);
    const auto ref = ref_keep_alive_seconds(text);
    if (ka)
        FUZZ_CHECK(ka->count() >= 0, fuzz::show(text));
    if (ref) // capped at a day
        FUZZ_CHECK(ka && ka->count() == std::min<long long>(*ref, 86400) * 1000, fuzz::show(text));
    if (!ref)
        FUZZ_CHECK(!ka, fuzz::show(text));
    // trim_message
    const std::string_view trimmed = chstate::detail::trim_message(text, limit);
    FUZZ_CHECK(text.substr(0, trimmed.size()) == trimmed && trimmed.size() <= limit, fuzz::show(text));
    if (trimmed.size() < limit && !trimmed.empty())
        FUZZ_CHECK(trimmed.back() != '\n' && trimmed.back() != '\r' && trimmed.back() != ' ', fuzz::show(text));
    // printable_excerpt
    check_excerpt(text, limit);
    check_excerpt(text, 300);
}

void check_error_reply(unsigned status, std::string_view reason, std::optional<std::string_view> code_header,
                       std::string_view body) {
    const auto r = chstate::detail::read_error_reply(status, reason, code_header, body);
    std::string_view start = body;
    while (!start.empty() && (start.front() == ' ' || start.front() == '\r' || start.front() == '\n'))
        start.remove_prefix(1);
    const bool clickhouse = code_header || (start.starts_with("Code: ") && ref_exception_code(start) &&
                                            ref_names_exception(start));
    const std::string where = "status " + std::to_string(status) + " body " + fuzz::show(body);
    if (!clickhouse) {
        FUZZ_CHECK(!r.code, where);
        FUZZ_CHECK(!fuzz::has_control_character(r.message), where + " message " + fuzz::show(r.message));
        FUZZ_CHECK(r.message.size() <= 100 + 300 + 120, where);
        FUZZ_CHECK(r.message.starts_with("HTTP status " + std::to_string(status)), where);
        return;
    }
    std::optional<int> header_code;
    if (code_header) {
        int n = 0;
        auto [p, ec] = std::from_chars(code_header->data(), code_header->data() + code_header->size(), n);
        if (ec == std::errc{} && p != code_header->data())
            header_code = n;
    }
    FUZZ_CHECK(r.code == (header_code ? header_code : ref_exception_code(body)), where);
    const std::string_view text = chstate::detail::trim_message(body);
    FUZZ_CHECK(r.message == (text.empty() ? "HTTP status " + std::to_string(status) : std::string(text)), where);
}

struct parsed {
    bool ok = false;
    std::string error;
    unsigned status = 0;
    std::string reason;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    bool keep_alive = false;
    friend bool operator==(const parsed&, const parsed&) = default;
};

template <class Message>
void take_head(const Message& m, parsed& p) {
    p.status = m.result_int();
    p.reason = std::string(m.reason());
    for (const auto& f : m)
        p.fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
    p.keep_alive = m.keep_alive();
}

/// detail::read_body_some (detail/http/exchange.ipp), synchronously.
template <class Parser>
beast::error_code read_body_some(beast::test::stream& ts, beast::flat_buffer& buffer, Parser& parser,
                                 chstate::detail::body_feeder& feeder) {
    for (;;) {
        while (buffer.size() < feeder.wanted()) {
            beast::error_code ec;
            const std::size_t n = ts.read_some(buffer.prepare(chstate::detail::body_feeder::read_size), ec);
            buffer.commit(n);
            if (ec == boost::asio::error::eof)
                return feeder.eof(parser, buffer);
            if (ec)
                return ec;
        }
        const beast::error_code ec = feeder.put(parser, buffer);
        if (ec != http::error::need_more)
            return ec;
    }
}

/// As detail::exchange (detail/http/exchange.ipp) reads: read_header, then read into a
/// buffer_body buffer until done through detail::body_feeder, need_buffer
/// not being an error. (Beast before 1.86 asserted here when the last
/// chunk's "0\r\n" and the next byte came in separate reads: see
/// body_feeder and corpus/http_reply/last_chunk_in_pieces.)
parsed read_streamed(boost::asio::io_context& ioc, std::string_view reply, std::size_t read_size,
                     std::size_t buffer_size) {
    beast::test::stream ts(ioc, reply);
    ts.read_size(read_size);
    ts.close_remote();
    beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    parsed p;
    beast::error_code ec;
    http::read_header(ts, buffer, parser, ec);
    if (ec) {
        p.error = "header: " + ec.message();
        return p;
    }
    take_head(parser.get(), p);
    std::vector<char> buf(buffer_size);
    chstate::detail::body_feeder feeder;
    while (!parser.is_done()) {
        parser.get().body().data = buf.data();
        parser.get().body().size = buf.size();
        ec = read_body_some(ts, buffer, parser, feeder);
        if (ec == http::error::need_buffer)
            ec = {};
        if (ec) {
            p.error = "body: " + ec.message();
            return p;
        }
        p.body.append(buf.data(), buf.size() - parser.get().body().size);
    }
    p.ok = true;
    return p;
}

parsed read_whole(boost::asio::io_context& ioc, std::string_view reply) {
    beast::test::stream ts(ioc, reply);
    ts.close_remote();
    beast::flat_buffer buffer;
    http::response_parser<http::dynamic_body> parser; // (string_body would reserve Content-Length bytes)
    parser.body_limit(boost::none);
    parsed p;
    beast::error_code ec;
    http::read_header(ts, buffer, parser, ec);
    if (ec) {
        p.error = "header: " + ec.message();
        return p;
    }
    take_head(parser.get(), p);
    http::read(ts, buffer, parser, ec);
    if (ec) {
        p.error = "body: " + ec.message();
        return p;
    }
    p.body = beast::buffers_to_string(parser.get().body().data());
    p.ok = true;
    return p;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1)
        return 0;
    const unsigned knob = data[0];
    const std::string_view reply(reinterpret_cast<const char*>(data + 1), size - 1);

    // The helpers on the raw bytes.
    check_helpers(reply, knob * 2);
    check_error_reply(400 + knob % 200, reply.substr(0, 40), std::nullopt, reply);
    if (reply.size() > 3)
        check_error_reply(500, "", reply.substr(0, 3), reply.substr(3));

    // The reply through Beast as http_transport reads it.
    static boost::asio::io_context ioc;
    const parsed streamed = read_streamed(ioc, reply, 1 + knob % 13, 1 + knob % 29);
    const parsed whole = read_whole(ioc, reply);
    FUZZ_CHECK(streamed.ok == whole.ok && streamed.status == whole.status && streamed.fields == whole.fields,
               "streamed: " + streamed.error + "; whole: " + whole.error);
    if (whole.ok)
        FUZZ_CHECK(streamed == whole, "bodies differ: " + fuzz::show(streamed.body) + " vs " + fuzz::show(whole.body));
    if (!whole.ok)
        return 0;

    // What exchange does with it.
    for (const auto& [name, value] : whole.fields)
        if (beast::iequals(name, "Keep-Alive"))
            if (auto t = chstate::detail::keep_alive_timeout(value))
                FUZZ_CHECK(t->count() >= 0, value);
    if (whole.status != 200) {
        std::optional<std::string_view> code_header;
        for (const auto& [name, value] : whole.fields)
            if (!code_header && beast::iequals(name, "X-ClickHouse-Exception-Code"))
                code_header = value;
        check_error_reply(whole.status, whole.reason, code_header, whole.body);
    } else {
        check_helpers(whole.body, knob * 2);
    }
    return 0;
}
