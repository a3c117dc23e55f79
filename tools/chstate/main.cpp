// tools/chstate/main.cpp — `chstate`, the operator's command-line tool:
// Meltano's `meltano state` commands (list, get, set, merge, copy, move,
// clear, edit, export, import) and `chstate lock ID -- CMD…`, on the store
// chstate::open() builds from --uri or the environment.
//
// The only translation unit that includes the store (and with it
// Boost.Asio and Boost.Beast); argument parsing, JSON layout, progress and
// child processes are in cli.cpp, the help texts in help.cpp, and the guard
// between `lock` and its command (this program again, started by lock) in
// guard.cpp.
#include "cli.hpp"

#include <chstate/open.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <future>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include <unistd.h>

namespace cli = chstate_cli;
namespace asio = boost::asio;
using chstate::errc;

namespace {

// ---- errors ---------------------------------------------------------------------

/// The exit status for a library error (cli.hpp: exit_status).
int status_for(const chstate::error_code& ec) {
    if (ec == errc::state_not_found)
        return cli::exit_not_found;
    if (ec == errc::state_id_locked || ec == errc::lock_lost)
        return cli::exit_locked;
    if (ec == errc::invalid_argument)
        return cli::exit_invalid_input;
    if (ec == errc::invalid_configuration)
        return cli::exit_usage;
    if (ec == errc::connection_failed || ec == errc::timeout || ec == errc::engine_unavailable ||
        ec == errc::replicas_unavailable)
        return cli::exit_connection;
    if (ec.category() == chstate::clickhouse_category() || ec == errc::server_error ||
        ec == errc::authentication_failed || ec == errc::unknown_database || ec == errc::protocol_error ||
        ec == errc::truncated_response || ec == errc::unsupported || ec == errc::corrupt_state)
        return cli::exit_server;
    // Socket and resolver errors that reached us unmapped.
    if (ec.category() == boost::system::system_category() || ec.category() == boost::system::generic_category() ||
        ec.category() == asio::error::get_netdb_category() || ec.category() == asio::error::get_addrinfo_category() ||
        ec.category() == asio::error::get_misc_category())
        return cli::exit_connection;
    return cli::exit_failure;
}

/// chstate::error's text without Boost's " [category:N at file:line]" suffix.
std::string message_of(const chstate::error& e) {
    std::string what = e.what();
    if (auto at = what.rfind(" ["); at != std::string::npos && what.back() == ']')
        what.resize(at);
    return what;
}

// ---- configuration -----------------------------------------------------------

/// The store's settings: --uri (in place of MELTANO_STATE_BACKEND_URI) and
/// the MELTANO_STATE_BACKEND_CLICKHOUSE_* overrides; when none of the
/// connection settings is given (SCHEMA, TABLE and LOCK_TIMEOUT apply to
/// either engine), the embedded engine in the default folder. --lock-timeout
/// and --lock-mode win over the URI and the environment.
chstate::config make_config(const cli::global_options& g) {
    auto lookup = [&](const char* name) -> std::optional<std::string> {
        if (g.uri && std::string_view(name) == "MELTANO_STATE_BACKEND_URI")
            return g.uri;
        return chstate::process_environment(name);
    };
    // A bad --uri is named as such (the variable it stands in for would
    // otherwise take the blame in the library's message).
    if (g.uri) {
        chstate::error_code ec;
        chstate::diagnostics diag;
        (void)chstate::config::from_uri(*g.uri, ec, diag);
        if (ec)
            throw cli::usage_error("--uri: " + diag.message);
    }
    bool connection_given = lookup("MELTANO_STATE_BACKEND_URI").has_value();
    for (const char* key : {"HOST", "PORT", "DATABASE", "USER", "PASSWORD", "SECURE", "CONNECT_TIMEOUT", "REQUEST_TIMEOUT"})
        connection_given = connection_given ||
                           lookup(("MELTANO_STATE_BACKEND_CLICKHOUSE_" + std::string(key)).c_str()).has_value();
    chstate::config c = chstate::config::from_environment(lookup);
    if (!connection_given) {
        auto folder = cli::default_embedded_folder();
        if (!folder)
            throw cli::usage_error("no store configured and neither XDG_STATE_HOME nor HOME is set: "
                                   "pass --uri or set MELTANO_STATE_BACKEND_URI");
        c.engine = chstate::config::engine_kind::embedded;
        c.embedded_path = *folder;
    }
    if (g.lock_timeout_seconds)
        c.store.lock.timeout = std::chrono::duration_cast<chstate::duration>(
            std::chrono::duration<double>(*g.lock_timeout_seconds));
    if (g.lock_mode) {
        if (*g.lock_mode == "automatic")
            c.store.lock.mode = chstate::lock_mode::automatic;
        else if (*g.lock_mode == "seed-compatible")
            c.store.lock.mode = chstate::lock_mode::seed_compatible;
        else if (*g.lock_mode == "strict")
            c.store.lock.mode = chstate::lock_mode::strict;
        else
            throw cli::usage_error("--lock-mode is automatic, seed-compatible or strict, not \"" +
                                   cli::one_line(*g.lock_mode) + "\"");
    }
    return c;
}

// ---- state JSON ------------------------------------------------------------------

/// `v` as json.dumps(v) writes it (default separators).
std::string python_text(const chstate::object& o) {
    std::string out;
    chstate::error_code ec;
    std::string why;
    chstate::serialize_json(o, out, ec, why);
    if (ec)
        throw cli::failure(cli::exit_failure, "cannot write the state as JSON: " + why);
    return out;
}

/// The JSON a user gave for `set`, `merge` or `edit`: an object, with
/// "singer_state" at its top level unless `validate` is false (Meltano's
/// validation; its --no-validate).
chstate::object parse_user_state(std::string_view text, const std::string& source, bool validate) {
    chstate::error_code ec;
    std::string why;
    chstate::value v = chstate::parse_json(text, ec, why);
    if (ec)
        throw cli::failure(cli::exit_invalid_input, source + " is not valid JSON: " + why);
    if (!v.is_object())
        throw cli::failure(cli::exit_invalid_input, source + " must be a JSON object, e.g. {\"singer_state\": "
                                                             "{\"bookmarks\": {...}}}, not " +
                                                        std::string(chstate::to_string(v.kind())));
    if (validate && !v.get_object().contains("singer_state"))
        throw cli::failure(cli::exit_invalid_input,
                           source + " has no \"singer_state\" key at its top level: the state must be "
                                    "{\"singer_state\": {...}} (--no-validate skips this check)");
    return std::move(v.get_object());
}

/// Checks that every value of `s` can be stored and read back (what
/// set_all checks); returns the size of its JSON text.
std::size_t check_writable(const chstate::state& s) {
    std::size_t size = s.state_id.size();
    for (const auto* part : {&s.completed_state, &s.partial_state}) {
        std::string out;
        chstate::error_code ec;
        std::string why;
        chstate::serialize_json(*part, out, ec, why);
        if (ec)
            throw cli::failure(cli::exit_invalid_input,
                               "state " + cli::quoted(s.state_id) + " (" +
                                   (part == &s.completed_state ? "completed" : "partial") + "): " + why);
        size += out.size();
    }
    return size;
}

// ---- commands -------------------------------------------------------------------

struct context {
    chstate::state_store& store;
    const cli::invocation& inv;
    const chstate::config& cfg;

    /// A line on stderr unless --quiet.
    void note(const std::string& message) const {
        if (!inv.global.quiet)
            std::cerr << "chstate: " << inv.command << ": " << cli::one_line(message) << '\n';
    }
    /// A write's line: what was written, and where — the store (its URI,
    /// password hidden) and the table — so a wrong --uri or variable shows.
    void note_written(const std::string& message) const {
        note(message + " in " + cli::shortened(cfg.redacted_uri()) + ", table " + cli::shortened(cfg.store.schema) +
             "." + cli::shortened(cfg.store.table));
    }
    /// Asks unless --force (Meltano's prompt); false: the user said no.
    bool confirmed(const std::string& question) const {
        return inv.flag("force") || cli::confirm(question);
    }
    /// Progress for `total` states: --progress, --no-progress, else shown
    /// from 1,000 states on unless --quiet.
    bool show_progress(std::uint64_t total) const {
        if (inv.flag("progress"))
            return true;
        if (inv.flag("no-progress") || inv.global.quiet)
            return false;
        return total >= 1000;
    }
};

constexpr int aborted = cli::exit_failure; // a "no" to a prompt, as Meltano exits

int cmd_list(context& c) {
    const bool nul = c.inv.flag("null");
    const char sep = nul ? '\0' : '\n';
    auto ids = c.store.state_ids(c.inv.value("pattern").value_or("*"));
    std::string out;
    std::size_t unlisted = 0;
    std::string first_unlisted;
    for (const auto& id : ids) {
        if (id.find(sep) != std::string::npos) {
            if (unlisted++ == 0)
                first_unlisted = id;
            continue;
        }
        out += id;
        out += sep;
    }
    cli::write_stdout(out);
    if (unlisted)
        throw cli::failure(cli::exit_failure,
                           std::to_string(unlisted) + " state id(s) contain " + (nul ? "a NUL byte" : "a newline") +
                               " and were not listed, e.g. " + cli::quoted(first_unlisted) +
                               (nul ? "" : " (--null separates ids with NUL bytes instead)"));
    if (ids.empty())
        c.note("no state ids found");
    return cli::exit_ok;
}

int cmd_get(context& c) {
    // Case-insensitive, as meltano state get's click.Choice(case_sensitive=False).
    std::string format = c.inv.value("format").value_or("json");
    for (char& ch : format)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (format != "json" && format != "pretty")
        throw cli::usage_error("--format is json or pretty, not \"" + cli::one_line(format) + "\"");
    const std::string& id = c.inv.words[0];
    auto s = c.store.get(id);
    if (!s) {
        if (c.inv.flag("missing-ok")) {
            cli::write_stdout("{}\n");
            return cli::exit_ok;
        }
        throw cli::failure(cli::exit_not_found, "no state stored for " + cli::quoted(id));
    }
    const std::string text = python_text(s->merged());
    cli::write_stdout((format == "pretty" ? cli::indented_json(text) : cli::compact_json(text)) + "\n");
    return cli::exit_ok;
}

/// The one JSON source of set/merge: the STATE word, `json_option` or
/// --input-file (read only once it is known to be the only one).
std::optional<std::pair<std::string, std::string>> given_json(const context& c, std::size_t word,
                                                              const char* json_option) {
    const bool as_word = c.inv.words.size() > word;
    const auto as_option = json_option ? c.inv.value(json_option) : std::nullopt;
    const auto file = c.inv.value("input-file");
    if (int(as_word) + int(as_option.has_value()) + int(file.has_value()) > 1)
        throw cli::usage_error(std::string("give the state once: as an argument") +
                               (json_option ? ", --" + std::string(json_option) : std::string()) +
                               " or --input-file");
    if (as_word)
        return std::pair{c.inv.words[word], std::string("STATE")};
    if (as_option)
        return std::pair{*as_option, "--" + std::string(json_option)};
    if (file)
        return std::pair{cli::read_file(*file, cli::max_state_input_bytes),
                         *file == "-" ? std::string("standard input") : cli::quoted(*file)};
    return std::nullopt;
}

int cmd_set(context& c) {
    const std::string& id = c.inv.words[0];
    auto json = given_json(c, 1, nullptr);
    if (!json)
        throw cli::usage_error("give the state as an argument or with --input-file");
    chstate::state s{id};
    s.completed_state = parse_user_state(json->first, json->second == "STATE" ? "the state" : json->second,
                                         !c.inv.flag("no-validate"));
    if (!c.confirmed("This will overwrite the state's current value. Continue?"))
        return aborted;
    // Meltano stores what it is given as the completed state, under the lock
    // (update() of a complete state); an empty one clears both parts.
    if (s.is_complete())
        c.store.update(std::move(s));
    else
        c.store.set(std::move(s));
    c.note_written("state for " + cli::quoted(id) + " was set");
    return cli::exit_ok;
}

/// Refuses a merge that would name a state by JSON text.
void refuse_json_as_id(const std::string& dst) {
    chstate::error_code ec;
    std::string why;
    auto v = chstate::parse_json(dst, ec, why);
    if (!ec && v.is_object())
        throw cli::usage_error("DST_STATE_ID looks like a JSON state: merge JSON with "
                               "chstate state merge STATE_ID --from-state JSON (Meltano's `merge ID STATE`)");
}

int cmd_merge(context& c) {
    const bool validate = !c.inv.flag("no-validate");
    auto from_id = c.inv.value("from-state-id");
    if (c.inv.words.size() == 2 || from_id) {
        // SRC DST, or DST --from-state-id SRC: one stored state into another.
        if (c.inv.words.size() == 2 && from_id)
            throw cli::usage_error("give the source once: merge SRC DST, or merge DST --from-state-id SRC");
        if (c.inv.value("from-state") || c.inv.value("input-file"))
            throw cli::usage_error("merge SRC DST takes no --from-state or --input-file");
        const std::string src = from_id ? *from_id : c.inv.words[0];
        const std::string dst = from_id ? c.inv.words[0] : c.inv.words[1];
        if (!from_id)
            refuse_json_as_id(dst);
        if (validate) {
            // Meltano merges the source's merged view only when it is valid state.
            auto s = c.store.get(src);
            if (!s)
                throw cli::failure(cli::exit_not_found, "no state stored for " + cli::quoted(src));
            if (!s->merged().contains("singer_state"))
                throw cli::failure(cli::exit_invalid_input,
                                   "state " + cli::quoted(src) +
                                       " has no \"singer_state\" key at its top level (--no-validate merges it anyway)");
        }
        c.store.merge(src, dst);
        c.note_written("state " + cli::quoted(src) + " was merged into " + cli::quoted(dst));
        return cli::exit_ok;
    }
    auto json = given_json(c, 1, "from-state");
    if (!json)
        throw cli::usage_error("give what to merge: merge SRC DST, merge DST --from-state JSON, "
                               "merge DST --input-file FILE or merge DST --from-state-id SRC");
    const std::string& dst = c.inv.words[0];
    chstate::state s{dst};
    s.partial_state = parse_user_state(json->first, json->second == "--from-state" ? "the state" : json->second,
                                       validate);
    c.store.update(std::move(s)); // deep-merged onto the stored partial state, under the lock
    c.note_written("state for " + cli::quoted(dst) + " was merged");
    return cli::exit_ok;
}

int cmd_copy_or_move(context& c, bool move) {
    const std::string& src = c.inv.words[0];
    const std::string& dst = c.inv.words[1];
    if (!c.confirmed(move ? "This will clear the source state and overwrite destination state. Continue?"
                          : "This will overwrite state for the destination. Continue?"))
        return aborted;
    if (move)
        c.store.move(src, dst);
    else
        c.store.copy(src, dst);
    c.note_written("state " + cli::quoted(src) + (move ? " was moved to " : " was copied to ") + cli::quoted(dst));
    return cli::exit_ok;
}

int cmd_clear(context& c) {
    const bool all = c.inv.flag("all");
    if (all == !c.inv.words.empty())
        throw cli::usage_error("give a STATE_ID or --all, not both");
    if (!c.confirmed("This will clear state for the job(s). Continue?"))
        return aborted;
    if (all) {
        const auto n = c.store.clear_all();
        c.note_written(std::to_string(n) + " state(s) were cleared");
    } else {
        c.store.clear(c.inv.words[0]);
        c.note_written("state for " + cli::quoted(c.inv.words[0]) + " was cleared");
    }
    return cli::exit_ok;
}

/// A temporary file that is removed unless kept.
struct temp_file {
    std::string path;
    bool keep = false;
    ~temp_file() {
        if (!path.empty() && !keep)
            ::unlink(path.c_str());
    }
};

int cmd_edit(context& c) {
    const std::string& id = c.inv.words[0];
    if (!c.confirmed("This will overwrite the state's current value. Continue?"))
        return aborted;
    auto current = c.store.get(id);
    const std::string initial = python_text(current ? current->merged() : chstate::object{});

    const char* tmpdir = std::getenv("TMPDIR");
    temp_file file{std::string(tmpdir && tmpdir[0] ? tmpdir : "/tmp") + "/chstate-edit-XXXXXX.json"};
    const int fd = ::mkstemps(file.path.data(), 5);
    if (fd < 0) {
        const std::string why = std::strerror(errno);
        file.path.clear();
        throw cli::failure(cli::exit_failure, "cannot create a temporary file: " + why);
    }
    ::close(fd);
    cli::write_file_atomically(file.path, cli::indented_json(initial) + "\n");
    if (int status = cli::run_editor(file.path); status != 0)
        throw cli::failure(cli::exit_failure,
                           "the editor exited with status " + std::to_string(status) + "; nothing was written");

    std::string edited = cli::read_file(file.path, cli::max_state_input_bytes);
    const auto first = edited.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) {
        c.note("empty content: no changes made");
        return cli::exit_ok;
    }
    file.keep = true; // from here a failure leaves the user's work where it is
    const std::string kept = " (your edit is kept in " + file.path + ")";
    chstate::state s{id};
    try {
        s.completed_state = parse_user_state(edited, "the edited state", !c.inv.flag("no-validate"));
    } catch (const cli::failure& f) {
        throw cli::failure(f.status, f.what() + kept);
    }
    if (python_text(s.completed_state) == initial) {
        file.keep = false;
        c.note("no changes made");
        return cli::exit_ok;
    }
    // Written under the lock, and only if nobody changed the state meanwhile.
    auto lease = c.store.acquire_lock(id);
    auto now = c.store.get(id);
    if (python_text(now ? now->merged() : chstate::object{}) != initial)
        throw cli::failure(cli::exit_locked,
                           "the state of " + cli::quoted(id) + " changed while it was being edited; nothing was written" + kept);
    c.store.set(lease, std::move(s));
    lease.release();
    file.keep = false;
    c.note_written("state for " + cli::quoted(id) + " was updated");
    return cli::exit_ok;
}

int cmd_export(context& c) {
    // What export writes, import reads back. Refused up front, before
    // anything is written: an id that is neither UTF-8 nor WTF-8 (JSON keys
    // are text), and an id holding a NUL byte (JSON can carry it, but import
    // refuses it: no command line can name such an id afterwards).
    auto ids = c.store.state_ids("*");
    std::size_t not_text = 0, holding_nul = 0;
    std::string first_not_text, first_holding_nul;
    for (const auto& id : ids) {
        std::string out;
        chstate::error_code ec;
        std::string why;
        chstate::serialize_json(chstate::value(id), out, ec, why);
        if (ec && not_text++ == 0)
            first_not_text = id;
        if (!ec && id.find('\0') != std::string::npos && holding_nul++ == 0)
            first_holding_nul = id;
    }
    if (not_text)
        throw cli::failure(cli::exit_failure, std::to_string(not_text) + " state id(s) are not UTF-8 and cannot be JSON keys, e.g. " +
                                                  cli::quoted(first_not_text) +
                                                  "; nothing was exported (rename them with chstate state move)");
    if (holding_nul)
        throw cli::failure(cli::exit_failure,
                           std::to_string(holding_nul) + " state id(s) hold a NUL byte, which `state import` refuses, e.g. " +
                               cli::quoted(first_holding_nul) +
                               "; nothing was exported (no command line can name such an id: rename or remove it "
                               "through the library, with move() or clear())");

    cli::progress bar("export", ids.size(), c.show_progress(ids.size()));
    // {"<id>":{"completed":{…},"partial":{…}},…} as Python writes
    // json.dumps(states, separators=(",", ":")) — Meltano's export — built
    // as the states arrive, and never past what `state import` reads back:
    // a server that streams rows without end (or a store too large to import
    // again) ends the export with a message, not with all memory taken.
    std::mutex m;
    std::string doc = "{";
    std::vector<std::string> unreadable;
    std::string refused; // why the document stopped taking states
    std::uint64_t n = 0, exported = 0;
    const auto add = [&](chstate::state&& s) {
        std::lock_guard lk(m);
        bar.update(++n);
        if (!refused.empty())
            return;
        std::string key;
        chstate::error_code ec;
        std::string why;
        chstate::serialize_json(chstate::value(s.state_id), key, ec, why);
        if (ec) {
            refused = "state id " + cli::quoted(s.state_id) + " cannot be a JSON key: " + why;
            throw std::runtime_error(refused); // ends get_all now (reported below)
        }
        const std::string body = cli::compact_json(s.to_json_text());
        if (doc.size() + 1 + key.size() + 1 + body.size() + 2 > cli::max_import_input_bytes) {
            refused = "the export would exceed the " + std::to_string(cli::max_import_input_bytes) +
                      " bytes `state import` reads (after " + std::to_string(exported) + " state(s))";
            throw std::runtime_error(refused); // ends get_all now (reported below)
        }
        if (exported++)
            doc += ',';
        doc += key;
        doc += ':';
        doc += body;
    };
    try {
        c.store.get_all(add, [&](chstate::unreadable_state&& u) {
            std::lock_guard lk(m);
            unreadable.push_back(u.reason);
        });
    } catch (const chstate::error&) {
        if (refused.empty())
            throw;
        // (the refusal above stopped the stream)
    }
    if (!refused.empty())
        throw cli::failure(cli::exit_failure, refused + "; nothing was exported");
    if (!unreadable.empty())
        throw cli::failure(cli::exit_server, std::to_string(unreadable.size()) +
                                                 " stored state(s) cannot be read; nothing was exported. First: " +
                                                 unreadable.front());
    bar.finish();
    doc += "}\n";
    if (auto out = c.inv.value("output"))
        cli::write_file_atomically(*out, doc);
    else
        cli::write_stdout(doc);
    c.note("exported " + std::to_string(exported) + " state(s)");
    return cli::exit_ok;
}

int cmd_import(context& c) {
    const std::string path = c.inv.words.empty() ? "-" : c.inv.words[0];
    const std::string source = path == "-" ? "standard input" : cli::quoted(path);
    std::vector<chstate::state> states;
    {
        const std::string text = cli::read_file(path, cli::max_import_input_bytes);
        chstate::error_code ec;
        std::string why;
        // Two levels above a part: the document and its entries.
        chstate::value doc = chstate::parse_json(text, ec, why, chstate::json_limits{chstate::json_limits{}.max_depth + 2});
        if (ec)
            throw cli::failure(cli::exit_invalid_input, source + " is not valid JSON: " + why);
        if (!doc.is_object())
            throw cli::failure(cli::exit_invalid_input,
                               source + " must be a JSON object mapping state ids to {\"completed\": {...}, "
                                        "\"partial\": {...}} (what chstate state export writes), not " +
                                   std::string(chstate::to_string(doc.kind())));
        states.reserve(doc.get_object().size());
        for (const auto& [id, entry] : doc.get_object()) {
            if (id.empty())
                throw cli::failure(cli::exit_invalid_input, source + ": a state id is empty; nothing was imported");
            // No command line can carry a NUL byte: such an id could be
            // neither named by get, set or clear nor listed by list.
            if (id.find('\0') != std::string::npos)
                throw cli::failure(cli::exit_invalid_input,
                                   source + ": the state id " + cli::quoted(id) +
                                       " holds a NUL byte, which no command can name; nothing was imported");
            chstate::diagnostics diag;
            auto s = chstate::state::from_json(id, entry, ec, diag);
            if (ec)
                throw cli::failure(cli::exit_invalid_input, source + ": " + diag.message + "; nothing was imported");
            states.push_back(std::move(*s));
        }
    }
    // Everything is checked before the first batch is written.
    std::vector<std::size_t> sizes;
    sizes.reserve(states.size());
    for (const auto& s : states) {
        try {
            sizes.push_back(check_writable(s));
        } catch (const cli::failure& f) {
            throw cli::failure(f.status, source + ": " + f.what() + "; nothing was imported");
        }
    }
    const std::size_t total = states.size();
    // Importing replaces the states of the ids it holds: into a store that
    // already holds states it asks first, saying how many it would replace
    // (with --force nothing is asked, so the ids are not listed either).
    if (const auto existing = c.inv.flag("force") ? std::vector<std::string>{} : c.store.state_ids("*");
        !existing.empty()) {
        const std::unordered_set<std::string> have(existing.begin(), existing.end());
        std::size_t replaced = 0;
        for (const auto& s : states)
            replaced += have.count(s.state_id);
        if (!c.confirmed("The store already holds " + std::to_string(existing.size()) + " state(s); importing writes " +
                         std::to_string(total) + ", replacing " + std::to_string(replaced) +
                         " of them. Continue?"))
            return aborted;
    }
    cli::progress bar("import", total, c.show_progress(total));
    // Batches of at most 1,000 states or 32 MiB of state text, each one
    // set_all (one INSERT); importing again overwrites, so a failed import
    // can simply be repeated.
    constexpr std::size_t batch_states = 1000;
    constexpr std::size_t batch_bytes = std::size_t{32} << 20;
    std::size_t written = 0;
    while (written < total) {
        std::vector<chstate::state> batch;
        std::size_t bytes = 0;
        for (std::size_t i = written; i < total && batch.size() < batch_states && (batch.empty() || bytes + sizes[i] <= batch_bytes); ++i) {
            bytes += sizes[i];
            batch.push_back(std::move(states[i]));
        }
        const std::size_t count = batch.size();
        try {
            c.store.set_all(std::move(batch));
        } catch (const chstate::error& e) {
            throw chstate::error(e.code(), message_of(e) + " (" + std::to_string(written) + " of " +
                                                std::to_string(total) +
                                                " states were imported before the failure; importing again "
                                                "overwrites them)");
        }
        written += count;
        bar.update(written);
    }
    bar.finish();
    c.note_written("imported " + std::to_string(total) + " state(s)");
    return cli::exit_ok;
}

int cmd_lock(context& c, const sigset_t& child_mask) {
    const std::string& id = c.inv.words[0];
    using lease_type = chstate::state_store::lock_lease;

    // Acquire, cancellable by a signal (the candidate row is withdrawn).
    std::promise<std::pair<chstate::error_code, lease_type>> acquired;
    auto result = acquired.get_future();
    chstate::diagnostics diag;
    asio::cancellation_signal cancel;
    c.store.async_acquire_lock(id, diag,
                               asio::bind_cancellation_slot(cancel.slot(), [&](chstate::error_code ec, lease_type l) {
                                   acquired.set_value({ec, std::move(l)});
                               }));
    int interrupted = 0;
    std::promise<void> emitted;
    while (result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        bool from_process = false;
        const int sig = cli::wait_for_signal(std::chrono::milliseconds(100), from_process);
        if (sig != 0 && sig != SIGCHLD && interrupted == 0) {
            interrupted = sig;
            // Emitted on the store's executor, where the operation runs.
            asio::post(c.store.get_executor(), [&] {
                cancel.emit(asio::cancellation_type::terminal);
                emitted.set_value();
            });
        }
    }
    if (interrupted)
        emitted.get_future().wait(); // `cancel` must outlive the posted emit
    auto [ec, lease] = result.get();
    if (interrupted) {
        if (lease.held())
            lease.release();
        std::cerr << "chstate: lock: interrupted while waiting for the lock on " << cli::quoted(id) << '\n';
        return 128 + interrupted;
    }
    if (ec)
        throw chstate::error(ec, diag.message);

    const bool strict = lease.token() != 0;
    const auto& lock = c.cfg.store.lock;
    // Shared with the heartbeat, which may report after this function has returned.
    struct lost_report {
        std::mutex mutex;
        std::string message;
    };
    auto lost = std::make_shared<lost_report>();
    if (strict)
        lease.start_heartbeat(lock.lease_ttl / 3, [lost, id](chstate::error_code e) {
            std::lock_guard lk(lost->mutex);
            lost->message = "the lock on " + cli::quoted(id) + " was lost: " + e.message();
        });
    c.note("holding the lock on " + cli::quoted(id) +
           (strict ? " (strict, fencing token " + std::to_string(lease.token()) + ")" : " (seed-compatible)"));

    cli::supervision watch;
    watch.lost = [lost] {
        std::lock_guard lk(lost->mutex);
        return lost->message;
    };
    if (!strict) {
        watch.warn_after = lock.stale_age;
        watch.stale_warning = "the lock on " + cli::quoted(id) + " has been held for " +
                              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(lock.stale_age).count()) +
                              " s, the seed-compatible lock's stale age: another client may now remove it and take "
                              "the lock";
    }
    std::vector<std::string> env{"CHSTATE_LOCK_TOKEN=" + std::to_string(lease.token())};
    if (id.find('\0') == std::string::npos)
        env.push_back("CHSTATE_LOCK_STATE_ID=" + id);
    const cli::child_outcome outcome = cli::supervise(c.inv.child, env, child_mask, watch);
    try {
        lease.release();
    } catch (const chstate::error& e) {
        std::cerr << "chstate: lock: could not release the lock on " << cli::quoted(id) << ": "
                  << cli::one_line(message_of(e)) << '\n';
    }
    if (outcome.lost)
        return cli::exit_lock_lost;
    return outcome.status;
}

int run(chstate::state_store& store, const cli::invocation& inv, const chstate::config& cfg,
        const sigset_t& child_mask) {
    context c{store, inv, cfg};
    const std::string& cmd = inv.command;
    if (cmd == "state list")
        return cmd_list(c);
    if (cmd == "state get")
        return cmd_get(c);
    if (cmd == "state set")
        return cmd_set(c);
    if (cmd == "state merge")
        return cmd_merge(c);
    if (cmd == "state copy")
        return cmd_copy_or_move(c, false);
    if (cmd == "state move")
        return cmd_copy_or_move(c, true);
    if (cmd == "state clear")
        return cmd_clear(c);
    if (cmd == "state edit")
        return cmd_edit(c);
    if (cmd == "state export")
        return cmd_export(c);
    if (cmd == "state import")
        return cmd_import(c);
    if (cmd == "lock")
        return cmd_lock(c, child_mask);
    throw cli::usage_error("unknown command");
}

/// Waits (up to the lock timeout) while another process has the embedded
/// folder open: chDB serves a folder to one process at a time, so a second
/// chstate — a `lock` on any id among them — waits here as for a lock.
/// Returns 128 + N when signal N interrupts the wait of `lock`.
int wait_for_embedded_folder(const cli::invocation& inv, const chstate::config& cfg) {
    if (cfg.engine != chstate::config::engine_kind::embedded || !cli::embedded_folder_busy(cfg.embedded_path))
        return 0;
    const auto deadline = std::chrono::steady_clock::now() + cfg.store.lock.timeout;
    bool noted = false;
    while (cli::embedded_folder_busy(cfg.embedded_path)) {
        if (std::chrono::steady_clock::now() >= deadline)
            throw cli::failure(cli::exit_locked,
                               "the embedded store " + cli::shortened(cfg.embedded_path) +
                                   " is in use by another process (chDB opens a folder in one process at a time); "
                                   "gave up after the lock timeout");
        if (!noted && !inv.global.quiet) {
            noted = true;
            std::cerr << "chstate: " << inv.command << ": waiting for another process to close the embedded store "
                      << cli::shortened(cfg.embedded_path) << '\n';
        }
        if (inv.command == "lock") {
            bool from_process = false;
            if (int sig = cli::wait_for_signal(std::chrono::milliseconds(100), from_process); sig && sig != SIGCHLD)
                return 128 + sig;
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    return 0;
}

/// An embedded store's folder that does not exist: only `state set` and
/// `state import` create one, and say so. Any other command would find an
/// empty store there (and leave a new folder behind): with a typo in the
/// path that reads as lost state, so it is refused, naming where the path
/// came from.
void check_embedded_folder(const cli::invocation& inv, const chstate::config& cfg) {
    if (cfg.engine != chstate::config::engine_kind::embedded)
        return;
    std::error_code ec;
    if (std::filesystem::exists(cfg.embedded_path, ec) || ec)
        return; // (a file or an unreadable path: the engine's own error says what it is)
    const std::string folder = cli::shortened(cfg.embedded_path);
    if (inv.command == "state set" || inv.command == "state import") {
        if (!inv.global.quiet)
            std::cerr << "chstate: " << inv.command << ": creating the embedded store " << folder << '\n';
        return;
    }
    const char* named_by = inv.global.uri                                             ? "--uri"
                           : chstate::process_environment("MELTANO_STATE_BACKEND_URI") ? "MELTANO_STATE_BACKEND_URI"
                                                                                       : "the default folder";
    throw cli::failure(cli::exit_not_found, "no embedded store at " + folder + " (" + named_by +
                                                "): the folder does not exist; check the path, or create the store "
                                                "with `chstate state set` or `chstate state import`");
}

void report(const std::string& command, const std::string& message) {
    std::cerr << "chstate: " << (command.empty() ? "" : command + ": ") << cli::one_line(message) << '\n';
}

} // namespace

int main(int argc, char** argv) {
    if (argc >= 2 && argv[1] == cli::guard_marker) // `lock`'s guard process (guard.cpp)
        return cli::run_guard(argc, argv);
    cli::invocation inv;
    try {
        cli::parse_command_line(argc, argv, inv);
    } catch (const cli::failure& f) {
        report(inv.command, f.what());
        return cli::names_lock_command(argc, argv) ? cli::exit_lock_failed : f.status;
    }
    // lock: chstate's own failures exit with a status its command's cannot be
    // mistaken for (the command's own status is passed on as it is).
    const auto own = [&](int status) { return inv.command == "lock" ? int(cli::exit_lock_failed) : status; };
    if (inv.version) {
        std::cout << cli::version_text() << std::flush;
        return cli::exit_ok;
    }
    if (inv.help) {
        std::cout << cli::help_text(inv.command) << std::flush;
        return cli::exit_ok;
    }
    try {
        const chstate::config cfg = make_config(inv.global);
        // lock: the signals it forwards are blocked before any thread starts,
        // so that they wait for it instead of ending the process.
        sigset_t child_mask;
        ::pthread_sigmask(SIG_SETMASK, nullptr, &child_mask);
        if (inv.command == "lock")
            child_mask = cli::block_lock_signals();
        check_embedded_folder(inv, cfg);
        if (int interrupted = wait_for_embedded_folder(inv, cfg))
            return interrupted;
        auto store = chstate::open(cfg);
        return run(store, inv, cfg, child_mask);
    } catch (const cli::failure& f) {
        report(inv.command, f.what());
        return own(f.status);
    } catch (const chstate::error& e) {
        report(inv.command, message_of(e));
        return own(status_for(e.code()));
    } catch (const boost::system::system_error& e) {
        report(inv.command, e.what());
        return own(status_for(e.code()));
    } catch (const std::exception& e) {
        report(inv.command, e.what());
        return own(cli::exit_failure);
    }
}
