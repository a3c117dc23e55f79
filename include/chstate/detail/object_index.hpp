// chstate/detail/object_index.hpp — the hash index of a large chstate::object.
//
// An object keeps its entries in insertion order in one vector. Small
// objects (most state objects) are searched linearly: that is faster than
// hashing for a handful of keys and costs no memory. Above `threshold` keys
// the object keeps this index as well: an open-addressing table of positions
// into the entry vector, so lookups stay O(1) for an object of a million
// keys and parsing one stays linear. The table holds positions only, never
// pointers or string_views into the entries, so relocating the entry vector
// does not invalidate it; only erasing an entry (which shifts the positions
// behind it) requires a rebuild.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace chstate::detail {

class key_index {
public:
    /// Objects with more keys than this are indexed.
    static constexpr std::size_t threshold = 16;
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);

    bool active() const noexcept { return !slots_.empty(); }

    void clear() noexcept { std::vector<std::uint32_t>().swap(slots_); }

    /// The position in `entries` of `key`, or npos. Requires active().
    template <class Entries>
    std::size_t find(const Entries& entries, std::string_view key) const noexcept {
        const std::size_t mask = slots_.size() - 1;
        for (std::size_t slot = hash(key) & mask;; slot = (slot + 1) & mask) {
            const std::uint32_t pos = slots_[slot];
            if (pos == empty)
                return npos;
            if (entries[pos].first == key)
                return pos;
        }
    }

    /// Records entries.back(), whose key is not in the index yet; builds the
    /// table when there is none.
    template <class Entries>
    void add_last(const Entries& entries) {
        if (entries.size() >= empty)
            throw std::length_error("chstate::object: too many keys");
        if (entries.size() * 2 > slots_.size()) {
            rebuild(entries); // also covers the first build
            return;
        }
        place(hash(entries.back().first), entries.size() - 1);
    }

    /// Indexes every entry (keys are unique).
    template <class Entries>
    void rebuild(const Entries& entries) {
        if (entries.size() >= empty)
            throw std::length_error("chstate::object: too many keys");
        const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(64, entries.size() * 4));
        slots_.assign(capacity, empty);
        for (std::size_t i = 0; i < entries.size(); ++i)
            place(hash(entries[i].first), i);
    }

private:
    static constexpr std::uint32_t empty = static_cast<std::uint32_t>(-1);

    static std::size_t hash(std::string_view key) noexcept { return std::hash<std::string_view>{}(key); }

    void place(std::size_t h, std::size_t pos) noexcept {
        const std::size_t mask = slots_.size() - 1;
        std::size_t slot = h & mask;
        while (slots_[slot] != empty)
            slot = (slot + 1) & mask;
        slots_[slot] = static_cast<std::uint32_t>(pos);
    }

    std::vector<std::uint32_t> slots_; // empty, or a power of two at most half full
};

} // namespace chstate::detail
