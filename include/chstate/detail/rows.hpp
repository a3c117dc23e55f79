// chstate/detail/rows.hpp — reading JSONEachRow replies.
//
// Replies are read in JSONEachRow: one JSON object per line. A row_reader
// takes the reply in chunks of any size and hands out complete rows, so a
// large result streams through with memory bounded by its longest row.
#pragma once

#include <chstate/detail/row_binary.hpp>
#include <chstate/detail/shown.hpp>
#include <chstate/error.hpp>
#include <chstate/state.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace chstate::detail {

/// A heap block as malloc hands it out for `n` bytes: an 8-byte header,
/// 16-byte steps, at least 32.
inline std::size_t heap_block(std::size_t n) {
    return std::max<std::size_t>(32, (n + 8 + 15) / 16 * 16);
}

/// What a parsed JSON value holds on the heap beyond its own slot: an
/// object's table and its keys, strings past Boost.JSON's short-string
/// buffer, arrays' element blocks — the bytes a reply's rows really cost,
/// several times their JSON text for small rows.
inline std::size_t json_held_bytes(const json::value& v);

inline std::size_t json_held_bytes(const json::object& o) {
    std::size_t held = heap_block(16 + o.capacity() * (sizeof(json::key_value_pair) + sizeof(std::uint32_t)));
    for (const auto& kv : o)
        held += heap_block(kv.key().size() + 1) + json_held_bytes(kv.value());
    return held;
}

inline std::size_t json_held_bytes(const json::value& v) {
    switch (v.kind()) {
    case json::kind::string: {
        const std::size_t n = v.get_string().size();
        return n <= 14 ? 0 : heap_block(n + 1 + 8);
    }
    case json::kind::array: {
        const auto& a = v.get_array();
        std::size_t held = heap_block(16 + a.capacity() * sizeof(json::value));
        for (const auto& e : a)
            held += json_held_bytes(e);
        return held;
    }
    case json::kind::object:
        return json_held_bytes(v.get_object());
    default:
        return 0;
    }
}

class row_reader {
public:
    /// A line longer than `max_row_bytes` fails with errc::reply_too_large
    /// as soon as it is seen.
    explicit row_reader(std::size_t max_row_bytes = std::numeric_limits<std::size_t>::max())
        : max_row_(max_row_bytes) {}

    /// Feeds a chunk; calls on_row(json::object&&) per complete line and
    /// stops at the first error it returns.
    template <class OnRow>
    error_code feed(std::string_view chunk, OnRow&& on_row, diagnostics& diag) {
        while (!chunk.empty()) {
            auto nl = chunk.find('\n');
            const std::size_t line_bytes = pending_.size() + (nl == std::string_view::npos ? chunk.size() : nl);
            if (line_bytes > max_row_) {
                pending_.clear();
                diag.message = "a reply row holds more than " + std::to_string(line_bytes) +
                               " bytes, over the limit of " + std::to_string(max_row_) +
                               " (store_options::limits.max_row_bytes)";
                return make_error_code(errc::reply_too_large);
            }
            if (nl == std::string_view::npos) {
                pending_.append(chunk);
                return {};
            }
            std::string_view line = chunk.substr(0, nl);
            chunk.remove_prefix(nl + 1);
            error_code ec;
            if (pending_.empty()) {
                ec = emit(line, on_row, diag);
            } else {
                pending_.append(line);
                std::string whole = std::move(pending_);
                pending_.clear();
                ec = emit(whole, on_row, diag);
            }
            if (ec)
                return ec;
        }
        return {};
    }

    /// Call once the reply has ended: a trailing line without '\n' is a row
    /// too.
    template <class OnRow>
    error_code finish(OnRow&& on_row, diagnostics& diag) {
        if (pending_.empty())
            return {};
        std::string whole = std::move(pending_);
        pending_.clear();
        return emit(whole, on_row, diag);
    }

private:
    template <class OnRow>
    static error_code emit(std::string_view line, OnRow& on_row, diagnostics& diag) {
        if (line.empty() || line == "\r")
            return {};
        error_code ec;
        json::value v = json::parse(line, ec);
        if (ec || !v.is_object()) {
            diag.message = "reply row is not a JSON object: " + std::string(line.substr(0, 200));
            return make_error_code(errc::protocol_error);
        }
        return on_row(std::move(v.get_object()));
    }

    std::size_t max_row_;
    std::string pending_;
};

/// A String / Nullable(String) column: nullopt for NULL or absent.
inline std::optional<std::string> string_field(const json::object& row, std::string_view key) {
    auto* v = row.if_contains(key);
    if (!v || !v->is_string())
        return std::nullopt;
    return std::string(v->get_string());
}

/// A UInt64 column: servers send it as a number or, quoted, as a string.
inline std::optional<std::uint64_t> uint_field(const json::object& row, std::string_view key) {
    auto* v = row.if_contains(key);
    if (!v)
        return std::nullopt;
    if (v->is_uint64())
        return v->get_uint64();
    if (v->is_int64() && v->get_int64() >= 0)
        return static_cast<std::uint64_t>(v->get_int64());
    if (v->is_string()) {
        std::string_view s = v->get_string();
        std::uint64_t n = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (ec == std::errc{} && p == s.data() + s.size())
            return n;
    }
    return std::nullopt;
}

/// A stored state part: NULL or empty text is {} (so is the text `null`);
/// otherwise a JSON object, read exactly (json_text.hpp).
inline error_code parse_part(std::string_view text, bool null, object& out, std::string_view state_id,
                             std::string_view column, diagnostics& diag) {
    out.clear();
    if (null || text.empty())
        return {};
    error_code ec;
    std::string why;
    value v = parse_json(text, ec, why);
    if (ec || !(v.is_object() || v.is_null())) {
        diag.message = "state \"" + shown(state_id) + "\": " + std::string(column) +
                       (ec ? " cannot be read: " + why
                           : " is not a JSON object (it is " + std::string(to_string(v.kind())) + ")");
        return make_error_code(errc::corrupt_state);
    }
    if (v.is_object())
        out = std::move(v.get_object());
    return {};
}

/// Both parts of a state row read in RowBinary.
inline error_code parse_state_parts(const rb_field& partial, const rb_field& completed, state& s, diagnostics& diag) {
    if (auto ec = parse_part(partial.bytes, partial.null, s.partial_state, s.state_id, "partial_state", diag))
        return ec;
    return parse_part(completed.bytes, completed.null, s.completed_state, s.state_id, "completed_state", diag);
}

/// A state part as stored: NULL when empty (as the seed writes it), else
/// the text Python's json.dumps would write. What could not be read back
/// (a string that is not UTF-8, nesting beyond json_limits) is refused
/// with errc::invalid_argument naming the id, the part and the place.
inline error_code serialize_part(const object& part, std::optional<std::string>& out, std::string_view state_id,
                                 std::string_view column, diagnostics& diag) {
    out.reset();
    if (part.empty())
        return {};
    error_code ec;
    std::string why;
    std::string text;
    serialize_json(part, text, ec, why);
    if (ec) {
        diag.message = "state \"" + shown(state_id) + "\": " + std::string(column) +
                       " cannot be stored: " + why;
        return make_error_code(errc::invalid_argument);
    }
    out = std::move(text);
    return {};
}

/// Both parts of `s`, serialised and so validated.
struct serialized_parts {
    std::optional<std::string> partial;
    std::optional<std::string> completed;
};
inline error_code serialize_parts(const state& s, serialized_parts& out, diagnostics& diag) {
    if (auto ec = serialize_part(s.partial_state, out.partial, s.state_id, "partial_state", diag))
        return ec;
    return serialize_part(s.completed_state, out.completed, s.state_id, "completed_state", diag);
}

} // namespace chstate::detail
