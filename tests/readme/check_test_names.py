#!/usr/bin/env python3
"""Checks that every test a page names exists (docs: every behaviour a page
states is backed by a test named on that page).

README.md and each docs/*.md page name their tests in paragraphs that start
with `Tested by:` (italic or not), each test in backticks:

  `NAME`                              a doctest case: TEST_CASE("NAME"),
                                      CONTRACT_CASE, DATA_CASE or
                                      TEST_CASE_TEMPLATE in tests/
  `NAME<FIXTURE>`                     one instantiation of a templated case,
                                      as --list-test-cases prints it
  `tests/cli/test_cli.py: NAME`       a case("NAME", ...) of the CLI tests
  `PATH` (a .sh/.py/.cpp file)        a script or program that checks it; it
                                      must exist and be run by scripts/test.sh
                                      (directly or through a script it runs)

Every docs/*.md page must name at least one. Prints

    docs-tests: pages=P named=N missing=0

and exits non-zero when a name matches nothing (each printed) or a page
names no test.

Usage: check_test_names.py [--root REPO]
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docblocks  # noqa: E402

STRING = r'"(?:[^"\\]|\\.)*"'
CASE = re.compile(r"\b(TEST_CASE|CONTRACT_CASE|DATA_CASE|TEST_CASE_TEMPLATE)\s*\(\s*((?:" + STRING + r"\s*)+)")
TESTED_BY = re.compile(r"^\s*[*_]{0,2}Tested by:[*_]{0,2}\s*(.*)$")


def unquote(literals):
    parts = re.findall(STRING, literals)
    return "".join(bytes(p[1:-1], "utf-8").decode("unicode_escape") if "\\" in p else p[1:-1] for p in parts)


def test_names(root):
    plain, templated, fixtures = set(), set(), set()
    for d, _, files in os.walk(os.path.join(root, "tests")):
        for f in files:
            if not f.endswith((".cpp", ".ipp", ".hpp")):
                continue
            with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            for macro, lits in CASE.findall(text):
                (plain if macro == "TEST_CASE" else templated).add(unquote(lits))
            fixtures.update(re.findall(r'static constexpr const char\* name = "([^"]+)"', text))
    return plain, templated, fixtures


def scripts_run(root):
    """The scripts scripts/test.sh runs, and those they run (one level)."""
    run = {"scripts/test.sh"}
    queue = ["scripts/test.sh"]
    while queue:
        with open(os.path.join(root, queue.pop()), encoding="utf-8") as f:
            text = f.read()
        for m in re.findall(r"\b((?:scripts|tests|benchmarks)/[\w./-]+\.(?:sh|py))\b", text):
            if m not in run and os.path.isfile(os.path.join(root, m)):
                run.add(m)
                queue.append(m)
    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    root = parser.parse_args().root
    plain, templated, fixtures = test_names(root)
    with open(os.path.join(root, "tests/cli/test_cli.py"), encoding="utf-8") as f:
        cli_text = f.read()
    # case("NAME", …) and case(f"{s.name}: NAME", …): the f-string's fields match any text
    cli_cases = [re.escape(n) for n in re.findall(r'\bcase\(\s*"([^"]+)"', cli_text)]
    cli_cases += [".+".join(re.escape(x) for x in re.split(r"\{[^}]*\}", n))
                  for n in re.findall(r'\bcase\(\s*f"([^"]+)"', cli_text)]
    run = scripts_run(root)
    problems = []
    named = 0
    pages_naming = 0
    for page in docblocks.pages(root):
        with open(os.path.join(root, page), encoding="utf-8") as f:
            lines = f.read().split("\n")
        in_fence = False
        found = 0
        i = 0
        while i < len(lines):
            line = lines[i]
            if docblocks.FENCE.match(line):
                in_fence = not in_fence
            m = None if in_fence else TESTED_BY.match(line)
            if not m:
                i += 1
                continue
            # the paragraph: this line and the non-blank ones after it
            para = [m.group(1)]
            start = i + 1
            i += 1
            while i < len(lines) and lines[i].strip():
                para.append(lines[i])
                i += 1
            items = re.findall(r"`([^`]+)`", " ".join(para))
            if not items:
                problems.append(f"{page}:{start}: 'Tested by' names nothing in backticks")
            for item in items:
                named += 1
                found += 1
                where = f"{page}:{start}"
                if item.startswith("tests/cli/test_cli.py: "):
                    if not any(re.fullmatch(c, item.split(": ", 1)[1]) for c in cli_cases):
                        problems.append(f"{where}: tests/cli/test_cli.py has no case {item.split(': ', 1)[1]!r}")
                elif re.fullmatch(r"[\w./-]+\.(sh|py|cpp)", item):
                    if not os.path.isfile(os.path.join(root, item)):
                        problems.append(f"{where}: no file {item}")
                    elif item.endswith((".sh", ".py")) and item not in run:
                        problems.append(f"{where}: {item} is not run by scripts/test.sh")
                elif item in plain or item in templated:
                    pass
                else:
                    t = re.fullmatch(r"(.*)<([^<>]+)>", item)
                    if t and t.group(1) in templated and t.group(2) in fixtures:
                        continue
                    problems.append(f"{where}: no test case is named {item!r}")
        if found:
            pages_naming += 1
        elif page != "README.md":
            problems.append(f"{page}: names no test ('Tested by: `…`')")
    for p in problems:
        print(f"docs-tests: {p}", file=sys.stderr)
    missing = sum(1 for p in problems if "no test case" in p or "has no case" in p or "no file" in p)
    print(f"docs-tests: pages={pages_naming} named={named} missing={missing}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
