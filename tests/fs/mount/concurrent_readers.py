#!/usr/bin/env python3
"""concurrent_readers.py MOUNT LISTING CHECKPOINT [PROCS THREADS ROUNDS]

Several processes, each with several threads, read the tensors of a live
ptfs mount at the same time and compare what they get with the bytes
gathered from the checkpoint's zip records (numpy only, no torch; the file
must be a zip checkpoint).  Every round starts with all readers on the same
tensor (the largest strided view) behind a barrier, then each reader walks
the tensors in its own random order, each time one of:
  read     open().read() through the page cache, sha256 compared
  direct   O_DIRECT reads in random chunk sizes (ptfs serves each)
  pread    O_DIRECT pread at random odd offsets and lengths
  mmap     mmap.mmap of the whole file
  drop     posix_fadvise(DONTNEED), then a plain read (refilled by ptfs)
Prints one line, "ok ..." or "FAIL ..." with the first mismatches; exit
status 0 only when every read was right.
"""
import hashlib
import mmap
import multiprocessing
import os
import random
import sys
import threading
import traceback

# copied beside ptfs_expect.py, or run in place (tests/fs/lib/)
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib")]
import ptfs_expect as px  # noqa: E402

MODES = ("read", "direct", "pread", "mmap", "drop")
MAX_TARGETS = 400


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Reader:
    def __init__(self, mnt, targets, want, hashes, seed):
        self.mnt, self.targets, self.want, self.hashes = mnt, targets, want, hashes
        self.rng = random.Random(seed)
        self.errors = []
        self.reads = self.bytes = 0

    def note(self, msg):
        if len(self.errors) < 20:
            self.errors.append(msg)

    def bad(self, rel, how, got, off=0):
        want = self.want[rel][off:off + len(got)] if how == "pread" else None
        self.note("%s: %s gave %d bytes (sha %s...)%s" % (
            rel, how, len(got), sha(got)[:12],
            "" if want is None else ", expected %s" % want[:8].hex()))

    def one(self, rel, mode):
        p = os.path.join(self.mnt, rel)
        size = len(self.want[rel])
        self.reads += 1
        if mode in ("read", "drop"):
            if mode == "drop":
                fd = os.open(p, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
            with open(p, "rb") as f:
                got = f.read()
        elif mode == "mmap":
            with open(p, "rb") as f, \
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                got = m[:]
        elif mode == "direct":
            fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
            parts = []
            try:
                while True:
                    chunk = os.read(fd, self.rng.choice(
                        (1, 3, 4096, 65536 + 5, 1 << 20, (1 << 20) + 7)))
                    if not chunk:
                        break
                    parts.append(chunk)
            finally:
                os.close(fd)
            got = b"".join(parts)
        else:                                   # pread
            fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
            try:
                for _ in range(6):
                    off = self.rng.randrange(0, size + 8)
                    ln = self.rng.choice((1, 3, 5, 13, 4097, 1 << 17))
                    got = os.pread(fd, ln, off)
                    self.bytes += len(got)
                    if got != self.want[rel][off:off + ln]:
                        self.bad(rel, "pread", got, off)
            finally:
                os.close(fd)
            return
        self.bytes += len(got)
        if sha(got) != self.hashes[rel]:
            self.bad(rel, mode, got)

    def run(self, rounds, barrier, first):
        try:
            for _ in range(rounds):
                barrier.wait()
                self.one(first, self.rng.choice(MODES))
                order = list(self.targets)
                self.rng.shuffle(order)
                for rel in order:
                    self.one(rel, self.rng.choice(MODES))
        except threading.BrokenBarrierError:
            self.errors.append("gave up: another reader failed")
            barrier.abort()
        except Exception:
            self.errors.append(traceback.format_exc().strip().splitlines()[-1])
            barrier.abort()


class RoundBarrier:
    """All threads of all processes start a round together."""

    def __init__(self, threads, pbarrier):
        self.t = threading.Barrier(threads, timeout=120)
        self.p = pbarrier

    def wait(self):
        if self.t.wait() == 0:
            self.p.wait(timeout=120)
        self.t.wait()

    def abort(self):
        self.t.abort()
        self.p.abort()


def process_main(mnt, targets, want, hashes, threads, rounds, pbarrier,
                 first, seed, queue):
    readers = []
    try:
        readers = [Reader(mnt, targets, want, hashes, seed * 100 + i)
                   for i in range(threads)]
        b = RoundBarrier(threads, pbarrier)
        ts = [threading.Thread(target=r.run, args=(rounds, b, first))
              for r in readers]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        errors = [e for r in readers for e in r.errors]
    except BaseException:
        errors = [traceback.format_exc().strip().splitlines()[-1]]
    queue.put((sum(r.reads for r in readers), sum(r.bytes for r in readers),
               errors[:50]))


def main(argv):
    if len(argv) not in (4, 7):
        print("usage: concurrent_readers.py MOUNT LISTING CHECKPOINT "
              "[PROCS THREADS ROUNDS]", file=sys.stderr)
        return 2
    mnt, listing_path, ckpt = argv[1:4]
    procs, threads, rounds = (int(x) for x in argv[4:7]) if len(argv) == 7 \
        else (4, 4, 3)
    listing = px.load_listing(listing_path)
    arch = px.Archive(ckpt, listing)
    if arch.zip is None:
        print("FAIL concurrent: %s is not a zip checkpoint" % ckpt)
        return 1
    want = {}
    strided = []
    for e in listing.get("entries", []):
        if e.get("kind") != "tensor":
            continue
        data = arch.tensor_bytes(e)
        if not data:
            continue
        rel = px.mount_rel(listing, e)
        want[rel] = data
        if not e.get("contiguous"):
            strided.append((len(data), rel))
    arch.close()
    if not want:
        print("FAIL concurrent: no tensor with data in %s" % ckpt)
        return 1
    targets = sorted(want, key=lambda r: -len(want[r]))[:MAX_TARGETS]
    first = max(strided)[1] if strided else targets[0]
    hashes = {rel: sha(want[rel]) for rel in targets}
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    pbarrier = ctx.Barrier(procs)
    ps = [ctx.Process(target=process_main,
                      args=(mnt, targets, want, hashes, threads, rounds,
                            pbarrier, first, i + 1, queue))
          for i in range(procs)]
    for p in ps:
        p.start()
    results = []
    try:
        for _ in ps:
            results.append(queue.get(timeout=600))
    except Exception:
        results.append((0, 0, ["a reader process did not report back"]))
    for p in ps:
        p.join(30)
        if p.exitcode is None:
            p.kill()
            p.join()
    errors = [e for r in results for e in r[2]]
    crashed = [p.exitcode for p in ps if p.exitcode != 0]
    reads = sum(r[0] for r in results)
    nbytes = sum(r[1] for r in results)
    what = ("%d processes x %d threads x %d rounds over %d tensors "
            "(same first: %s): %d reads, %d bytes"
            % (procs, threads, rounds, len(targets), first, reads, nbytes))
    if errors or crashed:
        print("FAIL %s; %d bad reads%s" % (
            what, len(errors),
            "; processes exited %s" % crashed if crashed else ""))
        for e in errors[:10]:
            print("      " + e)
        return 1
    print("ok %s" % what)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
