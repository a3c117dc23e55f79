// What the store adds on top of the engine: the same statements sent raw
// through the same transport are the floor, measured in the same run.
// Prints medians and the ratio store/raw for get and set, and what the
// monotonic version costs over the seed's INSERT. Machines here are
// shared and noisy: read the ratios, not the absolute times.
//
//   store_overhead [iterations]
#include "timing.hpp"

#include <chstate/chstate.hpp>
#include <chstate/detail/statements.hpp>

#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <vector>

namespace asio = boost::asio;
using namespace chstate;
using bench::append;
using bench::sample;

namespace {

void raw(chdb_transport& t, const statement& s) {
    diagnostics diag;
    t.async_execute(s, [](std::string_view) { return error_code{}; }, diag, asio::use_future).get();
}

} // namespace

int main(int argc, char** argv) {
    const int n = argc > 1 ? std::atoi(argv[1]) : 300;
    auto dir = std::filesystem::temp_directory_path() / ("chstate-bench-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    chdb_transport transport({.path = dir.string()});
    store_options options;
    options.schema = "bench";
    embedded_state_store store(transport, options);
    store.ensure_schema();

    state s{"dev:bench", json::object{{"bookmarks", json::object{{"t", 1}}}}, json::object{{"done", true}}};
    store.set(s);
    detail::statements st(detail::table_names("bench", "state"), detail::server_features::from_version("26.5"));
    const auto select = st.select_state("dev:bench");
    detail::serialized_parts parts;
    diagnostics diag;
    detail::serialize_parts(s, parts, diag);
    const auto insert = st.insert_state("dev:bench", parts.partial, parts.completed);
    // The seed's INSERT … VALUES (write_versions::clock): what monotonic versions cost.
    detail::statements seed(detail::table_names("bench", "state"), detail::server_features::from_version("26.5"),
                            false);
    const auto seed_insert = seed.insert_state("dev:bench", parts.partial, parts.completed);

    // Warm up both paths, then interleave the measurements in rounds so a
    // burst of noise hits both alike.
    for (int i = 0; i < 20; ++i) {
        store.get("dev:bench");
        raw(transport, select);
    }
    std::vector<double> store_get, raw_get, store_set, raw_set, raw_seed_set;
    for (int round = 0; round < 5; ++round) {
        append(store_get, sample(n / 5, [&](int) { store.get("dev:bench"); }));
        append(raw_get, sample(n / 5, [&](int) { raw(transport, select); }));
        append(store_set, sample(n / 5, [&](int) { store.set(s); }));
        append(raw_set, sample(n / 5, [&](int) { raw(transport, insert); }));
        append(raw_seed_set, sample(n / 5, [&](int) { raw(transport, seed_insert); }));
    }
    auto report = [](const char* what, const std::vector<double>& ours, const std::vector<double>& floor) {
        double m = bench::median(ours), f = bench::median(floor);
        std::printf("%-4s store median %8.1f us | raw statement median %8.1f us | ratio %.2f\n", what, m, f, m / f);
    };
    std::printf("store_overhead: chDB embedded, %d iterations each\n", n);
    report("get", store_get, raw_get);
    report("set", store_set, raw_set);
    double mono = bench::median(raw_set), plain = bench::median(raw_seed_set);
    std::printf("monotonic INSERT … SELECT median %8.1f us | seed INSERT … VALUES median %8.1f us | ratio %.2f\n",
                mono, plain, mono / plain);
    std::filesystem::remove_all(dir);
}
