#!/usr/bin/env python3
"""formats_check.py BASE - the torch side of tests/fs/formats/formats.sh: deflated
and big-endian checkpoints through real mounts.

A worker like edit_check.py: it loads torch once, prints "ready<TAB>...",
then answers requests read on stdin (one per line, tab-separated) with one
line "ok<TAB>SUMMARY" or "FAIL<TAB>SUMMARY", after writing the details (one
problem a line) to REPORT.  Relative paths are taken from BASE (the scratch
directory as this python sees it).

  gen      REPORT                   write in/ (checkpoints saved by this
                                    torch), def/ (every zip of in/ and fx/
                                    recompressed with zipfile ZIP_DEFLATED),
                                    be/ (big-endian copies: every storage
                                    swapped per element, byteorder "big")
                                    and the payloads in pay/
  be_mount REPORT ORIG BE MORIG MBE the mount of big-endian BE next to the
                                    mount of its little-endian ORIG: raw
                                    bytes swapped per element, the same
                                    xattrs but user.byteorder=big, .npy
                                    descriptors ">..." with the same
                                    values, identical text views; then
                                    torch.load(BE) against torch.load(ORIG)
                                    (2.x swaps back: same values; 1.13
                                    ignores the record: the raw bytes)
  verify   REPORT CASE INPUT RESULT torch.load(RESULT) is EXPECT[CASE] of
                                    torch.load(INPUT), and RESULT is
                                    written the way write-back writes: every
                                    record stored, CRCs right, data 64-byte
                                    aligned, byteorder record as INPUT's
  stubbed  REPORT FILE MNT          for a real fixture torch.load cannot
                                    load (a module it pickled is missing:
                                    torchtext, gymnasium, peft): load it
                                    with every such class stubbed, and the
                                    tensors torch finds must be exactly
                                    the tensor files of the mount (dtype,
                                    shape and bytes)

Runs under torch 1.13 (python 3.11, numpy 1.24) and 2.x.
"""
import collections
import hashlib
import io
import os
import pickle
import signal
import struct
import sys
import traceback
import warnings
import zipfile

ANSWERS = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
os.dup2(2, 1)

import numpy as np      # noqa: E402
import torch            # noqa: E402

warnings.simplefilter("ignore")

TIMEOUT = int(os.environ.get("PTFS_CHECK_TIMEOUT", "120"))
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
HOG = 96 << 20          # the deflated storage the memory check reads


class Timeout(Exception):
    pass


class Problem(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout("request took longer than %d s" % TIMEOUT)


# ------------------------------------------------------------------ helpers

# bytes swapped as one unit: the element, or each part of a complex one
UNIT = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
        "complex64": 4, "complex128": 8, "int64": 8, "int32": 4, "int16": 2,
        "int8": 1, "uint8": 1, "bool": 1, "qint8": 1, "quint8": 1,
        "qint32": 4}
STORAGE_UNIT = {"DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2,
                "BFloat16Storage": 2, "ComplexFloatStorage": 4,
                "ComplexDoubleStorage": 8, "LongStorage": 8,
                "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1,
                "ByteStorage": 1, "BoolStorage": 1, "QInt8Storage": 1,
                "QUInt8Storage": 1, "QInt32Storage": 4}


def swap(data, unit):
    if unit == 1 or not data:
        return bytes(data)
    a = np.frombuffer(data, dtype=np.dtype("<u%d" % unit))
    return a.byteswap().tobytes()


def load(path, **kw):
    kw.setdefault("weights_only", False)
    return torch.load(path, map_location="cpu", **kw)


def ustorage(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    s = t.storage()
    return getattr(s, "_storage", s)


def tbytes(t):
    """The bytes of t.contiguous(), as the mount shows the tensor."""
    c = t.detach().contiguous()
    if c.numel() == 0:
        return b""
    if c.is_quantized:
        c = c.int_repr()
    return c.reshape(-1).view(torch.uint8).numpy().tobytes()


def dtname(t):
    return str(t.dtype).replace("torch.", "")


def tensors(obj, path=""):
    """(path, tensor) for every tensor in obj, in a stable order."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from tensors(v, "%s/%s" % (path, k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from tensors(v, "%s/%d" % (path, i))


def short(b):
    return b[:16].hex() + ("..." if len(b) > 16 else "")


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def same_bytes(probs, what, have, want):
    if have != want:
        i = first_diff(have, want)
        probs.append("%s: %d bytes, expected %d; first difference at %d: "
                     "%s, expected %s" % (what, len(have), len(want), i,
                                          short(have[i:]), short(want[i:])))
        return False
    return True


def read(path):
    with open(path, "rb") as f:
        return f.read()


def result(probs, summary):
    if probs:
        return "FAIL", probs[0], probs
    return "ok", summary, []


# ------------------------------------------------------ archives we write

def torch_layout(records, align=64):
    """A zip of (name, data) in torch.save's own layout (torch-format.md
    section 9; layout_check.py): stored, FB padding, descriptors."""
    M = 0xFFFFFFFF
    out, cd = bytearray(), bytearray()
    for name, data in records:
        nb = name.encode()
        size, c = len(data), len(out)
        assert size < M and c < M, "small archives only"
        start = c + 30 + len(nb) + 4
        pad = (align - start % align) % align
        extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        flags = 0x0800 | (0x0008 if size else 0)
        crc = zipfile.crc32(data) & M
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, flags, 0, 0, 0,
                           0, 0, 0, len(nb), len(extra))
        out += nb + extra + data
        if size:
            out += struct.pack("<IIII", 0x08074B50, crc, size, size)
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, flags, 0,
                          0, 0, crc, size, size, len(nb), 0, 0, 0, 0, 0, c)
        cd += nb
    cdofs, n = len(out), len(records)
    out += cd
    z64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 0x002D, 0, 0,
                       n, n, len(cd), cdofs)
    out += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(cd), cdofs,
                       0)
    return bytes(out)


def deflate_copy(src, dst, which=None, level=None):
    """Rewrite zip @src as @dst with zipfile: records (all, or those
    @which(name) picks) ZIP_DEFLATED, the others stored."""
    with zipfile.ZipFile(src) as zi:
        kw = {} if level is None else {"compresslevel": level}
        with zipfile.ZipFile(dst, "w", **kw) as zo:
            for info in zi.infolist():
                data = zi.read(info)
                ct = zipfile.ZIP_DEFLATED if which is None or \
                    which(info.filename) else zipfile.ZIP_STORED
                zo.writestr(info.filename, data, compress_type=ct)


class Anything:
    """Stands for any object data.pkl builds."""

    def __init__(self, *a, **k):
        pass

    def __setitem__(self, k, v):
        pass

    def __setstate__(self, state):
        pass

    def append(self, x):
        pass

    def extend(self, x):
        pass


class PidScan(pickle.Unpickler):
    """Reads data.pkl without torch objects: records each storage key's
    storage class."""

    def __init__(self, f):
        super().__init__(f)
        self.classes = {}

    def find_class(self, module, name):
        if module.startswith("torch") and name.endswith("Storage"):
            return type(name, (), {})
        return Anything

    def persistent_load(self, pid):
        self.classes[str(pid[2])] = pid[1].__name__
        return None


def big_endian_copy(src, dst):
    """@src (a torch.save zip) with every storage swapped per element and
    the byteorder record "big" (added after data.pkl when missing, where
    torch 2.x writes it).  Returns the number of storages swapped."""
    with zipfile.ZipFile(src) as z:
        infos = z.infolist()
        prefix = infos[0].filename.split("/", 1)[0]
        scan = PidScan(io.BytesIO(z.read(prefix + "/data.pkl")))
        scan.load()
        recs = []
        for info in infos:
            rel = info.filename[len(prefix) + 1:]
            data = z.read(info)
            if rel.startswith("data/") and rel[5:] in scan.classes:
                cls = scan.classes[rel[5:]]
                if cls not in STORAGE_UNIT:
                    raise Problem("%s: storage class %s" % (src, cls))
                data = swap(data, STORAGE_UNIT[cls])
            elif rel == "byteorder":
                data = b"big"
            recs.append((info.filename, data))
            if rel == "data.pkl" and prefix + "/byteorder" not in \
                    z.namelist():
                recs.append((prefix + "/byteorder", b"big"))
    with open(dst, "wb") as f:
        f.write(torch_layout(recs))
    return len(scan.classes)


# ------------------------------------------------------------------- gen

def make_net():
    g = torch.Generator().manual_seed(6)
    w = torch.randn(64, 32, generator=g)
    emb = torch.randn(100, 16, generator=g).to(torch.float64)
    sd = collections.OrderedDict()
    sd["fc.weight"] = w
    sd["fc.weight_t"] = w.t()
    sd["fc.bias"] = torch.randn(64, generator=g)
    sd["emb"] = emb
    sd["emb_slice"] = emb[10:20, 3:9]
    sd["tied"] = emb
    sd["half"] = torch.randn(37, generator=g).half()
    sd["bf16"] = torch.randn(5, 7, generator=g).to(torch.bfloat16)
    sd["i8"] = torch.arange(-50, 50, dtype=torch.int8)
    sd["i16"] = torch.arange(-300, 300, 7, dtype=torch.int16)
    sd["i32"] = torch.arange(1000, dtype=torch.int32) * 100003
    sd["i64"] = torch.arange(40, dtype=torch.int64) * (1 << 40) - 7
    sd["u8"] = torch.arange(256, dtype=torch.uint8)
    sd["mask"] = torch.arange(30) % 3 == 0
    sd["cplx"] = torch.complex(torch.randn(9, generator=g),
                               torch.randn(9, generator=g))
    sd["empty"] = torch.zeros(0, 4)
    sd["scalar"] = torch.tensor(3.25)
    # 3 MiB that deflate hardly shrinks: several input chunks
    sd["noisy"] = torch.randn(768 * 1024, generator=g)
    # 4 MiB that deflate shrinks 1000 times: many output chunks per input
    sd["zeros"] = torch.zeros(1024 * 1024)
    sd["epoch"] = 7
    return sd


def gen(report):
    for d in ("in", "def", "be", "pay"):
        os.makedirs(d, exist_ok=True)
    torch.save(make_net(), "in/net.pt")
    hog = np.resize(np.arange(251, dtype=np.uint8), HOG)
    torch.save({"hog": torch.from_numpy(hog)}, "in/hog.pt")
    with open("pay/hog.sha256", "w") as f:
        f.write(hashlib.sha256(hog.tobytes()).hexdigest() + "\n")
    del hog
    ndef = 0
    names = sorted(os.listdir("fx")) if os.path.isdir("fx") else []
    for name in ["net.pt", "hog.pt"] + names:
        src = os.path.join("in" if name in ("net.pt", "hog.pt") else "fx",
                           name)
        if not zipfile.is_zipfile(src):
            continue
        with zipfile.ZipFile(src) as z:
            rels = {n.split("/", 1)[-1] for n in z.namelist()}
        if "data.pkl" not in rels or "constants.pkl" in rels:
            continue            # broken, or TorchScript: not ours here
        deflate_copy(src, os.path.join("def", name))
        ndef += 1
    # only the storages deflated, at level 9; the other records stored
    deflate_copy("in/net.pt", "def/net_st.pt",
                 which=lambda n: "/data/" in n, level=9)
    # real fixtures that need stubbed classes to load (stub.list)
    nstub = 0
    with open("stub.list", "w") as f:
        for name in names:
            if not name.startswith("real-"):
                continue
            try:
                load(os.path.join("fx", name))
            except (ImportError, AttributeError):
                f.write(name + "\n")
                nstub += 1
            except Exception:
                pass
    nbe = 0
    for src, dst in (("in/net.pt", "be/net.pt"),
                     ("fx/t113-dtypes.pt", "be/t113-dtypes.pt"),
                     ("fx/t214-dtypes.pt", "be/t214-dtypes.pt"),
                     ("fx/t113-views.pt", "be/t113-views.pt"),
                     ("fx/t214-views.pt", "be/t214-views.pt")):
        if os.path.exists(src):
            big_endian_copy(src, dst)
            nbe += 1
    # payloads of the edits formats.sh makes
    with open("pay/eight.bin", "wb") as f:
        f.write(bytes([0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]))
    with open("pay/be_one_five.bin", "wb") as f:
        f.write(struct.pack(">f", 1.5))
    with open("pay/new_be.bin", "wb") as f:
        f.write(struct.pack(">3f", 1.0, 2.0, -3.5))
    np.save("pay/emb_new.npy", (np.arange(1600, dtype=np.float64)
                                 .reshape(100, 16) / 7 - 30))
    return "ok", "%d deflated and %d big-endian copies, made with torch " \
        "%s; %d real fixtures need stubs to load" % (
            ndef + 1, nbe, torch.__version__, nstub), []


# ----------------------------------------------------- big-endian mounts

def mount_files(root):
    """Regular files of a mount (not .ptfs), relative paths, sorted."""
    out = []
    for d, dirs, files in os.walk(root):
        if d == root and ".ptfs" in dirs:
            dirs.remove(".ptfs")
        for f in files:
            out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def npy_native(path):
    a = np.load(path)
    if a.dtype.names:   # complex32 as a structured pair: compare raw
        return a.tobytes(), a.dtype
    return a.astype(a.dtype.newbyteorder("=")).tobytes(), a.dtype


def be_mount(report, orig, be, morig, mbe):
    probs = []
    fo, fb = mount_files(morig), mount_files(mbe)
    if fo != fb:
        probs.append("files differ: %s" % sorted(set(fo) ^ set(fb))[:5])
    nt = 0
    for rel in fo:
        po, pb = os.path.join(morig, rel), os.path.join(mbe, rel)
        xo = {k: os.getxattr(po, k) for k in os.listxattr(po)}
        xb = {k: os.getxattr(pb, k) for k in os.listxattr(pb)}
        if "user.dtype" not in xo:
            same_bytes(probs, rel, read(pb), read(po))
            continue
        nt += 1
        if xb.get("user.byteorder") != b"big":
            probs.append("%s: user.byteorder %r" % (rel,
                                                    xb.get("user.byteorder")))
        xo.pop("user.byteorder", None)
        xb.pop("user.byteorder", None)
        if xo != xb:
            probs.append("%s: xattrs %s, little-endian copy %s"
                         % (rel, xb, xo))
        dt = xo["user.dtype"].decode()
        unit = UNIT.get(dt)
        if unit is None:
            probs.append("%s: test does not know dtype %s" % (rel, dt))
            continue
        same_bytes(probs, rel + " (raw, swapped)", read(pb),
                   swap(read(po), unit))
        if xo.get("user.layout", b"") == b"meta":
            continue
        hb = read(pb + ".npy")
        hl = 10 + struct.unpack("<H", hb[8:10])[0]
        descr = hb[10:hl].split(b"'descr': '", 1)[-1][:1]
        want = b"|" if unit == 1 else b">"
        if descr != want:
            probs.append("%s.npy: descr starts with %r, expected %r"
                         % (rel, descr, want))
        vo, do = npy_native(po + ".npy")
        vb, db = npy_native(pb + ".npy")
        if db != do.newbyteorder(">") and db != do:
            probs.append("%s.npy: dtype %s, little-endian copy's %s"
                         % (rel, db, do))
        same_bytes(probs, rel + ".npy (values)", vb, vo)
        same_bytes(probs, rel + ".txt", read(pb + ".txt"),
                   read(po + ".txt"))
    # torch: 2.x swaps a big-endian file back, 1.13 ignores the record
    a, b = list(tensors(load(orig))), list(tensors(load(be)))
    if [p for p, _ in a] != [p for p, _ in b]:
        probs.append("torch.load: keys %s, expected %s"
                     % ([p for p, _ in b][:5], [p for p, _ in a][:5]))
    for (path, to), (_, tb) in zip(a, b):
        want = tbytes(to)
        if not TORCH2:
            want = swap(want, UNIT[dtname(to)])
        same_bytes(probs, "torch.load %s" % path, tbytes(tb), want)
    if TORCH2:
        b2 = list(tensors(load(be, weights_only=True)))
        for (path, to), (_, tb) in zip(a, b2):
            same_bytes(probs, "weights_only %s" % path, tbytes(tb),
                       tbytes(to))
    how = "the same values" if TORCH2 else "the raw bytes (1.13 ignores " \
        "byteorder)"
    return result(probs, "%d tensors: raw bytes swapped, user.byteorder=big, "
                  ".npy and .txt equal to the little-endian copy's; "
                  "torch.load gives %s" % (nt, how))


# ---------------------------------------------------------- write-backs

def u8_of(t):
    """A uint8 tensor over all of @t's storage (shares it)."""
    s = ustorage(t)
    x = torch.empty(0, dtype=torch.uint8)
    if s.nbytes():
        x.set_(s, 0, (s.nbytes(),), (1,))
    return x


def patch_tensor(t, off, data):
    """Bytes @data at byte @off of contiguous tensor @t's file."""
    base = t.storage_offset() * t.element_size()
    u8_of(t)[base + off:base + off + len(data)] = \
        torch.tensor(list(data), dtype=torch.uint8)


def x_defl_values(o):
    patch_tensor(o["fc.weight"], 16, read("pay/eight.bin"))
    u8_of(o["emb"])[0:8] = torch.tensor(list(read("pay/eight.bin")),
                                        dtype=torch.uint8)
    return o


def x_defl_struct(o):
    del o["zeros"]
    # mv renames a key where it stands
    o = collections.OrderedDict(("bias2" if k == "fc.bias" else k, v)
                                for k, v in o.items())
    patch_tensor(o["noisy"], (1 << 20) + 3, read("pay/eight.bin"))
    return o


def x_be(o):
    # the file's bytes are big-endian: 2.x values, raw bytes for 1.13
    o["fc.bias"][2] = 1.5
    o["emb"].copy_(torch.from_numpy(np.load("pay/emb_new.npy")))
    o["newt"] = torch.tensor([1.0, 2.0, -3.5])
    return o


EXPECT = {"defl_values": x_defl_values, "defl_struct": x_defl_struct,
          "be_edit": x_be}


def archive_ok(probs, path, byteorder):
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
        if bad:
            probs.append("zipfile: bad CRC in %s" % bad)
        infos = z.infolist()
        prefix = infos[0].filename.split("/", 1)[0]
        with open(path, "rb") as f:
            for i in infos:
                if i.compress_type != zipfile.ZIP_STORED:
                    probs.append("%s: method %d, expected stored"
                                 % (i.filename, i.compress_type))
                f.seek(i.header_offset + 26)
                n, m = struct.unpack("<HH", f.read(4))
                if (i.header_offset + 30 + n + m) % 64:
                    probs.append("%s: data not 64-byte aligned"
                                 % i.filename)
        bo = None
        if prefix + "/byteorder" in z.namelist():
            bo = z.read(prefix + "/byteorder").decode()
        if bo != byteorder:
            probs.append("byteorder record %r, expected %r" % (bo, byteorder))
        return len(infos)


def to_values(obj):
    """torch 1.13 loads a big-endian file's bytes as they are: swap every
    storage in place so that @obj holds the values 2.x would load."""
    done = set()
    for _, t in tensors(obj):
        s = ustorage(t)
        if s.nbytes() == 0 or s.data_ptr() in done:
            continue
        done.add(s.data_ptr())
        u8 = u8_of(t)
        u8.copy_(torch.frombuffer(bytearray(swap(u8.numpy().tobytes(),
                                                 UNIT[dtname(t)])),
                                  dtype=torch.uint8))


def verify(report, case, inp, res):
    probs = []
    with zipfile.ZipFile(inp) as z:
        prefix = z.namelist()[0].split("/", 1)[0]
        bo = z.read(prefix + "/byteorder").decode() \
            if prefix + "/byteorder" in z.namelist() else None
    nrec = archive_ok(probs, res, bo)
    big = bo == "big" and not TORCH2
    orig = load(inp)
    if big:
        to_values(orig)
    want = EXPECT[case](orig)
    have = load(res)
    kw, kh = list(want.keys()), list(have.keys())
    if kw != kh:
        probs.append("keys %s, expected %s" % (kh, kw))
    n = 0
    for (pw, tw), (ph, th) in zip(tensors(want), tensors(have)):
        n += 1
        if pw != ph or tw.dtype != th.dtype or tw.shape != th.shape or \
                tw.stride() != th.stride():
            probs.append("%s: %s %s %s, expected %s %s %s %s" % (
                ph, th.dtype, tuple(th.shape), th.stride(), pw, tw.dtype,
                tuple(tw.shape), tw.stride()))
            continue
        wb = tbytes(tw)
        if big:
            wb = swap(wb, UNIT[dtname(tw)])
        same_bytes(probs, ph, tbytes(th), wb)
    for k in want:
        if not isinstance(want[k], torch.Tensor) and want[k] != have.get(k):
            probs.append("%s: %r, expected %r" % (k, have.get(k), want[k]))
    # tied names stay one storage
    if "tied" in have and have["tied"].data_ptr() != have["emb"].data_ptr():
        probs.append("tied and emb no longer share their storage")
    return result(probs, "%d tensors as expected; %d records, all stored, "
                  "CRCs right, 64-byte aligned, byteorder %s"
                  % (n, nrec, bo))


# ------------------------------------------- fixtures torch cannot load

class StubMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (Stub,), {})


class Stub(metaclass=StubMeta):
    """Any class or function of a module we do not have."""

    def __init__(self, *a, **k):
        self._args, self._kw = a, k

    def __setstate__(self, state):
        self._state = state

    def __call__(self, *a, **k):
        return Stub(*a, **k)

    def __setitem__(self, k, v):
        self.__dict__.setdefault("_items", {})[k] = v

    def append(self, x):
        self.__dict__.setdefault("_list", []).append(x)

    def extend(self, xs):
        self.__dict__.setdefault("_list", []).extend(xs)


def real_global(module):
    return module.split(".")[0] in ("collections", "builtins",
                                    "__builtin__", "copyreg", "_codecs") or \
        module in ("torch", "torch._utils", "torch._tensor",
                   "torch.nn.parameter", "numpy", "numpy.core.multiarray",
                   "numpy._core.multiarray")


class StubUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if real_global(module):
            try:
                return super().find_class(module, name)
            except Exception:
                pass
        return type(name, (Stub,), {"__module__": "stub." + module})


def stub_load(path):
    mod = type(sys)("pickle")
    mod.Unpickler, mod.load = StubUnpickler, pickle.load
    ser = sys.modules["torch.serialization"]
    saved = ser.pickle
    if not TORCH2:
        ser.pickle = mod    # 1.13 ignores pickle_module= (it resets it)
    try:
        return torch.load(path, map_location="cpu", pickle_module=mod,
                          weights_only=False)
    finally:
        ser.pickle = saved


def all_tensors(o, seen, out):
    if id(o) in seen:
        return
    seen.add(id(o))
    if isinstance(o, torch.Tensor):
        out.append(o)
    elif isinstance(o, dict):
        for v in o.values():
            all_tensors(v, seen, out)
    elif isinstance(o, (list, tuple, set, frozenset)):
        for v in o:
            all_tensors(v, seen, out)
    elif hasattr(o, "__dict__") and not isinstance(o, type):
        all_tensors(vars(o), seen, out)


def stubbed(report, path, mnt):
    probs = []
    ts = []
    all_tensors(stub_load(path), set(), ts)
    have = set()
    for t in ts:
        if t.layout != torch.strided or t.device.type == "meta":
            continue
        have.add((dtname(t), ",".join(str(n) for n in t.shape),
                  hashlib.sha256(tbytes(t)).hexdigest()))
    shown = set()
    nfiles = 0
    for rel in mount_files(mnt):
        p = os.path.join(mnt, rel)
        x = {k: os.getxattr(p, k).decode() for k in os.listxattr(p)}
        if "user.dtype" not in x or x.get("user.layout") == "meta":
            continue
        nfiles += 1
        shown.add((x["user.dtype"], x["user.shape"],
                   hashlib.sha256(read(p)).hexdigest()))
    for k in sorted(have - shown)[:5]:
        probs.append("torch has %s %s (sha256 %s...), the mount does not"
                     % (k[0], k[1], k[2][:12]))
    for k in sorted(shown - have)[:5]:
        probs.append("the mount shows %s %s (sha256 %s...), torch does not"
                     % (k[0], k[1], k[2][:12]))
    return result(probs, "torch with stubbed classes finds %d distinct "
                  "tensors (dtype, shape, bytes); the %d tensor files of the "
                  "mount hold exactly those" % (len(have), nfiles))


COMMANDS = {"gen": (gen, 0), "be_mount": (be_mount, 4), "verify": (verify, 3),
            "stubbed": (stubbed, 2)}


def main(argv):
    if len(argv) != 2:
        print("usage: formats_check.py BASE", file=sys.stderr)
        return 2
    os.chdir(argv[1])
    signal.signal(signal.SIGALRM, on_alarm)
    print("ready\ttorch %s, python %s, numpy %s" % (
        torch.__version__, sys.version.split()[0], np.__version__),
        file=ANSWERS, flush=True)
    for line in sys.stdin:
        f = line.rstrip("\n").split("\t")
        if f[0] == "quit":
            break
        cmd = COMMANDS.get(f[0])
        if cmd is None or len(f) < 2 or len(f) - 2 != cmd[1]:
            print("FAIL\ttest bug: bad request %r" % line, file=ANSWERS,
                  flush=True)
            continue
        details = []
        signal.alarm(TIMEOUT)
        try:
            status, summary, details = cmd[0](*f[1:])
        except (Problem, Timeout) as ex:
            status, summary = "FAIL", str(ex)
        except Exception as ex:
            status, summary = "FAIL", "formats_check.py %s: %s: %s" % (
                f[0], type(ex).__name__, ex)
            details = traceback.format_exc().splitlines()[-6:]
        finally:
            signal.alarm(0)
        try:
            with open(f[1], "w") as r:
                for d in details:
                    r.write(d + "\n")
        except OSError:
            pass
        print("%s\t%s" % (status, summary.replace("\n", " ")), file=ANSWERS,
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
