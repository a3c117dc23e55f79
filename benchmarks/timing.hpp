// Timing helpers shared by the benchmarks: samples of a call, and medians
// (these machines are shared and noisy, so benchmarks report medians).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace chstate::bench {

/// Runs f(i) n times; returns each call's duration in `Unit` (default µs).
template <class Unit = std::micro, class F>
std::vector<double> sample(int n, F&& f) {
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        f(i);
        out.push_back(std::chrono::duration<double, Unit>(std::chrono::steady_clock::now() - t0).count());
    }
    return out;
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/// Appends `more` to `all` (benchmarks interleave rounds so noise hits every path alike).
inline void append(std::vector<double>& all, const std::vector<double>& more) {
    all.insert(all.end(), more.begin(), more.end());
}

} // namespace chstate::bench
