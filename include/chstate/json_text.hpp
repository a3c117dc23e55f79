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
#include <concepts>
#include <ostream>
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
    /// serialize_json refuses an integer with more digits: Python (3.11 and
    /// later) reads at most 4,300 by default (sys.int_info.default_max_str_digits),
    /// so Meltano could not read a state holding one. parse_json reads any.
    std::size_t max_integer_digits = 4300;
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
    if (!write_json(v, out, limits.max_depth, why, limits.max_integer_digits)) {
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

/// Comparisons with Boost.JSON objects, as before chstate had its own (both
/// sides convert implicitly, so without these `==` would be ambiguous):
/// the Boost side is converted, and compared as chstate compares.
inline bool operator==(const object& a, const boost::json::object& b) { return a == object(b); }
inline bool operator==(const boost::json::object& a, const object& b) { return object(a) == b; }

/// Writes the text serialize_json gives (Python's json.dumps); a value it
/// refuses is written as the reason, in angle brackets.
template <class Char, class Traits, class Json>
    requires std::same_as<Json, value> || std::same_as<Json, object> || std::same_as<Json, array>
std::basic_ostream<Char, Traits>& operator<<(std::basic_ostream<Char, Traits>& os, const Json& v) {
    std::string text;
    error_code ec;
    std::string why;
    if constexpr (std::same_as<Json, object>)
        serialize_json(v, text, ec, why);
    else
        serialize_json(value(v), text, ec, why);
    return os << (ec ? "<" + why + ">" : text);
}

} // namespace chstate
