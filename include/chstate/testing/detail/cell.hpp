// chstate/testing/detail/cell.hpp — the simulator's values: one cell of a
// stored row or of an expression's result, how cells compare, and the
// exception a simulated statement fails with.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace chstate::detail::sim {

/// A ClickHouse exception: the server's error code and message. The
/// statement fails with make_clickhouse_error(code).
struct sim_error {
    int code;
    std::string message;
};

/// A cell: NULL, text, or a number. Times are numbers of milliseconds since
/// the epoch, whatever the column's type (DateTime, DateTime64(3)).
struct value {
    enum kind_t { null, text, number } kind = null;
    std::string s;
    std::int64_t n = 0;
    bool quoted64 = false; ///< a UInt64 result (count()): quoted in JSON, as ClickHouse does

    static value of_null() { return {}; }
    static value of_text(std::string t) { return {text, std::move(t), 0, false}; }
    static value of_number(std::int64_t v) { return {number, {}, v, false}; }
};

inline std::optional<std::int64_t> to_int(std::string_view s) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size())
        return std::nullopt;
    return v;
}

/// -1, 0, 1; NULL compares unequal to everything (nullopt). A number and a
/// text compare as numbers when the text is one, else as texts.
inline std::optional<int> compare(const value& a, const value& b) {
    if (a.kind == value::null || b.kind == value::null)
        return std::nullopt;
    if (a.kind == value::number || b.kind == value::number) {
        auto x = a.kind == value::number ? std::optional<std::int64_t>(a.n) : to_int(a.s);
        auto y = b.kind == value::number ? std::optional<std::int64_t>(b.n) : to_int(b.s);
        if (x && y)
            return *x < *y ? -1 : (*x > *y ? 1 : 0);
    }
    int c = a.s.compare(b.s);
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

/// A condition's outcome: non-zero numbers and texts other than "" and "0".
inline bool truthy(const value& v) {
    if (v.kind == value::number)
        return v.n != 0;
    if (v.kind == value::text)
        return !v.s.empty() && v.s != "0";
    return false;
}

/// "YYYY-MM-DD hh:mm:ss[.mmm]" in UTC, as ClickHouse writes a DateTime
/// (or, `with_ms`, a DateTime64(3)).
inline std::string format_time(std::int64_t ms, bool with_ms) {
    std::time_t secs = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
    std::string out = buf;
    if (with_ms) {
        std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(((ms % 1000) + 1000) % 1000));
        out += buf;
    }
    return out;
}

} // namespace chstate::detail::sim
