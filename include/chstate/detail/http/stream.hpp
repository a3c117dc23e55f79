// chstate/detail/http/stream.hpp — a connection's bytes, over TCP or TLS,
// as one stream type for Boost.Beast. The exchange (Beast's write and read
// operations and the coroutines of exchange.ipp) is then compiled once, not
// once per stream type: each read or write reaches the socket or the TLS
// stream through a type-erased completion handler, which keeps the
// caller's executor and cancellation slot.
#pragma once

#include <chstate/detail/http/pool.hpp>
#include <chstate/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>

#include <array>
#include <cstddef>
#include <utility>

namespace chstate::detail {

/// An AsyncReadStream and AsyncWriteStream over an http_connection: its TLS
/// stream when it has one, else its socket.
class connection_stream {
public:
    using executor_type = asio::any_io_executor;

    explicit connection_stream(http_connection& c) noexcept : c_(c) {}

    executor_type get_executor() noexcept { return c_.socket.get_executor(); }

    /// Reads into the first non-empty buffer of `buffers` (Beast passes one).
    template <class MutableBufferSequence, class ReadToken>
    auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
        asio::mutable_buffer first;
        for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it)
            if (asio::mutable_buffer b(*it); b.size() != 0) {
                first = b;
                break;
            }
        return asio::async_initiate<ReadToken, void(error_code, std::size_t)>(
            [this](auto handler, asio::mutable_buffer b) { read_some(b, io_handler(std::move(handler))); }, token,
            first);
    }

    /// Writes from up to max_buffers of `buffers` at once (a gathering
    /// write on TCP: Beast's head and body go out together, as before).
    template <class ConstBufferSequence, class WriteToken>
    auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
        gathered_buffers some;
        for (auto it = asio::buffer_sequence_begin(buffers);
             it != asio::buffer_sequence_end(buffers) && some.count < max_buffers; ++it)
            if (asio::const_buffer b(*it); b.size() != 0)
                some.buffers[some.count++] = b;
        return asio::async_initiate<WriteToken, void(error_code, std::size_t)>(
            [this](auto handler, const gathered_buffers& b) { write_some(b, io_handler(std::move(handler))); },
            token, some);
    }

private:
    using io_handler = asio::any_completion_handler<void(error_code, std::size_t)>;
    static constexpr std::size_t max_buffers = 16;

    /// A ConstBufferSequence of at most max_buffers buffers.
    struct gathered_buffers {
        std::array<asio::const_buffer, max_buffers> buffers{};
        std::size_t count = 0;
        const asio::const_buffer* begin() const noexcept { return buffers.data(); }
        const asio::const_buffer* end() const noexcept { return buffers.data() + count; }
    };

    void read_some(asio::mutable_buffer b, io_handler h) {
#ifndef CHSTATE_NO_TLS
        if (c_.tls)
            return c_.tls->async_read_some(b, std::move(h));
#endif
        c_.socket.async_read_some(b, std::move(h));
    }

    void write_some(const gathered_buffers& b, io_handler h) {
#ifndef CHSTATE_NO_TLS
        if (c_.tls)
            return c_.tls->async_write_some(b, std::move(h));
#endif
        c_.socket.async_write_some(b, std::move(h));
    }

    http_connection& c_;
};

} // namespace chstate::detail
