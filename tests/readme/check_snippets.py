#!/usr/bin/env python3
"""Checks that every fenced block in README.md and docs/*.md has a check the tests run.

Each block is preceded (blank lines aside) by an HTML comment naming its check:

    <!-- snippet: FILE#NAME -->   verbatim: the block equals the region of FILE
                                  between `// [snippet NAME]` and `// [/snippet]`
                                  (`#` in CMake, shell and Meson files, `--` in SQL).
                                  C++ blocks: FILE is tests/readme/*.cpp, built by
                                  tests/readme/CMakeLists.txt and meson.build;
                                  other files: ones VERBATIM below names, each
                                  built or run by the script it names.
    <!-- run: RUNNER#ID -->       the block's commands are run by RUNNER at test time
    <!-- output: RUNNER#ID -->    the block is compared with what a program prints
    <!-- keys: RUNNER#ID -->      the same, for output whose numbers are one run's
                                  timings: its names and labels are compared.
                                  RUNNER may be a script this file reads (STATIC_KEYS).
    <!-- help: RUNNER#ID -->      a synopsis: every command and flag it shows is one
                                  the program's --help lists
    <!-- sql: tests/readme/docs_sql.cpp#NAME[,NAME] -->   the SQL the library
                                  generates, printed by that program; run.sh
                                  compares (docblocks.py sql)
    <!-- tree: .#ID -->            a file tree, checked here against the repository

For run, output, keys and help RUNNER is one of RUNNERS, each run by
scripts/test.sh, and must name ID (it gets the block with docblocks.py).
This script fails when a block has no such comment, a verbatim block and its
region differ, a file or runner is not built or run by the test run, a runner
does not name its block's ID, a tree or static keys block differs from the
repository, or a marked region is not shown on any page (an orphan). It
prints

    docs-snippets: pages=P blocks=N compiled=N mismatches=0 (cpp=.. verbatim=.. ...)

then checks the tests the pages name (check_test_names.py) and exits
non-zero on any problem, explaining each on stderr.

Usage: check_snippets.py [--root REPO]   (default: two levels above this file)
"""

import argparse
import difflib
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docblocks  # noqa: E402

CPP_LANGS = {"cpp", "c++", "cxx", "cc"}
SNIPPET_DIR = "tests/readme"
KINDS = ("snippet", "run", "output", "keys", "help", "sql", "tree")
# Verbatim files outside tests/readme: file -> (the script that builds or runs
# it, a text that script must contain to do so).
VERBATIM = {
    "tests/consumers/cmake-package/CMakeLists.txt": ("scripts/check-consumers.sh", "copy_project cmake-package"),
}
# The scripts that run or compare blocks at test time, and the text in
# scripts/test.sh that runs each.
RUNNERS = {
    "tests/readme/run.sh": "bash tests/readme/run.sh",
    "scripts/check-consumers.sh": "bash scripts/check-consumers.sh",
    "tests/readme/docs_benchmarks.sh": "bash tests/readme/docs_benchmarks.sh",
}
STATIC_KEYS = ("scripts/check-cluster.sh", "scripts/compile-cost.sh")


def comment_style(path):
    if path.endswith((".cpp", ".hpp", ".ipp", ".cc")):
        return "//"
    if path.endswith(".sql"):
        return "--"
    return "#"


def snippet_regions(path, problems):
    """{name: (first line number, lines)} of the marked regions in one file."""
    c = re.escape(comment_style(path))
    BEGIN = re.compile(r"^\s*" + c + r"\s*\[snippet\s+([A-Za-z0-9_.-]+)\]\s*$")
    END = re.compile(r"^\s*" + c + r"\s*\[/snippet\]\s*$")
    regions = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    current = None
    for n, line in enumerate(lines, 1):
        b, e = BEGIN.match(line), END.match(line)
        if b:
            if current:
                problems.append(f"{path}:{n}: snippet {b.group(1)!r} starts inside snippet {current[0]!r}")
            current = (b.group(1), n, [])
        elif e:
            if not current:
                problems.append(f"{path}:{n}: [/snippet] without a [snippet NAME]")
                continue
            name, first, body = current
            if name in regions:
                problems.append(f"{path}:{first}: snippet {name!r} is marked twice")
            regions[name] = (first, body)
            current = None
        elif current:
            current[2].append(line)
    if current:
        problems.append(f"{path}:{current[1]}: snippet {current[0]!r} has no [/snippet]")
    return regions


def check_tree(root, body, where, problems):
    """A file tree (docs/development.md): every entry exists; every file a
    directory's description names exists in it; every public header and
    every folder of include/chstate/ and include/chstate/detail/ is listed."""
    bad = 0
    top = None
    listed = set()
    for line in body:
        m = re.match(r"^( {0,2})(\S+)(\s.*)?$", line)
        if not m:
            continue  # a description's continuation
        indent, name, desc = m.group(1), m.group(2), m.group(3) or ""
        if not indent:
            top = name if name.endswith("/") else None
            path = name
        else:
            if top is None:
                problems.append(f"{where}: '{name}' is indented under no folder")
                bad += 1
                continue
            path = top + name
        full = os.path.join(root, path)
        if not (os.path.isdir(full) if path.endswith("/") else os.path.isfile(full)):
            problems.append(f"{where}: the tree lists {path}, which does not exist")
            bad += 1
            continue
        listed.add(path.rstrip("/"))
        if path.endswith("/"):
            for f in re.findall(r"\b[\w]+\.(?:hpp|ipp)\b", desc):
                if not os.path.isfile(os.path.join(full, f)):
                    problems.append(f"{where}: {path}'s description names {f}, which is not in it")
                    bad += 1
    base = os.path.join(root, "include/chstate")
    expect = ["include/chstate/" + n for n in os.listdir(base)
              if n.endswith(".hpp") or os.path.isdir(os.path.join(base, n))]
    expect += ["include/chstate/detail/" + n for n in os.listdir(os.path.join(base, "detail"))
               if os.path.isdir(os.path.join(base, "detail", n))]
    # A folder listed file by file (transport/, testing/): each of its headers and folders.
    for d in [e for e in expect if os.path.isdir(os.path.join(root, e)) and e not in listed]:
        expect += [d + "/" + n for n in os.listdir(os.path.join(root, d))
                   if n.endswith(".hpp") or os.path.isdir(os.path.join(root, d, n))]
        if not any(l.startswith(d + "/") for l in listed):
            problems.append(f"{where}: the tree does not list {d}")
            bad += 1
        expect.remove(d)
    for e in sorted(expect):
        if e not in listed:
            problems.append(f"{where}: the tree does not list {e}")
            bad += 1
    return bad


def check_static_keys(root, script, body, where, problems):
    """Output of a script the test run does not run (it needs its own rig, or
    takes minutes): its labels and shape against the script's text."""
    with open(os.path.join(root, script), encoding="utf-8") as f:
        text = f.read()
    bad = 0
    if script == "scripts/check-cluster.sh":
        labels = re.findall(r'^\s*ok "([^"]+)"', text, re.M)
        shown = []
        for line in body:
            m = re.match(r"^ok {4}(.+?)\s{2,}\d+ ms", line)
            if m:
                shown.append(m.group(1).rstrip())
            elif line.split(":")[0] + ":" not in text or not line.strip():
                problems.append(f"{where}: {script} prints no line like '{line}'")
                bad += 1
        want = [l for l in labels if "--keep" not in l]
        if shown != want:
            diff = difflib.unified_diff(shown, want, where, script, lineterm="")
            problems.append(f"{where}: the checks shown are not {script}'s, in its order:\n" + "\n".join(diff))
            bad += 1
    elif script == "scripts/compile-cost.sh":
        parts = re.findall(r'^\s*line\+?="([^"]*)"', text, re.M)
        parts = [p for p in parts]
        shape = "".join(parts).replace("$me", "compile-cost")
        shape = re.sub(r"\[baseline \$against:[^\]]*\]", "", shape)  # only with --against
        shape = shape.replace(" baseline=$(cpu_ratio baseline)", "")
        pattern = ""
        for piece in re.split(r"(\$\([^)]*\)|\$\{[^}]*\})", shape):
            pattern += r"[0-9.]+" if piece.startswith("$") else re.escape(piece)
        for line in body:
            if not re.fullmatch(pattern, line):
                problems.append(f"{where}: '{line}' is not the line {script} prints (shape: {shape})")
                bad += 1
    return bad


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = parser.parse_args()
    root = args.root
    problems = []

    pages = docblocks.pages(root)

    def read(rel):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()

    build_files = {name: read(os.path.join(SNIPPET_DIR, name)) for name in ("CMakeLists.txt", "meson.build")}
    test_sh = read("scripts/test.sh")
    runner_text = {}
    for runner, call in RUNNERS.items():
        # its code: an id named only in a comment checks nothing
        runner_text[runner] = "\n".join(l for l in read(runner).split("\n") if not l.lstrip().startswith("#"))
        if call not in test_sh:
            problems.append(f"{runner}: scripts/test.sh does not run it ('{call}')")

    def built(rel):
        base = os.path.basename(rel)
        return [b for b, t in build_files.items() if not re.search(r"['\s(/]" + re.escape(base) + r"['\s)]", t)]

    snippet_files = sorted(
        os.path.join(SNIPPET_DIR, n) for n in os.listdir(os.path.join(root, SNIPPET_DIR)) if n.endswith(".cpp"))
    snippet_files.remove(os.path.join(SNIPPET_DIR, "docs_sql.cpp"))
    regions = {}  # (file, name) -> (line, body)
    for rel in snippet_files + sorted(VERBATIM):
        for name, region in snippet_regions(os.path.join(root, rel), problems).items():
            regions[(rel, name)] = region

    docs_sql = read(os.path.join(SNIPPET_DIR, "docs_sql.cpp"))
    printed_sql = set(re.findall(r'line\("([a-z_]+)"', docs_sql))

    blocks = compiled = mismatches = 0
    kinds = {k: 0 for k in ("cpp", "verbatim", "run", "output", "keys", "help", "sql", "tree")}
    shown = set()
    ids = {}
    for page, line, lang, body, marker, comment in docblocks.all_blocks(root):
        where = f"{page}:{line}"
        blocks += 1
        if not marker or marker.group(1) not in KINDS:
            problems.append(f"{where}: ```{lang} block without a check: put one of "
                            f"'<!-- {{{', '.join(KINDS)}}}: FILE#NAME -->' before it"
                            + (f" (found {comment!r})" if comment else ""))
            continue
        kind, rel, name = marker.group(1), os.path.normpath(marker.group(2)), marker.group(3)
        if not name:
            problems.append(f"{where}: the comment names no #NAME")
            continue
        if lang in CPP_LANGS and not (kind == "snippet" and rel.startswith(SNIPPET_DIR + "/") and rel.endswith(".cpp")):
            problems.append(f"{where}: a ```{lang} block is checked only by '<!-- snippet: {SNIPPET_DIR}/FILE.cpp#NAME -->'")
            continue
        if kind == "snippet":
            if (rel, name) in shown:
                problems.append(f"{where}: snippet {rel}#{name} is shown twice")
            shown.add((rel, name))
            if lang not in CPP_LANGS and rel not in VERBATIM:
                problems.append(f"{where}: {rel} is not a verbatim file the tests build or run (VERBATIM in {__file__})")
                continue
            if (rel, name) not in regions:
                problems.append(f"{where}: {rel} has no region marked '{comment_style(rel)} [snippet {name}]'")
                mismatches += 1
                continue
            first, region = regions[(rel, name)]
            if region != body:
                mismatches += 1
                diff = difflib.unified_diff(body, region, where, f"{rel}:{first + 1}", lineterm="")
                problems.append(f"{where}: block differs from {rel}#{name}:\n" + "\n".join(diff))
                continue
            if lang in CPP_LANGS:
                missing = built(rel)
                if missing:
                    problems.append(f"{where}: {rel} is not built by {SNIPPET_DIR}/{' or '.join(missing)}")
                    continue
                kinds["cpp"] += 1
            else:
                runner, needle = VERBATIM[rel]
                if needle not in read(runner):
                    problems.append(f"{where}: {runner} does not use {rel} ('{needle}')")
                    continue
                kinds["verbatim"] += 1
            compiled += 1
            continue
        if kind in ("run", "output", "keys", "help", "tree"):
            if name in ids:
                problems.append(f"{where}: the id {name} is also {ids[name]}'s")
                continue
            ids[name] = where
        if kind == "tree":
            bad = check_tree(root, body, where, problems)
            mismatches += bad > 0
            if not bad:
                kinds["tree"] += 1
                compiled += 1
            continue
        if kind == "keys" and rel in STATIC_KEYS:
            bad = check_static_keys(root, rel, body, where, problems)
            mismatches += bad > 0
            if not bad:
                kinds["keys"] += 1
                compiled += 1
            continue
        if kind == "sql":
            if rel != os.path.join(SNIPPET_DIR, "docs_sql.cpp"):
                problems.append(f"{where}: SQL is compared by {SNIPPET_DIR}/docs_sql.cpp, not {rel}")
                continue
            missing = [n for n in name.split(",") if n not in printed_sql]
            if missing or built(rel) or 'docblock sql <' not in runner_text["tests/readme/run.sh"]:
                problems.append(f"{where}: {rel} does not print {missing}, or is not built by both build files, "
                                f"or tests/readme/run.sh does not compare it ('docblock sql <')")
                continue
            kinds["sql"] += 1
            compiled += 1
            continue
        if rel not in RUNNERS:
            problems.append(f"{where}: {rel} is not a script the test run runs (RUNNERS in {__file__})")
            continue
        # a docblock call with the id (docblock[_x] [SUBCOMMAND] ID), or a loop over ids that makes one
        call = r"docblock\S*\s+(?:[\w-]+\s+)?" + re.escape(name) + r"(?![\w-])"
        loop = r"^\s*for (\w+) in [^;\n]*(?<![\w-])" + re.escape(name) + r"(?![\w-])[^\n]*\n(?:.*\n){0,6}?.*docblock\S*\s+(?:[\w-]+\s+)?\"?\$\1\b"
        if not (re.search(call, runner_text[rel]) or re.search(loop, runner_text[rel], re.M)):
            problems.append(f"{where}: {rel} gets no block {name} from the page (docblock … {name}), so nothing checks it")
            continue
        kinds[kind] += 1
        compiled += 1

    for (rel, name), (first, _) in sorted(regions.items()):
        if (rel, name) not in shown:
            problems.append(f"{rel}:{first}: snippet {name!r} is not shown on any page (orphan)")

    for p in problems:
        print(f"docs-snippets: {p}", file=sys.stderr)
    breakdown = " ".join(f"{k}={v}" for k, v in kinds.items())
    print(f"docs-snippets: pages={len(pages)} blocks={blocks} compiled={compiled} mismatches={mismatches} ({breakdown})")
    status = 1 if problems or compiled != blocks else 0
    names = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "check_test_names.py"), "--root", root])
    return status or names.returncode


if __name__ == "__main__":
    sys.exit(main())
