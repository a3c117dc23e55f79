// chstate/detail/uuid.hpp — random (version 4) UUID text for lock ids.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <string>

namespace chstate::detail {

inline std::string random_uuid() {
    thread_local std::mt19937_64 engine{[] {
        std::random_device rd;
        std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
        return std::mt19937_64(seq);
    }()};
    std::array<std::uint8_t, 16> b{};
    for (std::size_t i = 0; i < 16; i += 8) {
        std::uint64_t r = engine();
        for (std::size_t j = 0; j < 8; ++j)
            b[i + j] = static_cast<std::uint8_t>(r >> (8 * j));
    }
    b[6] = static_cast<std::uint8_t>((b[6] & 0x0f) | 0x40); // version 4
    b[8] = static_cast<std::uint8_t>((b[8] & 0x3f) | 0x80); // RFC 4122 variant
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(36);
    for (std::size_t i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out += '-';
        out += hex[b[i] >> 4];
        out += hex[b[i] & 0x0f];
    }
    return out;
}

} // namespace chstate::detail
