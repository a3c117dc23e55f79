#!/usr/bin/env python3
"""Writes the JSON seed corpora (fuzz/corpus/json, fuzz/corpus/merge) with
Python's json module, the reference chstate follows. Run from anywhere:
python3 fuzz/make_json_seeds.py (rewrites the seed files; deterministic)."""
import json
import math
import os
import random

here = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


values = {
    "bookmark": {"bookmarks": {"users": {"replication_key": "updated_at",
                                         "replication_key_value": "2024-01-01T00:00:00+00:00"}},
                 "currently_syncing": None},
    "numbers": [0, -0.0, 1.0, 1e16, 1e-5, 123456789012345678901234567890, -2**63 - 1, 2**64, 2**63,
                1700000000.8702567, 5e-324, 1.7976931348623157e308],
    "nonfinite": [float("nan"), float("inf"), float("-inf")],
    "strings": ["", "a\"b\\c/d", "\b\f\n\r\t\x00\x1f\x7f", "é€𝄞", "\ud800", "\udfff\ud800", "\ud83d\ude00"],
    "keys": {"b": 1, "a": 2, "": 3, "\u00e9": 4, "\ud800": 5},
    "nested": {"a": {"b": {"c": [1, {"d": []}, {}]}}},
    "scalars": [True, False, None],
}
for name, v in values.items():
    write("json", name, json.dumps(v))
# Texts Python reads that it does not write: whitespace, escapes, repeated keys, exponents.
raw = {
    "whitespace": ' \t\r\n{ "a" : [ 1 , 2 ] }\n',
    "escapes": r'["\u00e9\u20ac\ud834\udd1e", "\ud800\u0041", "\ud800\ud800\udc00", "\/"]',
    "repeated_key": '{"a": 1, "b": 2, "a": 3}',
    "exponents": "[1E5, 1e-400, -1e400, 0.1e1, 10e-1, 123.456e+2]",
    "big_int_edges": "[9223372036854775807, 9223372036854775808, -9223372036854775808, "
                     "-9223372036854775809, 18446744073709551615, 18446744073709551616, -0]",
    "long_integer": "1" * 4301,
    "bad_surrogate_escape": r'"\ud800\uZZZZ"',
    "invalid_utf8": b'["\xff", "\xed\xa0\x80", "\xc0\x80"]',
    "control_in_string": '"a\x01b"',
    "bom": "\ufeff{}",
    "trailing": "{} x",
    "nan_variants": "[NaN, -Infinity, Infinity, -NaN]",
    "deep_array": "[" * 1200 + "]" * 1200,
    "deep_object": '{"a": ' * 600 + "{}" + "}" * 600,
}
for name, v in raw.items():
    write("json", name, v)
rng = random.Random(11)


def rand_value(depth):
    r = rng.random()
    if depth > 3 or r < 0.5:
        return rng.choice([rng.randint(-2**70, 2**70), rng.random() * 10 ** rng.randint(-30, 30),
                           "".join(chr(rng.randint(0, 0x2FF)) for _ in range(rng.randint(0, 5))), None, True,
                           float("nan"), -0.0])
    if r < 0.75:
        return [rand_value(depth + 1) for _ in range(rng.randint(0, 3))]
    return {str(rng.randint(0, 5)): rand_value(depth + 1) for _ in range(rng.randint(0, 3))}


for i in range(8):
    write("json", f"random_{i}", json.dumps(rand_value(0)))
# A state in the form meltano state get writes.
write("json", "state_form", json.dumps({"completed": {"singer_state": {"bookmarks": {}}},
                                        "partial": {"singer_state": {"bookmarks": {"t": {"id": 5}}}}}))

# merge: SRC \xff DEST (two JSON objects).
pairs = {
    "simple": ({"a": {"b": 1}}, {"a": {"c": 2}, "d": 3}),
    "replace_scalar": ({"a": 1, "b": [1]}, {"a": {"x": 1}, "b": {"y": 2}}),
    "empty_object_keeps": ({"a": {}}, {"a": 5}),
    "object_replaces": ({"a": {"k": 1}}, {"a": [1, 2]}),
    "key_order": ({"z": 1, "a": {"y": 2, "b": 3}}, {"a": {"b": 0, "c": 1}, "m": 2}),
    "bookmarks": ({"bookmarks": {"users": {"since": 1700000000.8702567}}},
                  {"bookmarks": {"orders": {"last_id": 2**64}}, "currently_syncing": "orders"}),
}
for name, (src, dest) in pairs.items():
    write("merge", name, json.dumps(src).encode() + b"\xff" + json.dumps(dest).encode())
# Deep: 'D' + two bytes of depth (little-endian, times 4) + one selector byte, then SRC \xff DEST.
write("merge", "deep_generated", b"D\x70\x17\x03" + b'{"a": 1}\xff{"b": {}}')
write("merge", "alias", b"A" + json.dumps({"a": {"a": {"b": 1}}, "c": 2}).encode())
