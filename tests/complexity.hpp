// Complexity checked as a ratio between two sizes measured in the same run,
// never as work finishing within a fixed wall-clock time: a correct library
// must not fail because the machine is busy.
//
// Each size is timed in the calling thread's CPU time (which other processes
// on the machine do not inflate: a busy machine delays the thread, it does
// not make it do more work), the best of several rounds, interleaved (small,
// large, small, large, ...) so a slow moment hits both sizes alike.
#pragma once

#include <algorithm>
#include <ctime>
#include <limits>
#include <ostream>

namespace chstate::test {

/// CPU seconds the calling thread spent in f().
template <class F>
double thread_cpu_seconds(F&& f) {
    auto now = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
    };
    const double start = now();
    f();
    return now() - start;
}

/// The best CPU time of `small` and of `large` over `rounds` interleaved
/// rounds; ratio() is what the larger input costs relative to the smaller.
struct growth {
    double small_seconds = std::numeric_limits<double>::infinity();
    double large_seconds = std::numeric_limits<double>::infinity();
    double ratio() const { return large_seconds / std::max(small_seconds, 1e-9); }
    friend std::ostream& operator<<(std::ostream& os, const growth& g) {
        return os << "small " << g.small_seconds * 1e3 << " ms, large " << g.large_seconds * 1e3
                  << " ms CPU: ratio " << g.ratio();
    }
};

template <class Small, class Large>
growth growth_of(Small&& small, Large&& large, int rounds = 3) {
    growth g;
    for (int i = 0; i < rounds; ++i) {
        g.small_seconds = std::min(g.small_seconds, thread_cpu_seconds(small));
        g.large_seconds = std::min(g.large_seconds, thread_cpu_seconds(large));
    }
    return g;
}

} // namespace chstate::test
