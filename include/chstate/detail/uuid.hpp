// chstate/detail/uuid.hpp — random (version 4) UUID text for lock ids, and
// random pauses.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <string>

namespace chstate::detail {

/// This thread's generator, seeded from std::random_device.
inline std::mt19937_64& random_engine() {
    thread_local std::mt19937_64 engine{[] {
        std::random_device rd;
        std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
        return std::mt19937_64(seq);
    }()};
    return engine;
}

/// A number in [0, n) (0 when n is 0).
inline unsigned random_below(unsigned n) {
    return n == 0 ? 0 : static_cast<unsigned>(random_engine()() % n);
}

inline std::string random_uuid() {
    auto& engine = random_engine();
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
