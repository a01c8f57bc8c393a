#!/usr/bin/env python3
"""big_check.py - the python side of tests/fs/mount/big.sh: a checkpoint with
one storage of more than 4 GiB and more than 65,535 records.

  gen    OUT NSMALL BIG   write OUT in torch.save's own layout (ZIP64;
                          torch-format.md section 9, layout_check.py) with
                          plain python, no torch: NSMALL float32 tensors of
                          4 elements ("t00000", ...) and, in the middle of
                          the dict, "big", a uint8 tensor of BIG bytes.  Its
                          record is a hole (a sparse file: no disk, no
                          time) but for four 4 KiB patches: at the start,
                          the middle, across the 4 GiB boundary and at the
                          end.  Half the small records lie past 4 GiB.
  read   MNT NSMALL BIG   read the mount (no torch): the patches, a hole,
                          small tensors before and after the big one,
                          .ptfs/storages of both, xattrs, the .npy header
  zip    FILE NSMALL BIG  the written archive with zipfile: every record
                          stored with a right CRC (the 4 GiB one too), ZIP64
                          end records, 64-byte aligned data
  torch  FILE NSMALL BIG  torch.load (mmap=True under torch 2.x): every
                          small tensor, the patches and the edits big.sh
                          made (EDITS below), the hole sampled

Prints one line: "ok ..." or "FAIL ..." plus details; exit 0 or 1.
"""
import collections
import io
import os
import pickle
import struct
import sys
import types
import zipfile
import zlib

M32 = 0xFFFFFFFF
PATCH = 4096
# what big.sh writes with dd conv=notrunc (offset in the tensor, bytes)
EDITS = {"big": [(1000, b"EDITED-1"), ((1 << 32) + 5, b"EDITED-2")],
         "last": [(4, struct.pack("<f", -123.5))]}


def patch_offsets(big):
    return [0, big // 2 - 100, (1 << 32) - PATCH // 2, big - PATCH]


def patch_bytes(k):
    return bytes(((i * 7 + k * 31 + 1) & 0xFF) or 1 for i in range(PATCH))


def small_values(i):
    return [i + j / 4 for j in range(4)]


def keys(nsmall):
    half = nsmall // 2
    return (["t%05d" % i for i in range(half)] + ["big"] +
            ["t%05d" % i for i in range(half, nsmall)])


# ------------------------------------------------------------------ gen

def fake_torch():
    """Just enough of torch for pickle to name its globals."""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*a):
        raise AssertionError("never called")
    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch._utils = utils
    for name in ("FloatStorage", "ByteStorage"):
        setattr(torch, name, type(name, (), {"__module__": "torch"}))
    sys.modules["torch"], sys.modules["torch._utils"] = torch, utils
    return torch, _rebuild_tensor_v2


class Storage:
    def __init__(self, cls, key, numel):
        self.cls, self.key, self.numel = cls, key, numel


class Tensor:
    def __init__(self, rebuild, storage, size):
        self.rebuild, self.storage, self.size = rebuild, storage, size

    def __reduce__(self):
        return (self.rebuild, (self.storage, 0, (self.size,), (1,), False,
                               collections.OrderedDict()))


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", obj.numel)
        return None


def crc_of_big(big):
    """CRC-32 of the big record: zeros but for the patches."""
    chunk = 64 << 20
    zeros = bytes(chunk)
    pats = list(zip(patch_offsets(big), range(4)))
    crc = 0
    for lo in range(0, big, chunk):
        n = min(chunk, big - lo)
        hit = [(o, k) for o, k in pats if o < lo + n and o + PATCH > lo]
        if not hit:
            crc = zlib.crc32(zeros[:n] if n < chunk else zeros, crc)
            continue
        buf = bytearray(n)
        for o, k in hit:
            p = patch_bytes(k)
            a, b = max(o, lo), min(o + PATCH, lo + n)
            buf[a - lo:b - lo] = p[a - o:b - o]
        crc = zlib.crc32(buf, crc)
    return crc & M32


def gen(out, nsmall, big):
    torch, rebuild = fake_torch()
    sd = collections.OrderedDict()
    order = []
    for name in keys(nsmall):
        key = str(len(order))
        if name == "big":
            st = Storage(torch.ByteStorage, key, big)
            sd[name] = Tensor(rebuild, st, big)
            order.append((key, None))
        else:
            st = Storage(torch.FloatStorage, key, 4)
            sd[name] = Tensor(rebuild, st, 4)
            order.append((key, struct.pack("<4f", *small_values(
                int(name[1:])))))
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(sd)
    pre = "archive/"
    recs = [(pre + "data.pkl", buf.getvalue()), (pre + "byteorder", b"little")]
    recs += [(pre + "data/" + k, d) for k, d in order]
    recs += [(pre + "version", b"3\n")]
    write_torch_zip(out, recs, big)


def write_torch_zip(out, records, big, align=64):
    """layout_check.build, streamed into @out; a None record is the big
    storage, written as a hole plus its patches."""
    cd = bytearray()
    with open(out, "wb") as f:
        c = 0
        for name, data in records:
            nb = name.encode()
            size = big if data is None else len(data)
            crc = crc_of_big(big) if data is None else zlib.crc32(data) & M32
            big_size, big_ofs = size >= M32, c >= M32
            z64 = cz64 = b""
            if big_size or big_ofs:
                vals = ([size, 0] if big_size else []) + ([c] if big_ofs
                                                          else [])
                z64 = struct.pack("<HH", 1, 8 * len(vals)) + \
                    struct.pack("<%dQ" % len(vals), *vals)
                cv = ([size, size] if big_size else []) + ([c] if big_ofs
                                                           else [])
                cz64 = struct.pack("<HH", 1, 8 * len(cv)) + \
                    struct.pack("<%dQ" % len(cv), *cv)
            start = c + 30 + len(nb) + len(z64) + 4
            pad = (align - start % align) % align
            extra = z64 + b"FB" + struct.pack("<H", pad) + b"Z" * pad
            flags = 0x0800 | (0x0008 if size else 0)
            f.seek(c)
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, flags, 0, 0,
                                0, 0, 0, 0, len(nb), len(extra)))
            f.write(nb + extra)
            dpos = c + 30 + len(nb) + len(extra)
            if data is None:
                for o, k in zip(patch_offsets(big), range(4)):
                    f.seek(dpos + o)
                    f.write(patch_bytes(k))
            else:
                f.write(data)
            f.seek(dpos + size)
            if size:
                if z64:
                    f.write(struct.pack("<IIQQ", 0x08074B50, crc, size, size))
                else:
                    f.write(struct.pack("<IIII", 0x08074B50, crc, size, size))
            cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, flags,
                              0, 0, 0, crc, min(size, M32), min(size, M32),
                              len(nb), len(cz64), 0, 0, 0, 0, min(c, M32))
            cd += nb + cz64
            c = f.tell()
        n = len(records)
        f.write(cd)
        z64eocd = f.tell()
        f.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 0x002D, 0,
                            0, n, n, len(cd), c))
        f.write(struct.pack("<IIQI", 0x07064B50, 0, z64eocd, 1))
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(n, 0xFFFF),
                            min(n, 0xFFFF), min(len(cd), M32), min(c, M32), 0))
    return 0


# ---------------------------------------------------------------- checks

def expected_big(big, off, n, edited=False):
    """Bytes [off, off + n) of the big tensor."""
    out = bytearray(n)
    for o, k in zip(patch_offsets(big), range(4)):
        a, b = max(o, off), min(o + PATCH, off + n)
        if a < b:
            out[a - off:b - off] = patch_bytes(k)[a - o:b - o]
    if edited:
        for o, data in EDITS["big"]:
            a, b = max(o, off), min(o + len(data), off + n)
            if a < b:
                out[a - off:b - off] = data[a - o:b - o]
    return bytes(out)


def probes(big):
    """(offset, length) of the reads: every patch, the 4 GiB boundary,
    a hole, the very end."""
    p = [(o - 8, PATCH + 16) for o in patch_offsets(big)[1:3]]
    return [(0, PATCH + 8)] + p + [((3 << 30) + 11, 4096),
                                   (big - PATCH - 8, PATCH + 8),
                                   ((1 << 32) - 1, 2), (big - 1, 1)]


def pread(path, off, n):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, n, off)
    finally:
        os.close(fd)


def small_ids(nsmall):
    half = nsmall // 2
    return [0, 1, half - 1, half, half + 1, nsmall - 1]


def read_mount(mnt, nsmall, big):
    probs = []
    p = os.path.join(mnt, "big")
    if os.stat(p).st_size != big:
        probs.append("big: size %d, expected %d" % (os.stat(p).st_size, big))
    for off, n in probes(big):
        if pread(p, off, n) != expected_big(big, off, n):
            probs.append("big: bytes at %d (+%d) differ" % (off, n))
    x = {k: os.getxattr(p, k).decode() for k in os.listxattr(p)}
    if x.get("user.shape") != str(big) or x.get("user.dtype") != "uint8":
        probs.append("big: xattrs %s" % x)
    key = x.get("user.storage", "?")
    sp = os.path.join(mnt, ".ptfs", "storages", key)
    for off, n in probes(big)[-3:]:
        if pread(sp, off, n) != expected_big(big, off, n):
            probs.append(".ptfs/storages/%s: bytes at %d differ" % (key, off))
    h = pread(p + ".npy", 0, 128)
    if b"'descr': '|u1'" not in h or (b"'shape': (%d,)" % big) not in h:
        probs.append("big.npy: header %r" % h[:80])
    names = os.listdir(mnt)
    if len(names) != nsmall + 1:
        probs.append("%d names in the mount, expected %d"
                     % (len(names), nsmall + 1))
    for i in small_ids(nsmall):
        name = "t%05d" % i
        got = pread(os.path.join(mnt, name), 0, 64)
        if got != struct.pack("<4f", *small_values(i)):
            probs.append("%s: %s" % (name, got.hex()))
        k = os.getxattr(os.path.join(mnt, name), "user.storage").decode()
        got = pread(os.path.join(mnt, ".ptfs", "storages", k), 0, 64)
        if got != struct.pack("<4f", *small_values(i)):
            probs.append(".ptfs/storages/%s (%s): %s" % (k, name, got.hex()))
    return probs, "%d names; big: %d bytes read at %d places across 4 GiB " \
        "(tensor, .ptfs/storages/%s, .npy header); %d small tensors and " \
        "their storages" % (len(names), sum(n for _, n in probes(big)),
                            len(probes(big)), key, len(small_ids(nsmall)))


def check_zip(path, nsmall, big):
    probs = []
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        if len(infos) != nsmall + 4:
            probs.append("%d records, expected %d" % (len(infos), nsmall + 4))
        nfar = 0
        with open(path, "rb") as f:
            for i in infos:
                if i.compress_type != zipfile.ZIP_STORED:
                    probs.append("%s: method %d" % (i.filename,
                                                    i.compress_type))
                f.seek(i.header_offset + 26)
                n, m = struct.unpack("<HH", f.read(4))
                data = i.header_offset + 30 + n + m
                if data % 64:
                    probs.append("%s: data not aligned" % i.filename)
                nfar += i.header_offset >= (1 << 32)
                # the CRC, read in big chunks (zipfile's testzip takes
                # 1 MiB at a time: four times slower here)
                f.seek(data)
                crc, left = 0, i.file_size
                while left:
                    chunk = f.read(min(left, 64 << 20))
                    if not chunk:
                        break
                    crc = zlib.crc32(chunk, crc)
                    left -= len(chunk)
                if left or crc != i.CRC:
                    probs.append("%s: CRC-32 %08x, the central directory "
                                 "says %08x" % (i.filename, crc, i.CRC))
            f.seek(-98, 2)
            tail = f.read(98)
        if tail[:4] != b"PK\x06\x06" or tail[56:60] != b"PK\x06\x07":
            probs.append("no ZIP64 end record and locator before the end")
        sizes = [i.file_size for i in infos if i.file_size > M32]
        if sizes != [big]:
            probs.append("records over 4 GiB: %s" % sizes)
    return probs, "%d records, all stored, CRCs right (the %d-byte one " \
        "too), %d past 4 GiB, 64-byte aligned, ZIP64 end records" % (
            len(infos), big, nfar)


def check_torch(path, nsmall, big):
    import torch
    two = int(torch.__version__.split(".")[0]) >= 2
    kw = {"mmap": True, "weights_only": True} if two else {}
    sd = torch.load(path, map_location="cpu", **kw)
    probs = []
    want = keys(nsmall)
    if list(sd.keys()) != want:
        probs.append("keys: %d, expected %d" % (len(sd), len(want)))
    allv = torch.tensor([small_values(i) for i in range(nsmall)],
                        dtype=torch.float32)
    last = nsmall - 1
    lb = bytearray(allv[last].numpy().tobytes())
    for o, data in EDITS["last"]:
        lb[o:o + len(data)] = data
    allv[last] = torch.frombuffer(lb, dtype=torch.float32)
    have = torch.stack([sd["t%05d" % i] for i in range(nsmall)])
    if have.dtype != torch.float32 or not torch.equal(have, allv):
        bad = (have != allv).any(dim=1).nonzero().flatten()[:5].tolist()
        probs.append("small tensors differ: t%s" % bad)
    b = sd["big"]
    if b.dtype != torch.uint8 or tuple(b.shape) != (big,):
        probs.append("big: %s %s" % (b.dtype, tuple(b.shape)))
    else:
        for off, n in probes(big) + [(o, len(d)) for o, d in EDITS["big"]]:
            got = b[off:off + n].numpy().tobytes()
            if got != expected_big(big, off, n, edited=True):
                probs.append("big: bytes at %d (+%d) differ" % (off, n))
    how = "mmap=True, weights_only=True" if two else "read whole"
    return probs, "torch %s (%s): %d small tensors, the edits, %d places " \
        "of the %d-byte tensor" % (torch.__version__, how, nsmall,
                                   len(probes(big)) + 2, big)


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    # the answer goes to stdout; what torch prints there (UCX) to stderr
    sys.stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    cmd, path, nsmall, big = argv[1], argv[2], int(argv[3]), int(argv[4])
    if cmd == "gen":
        gen(path, nsmall, big)
        print("ok %d records, %d bytes (sparse)" % (nsmall + 4,
                                                      os.path.getsize(path)))
        return 0
    fn = {"read": read_mount, "zip": check_zip, "torch": check_torch}[cmd]
    probs, summary = fn(path, nsmall, big)
    if probs:
        print("FAIL " + probs[0])
        for p in probs[1:10]:
            print("  " + p)
        return 1
    print("ok " + summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
