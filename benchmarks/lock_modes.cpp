// Uncontended update() on the embedded engine under each lock mode, with the
// default lock_options (settle 1 s in seed_compatible mode; no settle in
// strict mode). Prints medians and the ratio seed/strict. Machines here are
// shared and noisy: read the ratio, not the absolute times.
//
//   lock_modes [seed_iterations] [strict_iterations]     (defaults 5 and 200)
#include "timing.hpp"

#include <chstate/chstate.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace chstate;
namespace {

std::vector<double> measure_updates(embedded_state_store& store, int n) {
    return bench::sample<std::milli>(n, [&](int i) { store.update(state{"dev:bench", json::object{{"i", i}}, {}}); });
}

} // namespace

int main(int argc, char** argv) {
    const int seed_n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
    const int strict_n = argc > 2 ? std::max(1, std::atoi(argv[2])) : 200;
    auto dir = std::filesystem::temp_directory_path() / ("chstate-bench-locks-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    chdb_options engine_options;
    engine_options.path = dir.string();
    chdb_transport transport(engine_options);

    auto make_store = [&](const char* schema, lock_mode mode) {
        store_options o;
        o.schema = schema;
        o.lock.mode = mode;
        return std::make_unique<embedded_state_store>(transport, o);
    };
    auto seed = make_store("bench_seed", lock_mode::seed_compatible);
    auto strict = make_store("bench_strict", lock_mode::strict);
    seed->ensure_schema();
    strict->ensure_schema();
    // Warm up the strict path (the seed path is dominated by its settle wait).
    measure_updates(*strict, 10);
    measure_updates(*seed, 1);

    auto seed_ms = measure_updates(*seed, seed_n);
    auto strict_ms = measure_updates(*strict, strict_n);
    const double a = bench::median(seed_ms), b = bench::median(strict_ms);
    std::printf("lock_modes: chDB embedded, uncontended update(), %d seed_compatible and %d strict iterations\n",
                seed_n, strict_n);
    std::printf("update seed_compatible median %.1f ms | strict median %.2f ms | ratio %.0f\n", a, b, a / b);
    seed.reset();
    strict.reset();
    std::filesystem::remove_all(dir);
}
