// The hostile-input suite (issue 11): ids, patterns, states and URIs a
// hostile or careless user could pass, on every transport. Included once per
// transport, inside its suite, after contract_cases.ipp (store_under_test).
// Each input is one case of test::hostile() (tests/tallies.hpp).
