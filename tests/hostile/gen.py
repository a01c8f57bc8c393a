#!/usr/bin/env python3
"""gen.py OUTDIR - the hostile and broken corpus of tests/hostile/run.sh.

Plain Python (struct, zipfile, zlib, gzip): no torch, no numpy, nothing
committed but this script.  Writes OUTDIR/<name>.pt for every case and
OUTDIR/manifest.tsv, one line per file:

    NAME <TAB> EXPECT <TAB> DETAIL

EXPECT says what ptls (and ptfs) must do with it:
    refuse   exit 2 with one line on stderr; DETAIL is a regex it matches
    list     a listing (exit 0); ptfs mounts it and every file reads
    either   a listing or a one-line refusal, both are fine
    unsafe   a listing, and `ptls --check` exits 1 naming every global in
             DETAIL (space-separated module.name) as unsafe
    unsafe_or_refuse   unsafe, or refused in one line

Every payload that would do something when unpickled by Python touches
$CANARY (a path given in the environment, default /tmp/ptfs-hostile-pwned)
so the test can also check that nothing ran.
"""
import gzip
import os
import random
import struct
import sys
import zipfile

OUT = sys.argv[1]
CANARY = os.environ.get("CANARY", "/tmp/ptfs-hostile-pwned")
CMD = "touch " + CANARY
os.makedirs(OUT, exist_ok=True)
manifest = []


def case(name, data, expect, detail=""):
    with open(os.path.join(OUT, name + ".pt"), "wb") as f:
        f.write(data)
    manifest.append((name, expect, detail))


# ---------------------------------------------------------------- pickles
class P:
    """A protocol-2 pickle written opcode by opcode."""

    def __init__(self, proto=2):
        self.b = bytearray()
        if proto >= 2:
            self.b += bytes([0x80, proto])

    def op(self, *bs):
        for x in bs:
            self.b += x if isinstance(x, (bytes, bytearray)) else bytes([x])
        return self

    def glob(self, mod, name):
        return self.op(b"c" + mod.encode() + b"\n" + name.encode() + b"\n")

    def s(self, text):
        t = text.encode()
        return self.op(b"X" + struct.pack("<I", len(t)) + t)

    def i(self, n):
        if 0 <= n < 256:
            return self.op(b"K" + bytes([n]))
        if -2**31 <= n < 2**31:
            return self.op(b"J" + struct.pack("<i", n))
        raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
        return self.op(b"\x8a" + bytes([len(raw)]) + raw)

    def ints(self, v):
        self.op(b"(")
        for n in v:
            self.i(n)
        return self.op(b"t")

    def mark(self):
        return self.op(b"(")

    def tuple(self):
        return self.op(b"t")

    def reduce(self):
        return self.op(b"R")

    def put(self, k):
        return self.op(b"r" + struct.pack("<I", k))

    def get(self, k):
        return self.op(b"j" + struct.pack("<I", k))

    def stop(self):
        return bytes(self.op(b".").b)

    def tensor(self, key="0", cls="FloatStorage", numel=4, offset=0,
               shape=(4,), stride=(1,)):
        self.glob("torch._utils", "_rebuild_tensor_v2").mark()
        self.mark().s("storage").glob("torch", cls).s(key).s("cpu")
        self.i(numel).tuple().op(b"Q")
        self.i(offset).ints(shape).ints(stride).op(b"\x89")
        self.glob("collections", "OrderedDict").op(b")").reduce()
        return self.tuple().reduce()

    def call(self, mod, name, *args):
        self.glob(mod, name).mark()
        for a in args:
            self.s(a) if isinstance(a, str) else self.i(a)
        return self.tuple().reduce()


def sd_pickle(tensors=(("w", {}),), extra=None):
    """{name: tensor, ...} plus an extra (key, writer) item"""
    p = P().op(b"}").mark()
    for name, kw in tensors:
        p.s(name).tensor(**kw)
    if extra:
        p.s(extra[0])
        extra[1](p)
    p.op(b"u")
    return p.stop()


# ------------------------------------------------------------------ zips
def torch_zip(pkl, records=None, prefix="archive", method=zipfile.ZIP_STORED):
    """an archive laid out like torch.save's (data.pkl, data/*, version)"""
    import io
    bio = io.BytesIO()
    recs = {"data/0": struct.pack("<4f", 1, 2, 3, 4)} if records is None \
        else records
    with zipfile.ZipFile(bio, "w", method) as z:
        z.writestr(prefix + "/data.pkl", pkl)
        for k, v in recs.items():
            z.writestr(prefix + "/" + k, v, compress_type=zipfile.ZIP_STORED)
        z.writestr(prefix + "/version", "3\n", compress_type=zipfile.ZIP_STORED)
    return bytearray(bio.getvalue())


BASE = torch_zip(sd_pickle())


def eocd_at(b):
    return b.rfind(b"PK\x05\x06")


def cdir_entries(b):
    """offsets of the central directory records"""
    e = eocd_at(b)
    n, size, off = struct.unpack_from("<HII", b, e + 10)
    out, p = [], off
    for _ in range(n):
        out.append(p)
        nl, xl, cl = struct.unpack_from("<HHH", b, p + 28)
        p += 46 + nl + xl + cl
    return out


def patched(b, off, fmt, *vals):
    b = bytearray(b)
    struct.pack_into(fmt, b, off, *vals)
    return b


def with_zip64(b, usize=None, csize=None, hdr=None, entry=0):
    """rewrite central record @entry with 0xffffffff fields and a ZIP64
    extra holding the given values (the record grows; offsets after it
    are fixed up)"""
    b = bytearray(b)
    cds = cdir_entries(b)
    p = cds[entry]
    nl, xl, cl = struct.unpack_from("<HHH", b, p + 28)
    vals = []
    if usize is not None:
        struct.pack_into("<I", b, p + 24, 0xFFFFFFFF)
        vals.append(usize)
    if csize is not None:
        struct.pack_into("<I", b, p + 20, 0xFFFFFFFF)
        vals.append(csize)
    if hdr is not None:
        struct.pack_into("<I", b, p + 42, 0xFFFFFFFF)
        vals.append(hdr)
    extra = struct.pack("<HH", 1, 8 * len(vals)) + b"".join(
        struct.pack("<Q", v) for v in vals)
    at = p + 46 + nl + xl
    struct.pack_into("<H", b, p + 30, xl + len(extra))
    b[at:at] = extra
    e = eocd_at(b)
    size = struct.unpack_from("<I", b, e + 12)[0]
    struct.pack_into("<I", b, e + 12, size + len(extra))
    return b


def zip64_end(b, count=None, cd_size=None, cd_off=None, loc_target=None,
              disk=0):
    """append a ZIP64 end record and locator before the classic end
    record, which then says 0xffff/0xffffffff"""
    b = bytearray(b)
    e = eocd_at(b)
    n, size, off = struct.unpack_from("<HII", b, e + 10)
    tail = bytes(b[e:])
    z64_off = e
    rec = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, disk, disk,
                      n if count is None else count,
                      n if count is None else count,
                      size if cd_size is None else cd_size,
                      off if cd_off is None else cd_off)
    loc = struct.pack("<IIQI", 0x07064B50, 0,
                      z64_off if loc_target is None else loc_target, 1)
    tail = bytearray(tail)
    struct.pack_into("<HHII", tail, 8, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    return b[:e] + rec + loc + tail


# ================================================================ cases
# -- things that are not checkpoints
case("lfs_pointer", b"version https://git-lfs.github.com/spec/v1\n"
     b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
     b"size 1513258\n", "refuse", "Git LFS pointer")
case("html_page", b"<!DOCTYPE html>\n<html><head><title>404</title></head>"
     b"<body>Not Found</body></html>\n", "refuse", "HTML page")
case("html_login_bom", b"\xef\xbb\xbf\n  <HTML><BODY>Please sign in</BODY>"
     b"</HTML>", "refuse", "HTML page")
case("empty", b"", "refuse", "empty file")
case("text", b"hello, this is not a model\n", "refuse",
     "not a PyTorch checkpoint")
case("zeros_4k", bytes(4096), "refuse", "not a PyTorch checkpoint")
case("random_64k", random.Random(7).randbytes(65536), "refuse", "")
case("pk_magic_only", b"PK\x03\x04", "refuse", "")
case("empty_zip", b"PK\x05\x06" + bytes(18), "refuse", "empty zip")
case("gzip_of_checkpoint", gzip.compress(bytes(BASE), mtime=0), "refuse",
     "gzip-compressed file, not a checkpoint")

# -- truncations of a good archive
n = len(BASE)
case("base_ok", bytes(BASE), "list")
case("trunc_half", bytes(BASE[:n // 2]), "refuse", "truncated|central")
case("trunc_last_byte", bytes(BASE[:n - 1]), "refuse", "")
case("trunc_no_eocd", bytes(BASE[:eocd_at(BASE)]), "refuse", "")
case("trunc_in_cdir", bytes(BASE[:cdir_entries(BASE)[1] + 10]), "refuse", "")
case("trunc_30", bytes(BASE[:30]), "refuse", "")

# -- lying end record and central directory
e = eocd_at(BASE)
case("eocd_count_more", patched(BASE, e + 8, "<HH", 9, 9), "refuse", "")
case("eocd_count_less", patched(BASE, e + 8, "<HH", 1, 1), "refuse", "")
case("eocd_disk_counts_differ", patched(BASE, e + 8, "<HH", 2, 3),
     "refuse", "")
case("eocd_multidisk", patched(BASE, e + 4, "<HH", 1, 1), "refuse", "")
case("cdir_offset_past_eof", patched(BASE, e + 16, "<I", len(BASE) + 100),
     "refuse", "")
case("cdir_offset_ffff", patched(BASE, e + 16, "<I", 0xFFFFFFF0), "refuse",
     "")
case("cdir_size_huge", patched(BASE, e + 12, "<I", 0x7FFFFFFF), "refuse", "")
case("cdir_size_zero", patched(BASE, e + 12, "<I", 0), "refuse", "")
case("comment_len_lies", patched(BASE, e + 20, "<H", 0xFFFF), "either", "")
case("fake_eocd_in_comment",
     bytes(BASE[:-2]) + struct.pack("<H", 22) +
     b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 1, 1, 46, 0, 0),
     "either", "")
case("junk_prepended", b"#!/bin/sh\nexit 0\n" + bytes(BASE), "either", "")
cds = cdir_entries(BASE)
case("cd_bad_signature", patched(BASE, cds[1], "<I", 0x02014B51), "refuse",
     "central directory")
case("cd_local_past_eof", patched(BASE, cds[1] + 42, "<I", len(BASE) * 4),
     "refuse", "")
case("cd_local_into_cdir", patched(BASE, cds[1] + 42, "<I", cds[0]),
     "refuse", "")
case("cd_overlapping_records", patched(BASE, cds[1] + 42, "<I", 0),
     "refuse", "")
case("cd_stored_sizes_differ", patched(BASE, cds[1] + 20, "<I", 8),
     "refuse", "")
case("cd_csize_past_eof", patched(patched(BASE, cds[1] + 20, "<I", 1 << 30),
                                  cds[1] + 24, "<I", 1 << 30), "refuse", "")
case("cd_encrypted", patched(BASE, cds[0] + 8, "<H", 1), "refuse", "")
case("cd_method_bzip2", patched(BASE, cds[0] + 10, "<H", 12), "refuse", "")
case("cd_name_len_huge", patched(BASE, cds[0] + 28, "<H", 0xFFFF), "refuse",
     "")
case("cd_extra_len_past_cdir", patched(BASE, cds[2] + 30, "<H", 0x8000),
     "refuse", "")
case("local_bad_signature", patched(BASE, 0, "<I", 0x04034B51), "refuse", "")
case("local_name_len_huge", patched(BASE, 26, "<H", 0xFFFF), "refuse", "")
case("local_extra_len_huge", patched(BASE, 28, "<H", 0xFFFF), "refuse", "")
dup = torch_zip(sd_pickle(), {"data/0": struct.pack("<4f", 1, 2, 3, 4),
                              "DATA/0": b"abcd"})
case("duplicate_names_case", dup, "refuse", "")
case("name_traversal",
     torch_zip(sd_pickle(), {"data/0": struct.pack("<4f", 1, 2, 3, 4),
                             "../../../../tmp/evil": b"x"}), "either", "")

# -- ZIP64 tricks
case("zip64_ok", zip64_end(BASE), "list")
case("zip64_locator_past_eof", zip64_end(BASE, loc_target=1 << 40),
     "refuse", "")
case("zip64_locator_at_zero", zip64_end(BASE, loc_target=0), "refuse", "")
case("zip64_locator_at_itself", zip64_end(BASE, loc_target=len(BASE) - 22 + 44 + 12),
     "refuse", "")
case("zip64_count_2e40", zip64_end(BASE, count=1 << 40), "refuse", "")
case("zip64_cdir_off_huge", zip64_end(BASE, cd_off=1 << 62), "refuse", "")
case("zip64_cdir_size_huge", zip64_end(BASE, cd_size=1 << 50), "refuse", "")
case("zip64_multidisk", zip64_end(BASE, disk=3), "refuse", "")
case("zip64_extra_1tb_storage", with_zip64(BASE, usize=1 << 40, csize=1 << 40,
                                           entry=1), "refuse", "")
case("zip64_extra_local_offset_2e63", with_zip64(BASE, hdr=1 << 63, entry=1),
     "refuse", "")
t = with_zip64(BASE, usize=16, entry=1)
p = cdir_entries(t)[1]
nl, xl = struct.unpack_from("<HH", t, p + 28)
case("zip64_extra_truncated", patched(t, p + 46 + nl + 2, "<H", 2), "refuse",
     "")

# -- claims of huge sizes (memory must stay bounded by the metadata)
case("deflate_bomb_pickle_16mb",
     torch_zip(b"\x80\x02" + bytes(1 << 24), method=zipfile.ZIP_DEFLATED),
     "refuse", "")
small = torch_zip(sd_pickle(), method=zipfile.ZIP_DEFLATED)
p = cdir_entries(small)[0]
case("deflate_claims_4gb", patched(small, p + 24, "<I", 0xFFFFFFF0),
     "refuse", "")
case("storage_claims_1tb",
     torch_zip(sd_pickle((("w", dict(numel=1 << 38, shape=(1 << 38,))),))),
     "refuse", "")
case("expand_stride0_4tb",
     torch_zip(sd_pickle((("w", dict(numel=4, shape=(1 << 40,),
                                     stride=(0,))),))), "list")
case("shape_product_overflow",
     torch_zip(sd_pickle((("w", dict(shape=(1 << 32, 1 << 32, 1 << 32),
                                     stride=(0, 0, 0))),))), "refuse", "")
case("stride_extent_overflow",
     torch_zip(sd_pickle((("w", dict(shape=(4, 4),
                                     stride=((1 << 63) - 1, 1))),))),
     "refuse", "")
case("negative_stride",
     torch_zip(sd_pickle((("w", dict(shape=(4,), stride=(-1,))),))),
     "refuse", "")
case("negative_offset",
     torch_zip(sd_pickle((("w", dict(offset=-2, shape=(2,))),))), "refuse", "")
case("negative_shape",
     torch_zip(sd_pickle((("w", dict(shape=(-4,))),))), "refuse", "")
case("view_past_storage",
     torch_zip(sd_pickle((("w", dict(offset=2, shape=(4,))),))), "refuse", "")
case("too_many_dims",
     torch_zip(sd_pickle((("w", dict(numel=1, shape=(1,) * 65,
                                     stride=(1,) * 65)),))), "refuse", "")
case("record_size_wrong",
     torch_zip(sd_pickle(), {"data/0": b"abc"}), "refuse", "")
case("record_missing", torch_zip(sd_pickle(), {}), "refuse", "")
case("unknown_storage_class",
     torch_zip(sd_pickle((("w", dict(cls="EvilStorage")),))),
     "unsafe_or_refuse", "torch.EvilStorage")
many = [("t%d" % k, dict(key=str(k % 3))) for k in range(3000)]
case("many_tensors_3000",
     torch_zip(sd_pickle(many), {"data/%d" % k: bytes(16) for k in range(3)}),
     "list")

# -- pickle bombs and limits
p = P().op(b"]").put(0)
for lvl in range(1, 40):          # billion laughs: 2**39 leaves via the memo
    p.op(b"]").mark().get(lvl - 1).get(lvl - 1).op(b"e").put(lvl)
p.op(b"}").s("bomb").get(39).op(b"s")
case("billion_laughs_memo", torch_zip(p.stop()), "either", "")
p = P().op(b"}").s("deep")
p.op(b"]" * 200000)
p.op(b"a" * 199999).op(b"s")
case("deep_lists_200k", torch_zip(p.stop()), "either", "")
p = P().op(b"}").s("deep").op(b"(" * 5000)
case("marks_5000", torch_zip(p.stop()), "refuse", "")
p = P().op(b"}").mark().s("a").i(1).s("b").op(b"u")
case("setitems_odd", torch_zip(p.stop()), "refuse", "")
p = P().op(b"}").s("x").op(b"\x85" * 3).op(b"s")
case("tuple1_underflow", torch_zip(p.stop()), "refuse", "underflow")
p = P().op(b"}").s("x").get(12345).op(b"s")
case("memo_get_missing", torch_zip(p.stop()), "refuse", "memo")
p = P().op(b"}").s("x").i(1).put(0xFFFFFFFF).op(b"s")
case("memo_put_max_key", torch_zip(p.stop()), "either", "")
p = P().op(b"}").s("x").op(b"X" + struct.pack("<I", 0xFFFFFFFF) + b"abc")
case("str_len_4g", torch_zip(p.op(b"s").stop()), "refuse", "")
p = P(4).op(b"}").s("x").op(b"\x8e" + struct.pack("<Q", 1 << 62) + b"abc")
case("bytes8_len_2e62", torch_zip(p.op(b"s").stop()), "refuse", "")
p = P().op(b"}").s("x").op(b"\x8b" + struct.pack("<i", 1 << 30) + b"\x01")
case("long4_len_1g", torch_zip(p.op(b"s").stop()), "refuse", "")
p = P().op(b"}").s("x").op(b"\x8b" + struct.pack("<i", -5) + b"\x01")
case("long4_len_negative", torch_zip(p.op(b"s").stop()), "refuse", "")
p = P(4).op(b"\x95" + struct.pack("<Q", 1 << 60)).op(b"}")
case("frame_len_huge", torch_zip(p.stop()), "refuse", "")
case("no_stop", torch_zip(P().op(b"}").s("x").i(1).op(b"s").b), "refuse",
     "")
case("reduce_on_empty_stack", torch_zip(bytes(P().op(b"R").op(b".").b)),
     "refuse", "")
case("persid_not_tuple",
     torch_zip(bytes(P().op(b"}").s("x").i(7).op(b"Q").op(b"s").stop())),
     "either", "")
p = P().op(b"}").s("x").op(b"]")
for _ in range(1000):
    p.put(0)
p.op(b"s")
case("memo_put_1000_same", torch_zip(p.stop()), "list")

p = P().op(b"}").s("x").op(b"N").op(b"\x85" * 1000000).op(b"s")
case("tuple1_nested_1m", torch_zip(p.stop()), "refuse", "nested deeper")
p = P().op(b"}").s("x").glob("foo", "bar").op(b"N").op(b"\x85" * 1000000)
p.op(b"\x85").reduce().op(b"s")
case("opaque_args_tuple1_1m", torch_zip(p.stop()), "unsafe", "foo.bar")
p = P().op(b"}").s("x").glob("foo", "bar").mark()
p.op(b"]" * 100000).op(b"a" * 99999).tuple().reduce().op(b"s")
case("opaque_args_lists_100k", torch_zip(p.stop()), "unsafe", "foo.bar")
p = P().op(b"}").s("x").glob("foo", "bar").op(b")R" * 1000000).op(b"s")
case("call_chain_1m", torch_zip(p.stop()), "unsafe", "foo.bar")
p = P().op(b"}").s("x").op(b"]").put(1).glob("foo", "bar").op(b")").reduce()
p.get(1).op(b"b").op(b"a").op(b"s")
case("opaque_state_cycle", torch_zip(p.stop()), "unsafe", "foo.bar")

# -- hostile globals (picklescan / fickling classics); none may run
def evil(name, mod, fn, *args, proto=2):
    p = P(proto).op(b"}").mark()
    p.s("w").tensor()
    p.s("payload").call(mod, fn, *args)
    p.op(b"u")
    case(name, torch_zip(p.stop()), "unsafe", "%s.%s" % (mod, fn))


evil("os_system", "os", "system", CMD)
evil("posix_system", "posix", "system", CMD)
evil("nt_system", "nt", "system", CMD)
evil("builtins_eval", "builtins", "eval",
     "__import__('os').system(%r)" % CMD)
evil("builtins_exec", "builtins", "exec",
     "import os; os.system(%r)" % CMD)
evil("py2_builtin_eval", "__builtin__", "eval",
     "__import__('os').system(%r)" % CMD)
evil("subprocess_popen", "subprocess", "Popen", CMD)
evil("subprocess_check_output", "subprocess", "check_output", CMD)
evil("runpy_run_code", "runpy", "_run_code",
     "import os; os.system(%r)" % CMD)
evil("pty_spawn", "pty", "spawn", CMD)
evil("webbrowser_open", "webbrowser", "open", "http://127.0.0.1:9/")
evil("shutil_rmtree", "shutil", "rmtree", "/nonexistent-ptfs-hostile")
evil("importlib_import_module", "importlib", "import_module", "os")
evil("pickle_loads", "pickle", "loads", "cos\nsystem\n(S'true'\ntR.")
evil("torch_load_nested", "torch", "load", "/nonexistent.pt")
evil("numpy_load", "numpy", "load", "/nonexistent.npy")
evil("operator_attrgetter", "operator", "attrgetter", "system")
evil("socket_create_connection", "socket", "create_connection", 9)
# __import__ + getattr: the globals are builtins, the strings do the rest
p = P().op(b"}").s("payload")
p.glob("builtins", "getattr").mark()
p.call("builtins", "__import__", "os").s("system").tuple().reduce()
p.mark().s(CMD).tuple().reduce().op(b"s")
case("import_getattr", torch_zip(p.stop()), "unsafe",
     "builtins.getattr builtins.__import__")
# STACK_GLOBAL from strings (protocol 4), memoized and used twice
p = P(4).op(b"}").s("payload")
p.op(b"\x8c\x02os\x94\x8c\x06system\x94\x93\x94").mark().s(CMD).tuple()
p.reduce().op(b"s")
case("stack_global_os_system", torch_zip(p.stop()), "unsafe", "os.system")
# protocol 0 INST, protocol 1 OBJ, NEWOBJ and BUILD tricks
p = P(0).op(b"(dp0\nVpayload\n(Vtouch x\nios\nsystem\ns.")
case("inst_os_system", torch_zip(bytes(p.b)), "unsafe", "os.system")
p = P(1).op(b"}").s("payload").mark().glob("os", "system").s(CMD)
p.op(b"o").op(b"s")
case("obj_os_system", torch_zip(p.stop()), "unsafe", "os.system")
p = P().op(b"}").s("payload").glob("subprocess", "Popen").mark().s(CMD)
p.tuple().op(b"\x81").op(b"s")
case("newobj_popen", torch_zip(p.stop()), "unsafe", "subprocess.Popen")
p = P().op(b"}").s("payload").glob("collections", "OrderedDict").op(b")")
p.reduce().mark().s("__setstate__").glob("os", "system").op(b"d")
p.op(b"b").op(b"s")
case("build_setstate_os_system", torch_zip(p.stop()), "unsafe", "os.system")
# a global nobody uses (popped), and one only in the memo
p = P().glob("os", "system").op(b"0").glob("builtins", "exec").put(7)
p.op(b"0").op(b"}")
case("unreachable_globals", torch_zip(p.stop()), "unsafe",
     "os.system builtins.exec")
# the payload hidden inside a tensor's metadata (backward hooks)
p = P().op(b"}").s("w").glob("torch._utils", "_rebuild_tensor_v2").mark()
p.mark().s("storage").glob("torch", "FloatStorage").s("0").s("cpu").i(4)
p.tuple().op(b"Q").i(0).ints((4,)).ints((1,)).op(b"\x89")
p.call("os", "system", CMD).tuple().reduce().op(b"s")
case("hooks_os_system", torch_zip(p.stop()), "unsafe_or_refuse", "os.system")
# an extension code: the registry is the loader's, nothing to name
p = P().op(b"}").s("ext").op(b"\x82\x01").op(b"s")
case("ext1_code", torch_zip(p.stop()), "either", "")

# -- legacy (torch < 1.6) streams
def legacy(obj_pickle, keys=(), storages=b""):
    magic = P().i(0x1950a86a20f9469cfc6c).stop()
    proto = P().i(1001).stop()
    info = P().op(b"}").s("little_endian").op(b"\x88").op(b"s").stop()
    p = P().op(b"]")
    for k in keys:
        p.s(k).op(b"a")
    return magic + proto + info + obj_pickle + p.stop() + storages


p = P().op(b"}").s("payload").call("os", "system", CMD).op(b"s")
case("legacy_os_system", legacy(p.stop()), "unsafe", "os.system")
p = P().op(b"}").s("w")
p.glob("torch._utils", "_rebuild_tensor_v2").mark().mark().s("storage")
p.glob("torch", "FloatStorage").s("1").s("cpu").i(4).op(b"N").tuple()
p.op(b"Q").i(0).ints((4,)).ints((1,)).op(b"\x89")
p.glob("collections", "OrderedDict").op(b")").reduce().tuple().reduce()
p.op(b"s")
case("legacy_storage_count_lies",
     legacy(p.stop(), ("1",), struct.pack("<q", 1 << 40) + bytes(16)),
     "refuse", "")
case("legacy_truncated", legacy(p.stop())[:60], "refuse", "")

# -- things that are not torch.save archives
ts = torch_zip(P().op(b"}").stop(),
               {"constants.pkl": P().call("os", "system", CMD).stop(),
                "code/__torch__.py": b"import os\nos.system('x')\n"})
case("torchscript_with_payload", ts, "either", "")
tar = bytearray(1024)
tar[257:262] = b"ustar"
case("tar_era_header_only", bytes(tar), "refuse", "")
case("pytorch1_container", b"PYTORCH1" + bytes(64), "refuse", "")

with open(os.path.join(OUT, "manifest.tsv"), "w") as f:
    for row in manifest:
        f.write("\t".join(row) + "\n")
print("%d files in %s" % (len(manifest), OUT))
