// Tests of include/chstate/detail/shown.hpp: user's text as messages quote it.
// Part of the unit suite: included by tests/unit.cpp, inside TEST_SUITE("unit").

TEST_CASE("shown: ids in messages are bounded, one line, and cut between characters") {
    using detail::shown;
    CHECK(shown("job") == "job");
    CHECK(shown("a\nb\tc\x7f") == "a?b?c?");
    CHECK(shown(std::string(detail::shown_bytes, 'x')) == std::string(detail::shown_bytes, 'x'));
    const std::string big(10'000'000, 'i');
    CHECK(shown(big) == std::string(detail::shown_bytes, 'i') + "… (10000000 bytes)");
    // é is two bytes: a cut at 200 would fall inside the 100th one.
    std::string accents = "x";
    for (int i = 0; i < 150; ++i)
        accents += "\xc3\xa9";
    const std::string s = shown(accents);
    CHECK(s == "x" + accents.substr(1, 198) + "… (301 bytes)");
    // A store's message for a 1 MiB id stays short.
    const std::string id(1 << 20, 'k');
    diagnostics d;
    detail::could_not_acquire(d, id);
    CHECK(d.message.size() < 400);
    CHECK(d.message.starts_with("Could not acquire lock for state_id: kkk"));
}
