#!/usr/bin/env python3
"""ptrepack_gen.py DIR - write, with the torch under test, the checkpoints
ptrepack_torch.sh converts and cuts, and DIR/clone.tsv: for each file the
most bytes its storages may hold after `ptrepack --clone`.

  slice.pt        torch.save(big[2:3]): the file-size trap
  views.pt        two overlapping views of one big storage (cut to their
                  span, still sharing it) and a small whole tensor
  whole.pt        [big, big[2:3]]: nothing to cut
  param.pt        a Parameter viewing a slice, and an int64 slice
  empty.pt        an empty slice of a big storage
  strided.pt      big[::97] reaches nearly all of it: not cut
  legacy_*.pt     the same in the legacy (< 1.6) format
  legacy_view.pt  a legacy file whose persistent ids carry view metadata
                  (view_key, offset, numel), as torch < 0.4 wrote them
  u16.pt          (torch 2.x) a uint16 slice: an UntypedStorage
"""
import collections
import io
import os
import pickle
import struct
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
V2 = int(torch.__version__.split(".")[0]) >= 2
torch.manual_seed(0)
big = torch.arange(100000, dtype=torch.float32)
clone_max = {}


def save(name, obj, most, legacy=True):
    torch.save(obj, os.path.join(out, name))
    clone_max[name] = most
    if legacy:
        torch.save(obj, os.path.join(out, "legacy_" + name),
                   _use_new_zipfile_serialization=False)
        clone_max["legacy_" + name] = most


save("slice.pt", big[2:3], 4)
m = torch.randn(1000, 100)
save("views.pt", {"a": m[10:20], "b": m[15:30].t(), "x": torch.ones(3)},
     (30 - 10) * 100 * 4 + 12)
save("whole.pt", [big, big[2:3]], 400000)
p = torch.nn.Parameter(big[5:10].clone().requires_grad_(False))
w = torch.arange(50000, dtype=torch.int64)
save("param.pt", {"p": torch.nn.Parameter(torch.randn(5000)[100:110]),
                  "i": w[7:9], "q": p}, 40 + 16 + 20)
save("empty.pt", {"e": big[5:5], "one": big[9:10]}, 4)
save("strided.pt", big[::97], 400000)
if V2:
    u = torch.arange(10000, dtype=torch.int32).to(torch.uint16)
    save("u16.pt", {"u": u[100:104]}, 8, legacy=False)


# ---- a legacy file with view metadata, built by hand (torch-format.md 7)
class Root:
    """a storage: key, numel, the floats in it"""
    def __init__(self, key, data):
        self.key, self.data = key, data


class View:
    """a view of root @r: (view_key, offset, numel)"""
    def __init__(self, r, vkey, off, n):
        self.r, self.vkey, self.off, self.n = r, vkey, off, n


class T:
    """a tensor over a View or Root, rebuilt by _rebuild_tensor_v2"""
    def __init__(self, st, off, size, stride):
        self.args = (st, off, size, stride)

    def __reduce__(self):
        st, off, size, stride = self.args
        return (torch._utils._rebuild_tensor_v2,
                (st, off, size, stride, False, collections.OrderedDict()))


class P(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Root):
            return ("storage", torch.FloatStorage, obj.key, "cpu",
                    len(obj.data), None)
        if isinstance(obj, View):
            return ("storage", torch.FloatStorage, obj.r.key, "cpu",
                    len(obj.r.data), (obj.vkey, obj.off, obj.n))
        return None


r1 = Root("1000", [float(i) for i in range(40)])
r2 = Root("2000", [float(-i) for i in range(6)])
v = View(r1, "1001", 10, 20)
obj = {"a": T(v, 2, (4,), (1,)), "b": T(v, 0, (2, 3), (5, 1)),
       "c": T(r2, 1, (5,), (1,))}
buf = io.BytesIO()
for x in (0x1950a86a20f9469cfc6c, 1001,
          {"protocol_version": 1001, "little_endian": True,
           "type_sizes": {"short": 2, "int": 4, "long": 4}}):
    pickle.dump(x, buf, protocol=2)
P(buf, protocol=2).dump(obj)
pickle.dump(sorted([r1.key, r2.key]), buf, protocol=2)
for r in sorted([r1, r2], key=lambda r: r.key):
    buf.write(struct.pack("<q", len(r.data)))
    buf.write(struct.pack("<%df" % len(r.data), *r.data))
with open(os.path.join(out, "legacy_view.pt"), "wb") as f:
    f.write(buf.getvalue())
clone_max["legacy_view.pt"] = (20 - 2) * 4 + 5 * 4

with open(os.path.join(out, "clone.tsv"), "w") as f:
    for k, n in clone_max.items():
        f.write("%s\t%d\n" % (k, n))
