#!/usr/bin/env python3
"""edit_check.py BASE - the torch side of the editing tests (edit.sh).

A worker: it loads torch once, then reads requests on stdin, one per line,
tab-separated, and answers each with one line on stdout, "ok<TAB>SUMMARY"
or "FAIL<TAB>SUMMARY", after writing the details (one problem a line) to
REPORT.  Relative paths are taken from BASE (the scratch directory as this
python sees it).  The first line it prints is "ready<TAB>torch X, ...".

  gen      REPORT                     write the input checkpoints into in/
                                      and the payload files into pay/
  act      REPORT CASE INPUT MNT      edit through the mount with python
                                      (r+b, numpy.memmap, mmap, storages,
                                      rename, errno checks) and read back
  readback REPORT CASE INPUT MNT PATH...  the files PATH of the mount hold
                                      what EXPECT[CASE] says (a PATH that
                                      starts with "!" must not exist)
  verify   REPORT CASE INPUT RESULT   torch.load(RESULT) equals EXPECT[CASE]
                                      applied to torch.load(INPUT): values
                                      bit for bit, dtypes, shapes, strides,
                                      offsets, storage sharing, tensor
                                      identity, Parameter, requires_grad,
                                      _metadata, python values; also with
                                      weights_only=True when INPUT loads so;
                                      torch 2.x: mmap=True with computed
                                      storage offsets when .format_version
                                      is kept
  archive  REPORT CASE INPUT RESULT   the zip: CRCs (testzip), prefix, 64-byte
                                      data alignment, stored records, torch's
                                      record order, storages dropped and
                                      renumbered 0..N-1 in first-use order,
                                      data.pkl copied when only values changed

EXPECT[CASE] is the same edit that edit.sh makes through the mount, made
in python on torch.load of the input.  Runs under torch 1.13 and 2.x.
"""
import collections
import errno
import mmap
import os
import pickle
import signal
import struct
import sys
import time
import traceback
import warnings
import tarfile
import zipfile

# Answers go to the original stdout; anything else written to fd 1 (torch's
# UCX warnings at import, for one) goes to stderr instead.
ANSWERS = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
os.dup2(2, 1)

import numpy as np      # noqa: E402
import torch            # noqa: E402
from torch import nn    # noqa: E402

warnings.simplefilter("ignore")

TIMEOUT = int(os.environ.get("PTFS_CHECK_TIMEOUT", "60"))
MAX_SHOWN = 20
MEMMAP_ROW = [100.5, -2.25, 3.0, 4.75, 0.001, -7.0]


class Timeout(Exception):
    pass


class Problem(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout("request took longer than %d s" % TIMEOUT)


# ------------------------------------------------------------------ helpers

def pattern(n, seed):
    return ((np.arange(n, dtype=np.int64) * 131 + seed * 17 + 7) & 0xFF) \
        .astype(np.uint8).tobytes()


def pay(name):
    with open(os.path.join("pay", name), "rb") as f:
        return f.read()


def load(path, **kw):
    kw.setdefault("weights_only", False)
    return torch.load(path, map_location="cpu", **kw)


def ustorage(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    s = t.storage()
    return getattr(s, "_storage", s)


def storage_u8(t):
    s = ustorage(t)
    x = torch.empty(0, dtype=torch.uint8)
    x.set_(s, 0, (s.nbytes(),), (1,))
    return x


def storage_bytes(t):
    if ustorage(t).nbytes() == 0:
        return b""
    return storage_u8(t).numpy().tobytes()


def tbytes(t):
    """The bytes of t.contiguous(), as the mount shows the tensor."""
    c = t.detach().contiguous()
    if c.numel() == 0:
        return b""
    return c.reshape(-1).view(torch.uint8).numpy().tobytes()


def u8(data):
    return torch.from_numpy(np.frombuffer(bytes(data), np.uint8).copy())


def write_bytes(t, off, data):
    """What a write of @data at byte @off of the tensor's file does: the
    bytes land in the storage through the view."""
    isz = t.element_size()
    if t.is_contiguous():
        s = storage_u8(t)
        base = t.storage_offset() * isz + off
        s[base:base + len(data)] = u8(data)
        return
    c = t.detach().contiguous().clone()
    u = c.reshape(-1).view(torch.uint8)
    u[off:off + len(data)] = u8(data)
    with torch.no_grad():
        t.copy_(c)


def set_bytes(t, data):
    if len(data) != t.numel() * t.element_size():
        raise Problem("test bug: %d bytes for a tensor of %d"
                      % (len(data), t.numel() * t.element_size()))
    write_bytes(t, 0, data)


def short(b):
    b = bytes(b)
    return b[:12].hex() + ("..." if len(b) > 12 else "") + " (%d B)" % len(b)


def first_diff(a, b):
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i
    return min(len(a), len(b))


def diff_text(have, want):
    if have is None or want is None:
        return "%s, expected %s" % ("no data" if have is None else short(have),
                                    "no data" if want is None else short(want))
    i = first_diff(have, want)
    return "differ from byte %d: have %s, expected %s" % (
        i, short(have[i:i + 12]), short(want[i:i + 12]))


def tensors(obj, seen=None):
    """Every tensor reachable from obj (containers and __dict__)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from tensors(v, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from tensors(v, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        yield from tensors(vars(obj), seen)


def nstorages(obj):
    keys = set()
    for t in tensors(obj):
        if not plain_strided(t):
            continue
        s = ustorage(t)
        if s.nbytes() > 0:
            keys.add(s.data_ptr())
    return len(keys)


def rename_key(d, old, new, in_place):
    """d[old] renamed to new: at its place, or moved to the end."""
    items = list(d.items())
    if not in_place:
        v = d.pop(old)
        d[new] = v
        return
    d.clear()
    for k, v in items:
        d[new if k == old else k] = v


def value_text(v):
    if isinstance(v, str):
        return (v + "\n").encode()
    if isinstance(v, bytes):
        return v
    return (repr(v) + "\n").encode()


def errno_name(e):
    return errno.errorcode.get(e, str(e))


def expect_errno(probs, what, fn, allowed):
    """fn() must fail with one of the errnos in allowed."""
    try:
        fn()
    except OSError as ex:
        if ex.errno not in allowed:
            probs.append("%s: failed with %s (%s), expected %s" % (
                what, errno_name(ex.errno), ex.strerror,
                "/".join(errno_name(a) for a in allowed)))
        return
    probs.append("%s: succeeded, expected it to fail with %s" % (
        what, "/".join(errno_name(a) for a in allowed)))


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


# ------------------------------------------------------------- the inputs

def gen(report):
    os.makedirs("in", exist_ok=True)
    os.makedirs("pay", exist_ok=True)
    torch.manual_seed(0)

    # views.pt: views of one storage, tied objects, dtypes, flags
    mat = torch.arange(48, dtype=torch.float32).reshape(8, 6) * 0.5
    shared = torch.randn(5)
    views = {
        "mat": mat, "mat_t": mat.t(), "rows": mat[2:5], "cols": mat[:, 1:3],
        "tied_a": shared, "tied_b": shared,
        "vec": torch.randn(1000),
        "big": torch.randn(300000),
        "i64": torch.arange(10, dtype=torch.int64),
        "f16": torch.randn(7).half(),
        "flags": torch.tensor([True, False, True]),
        "p": nn.Parameter(torch.randn(4)),
        "frozen": nn.Parameter(torch.randn(3), requires_grad=False),
        "g": torch.randn(3).requires_grad_(),
    }
    torch.save(views, "in/views.pt")

    # sd.pt: a module's state_dict (_metadata, tied embed/head, BN buffers)
    net = make_net()
    torch.save(net.state_dict(), "in/sd.pt")

    # train.pt: model + a real Adam state after one step + python values
    net = make_net()
    opt = torch.optim.Adam(net.parameters(), lr=0.001)
    loss = net.head(net.block(net.embed(torch.tensor([1, 2, 3])))).sum()
    loss.backward()
    opt.step()
    train = {
        "model": net.state_dict(), "optimizer": opt.state_dict(),
        "epoch": 3, "lr": 0.001, "tag": "run-1", "flag": True,
        "meta": {"notes": "first run", "scores": [0.5, 0.25],
                 "blob": b"\x00\x01ab"},
    }
    torch.save(train, "in/train.pt")

    # sgd.pt: SGD with momentum (momentum buffers) for the rm -r test
    net = make_net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    net.block(net.embed(torch.tensor([4, 5]))).sum().backward()
    opt.step()
    torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(),
                "epoch": 3}, "in/sgd.pt")

    # dp.pt: DataParallel naming (module.0.weight ...), 24 storages
    seq = nn.Sequential(*[nn.Linear(3, 3) for _ in range(12)])
    torch.save(nn.DataParallel(seq).state_dict(), "in/dp.pt")

    # root.pt: the checkpoint is one tensor (no key to add, move, remove)
    torch.save(torch.arange(4.0), "in/root.pt")
    # lists.pt: list items
    torch.save({"layers": [torch.full((2,), float(i)) for i in range(3)],
                "hist": [1.0, 2.0, 3.0]}, "in/lists.pt")
    # slists.pt: long lists of python scalars, each one value file in a
    # mount (docs/editing.md, "Lists of scalars"), and lists that are not
    import random
    random.seed(7)
    rng = random.getstate()
    torch.save({"rng": rng, "mt": rng[1],
                "hist": [0.1 * i for i in range(20)] + [float("inf"), -0.0],
                "flags": [True, False, None] * 6,
                "loss": [i / 3 for i in range(20)] +
                [float("inf"), -0.0, 1e-300, 1e22, 2 ** 63 - 1, -2 ** 63],
                "short": [1, 2, 3], "mixed": [1] * 20 + ["a"],
                "big": [2 ** 70] + [1] * 20, "nested": [[1, 2]] * 20,
                "w": torch.ones(2)}, "in/slists.pt")

    # legacy_views.pt: the same in the format of torch < 1.6
    torch.save(views, "in/legacy_views.pt",
               _use_new_zipfile_serialization=False)

    # payloads
    files = {
        "p8.bin": pattern(8, 1), "p16.bin": pattern(16, 2),
        "p3000.bin": pattern(3000, 3),
        "vec_new.bin": torch.linspace(-1, 1, 1000).numpy().tobytes(),
        "vec_short.bin": torch.linspace(-1, 1, 999).numpy().tobytes(),
        "vec_long.bin": torch.linspace(-1, 1, 1001).numpy().tobytes(),
        "mat_t_new.bin": torch.arange(100, 148, dtype=torch.float32)
        .numpy().tobytes(),
        "newt.bin": torch.arange(1, 7, dtype=torch.float32).numpy().tobytes(),
        "newp.bin": torch.tensor([0.5, -0.5, 2.0, 8.0]).numpy().tobytes(),
        "raw7.bin": pattern(7, 4),
        "bad.txt": b"abc\n",
        "i42.bin": struct.pack("<q", 42), "one.bin": b"\x01",
        "big_new.bin": pattern(1200000, 5),
    }
    for name, data in files.items():
        with open(os.path.join("pay", name), "wb") as f:
            f.write(data)
    return "ok", "%d checkpoints, %d payloads" % (len(os.listdir("in")),
                                                   len(files)), []


def make_net():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.block = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6),
                                       nn.ReLU(), nn.Linear(6, 4))
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.embed.weight
    return Net()


# ------------------------------------------------- the expected edits
# Each takes torch.load of the input and returns the expected object, or a
# list of acceptable ones (a renamed key may keep its place or move to the
# end of its dict: docs/editing.md does not say).

def e_none(o):
    return o


def e_inplace_dd(o):
    write_bytes(o["big"], 131001, pay("p3000.bin"))
    write_bytes(o["big"], 4097, pay("p3000.bin")[:1000])
    return o


def e_inplace_rb(o):
    write_bytes(o["vec"], 12, pay("p8.bin"))
    return o


def e_inplace_memmap(o):
    with torch.no_grad():
        o["mat"][3, :] = torch.tensor(MEMMAP_ROW)
    return o


def e_inplace_mmap(o):
    write_bytes(o["i64"], 8, pay("p16.bin"))
    return o


def e_inplace_storage(o):
    write_bytes(o["tied_a"], 4, pay("p8.bin"))
    return o


def e_tied_sd(o):
    write_bytes(o["embed.weight"], 20, pay("p8.bin"))
    return o


def e_replace_vec(o):
    set_bytes(o["vec"], pay("vec_new.bin"))
    return o


def e_replace_t(o):
    set_bytes(o["mat_t"], pay("mat_t_new.bin"))
    return o


def two_ways(edit):
    """edit(o, in_place) made both ways a rename can go."""
    def fn(o):
        out = []
        for in_place in (True, False):
            x = load(CURRENT_INPUT) if out else o
            edit(x, in_place)
            out.append(x)
        return out
    return fn


@two_ways
def e_mv(o, in_place):
    rename_key(o, "block.0.weight", "first.weight", in_place)


def e_strip(o):
    items = list(o.items())
    o.clear()
    for k, v in items:
        o[k[len("module."):] if k.startswith("module.") else k] = v
    return o


def e_subtree(o):
    o["meta"]["state"] = o["optimizer"].pop("state")
    return o


def e_rm(o):
    del o["block.3.bias"]
    return o


def e_rm_r(o):
    del o["optimizer"]
    return o


def e_mkdir(o):
    o["extra"] = {}
    return o


def e_newt(o):
    o["newt"] = torch.tensor(np.frombuffer(pay("newt.bin"), np.float32)
                             .copy()).reshape(2, 3)
    o["raw"] = u8(pay("raw7.bin"))
    o["newp"] = nn.Parameter(torch.tensor(np.frombuffer(
        pay("newp.bin"), np.float32).copy()), requires_grad=True)
    o["extra"] = {"t": u8(pay("newt.bin"))}
    o["pre"] = torch.tensor(np.frombuffer(pay("newt.bin"), np.float32)
                            .copy()).reshape(2, 3)
    return o


def e_values(o):
    o["epoch"] = 8
    o["lr"] = 0.25
    o["tag"] = "hello"
    o["flag"] = False
    o["meta"]["notes"] = "two words"
    return o


def e_values_more(o):
    e_values(o)
    o["meta"]["blob"] = b"xyz"
    o["optimizer"]["param_groups"][0]["lr"] = 0.5
    return o


def e_new_values(o):
    """new files among python values are values of the literal's type;
    among tensors, and bytes that are not text, tensors as before"""
    o["meta"]["new_dropout"] = 0.1
    o["meta"]["n3"] = 3
    o["meta"]["sx"] = "x"
    o["meta"]["nb"] = True
    o["new_tag"] = "hello world"
    o["model"]["new_scale"] = u8(b"0.1\n")
    o["meta"]["raw"] = u8(pay("raw7.bin"))
    o["meta"]["notes"] = "second run"
    o["epoch"] = 9
    o["meta"]["scores"].append(0.125)
    o["meta"]["big"] = 12
    return o


@two_ways
def e_names(o, in_place):
    rename_key(o, "vec", "a/b", in_place)
    rename_key(o, "i64", "50%", in_place)
    rename_key(o, "f16", "\u00fc", in_place)
    o[".dot"] = {}


def e_rm_base(o):
    for k in ("mat", "mat_t", "cols", "tied_a"):
        del o[k]
    write_bytes(o["rows"], 0, pay("p8.bin"))
    return o


def e_tied_move(o):
    o["sub"] = {"a": o.pop("tied_a")}
    o["sub"]["mat_t"] = o.pop("mat_t")
    return o


def e_scalar(o):
    set_bytes(o["block.1.num_batches_tracked"], pay("i42.bin"))
    return o


def e_dtypes(o):
    write_bytes(o["f16"], 4, pay("p8.bin")[:2])
    write_bytes(o["flags"], 1, pay("one.bin"))
    return o


CONC_BIG = [(i * 49999 + 7, 4096 * (1 + i % 8)) for i in range(24)]


def e_concurrent(o):
    for i, (off, n) in enumerate(CONC_BIG):
        write_bytes(o["big"], off, pattern(n, 40 + i))
    for row, name, off in CONC_MAT:
        # mat starts at offset 0 of its storage
        t = o["mat"] if name == "storage" else o[name]
        write_bytes(t, off, pattern(24, 80 + row))
    return o


# (mat row, file written, offset in that file); rows = mat[2:5]
CONC_MAT = [(0, "mat", 0), (6, "mat", 6 * 24), (3, "rows", 24),
            (7, "storage", 7 * 24)]


def e_replace_big(o):
    set_bytes(o["big"], pay("big_new.bin"))
    return o


@two_ways
def e_two_sessions(o, in_place):
    write_bytes(o["vec"], 0, pay("p8.bin"))
    rename_key(o, "i64", "ints", in_place)


@two_ways
def e_open_rename(o, in_place):
    write_bytes(o["vec"], 0, pay("p8.bin"))
    rename_key(o, "vec", "vec2", in_place)
    del o["f16"]


def e_sweep(o):
    o["zz_extra"] = {}
    return o


def e_legacy(o):
    write_bytes(o["vec"], 0, pay("p8.bin"))
    return o


def e_epoch8(o):
    o["epoch"] = 8
    return o


SLIST_HIST = [1, 2.5, True, None, -3e-05, float("-inf"), 7] + [0.5] * 11


def e_scalar_lists(o):
    o["hist"] = list(SLIST_HIST)
    o["mt"] = (5, 6, 7)
    del o["rng"]
    return o


def e_lists(o):
    o["hist"][2] = 9.5
    del o["layers"][1]
    del o["hist"][0]
    return o


@two_ways
def e_persist(o, in_place):
    write_bytes(o["vec"], 0, pay("p8.bin"))
    rename_key(o, "i64", "ints", in_place)
    del o["f16"]


@two_ways
def e_mix(o, in_place):
    """in place, rename, rm -r, new tensor in one mount."""
    write_bytes(o["model"]["embed.weight"], 0, pay("p8.bin"))
    rename_key(o, "epoch", "step", in_place)
    del o["optimizer"]
    o["newt"] = torch.tensor(np.frombuffer(pay("newt.bin"), np.float32)
                             .copy()).reshape(2, 3)


EXPECT = {
    "untouched": e_none, "untouched_fuse": e_none, "swapfiles": e_none,
    "refused": e_none, "value_invalid": e_none, "replace_bad": e_none,
    "discard": e_none, "changed_ckpt": e_none, "commit_unchanged": e_none,
    "inplace_dd": e_inplace_dd, "inplace_rb": e_inplace_rb,
    "inplace_memmap": e_inplace_memmap, "inplace_mmap": e_inplace_mmap,
    "inplace_storage": e_inplace_storage, "tied_sd": e_tied_sd,
    "replace_cp": e_replace_vec, "replace_rsync": e_replace_vec,
    "replace_rsync_inplace": e_replace_vec, "replace_rename": e_replace_vec,
    "replace_t": e_replace_t, "commit": e_inplace_rb,
    "mv": e_mv, "strip_prefix": e_strip, "subtree": e_subtree, "rm": e_rm,
    "rm_r_adam": e_rm_r, "rm_r_sgd": e_rm_r, "mkdir": e_mkdir,
    "newt": e_newt, "values": e_values_more, "output": e_epoch8,
    "names": e_names, "rm_base": e_rm_base, "tied_move": e_tied_move,
    "scalar": e_scalar, "dtypes": e_dtypes, "sweep": e_sweep,
    "legacy": e_legacy, "concurrent": e_concurrent,
    "replace_big": e_replace_big, "two_sessions": e_two_sessions,
    "open_rename": e_open_rename, "newt_bad": e_epoch8,
    "lists": e_lists, "scalar_lists": e_scalar_lists, "persist": e_persist,
    "persist_overlay": e_persist, "mix": e_mix, "new_values": e_new_values,
}
# cases whose pickle must stay byte for byte (only tensor values changed)
VALUES_ONLY = {
    "untouched", "untouched_fuse", "swapfiles", "refused", "value_invalid",
    "replace_bad", "discard", "inplace_dd", "inplace_rb", "inplace_memmap",
    "inplace_mmap", "inplace_storage", "tied_sd", "replace_cp",
    "replace_rsync", "replace_rsync_inplace", "replace_rename", "replace_t",
    "commit", "scalar", "dtypes", "concurrent", "replace_big",
}
CURRENT_INPUT = None


def expected(case, inp):
    global CURRENT_INPUT
    if case not in EXPECT:
        raise Problem("test bug: no expectation for case %r" % case)
    CURRENT_INPUT = inp
    e = EXPECT[case](load(inp))
    return e if isinstance(e, list) else [e]


# ------------------------------------------------------------ comparison

def is_storage(o):
    return (isinstance(o, getattr(torch.storage, "TypedStorage", ()))
            or isinstance(o, getattr(torch, "UntypedStorage", ()))
            or isinstance(o, getattr(torch, "_UntypedStorage", ())))


def bare_storage_bytes(s):
    u = getattr(s, "_untyped_storage", None) or getattr(s, "_storage", s)
    if u.nbytes() == 0:
        return b""
    x = torch.empty(0, dtype=torch.uint8)
    x.set_(u, 0, (u.nbytes(),), (1,))
    return x.numpy().tobytes()


def tdata(t):
    """Comparable bytes of any tensor, None for meta tensors."""
    t = t.detach()
    if t.device.type == "meta":
        return None
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_quantized:
        t = t.int_repr()
    if hasattr(t, "resolve_conj"):
        t = t.resolve_conj().resolve_neg()
    return tbytes(t)


def plain_strided(t):
    return (t.layout == torch.strided and not t.is_quantized
            and t.device.type != "meta")


class Cmp:
    def __init__(self):
        self.errs = []
        self.obj = {}       # id(result tensor) -> (id(expected), path)
        self.obj_e = {}
        self.sto = {}       # result storage ptr -> (expected ptr, path)
        self.sto_e = {}
        self.seen = set()   # (id(result), id(expected)) containers done
        self.keep = []      # keeps temporaries alive while ids are used

    def err(self, path, msg):
        self.errs.append("%s: %s" % (path or "[root]", msg))

    def cmp(self, r, e, path=""):
        if len(self.errs) > MAX_SHOWN:
            return
        if isinstance(e, torch.Tensor):
            if not isinstance(r, torch.Tensor):
                self.err(path, "a %s, expected a tensor" % type(r).__name__)
                return
            self.tensor(r, e, path)
            return
        if type(r) is not type(e):
            self.err(path, "a %s (%s), expected a %s (%s)" % (
                type(r).__name__, short_repr(r), type(e).__name__,
                short_repr(e)))
            return
        if isinstance(e, (dict, list, tuple, set, frozenset)) or \
                hasattr(e, "__dict__"):
            if (id(r), id(e)) in self.seen:
                return
            self.seen.add((id(r), id(e)))
        if isinstance(e, np.ndarray):
            if r.dtype != e.dtype or r.shape != e.shape or \
                    r.tobytes() != e.tobytes():
                self.err(path, "ndarray %s %s, expected %s %s" % (
                    r.dtype, r.shape, e.dtype, e.shape))
        elif is_storage(e):
            rb, eb = bare_storage_bytes(r), bare_storage_bytes(e)
            if getattr(r, "dtype", None) != getattr(e, "dtype", None) or \
                    rb != eb:
                self.err(path, "storage %s %s" % (
                    getattr(r, "dtype", ""), diff_text(rb, eb)))
        elif isinstance(e, dict):
            rk, ek = list(r.keys()), list(e.keys())
            if rk != ek:
                miss = [k for k in ek if k not in r]
                extra = [k for k in rk if k not in e]
                if miss or extra:
                    self.err(path, "keys missing %s, unexpected %s" % (
                        miss[:8], extra[:8]))
                else:
                    self.err(path, "key order %s, expected %s" % (
                        rk[:12], ek[:12]))
            for k in ek:
                if k in r:
                    self.cmp(r[k], e[k], "%s/%s" % (path, k))
            rm, em = getattr(r, "_metadata", None), getattr(e, "_metadata",
                                                            None)
            if rm != em or type(rm) is not type(em):
                self.err(path, "_metadata %s, expected %s" % (
                    short_repr(rm), short_repr(em)))
            rd = {k: v for k, v in getattr(r, "__dict__", {}).items()
                  if k != "_metadata"}
            ed = {k: v for k, v in getattr(e, "__dict__", {}).items()
                  if k != "_metadata"}
            if rd or ed:
                self.cmp(rd, ed, path + "/.__dict__")
        elif isinstance(e, (list, tuple)):
            if len(r) != len(e):
                self.err(path, "%d items, expected %d" % (len(r), len(e)))
            for i, (a, b) in enumerate(zip(r, e)):
                self.cmp(a, b, "%s/%d" % (path, i))
        elif isinstance(e, (set, frozenset)):
            if sorted(map(repr, r)) != sorted(map(repr, e)):
                self.err(path, "%s, expected %s" % (short_repr(r),
                                                    short_repr(e)))
        elif isinstance(e, float):
            if struct.pack("<d", r) != struct.pack("<d", e):
                self.err(path, "%r, expected %r" % (r, e))
        elif isinstance(e, (int, str, bytes, type(None))):
            if r != e:
                self.err(path, "%s, expected %s" % (short_repr(r),
                                                    short_repr(e)))
        elif hasattr(e, "__dict__") and not isinstance(e, type) and \
                isinstance(vars(e), dict):
            self.cmp(vars(r), vars(e), path + "/.__dict__")
        else:
            rr, er = repr(r), repr(e)
            if " at 0x" in er or " object at " in er:
                return      # an address: only the type can be compared
            if rr != er:
                self.err(path, "%s, expected %s" % (short_repr(r),
                                                    short_repr(e)))

    def tensor(self, r, e, path):
        if type(r) is not type(e):
            self.err(path, "a %s, expected a %s" % (type(r).__name__,
                                                    type(e).__name__))
        meta = []
        props = [("dtype", lambda t: t.dtype),
                 ("shape", lambda t: tuple(t.shape)),
                 ("layout", lambda t: t.layout),
                 ("device", lambda t: t.device.type),
                 ("requires_grad", lambda t: t.requires_grad),
                 ("is_quantized", lambda t: t.is_quantized)]
        if plain_strided(e):
            props += [("stride", lambda t: tuple(t.stride())),
                      ("storage_offset", lambda t: t.storage_offset())]
        if hasattr(e, "is_conj"):
            props += [("is_conj", lambda t: t.is_conj()),
                      ("is_neg", lambda t: t.is_neg())]
        if e.is_quantized:
            props += [("qscheme", lambda t: t.qscheme())]
        for what, fn in props:
            try:
                a, b = fn(r), fn(e)
            except Exception as ex:
                a, b = "error %s" % type(ex).__name__, fn(e)
            if a != b:
                meta.append("%s %s, expected %s" % (what, a, b))
        rd = getattr(r, "__dict__", {})
        ed = getattr(e, "__dict__", {})
        if meta:
            self.err(path, "; ".join(meta))
        else:
            try:
                rb, eb = tdata(r), tdata(e)
            except Exception as ex:
                rb = eb = None
                self.err(path, "cannot compare values: %s: %s" % (
                    type(ex).__name__, ex))
            if rb != eb:
                self.err(path, "values " + diff_text(rb, eb))
        if rd or ed:
            self.cmp(dict(rd), dict(ed), path + "/.__dict__")
        # the same tensor object at several places
        ir, ie = id(r), id(e)
        if ir in self.obj or ie in self.obj_e:
            want = self.obj.get(ir, (None, None))
            have = self.obj_e.get(ie, (None, None))
            if want[0] != ie or have[0] != ir:
                self.err(path, "tensor identity: in the result it is %s, "
                         "in the expected object %s" % (
                             "the object at " + want[1] if want[1]
                             else "a new object",
                             "the object at " + have[1] if have[1]
                             else "a new object"))
            return
        self.obj[ir] = (ie, path)
        self.obj_e[ie] = (ir, path)
        if meta or not plain_strided(e):
            return
        # storage sharing
        sr, se = ustorage(r), ustorage(e)
        if sr.nbytes() != se.nbytes():
            self.err(path, "storage of %d bytes, expected %d" % (
                sr.nbytes(), se.nbytes()))
            return
        if se.nbytes() == 0:
            return
        kr, ke = sr.data_ptr(), se.data_ptr()
        if kr in self.sto or ke in self.sto_e:
            want = self.sto.get(kr, (None, None))
            have = self.sto_e.get(ke, (None, None))
            if want[0] != ke or have[0] != kr:
                self.err(path, "storage sharing: in the result it shares "
                         "with %s, in the expected object with %s" % (
                             want[1] or "nothing", have[1] or "nothing"))
        else:
            self.sto[kr] = (ke, path)
            self.sto_e[ke] = (kr, path)
            rb, eb = storage_bytes(r), storage_bytes(e)
            if rb != eb:
                self.err(path, "storage bytes " + diff_text(rb, eb))


def short_repr(v):
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def compare_any(res, alts):
    """[] when res equals one of alts, else the problems against alts[0]."""
    first = None
    for e in alts:
        c = Cmp()
        c.cmp(res, e)
        if not c.errs:
            return []
        if first is None:
            first = c.errs
    return first


# ------------------------------------------------------------- commands

def verify(report, case, inp, res):
    alts = expected(case, inp)
    probs = []
    try:
        r = load(res)
    except Exception as ex:
        raise Problem("torch.load(%s) fails: %s: %s" % (
            res, type(ex).__name__, str(ex).splitlines()[0] if str(ex)
            else ""))
    probs += compare_any(r, alts)
    # weights_only=True must keep working
    try:
        load(inp, weights_only=True)
        wo = True
    except Exception:
        wo = False
    if wo:
        try:
            rw = load(res, weights_only=True)
            probs += ["weights_only=True: " + p
                      for p in compare_any(rw, alts)]
        except Exception as ex:
            probs.append("torch.load(weights_only=True) fails on the result "
                         "but works on the input: %s: %s" % (
                             type(ex).__name__,
                             (str(ex).splitlines() or [""])[0][:200]))
    if not zipfile.is_zipfile(res):
        probs.append("the result is not a zip archive")
        return "FAIL", probs[0], probs
    # torch 2.x: .format_version promises torch's exact layout
    with zipfile.ZipFile(res) as z:
        names = z.namelist()
    mm = ""
    if any(n.endswith("/.format_version") for n in names):
        try:
            from torch.utils.serialization import config
            old = config.load.calculate_storage_offsets
            config.load.calculate_storage_offsets = True
            try:
                rm = load(res, mmap=True)
            finally:
                config.load.calculate_storage_offsets = old
            probs += ["mmap=True, calculate_storage_offsets: " + p
                      for p in compare_any(rm, alts)]
            mm = ", mmap+offsets"
        except ImportError:
            pass
        except Exception as ex:
            probs.append("torch.load(mmap=True) with calculate_storage_"
                         "offsets fails: %s: %s" % (type(ex).__name__, ex))
    if probs:
        return "FAIL", probs[0], probs
    n = sum(1 for _ in tensors(r))
    return "ok", "torch.load equals the expected edit (%d tensors%s%s)" % (
        n, ", weights_only" if wo else "", mm), []


class _Any:
    def __new__(cls, *a, **k):
        return object.__new__(cls)

    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Any()

    def __setstate__(self, s):
        pass

    def __setitem__(self, k, v):
        pass

    def append(self, x):
        pass

    def extend(self, x):
        pass


class KeyOrder(pickle.Unpickler):
    """Runs a data.pkl without importing anything; records the storage
    keys in the order the pickle first uses them."""

    def __init__(self, f):
        super().__init__(f)
        self.keys = []

    def find_class(self, module, name):
        return _Any

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage":
            k = str(pid[2])
            if k not in self.keys:
                self.keys.append(k)
        return _Any()


def pickle_keys(data):
    import io
    u = KeyOrder(io.BytesIO(data))
    u.load()
    return u.keys


def archive(report, case, inp, res):
    alts = expected(case, inp)
    want_n = nstorages(alts[0])
    probs = []
    # a legacy (torch < 1.6) input is written back as the zip torch 2.1
    # writes: data.pkl, byteorder (legacy data is little-endian),
    # data/0..N-1, version, under one prefix
    legacy_in = not zipfile.is_zipfile(inp)
    if case == "sweep" and not legacy_in:
        with zipfile.ZipFile(inp) as zo:
            pk = [n for n in zo.namelist() if n.endswith("/data.pkl")]
            want_n = len(set(pickle_keys(zo.read(pk[0]))))
    with zipfile.ZipFile(res) as z:
        bad = z.testzip()
        if bad is not None:
            probs.append("zipfile testzip(): bad CRC in %s" % bad)
        infos = z.infolist()
        if legacy_in:
            names = [i.filename for i in infos]
            pre = names[0].split("/")[0]
            rel = [n[len(pre) + 1:] for n in names]
            orel = ["data.pkl", "byteorder"] + [
                n for n in rel if n.startswith("data/")] + ["version"]
            if [n for n in names if not n.startswith(pre + "/")]:
                probs.append("records not under the prefix %r" % pre)
            pkl = z.read(pre + "/data.pkl") if "data.pkl" in rel else b""
            opkl = None
        else:
          with zipfile.ZipFile(inp) as zo:
            oinfos = zo.infolist()
            onames = [i.filename for i in oinfos]
            opre = onames[0].split("/")[0]
            names = [i.filename for i in infos]
            pre = names[0].split("/")[0]
            if pre != opre:
                probs.append("prefix %r, expected the original's %r" % (
                    pre, opre))
            for n in names:
                if not n.startswith(pre + "/"):
                    probs.append("record %r is not under the prefix %r" % (
                        n, pre))
            rel = [n[len(pre) + 1:] for n in names]
            orel = [n[len(opre) + 1:] for n in onames]
            # the small records other than data.pkl keep their bytes
            for n in orel:
                if n.startswith("data/") or n in ("data.pkl",
                                                  ".data/serialization_id"):
                    continue
                if n not in rel:
                    probs.append("record %r of the original is missing" % n)
                elif z.read(pre + "/" + n) != zo.read(opre + "/" + n):
                    probs.append("record %r: %s, the original has %s" % (
                        n, short(z.read(pre + "/" + n)),
                        short(zo.read(opre + "/" + n))))
            pkl = z.read(pre + "/data.pkl") if "data.pkl" in rel else b""
            opkl = zo.read(opre + "/data.pkl")
        for i in infos:
            if i.compress_type != 0:
                probs.append("%s: compression method %d, expected 0 (stored)"
                             % (i.filename, i.compress_type))
        with open(res, "rb") as f:
            for i in infos:
                f.seek(i.header_offset)
                h = f.read(30)
                if h[:4] != b"PK\x03\x04":
                    probs.append("%s: no local header at %d" % (
                        i.filename, i.header_offset))
                    continue
                nl, xl = struct.unpack("<HH", h[26:30])
                off = i.header_offset + 30 + nl + xl
                if off % 64:
                    probs.append("%s: data at offset %d, not a multiple of 64"
                                 % (i.filename, off))
    data = [n for n in rel if n.startswith("data/")]
    odata = [n for n in orel if n.startswith("data/")]
    keys = [n[5:] for n in data]
    if case in VALUES_ONLY:
        if rel != orel:
            probs.append("records %s, expected the original's %s" % (
                rel, orel))
        if pkl != opkl:
            probs.append("data.pkl (%d B) is not the original's (%d B) byte "
                         "for byte, but only tensor values changed" % (
                             len(pkl), len(opkl)))
    else:
        nd = [n for n in rel if not n.startswith("data/")]
        ond = [n for n in orel if not n.startswith("data/")]
        if nd != ond:
            probs.append("records other than data/ are %s, expected %s "
                         "(the original's order)" % (nd, ond))
        idx = [i for i, n in enumerate(rel) if n.startswith("data/")]
        oidx = [i for i, n in enumerate(orel) if n.startswith("data/")]
        if idx and idx != list(range(idx[0], idx[0] + len(idx))):
            probs.append("the data/ records are not contiguous: %s" % rel)
        if idx and oidx:
            before = rel[idx[0] - 1] if idx[0] else None
            obefore = orel[oidx[0] - 1] if oidx[0] else None
            if before != obefore:
                probs.append("data/ records follow %r, in the original %r"
                             % (before, obefore))
        want = [str(i) for i in range(len(keys))]
        numeric = keys == want
        strsort = keys == sorted(want)
        fmt = ".format_version" in orel
        if sorted(keys) != sorted(want):
            probs.append("storage keys %s, expected 0..%d" % (
                keys[:30], len(keys) - 1))
        elif not numeric and (fmt or not strsort):
            probs.append("data/ records in the order %s, expected %s" % (
                keys[:30], "numeric" if fmt else "numeric or string-sorted"))
        if len(keys) != want_n:
            probs.append("%d storage records, expected %d (the storages the "
                         "edited object still uses; the original had %d)" % (
                             len(keys), want_n, len(odata)))
        try:
            pk = pickle_keys(pkl)
            if pk != want:
                probs.append("data.pkl uses the storage keys in the order "
                             "%s, expected 0..N-1 in first-use order" % pk[:30])
            if set(pk) != set(keys):
                probs.append("data.pkl references keys %s, the records are %s"
                             % (sorted(set(pk) - set(keys))[:8],
                                sorted(set(keys) - set(pk))[:8]))
        except Exception as ex:
            probs.append("data.pkl does not unpickle: %s: %s" % (
                type(ex).__name__, ex))
    if probs:
        return "FAIL", probs[0], probs
    return "ok", "prefix %s, %d records, %d storages, CRCs valid, aligned%s" % (
        pre, len(rel), len(keys),
        ", data.pkl kept" if case in VALUES_ONLY else ", keys 0..N-1"), []


def readback(report, case, inp, mnt, *paths):
    alts = expected(case, inp)
    e = alts[0]
    probs = []
    for p in paths:
        absent = p.startswith("!")
        p = p.lstrip("!")
        fp = os.path.join(mnt, p)
        if absent:
            if os.path.lexists(fp):
                probs.append("%s: exists, expected it gone" % p)
            continue
        obj = e
        for k in p.split("/"):
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        want = tbytes(obj) if isinstance(obj, torch.Tensor) \
            else value_text(obj)
        try:
            have = read_file(fp)
        except OSError as ex:
            probs.append("%s: %s" % (p, ex))
            continue
        if have != want:
            probs.append("%s: %s" % (p, diff_text(have, want)))
    if probs:
        return "FAIL", probs[0], probs
    return "ok", "%d files read back as expected" % len(paths), []


def act(report, case, inp, mnt):
    fn = ACTS.get(case)
    if fn is None:
        raise Problem("test bug: no action for case %r" % case)
    e = expected(case, inp)[0]
    orig = load(inp)
    probs = []
    try:
        summary = fn(mnt, e, orig, probs)
    except OSError as ex:
        probs.append("could not go on: %s" % ex)
    if probs:
        return "FAIL", probs[0], probs
    return "ok", summary, []


def check_now(probs, mnt, e, names, how):
    """Each mount file in names holds the expected tensor's bytes now."""
    for n in names:
        try:
            have = read_file(os.path.join(mnt, n))
        except OSError as ex:
            probs.append("%s %s: %s" % (how, n, ex))
            continue
        if have != tbytes(e[n]):
            probs.append("%s %s after the write: %s" % (
                how, n, diff_text(have, tbytes(e[n]))))


def warm(mnt, names):
    """Read the files once, so their pages are cached before a write."""
    for n in names:
        read_file(os.path.join(mnt, n))


def act_rb(mnt, e, orig, probs):
    warm(mnt, ["vec"])
    with open(os.path.join(mnt, "vec"), "r+b") as f:
        f.seek(12)
        f.write(pay("p8.bin"))
    check_now(probs, mnt, e, ["vec"], "fresh read of")
    return "open('r+b') write of 8 bytes at 12, read back"


def mapped(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    finally:
        os.close(fd)


def act_memmap(mnt, e, orig, probs):
    views = ["mat", "mat_t", "rows", "cols"]
    warm(mnt, views)
    before = {n: mapped(os.path.join(mnt, n)) for n in ("mat_t", "cols")}
    m = np.memmap(os.path.join(mnt, "mat"), np.float32, "r+", shape=(8, 6))
    m[3, :] = np.array(MEMMAP_ROW, np.float32)
    m.flush()
    del m
    check_now(probs, mnt, e, views, "fresh read of")
    for n, mm in before.items():
        if mm[:] != tbytes(e[n]):
            probs.append("mmap of %s made before the write: %s" % (
                n, diff_text(mm[:], tbytes(e[n]))))
        mm.close()
    key = os.getxattr(os.path.join(mnt, "mat"), "user.storage").decode()
    st = read_file(os.path.join(mnt, ".ptfs/storages", key))
    if st != storage_bytes(e["mat"]):
        probs.append(".ptfs/storages/%s after the write: %s" % (
            key, diff_text(st, storage_bytes(e["mat"]))))
    return ("numpy.memmap r+ row write; mat, mat_t, rows, cols, an older "
            "mmap and .ptfs/storages/%s show it" % key)


def act_mmap(mnt, e, orig, probs):
    p = os.path.join(mnt, "i64")
    warm(mnt, ["i64"])
    fd = os.open(p, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, 0)
        mm[8:24] = pay("p16.bin")
        mm.flush()
        mm.close()
    finally:
        os.close(fd)
    check_now(probs, mnt, e, ["i64"], "fresh read of")
    return "writable mmap.mmap, 16 bytes at 8, read back"


def act_storage(mnt, e, orig, probs):
    warm(mnt, ["tied_a", "tied_b"])
    before = mapped(os.path.join(mnt, "tied_b"))
    key = os.getxattr(os.path.join(mnt, "tied_a"), "user.storage").decode()
    with open(os.path.join(mnt, ".ptfs/storages", key), "r+b") as f:
        f.seek(4)
        f.write(pay("p8.bin"))
    check_now(probs, mnt, e, ["tied_a", "tied_b"], "fresh read of")
    if before[:] != tbytes(e["tied_b"]):
        probs.append("mmap of tied_b made before the write: %s" % diff_text(
            before[:], tbytes(e["tied_b"])))
    before.close()
    return "8 bytes into .ptfs/storages/%s; tied_a, tied_b (and an older " \
        "mmap) show them" % key


def act_replace_bad(mnt, e, orig, probs):
    p = os.path.join(mnt, "vec")
    # shorter: close() fails with EINVAL
    f = open(p, "wb", buffering=0)
    try:
        f.write(pay("vec_short.bin"))
    except OSError as ex:
        probs.append("writing 3996 bytes over vec (4000 B): write failed "
                     "with %s, expected close() to fail" % errno_name(ex.errno))
    os.stat(p)      # the kernel caches the staged size, 3996
    expect_errno(probs, "close() after writing 3996 bytes over vec (4000 B)",
                 f.close, (errno.EINVAL,))
    if os.stat(p).st_size != 4000:
        probs.append("vec is %d bytes after close() refused the 3996 bytes: "
                     "the kernel kept the refused size"
                     % os.stat(p).st_size)
    # longer: the write fails with EFBIG (at once or after a short write)
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.stat(p)      # the kernel caches the size O_TRUNC staged, 0
    data, got = pay("vec_long.bin"), None
    try:
        off = 0
        while off < len(data):
            off += os.write(fd, data[off:])
    except OSError as ex:
        got = ex.errno
    if got != errno.EFBIG:
        probs.append("writing 4004 bytes over vec (4000 B): %s, expected "
                     "EFBIG" % ("all written" if got is None
                                else errno_name(got)))
    try:
        os.close(fd)
    except OSError:
        pass        # EINVAL if nothing of it was kept: fine
    # what nothing was written to is refused by the release, which the
    # kernel sends after close() returns
    for _ in range(100):
        if os.stat(p).st_size == 4000:
            break
        time.sleep(0.1)
    else:
        probs.append("vec is %d bytes 10 s after the refused O_TRUNC: the "
                     "kernel kept the refused size" % os.stat(p).st_size)
    have = read_file(p)
    if have == data[:len(have)] and have != tbytes(e["vec"]):
        probs.append("vec holds the first %d bytes of the 4004-byte write: "
                     "a short write was accepted before EFBIG, so close() "
                     "found the right size and replaced the values"
                     % len(have))
    check_now(probs, mnt, e, ["vec"], "after the failed replacements,")
    return "short write: close EINVAL; long write: EFBIG; vec unchanged"


def act_rename(mnt, e, orig, probs):
    tmp = os.path.join(mnt, ".vec.tmp1")
    with open(tmp, "wb") as f:
        f.write(pay("vec_short.bin"))
    expect_errno(probs, "rename of a 3996-byte temp file over vec (4000 B)",
                 lambda: os.rename(tmp, os.path.join(mnt, "vec")),
                 (errno.EINVAL,))
    try:
        os.unlink(tmp)
    except OSError as ex:
        probs.append("unlink of the refused temp file: %s" % ex)
    tmp = os.path.join(mnt, ".vec.tmp2")
    with open(tmp, "wb") as f:
        f.write(pay("vec_new.bin"))
    try:
        os.rename(tmp, os.path.join(mnt, "vec"))
    except OSError as ex:
        probs.append("rename of a 4000-byte temp file over vec: %s" % ex)
    check_now(probs, mnt, e, ["vec"], "fresh read of")
    for n in (".vec.tmp1", ".vec.tmp2"):
        if os.path.lexists(os.path.join(mnt, n)):
            probs.append("%s still exists after the rename/unlink" % n)
    return "temp file + os.rename: wrong size EINVAL, right size replaces"


def act_refused(mnt, e, orig, probs):
    v = os.path.join(mnt, "vec")
    key = os.getxattr(v, "user.storage").decode()
    sp = os.path.join(mnt, ".ptfs/storages", key)
    ck = [
        # a cast between floating dtypes is made (tests/fs/edit/dtype.sh); to
        # an integer dtype it would be a reinterpretation
        ("setxattr user.dtype int32 of an existing float32 tensor",
         lambda: os.setxattr(v, "user.dtype", b"int32"), (errno.ENOTSUP,)),
        ("setxattr user.dtype of no dtype",
         lambda: os.setxattr(v, "user.dtype", b"float33"), (errno.EINVAL,)),
        ("setxattr user.shape of an existing tensor",
         lambda: os.setxattr(v, "user.shape", b"2,500"), (errno.EPERM,)),
        ("hard link", lambda: os.link(v, os.path.join(mnt, "vec2")),
         (errno.EPERM,)),
        ("symlink", lambda: os.symlink("vec", os.path.join(mnt, "lnk")),
         (errno.EPERM,)),
        ("chown", lambda: os.chown(v, 1, 1), (errno.EPERM,)),
        ("truncate an existing tensor to a larger size",
         lambda: os.truncate(v, 8000), (errno.EFBIG, errno.EINVAL)),
        # truncate(2) by path: no close() will come to apply it later
        ("truncate an existing tensor to a smaller size by path",
         lambda: os.truncate(v, 100), (errno.EINVAL,)),
        ("truncate a storage to a smaller size",
         lambda: os.truncate(sp, 16), (errno.EINVAL, errno.EFBIG,
                                       errno.EPERM)),
        ("create a file under .ptfs",
         lambda: open(os.path.join(mnt, ".ptfs/new"), "wb"), (errno.EPERM,)),
        ("open .ptfs/version for writing",
         lambda: open(os.path.join(mnt, ".ptfs/version"), "r+b"),
         (errno.EPERM,)),
        ("unlink .ptfs/version",
         lambda: os.unlink(os.path.join(mnt, ".ptfs/version")),
         (errno.EPERM,)),
        ("unlink a storage",
         lambda: os.unlink(sp), (errno.EPERM,)),
        ("mkdir under .ptfs",
         lambda: os.mkdir(os.path.join(mnt, ".ptfs/d")), (errno.EPERM,)),
        ("rename .ptfs", lambda: os.rename(os.path.join(mnt, ".ptfs"),
                                           os.path.join(mnt, "x")),
         (errno.EPERM, errno.EBUSY, errno.EINVAL)),
    ]
    for what, fn, allowed in ck:
        expect_errno(probs, what, fn, allowed)
    for n in ("vec2", "lnk", "x"):
        if os.path.lexists(os.path.join(mnt, n)):
            probs.append("%s exists after a refused call" % n)
    check_now(probs, mnt, e, ["vec"], "after the refused calls,")
    return "%d refused calls fail with the documented errno" % len(ck)


def act_ro(mnt, e, orig, probs):
    v = os.path.join(mnt, "vec")
    ro = (errno.EROFS,)
    ck = [
        ("open('r+b')", lambda: open(v, "r+b"), ro),
        ("open('wb')", lambda: open(v, "wb"), ro),
        ("create", lambda: open(os.path.join(mnt, "new"), "wb"), ro),
        ("mkdir", lambda: os.mkdir(os.path.join(mnt, "d")), ro),
        ("unlink", lambda: os.unlink(v), ro),
        ("rename", lambda: os.rename(v, os.path.join(mnt, "v2")), ro),
        ("setxattr", lambda: os.setxattr(v, "user.requires_grad", b"True"),
         ro),
        ("truncate", lambda: os.truncate(v, 0), ro),
    ]
    for what, fn, allowed in ck:
        expect_errno(probs, what, fn, allowed)
    check_now(probs, mnt, e, ["vec"], "after the refused writes,")
    return "%d kinds of change fail with EROFS" % len(ck)


def act_value_invalid(mnt, e, orig, probs):
    for name, text in (("epoch", "abc\n"), ("lr", "x1\n"),
                       ("flag", "maybe\n")):
        f = open(os.path.join(mnt, name), "w")
        try:
            f.write(text)
        except OSError as ex:
            probs.append("writing %r into %s: %s, expected close() to "
                         "fail" % (text, name, ex))
        expect_errno(probs, "close() after writing %r into %s" % (text, name),
                     f.close, (errno.EINVAL,))
    for name in ("epoch", "lr", "flag"):
        have = read_file(os.path.join(mnt, name))
        if have != value_text(e[name]):
            probs.append("%s after the refused edit: %r, expected %r" % (
                name, have, value_text(e[name])))
    return "close() fails with EINVAL for int, float and bool; values kept"


def act_concurrent(mnt, e, orig, probs):
    import threading
    key = os.getxattr(os.path.join(mnt, "mat"), "user.storage").decode()
    jobs = [("big", off, pattern(n, 40 + i))
            for i, (off, n) in enumerate(CONC_BIG)]
    for row, name, off in CONC_MAT:
        f = ".ptfs/storages/" + key if name == "storage" else name
        jobs.append((f, off, pattern(24, 80 + row)))
    barrier = threading.Barrier(len(jobs))
    errs = []

    def run(job):
        f, off, data = job
        try:
            fd = os.open(os.path.join(mnt, f), os.O_WRONLY)
            try:
                barrier.wait(10)
                if os.pwrite(fd, data, off) != len(data):
                    errs.append("%s: short pwrite at %d" % (f, off))
            finally:
                os.close(fd)
        except Exception as ex:
            errs.append("%s at %d: %s" % (f, off, ex))

    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    probs += errs
    check_now(probs, mnt, e, ["big", "mat", "mat_t", "rows", "cols"],
              "fresh read of")
    return "%d threads wrote at once into big, mat, rows and the storage " \
        "(first writes to the storages)" % len(jobs)


def act_open_rename(mnt, e, orig, probs):
    with open(os.path.join(mnt, "vec"), "r+b") as f:
        os.rename(os.path.join(mnt, "vec"), os.path.join(mnt, "vec2"))
        f.write(pay("p8.bin"))
    with open(os.path.join(mnt, "f16"), "r+b") as f:
        os.unlink(os.path.join(mnt, "f16"))
        f.write(pay("p8.bin")[:4])
    if os.path.lexists(os.path.join(mnt, "f16")):
        probs.append("f16 is back after a write through an fd opened "
                     "before the unlink")
    check_now(probs, mnt, e, ["vec2"], "fresh read of")
    return "write through an fd after rename (lands) and after unlink " \
        "(no resurrection)"


ACTS = {
    "concurrent": act_concurrent, "open_rename": act_open_rename,
    "value_invalid": act_value_invalid,
    "inplace_rb": act_rb, "inplace_memmap": act_memmap,
    "inplace_mmap": act_mmap, "inplace_storage": act_storage,
    "commit": act_rb, "replace_bad": act_replace_bad,
    "replace_rename": act_rename, "refused": act_refused, "ro": act_ro,
}
# cases run on several inputs share the ro action
for _c in ("ro_opt", "ro_bind", "ro_immutable", "second_mount"):
    ACTS[_c] = act_ro
    EXPECT[_c] = e_none


def sweep_list(report):
    """The fixtures in in/fx/ that torch loads, zip format, dict root."""
    names, why = [], collections.Counter()
    for name in sorted(os.listdir("in/fx")):
        p = os.path.join("in/fx", name)
        if not zipfile.is_zipfile(p):
            # legacy files (torch < 1.6) are written back as zip; the
            # tar-era format mounts read-only
            if tarfile.is_tarfile(p):
                why["tar-era"] += 1
                continue
        else:
            with zipfile.ZipFile(p) as z:
                tails = {n.split("/", 1)[-1] for n in z.namelist()}
            if "constants.pkl" in tails or any(t.startswith("code/")
                                               for t in tails):
                why["TorchScript"] += 1
                continue
        try:
            o = load(p)
        except Exception:
            why["torch.load fails"] += 1
            continue
        if not isinstance(o, dict):
            why["root not a dict"] += 1
            continue
        names.append(name)
    return "ok", "%d fixtures with a dict root (left out: %s)" % (
        len(names), ", ".join("%d %s" % (n, w) for w, n in sorted(
            why.items())) or "none"), names


def selftest(report):
    """The checks must catch wrong results (negative controls)."""
    os.makedirs("selftest", exist_ok=True)
    probs = []

    def must_fail(what, fn, *args, needle=""):
        try:
            st, summ, det = fn(None, *args)
        except Problem as ex:
            st, summ, det = "FAIL", str(ex), [str(ex)]
        if st == "ok":
            probs.append("%s: the check passed (%s)" % (what, summ))
        elif needle and not any(needle in d for d in det + [summ]):
            probs.append("%s: failed without mentioning %r: %s" % (
                what, needle, summ))

    # an archive zipfile writes: same records, no alignment
    with zipfile.ZipFile("in/views.pt") as z, \
            zipfile.ZipFile("selftest/views.pt", "w") as w:
        for i in z.infolist():
            w.writestr(i.filename, z.read(i.filename))
    must_fail("unaligned re-zip", archive, "untouched", "in/views.pt",
              "selftest/views.pt", needle="not a multiple of 64")
    must_fail("edit missing", verify, "inplace_rb", "in/views.pt",
              "in/views.pt", needle="values differ")
    must_fail("storage not dropped", archive, "rm", "in/sd.pt", "in/sd.pt",
              needle="storage records")
    o = load("in/views.pt")
    o["tied_b"] = o["tied_b"].clone()
    torch.save(o, "selftest/untied.pt")
    must_fail("tied tensor untied", verify, "untouched", "in/views.pt",
              "selftest/untied.pt", needle="identity")
    o = load("in/sd.pt")
    o["head.weight"] = o["head.weight"].clone()
    torch.save(o, "selftest/sd.pt")
    must_fail("tied storage split", verify, "untouched", "in/sd.pt",
              "selftest/sd.pt", needle="sharing")
    o = load("in/views.pt")
    o["p"] = o["p"].detach()
    torch.save(o, "selftest/noparam.pt")
    must_fail("Parameter lost", verify, "untouched", "in/views.pt",
              "selftest/noparam.pt", needle="Parameter")
    o = load("in/sd.pt")
    o._metadata = None
    torch.save(o, "selftest/sd.pt")
    must_fail("_metadata lost", verify, "untouched", "in/sd.pt",
              "selftest/sd.pt", needle="_metadata")
    if probs:
        return "FAIL", probs[0], probs
    return "ok", "7 wrong results are all caught", []


COMMANDS = {"selftest": (selftest, 0), "sweep_list": (sweep_list, 0), "gen": (gen, 0), "verify": (verify, 3), "archive": (archive, 3),
            "act": (act, 3), "readback": (readback, -3)}


def main(argv):
    if len(argv) != 2:
        print("usage: edit_check.py BASE", file=sys.stderr)
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
        args = f[2:]
        if cmd is None or len(f) < 2 or (
                cmd[1] >= 0 and len(args) != cmd[1]) or (
                cmd[1] < 0 and len(args) < -cmd[1]):
            print("FAIL\ttest bug: bad request %r" % line, file=ANSWERS,
                  flush=True)
            continue
        report = f[1]
        details = []
        signal.alarm(TIMEOUT)
        try:
            status, summary, details = cmd[0](report, *args)
        except (Problem, Timeout) as ex:
            status, summary = "FAIL", str(ex)
        except Exception as ex:
            status, summary = "FAIL", "edit_check.py %s: %s: %s" % (
                f[0], type(ex).__name__, ex)
            details = traceback.format_exc().splitlines()[-6:]
        finally:
            signal.alarm(0)
        try:
            with open(report, "w") as r:
                for d in details:
                    r.write(d + "\n")
        except OSError:
            pass
        print("%s\t%s" % (status, summary.replace("\n", " ")), file=ANSWERS,
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
