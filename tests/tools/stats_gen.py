"""stats_gen.py OUTDIR - write stats.pt with the torch under test, and
expect.json: what `ptls --stats --json` must say for each tensor, and the
values `ptdump --values` must print, computed with numpy from the tensors
torch loads back.  Every dtype this torch has (float8 only in 2.x), with
NaN, +Inf, -Inf and zeros planted, views, 0-d, empty and a tensor of
several MiB (more than one read chunk).

Rules (docs/user-guide.md): floats over their finite elements, std with
ddof=0, L2 = sqrt(sum x^2); complex over |z|, "+Inf" = an infinite part;
ints and bool exact; min/max null when nothing is finite."""
import json
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(19)


def planted(dtype, n=1000):
    x = torch.randn(n, generator=g, dtype=torch.float64) * 3
    x[5] = float("nan")
    x[17] = float("inf")
    x[18] = float("inf")
    x[40] = float("-inf")
    x[41:45] = 0.0
    x[45] = -0.0
    return x.to(dtype)


sd = {}
for name in ("float32", "float64", "float16", "bfloat16"):
    sd["f." + name] = planted(getattr(torch, name))
sd["f.clean32"] = torch.randn(64, 3, generator=g)
sd["f.transposed"] = sd["f.clean32"].t()          # a strided view
sd["f.scalar"] = torch.tensor(2.5)
sd["f.empty"] = torch.zeros(0, 4)
sd["f.allnan"] = torch.full((7,), float("nan"))
# an expand() view: 300 rows that are one row (stride 0), read once
sd["f.expanded"] = planted(torch.float32, 50).view(1, 50).expand(300, 50)
sd["f.big"] = torch.randn(3 * 1024 * 1024 // 4 + 77, generator=g) * 1e3 + 5
sd["i.int8"] = torch.tensor([-128, 127, 0, 5, -3], dtype=torch.int8)
sd["i.int16"] = torch.randint(-30000, 30000, (999,), generator=g,
                              dtype=torch.int16)
sd["i.int32"] = torch.tensor([2**31 - 1, -2**31, 0, 0, 7], dtype=torch.int32)
sd["i.int64"] = torch.tensor([2**63 - 1, -2**63, 0, 123456789012345678],
                             dtype=torch.int64)
sd["i.uint8"] = torch.tensor([0, 255, 1, 0, 128], dtype=torch.uint8)
sd["i.bool"] = torch.tensor([True, False, True, True])
c = torch.complex(planted(torch.float64, 300), torch.randn(300, generator=g,
                                                           dtype=torch.float64))
c[100] = complex(0, 0)
c[101] = complex(float("inf"), 1)
c[102] = complex(1, float("nan"))
sd["c.complex128"] = c
sd["c.complex64"] = c.to(torch.complex64)
for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
             "float8_e5m2fnuz"):
    dt = getattr(torch, name, None)
    if dt is None:
        continue
    x = planted(torch.float32, 300).clamp(-200, 200)
    x[17] = x[18] = x[40] = 1.0   # e4m3fn/fnuz have no infinity
    if name == "float8_e5m2":
        x[17] = float("inf")
        x[40] = float("-inf")
    sd["f8." + name] = x.to(dt)
    # every bit pattern once: the decoder against torch's
    sd["f8.all_" + name] = torch.arange(256, dtype=torch.uint8).view(dt)

torch.save(sd, os.path.join(out, "stats.pt"))
back = torch.load(os.path.join(out, "stats.pt"))


def num(v):
    v = float(v)
    return v if np.isfinite(v) else None


expect = {}
for key, t in back.items():
    if t.is_complex():
        z = t.to(torch.complex128).numpy()
        nan = np.isnan(z.real) | np.isnan(z.imag)
        inf = ~nan & (np.isinf(z.real) | np.isinf(z.imag))
        fin = np.abs(z[~nan & ~inf])
        e = {"nan": int(nan.sum()), "posinf": int(inf.sum()), "neginf": 0,
             "zeros": int(((z.real == 0) & (z.imag == 0)).sum())}
        kind = "float"
    elif t.dtype.is_floating_point:
        x = t.to(torch.float64).numpy().ravel()
        fin = x[np.isfinite(x)]
        e = {"nan": int(np.isnan(x).sum()), "posinf": int((x == np.inf).sum()),
             "neginf": int((x == -np.inf).sum()), "zeros": int((x == 0).sum())}
        kind = "float"
    else:
        x = t.to(torch.int64).numpy().ravel() if t.dtype != torch.bool else \
            t.numpy().ravel().astype(np.int64)
        fin = x
        e = {"nan": 0, "posinf": 0, "neginf": 0, "zeros": int((x == 0).sum())}
        kind = "int"
    e["numel"] = t.numel()
    e["finite"] = int(fin.size)
    if kind == "int" and fin.size:
        e["min"], e["max"] = int(fin.min()), int(fin.max())
        f = fin.astype(np.float64)
    else:
        e["min"] = num(fin.min()) if fin.size else None
        e["max"] = num(fin.max()) if fin.size else None
        f = fin.astype(np.float64)
    e["mean"] = num(f.mean()) if f.size else None
    e["std"] = num(f.std()) if f.size else None
    e["l2"] = float(np.sqrt((f * f).sum()))
    e["dtype"] = str(t.dtype).replace("torch.", "")
    if t.is_floating_point() and t.element_size() >= 2 and t.numel() < 5000:
        e["values"] = [v if np.isfinite(v) else str(v)
                       for v in t.to(torch.float64).contiguous().view(-1)
                       .tolist()]
    expect[key] = e
json.dump(expect, open(os.path.join(out, "expect.json"), "w"))
print(len(expect), "tensors")
