// Fuzz target: RowBinary replies (detail/row_binary.hpp) and the state
// parts read from them (detail/rows.hpp parse_state_parts).
//
// Input: [columns] [n] [n chunk sizes] [stop] reply bytes…
//   columns: which reply (state parts, state row, ids, version floors);
//   chunk sizes: the reply is fed in chunks of these sizes (0 = one byte),
//   the rest in one chunk;
//   stop: on_row fails at that row (0xFF: never).
//
// Properties:
//   * the rows (every field's bytes, NULL flag and number), the error that
//     stopped feeding and finish()'s verdict are the same whether the
//     reply arrives at once or in any chunking;
//   * they equal an independent reader written here from the format
//     (LEB128 lengths, Nullable flag 0/1, UInt64 little-endian): a flag
//     other than 0/1 is a protocol error, a reply that ends inside a row
//     (or a length of more than ten LEB128 bytes, which never completes)
//     is truncated at finish;
//   * an on_row error stops the reader at that row, in every chunking;
//   * parse_state_parts never throws; a state it reads serialises (unless
//     an integer has over 4,300 digits) and reads back equal.
#include "fuzz_common.hpp"

#include <chstate/detail/row_binary.hpp>
#include <chstate/detail/rows.hpp>

#include <optional>

namespace {

using chstate::detail::rb_type;

struct field {
    bool null = false;
    std::string bytes;
    std::uint64_t number = 0;
    friend bool operator==(const field&, const field&) = default;
};
using row = std::vector<field>;

struct outcome {
    std::vector<row> rows;
    chstate::error_code feed_ec; // the error that stopped feeding
    chstate::error_code finish_ec;
    friend bool operator==(const outcome&, const outcome&) = default;
};

const chstate::error_code stop_code = chstate::make_error_code(chstate::errc::invalid_argument);

outcome run_reader(const std::vector<rb_type>& cols, std::string_view reply, const std::vector<std::size_t>& chunks,
                   std::size_t stop_at) {
    chstate::detail::row_binary_reader reader(cols);
    outcome out;
    auto on_row = [&](std::span<const chstate::detail::rb_field> fields) -> chstate::error_code {
        if (out.rows.size() == stop_at)
            return stop_code;
        row r;
        for (const auto& f : fields)
            r.push_back({f.null, std::string(f.bytes), f.number});
        out.rows.push_back(std::move(r));
        return {};
    };
    std::size_t pos = 0;
    for (std::size_t i = 0; pos < reply.size(); ++i) {
        const std::size_t n = i < chunks.size() ? std::min(chunks[i], reply.size() - pos) : reply.size() - pos;
        // Each chunk from its own buffer, as a transport hands them over.
        const std::string chunk(reply.substr(pos, n));
        pos += n;
        if ((out.feed_ec = reader.feed(chunk, on_row)))
            return out;
    }
    chstate::diagnostics diag;
    out.finish_ec = reader.finish(diag);
    if (out.finish_ec)
        FUZZ_CHECK(!diag.message.empty(), "finish without a message");
    return out;
}

/// The independent reader: the whole reply at once.
outcome reference(const std::vector<rb_type>& cols, std::string_view d, std::size_t stop_at) {
    outcome out;
    std::size_t pos = 0;
    while (pos < d.size()) {
        row r;
        std::size_t p = pos;
        bool complete = true;
        for (rb_type t : cols) {
            field f;
            if (t == rb_type::uint64) {
                if (d.size() - p < 8) {
                    complete = false;
                    break;
                }
                for (int b = 0; b < 8; ++b)
                    f.number |= std::uint64_t(static_cast<unsigned char>(d[p + b])) << (8 * b);
                p += 8;
                r.push_back(f);
                continue;
            }
            if (t == rb_type::nullable_string) {
                if (p == d.size()) {
                    complete = false;
                    break;
                }
                const auto flag = static_cast<unsigned char>(d[p++]);
                if (flag > 1) {
                    out.feed_ec = chstate::make_error_code(chstate::errc::protocol_error);
                    return out;
                }
                if (flag == 1) {
                    f.null = true;
                    r.push_back(f);
                    continue;
                }
            }
            // LEB128 length: at most ten bytes.
            std::uint64_t len = 0;
            bool have_len = false;
            for (int k = 0; k < 10 && p < d.size(); ++k) {
                const auto b = static_cast<unsigned char>(d[p++]);
                len |= std::uint64_t(b & 0x7f) << (7 * k);
                if (!(b & 0x80)) {
                    have_len = true;
                    break;
                }
            }
            if (!have_len || d.size() - p < len) {
                complete = false;
                break;
            }
            f.bytes = std::string(d.substr(p, len));
            p += len;
            r.push_back(f);
        }
        if (!complete) {
            out.finish_ec = chstate::make_error_code(chstate::errc::truncated_response);
            return out;
        }
        if (out.rows.size() == stop_at) {
            out.feed_ec = stop_code;
            return out;
        }
        out.rows.push_back(std::move(r));
        pos = p;
    }
    return out;
}

std::string describe(const outcome& o) {
    return std::to_string(o.rows.size()) + " rows, feed " + o.feed_ec.message() + ", finish " + o.finish_ec.message();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    if (input.size() < 3)
        return 0;
    static const std::vector<rb_type> sets[] = {chstate::detail::state_parts_columns(),
                                                chstate::detail::state_row_columns(),
                                                chstate::detail::state_id_columns(),
                                                chstate::detail::version_floor_columns()};
    const auto& cols = sets[static_cast<unsigned char>(input[0]) % 4];
    const std::size_t n = static_cast<unsigned char>(input[1]) % 16;
    input.remove_prefix(2);
    if (input.size() < n + 1)
        return 0;
    std::vector<std::size_t> chunks;
    for (std::size_t i = 0; i < n; ++i)
        chunks.push_back(std::max<std::size_t>(1, static_cast<unsigned char>(input[i])));
    const auto stop_byte = static_cast<unsigned char>(input[n]);
    const std::size_t stop_at = stop_byte == 0xff ? std::size_t(-1) : stop_byte;
    input.remove_prefix(n + 1);

    const outcome whole = run_reader(cols, input, {}, stop_at);
    const outcome split = run_reader(cols, input, chunks, stop_at);
    const outcome bytewise = run_reader(cols, input, std::vector<std::size_t>(input.size(), 1), stop_at);
    const outcome expected = reference(cols, input, stop_at);
    FUZZ_CHECK(whole == expected, "at once: " + describe(whole) + "; reference: " + describe(expected));
    FUZZ_CHECK(split == whole, "chunked: " + describe(split) + "; at once: " + describe(whole));
    FUZZ_CHECK(bytewise == whole, "byte by byte: " + describe(bytewise) + "; at once: " + describe(whole));

    // State parts, as the store reads them from a state row.
    if (cols.size() >= 2 && cols[cols.size() - 1] == rb_type::nullable_string) {
        for (const row& r : whole.rows) {
            const field& partial = r[r.size() - 2];
            const field& completed = r[r.size() - 1];
            chstate::detail::rb_field p{partial.null, partial.bytes, 0}, c{completed.null, completed.bytes, 0};
            chstate::state s;
            s.state_id = r.size() == 3 ? r[0].bytes : "id";
            chstate::diagnostics diag;
            chstate::error_code ec;
            try {
                ec = chstate::detail::parse_state_parts(p, c, s, diag);
            } catch (const std::exception& e) {
                FUZZ_CHECK(false, std::string("parse_state_parts threw: ") + e.what());
            }
            if (ec) {
                FUZZ_CHECK(ec == chstate::make_error_code(chstate::errc::corrupt_state) && !diag.message.empty(),
                           diag.message);
                continue;
            }
            chstate::detail::serialized_parts parts;
            if (chstate::detail::serialize_parts(s, parts, diag)) {
                FUZZ_CHECK(diag.message.find("digits") != std::string::npos, diag.message);
                continue;
            }
            chstate::state back;
            back.state_id = s.state_id;
            const std::string partial_text = parts.partial.value_or(""), completed_text = parts.completed.value_or("");
            chstate::detail::rb_field p2{!parts.partial, partial_text, 0};
            chstate::detail::rb_field c2{!parts.completed, completed_text, 0};
            FUZZ_CHECK(!chstate::detail::parse_state_parts(p2, c2, back, diag), diag.message);
            FUZZ_CHECK(back == s, "state parts changed on a round trip");
        }
    }
    return 0;
}
