// chstate/detail/json_serializer.hpp — chstate::value to text, as Python writes it.
//
// The output is byte for byte what Python's json.dumps(obj) produces with
// its default arguments, so that text read from Meltano and written back is
// unchanged:
//   * separators ", " and ": ", no newlines;
//   * ensure_ascii: the output is ASCII. Quote, backslash, \n \r \t \b \f get
//     their short escapes; every other character below 0x20, DEL (0x7f) and
//     every non-ASCII character is \uXXXX with lowercase hex, characters
//     beyond the BMP as a surrogate pair, lone surrogates (WTF-8) as they
//     were read. "/" is not escaped;
//   * floats as Python's repr(float): the shortest digits that read back to
//     the same double, in fixed notation with at least one fractional digit
//     ("1.0", "0.0001", "1e+16" is where fixed notation stops) and otherwise
//     d.ddde±XX; NaN, Infinity and -Infinity (allow_nan=True);
//   * integers with all their digits.
// A string or key that is neither UTF-8 nor WTF-8 cannot be written (Python
// could not hold it in a str either); neither can nesting deeper than the
// limit the parser applies, since the text could not be read back.
#pragma once

#include <chstate/detail/utf8.hpp>
#include <chstate/value.hpp>

#include <charconv>
#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <string_view>
#include <system_error>
#include <vector>

namespace chstate::detail {

/// Appends Python's repr() of `d` (NaN, Infinity, -Infinity for the non-finite).
inline void append_python_float(std::string& out, double d) {
    if (std::isnan(d)) {
        out += "NaN";
        return;
    }
    if (std::isinf(d)) {
        out += d < 0 ? "-Infinity" : "Infinity";
        return;
    }
    // The shortest round-trip digits, as "[-]d[.ddd]e±XX".
    char buffer[48];
    const auto r = std::to_chars(buffer, buffer + sizeof buffer, d, std::chars_format::scientific);
    std::string_view text(buffer, static_cast<std::size_t>(r.ptr - buffer));
    if (text.front() == '-') {
        out += '-';
        text.remove_prefix(1);
    }
    const std::size_t e = text.find('e');
    char digits[24];
    std::size_t count = 0;
    for (char c : text.substr(0, e))
        if (c != '.')
            digits[count++] = c;
    int exponent = 0;
    std::string_view exp_text = text.substr(e + 1);
    const bool exp_negative = exp_text.front() == '-';
    std::from_chars(exp_text.data() + 1, exp_text.data() + exp_text.size(), exponent);
    if (exp_negative)
        exponent = -exponent;

    if (exponent >= 16 || exponent < -4) {
        out += digits[0];
        if (count > 1) {
            out += '.';
            out.append(digits + 1, count - 1);
        }
        out += exponent < 0 ? "e-" : "e+";
        const int magnitude = exponent < 0 ? -exponent : exponent;
        if (magnitude < 10)
            out += '0';
        out += std::to_string(magnitude);
    } else if (exponent >= 0) {
        const std::size_t integer_digits = static_cast<std::size_t>(exponent) + 1;
        for (std::size_t k = 0; k < integer_digits; ++k)
            out += k < count ? digits[k] : '0';
        out += '.';
        if (count > integer_digits)
            out.append(digits + integer_digits, count - integer_digits);
        else
            out += '0';
    } else {
        out += "0.";
        out.append(static_cast<std::size_t>(-exponent - 1), '0');
        out.append(digits, count);
    }
}

/// Appends `s` as a JSON string the way Python's ensure_ascii encoder does.
/// Returns false, with the offset of the first offending byte in `bad`, when
/// s is not UTF-8 (WTF-8's lone surrogates allowed; a surrogate pair encoded
/// as two halves is not: Python would read it back as one character).
inline bool append_python_string(std::string& out, std::string_view s, std::size_t& bad) {
    out += '"';
    std::size_t i = 0;
    while (i < s.size()) {
        const std::size_t run = i;
        while (i < s.size()) {
            const unsigned char c = static_cast<unsigned char>(s[i]);
            if (c < 0x20 || c >= 0x7F || c == '"' || c == '\\')
                break;
            ++i;
        }
        out.append(s.data() + run, i - run);
        if (i == s.size())
            break;
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default: append_u_escape(out, c); break;
            }
            ++i;
            continue;
        }
        char32_t cp = 0;
        const std::size_t len = utf8_sequence(s, i, true, cp);
        if (len == 0) {
            bad = i;
            return false;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF && starts_low_surrogate(s, i + len)) {
            bad = i + len;
            return false;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            append_u_escape(out, 0xD800 + static_cast<unsigned>(cp >> 10));
            append_u_escape(out, 0xDC00 + static_cast<unsigned>(cp & 0x3FF));
        } else {
            append_u_escape(out, static_cast<unsigned>(cp));
        }
        i += len;
    }
    out += '"';
    return true;
}

/// Appends the text of `v` to `out`, depth first with a heap stack. On
/// failure returns false with `why` naming the JSON path.
/// `Root` is value, or object (a state part, written without a copy).
template <class Root>
bool write_json(const Root& v, std::string& out, std::size_t max_depth, std::string& why,
                std::size_t max_integer_digits = static_cast<std::size_t>(-1)) {
    std::vector<walk_frame> frames; // the open arrays and objects
    std::size_t bad = 0;
    auto write_value = [&](const value& x) {
        char buffer[24];
        auto append_integer = [&](auto i) { out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, i).ptr); };
        switch (x.kind()) {
        case value_kind::null: out += "null"; break;
        case value_kind::boolean: out += x.get_bool() ? "true" : "false"; break;
        case value_kind::int64: append_integer(x.get_int64()); break;
        case value_kind::uint64: append_integer(x.get_uint64()); break;
        case value_kind::big_integer: {
            const std::string_view digits = x.big_integer_text();
            const std::size_t n = digits.size() - (digits.front() == '-' ? 1 : 0);
            if (n > max_integer_digits) {
                why = "the integer at " + format_path(frames) + " has " + std::to_string(n) +
                      " digits, more than the limit of " + std::to_string(max_integer_digits) +
                      " that Python's json reads";
                return false;
            }
            out += digits;
            break;
        }
        case value_kind::float64: append_python_float(out, x.get_double()); break;
        case value_kind::string:
            if (!append_python_string(out, x.get_string(), bad)) {
                why = "the string at " + format_path(frames) + " is not valid UTF-8 (byte " + std::to_string(bad) +
                      " of the string)";
                return false;
            }
            break;
        case value_kind::array:
        case value_kind::object: {
            if (frames.size() >= max_depth) {
                why = "nested deeper than the limit of " + std::to_string(max_depth) + " levels at " +
                      format_path(frames);
                return false;
            }
            const walk_frame f = walk_frame::of(x);
            if (f.size() == 0) {
                out += f.arr ? "[]" : "{}";
            } else {
                out += f.arr ? '[' : '{';
                frames.push_back(f);
            }
            break;
        }
        }
        return true;
    };
    if constexpr (std::is_same_v<Root, object>) {
        if (max_depth == 0) {
            why = "nested deeper than the limit of 0 levels at $";
            return false;
        }
        if (v.empty()) {
            out += "{}";
            return true;
        }
        out += '{';
        frames.push_back(walk_frame{nullptr, &v, 0});
    } else if (!write_value(v)) {
        return false;
    }
    while (!frames.empty()) {
        walk_frame& f = frames.back();
        if (f.next == f.size()) {
            out += f.arr ? ']' : '}';
            frames.pop_back();
            continue;
        }
        const std::size_t i = f.next++;
        if (i > 0)
            out += ", ";
        if (f.obj) {
            if (!append_python_string(out, f.key(i), bad)) {
                why = "the key at " + format_path(frames) + " is not valid UTF-8 (byte " + std::to_string(bad) +
                      " of the key)";
                return false;
            }
            out += ": ";
        }
        if (!write_value(f.child(i))) // may open a frame: f is not used after this
            return false;
    }
    return true;
}

} // namespace chstate::detail
