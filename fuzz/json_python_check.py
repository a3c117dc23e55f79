#!/usr/bin/env python3
"""Compares chstate's JSON reading and writing with Python's json module.

Reads the records fuzz/json.cpp appends when CHSTATE_FUZZ_JSON_DUMP is set
(hex input, ok|error, hex text) and checks each against Python:
  * text Python reads (UTF-8 decoded strictly, then json.loads) chstate
    reads, and chstate writes exactly json.dumps(json.loads(text));
  * text Python refuses chstate refuses.
Cases Python cannot decide are skipped, as chstate documents them: nesting
beyond Python's recursion limit, integers over 4,300 digits (Python refuses
to read them; chstate reads them and refuses to write them).
Prints `json-python: cases=N skipped=S mismatches=M`; exits 1 on a mismatch.
"""
import json
import sys


def main():
    path = sys.argv[1]
    cases = skipped = mismatches = 0
    seen = set()
    with open(path, encoding="ascii") as f:
        for line in f:
            hex_input, status, hex_text = line.rstrip("\n").split("\t")
            if hex_input in seen:
                continue
            seen.add(hex_input)
            raw = bytes.fromhex(hex_input)
            ours = bytes.fromhex(hex_text).decode("ascii", "replace")
            cases += 1
            try:
                text = raw.decode("utf-8")
                expected = json.dumps(json.loads(text))
            except RecursionError:
                skipped += 1
                continue
            except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, int digit limit
                if "Exceeds the limit" in str(e) or "integer string conversion" in str(e):
                    skipped += 1
                    continue
                if status != "error":
                    mismatches += 1
                    print(f"python refuses, chstate reads: {raw[:200]!r}: python: {e}", file=sys.stderr)
                continue
            if status != "ok":
                if ours.startswith("integer digits:"):
                    skipped += 1
                    continue
                mismatches += 1
                print(f"python reads, chstate refuses: {raw[:200]!r}: chstate: {ours}", file=sys.stderr)
            elif ours != expected:
                mismatches += 1
                print(f"different text for {raw[:200]!r}:\n  python:  {expected[:300]}\n  chstate: {ours[:300]}",
                      file=sys.stderr)
    print(f"json-python: cases={cases} skipped={skipped} mismatches={mismatches}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
