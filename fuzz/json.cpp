// Fuzz target: JSON text as Python reads and writes it (json_text.hpp).
//
// Input: JSON text (any bytes).
//
// Properties:
//   * parse_json's error_code form never throws, and fails with a reason;
//   * what parses serialises, unless an integer has more digits than
//     json_limits::max_integer_digits (then the reason says so);
//   * the text written is ASCII without control characters, parses back to
//     an equal value (doubles bit for bit, key order included), and writing
//     that value again gives the same bytes;
//   * under a smaller depth limit, parsing succeeds exactly when the text's
//     nesting is within it, and a value written under the limit reads back;
//   * a {"completed": …, "partial": …} value read by state::from_json is
//     written by to_json_text and read back by from_json_text unchanged.
//
// With CHSTATE_FUZZ_JSON_DUMP=FILE set, each input and chstate's text for it
// are appended to FILE (hex, tab-separated), for fuzz/json_python_check.py:
// scripts/fuzz.sh runs the target once over its final corpus that way and
// compares every case with Python's json module.
#include "fuzz_common.hpp"

#include <chstate/json_text.hpp>
#include <chstate/state.hpp>

#include <cstdio>
#include <cstdlib>

namespace {

/// The nesting depth of the text's value, counting brackets outside strings
/// (only meaningful for text that parses).
std::size_t text_depth(std::string_view t) {
    std::size_t depth = 0, deepest = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < t.size(); ++i) {
        const char c = t[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return deepest;
}

// The depth of the parsed value, which can be less than the text's: with a
// repeated key the last value wins, so a deep first value is dropped.
std::size_t value_depth(const chstate::value& root) {
    std::size_t deepest = 0;
    std::vector<std::pair<const chstate::value*, std::size_t>> work{{&root, 0}};
    while (!work.empty()) {
        auto [v, above] = work.back();
        work.pop_back();
        if (v->is_array()) {
            deepest = std::max(deepest, above + 1);
            for (const auto& e : v->get_array())
                work.emplace_back(&e, above + 1);
        } else if (v->is_object()) {
            deepest = std::max(deepest, above + 1);
            for (const auto& [k, e] : v->get_object())
                work.emplace_back(&e, above + 1);
        }
    }
    return deepest;
}

bool has_long_integer(const chstate::value& root, std::size_t digits) {
    std::vector<const chstate::value*> work{&root};
    while (!work.empty()) {
        const chstate::value* v = work.back();
        work.pop_back();
        if (v->is_big_integer()) {
            auto t = v->big_integer_text();
            if (t.size() - (t.front() == '-' ? 1 : 0) > digits)
                return true;
        } else if (v->is_array()) {
            for (const auto& e : v->get_array())
                work.push_back(&e);
        } else if (v->is_object()) {
            for (const auto& [k, e] : v->get_object())
                work.push_back(&e);
        }
    }
    return false;
}

void dump(std::string_view input, bool ok, std::string_view text) {
    static FILE* out = [] {
        const char* path = std::getenv("CHSTATE_FUZZ_JSON_DUMP");
        return path ? std::fopen(path, "ab") : nullptr;
    }();
    if (!out)
        return;
    auto hex = [](std::string_view s) {
        static constexpr char digits[] = "0123456789abcdef";
        std::string h;
        for (unsigned char c : s) {
            h += digits[c >> 4];
            h += digits[c & 15];
        }
        return h;
    };
    std::fprintf(out, "%s\t%s\t%s\n", hex(input).c_str(), ok ? "ok" : "error", hex(text).c_str());
    std::fflush(out);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    chstate::error_code ec;
    std::string why;
    chstate::value v;
    try {
        v = chstate::parse_json(input, ec, why);
    } catch (const std::exception& e) {
        FUZZ_CHECK(false, std::string("parse_json(ec) threw: ") + e.what());
    }
    if (ec) {
        FUZZ_CHECK(!why.empty() && why.find(" at byte ") != std::string::npos, why);
        dump(input, false, why);
        return 0;
    }

    std::string first;
    chstate::serialize_json(v, first, ec, why);
    if (ec) {
        FUZZ_CHECK(has_long_integer(v, chstate::json_limits{}.max_integer_digits) &&
                       why.find("digits") != std::string::npos,
                   "serialize_json refused a parsed value: " + why + " for " + fuzz::show(input));
        dump(input, false, "integer digits: " + why);
        // Without the digit limit it must write.
        chstate::json_limits unlimited;
        unlimited.max_integer_digits = static_cast<std::size_t>(-1);
        chstate::serialize_json(v, first, ec, why, unlimited);
        FUZZ_CHECK(!ec, why);
    } else {
        dump(input, true, first);
    }
    for (char ch : first)
        FUZZ_CHECK(static_cast<unsigned char>(ch) >= 0x20 && static_cast<unsigned char>(ch) < 0x7f,
                   "output not printable ASCII: " + fuzz::show(first));

    chstate::value again = chstate::parse_json(first, ec, why);
    FUZZ_CHECK(!ec, "own output does not parse: " + why + " output " + fuzz::show(first));
    FUZZ_CHECK(again == v, "round trip changed the value: input " + fuzz::show(input) + " output " + fuzz::show(first));
    std::string second;
    chstate::json_limits unlimited;
    unlimited.max_integer_digits = static_cast<std::size_t>(-1);
    chstate::serialize_json(again, second, ec, why, unlimited);
    FUZZ_CHECK(!ec && second == first, "second write differs: " + fuzz::show(first) + " vs " + fuzz::show(second));

    // A smaller depth limit: refused exactly when the text is deeper.
    const std::size_t depth = text_depth(input);
    const std::size_t limit = size % 7; // 0..6
    chstate::json_limits small;
    small.max_depth = limit;
    small.max_integer_digits = static_cast<std::size_t>(-1);
    std::string ignored;
    chstate::value limited = chstate::parse_json(input, ec, why, small);
    FUZZ_CHECK(!ec == (depth <= limit),
               "depth " + std::to_string(depth) + " limit " + std::to_string(limit) + ": " + why);
    std::string under_limit;
    chstate::serialize_json(v, under_limit, ec, why, small);
    const std::size_t parsed_depth = value_depth(v);
    FUZZ_CHECK(!ec == (parsed_depth <= limit), "serialise at depth " + std::to_string(parsed_depth) +
                                                   " (text depth " + std::to_string(depth) + ") limit " +
                                                   std::to_string(limit) + ": " + why);

    // The state form.
    if (v.is_object()) {
        chstate::diagnostics diag;
        auto s = chstate::state::from_json("id", v, ec, diag);
        if (!ec && !has_long_integer(v, chstate::json_limits{}.max_integer_digits)) {
            const std::string text = s->to_json_text();
            const chstate::state back = chstate::state::from_json_text("id", text);
            FUZZ_CHECK(back == *s, "state form round trip: " + fuzz::show(text));
        }
    }
    return 0;
}
