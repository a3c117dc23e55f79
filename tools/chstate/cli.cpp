// tools/chstate/cli.cpp — see cli.hpp. No Asio, no Boost: compiles quickly.
#include "cli.hpp"

#include <chstate/detail/shown.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace chstate_cli {

std::string one_line(std::string_view message) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(message.size());
    for (char ch : message) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c == 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += ch;
        }
    }
    return out;
}

std::string quoted(std::string_view id) {
    // At most chstate's own bound of a user's text in a message (cut between
    // characters): a 10 MB id makes a line of a few hundred bytes.
    const std::size_t cut = chstate::detail::shown_length(id);
    // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "\"" + std::string&&.
    std::string out(1, '"');
    out += one_line(id.substr(0, cut));
    if (cut < id.size())
        out += "…";
    out += '"';
    if (cut < id.size())
        out += " (" + std::to_string(id.size()) + " bytes)";
    return out;
}

std::string shortened(std::string_view text) {
    const std::size_t cut = chstate::detail::shown_length(text);
    std::string out = one_line(text.substr(0, cut));
    if (cut < text.size())
        out += "… (" + std::to_string(text.size()) + " bytes)";
    return out;
}

// ---- arguments ----------------------------------------------------------------------

namespace {

/// Options that take a value; every other option is a flag.
const std::set<std::string>& valued_options() {
    static const std::set<std::string> names{"uri",        "lock-timeout",  "lock-mode", "pattern", "format",
                                             "input-file", "from-state",    "from-state-id", "output"};
    return names;
}

/// Which options each command takes (beside the global ones), and how many words.
struct command_spec {
    std::set<std::string> options;
    std::size_t min_words;
    std::size_t max_words;
};

const std::map<std::string, command_spec>& commands() {
    static const std::map<std::string, command_spec> specs{
        {"state list", {{"pattern", "null"}, 0, 0}},
        {"state get", {{"format", "missing-ok"}, 1, 1}},
        {"state set", {{"input-file", "force", "no-validate"}, 1, 2}},
        {"state merge", {{"from-state", "from-state-id", "input-file", "no-validate"}, 1, 2}},
        {"state copy", {{"force"}, 2, 2}},
        {"state move", {{"force"}, 2, 2}},
        {"state clear", {{"all", "force"}, 0, 1}},
        {"state edit", {{"force", "no-validate"}, 1, 1}},
        {"state export", {{"output", "progress", "no-progress"}, 0, 0}},
        {"state import", {{"force", "progress", "no-progress"}, 0, 1}},
        {"lock", {{}, 1, 1}},
    };
    return specs;
}

const std::set<std::string>& global_option_names() {
    static const std::set<std::string> names{"uri", "lock-timeout", "lock-mode", "quiet", "help", "version"};
    return names;
}

} // namespace

std::optional<std::string> invocation::value(const std::string& name) const {
    auto it = options.find(name);
    if (it == options.end() || it->second.empty())
        return std::nullopt;
    return it->second.back();
}

bool names_lock_command(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--")
            return false;
        if (arg.size() > 2 && arg.substr(0, 2) == "--") {
            const std::string name(arg.substr(2, arg.find('=') == std::string_view::npos ? arg.npos : arg.find('=') - 2));
            if (arg.find('=') == std::string_view::npos && valued_options().count(name))
                ++i; // its value
            continue;
        }
        if (arg.size() > 1 && arg[0] == '-') // (a lone "-" is a word, as parse_command_line has it)
            continue;
        return arg == "lock";
    }
    return false;
}

invocation parse_command_line(int argc, char** argv) {
    invocation inv;
    parse_command_line(argc, argv, inv);
    return inv;
}

void parse_command_line(int argc, char** argv, invocation& inv) {
    inv = invocation{};
    std::vector<std::string> positional;
    std::vector<std::pair<std::string, std::string>> given; // name, value
    int i = 1;
    for (; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--") {
            inv.dash_dash = true;
            ++i;
            break;
        }
        if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
            std::string name = arg.substr(2);
            std::optional<std::string> v;
            if (auto eq = name.find('='); eq != std::string::npos) {
                v = name.substr(eq + 1);
                name.resize(eq);
            }
            if (valued_options().count(name)) {
                if (!v) {
                    if (i + 1 >= argc)
                        throw usage_error("option --" + name + " needs a value");
                    v = argv[++i];
                }
            } else if (v) {
                throw usage_error("option --" + name + " takes no value");
            }
            given.emplace_back(name, v.value_or(""));
        } else if (arg == "-h") {
            given.emplace_back("help", "");
        } else if (arg == "-q") {
            given.emplace_back("quiet", "");
        } else if (arg.size() > 1 && arg[0] == '-') {
            throw usage_error("unknown option " + one_line(arg));
        } else {
            positional.push_back(std::move(arg));
        }
    }
    std::vector<std::string> rest(argv + i, argv + argc);

    // The command words.
    std::size_t used = 0;
    bool help_command = false;
    if (!positional.empty() && positional[0] == "help") {
        help_command = true;
        inv.help = true;
        used = 1;
    }
    if (positional.size() > used) {
        const std::string& first = positional[used];
        if (first == "state") {
            inv.command = "state";
            ++used;
            if (positional.size() > used) {
                std::string sub = "state " + positional[used];
                if (!commands().count(sub))
                    throw failure(exit_usage, "unknown command \"" + one_line(positional[used]) +
                                                  "\" (see chstate state --help)");
                inv.command = sub;
                ++used;
            }
        } else if (first == "lock") {
            inv.command = "lock";
            ++used;
        } else {
            throw usage_error("unknown command \"" + one_line(first) + "\" (see chstate --help)");
        }
    }
    inv.words.assign(positional.begin() + static_cast<std::ptrdiff_t>(used), positional.end());
    if (help_command && !inv.words.empty())
        throw usage_error("help takes a command, e.g. chstate help state get");

    for (auto& [name, v] : given) {
        if (name == "help")
            inv.help = true;
        else if (name == "version")
            inv.version = true;
        else if (name == "quiet")
            inv.global.quiet = true;
        else if (name == "uri")
            inv.global.uri = v;
        else if (name == "lock-mode")
            inv.global.lock_mode = v;
        else if (name == "lock-timeout") {
            char* end = nullptr;
            errno = 0;
            double s = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || errno != 0 || !(s >= 0) || s > 1e6)
                throw usage_error("--lock-timeout takes seconds (0 to 1000000), not \"" + one_line(v) + "\"");
            inv.global.lock_timeout_seconds = s;
        }
        inv.options[name].push_back(v);
    }
    if (inv.help || inv.version)
        return;

    if (inv.command.empty())
        throw usage_error("no command given (see chstate --help)");
    if (inv.command == "state")
        throw usage_error("no state command given (see chstate state --help)");
    const command_spec& spec = commands().at(inv.command);
    for (auto& [name, values] : inv.options) {
        if (global_option_names().count(name))
            continue;
        if (!spec.options.count(name))
            throw usage_error("unknown option --" + one_line(name) + " (see chstate " + inv.command + " --help)");
        if (values.size() > 1)
            throw usage_error("option --" + name + " given more than once");
    }
    if (inv.command == "lock") {
        if (!inv.dash_dash)
            throw usage_error("expected -- before the command: chstate lock STATE_ID -- COMMAND [ARG...]");
        if (rest.empty())
            throw usage_error("no command after --: chstate lock STATE_ID -- COMMAND [ARG...]");
        inv.child = std::move(rest);
    } else {
        // After `--` everything is a word (a state id may begin with '-').
        inv.words.insert(inv.words.end(), rest.begin(), rest.end());
    }
    if (inv.words.size() < spec.min_words || inv.words.size() > spec.max_words) {
        std::string expected = spec.min_words == spec.max_words
                                   ? std::to_string(spec.min_words)
                                   : std::to_string(spec.min_words) + " to " + std::to_string(spec.max_words);
        throw usage_error("expected " + expected + " argument" + (spec.max_words == 1 ? "" : "s") + ", got " +
                          std::to_string(inv.words.size()) + " (see chstate " + inv.command + " --help)");
    }
}

// ---- JSON text ----------------------------------------------------------------------

std::string compact_json(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            out += c;
            if (c == '\\' && i + 1 < text.size())
                out += text[++i];
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
            out += c;
        } else if (c != ' ') {
            // Outside strings the default layout has spaces only after ',' and ':'.
            out += c;
        }
    }
    return out;
}

std::string indented_json(std::string_view text) {
    std::string out;
    out.reserve(text.size() * 2);
    std::size_t level = 0;
    auto newline = [&] {
        out += '\n';
        out.append(level * 2, ' ');
    };
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            out += c;
            if (c == '\\' && i + 1 < text.size())
                out += text[++i];
            else if (c == '"')
                in_string = false;
            continue;
        }
        switch (c) {
        case '"':
            in_string = true;
            out += c;
            break;
        case '{':
        case '[': {
            const char close = c == '{' ? '}' : ']';
            out += c;
            if (i + 1 < text.size() && text[i + 1] == close) {
                out += close; // Python writes an empty container as {} or []
                ++i;
            } else {
                ++level;
                newline();
            }
            break;
        }
        case '}':
        case ']':
            --level;
            newline();
            out += c;
            break;
        case ',':
            out += ',';
            newline();
            break;
        case ':':
            out += ": ";
            break;
        case ' ':
            break;
        default:
            out += c;
        }
    }
    return out;
}

// ---- files and the terminal --------------------------------------------------------

std::string read_file(const std::string& path, std::size_t limit) {
    std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
    if (!f)
        throw failure(exit_failure, "cannot open " + one_line(path) + ": " + std::strerror(errno));
    const std::string name = path == "-" ? std::string("standard input") : one_line(path);
    std::string data;
    char buffer[1 << 16];
    std::size_t n;
    bool too_large = false;
    while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) {
        if (n > limit - data.size()) {
            too_large = true;
            break;
        }
        data.append(buffer, n);
    }
    const bool bad = !too_large && std::ferror(f);
    const int err = errno;
    if (f != stdin)
        std::fclose(f);
    if (too_large)
        throw failure(exit_invalid_input, name + " holds more than " + std::to_string(limit) +
                                              " bytes, the most this command reads; nothing was written");
    if (bad)
        throw failure(exit_failure, "cannot read " + name + ": " + std::strerror(err));
    return data;
}

namespace {
bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}
} // namespace

void write_file_atomically(const std::string& path, std::string_view data) {
    std::string tmp = path + ".tmp-XXXXXX";
    int fd = ::mkstemp(tmp.data());
    if (fd < 0)
        throw failure(exit_failure, "cannot create " + one_line(tmp) + ": " + std::strerror(errno));
    const bool ok = write_all(fd, data) && ::fsync(fd) == 0;
    const int err = errno;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = ok ? errno : err;
        ::unlink(tmp.c_str());
        throw failure(exit_failure, "cannot write " + one_line(path) + ": " + std::strerror(e));
    }
}

void write_stdout(std::string_view data) {
    std::fflush(stdout);
    if (!write_all(STDOUT_FILENO, data))
        throw failure(exit_failure, std::string("cannot write to standard output: ") + std::strerror(errno));
}

bool stdin_is_terminal() { return ::isatty(STDIN_FILENO) == 1; }
bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

bool confirm(const std::string& question) {
    if (!stdin_is_terminal())
        throw usage_error(question + " — refused: standard input is not a terminal to confirm on; pass --force");
    std::cerr << question << " [y/N]: " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer))
        return false;
    std::transform(answer.begin(), answer.end(), answer.begin(), [](unsigned char c) { return std::tolower(c); });
    return answer == "y" || answer == "yes";
}

std::optional<std::string> default_embedded_folder() {
    const char* xdg = std::getenv("XDG_STATE_HOME");
    if (xdg && xdg[0] == '/') // the XDG specification ignores relative paths
        return std::string(xdg) + "/chstate";
    const char* home = std::getenv("HOME");
    if (home && home[0] != '\0')
        return std::string(home) + "/.local/state/chstate";
    return std::nullopt;
}

bool embedded_folder_busy(const std::string& dir) {
    const std::string status = dir + "/status";
    const int fd = ::open(status.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false; // no status file: no engine has the folder open
    bool busy = false;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0)
        ::flock(fd, LOCK_UN);
    else
        busy = errno == EWOULDBLOCK;
    ::close(fd);
    return busy;
}

// ---- progress ----------------------------------------------------------------------

progress::progress(std::string label, std::uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), tty_(stderr_is_terminal()) {}

progress::~progress() {
    // An interrupted bar still ends its line.
    std::lock_guard lk(mutex_);
    if (enabled_ && tty_ && !finished_ && last_ != std::chrono::steady_clock::time_point{})
        std::cerr << '\n' << std::flush;
}

void progress::update(std::uint64_t done) {
    if (!enabled_)
        return;
    std::lock_guard lk(mutex_);
    if (finished_)
        return;
    const auto now = std::chrono::steady_clock::now();
    const auto gap = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
    if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < gap)
        return;
    last_ = now;
    draw(done, false);
}

void progress::finish() {
    if (!enabled_)
        return;
    std::lock_guard lk(mutex_);
    if (finished_)
        return;
    finished_ = true;
    draw(total_, true);
}

void progress::draw(std::uint64_t done, bool final) {
    const std::string count = std::to_string(done) + "/" + std::to_string(total_) + " states";
    if (tty_) {
        constexpr std::size_t width = 30;
        const std::size_t filled = total_ == 0 ? width : static_cast<std::size_t>(width * std::min(done, total_) / total_);
        std::cerr << "\rchstate: " << label_ << " [" << std::string(filled, '#') << std::string(width - filled, '-')
                  << "] " << count << (final ? "\n" : "") << std::flush;
    } else {
        std::cerr << "chstate: " << label_ << ": " << count << (final ? " done" : "") << '\n' << std::flush;
    }
}

// ---- processes ----------------------------------------------------------------------

int exit_status_of(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1; }

namespace {

int wait_status(pid_t pid) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return 1;
    }
    return exit_status_of(st);
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
    std::vector<char*> out;
    for (auto& s : v)
        out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

} // namespace

int run_editor(const std::string& file) {
    std::string editor;
    for (const char* name : {"VISUAL", "EDITOR"})
        if (const char* v = std::getenv(name); v && v[0] != '\0') {
            editor = v;
            break;
        }
    if (editor.empty())
        editor = "vi";
    std::vector<std::string> args{"sh", "-c", editor + " \"$1\"", "sh", file};
    auto argv = c_strings(args);
    pid_t pid = 0;
    if (int rc = ::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ); rc != 0)
        throw failure(exit_failure, "cannot start the editor (" + one_line(editor) + "): " + std::strerror(rc));
    return wait_status(pid);
}

const std::vector<int>& forwarded_signals() {
    static const std::vector<int> signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    return signals;
}

namespace {
sigset_t lock_signal_set() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : forwarded_signals())
        sigaddset(&set, s);
    sigaddset(&set, SIGCHLD);
    return set;
}
} // namespace

sigset_t block_lock_signals() {
    sigset_t set = lock_signal_set();
    sigset_t old;
    sigemptyset(&old);
    ::pthread_sigmask(SIG_BLOCK, &set, &old);
    return old;
}

int wait_for_signal(std::chrono::milliseconds timeout, bool& from_process) {
    const sigset_t set = lock_signal_set();
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    ts.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1000000);
    siginfo_t info{};
    const int sig = ::sigtimedwait(&set, &info, &ts);
    if (sig < 0)
        return 0;
    // kill() and sigqueue() say who sent it; the terminal's SIGINT/SIGQUIT
    // (SI_KERNEL) already reached the whole foreground process group.
    from_process = info.si_code == SI_USER || info.si_code == SI_QUEUE || info.si_code == SI_TKILL;
    return sig;
}

child_outcome supervise(const std::vector<std::string>& command, const std::vector<std::string>& extra_env,
                        const sigset_t& child_mask, const supervision& watch) {
    child_outcome outcome;
    // The environment: ours, with extra_env's names replaced.
    std::vector<std::string> env;
    std::set<std::string> replaced;
    for (const auto& e : extra_env)
        replaced.insert(e.substr(0, e.find('=')));
    for (char** p = environ; p && *p; ++p) {
        std::string_view e(*p);
        if (!replaced.count(std::string(e.substr(0, e.find('=')))))
            env.emplace_back(e);
    }
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<std::string> args = command;

    // The guard: this program again (guard.cpp), which runs the command.
    // Should the guard itself be killed, its orphans become ours.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    args.insert(args.begin(), {"chstate", std::string(guard_marker), std::to_string(::getpid()), "--"});
    auto argv = c_strings(args);
    auto envp = c_strings(env);

    posix_spawnattr_t attr;
    ::posix_spawnattr_init(&attr);
    sigset_t defaults = lock_signal_set();
    sigaddset(&defaults, SIGPIPE);
    ::posix_spawnattr_setsigdefault(&attr, &defaults);
    ::posix_spawnattr_setsigmask(&attr, &child_mask);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, "/proc/self/exe", nullptr, &attr, argv.data(), envp.data());
    ::posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        std::cerr << "chstate: " << watch.command_name << ": cannot start the guard of " << quoted(command[0])
                  << " (/proc/self/exe): " << std::strerror(rc) << '\n';
        outcome.status = exit_lock_failed;
        return outcome;
    }
    outcome.started = true;
    const auto started = std::chrono::steady_clock::now();
    bool warned = false;
    for (;;) {
        bool from_process = false;
        const int sig = wait_for_signal(std::chrono::milliseconds(200), from_process);
        if (sig != 0 && sig != SIGCHLD && from_process)
            ::kill(pid, sig);
        int st = 0;
        const pid_t done = ::waitpid(pid, &st, WNOHANG);
        if (done == pid) {
            outcome.status = exit_status_of(st);
            // The guard killed (kill -9, the OOM killer): what it started is
            // ours now (subreaper) and is stopped before the lock is released.
            stop_descendants();
            break;
        }
        if (done < 0 && errno != EINTR) {
            outcome.status = 1;
            break;
        }
        if (!outcome.lost && watch.lost) {
            if (std::string why = watch.lost(); !why.empty()) {
                outcome.lost = true;
                std::cerr << "chstate: " << watch.command_name << ": " << one_line(why)
                          << "; stopping the command and what it started (SIGTERM, then SIGKILL after 5 s)\n";
                ::kill(pid, SIGUSR1); // the guard stops the tree

            }
        }
        if (!warned && watch.warn_after && std::chrono::steady_clock::now() - started >= *watch.warn_after) {
            warned = true;
            std::cerr << "chstate: " << watch.command_name << ": " << one_line(watch.stale_warning) << '\n';
        }
    }
    return outcome;
}

} // namespace chstate_cli
