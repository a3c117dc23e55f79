// chstate/json_text.hpp — reading and writing JSON text exactly as Python does.
//
// Meltano stores state as the text Python's json.dumps writes, and reads it
// with json.loads. parse_json reads that text into a chstate::value without
// losing anything (every integer digit, every double bit, NaN and Infinity,
// lone surrogates, key order), and serialize_json writes a value back as
// json.dumps(obj) would with its default arguments, so that
//     serialize_json(parse_json(text)) == text
// for every text json.dumps produces. The details of each direction are in
// detail/json_parser.hpp and detail/json_serializer.hpp.
//
// Neither direction recurses: nesting depth costs heap memory, bounded by
// json_limits::max_depth.
#pragma once

#include <chstate/detail/json_parser.hpp>
#include <chstate/detail/json_serializer.hpp>
#include <chstate/error.hpp>
#include <chstate/value.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace chstate {

/// Limits that apply to parsing and serialising alike.
struct json_limits {
    /// The deepest nesting of arrays and objects accepted: `[]` is depth 1,
    /// `[[]]` depth 2, a scalar depth 0. parse_json refuses deeper text, and
    /// serialize_json refuses to write a deeper value, because a store that
    /// wrote it could not read it back with the same limits. (Python's own
    /// json module gives up near its recursion limit, about 1,000 levels.)
    std::size_t max_depth = 100000;
};

/// Parses `text` (UTF-8) as Python's json.loads would. On failure returns
/// null, sets ec to errc::invalid_argument and `why` to what is wrong and the
/// byte offset, e.g. "invalid UTF-8 at byte 7" or "nested deeper than 100000
/// levels at byte 123".
inline value parse_json(std::string_view text, error_code& ec, std::string& why, json_limits limits = {}) {
    ec = {};
    why.clear();
    detail::json_parser parser(text, limits.max_depth);
    value v;
    if (!parser.parse(v)) {
        ec = make_error_code(errc::invalid_argument);
        why = parser.why();
        return value();
    }
    return v;
}

/// Throwing form: chstate::error with errc::invalid_argument and `why` in the message.
inline value parse_json(std::string_view text, json_limits limits = {}) {
    error_code ec;
    std::string why;
    value v = parse_json(text, ec, why, limits);
    if (ec)
        throw error(ec, "invalid JSON: " + why);
    return v;
}

namespace detail {
template <class Root>
void serialize_root(const Root& v, std::string& out, error_code& ec, std::string& why, json_limits limits) {
    ec = {};
    why.clear();
    out.clear();
    if (!write_json(v, out, limits.max_depth, why)) {
        out.clear();
        ec = make_error_code(errc::invalid_argument);
    }
}
} // namespace detail

/// Writes `v` into `out` (replacing its contents) as Python's json.dumps(v)
/// would. On failure `out` is empty, ec is errc::invalid_argument and `why`
/// names the JSON path, e.g. `the string at $["a"][3] is not valid UTF-8
/// (byte 5 of the string)`, or the depth limit.
inline void serialize_json(const value& v, std::string& out, error_code& ec, std::string& why,
                           json_limits limits = {}) {
    detail::serialize_root(v, out, ec, why, limits);
}

/// The same for an object (a state part), without copying it into a value.
inline void serialize_json(const object& o, std::string& out, error_code& ec, std::string& why,
                           json_limits limits = {}) {
    detail::serialize_root(o, out, ec, why, limits);
}

/// Throwing form: chstate::error with errc::invalid_argument.
inline std::string serialize_json(const value& v, json_limits limits = {}) {
    std::string out;
    error_code ec;
    std::string why;
    serialize_json(v, out, ec, why, limits);
    if (ec)
        throw error(ec, "cannot write JSON: " + why);
    return out;
}

} // namespace chstate
