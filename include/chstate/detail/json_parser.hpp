// chstate/detail/json_parser.hpp — JSON text to chstate::value, as Python reads it.
//
// The grammar and its edge cases are those of Python's json.loads with its
// defaults (strict=True), because Python wrote the text:
//   * whitespace is space, tab, CR and LF only;
//   * NaN, Infinity and -Infinity are literals;
//   * an integer lexeme (no fraction, no exponent) keeps every digit: int64,
//     else uint64, else a big integer ("-0" is 0); any other number is the
//     correctly rounded double (std::from_chars), ±inf when it overflows and
//     ±0.0 when it underflows, as Python's float() does;
//   * "\ud800"-style escapes of a surrogate that is not part of a pair are
//     kept, in WTF-8; a pair is combined. A high surrogate followed by an
//     escape that is not a low surrogate stays lone, and the escape after
//     it is read on its own (Python's scanner does the same);
//   * raw control characters (below 0x20) inside strings are errors, and
//     the text must be strict UTF-8 (Python decodes it first);
//   * a repeated key keeps its first position and takes the last value
//     (building a dict from the pairs).
// The parser keeps the containers being built on a heap stack; nesting is
// refused beyond max_depth before any memory is spent on it.
#pragma once

#include <chstate/detail/utf8.hpp>
#include <chstate/value.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail {

class json_parser {
public:
    json_parser(std::string_view text, std::size_t max_depth) noexcept : text_(text), max_depth_(max_depth) {}

    /// Parses the whole text into `result`. On failure returns false, and
    /// why() says what is wrong and at which byte offset.
    bool parse(value& result) {
        struct frame {
            value container; // the array or object being filled
            std::string key; // an object's key whose value is being read
        };
        std::vector<frame> stack;
        value v;
        for (;;) {
            // Read one value; a non-empty array or object opens a frame instead.
            skip_whitespace();
            if (pos_ == text_.size())
                return fail("expected a JSON value but the text ended", pos_);
            const char c = text_[pos_];
            if (c == '[' || c == '{') {
                if (stack.size() >= max_depth_)
                    return fail("nested deeper than " + std::to_string(max_depth_) + " levels", pos_);
                ++pos_;
                skip_whitespace();
                const bool is_object = c == '{';
                if (pos_ < text_.size() && text_[pos_] == (is_object ? '}' : ']')) {
                    ++pos_;
                    v = is_object ? value(object()) : value(array());
                } else {
                    stack.push_back({is_object ? value(object()) : value(array()), {}});
                    if (is_object && !read_key(stack.back().key))
                        return false;
                    continue;
                }
            } else if (!read_scalar(v)) {
                return false;
            }
            // `v` is complete: store it, closing every container that ends here.
            for (;;) {
                if (stack.empty()) {
                    skip_whitespace();
                    if (pos_ != text_.size())
                        return fail("extra data after the JSON value", pos_);
                    result = std::move(v);
                    return true;
                }
                frame& top = stack.back();
                const bool is_object = top.container.is_object();
                if (is_object)
                    top.container.get_object().insert_or_assign(std::move(top.key), std::move(v));
                else
                    top.container.get_array().push_back(std::move(v));
                skip_whitespace();
                if (pos_ == text_.size())
                    return fail(is_object ? "the text ended inside an object" : "the text ended inside an array",
                                pos_);
                if (text_[pos_] == ',') {
                    ++pos_;
                    if (is_object) {
                        skip_whitespace();
                        if (!read_key(top.key))
                            return false;
                    }
                    break; // read the next value
                }
                if (text_[pos_] != (is_object ? '}' : ']'))
                    return fail(is_object ? "expected ',' or '}'" : "expected ',' or ']'", pos_);
                ++pos_;
                v = std::move(top.container);
                stack.pop_back();
            }
        }
    }

    const std::string& why() const noexcept { return why_; }

private:
    bool fail(const std::string& what, std::size_t offset) {
        why_ = what + " at byte " + std::to_string(offset);
        return false;
    }

    void skip_whitespace() noexcept {
        while (pos_ < text_.size()) {
            const char c = text_[pos_];
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
                return;
            ++pos_;
        }
    }

    static bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

    /// A key, the whitespace after it, and the colon.
    bool read_key(std::string& key) {
        if (pos_ == text_.size() || text_[pos_] != '"')
            return fail("expected a string key", pos_);
        key.clear();
        if (!read_string(key))
            return false;
        skip_whitespace();
        if (pos_ == text_.size() || text_[pos_] != ':')
            return fail("expected ':'", pos_);
        ++pos_;
        return true;
    }

    bool read_literal(std::string_view word, value literal, value& v) {
        if (text_.substr(pos_, word.size()) != word)
            return fail("expected a JSON value", pos_);
        pos_ += word.size();
        v = std::move(literal);
        return true;
    }

    bool read_scalar(value& v) {
        constexpr double inf = std::numeric_limits<double>::infinity();
        switch (text_[pos_]) {
        case '"': {
            std::string s;
            if (!read_string(s))
                return false;
            v = value(std::move(s));
            return true;
        }
        case 't': return read_literal("true", value(true), v);
        case 'f': return read_literal("false", value(false), v);
        case 'n': return read_literal("null", value(), v);
        case 'N': return read_literal("NaN", value(std::numeric_limits<double>::quiet_NaN()), v);
        case 'I': return read_literal("Infinity", value(inf), v);
        case '-':
            if (pos_ + 1 < text_.size() && text_[pos_ + 1] == 'I')
                return read_literal("-Infinity", value(-inf), v);
            return read_number(v);
        default:
            if (is_digit(text_[pos_]))
                return read_number(v);
            if (char32_t cp = 0; static_cast<unsigned char>(text_[pos_]) >= 0x80 &&
                                 !utf8_sequence(text_, pos_, false, cp))
                return fail("invalid UTF-8", pos_);
            return fail("expected a JSON value", pos_);
        }
    }

    bool read_number(value& v) {
        const std::size_t start = pos_;
        const bool negative = text_[pos_] == '-';
        if (negative)
            ++pos_;
        if (pos_ == text_.size() || !is_digit(text_[pos_]))
            return fail("invalid number", start);
        if (text_[pos_] == '0')
            ++pos_;
        else
            while (pos_ < text_.size() && is_digit(text_[pos_]))
                ++pos_;
        bool integer = true;
        if (pos_ < text_.size() && text_[pos_] == '.') {
            if (pos_ + 1 == text_.size() || !is_digit(text_[pos_ + 1]))
                return fail("invalid number", start);
            integer = false;
            for (++pos_; pos_ < text_.size() && is_digit(text_[pos_]);)
                ++pos_;
        }
        if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
            std::size_t p = pos_ + 1;
            if (p < text_.size() && (text_[p] == '+' || text_[p] == '-'))
                ++p;
            if (p == text_.size() || !is_digit(text_[p]))
                return fail("invalid number", start);
            integer = false;
            for (pos_ = p; pos_ < text_.size() && is_digit(text_[pos_]);)
                ++pos_;
        }
        const std::string_view lexeme = text_.substr(start, pos_ - start);
        const char* first = lexeme.data();
        const char* last = first + lexeme.size();
        if (integer) {
            std::int64_t i = 0;
            if (std::from_chars(first, last, i).ec == std::errc()) {
                v = value(i);
                return true;
            }
            v = value(big_integer(lexeme)); // uint64 when it fits
            return true;
        }
        double d = 0;
        const auto r = std::from_chars(first, last, d);
        if (r.ec == std::errc::result_out_of_range) { // d is untouched
            d = overflows(lexeme) ? std::numeric_limits<double>::infinity() : 0.0;
            if (negative)
                d = -d;
        } else if (r.ec != std::errc() || r.ptr != last) {
            return fail("invalid number", start);
        }
        v = value(d);
        return true;
    }

    /// For a lexeme std::from_chars found out of range: true when its
    /// magnitude is too large (Python gives ±inf), false when too small (±0.0).
    /// Decided by the decimal position of the first significant digit, which
    /// is far from 0 either way (above 308 or below -323).
    static bool overflows(std::string_view lexeme) noexcept {
        std::size_t i = lexeme.front() == '-' ? 1 : 0;
        long long position = -1; // of the first nonzero digit: 10**position
        long long integer_digits = 0;
        for (; i < lexeme.size() && is_digit(lexeme[i]); ++i)
            ++integer_digits;
        if (lexeme[lexeme.front() == '-' ? 1 : 0] != '0') {
            position = integer_digits - 1;
        } else if (i < lexeme.size() && lexeme[i] == '.') {
            for (++i; i < lexeme.size() && lexeme[i] == '0'; ++i)
                --position;
        }
        while (i < lexeme.size() && lexeme[i] != 'e' && lexeme[i] != 'E')
            ++i;
        long long exponent = 0;
        if (i < lexeme.size()) {
            ++i;
            const bool minus = lexeme[i] == '-';
            if (lexeme[i] == '+' || lexeme[i] == '-')
                ++i;
            for (; i < lexeme.size(); ++i)
                if (exponent < 1'000'000'000'000LL)
                    exponent = exponent * 10 + (lexeme[i] - '0');
            if (minus)
                exponent = -exponent;
        }
        return position + exponent >= 0;
    }

    static bool hex4(std::string_view text, std::size_t at, unsigned& unit) noexcept {
        if (text.size() - at < 4)
            return false;
        unit = 0;
        for (std::size_t k = at; k < at + 4; ++k) {
            const char c = text[k];
            unit <<= 4;
            if (c >= '0' && c <= '9')
                unit |= unsigned(c - '0');
            else if (c >= 'a' && c <= 'f')
                unit |= unsigned(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                unit |= unsigned(c - 'A' + 10);
            else
                return false;
        }
        return true;
    }

    /// Reads the string whose opening quote is at pos_, appending to `out`.
    bool read_string(std::string& out) {
        const std::size_t start = pos_++;
        const std::size_t n = text_.size();
        for (;;) {
            const std::size_t run = pos_;
            while (pos_ < n) {
                const unsigned char c = static_cast<unsigned char>(text_[pos_]);
                if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80)
                    break;
                ++pos_;
            }
            out.append(text_.data() + run, pos_ - run);
            if (pos_ == n)
                return fail("unterminated string starting", start);
            const unsigned char c = static_cast<unsigned char>(text_[pos_]);
            if (c == '"') {
                ++pos_;
                return true;
            }
            if (c < 0x20)
                return fail("invalid control character in string", pos_);
            if (c >= 0x80) {
                char32_t cp = 0;
                const std::size_t len = utf8_sequence(text_, pos_, false, cp);
                if (len == 0)
                    return fail("invalid UTF-8", pos_);
                out.append(text_.data() + pos_, len);
                pos_ += len;
                continue;
            }
            if (pos_ + 1 == n)
                return fail("unterminated string starting", start);
            switch (text_[pos_ + 1]) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                unsigned unit = 0;
                if (!hex4(text_, pos_ + 2, unit))
                    return fail("invalid \\u escape", pos_);
                pos_ += 6;
                char32_t cp = unit;
                const bool escape_follows = n - pos_ >= 6 && text_[pos_] == '\\' && text_[pos_ + 1] == 'u';
                if (unit >= 0xD800 && unit <= 0xDBFF && escape_follows) {
                    unsigned low = 0;
                    if (!hex4(text_, pos_ + 2, low))
                        return fail("invalid \\u escape", pos_);
                    if (low >= 0xDC00 && low <= 0xDFFF) {
                        cp = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                        pos_ += 6;
                    }
                }
                append_utf8(out, cp);
                continue;
            }
            default: return fail("invalid escape", pos_);
            }
            pos_ += 2;
        }
    }

    std::string_view text_;
    std::size_t pos_ = 0;
    std::size_t max_depth_;
    std::string why_;
};

} // namespace chstate::detail
