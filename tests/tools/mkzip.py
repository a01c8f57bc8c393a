#!/usr/bin/env python3
"""mkzip.py KIND OUT - write small hand-made checkpoints for ptls_cli.sh
with plain Python (no torch): pickles built by the standard pickler.

  evil     data.pkl REDUCEs os.system (must be reported, never run)
  keys     a dict whose keys need escaping: 'a/b', '', '.x', 0 and '0'
  noprefix data.pkl at the archive root (torch refuses it too)
  long     a 300,000-character str and 5,000 keys and values that need
           JSON escapes: more than ptls's 64 KiB output buffer holds
  njt      a jagged nested tensor as torch 2.x pickles one
           (_rebuild_from_type_v2 of _rebuild_njt, NestedTensor, its
           constructor's kwargs and its state), built here without torch
  njt-bad  the same with no "offsets" among the kwargs
mkzip.py check-long JSON - does `ptls --json -v` of "long" give back every
key and value exactly?
"""
import collections
import json
import io
import os
import pickle
import struct
import sys
import types
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


def fake(module, *names):
    """Stand-ins for torch's globals, pickled by name (never imported)."""
    m = sys.modules.setdefault(module, types.ModuleType(module))
    for n in names:
        def f(*a):
            return a
        f.__module__, f.__qualname__, f.__name__ = module, n, n
        setattr(m, n, f)
    return [getattr(m, n) for n in names]


class Call:
    def __init__(self, f, *args):
        self.f, self.args = f, args

    def __reduce__(self):
        return (self.f, self.args)


class Storage:
    def __init__(self, *pid):
        self.pid = pid


def njt(out, bad):
    """{"nt": an NJT of values float32 (5, 2), offsets int64 [0, 3, 5]}."""
    (from_type,) = fake("torch._tensor", "_rebuild_from_type_v2")
    rebuild_njt, nested = fake("torch.nested._internal.nested_tensor",
                               "_rebuild_njt", "NestedTensor")
    (v2,) = fake("torch._utils", "_rebuild_tensor_v2")
    fl, lo = fake("torch", "FloatStorage", "LongStorage")
    od = collections.OrderedDict()
    vals = Call(v2, Storage("storage", fl, "0", "cpu", 10), 0, (5, 2),
                (2, 1), False, od)
    offs = Call(v2, Storage("storage", lo, "1", "cpu", 3), 0, (3,), (1,),
                False, od)
    kw = {"values": vals, "offsets": offs, "lengths": None,
          "_ragged_idx": 1, "_metadata_cache": {}, "requires_grad": False}
    if bad:
        del kw["offsets"]
    state = {"_ragged_idx": 1, "_values": vals, "_offsets": offs,
             "_lengths": None, "_metadata_cache": {}}
    obj = {"nt": Call(from_type, rebuild_njt, nested, (kw,), state)}
    f = io.BytesIO()
    p = pickle.Pickler(f, protocol=2)
    p.persistent_id = lambda o: o.pid if isinstance(o, Storage) else None
    p.dump(obj)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("m/data.pkl", f.getvalue())
        z.writestr("m/data/0", struct.pack("<10f", *range(10)))
        z.writestr("m/data/1", struct.pack("<3q", 0, 3, 5))
        z.writestr("m/version", "3\n")


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
elif kind in ("njt", "njt-bad"):
    njt(out, kind == "njt-bad")
elif kind == "noprefix":
    write(out, pickle.dumps({}, protocol=2), prefix="")
else:
    sys.exit("unknown kind " + kind)
