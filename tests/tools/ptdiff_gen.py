#!/usr/bin/env python3
"""ptdiff_gen.py - pairs of checkpoints for ptdiff, and the check of what
ptdiff said about them against torch and numpy.  Run by ptdiff_cli.sh
under the torch being tested (Debian's 1.13 or 2.x in the chroot).

    ptdiff_gen.py gen DIR     write DIR/<case>_a.pt, DIR/<case>_b.pt and
                              DIR/manifest.tsv (case, A, B, ptdiff options)
                              and DIR/facts.json (what each case was made
                              to contain: paths and known amounts)
    ptdiff_gen.py check DIR   for every case, ptdiff's DIR/<case>.json,
                              .txt (its text output) and .rc against what
                              numpy computes from the torch-loaded tensors

The check walks both torch objects the way ptdiff walks the checkpoints
(dict keys and list indices; a container reached twice is a link), works
out every item (only in A/B, kind, dtype, shape, layout, attributes,
values; element counts, max abs and max rel from numpy), and compares:
the JSON items and totals, the text lines exactly, and the exit status.
The facts anchor the numpy side: a perturbed copy must show the amounts
it was perturbed by.  Prints one line per check, then "N passed, N failed".
"""
import collections
import json
import math
import os
import struct
import sys
import warnings
import zipfile

import numpy as np
import torch

warnings.simplefilter("ignore")
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
OD = collections.OrderedDict


# ------------------------------------------------------------ generating

def rnd(seed, *shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def to_big(src, dst, units):
    """Copy zip checkpoint @src to @dst with byteorder "big": every data
    record byteswapped in units of units[key] bytes (a complex's part)."""
    zin = zipfile.ZipFile(src)
    infos = zin.infolist()
    prefix = infos[0].filename.split("/")[0]
    seen = False
    with zipfile.ZipFile(dst, "w") as zout:
        for i in infos:
            data = zin.read(i)
            parts = i.filename.split("/")
            if parts[-1] == "byteorder":
                data, seen = b"big", True
            elif len(parts) == 3 and parts[1] == "data":
                u = units[parts[2]]
                data = b"".join(data[k:k + u][::-1]
                                for k in range(0, len(data), u))
            zout.writestr(i.filename, data)
        if not seen:
            zout.writestr(prefix + "/byteorder", b"big")


def deflate(src, dst):
    """Copy @src with its data records deflated, their deflate streams
    then overwritten with 0xff (an invalid block type): ptdiff lists the
    file but cannot read those storages."""
    zin = zipfile.ZipFile(src)
    with zipfile.ZipFile(dst, "w") as zout:
        for i in zin.infolist():
            parts = i.filename.split("/")
            comp = (zipfile.ZIP_DEFLATED if len(parts) == 3 and
                    parts[1] == "data" else zipfile.ZIP_STORED)
            zout.writestr(i.filename, zin.read(i), compress_type=comp)
    with zipfile.ZipFile(dst) as z, open(dst, "r+b") as f:
        for i in z.infolist():
            if i.compress_type != zipfile.ZIP_DEFLATED:
                continue
            f.seek(i.header_offset + 26)
            n, m = struct.unpack("<HH", f.read(4))
            f.seek(i.header_offset + 30 + n + m)
            f.write(b"\xff" * i.compress_size)


def perturb(t, changes):
    """A copy of @t with flat element i set to value v for (i, v)."""
    t = t.clone()
    flat = t.view(-1)
    for i, v in changes:
        flat[i] = v
    return t


def cases():
    """(name, A, B, options, facts); A/B objects or ("file", how)."""
    base = OD([
        ("model", OD([("embed.weight", rnd(1, 16, 8)),
                      ("head.bias", rnd(2, 16))])),
        ("optimizer", OD([("state", {0: {"step": torch.tensor(3.0),
                                         "exp_avg": rnd(3, 16, 8)}}),
                          ("param_groups", [{"lr": 0.001, "eps": 1e-08}])])),
        ("epoch", 12),
        ("name", "tiny"),
    ])
    out = []
    # identical: the same object saved twice, and a byte copy (made later)
    out.append(("same", base, base, [], {"differences": 0}))
    out.append(("copy", base, ("copy", "same_a"), [], {"differences": 0}))
    # a few elements changed by known amounts
    w = (rnd(4, 64, 32) * 64).round() / 64     # +-0.5 stays exact
    fw = w.view(-1)
    pw = perturb(w, [(5, fw[5].item() + 0.5), (100, fw[100].item() - 0.25),
                     (2047, fw[2047].item() + 0.125)])
    out.append(("perturbed", OD([("w", w), ("same", rnd(5, 8))]),
                OD([("w", pw), ("same", rnd(5, 8))]), [],
                {"w": {"differ": 3, "first": 5, "max_abs": 0.5}}))
    # dtype, shape, keys
    x = rnd(6, 16, 8)
    # values are compared across dtypes too (issue 19.4): a float16 copy
    # differs by rounding, within 1e-3 relative
    out.append(("dtype", {"x": x}, {"x": x.half()}, [],
                {"x": {"diffs": ["dtype", "values"]}}))
    out.append(("dtype_rtol", {"x": x}, {"x": x.half()},
                ["--rtol", "1e-3", "--ignore-dtype"], {"differences": 0}))
    out.append(("shape", {"y": x}, {"y": x.reshape(8, 16).clone()}, [],
                {"y": {"diffs": ["shape"]}}))
    keys_b = OD(base)
    keys_b["optimizer"] = OD([("state", {0: {"step": torch.tensor(3.0)}}),
                              ("param_groups", base["optimizer"]
                               ["param_groups"])])
    keys_b["extra"] = {"a": 1, "b": [1, 2]}
    out.append(("keys", OD(list(base.items()) + [("old", {"k": x})]),
                keys_b, [],
                {"optimizer/state/0/exp_avg": {"status": "only_a"},
                 "old": {"status": "only_a"},
                 "extra": {"status": "only_b"}}))
    # NaN and inf at the same and at different places
    f = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0,
                      -0.0, 2.0, float("nan")])
    g = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -0.0,
                      0.0, float("nan"), 3.0])
    h = torch.tensor([float("inf"), 1.0, float("inf"), 5.0])
    k = torch.tensor([float("-inf"), 1.0, 7.0, float("inf")])
    # NaNs of other bits (sign, payload) at the same places
    bits = lambda *v: torch.from_numpy(np.array(v, np.uint32).view(
        np.float32))
    nan_a = OD([("nan_same", f), ("nan_moved", f), ("inf", h),
                ("nan_bits", bits(0x7fc00000, 0x7fc00001, 0x3f800000))])
    nan_b = OD([("nan_same", f.clone()), ("nan_moved", g), ("inf", k),
                ("nan_bits", bits(0xffc00000, 0x7f800001, 0x3f800000))])
    out.append(("nan", nan_a, nan_b, [],
                {"nan_same": {"differ": 0}, "nan_moved": {"differ": 2},
                 "inf": {"differ": 3}, "nan_bits": {"differ": 0}}))
    out.append(("nan_differ", nan_a, nan_b, ["--nan-differ"],
                {"nan_same": {"differ": 2}, "nan_moved": {"differ": 3},
                 "nan_bits": {"differ": 2}}))
    # dtypes: each perturbed at two places
    dts = OD()
    for i, dt in enumerate([torch.bfloat16, torch.float16, torch.float64,
                            torch.complex64, torch.int8, torch.uint8,
                            torch.int16, torch.int32, torch.int64,
                            torch.bool]):
        if dt == torch.complex64:
            t = torch.complex(rnd(20 + i, 40), rnd(40 + i, 40))
        elif dt == torch.bool:
            t = rnd(20 + i, 40) > 0
        elif dt.is_floating_point:
            t = rnd(20 + i, 40, dtype=dt)
        elif dt == torch.uint8:
            t = (rnd(20 + i, 40).abs() * 20).to(dt)
        else:
            t = (rnd(20 + i, 40) * 20).to(dt)
        dts[str(dt).split(".")[1]] = t
    dts_b = OD()
    for name, t in dts.items():
        if t.dtype == torch.bool:
            dts_b[name] = perturb(t, [(3, not t[3].item()),
                                      (7, not t[7].item())])
        elif t.dtype.is_complex:
            dts_b[name] = perturb(t, [(3, t[3].item() + (3 + 4j)),
                                      (7, complex(0, 0))])
        else:
            dts_b[name] = perturb(t, [(3, t[3].item() + 1), (7, 0)])
    if TORCH2:
        e = rnd(70, 32).to(torch.float8_e4m3fn)
        dts["float8_e4m3fn"] = e
        dts_b["float8_e4m3fn"] = perturb(e.view(torch.uint8),
                                         [(1, 0x7e), (9, 0)]).view(
                                             torch.float8_e4m3fn)
    out.append(("dtypes", dts, dts_b, [], {"bfloat16": {"differ": 2}}))
    out.append(("ints", {"i": torch.tensor([-2 ** 63, 2 ** 63 - 1, 5, -7])},
                {"i": torch.tensor([2 ** 63 - 1, -2 ** 63, 5, 7])}, [],
                {"i": {"differ": 3, "max_abs": float(2 ** 64 - 1)}}))
    # a transposed view against its contiguous copy; a slice against
    # its clone (storage offset)
    big = rnd(8, 10, 16)
    # a row (1, 8) with stride (1, 1) against (8, 1): not a difference
    row = rnd(18, 8, 1).t()
    lay_a = OD([("t", big.t()), ("s", big[4:6]), ("row", row)])
    lay_b = OD([("t", big.t().contiguous()), ("s", big[4:6].clone()),
                ("row", torch.empty(1, 8).copy_(row))])
    out.append(("layout", lay_a, lay_b, [],
                {"t": {"diffs": ["layout"]},
                 "s": {"diffs": ["layout", "attrs"]},  # a view, a copy
                 "row": {"status": "equal"}}))
    out.append(("layout_ignored", lay_a, lay_b, ["--ignore-layout"],
                {"differences": 0}))
    # python values
    out.append(("values",
                OD([("epoch", 12), ("lr", 0.001), ("name", "tiny"),
                    ("flag", True), ("n", 1), ("s", "12"), ("none", None)]),
                OD([("epoch", 13), ("lr", 0.002), ("name", "small"),
                    ("flag", False), ("n", 1.0), ("s", 12), ("none", None)]),
                [], {"epoch": {"diffs": ["value"]}}))
    # kinds; a container reached twice (a link) against a copy
    shared, other = {"p": 1, "q": 2}, {"r": 3}
    out.append(("kinds",
                OD([("t", x), ("v", 3), ("d", {"a": 1}), ("x", shared),
                    ("y", shared), ("o", other), ("l1", other),
                    ("l2", shared)]),
                OD([("t", 3), ("v", x), ("d", 5), ("x", shared),
                    ("y", dict(shared)), ("o", other), ("l1", shared),
                    ("l2", shared)]), [],
                {"t": {"diffs": ["kind"]}, "y": {"diffs": ["kind"]},
                 "l1": {"diffs": ["target"]}, "l2": {"status": "equal"}}))
    # tolerances at their boundaries (all values exact in binary)
    ta = OD([("a", torch.tensor([1.0, 2.0, 0.0])),
             ("r", torch.tensor([3.0, 8.0, -6.0]))])
    tb = OD([("a", torch.tensor([1.0 + 2 ** -10, 2.0 - 2 ** -10, 2 ** -11])),
             ("r", torch.tensor([4.0, 8.0, -8.0]))])
    out.append(("tol_none", ta, tb, [], {"a": {"differ": 3}}))
    out.append(("tol_atol_edge", {"a": ta["a"]}, {"a": tb["a"]},
                ["--atol", "0.0009765625"], {"differences": 0}))
    out.append(("tol_atol_below", {"a": ta["a"]}, {"a": tb["a"]},
                ["--atol", "0.00097656"], {"a": {"differ": 2}}))
    out.append(("tol_rtol_edge", {"r": ta["r"]}, {"r": tb["r"]},
                ["--rtol", "0.25"], {"differences": 0}))
    out.append(("tol_rtol_below", {"r": ta["r"]}, {"r": tb["r"]},
                ["--rtol", "0.2499"], {"r": {"differ": 2}}))
    out.append(("tol_both", ta, tb, ["--atol", "1", "--rtol", "0.125"],
                {"differences": 0}))
    # more than one 1 MiB chunk, changed in the middle and at the end;
    # a strided view read across chunks
    large = rnd(9, 512, 1024)
    lb = perturb(large, [(300000, 1e6), (512 * 1024 - 1, -3.0)])
    wide = rnd(10, 1024, 600)
    out.append(("large", OD([("l", large), ("tr", wide.t())]),
                OD([("l", lb), ("tr", perturb(wide.t().contiguous(),
                                              [(599 * 1024 + 3, 9.0)]))]),
                ["--ignore-layout"],
                {"l": {"differ": 2, "first": 300000},
                 "tr": {"differ": 1, "first": 599 * 1024 + 3}}))
    # attributes: Parameter against a plain tensor; quantizer scale
    p = rnd(11, 4)
    q = torch.quantize_per_tensor(rnd(12, 8), 0.1, 3, torch.qint8)
    q2 = torch._make_per_tensor_quantized_tensor(q.int_repr(), 0.2, 3)
    f64 = lambda *v: torch.tensor(v, dtype=torch.float64)
    qc = torch.quantize_per_channel(rnd(23, 3, 4), f64(0.1, 0.2, 0.3),
                                    torch.tensor([0, 1, 2]), 0, torch.qint8)
    qc2 = torch._make_per_channel_quantized_tensor(
        qc.int_repr(), f64(0.1, 0.25, 0.3), torch.tensor([0, 1, 5]), 0)
    out.append(("attrs", OD([("p", torch.nn.Parameter(p)), ("q", q),
                             ("qc", qc)]),
                OD([("p", p.clone()), ("q", q2), ("qc", qc2)]), [],
                {"p": {"diffs": ["attrs"]}, "q": {"diffs": ["attrs"]},
                 "qc": {"diffs": ["attrs"]}}))
    # meta tensors: metadata only
    out.append(("meta", OD([("m", torch.empty(3, 4, device="meta")),
                            ("n", torch.empty(2, device="meta"))]),
                OD([("m", torch.empty(3, 4, device="meta")),
                    ("n", torch.empty(3, device="meta"))]), [],
                {"n": {"diffs": ["shape"]}, "m": {"status": "equal"}}))
    # a bare tensor as the root; empty and 0-d tensors
    out.append(("root", rnd(13, 5), perturb(rnd(13, 5), [(4, 100.0)]), [],
                {".": {"differ": 1}}))
    out.append(("small", OD([("e", torch.zeros(0, 3)),
                             ("z", torch.tensor(2.5)), ("emp", {})]),
                OD([("e", torch.zeros(0, 3)), ("z", torch.tensor(-2.5)),
                    ("emp", {})]), [], {"z": {"differ": 1}}))
    # the legacy format against the zip format of the same object
    out.append(("legacy", ("legacy", base), base, [], {"differences": 0}))
    # big-endian copies: equal, and perturbed (units: per storage key)
    be = OD([("f", perturb(rnd(14, 6), [(1, float("nan")), (3, -0.0)])),
             ("c", torch.complex(rnd(15, 3), rnd(16, 3))),
             ("h", rnd(17, 4, dtype=torch.float16)),
             ("i", torch.tensor([1, -2, 3])),
             ("d", rnd(19, 5, dtype=torch.float64)),
             ("b", rnd(21, 5, dtype=torch.bfloat16))])
    units = {"0": 4, "1": 4, "2": 2, "3": 8, "4": 8, "5": 2}
    out.append(("bigendian", be, ("big", "bigendian_a", units), [],
                {"differences": 0}))
    out.append(("bigendian_nan", be, ("big", "bigendian_a", units),
                ["--nan-differ"], {"f": {"differ": 1}}))
    # perturbed; f[4] is stored with the very bytes A has there
    bep = OD(be)
    bep["f"] = perturb(be["f"], [(2, 7.0)])
    u = bep["f"].numpy().view(np.uint32)
    u[4] = u[4:5].byteswap()[0]
    bep["h"] = perturb(be["h"], [(0, 1.5)])
    bep["d"] = perturb(be["d"], [(1, 2.5)])
    bep["b"] = perturb(be["b"], [(4, -1.5)])
    out.append(("bep_src", bep, bep, [], {"differences": 0}))
    out.append(("bigendian_perturbed", be, ("big", "bep_src_a", units), [],
                {"f": {"differ": 2}, "h": {"differ": 1}, "d": {"differ": 1},
                 "b": {"differ": 1}}))
    return out


def save(obj, path):
    if isinstance(obj, tuple) and obj[0] == "legacy":
        torch.save(obj[1], path, _use_new_zipfile_serialization=False)
    else:
        torch.save(obj, path)


def gen(d):
    os.makedirs(d, exist_ok=True)
    facts = {}
    with open(os.path.join(d, "manifest.tsv"), "w") as m:
        for name, a, b, opts, fact in cases():
            pa = os.path.join(d, name + "_a.pt")
            pb = os.path.join(d, name + "_b.pt")
            save(a, pa)
            if isinstance(b, tuple) and b[0] == "copy":
                with open(os.path.join(d, b[1] + ".pt"), "rb") as f:
                    data = f.read()
                with open(pb, "wb") as f:
                    f.write(data)
            elif isinstance(b, tuple) and b[0] == "big":
                to_big(os.path.join(d, b[1] + ".pt"), pb, b[2])
            else:
                save(b, pb)
            facts[name] = fact
            m.write("%s\t%s\t%s\t%s\n" % (name, name + "_a.pt",
                                          name + "_b.pt", " ".join(opts)))
    # a checkpoint whose deflated data records are broken: read errors
    # mid-run
    deflate(os.path.join(d, "perturbed_b.pt"), os.path.join(d, "deflated.pt"))
    with open(os.path.join(d, "facts.json"), "w") as f:
        json.dump(facts, f)


# -------------------------------------------------------------- checking

def load(path):
    """torch.load, plus byteswapping where torch 1.13 ignores byteorder."""
    obj = torch.load(path, map_location="cpu", weights_only=False) \
        if TORCH2 else torch.load(path, map_location="cpu")
    big = False
    if zipfile.is_zipfile(path):
        z = zipfile.ZipFile(path)
        for n in z.namelist():
            if n.split("/")[-1] == "byteorder" and z.read(n) == b"big":
                big = True
    if big and not TORCH2:
        obj = swap_all(obj)
    return obj


def swap_all(o):
    if isinstance(o, torch.Tensor):
        if o.dtype == torch.bfloat16:       # numpy has no bfloat16
            return swap_all(o.view(torch.int16)).view(torch.bfloat16)
        return torch.from_numpy(o.numpy().byteswap())
    if isinstance(o, dict):
        return type(o)((k, swap_all(v)) for k, v in o.items())
    return o


def is_container(o):
    return isinstance(o, (dict, list, tuple)) and not isinstance(
        o, torch.Tensor)


def items_of(o):
    if isinstance(o, dict):
        return [(str(k), v) for k, v in o.items()]
    return [(str(i), v) for i, v in enumerate(o)]


def value_text(v):
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, bytes):
        return v.decode("latin-1")
    return str(v)


def annotate(obj):
    """{id(container): first path} for the links, walking like ptfs."""
    first = {}

    def walk(o, path):
        if is_container(o):
            if len(o) and id(o) in first:
                return
            if len(o):
                first[id(o)] = path
            for k, v in items_of(o):
                walk(v, path + [k])
    walk(obj, [])
    return first


class Side:
    def __init__(self, obj):
        self.obj = obj
        self.first = annotate(obj)

    def kind(self, o, path):
        if isinstance(o, torch.Tensor):
            return "tensor"
        if is_container(o):
            if len(o) and self.first.get(id(o)) != path:
                return "link"
            return "directory"
        return "value"


def jpath(p):
    return "/".join(p) if p else "."


def pair_up(A, B):
    """[(path list, a or None, b or None)] in ptdiff's order."""
    out = []

    def walk(a, b, path, in_a, in_b):
        ka = A.kind(a, path) if in_a else None
        kb = B.kind(b, path) if in_b else None
        if (ka == kb == "directory" and (len(a) or len(b))):
            bd = dict(items_of(b))
            ad = dict(items_of(a))
            for k, v in items_of(a):
                walk(v, bd.get(k), path + [k], True, k in bd)
            for k, v in items_of(b):
                if k not in ad:
                    out.append((path + [k], None, v, False, True))
            return
        out.append((path, a, b, in_a, in_b))
    walk(A.obj, B.obj, [], True, True)
    return out


def dims(v):
    v = list(v)
    return "(%s)" % (", ".join(str(x) for x in v) + ("," if len(v) == 1
                                                      else ""))


def repr_f(v):
    return repr(float(v))


RAW = ("float8",)


def arrays(t):
    """(kind, numpy array) of a tensor's values in row-major order."""
    t = t.detach()
    if t.is_quantized:
        t = t.int_repr()
    name = str(t.dtype).split(".")[1]
    if name.startswith(RAW):
        return "raw", t.contiguous().view(torch.uint8).numpy().ravel()
    if t.dtype.is_complex:
        return "complex", t.contiguous().to(
            torch.complex128).numpy().ravel()
    if t.dtype.is_floating_point:
        return "float", t.contiguous().to(torch.float64).numpy().ravel()
    return "int", np.array(t.contiguous().view(-1).tolist(), dtype=object)


F8 = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
      "float8_e8m0fnu")


def real(t):
    """Values ptdiff compares across dtypes: floats (float8 too), ints."""
    name = str(t.dtype).split(".")[1]
    if t.is_quantized or t.dtype.is_complex:
        return False
    return name in F8 or not name.startswith(RAW)


def cross_elements(ta, tb, o):
    """Two real tensors of one shape and different dtypes: both as
    float64, compared like floats, plus the relative L2 error over the
    pairs without NaN or infinite difference."""
    a = ta.detach().contiguous().to(torch.float64).numpy().ravel()
    b = tb.detach().contiguous().to(torch.float64).numpy().ravel()
    r = elements(ta, tb, o, (a, b))
    with np.errstate(all="ignore"):
        d = np.abs(a - b)
        m = ~(np.isnan(a) | np.isnan(b)) & np.isfinite(d)
        d2, b2 = float((d[m] ** 2).sum()), float((b[m] ** 2).sum())
    r["rel_l2"] = (d2 / b2) ** 0.5 if b2 > 0 else (
        float("inf") if d2 > 0 else 0.0)
    return r


def elements(ta, tb, o, given=None):
    if given:
        ka, (a, b) = "float", given
    else:
        ka, a = arrays(ta)
        _, b = arrays(tb)
    r = {"numel": int(a.size)}
    if ka == "raw":
        dm = a != b
        r.update(differ=int(dm.sum()), nan=0, max_abs=None, max_rel=None)
    elif ka == "int":
        d = np.array([abs(int(x) - int(y)) for x, y in zip(a, b)],
                     dtype=object)
        mb = np.array([float(abs(int(y))) for y in b], dtype=np.float64)
        df = np.array([float(x) for x in d], dtype=np.float64)
        ne = d != 0
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(mb == 0, np.inf, df / mb)
        rel = np.where(ne, rel, 0.0)
        ok = df <= o["atol"] + o["rtol"] * mb
        dm = ne & ~ok
        r.update(differ=int(dm.sum()), nan=0,
                 max_abs=float(df.max()) if df.size else 0.0,
                 max_rel=float(rel.max()) if rel.size else 0.0)
    else:
        with np.errstate(all="ignore"):
            na, nb = np.isnan(a), np.isnan(b)
            if o["nan_differ"]:
                nd = na | nb
            else:
                nd = na ^ nb
            m = ~(na | nb)
            eq = (a == b) & m
            inf = (np.isinf(a) | np.isinf(b)) & m & ~eq
            d = np.abs(a - b)
            mb = np.abs(b)
            d = np.where(inf, np.inf, d)
            rel = np.where(inf | (mb == 0), np.inf, d / mb)
            live = m & ~eq
            d = np.where(live, d, 0.0)
            rel = np.where(live, rel, 0.0)
            ok = ~inf & (d <= o["atol"] + o["rtol"] * mb)
            dm = nd | (live & ~ok)
        r.update(differ=int(dm.sum()), nan=int(nd.sum()),
                 max_abs=float(d.max()) if d.size else 0.0,
                 max_rel=float(rel.max()) if rel.size else 0.0)
    r["first"] = int(np.argmax(dm)) if r["differ"] else None
    return r


def attrs(ta, tb):
    out = []

    def b(name, x, y):
        if x != y:
            out.append((name, x, y))
    dev_a = "meta" if ta.is_meta else str(ta.device)
    dev_b = "meta" if tb.is_meta else str(tb.device)
    if ta.is_meta != tb.is_meta:
        out.append(("kind", "meta" if ta.is_meta else "strided",
                    "meta" if tb.is_meta else "strided"))
    b("device", dev_a, dev_b)
    b("requires_grad", ta.requires_grad, tb.requires_grad)
    b("parameter", isinstance(ta, torch.nn.Parameter),
      isinstance(tb, torch.nn.Parameter))
    per_tensor = (torch.per_tensor_affine, torch.per_tensor_symmetric)
    if ta.is_quantized and tb.is_quantized and ta.qscheme() not in per_tensor:
        if ta.q_per_channel_axis() != tb.q_per_channel_axis():
            out.append(("axis", str(ta.q_per_channel_axis()),
                        str(tb.q_per_channel_axis())))
        for name, x, y, txt in (
                ("scales", ta.q_per_channel_scales(),
                 tb.q_per_channel_scales(), repr_f),
                ("zero_points", ta.q_per_channel_zero_points(),
                 tb.q_per_channel_zero_points(), str)):
            ne = [i for i, (u, v) in enumerate(zip(x.tolist(), y.tolist()))
                  if u != v]
            if ne:
                out.append(("%s[%d]" % (name, ne[0]), txt(x[ne[0]].item()),
                            txt(y[ne[0]].item())))
    elif ta.is_quantized and tb.is_quantized:
        if ta.q_scale() != tb.q_scale():
            out.append(("scale", repr_f(ta.q_scale()), repr_f(tb.q_scale())))
        if ta.q_zero_point() != tb.q_zero_point():
            out.append(("zero_point", str(ta.q_zero_point()),
                        str(tb.q_zero_point())))
    return out


def strides_differ(ta, tb):
    if ta.numel() == 0:
        return False
    return any(n > 1 and x != y for n, x, y in
               zip(ta.shape, ta.stride(), tb.stride()))


def storage_id(t):
    """Which storage a tensor views (None: meta, quantized, empty)."""
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else \
            t.storage()
        return s.data_ptr() or None
    except Exception:
        return None


def tie_partners(pairs, A, B):
    """Per pair index of two tensors: the first earlier such pair whose
    tensor shares its storage, in A and in B (ptdiff's ties())."""
    first_a, first_b, out = {}, {}, {}
    for i, (path, a, b, in_a, in_b) in enumerate(pairs):
        if not (in_a and in_b and A.kind(a, path) == "tensor" and
                B.kind(b, path) == "tensor"):
            continue
        sa, sb = storage_id(a), storage_id(b)
        if sa is None or sb is None or a.is_quantized or b.is_quantized:
            continue
        ja = first_a.setdefault(sa, i)
        jb = first_b.setdefault(sb, i)
        out[i] = (None if ja == i else ja, None if jb == i else jb)
    return out


def expect(A, B, o):
    """The items ptdiff should report, as dicts like its JSON ones, plus
    "lines": the text lines for each."""
    items = []
    pairs = list(pair_up(A, B))
    ties = tie_partners(pairs, A, B)
    for i, (path, a, b, in_a, in_b) in enumerate(pairs):
        p = jpath(path)
        it = {"path": p, "diffs": [], "lines": []}
        ka = A.kind(a, path) if in_a else None
        kb = B.kind(b, path) if in_b else None
        it["kind"] = [ka, kb]
        items.append(it)
        if not in_b or not in_a:
            it["status"] = "only_a" if in_a else "only_b"
            slash = "/" if (ka or kb) == "directory" and path else ""
            it["lines"].append("only in %s: %s%s" %
                               ("A" if in_a else "B", p, slash))
            continue
        if ka != kb:
            it["diffs"].append("kind")
            it["lines"].append("kind: %s: %s vs %s" % (p, ka, kb))
        elif ka == "link":
            it["target"] = [jpath(A.first[id(a)]), jpath(B.first[id(b)])]
            if it["target"][0] != it["target"][1]:
                it["diffs"].append("target")
                it["lines"].append("link: %s: -> %s vs -> %s" %
                                   (p, it["target"][0], it["target"][1]))
        elif ka == "value":
            ta, tb = type(a).__name__, type(b).__name__
            va, vb = value_text(a), value_text(b)
            it["value"] = [va, vb]
            if ta != tb or va != vb:
                it["diffs"].append("value")
                it["lines"].append("value: %s: %s vs %s%s" % (
                    p, va, vb, " (%s vs %s)" % (ta, tb) if ta != tb else ""))
        elif ka == "tensor":
            ta, tb = ties.get(i, (None, None))
            tie = None
            if ta != tb and not o["ignore_layout"]:
                tie = ("shares_storage_with",
                       jpath(pairs[ta][0]) if ta is not None else "None",
                       jpath(pairs[tb][0]) if tb is not None else "None")
            tensor_item(it, p, a, b, o, tie)
        it["status"] = "changed" if it["diffs"] else "equal"
    return items


def tensor_item(it, p, a, b, o, tie=None):
    da, db = str(a.dtype).split(".")[1], str(b.dtype).split(".")[1]
    it["dtype"] = [da, db]
    it["shape"] = [list(a.shape), list(b.shape)]
    it["stride"] = [list(a.stride()), list(b.stride())]
    it["offset"] = [a.storage_offset(), b.storage_offset()]
    cross = (da != db and list(a.shape) == list(b.shape) and
             not a.is_meta and not b.is_meta and real(a) and real(b))
    if da != db and not (cross and o.get("ignore_dtype")):
        it["diffs"].append("dtype")
        it["lines"].append("dtype: %s: %s vs %s" % (p, da, db))
    if list(a.shape) != list(b.shape):
        it["diffs"].append("shape")
        it["lines"].append("shape: %s: %s vs %s" % (p, dims(a.shape),
                                                    dims(b.shape)))
    at = attrs(a, b) + ([tie] if tie else [])
    same = da == db and list(a.shape) == list(b.shape)
    if same:
        sd = strides_differ(a, b)
        od = a.storage_offset() != b.storage_offset()
        it["layout_differs"] = sd or od
        if (sd or od) and not o["ignore_layout"]:
            it["diffs"].append("layout")
            parts = []
            if sd:
                parts.append("stride %s vs %s" % (dims(a.stride()),
                                                  dims(b.stride())))
            if od:
                parts.append("offset %d vs %d" % (a.storage_offset(),
                                                  b.storage_offset()))
            it["lines"].append("layout: %s: %s" % (p, ", ".join(parts)))
    if at:
        it["diffs"].append("attrs")
        it["attrs"] = {n: [x, y] for n, x, y in at}
        it["lines"].append("attrs: %s: %s" % (p, ", ".join(
            "%s %s vs %s" % (n, x, y) for n, x, y in at)))
    if same and not a.is_meta and not b.is_meta or cross:
        e = cross_elements(a, b, o) if cross else elements(a, b, o)
        it["elements"] = e
        if e["differ"]:
            it["diffs"].append("values")
            line = "values: %s: %d of %d differ" % (p, e["differ"],
                                                    e["numel"])
            if e["nan"]:
                line += " (%d NaN)" % e["nan"]
            if e["max_abs"] is not None:
                line += ", max abs %s, max rel %s" % (
                    repr_f(e["max_abs"]), repr_f(e["max_rel"]))
            if "rel_l2" in e:
                line += ", rel L2 %s" % ("%.3g" % e["rel_l2"])
            it["lines"].append(line)


def num(v):
    """A JSON figure as a float ("inf" strings included)."""
    return None if v is None else float(v)


class Checker:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
            print("ok   %s" % what)
        else:
            self.failed += 1
            print("FAIL %s" % what)


def same_num(x, y):
    if x is None or y is None:
        return x is y
    return x == y or (math.isnan(x) and math.isnan(y))


def check_case(ck, d, name, opts, facts):
    o = {"atol": 0.0, "rtol": 0.0, "nan_differ": "--nan-differ" in opts,
         "ignore_layout": "--ignore-layout" in opts,
         "ignore_dtype": "--ignore-dtype" in opts}
    for flag in ("atol", "rtol"):
        if "--" + flag in opts:
            o[flag] = float(opts[opts.index("--" + flag) + 1])
    A = Side(load(os.path.join(d, name + "_a.pt")))
    B = Side(load(os.path.join(d, name + "_b.pt")))
    want = expect(A, B, o)
    ndiff = sum(1 for i in want if i["status"] != "equal")
    byp = {i["path"]: i for i in want}

    # the numpy side against what the case was made to contain
    for path, f in facts.items():
        if path == "differences":
            ck.check(ndiff == f, "%s: numpy finds %d differences (made: %d)"
                     % (name, ndiff, f))
            continue
        w = byp.get(path)
        bad = []
        if w is None:
            bad.append("no such path")
        else:
            e = w.get("elements", {})
            for k, v in f.items():
                if k == "diffs" and w["diffs"] != v:
                    bad.append("diffs %s" % w["diffs"])
                elif k == "status" and w["status"] != v:
                    bad.append("status %s" % w["status"])
                elif k in ("differ", "first", "max_abs") and e.get(k) != v:
                    bad.append("%s %s" % (k, e.get(k)))
                elif k == "max_abs_at_least" and not e.get("max_abs", 0) >= v:
                    bad.append("max_abs %s" % e.get("max_abs"))
        ck.check(not bad, "%s: %s as made %s%s" % (name, path, f,
                                                  ": " + "; ".join(bad)
                                                  if bad else ""))

    # exit status
    rc = int(open(os.path.join(d, name + ".rc")).read())
    ck.check(rc == (1 if ndiff else 0), "%s: exit status %d (want %d)" %
             (name, rc, 1 if ndiff else 0))

    # JSON
    try:
        got = json.load(open(os.path.join(d, name + ".json")))
    except ValueError as e:
        ck.check(False, "%s: --json is not JSON: %s" % (name, e))
        return
    gi = got["items"]
    ck.check([i["path"] for i in gi] == [i["path"] for i in want],
             "%s: --json paths %s" % (name, [i["path"] for i in gi]
                                      if len(gi) < 12 else len(gi)))
    for g, w in zip(gi, want):
        bad = []
        for k in ("status", "diffs", "kind", "dtype", "shape", "stride",
                  "offset", "layout_differs", "value", "target"):
            if k in w and g.get(k) != w[k]:
                bad.append("%s %s, want %s" % (k, g.get(k), w[k]))
        if g.get("attrs", {}) != w.get("attrs", {}):
            bad.append("attrs %s, want %s" % (g.get("attrs"), w.get("attrs")))
        if "elements" in w or "elements" in g:
            ge, we = g.get("elements"), w.get("elements")
            if ge is None or we is None:
                bad.append("elements %s, want %s" % (ge, we))
            else:
                for k in ("numel", "differ", "nan", "first"):
                    if ge[k] != we[k]:
                        bad.append("%s %s, want %s" % (k, ge[k], we[k]))
                for k in ("max_abs", "max_rel"):
                    if not same_num(num(ge[k]), we[k]):
                        bad.append("%s %r, want %r" % (k, ge[k], we[k]))
                if ("rel_l2" in ge) != ("rel_l2" in we) or (
                        "rel_l2" in we and not math.isclose(
                            num(ge["rel_l2"]), we["rel_l2"],
                            rel_tol=1e-9, abs_tol=1e-300)):
                    bad.append("rel_l2 %r, want %r" % (ge.get("rel_l2"),
                                                       we.get("rel_l2")))
        ck.check(not bad, "%s: %s %s%s" % (name, w["path"], w["status"],
                                           ": " + "; ".join(bad)
                                           if bad else ""))
    st = collections.Counter(i["status"] for i in want)
    tot = {"differences": ndiff, "changed": st["changed"],
           "only_a": st["only_a"], "only_b": st["only_b"],
           "equal": st["equal"], "error": None}
    gt = {k: got.get(k, "missing") for k in tot}
    ck.check(gt == tot, "%s: --json totals %s%s" % (
        name, gt, "" if gt == tot else ", want %s" % tot))

    # text: every line, in order, then the summary line
    text = open(os.path.join(d, name + ".txt")).read().splitlines()
    lines = [ln for i in want for ln in i["lines"]]
    body, last = text[:-1], text[-1] if text else ""
    ck.check(body == lines, "%s: text lines%s" % (
        name, "" if body == lines else ":\n  got  %s\n  want %s" %
        (body, lines)))
    n = collections.Counter(i["kind"][0] for i in want
                            if i["kind"][0] == i["kind"][1])
    other = st["changed"] + st["equal"] - n["tensor"] - n["value"]
    pl = lambda k, w: "%d %s%s" % (k, w, "" if k == 1 else "s")
    ok = last == ("# %s (%d changed, %d only in A, %d only in B); "
                  "%d compared (%s, %s, %d other); %d equal" % (
                      pl(ndiff, "difference"), st["changed"], st["only_a"],
                      st["only_b"], st["changed"] + st["equal"],
                      pl(n["tensor"], "tensor"), pl(n["value"], "value"),
                      other, st["equal"]))
    ck.check(ok, "%s: summary line %r" % (name, last))


def check(d):
    ck = Checker()
    facts = json.load(open(os.path.join(d, "facts.json")))
    for line in open(os.path.join(d, "manifest.tsv")):
        name, _, _, opts = line.rstrip("\n").split("\t")
        try:
            check_case(ck, d, name, opts.split(), facts[name])
        except Exception as e:          # a crash is one failed check
            import traceback
            traceback.print_exc()
            ck.check(False, "%s: checker crashed: %r" % (name, e))
    print("%d passed, %d failed" % (ck.passed, ck.failed))
    return 1 if ck.failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("gen", "check"):
        sys.exit("usage: ptdiff_gen.py gen|check DIR")
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2]))
