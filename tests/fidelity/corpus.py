#!/usr/bin/env python3
"""Write a JSON-fidelity corpus for chstate: state parts exactly as Python's json writes them.

    python3 corpus.py --count N --seed S --out FILE

One case per line:  name<TAB>kind<TAB>hex(text as UTF-8 bytes)<LF>
  name  [A-Za-z0-9_.-]+, unique
  kind  always "state" (text is a JSON object, i.e. a state part)
  text  exactly what json.dumps(obj, ...) returned (or, for the dup_* cases, hand-written JSON with
        duplicate keys). Text containing unescaped lone surrogates cannot be UTF-8, so lone
        surrogates only appear in ensure_ascii=True cases (as \\udXXX escapes).

Fixed edge cases come first, then --count random states. Output is deterministic for a given
--seed; random case i depends only on (seed, i), so --count 10 is a prefix of --count 1000.
"""
import argparse
import json
import math
import random
import struct
import sys

sys.setrecursionlimit(20000)

TOUCH_KEY = "chstate_touch"  # reserved by check.py for the "+touch" operations; never generated at top level


# ----------------------------------------------------------------------------- helpers

def has_nonfinite(obj):
    stack = [obj]
    while stack:
        v = stack.pop()
        if type(v) is float:
            if not math.isfinite(v):
                return True
        elif type(v) is dict:
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
    return False


def has_surrogate(obj):
    def bad(s):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in s)
    stack = [obj]
    while stack:
        v = stack.pop()
        if type(v) is str:
            if bad(v):
                return True
        elif type(v) is dict:
            for k, x in v.items():
                if bad(k):
                    return True
                stack.append(x)
        elif type(v) is list:
            stack.extend(v)
    return False


def dumps(obj, ensure_ascii, layout="default", sort_keys=False):
    kw = dict(ensure_ascii=ensure_ascii, allow_nan=has_nonfinite(obj), sort_keys=sort_keys)
    if layout == "compact":
        kw["separators"] = (",", ":")
    elif layout == "indent":
        kw["indent"] = 2
    elif layout != "default":
        raise ValueError(layout)
    return json.dumps(obj, **kw), kw


class Corpus:
    def __init__(self):
        self.lines = []
        self.names = set()

    def add_text(self, name, text, from_dumps_kw=None):
        if name in self.names:
            raise SystemExit(f"corpus.py: duplicate case name {name!r}")
        if not name or any(c not in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-" for c in name):
            raise SystemExit(f"corpus.py: bad case name {name!r}")
        data = text.encode("utf-8")  # strict: an unescaped lone surrogate here is a generator bug
        obj = json.loads(text)  # check.py must be able to compute the expectation
        if type(obj) is not dict:
            raise SystemExit(f"corpus.py: case {name} is not a JSON object")
        if from_dumps_kw is not None:
            # sanity: the text is a fixed point of Python's json for these options
            kw = dict(from_dumps_kw)
            kw["allow_nan"] = True
            if json.dumps(obj, **kw) != text:
                raise SystemExit(f"corpus.py: case {name} does not round-trip through Python's json")
        self.names.add(name)
        self.lines.append(f"{name}\tstate\t{data.hex()}\n")

    def add(self, name, obj, ensure_ascii=True, layout="default", sort_keys=False):
        text, kw = dumps(obj, ensure_ascii, layout, sort_keys)
        self.add_text(name, text, kw)

    def add_variants(self, name, obj, indent=True):
        """ASCII-escaped with default separators; raw UTF-8 compact and raw UTF-8 indent=2 when the
        value holds no lone surrogate (such text could not be UTF-8)."""
        self.add(f"{name}.a", obj, ensure_ascii=True)
        if not has_surrogate(obj):
            self.add(f"{name}.u", obj, ensure_ascii=False, layout="compact")
            if indent:
                self.add(f"{name}.i", obj, ensure_ascii=False, layout="indent")


# ----------------------------------------------------------------------------- fixed edge cases

def fixed_cases(c):
    floats = {
        "epoch": 1700000000.8702567, "0.1": 0.1, "neg0": -0.0, "0": 0.0, "min_sub": 5e-324,
        "neg_min_sub": -5e-324, "max": 1.7976931348623157e308, "neg_max": -1.7976931348623157e308,
        "1e16": 1e16, "1e-5": 1e-5, "1.2345678901234568e17": 123456789012345680.0, "2.5e-8": 2.5e-8,
        "min_normal": 2.2250738585072014e-308, "max_sub": 2.225073858507201e-308, "1e22": 1e22,
        "1e23": 1e23, "1e21": 1e21, "1e15": 1e15, "1e-7": 1e-7, "0.3000": 0.30000000000000004,
        "2p53": 9007199254740992.0, "2p53p2": 9007199254740994.0, "2p63": 9223372036854775808.0,
        "2p64": 18446744073709551616.0, "1.0": 1.0, "-1.5": -1.5, "100.0": 100.0, "4.35": 4.35,
        "epoch_ms": 1700000000870.2567, "tiny": 1.23456e-300, "pi": math.pi, "1_3": 1 / 3,
    }
    for label, v in floats.items():
        c.add_variants(f"edge_float_{label}", {"v": v, "in_list": [v], "neg": -v})
    c.add_variants("edge_float_all", {"floats": list(floats.values())})

    ints = {
        "0": 0, "1": 1, "m1": -1, "2p31m1": 2**31 - 1, "m2p31": -2**31, "2p32": 2**32,
        "2p53": 2**53, "2p53p1": 2**53 + 1, "m2p53m1": -(2**53) - 1, "2p63m1": 2**63 - 1,
        "m2p63": -2**63, "2p63": 2**63, "2p64m1": 2**64 - 1, "2p64": 2**64, "2p70": 2**70,
        "m2p63m1": -2**63 - 1, "m2p64": -2**64, "m2p64m1": -2**64 - 1, "2p127": 2**127,
        "2p128": 2**128, "10p30": 10**30, "m10p40": -(10**40), "2p200": 2**200, "10p100": 10**100,
    }
    for label, v in ints.items():
        c.add_variants(f"edge_int_{label}", {"v": v, "in_list": [v, 0]})
    c.add_variants("edge_int_all", {"ints": list(ints.values())})
    c.add_variants("edge_int_float_mix", {"a": [1, 1.0, 2, 2.5, -0.0, 0, 2**64, 1e20, True, 0.0]})

    nan, inf = float("nan"), float("inf")
    c.add_variants("edge_nan", {"v": nan})
    c.add_variants("edge_inf", {"v": inf})
    c.add_variants("edge_neginf", {"v": -inf})
    c.add_variants("edge_nonfinite_mix", {"l": [nan, inf, -inf, 0.0, -0.0, 1], "n": {"x": nan}})

    strings = {
        "lone_hi": "\ud800", "lone_lo": "\udfff", "lone_mid": "a\udbffb", "lone_rev": "\udc00\ud800",
        "lone_twice": "\ud800\ud800", "adjacent_pair": "\ud83d" + "\ude00",  # json.loads joins these
        "astral": "\U0001F600", "max_cp": "\U0010FFFF", "nul": "\u0000", "del": "\x7f",
        "controls": "".join(chr(i) for i in range(32)), "c1": "".join(chr(i) for i in range(0x80, 0xA0)),
        "quotes": '"\'"', "backslash": "\\", "backslashes": "\\\\\\n\\u0041", "slash": "/</script>",
        "ls_ps": "\u2028\u2029", "bom": "\ufeff", "fffd": "\ufffd", "ffff": "\uffff", "pua": "\ue000",
        "cjk": "键值状态", "rtl": "مرحبا שלום", "combining": "e\u0301 n\u0303", "empty": "",
        "spaces": "  \t \n ", "json_like": '{"a": 1}', "number_like": "1e5", "true_like": "true",
        "null_like": "null", "date": "2024-01-01T00:00:00.123456+00:00", "latin1": "ÿ\u00e9\u00df",
    }
    for label, v in strings.items():
        c.add_variants(f"edge_str_{label}", {"v": v, "in_list": [v], "k" + v: 1})

    c.add_variants("edge_keys_unicode", {"ключ": 1, "键": 2, "\U0001F600": 3, "\u0000": 4, "": 5,
                                         'a"b': 6, "a\\b": 7, "a/b": 8, "\n": 9, "\u2028": 10, "é": 11})
    c.add_variants("edge_keys_lone_surrogate", {"\ud800": 1, "x\udfffy": 2})
    c.add_variants("edge_keys_order_ba", {"b": 1, "a": 2})
    c.add_variants("edge_keys_order_zam", {"z": {"y": 1, "x": 2}, "a": [{"q": 1, "p": 2}], "m": 3})
    c.add_variants("edge_keys_order_reverse100", {f"k{i:03d}": i for i in range(99, -1, -1)})
    c.add_variants("edge_keys_numeric", {"10": 1, "9": 2, "1": 3, "-1": 4, "1.0": 5, "01": 6, "0": 7,
                                         "4294967295": 8, "4294967294": 9, "1e3": 10, " 2": 11})
    c.add_variants("edge_keys_case", {"a": 1, "A": 2, "B": 3, "b": 4})
    c.add("edge_keys_sorted", {"b": 1, "a": {"d": 1, "c": 2}}, sort_keys=True)

    for depth in (500, 900):
        # depth = number of nested containers, counting the top-level object
        o = cur = {}
        for _ in range(depth - 1):
            nxt = {}
            cur["d"] = nxt
            cur = nxt
        cur["leaf"] = 1.5
        c.add_variants(f"edge_nest_dict_{depth}", o, indent=False)
        lst = cur = []
        for _ in range(depth - 2):
            nxt = []
            cur.append(nxt)
            cur = nxt
        cur.append(-0.0)
        c.add_variants(f"edge_nest_list_{depth}", {"l": lst}, indent=False)
        o = cur = {}
        for i in range(depth - 1):
            nxt = [] if i % 2 == 0 else {}
            if type(cur) is dict:
                cur["k"] = nxt
            else:
                cur.append(nxt)
            cur = nxt
        c.add_variants(f"edge_nest_mixed_{depth}", o, indent=False)

    c.add_variants("edge_empty_object", {})
    c.add_variants("edge_empty_nested", {"a": {}, "b": [], "c": [[]], "d": [{}], "e": {"f": {}}, "g": ""})
    c.add_variants("edge_bool_null", {"t": True, "f": False, "n": None,
                                      "l": [True, False, None, 0, 1, 0.0, 1.0, "true", "null"]})
    c.add_variants("edge_long_ascii_100k", {"s": "abcdefghij" * 10240}, indent=False)
    c.add_variants("edge_long_unicode_100k", {"s": "é键\U0001F600\u0000\"\\" * 17000}, indent=False)
    c.add_variants("edge_many_keys_5000", {f"stream_{i}": {"replication_key_value": i * 1.5}
                                           for i in range(5000)}, indent=False)
    c.add_variants("edge_meltano_state", {
        "singer_state": {
            "bookmarks": {
                "orders": {"replication_key": "updated_at",
                           "replication_key_value": "2024-05-01T12:34:56.789012+00:00"},
                "users": {"replication_key": "id", "replication_key_value": 9007199254740993},
                "events": {"replication_key": "ts", "replication_key_value": 1700000000.8702567,
                           "partitions": [{"context": {"shard": 1}, "replication_key_value": -0.0}]},
                "full": {"version": 1700000000870, "initial_full_table_complete": True},
            },
            "currently_syncing": None,
        }
    })

    # hand-written text with duplicate keys: Python keeps the first position and the last value
    c.add_text("dup_keys_top", '{"a": 1, "b": 2, "a": 3}')
    c.add_text("dup_keys_nested", '{"x": {"k": 1, "k": {"z": 2.5}, "j": null}, "y": [1], "x2": {"b": true, "b": false}}')
    c.add_text("dup_keys_type_change", '{"v": 1, "w": "s", "v": 1.0, "v": -0.0}')


# ----------------------------------------------------------------------------- random cases

INT_EDGES = [0, 1, -1, 2**31 - 1, -2**31, 2**32, 2**53 - 1, 2**53, 2**53 + 1, 2**63 - 1, -2**63,
             2**63, 2**64 - 1, 2**64, 2**64 + 1, -2**63 - 1, -2**64, 10**18, 10**19, 10**20]

CHAR_POOLS = [
    (30, lambda r: chr(r.randint(0x20, 0x7E))),                               # printable ASCII
    (6, lambda r: r.choice('"\\/')),                                          # needs / may need escaping
    (5, lambda r: chr(r.randint(0x00, 0x1F))),                                # controls
    (1, lambda r: "\x7f"),
    (4, lambda r: chr(r.randint(0x80, 0x7FF))),                               # 2-byte UTF-8
    (4, lambda r: chr(r.choice([r.randint(0x800, 0xD7FF), r.randint(0xE000, 0xFFFF)]))),  # 3-byte
    (2, lambda r: r.choice("\u2028\u2029\ufeff\ufffd\uffff\u0301\u200d")),
    (3, lambda r: chr(r.randint(0x10000, 0x10FFFF))),                         # astral
    (1, lambda r: r.choice("\U0001F600\U0001F468\u200d\U0001F469")),
]
CHAR_POOL_WEIGHTS = [w for w, _ in CHAR_POOLS]


class Gen:
    def __init__(self, rng, ensure_ascii, nan):
        self.r = rng
        self.ensure_ascii = ensure_ascii  # lone surrogates allowed only then
        self.nan = nan
        self.budget = rng.choice([10, 30, 60, 120, 250, 500])

    def char(self):
        r = self.r
        if self.ensure_ascii and r.random() < 0.03:
            return chr(r.randint(0xD800, 0xDFFF))  # lone surrogate (two in a row may form a pair)
        _, f = r.choices(CHAR_POOLS, weights=CHAR_POOL_WEIGHTS)[0]
        return f(r)

    def string(self, key=False):
        r = self.r
        x = r.random()
        if x < 0.15:
            return r.choice(["", "a", "id", "updated_at", "1", "0", "-1", "1e5", "true", "null", "NaN",
                             "2024-01-01T00:00:00+00:00", "2024-02-29T23:59:59.999999Z", " ", "bookmarks"])
        if x < 0.45:
            n = r.randint(1, 12)
            return "".join(r.choice("abcdefghijklmnopqrstuvwxyz_0123456789") for _ in range(n))
        n = r.randint(0, 8 if key else 24)
        if not key and r.random() < 0.03:
            n = r.randint(200, 3000)
        return "".join(self.char() for _ in range(n))

    def integer(self):
        r = self.r
        x = r.random()
        if x < 0.35:
            return r.randint(-1000, 1000)
        if x < 0.6:
            return r.choice(INT_EDGES) + r.randint(-2, 2)
        bits = r.randint(1, 200)
        v = r.getrandbits(bits)
        return -v if r.random() < 0.4 else v

    def floating(self):
        r = self.r
        x = r.random()
        if self.nan and x < 0.04:
            return r.choice([float("nan"), float("inf"), float("-inf")])
        if x < 0.2:
            return r.random()
        if x < 0.4:
            while True:  # random 64-bit pattern: subnormals, huge, tiny, NaN/inf only when allowed
                v = struct.unpack("<d", r.getrandbits(64).to_bytes(8, "little"))[0]
                if self.nan or math.isfinite(v):
                    return v
        if x < 0.55:
            return 1.7e9 + r.randint(0, 10**8) + r.random()
        if x < 0.65:
            return (1.7e9 + r.randint(0, 10**8)) * 1000 + r.random()
        if x < 0.75:
            return round(r.uniform(-1e4, 1e4), r.randint(0, 7))
        if x < 0.82:
            return float(r.randint(-10**6, 10**6)) * r.choice([1, 1, 1e10, 1e20])
        if x < 0.87:
            return r.choice([0.0, -0.0, 5e-324, -5e-324, 1.7976931348623157e308, 2.2250738585072014e-308,
                             1e16, 1e-5, 1e21, 1e22, 1e23, 0.1, 0.2, 0.3, 9007199254740993.0])
        return r.uniform(-1, 1) * 10.0 ** r.randint(-320, 308)

    def scalar(self):
        r = self.r
        x = r.random()
        if x < 0.3:
            return self.integer()
        if x < 0.6:
            return self.floating()
        if x < 0.85:
            return self.string()
        if x < 0.95:
            return r.choice([True, False])
        return None

    def value(self, level, depth):
        """A value at nesting `level` (top-level object is level 1) in a tree of max depth `depth`."""
        r = self.r
        if level < depth and self.budget > 0 and r.random() < 0.3:
            return self.container(level + 1, depth, force=False)
        self.budget -= 1
        return self.scalar()

    def container(self, level, depth, force):
        """A dict or list at `level`; when force, one child chain reaches `depth` exactly."""
        r = self.r
        n = r.randint(0 if not force else 1, max(1, 8 - level))
        if level == 1:
            n = r.randint(1, 10)
        forced_at = r.randrange(n) if (force and level < depth and n) else -1
        make_dict = level == 1 or r.random() < 0.55
        items = []
        homogeneous = None if make_dict or r.random() < 0.6 else r.choice([self.integer, self.floating, self.string])
        for i in range(n):
            if i == forced_at:
                v = self.container(level + 1, depth, force=True)
            elif homogeneous is not None:
                v = homogeneous() if r.random() < 0.9 else self.scalar()  # one odd type out now and then
                self.budget -= 1
            else:
                v = self.value(level, depth)
            items.append(v)
        if not make_dict:
            return items
        d = {}
        for v in items:
            for _ in range(20):
                k = self.string(key=True)
                if k not in d and not (level == 1 and k == TOUCH_KEY):
                    break
            else:
                k = f"k{len(d)}_{r.getrandbits(32)}"
            d[k] = v
        return d


def random_case(seed, i):
    r = random.Random(f"chstate-fidelity:{seed}:{i}")
    ensure_ascii = r.random() < 0.5
    nan = r.random() < 0.25
    layout = r.choices(["default", "compact", "indent"], weights=[70, 15, 15])[0]
    sort_keys = r.random() < 0.1
    depth = r.randint(1, 8)
    g = Gen(r, ensure_ascii, nan)
    obj = g.container(1, depth, force=True)
    if nan and not has_nonfinite(obj):
        items = list(obj.items())
        key = "nan_" + str(r.getrandbits(24))
        while key in obj:
            key += "_"
        items.insert(r.randint(0, len(items)), (key, r.choice([float("nan"), float("inf"), float("-inf")])))
        obj = dict(items)
    return obj, ensure_ascii, layout, sort_keys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1000, help="number of random states (default 1000)")
    ap.add_argument("--seed", default="1", help="seed (any string; default 1)")
    ap.add_argument("--out", required=True, help="corpus file to write")
    ap.add_argument("--no-fixed", action="store_true", help="random cases only")
    a = ap.parse_args()

    c = Corpus()
    if not a.no_fixed:
        fixed_cases(c)
    n_fixed = len(c.lines)
    for i in range(a.count):
        obj, ensure_ascii, layout, sort_keys = random_case(a.seed, i)
        c.add(f"rand_{i:06d}", obj, ensure_ascii=ensure_ascii, layout=layout, sort_keys=sort_keys)
    with open(a.out, "w", encoding="ascii", newline="\n") as f:
        f.writelines(c.lines)
    size = sum(len(l) for l in c.lines)
    print(f"corpus: {len(c.lines)} cases ({n_fixed} fixed, {a.count} random), seed={a.seed}, "
          f"{size // 2} bytes of text -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
