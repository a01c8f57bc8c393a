"""dcp_write_check.py - edits of a DCP directory through a ptfs mount, and
what DCP loads of the directory after the write-back, for
tests/fs/formats/dcp_write.sh (torch 1.13 or 2.x; dcp_check.py beside it).

What a directory holds is read three ways: through the mount (every file
of the tree: a tensor's bytes, user.dtype and user.shape; a value's
text); by DCP itself under torch 2.x (dcp_to_torch_save then torch.load,
and dcp.load into a state dict of the tree's keys); and, under any torch,
by a reader of its own here that takes nothing from ptfs or from
torch.distributed: .metadata unpickled with stand-in classes, each chunk's
item torch.load'ed from its file and placed in its box, each value's
item loaded, the tree rebuilt from planner_data.

  gen OUT       (torch 2.x) plain/, rows/, grid/ and nocoll/ as
                dcp_check.py makes them (its own generator, imported),
                and the reader here checked against dcp_to_torch_save on
                each of the first three
  readers OUT   that check alone, on directories made before (the test
                environment's fixtures/dcp, which dcp_check.py gen wrote)
  edit MNT DIR OUT.json KIND
                through the mount MNT of directory DIR, one of:
                  rows1   4 bytes at offset 4 of layer/rows inverted
                          (dd conv=notrunc; in its first chunk only)
                  rows2   8 bytes of layer/rows across its first chunk
                          edge inverted (pwrite; two chunks, two files)
                  grid1   `cp` of a file over grid (a whole rewrite,
                          every byte changed: all of its chunks)
                  grid2   a whole rewrite of gridh (every byte written,
                          numpy.memmap r+) in which only its last chunk's
                          bytes differ
                  npy1    as rows1, through layer/rows.npy: 4 bytes
                          written in place past its header (pwrite)
                  npy2    as grid1, through grid.npy: np.save of the
                          array with every byte changed (a whole new
                          .npy of the same dtype and shape)
                  pkeys   plain/: tensors and values renamed (in their
                          dict, nested, into another dict) and removed
                  rkeys   rows/: a sharded tensor renamed, a value moved
                          into another dict, a value and the
                          replicated tensor removed
                  rmix    rows/: layer/rows renamed, note removed, 4
                          bytes of layer/cols inverted
                and OUT.json: the tree before ("old") and after ("new")
                as the mount shows it, the edit checked against it; each
                file of DIR with its sha256; which .distcp files hold a
                chunk whose bytes changed (from DIR's .metadata) and
                the names they must get; each item's place before
  refuse MNT DIR OUT.json
                through the mount: a new file, a directory, user.dtype
                and user.shape of a tensor, a write into a value's file
                and `echo` into it, a .npy of another shape over a
                tensor's view, a write into its .txt view, and two
                truncations of a tensor to another size must each fail
                with EPERM (EINVAL, EFBIG) and change nothing the mount
                shows
  rofs MNT      (nocoll/) a write into a tensor, mkdir, unlink and
                rename fail with EROFS
  written DIR OUT.json [ONE.pt]
                after the write-back: DIR holds exactly OUT.json's "new"
                as the reader here loads it (and under torch 2.x as
                dcp_to_torch_save and dcp.load load it); its files are
                the old ones, byte for byte and by name, but for the
                .distcp files that held a changed chunk, now under their
                new names (the old gone), and .metadata, rewritten, which
                names exactly the .distcp files there are; every item of
                an untouched file is where it was; no temporary.  With
                ONE.pt (what `ptrepack DIR ONE.pt` wrote) also that
  state DIR OUT.json
                prints "old", "new" or "mixed" (or "broken: why"): which
                of OUT.json's trees DIR holds as DCP (torch 2.x) or the
                reader here (1.13) loads it
  named DIR     the .distcp files of DIR are exactly those its .metadata
                names, and no temporary is there
  shows MNT OUT.json
                the mount shows OUT.json's "new"

Prints "ok<TAB>summary" and exits 0, or the problems and exits 1.
"""
import errno
import hashlib
import io
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dcp_check  # noqa: E402

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def sha(b):
    return hashlib.sha256(b).hexdigest()


def short(x):
    """An exception on one line (DCP's hold the ranks' tracebacks)."""
    t = " ".join(repr(x).split())
    return t if len(t) <= 200 else t[:200] + "..."


def bad_exit(bad):
    print("\n".join(bad[:20]))
    return 1


# ------------------------------------------------ .metadata, read here

class Stub:
    """A class of torch.distributed.checkpoint, as its pickled state."""

    def __init__(self, *args, **kw):
        self.args = args

    def __setstate__(self, st):
        if isinstance(st, tuple) and len(st) == 2 and \
                isinstance(st[1], dict) and \
                (st[0] is None or isinstance(st[0], dict)):
            self.__dict__.update(st[0] or {})
            self.__dict__.update(st[1])
        elif isinstance(st, dict):
            self.__dict__.update(st)
        else:
            self.state = st


_stubs = {}


class Unpickler(pickle.Unpickler):
    def find_class(self, mod, name):
        if not mod.startswith("torch.distributed"):
            try:
                return super().find_class(mod, name)
            except (AttributeError, ImportError):
                pass
        if (mod, name) not in _stubs:
            _stubs[(mod, name)] = type(name, (Stub,), {})
        return _stubs[(mod, name)]


def md_read(d):
    with open(os.path.join(d, ".metadata"), "rb") as f:
        return Unpickler(f).load()   # the test's own file: nothing runs


def path_of(md, fqn):
    return "/".join(str(p) for p in md.planner_data.get(fqn, (fqn,)))


def is_tensor_md(m):
    return hasattr(m, "chunks")


def dtype_of(m):
    p = m.properties
    return getattr(p, "dtype", None) or p.state[0]


def places(md):
    """{(fqn, chunk offsets or None): (file, offset, length)}"""
    out = {}
    for k, si in md.storage_data.items():
        off = getattr(k, "offset", None)
        out[(k.fqn, None if off is None else tuple(off))] = (
            si.relative_path, si.offset, si.length)
    return out


def tload(b):
    try:
        return torch.load(io.BytesIO(b), weights_only=False)
    except TypeError:
        return torch.load(io.BytesIO(b))


def item(d, place):
    f, off, n = place
    with open(os.path.join(d, f), "rb") as fh:
        fh.seek(off)
        b = fh.read(n)
    if len(b) != n:
        raise ValueError("%s: item at %d runs past the end" % (f, off))
    return tload(b)


def own_load(d):
    """{path: leaf}: each tensor gathered from its chunks' items."""
    md = md_read(d)
    pl = places(md)
    flat = {}
    for fqn, m in md.state_dict_metadata.items():
        if is_tensor_md(m):
            t = torch.zeros(tuple(m.size), dtype=dtype_of(m))
            for ch in m.chunks:
                x = item(d, pl[(fqn, tuple(ch.offsets))])
                box = tuple(slice(o, o + s)
                            for o, s in zip(ch.offsets, ch.sizes))
                if tuple(x.shape) != tuple(ch.sizes) or x.dtype != t.dtype:
                    raise ValueError("%s: a chunk's item holds %s %s" % (
                        fqn, x.dtype, tuple(x.shape)))
                t[box] = x
            flat[path_of(md, fqn)] = t
        else:
            flat[path_of(md, fqn)] = item(d, pl[(fqn, None)])
    return flat


def tree_of(flat):
    out = {}
    for p, v in flat.items():
        dcp_check.walk(v, p.split("/"), out)
    return out


def held(d):
    """The tree as DCP (torch 2.x) or the reader here loads it."""
    if TORCH2:
        t = {}
        dcp_check.walk(dcp_check.loaded(d), [], t)
        return t
    return tree_of(own_load(d))


# ------------------------------------------------ the mount

def mount_tree(mnt):
    out = {}
    for top, dirs, files in os.walk(mnt):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".ptfs"))
        for f in sorted(files):
            p = os.path.join(top, f)
            rel = os.path.relpath(p, mnt)
            with open(p, "rb") as fh:
                data = fh.read()
            try:
                dt = os.getxattr(p, "user.dtype").decode()
            except OSError as x:
                if x.errno != errno.ENODATA:
                    raise
                text = data.decode()
                out[rel] = {"value": text[:-1] if text.endswith("\n")
                            else text}
                continue
            shape = os.getxattr(p, "user.shape").decode()
            out[rel] = {"dtype": dt, "sha256": sha(data), "shape": [
                int(x) for x in shape.split(",") if x]}
    return out


def read(mnt, key):
    with open(os.path.join(mnt, key), "rb") as f:
        return f.read()


def xor_at(mnt, key, off, n):
    fd = os.open(os.path.join(mnt, key), os.O_RDWR)
    try:
        b = os.pread(fd, n, off)
        os.pwrite(fd, bytes(x ^ 0xFF for x in b), off)
    finally:
        os.close(fd)


def expect_errno(bad, want, what, fn):
    """fn() must fail with errno @want (one, or a tuple of the allowed)"""
    want = want if isinstance(want, tuple) else (want,)
    try:
        fn()
    except OSError as e:
        if e.errno not in want:
            bad.append("%s: %s, not %s" % (
                what, os.strerror(e.errno),
                "/".join(errno.errorcode[w] for w in want)))
        return
    bad.append("%s: succeeded" % what)


def diff(a, b):
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


# ------------------------------------------------ edits

def fqn_of(md, path):
    for fqn in md.state_dict_metadata:
        if path_of(md, fqn) == path:
            return fqn
    raise KeyError("no key %s in .metadata" % path)


def grid_of(md, path, data):
    """@data (a tensor's bytes) as uint8[shape..., itemsize]."""
    m = md.state_dict_metadata[fqn_of(md, path)]
    isz = torch.empty((), dtype=dtype_of(m)).element_size()
    return np.frombuffer(data, np.uint8).reshape(
        tuple(m.size) + (isz,)).copy()


def first_edge(md, path):
    """The byte where layer/rows's second chunk (in dim 0) starts."""
    m = md.state_dict_metadata[fqn_of(md, path)]
    isz = torch.empty((), dtype=dtype_of(m)).element_size()
    row = int(np.prod(tuple(m.size)[1:])) * isz
    return min(ch.offsets[0] for ch in m.chunks if ch.offsets[0]) * row


def rewrite_by_cp(mnt, key, new):
    with tempfile.NamedTemporaryFile(dir="/tmp", delete=False) as f:
        f.write(new)
    try:
        r = subprocess.run(["cp", f.name, os.path.join(mnt, key)],
                           capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if r.returncode:
        raise OSError(errno.EIO, "cp: " + r.stderr.strip())


def do_edit(mnt, md, kind):
    """Makes the edit; returns (renames, removed, {key: wanted bytes})."""
    bytes_ = {}
    if kind == "rows1":     # as `dd conv=notrunc` does it
        b = bytes(x ^ 0xFF for x in read(mnt, "layer/rows")[4:8])
        r = subprocess.run(["dd", "of=" + os.path.join(mnt, "layer/rows"),
                            "bs=1", "seek=4", "conv=notrunc",
                            "status=none"], input=b, capture_output=True)
        if r.returncode:
            raise OSError(errno.EIO, "dd: " + r.stderr.decode().strip())
        bytes_["layer/rows"] = (4, 4, 0xFF)
        return {}, [], bytes_
    if kind == "rows2":
        e = first_edge(md, "layer/rows")
        xor_at(mnt, "layer/rows", e - 4, 8)
        bytes_["layer/rows"] = (e - 4, 8, 0xFF)
        return {}, [], bytes_
    if kind == "grid1":
        old = read(mnt, "grid")
        rewrite_by_cp(mnt, "grid", bytes(x ^ 0x5A for x in old))
        bytes_["grid"] = (0, len(old), 0x5A)
        return {}, [], bytes_
    if kind == "grid2":
        old = read(mnt, "gridh")
        g = grid_of(md, "gridh", old)
        ch = md.state_dict_metadata[fqn_of(md, "gridh")].chunks[-1]
        box = tuple(slice(o, o + s) for o, s in zip(ch.offsets, ch.sizes))
        g[box] ^= 0x33
        # every byte written, through a shared mapping
        mm = np.memmap(os.path.join(mnt, "gridh"), dtype=np.uint8,
                       mode="r+")
        mm[:] = g.reshape(-1)
        mm.flush()
        del mm
        bytes_["gridh"] = g.tobytes()
        return {}, [], bytes_
    if kind == "npy1":      # the .npy view's data part, in place
        p = os.path.join(mnt, "layer/rows.npy")
        hl = os.path.getsize(p) - os.path.getsize(os.path.join(mnt,
                                                               "layer/rows"))
        xor_at(mnt, "layer/rows.npy", hl + 4, 4)
        bytes_["layer/rows"] = (4, 4, 0xFF)
        return {}, [], bytes_
    if kind == "npy2":      # np.save over the view: open('wb'), header, data
        p = os.path.join(mnt, "grid.npy")
        a = np.load(p)
        b = (a.view(np.uint8) ^ 0x5A).view(a.dtype).reshape(a.shape)
        np.save(p, b)
        bytes_["grid"] = (0, a.nbytes, 0x5A)
        return {}, [], bytes_
    if kind == "pkeys":
        ren = {"model/float64": "model/f64",
               "optim/state/0/exp_avg": "optim/state/0/m",
               "optim/state/1/step": "model/step1",
               "name": "cfg/name"}
        rem = ["model/int8", "lr", "optim/state/1/exp_avg_sq"]
    elif kind == "rkeys":
        ren = {"layer/rows": "layer/rows_renamed", "step": "layer/step"}
        rem = ["note", "layer/rep"]
    elif kind == "rmix":
        ren = {"layer/rows": "layer/rows_renamed"}
        rem = ["note"]
        xor_at(mnt, "layer/cols", 0, 4)
        bytes_["layer/cols"] = (0, 4, 0xFF)
    else:
        raise ValueError("no edit " + kind)
    for a, b in ren.items():
        os.rename(os.path.join(mnt, a), os.path.join(mnt, b))
    for a in rem:
        os.unlink(os.path.join(mnt, a))
    return ren, rem, bytes_


def new_name(f, taken):
    """The first free of BASE.EXT, BASE.g1.EXT, ... other than @f."""
    stem, ext = f.rsplit(".", 1)
    base = re.sub(r"\.g[1-9][0-9]*$", "", stem)
    for i in range(10000):
        n = "%s%s.%s" % (base, ".g%d" % i if i else "", ext)
        if n != f and n not in taken:
            return n
    raise ValueError("no name for " + f)


def edit(mnt, d, out, kind):
    md = md_read(d)
    old = mount_tree(mnt)
    oldbytes = {}
    for k in ("layer/rows", "layer/cols", "grid", "gridh"):
        if k in old:
            oldbytes[k] = read(mnt, k)
    ren, rem, wanted = do_edit(mnt, md, kind)
    new = mount_tree(mnt)
    bad = []
    # what the mount must show now: the old tree, keys moved, bytes edited
    want = dict(old)
    for a, b in ren.items():
        want[b] = want.pop(a)
    for a in rem:
        del want[a]
    changed = {}    # key: (old bytes, new bytes)
    for k, w in wanted.items():
        ob = oldbytes[k]
        if isinstance(w, tuple):
            off, n, mask = w
            nb = ob[:off] + bytes(x ^ mask for x in ob[off:off + n]) + \
                ob[off + n:]
        else:
            nb = w
        changed[k] = (ob, nb)
        k2 = ren.get(k, k)
        want[k2] = dict(want[k2], sha256=sha(nb))
        if read(mnt, k2) != nb:
            bad.append("%s: the mount shows other bytes than written" % k2)
    if new != want:
        bad.append("the mount shows other keys or bytes: %s" % diff(new, want)[:6])
    # which files hold a chunk whose bytes changed
    files = set()
    for k, (ob, nb) in changed.items():
        m = md.state_dict_metadata[fqn_of(md, k)]
        go, gn = grid_of(md, k, ob), grid_of(md, k, nb)
        pl = places(md)
        for ch in m.chunks:
            box = tuple(slice(o, o + s) for o, s in zip(ch.offsets, ch.sizes))
            if not np.array_equal(go[box], gn[box]):
                files.add(pl[(fqn_of(md, k), tuple(ch.offsets))][0])
    listing = sorted(os.listdir(d))
    taken, renames = set(listing), {}
    for f in sorted(files):
        renames[f] = new_name(f, taken)
        taken.add(renames[f])
    sums0 = {}
    for f in listing:
        with open(os.path.join(d, f), "rb") as fh:
            sums0[f] = sha(fh.read())
    # each item's place, by path (and chunk offsets)
    pl0 = [[path_of(md, fqn), list(off) if off is not None else None,
            list(place)] for (fqn, off), place in places(md).items()]
    with open(out, "w") as f:
        json.dump({"kind": kind, "old": old, "new": new, "renamed": ren,
                   "removed": rem, "edited": sorted(changed),
                   "files": renames, "sums0": sums0, "places0": pl0}, f)
    if kind in ("rows1", "grid2", "npy1") and len(files) != 1:
        bad.append("%s: the edit touched %d files' chunks, meant 1: %s" % (
            kind, len(files), sorted(files)))
    if kind in ("rows2",) and len(files) != 2:
        bad.append("rows2: the edit touched %s, meant 2 files" % sorted(files))
    if kind in ("grid1", "npy2") and len(files) < 2:
        bad.append("grid1: the edit touched %s only" % sorted(files))
    if bad:
        return bad_exit(bad)
    what = ", ".join(["%s edited" % k for k in sorted(changed)] +
                     ["%s -> %s" % x for x in sorted(ren.items())] +
                     ["%s removed" % k for k in rem])
    print("ok\t%s: %s; files to write: %s" % (
        kind, what, " ".join("%s -> %s" % x for x in sorted(renames.items()))
        or "none"))
    return 0


def refuse(mnt, d, out):
    old = mount_tree(mnt)
    tensors = [k for k in sorted(old) if "dtype" in old[k] and
               old[k]["shape"] and old[k]["shape"][0] > 1 and
               len(old[k]["shape"]) == 2]
    values = [k for k in sorted(old) if "value" in old[k]]
    t, v = tensors[0], values[0]
    tp, top = os.path.join(mnt, t), os.path.dirname(os.path.join(mnt, t))
    size = os.path.getsize(tp)
    sh = old[t]["shape"]
    bad = []
    E = errno.EPERM
    # a size change: EINVAL when applied (truncate(2) by path applies at
    # once), EFBIG past the tensor's size, as for one .pt file
    Z = (errno.EINVAL, errno.EFBIG)

    def create():
        os.close(os.open(os.path.join(top, "new"),
                         os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))

    def value():
        fd = os.open(os.path.join(mnt, v), os.O_WRONLY)
        try:
            os.pwrite(fd, b"9", 0)
        finally:
            os.close(fd)

    def echo():     # `echo 9 > v`: refused at the open (O_TRUNC)
        with open(os.path.join(mnt, v), "w") as f:
            f.write("9\n")

    def reshape():  # a .npy of another shape: a new tensor, at close()
        a = np.load(tp + ".npy")
        np.save(tp + ".npy", a.reshape(-1))

    def text():     # the .txt view stays as it is
        with open(tp + ".txt", "w") as f:
            f.write("0\n")
    tries = [("a new file", create),
             ("mkdir", lambda: os.mkdir(os.path.join(top, "d"))),
             ("setxattr user.dtype of " + t,
              lambda: os.setxattr(tp, "user.dtype", b"int8")),
             ("setxattr user.shape of " + t,
              lambda: os.setxattr(tp, "user.shape", (",".join(
                  map(str, sh[::-1]))).encode())),
             ("a write into the value " + v, value),
             ("echo into the value " + v, echo),
             ("a 1-d .npy over %s.npy" % t, reshape),
             ("a write into %s.txt" % t, text),
             ("truncate %s shorter" % t, lambda: os.truncate(tp, size - 4), Z),
             ("truncate %s longer" % t, lambda: os.truncate(tp, size + 4), Z)]
    for what, fn, *want in tries:
        expect_errno(bad, want[0] if want else E, what, fn)
    new = mount_tree(mnt)
    if new != old:
        bad.append("the mount shows changes: %s" % diff(new, old)[:6])
    if os.path.getsize(tp) != size:
        bad.append("%s is %d bytes now" % (t, os.path.getsize(tp)))
    with open(out, "w") as f:
        json.dump({"old": old, "new": new}, f)
    if bad:
        return bad_exit(bad)
    print("ok\t%d edits refused (EPERM: a new file, mkdir, user.dtype, "
          "user.shape, a value written and echoed into, a .npy of another "
          "shape, a .txt; EINVAL/EFBIG: 2 truncations); the mount "
          "unchanged"
          % len(tries))
    return 0


def rofs(mnt):
    tree = mount_tree(mnt)
    t = [k for k in sorted(tree) if "dtype" in tree[k]][0]
    bad = []
    E = errno.EROFS

    def write():
        with open(os.path.join(mnt, t), "r+b") as f:
            f.write(b"\0")
    expect_errno(bad, E, "a write into " + t, write)
    expect_errno(bad, E, "mkdir", lambda: os.mkdir(os.path.join(mnt, "d")))
    expect_errno(bad, E, "unlink " + t,
                 lambda: os.unlink(os.path.join(mnt, t)))
    expect_errno(bad, E, "rename " + t, lambda: os.rename(
        os.path.join(mnt, t), os.path.join(mnt, t + ".x")))
    if mount_tree(mnt) != tree:
        bad.append("the mount shows changes")
    if bad:
        return bad_exit(bad)
    print("ok\ta write, mkdir, unlink and rename: EROFS")
    return 0


# ------------------------------------------------ after the write-back

def distcps(d):
    return set(f for f in os.listdir(d) if f.endswith(".distcp"))


def named(d, bad=None):
    own = bad is None
    bad = [] if own else bad
    md = md_read(d)
    names = set(si.relative_path for si in md.storage_data.values())
    there = distcps(d)
    if names != there:
        bad.append(".distcp files %s, .metadata names %s" % (
            sorted(there), sorted(names)))
    tmp = [f for f in os.listdir(d) if "ptfs-new" in f or f.endswith(".tmp")]
    if tmp:
        bad.append("temporaries left: %s" % tmp)
    if not own:
        return names
    if bad:
        return bad_exit(bad)
    print("ok\t%d .distcp files, each named by .metadata" % len(there))
    return 0


def dcp_load_new(d, new):
    """dcp.load into a nested state dict of the new tree's tensors."""
    import torch.distributed.checkpoint as dcp
    sd, n = {}, 0
    for path, e in new.items():
        if "dtype" not in e:
            continue
        parts = path.split("/")
        at = sd
        for p in parts[:-1]:
            at = at.setdefault(p, {})
        at[parts[-1]] = torch.zeros(e["shape"], dtype=getattr(torch, e["dtype"]))
        n += 1
    dcp.load(sd, storage_reader=dcp.FileSystemReader(d))
    bad = []
    for path, e in new.items():
        if "dtype" not in e:
            continue
        at = sd
        for p in path.split("/"):
            at = at[p]
        if sha(dcp_check.raw(at)) != e["sha256"]:
            bad.append("%s: dcp.load gives other bytes" % path)
    return n, bad


def written(d, out, one=None):
    with open(out) as f:
        o = json.load(f)
    new, ren, sums0 = o["new"], o["files"], o["sums0"]
    bad = []
    # the files: the old ones, but the rewritten under their new names
    want = (set(sums0) - set(ren)) | set(ren.values())
    there = set(os.listdir(d))
    if there != want:
        bad.append("files %s, want %s" % (sorted(there - want),
                                          sorted(want - there)))
    for f, s in sorted(sums0.items()):
        if f in ren or f == ".metadata" or f not in there:
            continue
        with open(os.path.join(d, f), "rb") as fh:
            if sha(fh.read()) != s:
                bad.append("%s changed" % f)
    with open(os.path.join(d, ".metadata"), "rb") as fh:
        if sha(fh.read()) == sums0.get(".metadata"):
            bad.append(".metadata did not change")
    names = named(d, bad)
    # every item: in its file's new name; where it was in an untouched one
    md = md_read(d)
    now = {}
    for (fqn, off), place in places(md).items():
        now[(path_of(md, fqn), None if off is None else tuple(off))] = place
    seen = 0
    for path, off, (f, at, n) in o["places0"]:
        p = o["renamed"].get(path, path)
        if path in o["removed"]:
            continue
        key = (p, None if off is None else tuple(off))
        if key not in now:
            bad.append("%s (chunk %s): no item in .metadata" % (p, off))
            continue
        f1, at1, n1 = now[key]
        if f1 != ren.get(f, f):
            bad.append("%s: its item is in %s, not %s" % (
                p, f1, ren.get(f, f)))
        elif f not in ren and (at1, n1) != (at, n):
            bad.append("%s: its item moved in %s (%d+%d, was %d+%d)" % (
                p, f1, at1, n1, at, n))
        seen += 1
    extra = sorted(k[0] for k in now if k[0] not in new and not any(
        x.startswith(k[0] + "/") for x in new))
    if extra:
        bad.append(".metadata names keys the tree has not: %s" % extra[:5])
    # what loads: the reader here, and DCP itself under torch 2.x
    how = []
    try:
        got = tree_of(own_load(d))
        if got != new:
            bad.append("the reader here loads other keys or bytes: %s" %
                       diff(got, new)[:6])
        how.append("read here")
    except BaseException as x:    # DCP's CheckpointException is one
        if isinstance(x, (SystemExit, KeyboardInterrupt)):
            raise
        bad.append("the reader here fails: %s" % short(x))
    if TORCH2:
        try:
            got = held(d)
            if got != new:
                bad.append("dcp_to_torch_save gives other keys or bytes: "
                           "%s" % diff(got, new)[:6])
            n, b = dcp_load_new(d, new)
            bad += b
            how.append("dcp_to_torch_save, dcp.load (%d tensors)" % n)
        except BaseException as x:    # DCP's CheckpointException is one
            if isinstance(x, (SystemExit, KeyboardInterrupt)):
                raise
            bad.append("DCP fails: %s" % short(x))
    if one:
        t = {}
        dcp_check.walk(torch.load(one, **({"weights_only": False}
                                          if TORCH2 else {})), [], t)
        if t != new:
            bad.append("%s: other keys or bytes: %s" % (
                os.path.basename(one), diff(t, new)[:6]))
        how.append("ptrepack's .pt")
    if bad:
        return bad_exit(bad)
    print("ok\t%d entries as edited (%s); %d items placed; files now: "
          "%s" % (len(new), ", ".join(how), seen, " ".join(sorted(names))))
    return 0


def state(d, out):
    with open(out) as f:
        o = json.load(f)
    try:
        got = held(d)
    except BaseException as x:    # DCP's CheckpointException is one
        if isinstance(x, (SystemExit, KeyboardInterrupt)):
            raise
        print("broken: %s" % short(x))
        return 0
    print("new" if got == o["new"] else "old" if got == o["old"] else
          "mixed")
    return 0


def shows(mnt, out):
    with open(out) as f:
        o = json.load(f)
    got = mount_tree(mnt)
    if got != o["new"]:
        print("the mount shows other keys or bytes: %s" %
              diff(got, o["new"])[:6])
        return 1
    print("ok\t%d entries with the edits" % len(got))
    return 0


# ------------------------------------------------ the directories

def gen(out):
    import torch.distributed.checkpoint as dcp
    os.makedirs(out, exist_ok=True)
    dcp.save(dcp_check.plain_state(),
             storage_writer=dcp.FileSystemWriter(os.path.join(out, "plain")))
    dcp_check.ranks(os.path.join(out, "rows"), "rows", 3)
    dcp_check.ranks(os.path.join(out, "grid"), "grid", 4)
    dcp_check.ranks(os.path.join(out, "nocoll"), "nocoll", 3)
    return readers(out)


def readers(out):
    """The reader here loads plain/, rows/ and grid/ (made by gen, or
    copied from the test environment's fixtures) as dcp_to_torch_save
    does, and nothing but DCP files lies in them."""
    n = 0
    for name in ("plain", "rows", "grid"):
        d = os.path.join(out, name)
        a, b = held(d), tree_of(own_load(d))
        if a != b:
            print("%s: the reader here differs from dcp_to_torch_save: %s" % (
                name, diff(a, b)[:6]))
            return 1
        n += len(a)
    # nothing else beside: the write-back tests list these directories
    for name in ("plain", "rows", "grid", "nocoll"):
        for f in os.listdir(os.path.join(out, name)):
            if not re.match(r"^(\.metadata|__[0-9]+(_[0-9]+)?\.(distcp|"
                            r"metadata))$", f):
                print("%s/%s: not a DCP file" % (name, f))
                return 1
    print("ok\tplain/, rows/ (3 ranks), grid/ (4), nocoll/ (3), torch %s; "
          "the reader here loads %d entries as dcp_to_torch_save" % (
              torch.__version__, n))
    return 0


def main(argv):
    cmds = {"gen": (gen, 1, 1), "readers": (readers, 1, 1),
            "edit": (edit, 4, 4),
            "refuse": (refuse, 3, 3), "rofs": (rofs, 1, 1),
            "written": (written, 2, 3), "state": (state, 2, 2),
            "named": (named, 1, 1), "shows": (shows, 2, 2)}
    if len(argv) >= 2 and argv[1] in cmds:
        fn, lo, hi = cmds[argv[1]]
        if lo <= len(argv) - 2 <= hi:
            try:
                return fn(*argv[2:])
            except OSError as x:
                # an edit the mount refused (EROFS, EPERM): one line
                if argv[1] not in ("edit", "refuse", "rofs", "shows"):
                    raise
                what = argv[1] + (" " + argv[5] if len(argv) > 5 else "")
                print("%s: %s (%s)" % (what, x,
                                       errno.errorcode.get(x.errno, "?")))
                return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
