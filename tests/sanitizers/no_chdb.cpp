// Stands in for tests/embedded.cpp (and tests/cluster.cpp) in the sanitized
// test binaries (chstate_tests_no_chdb and chstate_tests_tsan, built by
// scripts/sanitizers.sh only).
//
// libchdb.so crashes inside its own start-up under AddressSanitizer, so a
// sanitized run must never load it. Without embedded.cpp the `embedded`
// suite does not exist in that binary, and the one other case that asks for
// this process's engine (server.cpp, "open: a clickhouse:// URI and a chdb:
// URI ...") is excluded by name in scripts/sanitizers.sh; should it run
// anyway, it fails here, loudly, instead of loading chDB.
#include <chstate/transport/chdb.hpp>

#include <cstdio>
#include <memory>
#include <stdexcept>

namespace embedded_tests {
std::shared_ptr<chstate::chdb_engine> shared_engine() {
    throw std::logic_error("sanitized test binary: this test case opens the embedded engine (chDB), which is never "
                           "loaded under sanitizers (it crashes in its own start-up under ASan); exclude it by name "
                           "in scripts/sanitizers.sh (chdb_cases)");
}
} // namespace embedded_tests

// The cluster suite is not compiled into the sanitized binaries (its rig is
// never run sanitized): its child-process entry point refuses.
int chstate_cluster_child(int, char**) {
    std::fputs("sanitized test binary: the cluster suite (tests/cluster.cpp) is not built into it\n", stderr);
    return 2;
}
