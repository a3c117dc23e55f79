// tools/chstate/cli.hpp — the parts of the `chstate` command-line tool that
// need neither Asio nor the store: exit codes, argument parsing, JSON text
// layout, files, the terminal, progress, the editor and child processes.
// Implemented in cli.cpp and help.cpp; the store and the commands are in
// main.cpp (the one translation unit that includes Boost.Beast).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <signal.h>

namespace chstate_cli {

/// The process's exit status, one per class of failure (documented in
/// `chstate --help`). `lock` exits with its command's status once the
/// command has started, and with exit_lock_failed or exit_lock_lost for its
/// own failures, codes a command's own status is not mistaken for (as
/// timeout(1) and env(1) reserve 124 to 127).
enum exit_status : int {
    exit_ok = 0,
    exit_failure = 1,       ///< anything not below (a file that cannot be read, …)
    exit_usage = 2,         ///< bad arguments or configuration; refused without --force
    exit_not_found = 3,     ///< the state the command needs does not exist
    exit_locked = 4,        ///< the lock was not acquired in time, or was lost
    exit_server = 5,        ///< ClickHouse refused the statement, or a stored state is unreadable
    exit_connection = 6,    ///< network, connection, timeout; the embedded engine could not be opened
    exit_invalid_input = 7, ///< the state given is not JSON, not an object, lacks singer_state, …
    exit_lock_lost = 124,   ///< lock: the lock was lost while the command ran; the command was stopped
    exit_lock_failed = 125, ///< lock: chstate failed before the command ran (usage, lock not acquired, …)
};

/// A failure with its exit status; main prints `chstate: <command>: <message>`.
struct failure : std::runtime_error {
    int status;
    failure(int s, const std::string& message) : std::runtime_error(message), status(s) {}
};
inline failure usage_error(const std::string& message) { return failure(exit_usage, message); }

/// `message` as one line: control characters (newlines, tabs, escape
/// sequences from a state id) written as \xNN.
std::string one_line(std::string_view message);

/// `id` quoted for a message, one line (see one_line), at most
/// chstate::detail::shown_bytes of it (then its size).
std::string quoted(std::string_view id);
/// A path or setting for a message, unquoted: as one_line, cut as quoted()
/// cuts (chstate's bound on a user's text), "… (N bytes)" when it was cut.
std::string shortened(std::string_view text);

// ---- arguments ----------------------------------------------------------------

/// The options every command accepts (before or after the command words).
struct global_options {
    std::optional<std::string> uri;
    std::optional<double> lock_timeout_seconds;
    std::optional<std::string> lock_mode; ///< "automatic", "seed-compatible" or "strict"
    bool quiet = false;
};

/// One command line, split up. `words` are the command's positional
/// arguments after the command words ("state", "get"); `options` hold each
/// option's values (flags hold one empty string per use).
struct invocation {
    std::string command;                ///< "", "state", "state get", …, "lock"
    std::vector<std::string> words;     ///< positional arguments after the command
    std::map<std::string, std::vector<std::string>> options;
    std::vector<std::string> child;     ///< lock: the command after `--`
    bool dash_dash = false;             ///< a `--` was given
    bool help = false;
    bool version = false;
    global_options global;

    bool flag(const std::string& name) const { return options.count(name) != 0; }
    std::optional<std::string> value(const std::string& name) const;
};

/// Splits argv. Throws failure(exit_usage) for unknown commands and options,
/// an option given where its command does not take it, or a missing value.
invocation parse_command_line(int argc, char** argv);
/// The same into `inv`, which holds the command as soon as it is known:
/// a usage error then names it (`chstate: state copy: expected 2 …`).
void parse_command_line(int argc, char** argv, invocation& inv);

/// The usage text of `command` ("" for the tool itself, "state" for the group).
std::string help_text(const std::string& command);

/// `chstate --version`.
std::string version_text();

// ---- JSON text ------------------------------------------------------------------

/// `text` as written by json.dumps with its default separators (", ", ": ")
/// — what chstate::serialize_json writes — rewritten as
/// json.dumps(obj, separators=(",", ":")) would write the same value.
std::string compact_json(std::string_view text);

/// The same text as json.dumps(obj, indent=2) would write it.
std::string indented_json(std::string_view text);

// ---- files and the terminal --------------------------------------------------

/// The most bytes one state's JSON is read from a file or standard input
/// (set, merge, edit): the HTTP transport's own limit on a row.
inline constexpr std::size_t max_state_input_bytes = std::size_t(256) << 20;
/// The most bytes `state import` reads (a whole export, every state).
inline constexpr std::size_t max_import_input_bytes = std::size_t(1) << 30;

/// The whole file ("-": standard input), at most `limit` bytes. Throws
/// failure(exit_failure) when it cannot be read, failure(exit_invalid_input)
/// when it holds more than `limit` bytes (reading stops there: /dev/zero or
/// an endless pipe cost `limit` bytes of memory, no more).
std::string read_file(const std::string& path, std::size_t limit);

/// Writes `data` to `path` through a temporary file in the same folder,
/// renamed into place. Throws failure(exit_failure).
void write_file_atomically(const std::string& path, std::string_view data);

/// Writes all of `data` to standard output. Throws failure(exit_failure).
void write_stdout(std::string_view data);

bool stdin_is_terminal();
bool stderr_is_terminal();

/// Asks `question [y/N]` on the terminal (standard input and error) when
/// standard input is one; true only for y/yes. Without a terminal throws
/// failure(exit_usage) naming --force.
bool confirm(const std::string& question);

/// Where the embedded store lives when nothing is configured:
/// $XDG_STATE_HOME/chstate, else $HOME/.local/state/chstate; nullopt when
/// neither variable is set.
std::optional<std::string> default_embedded_folder();

/// True while another process has the embedded engine's data folder `dir`
/// open: chDB holds an exclusive flock on DIR/status for as long as it runs
/// and refuses a second process (printing its own message).
bool embedded_folder_busy(const std::string& dir);

// ---- progress ---------------------------------------------------------------------

/// Progress of a command over many states, on standard error: a bar redrawn
/// in place when standard error is a terminal, otherwise a line at most
/// once a second and one at the end. Thread-safe.
class progress {
public:
    progress(std::string label, std::uint64_t total, bool enabled);
    ~progress();
    void update(std::uint64_t done);
    void finish();

private:
    void draw(std::uint64_t done, bool final);
    std::string label_;
    std::uint64_t total_;
    bool enabled_;
    bool tty_;
    bool finished_ = false;
    std::mutex mutex_;
    std::chrono::steady_clock::time_point last_{};
};

// ---- processes --------------------------------------------------------------------

/// A waitpid() status as a shell reports it: the exit status, 128 + N for
/// signal N, 1 otherwise.
int exit_status_of(int wait_status);

/// Runs $VISUAL, else $EDITOR, else vi on `file` (through /bin/sh, so the
/// variable may carry arguments) and waits for it. Returns its exit status
/// (128 + signal when killed).
int run_editor(const std::string& file);

/// The signals `lock` forwards to its command.
const std::vector<int>& forwarded_signals();

/// Blocks the forwarded signals and SIGCHLD in the calling thread; call
/// before any other thread starts, so that every thread inherits the mask
/// and the signals wait for wait_for_signal. Returns the previous mask.
sigset_t block_lock_signals();

/// Waits up to `timeout` for a blocked signal; returns it (0 on timeout).
/// `from_process` tells whether a process sent it (kill) rather than the
/// terminal, which signals the whole foreground process group itself.
int wait_for_signal(std::chrono::milliseconds timeout, bool& from_process);

/// What supervise() needs to know while the command runs.
struct supervision {
    /// Polled about 5 times a second: a non-empty message means the lock is
    /// lost; the command's whole tree is stopped (SIGTERM, SIGKILL after 5 s)
    /// and the message printed.
    std::function<std::string()> lost;
    /// After this long, `stale_warning` is printed once (seed-compatible lock).
    std::optional<std::chrono::steady_clock::duration> warn_after;
    std::string stale_warning;
    std::string command_name = "lock"; ///< for messages
};

/// argv[1] of the guard process `lock` starts between itself and its
/// command (guard.cpp); main() hands such a process to run_guard first.
inline constexpr std::string_view guard_marker = "--chstate-internal-lock-guard";

/// The guard (guard.cpp): `chstate MARKER PARENT_PID -- CMD [ARG...]`.
/// Runs CMD, forwards the signals a process sends it, stops CMD's whole
/// process tree when PARENT_PID ends or when CMD exits leaving processes
/// behind, and returns CMD's status.
int run_guard(int argc, char** argv);

/// Stops every child of this process and what they started (guard.cpp:
/// SIGTERM, SIGKILL after 5 s); for `lock`, which is the subreaper of its
/// command's tree should the guard itself be killed.
void stop_descendants();

/// True when the command line names the `lock` command (for the exit status
/// of a command line that does not parse).
bool names_lock_command(int argc, char** argv);

/// The outcome of supervise().
struct child_outcome {
    int status = 0;         ///< exit status, 128 + signal when killed, 126/127 when it could not start
    bool started = false;
    bool lost = false;      ///< supervision.lost reported the lock lost
};

/// Starts `argv` (looked up in PATH) under a guard process (run_guard) with
/// `extra_env` added to the environment and the signal mask `child_mask`,
/// forwards the signals in forwarded_signals() that a process sends to
/// chstate, and waits for it. Should chstate end first, however it ends,
/// the guard stops the command's whole process tree.
/// The calling thread must have called block_lock_signals().
child_outcome supervise(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                        const sigset_t& child_mask, const supervision& watch);

} // namespace chstate_cli
