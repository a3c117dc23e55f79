// Meltano's state-id globs, matched in the library on the ids' bytes.
//
// `*` matches any run of characters, `?` exactly one character, every
// other byte only itself. A character is a well-formed UTF-8 sequence or,
// where the bytes are not one (ids are raw bytes: invalid UTF-8 and WTF-8
// surrogates are kept), a single byte.
//
// Why not SQL LIKE: ClickHouse compiles LIKE into a UTF-8 regular
// expression, so `%` and `_` never match an invalid byte (state_ids("a*b")
// missed the id "a\xffb") and, on 18.16, a glob holding one is a server
// error (code 427, "cannot compile re2"). The store narrows on the server by
// the glob's literal prefix (startsWith, a byte comparison) and decides here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace chstate::detail {

/// True when a glob matches everything (no pattern, or `*`).
inline bool glob_matches_all(std::string_view glob) {
    return glob.empty() || glob == "*";
}

/// True when the glob holds a wildcard (else it matches one id: itself).
inline bool glob_has_wildcard(std::string_view glob) {
    return glob.find_first_of("*?") != std::string_view::npos;
}

/// The bytes every match starts with: the glob up to its first wildcard.
inline std::string_view glob_literal_prefix(std::string_view glob) {
    return glob.substr(0, std::min(glob.find_first_of("*?"), glob.size()));
}

/// The length of the character starting at s[i] (i < s.size()): a
/// well-formed UTF-8 sequence (no overlong form, no surrogate, at most
/// U+10FFFF), or else 1.
inline std::size_t glob_char_length(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const auto continuation = [&](std::size_t k) { return i + k < s.size() && (byte(k) & 0xC0) == 0x80; };
    const unsigned char b = byte(0);
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        return continuation(1) ? 2 : 1;
    if (b >= 0xE0 && b <= 0xEF) {
        if (!continuation(1) || !continuation(2))
            return 1;
        if ((b == 0xE0 && byte(1) < 0xA0) || (b == 0xED && byte(1) >= 0xA0))
            return 1; // overlong, or a surrogate
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (!continuation(1) || !continuation(2) || !continuation(3))
            return 1;
        if ((b == 0xF0 && byte(1) < 0x90) || (b == 0xF4 && byte(1) >= 0x90))
            return 1; // overlong, or above U+10FFFF
        return 4;
    }
    return 1;
}

/// Whether `id` matches `glob` (see the top of this file). Linear in the
/// id for each `*` retried: the usual one-backtrack-point algorithm, which
/// is exact here because a `*` resumed later can stop at every place an
/// earlier one could (character walks from any byte meet at the next
/// character start).
inline bool glob_match(std::string_view glob, std::string_view id) {
    if (glob_matches_all(glob))
        return true;
    constexpr std::size_t none = std::string_view::npos;
    std::size_t g = 0, s = 0, star = none, resume = 0;
    while (s < id.size()) {
        if (g < glob.size() && glob[g] == '*') {
            star = g++;
            resume = s;
        } else if (g < glob.size() && glob[g] == '?') {
            ++g;
            s += glob_char_length(id, s);
        } else if (g < glob.size() && glob[g] == id[s]) {
            ++g;
            ++s;
        } else if (star != none) {
            resume += glob_char_length(id, resume);
            s = resume;
            g = star + 1;
        } else {
            return false;
        }
    }
    while (g < glob.size() && glob[g] == '*')
        ++g;
    return g == glob.size();
}

} // namespace chstate::detail
