#!/usr/bin/env python3
"""dcp_gen.py - DCP directories of many chunks, written without torch, for
bench_dcpverify.py (issue 38: ptverify's time per chunk, ptls's memory for
repeated chunk references).

    python3 tests/bench/dcp_gen.py chunks DIR N
    python3 tests/bench/dcp_gen.py refs DIR N

  chunks  one float32 tensor 'w' of shape (N, 4) saved row-wise in N
          chunks of (1, 4), each its own item (a torch.save archive of one
          tensor, as FileSystemWriter writes them) in DIR/__0_0.distcp,
          and DIR/.metadata naming them: what N ranks sharding w on dim 0
          would save, in one file
  refs    DIR/.metadata whose tensor 'w' of shape (1, 4) lists one chunk N
          times: N memo references (BINGET, 2 bytes each) to one
          ChunkStorageMetadata, and one item for it.  A reader that makes
          per-chunk state of every reference uses memory out of all
          proportion to the file's bytes.

Plain Python (struct, zipfile): the pickle is written opcode by opcode in
protocol 2, with the globals torch's own .metadata uses
(multi-file-formats.md 2.2); the items are zip archives laid out as
torch.save lays them out.  Every item is the same bytes (an archive's
offsets count from its own start), so N items are one template repeated.
"""
import io
import os
import struct
import sys
import zipfile

META = "torch.distributed.checkpoint.metadata"


class P:
    """A protocol-2 pickle, opcode by opcode, with a memo of globals."""

    def __init__(self):
        self.b = bytearray(b"\x80\x02")
        self.memo = {}

    def op(self, x):
        self.b += x
        return self

    def put(self):
        n = len(self.memo)
        self.op(b"r" + struct.pack("<I", n))
        return n

    def get(self, n):
        return self.op(b"h" + bytes([n]) if n < 256 else
                       b"j" + struct.pack("<I", n))

    def glob(self, mod, name):
        k = (mod, name)
        if k in self.memo:
            return self.get(self.memo[k])
        self.op(b"c" + mod.encode() + b"\n" + name.encode() + b"\n")
        self.memo[k] = self.put()
        return self

    def s(self, text):
        k = ("str", text)
        if k in self.memo:
            return self.get(self.memo[k])
        t = text.encode()
        self.op(b"X" + struct.pack("<I", len(t)) + t)
        self.memo[k] = self.put()
        return self

    def i(self, n):
        if 0 <= n < 256:
            return self.op(b"K" + bytes([n]))
        return self.op(b"J" + struct.pack("<i", n))

    def size(self, v):
        """torch.Size((v...))"""
        self.glob("torch", "Size").op(b"(")
        for n in v:
            self.i(n)
        return self.op(b"t\x85R")

    def obj(self, mod, cls, fields):
        """cls.__new__(cls) BUILD {field: writer(self)}"""
        self.glob(mod, cls).op(b")\x81}(")
        for k, fn in fields:
            self.s(k)
            fn(self)
        return self.op(b"u" + b"b")

    def stop(self):
        return bytes(self.b + b".")


def chunk(p, off, sz):
    return p.obj(META, "ChunkStorageMetadata", [
        ("offsets", lambda p: p.size(off)), ("sizes", lambda p: p.size(sz))])


def tensor_meta(p, shape, chunks):
    """TensorStorageMetadata of float32 @shape; @chunks writes the list"""
    def props(p):
        p.glob(META, "TensorProperties").op(b")\x81(")
        p.glob("torch", "float32")
        p.glob("torch.serialization", "_get_layout").s("torch.strided")
        p.op(b"\x85R\x89")              # requires_grad False
        p.glob(META, "_MEM_FORMAT_ENCODING").i(0).op(b"\x85R")
        return p.op(b"\x89tb")          # pin_memory False; BUILD

    return p.obj(META, "TensorStorageMetadata", [
        ("properties", props), ("size", lambda p: p.size(shape)),
        ("chunks", chunks)])


def storage(p, fqn, off, at, length):
    """MetadataIndex(fqn, off) : _StorageInfo('__0_0.distcp', at, length)"""
    p.obj(META, "MetadataIndex", [
        ("fqn", lambda p: p.s(fqn)), ("offset", lambda p: p.size(off)),
        ("index", lambda p: p.op(b"N"))])
    return p.obj("torch.distributed.checkpoint.filesystem", "_StorageInfo", [
        ("relative_path", lambda p: p.s("__0_0.distcp")),
        ("offset", lambda p: p.i(at)), ("length", lambda p: p.i(length))])


def metadata(p, sdm, sd):
    return p.obj(META, "Metadata", [
        ("state_dict_metadata", lambda p: p.op(b"}(") and sdm(p) and
         p.op(b"u")),
        ("planner_data", lambda p: p.op(b"}(").s("w").s("w").op(b"\x85u")),
        ("storage_data", lambda p: p.op(b"}") and sd(p)),
        ("storage_meta", lambda p: p.op(b"N")),
        ("version", lambda p: p.s("1.0.0"))]).stop()


def item():
    """torch.save of float32 zeros (1, 4): an archive of one tensor"""
    p = P()
    p.glob("torch._utils", "_rebuild_tensor_v2").op(b"(")
    p.op(b"(").s("storage").glob("torch", "FloatStorage").s("0").s("cpu")
    p.i(4).op(b"tQ")
    p.i(0).op(b"(").i(1).i(4).op(b"t(").i(4).i(1).op(b"t\x89")
    p.glob("collections", "OrderedDict").op(b")R")
    pkl = p.op(b"tR").stop()
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", bytes(16))
        z.writestr("archive/version", "3\n")
    return bio.getvalue()


def batched(p, n, one):
    """MARK one(i)... APPENDS/SETITEMS in batches of 1000, as pickle does"""
    for b in range(0, n, 1000):
        p.op(b"(")
        for i in range(b, min(n, b + 1000)):
            one(i)
        yield


def chunks(d, n):
    os.makedirs(d, exist_ok=True)
    it = item()
    with open(os.path.join(d, "__0_0.distcp"), "wb") as f:
        for _ in range(n):
            f.write(it)

    def chunk_list(p):
        p.op(b"]")
        for _ in batched(p, n, lambda i: chunk(p, (i, 0), (1, 4))):
            p.op(b"e")
        return p

    def sdm(p):
        p.s("w")
        return tensor_meta(p, (n, 4), chunk_list)

    def sd(p):
        for _ in batched(p, n, lambda i: storage(p, "w", (i, 0),
                                                 i * len(it), len(it))):
            p.op(b"u")
        return p

    with open(os.path.join(d, ".metadata"), "wb") as f:
        f.write(metadata(P(), sdm, sd))


def refs(d, n):
    os.makedirs(d, exist_ok=True)
    it = item()
    with open(os.path.join(d, "__0_0.distcp"), "wb") as f:
        f.write(it)

    def chunk_list(p):
        p.op(b"]")
        chunk(p, (0, 0), (1, 4))
        one = p.put()
        p.op(b"a")
        for _ in batched(p, n - 1, lambda i: p.get(one)):
            p.op(b"e")
        return p

    def sdm(p):
        p.s("w")
        return tensor_meta(p, (1, 4), chunk_list)

    def sd(p):
        return storage(p, "w", (0, 0), 0, len(it)).op(b"s")

    with open(os.path.join(d, ".metadata"), "wb") as f:
        f.write(metadata(P(), sdm, sd))


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("chunks", "refs"):
        sys.exit("usage: dcp_gen.py chunks|refs DIR N")
    (chunks if sys.argv[1] == "chunks" else refs)(sys.argv[2],
                                                  int(sys.argv[3]))
