#!/usr/bin/env python3
"""Checks that every C++ block in README.md and docs/*.md is compiled by the build.

Each ```cpp block in those pages is preceded (blank lines aside) by

    <!-- snippet: tests/readme/FILE.cpp#NAME -->

and FILE.cpp holds the block's lines verbatim between the marker lines

    // [snippet NAME]
    ...
    // [/snippet]

with whatever makes the file a complete program around them. The files are
built by tests/readme/CMakeLists.txt and tests/readme/meson.build (and most
run: tests/readme/run.sh). This script fails when a C++ block has no
snippet comment, when a block and its marked region differ, when a snippet
file is not named in both build files, when a snippet comment stands before
a block that is not C++, or when a marked region is not shown on any page
(an orphan). It prints

    docs-snippets: pages=P blocks=N compiled=N mismatches=0

and exits non-zero on any problem, explaining each on stderr.

Usage: check_snippets.py [--root REPO]   (default: two levels above this file)
"""

import argparse
import difflib
import os
import re
import sys

CPP_LANGS = {"cpp", "c++", "cxx", "cc"}
FENCE = re.compile(r"^(```+|~~~+)\s*([^\s`]*)")
COMMENT = re.compile(r"^<!--\s*snippet:\s*(\S+?)#([A-Za-z0-9_.-]+)\s*-->\s*$")
BEGIN = re.compile(r"^\s*//\s*\[snippet\s+([A-Za-z0-9_.-]+)\]\s*$")
END = re.compile(r"^\s*//\s*\[/snippet\]\s*$")
SNIPPET_DIR = "tests/readme"


def readme_blocks(lines):
    """Fenced blocks: (first line number, language, body lines, snippet comment or None)."""
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
        comment = COMMENT.match(lines[j]) if j >= 0 else None
        blocks.append((start + 1, lang, body, comment))
    return blocks


def snippet_regions(path, problems):
    """{name: (first line number, lines)} of the marked regions in one file."""
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = parser.parse_args()
    root = args.root
    problems = []

    pages = ["README.md"] + sorted(
        os.path.join("docs", n) for n in os.listdir(os.path.join(root, "docs")) if n.endswith(".md"))

    build_files = {}
    for name in ("CMakeLists.txt", "meson.build"):
        with open(os.path.join(root, SNIPPET_DIR, name), encoding="utf-8") as f:
            build_files[name] = f.read()

    snippet_files = sorted(
        os.path.join(SNIPPET_DIR, n) for n in os.listdir(os.path.join(root, SNIPPET_DIR)) if n.endswith(".cpp"))
    regions = {}  # (file, name) -> (line, body)
    for rel in snippet_files:
        for name, region in snippet_regions(os.path.join(root, rel), problems).items():
            regions[(rel, name)] = region

    blocks = compiled = mismatches = 0
    shown = set()
    for page in pages:
        with open(os.path.join(root, page), encoding="utf-8") as f:
            text = f.read().split("\n")
        for line, lang, body, comment in readme_blocks(text):
            where = f"{page}:{line}"
            if lang not in CPP_LANGS:
                if comment:
                    problems.append(f"{where}: a snippet comment stands before a ```{lang} block")
                continue
            blocks += 1
            if not comment:
                problems.append(f"{where}: ```{lang} block without a '<!-- snippet: "
                                f"{SNIPPET_DIR}/FILE.cpp#NAME -->' comment before it")
                continue
            rel, name = os.path.normpath(comment.group(1)), comment.group(2)
            if (rel, name) in shown:
                problems.append(f"{where}: snippet {rel}#{name} is shown twice")
            shown.add((rel, name))
            if (rel, name) not in regions:
                problems.append(f"{where}: {rel} has no region marked '// [snippet {name}]'")
                mismatches += 1
                continue
            first, region = regions[(rel, name)]
            if region != body:
                mismatches += 1
                diff = difflib.unified_diff(body, region, where, f"{rel}:{first + 1}", lineterm="")
                problems.append(f"{where}: block differs from {rel}#{name}:\n" + "\n".join(diff))
                continue
            base = os.path.basename(rel)
            missing = [b for b, t in build_files.items() if not re.search(r"['\s(/]" + re.escape(base) + r"['\s)]", t)]
            if missing:
                problems.append(f"{where}: {rel} is not built by {SNIPPET_DIR}/{' or '.join(missing)}")
                continue
            compiled += 1

    for (rel, name), (first, _) in sorted(regions.items()):
        if (rel, name) not in shown:
            problems.append(f"{rel}:{first}: snippet {name!r} is not shown on any page (orphan)")

    for p in problems:
        print(f"docs-snippets: {p}", file=sys.stderr)
    print(f"docs-snippets: pages={len(pages)} blocks={blocks} compiled={compiled} mismatches={mismatches}")
    return 1 if problems or compiled != blocks else 0


if __name__ == "__main__":
    sys.exit(main())
