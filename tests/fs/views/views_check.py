"""views_check.py - the mount half of tests/fs/views/views.sh: the .npy and .txt
views and the cross-checkpoint workflows (diff -r, rsync, cmp) through
real ptfs mounts, with numpy (no torch: the torch half is views_torch.py).

  python3 views_check.py PTFS DIR

DIR holds what `views_torch.py gen` wrote.  Edited checkpoints go to
DIR/out/, and what torch must find in them to DIR/expect/<case>.json (+
the expected bytes), for `views_torch.py verify`.  Prints one line per
check and "N passed, N failed".
"""
import errno
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np

# tests/fs/lib/ptfs_mount.py
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ptfs_mount  # noqa: E402

PTFS, W = sys.argv[1], sys.argv[2]
META = json.load(open(W + "/meta.json"))
T = META["tensors"]
npass = nfail = 0

DESCR = {
    "float32": "<f4", "float64": "<f8", "float16": "<f2", "bfloat16": "<u2",
    "int8": "|i1", "uint8": "|u1", "int16": "<i2", "int32": "<i4",
    "int64": "<i8", "bool": "|b1", "complex64": "<c8", "complex128": "<c16",
    "complex32": [("re", "<f2"), ("im", "<f2")], "float8_e4m3fn": "|u1",
}


def ok(label, msg):
    global npass
    npass += 1
    print("ok   %s: %s" % (label, msg))


def fail(label, msg):
    global nfail
    nfail += 1
    print("FAIL %s: %s" % (label, msg))


def check(label, cond, msg, why=""):
    if cond:
        ok(label, msg)
    else:
        fail(label, why or msg)


def ref_bytes(path):
    with open(W + "/ref/" + T[path]["ref"], "rb") as f:
        return f.read()


def ref_array(path):
    m = T[path]
    return np.frombuffer(ref_bytes(path), dtype=np.dtype(DESCR[m["dtype"]])
                         ).reshape(m["shape"])


# ---- mounts ----

class Mount(ptfs_mount.Mount):
    def __init__(self, ck, name, *opts):
        super().__init__(PTFS, ck, W + "/mnt/" + name, W + "/" + name +
                         ".err", *opts)

    def umount(self, label):
        """ptfs umount: write back, report; then the daemon must exit
        cleanly and have printed nothing but refusals."""
        ok, why = super().umount()
        check(label + " umount", ok, "written back, daemon exited 0", why)


def copy(src, name):
    os.makedirs(W + "/out", exist_ok=True)
    shutil.copyfile(src, W + "/out/" + name)
    return W + "/out/" + name


def expect(case, file, tensors, **extra):
    """tensors: path -> (numpy array of the expected bytes, dtype, shape
    [, parameter])."""
    os.makedirs(W + "/expect", exist_ok=True)
    out = {"file": file, "tensors": {}}
    for i, (path, v) in enumerate(sorted(tensors.items())):
        arr, dtype, shape = v[:3]
        b = "%s.%d.bin" % (case, i)
        with open(W + "/expect/" + b, "wb") as f:
            f.write(np.ascontiguousarray(arr).tobytes())
        out["tensors"][path] = {"bytes": b, "dtype": dtype,
                                "shape": list(shape)}
        if len(v) > 3:
            out["tensors"][path]["parameter"] = v[3]
    out.update(extra)
    with open(W + "/expect/%s.json" % case, "w") as f:
        json.dump(out, f, indent=1)


def all_refs():
    return {p: (ref_array(p), m["dtype"], m["shape"], m["parameter"])
            for p, m in T.items()}


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def write(path, data, mode="wb"):
    """Write and close; the close() error (EINVAL) if the view refuses."""
    try:
        with open(path, mode) as f:
            f.write(data)
        return None
    except OSError as e:
        return e


# ---- reading: every tensor's views ----

def text_values(text, dtype):
    lines = text.splitlines()
    head, rows = lines[0], lines[1:]
    vals = [t for r in rows for t in r.split()]
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        return head, rows, [float(v.split("(")[0]) for v in vals]
    if dtype.startswith("complex"):
        return head, rows, [complex(v) for v in vals]
    return head, rows, [int(v) for v in vals]


def as_values(path):
    """ref values as Python numbers, for comparing with the text"""
    m, a = T[path], ref_array(path)
    if m["dtype"] == "bfloat16":
        return [float(x) for x in
                (a.astype(np.uint32) << 16).view(np.float32).ravel()]
    if m["dtype"] == "complex32":
        return [complex(float(x[0]), float(x[1])) for x in a.ravel()]
    if m["dtype"] == "float8_e4m3fn":
        return [int(x) for x in a.ravel()]
    if m["dtype"] == "bool":
        return [int(x) for x in a.ravel()]
    return a.ravel().tolist()


# the text prints 9 (float32), 5 (float16), 4 (bfloat16) significant
# digits: enough to give the same bits back (checked by the round trip
# below), so the printed number is that close to the value
REL = {"float16": 1e-4, "bfloat16": 1e-3, "complex32": 1e-4}


def same_numbers(a, b, rel=1e-8):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, complex) or isinstance(y, complex):
            x, y = complex(x), complex(y)
            if not (same_numbers([x.real], [y.real], rel) and
                    same_numbers([x.imag], [y.imag], rel)):
                return False
        elif x != y and not (x != x and y != y):
            if not (isinstance(x, float) and abs(x - y) <= rel * abs(y)):
                return False
    return True


def read_checks(m):
    top = sorted(os.listdir(m.mnt))
    check("listing", not any(n.endswith((".npy", ".txt")) and n != "k.npy"
                             for n in top) and ".ptfs" not in top,
          "ls shows each tensor once, no views, no .ptfs",
          "listing: %s" % top)
    for path, meta in sorted(T.items()):
        dt = meta["dtype"]
        a = ref_array(path)
        if path == "k.npy":
            check("real key k.npy", read(m.p_(path)) == ref_bytes(path),
                  "a key named k.npy wins over k's view")
            continue
        npy = m.p_(path + ".npy")
        if path == "k":
            # key "k.npy" shadows k's .npy view (a real key wins)
            npy = None
        # the .npy view: numpy.load, mmap too, header as numpy writes it
        try:
            if npy is None:
                raise StopIteration
            got = np.load(npy)
            mm = np.load(npy, mmap_mode="r")
            buf = io.BytesIO()
            np.save(buf, a)
            good = (got.dtype == a.dtype and got.shape == a.shape and
                    got.tobytes() == a.tobytes() and
                    mm.tobytes() == a.tobytes() and
                    read(npy) == buf.getvalue() and
                    os.stat(npy).st_size == len(buf.getvalue()))
            check("npy " + path, good, "%s %s %s: numpy.load and mmap equal "
                  "the tensor; bytes as np.save writes them" % (
                      dt, got.dtype.str if not got.dtype.fields else "struct",
                      list(got.shape)),
                  "%s: got %s %s" % (dt, got.dtype, got.shape))
        except StopIteration:
            pass
        except Exception as e:
            fail("npy " + path, "%s: %s" % (dt, e))
            continue
        # the text view: header, rows along the last dim, values
        txt = read(m.p_(path + ".txt"), "r")
        head, rows, vals = text_values(txt, dt)
        shape = meta["shape"]
        nrows = (int(np.prod(shape[:-1])) if shape else 1) if a.size else 0
        good = (head.startswith("# " + dt + " ") and len(rows) == nrows and
                same_numbers(vals, as_values(path), REL.get(dt, 1e-8)))
        check("txt " + path, good, "%s: %d rows, values equal" % (head, nrows),
              "%r: %d rows (want %d), values %s vs %s" % (
                  head, len(rows), nrows, vals[:4], as_values(path)[:4]))
        # xattrs of a view are the tensor's
        # python attributes of a Parameter or subclass, and the class
        xs = {n: os.getxattr(m.p_(path), n).decode()
              for n in os.listxattr(m.p_(path))}
        want = {"user.attr." + k: v for k, v in meta.get("attrs", {}).items()}
        if meta.get("cls"):
            want["user.class"] = meta["cls"]
        got = {k: v for k, v in xs.items()
               if k.startswith("user.attr.") or k == "user.class"}
        if want or got:
            check("attrs " + path, got == want, "xattrs %s" % sorted(got),
                  "got %s, want %s" % (got, want))
        x1 = os.getxattr(m.p_(path), "user.dtype")
        x2 = os.getxattr(m.p_(path + ".txt"), "user.dtype")
        if x1 != x2:
            fail("xattr " + path, "%s vs %s" % (x1, x2))
    # cmp/sha256: a transposed view and its contiguous copy hash the same
    h = [hashlib.sha256(read(m.p_(p))).hexdigest()
         for p in ("base_t", "base_t_copy")]
    check("sha256 view vs copy", h[0] == h[1] and
          subprocess.call(["cmp", "-s", m.p_("base_t"),
                           m.p_("base_t_copy")]) == 0,
          "base_t (a transpose) and its contiguous copy: same sha256, cmp 0")


def listed_views(ck):
    m = Mount(ck, "views", "-o", "ro,views")
    names = set(os.listdir(m.mnt))
    want = {"fc.weight.npy", "fc.weight.txt", "half.npy", "bf16.txt"}
    check("-o views", want <= names and "k.npy.npy" in names and
          ".ptfs" not in names, "readdir lists KEY.npy and KEY.txt",
          "listing: %s" % sorted(names)[:12])
    # a find over the tree reads every view without error
    r = subprocess.run(["find", m.mnt, "-type", "f", "-name", "*.txt",
                        "-exec", "cat", "{}", "+"], capture_output=True)
    check("-o views find+cat", r.returncode == 0 and r.stdout,
          "find | cat of every text view works",
          r.stderr.decode()[:200])
    subprocess.call(["fusermount3", "-u", m.mnt])
    m.p.wait(timeout=30)


# ---- two checkpoints: diff, rsync -n, text diff ----

def diff_checks(ma, mb):
    differ = sorted(p for p, m in T.items() if m["differs"])
    for opts in ([], ["-x", ".ptfs"]):
        r = subprocess.run(["diff", "-rq", *opts, ma.mnt, mb.mnt],
                           capture_output=True, text=True)
        named = sorted(l.split()[1][len(ma.mnt) + 1:]
                       for l in r.stdout.splitlines()
                       if l.startswith("Files "))
        other = [l for l in r.stdout.splitlines() if not l.startswith("Files ")]
        check("diff -rq " + " ".join(opts), named == differ and not other
              and r.returncode == 1,
              "names exactly the %d tensors that differ: %s" % (
                  len(differ), " ".join(differ)),
              "named %s, want %s; other lines %s" % (named, differ, other[:3]))
    r = subprocess.run(["diff", ma.p_("half.txt"), mb.p_("half.txt")],
                       capture_output=True, text=True)
    minus = [l for l in r.stdout.splitlines() if l.startswith("<")]
    plus = [l for l in r.stdout.splitlines() if l.startswith(">")]
    check("diff half.txt", r.returncode == 1 and len(minus) == 1 and
          len(plus) == 1, "one row of half (2, 7) differs: %s" % (
              r.stdout.splitlines()[0] if r.stdout else ""), r.stdout[:300])
    r = subprocess.run(["diff", ma.p_("f64.txt"), mb.p_("f64.txt")],
                       capture_output=True, text=True)
    check("diff f64.txt", r.returncode == 0 and not r.stdout,
          "equal tensors: no output, exit 0")
    r = subprocess.run(["rsync", "-rn", "--checksum", "--out-format=%n",
                        ma.mnt + "/", mb.mnt + "/"], capture_output=True,
                       text=True)
    named = sorted(l for l in r.stdout.splitlines() if not l.endswith("/"))
    check("rsync -n --checksum", r.returncode == 0 and named == differ,
          "lists exactly the tensors that differ",
          "rc %d, listed %s, want %s; %s" % (r.returncode, named, differ,
                                             r.stderr[:200]))


def rsync_copy(a_ck, b_ck, inplace):
    label = "rsync -a" + (" --inplace" if inplace else "")
    case = "rsync_inplace" if inplace else "rsync"
    dst = copy(b_ck, case + ".pt")
    ma = Mount(a_ck, case + "_a", "-o", "ro")
    mb = Mount(dst, case + "_b")
    r = subprocess.run(["rsync", "-a", *(["--inplace"] if inplace else []),
                        ma.mnt + "/", mb.mnt + "/"], capture_output=True,
                       text=True)
    check(label, r.returncode == 0, "copied every tensor of a into b",
          "rc %d: %s" % (r.returncode, r.stderr.strip()[:300]))
    r = subprocess.run(["diff", "-rq", ma.mnt, mb.mnt], capture_output=True,
                       text=True)
    check(label + " then diff", r.returncode == 0,
          "diff -rq finds no difference before unmount", r.stdout[:300])
    subprocess.call(["fusermount3", "-u", ma.mnt])
    ma.p.wait(timeout=30)
    mb.umount(label)
    expect(case, case + ".pt", all_refs(),
           same_storage=[["fc.bias", "tied"], ["base", "base_t"],
                         ["base", "every2"]])


# ---- edits through the views ----

def refused(label, path, data, mode="wb"):
    """Writing @data must fail (at close) and leave the tensor alone."""
    key = path.rsplit(".", 1)[0]
    before = read(key)
    e = write(path, data, mode)
    after = read(key)
    check(label, e is not None and before == after,
          "refused (%s), values unchanged" % (e.strerror if e else ""),
          "error %s, changed %s" % (e, before != after))


def edit_checks(a_ck):
    ck = copy(a_ck, "edit.pt")
    m = Mount(ck, "edit")
    exp = all_refs()
    P = m.p_
    # in place through numpy.memmap of the .npy view
    arr = np.load(P("f64.npy"), mmap_mode="r+")
    arr[0, 0] = 7.25
    arr.flush()
    del arr
    e = ref_array("f64").copy()
    e[0, 0] = 7.25
    exp["f64"] = (e, "float64", [2, 2], False)
    check("memmap r+ f64.npy", np.array_equal(
        np.frombuffer(read(P("f64")), "<f8").reshape(2, 2), e),
        "in-place write through the .npy's data shows in the raw file")
    # np.save, same dtype and shape: new values
    h = (np.arange(14, dtype=np.float16) / 4).reshape(2, 7)
    np.save(P("half.npy"), h)
    exp["half"] = (h, "float16", [2, 7], False)
    check("np.save half.npy", read(P("half")) == h.tobytes(),
          "same dtype and shape: values replaced")
    # another shape: a new tensor, still a Parameter
    w = np.full((4, 5), 0.5, np.float32)
    np.save(P("fc.weight.npy"), w)
    exp["fc.weight"] = (w, "float32", [4, 5], True)
    check("np.save fc.weight.npy (4, 5)", os.getxattr(P("fc.weight"),
          "user.shape") == b"4,5" and read(P("fc.weight")) == w.tobytes(),
          "another shape: a new tensor of shape 4,5")
    said = [l for l in m.log() if "fc.weight.npy: shape (4,5) for a tensor "
            "of shape (3,5)" in l]
    check("np.save another shape is told", len(said) == 1,
          "logged: %s" % (said[0][6:] if said else ""),
          "no line about fc.weight.npy's new shape: %s" % m.log()[-3:])
    # another dtype: refused at close() (np.save raises), nothing changes
    for key, arr in (("scalar", np.array(7.5)),          # float64, 0-d
                     ("half", np.ones((2, 7), np.float32)),
                     ("i64", np.arange(3, dtype=np.int32))):
        before, dt = read(P(key)), os.getxattr(P(key), "user.dtype")
        try:
            np.save(P(key + ".npy"), arr)
            e = None
        except OSError as x:
            e = x
        said = [l for l in m.log() if "%s.npy: %s data, the tensor is %s: "
                "refused" % (key, arr.dtype, dt.decode()) in l]
        check("np.save %s over %s %s.npy" % (arr.dtype, dt.decode(), key),
              e is not None and e.errno == errno.EINVAL and
              read(P(key)) == before and
              os.getxattr(P(key), "user.dtype") == dt and len(said) == 1,
              "np.save raises EINVAL, the tensor unchanged, logged: %s" % (
                  said[0][6:] if said else ""),
              "error %r, changed %s, dtype %s, log %s" % (
                  e, read(P(key)) != before, os.getxattr(P(key), "user.dtype"),
                  m.log()[-2:]))
    # rsync's way: a temporary file renamed onto the view
    buf = io.BytesIO()
    np.save(buf, np.zeros((2, 2), np.float32))
    before = read(P("f64"))
    write(P("tmp_f32"), buf.getvalue())
    try:
        os.rename(P("tmp_f32"), P("f64.npy"))
        e = None
    except OSError as x:
        e = x
    check("rename float32 .npy onto float64 f64.npy", e is not None and
          e.errno == errno.EINVAL and read(P("f64")) == before and
          os.path.exists(P("tmp_f32")), "refused with EINVAL, f64 unchanged, "
          "the temporary file still there", "error %r" % e)
    os.unlink(P("tmp_f32"))
    # cp x.npy m/new_key.npy: a new tensor
    n = np.array([[1, 2], [3, 4]], np.int64)
    np.save(W + "/new.npy", n)
    shutil.copyfile(W + "/new.npy", P("new_key.npy"))
    exp["new_key"] = (n, "int64", [2, 2], False)
    check("cp new.npy m/new_key.npy", os.path.exists(P("new_key")) and
          read(P("new_key")) == n.tobytes() and
          "new_key" in os.listdir(m.mnt), "a new int64 (2, 2) tensor")
    # bf16 shown as '<u2': written back it stays bfloat16, also reshaped
    b = (np.arange(12, dtype=np.uint16) + 0x3f80).reshape(3, 4)
    np.save(P("bf16.npy"), b)
    exp["bf16"] = (b, "bfloat16", [3, 4], False)
    np.save(P("u8.npy"), np.arange(6, dtype=np.uint8)[::-1].copy())
    exp["u8"] = (np.arange(6, dtype=np.uint8)[::-1], "uint8", [6], False)
    check("np.save bf16.npy", os.getxattr(P("bf16"), "user.dtype") ==
          b"bfloat16" and read(P("bf16")) == b.tobytes(),
          "'<u2' bits written back stay bfloat16")
    # tied: both names see it, and stay one tensor
    t = np.array([9, 8, 7], np.float32)
    np.save(P("tied.npy"), t)
    exp["tied"] = exp["fc.bias"] = (t, "float32", [3], False)
    check("np.save tied.npy", read(P("fc.bias")) == t.tobytes(),
          "the other name of a tied tensor shows the new values")
    # a transposed view: written through the view into the shared storage
    base = ref_array("base").copy()
    nt = np.arange(24, dtype=np.float32).reshape(6, 4)
    np.save(P("base_t.npy"), nt)
    base[:] = nt.T
    exp["base"] = (base, "float32", [4, 6], False)
    exp["base_t"] = (nt, "float32", [6, 4], False)
    exp["every2"] = (base.ravel()[1::2], "float32", [12], False)
    check("np.save base_t.npy (a transpose)", read(P("base")) ==
          base.tobytes() and read(P("every2")) == base.ravel()[1::2].tobytes(),
          "the base and the strided slice show it")
    # big-endian .npy into a little-endian checkpoint: converted
    k = np.array([1.5, -2, 3, 4e10, 0, 1], ">f4")
    np.save(P("special.npy"), k)
    exp["special"] = (k.astype("<f4"), "float32", [6], False)
    np.save(P("k.npy.npy"), np.array([7, 8, 9, 10], ">i4"))
    exp["k.npy"] = (np.array([7, 8, 9, 10], "<i4"), "int32", [4], False)
    check("np.save >f4 into special.npy", read(P("special")) ==
          k.astype("<f4").tobytes() and read(P("k.npy")) ==
          np.array([7, 8, 9, 10], "<i4").tobytes(),
          "big-endian data converted; key k.npy has views of its own")
    # text: sed -i (temporary file renamed over the view)
    r = subprocess.run(["sed", "-i", "2s/.*/1 2 3 4/", P("i8.txt")],
                       capture_output=True, text=True)
    i8 = ref_array("i8").copy()
    i8[0] = [1, 2, 3, 4]
    exp["i8"] = (i8, "int8", [4, 4], False)
    check("sed -i i8.txt", r.returncode == 0 and read(P("i8")) ==
          i8.tobytes(), "row 0 replaced", r.stderr[:200])
    check("sed -i leaves no file", not [n for n in os.listdir(m.mnt)
                                        if n.startswith("sed")],
          "the temporary file is gone")
    # text: a shell redirection (O_TRUNC), python open('w')
    r = subprocess.run("printf '5 6 7\\n' > '%s'" % P("fc.bias.txt"),
                       shell=True, capture_output=True, text=True)
    exp["tied"] = exp["fc.bias"] = (np.array([5, 6, 7], np.float32),
                                    "float32", [3], False)
    check("printf > fc.bias.txt", r.returncode == 0 and read(P("tied")) ==
          np.array([5, 6, 7], np.float32).tobytes(), "values replaced")
    e = write(P("mask.txt"), "# bool (5,)\n1 0 True False 1\n", "w")
    exp["mask"] = (np.array([1, 0, 1, 0, 1], np.bool_), "bool", [5], False)
    check("open('w') mask.txt", e is None and read(P("mask")) ==
          bytes([1, 0, 1, 0, 1]), "bool from 1/0/True/False")
    e = write(P("cplx.txt"), "1+2j 0 -1.5-0.5j\nnan+infj 3 4j\n", "w")
    c = np.array([[1 + 2j, 0, -1.5 - 0.5j], [complex(np.nan, np.inf), 3, 4j]],
                 np.complex64)
    exp["cplx"] = (c, "complex64", [2, 3], False)
    check("complex txt", e is None and read(P("cplx")) == c.tobytes(),
          "complex values with nan/inf parts")
    # every text view written back as it reads: the same bits
    same = []
    for path in T:
        if path == "k.npy" or path in ("tied",):
            continue
        before = read(P(path))
        err = write(P(path + ".txt"), read(P(path + ".txt"), "r"), "w")
        if err or read(P(path)) != before:
            same.append("%s (%s)" % (path, err or "changed"))
    check("txt round trip", not same, "every tensor's text written back "
          "gives the same bits (nan, inf, -0, subnormals, f16, bf16)",
          "differ: %s" % same)
    # refused: nothing changes
    refused("txt too few", P("f64.txt"), "1 2 3\n", "w")
    refused("txt too many", P("f64.txt"), "1 2 3 4 5\n", "w")
    refused("txt not a number", P("f64.txt"), "1 2 x3 4\n", "w")
    refused("txt int8 out of range", P("i8.txt"), " ".join(["300"] * 16), "w")
    fo = io.BytesIO()
    np.save(fo, np.asfortranarray(np.ones((4, 6), np.float32)))
    refused("npy fortran order", P("base.npy"), fo.getvalue())
    refused("npy garbage", P("base.npy"), b"not a numpy file at all")
    short = io.BytesIO()
    np.save(short, np.ones((4, 6), np.float32))
    refused("npy truncated", P("base.npy"), short.getvalue()[:-8])
    for op, args in (("rm", [P("f64.npy")]),
                     ("mv", [P("f64.txt"), P("g.txt")])):
        r = subprocess.run([op, *args], capture_output=True, text=True)
        check(op + " a view", r.returncode != 0 and os.path.exists(P("f64")),
              "refused: a view is not an entry of its own",
              r.stderr[:200])
    m.umount("edits")
    expect("edits", "edit.pt", exp,
           absent=[], same_storage=[["fc.bias", "tied"], ["base", "base_t"],
                                    ["base", "every2"]])


def main():
    a, b = W + "/a.pt", W + "/b.pt"
    # saved an hour apart, as checkpoints are: rsync's quick check (size
    # and mtime, to the second) would skip every file of two checkpoints
    # saved within one second (docs/views.md: use rsync -c or -I then)
    st = os.stat(a)
    os.utime(a, (st.st_atime - 3600, st.st_mtime - 3600))
    m = Mount(copy(a, "read.pt"), "read")
    read_checks(m)
    m.umount("read")
    check("no change, no write", read(W + "/out/read.pt") == read(a),
          "a mount that only read leaves the checkpoint as it was")
    listed_views(a)
    ma = Mount(a, "diff_a", "-o", "ro")
    mb = Mount(b, "diff_b", "-o", "ro")
    diff_checks(ma, mb)
    for x in (ma, mb):
        subprocess.call(["fusermount3", "-u", x.mnt])
        x.p.wait(timeout=30)
    rsync_copy(a, b, False)
    rsync_copy(a, b, True)
    edit_checks(a)
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        with open("/proc/mounts") as f:
            for l in f:
                if l.split()[1].startswith(W + "/mnt/"):
                    subprocess.call(["fusermount3", "-uz", l.split()[1]])
