// chstate/detail/server_error.hpp — reading ClickHouse's exception text.
//
// Old servers write   "Code: 46, e.displayText() = DB::Exception: …"
// newer ones write    "Code: 46. DB::Exception: … (UNKNOWN_FUNCTION)"
// ZooKeeper's errors  "Code: 999, e.displayText() = Coordination::Exception: …"
#pragma once

#include <charconv>
#include <optional>
#include <string_view>

namespace chstate::detail {

/// The numeric code of the first "Code: N" in `text`, if any.
inline std::optional<int> exception_code(std::string_view text) {
    auto pos = text.find("Code: ");
    if (pos == std::string_view::npos)
        return std::nullopt;
    text.remove_prefix(pos + 6);
    int code = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), code);
    if (ec != std::errc{} || p == text.data())
        return std::nullopt;
    if (p != text.data() + text.size() && *p != '.' && *p != ',')
        return std::nullopt;
    return code;
}

/// True when `text` names one of ClickHouse's exception classes:
/// DB::Exception, or Coordination::Exception (ZooKeeper/Keeper errors, code
/// 999 KEEPER_EXCEPTION on a replicated table, e.g. "Code: 999,
/// e.displayText() = Coordination::Exception: Session expired").
inline bool names_server_exception(std::string_view text) {
    return text.find("DB::Exception") != std::string_view::npos ||
           text.find("Coordination::Exception") != std::string_view::npos;
}

/// The exception text without trailing newlines, capped for diagnostics.
inline std::string_view trim_message(std::string_view text, std::size_t limit = 2000) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
        text.remove_suffix(1);
    if (text.size() > limit)
        text = text.substr(0, limit);
    return text;
}

} // namespace chstate::detail
