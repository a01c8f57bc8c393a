#!/usr/bin/python3
"""bench_parallel.py - many readers at once, as model loaders read
(issue 43): the tensors of a mounted checkpoint read through the mount
against the same bytes read from the checkpoint file at the tensors'
offsets, cold and warm, in the same run.

    /usr/bin/python3 tests/bench/bench_parallel.py [BUILD] [WORKDIR]

Generates (once, cached in WORKDIR, default /tmp/ptfs-bench) par.safetensors:
32 float32 tensors of 4096 x 2048 (1 GiB of random bytes).  Mounts it
with BUILD/ptfs -f and, for each pattern, reads every tensor once:

  pread T    T threads (1, 4, 8, 16) taking 16 MiB preads from one queue
             (vLLM's prefetch: 8 threads x 16 MiB)
  mmap 8     8 threads over mmap'd tensors, each 16 MiB run faulted in
             by a CRC-32 of it (safetensors' and torch's mmap loads)

Each through the mount (m/NAME at 0..) and from the file itself (at each
tensor's data offset).  Warm: the page cache holds the file (and the
mount's pages) before; best of 3.  Cold: `echo 3 > drop_caches` before
each pass (needs root; skipped otherwise), best of 2.  Prints MB/s and
mount / file.  The goal (issue 43): at 8 threads at least 0.9x the
file's throughput, warm and cold.  The machine is shared: run it idle.
"""
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

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
WORK = sys.argv[2] if len(sys.argv) > 2 else "/tmp/ptfs-bench"
PTFS = os.path.join(BUILD, "ptfs")
N, ROWS, COLS = 32, 4096, 2048
CHUNK = 16 << 20


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


def on_threads(work, threads):
    """Seconds for @threads threads running @work until each returns."""
    t = time.perf_counter()
    ts = [threading.Thread(target=work) for _ in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return time.perf_counter() - t


def pread_pass(runs, threads):
    q = queue.Queue()
    for r in runs:
        q.put(r)
    fds, lock, err = {}, threading.Lock(), []

    def fd_of(p):
        with lock:
            if p not in fds:
                fds[p] = os.open(p, os.O_RDONLY)
            return fds[p]

    def work():
        buf = bytearray(CHUNK)
        mv = memoryview(buf)
        try:
            while True:
                try:
                    p, off, n = q.get_nowait()
                except queue.Empty:
                    return
                got = os.preadv(fd_of(p), [mv[:n]], off)
                if got != n:
                    raise OSError("%s: %d of %d bytes at %d" % (p, got, n,
                                                                off))
        except Exception as e:  # noqa: BLE001 - reported below
            err.append(e)

    dt = on_threads(work, threads)
    for fd in fds.values():
        os.close(fd)
    if err:
        raise err[0]
    return dt


def mmap_pass(runs, threads):
    maps, q, err = {}, queue.Queue(), []
    for p, off, n in runs:
        if p not in maps:
            fd = os.open(p, os.O_RDONLY)
            maps[p] = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
            os.close(fd)
        q.put((p, off, n))

    def work():
        try:
            while True:
                try:
                    p, off, n = q.get_nowait()
                except queue.Empty:
                    return
                zlib.crc32(memoryview(maps[p])[off:off + n])
        except Exception as e:  # noqa: BLE001
            err.append(e)

    dt = on_threads(work, threads)
    for m in maps.values():
        try:
            m.close()
        except BufferError:
            pass
    if err:
        raise err[0]
    return dt


def main():
    os.makedirs(WORK, exist_ok=True)
    src = os.path.join(WORK, "par.safetensors")
    if not os.path.exists(src):
        generate(src)
    ts = tensors(src)
    total = sum(n for _, _, n in ts)
    mnt = tempfile.mkdtemp(prefix="ptfs-bench-par-")
    err = open(os.path.join(WORK, "par.stderr"), "w")
    d = subprocess.Popen([PTFS, "-f", "-o", "ro", src, mnt],
                         stdout=subprocess.DEVNULL, stderr=err,
                         start_new_session=True)
    t = time.perf_counter()
    while not mounted(mnt):
        if d.poll() is not None or time.perf_counter() - t > 60:
            sys.exit("ptfs did not mount %s (see %s)" % (src, err.name))
        time.sleep(0.01)
    try:
        cold = os.geteuid() == 0
        raw = runs_of([(src, off, n) for _, off, n in ts])
        via = runs_of([(os.path.join(mnt, k), 0, n) for k, _, n in ts])
        pats = [("pread %d" % k, pread_pass, k) for k in (1, 4, 8, 16)]
        pats.append(("mmap 8", mmap_pass, 8))
        print("%d tensors, %.2f GB; MB/s, warm best of 3%s" % (
            len(ts), total / 1e9, ", cold best of 2" if cold else
            " (not root: no cold passes)"))
        print("%-9s %10s %10s %7s   %10s %10s %7s" % (
            "", "file warm", "mount warm", "ratio", "file cold",
            "mount cold", "ratio"))
        for name, fn, k in pats:
            row = []
            for temp, reps in (("warm", 3), ("cold", 2)):
                if temp == "cold" and not cold:
                    row += [None, None]
                    continue
                best = {}
                for which, runs in (("file", raw), ("mount", via)):
                    if temp == "warm":
                        fn(runs, 8)      # fill the caches
                    ds = []
                    for _ in range(reps):
                        if temp == "cold":
                            drop_caches()
                        ds.append(fn(runs, k))
                    best[which] = total / 1e6 / min(ds)
                row += [best["file"], best["mount"]]
            cells = []
            for i in (0, 2):
                f, m = row[i], row[i + 1]
                cells += (["%10.0f" % f, "%10.0f" % m, "%6.2fx" % (m / f)]
                          if f else ["%10s" % "-", "%10s" % "-", "%7s" % "-"])
            print("%-9s %s %s %s   %s %s %s" % ((name,) + tuple(cells)))
    finally:
        subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
        try:
            d.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(d.pid, signal.SIGKILL)
        os.rmdir(mnt)


if __name__ == "__main__":
    main()
