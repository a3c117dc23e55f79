#!/usr/bin/env python3
"""Check chstate's outputs against Python's json, type-strictly and in key order.

    python3 check.py --corpus FILE --results FILE [--results FILE ...]

corpus line:  name<TAB>kind<TAB>hex(text UTF-8)<LF>       (written by corpus.py)
result line:  name<TAB>operation<TAB>hex(text UTF-8)<LF>   (written by the C++ driver)

For each result line: expected = json.loads(corpus text), actual = json.loads(result text).
  * result text must be strict UTF-8 and parse with json.loads; text starting with "ERROR:" is a
    driver-reported failure. Either way it is a mismatch.
  * operation ending in "+touch": expected gets one extra top-level key "chstate_touch" (int 1)
    appended as the LAST key. Any other "+suffix" is unknown and counts as a mismatch.
  * comparison: type(a) is type(b) (bool/int/float distinct); floats by IEEE-754 bit pattern
    (-0.0 != 0.0; every NaN equals every NaN, since json text has only one NaN); objects as ordered
    (key, value) lists; arrays elementwise.
  * duplicate keys in a result are a mismatch unless the corpus text itself has duplicate keys.
  * every corpus case needs at least one result line (a missing case is a mismatch).
stderr: one line per mismatch.  stdout:  "fidelity: cases=N mismatches=M"  (N = result lines
checked) then "fidelity operations: op=count ...".  Exit 1 if M > 0 or N == 0.
"""
import argparse
import collections
import json
import math
import struct
import sys

sys.setrecursionlimit(20000)  # json.loads recurses in C once per nesting level

TOUCH_KEY = "chstate_touch"
TOUCH_SUFFIX = "+touch"


class DupTracker:
    """object_pairs_hook that builds the same dict json.loads would, noting duplicate keys."""

    def __init__(self):
        self.dup_path_key = None

    def __call__(self, pairs):
        d = dict(pairs)  # same as json's default: first position, last value
        if len(d) != len(pairs) and self.dup_path_key is None:
            seen = set()
            for k, _ in pairs:
                if k in seen:
                    self.dup_path_key = k
                    break
                seen.add(k)
        return d


def loads_tracking(text):
    t = DupTracker()
    return json.loads(text, object_pairs_hook=t), t.dup_path_key


def short(v, n=80):
    if type(v) is float:
        s = f"{v!r} (bits {struct.pack('>d', v).hex()})"
    elif type(v) is dict:
        s = f"object with keys {list(v)[:6]!r}"[:-1] + (", ...]" if len(v) > 6 else "]")
    elif type(v) is list:
        s = f"array of {len(v)}"
    else:
        s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def path_str(parts, limit=300):
    """JSONPath-like; runs of the same step are folded: $["d"]*899["leaf"]."""
    out, i = "$", 0
    while i < len(parts):
        p = parts[i]
        j = i
        while j < len(parts) and parts[j] == p and type(parts[j]) is type(p):
            j += 1
        step = f"[{p}]" if type(p) is int else f"[{json.dumps(p)}]"
        out += step if j - i == 1 else f"{step}*{j - i}"
        i = j
    return out if len(out) <= limit else out[: limit // 2] + " ... " + out[-limit // 2:]


def compare(expected, actual):
    """None if identical, else (reason, path, expected_value, actual_value). Iterative: no depth limit."""
    stack = [(expected, actual, ())]
    while stack:
        e, a, path = stack.pop()
        te, ta = type(e), type(a)
        if te is not ta:
            return (f"type {te.__name__} != {ta.__name__}", path, e, a)
        if te is float:
            if math.isnan(e) and math.isnan(a):
                continue
            if struct.pack("<d", e) != struct.pack("<d", a):
                return ("float bits differ", path, e, a)
        elif te is dict:
            ke, ka = list(e), list(a)
            if ke != ka:
                if len(ke) != len(ka):
                    missing = [k for k in ke if k not in a]
                    extra = [k for k in ka if k not in e]
                    what = (f"missing key {missing[0]!r}" if missing else f"extra key {extra[0]!r}" if extra
                            else "key count differs")
                    return (f"object has {len(ka)} keys, expected {len(ke)}: {what}", path, e, a)
                i = next(i for i, (x, y) in enumerate(zip(ke, ka)) if x != y)
                if set(ke) == set(ka):
                    return (f"key order differs at position {i}: expected {ke[i]!r}, got {ka[i]!r}", path, e, a)
                return (f"key differs at position {i}: expected {ke[i]!r}, got {ka[i]!r}", path, e, a)
            for k in reversed(ke):  # reversed so the first key is checked first
                stack.append((e[k], a[k], path + (k,)))
        elif te is list:
            if len(e) != len(a):
                return (f"array length {len(a)} != {len(e)}", path, e, a)
            for i in range(len(e) - 1, -1, -1):
                stack.append((e[i], a[i], path + (i,)))
        elif te is str:
            if e != a:
                i = next((i for i, (x, y) in enumerate(zip(e, a)) if x != y), min(len(e), len(a)))
                return (f"string differs at index {i} (lengths {len(e)}/{len(a)})", path,
                        e[max(0, i - 8):i + 12], a[max(0, i - 8):i + 12])
        elif e != a:  # int, bool, None
            return ("value differs", path, e, a)
    return None


def read_tsv(path, what):
    """Yield (lineno, [fields]) for non-empty lines."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip(b"\n").rstrip(b"\r")
            if not line:
                continue
            try:
                yield n, line.decode("ascii").split("\t")
            except UnicodeDecodeError:
                yield n, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--results", required=True, action="append")
    ap.add_argument("--max-report", type=int, default=200, help="mismatch lines printed (default 200)")
    ap.add_argument("--label", default="", help="printed as fidelity[LABEL]: … (default: no label)")
    ap.add_argument("--every", type=int, default=1,
                    help="the driver ran every Nth corpus case (in corpus order): only those must have results")
    a = ap.parse_args()

    mismatches = 0
    reported = 0

    def report(msg):
        nonlocal mismatches, reported
        mismatches += 1
        if reported < a.max_report:
            print(msg, file=sys.stderr)
        elif reported == a.max_report:
            print("... (further mismatches not printed)", file=sys.stderr)
        reported += 1

    corpus = {}  # name -> (text bytes)
    for n, fields in read_tsv(a.corpus, "corpus"):
        if fields is None or len(fields) != 3:
            raise SystemExit(f"check.py: {a.corpus}:{n}: malformed corpus line")
        name, kind, hx = fields
        if name in corpus:
            raise SystemExit(f"check.py: {a.corpus}:{n}: duplicate case name {name!r}")
        corpus[name] = bytes.fromhex(hx)
    expected_cache = {}

    def expected_for(name):
        if name not in expected_cache:
            obj, dup = loads_tracking(corpus[name].decode("utf-8"))
            expected_cache[name] = (obj, dup is not None)
        return expected_cache[name]

    checked = 0
    per_op = collections.Counter()
    seen_names = set()
    for rpath in a.results:
        for n, fields in read_tsv(rpath, "results"):
            checked += 1
            if fields is None or len(fields) != 3:
                per_op["<malformed>"] += 1
                report(f"{rpath}:{n}: malformed result line (want name<TAB>operation<TAB>hex)")
                continue
            name, op, hx = fields
            per_op[op] += 1
            where = f"{name} {op}:"
            if name not in corpus:
                report(f"{where} no such case in the corpus ({rpath}:{n})")
                continue
            seen_names.add(name)
            try:
                data = bytes.fromhex(hx)
            except ValueError as e:
                report(f"{where} bad hex in result ({rpath}:{n}): {e}")
                continue
            if data.startswith(b"ERROR:"):
                report(f"{where} driver error: {data[6:].decode('utf-8', 'replace')[:300]}")
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                report(f"{where} result is not valid UTF-8: {e}")
                continue
            try:
                actual, dup = loads_tracking(text)
            except (ValueError, RecursionError) as e:
                report(f"{where} result is not JSON Python's json reads: {e} (text starts {text[:60]!r})")
                continue
            exp, corpus_has_dups = expected_for(name)
            base, plus, suffix = op.rpartition("+")
            if plus:
                if "+" + suffix != TOUCH_SUFFIX:
                    report(f"{where} unknown operation suffix '+{suffix}' (only {TOUCH_SUFFIX} is known)")
                    continue
                exp = {k: v for k, v in exp.items() if k != TOUCH_KEY}
                exp[TOUCH_KEY] = 1
            if dup is not None and not corpus_has_dups:
                report(f"{where} result has a duplicate key {dup!r} (corpus text has none)")
                continue
            diff = compare(exp, actual)
            if diff is not None:
                reason, path, e, v = diff
                report(f"{where} {reason} at {path_str(path)}: expected {short(e)}, got {short(v)}")

    for index, name in enumerate(corpus):
        if index % a.every == 0 and name not in seen_names:
            report(f"{name} -: no result line for this corpus case")

    tag = f"fidelity[{a.label}]" if a.label else "fidelity"
    print(f"{tag}: cases={checked} mismatches={mismatches}")
    print(f"{tag} operations: " + (" ".join(f"{op}={c}" for op, c in sorted(per_op.items())) or "(none)"))
    sys.exit(1 if mismatches or not checked else 0)


if __name__ == "__main__":
    main()
