// Tests of include/chstate/detail/glob.hpp: the reference glob, translated for state_ids(pattern).
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

TEST_CASE("glob_match: * any run, ? one character (a UTF-8 sequence or a lone byte), all else literal characters") {
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
    // Glob and id are read as characters alike: a byte of the glob that is
    // not a whole character there never matches part of one in the id.
    CHECK_FALSE(glob_match("a\xc3*", "a\xc3\xa9"));           // \xc3 alone is not é
    CHECK(glob_match("a\xc3*", "a\xc3" "x"));                  // ... but matches itself alone
    CHECK(glob_match("a\xc3\xa9*", "a\xc3\xa9" "x"));
    CHECK_FALSE(glob_match("*\xa9", "\xc3\xa9"));              // nor the tail of one
    CHECK_FALSE(glob_match("*\xc3*\xa9", "\xc3\xc3\xa9"));
    CHECK(glob_match("*\xa9", "x\xa9"));                        // a lone continuation byte
    CHECK(glob_match("*\xe2\x82\xac?", "1\xe2\x82\xac\xe2\x82\xac")); // "*€?" on "1€€"
    CHECK(glob_match("*?\xe2\x82\xac", "\xe2\x82\xac\xe2\x82\xac"));
    CHECK_FALSE(glob_match("*??\xe2\x82\xac", "\xe2\x82\xac\xe2\x82\xac"));
    CHECK(glob_match("a*?b?*c", "a\xc3\xa9" "b\xff" "c"));
    CHECK(glob_match("*ab*ab", "abab"));
    CHECK_FALSE(glob_match("*ab*ab", "aba"));
    CHECK(glob_match("*aab", "aaab"));                             // a partial match restarts
    CHECK(glob_match("*a?a?b*", "aaxayb"));                      // ... also with `?` in it
    CHECK_FALSE(glob_match("*a?a?b*", "aaaxaaxab"));
    CHECK(detail::glob_literal_prefix("ab?c*") == "ab");
    CHECK(detail::glob_literal_prefix("*ab") == "");
    CHECK(detail::glob_literal_prefix("abc") == "abc");
}

TEST_CASE("glob_match: cost linear in the glob and the id (double both, at most 2.5x the CPU time)") {
    // The classes that made the one-backtrack-point matcher cost |glob| x
    // |id|: a long literal after a `*` that almost matches everywhere, many
    // `*`, runs of `?` between literals, and the same in two-byte characters.
    // Size k: ids of ~k bytes, globs with literals of ~k/20 bytes.
    const auto workload = [](std::size_t k) {
        std::vector<std::pair<std::string, std::string>> cases;
        const std::string as(k, 'a'), e_acute = "\xc3\xa9";
        std::string es;
        for (std::size_t i = 0; i < k / 2; ++i)
            es += e_acute;
        cases.emplace_back("gl:*" + as.substr(0, k / 20) + "b*", "gl:" + as);
        std::string many_stars = "gl:";
        for (std::size_t i = 0; i < k / 200; ++i)
            many_stars += "*a" + as.substr(0, 50);
        cases.emplace_back(many_stars + "*b*", "gl:" + as);
        std::string singles = "*";
        for (int i = 0; i < 32; ++i)
            singles += as.substr(0, k / 640) + "?";
        cases.emplace_back(singles + "b*", as);
        std::string uuid_like = "*";
        for (int i = 0; i < 8; ++i)
            uuid_like += "a????";
        cases.emplace_back(uuid_like + "b*", as);
        std::string wide = "*";
        for (std::size_t i = 0; i < k / 40; ++i)
            wide += e_acute;
        cases.emplace_back(wide + "?x*", es);
        return cases;
    };
    const auto small = workload(200'000), large = workload(400'000);
    std::size_t matched = 0;
    const auto run = [&](const auto& cases) {
        for (const auto& [glob, id] : cases)
            matched += detail::glob_match(glob, id);
    };
    // (the best of 5 rounds: with 3, one fresh-clone run measured 2.30, another 1.87)
    const auto g = test::growth_of([&] { run(small); }, [&] { run(large); }, 5);
    MESSAGE("glob-complexity: size ratio 2, " << g);
    std::cout << "glob-complexity: size_ratio=2 time_ratio=" << g.ratio() << "\n";
    CHECK(g.ratio() < 2.5);
    CHECK(matched == 0); // every case is a near miss: the matcher reads all of it
}
