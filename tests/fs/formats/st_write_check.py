"""st_write_check.py - the safetensors write side for tests/fs/formats/st_write.sh
(torch 1.13 or 2.x): fixtures, edits through a mount, and checks of what
ptrepack and write-back produce.  Uses st_check.py's reader and writer.

  gen DIR              write into DIR: tied.pt (a tied state_dict with a
                       transposed view, a slice and nested dicts and a
                       list), values.pt (python values beside a tensor),
                       twice.pt (two keys that flatten to one name),
                       base.safetensors (in save_file's form, this file's
                       writer), big.safetensors (4 x 8 MiB, for the crash
                       loop), hostile.safetensors (overlapping tensors);
                       under torch 2.x also lib.safetensors and
                       f8.safetensors (safetensors.torch.save_file)
  rules FILE           the header rules, byte for byte: 8-byte length, a
                       multiple of 8 padded with blanks, compact JSON,
                       __metadata__ first, dtype-then-name order, offsets
                       from 0 with no hole or overlap, ending at the end
  pt2st DIR            DIR/tied.safetensors (ptrepack of tied.pt) against
                       torch.load(tied.pt) flattened, the tie as metadata
  st2pt DIR ST PT      torch.load(PT) (also weights_only) against ST, keys
                       in header order
  same A B             safetensors files A and B hold the same tensors
                       under the same names, in the same order (B's
                       metadata only {"format": "pt"})
  drop DIR             DIR/drop.safetensors holds values.pt's tensor only
  edit MNT JSON        edits through the mount of base.safetensors (a few
                       bytes, mv, rm, a new tensor from bytes and xattrs,
                       one from a .npy) and the refusals; what the file
                       must hold afterwards into JSON
  after FILE JSON      FILE is what JSON says (and, under 2.x, what
                       safetensors.torch.load_file reads)

Prints "ok<TAB>summary" and exits 0, or the problems and exits 1.
"""
import errno
import json
import os
import struct
import sys

import torch

from st_check import FROM_ST, ST, raw, read, write

# safetensors/src/tensor.rs's Dtype enum, in its order
RANK = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
        "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
        "C64", "F64", "I64", "U64"]
TORCH2 = torch.__version__.startswith("2")
for _n, _s in (("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64")):
    if hasattr(torch, _n):  # torch 2.3 and later
        ST[getattr(torch, _n)] = _s
        FROM_ST[_s] = getattr(torch, _n)


def canonical(named):
    """@named in save_file's order: widest dtype first, then by name."""
    return dict(sorted(named.items(), key=lambda kv: (
        -RANK.index(ST[kv[1].dtype]), kv[0].encode())))


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8, 4)
        self.head = torch.nn.Linear(4, 8, bias=False)
        self.head.weight = self.embed.weight


def tied():
    torch.manual_seed(3)
    m = Tied()
    sd = {"model": m.state_dict(),
          "extra": {"t": m.embed.weight.detach().t(),
                    "sl": torch.arange(10.0)[2:5],
                    "h": torch.randn(3).half(),
                    "bf": torch.randn(2, 2).to(torch.bfloat16),
                    "flag": torch.tensor([True, False]),
                    "i8": torch.arange(-3, 3, dtype=torch.int8),
                    "deep": {"n": torch.arange(6, dtype=torch.int64)}},
          "layers": [torch.ones(2), torch.zeros(3, dtype=torch.int32)]}
    return sd


def flatten(obj, pre=""):
    out = {}
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for k, v in items:
        name = "%s%s" % (pre, k)
        if isinstance(v, torch.Tensor):
            out[name] = v
        else:
            out.update(flatten(v, name + "."))
    return out


def gen(d):
    torch.save(tied(), os.path.join(d, "tied.pt"))
    torch.save({"w": torch.arange(4.0), "epoch": 3, "cfg": {"lr": 0.1}},
               os.path.join(d, "values.pt"))
    torch.save({"a.b": torch.ones(1), "a": {"b": torch.zeros(1)}},
               os.path.join(d, "twice.pt"))
    g = torch.Generator().manual_seed(5)
    base = {"w": torch.randn(16, 8, generator=g),
            "b": torch.randn(8, generator=g).double(),
            "ids": torch.arange(10, dtype=torch.int64),
            "h": torch.randn(5, generator=g).half(),
            "mask": torch.tensor([True, False, True]),
            "q": torch.arange(7, dtype=torch.uint8)}
    write(os.path.join(d, "base.safetensors"), canonical(base),
          {"format": "pt"})
    big = {"t%d" % i: torch.randint(0, 255, (8 << 20,), generator=g,
                                    dtype=torch.uint8) for i in range(4)}
    write(os.path.join(d, "big.safetensors"), canonical(big), {})
    write(os.path.join(d, "hostile.safetensors"),
          {"a": torch.arange(4, dtype=torch.uint8),
           "b": torch.arange(4, dtype=torch.uint8)}, {})
    with open(os.path.join(d, "hostile.safetensors"), "r+b") as f:
        blob = f.read().replace(b'"data_offsets":[4,8]',
                                b'"data_offsets":[2,6]')
        f.seek(0)
        f.write(blob)
    made = "tied.pt, values.pt, twice.pt, base, big, hostile"
    if TORCH2:
        from safetensors.torch import save_file
        save_file(base, os.path.join(d, "lib.safetensors"),
                  metadata={"format": "pt"})
        f8 = {"f8": torch.randn(6, generator=g).to(torch.float8_e4m3fn),
              "u16": torch.tensor([1, 2, 65535]).to(torch.uint16),
              "w": torch.randn(2, generator=g)}
        save_file(f8, os.path.join(d, "f8.safetensors"))
        made += ", lib, f8 (safetensors %s)" % \
            __import__("safetensors").__version__
    return made


def rules(path):
    bad = []
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    text = blob[8:8 + n]
    body = text.rstrip(b" ")
    if n % 8:
        bad.append("header length %d is not a multiple of 8" % n)
    if len(text) - len(body) >= 8 or not body.startswith(b"{"):
        bad.append("header not '{'... padded with fewer than 8 blanks")
    pairs = [(k, dict(v)) for k, v in
             json.loads(text.decode("utf-8"), object_pairs_hook=list)]
    compact = json.dumps(dict(pairs), separators=(",", ":"),
                         ensure_ascii=False).encode("utf-8")
    if compact != body:
        bad.append("header is not compact JSON as serde_json writes it")
    names = [k for k, _ in pairs]
    if "__metadata__" in names and names[0] != "__metadata__":
        bad.append("__metadata__ is not first")
    pos, prev = 0, None
    for k, v in pairs:
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        numel = 1
        for s in v["shape"]:
            numel *= s
        size = torch.empty(0, dtype=FROM_ST[v["dtype"]]).element_size()
        if b != pos:
            bad.append("%s begins at %d, the data so far ends at %d" %
                       (k, b, pos))
        if e - b != numel * size:
            bad.append("%s: %d bytes for %d x %d" % (k, e - b, numel, size))
        key = (-RANK.index(v["dtype"]), k.encode())
        if prev is not None and key < prev:
            bad.append("%s is out of save_file's order" % k)
        prev, pos = key, e
    if 8 + n + pos != len(blob):
        bad.append("data ends at %d, the file at %d" % (8 + n + pos,
                                                        len(blob)))
    return bad


def load_lib(path):
    from safetensors import safe_open
    from safetensors.torch import load_file
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    return load_file(path), meta


def same(name, t, dtype, shape, b, bad):
    if raw(t) != b or t.dtype != FROM_ST[dtype] or list(t.shape) != shape:
        bad.append("%s: %s %s differs from the file's %s %s" %
                   (name, t.dtype, list(t.shape), dtype, shape))


def pt2st(d):
    path = os.path.join(d, "tied.safetensors")
    bad = rules(path)
    meta, ents, _ = read(path)
    flat = flatten(torch.load(os.path.join(d, "tied.pt")))
    want_meta = {"format": "pt", "model.head.weight": "model.embed.weight"}
    if meta != want_meta:
        bad.append("metadata %r, expected %r" % (meta, want_meta))
    if sorted(ents) != sorted(k for k in flat if k != "model.head.weight"):
        bad.append("names %r" % sorted(ents))
    for k, (dtype, shape, b) in ents.items():
        same(k, flat[k], dtype, shape, b, bad)
    if TORCH2:
        lib, lmeta = load_lib(path)
        if lmeta != want_meta or sorted(lib) != sorted(ents):
            bad.append("safetensors reads %r, %r" % (sorted(lib), lmeta))
        for k, (dtype, shape, b) in ents.items():
            same(k, lib[k], dtype, shape, b, bad)
    return bad, "%d tensors as torch.load flattens them, the tie in " \
        "__metadata__, header rules%s" % (
            len(ents), ", safetensors.load_file agrees" if TORCH2 else "")


def st2pt(st, pt):
    bad = []
    _, ents, _ = read(st)
    for wo in (False, True):
        sd = torch.load(pt, weights_only=wo)
        if type(sd) is not dict or list(sd) != list(ents):
            bad.append("weights_only=%s: %s of %r, header order %r" %
                       (wo, type(sd).__name__, list(sd), list(ents)))
            continue
        for k, (dtype, shape, b) in ents.items():
            same(k, sd[k], dtype, shape, b, bad)
    return bad, "torch.load (also weights_only) gives a dict of %d " \
        "tensors in header order, bytes, dtypes, shapes" % len(ents)


def same_files(a, b):
    _, ea, _ = read(a)
    mb, eb, _ = read(b)
    bad = rules(b)
    if list(ea.items()) != list(eb.items()):
        bad.append("tensors differ: %r, %r" % (list(ea), list(eb)))
    if mb != {"format": "pt"}:
        bad.append("metadata %r" % mb)
    return bad, "the same %d tensors, the same bytes and order" % len(ea)


def drop(d):
    _, ents, _ = read(os.path.join(d, "drop.safetensors"))
    bad = rules(os.path.join(d, "drop.safetensors"))
    if list(ents) != ["w"]:
        bad.append("names %r, expected ['w']" % list(ents))
    return bad, "only the tensor kept"


def refused(what, want, fn, bad):
    try:
        fn()
        bad.append("%s: succeeded" % what)
    except OSError as e:
        if e.errno != want:
            bad.append("%s: %s, not %s" % (what, e, errno.errorcode[want]))


def edit(mnt, out):
    import numpy as np
    bad = []
    p = lambda n: os.path.join(mnt, n)
    _, ents, _ = read_mount_base(mnt)
    want = {k: [dtype, shape, b.hex()] for k, (dtype, shape, b) in
            ents.items()}
    # a few bytes in place
    with open(p("w"), "r+b") as f:
        f.seek(40)
        f.write(b"\x01\x02\x03\x04")
    b = bytearray.fromhex(want["w"][2])
    b[40:44] = b"\x01\x02\x03\x04"
    want["w"][2] = b.hex()
    os.rename(p("ids"), p("model.ids"))
    want["model.ids"] = want.pop("ids")
    os.unlink(p("mask"))
    del want["mask"]
    data = struct.pack("<6h", 1, -2, 3, -4, 5, -6)
    with open(p("new.weight"), "wb") as f:
        f.write(data)
    os.setxattr(p("new.weight"), "user.dtype", b"int16")
    os.setxattr(p("new.weight"), "user.shape", b"2,3")
    want["new.weight"] = ["I16", [2, 3], data.hex()]
    a = np.arange(6, dtype=np.float32).reshape(3, 2) / 4
    np.save(p("from_npy.npy"), a)
    want["from_npy"] = ["F32", [3, 2], a.tobytes().hex()]
    # what safetensors cannot hold, refused at the edit
    refused("mkdir", errno.EPERM, lambda: os.mkdir(p("sub")), bad)
    refused("user.parameter", errno.EPERM, lambda: os.setxattr(
        p("new.weight"), "user.parameter", b"true"), bad)
    refused("user.dtype complex128", errno.EINVAL, lambda: os.setxattr(
        p("new.weight"), "user.dtype", b"complex128"), bad)
    refused("mv to __metadata__", errno.EINVAL,
            lambda: os.rename(p("q"), p("__metadata__")), bad)
    refused("user.meta.x", errno.EPERM,
            lambda: os.setxattr(mnt, "user.meta.x", b"y"), bad)
    refused("complex128 .npy", errno.EINVAL, lambda: np.save(
        p("c.npy"), np.zeros(2, dtype=np.complex128)), bad)
    if os.path.exists(p("c")) or os.path.exists(p("sub")):
        bad.append("a refused edit left a file behind")
    with open(out, "w") as f:
        json.dump({"meta": {"format": "pt"}, "tensors": want}, f)
    return bad, "4 kinds of edit made, 6 refused with the right errno"


def read_mount_base(mnt):
    """What base.safetensors holds, read through the mount."""
    meta = {a[len("user.meta."):]: os.getxattr(mnt, a).decode()
            for a in os.listxattr(mnt) if a.startswith("user.meta.")}
    ents = {}
    for n in sorted(os.listdir(mnt)):
        with open(os.path.join(mnt, n), "rb") as f:
            b = f.read()
        ents[n] = (os.getxattr(os.path.join(mnt, n), "user.st_dtype").decode(),
                   [int(x) for x in os.getxattr(os.path.join(mnt, n),
                                                "user.shape").decode()
                    .split(",") if x], b)
    return meta, ents, None


def after(path, js):
    with open(js) as f:
        want = json.load(f)
    bad = rules(path)
    meta, ents, _ = read(path)
    if meta != want["meta"]:
        bad.append("metadata %r, expected %r" % (meta, want["meta"]))
    got = {k: [dtype, shape, b.hex()] for k, (dtype, shape, b) in
           ents.items()}
    if got != want["tensors"]:
        for k in sorted(set(got) | set(want["tensors"])):
            if got.get(k) != want["tensors"].get(k):
                bad.append("%s: %s, expected %s" % (
                    k, str(got.get(k))[:60],
                    str(want["tensors"].get(k))[:60]))
    if TORCH2:
        lib, lmeta = load_lib(path)
        if lmeta != want["meta"] or sorted(lib) != sorted(ents):
            bad.append("safetensors reads %r" % sorted(lib))
        for k, (dtype, shape, b) in ents.items():
            same(k, lib[k], dtype, shape, b, bad)
    return bad, "%d tensors as staged, header rules%s" % (
        len(ents), ", safetensors.load_file agrees" if TORCH2 else "")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "gen":
        print("ok\t" + gen(args[0]))
        return 0
    if cmd == "rules":
        bad, what = rules(args[0]), "header rules hold"
    else:
        bad, what = {"pt2st": pt2st, "st2pt": st2pt, "drop": drop, "same": same_files,
                     "edit": edit, "after": after}[cmd](*args)
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\t" + what)
    return 0


if __name__ == "__main__":
    sys.exit(main())
