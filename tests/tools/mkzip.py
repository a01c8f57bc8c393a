#!/usr/bin/env python3
"""mkzip.py KIND OUT - write small hand-made checkpoints for ptls_cli.sh
with plain Python (no torch): pickles built by the standard pickler.

  evil     data.pkl REDUCEs os.system (must be reported, never run)
  keys     a dict whose keys need escaping: 'a/b', '', '.x', 0 and '0'
  noprefix data.pkl at the archive root (torch refuses it too)
  long     a 300,000-character str and 5,000 keys and values that need
           JSON escapes: more than ptls's 64 KiB output buffer holds
mkzip.py check-long JSON - does `ptls --json -v` of "long" give back every
key and value exactly?
"""
import json
import io
import os
import pickle
import sys
import zipfile


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def write(out, pkl, prefix="m/"):
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr(prefix + "data.pkl", pkl)
        z.writestr(prefix + "version", "3\n")


def long_dict():
    d = {"big": 'a"b\\c\n\x01\u00e9\u20ac\U0001F600' * 30000}
    for i in range(5000):
        d["k%d\x02\"" % i] = "v%d\\\"\x7f\u00ff" % i
    return d


kind, out = sys.argv[1], sys.argv[2]
if kind == "evil":
    write(out, pickle.dumps({"x": Evil(), "n": 1}, protocol=2))
elif kind == "keys":
    write(out, pickle.dumps({"a/b": 1, "": 2, ".x": 3, 0: 4, "0": 5,
                             "50%": 6}, protocol=2))
elif kind == "long":
    write(out, pickle.dumps(long_dict(), protocol=2))
elif kind == "check-long":
    with open(out) as f:
        entries = json.load(f)["entries"]
    got = {e["keys"][0]: e["value"] for e in entries}
    sys.exit(0 if got == long_dict() else "values differ")
elif kind == "noprefix":
    write(out, pickle.dumps({}, protocol=2), prefix="")
else:
    sys.exit("unknown kind " + kind)
