// Complexity checked as a ratio between two sizes measured in the same run,
// never as work finishing within a fixed wall-clock time: a correct library
// must not fail because the machine is busy.
//
// Each size is timed in the calling thread's user CPU time (which other
// processes on the machine do not inflate: a busy machine delays the thread,
// it does not make it do more work; and without the kernel's time, so page
// faults — many more for a large input on a machine short of free memory —
// do not count), the best of several rounds, interleaved (small, large,
// small, large, ...) so a slow moment hits both sizes alike.
#pragma once

#include <algorithm>
#include <sys/resource.h>

#include <ctime>
#include <limits>
#include <ostream>

namespace chstate::test {

/// User CPU seconds the calling thread spent in f() (getrusage's
/// RUSAGE_THREAD: the kernel's time, page faults included, left out).
template <class F>
double thread_cpu_seconds(F&& f) {
    auto now = [] {
        rusage ru{};
        getrusage(RUSAGE_THREAD, &ru);
        return double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) * 1e-6;
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
                  << " ms user CPU: ratio " << g.ratio();
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
