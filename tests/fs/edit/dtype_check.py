"""dtype_check.py - the mount half of tests/fs/edit/dtype.sh: casts with
setfattr user.dtype through a real ptfs mount (numpy, no torch: the torch
half is dtype_torch.py).

  python3 dtype_check.py PTFS DIR

DIR holds what `dtype_torch.py gen` wrote: d.pt, plan.json and torch's
own t.to(dtype) bytes.  Each planned cast is made with os.setxattr, and
at once every name over the storage must show the new dtype, size and
bytes (tensor file, .npy header and size, .txt header, the raw storage
under .ptfs/storages: the kernel's caches were dropped); the daemon names
the tied names a cast changed too.  Then refusals (an int tensor, an int
or unknown dtype, float8 for a tensor that requires grad, a view) change
nothing and log one line; a cast then np.save of the new dtype works;
kill -9 of the daemon, a remount that replays every cast, more casts, and
ptfs umount.  What torch must then find beyond plan.json goes to
DIR/expect.json.  Prints one line per check, then "N passed, N failed".
"""
import errno
import json
import os
import sys

import numpy as np

# tests/fs/lib/ptfs_mount.py
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ptfs_mount  # noqa: E402

PTFS, W = sys.argv[1], sys.argv[2]
with open(W + "/plan.json") as f:
    PLAN = json.load(f)
T = PLAN["tensors"]
ITEM = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
        "int32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1,
        "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1}
DESCR = {"float64": "<f8", "float32": "<f4", "float16": "<f2",
         "bfloat16": "<u2"}
npass = nfail = 0
nmounts = 0


def check(label, cond, msg, why=""):
    global npass, nfail
    if cond:
        npass += 1
        print("ok   %s: %s" % (label, msg))
    else:
        nfail += 1
        print("FAIL %s: %s" % (label, why or msg))


def read(path, n=-1):
    with open(path, "rb") as f:
        return f.read(n)


def mount():
    global nmounts
    nmounts += 1
    return ptfs_mount.Mount(PTFS, W + "/d.pt", W + "/mnt/d",
                            "%s/d%d.err" % (W, nmounts))


def ref(k, to):
    return read("%s/ref/%s.%s" % (W, k, to))


def same(got, want, to):
    """Bit for bit; under torch 1.13 a NaN that became bfloat16 only has
    to be a NaN (1.13's pattern is another than 2.x's, which ptfs writes:
    docs/editing.md).  (equal, NaN lanes excused)"""
    if got == want:
        return True, 0
    if PLAN["t2"] or to != "bfloat16" or len(got) != len(want):
        return False, 0
    a, b = np.frombuffer(got, "<u2"), np.frombuffer(want, "<u2")

    def nan(x):
        return ((x & 0x7f80) == 0x7f80) & ((x & 0x7f) != 0)
    differ = a != b
    return bool(not (differ & ~(nan(a) & nan(b))).any()), int(differ.sum())


def shows(m, k, to):
    """What is wrong with how the mount shows tensor k as dtype to."""
    bad = []
    size = T[k]["numel"] * ITEM[to]
    p = m.p_(k)
    if os.getxattr(p, "user.dtype").decode() != to:
        bad.append("%s: user.dtype %s" % (k, os.getxattr(p, "user.dtype")))
    if os.stat(p).st_size != size:
        bad.append("%s: stat says %d bytes, want %d" % (
            k, os.stat(p).st_size, size))
    ok, excused = same(read(p), ref(k, to), to)
    if not ok:
        bad.append("%s: bytes differ from torch's .to(%s)" % (k, to))
    h = read(p + ".npy", 128)
    hl = 10 + int.from_bytes(h[8:10], "little")
    if DESCR.get(to, "|u1").encode() not in h[:hl] or \
            os.stat(p + ".npy").st_size != hl + size:
        bad.append("%s.npy: header %r, size %d" % (
            k, h[10:50], os.stat(p + ".npy").st_size))
    first = read(p + ".txt", 64).split(b"\n")[0]
    if not first.startswith(("# %s (" % to).encode()):
        bad.append("%s.txt: first line %r" % (k, first))
    sk = os.getxattr(p, "user.storage").decode()
    sp = m.p_(".ptfs/storages/" + sk)
    if os.stat(sp).st_size != size:
        bad.append(".ptfs/storages/%s: %d bytes" % (sk, os.stat(sp).st_size))
    return bad, excused


def cast(m, key, to, also):
    label = "setfattr -n user.dtype -v %s %s" % (to, key)
    was = os.getxattr(m.p_(key), "user.dtype").decode()
    try:
        os.setxattr(m.p_(key), "user.dtype", to.encode())
    except OSError as e:
        check(label, False, "", "refused: %s" % e)
        return
    bad, excused = [], 0
    for k in [key] + also:
        b, x = shows(m, k, to)
        bad += b
        excused += x
    if also:
        said = [l for l in m.log() if "%s: converted from %s to %s, and "
                "with it %s" % (key, was, to, ", ".join(also)) in l]
        if len(said) != 1:
            bad.append("the daemon did not name %s: %s" % (also,
                                                           m.log()[-2:]))
    check(label, not bad, "%s -> %s%s: size, bytes (torch's .to()), .npy, "
          ".txt, .ptfs/storages right away%s" % (
              was, to, " with %s" % ", ".join(also) if also else "",
              "; %d NaNs as 1.13 excuses" % excused if excused else ""),
          "; ".join(bad[:4]))


def refuse(m, key, to, err, words):
    p = m.p_(key)
    label = "refused %s -> %s" % (key, to)
    before = read(p)
    dt = os.getxattr(p, "user.dtype")
    nlog = len(m.log())
    try:
        os.setxattr(p, "user.dtype", to.encode())
        e = 0
    except OSError as x:
        e = x.errno
    said = [l for l in m.log()[nlog:] if words in l]
    check(label, e == err and read(p) == before and
          os.getxattr(p, "user.dtype") == dt and
          (len(said) == 1 if words else len(m.log()) == nlog),
          "%s, nothing changed%s" % (errno.errorcode[err], ", logged: " +
                                      said[0][6:] if said else ""),
          "errno %s, want %s; changed %s; log %s" % (
              errno.errorcode.get(e, e), errno.errorcode[err],
              read(p) != before, m.log()[nlog:]))


def main():
    m = mount()
    for key, to, also in PLAN["before"]:
        cast(m, key, to, also)
    refuse(m, "i32", "float32", errno.ENOTSUP,
           "i32: int32 to float32 is not a cast ptfs makes")
    refuse(m, "pat_bf16", "int8", errno.ENOTSUP,
           "pat_bf16: bfloat16 to int8 is not a cast ptfs makes")
    refuse(m, "keep", "floaty", errno.EINVAL,
           "keep: 'floaty' is not a torch dtype")
    refuse(m, "grad", "float8_e5m2", errno.EINVAL,
           "torch cannot load a float8 tensor that requires grad")
    refuse(m, "keep.npy", "float64", errno.EPERM, None)
    # the way the .npy refusal points to: cast, then save that dtype
    kv = np.arange(15, dtype=np.float64).reshape(3, 5) / 3
    os.setxattr(m.p_("keep"), "user.dtype", b"float64")
    np.save(m.p_("keep.npy"), kv)
    with open(W + "/keep.want", "wb") as f:
        f.write(kv.tobytes())
    with open(W + "/expect.json", "w") as f:
        json.dump({"keep": {"dtype": "float64", "bytes": "keep.want"}}, f)
    check("cast keep, np.save float64", read(m.p_("keep")) == kv.tobytes(),
          "float32 -> float64, then np.save of float64 (3, 5) replaces "
          "the values")
    # kill -9: every cast that returned is replayed
    m.kill()
    m = mount()
    said = [l for l in m.log() if "resumed" in l]
    bad = []
    for key, to, also in PLAN["before"]:
        for k in [key] + also:
            bad += shows(m, k, to)[0]
    if read(m.p_("keep")) != kv.tobytes():
        bad.append("keep lost its np.save")
    check("kill -9, remount", said and not bad, "%s; every cast (%d) as "
          "before" % (said[0][6:70] + "..." if said else "",
                      len(PLAN["before"])),
          "%s; %s" % (said[:1], "; ".join(bad[:4])))
    for key, to, also in PLAN["after"]:
        cast(m, key, to, also)
    ok, why = m.umount()
    check("ptfs umount", ok, "written back, daemon exited 0", why)
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        with open("/proc/mounts") as f:
            for l in f:
                if l.split()[1].startswith(W + "/mnt/"):
                    os.system("fusermount3 -uz '%s'" % l.split()[1])
