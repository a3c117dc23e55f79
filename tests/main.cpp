// The doctest runner shared by every test translation unit.
//
// `chstate_tests --chstate-lock-stress-child …` is not a test run: it is one
// of the processes the server suite's lock stress test starts (server.cpp);
// `--chstate-cluster-child …` one of the cluster stress case's
// (cluster_cases.ipp); `--chstate-destroy-child …` the process in which
// a store opened on chDB owns its engine (server.cpp, "destroy-inflight").
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "shutdown.hpp"
#include "tallies.hpp"

#include <cstring>
#include <vector>

namespace chstate::test {
namespace {
std::vector<std::function<void()>>& hooks() {
    static std::vector<std::function<void()>> h;
    return h;
}
} // namespace
void at_shutdown(std::function<void()> hook) { hooks().push_back(std::move(hook)); }
void run_shutdown_hooks() {
    for (auto& hook : hooks())
        hook();
    hooks().clear();
}
} // namespace chstate::test

int chstate_lock_stress_child(int argc, char** argv);
int chstate_cluster_child(int argc, char** argv);
int chstate_destroy_child(int argc, char** argv);

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "--chstate-lock-stress-child") == 0)
        return chstate_lock_stress_child(argc, argv);
    if (argc > 1 && std::strcmp(argv[1], "--chstate-cluster-child") == 0)
        return chstate_cluster_child(argc, argv);
    if (argc > 1 && std::strcmp(argv[1], "--chstate-destroy-child") == 0)
        return chstate_destroy_child(argc, argv);
    doctest::Context context(argc, argv);
    int status = context.run();
    chstate::test::run_shutdown_hooks();
    chstate::test::print_tallies();
    return status;
}
