#!/usr/bin/env python3
"""Tests of the `chstate` command-line tool, driving the real binary.

Usage: python3 tests/cli/test_cli.py PATH/TO/chstate [--server-dir DIR]

Every command runs against (a) the embedded engine in a fresh folder and
(b) the ClickHouse server in DIR (scripts/clickhouse-server.sh start DIR;
default: $CHSTATE_TEST_SERVER_DIR), each in a schema of its own. Python's
json module is the reference for every value the tool prints or exports.
Ends with `cli: cases=N failures=F`; exits non-zero on any failure. A
missing binary or server is a failure, never a skip.
"""

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
import time
import traceback
import urllib.parse
import uuid

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_LOCKED, EXIT_SERVER, EXIT_CONNECTION, EXIT_INVALID = range(8)
# `chstate lock`'s own failures, apart from any status its command can have (as timeout(1)'s)
EXIT_LOCK_LOST, EXIT_LOCK_FAILED = 124, 125

cases = 0
failures = 0


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


ONLY = None  # --only: run just the cases whose name contains it (development)


def case(name, fn, *args):
    global cases, failures
    if ONLY and ONLY not in name:
        return
    cases += 1
    started = time.monotonic()
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - every failure is reported and counted
        failures += 1
        print(f"FAIL {name}: {e}", file=sys.stderr)
        if not isinstance(e, Failed):
            traceback.print_exc()
        return
    print(f"ok   {name} ({time.monotonic() - started:.1f} s)", file=sys.stderr)


class Result:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def text(self):
        return self.out.decode("utf-8")

    def errtext(self):
        return self.err.decode("utf-8", "replace")

    def __repr__(self):
        return f"rc={self.rc} stdout={self.out[:300]!r} stderr={self.err[:600]!r}"


def expect(r, rc, what=""):
    check(r.rc == rc, f"{what}: expected exit status {rc}, got {r!r}")
    if rc != EXIT_OK:
        lines = [l for l in r.errtext().splitlines() if l.startswith("chstate: ") and "waiting for" not in l]
        check(len(lines) >= 1, f"{what}: no 'chstate: …' error line on stderr: {r!r}")
    return r


class Store:
    """One store the binary is pointed at (through the environment)."""

    def __init__(self, binary, name, env, work):
        self.binary, self.name, self.env, self.work = binary, name, env, work

    def run(self, *args, input=None, env=None, timeout=120):
        e = dict(self.env)
        if env:
            e.update(env)
        p = subprocess.run([self.binary, *args], input=input, capture_output=True, env=e, timeout=timeout)
        return Result(p.returncode, p.stdout, p.stderr)

    def popen(self, *args, env=None):
        e = dict(self.env)
        if env:
            e.update(env)
        return subprocess.Popen([self.binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)

    def set(self, sid, obj_text, *extra):
        return expect(self.run("state", "set", sid, obj_text, "--force", *extra), EXIT_OK, f"set {sid!r}")

    def get(self, sid):
        return expect(self.run("state", "get", sid), EXIT_OK, f"get {sid!r}").out

    def ids(self):
        return expect(self.run("state", "list", "--null"), EXIT_OK, "list --null").out.split(b"\0")[:-1]

    def clear_all(self):
        expect(self.run("state", "clear", "--all", "--force"), EXIT_OK, "clear --all")


def base_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELTANO_STATE_BACKEND")}
    env.pop("VISUAL", None)
    env.pop("EDITOR", None)
    return env


def compact(obj):
    return json.dumps(obj, separators=(",", ":"))


# States whose values Python's json module writes in every tricky way.
TRICKY = (
    '{"singer_state": {"bookmarks": {"orders": {"replication_key_value": 18446744073709551616, '
    '"since": 1700000000.8702567, "neg": -9223372036854775809, "huge": '
    + "1" * 400
    + ', "nan": NaN, "inf": Infinity, "ninf": -Infinity, "negzero": -0.0, "e16": 1e+16, '
    '"tiny": 5e-324, "one": 1, "onef": 1.0, "z": 1, "a": 2, "m": 3, "text": "caf\\u00e9 \\ud83d\\ude00 '
    'tab\\t nl\\n", "lone": "\\ud800", "list": [1, [2, {"b": 1, "a": 0}], null, true, false]}}}}'
)


# ---- commands on one store ---------------------------------------------------------


def t_set_get_exact(s):
    s.set("dev:tap-a-to-target-b", TRICKY)
    expected = json.loads(TRICKY)
    out = s.get("dev:tap-a-to-target-b")
    check(out == (compact(expected) + "\n").encode(), f"get differs from Python's compact dump:\n{out[:400]!r}")
    pretty = expect(s.run("state", "get", "dev:tap-a-to-target-b", "--format", "pretty"), EXIT_OK, "pretty").out
    check(pretty == (json.dumps(expected, indent=2) + "\n").encode(), "get --format pretty differs from indent=2")
    upper = expect(s.run("state", "get", "dev:tap-a-to-target-b", "--format", "PRETTY"), EXIT_OK, "PRETTY").out
    check(upper == pretty, "get --format PRETTY (Meltano accepts any case) differs from --format pretty")
    # Stored as the completed state, partial empty (as meltano state set).
    exported = json.loads(expect(s.run("state", "export"), EXIT_OK, "export").out)
    check(exported["dev:tap-a-to-target-b"]["partial"] == {}, "set left a partial state")
    check(list(exported["dev:tap-a-to-target-b"]["completed"]["singer_state"]["bookmarks"]["orders"]) ==
          list(expected["singer_state"]["bookmarks"]["orders"]), "key order changed")


def t_set_validation(s):
    sid = "dev:validate"
    expect(s.run("state", "set", sid, "not json", "--force"), EXIT_INVALID, "not JSON")
    expect(s.run("state", "set", sid, "[1, 2]", "--force"), EXIT_INVALID, "an array")
    r = expect(s.run("state", "set", sid, '{"bookmarks": {}}', "--force"), EXIT_INVALID, "no singer_state")
    check("singer_state" in r.errtext() and "--no-validate" in r.errtext(), f"message names the rule: {r!r}")
    expect(s.run("state", "get", sid), EXIT_NOT_FOUND, "nothing was written")
    r = expect(s.run("state", "set", sid, '{"singer_state": {}}'), EXIT_USAGE, "no --force without a terminal")
    check("--force" in r.errtext(), f"names --force: {r!r}")
    expect(s.run("state", "get", sid), EXIT_NOT_FOUND, "nothing was written without --force")
    expect(s.run("state", "set", sid, '{"singer_state": {}}', "--input-file", "x", "--force"), EXIT_USAGE, "both")
    expect(s.run("state", "set", sid, "--force"), EXIT_USAGE, "neither")
    s.set(sid, '{"bookmarks": {"x": 1}}', "--no-validate")
    check(s.get(sid) == b'{"bookmarks":{"x":1}}\n', "--no-validate stored the object")
    path = os.path.join(s.work, "state.json")
    with open(path, "w") as f:
        f.write('{"singer_state": {"from": "file"}}')
    expect(s.run("state", "set", sid, "--input-file", path, "--force"), EXIT_OK, "--input-file")
    check(s.get(sid) == b'{"singer_state":{"from":"file"}}\n', "--input-file stored")
    expect(s.run("state", "set", sid, "--input-file", "-", "--force", input=b'{"singer_state": {"from": "stdin"}}'),
           EXIT_OK, "--input-file -")
    check(s.get(sid) == b'{"singer_state":{"from":"stdin"}}\n', "stdin stored")
    expect(s.run("state", "set", sid, "--input-file", os.path.join(s.work, "missing.json"), "--force"),
           EXIT_FAILURE, "unreadable file")
    deep = '{"singer_state": ' + "[" * 100001 + "]" * 100001 + "}"
    expect(s.run("state", "set", sid, "--input-file", "-", "--force", input=deep.encode()), EXIT_INVALID, "too deep")
    big = '{"singer_state": ' + "9" * 4301 + "}"
    expect(s.run("state", "set", sid, big, "--force"), EXIT_INVALID, "an integer Python cannot read")
    r = expect(s.run("state", "set", sid, "--input-file", "/dev/zero", "--force"), EXIT_INVALID, "/dev/zero")
    check("more than 268435456 bytes" in r.errtext(), f"names the bound: {r!r}")
    with open("/dev/zero", "rb") as zero:  # an endless standard input
        p = subprocess.run([s.binary, "state", "set", sid, "--input-file", "-", "--force"], stdin=zero,
                           capture_output=True, env=s.env, timeout=120)
    expect(Result(p.returncode, p.stdout, p.stderr), EXIT_INVALID, "endless standard input")
    check(b"standard input holds more than" in p.stderr, f"names standard input: {p.stderr[:300]!r}")


def t_get_missing(s):
    r = expect(s.run("state", "get", "dev:none"), EXIT_NOT_FOUND, "missing")
    check(r.out == b"", "nothing on stdout")
    r = expect(s.run("state", "get", "dev:none", "--missing-ok"), EXIT_OK, "--missing-ok")
    check(r.out == b"{}\n", f"--missing-ok prints {{}}: {r!r}")
    expect(s.run("state", "get", "x", "--format", "yaml"), EXIT_USAGE, "bad format")


def t_list(s):
    s.clear_all()
    r = expect(s.run("state", "list"), EXIT_OK, "empty list")
    check(r.out == b"", "empty store lists nothing")
    for sid in ["dev_a1", "devXa2", "prod:b", "dev_a?"]:
        s.set(sid, '{"singer_state": {}}')
    check(expect(s.run("state", "list"), EXIT_OK, "list").out == b"devXa2\ndev_a1\ndev_a?\nprod:b\n", "all ids, in byte order")
    check(expect(s.run("state", "list", "--pattern", "dev_a*"), EXIT_OK, "glob").out == b"dev_a1\ndev_a?\n",
          "_ is literal, * a wildcard")
    check(expect(s.run("state", "list", "--pattern=dev?a?"), EXIT_OK, "?").out == b"devXa2\ndev_a1\ndev_a?\n",
          "? is one character")
    check(expect(s.run("state", "list", "--pattern", "nothing*"), EXIT_OK, "no match").out == b"", "no match")


def t_unusual_ids(s):
    s.clear_all()
    s.set("plain", '{"singer_state": {}}')
    s.set(b"bad\xff\xfeid", '{"singer_state": {"x": 1}}')
    s.set("two\nlines", '{"singer_state": {}}')
    r = expect(s.run("state", "list"), EXIT_FAILURE, "an id with a newline")
    check(b"bad\xff\xfeid\n" in r.out and b"plain\n" in r.out, f"the others are listed: {r!r}")
    check("--null" in r.errtext(), "points at --null")
    check(sorted(s.ids()) == sorted([b"bad\xff\xfeid", b"plain", b"two\nlines"]), "--null lists every id exactly")
    check(s.get(b"bad\xff\xfeid") == b'{"singer_state":{"x":1}}\n', "a non-UTF-8 id is addressable")
    r = expect(s.run("state", "export"), EXIT_FAILURE, "export with a non-UTF-8 id")
    check(r.out == b"", "export wrote nothing")
    check("not UTF-8" in r.errtext(), f"names the problem: {r!r}")
    expect(s.run("state", "move", b"bad\xff\xfeid", "renamed", "--force"), EXIT_OK, "rename it")
    doc = json.loads(expect(s.run("state", "export"), EXIT_OK, "export after the rename").out)
    check(sorted(doc) == ["plain", "renamed", "two\nlines"], f"exported ids: {sorted(doc)}")
    s.clear_all()


def t_merge(s):
    s.clear_all()
    s.set("src", '{"singer_state": {"bookmarks": {"a": {"v": 1}, "b": [1, 2]}}}')
    s.set("dst", '{"singer_state": {"bookmarks": {"a": {"w": 2}, "b": [3], "c": 1}}}')
    expect(s.run("state", "merge", "src", "dst"), EXIT_OK, "merge SRC DST")
    check(s.get("dst") == (compact({"singer_state": {"bookmarks": {"a": {"w": 2, "v": 1}, "b": [1, 2], "c": 1}}}) + "\n").encode(),
          f"merged view: {s.get('dst')!r}")
    expect(s.run("state", "merge", "dst", "--from-state", '{"singer_state": {"bookmarks": {"d": 18446744073709551617}}}'),
           EXIT_OK, "--from-state")
    check(b'"d":18446744073709551617' in s.get("dst"), "--from-state merged exactly")
    path = os.path.join(s.work, "m.json")
    with open(path, "w") as f:
        f.write('{"singer_state": {"bookmarks": {"e": NaN}}}')
    expect(s.run("state", "merge", "dst", "--input-file", path), EXIT_OK, "--input-file")
    check(b'"e":NaN' in s.get("dst"), "--input-file merged")
    expect(s.run("state", "merge", "fresh", "--from-state-id", "src"), EXIT_OK, "--from-state-id")
    check(s.get("fresh") == s.get("src"), "merge into an id without state")
    exported = json.loads(expect(s.run("state", "export"), EXIT_OK, "export").out)
    check(exported["fresh"]["completed"] == {} and exported["fresh"]["partial"] == json.loads(s.get("src")),
          "merge writes the partial state")
    expect(s.run("state", "merge", "nope", "dst"), EXIT_NOT_FOUND, "missing source")
    expect(s.run("state", "merge", "dst", "--from-state", '{"x": 1}'), EXIT_INVALID, "no singer_state")
    expect(s.run("state", "merge", "dst", "--from-state", '{"x": 1}', "--no-validate"), EXIT_OK, "--no-validate")
    expect(s.run("state", "merge", "dst", "--from-state", "{nope"), EXIT_INVALID, "not JSON")
    expect(s.run("state", "merge", "src", '{"singer_state": {}}'), EXIT_USAGE, "Meltano's merge ID JSON form")
    expect(s.run("state", "merge", "dst"), EXIT_USAGE, "nothing to merge")
    expect(s.run("state", "merge", "dst", "--from-state", "{}", "--from-state-id", "src"), EXIT_USAGE, "two sources")
    expect(s.run("state", "merge", "src", "src"), EXIT_INVALID, "src == dst")
    s.set("nosinger", '{"x": 1}', "--no-validate")
    expect(s.run("state", "merge", "nosinger", "dst"), EXIT_INVALID, "source without singer_state")


def t_copy_move(s):
    s.clear_all()
    s.set("a", TRICKY)
    expect(s.run("state", "copy", "a", "b"), EXIT_USAGE, "copy without --force")
    expect(s.run("state", "get", "b"), EXIT_NOT_FOUND, "nothing copied without --force")
    expect(s.run("state", "copy", "a", "b", "--force"), EXIT_OK, "copy")
    check(s.get("b") == s.get("a"), "copy is exact")
    expect(s.run("state", "copy", "missing", "b", "--force"), EXIT_NOT_FOUND, "copy from nothing")
    expect(s.run("state", "move", "b", "c", "--force"), EXIT_OK, "move")
    expect(s.run("state", "get", "b"), EXIT_NOT_FOUND, "move cleared the source")
    check(s.get("c") == s.get("a"), "move is exact")
    expect(s.run("state", "move", "c", "c", "--force"), EXIT_INVALID, "move onto itself")
    check(s.get("c") == s.get("a"), "move onto itself kept the state")
    expect(s.run("state", "move", "missing", "d", "--force"), EXIT_NOT_FOUND, "move from nothing")
    expect(s.run("state", "copy", "a"), EXIT_USAGE, "one id")


def t_clear(s):
    s.clear_all()
    for sid in ["x", "y", "z"]:
        s.set(sid, '{"singer_state": {}}')
    expect(s.run("state", "clear", "x"), EXIT_USAGE, "clear without --force")
    expect(s.run("state", "clear", "x", "--force"), EXIT_OK, "clear")
    expect(s.run("state", "get", "x"), EXIT_NOT_FOUND, "cleared")
    expect(s.run("state", "clear", "never-set", "--force"), EXIT_OK, "clear of an id without state")
    expect(s.run("state", "clear", "--force"), EXIT_USAGE, "neither id nor --all")
    expect(s.run("state", "clear", "y", "--all", "--force"), EXIT_USAGE, "both")
    r = expect(s.run("state", "clear", "--all", "--force"), EXIT_OK, "clear --all")
    check("2 state(s)" in r.errtext(), f"counts: {r!r}")
    check(s.ids() == [], "store empty")


EDITOR_SCRIPT = r'''#!/usr/bin/env python3
import json, os, sys
path = sys.argv[-1]
mode = os.environ["EDIT_MODE"]
text = open(path).read()
with open(os.environ["EDIT_SEEN"], "w") as f:
    f.write(text)
if mode == "modify":
    obj = json.loads(text)
    obj.setdefault("singer_state", {}).setdefault("bookmarks", {})["edited"] = 18446744073709551616
    text = json.dumps(obj, indent=4)
elif mode == "garbage":
    text = "{ not json"
elif mode == "empty":
    text = "\n"
elif mode == "nosinger":
    text = '{"bookmarks": {}}'
elif mode == "fail":
    sys.exit(3)
with open(path, "w") as f:
    f.write(text)
'''


def t_edit(s):
    s.clear_all()
    editor = os.path.join(s.work, "editor.py")
    with open(editor, "w") as f:
        f.write(EDITOR_SCRIPT)
    os.chmod(editor, 0o755)
    seen = os.path.join(s.work, "seen.json")

    def edit(mode, sid="job", *extra):
        return s.run("state", "edit", sid, "--force", *extra,
                     env={"EDITOR": editor, "EDIT_MODE": mode, "EDIT_SEEN": seen})

    s.set("job", '{"singer_state": {"bookmarks": {"a": 1.5}}}')
    s.run("state", "merge", "job", "--from-state", '{"singer_state": {"bookmarks": {"b": 2}}}')
    expect(edit("modify"), EXIT_OK, "edit")
    with open(seen) as f:
        check(f.read() == json.dumps({"singer_state": {"bookmarks": {"a": 1.5, "b": 2}}}, indent=2) + "\n",
              "the editor saw the merged state, indented")
    check(s.get("job") == b'{"singer_state":{"bookmarks":{"a":1.5,"b":2,"edited":18446744073709551616}}}\n',
          f"edited state stored: {s.get('job')!r}")
    exported = json.loads(s.run("state", "export").out)
    check(exported["job"]["partial"] == {}, "stored as the completed state")
    before = s.get("job")
    r = expect(edit("none"), EXIT_OK, "unchanged")
    check("no changes" in r.errtext(), f"says so: {r!r}")
    expect(edit("empty"), EXIT_OK, "emptied")
    check(s.get("job") == before, "empty content changes nothing")
    r = expect(edit("garbage"), EXIT_INVALID, "invalid JSON")
    check("kept in" in r.errtext(), f"names the kept file: {r!r}")
    kept = r.errtext().split("kept in ")[1].split(")")[0]
    check(os.path.exists(kept), "the edit is kept")
    os.unlink(kept)
    expect(edit("nosinger"), EXIT_INVALID, "no singer_state")
    expect(edit("fail"), EXIT_FAILURE, "the editor failed")
    check(s.get("job") == before, "refused edits change nothing")
    expect(s.run("state", "edit", "job", env={"EDITOR": editor, "EDIT_MODE": "modify", "EDIT_SEEN": seen}),
           EXIT_USAGE, "edit without --force")
    expect(edit("modify", "newjob"), EXIT_OK, "edit of an id without state")
    with open(seen) as f:
        check(f.read() == "{}\n", "a new state starts as {}")
    check(s.get("newjob") == b'{"singer_state":{"bookmarks":{"edited":18446744073709551616}}}\n', "new state stored")


def tricky_states():
    """id -> {"completed": …, "partial": …} texts, as Python would write them."""
    return {
        "dev:tap-a-to-target-b": json.loads('{"completed": ' + TRICKY + ', "partial": {}}'),
        "dev:partial-only": {"completed": {}, "partial": {"singer_state": {"bookmarks": {"p": 0.1, "q": [0.30000000000000004]}}}},
        "dev:both": {"completed": {"singer_state": {"a": 1}}, "partial": {"singer_state": {"b": float("nan")}}},
        "ünïcode:\U0001F600": {"completed": {"singer_state": {"k": "v"}}, "partial": {}},
        "lone:\ud800": {"completed": {"singer_state": {"\udfff": "\ud83d"}}, "partial": {}},
    }


def t_export_import_roundtrip(a, b):
    for s in (a, b):  # (an embedded store that does not exist yet is made by set; clear refuses a missing one)
        s.set("roundtrip-seed", '{"singer_state": {}}')
        s.clear_all()
    states = tricky_states()
    # A document in Meltano's own export format, written by Python.
    meltano_doc = compact(states)
    path = os.path.join(a.work, "meltano-export.json")
    with open(path, "w") as f:
        f.write(meltano_doc)
    r = expect(a.run("state", "import", path), EXIT_OK, f"import into {a.name}")
    check("imported 5 state(s)" in r.errtext(), f"counts: {r!r}")
    expected = (compact(dict(sorted(states.items(), key=lambda kv: kv[0].encode("utf-8", "surrogatepass")))) + "\n").encode()
    out = expect(a.run("state", "export"), EXIT_OK, f"export from {a.name}").out
    check(out == expected, f"export of {a.name} differs from Python's dump:\n{out[:500]!r}\n{expected[:500]!r}")
    # Into the other store through standard input, and out again.
    expect(b.run("state", "import", "-", input=out), EXIT_OK, f"import into {b.name}")
    out_file = os.path.join(b.work, "export.json")
    expect(b.run("state", "export", "--output", out_file), EXIT_OK, f"export from {b.name}")
    with open(out_file, "rb") as f:
        check(f.read() == expected, f"{a.name} -> {b.name} is not byte-exact")
    check(b.get("dev:tap-a-to-target-b") == (compact(json.loads(TRICKY)) + "\n").encode(), "get after import")
    # Importing again overwrites and keeps other ids: into a store that holds
    # states it asks first (refused without a terminal or --force, nothing written).
    b.set("other", '{"singer_state": {}}')
    b.set("dev:tap-a-to-target-b", '{"singer_state": {"changed": 1}}')
    r = expect(b.run("state", "import", out_file), EXIT_USAGE, "import into a store holding states, no --force")
    check("already holds 6 state(s)" in r.errtext() and "replacing 5 of them" in r.errtext() and "--force" in r.errtext(),
          f"says what it would replace: {r!r}")
    check(b.get("dev:tap-a-to-target-b") == b'{"singer_state":{"changed":1}}\n', "nothing was imported")
    expect(b.run("state", "import", out_file, "--force"), EXIT_OK, "import again, --force")
    check(b.get("dev:tap-a-to-target-b") == (compact(json.loads(TRICKY)) + "\n").encode(), "replaced by the import")
    check(len(b.ids()) == 6, "import leaves other ids alone")


def t_import_validation(s):
    s.clear_all()
    s.set("keep", '{"singer_state": {"k": 1}}')

    def imp(text, what):
        r = expect(s.run("state", "import", "-", input=text.encode()), EXIT_INVALID, what)
        check(s.ids() == [b"keep"], f"{what}: nothing written")
        return r

    imp("{nope", "not JSON")
    imp("[]", "not an object")
    imp('{"a": {"completed": {}, "partial": {}}, "b": {"completed": [], "partial": {}}}', "a part not an object")
    imp('{"a": {"completed": {}, "partial": {}}, "b": {"completed": {}, "extra": {}}}', "an unknown key")
    imp('{"a": {"completed": {}}, "": {"completed": {}}}', "an empty id")
    imp('{"a": {"completed": {}}, "b": 5}', "an entry not an object")
    imp('{"a": {"completed": {}}, "b": {"completed": {"n": ' + "9" * 4301 + "}}}", "an unwritable integer")
    r = imp('{"a": {"completed": {}}, "b\\u0000c": {"completed": {}}}', "an id holding NUL (no command can name it)")
    check("NUL" in r.errtext(), f"names the NUL byte: {r!r}")
    # An endless input: refused at the bound, in bounded memory.
    r = expect(s.run("state", "import", "/dev/zero"), EXIT_INVALID, "import /dev/zero")
    check("more than 1073741824 bytes" in r.errtext(), f"names the bound: {r!r}")
    check(s.ids() == [b"keep"], "import /dev/zero: nothing written")
    r = imp('{"' + "i" * 5_000_000 + '": {"completed": []}}', "a 5 MB id in a bad entry")
    check(len(r.err) < 2000, f"the message quotes the id shortened: {len(r.err)} bytes")
    expect(s.run("state", "import", os.path.join(s.work, "missing.json")), EXIT_FAILURE, "missing file")
    expect(s.run("state", "import", "a", "b"), EXIT_USAGE, "two files")


def t_progress(s):
    s.clear_all()
    n = 1200
    doc = compact({f"job:{i:05d}": {"completed": {"singer_state": {"i": i}}, "partial": {}} for i in range(n)})
    r = expect(s.run("state", "import", "-", input=doc.encode()), EXIT_OK, "import of many states")
    check(f"chstate: import: {n}/{n} states done" in r.errtext(), f"progress on stderr: {r.errtext()[-300:]!r}")
    r = expect(s.run("state", "export"), EXIT_OK, "export of many states")
    check(r.out == (doc + "\n").encode(), "many states round-trip")
    check(f"chstate: export: {n}/{n} states done" in r.errtext(), "export progress")
    r = expect(s.run("state", "export", "--no-progress", "-q"), EXIT_OK, "quiet export")
    check(r.err == b"", f"nothing on stderr: {r.err[:200]!r}")
    s.clear_all()
    s.set("one", '{"singer_state": {}}')
    r = expect(s.run("state", "export"), EXIT_OK, "small export")
    check("states done" not in r.errtext(), "no progress for a few states")
    r = expect(s.run("state", "export", "--progress"), EXIT_OK, "forced progress")
    check("chstate: export: 1/1 states done" in r.errtext(), f"--progress: {r!r}")


def wait_for(path, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            err = proc.stderr.read()[:500] if proc.stderr else b""
            raise Failed(f"the locking process ended early: {proc.returncode} {err!r}")
        if time.monotonic() > deadline:
            raise Failed(f"{path} did not appear")
        time.sleep(0.05)


def t_lock(s):
    s.clear_all()
    r = expect(s.run("lock", "job", "--", "sh", "-c", 'echo "$CHSTATE_LOCK_STATE_ID"; exit 7'), 7, "exit status passed")
    check(r.out == b"job\n", f"the command saw its id: {r!r}")
    expect(s.run("lock", "job", "--", "sh", "-c", "kill -KILL $$"), 128 + 9, "killed command")
    expect(s.run("lock", "job", "--", "no-such-command-chstate"), 127, "command not found")
    expect(s.run("lock", "job", "sh"), EXIT_LOCK_FAILED, "no --")
    expect(s.run("lock", "job", "--"), EXIT_LOCK_FAILED, "no command")
    expect(s.run("--lock-mode", "sloppy", "lock", "job", "--", "true"), EXIT_LOCK_FAILED, "bad option")

    # A second lock on the same id is excluded while the first holds it.
    marker = os.path.join(s.work, "holding")
    release = os.path.join(s.work, "release")
    for p in (marker, release):
        if os.path.exists(p):
            os.unlink(p)
    first = s.popen("lock", "job", "--", "sh", "-c",
                    f'touch {marker}; while [ ! -e {release} ]; do sleep 0.05; done; exit 5')
    try:
        wait_for(marker, first)
        started = time.monotonic()
        r = expect(s.run("--lock-timeout", "1", "lock", "job", "--", "touch", os.path.join(s.work, "second-ran")),
                   EXIT_LOCK_FAILED, "second lock")
        check(not os.path.exists(os.path.join(s.work, "second-ran")), "the second command did not run")
        check(time.monotonic() - started < 30, "the second lock gave up after its timeout")
        # The environment's lock timeout applies as well.
        expect(s.run("lock", "job", "--", "true", env={"MELTANO_STATE_BACKEND_CLICKHOUSE_LOCK_TIMEOUT": "1s"}),
               EXIT_LOCK_FAILED, "second lock, MELTANO_STATE_BACKEND_CLICKHOUSE_LOCK_TIMEOUT")
        # A write that takes the lock waits too.
        expect(s.run("--lock-timeout", "1", "state", "set", "job", '{"singer_state": {}}', "--force"),
               EXIT_LOCKED, "set while locked")
    finally:
        open(release, "w").close()
        out, err = first.communicate(timeout=120)
    check(first.returncode == 5, f"first lock passes its command's status: {first.returncode} {err!r}")
    expect(s.run("--lock-timeout", "5", "lock", "job", "--", "true"), EXIT_OK, "lock free again after release")


def t_lock_signal(s):
    marker = os.path.join(s.work, "trap-ready")
    if os.path.exists(marker):
        os.unlink(marker)
    p = s.popen("lock", "sig", "--", "sh", "-c",
                f'trap "exit 42" TERM; touch {marker}; while :; do sleep 0.05; done')
    wait_for(marker, p)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 42, f"SIGTERM reached the command, its status came back: {p.returncode} {err!r}")
    expect(s.run("--lock-timeout", "5", "lock", "sig", "--", "true"), EXIT_OK, "released after the signal")


lock_kills = 0
orphaned_jobs = 0


def job_processes(tag):
    """Pids of the live processes whose argv[0] starts with `tag` (the job's
    sleeps, named with bash's exec -a)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if cmd.startswith(tag.encode()) and state != b"Z":
            found.append(int(pid))
    return found


def t_lock_killed(s, how):
    """`chstate lock` ended while its command runs (`how`: SIGKILL or SIGTERM to
    chstate, the command crashing — killed by a signal that dumps no core):
    no process of the command's tree is left.

    The command is a tree: a shell that starts a background sleep and a
    foreground one (a grandchild and a child), tagged so they can be found.
    SIGKILL gives chstate no chance to act: its guard sees it gone and stops
    the tree. Counted as `cli-lock: kills=N orphaned_jobs=M`."""
    global lock_kills, orphaned_jobs
    tag = uuid.uuid4().hex[:12]
    marker = os.path.join(s.work, "tree-" + tag)
    started = marker + ".grandchild"
    grandchild = f'bash -c "touch {started}; exec -a {tag}-grandchild sleep 600" & '
    wait_grandchild = f'while [ ! -e {started} ]; do sleep 0.05; done; '
    script = grandchild + wait_grandchild + f'touch {marker}; exec -a {tag}-child sleep 600'
    if how == "crash":
        script = grandchild + wait_grandchild + f'touch {marker}; kill -USR1 $$'
    # (stderr to a file, not a pipe: a process left behind would hold a pipe open)
    err_path = os.path.join(s.work, "tree-" + tag + ".err")
    with open(err_path, "wb") as err_file:
        p = subprocess.Popen([s.binary, "lock", "tree-" + tag, "--", "bash", "-c", script], env=s.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err_file)

    def stderr_text():
        with open(err_path, "rb") as f:
            return f.read()
    try:
        wait_for(marker, p)
        if how == "crash":
            p.wait(timeout=60)
            err = stderr_text()
            check(p.returncode == 128 + signal.SIGUSR1, f"the crash's status came back: {p.returncode} {err!r}")
            check(b"left 1 process(es) running" in err, f"says what it stopped: {err!r}")
        else:
            # (the sleeps are up: the marker is touched after the grandchild's start)
            deadline = time.monotonic() + 30
            while len(job_processes(tag)) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            check(len(job_processes(tag)) == 2, f"the command's two sleeps run: {job_processes(tag)}")
            p.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGTERM)
            p.wait(timeout=60)
            expected = -signal.SIGKILL if how == "SIGKILL" else 128 + signal.SIGTERM
            check(p.returncode == expected, f"chstate's status: {p.returncode}, expected {expected} {stderr_text()!r}")
        lock_kills += 1
        # Gone within the guard's grace (SIGTERM, then SIGKILL after 5 s);
        # waited for, not timed: the machine may be busy.
        deadline = time.monotonic() + 60
        while job_processes(tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = job_processes(tag)
        if left:
            orphaned_jobs += 1
            for pid in left:
                os.kill(pid, signal.SIGKILL)
        check(not left, f"no process of the command's tree is left: {left}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def t_lock_wait_interrupted(s):
    """A signal ends a wait for the lock; the waiter's candidate does not block later lockers."""
    marker = os.path.join(s.work, "wait-holding")
    release = os.path.join(s.work, "wait-release")
    for p in (marker, release):
        if os.path.exists(p):
            os.unlink(p)
    holder = s.popen("lock", "waited", "--", "sh", "-c",
                     f'touch {marker}; while [ ! -e {release} ]; do sleep 0.05; done')
    try:
        wait_for(marker, holder)
        waiter = s.popen("--lock-timeout", "60", "lock", "waited", "--", "touch", os.path.join(s.work, "waiter-ran"))
        time.sleep(1.5)
        check(waiter.poll() is None, "the second lock waits")
        started = time.monotonic()
        waiter.send_signal(signal.SIGTERM)
        out, err = waiter.communicate(timeout=55)
        check(waiter.returncode == 128 + signal.SIGTERM, f"ended by the signal: {waiter.returncode} {err!r}")
        # Ended by the signal, not by its 60 s lock timeout (no tighter bound:
        # the machine may be busy).
        check(time.monotonic() - started < 60, "ended by the signal, before the lock timeout")
        check(not os.path.exists(os.path.join(s.work, "waiter-ran")), "its command did not run")
    finally:
        open(release, "w").close()
        holder.communicate(timeout=60)
    # No candidate of the interrupted waiter left behind: one would hold the
    # lock past this 20 s timeout (a strict grant until its 60 s lease ends,
    # a seed-compatible row until the 5 min stale cleanup).
    expect(s.run("--lock-timeout", "20", "lock", "waited", "--", "true"), EXIT_OK, "free after both")


# ---- engine-independent ------------------------------------------------------------


HELP_COMMANDS = [[], ["state"], ["state", "list"], ["state", "get"], ["state", "set"], ["state", "merge"],
                 ["state", "copy"], ["state", "move"], ["state", "clear"], ["state", "edit"], ["state", "export"],
                 ["state", "import"], ["lock"]]


def t_help(s):
    for words in HELP_COMMANDS:
        r = expect(s.run(*words, "--help"), EXIT_OK, f"{words} --help")
        check(b"Usage" in r.out, f"{words} --help prints usage: {r!r}")
        check(r.err == b"", "help writes nothing on stderr")
        check(expect(s.run("help", *words), EXIT_OK, f"help {words}").out == r.out, "help COMMAND is COMMAND --help")
    top = s.run("--help").text()
    for word in ["Exit status", "MELTANO_STATE_BACKEND_URI", ".local/state/chstate", "export", "lock"]:
        check(word in top, f"chstate --help mentions {word}")
    check(s.run("--version").out.startswith(b"chstate "), "--version")


def t_usage(s):
    for args in [[], ["frob"], ["state"], ["state", "frob"], ["state", "get"], ["state", "get", "a", "b"],
                 ["state", "list", "--bogus"], ["state", "get", "x", "--pattern", "p"], ["--lock-timeout", "x", "state", "list"],
                 ["--lock-mode", "sloppy", "state", "list"], ["state", "list", "--pattern"]]:
        r = expect(s.run(*args), EXIT_USAGE, f"usage {args}")
        check(len(r.err.splitlines()) == 1, f"{args}: one line: {r!r}")
    # Once the command is known, its error names it.
    for args, command in [(["state", "copy"], "state copy"), (["state", "get", "a", "b"], "state get"),
                          (["state", "list", "--bogus"], "state list"), (["lock", "x"], "lock")]:
        r = s.run(*args)
        check(r.errtext().startswith(f"chstate: {command}: "), f"{args}: the message names '{command}': {r!r}")


def t_connection_errors(binary, work):
    env = base_env()
    env["MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD"] = "s3cret-pw"
    s = Store(binary, "nowhere", env, work)
    r = expect(s.run("--uri", "clickhouse://u@127.0.0.1:1/db", "state", "list"), EXIT_CONNECTION, "refused port")
    check("s3cret-pw" not in r.errtext(), "no password in the message")
    check(len(r.err.splitlines()) == 1, f"one line: {r!r}")
    r = expect(s.run("--uri", "nope://x", "state", "list"), EXIT_USAGE, "bad URI")
    # --uri takes the blame for its own value, not the variable it stands in for.
    check("--uri" in r.errtext() and "MELTANO_STATE_BACKEND_URI" not in r.errtext(), f"names --uri: {r!r}")
    env_uri = dict(env, MELTANO_STATE_BACKEND_URI="ftp://x")
    r = expect(Store(binary, "nowhere", env_uri, work).run("state", "list"), EXIT_USAGE, "bad URI variable")
    check("MELTANO_STATE_BACKEND_URI" in r.errtext(), f"names the variable: {r!r}")
    expect(s.run("--uri", "clickhouse://127.0.0.1/db", "state", "list"), EXIT_USAGE, "URI without user")
    r = expect(s.run("--uri", "clickhouse://u:topsecret@127.0.0.1:1/db", "state", "get", "x"), EXIT_CONNECTION, "password in URI")
    check("topsecret" not in r.errtext(), "no password from the URI in the message")
    # Longer than an HTTP header can carry: refused as configuration, never an abort.
    env_big = base_env()
    env_big["MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD"] = "pw-" + "p" * 100_000
    big = Store(binary, "nowhere", env_big, work)
    r = expect(big.run("--uri", "clickhouse://u@127.0.0.1:1/db", "state", "list"), EXIT_USAGE, "a 100 KB password")
    check("p" * 64 not in r.errtext() and "too long" in r.errtext(), f"a short message without the password: {r!r}")
    r = expect(s.run("--uri", "clickhouse://" + "u" * 70_000 + "@127.0.0.1:1/db", "state", "list"), EXIT_USAGE,
               "a 70,000-byte user")
    check(len(r.err) < 2000, f"a bounded message: {len(r.err)} bytes")


def t_wrong_password(server_uri_no_pw, binary, work):
    env = base_env()
    env["MELTANO_STATE_BACKEND_URI"] = server_uri_no_pw
    env["MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD"] = "wrong-password-xyz"
    r = expect(Store(binary, "wrong", env, work).run("state", "list"), EXIT_SERVER, "wrong password")
    check("wrong-password-xyz" not in r.errtext(), "no password in the message")


def t_default_folder(binary, work):
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    env = base_env()
    env["HOME"] = home
    env.pop("XDG_STATE_HOME", None)
    s = Store(binary, "default", env, work)
    s.set("d", '{"singer_state": {"x": 1}}')
    check(os.path.isdir(os.path.join(home, ".local/state/chstate")), "state in $HOME/.local/state/chstate")
    check(s.get("d") == b'{"singer_state":{"x":1}}\n', "read back")
    check(os.path.join(home, ".local/state/chstate") in s.run("--help").text(), "--help prints the folder")
    xdg = os.path.join(work, "xdg")
    env["XDG_STATE_HOME"] = xdg
    s = Store(binary, "xdg", env, work)
    s.set("e", '{"singer_state": {}}')
    check(os.path.isdir(os.path.join(xdg, "chstate")), "state in $XDG_STATE_HOME/chstate")
    check(s.ids() == [b"e"], "a folder of its own")


def t_missing_folder(binary, work):
    """A chdb: folder that does not exist: reads are refused (not taken for an empty store), set creates it."""
    env = base_env()
    s = Store(binary, "missing", env, work)
    for n, args in enumerate([["state", "list"], ["state", "get", "x"], ["state", "export"],
                              ["state", "clear", "--all", "--force"], ["state", "copy", "a", "b", "--force"],
                              ["lock", "x", "--", "true"]]):
        folder = os.path.join(work, f"no-such-{n}", "db")
        r = s.run("--uri", f"chdb:{folder}", *args)
        want = EXIT_LOCK_FAILED if args[0] == "lock" else EXIT_NOT_FOUND
        expect(r, want, f"{args} on a missing folder")
        check(folder in r.errtext() and "--uri" in r.errtext() and "does not exist" in r.errtext(),
              f"{args}: names the folder and --uri: {r!r}")
        check(not os.path.exists(folder), f"{args}: the folder was not created")
    folder = os.path.join(work, "no-such-env", "db")
    r = expect(Store(binary, "missing", dict(env, MELTANO_STATE_BACKEND_URI="chdb:" + folder), work).run(
        "state", "list"), EXIT_NOT_FOUND, "list, the folder from the variable")
    check("MELTANO_STATE_BACKEND_URI" in r.errtext(), f"names the variable: {r!r}")
    folder = os.path.join(work, "created", "db")
    r = expect(s.run("--uri", f"chdb:{folder}", "state", "set", "a", '{"singer_state": {}}', "--force"), EXIT_OK,
               "set creates the folder")
    check(f"creating the embedded store {folder}" in r.errtext(), f"set says it creates the store: {r!r}")
    # Every write names where it wrote (the store and the table).
    check(f"in chdb:{folder}, table meltano.state" in r.errtext(), f"set names the target: {r!r}")
    r = expect(s.run("--uri", f"chdb:{folder}", "state", "copy", "a", "b", "--force"), EXIT_OK, "copy")
    check(f"in chdb:{folder}, table meltano.state" in r.errtext(), f"copy names the target: {r!r}")
    # A path too long to create: the engine's typed error, quoting it shortened.
    long_folder = os.path.join(work, "p" * 70_000)
    r = expect(s.run("--uri", f"chdb:{long_folder}", "state", "set", "a", '{"singer_state": {}}', "--force"),
               EXIT_CONNECTION, "a 70 KB folder path")
    check(len(r.err) < 2000 and "cannot create data folder" in r.errtext(), f"a bounded message: {len(r.err)} bytes")
    # A library path given and not loadable is the error, not a fall back to another copy.
    r = s.run("--uri", f"chdb:{folder}", "state", "list", env={"CHSTATE_CHDB_LIBRARY": "/nonexistent/libchdb.so"})
    expect(r, EXIT_CONNECTION, "CHSTATE_CHDB_LIBRARY names a missing file")
    check("/nonexistent/libchdb.so" in r.errtext() and "CHSTATE_CHDB_LIBRARY" in r.errtext(),
          f"names the variable and the path: {r!r}")


def t_embedded_busy(s):
    """chDB serves a folder to one process: a second chstate waits for it, then reports it locked."""
    s.set("busy-seed", '{"singer_state": {}}')  # the store exists (lock refuses a folder that does not)
    marker = os.path.join(s.work, "busy")
    release = os.path.join(s.work, "busy-release")
    for p in (marker, release):
        if os.path.exists(p):
            os.unlink(p)
    holder = s.popen("lock", "other-id", "--", "sh", "-c",
                     f'touch {marker}; while [ ! -e {release} ]; do sleep 0.05; done')
    try:
        wait_for(marker, holder)
        r = expect(s.run("--lock-timeout", "1", "state", "list"), EXIT_LOCKED, "folder in use")
        check("in use by another process" in r.errtext(), f"says why: {r!r}")
        # A waiting command proceeds once the folder is free.
        waiter = s.popen("--lock-timeout", "30", "state", "list")
        time.sleep(1)
        open(release, "w").close()
        out, err = waiter.communicate(timeout=60)
        check(waiter.returncode == 0, f"the waiting command ran: {waiter.returncode} {err!r}")
    finally:
        open(release, "w").close()
        holder.communicate(timeout=60)


# ---- hostile input ----------------------------------------------------------------
#
# Each input below is one hostile-input case (counted apart from the cases
# above, and printed as `hostile-input: cases=N failures=F`, which the test
# command adds to the test binary's): whatever it is, the tool ends with a
# documented exit status, never a signal; a failure says so on one
# `chstate: …` line of bounded length; no secret is echoed; and nothing
# the input did not ask for changes.

hostile_cases = 0
hostile_failures = 0
ALL_EXITS = range(EXIT_OK, EXIT_INVALID + 1)
CONTROL_BYTES = [b for b in range(1, 32)] + [0x7F]  # (NUL cannot be in an argument or the environment)
ENV_OVERRIDES = ["HOST", "PORT", "DATABASE", "USER", "PASSWORD", "SECURE", "CA_FILE", "SCHEMA", "TABLE", "CLUSTER",
                 "INSERT_QUORUM", "CONNECT_TIMEOUT", "REQUEST_TIMEOUT", "LOCK_TIMEOUT"]
SECRET = "Sup3r-s3cret-pw"


hostile_lock = threading.Lock()


def hostile(name, fn, *args):
    """One hostile input: counted; a failed check counts it failed (and prints why)."""
    global hostile_cases, hostile_failures
    with hostile_lock:
        hostile_cases += 1
    try:
        fn(*args)
        return True
    except Exception as e:  # noqa: BLE001 - every failure is reported and counted
        with hostile_lock:
            hostile_failures += 1
            print(f"FAIL hostile-input {name}: {e}", file=sys.stderr)
            if not isinstance(e, Failed):
                traceback.print_exc()
        return False


def hostile_all(inputs):
    """hostile() over (name, fn) pairs, 6 at once: each waits on the server (its
    mutations), not on this machine's CPU. The number that failed."""
    with ThreadPoolExecutor(max_workers=6) as pool:
        return sum(not ok for ok in pool.map(lambda item: hostile(*item), inputs))


def sane(r, what, secrets=()):
    """The outcome of any input: a documented status, one bounded error line, no secret shown."""
    check(r.rc in ALL_EXITS, f"{what}: exit status {r.rc} is none of the documented ones: {r!r}")
    if r.rc != EXIT_OK:
        lines = [l for l in r.errtext().splitlines() if l.startswith("chstate: ")]
        check(len(lines) >= 1, f"{what}: no 'chstate: …' line on stderr: {r!r}")
        check(len(r.err) < 4096, f"{what}: {len(r.err)} bytes of error output")
    for secret in secrets:
        check(secret.encode() not in r.out and secret.encode() not in r.err, f"{what}: shows a secret: {r!r}")
    return r


def t_hostile_environment(binary, work):
    """Every setting the environment can hold, with each control byte in it, then 70,000 bytes long."""
    failed = 0
    for var in ["URI"] + ENV_OVERRIDES:
        name = "MELTANO_STATE_BACKEND_" + ("URI" if var == "URI" else "CLICKHOUSE_" + var)
        for b in CONTROL_BYTES:
            def one(var=var, name=name, b=b):
                env = base_env()
                env["MELTANO_STATE_BACKEND_URI"] = "clickhouse://u@127.0.0.1:1/db"
                env["MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD"] = SECRET
                value = "clickhouse://u@127.0.0.1:1/db?schema=a" + chr(b) + "b" if var == "URI" else "va" + chr(b) + "lue"
                if var == "PASSWORD":
                    value = SECRET + chr(b)
                env[name] = value
                r = sane(Store(binary, "env", env, work).run("state", "list", timeout=60), f"{name} with 0x{b:02x}",
                         (SECRET,))
                check(r.rc == EXIT_USAGE, f"{name} with 0x{b:02x}: refused as configuration (2), not {r!r}")
                check(name in r.errtext(), f"{name} with 0x{b:02x}: the message names the variable: {r!r}")
            failed += not hostile(f"{name} holding 0x{b:02x}", one)

        def huge(var=var, name=name):
            env = base_env()
            env["MELTANO_STATE_BACKEND_URI"] = "clickhouse://u@127.0.0.1:1/db"
            env["MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD"] = SECRET
            env[name] = ("clickhouse://u@127.0.0.1:1/db?schema=" + "s" * 70_000) if var == "URI" else "v" * 70_000
            r = sane(Store(binary, "env", env, work).run("state", "list", timeout=60), f"{name} of 70,000 bytes",
                     (SECRET,))
            check(r.rc != EXIT_OK, f"{name} of 70,000 bytes: nothing can be listed at 127.0.0.1:1: {r!r}")
            check(b"v" * 300 not in r.err and b"s" * 300 not in r.err, f"{name}: the value is quoted shortened")
        failed += not hostile(f"{name} of 70,000 bytes", huge)
    check(failed == 0, f"{failed} hostile environment inputs failed (see above)")


def t_hostile_ids(s):
    """Ids holding each control byte and malformed UTF-8: stored, read, listed and cleared byte for byte."""
    s.clear_all()
    ids = [b"ctl" + bytes([b]) + b"id" for b in CONTROL_BYTES]
    ids += [b"u8\x80", b"u8\xff", b"u8\xc0\x80", b"u8\xed\xa0\x80", b"u8\xf4\x90\x80\x80", b"u8\xe2\x82",
            b"-starts-with-a-dash", b"--force", b" leading and trailing ", b"*", b"?", b"\\*"]
    inputs = []
    for sid in ids:
        def one(sid=sid):
            doc = '{"singer_state": {"id": %s}}' % json.dumps(sid.decode("utf-8", "replace"))
            r = sane(s.run("state", "set", "--force", "--", sid, doc), f"set {sid!r}")
            if sid.startswith(b"-") and r.rc == EXIT_USAGE:
                return  # an option-like id refused as usage is a typed answer (after --, it must be taken)
            check(r.rc == EXIT_OK, f"set {sid!r}: {r!r}")
            got = sane(s.run("state", "get", "--", sid), f"get {sid!r}")
            check(got.rc == EXIT_OK and json.loads(got.out) == json.loads(doc), f"get {sid!r} gave {got!r}")
            check(sid in s.ids(), f"list --null holds {sid!r} exactly")
            sane(s.run("state", "clear", "--force", "--", sid), f"clear {sid!r}")
            expect(s.run("state", "get", "--", sid), EXIT_NOT_FOUND, f"cleared {sid!r}")
        inputs.append((f"id {sid!r}", one))
    failed = hostile_all(inputs)
    check(failed == 0, f"{failed} hostile ids failed (see above)")


# (the text, whether the tool stores it: Python's json module reads it, and
# it is an object; else the tool refuses it, as not JSON or not an object)
HOSTILE_JSON = [
    ('{"singer_state": {"a": NaN, "b": Infinity, "c": -Infinity}}', True),
    ('{"singer_state": {"big": 1e999, "small": -1e999}}', True),
    ('{"singer_state": {"k": 1, "k": 2}}', True),
    ('{"singer_state": {"lone": "\\ud800", "pair": "\\ud83d\\ude00"}}', True),
    ('{"singer_state": {"n": ' + "1" * 4000 + '}}', True),
    ('{"singer_state": {"f": ' + "1." + "0" * 5000 + '1}}', True),
    ('{"singer_state": ' + "[" * 200 + "]" * 200 + '}', True),
    ('{"singer_state": ' + '{"a":' * 200 + "0" + "}" * 200 + '}', True),
    ('  \n\t{"singer_state": {}}\n\n  ', True),
    ('{"singer_state": {"' + "k" * 100_000 + '": "' + "v" * 100_000 + '"}}', True),
    ('{"singer_state": {"nul": "\\u0000", "esc": "\\"\\\\\\/\\b\\f\\n\\r\\t"}}', True),
    ('\ufeff{"singer_state": {}}', False),
    ('{"singer_state": {}} trailing', False),
    ('{"singer_state": {}}{"singer_state": {}}', False),
    ('{"singer_state": {/* comment */}}', False),
    ("{'singer_state': {}}", False),
    ('{"singer_state": {"a": 1,}}', False),
    ('{"singer_state": {"a": 01}}', False),
    ('{"singer_state": {"a": .5}}', False),
    ('{"singer_state": {"a": +1}}', False),
    ('{"singer_state": {"a": 0x10}}', False),
    ('{"singer_state": {"a": "unterminated}}', False),
    ('{"singer_state": {"a": "raw\ttab"}}', False),
    ('{"singer_state": {"a": "bad \\x escape"}}', False),
    ('{"singer_state": {"a": "\\u12"}}', False),
    ('{"singer_state": {"a": nan}}', False),
    ('{"singer_state": {"a": true false}}', False),
    ('{"singer_state": ', False),
    ('', False),
    ('   ', False),
    ('null', False),  # (JSON, not an object)
    ('"singer_state"', False),
    ('{"singer_state": {"deep": ' + "[" * 100_001 + "]" * 100_001 + '}}', False),
]


def t_hostile_json(s):
    """`state set` from standard input, every JSON text from HOSTILE_JSON, plus malformed UTF-8."""
    texts = [(t.encode("utf-8", "surrogatepass"), ok) for t, ok in HOSTILE_JSON]
    texts += [(b'{"singer_state": {"a": "\xff\xfe"}}', False), (b'{"singer_state": {"a": "\xed\xa0\x80"}}', False),
              (b'{"singer_state": {"a": "\xc0\xaf"}}', False), (b'{"singer_state": {"a": "x\x00y"}}', False),
              (b'{"singer_state": {}}\x00', False)]
    inputs = []
    for n, (text, python_reads) in enumerate(texts):
        def one(text=text, python_reads=python_reads, sid=f"hostile:json:{n}"):
            try:
                reads = isinstance(json.loads(text.decode("utf-8")), dict)
            except (ValueError, RecursionError):
                reads = False
            check(reads == python_reads, f"the test's own table: Python {'reads' if reads else 'refuses'} it")
            s.set(sid, '{"singer_state": {"before": 1}}')
            r = sane(s.run("state", "set", sid, "--input-file", "-", "--force", input=text), f"set {text[:60]!r}")
            got = expect(s.run("state", "get", sid), EXIT_OK, "get after")
            if python_reads:
                check(r.rc == EXIT_OK, f"Python reads it, the tool refused it: {r!r}")
                check(json.dumps(json.loads(got.out)) == json.dumps(json.loads(text.decode("utf-8"))),
                      f"stored as read: {got.out[:200]!r}")
            else:
                check(r.rc == EXIT_INVALID, f"Python refuses it; the tool: {r!r}")
                check(got.out == b'{"singer_state":{"before":1}}\n', f"the stored state is untouched: {got!r}")
        inputs.append((f"JSON {text[:40]!r}", one))
    failed = hostile_all(inputs)
    check(failed == 0, f"{failed} hostile JSON texts failed (see above)")


def t_hostile_patterns(s):
    """`state list --pattern`: wildcards up to the bound and past it, huge and malformed patterns."""
    s.clear_all()
    s.set("pat:a", '{"singer_state": {}}')
    # (at most 64 `?`: each costs a pass over every id; runs of `*` cost nothing more)
    cases_ = [("?" * 64, EXIT_OK), ("?" * 65, EXIT_INVALID), ("*" * 64, EXIT_OK), ("*" * 10_000, EXIT_OK),
              ("*a" * 50_000, EXIT_OK), ("pat:" + "a" * 100_000, EXIT_OK), ("pat:\x01*", EXIT_OK),
              ("pat:\xff*", EXIT_OK), ("[a-z]*", EXIT_OK), ("\\", EXIT_OK), ("%", EXIT_OK), ("_", EXIT_OK)]
    failed = 0
    for pattern, rc in cases_:
        def one(pattern=pattern, rc=rc):
            arg = pattern.encode("utf-8", "surrogateescape") if "\xff" not in pattern else b"pat:\xff*"
            r = sane(s.run("state", "list", "--null", "--pattern", arg), f"pattern {pattern[:40]!r}")
            check(r.rc == rc, f"pattern {pattern[:40]!r}: expected {rc}: {r!r}")
        failed += not hostile(f"pattern {pattern[:40]!r}", one)
    check(failed == 0, f"{failed} hostile patterns failed (see above)")


# ---- main --------------------------------------------------------------------------


class EndlessRowsFront:
    """A TCP front for the test server: relays every byte both ways, except
    that it answers get_all's statement (its text holds max_block_size) itself,
    with well-formed RowBinary rows that never end — what a hostile proxy or
    a broken server could send."""

    def __init__(self, host, port):
        self.upstream = (host, int(port))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.sock.close()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _varint(n):
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            if not n:
                out.append(b)
                return bytes(out)
            out.append(b | 0x80)

    def _endless(self, c):
        # (id String, partial_state Nullable(String): NULL, completed_state Nullable(String))
        state = b'{"singer_state": {"x": "' + b"v" * 200 + b'"}}'
        rows = b"".join(self._varint(15) + b"endless:%07d" % i + b"\x01\x00" + self._varint(len(state)) + state
                        for i in range(4000))
        block = b"%x\r\n" % len(rows) + rows + b"\r\n"
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        while True:
            c.sendall(block)

    def _serve(self, c):
        u = socket.create_connection(self.upstream)

        def back():
            try:
                while True:
                    b = u.recv(65536)
                    if not b:
                        return
                    c.sendall(b)
            except OSError:
                pass

        threading.Thread(target=back, daemon=True).start()
        tail = b""
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    return
                if b"max_block_size" in tail + b:
                    u.close()
                    self._endless(c)
                    return
                tail = b[-32:]
                u.sendall(b)
        except OSError:
            pass
        finally:
            c.close()
            u.close()


def server_sql(srv, sql):
    """One statement on the test server over HTTP, as a library user (or
    another tool) could send it: what the CLI itself cannot write."""
    import urllib.request
    req = urllib.request.Request(f"http://{srv['CHSTATE_TEST_HTTP_HOST']}:{srv['CHSTATE_TEST_HTTP_PORT']}/",
                                 data=sql.encode(), method="POST",
                                 headers={"X-ClickHouse-User": srv["CHSTATE_TEST_HTTP_USER"],
                                          "X-ClickHouse-Key": srv["password"]})
    with urllib.request.urlopen(req, timeout=60) as reply:
        return reply.read()


def t_export_nul_id(s, srv, schema):
    """An id holding a NUL byte (the library stores any bytes; no command
    line can carry one): export refuses up front, writes nothing and says
    why, since `state import` would refuse the document it wrote."""
    s.clear_all()
    s.set("plain", '{"singer_state": {}}')
    server_sql(srv, f"INSERT INTO `{schema}`.state (state_id, partial_state, completed_state) "
                    "VALUES ('nul\\0inside', NULL, '{\"singer_state\": {}}')")
    r = expect(s.run("state", "list", "--null"), EXIT_FAILURE, "list --null with a NUL id")
    check(r.out == b"plain\0", f"the other id is listed: {r!r}")
    out = os.path.join(s.work, "nul-export.json")
    r = expect(s.run("state", "export", "--output", out), EXIT_FAILURE, "export with a NUL id")
    check(r.out == b"" and not os.path.exists(out), f"export wrote nothing: {r!r}")
    check("1 state id(s) hold a NUL byte" in r.errtext() and "nothing was exported" in r.errtext(),
          f"names the problem: {r!r}")
    check(len(r.err) < 1000, f"one short message: {r!r}")
    s.clear_all()
    check(s.ids() == [], "clear --all removed it")


def t_export_endless(binary, work, srv, schema):
    """export from a server whose get_all reply never ends: it stops at the
    size `state import` reads (1 GiB), says so, writes nothing, and holds at
    most about that much memory (under a 4 GiB address-space cap, which the
    old export, keeping every state, ran into with std::bad_alloc)."""
    front = EndlessRowsFront(srv["CHSTATE_TEST_HTTP_HOST"], srv["CHSTATE_TEST_HTTP_PORT"])
    try:
        env = base_env()
        user = urllib.parse.quote(srv["CHSTATE_TEST_HTTP_USER"], safe="")
        env["MELTANO_STATE_BACKEND_URI"] = f"clickhouse://{user}@127.0.0.1:{front.port}/default?schema={schema}"
        env["MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD"] = srv["password"]
        out = os.path.join(work, "endless-export.json")
        cap = 4 << 30

        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

        p = subprocess.run([binary, "state", "export", "--output", out], capture_output=True, env=env,
                           timeout=600, preexec_fn=limit)
        r = Result(p.returncode, p.stdout, p.stderr)
        expect(r, EXIT_FAILURE, "export of an endless reply")
        check("bytes `state import` reads" in r.errtext() and "nothing was exported" in r.errtext(),
              f"the message says why: {r!r}")
        check(not os.path.exists(out), "no file written")
    finally:
        front.close()


def server_settings(server_dir):
    envfile = os.path.join(server_dir, "env")
    if not os.path.exists(envfile):
        raise SystemExit(f"test_cli.py: no server: {envfile} does not exist "
                         f"(bash scripts/clickhouse-server.sh start DIR; pass --server-dir DIR)")
    settings = {}
    with open(envfile) as f:
        for line in f:
            if line.startswith("export ") and "=" in line:
                k, v = line[len("export "):].strip().split("=", 1)
                settings[k] = v
    with open(settings["CHSTATE_TEST_HTTP_PASSWORD_FILE"]) as f:
        settings["password"] = f.read().strip()
    return settings


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("--server-dir", default=os.environ.get("CHSTATE_TEST_SERVER_DIR"))
    ap.add_argument("--only", help="run only the cases whose name contains this text")
    args = ap.parse_args()
    global ONLY
    ONLY = args.only
    binary = os.path.abspath(args.binary)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"test_cli.py: {binary} is not an executable (build the chstate_cli target)", file=sys.stderr)
        print("cli: cases=0 failures=1")
        return 1
    if not args.server_dir:
        print("test_cli.py: no server: set CHSTATE_TEST_SERVER_DIR or pass --server-dir", file=sys.stderr)
        print("cli: cases=0 failures=1")
        return 1
    srv = server_settings(args.server_dir)

    work = tempfile.mkdtemp(prefix="chstate-cli.")
    schema = "cli_" + uuid.uuid4().hex[:12]
    try:
        user = urllib.parse.quote(srv["CHSTATE_TEST_HTTP_USER"], safe="")
        uri_no_pw = f"clickhouse://{user}@{srv['CHSTATE_TEST_HTTP_HOST']}:{srv['CHSTATE_TEST_HTTP_PORT']}/default"

        def chdb_store(name):
            d = os.path.join(work, name)
            os.makedirs(d, exist_ok=True)
            env = base_env()
            env["MELTANO_STATE_BACKEND_URI"] = "chdb://" + os.path.join(d, "db")
            return Store(binary, name, env, d)

        def server_store(name, schema_name):
            d = os.path.join(work, name)
            os.makedirs(d, exist_ok=True)
            env = base_env()
            env["MELTANO_STATE_BACKEND_URI"] = f"{uri_no_pw}?schema={schema_name}"
            env["MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD"] = srv["password"]
            return Store(binary, name, env, d)

        chdb = chdb_store("chdb")
        server = server_store("server", schema)
        chdb2 = chdb_store("chdb2")
        server2 = server_store("server2", schema + "_b")

        case("help", t_help, chdb)
        case("usage", t_usage, chdb)
        case("connection errors", t_connection_errors, binary, work)
        case("server: wrong password", t_wrong_password, f"{uri_no_pw}?schema={schema}", binary, work)
        case("default embedded folder", t_default_folder, binary, work)
        case("chdb: a folder that does not exist", t_missing_folder, binary, work)
        for s in (chdb, server):
            case(f"{s.name}: set/get exact values", t_set_get_exact, s)
            case(f"{s.name}: set validation", t_set_validation, s)
            case(f"{s.name}: get missing", t_get_missing, s)
            case(f"{s.name}: list", t_list, s)
            case(f"{s.name}: unusual ids", t_unusual_ids, s)
            case(f"{s.name}: merge", t_merge, s)
            case(f"{s.name}: copy/move", t_copy_move, s)
            case(f"{s.name}: clear", t_clear, s)
            case(f"{s.name}: edit", t_edit, s)
            case(f"{s.name}: import validation", t_import_validation, s)
            case(f"{s.name}: progress", t_progress, s)
            case(f"{s.name}: lock", t_lock, s)
            case(f"{s.name}: lock forwards signals", t_lock_signal, s)
            for how in ("SIGKILL", "SIGKILL", "SIGKILL", "SIGTERM", "crash"):
                case(f"{s.name}: lock ended by {how}: no process of its command is left", t_lock_killed, s, how)
        case("export chdb -> import server", t_export_import_roundtrip, chdb, server2)
        case("export server -> import chdb", t_export_import_roundtrip, server, chdb2)
        case("server: a signal ends the wait for a lock", t_lock_wait_interrupted, server)
        case("chdb: folder in use by another process", t_embedded_busy, chdb)
        case("hostile environment", t_hostile_environment, binary, work)
        # (on the server: on chDB each of the tool's runs starts the engine, about a second)
        case("server: hostile ids", t_hostile_ids, server)
        case("server: hostile JSON", t_hostile_json, server)
        case("server: hostile patterns", t_hostile_patterns, server)
        case("server: export of a reply that never ends", t_export_endless, binary, work, srv, schema)
        case("server: export of an id holding a NUL byte", t_export_nul_id, server, srv, schema)
        for s in (server, server2):
            s.run("state", "clear", "--all", "--force")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"cli-lock: kills={lock_kills} orphaned_jobs={orphaned_jobs}")
    print(f"cli: cases={cases} failures={failures}")
    if hostile_cases:
        print(f"hostile-input: cases={hostile_cases} failures={hostile_failures}")
    return 1 if failures or hostile_failures else 0


if __name__ == "__main__":
    sys.exit(main())
