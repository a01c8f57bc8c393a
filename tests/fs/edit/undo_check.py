"""undo_check.py - the torch side of tests/fs/edit/undo.sh, run by the torch
under test (natively for 1.13, in the torch 2.x root for 2), one command
per run:

  make PATH      torch.save a small training checkpoint: w (1024 float32,
                 arange), b (16 ones), epoch (3), lr (0.5), name ('run1'),
                 opt/m and opt/v (zeros), layer3/weight (4x4) and
                 layer3/bias, and model/emb with model/head the same
                 tensor (tied weights: one storage)
  digest PATH    torch.load it and print one line per key path, sorted:
                 "PATH<TAB>DIGEST", DIGEST a tensor's dtype, shape and the
                 sha256 of its bytes, a value's repr, or "dict"; tied
                 tensors that are one object print "tie:" and the other
                 key path after the first

Prints "error: ..." and exits 1 when torch cannot load the file.
"""
import hashlib
import sys

import torch


def make(path):
    emb = torch.arange(32, dtype=torch.float32).reshape(8, 4) / 8
    o = {
        "w": torch.arange(1024, dtype=torch.float32),
        "b": torch.ones(16),
        "epoch": 3,
        "lr": 0.5,
        "name": "run1",
        "opt": {"m": torch.zeros(8), "v": torch.zeros(8)},
        "layer3": {"weight": torch.arange(16.0).reshape(4, 4),
                   "bias": torch.full((4,), 0.25)},
        "model": {"emb": emb, "head": emb},
    }
    torch.save(o, path)


def load(path):
    try:
        return torch.load(path, weights_only=True)
    except Exception as e:  # noqa: BLE001
        # torch 1.13's weights-only loader lacks BINFLOAT (lr); these are
        # files the test made, so the full loader is safe
        if "Weights only" not in str(e) and not isinstance(e, TypeError):
            raise
        return torch.load(path)


def walk(o, prefix, out, seen):
    for k, v in o.items():
        p = prefix + str(k)
        if isinstance(v, torch.Tensor):
            if id(v) in seen:
                out.append((p, "tie:" + seen[id(v)]))
                continue
            seen[id(v)] = p
            h = hashlib.sha256(v.contiguous().numpy().tobytes())
            out.append((p, "%s%s:%s" % (str(v.dtype).replace("torch.", ""),
                                        list(v.shape), h.hexdigest()[:16])))
        elif isinstance(v, dict):
            out.append((p, "dict"))
            walk(v, p + "/", out, seen)
        else:
            out.append((p, repr(v)))


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "make":
        make(path)
        return
    if cmd != "digest":
        sys.exit("unknown command " + cmd)
    try:
        o = load(path)
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        print("error: %s" % str(e).splitlines()[0])
        sys.exit(1)
    out = []
    walk(o, "", out, {})
    for p, d in sorted(out):
        print("%s\t%s" % (p, d))


main()
