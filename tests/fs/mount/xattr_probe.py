"""xattr_probe.py MOUNT WANT.json - every extended attribute of each tensor
file, one by one and as a list, against what torch.load said the tensor
holds (surprise_gen.py attrs), and the ERANGE / size-probe contract of
getxattr(2) and listxattr(2) for callers whose buffer is too small.
Prints one line per problem; exit 1 when there is any."""
import ctypes
import errno
import json
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                          ctypes.c_size_t]
libc.listxattr.restype = libc.getxattr.restype = ctypes.c_ssize_t
mnt, want = sys.argv[1], json.load(open(sys.argv[2]))
bad = []

for key, w in want.items():
    path = os.path.join(mnt, key)
    bpath = path.encode()
    try:
        names = os.listxattr(path)
    except OSError as e:
        bad.append("%s: listxattr: %s" % (key, e))
        names = []
    exp = {"user.attr." + a: v for a, v in w["attrs"].items()}
    got = {n for n in names if n.startswith("user.attr.")}
    if names and got != set(exp):
        bad.append("%s: %d user.attr.* listed, torch has %d" %
                   (key, len(got), len(exp)))
    # each one on its own, whatever the others hold
    for n, v in list(exp.items()) + [("user.dtype", w["dtype"]),
                                     ("user.parameter", None)]:
        try:
            val = os.getxattr(path, n).decode()
        except OSError as e:
            bad.append("%s: getxattr %s: %s" % (key, n[:40], e))
            continue
        if v is not None and val != v:
            bad.append("%s: %s is %r, torch says %r" % (key, n[:40],
                                                         val[:40], v[:40]))
    # size probes and small buffers
    need = libc.listxattr(bpath, None, 0)
    if need < 0:
        bad.append("%s: listxattr(size 0): %s" %
                   (key, os.strerror(ctypes.get_errno())))
        continue
    buf = ctypes.create_string_buffer(need + 1)
    r = libc.listxattr(bpath, buf, need - 1)
    if r != -1 or ctypes.get_errno() != errno.ERANGE:
        bad.append("%s: listxattr with %d of %d bytes gave %d (%s), not "
                   "ERANGE" % (key, need - 1, need, r,
                               os.strerror(ctypes.get_errno())))
    r = libc.listxattr(bpath, buf, need)
    if r != need or sorted(buf.raw[:need].split(b"\0")[:-1]) != \
            sorted(n.encode() for n in names):
        bad.append("%s: listxattr with exactly %d bytes gave %d" %
                   (key, need, r))
    vl = libc.getxattr(bpath, b"user.dtype", None, 0)
    if vl != len(w["dtype"]):
        bad.append("%s: getxattr(user.dtype, size 0) = %d, not %d" %
                   (key, vl, len(w["dtype"])))
    r = libc.getxattr(bpath, b"user.dtype", buf, 1)
    if r != -1 or ctypes.get_errno() != errno.ERANGE:
        bad.append("%s: getxattr(user.dtype) into 1 byte gave %d, not "
                   "ERANGE" % (key, r))

for b in bad[:20]:
    print(b)
sys.exit(1 if bad else 0)
