// The store contract on the embedded engine (chDB), plus embedded-only cases.
//
// A missing libchdb.so fails every case here with the loader's message
// (run scripts/fetch-chdb.sh, or the README's test command, which does).
#include "support.hpp"

#include <doctest/doctest.h>

namespace embedded_tests {

using namespace chstate;

/// The process-wide engine: one data folder per process (a chDB rule).
/// Closed by main() after the tests (test::shutdown_hooks).
std::shared_ptr<chdb_engine> shared_engine() {
    static std::shared_ptr<chdb_engine> engine = [] {
        const char* base = std::getenv("CHSTATE_TEST_DIR");
        std::filesystem::path dir = base ? base : std::filesystem::temp_directory_path();
        dir /= "chstate-embedded-" + std::to_string(::getpid());
        std::filesystem::remove_all(dir);
        test::at_shutdown([] { engine.reset(); });
        return chdb_engine::open({.path = dir.string(), .library = {}, .threads = 4});
    }();
    return engine;
}

struct embedded_fixture {
    using transport_type = chdb_transport;
    static constexpr const char* name = "embedded";
    transport_type make_transport() { return chdb_transport(shared_engine()); }
};

} // namespace embedded_tests

// A named enclosing namespace: doctest's generated suite namespaces may
// collide between translation units.
namespace embedded_contract {
TEST_SUITE("embedded") {
    using fixture = embedded_tests::embedded_fixture;
#include "contract_cases.ipp"
}
} // namespace embedded_contract
