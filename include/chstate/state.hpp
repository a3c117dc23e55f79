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

#include <chstate/error.hpp>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace chstate {

namespace json = boost::json;

/// Meltano's `merge(src, dest)`: merges `src` into `dest` in place and
/// returns `dest`. Where src holds an object and dest holds a non-object
/// under the same key, the object replaces it (Meltano itself would fail).
inline json::object& deep_merge(const json::object& src, json::object& dest) {
    for (const auto& [key, value] : src) {
        if (value.is_object()) {
            json::value& node = dest[key];
            if (!node.is_object())
                node = json::object{};
            deep_merge(value.get_object(), node.get_object());
        } else {
            dest[key] = value;
        }
    }
    return dest;
}

/// One pipeline's state.
struct state {
    std::string state_id;
    json::object partial_state;
    json::object completed_state;

    /// True when completed_state holds anything.
    bool is_complete() const noexcept { return !completed_state.empty(); }

    /// partial_state merged onto a copy of completed_state.
    json::object merged() const {
        json::object view = completed_state;
        deep_merge(partial_state, view);
        return view;
    }

    /// Folds `incoming`'s partial state into this one's (incoming wins).
    state& merge_partial(const state& incoming) {
        json::object merged_partial = partial_state;
        deep_merge(incoming.partial_state, merged_partial);
        partial_state = std::move(merged_partial);
        return *this;
    }

    /// {"completed": {...}, "partial": {...}}
    json::object to_json() const {
        json::object out;
        out["completed"] = completed_state;
        out["partial"] = partial_state;
        return out;
    }

    /// Reads the {"completed": …, "partial": …} form; either key may be
    /// absent. Any other key, or a non-object part, is refused with
    /// errc::invalid_argument (silently dropping it would lose data).
    static std::optional<state> from_json(std::string state_id, const json::value& v,
                                          error_code& ec, diagnostics& diag) {
        ec = {};
        auto fail = [&](std::string msg) -> std::optional<state> {
            ec = make_error_code(errc::invalid_argument);
            diag.message = std::move(msg);
            return std::nullopt;
        };
        if (!v.is_object())
            return fail("state JSON must be an object of the form {\"completed\": {...}, \"partial\": {...}}");
        state s;
        s.state_id = std::move(state_id);
        for (const auto& [key, part] : v.get_object()) {
            json::object* target = nullptr;
            if (key == "completed")
                target = &s.completed_state;
            else if (key == "partial")
                target = &s.partial_state;
            else
                return fail("unexpected key \"" + std::string(key) +
                            "\" in state JSON (expected only \"completed\" and \"partial\")");
            if (part.is_null())
                continue;
            if (!part.is_object())
                return fail("\"" + std::string(key) + "\" must be a JSON object");
            *target = part.get_object();
        }
        return s;
    }

    /// Throwing form of from_json.
    static state from_json(std::string state_id, const json::value& v) {
        error_code ec;
        diagnostics diag;
        auto s = from_json(std::move(state_id), v, ec, diag);
        throw_if(ec, diag.message);
        return std::move(*s);
    }

    /// Parses text in the {"completed": …, "partial": …} form.
    static state from_json_text(std::string state_id, std::string_view text) {
        error_code ec;
        json::value v = json::parse(text, ec);
        if (ec)
            throw error(make_error_code(errc::invalid_argument), "state JSON does not parse: " + ec.message());
        return from_json(std::move(state_id), v);
    }

    friend bool operator==(const state&, const state&) = default;
};

/// A stored state get_all could not read: its id, exactly as stored, and why.
struct unreadable_state {
    std::string state_id;
    error_code code;    ///< errc::corrupt_state
    std::string reason; ///< names the id, the column and what is wrong
};

} // namespace chstate
