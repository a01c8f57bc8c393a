#!/usr/bin/env python3
"""mkzip.py KIND OUT - write small hand-made checkpoints for ptls_cli.sh
with plain Python (no torch): pickles built by the standard pickler.

  evil     data.pkl REDUCEs os.system (must be reported, never run)
  keys     a dict whose keys need escaping: 'a/b', '', '.x', 0 and '0'
  noprefix data.pkl at the archive root (torch refuses it too)
"""
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


kind, out = sys.argv[1], sys.argv[2]
if kind == "evil":
    write(out, pickle.dumps({"x": Evil(), "n": 1}, protocol=2))
elif kind == "keys":
    write(out, pickle.dumps({"a/b": 1, "": 2, ".x": 3, 0: 4, "0": 5,
                             "50%": 6}, protocol=2))
elif kind == "noprefix":
    write(out, pickle.dumps({}, protocol=2), prefix="")
else:
    sys.exit("unknown kind " + kind)
