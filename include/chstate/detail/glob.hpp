// Meltano's state-id globs, matched in the library on the ids' bytes.
//
// Glob and id are both read as characters: a character is a well-formed
// UTF-8 sequence or, where the bytes are not one (ids are raw bytes: invalid
// UTF-8 and WTF-8 surrogates are kept), a single byte. `*` matches any run
// of characters, `?` exactly one character, and every other character only
// the same character (its bytes).
//
// Why not SQL LIKE: ClickHouse compiles LIKE into a UTF-8 regular
// expression, so `%` and `_` never match an invalid byte (state_ids("a*b")
// missed the id "a\xffb") and, on 18.16, a glob holding one is a server
// error (code 427, "cannot compile re2"). The store narrows on the server by
// the glob's literal prefix (startsWith, a byte comparison) and decides here.
//
// Cost: whoever writes the glob must not choose the cost of a listing.
// Matching reads each byte of the id a bounded number of times: O(|glob| +
// |id|) for a glob whose wildcards are `*`, plus one pass over the id for
// each `?` (state_ids refuses globs of more than glob_max_single_wildcards;
// a fixed-length pattern with single-character wildcards has no known
// linear-time search). The usual one-backtrack-point matcher compares the
// text after a `*` anew at every place the `*` may stop: |glob| x |id|.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

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

/// The most `?` a glob may hold in state_ids (each costs one pass over every
/// id the server returns; see the top of this file).
inline constexpr std::size_t glob_max_single_wildcards = 64;

/// How many `?` a glob holds.
inline std::size_t glob_single_wildcards(std::string_view glob) {
    return static_cast<std::size_t>(std::count(glob.begin(), glob.end(), '?'));
}

namespace glob_impl {

/// Whether byte offset x of s starts a character (or is s's end): no
/// well-formed sequence that starts in the three bytes before x covers it.
/// Only a lead byte starts such a sequence, and a lead byte is never inside
/// another, so this local look decides it.
inline bool boundary(std::string_view s, std::size_t x) {
    if (x >= s.size() || (static_cast<unsigned char>(s[x]) & 0xC0) != 0x80)
        return true; // the end, or not a continuation byte: nothing covers it
    for (std::size_t back = 1; back <= 3 && back <= x; ++back)
        if (glob_char_length(s, x - back) > back)
            return false;
    return true;
}

/// The start of the character that ends at x (0 < x <= s.size(), x a boundary).
inline std::size_t previous_boundary(std::string_view s, std::size_t x) {
    std::size_t back = 1;
    while (back < 4 && back < x && !boundary(s, x - back))
        ++back;
    return x - back;
}

/// The number of characters in s.
inline std::size_t characters(std::string_view s) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < s.size(); i += glob_char_length(s, i))
        ++n;
    return n;
}

/// A run of `?` and the literal text after it, up to the next wildcard.
struct part {
    std::size_t singles = 0;  ///< `?` before the literal
    std::string_view literal; ///< may be empty
};

/// A glob's text between two `*` (or an end): its parts, first `literal`
/// (maybe empty) then one per run of `?`.
inline std::vector<part> parts_of(std::string_view segment) {
    std::vector<part> parts(1);
    std::size_t i = 0;
    while (i < segment.size()) {
        if (segment[i] == '?') {
            part p;
            while (i < segment.size() && segment[i] == '?')
                ++p.singles, ++i;
            parts.push_back(p);
        } else {
            const std::size_t end = std::min(segment.find('?', i), segment.size());
            parts.back().literal = segment.substr(i, end - i);
            i = end;
        }
    }
    return parts;
}

/// Moves x over `count` characters of s; false when s ends first.
inline bool skip_characters(std::string_view s, std::size_t& x, std::size_t count) {
    for (; count > 0; --count) {
        if (x >= s.size())
            return false;
        x += glob_char_length(s, x);
    }
    return true;
}

/// Whether `literal` is the characters of id at the boundary x: the same
/// bytes, ending at a boundary (then the characters agree as well: the
/// literal holds no wildcard byte, so a sequence of its own is one of the
/// id's, and one cut short by its end shows as a mid-character end).
inline bool literal_at(std::string_view id, std::size_t x, std::string_view literal) {
    return x <= id.size() && literal.size() <= id.size() - x && id.compare(x, literal.size(), literal) == 0 &&
           boundary(id, x + literal.size());
}

/// Where a segment matching at the boundary x ends, or npos.
inline std::size_t match_here(std::string_view id, std::size_t x, const std::vector<part>& parts) {
    for (const part& p : parts) {
        if (!skip_characters(id, x, p.singles) || !literal_at(id, x, p.literal))
            return std::string_view::npos;
        x += p.literal.size();
    }
    return x;
}

/// Occurrences of a needle in a text from a given offset, in increasing
/// order, reading each byte of the text once in all (Knuth–Morris–Pratt).
class occurrences {
public:
    occurrences(std::string_view needle, std::string_view text, std::size_t from)
        : needle_(needle), text_(text), next_(from), failure_(needle.size(), 0) {
        for (std::size_t i = 1, k = 0; i < needle.size(); ++i) {
            while (k > 0 && needle[i] != needle[k])
                k = failure_[k - 1];
            if (needle[i] == needle[k])
                ++k;
            failure_[i] = k;
        }
    }

    /// The first occurrence starting at or after `at_least` (never less than
    /// an earlier call's), or npos. The needle is not empty.
    std::size_t first_from(std::size_t at_least) {
        while (found_ == none || found_ < at_least) {
            found_ = none;
            while (next_ < text_.size()) {
                const char c = text_[next_++];
                while (matched_ > 0 && c != needle_[matched_])
                    matched_ = failure_[matched_ - 1];
                if (c == needle_[matched_])
                    ++matched_;
                if (matched_ == needle_.size()) {
                    found_ = next_ - needle_.size();
                    matched_ = failure_[matched_ - 1];
                    break;
                }
            }
            if (found_ == none)
                return none;
        }
        return found_;
    }

private:
    static constexpr std::size_t none = std::string_view::npos;
    std::string_view needle_, text_;
    std::size_t next_, matched_ = 0, found_ = none;
    std::vector<std::size_t> failure_;
};

/// The leftmost boundary p >= from where the segment matches, and where that
/// match ends; {npos, npos} if none. Leftmost is enough: every segment is a
/// fixed number of characters, so an earlier match ends earlier and leaves
/// the next `*` every place a later one would.
inline std::pair<std::size_t, std::size_t> leftmost(std::string_view id, std::size_t from,
                                                    const std::vector<part>& parts) {
    constexpr std::size_t none = std::string_view::npos;
    // One reader per literal: candidates only move right, and so does the
    // place each literal must be found at, so each reads the id once.
    std::vector<occurrences> readers;
    readers.reserve(parts.size());
    for (const part& p : parts)
        readers.emplace_back(p.literal, id, from);
    const auto try_at = [&](std::size_t x) -> std::size_t {
        for (std::size_t i = 0; i < parts.size(); ++i) {
            const part& p = parts[i];
            if (!skip_characters(id, x, p.singles))
                return none;
            if (!p.literal.empty()) {
                if (readers[i].first_from(x) != x || !boundary(id, x + p.literal.size()))
                    return none;
                x += p.literal.size();
            }
        }
        return x;
    };
    std::size_t candidate = from;
    while (candidate <= id.size()) {
        if (!parts[0].literal.empty()) {
            candidate = readers[0].first_from(candidate);
            if (candidate == none)
                break;
            if (!boundary(id, candidate)) {
                ++candidate;
                continue;
            }
        }
        if (const std::size_t end = try_at(candidate); end != none)
            return {candidate, end};
        if (candidate == id.size())
            break;
        candidate += parts[0].literal.empty() ? glob_char_length(id, candidate) : 1;
    }
    return {none, none};
}

} // namespace glob_impl

/// Whether `id` matches `glob` (see the top of this file for the meaning
/// and the cost).
inline bool glob_match(std::string_view glob, std::string_view id) {
    using namespace glob_impl;
    if (glob_matches_all(glob))
        return true;
    constexpr std::size_t none = std::string_view::npos;
    const std::size_t first_star = glob.find('*');
    if (first_star == none)
        return match_here(id, 0, parts_of(glob)) == id.size();
    // The text before the first `*` starts at 0.
    std::size_t at = match_here(id, 0, parts_of(glob.substr(0, first_star)));
    if (at == none)
        return false;
    // Each segment between two `*` at its leftmost place after the last.
    std::size_t star = first_star;
    for (std::size_t next = glob.find('*', star + 1); next != none; star = next, next = glob.find('*', star + 1)) {
        if (next == star + 1)
            continue;
        const auto [start, end] = leftmost(id, at, parts_of(glob.substr(star + 1, next - star - 1)));
        if (start == none)
            return false;
        at = end;
    }
    // The text after the last `*` ends at the id's end: it is a fixed number
    // of characters, so it can start only that many characters before.
    const std::string_view last = glob.substr(star + 1);
    if (last.empty())
        return true;
    const std::vector<part> parts = parts_of(last);
    std::size_t length = 0;
    for (const part& p : parts)
        length += p.singles + characters(p.literal);
    std::size_t start = id.size();
    for (; length > 0 && start > at; --length)
        start = previous_boundary(id, start);
    return length == 0 && start >= at && match_here(id, start, parts) == id.size();
}

} // namespace chstate::detail
