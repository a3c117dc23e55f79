// move(src, dst) while other clients update(src): no confirmed update is lost.
//
// Each round: `updaters` threads, each with a store of its own, update()
// src without pause, every call merging a key of its own into the partial
// state; once `before` updates are confirmed a third store moves src to a
// fresh dst; the updaters go on until `after` more are confirmed after the
// move returned. Every confirmed key must then be in dst's state or in
// src's (an update after the move recreates src). The move used to read src
// without its lock, write dst, then wait for the lock to delete src: every
// update confirmed in that wait was deleted (an outside test on chDB lost
// 1,504 of 1,664).
#pragma once

#include "support.hpp"

#include <chstate/chstate.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace chstate::test {

struct move_race_result {
    int rounds = 0;
    long confirmed = 0;     ///< update() calls that returned
    long lost = 0;          ///< of those, keys in neither dst nor src afterwards
    long failed = 0;        ///< update() calls that threw (their keys are not counted)
    std::string first_lost; ///< "round r: key k" of the first lost key
    std::string first_error;
};

/// Runs `rounds` rounds on stores over transports from `make()` with
/// options `o` (their schema and lock mode).
template <class Make>
move_race_result move_race(Make make, const store_options& o, int rounds, int updaters, int before, int after) {
    using store_t = basic_state_store<decltype(make())>;
    move_race_result r;
    store_t mover(make(), o);
    mover.ensure_schema();
    for (int round = 0; round < rounds; ++round) {
        const std::string src = "src" + std::to_string(round), dst = "dst" + std::to_string(round);
        std::mutex m;
        std::condition_variable cv;
        std::set<std::string> confirmed; // keys whose update() returned
        long failed = 0;
        bool stop = false;
        std::vector<std::thread> threads;
        for (int u = 0; u < updaters; ++u)
            threads.emplace_back([&, u] {
                store_t st(make(), o);
                for (int i = 0;; ++i) {
                    {
                        std::lock_guard lk(m);
                        if (stop)
                            return;
                    }
                    const std::string key = "u" + std::to_string(u) + "_" + std::to_string(i);
                    try {
                        st.update(state{src, json::object{{key, i}}, {}});
                        std::lock_guard lk(m);
                        confirmed.insert(key);
                    } catch (const std::exception& e) {
                        std::lock_guard lk(m);
                        ++failed;
                        if (r.first_error.empty())
                            r.first_error = e.what();
                    }
                    cv.notify_all();
                }
            });
        // (updates that keep failing end the round: its error is thrown)
        constexpr long give_up_after = 20;
        auto wait_for_count = [&](std::size_t n) {
            std::unique_lock lk(m);
            cv.wait(lk, [&] { return confirmed.size() >= n || failed >= give_up_after; });
            if (failed < give_up_after)
                return;
            stop = true;
            lk.unlock();
            for (auto& t : threads)
                t.join();
            throw std::runtime_error("move-race round " + std::to_string(round) + ": " +
                                     std::to_string(failed) + " updates failed; the first: " + r.first_error);
        };
        wait_for_count(std::size_t(before));
        std::string move_error;
        try {
            mover.move(src, dst);
        } catch (const std::exception& e) {
            move_error = e.what();
        }
        std::size_t at_move;
        {
            std::lock_guard lk(m);
            at_move = confirmed.size();
        }
        wait_for_count(at_move + std::size_t(after));
        {
            std::lock_guard lk(m);
            stop = true;
        }
        for (auto& t : threads)
            t.join();
        if (!move_error.empty())
            throw std::runtime_error("move-race round " + std::to_string(round) + ": the move failed: " + move_error);
        std::set<std::string> present;
        for (const auto& id : {src, dst})
            if (auto s = mover.get(id))
                for (const auto& kv : s->partial_state)
                    present.insert(kv.first);
        for (const auto& key : confirmed)
            if (!present.contains(key) && r.lost++ == 0)
                r.first_lost = "round " + std::to_string(round) + ": " + key;
        r.confirmed += static_cast<long>(confirmed.size());
        r.failed += failed;
        ++r.rounds;
    }
    return r;
}

/// The line a run prints: `move-race[label]: rounds=R confirmed=C lost=L`.
inline void print_move_race(const char* label, const move_race_result& r) {
    std::printf("move-race%s: rounds=%d confirmed=%ld lost=%ld failed_updates=%ld\n", label, r.rounds, r.confirmed,
                r.lost, r.failed);
    if (r.failed > 0)
        std::printf("move-race%s: the first failed update: %.300s\n", label, r.first_error.c_str());
    std::fflush(stdout);
}

} // namespace chstate::test
