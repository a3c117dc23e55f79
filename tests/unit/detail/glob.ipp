// Tests of include/chstate/detail/glob.hpp: the reference glob, translated for state_ids(pattern).
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

TEST_CASE("glob_match: * any run, ? one character (a UTF-8 sequence or a lone byte), all else literal bytes") {
    using detail::glob_match;
    CHECK(detail::glob_matches_all(""));
    CHECK(detail::glob_matches_all("*"));
    CHECK_FALSE(detail::glob_matches_all("**x"));
    CHECK(glob_match("dev_a*", "dev_abc"));
    CHECK_FALSE(glob_match("dev_a*", "devXabc")); // _ and % are literal
    CHECK(glob_match("100%?", "100%x"));
    CHECK_FALSE(glob_match("100%?", "1000x"));
    CHECK(glob_match("a\\b", "a\\b"));
    CHECK(glob_match("a*b", "a\xff" "b"));          // LIKE missed this: not UTF-8
    CHECK(glob_match("a?b", "a\xff" "b"));          // a lone byte is one character
    CHECK(glob_match("a?b", "a\xc3\xa9" "b"));     // é: one character of two bytes
    CHECK_FALSE(glob_match("a?b", "a\xc3\xa9\xa9" "b"));
    CHECK(glob_match("a??b", "a\xed\xa0" "b"));    // a truncated surrogate: two lone bytes
    CHECK(glob_match("a???b", "a\xed\xa0\x80" "b")); // a WTF-8 surrogate is three lone bytes
    CHECK(glob_match("*", std::string("\0", 1)));
    CHECK(glob_match("?", std::string("\0", 1)));
    CHECK_FALSE(glob_match("?", ""));
    CHECK(glob_match("*?*", "x"));
    CHECK_FALSE(glob_match("*?*?*", "x"));
    CHECK(glob_match("a*b*c", "a-b-b-c"));
    CHECK_FALSE(glob_match("a*b*c", "a-b-b-"));
    CHECK(glob_match("exact", "exact"));
    CHECK_FALSE(glob_match("exact", "exactly"));
    CHECK(detail::glob_literal_prefix("ab?c*") == "ab");
    CHECK(detail::glob_literal_prefix("*ab") == "");
    CHECK(detail::glob_literal_prefix("abc") == "abc");
}
