// chstate/detail/row_binary.hpp — reading RowBinary replies.
//
// Replies that carry state ids or state text are read in RowBinary: each
// String is a LEB128 length and the exact bytes, each Nullable a flag byte
// first, each UInt64 eight bytes little-endian. Nothing is escaped or
// decoded, so every stored byte comes back as it is (ids that are not
// valid UTF-8 included), and a row that holds unreadable JSON is still a
// well-formed row: the store decides about it, not the reply reader.
//
// A row_binary_reader takes the reply in chunks of any size and hands out
// complete rows; memory is bounded by the longest row.
#pragma once

#include <chstate/error.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail {

/// The column types the store reads.
enum class rb_type { string, nullable_string, uint64 };

/// One field of a row. `bytes` points into the reader's buffer and is valid
/// only during the on_row call.
struct rb_field {
    bool null = false;
    std::string_view bytes;
    std::uint64_t number = 0;
};

// The replies the store reads in RowBinary (named, not braced at the call:
// GCC 12 rejects a braced list inside a co_await expression).
inline std::vector<rb_type> state_parts_columns() { return {rb_type::nullable_string, rb_type::nullable_string}; }
/// The parts and the row's version in milliseconds (select_state with the version).
inline std::vector<rb_type> state_parts_version_columns() {
    return {rb_type::nullable_string, rb_type::nullable_string, rb_type::uint64};
}
inline std::vector<rb_type> state_row_columns() {
    return {rb_type::string, rb_type::nullable_string, rb_type::nullable_string};
}
inline std::vector<rb_type> state_id_columns() { return {rb_type::string}; }
inline std::vector<rb_type> version_floor_columns() { return {rb_type::string, rb_type::uint64, rb_type::uint64}; }

class row_binary_reader {
public:
    /// Rows of `columns`; a row longer than `max_row_bytes` (a string's
    /// declared length, or the bytes of a row still incomplete) fails with
    /// errc::reply_too_large as soon as it is seen (problem() says why),
    /// having buffered no more than the limit and one chunk.
    explicit row_binary_reader(std::vector<rb_type> columns,
                               std::size_t max_row_bytes = std::numeric_limits<std::size_t>::max())
        : columns_(std::move(columns)), fields_(columns_.size()), max_row_(max_row_bytes) {}

    /// Why the last error was returned (empty for a malformed reply).
    const std::string& problem() const noexcept { return problem_; }

    /// Feeds a chunk; calls on_row(std::span<const rb_field>) per complete
    /// row and stops at the first error it returns.
    template <class OnRow>
    error_code feed(std::string_view chunk, OnRow&& on_row) {
        if (pending_.empty()) {
            // Rows wholly inside the chunk are read in place.
            std::size_t used = 0;
            if (auto ec = drain(chunk, used, on_row))
                return ec;
            pending_.assign(chunk.substr(used));
            return {};
        }
        pending_.append(chunk);
        std::size_t used = 0;
        auto ec = drain(pending_, used, on_row);
        pending_.erase(0, used);
        return ec;
    }

    /// Call once the reply has ended: leftover bytes are a truncated row.
    error_code finish(diagnostics& diag) const {
        if (pending_.empty())
            return {};
        diag.message = "reply ended inside a row (" + std::to_string(pending_.size()) + " bytes left over)";
        return make_error_code(errc::truncated_response);
    }

private:
    template <class OnRow>
    error_code drain(std::string_view data, std::size_t& used, OnRow& on_row) {
        for (;;) {
            std::size_t pos = used;
            if (!parse_row(data, pos)) {
                if (malformed_)
                    return make_error_code(errc::protocol_error);
                if (too_large_ || data.size() - used > max_row_)
                    return too_large(too_large_ ? declared_ : data.size() - used);
                return {};
            }
            used = pos;
            if (auto ec = on_row(std::span<const rb_field>(fields_)))
                return ec;
        }
    }

    /// Reads one row at `pos`; false when the data ends before the row does.
    bool parse_row(std::string_view data, std::size_t& pos) {
        if (pos >= data.size())
            return false;
        for (std::size_t i = 0; i < columns_.size(); ++i) {
            rb_field& f = fields_[i];
            f = {};
            switch (columns_[i]) {
            case rb_type::uint64:
                if (data.size() - pos < 8)
                    return false;
                for (int b = 7; b >= 0; --b)
                    f.number = (f.number << 8) | static_cast<unsigned char>(data[pos + b]);
                pos += 8;
                break;
            case rb_type::nullable_string:
                if (pos >= data.size())
                    return false;
                if (data[pos] != 0 && data[pos] != 1) {
                    malformed_ = true; // not a Nullable flag: not the reply we asked for
                    return false;
                }
                if (data[pos++] == 1) {
                    f.null = true;
                    break;
                }
                [[fallthrough]];
            case rb_type::string: {
                std::uint64_t len = 0;
                int shift = 0;
                for (;;) {
                    if (pos >= data.size() || shift > 63)
                        return false;
                    auto byte = static_cast<unsigned char>(data[pos++]);
                    len |= std::uint64_t(byte & 0x7f) << shift;
                    if (!(byte & 0x80))
                        break;
                    shift += 7;
                }
                if (len > max_row_) {
                    too_large_ = true; // known before its bytes arrive
                    declared_ = len;
                    return false;
                }
                if (data.size() - pos < len)
                    return false;
                f.bytes = data.substr(pos, len);
                pos += len;
                break;
            }
            }
        }
        return true;
    }

    error_code too_large(std::uint64_t bytes) {
        problem_ = "a reply row holds more than " + std::to_string(bytes) + " bytes, over the limit of " +
                   std::to_string(max_row_) + " (store_options::limits.max_row_bytes)";
        return make_error_code(errc::reply_too_large);
    }

    std::vector<rb_type> columns_;
    std::vector<rb_field> fields_;
    std::size_t max_row_;
    std::string pending_;
    std::string problem_;
    std::uint64_t declared_ = 0;
    bool malformed_ = false;
    bool too_large_ = false;
};

} // namespace chstate::detail
