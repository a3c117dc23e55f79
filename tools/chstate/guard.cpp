// tools/chstate/guard.cpp — the guard between `chstate lock` and its command.
//
// `chstate lock ID -- CMD` does not start CMD itself: it starts a copy of
// itself (/proc/self/exe, argv[1] == guard_marker) that starts CMD and
// stays its parent. The guard is a fresh single-threaded process, so it can
// do what a thread-pooled chstate cannot do safely between fork and exec:
//   * the kernel sends it SIGUSR2 when the chstate that started it ends, on
//     every way it can end — SIGKILL (an OOM kill, a node drain) included
//     (PR_SET_PDEATHSIG);
//   * it is the subreaper of CMD's process tree (PR_SET_CHILD_SUBREAPER):
//     every descendant whose parent exits becomes its child, so it finds the
//     whole tree, whatever CMD forks, double-forks or detaches;
//   * when chstate has ended, or CMD has exited leaving processes behind, it
//     stops the tree: SIGTERM, then SIGKILL to what is left after
//     guard_grace. A job never runs on without the lock it was started
//     under.
// It forwards the signals chstate forwards to it (a kill, not the terminal's,
// which reaches the whole foreground group, CMD included) to CMD, stops the
// tree on chstate's SIGUSR1 (the lock was lost), and exits
// with CMD's status (128 + N when signal N ended it; 126/127 when CMD could
// not be run, as a shell says), which chstate passes on.
#include "cli.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <set>
#include <string>
#include <string_view>

#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace chstate_cli {

namespace {

constexpr auto guard_grace = std::chrono::seconds(5);

/// This process's children now, from /proc (every process whose parent it
/// is); `live_only`: not those that have ended and wait to be reaped.
std::set<pid_t> children(bool live_only = false) {
    std::set<pid_t> out;
    const pid_t self = ::getpid();
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos)
            continue;
        // pid (comm) state ppid …: comm is the process's to choose, spaces,
        // parentheses and newlines included, so the whole file is read and
        // the last ')' ends it.
        std::ifstream stat(entry.path() / "stat", std::ios::binary);
        const std::string text{std::istreambuf_iterator<char>(stat), std::istreambuf_iterator<char>()};
        const auto close = text.rfind(')');
        if (close == std::string::npos)
            continue;
        char state = 0;
        long ppid = 0;
        if (std::sscanf(text.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == self &&
            !(live_only && state == 'Z'))
            out.insert(static_cast<pid_t>(std::stol(name)));
    }
    return out;
}

/// Reaps every child that has ended; records `job`'s status.
void reap(pid_t job, bool& job_done, int& job_status) {
    int st = 0;
    for (pid_t p; (p = ::waitpid(-1, &st, WNOHANG)) > 0;)
        if (p == job) {
            job_done = true;
            job_status = exit_status_of(st);
        }
}

/// Stops every process left in the tree: SIGTERM now (and to each process
/// that becomes a child later), SIGKILL after guard_grace; returns when none
/// is left. (A process in uninterruptible sleep delays it until it wakes.)
void stop_tree(pid_t job, bool& job_done, int& job_status) {
    const auto kill_at = std::chrono::steady_clock::now() + guard_grace;
    std::set<pid_t> termed;
    for (;;) {
        reap(job, job_done, job_status);
        const std::set<pid_t> now = children();
        if (now.empty())
            return;
        const bool late = std::chrono::steady_clock::now() >= kill_at;
        for (pid_t p : now)
            if (late)
                ::kill(p, SIGKILL);
            else if (termed.insert(p).second)
                ::kill(p, SIGTERM);
        ::usleep(20'000);
    }
}

} // namespace

void stop_descendants() {
    bool done = false;
    int status = 0;
    stop_tree(0, done, status);
}

int run_guard(int argc, char** argv) {
    // chstate MARKER PARENT_PID -- CMD [ARG...]
    if (argc < 5 || std::string_view(argv[3]) != "--")
        return exit_lock_failed;
    const pid_t parent = static_cast<pid_t>(std::atol(argv[2]));
    ::prctl(PR_SET_PDEATHSIG, SIGUSR2);
    if (::getppid() != parent) // chstate ended before the line above
        return exit_lock_failed;
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    // Its messages must not end it: with chstate killed, whoever read
    // chstate's stderr may be gone too (the command gets SIGPIPE's default).
    ::signal(SIGPIPE, SIG_IGN);

    // The mask chstate gave us is the command's; ours blocks what we wait for.
    sigset_t command_mask;
    ::sigprocmask(SIG_SETMASK, nullptr, &command_mask);
    sigset_t waited;
    sigemptyset(&waited);
    for (int s : forwarded_signals())
        sigaddset(&waited, s);
    sigaddset(&waited, SIGCHLD);
    sigaddset(&waited, SIGUSR2);
    sigaddset(&waited, SIGUSR1); // from chstate: the lock is lost, stop the tree
    ::sigprocmask(SIG_BLOCK, &waited, nullptr);

    posix_spawnattr_t attr;
    ::posix_spawnattr_init(&attr);
    sigset_t defaults = waited;
    sigaddset(&defaults, SIGPIPE);
    ::posix_spawnattr_setsigdefault(&attr, &defaults);
    ::posix_spawnattr_setsigmask(&attr, &command_mask);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t job = 0;
    const int rc = ::posix_spawnp(&job, argv[4], nullptr, &attr, argv + 4, environ);
    ::posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        std::cerr << "chstate: lock: cannot run " << quoted(argv[4]) << ": " << std::strerror(rc) << '\n';
        return rc == ENOENT ? 127 : 126; // as a shell reports it
    }

    bool job_done = false;
    int job_status = 1;
    for (;;) {
        timespec tick{0, 200'000'000};
        siginfo_t info{};
        const int sig = ::sigtimedwait(&waited, &info, &tick);
        // Forwarded: what chstate sends (it forwards what a process sent it).
        // Not a signal sent to the whole group (kill -TERM -PGID, timeout(1))
        // or by the terminal: the command, in the same group, has it already.
        const bool from_chstate = (info.si_code == SI_USER || info.si_code == SI_QUEUE) && info.si_pid == parent;
        if (sig == SIGUSR1 && from_chstate) {
            stop_tree(job, job_done, job_status);
            return job_status;
        }
        if (sig > 0 && sig != SIGCHLD && sig != SIGUSR2 && sig != SIGUSR1 && from_chstate && !job_done)
            ::kill(job, sig);
        reap(job, job_done, job_status);
        if (::getppid() != parent) {
            std::cerr << "chstate: lock: chstate ended while its command ran; stopping the command and what it "
                         "started (SIGTERM, then SIGKILL after "
                      << guard_grace.count() << " s)\n";
            stop_tree(job, job_done, job_status);
            return exit_lock_failed; // (nobody waits for it)
        }
        if (job_done) {
            if (const auto left = children(true); !left.empty()) {
                std::cerr << "chstate: lock: the command left " << left.size()
                          << " process(es) running; stopping them before the lock is released (SIGTERM, then "
                             "SIGKILL after "
                          << guard_grace.count() << " s)\n";
                stop_tree(job, job_done, job_status);
            }
            return job_status;
        }
    }
}

} // namespace chstate_cli
