#!/usr/bin/env python3
"""The fenced blocks of README.md and docs/*.md, and the runtime checks of
the blocks the test run executes or compares (check_snippets.py checks the
rest, and that every block has a check; docs/development.md lists the kinds).

A block's check is named by the HTML comment just before it:

    <!-- KIND: FILE#ID -->

This module finds blocks by ID for the scripts that check them at test time:

  docblocks.py block ID                 print the block's lines (for a script to run)
  docblocks.py commands ID              its command lines: comments and blank lines
                                        dropped, two commands on one line (3+ spaces
                                        before the second `chstate`) split
  docblocks.py output ID FILE           FILE (a program's output) matches the block:
                                        a line `...` stands for any lines, `...`
                                        inside a line for any text on it
  docblocks.py sql < docs_sql-output    every ```sql block against the SQL the library
                                        generates (tests/readme/docs_sql.cpp prints it)
  docblocks.py help ID CHSTATE          every subcommand and --flag a synopsis shows is
                                        in that subcommand's `CHSTATE state CMD --help`
  docblocks.py schedules ID LOG         explorer summary lines against the test log
  docblocks.py bench-table ID LISTING   the table's operations against the suite's
                                        --benchmark_list_tests names
Each prints `docblock ID: ok (...)` or the difference on stderr and exits 1.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FENCE = re.compile(r"^(```+|~~~+)\s*([^\s`]*)")
MARKER = re.compile(r"^<!--\s*([a-z]+):\s*(\S+?)(?:#([A-Za-z0-9_.,-]+))?\s*-->\s*$")


def pages(root=ROOT):
    return ["README.md"] + sorted(
        os.path.join("docs", n) for n in os.listdir(os.path.join(root, "docs")) if n.endswith(".md"))


def page_blocks(lines):
    """Fenced blocks: (first line number, language, body lines, the comment line before it or None)."""
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith(fence[0] * len(fence)):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence (or the end of the file)
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        comment = lines[j] if j >= 0 and lines[j].lstrip().startswith("<!--") else None
        blocks.append((start + 1, lang, body, comment))
    return blocks


def all_blocks(root=ROOT):
    """(page, line, lang, body, marker match or None, comment text or None) of every block."""
    out = []
    for page in pages(root):
        with open(os.path.join(root, page), encoding="utf-8") as f:
            lines = f.read().split("\n")
        for line, lang, body, comment in page_blocks(lines):
            out.append((page, line, lang, body, MARKER.match(comment) if comment else None, comment))
    return out


def find(block_id, root=ROOT):
    hits = [b for b in all_blocks(root) if b[4] and b[4].group(3) == block_id]
    if len(hits) != 1:
        sys.exit(f"docblock {block_id}: {len(hits)} blocks carry this id (want exactly 1)")
    return hits[0]


def fail(block_id, where, message):
    print(f"docblock {block_id}: FAILED ({where}): {message}", file=sys.stderr)
    return 1


def commands(body, keep_comments=False):
    out = []
    for line in body:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        # Two commands side by side (docs/cli.md): split where a second starts.
        for part in re.split(r"\s{3,}(?=chstate )", line):
            out.append(part.strip() if keep_comments else re.sub(r"\s+#\s.*$", "", part).strip())
    return out


def output_pattern(body):
    parts = []
    for line in body:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(r"[^\n]*".join(re.escape(p) for p in line.split("...")) + r"\n")
    return "".join(parts)


def cmd_output(block_id, path):
    page, line, _, body, _, _ = find(block_id)
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if not text.endswith("\n"):
        text += "\n"
    if re.fullmatch(output_pattern(body), text):
        print(f"docblock {block_id}: ok ({page}:{line}, {len(body)} lines against the program's output)")
        return 0
    return fail(block_id, f"{page}:{line}", "the output does not match the block:\n--- block\n" +
                "\n".join(body) + "\n--- output\n" + text)


def normal_sql(text):
    return re.sub(r"\s+", " ", text).strip()


# The placeholders the pages use in explanatory SQL, and what the library writes.
SQL_PLACEHOLDERS = [
    ("<schema>.<table>_grant", "`meltano`.`state_grant`"),
    ("<the server's now, ms>", "toUInt64(toUnixTimestamp64Milli(now64(3)))"),
    ("FROM grant WHERE", "FROM `meltano`.`state_grant` WHERE"),
    ("state_id = ?", "state_id = {state_id:String}"),
]


def cmd_sql():
    generated = {}
    for line in sys.stdin.read().splitlines():
        name, _, sql = line.partition("\t")
        generated[name] = sql
    status = checked = 0
    for page, line, lang, body, marker, _ in all_blocks():
        if not marker or marker.group(1) != "sql":
            continue
        text = normal_sql("\n".join(body))
        for a, b in SQL_PLACEHOLDERS:
            text = text.replace(a, b)
        text = re.sub(r"\bL\b", "{lock_id:String}", text)  # the holder's lock_id (docs/strict-lock.md)
        names = marker.group(3).split(",")
        missing = [n for n in names if n not in generated]
        if missing:
            status = fail(marker.group(3), f"{page}:{line}", f"tests/readme/docs_sql.cpp printed no {missing}")
            continue
        want = " ".join(normal_sql(generated[n]) for n in names)
        if text != want:
            status = fail(marker.group(3), f"{page}:{line}",
                          f"the block is not the SQL the library generates:\n  page:      {text}\n  generated: {want}")
            continue
        checked += 1
    print(f"docblocks sql: blocks={checked} (each equal to statements.hpp's text)")
    return status


def cmd_help(block_id, chstate):
    page, line, _, body, _, _ = find(block_id)
    status = 0
    shown = 0
    helps = {}
    for c in commands(body, keep_comments=True):
        c = c.split(" -- ")[0]  # what follows -- is the locked command's, not chstate's
        words = c.split()
        if words[:1] != ["chstate"]:
            status = fail(block_id, f"{page}:{line}", f"not a chstate command: {c}")
            continue
        sub = words[1:3] if words[1] == "state" else words[1:2]
        key = " ".join(sub)
        if key not in helps:
            r = subprocess.run([chstate, *sub, "--help"], capture_output=True, text=True)
            helps[key] = (r.returncode, r.stdout + r.stderr)
        rc, text = helps[key]
        if rc != 0:
            status = fail(block_id, f"{page}:{line}", f"`chstate {key} --help` exited {rc}: {text[:300]}")
            continue
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", c):
            if not re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", text):
                status = fail(block_id, f"{page}:{line}", f"`{c}`: `chstate {key} --help` does not list {flag}")
            shown += 1
    if status == 0:
        print(f"docblock {block_id}: ok ({page}:{line}, {len(helps)} subcommands and {shown} flags "
              f"each in that subcommand's --help)")
    return status


def cmd_schedules(block_id, log):
    """Each explorer summary line shown against the line of the same name in
    the test log: the same keys in the same order, and each count zero
    where the page's is (the claim none were found), and non-zero where the
    page's is when every seeded schedule ran (CHSTATE_SCHEDULES_PERCENT
    unset or 100). The counts themselves are not compared: the simulated
    server's clock starts at the real time (tests/simulation.cpp), so the
    seeded classes' counts vary a little between runs, and the quick tier
    runs a quarter of the seeded schedules; timings in parentheses neither."""
    page, line, _, body, _, _ = find(block_id)
    pat = re.compile(r"^(lock-schedules(?:\[[^\]]*\])?): (.*)$")
    with open(log, encoding="utf-8", errors="replace") as f:
        logged = {}
        for l in f:
            m = pat.match(l.rstrip("\n"))
            if m:
                logged.setdefault(m.group(1), []).append(m.group(2))
    status = 0
    note = lambda text: re.sub(r"[\d.]+ s\)$", "N s)", re.sub(r"^[^(]*", "", text))
    for l in body:
        m = pat.match(l)
        if not m:
            status = fail(block_id, f"{page}:{line}", f"not a lock-schedules line: {l}")
            continue
        name, rest = m.groups()
        shown = dict(re.findall(r"(\w+)=(\d+)", rest))
        if not logged.get(name):
            status = fail(block_id, f"{page}:{line}", f"the test log has no '{name}:' line")
            continue
        got_line = logged[name][-1]
        got = dict(re.findall(r"(\w+)=(\d+)", got_line))
        if list(got) != list(shown):
            status = fail(block_id, f"{page}:{line}", f"'{name}': keys differ: page {list(shown)}, log {list(got)}")
        elif note(rest) != note(got_line):
            status = fail(block_id, f"{page}:{line}", f"'{name}': the note differs: page {rest!r}, log {got_line!r}")
        else:
            # A zero the page shows is a claim (none found): always checked.
            # A count it shows as found is checked only where every seeded
            # schedule ran: a fraction (the quick tier) may find none.
            every_schedule = int(os.environ.get("CHSTATE_SCHEDULES_PERCENT", "100")) >= 100
            diff = {k: (shown[k], got[k]) for k in shown
                    if (shown[k] == "0" and got[k] != "0") or (every_schedule and shown[k] != "0" and got[k] == "0")}
            if diff:
                status = fail(block_id, f"{page}:{line}", f"'{name}': zero on one side only (page, log): {diff}")
    if status == 0:
        print(f"docblock {block_id}: ok ({page}:{line}, {len(body)} lines against the test log: "
              f"the same keys, zero where the page shows zero)")
    return status


def cmd_bench_table(block_id, listing):
    """The table's rows against the benchmarks the suite registers (its
    numbers are one run's timings on one machine: not compared)."""
    page, line, _, body, _, _ = find(block_id)
    with open(listing, encoding="utf-8") as f:
        # (Google Benchmark appends /manual_time to a benchmark timed by hand)
        names = {l.strip().removesuffix("/manual_time") for l in f if l.strip()}
    with open(os.path.join(ROOT, "benchmarks/suite.cpp"), encoding="utf-8") as f:
        suite = f.read()
    status = 0
    rows = 0
    for l in body:
        m = re.match(r"^(BM_\S+)\s+(embedded|server)\s", l)
        if m:
            rows += 1
            if f"{m.group(1)}/{m.group(2)}" not in names:
                status = fail(block_id, f"{page}:{line}", f"the suite registers no {m.group(1)}/{m.group(2)}")
        elif l.startswith("chstate vs floor"):
            if l not in suite:
                status = fail(block_id, f"{page}:{line}", f"benchmarks/suite.cpp does not print the title '{l}'")
        elif l.startswith("operation") or l.startswith("update embedded:"):
            words = l.split()[:2]
            if not all(w.rstrip(":") in suite for w in words):
                status = fail(block_id, f"{page}:{line}", f"benchmarks/suite.cpp prints no '{l}'")
        else:
            status = fail(block_id, f"{page}:{line}", f"unexpected line: {l}")
    if status == 0:
        print(f"docblock {block_id}: ok ({page}:{line}, {rows} rows each a registered benchmark; timings not compared)")
    return status


def main(argv):
    if len(argv) >= 2 and argv[0] == "block":
        print("\n".join(find(argv[1])[3]))
        return 0
    if len(argv) >= 2 and argv[0] == "commands":
        print("\n".join(commands(find(argv[1])[3])))
        return 0
    if len(argv) == 3 and argv[0] == "output":
        return cmd_output(argv[1], argv[2])
    if len(argv) == 1 and argv[0] == "sql":
        return cmd_sql()
    if len(argv) == 3 and argv[0] == "help":
        return cmd_help(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "schedules":
        return cmd_schedules(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "bench-table":
        return cmd_bench_table(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
