// chstate/detail/utf8.hpp — UTF-8 and WTF-8 byte sequences.
//
// chstate strings are UTF-8, with one extension: a lone surrogate
// (U+D800..U+DFFF not part of a pair) is stored in WTF-8, i.e. with the
// generic three-byte encoding ED A0..BF 80..BF. Python's `json` module reads
// "\ud800" into a str holding that lone surrogate and writes it back as
// "\ud800"; WTF-8 is how the same round trip works through a std::string.
// Input text, on the other hand, must be strict UTF-8 (Python decodes the
// bytes it reads with the strict "utf-8" codec), so the surrogate encoding
// is accepted only when asked for.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace chstate::detail {

inline constexpr char lower_hex_digits[] = "0123456789abcdef";

/// The length (1–4) of the well-formed UTF-8 sequence starting at s[i], with
/// its code point in `cp`; 0 when the bytes there are not one (overlong
/// forms, code points above U+10FFFF, stray continuation bytes, truncation).
/// With `allow_surrogates`, WTF-8's encoding of U+D800..U+DFFF counts too.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i, bool allow_surrogates,
                                 char32_t& cp) noexcept {
    auto byte = [&](std::size_t k) -> unsigned { return static_cast<unsigned char>(s[k]); };
    const unsigned b0 = byte(i);
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF; // the allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        if (b0 == 0xE0)
            lo = 0xA0; // no overlong three-byte forms
        else if (b0 == 0xED && !allow_surrogates)
            hi = 0x9F; // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        if (b0 == 0xF0)
            lo = 0x90; // no overlong four-byte forms
        else if (b0 == 0xF4)
            hi = 0x8F; // nothing above U+10FFFF
    } else {
        return 0;
    }
    if (s.size() - i < len)
        return 0;
    const unsigned b1 = byte(i + 1);
    if (b1 < lo || b1 > hi)
        return 0;
    char32_t c = b0 & (0x7F >> len);
    c = (c << 6) | (b1 & 0x3F);
    for (std::size_t k = 2; k < len; ++k) {
        const unsigned b = byte(i + k);
        if ((b & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (b & 0x3F);
    }
    cp = c;
    return len;
}

/// True when the WTF-8 sequence at s[i] encodes a low surrogate (U+DC00..U+DFFF).
inline bool starts_low_surrogate(std::string_view s, std::size_t i) noexcept {
    return s.size() - i >= 3 && static_cast<unsigned char>(s[i]) == 0xED &&
           static_cast<unsigned char>(s[i + 1]) >= 0xB0 && static_cast<unsigned char>(s[i + 1]) <= 0xBF;
}

/// Appends code point `cp` (anything up to U+10FFFF, surrogates included:
/// they come out in WTF-8).
inline void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

/// Appends `\uXXXX` with lowercase hex digits, as Python writes it.
inline void append_u_escape(std::string& out, unsigned unit) {
    const char text[6] = {'\\', 'u', lower_hex_digits[(unit >> 12) & 0xF], lower_hex_digits[(unit >> 8) & 0xF],
                          lower_hex_digits[(unit >> 4) & 0xF], lower_hex_digits[unit & 0xF]};
    out.append(text, 6);
}

/// Appends `s` between double quotes for an error message: quotes,
/// backslashes and control characters escaped as in JSON, lone surrogates as
/// \udXXX, bytes that are not UTF-8 as \xNN, everything else as it is. Long
/// texts are cut after 200 bytes.
inline void append_quoted_for_message(std::string& out, std::string_view s) {
    constexpr std::size_t max_shown = 200;
    const bool cut = s.size() > max_shown;
    out += '"';
    for (std::size_t i = 0; i < s.size() && i < max_shown;) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        char32_t cp = 0;
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
            ++i;
        } else if (c < 0x20 || c == 0x7F) {
            append_u_escape(out, c);
            ++i;
        } else if (std::size_t n = utf8_sequence(s, i, true, cp); n == 0) {
            out += "\\x";
            out += lower_hex_digits[c >> 4];
            out += lower_hex_digits[c & 0xF];
            ++i;
        } else {
            if (cp >= 0xD800 && cp <= 0xDFFF)
                append_u_escape(out, static_cast<unsigned>(cp));
            else
                out.append(s.substr(i, n));
            i += n;
        }
    }
    out += cut ? "\"..." : "\"";
}

} // namespace chstate::detail
