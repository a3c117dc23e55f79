// chstate/detail/value_impl.hpp — the parts of chstate::value that walk a tree.
//
// Included by chstate/value.hpp once array and object are complete. Every
// algorithm here keeps its pending work in a std::vector on the heap instead
// of recursing, so the depth of a value never turns into depth of the call
// stack: destruction detaches an array's or object's container children
// before freeing it (each free then only releases leaves), copies and
// conversions fill pre-reserved containers level by level, and comparison
// pushes pairs of containers.
#pragma once

#include <chstate/detail/utf8.hpp>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace chstate {

inline value::value(big_integer b) {
    const char* first = b.text.data();
    const char* last = first + b.text.size();
    std::int64_t i = 0;
    if (auto r = std::from_chars(first, last, i); r.ec == std::errc() && r.ptr == last) {
        int64_ = i;
        kind_ = value_kind::int64;
        return;
    }
    std::uint64_t u = 0;
    if (auto r = std::from_chars(first, last, u); r.ec == std::errc() && r.ptr == last) {
        uint64_ = u;
        kind_ = value_kind::uint64;
        return;
    }
    new (&string_) std::string(std::move(b.text));
    kind_ = value_kind::big_integer;
}

inline value::value(array a) : array_(new array(std::move(a))), kind_(value_kind::array) {}
inline value::value(object o) : object_(new object(std::move(o))), kind_(value_kind::object) {}
inline value::value(const boost::json::object& o) : object_(new object(o)), kind_(value_kind::object) {}
inline value::value(const boost::json::array& a) : array_(new array(a)), kind_(value_kind::array) {}

// Keys are const (see object), so the entries behind the gap cannot be
// shifted by assignment: they are set aside (keys copied, values moved),
// dropped, and appended again within the same capacity (keys moved back).
inline object::iterator object::erase(const_iterator pos) {
    const auto at = static_cast<std::size_t>(pos - cbegin());
    std::vector<std::pair<std::string, value>> tail;
    tail.reserve(entries_.size() - at - 1);
    try {
        for (std::size_t k = at + 1; k < entries_.size(); ++k)
            tail.emplace_back(entries_[k].first, std::move(entries_[k].second));
    } catch (...) { // a key could not be copied: give the values back
        for (std::size_t k = 0; k < tail.size(); ++k)
            entries_[at + 1 + k].second = std::move(tail[k].second);
        throw;
    }
    while (entries_.size() > at)
        entries_.pop_back();
    for (auto& [key, v] : tail) // no allocation: the capacity is unchanged and keys are moved
        entries_.emplace_back(std::piecewise_construct, std::forward_as_tuple(std::move(key)),
                              std::forward_as_tuple(std::move(v)));
    reindex();
    return begin() + static_cast<std::ptrdiff_t>(at);
}

// std::vector would copy the entries instead (pair<const std::string, value>
// has no noexcept move), deep-copying every value.
inline void object::relocate(std::size_t capacity) {
    std::vector<value_type> bigger;
    bigger.reserve(capacity);
    try {
        for (auto& e : entries_)
            bigger.emplace_back(std::piecewise_construct, std::forward_as_tuple(e.first),
                                std::forward_as_tuple(std::move(e.second)));
    } catch (...) { // a key could not be copied: give the values back
        for (std::size_t k = 0; k < bigger.size(); ++k)
            entries_[k].second = std::move(bigger[k].second);
        throw;
    }
    entries_.swap(bigger);
}

inline bool value::copy_shallow(const value& other) {
    switch (other.kind_) {
    case value_kind::null: break;
    case value_kind::boolean: bool_ = other.bool_; break;
    case value_kind::int64: int64_ = other.int64_; break;
    case value_kind::uint64: uint64_ = other.uint64_; break;
    case value_kind::float64: double_ = other.double_; break;
    case value_kind::string:
    case value_kind::big_integer: new (&string_) std::string(other.string_); break;
    case value_kind::array:
        array_ = new array();
        kind_ = value_kind::array;
        return false;
    case value_kind::object:
        object_ = new object();
        kind_ = value_kind::object;
        return false;
    }
    kind_ = other.kind_;
    return true;
}

inline value::value(const value& other) {
    if (copy_shallow(other))
        return;
    try {
        // (source, copy) pairs whose copy is still an empty container. Each
        // container is reserved before it is filled, so the addresses of the
        // children queued here stay valid.
        std::vector<std::pair<const value*, value*>> pending{{&other, this}};
        while (!pending.empty()) {
            auto [src, dst] = pending.back();
            pending.pop_back();
            if (src->kind_ == value_kind::array) {
                const auto& from = src->array_->elems_;
                auto& to = dst->array_->elems_;
                to.reserve(from.size());
                for (const value& e : from)
                    if (value& slot = to.emplace_back(); !slot.copy_shallow(e))
                        pending.emplace_back(&e, &slot);
            } else {
                const object& from = *src->object_;
                object& to = *dst->object_;
                to.entries_.reserve(from.size()); // still empty: nothing is copied
                for (const auto& [key, e] : from.entries_) {
                    value& slot = to.entries_
                                      .emplace_back(std::piecewise_construct, std::forward_as_tuple(key),
                                                    std::forward_as_tuple())
                                      .second;
                    if (!slot.copy_shallow(e))
                        pending.emplace_back(&e, &slot);
                }
                to.index_ = from.index_; // same keys at the same positions
            }
        }
    } catch (...) {
        destroy();
        throw;
    }
}

inline void value::destroy() noexcept {
    switch (kind_) {
    case value_kind::string:
    case value_kind::big_integer: string_.~basic_string(); break;
    case value_kind::array:
    case value_kind::object: free_children_then_self(); break;
    default: break;
    }
    kind_ = value_kind::null;
}

// Frees an array or object without recursion. Before a container is
// deleted, its array and object children are moved out to `pending`, so the
// delete only ever releases scalars and strings. (Like std::vector's own
// growth, `pending` needs memory; running out of it here terminates.)
inline void value::free_children_then_self() noexcept {
    std::vector<value> pending;
    auto free_one = [&pending](value& v) {
        if (v.kind_ == value_kind::array) {
            for (value& e : v.array_->elems_)
                if (e.is_structured())
                    pending.push_back(std::move(e));
            delete v.array_;
        } else {
            for (auto& entry : v.object_->entries_)
                if (entry.second.is_structured())
                    pending.push_back(std::move(entry.second));
            delete v.object_;
        }
        v.kind_ = value_kind::null;
    };
    free_one(*this);
    while (!pending.empty()) {
        value v(std::move(pending.back()));
        pending.pop_back();
        free_one(v);
    }
}

inline bool value::equal_shallow(const value& a, const value& b) noexcept {
    if (a.kind_ != b.kind_) {
        // Normalised integers never differ in kind, but as_uint64() can be
        // used to store a small number in a uint64.
        if (a.kind_ == value_kind::int64 && b.kind_ == value_kind::uint64)
            return a.int64_ >= 0 && static_cast<std::uint64_t>(a.int64_) == b.uint64_;
        if (a.kind_ == value_kind::uint64 && b.kind_ == value_kind::int64)
            return b.int64_ >= 0 && static_cast<std::uint64_t>(b.int64_) == a.uint64_;
        return false;
    }
    switch (a.kind_) {
    case value_kind::null: return true;
    case value_kind::boolean: return a.bool_ == b.bool_;
    case value_kind::int64: return a.int64_ == b.int64_;
    case value_kind::uint64: return a.uint64_ == b.uint64_;
    case value_kind::float64: // bit for bit
        return std::bit_cast<std::uint64_t>(a.double_) == std::bit_cast<std::uint64_t>(b.double_);
    case value_kind::string:
    case value_kind::big_integer: return a.string_ == b.string_;
    case value_kind::array: return a.array_->size() == b.array_->size();
    case value_kind::object: return a.object_->size() == b.object_->size();
    }
    return false;
}

inline bool value::equal(const value& a, const value& b) {
    if (!equal_shallow(a, b))
        return false;
    if (!a.is_structured())
        return true;
    // Pairs of containers of the same kind and size whose children are still to compare.
    std::vector<std::pair<const value*, const value*>> pending{{&a, &b}};
    while (!pending.empty()) {
        auto [x, y] = pending.back();
        pending.pop_back();
        const std::size_t n = x->kind_ == value_kind::array ? x->array_->size() : x->object_->size();
        for (std::size_t i = 0; i < n; ++i) {
            const value* p;
            const value* q;
            if (x->kind_ == value_kind::array) {
                p = &x->array_->elems_[i];
                q = &y->array_->elems_[i];
            } else {
                const auto& e = x->object_->entries_[i];
                const auto& f = y->object_->entries_[i];
                if (e.first != f.first)
                    return false;
                p = &e.second;
                q = &f.second;
            }
            if (!equal_shallow(*p, *q))
                return false;
            if (p->is_structured())
                pending.emplace_back(p, q);
        }
    }
    return true;
}

inline bool value::from_boost_shallow(const boost::json::value& v) {
    switch (v.kind()) {
    case boost::json::kind::null: break;
    case boost::json::kind::bool_: bool_ = v.get_bool(); kind_ = value_kind::boolean; break;
    case boost::json::kind::int64: int64_ = v.get_int64(); kind_ = value_kind::int64; break;
    case boost::json::kind::uint64: {
        value normalised(v.get_uint64());
        take(normalised);
        break;
    }
    case boost::json::kind::double_: double_ = v.get_double(); kind_ = value_kind::float64; break;
    case boost::json::kind::string:
        new (&string_) std::string(v.get_string().data(), v.get_string().size());
        kind_ = value_kind::string;
        break;
    case boost::json::kind::array:
        array_ = new array();
        kind_ = value_kind::array;
        return false;
    case boost::json::kind::object:
        object_ = new object();
        kind_ = value_kind::object;
        return false;
    }
    return true;
}

inline void value::from_boost(const boost::json::value& root) {
    if (from_boost_shallow(root))
        return;
    try {
        std::vector<std::pair<const boost::json::value*, value*>> pending{{&root, this}};
        while (!pending.empty()) {
            auto [src, dst] = pending.back();
            pending.pop_back();
            if (const auto* elems = src->if_array()) {
                auto& to = dst->array_->elems_;
                to.reserve(elems->size());
                for (const auto& e : *elems)
                    if (value& slot = to.emplace_back(); !slot.from_boost_shallow(e))
                        pending.emplace_back(&e, &slot);
            } else {
                const auto& from = src->get_object();
                object& to = *dst->object_;
                to.reserve(from.size()); // append() below stays within it
                for (const auto& kv : from) // Boost's keys are unique
                    if (value& slot = to.append(std::string(kv.key()), value()); !slot.from_boost_shallow(kv.value()))
                        pending.emplace_back(&kv.value(), &slot);
            }
        }
    } catch (...) {
        destroy();
        throw;
    }
}

inline array& value::emplace_array() {
    *this = value(array());
    return *array_;
}
inline object& value::emplace_object() {
    *this = value(object());
    return *object_;
}

inline value& value::at(std::string_view key) { return as_object().at(key); }
inline const value& value::at(std::string_view key) const { return as_object().at(key); }
inline value& value::at(std::size_t index) { return as_array().at(index); }
inline const value& value::at(std::size_t index) const { return as_array().at(index); }
inline value* value::if_contains(std::string_view key) noexcept {
    return is_object() ? object_->if_contains(key) : nullptr;
}
inline const value* value::if_contains(std::string_view key) const noexcept {
    return is_object() ? std::as_const(*object_).if_contains(key) : nullptr;
}

template <class T>
T value::to_number(error_code& ec) const noexcept {
    static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && !detail::character<T>,
                  "to_number converts to integer and floating-point types");
    ec = {};
    auto fail = [&ec] {
        ec = make_error_code(errc::invalid_argument);
        return T{};
    };
    if constexpr (std::is_integral_v<T>) {
        switch (kind_) {
        case value_kind::int64: return std::in_range<T>(int64_) ? static_cast<T>(int64_) : fail();
        case value_kind::uint64: return std::in_range<T>(uint64_) ? static_cast<T>(uint64_) : fail();
        case value_kind::float64: {
            // [lower, 2**digits) are exactly the doubles that fit T.
            const double upper = static_cast<double>(std::numeric_limits<T>::max() / 2 + 1) * 2.0;
            const double lower = std::is_signed_v<T> ? -upper : 0.0;
            if (!(double_ >= lower && double_ < upper) || std::trunc(double_) != double_)
                return fail();
            return static_cast<T>(double_);
        }
        default: return fail(); // a big integer is outside every integer type
        }
    } else {
        // An integer converts exactly when its significant bits fit T's mantissa.
        auto from_integer = [&](std::uint64_t magnitude, bool negative) {
            if (magnitude != 0 &&
                std::bit_width(magnitude >> std::countr_zero(magnitude)) > unsigned(std::numeric_limits<T>::digits))
                return fail();
            const T t = static_cast<T>(magnitude);
            return negative ? -t : t;
        };
        switch (kind_) {
        case value_kind::int64:
            return int64_ < 0 ? from_integer(0 - static_cast<std::uint64_t>(int64_), true)
                              : from_integer(static_cast<std::uint64_t>(int64_), false);
        case value_kind::uint64: return from_integer(uint64_, false);
        case value_kind::float64:
            if constexpr (sizeof(T) < sizeof(double)) { // float: NaN and ±inf carry over, the rest must fit
                const bool fits = std::fabs(double_) <= static_cast<double>(std::numeric_limits<T>::max());
                if (std::isfinite(double_) && (!fits || static_cast<double>(static_cast<T>(double_)) != double_))
                    return fail();
            }
            return static_cast<T>(double_);
        case value_kind::big_integer: {
            T t{};
            const char* first = string_.data();
            const char* last = first + string_.size();
            if (auto r = std::from_chars(first, last, t); r.ec != std::errc() || r.ptr != last)
                return fail();
            // Exact when the number read back prints as the same digits.
            std::string digits(string_.size() + 1, '\0');
            auto w = std::to_chars(digits.data(), digits.data() + digits.size(), t, std::chars_format::fixed, 0);
            if (w.ec != std::errc() || std::string_view(digits.data(), std::size_t(w.ptr - digits.data())) != string_)
                return fail();
            return t;
        }
        default: return fail();
        }
    }
}

template <class T>
T value::to_number() const {
    error_code ec;
    T t = to_number<T>(ec);
    if (ec)
        throw error(ec, "JSON " + std::string(to_string(kind_)) +
                            " is not a number exactly representable as the requested type");
    return t;
}

namespace detail {

/// A container during an iterative walk, with `next`: one past the index of
/// the child being visited.
struct walk_frame {
    const array* arr = nullptr;
    const object* obj = nullptr;
    std::size_t next = 0;

    static walk_frame of(const value& v) noexcept { return {v.if_array(), v.if_object(), 0}; }
    std::size_t size() const noexcept { return arr ? arr->size() : obj->size(); }
    const value& child(std::size_t i) const noexcept {
        return arr ? (*arr)[i] : (obj->begin() + static_cast<std::ptrdiff_t>(i))->second;
    }
    const std::string& key(std::size_t i) const noexcept {
        return (obj->begin() + static_cast<std::ptrdiff_t>(i))->first;
    }
};

/// The JSON path of the child being visited in the innermost frame, e.g.
/// `$["bookmarks"][3]`. Very deep paths keep their first and last 16 steps.
inline std::string format_path(const std::vector<walk_frame>& frames) {
    std::string out = "$";
    auto step = [&out](const walk_frame& f) {
        out += '[';
        if (f.obj)
            append_quoted_for_message(out, f.key(f.next - 1));
        else
            out += std::to_string(f.next - 1);
        out += ']';
    };
    constexpr std::size_t shown = 16;
    if (frames.size() <= 2 * shown) {
        for (const auto& f : frames)
            step(f);
        return out;
    }
    for (std::size_t i = 0; i < shown; ++i)
        step(frames[i]);
    out += "...(" + std::to_string(frames.size() - 2 * shown) + " more levels)...";
    for (std::size_t i = frames.size() - shown; i < frames.size(); ++i)
        step(frames[i]);
    return out;
}

inline void scalar_to_boost(const value& v, boost::json::value& out, const std::vector<walk_frame>& frames) {
    switch (v.kind()) {
    case value_kind::null: out = nullptr; break;
    case value_kind::boolean: out = v.get_bool(); break;
    case value_kind::int64: out = v.get_int64(); break;
    case value_kind::uint64: out = v.get_uint64(); break;
    case value_kind::float64: out = v.get_double(); break;
    case value_kind::string: out.emplace_string().assign(v.get_string().data(), v.get_string().size()); break;
    default: {
        std::string digits(v.big_integer_text().substr(0, 60));
        if (digits.size() < v.big_integer_text().size())
            digits += "...";
        throw error(make_error_code(errc::invalid_argument),
                    "the integer " + digits + " at " + format_path(frames) +
                        " is outside int64/uint64 and cannot be converted to boost::json");
    }
    }
}

/// Converts the array or object `root` into `out`, depth first.
inline void to_boost_tree(walk_frame root, boost::json::value& out) {
    std::vector<walk_frame> frames;
    std::vector<boost::json::value*> targets; // targets[k] is being filled from frames[k]
    auto open = [&](walk_frame f, boost::json::value& target) {
        // Reserved in full, so the slots taken below never move.
        if (f.arr)
            target.emplace_array().reserve(f.size());
        else
            target.emplace_object().reserve(f.size());
        frames.push_back(f);
        targets.push_back(&target);
    };
    open(root, out);
    while (!frames.empty()) {
        walk_frame& f = frames.back();
        if (f.next == f.size()) {
            frames.pop_back();
            targets.pop_back();
            continue;
        }
        const std::size_t i = f.next++;
        const value& child = f.child(i);
        boost::json::value& slot = f.arr ? targets.back()->get_array().emplace_back(nullptr)
                                         : targets.back()->get_object().emplace(f.key(i), nullptr).first->value();
        if (child.is_structured())
            open(walk_frame::of(child), slot); // invalidates f
        else
            scalar_to_boost(child, slot, frames);
    }
}

} // namespace detail

inline boost::json::value value::to_boost() const {
    boost::json::value out;
    if (is_structured())
        detail::to_boost_tree(detail::walk_frame::of(*this), out);
    else
        detail::scalar_to_boost(*this, out, {});
    return out;
}

inline boost::json::array array::to_boost() const {
    boost::json::value out;
    detail::to_boost_tree({this, nullptr, 0}, out);
    return std::move(out.get_array());
}

inline boost::json::object object::to_boost() const {
    boost::json::value out;
    detail::to_boost_tree({nullptr, this, 0}, out);
    return std::move(out.get_object());
}

} // namespace chstate
