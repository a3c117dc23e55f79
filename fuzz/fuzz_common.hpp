// fuzz/fuzz_common.hpp — shared by the libFuzzer targets (scripts/fuzz.sh).
//
// A property that fails prints what was expected and aborts, so libFuzzer
// writes the input as a crash reproducer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* what, const std::string& detail) {
    std::fprintf(stderr, "\nPROPERTY FAILED at %s:%d: %s\n", file, line, what);
    if (!detail.empty())
        std::fprintf(stderr, "  %s\n", detail.c_str());
    std::fflush(stderr);
    std::abort();
}

/// Bytes as a C-like literal, for failure messages.
inline std::string show(std::string_view s, std::size_t limit = 300) {
    std::string out = "\"";
    static constexpr char hex[] = "0123456789abcdef";
    for (std::size_t i = 0; i < s.size() && i < limit; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == '\\' || c == '"') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    if (s.size() > limit)
        out += "...(" + std::to_string(s.size()) + " bytes)";
    return out + "\"";
}

/// Splits `data` at every occurrence of `sep` (several bytes).
inline std::vector<std::string_view> split(std::string_view data, std::string_view sep) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    for (;;) {
        auto at = data.find(sep, start);
        if (at == std::string_view::npos) {
            out.push_back(data.substr(start));
            return out;
        }
        out.push_back(data.substr(start, at - start));
        start = at + sep.size();
    }
}

/// Splits `data` at every byte `sep`.
inline std::vector<std::string_view> split(std::string_view data, char sep) {
    return split(data, std::string_view(&sep, 1));
}

inline bool has_control_character(std::string_view v) {
    for (char ch : v) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c == 0x7f)
            return true;
    }
    return false;
}

} // namespace fuzz

#define FUZZ_CHECK(cond, detail)                                                                                     \
    do {                                                                                                             \
        if (!(cond))                                                                                                 \
            ::fuzz::fail(__FILE__, __LINE__, #cond, (detail));                                                       \
    } while (0)
