// tools/chstate/help.cpp — the usage texts of `chstate` and its commands.
#include "cli.hpp"

#ifndef CHSTATE_CLI_VERSION
#define CHSTATE_CLI_VERSION "0.1.0"
#endif

namespace chstate_cli {

namespace {

std::string default_folder_text() {
    auto folder = default_embedded_folder();
    return folder ? *folder : std::string("(none: neither XDG_STATE_HOME nor HOME is set)");
}

const char* const store_text = R"(The store:
  --uri URI, else MELTANO_STATE_BACKEND_URI:
    clickhouse://USER:PASSWORD@HOST:PORT/DATABASE[?secure=true]   ClickHouse over HTTP
    chdb:///absolute/dir   chdb:relative/dir                      the embedded engine (chDB)
    either with ?schema=NAME&table=NAME (default meltano, state) and
    lock_timeout=30s; over HTTP also connect_timeout=, request_timeout=
    and, with secure=true, ca_file=PEM (the CAs to trust instead of the system's);
    HOST may list several replicas (h1:p1,h2:p2) and cluster=NAME keeps the
    tables replicated on that cluster (insert_quorum=N, insert_quorum_timeout=)
  MELTANO_STATE_BACKEND_CLICKHOUSE_{HOST,PORT,DATABASE,USER,PASSWORD,SECURE,
  CA_FILE,SCHEMA,TABLE,CONNECT_TIMEOUT,REQUEST_TIMEOUT,LOCK_TIMEOUT,CLUSTER,
  INSERT_QUORUM} override the
  URI's parts (keep the password out of the command line with ..._PASSWORD).
  When neither a URI nor any of HOST, PORT, DATABASE, USER, PASSWORD,
  SECURE, CONNECT_TIMEOUT, REQUEST_TIMEOUT is given, state is kept by the
  embedded engine in
    )";

const char* const store_text_tail = R"(
  ($XDG_STATE_HOME/chstate, else $HOME/.local/state/chstate). The embedded
  engine loads libchdb.so: CHSTATE_CHDB_LIBRARY names it. One process at a
  time may open an embedded folder.
)";

const char* const exit_text = R"(Exit status:
  0  success
  1  other failure (a file that cannot be read or written, a "no" to a prompt, ...)
  2  usage: bad arguments or configuration; refused without --force
  3  not found: the state the command needs does not exist
  4  locked: the state id's lock was not acquired within --lock-timeout or
     was lost (lock: 125 and 124 instead); edit: the state changed while it
     was being edited
  5  ClickHouse: the server refused a statement (authentication, unknown
     database, ...) or a stored state cannot be read
  6  connection: network failure, timeout, too few replicas (cluster), or
     the embedded engine could not be loaded or opened
  7  invalid state input: not JSON, not an object, no "singer_state", or a
     value the store cannot keep
  lock exits with its command's status once the command has started, and
  otherwise with the statuses timeout(1) and env(1) reserve (a command that
  itself exits 124 or 125, as timeout(1) does, reads the same):
  124  the lock was lost while the command ran; the command was stopped
  125  chstate failed before the command ran: bad arguments or configuration,
       the lock not acquired within --lock-timeout, no connection, ...
  126  the command was found but could not be run; 127  it was not found
Errors are one line on standard error: "chstate: COMMAND: message".
)";

const char* const global_text = R"(Options of every command:
  --uri URI            the store (see chstate --help)
  --lock-timeout SECS  how long to wait for a state id's lock (default: the
                       URI's lock_timeout, else ..._LOCK_TIMEOUT, else 30)
  --lock-mode MODE     automatic (default: strict on chDB, seed-compatible
                       over HTTP), seed-compatible or strict
  -q, --quiet          no confirmations, notes or progress on standard error
  -h, --help           show this text
)";

std::string top_help() {
    return std::string(R"(chstate - Meltano/Singer pipeline state in ClickHouse, for operators

Usage:
  chstate [OPTIONS] state COMMAND [ARGS...]
  chstate [OPTIONS] lock STATE_ID -- COMMAND [ARG...]
  chstate help [state COMMAND]     (or COMMAND --help)

State commands, as `meltano state` (same JSON, same validation):
  list [--pattern GLOB]              the state ids, one per line
  get STATE_ID                       the state a run resumes from: partial merged onto completed
  set STATE_ID JSON|--input-file F   store JSON ({"singer_state": ...}) as the completed state
  merge SRC_ID DST_ID                merge one stored state into another
  merge DST_ID --from-state JSON     merge JSON into a state (also --input-file, --from-state-id)
  copy SRC_ID DST_ID                 overwrite DST with SRC
  move SRC_ID DST_ID                 copy, then clear SRC
  clear STATE_ID | clear --all       remove one state, or every state
  edit STATE_ID                      edit a state in $VISUAL or $EDITOR
  export [--output FILE]             every state as one JSON document
  import [FILE|-]                    store the states of an export

Locking:
  lock STATE_ID -- COMMAND [ARG...]  run COMMAND while holding the state id's lock

)") + global_text + "  --version            print the version\n\n" + store_text + default_folder_text() + store_text_tail +
           "\n" + exit_text;
}

std::string state_help() {
    return R"(Usage: chstate [OPTIONS] state COMMAND [ARGS...]

Meltano's `meltano state` commands on a chstate store:
  list, get, set, merge, copy, move, clear, edit, export, import
Run chstate state COMMAND --help for one of them, chstate --help for the
store settings and exit statuses.
)";
}

std::string command_help(const std::string& command) {
    std::string body;
    if (command == "state list")
        body = R"(Usage: chstate [OPTIONS] state list [--pattern GLOB] [--null]

Prints every state id, one per line, in order.
  --pattern GLOB  only ids matching GLOB: * is any run of characters, ? any
                  one character, everything else literal
  --null          end each id with a NUL byte instead of a newline (for ids
                  that contain newlines; xargs -0 reads it)
Ids are written as the exact bytes stored, UTF-8 or not. An id that contains
the separator cannot be listed that way: the others are listed, and the
command fails naming it.
)";
    else if (command == "state get")
        body = R"(Usage: chstate [OPTIONS] state get STATE_ID [--format json|pretty] [--missing-ok]

Prints the state a pipeline run would resume from: the partial state
merged onto the completed state, e.g. {"singer_state":{"bookmarks":{...}}}.
Every value exactly as stored (big integers, floats, NaN, key order).
  --format json    one line, as json.dumps(state, separators=(",", ":")) (the default)
  --format pretty  indented by two spaces, as json.dumps(state, indent=2)
                   (either word in any case, as Meltano accepts)
  --missing-ok     print {} for a state id without state (as meltano does)
                   instead of failing with exit status 3
)";
    else if (command == "state set")
        body = R"(Usage: chstate [OPTIONS] state set STATE_ID (JSON | --input-file FILE) [--force] [--no-validate]

Stores JSON as the state's completed state (its partial state is emptied),
as `meltano state set` does. The JSON must be an object with "singer_state"
at its top level, e.g. '{"singer_state": {"bookmarks": {"users": {"id": 5}}}}'.
Written under the state id's lock (waits up to --lock-timeout).
  --input-file FILE  read the JSON from FILE (- for standard input)
  --force            do not ask for confirmation (required when standard
                     input is not a terminal)
  --no-validate      accept a JSON object without "singer_state"
)";
    else if (command == "state merge")
        body = R"(Usage: chstate [OPTIONS] state merge SRC_ID DST_ID [--no-validate]
       chstate [OPTIONS] state merge DST_ID --from-state JSON [--no-validate]
       chstate [OPTIONS] state merge DST_ID --input-file FILE [--no-validate]
       chstate [OPTIONS] state merge DST_ID --from-state-id SRC_ID [--no-validate]

Merges state into DST_ID's partial state, under DST_ID's lock, by Meltano's
rules: objects merge key by key, anything else replaces. From SRC_ID its
state as `get` shows it; from JSON (an object with "singer_state" at its top
level) that object. A DST_ID without state gets the merged state as its
partial state.
  --from-state JSON     the state to merge, as text
  --input-file FILE     the state to merge, from FILE (- for standard input)
  --from-state-id SRC   Meltano's spelling of merge SRC DST
  --no-validate         accept JSON (or a source state) without "singer_state"
Exit status 3 when SRC_ID has no state. (Meltano's `merge DST_ID JSON` is
`merge DST_ID --from-state JSON` here: two plain arguments are two state
ids, and a DST_ID that is a JSON object is refused.)
)";
    else if (command == "state copy")
        body = R"(Usage: chstate [OPTIONS] state copy SRC_ID DST_ID [--force]

Overwrites DST_ID's state with SRC_ID's (both parts, exactly; a plain
write that takes no lock). Exit status 3 when SRC_ID
has no state; SRC_ID = DST_ID is refused.
  --force  do not ask for confirmation (required when standard input is
           not a terminal)
)";
    else if (command == "state move")
        body = R"(Usage: chstate [OPTIONS] state move SRC_ID DST_ID [--force]

Copies SRC_ID's state to DST_ID (see copy), then clears SRC_ID under
SRC_ID's lock. Exit status
3 when SRC_ID has no state; SRC_ID = DST_ID is refused (Meltano would
delete the state).
  --force  do not ask for confirmation (required when standard input is
           not a terminal)
)";
    else if (command == "state clear")
        body = R"(Usage: chstate [OPTIONS] state clear STATE_ID [--force]
       chstate [OPTIONS] state clear --all [--force]

Removes a state id's state, under its lock; or, with --all, every state
(prints how many). Clearing an id without state succeeds.
  --all    clear every state in the store
  --force  do not ask for confirmation (required when standard input is
           not a terminal)
)";
    else if (command == "state edit")
        body = R"(Usage: chstate [OPTIONS] state edit STATE_ID [--force] [--no-validate]

Opens the state (as get shows it, indented; {} when there is none) in
$VISUAL, else $EDITOR, else vi, and stores the edited JSON as the completed
state, as `meltano state edit` does. Nothing is written when the file is
left empty or unchanged. The edit is written under the state id's lock, and
only if the state did not change while it was being edited (else exit
status 4). When the edit is refused, the file is kept and its name printed.
  --force        do not ask for confirmation first (required when standard
                 input is not a terminal)
  --no-validate  accept a JSON object without "singer_state"
)";
    else if (command == "state export")
        body = R"(Usage: chstate [OPTIONS] state export [--output FILE] [--progress|--no-progress]

Writes every state as one JSON document, the format of `meltano state export`:
  {"STATE_ID":{"completed":{...},"partial":{...}},...}
in state id order, on one line, every value exactly as stored (big integers,
floats, NaN and Infinity, key order), so that import restores it byte for
byte. Nothing is written when any state cannot be exported: a stored state
that cannot be read (exit status 5), or a state id that is not UTF-8 and so
cannot be a JSON key (exit status 1; rename it with chstate state move), or
one holding a NUL byte, which import refuses (exit status 1).
  --output FILE   write to FILE (replaced only when complete) instead of
                  standard output
  --progress      report progress on standard error (a bar on a terminal);
                  by default only from 1,000 states on
  --no-progress   never report progress
)";
    else if (command == "state import")
        body = R"(Usage: chstate [OPTIONS] state import [FILE|-] [--force] [--progress|--no-progress]

Stores every state of a document that chstate state export or meltano state
export wrote (standard input when FILE is - or absent), replacing the
states of those ids; other ids are left alone. The whole document is read
and checked first: when anything is wrong (not JSON, not an object of
{"completed": {...}, "partial": {...}} objects, an empty id, a value the
store cannot keep) nothing is written and the exit status is 7. It is then
written in batches of up to 1,000 states (one INSERT each); a failure part
way names how many states were written; importing again finishes the job.
Into a store that already holds states it asks first, saying how many of
them it replaces (standard input must be a terminal for that: --force
otherwise, e.g. when the document comes on standard input).
  --force         do not ask
  --progress      report progress on standard error (a bar on a terminal);
                  by default only from 1,000 states on
  --no-progress   never report progress
)";
    else if (command == "lock")
        body = R"(Usage: chstate [OPTIONS] lock STATE_ID -- COMMAND [ARG...]

Acquires STATE_ID's lock (the lock Meltano's ClickHouse backend and chstate
writers take), runs COMMAND while holding it, releases it when COMMAND ends,
and exits with COMMAND's exit status (128+N when signal N killed it; 127
when it cannot be found, 126 when it cannot be run). SIGINT, SIGTERM, SIGHUP
and SIGQUIT sent to chstate are passed on to COMMAND (a terminal's Ctrl-C
reaches both directly); while still waiting for the lock they stop the wait
(exit status 128+N). No lock within --lock-timeout, or any other failure of
chstate's before COMMAND runs: exit status 125, COMMAND not run. COMMAND
finds CHSTATE_LOCK_STATE_ID and CHSTATE_LOCK_TOKEN (the fencing token; 0 in
seed-compatible mode) in its environment.

COMMAND does not outlive the chstate holding its lock: it runs under a guard
process (a second chstate) that stops COMMAND and everything it started
(SIGTERM, then SIGKILL after 5 s) when chstate ends however it ends (SIGKILL
and OOM kills included), when the lock is lost, and, when COMMAND exits,
what it left running, before the lock is released.

The lock's mode (--lock-mode):
  strict           (the default on the embedded engine) the lease is renewed
                   every lease_ttl/3 (20 s); if a renewal fails the lock is
                   lost: COMMAND and what it started are stopped and chstate
                   exits with status 124. A chstate killed while holding it leaves a lease that
                   expires after lease_ttl (60 s) and clock_skew.
                   Needs ClickHouse >= 22.2; Python Meltano does not see it.
  seed-compatible  (the default over HTTP) the lock Python Meltano honours.
                   It cannot be renewed: after its stale age (300 s) another
                   client may remove it and take the lock. chstate warns on
                   standard error when COMMAND runs that long; keep locked
                   commands shorter, or use strict where no Meltano shares
                   the lock. A chstate killed while holding it leaves its
                   row, which blocks the id until that stale age.
A second `chstate lock` on the same id waits for the first (up to
--lock-timeout), as do set, merge, clear and edit of that id and move from it.
)";
    return body + "\n" + global_text;
}

} // namespace

std::string help_text(const std::string& command) {
    if (command.empty())
        return top_help();
    if (command == "state")
        return state_help();
    return command_help(command);
}

std::string version_text() { return "chstate " CHSTATE_CLI_VERSION "\n"; }

} // namespace chstate_cli
