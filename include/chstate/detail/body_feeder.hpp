// chstate/detail/body_feeder.hpp — how http_transport hands a reply body
// to Beast's parser, apart from the reading (sans I/O: the transport's
// coroutine and fuzz/http_reply's synchronous loop both drive it).
//
// It is what http::read_some does (put the buffered bytes; on need_more
// read and put them all again), with two differences:
//
//  * Boost.Beast before 1.86 asserts `n >= 5` in parse_chunk_header when,
//    after the last chunk's "0\r\n" has been seen, it is handed fewer than
//    five bytes (boostorg/beast#2861). A reply whose "0\r\n\r\n" arrives
//    split as "0\r\n" + "\r" + "\n" therefore aborts any program built
//    with assertions on (a slow link can do that; so can a hostile
//    server). Once the parser has asked for more while bytes are held,
//    the feeder waits until at least five are held: from the start of any
//    chunk header a valid reply still has at least five bytes to send
//    (the last chunk, "0\r\n\r\n"), so it never waits for bytes that are
//    not coming. A stream that ends while fewer are held ends mid-message.
//  * Bounded: only a chunk header or trailer in progress stays unparsed in
//    the body phase (Beast consumes body bytes as they come); more than
//    max_pending such bytes is http::error::buffer_overflow instead of a
//    buffer that grows for as long as the server writes.
#pragma once

#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>

#include <algorithm>
#include <cstddef>

namespace chstate::detail {

class body_feeder {
public:
    /// The most unparsed bytes a body may leave pending (a chunk header
    /// with its extensions, or the trailer).
    static constexpr std::size_t max_pending = 64 * 1024;
    /// How much to ask the stream for at a time.
    static constexpr std::size_t read_size = 64 * 1024;

    /// Read until the buffer holds at least this many bytes, then put().
    std::size_t wanted() const noexcept { return wanted_; }

    /// Parses what `buffer` holds and consumes what the parser took.
    /// need_more: read more (until wanted()) and call again; need_buffer:
    /// the body buffer is full; no error: progress (done when
    /// parser.is_done()); any other error: the reply is broken.
    template <bool isRequest>
    boost::beast::error_code put(boost::beast::http::basic_parser<isRequest>& parser,
                                 boost::beast::flat_buffer& buffer) {
        namespace http = boost::beast::http;
        boost::beast::error_code ec;
        buffer.consume(parser.put(buffer.data(), ec));
        if (ec != http::error::need_more) {
            wanted_ = 1;
            return ec;
        }
        const std::size_t held = buffer.size();
        if (held > max_pending)
            return http::error::buffer_overflow;
        wanted_ = held == 0 ? 1 : std::max<std::size_t>(held + 1, 5);
        return ec;
    }

    /// The stream ended (asio::error::eof) with `buffer` holding fewer than
    /// wanted() bytes: complete for a body that runs to the end of the
    /// stream, http::error::partial_message otherwise.
    template <bool isRequest>
    boost::beast::error_code eof(boost::beast::http::basic_parser<isRequest>& parser,
                                 const boost::beast::flat_buffer& buffer) {
        boost::beast::error_code ec;
        if (buffer.size() != 0) // held back after need_more: the message cannot complete
            return boost::beast::http::error::partial_message;
        parser.put_eof(ec);
        return ec;
    }

private:
    std::size_t wanted_ = 1;
};

} // namespace chstate::detail
