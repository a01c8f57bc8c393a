"""gen_edge.py OUTDIR - edge-case checkpoints written by the torch under
test (run by run.sh under torch 1.13 and again under torch 2.x), for what
the shared fixtures do not cover: per-channel quantization, keys that
print alike, empty views, slices of shared storages, awkward key text.
"""
import collections
import os
import sys

import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(1)


def save(name, obj):
    torch.save(obj, os.path.join(out, name))


q = torch.quantize_per_channel(torch.randn(3, 4), torch.tensor([0.1, 0.2, 0.3]),
                               torch.tensor([0, 1, 2]), 0, torch.qint8)
save("per_channel.pt", {"q": q})

t = torch.arange(4.0)
save("alike_keys.pt", {(1,): t, (2,): t, (3,): t, 0: t[:2], "0": t[2:],
                       "a/b": t, "": t, ".hidden": t, "50%": t, "ü": t})

big = torch.arange(24.0).view(2, 3, 4)
save("views.pt", collections.OrderedDict([
    ("empty3", torch.empty(2, 0, 3)), ("empty_t", torch.empty(3, 0).t()),
    ("slice", big[1:, 1:, ::2]), ("perm", big.permute(2, 0, 1)),
    ("row", big[1, 2]), ("elem", big[0, 0, 3]), ("big", big),
    ("expand", torch.tensor([5.0]).expand(3)),
]))

save("training.pt", {
    "model": collections.OrderedDict([("w", torch.randn(2, 2)),
                                      ("b", torch.zeros(2))]),
    "optim": {"state": {0: {"step": 3, "m": torch.ones(2, 2)}},
              "param_groups": [{"lr": 1e-3, "params": [0, 1],
                                "betas": (0.9, 0.999)}]},
    "epoch": 7, "best": float("inf"), "nan": float("nan"), "name": "run/1",
    "flags": [True, False, None], "big": 2 ** 70, "neg": -5,
    "dtypes": [torch.zeros(2, dtype=d) for d in (
        torch.float16, torch.bfloat16, torch.complex64, torch.bool,
        torch.int8, torch.uint8, torch.int16, torch.float64)],
})



def relocated(name, obj, location):
    """Save @obj on the CPU, then say in data.pkl that its storages were
    saved on @location (cuda:1, mps, ...): what a GPU machine writes, for
    a machine without one.  The zip is rewritten in order, stored."""
    import zipfile
    path = os.path.join(out, name)
    save(name, obj)
    with zipfile.ZipFile(path) as z:
        recs = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    cpu = b"X\x03\x00\x00\x00cpu"     # 'cpu', pickled once, then memoized
    loc = location.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for n, data in recs:
            if n.endswith("/data.pkl"):
                assert data.count(cpu) == 1
                data = data.replace(cpu, b"X" + len(loc).to_bytes(4, "little")
                                    + loc)
            z.writestr(n, data)


# storages saved on devices this machine has not: ptls and the mount show
# the location, the bytes are read all the same
for loc in ("cuda:1", "mps", "hpu:0", "privateuseone:2"):
    relocated("device_%s.pt" % loc.replace(":", "_"),
              {"a": torch.arange(3.0), "b": torch.ones(2, 2).t(),
               "c": torch.zeros(4, dtype=torch.int16)}, loc)

# torch 2.x dtypes without a storage class (_rebuild_tensor_v3): every one
# torch can save, over known bytes, plus a strided view of one
if int(torch.__version__.split(".")[0]) >= 2:
    new = {}
    for n in ("uint16", "uint32", "uint64", "float8_e5m2", "float8_e4m3fn",
              "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu",
              "float4_e2m1fn_x2", "complex32", "bits8", "bits16", "bits1x8",
              "bits2x4", "bits4x2"):
        dt = getattr(torch, n, None)
        if dt is None:
            continue
        raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32,
               8: torch.int64}[dt.itemsize]
        new[n] = torch.arange(6, dtype=raw).mul(37).view(dt)
    new["uint16_t"] = torch.arange(6, dtype=torch.int16).view(
        torch.uint16).view(2, 3).t()
    save("new_dtypes.pt", new)
