"""stats_check.py EXPECT.json STATS.json [VALUES_DIR] - compare `ptls
--stats --json` with what numpy computed (stats_gen.py): counts, min and
max exactly, mean, std and L2 within 1e-9 relative (summation order);
then each VALUES_DIR/KEY.json (`ptdump --values --json`) element by
element.  One line per failure; exit 1 if any."""
import json
import math
import os
import struct
import sys

expect = json.load(open(sys.argv[1]))
got = json.load(open(sys.argv[2]))
rows = {r["path"]: r for r in got["stats"]}
bad = 0


def fail(msg):
    global bad
    bad += 1
    print("FAIL", msg)


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b)) + 1e-300


if sorted(rows) != sorted(expect):
    fail("paths: %s vs %s" % (sorted(rows), sorted(expect)))
for key, e in expect.items():
    r = rows.get(key)
    if r is None:
        continue
    if not r.get("computed"):
        fail("%s: not computed" % key)
        continue
    for f in ("dtype", "numel", "finite", "nan", "posinf", "neginf",
              "zeros", "min", "max"):
        if r[f] != e[f]:
            fail("%s: %s %r, numpy %r" % (key, f, r[f], e[f]))
    for f in ("mean", "std", "l2"):
        if not close(r[f], e[f]):
            fail("%s: %s %r, numpy %r" % (key, f, r[f], e[f]))
nonfinite = sum(1 for e in expect.values()
                if e["nan"] or e["posinf"] or e["neginf"])
if got["nonfinite_tensors"] != nonfinite:
    fail("nonfinite_tensors %r, want %r" % (got["nonfinite_tensors"],
                                             nonfinite))

def token(x):
    if not isinstance(x, str):
        return float(x)
    return float("nan") if x.lstrip("-").startswith("nan") else float(x)


def rounded(a, dtype):
    """@a (parsed from the text) rounded to @dtype: the text is exact in
    the dtype (shortest digits that parse back), not in float64."""
    if math.isnan(a) or math.isinf(a) or dtype == "float64":
        return a
    if dtype == "float32":
        return struct.unpack("<f", struct.pack("<f", a))[0]
    if dtype == "float16":
        return struct.unpack("<e", struct.pack("<e", a))[0]
    if dtype == "bfloat16":   # round to nearest even on the top 16 bits
        u = struct.unpack("<I", struct.pack("<f", a))[0]
        u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000
        return struct.unpack("<f", struct.pack("<I", u))[0]
    return a


vdir = sys.argv[3] if len(sys.argv) > 3 else None
for key, e in expect.items():
    if not vdir or "values" not in e:
        continue
    v = json.load(open(os.path.join(vdir, key + ".json")))
    want = e["values"]
    have = [rounded(token(x), e["dtype"]) for x in v["values"]]
    if len(have) != len(want) or v["shown"] != len(want):
        fail("%s: %d values, want %d" % (key, len(have), len(want)))
        continue
    for i, (a, b) in enumerate(zip(have, want)):
        b = token(b)
        if not (a == b or (math.isnan(a) and math.isnan(b))):
            fail("%s[%d]: %r, torch %r" % (key, i, a, b))
            break
print("%d tensors checked, %d failures" % (len(expect), bad))
sys.exit(1 if bad else 0)
