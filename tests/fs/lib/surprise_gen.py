"""surprise_gen.py - checkpoints for the issue-15 mount tests (xattrs.sh,
names.sh, rsync.sh, stale.sh), written by the torch under test, with what
torch itself says they hold (JSON beside them).

  python3 surprise_gen.py attrs OUT.pt OUT.json
  python3 surprise_gen.py names OUT.pt OUT.json
  python3 surprise_gen.py names_edited FILE.pt OUT.json
  python3 surprise_gen.py pair A.pt B.pt          (rsync: same keys, some differ)
  python3 surprise_gen.py compare X.pt Y.pt       (exit 0 when torch sees them equal)
  python3 surprise_gen.py resave DST.pt SRC.pt    (torch.save in place)
  python3 surprise_gen.py big OUT.pt MB
  python3 surprise_gen.py textcheck CKPT.pt KEY VIEW.txt
"""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore")             # torch 2's deprecation notes

import torch


def load(path):
    """torch.load of a file we wrote ourselves (torch 2.6+ defaults to
    weights_only=True, which refuses the Tagged subclass)."""
    try:
        return torch.load(path, weights_only=False)
    except TypeError:                       # torch < 1.13 has no such flag
        return torch.load(path)


class Tagged(torch.Tensor):
    """A tensor subclass: its __dict__ is pickled in torch 1.13 and 2.x."""


def long_attr(i):
    return ("a%03d_" % i) + "x" * 195          # 200 characters


def attrs(out, js):
    p30 = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))
    p60 = torch.nn.Parameter(torch.arange(4.0))
    t30 = torch.arange(5.0).as_subclass(Tagged)
    t60 = torch.arange(7.0).as_subclass(Tagged)
    for i in range(30):
        setattr(p30, long_attr(i), i)
        setattr(t30, long_attr(i), 1000 + i)
    for i in range(60):
        setattr(p60, "attr%02d" % i, "v" * 150)
        setattr(t60, "attr%02d" % i, "v" * 150)
    obj = {"p30": p30, "p60": p60, "t30": t30, "t60": t60}
    torch.save(obj, out)
    back = load(out)
    want = {}
    for k, t in back.items():
        want[k] = {"dtype": str(t.dtype).replace("torch.", ""),
                   "attrs": {a: repr(v) for a, v in vars(t).items()}}
    json.dump(want, open(js, "w"))


def names(out, js):
    # keys the kernel cannot take as they are: over NAME_MAX (255 bytes)
    # and over PATH_MAX (4096), several sharing a long prefix, a long
    # key inside a nested dict, and ordinary keys beside them
    keys = ["k" * 300, "k" * 300 + "b", "é" * 200, "x" * 5000,
            "x" * 5000 + "y", "short", "a/" * 200, "." + "d" * 255,
            "n" * 255, "n" * 256]
    sd = {}
    for i, k in enumerate(keys):
        sd[k] = torch.full((3,), float(i))
    sd["nested"] = {"z" * 4200: torch.arange(4), "plain": torch.ones(2)}
    torch.save(sd, out)
    back = load(out)
    want = {"keys": [], "nested": []}
    for k, t in back.items():
        if k == "nested":
            for k2, t2 in t.items():
                want["nested"].append([k2, t2.numpy().tobytes().hex()])
        else:
            want["keys"].append([k, t.numpy().tobytes().hex()])
    json.dump(want, open(js, "w"))


def names_edited(path, js):
    """After names.sh's edits through cut names: "k"*300 removed, "x"*5000
    starts with 1.0 (dd), "short" renamed onto "k"*300+"b" (replacing
    it), new bytes renamed onto "é"*200 (7.0s) and onto the .npy view of
    "x"*5000+"y" (4.5s), "n"*255 renamed to "q"*300 by setfattr user.key;
    everything else as saved, in its place."""
    want = json.load(open(js))
    back = load(path)
    orig = dict(want["keys"])
    exp = {}
    for k, h in want["keys"]:
        if k == "k" * 300 or k == "short":
            continue
        if k == "k" * 300 + "b":
            h = orig["short"]
        elif k == "é" * 200:
            h = torch.full((3,), 7.0).numpy().tobytes().hex()
        elif k == "x" * 5000 + "y":
            h = torch.full((3,), 4.5).numpy().tobytes().hex()
        elif k == "n" * 255:
            k = "q" * 300
        exp[k] = h
    bad = []
    for k, h in exp.items():
        if k not in back:
            bad.append("key %r.. (%d) lost" % (k[:10], len(k)))
            continue
        t = back[k].clone()
        if k == "x" * 5000:
            if t[0].item() != 1.0:
                bad.append("the in-place write did not land")
            t[0] = float(list(orig).index(k))
        if t.numpy().tobytes().hex() != h:
            bad.append("key %r.. (%d) holds %s" % (k[:10], len(k),
                                                   t.tolist()))
    for k2, h in want["nested"]:
        if back["nested"][k2].numpy().tobytes().hex() != h:
            bad.append("nested key %r.. changed" % k2[:10])
    order = [k for k in back if k != "nested"]
    if order != list(exp):
        bad.append("keys %s, want %s" % ([(k[:3], len(k)) for k in order],
                                        [(k[:3], len(k)) for k in exp]))
    print("; ".join(bad) or "ok")
    return 1 if bad else 0


def pair(a, b):
    torch.manual_seed(0)
    base = torch.randn(8, 8)
    sa = {"enc.weight": torch.randn(16, 4), "enc.bias": torch.zeros(16),
          "dec.weight": base, "dec.view": base.t(),
          "dec.tied": base, "head": torch.arange(10),
          "same": torch.ones(5)}
    torch.save(sa, a)
    sb = {k: v.clone() for k, v in sa.items()}
    sb["dec.weight"] = base.clone()
    sb["dec.weight"][0, 0] += 1.0              # a one-element change
    sb["dec.view"] = sb["dec.weight"].t()
    sb["dec.tied"] = sb["dec.weight"]
    sb["enc.bias"] = torch.ones(16)           # same size, all bytes differ
    torch.save(sb, b)
    # same second: both files get the same mtime below, by the caller


def same(x, y):
    if isinstance(x, torch.Tensor):
        return (isinstance(y, torch.Tensor) and x.dtype == y.dtype and
                x.shape == y.shape and x.stride() == y.stride() and
                torch.equal(x, y))
    if isinstance(x, dict):
        return (isinstance(y, dict) and list(x) == list(y) and
                all(same(x[k], y[k]) for k in x))
    return x == y


def compare(a, b):
    x, y = load(a), load(b)
    if not same(x, y):
        print("differ")
        return 1
    # views and ties: storages shared in x are shared in y
    def ptrs(d):
        return {k: ((v.untyped_storage() if hasattr(v, "untyped_storage")
                     else v.storage()).data_ptr(), v.storage_offset())
                for k, v in d.items() if isinstance(v, torch.Tensor)}
    px, py = ptrs(x), ptrs(y)
    for k in px:
        for k2 in px:
            if (px[k][0] == px[k2][0]) != (py[k][0] == py[k2][0]):
                print("sharing of %s and %s differs" % (k, k2))
                return 1
    print("equal")
    return 0


def resave(dst, src):
    """torch.save of SRC's contents to DST, the way a training job saves:
    open(DST, 'wb') truncates and rewrites the same inode."""
    torch.save(load(src), dst)


def big(out, mb):
    """a big float32 tensor, and a small 2-d one whose rows straddle the
    16384-element chunks of the text view (with NaN, inf, negatives)"""
    n = int(mb) * (1 << 20) // 4
    torch.manual_seed(1)
    small = torch.randn(1000, 301) * 1e3
    small[0, 0], small[5, 7], small[999, 300] = float("nan"), float("inf"), -0.0
    torch.save({"w": torch.arange(n, dtype=torch.float32) / 7,
                "small": small, "t": small.t(), "b": torch.ones(3)}, out)


def textcheck(ckpt, key, txt):
    """Does TXT (a text view) give back tensor KEY of CKPT bit for bit?"""
    t = load(ckpt)[key].contiguous()
    lines = open(txt).read().split("\n")
    want = "# float32 (%s)" % ", ".join(str(d) for d in t.shape)
    if lines[0] != want:
        print("header %r, want %r" % (lines[0], want))
        return 1
    rows = [l for l in lines[1:] if l]
    if len(rows) != t.shape[0]:
        print("%d rows, want %d" % (len(rows), t.shape[0]))
        return 1
    vals = torch.tensor([float(x) for r in rows for x in r.split()],
                        dtype=torch.float64).to(torch.float32)
    a = vals.view(torch.int32)
    b = t.reshape(-1).view(torch.int32)
    if a.shape != b.shape or not torch.equal(a, b):
        print("values differ")
        return 1
    print("ok")
    return 0


def many(out, n):
    """N small tensors t0..t{N-1}, each four float32 zeros: one storage
    each, so that editing them all stages N storages"""
    torch.save({"t%d" % i: torch.zeros(4) for i in range(int(n))}, out)


def manycheck(path, n, edited):
    """Are t0..t{EDITED-1} of PATH all 1.0 and the rest still 0.0?"""
    d = load(path)
    n, edited = int(n), int(edited)
    if len(d) != n:
        print("%d tensors, want %d" % (len(d), n))
        return 1
    for i in range(n):
        want = 1.0 if i < edited else 0.0
        if not torch.equal(d["t%d" % i], torch.full((4,), want)):
            print("t%d is %s, want all %s" % (i, d["t%d" % i].tolist(), want))
            return 1
    print("ok")
    return 0


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    rc = {"attrs": attrs, "names": names, "names_edited": names_edited, "pair": pair, "compare": compare,
          "big": big, "resave": resave, "textcheck": textcheck,
          "many": many, "manycheck": manycheck}[cmd](*args)
    sys.exit(rc or 0)
