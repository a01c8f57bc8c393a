#!/usr/bin/env python3
"""resources.py MOUNT PID CYCLES - open/read/close cycles on a ptfs mount
and the daemon's (PID) descriptors and memory before and after.

Each cycle opens one file, reads it (or part of it), and closes it: the
tensors, their .npy and .txt views, .ptfs/storages/*, with an xattr read
and a stat; every 10th cycle writes 4 bytes in place (O_RDWR), every 50th
renames a tensor away and back.  A warm-up of CYCLES/10 first (caches,
first copies into the overlay, the allocator's pools), then the counts:
the descriptors must be exactly as many after CYCLES more, and VmRSS may
grow by at most RSS_SLACK_MB (environment, default 8).  Prints
"ok ..." / "FAIL ..." lines and exits 0 or 1.
"""
import os
import sys
import time

mnt, pid, cycles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
slack = int(os.environ.get("RSS_SLACK_MB", "8"))
names = sorted(n for n in os.listdir(mnt) if not n.startswith("sub"))
files = []
for n in names:
    files += [n, n + ".npy", n + ".txt"]
files += [os.path.join(".ptfs", "storages", k)
          for k in sorted(os.listdir(os.path.join(mnt, ".ptfs", "storages")))]


def fd_targets():
    out = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out[fd] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            pass
    return out


def fds():
    """the daemon's descriptor count once it is steady (the kernel sends
    RELEASE after close() returns, so the last closes may still be on
    their way), not counting libfuse's splice pipes: each worker thread
    has a pair, made when it starts and closed when it ends, and the
    multithreaded loop starts and ends workers as the load goes"""
    last, same = -1, 0
    for _ in range(50):
        n = sum(1 for t in fd_targets().values() if not t.startswith("pipe:"))
        same = same + 1 if n == last else 0
        if same == 3:
            break
        last = n
        time.sleep(0.05)
    return n


def rss():
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


def cycle(i):
    f = files[i % len(files)]
    p = os.path.join(mnt, f)
    if i % 10 == 0 and "." not in f:
        fd = os.open(p, os.O_RDWR)
        os.pwrite(fd, i.to_bytes(4, "little"), (i * 4) % 4096)
        os.close(fd)
    elif i % 50 == 1 and "." not in f:
        os.rename(p, p + "_away")
        os.rename(p + "_away", p)
    os.stat(p)
    if "/" not in f:
        os.getxattr(p, "user.dtype")
    fd = os.open(p, os.O_RDONLY)
    os.read(fd, 65536)
    os.close(fd)


def settle():
    """an in-place write: it drops the cached text renderings (one
    descriptor each), so both counts see the same state"""
    fd = os.open(os.path.join(mnt, names[0]), os.O_RDWR)
    os.pwrite(fd, b"\0\0\0\0", 0)
    os.close(fd)


for i in range(cycles // 10):
    cycle(i)
settle()
f0, r0, t0 = fds(), rss(), fd_targets()
for i in range(cycles):
    cycle(i)
settle()
f1, r1 = fds(), rss()
pipes = sum(1 for t in fd_targets().values() if t.startswith("pipe:"))
threads = len(os.listdir("/proc/%d/task" % pid))
bad = 0
msg = "%d open/read/close cycles over %d files (writes, renames, xattrs)" % (
    cycles, len(files))
if f1 == f0:
    print("ok   descriptors: %d before, %d after %s" % (f0, f1, msg))
else:
    t1 = fd_targets()
    new = sorted(set(t1.values()) - set(t0.values()))
    print("FAIL descriptors: %d before, %d after %s; new: %s" % (
        f0, f1, msg, " ".join(new[:5])))
    bad = 1
if pipes <= 2 * threads:
    print("ok   splice pipes: %d for %d threads (a pair per worker at most)"
          % (pipes, threads))
else:
    print("FAIL splice pipes: %d for %d threads" % (pipes, threads))
    bad = 1
if r1 - r0 <= slack:
    print("ok   memory: VmRSS %d MB before, %d MB after (slack %d MB)" %
          (r0, r1, slack))
else:
    print("FAIL memory: VmRSS %d MB before, %d MB after (more than %d MB)"
          % (r0, r1, slack))
    bad = 1
sys.exit(bad)
