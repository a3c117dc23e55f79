// chstate/detail/versions.hpp — what a write's version (the state table's
// ReplacingMergeTree column updated_at) is made of: one rule, one place
// (docs/versions.md).
//
//   write_versions::monotonic (default): greatest(now, the id's newest
//     updated_at + 1 ms), so a write that starts after another finished
//     sorts after it whatever the clocks do. Modern servers compute it
//     inside the INSERT (now64(3)); servers without DateTime64 take `now`
//     from the store's clock (milliseconds, strictly increasing per store);
//     20.1–22.3 (no millisecond INTERVAL) fall back to clock.
//   write_versions::clock: the seed's statements — the column's DEFAULT
//     (now64(3)), or the store's milliseconds without DateTime64.
// A batch (set_all) applies the same rule per row from one read of the
// batch's own newest versions (batch_versions).
#pragma once

#include <chstate/detail/dialect.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace chstate::detail {

enum class version_source {
    column_default,   ///< the seed's INSERT … VALUES: updated_at DEFAULT now64(3)
    client_clock,     ///< no DateTime64, write_versions::clock: the store's milliseconds
    server_monotonic, ///< greatest(now64(3), newest + 1 ms), computed by the server
    client_monotonic, ///< no DateTime64: greatest(the store's milliseconds, newest + 1)
};

inline version_source choose_version_source(const server_features& f, bool monotonic_requested) {
    const bool monotonic = monotonic_requested && (f.subsecond_intervals || !f.datetime64);
    if (!f.datetime64)
        return monotonic ? version_source::client_monotonic : version_source::client_clock;
    return monotonic ? version_source::server_monotonic : version_source::column_default;
}

/// True when the store supplies a version of its own clock with each write.
inline bool store_supplies_versions(version_source v) {
    return v == version_source::client_clock || v == version_source::client_monotonic;
}

/// The updated_at expression of a single write of `{state_id:String}` into
/// `state_table` (empty: the column's DEFAULT). `{updated_at:UInt64}` is the
/// store's milliseconds where store_supplies_versions(). `newest_known`:
/// the operation already read the id's newest version under its lock
/// (update), bound as `{newest_ms:UInt64}` (0: no row), so the write reads
/// nothing; otherwise a scalar subquery reads it (every part of the table
/// that may hold the id).
inline std::string version_expression(version_source v, const std::string& state_table, bool newest_known = false) {
    const std::string newest =
        newest_known ? std::string("{newest_ms:UInt64}")
                     : "(SELECT max(updated_at) FROM " + state_table + " WHERE state_id = {state_id:String})";
    switch (v) {
    case version_source::column_default: return {};
    case version_source::client_clock: return "{updated_at:UInt64}";
    case version_source::server_monotonic:
        return "greatest(now64(3), " +
               (newest_known ? "fromUnixTimestamp64Milli(toInt64(" + newest + "))" : newest) +
               " + INTERVAL 1 MILLISECOND)";
    case version_source::client_monotonic: return "greatest({updated_at:UInt64}, " + newest + " + 1)";
    }
    return {};
}

/// The id's newest version in milliseconds, as a state read returns it
/// beside the parts (statements::select_state with the version).
inline std::string version_milliseconds(bool datetime64) {
    return datetime64 ? "toUInt64(toUnixTimestamp64Milli(updated_at))" : "toUInt64(updated_at)";
}

/// Milliseconds since the epoch as "seconds.mmm": the text a DateTime64(3)
/// column reads as that exact instant on every version.
inline std::string milliseconds_as_datetime64(std::uint64_t ms) {
    std::string frac = std::to_string(ms % 1000);
    return std::to_string(ms / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
}

/// A version as the text a TabSeparated row holds for the column.
inline std::string version_text(std::uint64_t ms, bool datetime64) {
    return datetime64 ? milliseconds_as_datetime64(ms) : std::to_string(ms);
}

/// set_all's versions under write_versions::monotonic: each row at
/// greatest(now, its own id's newest + 1 ms), from one read of the batch's
/// ids (statements::select_newest_versions).
class batch_versions {
public:
    void add_stored(std::string id, std::uint64_t newest_ms, std::uint64_t now_ms) {
        newest_[std::move(id)] = newest_ms;
        now_ = now_ms;
    }
    /// False when no id of the batch is stored: the rows then take the column's DEFAULT.
    bool any_stored() const noexcept { return now_.has_value(); }
    std::uint64_t version_of(const std::string& id) const {
        auto it = newest_.find(id);
        return it == newest_.end() ? *now_ : std::max(*now_, it->second + 1);
    }

private:
    std::unordered_map<std::string, std::uint64_t> newest_;
    std::optional<std::uint64_t> now_;
};

} // namespace chstate::detail
