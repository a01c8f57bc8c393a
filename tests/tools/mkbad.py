#!/usr/bin/env python3
"""mkbad.py SOURCE KIND OUT - rebuild the torch checkpoint SOURCE (a zip)
with a small zip writer of our own, plain Python, no torch, broken in one
way for ptverify_cli.sh and ptdump_cli.sh:

  clean        the same records, 64-byte aligned, correct CRCs: no problem
  flipcrc      one storage record's CRC-32 wrong in the central directory
  flipdata     one byte of a storage changed, its CRC left as it was
  nocrc        every CRC-32 0 (torch.serialization.set_crc32_options(False))
  misaligned   no alignment padding at all
  deflated     storage records deflated (mmap=True reads garbage)
  gap          16 stray bytes between two records
  trailing     bytes after the end of central directory
  unused       an extra data/999 record no persistent id names
  bigendian    byteorder 'big'
  badorder     byteorder 'middle' (torch 2.x refuses it)
  version11    version '11' (torch refuses it)
  versions     version '3' and .data/version '4' disagree
  duplicate    two records with the same name
  overlap      a record whose header is inside the one before it
  outside      a record whose header is past the end of the file
  prefix       one record under another top folder
  layout       .format_version '1' but storages not where torch 2.x
               computes them (alignment 128 while .storage_alignment 64)
  evil         data.pkl replaced by one that REDUCEs os.system
  short        a storage record 4 bytes shorter than numel x itemsize
  extent       data.pkl replaced by a tensor reaching past its storage
               (torch._utils and torch faked in sys.modules: no torch)
"""
import collections
import os
import pickle
import struct
import sys
import types
import zipfile
import zlib


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def fake_torch_pickle():
    """{'t': _rebuild_tensor_v2(<FloatStorage '0', 4 elements>, 2, (4,),
    (1,), False, OrderedDict())}: elements 2..5 of a 4-element storage"""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    class FloatStorage:
        pass

    def _rebuild_tensor_v2(*args):
        pass

    FloatStorage.__module__ = "torch"
    FloatStorage.__qualname__ = "FloatStorage"
    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    torch.FloatStorage = FloatStorage
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    sys.modules["torch"] = torch
    sys.modules["torch._utils"] = utils

    class Ref:
        pass

    class T:
        def __reduce__(self):
            return (_rebuild_tensor_v2, (Ref(), 2, (4,), (1,), False,
                                         collections.OrderedDict()))

    class P(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Ref):
                return ("storage", FloatStorage, "0", "cpu", 4)
            return None

    import io
    buf = io.BytesIO()
    P(buf, protocol=2).dump({"t": T()})
    return buf.getvalue()


def build(records, align=64, gap_after=None, trailing=b"", crc_of=None,
          deflate=lambda name: False, lie=None):
    """records: [(name, bytes)].  lie: {name: (csize_delta, off_delta)}"""
    out = bytearray()
    cd = bytearray()
    for name, data in records:
        nb = name.encode()
        method = 8 if deflate(name) else 0
        body = data
        if method == 8:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            body = c.compress(data) + c.flush()
        crc = crc_of(name, data) if crc_of else zlib.crc32(data)
        off = len(out)
        start = off + 30 + len(nb) + 4
        pad = (align - start % align) % align if align > 1 else 0
        extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
        out += struct.pack("<IHHHHHIIIHH", 0x04034b50, 20 if method else 0,
                           0x800, method, 0, 0, crc, len(body), len(data),
                           len(nb), len(extra))
        out += nb + extra + body
        csize, hoff = len(body), off
        if lie and name in lie:
            csize += lie[name][0]
            hoff += lie[name][1]
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 0,
                          20 if method else 0, 0x800, method, 0, 0, crc,
                          csize, len(data), len(nb), 0, 0, 0, 0, 0, hoff)
        cd += nb
        if gap_after == name:
            out += b"\xaa" * 16
    cdoff = len(out)
    out += cd
    out += struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, len(records),
                       len(records), len(cd), cdoff, 0)
    return bytes(out + trailing)


def main():
    src, kind, dst = sys.argv[1:4]
    with zipfile.ZipFile(src) as z:
        recs = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    prefix = recs[0][0].split("/")[0]
    storages = [n for n, _ in recs if n.startswith(prefix + "/data/")]
    first = storages[0]
    kw = {}

    def put(rel, data, after=None):
        name = prefix + "/" + rel
        for i, (n, _) in enumerate(recs):
            if n == name:
                recs[i] = (name, data)
                return
        recs.insert(len(recs) if after is None else after, (name, data))

    if kind == "clean":
        pass
    elif kind == "flipcrc":
        kw["crc_of"] = lambda n, d: zlib.crc32(d) ^ (0x100 if n == first
                                                   else 0)
    elif kind == "flipdata":
        kw["crc_of"] = lambda n, d: zlib.crc32(d)
        i = [n for n, _ in recs].index(first)
        d = bytearray(recs[i][1])
        recs[i] = (first, d)
        good = zlib.crc32(bytes(d))
        d[0] ^= 0x01
        kw["crc_of"] = lambda n, dd: good if n == first else zlib.crc32(dd)
    elif kind == "nocrc":
        kw["crc_of"] = lambda n, d: 0
    elif kind == "misaligned":
        kw["align"] = 1
    elif kind == "deflated":
        kw["deflate"] = lambda n: n in storages
    elif kind == "gap":
        kw["gap_after"] = first
    elif kind == "trailing":
        kw["trailing"] = b"appended after the archive\n"
    elif kind == "unused":
        put("data/999", b"\0" * 40)
    elif kind == "bigendian":
        put("byteorder", b"big", after=1)
    elif kind == "badorder":
        put("byteorder", b"middle", after=1)
    elif kind == "version11":
        put("version", b"11\n")
    elif kind == "versions":
        put("version", b"3\n")
        put(".data/version", b"4\n")
    elif kind == "duplicate":
        recs.append((first, b"\0" * len(dict(recs)[first])))
    elif kind == "overlap":
        kw["lie"] = {storages[1]: (0, -40)}
    elif kind == "outside":
        kw["lie"] = {recs[-1][0]: (0, 1 << 20)}
    elif kind == "prefix":
        n, d = recs[-1]
        recs[-1] = ("other/" + n.split("/", 1)[1], d)
    elif kind == "layout":
        put(".format_version", b"1", after=1)
        put(".storage_alignment", b"64", after=2)
        kw["align"] = 128
    elif kind == "evil":
        put("data.pkl", pickle.dumps({"x": Evil(), "n": 1}, protocol=2))
        recs[:] = [r for r in recs if not r[0].startswith(prefix + "/data/")]
    elif kind == "short":
        i = [n for n, _ in recs].index(first)
        recs[i] = (first, recs[i][1][:-4])
    elif kind == "extent":
        recs[:] = [r for r in recs if not r[0].startswith(prefix + "/data/")]
        put("data.pkl", fake_torch_pickle())
        put("data/0", b"\0" * 16, after=1)
    else:
        sys.exit("unknown kind " + kind)
    with open(dst, "wb") as f:
        f.write(build(recs, **kw))


main()
