// chstate/detail/shown.hpp — a state id (or any user's text) as error
// messages quote it: bounded, so that a 10 MB id makes a message of a few
// hundred bytes, not a copy of itself; control characters as '?', so a
// message stays one line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace chstate::detail {

/// The most bytes of a user's text a message quotes.
inline constexpr std::size_t shown_bytes = 200;

/// How many leading bytes of `v` a message quotes: at most shown_bytes,
/// cut before a UTF-8 continuation byte (never inside a character).
inline std::size_t shown_length(std::string_view v) {
    std::size_t cut = v.size() <= shown_bytes ? v.size() : shown_bytes;
    while (cut < v.size() && cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xC0) == 0x80)
        --cut;
    return cut;
}

/// `v` for a message: its first shown_length(v) bytes, control characters
/// as '?', then "… (N bytes)" when it was longer.
inline std::string shown(std::string_view v) {
    const std::size_t cut = shown_length(v);
    std::string out(v.substr(0, cut));
    for (char& ch : out)
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F)
            ch = '?';
    if (cut < v.size())
        out += "… (" + std::to_string(v.size()) + " bytes)";
    return out;
}

} // namespace chstate::detail
