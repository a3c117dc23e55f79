// chstate/testing/detail/eval.hpp — an expression's value on one row.
//
// Functions: now(), now64(3), version(), toDateTime(seconds),
// toUnixTimestamp(t), toUnixTimestamp64Milli(t), toUInt64(x),
// greatest(x, …), isNull(x), startsWith(s, prefix), SHA256(s), unhex(s).
// Times are milliseconds since the epoch (cell.hpp), so the conversions
// between DateTime64(3) and milliseconds are the identity. now() and
// now64() read the server's manual_clock; now() has whole seconds.
// Operators: AND OR = != < <= > >= + - * and x IN (SELECT arrayJoin(list)).
// An unknown function fails with 46, a missing column with 47.
#pragma once

#include <chstate/detail/sha256.hpp>
#include <chstate/detail/sql.hpp>
#include <chstate/manual_clock.hpp>
#include <chstate/testing/detail/dialect.hpp>
#include <chstate/testing/detail/table.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace chstate::detail::sim {

/// Array(String) texts, ['a', 'b\'c'] (escapes as quote_string writes
/// them), each parsed once: a batch's list is read for every row. Used
/// under the server's lock.
class string_arrays {
public:
    const std::vector<std::string>& operator()(const std::string& text) {
        auto [it, added] = cache_.try_emplace(text);
        if (added) {
            try {
                it->second = parse(text);
            } catch (...) {
                cache_.erase(it); // no half-parsed entry for the next call
                throw;
            }
        }
        return it->second;
    }

private:
    static std::vector<std::string> parse(const std::string& text) {
        auto fail = [&] { throw sim_error{41, "Cannot parse Array(String) from " + text.substr(0, 100)}; };
        std::vector<std::string> out;
        std::size_t i = 0;
        if (text.empty() || text[i++] != '[')
            fail();
        while (i < text.size() && text[i] != ']') {
            if (text[i] == ',') {
                ++i;
                continue;
            }
            if (text[i++] != '\'')
                fail();
            std::string item;
            for (;;) {
                if (i >= text.size())
                    fail();
                const char c = text[i++];
                if (c == '\'')
                    break;
                if (c == '\\') {
                    if (i >= text.size())
                        fail();
                    item += unescaped(text[i++]);
                } else {
                    item += c;
                }
            }
            out.push_back(std::move(item));
        }
        return out;
    }

    std::map<std::string, std::vector<std::string>> cache_;
};

class evaluator {
public:
    evaluator(const manual_clock& clock, const std::string& version, const dialect& d, string_arrays& arrays)
        : clock_(clock), version_(version), dialect_(d), arrays_(arrays) {}

    /// `e` on a row of `t` (`cells`: one per column; all NULL for no row).
    value operator()(const expr& e, const table& t, const std::vector<value>& cells) const {
        switch (e.kind) {
        case expr::literal:
            return e.v;
        case expr::column: {
            auto i = t.find(e.name);
            if (!i)
                throw sim_error{47, "Missing columns: '" + e.name + "' in table " + t.qualified_name()};
            return cells.at(*i);
        }
        case expr::call:
            return call(e, t, cells);
        case expr::binary:
            return binary(e, t, cells);
        case expr::array:
        case expr::subquery:
            break;
        }
        throw std::logic_error("simulated_clickhouse: " + e.text + " evaluated out of place");
    }

    std::int64_t now_ms() const {
        return std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now().time_since_epoch()).count();
    }

private:
    value call(const expr& e, const table& t, const std::vector<value>& cells) const {
        const std::string f = upper(e.name);
        auto arg = [&](std::size_t k) { return (*this)(e.args.at(k), t, cells); };
        const bool datetime64 = f == "NOW64" || f == "TOUNIXTIMESTAMP64MILLI" || f == "FROMUNIXTIMESTAMP64MILLI";
        if (f == "NOW")
            return value::of_number(now_ms() / 1000 * 1000);
        if (f == "NOW64" && dialect_.datetime64_functions)
            return value::of_number(now_ms());
        if (f == "VERSION")
            return value::of_text(version_);
        if (f == "TODATETIME") { // from whole seconds
            value a = arg(0);
            if (a.kind == value::text)
                throw sim_error{41, "Cannot parse DateTime from '" + a.s + "' (simulated: integer seconds only)"};
            if (a.kind == value::number)
                a = value::of_number(a.n * 1000);
            return a;
        }
        if (f == "TOUNIXTIMESTAMP") { // to whole seconds
            value a = arg(0);
            return a.kind == value::number ? value::of_number(a.n >= 0 ? a.n / 1000 : (a.n - 999) / 1000) : a;
        }
        if (((f == "TOUNIXTIMESTAMP64MILLI" || f == "FROMUNIXTIMESTAMP64MILLI") && dialect_.datetime64_functions) ||
            f == "TOUINT64" || f == "TOINT64") { // a DateTime64(3) is its milliseconds here
            value a = arg(0);
            a.quoted64 = false;
            return a;
        }
        if (f == "GREATEST") {
            value best = arg(0);
            for (std::size_t k = 1; k < e.args.size(); ++k) {
                value v = arg(k);
                if (auto c = compare(v, best); c && *c > 0)
                    best = std::move(v);
            }
            return best;
        }
        if (f == "ISNULL")
            return value::of_number(arg(0).kind == value::null ? 1 : 0);
        if (f == "STARTSWITH") { // bytes, as ClickHouse compares them
            value a = arg(0), prefix = arg(1);
            if (a.kind == value::null || prefix.kind == value::null)
                return value::of_null();
            return value::of_number(a.s.starts_with(prefix.s) ? 1 : 0);
        }
        if (f == "SHA256") { // the raw 32 bytes, as ClickHouse's FixedString(32)
            value a = arg(0);
            if (a.kind == value::null)
                return a;
            auto digest = sha256(a.s);
            return value::of_text(std::string(digest.begin(), digest.end()));
        }
        if (f == "UNHEX") {
            value a = arg(0);
            std::string out;
            for (std::size_t k = 0; k + 1 < a.s.size(); k += 2)
                out += static_cast<char>(std::stoi(a.s.substr(k, 2), nullptr, 16));
            return value::of_text(std::move(out));
        }
        throw sim_error{46, "Unknown function " + e.name +
                                (datetime64 ? " (ClickHouse 18.16 has no DateTime64)" : " (simulated_clickhouse)")};
    }

    value binary(const expr& e, const table& t, const std::vector<value>& cells) const {
        const auto& op = e.name;
        if (op == "AND")
            return value::of_number(truthy((*this)(e.args[0], t, cells)) && truthy((*this)(e.args[1], t, cells)));
        if (op == "OR")
            return value::of_number(truthy((*this)(e.args[0], t, cells)) || truthy((*this)(e.args[1], t, cells)));
        const value a = (*this)(e.args[0], t, cells);
        if (op == "IN") { // the list: an inlined array literal, or an Array(String) parameter's text
            if (a.kind == value::null)
                return value::of_number(0);
            const expr& list = e.args[1];
            if (list.kind == expr::array)
                return value::of_number(std::any_of(list.args.begin(), list.args.end(),
                                                    [&](const expr& item) { return item.v.s == a.s; }));
            const auto& items = arrays_((*this)(list, t, cells).s);
            return value::of_number(std::find(items.begin(), items.end(), a.s) != items.end() ? 1 : 0);
        }
        const value b = (*this)(e.args[1], t, cells);
        if (op == "+" || op == "-" || op == "*") {
            auto n = [](const value& v) { return v.kind == value::number ? v.n : to_int(v.s).value_or(0); };
            return value::of_number(op == "+" ? n(a) + n(b) : op == "-" ? n(a) - n(b) : n(a) * n(b));
        }
        auto c = compare(a, b);
        if (!c)
            return value::of_null();
        const bool r = op == "="    ? *c == 0
                       : op == "!=" ? *c != 0
                       : op == "<"  ? *c < 0
                       : op == "<=" ? *c <= 0
                       : op == ">"  ? *c > 0
                                    : *c >= 0;
        return value::of_number(r);
    }

    const manual_clock& clock_;
    const std::string& version_;
    const dialect& dialect_;
    string_arrays& arrays_;
};

} // namespace chstate::detail::sim
