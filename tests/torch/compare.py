#!/usr/bin/env python3
"""Cross-check `ptls --json` listings against what torch.load builds.

usage: compare.py MANIFEST

MANIFEST is a tab-separated file, one line per checkpoint:
    LABEL <TAB> CHECKPOINT <TAB> STEM
Relative paths are taken from the manifest's directory.  STEM.json holds the
ptls stdout, STEM.err its stderr and STEM.rc its exit status (written by
run.sh).  Runs under the Debian torch 1.13 (python 3.11) and under torch 2.x
in the chroot; needs torch and numpy only.

Prints one line per file (ok / skip / FAIL) and finally
"N passed, N failed, N skipped"; exit status 0 only when nothing failed.
"""
import codecs
import collections
import json
import math
import os
import pickle
import struct
import sys
import tarfile
import traceback
import warnings
import zipfile

import numpy as np
import torch

warnings.simplefilter("ignore")

MAX_SHOWN = 8  # mismatches printed per file


class Mismatch(Exception):
    pass


def _bytes_escape_handler(err):
    # each invalid byte becomes U+00XX; decoding resumes at the next byte
    return chr(err.object[err.start]), err.start + 1


codecs.register_error("ptls_bytes", _bytes_escape_handler)


def escape_bytes(b):
    return bytes(b).decode("utf-8", errors="ptls_bytes")


# ---------------------------------------------------------------- navigation

def key_str(k):
    if isinstance(k, dict):
        (name, val), = k.items()
        if name == "attr":
            return "." + str(val)
        if name == "part":
            return "<" + str(val) + ">"
        return "{" + str(val) + "}"
    return repr(k)


def keys_str(keys):
    return "[" + " ".join(key_str(k) for k in keys) + "]" if keys else "[root]"


def path_tuple(keys):
    out = []
    for k in keys:
        if isinstance(k, dict):
            (name, val), = k.items()
            out.append((name, val if isinstance(val, (str, int)) else repr(val)))
        elif isinstance(k, bool):
            out.append(("repr", repr(k)))
        elif isinstance(k, int):
            out.append(("int", k))
        else:
            out.append(("str", k))
    return tuple(out)


def sparse_part(t, name):
    layout = t.layout
    if name == "size":
        return tuple(t.size())
    if layout == torch.sparse_coo:
        if name == "indices":
            return t._indices()
        if name == "values":
            return t._values()
    else:
        fn = {"crow_indices": "crow_indices", "col_indices": "col_indices",
              "ccol_indices": "ccol_indices", "row_indices": "row_indices",
              "values": "values"}.get(name)
        if fn and hasattr(t, fn):
            return getattr(t, fn)()
    raise Mismatch("no sparse part %r in a %s tensor" % (name, layout))


class SetElem:
    """Element @index of a set as ptls lists it (pickle order); Python's
    set has no order, so value entries are matched by membership."""

    def __init__(self, items, index):
        self.items, self.index = items, index


# ------------------------------------------------------------- TorchScript
#
# ptls shows a TorchScript archive as the module's attributes plus two
# parts: "code" (the code/ sources as a tree) and "constants" (the tuple in
# constants.pkl).  torch gives the module (torch.jit.load) and the constants
# its forward uses (code_with_constants); the whole constants tuple comes
# from constants.pkl through torch's own storages and rebuild functions.


class ScriptArchive:
    """torch.jit.load's module with the parts ptls adds beside it."""

    def __init__(self, module, parts, wrapped=False):
        self.module, self.parts, self.wrapped = module, parts, wrapped


class CodeDir:
    """A folder of code/: escaped name -> CodeDir or the file's bytes."""

    def __init__(self):
        self.children = {}


class ScriptStub:
    """An object of a TorchScript class (__torch__.*) in constants.pkl."""
    qualname = ""
    state = None

    def __setstate__(self, state):
        self.state = state


_STUBS = {}


def _stub_class(mod, name):
    q = mod + "." + name
    if q not in _STUBS:
        _STUBS[q] = type(name, (ScriptStub,), {"qualname": q})
    return _STUBS[q]


def escape_name(s):
    """A str key (or record name) as a file name (docs/names.md)."""
    if s == "":
        return "%"
    out = s.replace("%", "%25").replace("/", "%2F").replace("\0", "%00")
    if out.startswith("."):
        out = "%2E" + out[1:]
    return out


def typed_storage(data, dtype):
    """A TypedStorage of @dtype over a copy of @data (1.13 and 2.x)."""
    u = (torch.frombuffer(bytearray(data), dtype=torch.uint8) if data
         else torch.empty(0, dtype=torch.uint8))
    us = u.untyped_storage() if hasattr(u, "untyped_storage") \
        else u.storage()._storage
    try:
        return torch.storage.TypedStorage(wrap_storage=us, dtype=dtype,
                                          _internal=True)
    except TypeError:
        return torch.storage.TypedStorage(wrap_storage=us, dtype=dtype)


class _ConstUnpickler(pickle.Unpickler):
    """constants.pkl as torch.jit.load reads it: storages from the
    constants/ records, TorchScript classes as stubs keeping their state."""

    def __init__(self, f, zf, prefix):
        super().__init__(f)
        self.zf, self.prefix, self.cache = zf, prefix, {}

    def find_class(self, mod, name):
        if mod.startswith("__torch__"):
            return _stub_class(mod, name)
        if mod == "torch.jit._pickle":
            if name == "restore_type_tag":
                return lambda x, t=None: x
            if name.startswith("build_") and name != "build_tensor_from_id":
                return lambda x: x
        return super().find_class(mod, name)

    def persistent_load(self, pid):
        _, cls, key, _loc, _numel = pid[:5]
        if key not in self.cache:
            names = set(self.zf.namelist())
            for d in ("constants/", "data/"):
                rec = "%s/%s%s" % (self.prefix, d, key)
                if rec in names:
                    data = self.zf.read(rec)
                    break
            else:
                data = b""
            dtype = torch.uint8 if cls.__name__ == "UntypedStorage" \
                else cls.dtype
            self.cache[key] = typed_storage(data, dtype)
        return self.cache[key]


def script_archive(path, module):
    """The ScriptArchive ptls's listing of @path is compared with."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        prefix = names[0].split("/", 1)[0]
        code = CodeDir()
        for n in names:
            rel = n[len(prefix) + 1:]
            if not rel.startswith("code/") or rel.endswith(".debug_pkl"):
                continue
            comps = rel[5:].split("/")
            d = code
            for c in comps[:-1]:
                d = d.children.setdefault(escape_name(c), CodeDir())
                if not isinstance(d, CodeDir):
                    break
            else:
                d.children.setdefault(escape_name(comps[-1]), zf.read(n))
        parts = {"code": code}
        if prefix + "/constants.pkl" in names:
            with zf.open(prefix + "/constants.pkl") as f:
                parts["constants"] = _ConstUnpickler(f, zf, prefix).load()
    return ScriptArchive(module, parts)


def script_state(obj):
    """What a TorchScript object's __getstate__ gave (the pickled state)."""
    if isinstance(obj, ScriptStub):
        return obj.state
    st = obj.__getstate__()
    # ScriptObject.__getstate__ is for python's pickle: (state, qualname)
    if isinstance(st, tuple) and len(st) == 2 and isinstance(st[1], str):
        return st[0]
    return st


def script_step(obj, k):
    """step() for the TorchScript objects; NotImplemented for others."""
    kind, val = (next(iter(k.items())) if isinstance(k, dict)
                 else ("index", k))
    if isinstance(obj, ScriptArchive):
        if kind == "part" and val in obj.parts:
            return obj.parts[val]
        if kind == "part" and val == "module" and obj.wrapped:
            return obj.module
        if obj.wrapped:
            raise Mismatch("no part %r" % (val,))
        return step(obj.module, k)
    if isinstance(obj, CodeDir):
        if kind == "part" and val in obj.children:
            return obj.children[val]
        raise Mismatch("no code file %r" % (val,))
    script_module = getattr(torch.jit, "ScriptModule", ())
    if isinstance(obj, script_module):
        if kind == "attr":
            if not obj._c.hasattr(val):
                raise Mismatch("%s has no attribute %r"
                               % (obj.original_name, val))
            v = obj._c.getattr(val)
            if isinstance(v, torch._C.ScriptModule):
                return getattr(obj, val)    # the wrapper: one per module
            return v
    if isinstance(obj, (ScriptStub, getattr(torch, "ScriptObject", ()),
                        script_module)):
        st = script_state(obj)
        if kind == "part" and val == "state":
            return st
        if kind == "index" and isinstance(st, tuple):
            if isinstance(k, int) and 0 <= k < len(st):
                return st[k]
            raise Mismatch("index %r out of range for a state of %d"
                           % (k, len(st)))
        if kind == "attr" and isinstance(st, dict) and val in st:
            return st[val]
        raise Mismatch("cannot index %s with %r" % (type(obj).__name__, k))
    return NotImplemented


def step(obj, k):
    r = script_step(obj, k)
    if r is not NotImplemented:
        return r
    if isinstance(k, dict):
        (name, val), = k.items()
        if name == "attr":
            d = getattr(obj, "__dict__", None)
            if isinstance(d, dict) and val in d:
                return d[val]
            try:
                return getattr(obj, val)
            except Exception as e:
                raise Mismatch("%s has no attribute %r (%s)"
                               % (type(obj).__name__, val, e))
        if name == "part":
            if not isinstance(obj, torch.Tensor):
                raise Mismatch("part %r of a %s" % (val, type(obj).__name__))
            return sparse_part(obj, val)
        raise Mismatch("unknown key step %r" % (k,))
    if isinstance(obj, dict):
        if k in obj:
            return obj[k]
        raise Mismatch("key %r not in %s" % (k, type(obj).__name__))
    if isinstance(obj, (set, frozenset)):
        if isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(obj):
            return SetElem(obj, k)
        raise Mismatch("index %r out of range for %s of %d"
                       % (k, type(obj).__name__, len(obj)))
    if isinstance(obj, (list, tuple)):
        if isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(obj):
            return obj[k]
        raise Mismatch("index %r out of range for %s of %d"
                       % (k, type(obj).__name__, len(obj)))
    raise Mismatch("cannot index %s with %r" % (type(obj).__name__, k))


def navigate(root, keys):
    obj = root
    for i, k in enumerate(keys):
        try:
            obj = step(obj, k)
        except Mismatch as e:
            raise Mismatch("at %s: %s" % (keys_str(keys[:i + 1]), e))
    return obj


# ------------------------------------------------------------------ helpers

def ustorage(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    s = t.storage()
    return getattr(s, "_storage", s)


def storage_ptr_nbytes(t):
    s = ustorage(t)
    return s.data_ptr(), s.nbytes()


def storage_as_tensor(s):
    """A bare storage (TypedStorage or UntypedStorage) as a 1-d tensor."""
    if hasattr(s, "dtype") and hasattr(s, "_untyped_storage"):   # 2.x typed
        u, dt = s._untyped_storage, s.dtype
    elif hasattr(s, "dtype") and hasattr(s, "_storage"):         # 1.13 typed
        u, dt = s._storage, s.dtype
    else:
        u, dt = s, torch.uint8
    t = torch.empty(0, dtype=dt)
    isz = t.element_size()
    t.set_(u, 0, (u.nbytes() // isz,), (1,))
    return t


def is_storage(o):
    return (isinstance(o, getattr(torch.storage, "TypedStorage", ()))
            or isinstance(o, getattr(torch, "UntypedStorage", ()))
            or isinstance(o, getattr(torch, "_UntypedStorage", ()))
            or type(o).__name__.endswith("Storage"))


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def float_eq(a, b):
    if isinstance(b, str):
        want = {"nan": float("nan"), "inf": float("inf"),
                "-inf": float("-inf")}.get(b)
        if want is None:
            return False
        b = want
    if not isinstance(b, (int, float)) or isinstance(b, bool):
        return False
    b = float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return struct.pack("<d", a) == struct.pack("<d", b)


def global_names(obj):
    names = {str(obj)}
    mod = getattr(obj, "__module__", None)
    for attr in ("__qualname__", "__name__"):
        n = getattr(obj, attr, None)
        if mod and isinstance(n, str):
            names.add("%s.%s" % (mod, n))
    return names


def global_matches(obj, value):
    if not isinstance(value, str):
        return False
    if value in global_names(obj):
        return True
    # pickle maps python-2 names and torch resolves storage classes by name
    # alone; accept "module.name" when importing it gives the same object
    mod, _, name = value.rpartition(".")
    try:
        import _compat_pickle
        mod, name = _compat_pickle.NAME_MAPPING.get(
            (mod, name), (_compat_pickle.IMPORT_MAPPING.get(mod, mod), name))
        m = __import__(mod, fromlist=["_"])
        o = m
        for part in name.split("."):
            o = getattr(o, part)
        return o is obj
    except Exception:
        return False


def json_short(v):
    s = json.dumps(v)
    return s if len(s) <= 80 else s[:77] + "..."


def py_short(v):
    try:
        s = " ".join(repr(v).split())
    except Exception as e:
        s = "<repr failed: %s>" % e
    return s if len(s) <= 80 else s[:77] + "..."


# ----------------------------------------------------------------- per file

PLAIN_TYPES = (dict, collections.OrderedDict, list, tuple, int, float, str,
               bytes, bool, type(None))


class FileCheck:
    def __init__(self, label, path, listing):
        self.label = label
        self.path = path
        self.j = listing
        self.errors = []
        self.notes = collections.Counter()
        self.locs = {}
        self.zip = None
        self.script = None      # a ScriptArchive for TorchScript files
        self.param_ids = set()

    def err(self, msg):
        self.errors.append(msg)

    def map_location(self, storage, location):
        try:
            ptr = storage.data_ptr()
        except Exception:
            ptr = 0
        if ptr:
            self.locs[ptr] = location
        return storage

    # -- header fields
    def check_header(self):
        j = self.j
        is_zip = zipfile.is_zipfile(self.path)
        if is_zip:
            fmt = "torchscript" if script_records(self.path) else "zip"
        else:
            fmt = "tar" if tarfile.is_tarfile(self.path) else "legacy"
        if j.get("format") != fmt:
            self.err("format: ptls %s, file is %s"
                     % (json_short(j.get("format")), fmt))
            return
        if not is_zip:
            return
        self.zip = zipfile.ZipFile(self.path)
        names = self.zip.namelist()
        prefix = names[0].split("/", 1)[0] if names else None
        if j.get("prefix") != prefix:
            self.err("prefix: ptls %s, zip %s"
                     % (json_short(j.get("prefix")), json_short(prefix)))
        for rec in (prefix + "/version", prefix + "/.data/version"):
            if rec in names:
                v = int(self.zip.read(rec).decode().strip())
                if j.get("version") != v:
                    self.err("version: ptls %s, %s says %d"
                             % (json_short(j.get("version")), rec, v))
                break
        rec = prefix + "/byteorder"
        bo = self.zip.read(rec).decode().strip() if rec in names else None
        if j.get("byteorder") != bo:
            self.err("byteorder: ptls %s, zip %s"
                     % (json_short(j.get("byteorder")), json_short(bo)))
        rec = prefix + "/data.pkl"
        if rec in names:
            head = self.zip.read(rec)[:2]
            if head[:1] == b"\x80" and j.get("pickle_protocol") != head[1]:
                self.err("pickle_protocol: ptls %s, data.pkl PROTO %d"
                         % (json_short(j.get("pickle_protocol")), head[1]))

    # -- storages table
    def check_storages(self):
        self.storages = {}
        for s in self.j.get("storages", []):
            self.storages[s["key"]] = s
            rec = s.get("record")
            if self.zip is None:
                continue
            if rec is None:
                # torch.jit.load does not read empty storages' records
                if self.script is None or s.get("nbytes") != 0:
                    self.err("storage %r: no record name in a zip file"
                             % s["key"])
                continue
            try:
                info = self.zip.getinfo(rec)
            except KeyError:
                self.err("storage %r: record %r not in the zip"
                         % (s["key"], rec))
                continue
            if info.file_size != s.get("nbytes"):
                self.err("storage %r: nbytes %s, record %s has %d bytes"
                         % (s["key"], s.get("nbytes"), rec, info.file_size))

    def record_bytes(self, key):
        s = self.storages.get(key)
        if s is None or self.zip is None or s.get("record") is None:
            return None
        if "_data" not in s:
            s["_data"] = self.zip.read(s["record"])
        return s["_data"]

    # -- one tensor entry
    def check_tensor(self, e, t, where):
        def mism(what, mine, theirs):
            self.err("%s: %s: ptls %s, torch %s" % (where, what, json_short(mine),
                                                   py_short(theirs)))
        layout = e.get("layout")
        if layout == "storage":
            if not is_storage(t):
                mism("type", e.get("type"), type(t).__name__)
                return
            t = storage_as_tensor(t)
        elif not isinstance(t, torch.Tensor):
            mism("type", e.get("type"), type(t).__name__)
            return
        if dtype_name(t.dtype) != e.get("dtype"):
            mism("dtype", e.get("dtype"), dtype_name(t.dtype))
        if list(t.shape) != e.get("shape"):
            mism("shape", e.get("shape"), tuple(t.shape))
        if t.layout != torch.strided:
            self.err("%s: torch gives a %s tensor, ptls lists one leaf"
                     % (where, t.layout))
            return
        if list(t.stride()) != e.get("stride"):
            mism("stride", e.get("stride"), t.stride())
        if t.storage_offset() != e.get("offset"):
            mism("offset", e.get("offset"), t.storage_offset())
        if t.requires_grad != e.get("requires_grad"):
            mism("requires_grad", e.get("requires_grad"), t.requires_grad)
        isparam = self.is_param(t)
        if isparam != e.get("parameter"):
            mism("parameter", e.get("parameter"), isparam)
        if (e.get("type") == "Parameter") != isparam:
            mism("type", e.get("type"), type(t).__name__)
        if t.is_contiguous() != e.get("contiguous"):
            mism("contiguous", e.get("contiguous"), t.is_contiguous())
        nb = t.numel() * t.element_size()
        if nb != e.get("nbytes"):
            mism("nbytes", e.get("nbytes"), nb)
        for flag in ("conj", "neg"):
            fn = getattr(t, "is_" + flag, None)
            have = bool(fn()) if fn else False
            if have != bool(e.get(flag, False)):
                mism(flag, e.get(flag, False), have)
        cls = e.get("class")
        if cls is not None and not global_matches(type(t), cls):
            mism("class", cls, type(t))
        # layout / quantization
        want_q = layout == "quantized"
        if t.is_quantized != want_q:
            mism("layout", layout, "quantized" if t.is_quantized else "strided")
        elif want_q:
            self.check_qparams(e, t, where)
        is_meta = t.device.type == "meta"
        if (layout == "meta") != is_meta:
            mism("layout", layout, "meta" if is_meta else "not meta")
        if is_meta or layout == "meta":
            if e.get("device") not in (None, "meta") or not is_meta:
                mism("device", e.get("device"), t.device)
            return
        # storage and device
        ptr, snb = storage_ptr_nbytes(t)
        key = e.get("storage")
        s = self.storages.get(key)
        if key is None or s is None:
            self.err("%s: storage %s not in the storages table"
                     % (where, json_short(key)))
        else:
            if s.get("nbytes") != snb:
                mism("storage %r nbytes" % key, s.get("nbytes"), snb)
            if s.get("device") != e.get("device"):
                mism("device vs storage %r" % key, e.get("device"),
                     s.get("device"))
            if snb > 0:
                other = self.key_of_ptr.setdefault(ptr, key)
                if other != key:
                    self.err("%s: storage %r is the same torch storage as %r"
                             % (where, key, other))
                p = self.ptr_of_key.setdefault(key, ptr)
                if p != ptr:
                    self.err("%s: storage %r: torch has two different "
                             "storages for this key" % (where, key))
        if ptr:
            loc = self.locs.get(ptr)
            if loc is None:
                self.notes["storage not seen by map_location"] += 1
            elif loc != e.get("device"):
                mism("device", e.get("device"), loc)
        # bytes
        if self.zip is None:
            self.notes["legacy: bytes not compared"] += 1
            return
        data = self.record_bytes(key)
        if data is None:
            return
        self.check_bytes(e, t, data, where)

    def check_qparams(self, e, t, where):
        def mism(what, mine, theirs):
            self.err("%s: %s: ptls %s, torch %s" % (where, what, json_short(mine),
                                                   py_short(theirs)))
        qs = t.qscheme()
        qn = str(qs).replace("torch.", "")
        if qn != e.get("qscheme"):
            mism("qscheme", e.get("qscheme"), qn)
        if qs in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            if not float_eq(t.q_scale(), e.get("q_scale")):
                mism("q_scale", e.get("q_scale"), t.q_scale())
            if t.q_zero_point() != e.get("q_zero_point"):
                mism("q_zero_point", e.get("q_zero_point"), t.q_zero_point())
        else:
            if t.q_per_channel_axis() != e.get("q_axis"):
                mism("q_axis", e.get("q_axis"), t.q_per_channel_axis())
            for name, fn in (("q_scales", t.q_per_channel_scales),
                             ("q_zero_points", t.q_per_channel_zero_points)):
                tid = e.get(name)
                if isinstance(tid, dict):       # listed inline by ptls
                    mine = fn()
                    sub = dict(tid, layout="strided")
                    if list(mine.shape) != sub.get("shape") or \
                            str(mine.dtype).replace("torch.", "") != sub.get("dtype"):
                        mism(name, sub, mine)
                    elif self.zip is not None:
                        data = self.record_bytes(sub.get("storage"))
                        if data is not None:
                            self.check_bytes(sub, mine, data, where + "." + name)
                    continue
                other = self.tensor_by_id.get(tid)
                if other is None:
                    self.err("%s: %s tensor id %s not listed" % (where, name,
                                                                 json_short(tid)))
                    continue
                mine = fn()
                if (mine.shape != other.shape or not torch.equal(
                        mine.to(torch.float64), other.to(torch.float64))):
                    mism(name, "tensor %s = %s" % (tid, py_short(other.tolist())),
                         mine.tolist())

    def torch_bytes(self, e, t):
        x = t.detach()
        if x.is_quantized:
            x = x.int_repr()
        if e.get("conj") and hasattr(x, "is_conj") and x.is_conj():
            x = x.conj()            # clear the bit: the raw stored values
        if e.get("neg") and hasattr(x, "is_neg") and x.is_neg():
            x = x._neg_view()
        x = x.contiguous()
        try:
            return x.reshape(-1).view(torch.uint8).numpy().tobytes()
        except Exception:
            pass
        try:
            return x.numpy().tobytes()
        except Exception:
            return None

    def check_bytes(self, e, t, data, where):
        shape, stride, off = e.get("shape"), e.get("stride"), e.get("offset")
        isz = t.element_size()
        numel = 1
        for n in shape:
            numel *= n
        if numel == 0:
            mine = b""
        else:
            last = off + sum((n - 1) * s for n, s in zip(shape, stride))
            if off < 0 or any(s < 0 for s in stride) or (last + 1) * isz > len(data):
                self.err("%s: offset %d shape %s stride %s reach past the "
                         "%d-byte record" % (where, off, shape, stride, len(data)))
                return
            buf = np.frombuffer(data, dtype=np.uint8)[off * isz:]
            view = np.lib.stride_tricks.as_strided(
                buf, shape=tuple(shape) + (isz,),
                strides=tuple(s * isz for s in stride) + (1,), writeable=False)
            mine = np.ascontiguousarray(view).tobytes()
        theirs = self.torch_bytes(e, t)
        if theirs is None:
            self.notes["bytes not compared (torch cannot view %s as bytes)"
                       % dtype_name(t.dtype)] += 1
            return
        if mine != theirs:
            first = next((i for i in range(min(len(mine), len(theirs)))
                          if mine[i] != theirs[i]), min(len(mine), len(theirs)))
            self.err("%s: data bytes differ (%d vs %d bytes, first difference "
                     "at byte %d: record %s, torch %s)"
                     % (where, len(mine), len(theirs), first,
                        mine[first:first + 8].hex(), theirs[first:first + 8].hex()))

    # -- one value entry
    def check_value(self, e, o, where):
        typ, v = e.get("type"), e.get("value")
        if isinstance(o, SetElem):
            saved = self.errors
            for item in o.items:
                self.errors = []
                self.check_value(e, item, where)
                if not self.errors:
                    break
            found = not self.errors
            self.errors = saved
            if not found:
                self.err("%s: %s value %s is not in the %s %s"
                         % (where, typ, json_short(v), type(o.items).__name__,
                            py_short(o.items)))
            return

        def bad():
            self.err("%s: %s value: ptls %s, torch %s"
                     % (where, typ, json_short(v), py_short(o)))
        if typ == "int":
            if not (isinstance(o, int) and not isinstance(o, bool)) \
                    or not isinstance(v, int) or isinstance(v, bool) or o != v:
                bad()
        elif typ == "float":
            if not isinstance(o, float) or not float_eq(o, v):
                bad()
        elif typ == "str":
            if not isinstance(o, str) or o != v:
                bad()
        elif typ in ("bytes", "bytearray"):
            if not isinstance(o, (bytes, bytearray)) or escape_bytes(o) != v:
                bad()
        elif typ == "bool":
            if not isinstance(o, bool) or o is not v:
                bad()
        elif typ == "NoneType":
            if o is not None or v is not None:
                bad()
        elif typ == "torch.device":
            if not isinstance(o, torch.device) or str(o) != v:
                bad()
        elif typ == "torch.layout":
            if not isinstance(o, torch.layout) or v not in (
                    str(o), str(o).replace("torch.", "")):
                bad()
        elif typ == "global":
            if not global_matches(o, v):
                bad()
        else:
            # some other scalar: compare as JSON would show it
            if isinstance(o, float):
                ok = float_eq(o, v)
            elif isinstance(o, (bool, int, str)) or o is None:
                ok = type(o) is type(v) and o == v
            else:
                ok = str(o) == v
            if not ok:
                bad()
            self.notes["value type %s compared loosely" % typ] += 1

    def check_type(self, e, o, where):
        """Loose check of the type name of an object / empty container."""
        typ = e.get("type")
        if typ == "object":
            if type(o) in PLAIN_TYPES or isinstance(o, torch.Tensor):
                self.notes["opaque object where torch has a plain %s"
                           % type(o).__name__] += 1
            return
        if not isinstance(typ, str):
            return
        names = {type(o).__name__, type(o).__qualname__,
                 "%s.%s" % (type(o).__module__, type(o).__qualname__)}
        if typ in names or typ.rpartition(".")[2] == type(o).__name__:
            return
        if global_matches(type(o), typ):
            return
        self.notes["type differs (ptls %s, torch %s)"
                   % (typ, type(o).__name__)] += 1

    def is_param(self, t):
        # torch.jit.load gives plain tensors; the module knows which are
        return isinstance(t, torch.nn.Parameter) or id(t) in self.param_ids

    def sized(self, o):
        if isinstance(o, (ScriptStub, getattr(torch, "ScriptObject", ()))):
            o = script_state(o)
        return len(o)

    # -- TorchScript: what the module and constants.pkl hold is listed
    def check_complete_script(self):
        sa = self.script
        m = sa.module
        base = (("part", "module"),) if sa.wrapped else ()
        missing = []
        for what, items in (("parameter", m.named_parameters()),
                            ("buffer", m.named_buffers())):
            for name, _ in items:
                path = base + tuple(("attr", c) for c in name.split("."))
                if path not in self.listed:
                    missing.append((path, what))
        consts = sa.parts.get("constants", ())
        for i, c in enumerate(consts if isinstance(consts, tuple) else ()):
            path = (("part", "constants"), ("int", i))
            if isinstance(c, torch.Tensor) and path not in self.listed:
                missing.append((path, "constant tensor"))

        def walk(d, path):
            for name, v in d.children.items():
                p = path + (("part", name),)
                if isinstance(v, CodeDir):
                    walk(v, p)
                elif p not in self.listed:
                    missing.append((p, "code file"))
        walk(sa.parts["code"], (("part", "code"),))
        for path, what in missing:
            keys = [v if n in ("int", "str") else {n: v} for n, v in path]
            self.err("%s %s found by torch, not listed by ptls"
                     % (keys_str(keys), what))
        self.check_const_mapping()

    def check_const_mapping(self):
        """The constants the module's forward uses, as torch.jit.load has
        them (code_with_constants: c<i> is constants.pkl's item i)."""
        consts = self.script.parts.get("constants", ())
        try:
            cm = self.script.module.code_with_constants[1].const_mapping
        except Exception:
            self.notes["no code_with_constants"] += 1
            return

        def same(a, b):
            if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
                return (isinstance(a, torch.Tensor) and
                        isinstance(b, torch.Tensor) and
                        a.dtype == b.dtype and a.shape == b.shape and
                        self.torch_bytes({}, a) == self.torch_bytes({}, b))
            if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
                return (isinstance(a, (tuple, list)) and
                        isinstance(b, (tuple, list)) and len(a) == len(b)
                        and all(same(x, y) for x, y in zip(a, b)))
            if isinstance(a, getattr(torch, "ScriptObject", ())):
                return isinstance(b, ScriptStub) and same(
                    script_state(a), script_state(b))
            return a == b or (a != a and b != b)
        for name, v in cm.items():
            i = int(name[1:]) if name[1:].isdigit() else -1
            if not 0 <= i < len(consts):
                self.err("constant %s of forward: constants.pkl has %d"
                         % (name, len(consts)))
            elif not same(v, consts[i]):
                self.err("constants/%s: torch.jit.load's differs (%s vs %s)"
                         % (name, py_short(v), py_short(consts[i])))
            else:
                self.notes["constants checked against torch.jit.load"] += 1

    # -- walk of torch's containers for tensors ptls did not list
    def check_complete(self, root):
        if self.script is not None:
            return self.check_complete_script()
        listed = self.listed
        links = self.link_paths
        parts = self.part_parents
        missing = []
        active = set()

        def walk(o, path):
            if path in links and path:
                return
            if isinstance(o, torch.Tensor):
                if o.layout not in (torch.strided,) and not o.is_quantized \
                        and o.device.type != "meta":
                    if path not in parts:
                        missing.append((path, "%s tensor" % o.layout))
                elif path not in listed:
                    missing.append((path, "tensor"))
                return
            if type(o) not in (dict, collections.OrderedDict, list, tuple):
                return
            if id(o) in active:
                return
            active.add(id(o))
            if isinstance(o, dict):
                for k, v in o.items():
                    if isinstance(k, bool) or not isinstance(k, (int, str)):
                        self.notes["dict keys of other types not walked"] += 1
                        continue
                    walk(v, path + ((("int", k),) if isinstance(k, int)
                                    else (("str", k),)))
            else:
                for i, v in enumerate(o):
                    walk(v, path + (("int", i),))
            active.discard(id(o))

        walk(root, ())
        for path, what in missing:
            keys = [v if n in ("int", "str") else {n: v} for n, v in path]
            self.err("%s %s found by torch, not listed by ptls"
                     % (keys_str(keys), what))

    def run(self, root):
        j = self.j
        self.key_of_ptr, self.ptr_of_key = {}, {}
        self.tensor_by_id = {}
        self.listed = set()
        self.link_paths = set()
        self.part_parents = set()
        self.check_header()
        self.check_storages()
        for p in duplicate_paths(j):
            self.err("path %s is listed more than once" % json_short(p))
        entries = j.get("entries", [])
        ntensor_entries = 0
        resolved = []
        by_path = {}
        for e in entries:
            keys = e.get("keys", [])
            pt = path_tuple(keys)
            # a link's target may be a container: learn the keys of every
            # prefix of every path (one key per path component)
            comps = e.get("path", "").split("/") if keys else []
            if len(comps) == len(keys):
                for i in range(len(keys) + 1):
                    by_path.setdefault("/".join(comps[:i]), keys[:i])
            else:
                by_path.setdefault(e.get("path"), keys)
            if any(n == "repr" for n, _ in pt):
                self.notes["entries under keys of other types skipped"] += 1
                continue
            self.listed.add(pt)
            for i, (n, _) in enumerate(pt):
                if n == "part":
                    self.part_parents.add(pt[:i])
            if e.get("kind") == "link":
                self.link_paths.add(pt)
            try:
                o = navigate(root, keys)
            except Mismatch as ex:
                self.err("%s (%s): %s" % (e.get("path"), e.get("kind"), ex))
                continue
            if isinstance(o, SetElem) and e.get("kind") != "value":
                self.notes["set members that are not values unchecked"] += 1
                continue
            resolved.append((e, o))
            if e.get("kind") == "tensor" and "tensor" in e:
                self.tensor_by_id.setdefault(e["tensor"], o)
        obj_to_tid = {}
        for e, o in resolved:
            where = "%s %s" % (e.get("path"), keys_str(e.get("keys", [])))
            kind = e.get("kind")
            if kind == "tensor":
                ntensor_entries += 1
                tid = e.get("tensor")
                first = self.tensor_by_id.get(tid)
                if first is not o:
                    self.err("%s: tensor id %s: not the same torch object as "
                             "its first entry" % (where, tid))
                prev = obj_to_tid.setdefault(id(o), tid)
                if prev != tid:
                    self.err("%s: tensor ids %s and %s are the same torch object"
                             % (where, prev, tid))
                self.check_tensor(e, o, where)
            elif kind == "value":
                self.check_value(e, o, where)
            elif kind == "link":
                tgt = e.get("target")
                tkeys = by_path.get(tgt)
                if tkeys is None:
                    self.err("%s: link target %s is not an entry path"
                             % (where, json_short(tgt)))
                    continue
                try:
                    to = navigate(root, tkeys)
                except Mismatch as ex:
                    self.err("%s: link target %s: %s" % (where, tgt, ex))
                    continue
                if to is not o:
                    self.err("%s: link to %s: torch has different objects "
                             "(%s vs %s)" % (where, tgt, py_short(o), py_short(to)))
            elif kind == "empty":
                try:
                    n = self.sized(o)
                except Exception:
                    n = None
                if n != 0:
                    self.err("%s: empty %s: torch has %s" % (
                        where, e.get("type"), py_short(o)))
                self.check_type(e, o, where)
            elif kind == "object":
                self.check_type(e, o, where)
            else:
                self.err("%s: unknown kind %s" % (where, json_short(kind)))
        self.check_complete(root)
        return ntensor_entries


# ------------------------------------------------------------------ driver

def is_torchscript(path):
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except Exception:
        return False
    tails = {n.split("/", 1)[1] if "/" in n else n for n in names}
    return ("constants.pkl" in tails or "model.json" in tails
            or any(t.startswith("code/") for t in tails))


def duplicate_paths(listing):
    """Entry paths listed more than once (they must name distinct files)."""
    c = collections.Counter(e.get("path") for e in listing.get("entries", []))
    return sorted(p for p, n in c.items() if n > 1)


def script_records(path):
    """True for what torch.load hands to torch.jit.load (and ptls calls
    TorchScript): a zip with constants.pkl, or the 1.0 model.json."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except Exception:
        return False
    tails = {n.split("/", 1)[1] if "/" in n else n for n in names}
    return "constants.pkl" in tails or "model.json" in tails


def torch_load(path, fc):
    """-> (kind, object_or_reason): kind "obj" or "fail"; a TorchScript
    archive gives a ScriptArchive and sets fc.script."""
    if is_torchscript(path):
        try:
            m = torch.jit.load(path, map_location="cpu")
            fc.script = script_archive(path, m)
            fc.param_ids = {id(p) for p in m.parameters()}
            fc.params = list(m.parameters())    # keeps the ids valid
            return "obj", fc.script
        except Exception as e:
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            return "fail", "%s: %s" % (type(e).__name__, msg[:160])
    try:
        return "obj", torch.load(path, map_location=fc.map_location,
                                 weights_only=False)
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return "fail", "%s: %s" % (type(e).__name__, msg[:160])


def read_text(p):
    try:
        with open(p, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def main(argv):
    if len(argv) != 2:
        print("usage: compare.py MANIFEST", file=sys.stderr)
        return 2
    base = os.path.dirname(os.path.abspath(argv[1]))
    with open(argv[1], encoding="utf-8") as f:
        lines = [ln.rstrip("\n").split("\t") for ln in f if ln.strip()]
    print("torch %s, python %s, numpy %s" % (
        torch.__version__, sys.version.split()[0], np.__version__))
    npass = nfail = nskip = 0
    for label, ckpt, stem in lines:
        ckpt = os.path.join(base, ckpt)
        stem = os.path.join(base, stem)
        if not os.path.isfile(ckpt) or not os.path.isfile(stem + ".rc"):
            print("FAIL %s: %s or its ptls output is missing" % (label, ckpt))
            nfail += 1
            continue
        rc_text = read_text(stem + ".rc").strip()
        rc = int(rc_text) if rc_text.lstrip("-").isdigit() else -1
        err = read_text(stem + ".err").strip()
        errline = err.splitlines()[-1] if err else ""
        listing = None
        if rc == 0:
            try:
                listing = json.loads(read_text(stem + ".json"))
            except ValueError as e:
                print("FAIL %s: ptls exit 0 but its output is not JSON (%s)"
                      % (label, e))
                nfail += 1
                continue
        fc = FileCheck(label, ckpt, listing)
        kind, res = torch_load(ckpt, fc)
        refused = rc != 0
        unsupported = refused and "not supported yet" in errline

        if refused and rc != 2:
            print("FAIL %s: ptls exit %d (expected 0 or 2): %s"
                  % (label, rc, errline or "(no message)"))
            nfail += 1
            continue
        if kind == "fail":
            if refused:
                print("ok   %s: torch cannot load: %s; ptls refuses too: %s"
                      % (label, res, errline))
            else:
                n = len(listing.get("entries", []))
                dup = duplicate_paths(listing)
                warn = ("; WARNING: %d paths listed more than once, e.g. %s"
                        % (len(dup), json_short(dup[0])) if dup else "")
                print("ok   %s: torch cannot load: %s; ptls listed %d entries%s"
                      % (label, res, n, warn))
            npass += 1
            continue
        if unsupported:
            print("skip %s: %s" % (label, errline))
            nskip += 1
            continue
        if refused:
            print("FAIL %s: torch loads it (%s) but ptls refuses: %s"
                  % (label, "TorchScript" if kind == "torchscript" else
                     type(res).__name__, errline))
            nfail += 1
            continue
        try:
            nt = fc.run(res)
        except Exception:     # a bug here must not hide the other files
            fc.err("compare.py crashed: %s" % traceback.format_exc().strip()
                   .replace("\n", "\n      "))
            nt = 0
        if fc.errors:
            print("FAIL %s: %d mismatches" % (label, len(fc.errors)))
            for m in fc.errors[:MAX_SHOWN]:
                print("      " + m)
            if len(fc.errors) > MAX_SHOWN:
                print("      ... and %d more" % (len(fc.errors) - MAX_SHOWN))
            nfail += 1
        else:
            notes = "".join("; %s x%d" % kv for kv in sorted(fc.notes.items()))
            print("ok   %s: %d entries, %d tensors%s" % (
                label, len(listing.get("entries", [])), nt, notes))
            npass += 1
        if fc.zip is not None:
            fc.zip.close()
    print("%d passed, %d failed, %d skipped" % (npass, nfail, nskip))
    sys.stdout.flush()
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
