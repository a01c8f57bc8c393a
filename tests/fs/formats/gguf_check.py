"""gguf_check.py - GGUF files for tests/fs/formats/gguf.sh, and the checks of
what the tools, a ptfs mount and ptrepack make of them, against gguf-py
(GGUFReader, gguf.quants.dequantize) and torch 2.x.

  gen DIR              DIR/{all,align64,big,plain}.gguf (gguf_gen.py, by
                       gguf-py's GGUFWriter), NAME.pt for each (torch.save
                       of what GGUFReader and dequantize read: the values),
                       all.bad.pt (one value changed), and the hostile
                       headers DIR/hostile/*.gguf (written here, byte by
                       byte), with DIR/hostile/expect (NAME<TAB>message part)
  listing DIR NAME     DIR/NAME.ls.json (ptls --json) and NAME.dump.json
                       (ptdump --json) against GGUFReader: every key/value
                       (type and value), every tensor (name, ggml type,
                       bytes, values' shape, data offset)
  mount DIR NAME MNT   the read-only mount MNT of DIR/NAME.gguf: each
                       tensor's bytes, user.ggml_type and user.ggml_shape,
                       its .npy view (dequantize's values, bit for bit, or
                       the plain elements) and a .txt view; the root's
                       user.meta.*; writes fail EROFS
  edit DIR NAME MNT    through the writable mount MNT of DIR/NAME.edit.gguf
                       (a copy): key/values set by writing .ptfs/gguf/KEY
                       and by setxattr, a key added and one removed, an
                       array rewritten, refusals (EINVAL at close) that
                       leave the value; returns before the unmount
  edited DIR NAME      after the write-back: GGUFReader sees the edits,
                       every other key/value and tensor as in NAME.gguf,
                       the byte order kept
  repack DIR NAME      DIR/NAME.bf16.safetensors and NAME.f32.pt (ptrepack,
                       default and --dtype float32) against dequantize's
                       values, .to(bfloat16) by torch for the first

Prints "ok<TAB>summary" and exits 0, or the problems and exits 1.
"""
import errno
import json
import os
import struct
import sys

import numpy as np
import torch
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_gen  # noqa: E402

VTYPE = {0: "u8", 1: "i8", 2: "u16", 3: "i16", 4: "u32", 5: "i32",
         6: "f32", 7: "bool", 8: "string", 9: "array", 10: "u64",
         11: "i64", 12: "f64"}
PLAIN = {"F32": np.float32, "F16": np.float16, "F64": np.float64,
         "I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64}


def fields(r):
    """GGUFReader's key/values: key -> (ptfs's type name, value)."""
    out = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        t = VTYPE[int(f.types[0])]
        if t == "array":
            t = "array[%s]" % VTYPE[int(f.types[-1])] if len(f.types) > 1 \
                else "array[?]"
        out[k] = (t, f.contents())
    return out


def values(t):
    """A reader tensor's values in torch order: float32 for a block type
    and BF16 (gguf-py's dequantize), else the plain elements."""
    shape = tuple(reversed([int(x) for x in t.shape]))
    name = t.tensor_type.name
    if name in PLAIN:
        return np.array(t.data).astype(PLAIN[name]).reshape(shape)
    return gguf.quants.dequantize(np.array(t.data), t.tensor_type) \
        .astype(np.float32).reshape(shape)


def same_value(t, want, got):
    """A key/value as gguf-py reads it against ptfs's JSON value."""
    if t in ("f32", "array[f32]"):
        want = [want] if t == "f32" else want
        got = [got] if t == "f32" else got
        return len(want) == len(got) and all(
            (np.isnan(a) and g == "nan") or
            np.float32(a).tobytes() == np.float32(
                float(g) if isinstance(g, str) else g).tobytes()
            for a, g in zip(want, got))
    if t in ("f64", "array[f64]"):
        want = [want] if t == "f64" else want
        got = [got] if t == "f64" else got
        return [float(x) for x in want] == [float(x) for x in got]
    return want == got


# ---------------------------------------------------------------- gen
def le(fmt, *v):
    return struct.pack("<" + fmt, *v)


def gstr(s):
    s = s.encode() if isinstance(s, str) else s
    return le("Q", len(s)) + s


def header(nt, nkv, version=3):
    return b"GGUF" + le("I", version) + le("QQ", nt, nkv)


def kv_str(k, v):
    return gstr(k) + le("I", 8) + gstr(v)


ARCH = kv_str("general.architecture", "x")


def tinfo(name, dims, typ, off):
    return gstr(name) + le("I", len(dims)) + b"".join(le("Q", d) for d in dims) \
        + le("I", typ) + le("Q", off)


def pad(b, a=32):
    return b + b"\0" * (-len(b) % a)


HOSTILE = [
    # name, bytes, a part of the one-line refusal
    ("tensors_past_end", header(10**12, 1) + ARCH, "cannot fit in"),
    ("kvs_past_end", header(0, 2**40) + ARCH, "cannot fit in"),
    ("name_over_limit", header(1, 1) + ARCH +
     le("Q", 70000) + b"a" * 70000 + le("I", 1) + le("Q", 1) + le("I", 0) +
     le("Q", 0), "over the limit"),
    ("five_dims", header(1, 1) + ARCH + tinfo("t", [1] * 5, 0, 0),
     "5 dimensions"),
    ("dims_overflow", header(1, 1) + ARCH +
     tinfo("t", [2**32, 2**32, 2**32], 0, 0), "overflows"),
    ("offset_out_of_range", pad(header(1, 1) + ARCH +
                                tinfo("t", [4], 0, 2**40)) + b"\0" * 16,
     "past the end of the file"),
    ("offset_unaligned", pad(header(1, 1) + ARCH + tinfo("t", [4], 0, 3)) +
     b"\0" * 32, "not a multiple of the alignment"),
    ("overlap", pad(header(2, 1) + ARCH + tinfo("a", [8], 0, 0) +
                    tinfo("b", [8], 0, 0)) + b"\0" * 32, "overlaps"),
    ("unknown_tensor_type", pad(header(1, 1) + ARCH + tinfo("t", [4], 4, 0))
     + b"\0" * 16, "unknown ggml type 4"),
    ("unknown_value_type", header(0, 1) + gstr("k") + le("I", 13) +
     b"\0" * 8, "unknown value type 13"),
    ("nested_array", header(0, 1) + gstr("k") + le("I", 9) + le("I", 9) +
     le("Q", 1) + b"\0" * 16, "array of arrays"),
    ("huge_string", header(0, 1) + gstr("k") + le("I", 8) +
     le("Q", 2**62) + b"abc", "past the end of the file"),
    ("duplicate_key", header(0, 2) + ARCH + ARCH, "there twice"),
    ("duplicate_name", pad(header(2, 1) + ARCH + tinfo("a", [4], 0, 0) +
                           tinfo("a", [4], 0, 32)) + b"\0" * 48,
     "there twice"),
    ("partial_block", pad(header(1, 1) + ARCH + tinfo("q", [33], 8, 0)) +
     b"\0" * 64, "not whole Q8_0 blocks"),
    ("version_1", header(0, 0, 1) + b"\0" * 8, "GGUF version 1"),
    ("bad_alignment", header(0, 1) + gstr("general.alignment") +
     le("I", 4) + le("I", 24), "not a power of two"),
    ("truncated", header(1, 1)[:20], "past the end of the file"),
]


def gen(d):
    os.makedirs(os.path.join(d, "hostile"), exist_ok=True)
    for name, kw in (("all", {}), ("align64", {"align": 64}),
                     ("big", {"big": True}), ("plain", {"quant": False})):
        gguf_gen.write(os.path.join(d, name + ".gguf"), **kw)
        r = gguf.GGUFReader(os.path.join(d, name + ".gguf"))
        sd = {t.name: torch.from_numpy(values(t).copy()) for t in r.tensors}
        if name == "all":
            # BF16 of a little-endian file is bfloat16 to ptfs: keep it so
            bf = [t for t in r.tensors if t.name == "bf16.w"][0]
            sd["bf16.w"] = torch.from_numpy(
                np.array(bf.data).view(np.int16).reshape(2, 8).copy()) \
                .view(torch.bfloat16)
            bad = dict(sd)
            q = bad["q.q4_k"].clone()
            q[1, 7] = q[1, 7] + 0.5
            bad["q.q4_k"] = q
            torch.save(bad, os.path.join(d, "all.bad.pt"))
        torch.save(sd, os.path.join(d, name + ".pt"))
    with open(os.path.join(d, "hostile", "expect"), "w") as f:
        for name, data, why in HOSTILE:
            with open(os.path.join(d, "hostile", name + ".gguf"), "wb") as g:
                g.write(data)
            f.write("%s\t%s\n" % (name, why))
    print("ok\t4 files by gguf-py's writer (every value type, %d tensor "
          "types, big-endian, alignment 64), %d hostile headers"
          % (len(gguf_gen.BLOCK_TYPES) + 5, len(HOSTILE)))
    return 0


# ---------------------------------------------------------------- listing
def walk(node):
    if node.get("kind") == "tensor":
        yield node
    for k in node.get("children", []):
        yield from walk(k)


def listing(d, name):
    bad = []
    r = gguf.GGUFReader(os.path.join(d, name + ".gguf"))
    with open(os.path.join(d, name + ".ls.json")) as f:
        ls = json.load(f)
    with open(os.path.join(d, name + ".dump.json")) as f:
        dump = json.load(f)
    want = fields(r)
    for what, meta in (("ptls", ls["metadata"]), ("ptdump", dump["metadata"])):
        if list(meta) != list(want):
            bad.append("%s --json keys %r, gguf-py %r" % (what, list(meta),
                                                         list(want)))
        for k, (t, v) in want.items():
            m = meta.get(k)
            if not m or m["type"] != t or not same_value(t, v, m["value"]):
                bad.append("%s --json %s: %r, gguf-py %s %r" %
                           (what, k, m, t, v))
    if ls["format"] != "gguf":
        bad.append("ptls --json format %r" % ls["format"])
    ents = {e["path"]: e for e in ls["entries"]}
    stor = {s["key"]: s for s in dump["storages"]}
    nodes = {n["path"]: n for n in walk(dump["root"])}
    if list(ents) != [t.name for t in r.tensors]:
        bad.append("ptls lists %r, gguf-py %r" % (list(ents),
                                                  [t.name for t in r.tensors]))
    for t in r.tensors:
        e, n = ents.get(t.name), nodes.get(t.name)
        if not e or not n:
            continue
        shape = list(reversed([int(x) for x in t.shape]))
        coded = t.tensor_type.name not in PLAIN and not (
            t.tensor_type.name == "BF16" and r.endianess == 0)
        got_shape = e.get("values_shape") if coded else e["shape"]
        if got_shape != shape or e["nbytes"] != t.n_bytes:
            bad.append("%s: ptls shape %r, %d bytes; gguf-py %r, %d" %
                       (t.name, got_shape, e["nbytes"], shape, t.n_bytes))
        tn = t.tensor_type.name
        if coded and e.get("coding") != ("bfloat16" if tn == "BF16" else tn):
            bad.append("%s: ptls coding %r, gguf-py %s" %
                       (t.name, e.get("coding"), tn))
        s = stor.get(n["storage"])
        if not s or s["data_offset"] != t.data_offset:
            bad.append("%s: ptdump data offset %r, gguf-py %d" %
                       (t.name, s and s["data_offset"], t.data_offset))
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\t%d key/values (types and values) and %d tensors (types, "
          "shapes, sizes, offsets) as gguf-py reads them"
          % (len(want), len(r.tensors)))
    return 0


# ---------------------------------------------------------------- mount
def xattr(p, a):
    return os.getxattr(p, a).decode()


def mount(d, name, mnt):
    bad = []
    path = os.path.join(d, name + ".gguf")
    with open(path, "rb") as f:
        before = f.read()
    r = gguf.GGUFReader(path)
    coded = 0
    for t in r.tensors:
        p = os.path.join(mnt, t.name)
        with open(p, "rb") as f:
            if f.read() != np.array(t.data).tobytes():
                bad.append("%s: bytes differ from gguf-py's" % t.name)
        if xattr(p, "user.ggml_type") != t.tensor_type.name or \
                xattr(p, "user.ggml_shape") != ",".join(
                    str(int(x)) for x in t.shape):
            bad.append("%s: user.ggml_type %s, user.ggml_shape %s" %
                       (t.name, xattr(p, "user.ggml_type"),
                        xattr(p, "user.ggml_shape")))
        want = values(t)
        if t.tensor_type.name == "BF16" and r.endianess == 0:
            continue	# bfloat16 elements: numpy has no .npy for them
        got = np.load(p + ".npy")
        if t.tensor_type.name not in PLAIN:
            coded += 1
            if got.dtype != np.float32 or got.shape != want.shape or \
                    got.tobytes() != want.tobytes():
                bad.append("%s.npy: %s %s, not dequantize's values" %
                           (t.name, got.dtype, got.shape))
            with open(p + ".txt") as f:
                head = f.readline()
                txt = np.array(f.read().split(), dtype=np.float32)
            if head.strip() != "# float32 %s" % (
                    "(%s)" % ", ".join(str(x) for x in want.shape)
                    if want.ndim != 1 else "(%d,)" % want.shape[0]) or \
                    txt.tobytes() != want.reshape(-1).tobytes():
                bad.append("%s.txt: %r, not the values" % (t.name, head))
        elif not np.array_equal(got, want) or got.shape != want.shape:
            bad.append("%s.npy: not the elements" % t.name)
    meta = {a[len("user.meta."):]: xattr(mnt, a)
            for a in os.listxattr(mnt) if a.startswith("user.meta.")}
    want = fields(r)
    if sorted(meta) != sorted(want):
        bad.append("root user.meta.*: %r, gguf-py %r" % (sorted(meta),
                                                       sorted(want)))
    if meta.get("general.architecture") != want["general.architecture"][1]:
        bad.append("user.meta.general.architecture %r" %
                   meta.get("general.architecture"))
    first = os.path.join(mnt, r.tensors[0].name)
    for what, fn in (
            ("open for writing", lambda: open(first, "r+b")),
            ("write a view", lambda: open(first + ".npy", "r+b")),
            ("unlink", lambda: os.unlink(first)),
            ("setxattr", lambda: os.setxattr(first, "user.dtype", b"int8"))):
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
    print("ok\t%d tensors' bytes and ggml xattrs, %d dequantized .npy/.txt "
          "views bit for bit as gguf-py's dequantize, %d user.meta.*; "
          "writes EROFS" % (len(r.tensors), coded, len(meta)))
    return 0


# ---------------------------------------------------------------- edits
EDITS = {"general.name": "renamed model", "t.u32": 7, "t.arr_i32": [4, 5, 6],
         "new.key": "added"}
GONE = "t.i8"


def edit(d, name, mnt):
    bad = []
    meta = os.path.join(mnt, ".ptfs", "gguf")
    with open(os.path.join(meta, "general.name"), "w") as f:
        f.write("renamed model\n")
    os.setxattr(mnt, "user.meta.t.u32", b"7")
    with open(os.path.join(meta, "t.arr_i32"), "w") as f:
        f.write("[4, 5, 6]\n")
    os.setxattr(mnt, "user.meta.new.key", b"added")
    os.removexattr(mnt, "user.meta." + GONE)
    for what, fn in (("u8 300", lambda: os.setxattr(mnt, "user.meta.t.u8",
                                                    b"300")),
                     ("bool yes", lambda: os.setxattr(
                         mnt, "user.meta.t.bool", b"yes"))):
        try:
            fn()
            bad.append("%s: accepted" % what)
        except OSError as e:
            if e.errno != errno.EINVAL:
                bad.append("%s: %s, not EINVAL" % (what, e))
    f = open(os.path.join(meta, "t.u16"), "w")
    f.write("-1\n")
    try:
        f.close()
        bad.append("t.u16 = -1: close succeeded")
    except OSError as e:
        if e.errno != errno.EINVAL:
            bad.append("t.u16 = -1: close: %s, not EINVAL" % e)
    with open(os.path.join(meta, "general.name")) as f:
        if f.read() != "renamed model\n":
            bad.append(".ptfs/gguf/general.name does not read the edit")
    if os.path.exists(os.path.join(meta, GONE)):
        bad.append(".ptfs/gguf/%s is still there" % GONE)
    with open(os.path.join(mnt, ".ptfs", "status")) as f:
        st = f.read()
    if "metadata entries changed" not in st:
        bad.append("status: %r" % st[:300])
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\t%d key/values set, one removed; 3 bad values refused with "
          "EINVAL; status lists them" % len(EDITS))
    return 0


def edited(d, name):
    bad = []
    a = gguf.GGUFReader(os.path.join(d, name + ".gguf"))
    b = gguf.GGUFReader(os.path.join(d, name + ".edit.gguf"))
    fa, fb = fields(a), fields(b)
    if a.endianess != b.endianess:
        bad.append("byte order %s, was %s" % (b.endianess, a.endianess))
    for k, v in EDITS.items():
        if k not in fb or fb[k][1] != v:
            bad.append("%s: %r, want %r" % (k, fb.get(k), v))
    if fb.get("new.key", ("",))[0] != "string":
        bad.append("new.key: %r, not a string" % (fb.get("new.key"),))
    if GONE in fb:
        bad.append("%s still there" % GONE)
    for k, v in fa.items():
        if k not in EDITS and k != GONE and fb.get(k) != v:
            bad.append("%s: %r, was %r" % (k, fb.get(k), v))
    if [t.name for t in a.tensors] != [t.name for t in b.tensors]:
        bad.append("tensors %r" % [t.name for t in b.tensors])
    for ta, tb in zip(a.tensors, b.tensors):
        if ta.tensor_type != tb.tensor_type or \
                list(ta.shape) != list(tb.shape) or \
                np.array(ta.data).tobytes() != np.array(tb.data).tobytes():
            bad.append("%s changed" % ta.name)
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\tGGUFReader: the %d edits and the removal, every other "
          "key/value and all %d tensors as they were, byte order kept"
          % (len(EDITS), len(b.tensors)))
    return 0


# ---------------------------------------------------------------- repack
def bits(t):
    """@t's elements as integers of their size: equal means bit for bit."""
    return t.contiguous().view({1: torch.uint8, 2: torch.int16,
                                4: torch.int32, 8: torch.int64}
                               [t.element_size()])


def repack(d, name):
    from safetensors.torch import load_file
    bad = []
    r = gguf.GGUFReader(os.path.join(d, name + ".gguf"))
    b16 = load_file(os.path.join(d, name + ".bf16.safetensors"))
    f32 = torch.load(os.path.join(d, name + ".f32.pt"), weights_only=True)
    n = 0
    for t in r.tensors:
        v = torch.from_numpy(values(t).copy())
        tn = t.tensor_type.name
        if tn in PLAIN:
            want16 = v
        elif tn == "BF16":
            continue	# checked as bfloat16 by the other cases
        else:
            want16 = v.to(torch.bfloat16)
            n += 1
        got = b16.get(t.name)
        if got is None or got.dtype != want16.dtype or \
                got.shape != want16.shape or \
                not torch.equal(bits(got), bits(want16)):
            bad.append("%s: bf16 output %s, want %s %s" %
                       (t.name, None if got is None else
                        (got.dtype, tuple(got.shape)), want16.dtype,
                        tuple(want16.shape)))
        g = f32.get(t.name)
        w = v.to(torch.float32) if v.is_floating_point() else v
        if g is None or g.dtype != w.dtype or g.shape != w.shape or \
                not torch.equal(bits(g), bits(w)):
            bad.append("%s: --dtype float32 output differs" % t.name)
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\t%d block tensors written as bfloat16 (torch's .to() of "
          "dequantize's values) and as float32 (those values), bit for "
          "bit; plain tensors kept" % n)
    return 0


def main():
    cmd = sys.argv[1]
    if cmd == "gen":
        return gen(sys.argv[2])
    if cmd == "listing":
        return listing(sys.argv[2], sys.argv[3])
    if cmd == "mount":
        return mount(sys.argv[2], sys.argv[3], sys.argv[4])
    if cmd == "edit":
        return edit(sys.argv[2], sys.argv[3], sys.argv[4])
    if cmd == "edited":
        return edited(sys.argv[2], sys.argv[3])
    if cmd == "repack":
        return repack(sys.argv[2], sys.argv[3])
    print("unknown command %r" % cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main())
