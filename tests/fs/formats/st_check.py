"""st_check.py - safetensors files for tests/fs/formats/safetensors.sh, and the
checks of what ptls and a ptfs mount show of them (torch 1.13 or 2.x).

  gen DIR            write into DIR: own.safetensors (this file's writer,
                     from the format's definition: any torch), lib.safetensors
                     (torch 2.x only: safetensors.torch.save_file), NAME.pt
                     (torch.save of the same tensors) for each, trail.
                     safetensors (3 bytes after the data) and overlap.
                     safetensors (two tensors sharing bytes), nullmeta.
                     safetensors ("__metadata__": null, as MLX writes)
  nullmeta DIR       DIR/nullmeta.out.safetensors, its write-back after an
                     edit, holds no __metadata__ and the edit
  subbyte_gen DIR    sub.safetensors (F32, F6_E2M3, F4 of an odd last size)
                     and, under 2.x, f4.safetensors (save_file's F4)
  subbyte DIR MNT, subbyte_after DIR, f4 DIR
                     the checks of the sub_byte case (see each)
  check DIR NAME MNT  NAME.safetensors against ptls --json (DIR/NAME.json),
                     the mount MNT (every tensor's bytes, xattrs, the root's
                     user.meta.*, .ptfs/header.json) and torch: this file's
                     reader, torch.load(NAME.pt) and, for lib, safetensors'
                     own load_file; then writes through MNT must fail EROFS

Prints "ok<TAB>summary" and exits 0, or the problems and exits 1.
"""
import errno
import json
import os
import struct
import sys

import torch

ST = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
      torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
      torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
      torch.bool: "BOOL", torch.complex64: "C64"}
for _n, _s in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
    if hasattr(torch, _n):
        ST[getattr(torch, _n)] = _s
FROM_ST = {v: k for k, v in ST.items()}
META = {"format": "pt", "note": "caf\u00e9 \u2713\nline 2", "empty": ""}


def raw(t):
    """The bytes of t.contiguous(), as a safetensors file holds them."""
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def tensors():
    """Every dtype this torch has, an empty and a 0-d tensor, odd names."""
    g = torch.Generator().manual_seed(17)
    out = {}
    for i, dt in enumerate(ST):
        if dt.is_floating_point and torch.empty(0, dtype=dt).element_size() == 1:
            t = (torch.rand(3, 2, generator=g) * 4).to(dt)
        elif dt == torch.bool:
            t = torch.rand(5, generator=g) > 0.5
        elif dt.is_complex:
            t = torch.randn(2, 2, generator=g).to(dt) * (1 + 2j)
        elif dt.is_floating_point:
            t = torch.randn(2, 3, 4, generator=g).to(dt)
        else:
            t = torch.randint(0, 100, (7,), generator=g).to(dt)
        out["layer.%d.%s" % (i, str(dt)[6:])] = t
    out["empty"] = torch.zeros(0, 3)
    out["scalar"] = torch.tensor(3.25, dtype=torch.float64)
    out["with/slash"] = torch.arange(4, dtype=torch.int32)
    out[".hidden"] = torch.ones(2, dtype=torch.int16)
    out["caf\u00e9"] = torch.full((2,), 7, dtype=torch.int8)
    return out


def write(path, named, meta, trailing=b"", header_order=None):
    """A safetensors file from its definition: u64 LE header length, the
    JSON header padded with spaces to a multiple of 8, the data."""
    hdr, data = {"__metadata__": meta}, b""
    for name, t in named.items():
        b = raw(t)
        hdr[name] = {"dtype": ST[t.dtype], "shape": list(t.shape),
                     "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    if header_order:
        hdr = {k: hdr[k] for k in header_order(list(hdr))}
    text = json.dumps(hdr, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data + trailing)


def read(path):
    """This test's reader: (metadata, {name: (st dtype, shape, bytes)})
    in header order, the header's bytes."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    hdr = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = hdr.pop("__metadata__", {})
    out = {}
    for k, v in hdr.items():
        b, e = v["data_offsets"]
        out[k] = (v["dtype"], v["shape"], blob[8 + n + b:8 + n + e])
    return meta, out, blob[8:8 + n]


def as_tensor(dtype, shape, b):
    dt = FROM_ST[dtype]
    if not b:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(bytearray(b), dtype=dt).reshape(shape)


def gen(d):
    ts = tensors()
    # tensors stored in one order, the header listing them in another
    write(os.path.join(d, "own.safetensors"), ts, META,
          header_order=lambda ks: ks[:1] + ks[:0:-1])
    torch.save(ts, os.path.join(d, "own.pt"))
    small = {"a": torch.arange(4, dtype=torch.uint8)}
    write(os.path.join(d, "trail.safetensors"), small, {}, trailing=b"xyz")
    write(os.path.join(d, "overlap.safetensors"),
          {"a": torch.arange(4, dtype=torch.uint8),
           "b": torch.arange(4, dtype=torch.uint8)}, {})
    with open(os.path.join(d, "overlap.safetensors"), "r+b") as f:
        blob = f.read().replace(b'"data_offsets":[4,8]',
                                b'"data_offsets":[2,6]')
        f.seek(0)
        f.write(blob)
    # MLX writes "__metadata__": null
    write(os.path.join(d, "nullmeta.safetensors"),
          {"a": torch.arange(6, dtype=torch.uint8),
           "b": torch.ones(2, 2)}, None)
    made = ["own", "trail", "overlap", "nullmeta"]
    if torch.__version__.startswith("2"):
        from safetensors.torch import save_file
        save_file(ts, os.path.join(d, "lib.safetensors"), metadata=META)
        torch.save(ts, os.path.join(d, "lib.pt"))
        made.append("lib (safetensors %s)" %
                    __import__("safetensors").__version__)
    return "%d tensors; %s" % (len(ts), ", ".join(made))


def xattr(p, name):
    return os.getxattr(p, name).decode("utf-8")


def dims(v):
    return ",".join(str(x) for x in v)


def check(d, name, mnt):
    bad = []
    path = os.path.join(d, name + ".safetensors")
    meta, ents, header = read(path)
    with open(path, "rb") as f:
        before = f.read()
    ref = torch.load(os.path.join(d, name + ".pt"))
    lib = None
    if name == "lib":
        from safetensors.torch import load_file
        lib = load_file(path)
    with open(os.path.join(d, name + ".json")) as f:
        ls = json.load(f)
    if ls["format"] != "safetensors" or ls["metadata"] != meta:
        bad.append("ptls --json: format %r, metadata %r" %
                   (ls["format"], ls["metadata"]))
    if [e["keys"][0] for e in ls["entries"]] != list(ents):
        bad.append("ptls --json keys %r, header %r" %
                   ([e["keys"][0] for e in ls["entries"]], list(ents)))
    for e in ls["entries"]:
        dtype, shape, b = ents.get(e["keys"][0], (None, None, None))
        if dtype is None or e["dtype"] != str(FROM_ST[dtype])[6:] or \
                e["shape"] != shape or e["nbytes"] != len(b):
            bad.append("ptls --json entry %r" % e)
    names = sorted(os.listdir(mnt))
    want = sorted(k.replace("%", "%25").replace("/", "%2F") for k in ents)
    want = ["%2E" + k[1:] if k.startswith(".") else k for k in want]
    if names != sorted(want):
        bad.append("mount lists %r, expected %r" % (names, sorted(want)))
    for k, (dtype, shape, b) in ents.items():
        fn = k.replace("%", "%25").replace("/", "%2F")
        if fn.startswith("."):
            fn = "%2E" + fn[1:]
        p = os.path.join(mnt, fn)
        t = as_tensor(dtype, shape, b)
        with open(p, "rb") as f:
            got = f.read()
        if got != b:
            bad.append("%s: mount has %d bytes, differing from the file's"
                       % (k, len(got)))
        if raw(ref[k]) != b or ref[k].dtype != t.dtype or \
                list(ref[k].shape) != shape:
            bad.append("%s: torch.save's tensor differs from the file's" % k)
        if lib is not None and (raw(lib[k]) != b or lib[k].dtype != t.dtype
                                or list(lib[k].shape) != shape):
            bad.append("%s: safetensors.load_file differs" % k)
        strides = list(t.contiguous().stride())
        for a, v in (("user.dtype", str(t.dtype)[6:]),
                     ("user.shape", dims(shape)),
                     ("user.stride", dims(strides)),
                     ("user.storage_offset", "0"), ("user.device", "cpu"),
                     ("user.st_dtype", dtype), ("user.layout", "strided")):
            try:
                if xattr(p, a) != v:
                    bad.append("%s: %s=%r, expected %r" %
                               (k, a, xattr(p, a), v))
            except OSError as e:
                bad.append("%s: %s: %s" % (k, a, e))
    got = {a[len("user.meta."):]: xattr(mnt, a)
           for a in os.listxattr(mnt) if a.startswith("user.meta.")}
    if got != meta:
        bad.append("root user.meta.*: %r, expected %r" % (got, meta))
    with open(os.path.join(mnt, ".ptfs", "header.json"), "rb") as f:
        if f.read() != header:
            bad.append(".ptfs/header.json is not the file's header")
    # read-only: every kind of write fails with EROFS
    first = os.path.join(mnt, sorted(names)[0])
    for what, fn in (
            ("open for writing", lambda: open(first, "r+b")),
            ("create", lambda: open(os.path.join(mnt, "new"), "wb")),
            ("unlink", lambda: os.unlink(first)),
            ("rename", lambda: os.rename(first, first + ".x")),
            ("setxattr", lambda: os.setxattr(first, "user.dtype", b"int8")),
            ("mkdir", lambda: os.mkdir(os.path.join(mnt, "d")))):
        try:
            fn()
            bad.append("%s through the mount succeeded" % what)
        except OSError as e:
            if e.errno != errno.EROFS:
                bad.append("%s: %s, not EROFS" % (what, e))
    with open(path, "rb") as f:
        if f.read() != before:
            bad.append("the file changed")
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\t%d tensors (bytes, dtype, shape, strides, xattrs) and %d "
          "metadata entries as torch%s sees them; ptls --json agrees; "
          "writes EROFS" % (len(ents), len(meta),
                            " and safetensors.load_file" if lib else ""))
    return 0


def nullmeta(d):
    """nullmeta.safetensors ("__metadata__": null) and nullmeta.out.
    safetensors, its write-back after a[0] = 42: that has no __metadata__
    (safetensors writes a None so), a[0] is 42, the rest as before; both
    load with safetensors.load_file where the torch has it."""
    bad = []
    src, out = (os.path.join(d, "nullmeta%s.safetensors" % x)
                for x in ("", ".out"))
    _, a, _ = read(src)
    with open(out, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    if b"__metadata__" in blob[8:8 + n]:
        bad.append("written back with a __metadata__: %r" % blob[8:8 + n])
    _, b, _ = read(out)
    want = dict(a)
    want["a"] = (a["a"][0], a["a"][1], b"\x2a" + a["a"][2][1:])
    if b != want:
        bad.append("written back: %r, expected %r" % (b, want))
    lib = ""
    if torch.__version__.startswith("2"):
        from safetensors.torch import load_file
        for p, ents in ((src, a), (out, want)):
            got = load_file(p)
            if {k: raw(v) for k, v in got.items()} != \
                    {k: v[2] for k, v in ents.items()}:
                bad.append("%s: load_file gives %r" % (p, got))
        lib = "; safetensors.load_file reads both"
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\twritten back with no __metadata__, the edit in it%s" % lib)
    return 0


def raw_file(path, ents):
    """A safetensors file of (name, dtype, shape, bytes) as given."""
    hdr, data = {}, b""
    for name, dt, shape, b in ents:
        hdr[name] = {"dtype": dt, "shape": shape,
                     "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    text = json.dumps(hdr, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


SUB = [("w", "F32", [2], struct.pack("<2f", 1.5, -2)),
       ("f6", "F6_E2M3", [4], bytes([1, 2, 3])),
       ("f4odd", "F4", [2, 3], bytes([4, 5, 6]))]


def subbyte_gen(d):
    """sub.safetensors (F32, F6_E2M3, an F4 of odd last size), and under
    torch 2.x f4.safetensors by save_file of a float4_e2m1fn_x2 tensor."""
    raw_file(os.path.join(d, "sub.safetensors"), SUB)
    made = "sub.safetensors"
    if hasattr(torch, "float4_e2m1fn_x2"):
        from safetensors.torch import save_file
        t = torch.arange(8, dtype=torch.uint8).view(
            torch.float4_e2m1fn_x2).reshape(2, 4)
        save_file({"f4": t, "w": torch.ones(2)},
                  os.path.join(d, "f4.safetensors"))
        made += ", f4.safetensors (save_file, float4_e2m1fn_x2)"
    print("ok\t" + made)
    return 0


def subbyte(d, mnt):
    """The mount MNT of a copy of sub.safetensors: f6 and f4odd are their
    bytes, their dtype named; a cast is refused; then w[0] = 4.0 and f6's
    first byte 9 are written (the caller unmounts, subbyte_after checks)."""
    bad = []
    for name, dt, shape, b in SUB[1:]:
        p = os.path.join(mnt, name)
        with open(p, "rb") as f:
            if f.read() != b:
                bad.append("%s: bytes differ" % name)
        for a, v in (("user.dtype", dt), ("user.st_dtype", dt),
                     ("user.shape", str(len(b))),
                     ("user.st_shape", dims(shape))):
            if xattr(p, a) != v:
                bad.append("%s: %s=%r, expected %r" % (name, a,
                                                       xattr(p, a), v))
        try:
            os.setxattr(p, "user.dtype", b"float32")
            bad.append("%s: cast to float32 accepted" % name)
        except OSError:
            pass
    with open(os.path.join(mnt, "w"), "r+b") as f:
        f.write(struct.pack("<f", 4.0))
    with open(os.path.join(mnt, "f6"), "r+b") as f:
        f.write(b"\x09")
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\tF6_E2M3 and F4 (odd last size) as bytes, dtype named, "
          "cast refused; w and f6 written")
    return 0


def subbyte_after(d):
    """sub.out.safetensors, written back: the header as before, w[0] 4.0
    and f6's first byte 9."""
    _, got, hdr = read(os.path.join(d, "sub.out.safetensors"))
    _, old, ohdr = read(os.path.join(d, "sub.safetensors"))
    want = {n: (dt, sh, b) for n, dt, sh, b in SUB}
    want["w"] = ("F32", [2], struct.pack("<2f", 4.0, -2))
    want["f6"] = ("F6_E2M3", [4], bytes([9, 2, 3]))
    if got != want:
        print("written back: %r, expected %r" % (got, want))
        return 1
    print("ok\twritten back: dtypes and shapes as read, the edits in")
    return 0


def f4_check(d):
    """f4.pt (ptrepack of save_file's f4.safetensors): torch.load gives
    the float4_e2m1fn_x2 tensor save_file was given."""
    from safetensors.torch import load_file
    a = load_file(os.path.join(d, "f4.safetensors"))
    b = torch.load(os.path.join(d, "f4.pt"), weights_only=True)
    bad = [k for k in a if a[k].dtype != b[k].dtype or a[k].shape !=
           b[k].shape or raw(a[k]) != raw(b[k])]
    if bad or sorted(a) != sorted(b):
        print("torch.load(f4.pt) differs from load_file: %r" % b)
        return 1
    print("ok\ttorch.load (weights_only) of the .pt equals load_file: "
          "float4_e2m1fn_x2 %s" % list(b["f4"].shape))
    return 0


def main():
    if sys.argv[1] == "gen":
        print("ok\t" + gen(sys.argv[2]))
        return 0
    if sys.argv[1] == "nullmeta":
        return nullmeta(sys.argv[2])
    if sys.argv[1] == "subbyte_gen":
        return subbyte_gen(sys.argv[2])
    if sys.argv[1] == "subbyte":
        return subbyte(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "subbyte_after":
        return subbyte_after(sys.argv[2])
    if sys.argv[1] == "f4":
        return f4_check(sys.argv[2])
    return check(sys.argv[2], sys.argv[3], sys.argv[4])


if __name__ == "__main__":
    sys.exit(main())
