#!/usr/bin/env python3
"""faults.py - the torch side of tests/fs/safety/faults.sh.

One process for the whole run (torch is imported once).  Requests come one
per line on stdin, tab-separated; each gets one reply line on stdout,
"ok<TAB>summary" or "FAIL<TAB>why":

    gen DIR
        writes DIR/small.pt, DIR/big.pt (a 50 MB tensor), DIR/wb.pt (~200 MB)
        and DIR/other.pt with the torch under test (fixed seed)
    expect ORIG RESULT OPSFILE
        torch.load(ORIG), applies the edits in OPSFILE to it, and compares
        the result with torch.load(RESULT): the same keys, and for every
        tensor the same dtype, shape, stride, storage offset, bytes,
        requires_grad and class, and the same storage sharing (tied views
        stay tied); values equal
    load FILE
        torch.load(FILE) works (and is a dict)

OPSFILE, one edit per line, tab-separated (top-level keys only):
    poke KEY OFFSET HEX      bytes HEX at byte OFFSET of the tensor's
                             contiguous data (the tensor file)
    fill KEY FILE            the tensor's data replaced by FILE's bytes
    rename OLD NEW           the key renamed
    value KEY LITERAL        the value set to ast.literal_eval(LITERAL)
    delete KEY               the key removed

Needs torch only (1.13 and 2.x).
"""
import ast
import os
import sys
import traceback
import warnings

import torch

warnings.simplefilter("ignore")


def load(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:               # a torch without weights_only
        return torch.load(path, map_location="cpu")


def save(obj, path):
    torch.save(obj, path + ".tmp")
    os.rename(path + ".tmp", path)


def gen(d):
    os.makedirs(d, exist_ok=True)
    g = torch.Generator().manual_seed(1234)
    a = torch.randn(4, 8, generator=g)
    small = {
        "a": a,
        "a_t": a.t(),                       # a view of a's storage
        "b": torch.arange(16, dtype=torch.int64),
        "c": torch.randn(3, generator=g, dtype=torch.float64),
        "p": torch.nn.Parameter(torch.randn(5, generator=g)),
        "epoch": 12,
        "name": "run1",
        "lr": 0.5,
    }
    save(small, os.path.join(d, "small.pt"))
    big = {
        "a": torch.randn(4, 8, generator=g),
        "big": torch.randn(12_500_000, generator=g),     # 50,000,000 bytes
        "epoch": 3,
    }
    save(big, os.path.join(d, "big.pt"))
    wb = {"w%d" % i: torch.randn(6_250_000, generator=g) for i in range(8)}
    wb["small"] = torch.randn(16, generator=g)
    wb["epoch"] = 1
    save(wb, os.path.join(d, "wb.pt"))
    save({"x": torch.zeros(5), "epoch": 99}, os.path.join(d, "other.pt"))
    return "4 checkpoints in %s" % d


def raw(t):
    """the tensor's contiguous bytes as a writable uint8 view (of the
    storage itself when the tensor is contiguous)"""
    if not t.is_contiguous():
        raise ValueError("not contiguous")
    return t.detach().reshape(-1).view(torch.uint8)


def storage_ptr(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().data_ptr()
    return t.storage().data_ptr()


def apply_ops(sd, opsfile):
    with open(opsfile) as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip()]
    for ln in lines:
        op, *args = ln.split("\t")
        if op == "poke":
            key, off, hx = args
            data = bytes.fromhex(hx)
            r = raw(sd[key])
            off = int(off)
            with torch.no_grad():
                r[off:off + len(data)] = torch.tensor(list(data),
                                                      dtype=torch.uint8)
        elif op == "fill":
            key, path = args
            with open(path, "rb") as f:
                data = f.read()
            r = raw(sd[key])
            if len(data) != r.numel():
                raise ValueError("fill %s: %d bytes for a %d-byte tensor" %
                                 (key, len(data), r.numel()))
            with torch.no_grad():
                r.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        elif op == "rename":
            old, new = args
            sd[new] = sd.pop(old)
        elif op == "value":
            key, lit = args
            sd[key] = ast.literal_eval(lit)
        elif op == "delete":
            del sd[args[0]]
        else:
            raise ValueError("unknown op %r" % op)
    return len(lines)


def describe(v):
    if torch.is_tensor(v):
        return "%s %s %s" % (type(v).__name__, v.dtype, tuple(v.shape))
    return repr(v)[:40]


def compare(want, got):
    """a list of differences (empty: equal)"""
    diffs = []
    if not isinstance(got, dict):
        return ["result is a %s, not a dict" % type(got).__name__]
    missing = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    if missing:
        diffs.append("missing keys %s" % missing[:5])
    if extra:
        diffs.append("unexpected keys %s" % extra[:5])
    for k in want:
        if k not in got:
            continue
        w, g = want[k], got[k]
        if torch.is_tensor(w) != torch.is_tensor(g):
            diffs.append("%s: want %s, got %s" % (k, describe(w), describe(g)))
            continue
        if not torch.is_tensor(w):
            if type(w) is not type(g) or w != g:
                diffs.append("%s: want %r, got %r" % (k, w, g))
            continue
        facts = [("class", type(w).__name__, type(g).__name__),
                 ("dtype", w.dtype, g.dtype),
                 ("shape", tuple(w.shape), tuple(g.shape)),
                 ("stride", w.stride(), g.stride()),
                 ("storage offset", w.storage_offset(), g.storage_offset()),
                 ("requires_grad", w.requires_grad, g.requires_grad)]
        bad = ["%s %s, got %s" % (n, a, b) for n, a, b in facts if a != b]
        if bad:
            diffs.append("%s: want %s" % (k, "; ".join(bad)))
            continue
        wb = w.detach().contiguous().reshape(-1).view(torch.uint8)
        gb = g.detach().contiguous().reshape(-1).view(torch.uint8)
        if not torch.equal(wb, gb):
            ne = (wb != gb).nonzero()
            diffs.append("%s: %d bytes differ, first at byte %d "
                         "(want %02x, got %02x)" %
                         (k, ne.numel(), ne[0].item(), wb[ne[0]].item(),
                          gb[ne[0]].item()))
    # storage sharing: which keys share a storage must not change
    def groups(sd):
        by = {}
        for k, v in sd.items():
            if torch.is_tensor(v) and v.numel():
                by.setdefault(storage_ptr(v), []).append(k)
        return sorted(sorted(ks) for ks in by.values())
    if not missing and not extra and groups(want) != groups(got):
        diffs.append("storage sharing: want %s, got %s" %
                     ([x for x in groups(want) if len(x) > 1],
                      [x for x in groups(got) if len(x) > 1]))
    return diffs


def expect(orig, result, opsfile):
    want = load(orig)
    n = apply_ops(want, opsfile)
    got = load(result)
    diffs = compare(want, got)
    if diffs:
        raise AssertionError("; ".join(diffs[:4]))
    ntens = sum(1 for v in got.values() if torch.is_tensor(v))
    return "torch.load: %d keys (%d tensors) as expected after %d edit%s" % (
        len(got), ntens, n, "" if n == 1 else "s")


def handle(line):
    req = line.rstrip("\n").split("\t")
    if req[0] == "gen":
        return gen(req[1])
    if req[0] == "expect":
        return expect(req[1], req[2], req[3])
    if req[0] == "load":
        sd = load(req[1])
        if not isinstance(sd, dict):
            raise AssertionError("not a dict: %s" % type(sd).__name__)
        return "torch.load: %d keys" % len(sd)
    raise ValueError("unknown request %r" % req[0])


def main():
    print("ready\ttorch %s" % torch.__version__, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = "ok\t" + handle(line)
        except Exception as e:          # report, keep serving
            tb = traceback.extract_tb(e.__traceback__)
            where = "%s:%d" % (os.path.basename(tb[-1].filename),
                               tb[-1].lineno) if tb else "?"
            msg = "FAIL\t%s: %s (%s)" % (type(e).__name__,
                                         str(e).replace("\n", " ")[:300],
                                         where)
        print(msg.replace("\n", " "), flush=True)


if __name__ == "__main__":
    main()
