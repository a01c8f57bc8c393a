"""views_torch.py - the torch half of tests/fs/views/views.sh (run under the
torch being tested: Debian's 1.13 or 2.x in the chroot).

  gen DIR      write a.pt and b.pt (same architecture, b has some tensors
               changed) with awkward dtypes, views, tied weights, a real
               key ending in .npy; and per tensor of a.pt its contiguous
               bytes (ref/<i>.bin) and metadata (meta.json)
  verify DIR   torch.load every DIR/out/*.pt and compare each tensor that
               DIR/expect/<case>.json names with its expected bytes

Prints one line per check: "ok   LABEL: ..." or "FAIL LABEL: ...".
"""
import json
import os
import sys

import torch

T2 = int(torch.__version__.split(".")[0]) >= 2


class MyT(torch.Tensor):
    """A tensor subclass with a python attribute (shown as xattrs)."""


def raw(t):
    """The bytes of t.contiguous(), as the tensor file holds them."""
    t = t.detach().contiguous()
    if t.is_quantized:
        t = t.int_repr()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    if T2 and t.dtype in (torch.complex32,):
        t = t.view(torch.int32)
    if T2 and str(t.dtype).startswith("torch.float8"):
        t = t.view(torch.uint8)
    return t.numpy().tobytes()


def model(seed):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(4, 6, generator=g)
    sd = {
        "fc.weight": torch.nn.Parameter(torch.randn(3, 5, generator=g)),
        "fc.bias": torch.randn(3, generator=g),
        "half": torch.randn(2, 7, generator=g).half(),
        "bf16": torch.randn(3, 4, generator=g).bfloat16(),
        "mask": torch.rand(5, generator=g) > 0.5,
        "cplx": torch.randn(2, 3, generator=g, dtype=torch.complex64),
        "i8": torch.randint(-128, 128, (4, 4), generator=g,
                            dtype=torch.int8),
        "u8": torch.randint(0, 256, (6,), generator=g, dtype=torch.uint8),
        "i64": torch.randint(-2**40, 2**40, (3,), generator=g),
        "f64": torch.randn(2, 2, generator=g, dtype=torch.float64),
        "special": torch.tensor([float("nan"), float("inf"),
                                 -float("inf"), -0.0, 1e-45, 3.4e38]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        # views of one storage: the transpose, a strided slice
        "base": base,
        "base_t": base.t(),
        "base_t_copy": base.t().contiguous(),
        "every2": base.view(-1)[1::2],
        "k": torch.arange(4, dtype=torch.float32),
        "k.npy": torch.arange(4, dtype=torch.int32) * 10,
        "seq": [torch.ones(2), torch.zeros(3)],
        "epoch": 3,
    }
    sd["tied"] = sd["fc.bias"]          # one tensor under two names
    if T2:
        sd["c32"] = torch.randn(3, generator=g,
                                dtype=torch.complex64).to(torch.complex32)
        sd["f8"] = torch.randn(4, generator=g).to(torch.float8_e4m3fn)
        # python attributes on a Parameter and a subclass (2.x state)
        p = torch.nn.Parameter(torch.ones(2))
        p.lr_scale = 0.5
        p.tag = "frozen"
        sd["pstate"] = p
        s = torch.arange(3.).as_subclass(MyT)
        s.extra = {"k": 7}
        sd["sub"] = s
    return sd


def walk(obj, prefix=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk(v, prefix + str(k) + "/")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from walk(v, prefix + str(i) + "/")
    elif isinstance(obj, torch.Tensor):
        yield prefix[:-1], obj


def storage_ptr(t):
    return (t.untyped_storage() if T2 else t.storage()).data_ptr()


def dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def gen(d):
    os.makedirs(d + "/ref", exist_ok=True)
    a = model(1)
    b = model(1)
    # b: the same architecture, some tensors different
    b["fc.bias"].add_(0.5)          # also changes "tied" (same tensor)
    b["half"][0, 0] += 1
    b["i8"][1, 2] = b["i8"][1, 2] ^ 1
    b["base"][0, 0] = 42.0          # changes base, base_t, every2? (0 no)
    torch.save(a, d + "/a.pt")
    torch.save(b, d + "/b.pt")
    meta = {}
    bt = dict(walk(b))
    for i, (path, t) in enumerate(walk(a)):
        ref = "%d.bin" % i
        with open(d + "/ref/" + ref, "wb") as f:
            f.write(raw(t))
        meta[path] = {
            "ref": ref, "dtype": dtype_name(t), "shape": list(t.shape),
            "stride": list(t.stride()), "parameter":
            isinstance(t, torch.nn.Parameter),
            "differs": raw(t) != raw(bt[path]),
            "attrs": {k: repr(v) for k, v in vars(t).items()
                      if not k.startswith("_") and k != "data"},
            "cls": None if type(t) in (torch.Tensor, torch.nn.Parameter)
            else type(t).__module__ + "." + type(t).__name__,
        }
    with open(d + "/meta.json", "w") as f:
        json.dump({"torch": torch.__version__, "t2": T2, "tensors": meta},
                  f, indent=1)


def verify(d):
    npass = nfail = 0
    for case in sorted(os.listdir(d + "/expect")):
        if not case.endswith(".json"):
            continue
        with open(d + "/expect/" + case) as f:
            exp = json.load(f)
        label = case[:-5]
        try:
            # our own files (a subclass of this module: not weights-only)
            obj = torch.load(d + "/out/" + exp["file"], map_location="cpu",
                             weights_only=False)
        except Exception as e:
            print("FAIL %s: torch.load: %s" % (label, e))
            nfail += 1
            continue
        got = dict(walk(obj))
        bad = []
        for path, want in exp["tensors"].items():
            t = got.get(path)
            if t is None:
                bad.append("%s: missing" % path)
                continue
            if dtype_name(t) != want["dtype"]:
                bad.append("%s: dtype %s, want %s" % (path, dtype_name(t),
                                                      want["dtype"]))
            if list(t.shape) != want["shape"]:
                bad.append("%s: shape %s, want %s" % (path, list(t.shape),
                                                      want["shape"]))
            if "parameter" in want and \
                    isinstance(t, torch.nn.Parameter) != want["parameter"]:
                bad.append("%s: Parameter is %s" % (path, not want["parameter"]))
            with open(d + "/expect/" + want["bytes"], "rb") as f:
                if raw(t) != f.read():
                    bad.append("%s: values differ" % path)
        for a_, b_ in exp.get("same_storage", []):
            if storage_ptr(got[a_]) != storage_ptr(got[b_]):
                bad.append("%s and %s no longer share a storage" % (a_, b_))
        for path in exp.get("absent", []):
            if path in got:
                bad.append("%s: still there" % path)
        if bad:
            print("FAIL %s: %s" % (label, "; ".join(bad[:4])))
            nfail += 1
        else:
            print("ok   %s: %d tensors as expected (torch %s)"
                  % (label, len(exp["tensors"]), torch.__version__))
            npass += 1
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(verify(sys.argv[2]))
