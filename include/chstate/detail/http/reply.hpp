// chstate/detail/http/reply.hpp — how http_transport reads what a server
// answers, apart from the reading itself: a Keep-Alive header's timeout, an
// exception appended to a body that claimed success, a reply with another
// status (ClickHouse's exception, or anything else: a proxy's error page),
// a coding chstate never asked for, and bounded printable excerpts for
// messages. Pure: no I/O, no Boost.Beast (unasked_coding takes any header
// fields with name_string() and value()).
#pragma once

#include <chstate/detail/server_error.hpp>
#include <chstate/error.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace chstate::detail {

/// ASCII letters compared without case (as HTTP field names are).
inline bool ascii_iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i]))
            return false;
    }
    return true;
}

/// Why a reply's head announces a coding chstate did not ask for (empty
/// when it does not): a Content-Encoding other than identity, or a
/// Transfer-Encoding other than chunked alone. Printable excerpt only.
template <class Fields>
std::string unasked_coding(const Fields& head) {
    auto printable = [](std::string_view v) {
        std::string out;
        for (char c : v.substr(0, 60))
            out += (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f) ? c : '?';
        return out;
    };
    auto lowered = [](std::string_view v) {
        std::string out(v);
        for (char& c : out)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return out;
    };
    for (const auto& f : head) {
        const std::string_view name(f.name_string().data(), f.name_string().size());
        const std::string_view value(f.value().data(), f.value().size());
        const std::string v = lowered(value);
        if (ascii_iequals(name, "Content-Encoding") && !v.empty() && v != "identity")
            return "the reply is encoded (Content-Encoding: " + printable(value) +
                   "), which chstate never asks for: not read as rows";
        if (ascii_iequals(name, "Transfer-Encoding") && v != "chunked")
            return "the reply has a transfer coding chstate does not read (Transfer-Encoding: " + printable(value) +
                   "): not read as rows";
    }
    return {};
}

/// The `timeout=N` of a Keep-Alive header, if any, at most a day (a larger
/// N would overflow the milliseconds, and the pool's nanosecond comparison).
inline std::optional<std::chrono::milliseconds> keep_alive_timeout(std::string_view header) {
    auto pos = header.find("timeout=");
    if (pos == std::string_view::npos)
        return std::nullopt;
    header.remove_prefix(pos + 8);
    long n = 0;
    auto [p, ec] = std::from_chars(header.data(), header.data() + header.size(), n);
    if (ec != std::errc{} || n < 0)
        return std::nullopt;
    return std::chrono::seconds(std::min(n, 24L * 3600));
}

/// Where a body that claims success carries an exception: the offset of
/// the exception text in `tail`, or npos.
inline std::size_t find_body_exception(std::string_view tail) {
    if (auto marker = tail.find("__exception__"); marker != std::string_view::npos)
        return marker;
    std::size_t pos = tail.size();
    while (pos > 0) {
        pos = tail.rfind("Code: ", pos - 1);
        if (pos == std::string_view::npos)
            return std::string_view::npos;
        if ((pos == 0 || tail[pos - 1] == '\n') && exception_code(tail.substr(pos)) &&
            names_server_exception(tail.substr(pos)))
            return pos;
        if (pos == 0)
            break;
    }
    return std::string_view::npos;
}

/// At most `limit` bytes of `text` for a diagnostic message: each run of
/// white space and control characters becomes one space (none at the ends),
/// a byte that does not belong to a UTF-8 sequence becomes '?', and a cut
/// falls between characters, marked "…".
inline std::string printable_excerpt(std::string_view text, std::size_t limit = 300) {
    std::string out;
    bool space = false;
    std::size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c <= 0x20 || c == 0x7F) {
            space = !out.empty();
            ++i;
            continue;
        }
        std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool valid = n > 0 && i + n <= text.size();
        for (std::size_t k = 1; valid && k < n; ++k)
            valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
        const std::string_view piece = valid ? text.substr(i, n) : std::string_view("?");
        if (out.size() + (space ? 1 : 0) + piece.size() > limit) {
            out += "…";
            break;
        }
        if (space)
            out += ' ';
        space = false;
        out += piece;
        i += valid ? n : 1;
    }
    return out;
}

/// What a reply with a status other than 200 says.
struct error_reply {
    std::optional<int> code; ///< ClickHouse's exception code, if the reply is its exception
    std::string message;     ///< for diagnostics
};

/// Reads a reply with a status other than 200. It is ClickHouse's exception
/// when it carries an X-ClickHouse-Exception-Code header (`code_header`) or
/// its body begins with "Code: N" and names a DB::Exception (or a
/// Coordination::Exception, ZooKeeper's): then the code
/// comes from the header (else the body) and the message is ClickHouse's text
/// (trim_message). Anything else — a proxy's or another server's error page —
/// is not searched for a code: the message is the status, its reason and at
/// most `excerpt_limit` bytes of the body (printable_excerpt).
inline error_reply read_error_reply(unsigned status, std::string_view reason,
                                    std::optional<std::string_view> code_header, std::string_view body,
                                    std::size_t excerpt_limit = 300) {
    error_reply r;
    bool clickhouse = false;
    if (code_header) {
        clickhouse = true;
        int n = 0;
        auto [p, ec] = std::from_chars(code_header->data(), code_header->data() + code_header->size(), n);
        if (ec == std::errc{} && p != code_header->data())
            r.code = n;
    }
    std::string_view start = body;
    while (!start.empty() && (start.front() == ' ' || start.front() == '\r' || start.front() == '\n'))
        start.remove_prefix(1);
    if (start.starts_with("Code: ") && exception_code(start) &&
        names_server_exception(start))
        clickhouse = true;
    if (clickhouse) {
        if (!r.code)
            r.code = exception_code(body);
        r.message = std::string(trim_message(body));
        if (r.message.empty())
            r.message = "HTTP status " + std::to_string(status);
        return r;
    }
    r.message = "HTTP status " + std::to_string(status);
    if (auto why = printable_excerpt(reason, 100); !why.empty())
        r.message += " " + why;
    r.message += " without a ClickHouse exception";
    if (auto excerpt = printable_excerpt(body, excerpt_limit); !excerpt.empty())
        r.message += "; the reply begins: " + excerpt;
    return r;
}

/// The error a reply with a status other than 200 completes with:
/// ClickHouse's code when the reply is its exception, else
/// errc::authentication_failed for 401 and 403, else errc::server_error.
inline error_code error_reply_code(unsigned status, const error_reply& reply) {
    if (reply.code)
        return make_clickhouse_error(*reply.code);
    if (status == 401 || status == 403)
        return make_error_code(errc::authentication_failed);
    return make_error_code(errc::server_error);
}

/// A 400 without a ClickHouse exception: the server's HTTP layer could not
/// parse the request, so no query ran (and it may be sent again).
inline bool not_parsed(unsigned status, const error_reply& reply) {
    return !reply.code && status == 400;
}

} // namespace chstate::detail
