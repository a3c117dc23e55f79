// chstate/state.hpp — the Meltano state value and Meltano's merge rules.
//
// A state is {state_id, partial_state, completed_state}, both parts JSON
// objects. The rules follow Meltano exactly:
//   * deep_merge(src, dest): for every key of src, an object value is merged
//     recursively into dest[key] (created as {} when absent); any other value
//     (array, string, number, bool, null) replaces dest[key].
//   * is_complete(): completed_state is not empty.
//   * merged(): partial_state deep-merged onto a copy of completed_state —
//     what `meltano state get` shows.
//   * merge_partial(other): partial_state = deep_merge(other.partial_state,
//     partial_state) — how update() folds an incomplete state into the stored one.
//   * to_json()/from_json(): the {"completed": …, "partial": …} form used by
//     `meltano state get/set/export/import`.
#pragma once

#include <chstate/detail/shown.hpp>
#include <chstate/error.hpp>
#include <chstate/json_text.hpp>
#include <chstate/value.hpp>

#include <boost/json/value.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chstate {

/// Boost.JSON, for code that builds or reads values with it: chstate::value,
/// object and array convert from it implicitly, and back where the value
/// fits (value.hpp).
namespace json = boost::json;

/// Meltano's `merge(src, dest)`: merges `src` into `dest` in place and
/// returns `dest`. For each key of src, an object value is merged into
/// dest[key] (created as {} when absent), anything else replaces dest[key].
/// Where dest holds a non-object under the key: an empty object leaves it as
/// it is (Python's merge iterates over nothing), a non-empty one replaces it
/// (Meltano itself would fail). A key already in dest keeps its position;
/// new keys are appended in src's order, as Python's dict does. Iterative:
/// any depth. `src` may be part of `dest`.
inline object& deep_merge(const object& src, object& dest) {
    const object source = src; // src may live inside dest, which changes below
    std::vector<std::pair<const object*, object*>> work{{&source, &dest}};
    while (!work.empty()) {
        auto [from, to] = work.back();
        work.pop_back();
        bool nested = false;
        for (const auto& [key, v] : *from) {
            if (v.is_object()) {
                const value* existing = to->if_contains(key);
                if (existing && !existing->is_object() && v.get_object().empty())
                    continue;
                value& node = (*to)[key];
                if (!node.is_object())
                    node = object{};
                nested = nested || !v.get_object().empty();
            } else {
                (*to)[key] = v;
            }
        }
        // Pointers into *to only once it has stopped growing.
        if (nested)
            for (const auto& [key, v] : *from)
                if (v.is_object() && !v.get_object().empty())
                    work.emplace_back(&v.get_object(), &to->at(key).get_object());
    }
    return dest;
}

/// One pipeline's state. Its parts are chstate::object: exact values, in
/// their stored key order (value.hpp); build them with Boost-style literals
/// (`s.partial_state = {{"bookmarks", {{"users", 5}}}};`) or from
/// boost::json objects, which convert implicitly.
struct state {
    std::string state_id{};
    object partial_state{};
    object completed_state{};

    /// True when completed_state holds anything.
    bool is_complete() const noexcept { return !completed_state.empty(); }

    /// partial_state merged onto a copy of completed_state.
    object merged() const {
        object view = completed_state;
        deep_merge(partial_state, view);
        return view;
    }

    /// Folds `incoming`'s partial state into this one's (incoming wins).
    state& merge_partial(const state& incoming) {
        deep_merge(incoming.partial_state, partial_state);
        return *this;
    }

    /// {"completed": {...}, "partial": {...}}
    object to_json() const {
        object out;
        out.insert_or_assign("completed", completed_state);
        out.insert_or_assign("partial", partial_state);
        return out;
    }

    /// The {"completed": …, "partial": …} form as text, written as Python's
    /// json.dumps writes it.
    /// (One level deeper than a part may be: the form wraps the parts.)
    std::string to_json_text() const {
        return serialize_json(value(to_json()), json_limits{json_limits{}.max_depth + 1});
    }

    /// Reads the {"completed": …, "partial": …} form; either key may be
    /// absent. Any other key, or a non-object part, is refused with
    /// errc::invalid_argument (silently dropping it would lose data).
    static std::optional<state> from_json(std::string state_id, const value& v, error_code& ec, diagnostics& diag) {
        ec = {};
        auto fail = [&](std::string msg) -> std::optional<state> {
            ec = make_error_code(errc::invalid_argument);
            diag.message = std::move(msg);
            return std::nullopt;
        };
        if (!v.is_object())
            return fail("state \"" + detail::shown(state_id) + "\": the state JSON must be an object of the form "
                        "{\"completed\": {...}, \"partial\": {...}}");
        state s;
        s.state_id = std::move(state_id);
        for (const auto& [key, part] : v.get_object()) {
            object* target = nullptr;
            if (key == "completed")
                target = &s.completed_state;
            else if (key == "partial")
                target = &s.partial_state;
            else
                return fail("state \"" + detail::shown(s.state_id) + "\": unexpected key \"" + detail::shown(key) +
                            "\" in the state JSON (expected only \"completed\" and \"partial\")");
            if (part.is_null())
                continue;
            if (!part.is_object())
                return fail("state \"" + detail::shown(s.state_id) + "\": \"" + detail::shown(key) + "\" must be a JSON object (it is " +
                            std::string(to_string(part.kind())) + ")");
            *target = part.get_object();
        }
        return s;
    }

    /// Throwing form of from_json.
    static state from_json(std::string state_id, const value& v) {
        error_code ec;
        diagnostics diag;
        auto s = from_json(std::move(state_id), v, ec, diag);
        throw_if(ec, diag.message);
        return std::move(*s);
    }

    /// Parses text in the {"completed": …, "partial": …} form, exactly
    /// (json_text.hpp): every number, string and key order as written.
    static state from_json_text(std::string state_id, std::string_view text) {
        error_code ec;
        std::string why;
        // One level more than a part may have: the form wraps the parts.
        value v = parse_json(text, ec, why, json_limits{json_limits{}.max_depth + 1});
        if (ec)
            throw error(make_error_code(errc::invalid_argument),
                        "state \"" + detail::shown(state_id) + "\": the state JSON does not parse: " + why);
        return from_json(std::move(state_id), v);
    }

    friend bool operator==(const state&, const state&) = default;
};

/// A stored state get_all could not read: its id, exactly as stored, and why.
struct unreadable_state {
    std::string state_id{};
    error_code code;    ///< errc::corrupt_state
    std::string reason; ///< names the id, the column and what is wrong
};

} // namespace chstate
