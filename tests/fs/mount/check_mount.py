#!/usr/bin/env python3
"""check_mount.py BASE - check live ptfs mounts against torch.load.

A worker for run.sh: it loads torch once, then reads requests on stdin,
one per line, tab-separated:

    check <TAB> LABEL <TAB> CHECKPOINT <TAB> STEM <TAB> MOUNTPOINT

(relative paths are taken from BASE; STEM.json is `ptls --json CHECKPOINT`)
and answers each with one line on stdout, "ok<TAB>SUMMARY" or
"FAIL<TAB>SUMMARY", after writing the mismatches to STEM.report.  The
first line it prints is "ready<TAB>torch X, python Y, numpy Z".

What it checks on the mount (torch = torch.load of the same file; ptls =
the listing; records = the zip records, read with zipfile):
  tree     every path ptls lists is there with the right file type, and
           nothing else; modes; directory link counts; the root's entry
           name when the root is not a container
  tensors  st_size = numel * itemsize (meta: 0); bytes = torch's
           t.contiguous() (int_repr for quantized) through open().read(),
           os.pread at odd offsets and lengths (first with O_DIRECT, so
           ptfs itself serves the unaligned reads, then through the page
           cache), mmap.mmap, and numpy.memmap for float32; every user.*
           xattr against torch's metadata and ptls's listing, no others
  values   file content = repr() + newline (str: itself; bytes: raw)
  links    readlink resolves to the target's path and inode; torch has the
           same object at both places
  .ptfs    storages: raw record bytes (= torch's storage bytes), sizes,
           xattrs; the other records: raw bytes of each zip record
  read-only  opening for writing, creating, mkdir, unlink, setxattr fail
           with EROFS (or EACCES/EPERM)
Files torch cannot load are checked against ptls and the records only.
"""
import ast
import collections
import math
import errno
import json
import mmap
import os
import signal
import stat
import struct
import sys
import traceback
import warnings

# Answers go to the original stdout; anything else written to fd 1 (torch's
# UCX warnings at import, for one) goes to stderr instead.
ANSWERS = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
os.dup2(2, 1)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "lib"),
                os.path.join(HERE, "..", "..", "torch")]

import numpy as np      # noqa: E402
import torch            # noqa: E402

import compare          # noqa: E402  tests/torch/compare.py
import ptfs_expect as px  # noqa: E402

warnings.simplefilter("ignore")

MAX_SHOWN = 12
TIMEOUT = int(os.environ.get("PTFS_CHECK_TIMEOUT", "90"))
RO_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout("check took longer than %d s" % TIMEOUT)


def short(b):
    b = bytes(b)
    return b[:16].hex() + ("..." if len(b) > 16 else "") + " (%d B)" % len(b)


def first_diff(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def kind_of(st):
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISLNK(st.st_mode):
        return "link"
    return "other %o" % st.st_mode


def torch_storage_bytes(t):
    s = compare.ustorage(t)
    n = s.nbytes()
    if n == 0:
        return b""
    x = torch.empty(0, dtype=torch.uint8)
    x.set_(s, 0, (n,), (1,))
    return x.numpy().tobytes()


class MountCheck:
    def __init__(self, label, ckpt, listing, mnt):
        self.label, self.ckpt, self.j, self.mnt = label, ckpt, listing, mnt
        self.errors = []
        self.notes = collections.Counter()
        self.arch = px.Archive(ckpt, listing)
        self.byteorder = px.archive_byteorder(self.arch)
        self.fc = compare.FileCheck(label, ckpt, listing)  # map_location
        self.root = None
        self.collapsed = set()  # lists of scalars shown as one file
        self.nbytes_read = 0
        self.ntensors = 0

    def err(self, msg):
        self.errors.append(msg)

    def path(self, rel):
        return os.path.join(self.mnt, rel) if rel else self.mnt

    # ------------------------------------------------------------ the tree
    def scalar_lists(self, want, have):
        """A list or tuple of more than 16 python scalars (int of 64 bits,
        float, bool, None) is one value file in a mount (docs/editing.md,
        "Lists of scalars"), where ptls lists its items: the file's type
        and its literal must be those items; then @want has the file."""
        self.collapsed = set()
        ents = {px.mount_rel(self.j, e): e for e in self.j.get("entries", [])}
        for rel in [r for r in want if want[r] == "dir" and
                    have.get(r) == "file"]:
            pre = rel + "/"
            kids = [r for r in want if r.startswith(pre)]
            items = []
            for i in range(len(kids)):
                e = ents.get(pre + str(i))
                if not e or e.get("kind") != "value" or e.get("type") not in \
                        ("int", "float", "bool", "NoneType") or \
                        (e["type"] == "int" and
                         not -2**63 <= e.get("value", 0) < 2**63):
                    items = None
                    break
                items.append(e.get("value"))
            if not items or len(items) <= 16:
                continue        # not the rule's: reported as a mismatch
            try:
                typ = os.getxattr(self.path(rel), "user.type").decode()
                with open(self.path(rel)) as f:
                    got = ast.literal_eval(f.read())
            except (OSError, ValueError, SyntaxError) as ex:
                self.err("%s: a list of scalars as a file: %s" % (rel, ex))
                continue

            def same(a, b):
                if isinstance(a, float) or isinstance(b, float):
                    try:
                        a, b = float(a), float(b)
                    except (TypeError, ValueError):
                        return False
                    return a == b or (math.isnan(a) and math.isnan(b))
                return a == b and type(a) is type(b)
            if typ not in ("list", "tuple") or \
                    not isinstance(got, list if typ == "list" else tuple) or \
                    len(got) != len(items) or \
                    not all(same(a, b) for a, b in zip(got, items)):
                self.err("%s: a %s file whose literal is not the %d items "
                         "ptls lists" % (rel, typ, len(items)))
                continue
            if self.root is not None and rel in self.by_path:
                try:
                    o = compare.navigate(self.root, self.by_path[rel])
                except compare.Mismatch:
                    o = None
                if o is not None and (len(o) != len(got) or
                                      not all(same(a, b)
                                              for a, b in zip(got, o))):
                    self.err("%s: the file's literal is not torch's %s"
                             % (rel, type(o).__name__))
            for r in kids:
                del want[r]
            want[rel] = "file"
            self.collapsed.add(rel)

    def check_tree(self):
        want = px.expected_tree(self.j)
        have = {}
        subdirs = {}

        def walk(rel):
            p = self.path(rel)
            try:
                names = os.listdir(p)
            except OSError as e:
                self.err("%s: listdir: %s" % (rel or ".", e))
                return
            nsub = 0
            for name in names:
                if not rel and name == ".ptfs":
                    nsub += 1
                    continue
                crel = rel + "/" + name if rel else name
                try:
                    st = os.lstat(self.path(crel))
                except OSError as e:
                    self.err("%s: lstat: %s" % (crel, e))
                    continue
                k = kind_of(st)
                have[crel] = k
                mode = stat.S_IMODE(st.st_mode)
                want_mode = {"dir": 0o555, "file": 0o444, "link": 0o777}.get(k)
                if want_mode is not None and mode != want_mode:
                    self.err("%s: mode %o, expected %o" % (crel, mode, want_mode))
                if k == "dir":
                    nsub += 1
                    walk(crel)
            subdirs[rel] = nsub

        st = os.stat(self.mnt)
        if not stat.S_ISDIR(st.st_mode):
            self.err("mount root is not a directory")
            return
        # .ptfs/ is reached by name but not listed (docs/views.md)
        if ".ptfs" in os.listdir(self.mnt) or \
                not os.path.isdir(os.path.join(self.mnt, ".ptfs")):
            self.err(".ptfs is listed in the mount root, or not there")
        walk("")
        self.scalar_lists(want, have)
        for rel in sorted(set(want) | set(have)):
            if rel not in have:
                self.err("%s: listed by ptls (%s), missing in the mount"
                         % (rel, want[rel]))
            elif rel not in want:
                self.err("%s: in the mount (%s), not listed by ptls"
                         % (rel, have[rel]))
            elif want[rel] != have[rel]:
                self.err("%s: a %s in the mount, ptls lists a %s"
                         % (rel, have[rel], want[rel]))
        for rel, n in subdirs.items():
            nl = os.lstat(self.path(rel)).st_nlink
            if nl != 2 + n:
                self.err("%s: st_nlink %d, expected 2 + %d subdirectories"
                         % (rel or ".", nl, n))
        try:
            sv = os.statvfs(self.mnt)
            if sv.f_namemax < 255 or sv.f_files == 0:
                self.err("statvfs: f_namemax %d, f_files %d"
                         % (sv.f_namemax, sv.f_files))
        except OSError as ex:
            self.err("statvfs: %s" % ex)
        # names that are not there, and an xattr that is not there
        for rel in ("no such entry", ".ptfs/no such record",
                    ".ptfs/storages/no such key", "%2Eptfs"):
            try:
                os.lstat(self.path(rel))
                if rel != "%2Eptfs" or "%2Eptfs" not in want:
                    self.err("%s: exists" % rel)
            except FileNotFoundError:
                pass
            except OSError as ex:
                self.err("%s: lstat: %s (expected ENOENT)" % (rel, ex))
        try:
            os.getxattr(self.mnt, "user.no_such_xattr")
            self.err(".: getxattr user.no_such_xattr succeeded")
        except OSError as ex:
            if ex.errno != errno.ENODATA:
                self.err(".: getxattr user.no_such_xattr: %s (expected "
                         "ENODATA)" % ex)
        if px.root_is_dir(self.j):
            self.check_xattr_value("", "user.type", self.j.get("root_type"))
        else:
            xa = px.read_xattrs(self.mnt)
            if xa:
                self.err("root: xattrs %s on a root that is not a container"
                         % sorted(xa))

    def check_xattr_value(self, rel, name, want, follow=True):
        try:
            got = os.getxattr(self.path(rel), name, follow_symlinks=follow)
            got = got.decode("utf-8", "surrogateescape")
        except OSError as e:
            self.err("%s: getxattr %s: %s" % (rel or ".", name, e))
            return
        if got != want:
            self.err("%s: %s = %r, expected %r" % (rel or ".", name, got, want))

    # ------------------------------------------------------------- tensors
    def torch_view(self, e, o, rel):
        """(tensor, is_storage) for torch's object @o, or (None, _)."""
        if e.get("layout") == "storage":
            if not compare.is_storage(o):
                self.err("%s: ptls lists a storage, torch has a %s"
                         % (rel, type(o).__name__))
                return None, True
            return compare.storage_as_tensor(o), True
        if not isinstance(o, torch.Tensor):
            self.err("%s: ptls lists a tensor, torch has a %s"
                     % (rel, type(o).__name__))
            return None, False
        return o, False

    def torch_xattrs(self, e, o, t, is_storage):
        x = {"user.dtype": compare.dtype_name(t.dtype),
             "user.shape": px.dims(t.shape),
             "user.stride": px.dims(t.stride()),
             "user.storage_offset": str(t.storage_offset())}
        is_meta = t.device.type == "meta"
        if is_storage:
            x["user.layout"] = "storage"
        elif t.is_quantized:
            x["user.layout"] = "quantized"
        elif is_meta:
            x["user.layout"] = "meta"
        else:
            x["user.layout"] = "strided"
        if not is_storage:
            param = self.fc.is_param(o)     # TorchScript: the module's
            x["user.requires_grad"] = px.tf(t.requires_grad)
            x["user.parameter"] = px.tf(param)
            x["user.type"] = "Parameter" if param else "Tensor"
        if is_meta:
            x["user.device"] = "meta"
        else:
            ptr, _ = compare.storage_ptr_nbytes(t)
            loc = self.fc.locs.get(ptr) if ptr else None
            if loc is not None:
                x["user.device"] = loc
        for flag in ("conj", "neg"):
            fn = getattr(t, "is_" + flag, None)
            if fn is not None and fn():
                x["user." + flag] = "true"
        if t.is_quantized:
            qs = t.qscheme()
            x["user.qscheme"] = str(qs).replace("torch.", "")
            if qs in (torch.per_tensor_affine, torch.per_tensor_symmetric):
                x["user.q_scale"] = repr(float(t.q_scale()))
                x["user.q_zero_point"] = str(int(t.q_zero_point()))
            else:
                x["user.q_axis"] = str(int(t.q_per_channel_axis()))
        return x

    def check_tensor(self, e, o):
        rel = px.mount_rel(self.j, e)
        p = self.path(rel)
        self.ntensors += 1
        t = is_storage = None
        if o is not None:
            t, is_storage = self.torch_view(e, o, rel)
        # expected bytes: torch's, else the records'
        want = None
        if t is not None:
            if t.device.type == "meta":
                want = b""
            else:
                want = compare.FileCheck.torch_bytes(self.fc, e, t)
                if want is None:
                    self.notes["bytes not comparable (torch cannot view %s)"
                               % compare.dtype_name(t.dtype)] += 1
        if want is None:
            try:
                want = self.arch.tensor_bytes(e)
            except ValueError as ex:
                self.err("%s: %s" % (rel, ex))
            if want is None:
                self.notes["bytes unchecked (no torch, not zip)"] += 1
        # size
        want_size = 0 if e.get("layout") == "meta" else e.get("nbytes")
        if t is not None and t.device.type != "meta":
            tsize = t.numel() * t.element_size()
            if tsize != want_size:
                self.err("%s: ptls nbytes %s, torch numel*itemsize %d"
                         % (rel, want_size, tsize))
            want_size = tsize
        try:
            st = os.stat(p)
        except OSError as ex:
            self.err("%s: stat: %s" % (rel, ex))
            return
        if st.st_size != want_size:
            self.err("%s: st_size %d, expected numel*itemsize %d"
                     % (rel, st.st_size, want_size))
        if want is not None and len(want) != want_size:
            self.err("%s: expected %d bytes but torch gives %d"
                     % (rel, want_size, len(want)))
        self.check_reads(rel, p, want, st.st_size)
        if want is not None and t is not None and want and \
                t.dtype == torch.float32 and not is_storage and \
                t.device.type != "meta":
            self.check_memmap(rel, p, t, want)
        self.check_tensor_xattrs(e, o, t, is_storage, rel)

    def check_reads(self, rel, p, want, size):
        # 1. O_DIRECT: every pread reaches ptfs as is (unaligned offsets)
        try:
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        except OSError as ex:
            self.err("%s: open O_DIRECT: %s" % (rel, ex))
            fd = None
        if fd is not None:
            try:
                self.preads(rel, fd, want, size, "O_DIRECT pread")
            finally:
                os.close(fd)
        # 2. plain read through the page cache
        try:
            with open(p, "rb") as f:
                got = f.read()
        except OSError as ex:
            self.err("%s: read: %s" % (rel, ex))
            return
        self.nbytes_read += len(got)
        if len(got) != size:
            self.err("%s: read %d bytes, st_size %d" % (rel, len(got), size))
        if want is not None and got != want:
            i = first_diff(got, want)
            self.err("%s: bytes differ at %d: mount %s, expected %s"
                     % (rel, i, short(got[i:]), short(want[i:])))
        if want is None:
            want = got          # the cached reads must still agree
        # 3. cached preads and mmap
        fd = os.open(p, os.O_RDONLY)
        try:
            self.preads(rel, fd, want, size, "pread")
            if size:
                try:
                    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
                        mm = m[:]
                    if mm != want:
                        i = first_diff(mm, want)
                        self.err("%s: mmap bytes differ at %d: %s vs %s"
                                 % (rel, i, short(mm[i:]), short(want[i:])))
                except (OSError, ValueError) as ex:
                    self.err("%s: mmap: %s" % (rel, ex))
        finally:
            os.close(fd)

    def preads(self, rel, fd, want, size, how):
        for off, ln in px.spots(size):
            try:
                got = os.pread(fd, ln, off)
            except OSError as ex:
                self.err("%s: %s(%d bytes at %d): %s" % (rel, how, ln, off, ex))
                return
            if want is not None and got != want[off:off + ln]:
                self.err("%s: %s(%d bytes at %d) = %s, expected %s"
                         % (rel, how, ln, off, short(got),
                            short(want[off:off + ln])))

    def check_memmap(self, rel, p, t, want):
        try:
            mm = np.memmap(p, dtype=np.float32, mode="r",
                           shape=tuple(t.shape))
            arr = np.array(mm)
            del mm
        except (OSError, ValueError) as ex:
            self.err("%s: numpy.memmap: %s" % (rel, ex))
            return
        ref = t.detach()
        if getattr(ref, "is_neg", lambda: False)():
            ref = ref._neg_view()   # the stored values, as torch_bytes has
        ref = ref.contiguous().numpy()
        if arr.tobytes() != want or not np.array_equal(arr, ref, equal_nan=True):
            self.err("%s: numpy.memmap differs from the tensor" % rel)
        self.notes["memmap"] += 1

    def check_tensor_xattrs(self, e, o, t, is_storage, rel):
        p = self.path(rel)
        try:
            got = px.read_xattrs(p)
        except OSError as ex:
            self.err("%s: xattrs: %s" % (rel, ex))
            return
        want = px.tensor_xattrs(self.j, e, self.byteorder)
        if set(got) != set(want):
            self.err("%s: xattr names %s, expected %s" % (
                rel, sorted(got), sorted(want)))
        for k, v in sorted(want.items()):
            if k in got and got[k] != v:
                self.err("%s: %s = %r, ptls says %r" % (rel, k, got[k], v))
        if t is not None:
            for k, v in sorted(self.torch_xattrs(e, o, t, is_storage).items()):
                if got.get(k) != v:
                    self.err("%s: %s = %r, torch says %r"
                             % (rel, k, got.get(k), v))
        key = e.get("storage")
        if key is not None and not os.path.isfile(
                os.path.join(self.mnt, ".ptfs", "storages",
                             px.escape_name(key))):
            self.err("%s: user.storage %r: no .ptfs/storages/%s"
                     % (rel, key, key))
        if t is not None and key is not None and key not in self.torch_storage:
            try:
                self.torch_storage[key] = torch_storage_bytes(t)
            except Exception as ex:   # e.g. a dtype numpy cannot hold
                self.notes["storage bytes not comparable: %s"
                           % type(ex).__name__] += 1

    # -------------------------------------------------------------- values
    def torch_text(self, e, o):
        """What the file must hold according to torch's object, or None
        when there is no fixed text (then @o is checked otherwise)."""
        if e.get("kind") == "object":
            return None
        typ = e.get("type")
        if isinstance(o, bool):
            return ("True" if o else "False").encode() + b"\n"
        if o is None:
            return b"None\n"
        if isinstance(o, int):
            return str(o).encode() + b"\n"
        if isinstance(o, float):
            return repr(o).encode() + b"\n"
        if isinstance(o, str):
            return o.encode("utf-8", "surrogatepass") + b"\n"
        if isinstance(o, (bytes, bytearray)):
            return bytes(o)
        if isinstance(o, torch.device):
            return str(o).encode() + b"\n"
        if typ == "torch.layout":
            return None
        return None

    def check_value(self, e, o, has_torch):
        rel = px.mount_rel(self.j, e)
        p = self.path(rel)
        try:
            with open(p, "rb") as f:
                got = f.read()
            size = os.stat(p).st_size
        except OSError as ex:
            self.err("%s: read: %s" % (rel, ex))
            return
        if size != len(got):
            self.err("%s: st_size %d, read gives %d bytes" % (rel, size, len(got)))
        else:
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
            try:
                self.preads(rel, fd, got, size, "O_DIRECT pread")
            finally:
                os.close(fd)
        typ = e.get("type")
        want = px.value_text(e)
        if want is not None and got != want:
            self.err("%s: content %r, ptls says %r" % (rel, got, want))
        if typ in ("bytes", "bytearray") and not px.bytes_matches(e, got):
            self.err("%s: raw bytes %r, ptls says %r" % (rel, got, e.get("value")))
        if e.get("kind") == "value" and not (got.endswith(b"\n") or
                                             typ in ("bytes", "bytearray")):
            self.err("%s: a %s value file without the final newline" % (rel, typ))
        if e.get("kind") == "object" and has_torch and type(o) in (
                bytes, bytearray, str, int, float):
            self.err("%s: torch has the %s %r; the mount shows an opaque "
                     "object %r" % (rel, type(o).__name__, o, got))
        if has_torch:
            if isinstance(o, compare.SetElem):
                texts = {self.torch_text(e, item) for item in o.items}
                if got not in texts:
                    self.err("%s: content %r is none of the set's members %s"
                             % (rel, got, compare.py_short(o.items)))
                return
            tt = self.torch_text(e, o)
            if tt is not None and got != tt:
                self.err("%s: content %r, torch has %r" % (rel, got, tt))
            elif tt is None and e.get("kind") == "value":
                text = got.decode("utf-8", "replace").rstrip("\n")
                if typ == "global":
                    ok = compare.global_matches(o, text)
                elif typ == "torch.layout":
                    ok = text in (str(o), str(o).replace("torch.", ""))
                else:
                    ok = str(o) == text
                    self.notes["value type %s compared loosely" % typ] += 1
                if not ok:
                    self.err("%s: content %r, torch has %s"
                             % (rel, got, compare.py_short(o)))
        try:
            got_t = os.getxattr(p, "user.type").decode()
            if got_t != typ:
                self.err("%s: user.type %r, ptls says %r" % (rel, got_t, typ))
        except OSError as ex:
            self.err("%s: getxattr user.type: %s" % (rel, ex))

    # --------------------------------------------------------------- links
    def check_link(self, e, o, has_torch):
        rel = px.mount_rel(self.j, e)
        p = self.path(rel)
        tgt = px.link_target_rel(e)
        try:
            text = os.readlink(p)
        except OSError as ex:
            self.err("%s: readlink: %s" % (rel, ex))
            return
        if os.path.isabs(text):
            self.err("%s: absolute link %r" % (rel, text))
        lst = os.lstat(p)
        if lst.st_size != len(os.fsencode(text)):
            self.err("%s: symlink st_size %d, readlink gives %d bytes"
                     % (rel, lst.st_size, len(os.fsencode(text))))
        resolved = os.path.normpath(os.path.join(os.path.dirname(p), text))
        if resolved != os.path.normpath(self.path(tgt)):
            self.err("%s: -> %r resolves to %r, ptls says %r"
                     % (rel, text, os.path.relpath(resolved, self.mnt), tgt))
        try:
            a, b = os.stat(p), os.stat(self.path(tgt))
            if (a.st_ino, a.st_dev) != (b.st_ino, b.st_dev):
                self.err("%s: follows to inode %d, %s is inode %d"
                         % (rel, a.st_ino, tgt or ".", b.st_ino))
            if not stat.S_ISDIR(a.st_mode):
                self.err("%s: the link's target is not a directory" % rel)
            self.check_xattr_value(rel, "user.type", e.get("type"))
        except OSError as ex:
            self.err("%s: stat through the link: %s" % (rel, ex))
        if has_torch:
            tkeys = self.by_path.get(tgt)
            if tkeys is None:
                self.notes["link targets without keys"] += 1
                return
            try:
                to = compare.navigate(self.root, tkeys)
            except compare.Mismatch as ex:
                self.err("%s: link target %s: %s" % (rel, tgt, ex))
                return
            if to is not o:
                self.err("%s: link to %s: torch has different objects"
                         % (rel, tgt or "."))

    def check_empty(self, e, o, has_torch):
        rel = px.mount_rel(self.j, e)
        p = self.path(rel)
        names = [n for n in os.listdir(p) if not (rel == "" and n == ".ptfs")]
        if names:
            self.err("%s: empty %s, the mount has %s" % (rel, e.get("type"), names))
        self.check_xattr_value(rel, "user.type", e.get("type"))
        if has_torch and not isinstance(o, compare.SetElem):
            try:
                n = self.fc.sized(o)
            except Exception:
                n = None
            if n != 0 and not (e.get("type") not in ("dict", "list", "tuple")
                               and n is None):
                self.err("%s: empty %s, torch has %s"
                         % (rel, e.get("type"), compare.py_short(o)))

    # ---------------------------------------------------- directories' type
    def check_dir_types(self):
        if self.root is None:
            return
        names = {dict: "dict", collections.OrderedDict: "OrderedDict",
                 list: "list", tuple: "tuple"}
        for rel, kind in sorted(px.expected_tree(self.j).items()):
            if kind != "dir" or rel not in self.by_path:
                continue
            if any(isinstance(k, dict) and "part" in k
                   for k in self.by_path[rel]):
                continue        # sparse parts: compare.py makes a tuple
            try:
                o = compare.navigate(self.root, self.by_path[rel])
            except compare.Mismatch:
                continue
            want = names.get(type(o))
            if want is not None:
                self.check_xattr_value(rel, "user.type", want)

    # ---------------------------------------------------------------- .ptfs
    def check_as(self, asd):
        """.ptfs/as/: README, and model.safetensors (when the checkpoint
        is a dict of tensors) read whole: a JSON header whose offsets tile
        the data to the file's end"""
        try:
            have = os.listdir(asd)
            with open(os.path.join(asd, "README"), "rb") as f:
                if not f.read():
                    self.err(".ptfs/as/README is empty")
            if "model.safetensors" not in have:
                return
            with open(os.path.join(asd, "model.safetensors"), "rb") as f:
                b = f.read()
            n = struct.unpack("<Q", b[:8])[0]
            h = json.loads(b[8:8 + n])
            spans = sorted(tuple(v["data_offsets"]) for k, v in h.items()
                           if k != "__metadata__")
            at = 0
            for a, e in spans:
                if a != at:
                    self.err(".ptfs/as/model.safetensors: a tensor at %d, "
                             "the one before ends at %d" % (a, at))
                at = e
            if len(b) != 8 + n + at:
                self.err(".ptfs/as/model.safetensors: %d bytes, its header "
                         "says %d" % (len(b), 8 + n + at))
        except (OSError, ValueError, KeyError) as ex:
            self.err(".ptfs/as: %s" % ex)

    def check_plumbing(self):
        pl = os.path.join(self.mnt, ".ptfs")
        try:
            names = set(os.listdir(pl))
        except OSError as ex:
            self.err(".ptfs: %s" % ex)
            return
        if self.arch.zip is not None:
            recs = self.arch.other_records()
        else:
            recs = {"data.pkl": None}
        want = {"storages", "as"} | set(recs)
        if names != want:
            self.err(".ptfs holds %s, expected %s"
                     % (sorted(names), sorted(want)))
        self.check_as(os.path.join(pl, "as"))
        for name, rec in sorted(recs.items()):
            p = os.path.join(pl, name)
            if not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                got = f.read()
            size = os.stat(p).st_size
            if len(got) != size:
                self.err(".ptfs/%s: st_size %d, read %d" % (name, size, len(got)))
            if rec is not None:
                data = self.arch.record(rec)
                if got != data:
                    self.err(".ptfs/%s: differs from record %s (%s vs %s)"
                             % (name, rec, short(got), short(data)))
            elif not got:
                self.err(".ptfs/%s is empty" % name)
        sdir = os.path.join(pl, "storages")
        # file names are keys escaped like dict keys ("constants%2F0")
        storages = {px.escape_name(s["key"]): s
                    for s in self.j.get("storages", [])}
        try:
            keys = set(os.listdir(sdir))
        except OSError as ex:
            self.err(".ptfs/storages: %s" % ex)
            return
        if keys != set(storages):
            self.err(".ptfs/storages holds %d keys, ptls lists %d (%s)"
                     % (len(keys), len(storages),
                        sorted(keys ^ set(storages))[:5]))
        for name, s in sorted(storages.items()):
            key = s["key"]
            p = os.path.join(sdir, name)
            if name not in keys:
                continue
            size = os.stat(p).st_size
            if size != s.get("nbytes"):
                self.err(".ptfs/storages/%s: st_size %d, nbytes %s"
                         % (name, size, s.get("nbytes")))
            with open(p, "rb") as f:
                got = f.read()
            rec = self.arch.storage_bytes(key)
            if rec is not None and got != rec:
                i = first_diff(got, rec)
                self.err(".ptfs/storages/%s: differs from its record at %d"
                         % (name, i))
            tb = self.torch_storage.get(key)
            if tb is not None and got != tb:
                i = first_diff(got, tb)
                self.err(".ptfs/storages/%s: differs from torch's storage at "
                         "%d (%s vs %s)" % (name, i, short(got[i:]), short(tb[i:])))
            xa = px.read_xattrs(p)
            want = {"user.dtype": s.get("dtype"),
                    "user.numel": str(s.get("numel")),
                    "user.device": s.get("device"),
                    "user.byteorder": self.byteorder}
            if xa != want:
                self.err(".ptfs/storages/%s: xattrs %s, expected %s"
                         % (name, xa, want))

    # ------------------------------------------------------------ read-only
    def check_readonly(self):
        target = None
        for e in self.j.get("entries", []):
            if e.get("kind") in px.FILE_KINDS:
                target = self.path(px.mount_rel(self.j, e))
                break
        if target is None:
            target = os.path.join(self.mnt, ".ptfs", "data.pkl")
        attempts = [
            ("open O_WRONLY", lambda: os.open(target, os.O_WRONLY)),
            ("open O_RDWR", lambda: os.open(target, os.O_RDWR)),
            ("open O_WRONLY|O_TRUNC",
             lambda: os.open(target, os.O_WRONLY | os.O_TRUNC)),
            ("open(..., 'r+b')", lambda: open(target, "r+b")),
            ("create", lambda: os.open(os.path.join(self.mnt, "new_file"),
                                       os.O_WRONLY | os.O_CREAT, 0o644)),
            ("mkdir", lambda: os.mkdir(os.path.join(self.mnt, "new_dir"))),
            ("unlink", lambda: os.unlink(target)),
            ("setxattr", lambda: os.setxattr(target, "user.x", b"1")),
        ]
        for what, fn in attempts:
            try:
                r = fn()
            except OSError as ex:
                if ex.errno not in RO_ERRNOS:
                    self.err("read-only: %s: %s (expected EROFS or EACCES)"
                             % (what, ex))
                continue
            if isinstance(r, int):
                os.close(r)
            elif r is not None:
                r.close()
            self.err("read-only: %s on %s succeeded" % (what, target))

    # ------------------------------------------------------------------ run
    def run(self):
        kind, res = compare.torch_load(self.ckpt, self.fc)
        has_torch = kind == "obj"
        if has_torch:
            self.root = res
        else:
            self.notes["torch cannot load it (%s): checked against ptls and "
                       "the records" % (res or kind)] += 1
        self.torch_storage = {}
        self.by_path = {}
        for e in self.j.get("entries", []):
            keys = e.get("keys", [])
            comps = e.get("path", "").split("/") if keys else []
            if len(comps) == len(keys):
                for i in range(len(keys) + 1):
                    self.by_path.setdefault("/".join(comps[:i]), keys[:i])
        self.check_tree()
        for e in self.j.get("entries", []):
            o, ok = None, False
            keys = e.get("keys", [])
            rel = px.mount_rel(self.j, e)
            if rel.rpartition("/")[0] in self.collapsed:
                continue        # an item of a list file: scalar_lists()
            if has_torch:
                if any(isinstance(k, dict) and "repr" in k for k in keys):
                    self.notes["entries under keys of other types: torch "
                               "unchecked"] += 1
                else:
                    try:
                        o, ok = compare.navigate(self.root, keys), True
                    except compare.Mismatch as ex:
                        self.err("%s: %s" % (e.get("path"), ex))
            kind = e.get("kind")
            if isinstance(o, compare.SetElem) and kind != "value":
                o, ok = None, False
            if kind == "tensor":
                self.check_tensor(e, o if ok else None)
            elif kind in ("value", "object"):
                self.check_value(e, o, ok)
            elif kind == "link":
                self.check_link(e, o, ok)
            elif kind == "empty":
                self.check_empty(e, o, ok)
            else:
                self.err("%s: unknown kind %r" % (e.get("path"), kind))
        self.check_dir_types()
        self.check_plumbing()
        self.check_readonly()


def run_one(base, label, ckpt, stem, mnt):
    ckpt = os.path.join(base, ckpt)
    stem = os.path.join(base, stem)
    mnt = os.path.join(base, mnt)
    listing = px.load_listing(stem + ".json")
    mc = MountCheck(label, ckpt, listing, mnt)
    signal.alarm(TIMEOUT)
    try:
        try:
            mc.run()
        except OSError as ex:
            if ex.errno not in (errno.ENOTCONN, errno.ECONNABORTED):
                raise
            mc.err("the mount went away: %s" % ex)
    except Timeout as ex:
        mc.err(str(ex))
    except Exception:
        mc.err("check_mount.py crashed: " + traceback.format_exc().strip()
               .replace("\n", "\n    "))
    finally:
        signal.alarm(0)
        mc.arch.close()
    with open(stem + ".report", "w", encoding="utf-8") as f:
        for m in mc.errors[:MAX_SHOWN]:
            f.write(m + "\n")
        if len(mc.errors) > MAX_SHOWN:
            f.write("... and %d more\n" % (len(mc.errors) - MAX_SHOWN))
    notes = "".join("; %s x%d" % kv for kv in sorted(mc.notes.items()))
    n = len(listing.get("entries", []))
    if mc.errors:
        return "FAIL", "%d mismatches (%d entries)" % (len(mc.errors), n)
    return "ok", "%d entries, %d tensors, %d bytes read%s" % (
        n, mc.ntensors, mc.nbytes_read, notes)


def main(argv):
    if len(argv) != 2:
        print("usage: check_mount.py BASE", file=sys.stderr)
        return 2
    base = os.path.abspath(argv[1])
    signal.signal(signal.SIGALRM, on_alarm)
    print("ready\ttorch %s, python %s, numpy %s" % (
        torch.__version__, sys.version.split()[0], np.__version__),
        file=ANSWERS, flush=True)
    for line in sys.stdin:
        f = line.rstrip("\n").split("\t")
        if f[0] == "quit":
            break
        if f[0] != "check" or len(f) != 5:
            print("FAIL\tbad request %r" % line, file=ANSWERS, flush=True)
            continue
        try:
            status, summary = run_one(base, *f[1:])
        except Exception as ex:
            status, summary = "FAIL", "check_mount.py: %s: %s" % (
                type(ex).__name__, ex)
        print("%s\t%s" % (status, summary.replace("\n", " ")), file=ANSWERS,
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
