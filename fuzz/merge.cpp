// Fuzz target: Meltano's deep merge (state.hpp deep_merge, state::merged).
//
// Input: SRC 0xFF DEST, two JSON texts. Prefixes:
//   'D' d0 d1 sel: wraps SRC (sel & 1) and/or DEST (sel & 2) in
//       (d0 | d1 << 8) * 2 levels of {"a": …} (up to 131,070 — deeper than
//       the parse limit, which merging does not have);
//   'A': SRC["a"] (an object) is merged into SRC itself, where it lives.
//
// Properties (objects only; anything else is skipped):
//   * deep_merge equals a recursive reference merge written from Meltano's
//     rules (objects merge, anything else replaces, an empty object leaves a
//     non-object alone, new keys follow in the source's order) — checked
//     where the reference's recursion is shallow enough;
//   * merge(x, {}) == x, merge({}, x) == x, and merging twice is merging once;
//   * src inside dest merges as a copy of src would;
//   * state::merged() is deep_merge(partial, copy of completed);
//   * deep inputs merge, compare, copy and destroy without recursion.
#include "fuzz_common.hpp"

#include <chstate/json_text.hpp>
#include <chstate/state.hpp>

namespace {

using chstate::object;
using chstate::value;

std::size_t depth_of(const value& root) {
    std::size_t deepest = 0;
    std::vector<std::pair<const value*, std::size_t>> work{{&root, 0}};
    while (!work.empty()) {
        auto [v, d] = work.back();
        work.pop_back();
        deepest = std::max(deepest, d);
        if (v->is_array())
            for (const auto& e : v->get_array())
                work.emplace_back(&e, d + 1);
        else if (v->is_object())
            for (const auto& [k, e] : v->get_object())
                work.emplace_back(&e, d + 1);
    }
    return deepest;
}

/// Meltano's merge(src, dest), recursively, on chstate objects, with chstate's
/// documented rule where Meltano itself would fail (a non-empty object onto a
/// non-object replaces it).
void reference_merge(const object& src, object& dest) {
    for (const auto& [key, v] : src) {
        if (!v.is_object()) {
            dest.insert_or_assign(key, v);
            continue;
        }
        value* existing = dest.if_contains(key);
        if (existing && !existing->is_object()) {
            if (v.get_object().empty())
                continue; // Python iterates over nothing
            *existing = object{};
        } else if (!existing) {
            dest.insert_or_assign(key, object{});
        }
        reference_merge(v.get_object(), dest.at(key).as_object());
    }
}

value wrap(value v, std::size_t levels) {
    for (std::size_t i = 0; i < levels; ++i) {
        object o;
        o.insert_or_assign("a", std::move(v));
        v = value(std::move(o));
    }
    return v;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    std::size_t wrap_src = 0, wrap_dest = 0;
    bool alias = false;
    if (input.size() >= 4 && input[0] == 'D') {
        const std::size_t levels =
            (static_cast<unsigned char>(input[1]) | (static_cast<std::size_t>(static_cast<unsigned char>(input[2])) << 8)) * 2;
        if (input[3] & 1)
            wrap_src = levels;
        if (input[3] & 2)
            wrap_dest = levels;
        input.remove_prefix(4);
    } else if (!input.empty() && input[0] == 'A') {
        alias = true;
        input.remove_prefix(1);
    }
    const auto sep = input.find('\xff');
    const std::string_view src_text = input.substr(0, sep);
    const std::string_view dest_text = sep == std::string_view::npos ? std::string_view("{}") : input.substr(sep + 1);
    chstate::error_code ec;
    std::string why;
    value src_v = chstate::parse_json(src_text, ec, why);
    if (ec)
        return 0;
    value dest_v = chstate::parse_json(dest_text, ec, why);
    if (ec)
        return 0;
    src_v = wrap(std::move(src_v), wrap_src);
    dest_v = wrap(std::move(dest_v), wrap_dest);
    if (!src_v.is_object() || !dest_v.is_object())
        return 0;
    const object& src = src_v.get_object();
    const object& dest = dest_v.get_object();
    const bool shallow = depth_of(src_v) < 200 && depth_of(dest_v) < 200;

    // merge(src, dest) against the reference.
    object merged = dest;
    chstate::deep_merge(src, merged);
    if (shallow) {
        object expected = dest;
        reference_merge(src, expected);
        FUZZ_CHECK(merged == expected, "deep_merge differs from the reference: got " +
                                           fuzz::show(chstate::serialize_json(value(merged))) + " expected " +
                                           fuzz::show(chstate::serialize_json(value(expected))));
    }
    // Identities.
    object onto_empty;
    chstate::deep_merge(src, onto_empty);
    FUZZ_CHECK(onto_empty == src, "merge(x, {}) != x");
    object copy = src;
    chstate::deep_merge(object{}, copy);
    FUZZ_CHECK(copy == src, "merge({}, x) != x");
    object twice = merged;
    chstate::deep_merge(src, twice);
    FUZZ_CHECK(twice == merged, "merging twice differs from merging once");

    // state::merged is partial onto completed.
    chstate::state s{"id", src, dest};
    FUZZ_CHECK(s.merged() == merged, "state::merged differs from deep_merge");
    chstate::state incoming{"id", src, {}};
    chstate::state stored{"id", dest, {}};
    stored.merge_partial(incoming);
    FUZZ_CHECK(stored.partial_state == merged, "merge_partial differs from deep_merge");

    // src living inside dest: the same as merging a copy.
    if (alias) {
        object inside = src;
        object expected = src;
        if (auto* a = inside.if_contains("a"); a && a->is_object()) {
            const object copy_of_a = a->get_object();
            chstate::deep_merge(copy_of_a, expected);
            chstate::deep_merge(a->get_object(), inside);
            FUZZ_CHECK(inside == expected, "merging a part of dest into dest differs from merging its copy");
        }
    }
    return 0;
}
