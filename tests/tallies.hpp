// Counts kept by the suites that report one line each at the end of a run
// (main.cpp prints them; scripts/test.sh checks them on a full run):
//
//   hostile-input: cases=N failures=F   (hostile_input_cases.ipp, every transport)
//   faults: cases=N lost=L partial=P    (faults_cases.ipp, the private server)
//
// A case is counted when it has run; a failure is also a failed doctest
// check, so the line restates what doctest already decided, per kind of
// case, in the form CI greps for.
#pragma once

#include <atomic>
#include <cstdio>

namespace chstate::test {

struct hostile_tally {
    std::atomic<long> cases{0};
    std::atomic<long> failures{0};
};

struct fault_tally {
    std::atomic<long> cases{0};
    /// Writes that were acknowledged but not read back afterwards (with
    /// their value, or a newer one from the same writer).
    std::atomic<long> lost{0};
    /// States read back that are neither a value ever written to them nor
    /// absent, and set_all batches acknowledged but not wholly present.
    std::atomic<long> partial{0};
};

inline hostile_tally& hostile() {
    static hostile_tally t;
    return t;
}

inline fault_tally& faults() {
    static fault_tally t;
    return t;
}

/// main(): one line per suite that ran any case.
inline void print_tallies() {
    if (long n = hostile().cases.load())
        std::printf("hostile-input: cases=%ld failures=%ld\n", n, hostile().failures.load());
    if (long n = faults().cases.load())
        std::printf("faults: cases=%ld lost=%ld partial=%ld\n", n, faults().lost.load(), faults().partial.load());
    std::fflush(stdout);
}

} // namespace chstate::test
