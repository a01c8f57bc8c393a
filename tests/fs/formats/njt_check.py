"""njt_check.py - jagged nested tensors (torch.nested, layout=torch.jagged)
for tests/fs/formats/njt.sh (torch 2.x only: torch 1.13 has no jagged
layout).

  gen DIR            DIR/njt.pt: {"nt": a float32 NJT of 2 components
                     (3x2, 2x2), "ni": an int64 NJT of 1-d components
                     (lengths 1, 4, 2), "w": a tensor}, as torch.save
                     writes them (through _rebuild_from_type_v2 with
                     _rebuild_njt, its state, _DimRange objects)
  mount DIR MNT      the mount MNT of njt.pt: nt/ and ni/ are directories
                     whose _values and _offsets files hold exactly the
                     values' and offsets' bytes, _ragged_idx reads "1"
  loaded DIR FILE EDIT
                     torch.load(FILE) (and weights_only=True) gives NJTs
                     equal to the originals, after EDIT: "w" (w[0] = 5),
                     "rename" (w renamed w2), "values" (nt's first value
                     42.0)

Prints "ok<TAB>summary" and exits 0, or the problems and exits 1.
"""
import os
import struct
import sys

import torch


def made():
    a = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    b = torch.arange(4, dtype=torch.float32).reshape(2, 2) + 10
    nt = torch.nested.nested_tensor([a, b], layout=torch.jagged)
    ni = torch.nested.nested_tensor(
        [torch.tensor([7]), torch.arange(4) * 3, torch.tensor([-1, 2])],
        layout=torch.jagged)
    return {"nt": nt, "ni": ni, "w": torch.ones(2)}


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def gen(d):
    torch.save(made(), os.path.join(d, "njt.pt"))
    return "njt.pt: 2 jagged nested tensors and a tensor (torch %s)" % \
        torch.__version__


def mount(d, mnt):
    bad = []
    ref = made()
    for k in ("nt", "ni"):
        p = os.path.join(mnt, k)
        if not os.path.isdir(p):
            bad.append("%s is not a directory" % k)
            continue
        names = set(os.listdir(p))
        for want in ("_values", "_offsets", "_ragged_idx"):
            if want not in names:
                bad.append("%s/ lacks %s: %s" % (k, want, sorted(names)))
        for f, t in (("_values", ref[k].values()),
                     ("_offsets", ref[k].offsets())):
            try:
                with open(os.path.join(p, f), "rb") as fh:
                    if fh.read() != raw(t):
                        bad.append("%s/%s: bytes differ" % (k, f))
            except OSError as e:
                bad.append("%s/%s: %s" % (k, f, e))
        try:
            with open(os.path.join(p, "_ragged_idx")) as fh:
                if fh.read().strip() != "1":
                    bad.append("%s/_ragged_idx is not 1" % k)
        except OSError as e:
            bad.append("%s/_ragged_idx: %s" % (k, e))
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\tnt/ and ni/: _values, _offsets bytes as torch's, "
          "_ragged_idx 1")
    return 0


def same_njt(a, b):
    return (isinstance(b, type(a)) and b.layout == torch.jagged and
            b.dtype == a.dtype and b._ragged_idx == a._ragged_idx and
            torch.equal(b.values(), a.values()) and
            torch.equal(b.offsets(), a.offsets()) and
            b.requires_grad == a.requires_grad)


def loaded(d, path, edit):
    bad = []
    want = made()
    if edit == "w":
        want["w"][0] = 5
    elif edit == "rename":
        want["w2"] = want.pop("w")
    elif edit == "values":
        want["nt"].values()[0, 0] = 42.0
    for wo in (False, True):
        got = torch.load(path, weights_only=wo)
        if sorted(got) != sorted(want):
            bad.append("weights_only=%s: keys %r" % (wo, sorted(got)))
            continue
        for k, v in want.items():
            if v.is_nested:
                if not same_njt(v, got[k]):
                    bad.append("weights_only=%s: %s differs: %r" %
                               (wo, k, got[k]))
            elif not torch.equal(v, got[k]):
                bad.append("weights_only=%s: %s is %r" % (wo, k, got[k]))
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\ttorch.load (also weights_only=True) gives the NJTs and "
          "tensors after edit '%s'" % edit)
    return 0


def main():
    if sys.argv[1] == "gen":
        print("ok\t" + gen(sys.argv[2]))
        return 0
    if sys.argv[1] == "mount":
        return mount(sys.argv[2], sys.argv[3])
    return loaded(sys.argv[2], sys.argv[3], sys.argv[4])


if __name__ == "__main__":
    sys.exit(main())
