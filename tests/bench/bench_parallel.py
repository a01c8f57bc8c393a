#!/usr/bin/python3
"""bench_parallel.py - many readers at once, as model loaders read
(issue 43): the tensors of a mounted checkpoint read through the mount
against the same bytes read from the checkpoint file at the tensors'
offsets, cold and warm, in the same run; and the mmap case repeated to
show it neither deadlocks nor fails.

    /usr/bin/python3 tests/bench/bench_parallel.py [BUILD] [WORKDIR]
        [-o MOUNTOPTS] [--only pread8,mmap8,...] [--temps warm,hot,cold]
        [--reps 3,2] [--repeat-mmap N] [--timeout S] [--against BUILD]

Generates (once, cached in WORKDIR, default /tmp/ptfs-bench) par.safetensors:
32 float32 tensors of 4096 x 2048 (1 GiB of random bytes).  Mounts it
with BUILD/ptfs -f -o ro[,MOUNTOPTS] and, for each pattern, reads every
tensor once:

  pread T    T threads (1, 4, 8, 16) taking 16 MiB preads from one queue
             (vLLM's prefetch: 8 threads x 16 MiB)
  mmap 8     8 threads over mmap'd tensors, each 16 MiB run faulted in
             by a CRC-32 of it (safetensors' and torch's mmap loads)
  direct 8   8 threads, O_DIRECT descriptors, aligned 16 MiB preads into
             page-aligned buffers, each run's CRC-32 checked against the
             file's (fastsafetensors' pattern); the page cache is not
             used, so warm means the checkpoint's cache behind the mount
  safe_open  safetensors.safe_open(FILE, "pt") and get_tensor() of every
             tensor, in the torch 2.x root (scripts/torch2-root.sh; the
             row is left out without it or without root)

Each from the file itself (at each tensor's data offset), through the
mount's tensor files (m/NAME at 0.., "mount") and through the mount's
computed safetensors file (m/.ptfs/as/model.safetensors at its own
offsets, "as": what loaders open); the passes alternate, so a
neighbour's load falls on all.  Temperatures (--temps, default warm,cold): warm,
the page cache holds the file and the mount's pages (no request at all);
hot, the file's pages cached and the mount's dropped before each pass,
so every read is a request the daemon answers from the cache (what the
daemon's settings change); cold, `echo 3 > drop_caches` before each
pass (needs root; skipped otherwise).  Best of --reps passes per side
(3 warm, 2 cold; one number for all).  Prints MB/s and mount / file;
with --against BUILD a second mount, by BUILD/ptfs, is read in the same
alternation ("other"): before and after a change in one run.
The goal (issue 43): at 8 threads at least 0.9x the file's throughput,
warm and cold.  The machine is shared: run it idle.

--repeat-mmap N runs, instead of the table, the mmap 8 case N times
through the mount's tensor files and N times through its .ptfs/as/
file, checking every run's CRC-32: the mount's pages are
dropped (POSIX_FADV_DONTNEED) before each pass so every fault is a
request, every other pass also madvise(MADV_WILLNEED)s each run first
(the readahead that, with mmap and parallel loading, deadlocked
hf-mount's queue), and every tenth drops all caches (root).  A pass that
does not end within --timeout seconds (default 120) is reported as a
deadlock, with the connection's waiting requests, and the connection is
aborted (readers stuck in it may die of SIGBUS); the exit status is
non-zero on a deadlock or any error.
"""
import argparse
import json
import mmap
import os
import queue
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import drop_caches, mounted  # noqa: E402

N, ROWS, COLS = 32, 4096, 2048
CHUNK = 16 << 20
FUSECTL = "/sys/fs/fuse/connections"


def generate(path):
    """A safetensors file of N float32 tensors, random bytes."""
    size = ROWS * COLS * 4
    hdr, at = {}, 0
    for i in range(N):
        hdr["layer%02d.weight" % i] = {"dtype": "F32", "shape": [ROWS, COLS],
                                       "data_offsets": [at, at + size]}
        at += size
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _ in range(N):
            f.write(os.urandom(size))
    os.rename(tmp, path)


def tensors(path):
    """[(name, absolute offset, length)] from the file's header."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    return [(k, 8 + n + v["data_offsets"][0],
             v["data_offsets"][1] - v["data_offsets"][0])
            for k, v in sorted(hdr.items()) if k != "__metadata__"]


def runs_of(files):
    """16 MiB runs: [(path, offset, length)] over (path, offset, length)."""
    out = []
    for p, off, n in files:
        for a in range(0, n, CHUNK):
            out.append((p, off + a, min(CHUNK, n - a)))
    return out


class Watchdog:
    """Ends the benchmark when a pass outlives @timeout seconds: a
    deadlocked FUSE queue is reported (with the connection's waiting
    requests) and the connection aborted, so the readers stuck in it get
    an error instead of hanging the run."""

    def __init__(self, timeout, conn, mnt):
        self.timeout, self.conn, self.timer = timeout, conn, None
        self.mnt = mnt

    def arm(self, what):
        self.timer = threading.Timer(self.timeout, self.fire, (what,))
        self.timer.daemon = True
        self.timer.start()

    def disarm(self):
        self.timer.cancel()

    def fire(self, what):
        """Report first: the aborted connection's faults are SIGBUS."""
        waiting = "?"
        try:
            with open(os.path.join(self.conn, "waiting")) as f:
                waiting = f.read().strip()
        except (OSError, TypeError):
            pass
        print("DEADLOCK: %s did not end in %g s (%s requests waiting); "
              "aborting the connection" % (what, self.timeout, waiting),
              flush=True)
        subprocess.run(["fusermount3", "-u", "-z", self.mnt],
                       stderr=subprocess.DEVNULL)
        try:
            with open(os.path.join(self.conn, "abort"), "w") as f:
                f.write("1")
            os.rmdir(self.mnt)
        except (OSError, TypeError):
            pass
        os._exit(1)


def on_threads(work, threads):
    """Seconds for @threads threads running @work until each returns."""
    t = time.perf_counter()
    ts = [threading.Thread(target=work) for _ in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return time.perf_counter() - t


def from_queue(runs, threads, setup, step):
    """Run step(state, run) over @runs from @threads threads, each with
    its own state = setup(); seconds, re-raising the first error."""
    q, err = queue.Queue(), []
    for r in runs:
        q.put(r)

    def work():
        try:
            st = setup()
            while True:
                try:
                    r = q.get_nowait()
                except queue.Empty:
                    return
                step(st, r)
        except Exception as e:  # noqa: BLE001 - reported below
            err.append(e)

    dt = on_threads(work, threads)
    if err:
        raise err[0]
    return dt


class Fds:
    """One descriptor per path, shared by the threads (as loaders do)."""

    def __init__(self, flags=0):
        self.fds, self.lock, self.flags = {}, threading.Lock(), flags

    def of(self, p):
        with self.lock:
            if p not in self.fds:
                self.fds[p] = os.open(p, os.O_RDONLY | self.flags)
            return self.fds[p]

    def close(self):
        for fd in self.fds.values():
            os.close(fd)


def pread_pass(runs, threads, crcs=None):
    fds = Fds()

    def step(mv, r):
        p, off, n = r
        got = os.preadv(fds.of(p), [mv[:n]], off)
        if got != n:
            raise OSError("%s: %d of %d bytes at %d" % (p, got, n, off))

    try:
        return from_queue(runs, threads,
                          lambda: memoryview(bytearray(CHUNK)), step)
    finally:
        fds.close()


def direct_pass(runs, threads, crcs):
    """O_DIRECT: page-aligned buffers (anonymous maps), each run read from
    the page below it to the page above (a tensor in the file itself
    starts where the header ends); its CRC-32 must be the file's (@crcs,
    by run index)."""
    fds = Fds(os.O_DIRECT)
    index = {r: i for i, r in enumerate(runs)}

    def step(buf, r):
        p, off, n = r
        a = off & ~4095
        span = (off + n - a + 4095) & ~4095
        with memoryview(buf) as mv:
            got = os.preadv(fds.of(p), [mv[:span]], a)
            if got < off + n - a:
                raise OSError("%s: O_DIRECT: %d of %d bytes at %d" % (
                    p, got, span, a))
            if zlib.crc32(mv[off - a:off - a + n]) != crcs[index[r]]:
                raise OSError("%s: O_DIRECT: wrong bytes at %d" % (p, off))

    try:
        return from_queue(runs, threads,
                          lambda: mmap.mmap(-1, CHUNK + 8192), step)
    finally:
        fds.close()


def mmap_pass(runs, threads, crcs=None, willneed=False):
    """Fault each run in by a CRC-32 of it; with @crcs, check it."""
    maps = {}
    for p, _, _ in runs:
        if p not in maps:
            fd = os.open(p, os.O_RDONLY)
            maps[p] = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
            os.close(fd)
    index = {r: i for i, r in enumerate(runs)}

    def step(_, r):
        p, off, n = r
        m = maps[p]
        if willneed:    # from the page it starts in (.ptfs/as/'s
            a = off & ~(mmap.PAGESIZE - 1)      # tensors follow its header)
            m.madvise(mmap.MADV_WILLNEED, a, n + off - a)
        with memoryview(m) as mv, mv[off:off + n] as run:
            c = zlib.crc32(run)
        if crcs and c != crcs[index[r]]:
            raise OSError("%s: mmap: wrong bytes at %d" % (p, off))

    try:
        return from_queue(runs, threads, lambda: None, step)
    finally:
        for m in maps.values():
            m.close()


def torch2_root():
    """The torch 2.x root with safetensors, or None."""
    root = os.environ.get("PT_TORCH2_ROOT", "/var/cache/ptfs/torch2-root")
    if os.geteuid() != 0 or not os.path.isdir(os.path.join(
            root, "usr/lib/python3/dist-packages/safetensors")):
        return None
    return root


SAFE_OPEN = """
import sys, time
from safetensors import safe_open
t = time.perf_counter()
with safe_open(sys.argv[1], "pt") as f:
    for k in f.keys():
        x = f.get_tensor(k)
        del x
print(time.perf_counter() - t)
"""


def safe_open_pass(runs, threads, crcs=None, root=None):
    """safe_open of the one file @runs read, every tensor: seconds (the
    interpreter's start not counted), or None for the tensor files."""
    p = runs[0][0]
    if any(r[0] != p for r in runs) or not p.startswith(root + "/"):
        return None
    out = subprocess.run(["chroot", root, "python3", "-c", SAFE_OPEN,
                          p[len(root):]], capture_output=True, text=True)
    if out.returncode:
        raise OSError("safe_open %s: %s" % (p, out.stderr.strip()[-300:]))
    return float(out.stdout.split()[-1])


def file_crcs(runs):
    """CRC-32 of each run, read from the file itself."""
    out = []
    with open(runs[0][0], "rb") as f:
        for _, off, n in runs:
            f.seek(off)
            out.append(zlib.crc32(f.read(n)))
    return out


def drop_mount_pages(via):
    for p in sorted({p for p, _, _ in via}):
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


TEMPS = {"warm": "the page cache holds the file and the mount's pages",
         "hot": "the file's pages cached, the mount's dropped: every read "
                "is a request the daemon answers from the cache",
         "cold": "drop_caches before each pass"}


def table(args, total, raw, mounts, dog):
    """@mounts: [(label, runs through it)]; the file's runs are @raw."""
    temps = args.temps.split(",")
    if os.geteuid() != 0 and "cold" in temps:
        temps.remove("cold")       # drop_caches needs root
    reps = [int(x) for x in args.reps.split(",")]
    nreps = dict(zip(temps, reps + reps[-1:] * 3))
    pats = [("pread %d" % k, pread_pass, k) for k in (1, 4, 8, 16)]
    pats += [("mmap 8", mmap_pass, 8), ("direct 8", direct_pass, 8)]
    if args.root:
        pats.append(("safe_open", lambda runs, k, crcs: safe_open_pass(
            runs, k, crcs, args.root), 1))
    if args.only:
        want = args.only.replace(" ", "").split(",")
        pats = [p for p in pats if p[0].replace(" ", "") in want]
    crcs = file_crcs(raw) if any(p[1] is direct_pass for p in pats) else None
    print("%d runs, %.2f GB, mount -o ro%s; MB/s, best of %s passes" % (
        len(raw), total / 1e9, "," + args.o if args.o else "",
        ", ".join("%d %s" % (nreps[t], t) for t in temps)))
    if args.against:
        print("mount, as: %s; other: %s" % (args.build, args.against))
    print("%-9s" % "" + "".join(
        "   %10s" % ("file " + t) + "".join(
            " %10s %7s" % (label + " " + t, "ratio") for label, _ in mounts)
        for t in temps), flush=True)
    sides = [("file", raw)] + mounts
    for name, fn, k in pats:
        cells = []
        for temp in temps:
            ds = {w: [] for w, _ in sides}
            if temp != "cold":
                for _, runs in sides:
                    pread_pass(runs, 8)      # fill the caches
            for rep in range(nreps[temp]):
                for which, runs in sides[::1 if rep % 2 == 0 else -1]:
                    if temp == "cold":
                        drop_caches()
                    elif temp == "hot" and which != "file":
                        drop_mount_pages(runs)
                    dog.arm("%s %s %s" % (name, temp, which))
                    dt = fn(runs, k, crcs)
                    dog.disarm()
                    if dt is not None:      # (safe_open of tensor files)
                        ds[which].append(dt)
            f = total / 1e6 / min(ds["file"])
            cells.append("   %10.0f" % f)
            for label, _ in mounts:
                if not ds[label]:
                    cells.append(" %10s %7s" % ("-", ""))
                    continue
                m = total / 1e6 / min(ds[label])
                cells.append(" %10.0f %6.2fx" % (m, m / f))
        print("%-9s%s" % (name, "".join(cells)), flush=True)
    return 0


def repeat_mmap(args, total, raw, mounts, dog):
    """--repeat-mmap N through the tensor files, then through .ptfs/as/"""
    crcs = file_crcs(raw)
    for label, via in mounts:
        if label != "other" and repeat_mmap_via(args, total, via, crcs,
                                                dog, label):
            return 1
    return 0


def repeat_mmap_via(args, total, via, crcs, dog, label):
    root = os.geteuid() == 0
    times = []
    for i in range(args.repeat_mmap):
        if root and i % 10 == 9:
            drop_caches()
        drop_mount_pages(via)
        willneed = i % 2 == 1
        dog.arm("mmap 8 pass %d of %d through %s%s" % (
            i + 1, args.repeat_mmap, label,
            " (MADV_WILLNEED)" if willneed else ""))
        try:
            times.append(mmap_pass(via, 8, crcs, willneed))
        except Exception as e:  # noqa: BLE001 - the report
            print("ERROR: mmap 8 pass %d through %s: %s" % (i + 1, label, e))
            return 1
        finally:
            dog.disarm()
    print("mmap 8, %d passes of %.2f GB through the %s (half with "
          "MADV_WILLNEED, every tenth cold): no deadlock, no error, every "
          "CRC-32 the file's; MB/s min %.0f, median %.0f, max %.0f" % (
              len(times), total / 1e9, {"mount": "mount's tensor files",
                                        "as": "mount's .ptfs/as/ file"}[label],
              total / 1e6 / max(times),
              total / 1e6 / sorted(times)[len(times) // 2],
              total / 1e6 / min(times)))
    return 0


def fusectl_dir(mnt):
    """The mount's directory under /sys/fs/fuse/connections, or None."""
    if not os.path.isdir(os.path.join(FUSECTL, ".")) or \
            not os.listdir(FUSECTL):
        subprocess.run(["mount", "-t", "fusectl", "none", FUSECTL],
                       stderr=subprocess.DEVNULL)
    d = os.path.join(FUSECTL, str(os.stat(mnt).st_dev))
    return d if os.path.isdir(d) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("work", nargs="?", default="/tmp/ptfs-bench")
    ap.add_argument("-o", default="", help="more mount options")
    ap.add_argument("--only", default="",
                    help="patterns, comma-separated: pread8,mmap8")
    ap.add_argument("--temps", default="warm,cold",
                    help="warm, hot, cold: " + "; ".join(
                        "%s: %s" % kv for kv in TEMPS.items()))
    ap.add_argument("--reps", default="3,2", metavar="N,...",
                    help="passes of each side for each of --temps, the "
                    "best taken (3,2)")
    ap.add_argument("--repeat-mmap", type=int, default=0, metavar="N")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--against", metavar="BUILD",
                    help="also mount with BUILD/ptfs, passes alternating "
                    "(before and after a change, in one run)")
    ap.add_argument("--no-as", action="store_true",
                    help="leave out the mount's .ptfs/as/ file")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    src = os.path.join(args.work, "par.safetensors")
    if not os.path.exists(src):
        generate(src)
    args.root = None if args.repeat_mmap else torch2_root()
    bound = None
    if args.root:
        # the file and the mounts where the root's python sees them
        bound = tempfile.mkdtemp(prefix="ptfs-bench-par-",
                                 dir=os.path.join(args.root, "tmp"))
        if subprocess.run(["mount", "--bind", args.work, bound]).returncode:
            os.rmdir(bound)
            bound = args.root = None
        else:
            src = os.path.join(bound, "par.safetensors")
    ts = tensors(src)
    total = sum(n for _, _, n in ts)
    builds = [("mount", args.build)]
    if args.against:
        builds.append(("other", args.against))
    mounts, daemons, dog = [], [], None
    rc = 1
    try:
        for label, build in builds:
            mnt = tempfile.mkdtemp(prefix="ptfs-bench-par-", dir=(
                os.path.join(args.root, "tmp") if args.root else None))
            daemons.append((mnt, mount(build, args.o, src, mnt,
                                       args.work, label)))
            mounts.append((label, runs_of([(os.path.join(mnt, k), 0, n)
                                           for k, _, n in ts])))
            vf = os.path.join(mnt, ".ptfs", "as", "model.safetensors")
            if not args.no_as and label == "mount":
                mounts.append(("as", runs_of([(vf, off, n) for _, off, n in
                                              tensors(vf)])))
        mnt = daemons[0][0]
        dog = Watchdog(args.timeout, fusectl_dir(mnt), mnt)
        raw = runs_of([(src, off, n) for _, off, n in ts])
        rc = (repeat_mmap if args.repeat_mmap else table)(args, total, raw,
                                                          mounts, dog)
    finally:
        for mnt, d in daemons:
            subprocess.run(["fusermount3", "-u", mnt],
                           stderr=subprocess.DEVNULL)
            try:
                d.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(d.pid, signal.SIGKILL)
            os.rmdir(mnt)
        if bound:
            subprocess.run(["umount", bound])
            os.rmdir(bound)
    sys.exit(rc)


def mount(build, opts, src, mnt, work, label):
    """BUILD/ptfs -f -o ro,OPTS SRC MNT, mounted; its stderr in WORK."""
    err = open(os.path.join(work, "par-%s.stderr" % label), "w")
    d = subprocess.Popen([os.path.join(build, "ptfs"), "-f", "-o",
                          "ro" + ("," + opts if opts else ""), src, mnt],
                         stdout=subprocess.DEVNULL, stderr=err,
                         start_new_session=True)
    t = time.perf_counter()
    while not mounted(mnt):
        if d.poll() is not None or time.perf_counter() - t > 60:
            os.rmdir(mnt)
            sys.exit("ptfs did not mount %s (see %s)" % (src, err.name))
        time.sleep(0.01)
    return d


if __name__ == "__main__":
    main()
