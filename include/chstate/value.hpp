// chstate/value.hpp — chstate's own JSON value: exact numbers, ordered keys.
//
// Meltano writes pipeline state with Python's `json` module, and a state
// store must give back exactly what it was given. boost::json::value cannot:
// it has no integers beyond int64/uint64, no NaN or Infinity, no lone
// surrogates, and its destructor, copy and comparison recurse. This type
// models what Python's json.loads produces:
//   * null, bool, and numbers kept exactly: integers of any size (int64,
//     uint64 above INT64_MAX, big_integer beyond that), doubles bit for bit
//     (NaN, ±Infinity and -0.0 included);
//   * strings of UTF-8 bytes; a lone surrogate such as "\ud800" is held in
//     WTF-8 (see detail/utf8.hpp) so that it is written back unchanged;
//   * arrays, and objects that keep their keys in insertion order with
//     Python dict semantics (a key appears once; assigning an existing key
//     keeps its position). Key order is part of the value: two objects with
//     the same entries in another order are not equal.
// Nothing here recurses on the shape of the data: destruction, copying,
// comparison and conversion use explicit heap worklists, so a value nested
// a million levels deep is handled on a thread with a small stack.
//
// Integers are normalised: a value that fits int64 is always stored as
// int64 (value(5u).kind() == value_kind::int64), uint64 holds only
// INT64_MAX+1..UINT64_MAX and big_integer only what lies outside
// [INT64_MIN, UINT64_MAX]. Equal numbers therefore have one representation;
// use to_number<T>() to read an integer whatever its kind.
//
// The accessors follow boost::json::value: is_xxx(), as_xxx() (checked,
// throws chstate::error with errc::invalid_argument), get_xxx() (unchecked)
// and if_xxx() (a pointer, or nullptr). Conversions from Boost.JSON are
// implicit; to_boost() converts back and throws for a big_integer, which
// Boost cannot hold. Brace initialisation follows Boost too:
// `value v = {{"a", 1}, {"b", {1, 2}}}` builds an object, `{1, 2}` an array.
// By the same rule `value{other}` would be an array holding `other`; it does
// not compile, since Boost cannot take a chstate::value: copy with
// parentheses or `=`. (array{a, b} holds chstate values.)
#pragma once

#include <chstate/detail/object_index.hpp>
#include <chstate/error.hpp>

#include <boost/json/value.hpp>

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace chstate {

enum class value_kind { null, boolean, int64, uint64, big_integer, float64, string, array, object };

/// "null", "bool", "int64", "uint64", "big integer", "double", "string", "array", "object".
constexpr std::string_view to_string(value_kind k) noexcept {
    switch (k) {
    case value_kind::null: return "null";
    case value_kind::boolean: return "bool";
    case value_kind::int64: return "int64";
    case value_kind::uint64: return "uint64";
    case value_kind::big_integer: return "big integer";
    case value_kind::float64: return "double";
    case value_kind::string: return "string";
    case value_kind::array: return "array";
    case value_kind::object: return "object";
    }
    return "unknown";
}

/// An integer given as decimal text, for values beyond int64/uint64.
/// The constructor accepts exactly JSON's integer syntax, -?(0|[1-9][0-9]*),
/// and throws chstate::error (errc::invalid_argument) for anything else.
/// A value built from one holds int64 or uint64 when the number fits.
struct big_integer {
    std::string text{};

    explicit big_integer(std::string_view decimal) : text(decimal) {
        std::string_view digits = decimal;
        if (!digits.empty() && digits.front() == '-')
            digits.remove_prefix(1);
        bool ok = !digits.empty() && (digits == "0" || digits.front() != '0');
        for (char c : digits)
            ok = ok && c >= '0' && c <= '9';
        if (!ok)
            throw error(make_error_code(errc::invalid_argument),
                        "not a decimal integer: \"" + std::string(decimal.substr(0, 100)) + "\"");
        if (text == "-0")
            text = "0";
    }

    friend bool operator==(const big_integer&, const big_integer&) = default;
};

class array;
class object;

namespace detail {
template <class T>
concept character = std::same_as<T, char> || std::same_as<T, wchar_t> || std::same_as<T, char8_t> ||
                    std::same_as<T, char16_t> || std::same_as<T, char32_t>;
template <class T>
concept signed_number = std::signed_integral<T> && !character<T> && sizeof(T) <= sizeof(std::int64_t);
template <class T>
concept unsigned_number =
    std::unsigned_integral<T> && !character<T> && !std::same_as<T, bool> && sizeof(T) <= sizeof(std::uint64_t);
} // namespace detail

/// A JSON value as Python's json module models it (see the top of this file).
class value {
public:
    /// null.
    value() noexcept {}
    value(std::nullptr_t) noexcept {}
    template <std::same_as<bool> Bool>
    value(Bool b) noexcept : bool_(b), kind_(value_kind::boolean) {}
    template <detail::signed_number T>
    value(T i) noexcept : int64_(i), kind_(value_kind::int64) {}
    template <detail::unsigned_number T>
    value(T u) noexcept {
        if (static_cast<std::uint64_t>(u) <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            int64_ = static_cast<std::int64_t>(u);
            kind_ = value_kind::int64;
        } else {
            uint64_ = u;
            kind_ = value_kind::uint64;
        }
    }
    template <class F>
        requires std::same_as<F, double> || std::same_as<F, float>
    value(F d) noexcept : double_(d), kind_(value_kind::float64) {}
    value(const char* s) : string_(s), kind_(value_kind::string) {}
    value(std::string s) noexcept : string_(std::move(s)), kind_(value_kind::string) {}
    value(std::string_view s) : string_(s), kind_(value_kind::string) {}
    /// int64 or uint64 when the number fits, else a big integer.
    value(big_integer b);
    value(array a);
    value(object o);
    /// Boost.JSON's kinds map one to one (a uint64 that fits int64 becomes int64).
    value(const boost::json::value& v) { from_boost(v); }
    value(const boost::json::object& o);
    value(const boost::json::array& a);
    /// Boost's literal heuristics: a list of {"key", value} pairs is an object,
    /// anything else an array.
    value(std::initializer_list<boost::json::value_ref> init) { from_boost(boost::json::value(init)); }

    value(const value& other);
    value(value&& other) noexcept { take(other); }
    value& operator=(const value& other) {
        value copy(other); // first: `other` may live inside *this
        return *this = std::move(copy);
    }
    value& operator=(value&& other) noexcept {
        if (this != &other) {
            value old(std::move(*this)); // freed last: `other` may live inside it
            take(other);
        }
        return *this;
    }
    ~value() { destroy(); }

    friend void swap(value& a, value& b) noexcept { a.swap(b); }
    void swap(value& other) noexcept {
        value t(std::move(*this));
        take(other);
        other.take(t);
    }

    value_kind kind() const noexcept { return kind_; }
    bool is_null() const noexcept { return kind_ == value_kind::null; }
    bool is_bool() const noexcept { return kind_ == value_kind::boolean; }
    bool is_int64() const noexcept { return kind_ == value_kind::int64; }
    bool is_uint64() const noexcept { return kind_ == value_kind::uint64; }
    bool is_big_integer() const noexcept { return kind_ == value_kind::big_integer; }
    bool is_double() const noexcept { return kind_ == value_kind::float64; }
    /// Any integer or double.
    bool is_number() const noexcept { return is_int64() || is_uint64() || is_big_integer() || is_double(); }
    bool is_string() const noexcept { return kind_ == value_kind::string; }
    bool is_array() const noexcept { return kind_ == value_kind::array; }
    bool is_object() const noexcept { return kind_ == value_kind::object; }
    bool is_structured() const noexcept { return is_array() || is_object(); }

    bool& as_bool() { return check(value_kind::boolean), bool_; }
    bool as_bool() const { return check(value_kind::boolean), bool_; }
    std::int64_t& as_int64() { return check(value_kind::int64), int64_; }
    std::int64_t as_int64() const { return check(value_kind::int64), int64_; }
    std::uint64_t& as_uint64() { return check(value_kind::uint64), uint64_; }
    std::uint64_t as_uint64() const { return check(value_kind::uint64), uint64_; }
    double& as_double() { return check(value_kind::float64), double_; }
    double as_double() const { return check(value_kind::float64), double_; }
    std::string& as_string() { return check(value_kind::string), string_; }
    const std::string& as_string() const { return check(value_kind::string), string_; }
    array& as_array() { return check(value_kind::array), *array_; }
    const array& as_array() const { return check(value_kind::array), *array_; }
    object& as_object() { return check(value_kind::object), *object_; }
    const object& as_object() const { return check(value_kind::object), *object_; }

    bool& get_bool() noexcept { return bool_; }
    bool get_bool() const noexcept { return bool_; }
    std::int64_t& get_int64() noexcept { return int64_; }
    std::int64_t get_int64() const noexcept { return int64_; }
    std::uint64_t& get_uint64() noexcept { return uint64_; }
    std::uint64_t get_uint64() const noexcept { return uint64_; }
    double& get_double() noexcept { return double_; }
    double get_double() const noexcept { return double_; }
    std::string& get_string() noexcept { return string_; }
    const std::string& get_string() const noexcept { return string_; }
    array& get_array() noexcept { return *array_; }
    const array& get_array() const noexcept { return *array_; }
    object& get_object() noexcept { return *object_; }
    const object& get_object() const noexcept { return *object_; }

    bool* if_bool() noexcept { return is_bool() ? &bool_ : nullptr; }
    const bool* if_bool() const noexcept { return is_bool() ? &bool_ : nullptr; }
    std::int64_t* if_int64() noexcept { return is_int64() ? &int64_ : nullptr; }
    const std::int64_t* if_int64() const noexcept { return is_int64() ? &int64_ : nullptr; }
    std::uint64_t* if_uint64() noexcept { return is_uint64() ? &uint64_ : nullptr; }
    const std::uint64_t* if_uint64() const noexcept { return is_uint64() ? &uint64_ : nullptr; }
    double* if_double() noexcept { return is_double() ? &double_ : nullptr; }
    const double* if_double() const noexcept { return is_double() ? &double_ : nullptr; }
    std::string* if_string() noexcept { return is_string() ? &string_ : nullptr; }
    const std::string* if_string() const noexcept { return is_string() ? &string_ : nullptr; }
    array* if_array() noexcept { return is_array() ? array_ : nullptr; }
    const array* if_array() const noexcept { return is_array() ? array_ : nullptr; }
    object* if_object() noexcept { return is_object() ? object_ : nullptr; }
    const object* if_object() const noexcept { return is_object() ? object_ : nullptr; }

    /// The decimal digits of a big integer ("-?[1-9][0-9]*"); throws for any other kind.
    std::string_view big_integer_text() const { return check(value_kind::big_integer), string_; }

    /// Replaces the value with an empty array / object and returns it.
    array& emplace_array();
    object& emplace_object();

    /// as_object().at(key), as_array().at(index), and the object's
    /// if_contains (nullptr when this is not an object).
    value& at(std::string_view key);
    const value& at(std::string_view key) const;
    value& at(std::size_t index);
    const value& at(std::size_t index) const;
    value* if_contains(std::string_view key) noexcept;
    const value* if_contains(std::string_view key) const noexcept;

    /// The number as T when T represents it exactly (an integral double
    /// converts to an integer type, 2**53 to double, 0.1 not to float);
    /// otherwise ec is errc::invalid_argument and the result 0. Like
    /// boost::json::value::to_number, without Boost's silent rounding of
    /// integers to floating point.
    template <class T>
    T to_number(error_code& ec) const noexcept;
    /// Throwing form: chstate::error with errc::invalid_argument.
    template <class T>
    T to_number() const;

    /// The Boost.JSON equivalent; throws chstate::error (errc::invalid_argument,
    /// naming the path) for a big integer, which Boost cannot represent.
    boost::json::value to_boost() const;

    /// Equal kinds and contents: 1 != 1.0, doubles compare bit for bit
    /// (NaN == NaN, -0.0 != 0.0), objects compare in key order.
    friend bool operator==(const value& a, const value& b) { return equal(a, b); }

private:
    friend class object;

    void check(value_kind k) const {
        if (kind_ != k)
            throw error(make_error_code(errc::invalid_argument),
                        "JSON value is " + std::string(to_string(kind_)) + ", not " + std::string(to_string(k)));
    }

    /// Moves other's contents into *this, which holds null; other becomes null.
    /// (Once inlined, GCC 12 flags the string branch as reading uninitialised
    /// memory when a number is moved; that branch is unreachable for it.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
    void take(value& other) noexcept {
        switch (other.kind_) {
        case value_kind::null: break;
        case value_kind::boolean: bool_ = other.bool_; break;
        case value_kind::int64: int64_ = other.int64_; break;
        case value_kind::uint64: uint64_ = other.uint64_; break;
        case value_kind::float64: double_ = other.double_; break;
        case value_kind::string:
        case value_kind::big_integer:
            new (&string_) std::string(std::move(other.string_));
            other.string_.~basic_string();
            break;
        case value_kind::array: array_ = other.array_; break;
        case value_kind::object: object_ = other.object_; break;
        }
        kind_ = other.kind_;
        other.kind_ = value_kind::null;
    }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

    /// Copies a scalar or string into *this (null); for an array or object,
    /// makes an empty one of the same kind and returns false.
    bool copy_shallow(const value& other);
    void destroy() noexcept;
    void free_children_then_self() noexcept;
    void from_boost(const boost::json::value& v);
    bool from_boost_shallow(const boost::json::value& v);
    static bool equal(const value& a, const value& b);
    static bool equal_shallow(const value& a, const value& b) noexcept;

    union {
        bool bool_;
        std::int64_t int64_;
        std::uint64_t uint64_;
        double double_;
        std::string string_; // string, or a big integer's digits
        array* array_;       // owned
        object* object_;     // owned
    };
    value_kind kind_ = value_kind::null;
};

/// A sequence of values, like std::vector<value>.
class array {
public:
    using value_type = value;
    using size_type = std::size_t;
    using reference = value&;
    using const_reference = const value&;
    using iterator = std::vector<value>::iterator;
    using const_iterator = std::vector<value>::const_iterator;

    array() = default;
    array(std::initializer_list<value> init) : elems_(init) {}
    array(const boost::json::array& a) {
        elems_.reserve(a.size());
        for (const auto& v : a)
            elems_.emplace_back(v);
    }
    array(const array&) = default; // each element copies its own subtree without recursion
    array(array&&) noexcept = default;
    array& operator=(const array& other) {
        array copy(other); // first: `other` may live inside *this
        swap(copy);
        return *this;
    }
    array& operator=(array&& other) noexcept {
        array taken(std::move(other)); // `other` may live inside *this
        swap(taken);
        return *this;
    }
    ~array() = default;

    void swap(array& other) noexcept { elems_.swap(other.elems_); }
    friend void swap(array& a, array& b) noexcept { a.swap(b); }

    bool empty() const noexcept { return elems_.empty(); }
    std::size_t size() const noexcept { return elems_.size(); }
    std::size_t capacity() const noexcept { return elems_.capacity(); }
    void reserve(std::size_t n) { elems_.reserve(n); }
    void clear() noexcept { elems_.clear(); }

    void push_back(const value& v) { elems_.push_back(v); }
    void push_back(value&& v) { elems_.push_back(std::move(v)); }
    template <class... Args>
    value& emplace_back(Args&&... args) {
        return elems_.emplace_back(std::forward<Args>(args)...);
    }
    void pop_back() { elems_.pop_back(); }
    iterator erase(const_iterator pos) { return elems_.erase(pos); }

    value& operator[](std::size_t i) noexcept { return elems_[i]; }
    const value& operator[](std::size_t i) const noexcept { return elems_[i]; }
    /// Throws std::out_of_range.
    value& at(std::size_t i) { return elems_.at(i); }
    const value& at(std::size_t i) const { return elems_.at(i); }
    value& front() noexcept { return elems_.front(); }
    const value& front() const noexcept { return elems_.front(); }
    value& back() noexcept { return elems_.back(); }
    const value& back() const noexcept { return elems_.back(); }

    iterator begin() noexcept { return elems_.begin(); }
    iterator end() noexcept { return elems_.end(); }
    const_iterator begin() const noexcept { return elems_.begin(); }
    const_iterator end() const noexcept { return elems_.end(); }
    const_iterator cbegin() const noexcept { return elems_.cbegin(); }
    const_iterator cend() const noexcept { return elems_.cend(); }

    /// Throws chstate::error for a big integer (see value::to_boost).
    boost::json::array to_boost() const;

    friend bool operator==(const array& a, const array& b) { return a.elems_ == b.elems_; }

private:
    friend class value;
    std::vector<value> elems_;
};

/// An insertion-ordered map from string to value with Python dict
/// semantics: each key once, a new key goes to the end, assigning an
/// existing key replaces its value in place, erasing keeps the order of the
/// rest. Iteration yields std::pair<const std::string, value> (keys are
/// const, as in std::map: renaming a key behind the object's back would
/// corrupt its index), so `for (auto& [key, v] : obj)` works.
/// Lookups are O(1) on average at any size (see detail/object_index.hpp);
/// erase is O(size).
class object {
public:
    using key_type = std::string;
    using mapped_type = value;
    using value_type = std::pair<const std::string, value>;
    using size_type = std::size_t;
    using iterator = std::vector<value_type>::iterator;
    using const_iterator = std::vector<value_type>::const_iterator;

    object() = default;
    /// Boost-style literal: `object o = {{"bookmarks", {{"users", 5}}}};`
    /// Each value is built by Boost's value_ref rules, then converted. A
    /// repeated key keeps its first position and its last value, as in a
    /// Python dict literal.
    object(std::initializer_list<std::pair<std::string_view, boost::json::value_ref>> init) {
        reserve(init.size());
        for (const auto& [key, ref] : init)
            insert_or_assign(std::string(key), value(static_cast<boost::json::value>(ref)));
    }
    object(const boost::json::object& o) {
        reserve(o.size());
        for (const auto& kv : o)
            append(std::string(kv.key()), value(kv.value()));
    }
    object(const object&) = default; // each value copies its own subtree without recursion
    object(object&&) noexcept = default;
    object& operator=(const object& other) {
        object copy(other); // first: `other` may live inside *this
        swap(copy);
        return *this;
    }
    object& operator=(object&& other) noexcept {
        object taken(std::move(other)); // `other` may live inside *this
        swap(taken);
        return *this;
    }
    ~object() = default;

    void swap(object& other) noexcept {
        entries_.swap(other.entries_);
        std::swap(index_, other.index_);
    }
    friend void swap(object& a, object& b) noexcept { a.swap(b); }

    bool empty() const noexcept { return entries_.empty(); }
    std::size_t size() const noexcept { return entries_.size(); }
    std::size_t capacity() const noexcept { return entries_.capacity(); }
    void reserve(std::size_t n) {
        if (n > entries_.capacity())
            relocate(n);
    }
    void clear() noexcept {
        entries_.clear();
        index_.clear();
    }

    iterator begin() noexcept { return entries_.begin(); }
    iterator end() noexcept { return entries_.end(); }
    const_iterator begin() const noexcept { return entries_.begin(); }
    const_iterator end() const noexcept { return entries_.end(); }
    const_iterator cbegin() const noexcept { return entries_.cbegin(); }
    const_iterator cend() const noexcept { return entries_.cend(); }

    iterator find(std::string_view key) noexcept {
        const std::size_t i = position(key);
        return i == npos ? end() : begin() + static_cast<std::ptrdiff_t>(i);
    }
    const_iterator find(std::string_view key) const noexcept {
        const std::size_t i = position(key);
        return i == npos ? end() : begin() + static_cast<std::ptrdiff_t>(i);
    }
    bool contains(std::string_view key) const noexcept { return position(key) != npos; }
    value* if_contains(std::string_view key) noexcept {
        const std::size_t i = position(key);
        return i == npos ? nullptr : &entries_[i].second;
    }
    const value* if_contains(std::string_view key) const noexcept {
        const std::size_t i = position(key);
        return i == npos ? nullptr : &entries_[i].second;
    }
    /// Throws std::out_of_range naming the key.
    value& at(std::string_view key) { return const_cast<value&>(std::as_const(*this).at(key)); }
    const value& at(std::string_view key) const {
        if (const value* v = if_contains(key))
            return *v;
        throw std::out_of_range("chstate::object::at: no key \"" + std::string(key.substr(0, 200)) + "\"");
    }
    /// The value under `key`, appending null when there is none.
    value& operator[](std::string_view key) {
        const std::size_t i = position(key);
        return i == npos ? append(std::string(key), value()) : entries_[i].second;
    }
    /// Python's d[key] = v: replaces the value of an existing key in place,
    /// else appends. `second` is true when the key is new.
    std::pair<iterator, bool> insert_or_assign(std::string key, value v) {
        const std::size_t i = position(key);
        if (i != npos) {
            entries_[i].second = std::move(v);
            return {begin() + static_cast<std::ptrdiff_t>(i), false};
        }
        append(std::move(key), std::move(v));
        return {end() - 1, true};
    }
    /// As boost::json::object::emplace: inserts when `key` is absent.
    std::pair<iterator, bool> emplace(std::string key, value v) {
        if (const std::size_t i = position(key); i != npos)
            return {begin() + static_cast<std::ptrdiff_t>(i), false};
        append(std::move(key), std::move(v));
        return {end() - 1, true};
    }
    /// Removes `key` (keeping the order of the rest); returns how many
    /// entries were removed, 0 or 1.
    std::size_t erase(std::string_view key) {
        const std::size_t i = position(key);
        if (i == npos)
            return 0;
        erase(begin() + static_cast<std::ptrdiff_t>(i));
        return 1;
    }
    /// Removes the entry at `pos`; returns the iterator to the one after it.
    iterator erase(const_iterator pos);

    /// Throws chstate::error for a big integer (see value::to_boost).
    boost::json::object to_boost() const;
    operator boost::json::object() const { return to_boost(); }

    /// Same keys in the same order with equal values.
    friend bool operator==(const object& a, const object& b) {
        if (a.size() != b.size())
            return false;
        for (std::size_t i = 0; i < a.size(); ++i)
            if (a.entries_[i].first != b.entries_[i].first || !(a.entries_[i].second == b.entries_[i].second))
                return false;
        return true;
    }

private:
    friend class value;
    static constexpr std::size_t npos = detail::key_index::npos;

    std::size_t position(std::string_view key) const noexcept {
        if (index_.active())
            return index_.find(entries_, key);
        for (std::size_t i = 0; i < entries_.size(); ++i)
            if (entries_[i].first == key)
                return i;
        return npos;
    }

    /// Appends a key known to be absent.
    value& append(std::string key, value v) {
        if (entries_.size() == entries_.capacity())
            relocate(entries_.empty() ? 4 : entries_.size() * 2);
        entries_.emplace_back(std::piecewise_construct, std::forward_as_tuple(std::move(key)),
                              std::forward_as_tuple(std::move(v)));
        if (entries_.size() > detail::key_index::threshold) {
            try {
                index_.add_last(entries_);
            } catch (...) {
                entries_.pop_back();
                throw;
            }
        }
        return entries_.back().second;
    }

    /// Moves the entries to storage for `capacity` of them.
    void relocate(std::size_t capacity);

    void reindex() {
        if (entries_.size() > detail::key_index::threshold)
            index_.rebuild(entries_);
        else
            index_.clear();
    }

    std::vector<value_type> entries_;
    detail::key_index index_; // active exactly when size() > threshold
};

} // namespace chstate

#include <chstate/detail/value_impl.hpp>
