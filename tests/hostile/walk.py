#!/usr/bin/env python3
"""walk.py MOUNT - read everything a ptfs mount shows, the way tools do.

Walks the tree (and .ptfs/, which readdir hides), and for every file:
stat, every xattr, the first MiB, the last 64 KiB (a 4 TB expanded tensor
must not be read whole), and for tensors the first 4 KiB of their .npy
and .txt views.  Symlinks are read with readlink.  Prints one line:
"files N dirs N bytes N clean-errors N [first error]" and exits 0, or
exits 1 when a call failed with an errno a file system should not give
for a file it listed (ENOTCONN: the daemon died; EINTR, ETIMEDOUT ...).
Clean refusals (EIO, EFBIG, EINVAL, ENOTSUP, ENODATA, E2BIG, ERANGE)
are counted, not failures: the daemon logged why.
"""
import errno
import os
import stat
import sys

CLEAN = {errno.EIO, errno.EFBIG, errno.EINVAL, errno.ENOTSUP, errno.ENODATA,
         errno.E2BIG, errno.ERANGE, errno.ENOENT}
mnt = sys.argv[1]
n = {"files": 0, "dirs": 0, "bytes": 0, "clean": 0}
bad = []
first_clean = []


def guard(what, fn, *a):
    try:
        return fn(*a)
    except OSError as e:
        if e.errno in CLEAN:
            n["clean"] += 1
            if not first_clean:
                first_clean.append("%s: %s" % (what, e.strerror))
            return None
        bad.append("%s: %s" % (what, e))
        return None


def read_file(p, size):
    with open(p, "rb", buffering=0) as f:
        got = len(f.read(1 << 20))
        if size > (1 << 20):
            f.seek(size - (64 << 10))
            got += len(f.read(64 << 10))
    n["bytes"] += got


def xattrs(p):
    for name in os.listxattr(p, follow_symlinks=False):
        os.getxattr(p, name, follow_symlinks=False)
    return os.listxattr(p, follow_symlinks=False)


def view(p):
    with open(p, "rb", buffering=0) as f:
        n["bytes"] += len(f.read(4096))


def visit(d):
    names = guard("readdir " + d, os.listdir, d)
    if names is None:
        return
    n["dirs"] += 1
    for name in names:
        p = os.path.join(d, name)
        st = guard("stat " + p, os.lstat, p)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            visit(p)
            continue
        if stat.S_ISLNK(st.st_mode):
            guard("readlink " + p, os.readlink, p)
            continue
        n["files"] += 1
        if st.st_mode & 0o111:
            bad.append("%s: mode %o has x bits" % (p, st.st_mode))
        names_x = guard("xattr " + p, xattrs, p) or []
        guard("read " + p, read_file, p, st.st_size)
        if "user.dtype" in names_x and not d.endswith(".ptfs/storages"):
            for ext in (".npy", ".txt"):
                if os.path.lexists(p + ext):
                    guard("view " + p + ext, view, p + ext)


visit(mnt)
if os.path.isdir(os.path.join(mnt, ".ptfs")):
    visit(os.path.join(mnt, ".ptfs"))
line = "files %d dirs %d bytes %d clean-errors %d" % (
    n["files"], n["dirs"], n["bytes"], n["clean"])
if first_clean:
    line += " (%s)" % first_clean[0]
if bad:
    print("%s; %d bad: %s" % (line, len(bad), "; ".join(bad[:3])))
    sys.exit(1)
print(line)
