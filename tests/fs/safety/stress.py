#!/usr/bin/env python3
"""stress.py gen CKPT | run MOUNT [PROCS THREADS ROUNDS] | check CKPT

Load on a writable ptfs mount: many readers and writers at once, in
processes and threads, on the same and on different tensors, with
renames while they read.  Plain Python (no torch, no numpy).

  gen CKPT     writes a torch-layout zip (stdlib only): tensors t0..t5
               (written), r0 and r1 (renamed), each float32 x 65536
               (256 KiB, 64 regions of 4 KiB), every byte a known pattern
  run MOUNT    ROUNDS rounds.  In each, writer threads (in PROCS
               processes) write a deterministic 25% of the (tensor,
               region) pairs, the owner of each pair being fixed, so
               tensors are shared between writers region by region; they
               use pwrite, write after seek and mmap stores.  Reader
               threads read whole tensors at the same time (pread,
               O_DIRECT, mmap) and check every region that is not being
               written in this round byte for byte.  A renamer moves
               r0/r1 to and from other names (and into a subdirectory)
               while readers open them by whatever name they have, and
               read through descriptors opened before the rename.  After
               each round (a barrier), one process checks every byte of
               every tensor after dropping the page cache.  Meanwhile a
               thread reads .ptfs/as/model.safetensors whole, over and
               over (ESTALE allowed: a rename made another layout), and
               after each round it must hold every tensor's bytes.
  check CKPT   after write-back: the archive's records hold exactly the
               final state (zipfile), under the final names
  verify MOUNT every tensor through the mount equals the state after
               ROUNDS rounds (page cache dropped first)
  torch CKPT   the same through torch.load (also weights_only=True when
               this torch has it): every tensor's bytes, dtype and shape

Prints one line, "ok ..." or "FAIL ...", exit 0 or 1.
"""
import io
import json
import mmap
import multiprocessing as mp
import os
import random
import struct
import sys
import threading
import time
import traceback
import zipfile

NUMEL = 65536
TBYTES = NUMEL * 4
REG = 4096
NREG = TBYTES // REG
WRITTEN = ["t%d" % i for i in range(6)]
RENAMED = ["r0", "r1"]
ALL = WRITTEN + RENAMED
ROT = [bytes((k + i) & 255 for i in range(REG)) for k in range(256)]


def pattern(t, j, rnd):
    """bytes of region j of tensor index t after round rnd (0: initial)"""
    return ROT[(t * 31 + j * 7 + rnd * 13) % 256]


def written_in(t, j, rnd):
    """is region j of tensor t written in round rnd (>= 1)?"""
    return t < len(WRITTEN) and (t * 131 + j * 17 + rnd * 71) % 4 == 0


def last_round(t, j, rnd):
    """the round whose pattern region j holds once round rnd is over"""
    for r in range(rnd, 0, -1):
        if written_in(t, j, r):
            return r
    return 0


def expected(t, rnd):
    return b"".join(pattern(t, j, last_round(t, j, rnd)) for j in range(NREG))


# ------------------------------------------------------------- generate
def pickle_of(names):
    """protocol-2 pickle of {name: float32 tensor over storage i}"""
    b = bytearray(b"\x80\x02}(")
    for i, name in enumerate(names):
        def s(x):
            x = x.encode()
            return b"X" + struct.pack("<I", len(x)) + x
        b += s(name)
        b += b"ctorch._utils\n_rebuild_tensor_v2\n("
        b += b"(" + s("storage") + b"ctorch\nFloatStorage\n" + s(str(i))
        b += s("cpu") + b"J" + struct.pack("<i", NUMEL) + b"tQ"
        b += b"K\x00(J" + struct.pack("<i", NUMEL) + b"t(K\x01t\x89"
        b += b"ccollections\nOrderedDict\n)RtR"
    return bytes(b + b"u.")


def gen(path):
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle_of(ALL))
        for i in range(len(ALL)):
            z.writestr("archive/data/%d" % i, expected(i, 0))
        z.writestr("archive/version", "3\n")
    with open(path + ".tmp", "wb") as f:
        f.write(bio.getvalue())
    os.rename(path + ".tmp", path)
    return "wrote %s (%d tensors of %d bytes)" % (path, len(ALL), TBYTES)


# ------------------------------------------------------------------ run
class Names:
    """where r0/r1 are now: the renamer's moves are a fixed cycle, and
    readers just try the candidates"""
    CYCLE = ["%s", "%s.moved", "sub/%s", "%s"]

    @staticmethod
    def candidates(name):
        return [c % name for c in Names.CYCLE[:3]]


def open_any(mnt, name, flags=os.O_RDONLY):
    for _ in range(200):
        for c in Names.candidates(name):
            try:
                return os.open(os.path.join(mnt, c), flags)
            except FileNotFoundError:
                pass
        time.sleep(0.001)
    raise FileNotFoundError("%s under none of its names" % name)


def read_all(fd, how, rng):
    if how == "mmap":
        with mmap.mmap(fd, TBYTES, access=mmap.ACCESS_READ) as m:
            return m[:]
    if how == "chunks":
        out, off = [], 0
        while off < TBYTES:
            n = rng.choice((4096, 65536, 100000, 1 << 20))
            b = os.pread(fd, n, off)
            if not b:
                break
            out.append(b)
            off += len(b)
        return b"".join(out)
    return os.pread(fd, TBYTES, 0)


class Worker:
    def __init__(self, mnt, wid, nwriters, rounds, seed):
        self.mnt, self.wid, self.nw, self.rounds = mnt, wid, nwriters, rounds
        self.rng = random.Random(seed)
        self.errors = []
        self.ops = 0

    def note(self, msg):
        if len(self.errors) < 10:
            self.errors.append(msg)

    def write_round(self, rnd):
        mine = [(t, j) for t in range(len(WRITTEN)) for j in range(NREG)
                if written_in(t, j, rnd) and (t + j) % self.nw == self.wid]
        mine = mine * 3             # the same bytes again, other ways
        self.rng.shuffle(mine)
        fds = {}
        try:
            for t, j in mine:
                if t not in fds:
                    fds[t] = os.open(os.path.join(self.mnt, WRITTEN[t]),
                                     os.O_RDWR)
                fd, data, how = fds[t], pattern(t, j, rnd), self.rng.random()
                if how < 0.6:
                    n = os.pwrite(fd, data, j * REG)
                    if n != REG:
                        self.note("%s: short pwrite %d" % (WRITTEN[t], n))
                elif how < 0.8:
                    with open(os.path.join(self.mnt, WRITTEN[t]), "r+b",
                              buffering=0) as f:
                        f.seek(j * REG)
                        f.write(data)
                else:
                    with mmap.mmap(fd, TBYTES) as m:
                        m[j * REG:(j + 1) * REG] = data
                        m.flush()
                self.ops += 1
        finally:
            for fd in fds.values():
                os.close(fd)

    def read_round(self, rnd, stop):
        """read until @stop; regions written this round are skipped"""
        while not stop.is_set():
            t = self.rng.randrange(len(ALL))
            how = self.rng.choice(("pread", "chunks", "mmap"))
            try:
                fd = open_any(self.mnt, ALL[t])
            except FileNotFoundError as e:
                self.note(str(e))
                continue
            try:
                got = read_all(fd, how, self.rng)
                if t >= len(WRITTEN):      # renamed while open: still it
                    time.sleep(self.rng.random() * 0.002)
                    got2 = os.pread(fd, TBYTES, 0)
                    if got2 != expected(t, rnd):
                        self.note("%s: read through an fd across a rename "
                                  "differs" % ALL[t])
            finally:
                os.close(fd)
            self.ops += 1
            if len(got) != TBYTES:
                self.note("%s: %s read %d bytes" % (ALL[t], how, len(got)))
                continue
            want = expected(t, rnd - 1)
            for j in range(NREG):
                if written_in(t, j, rnd):
                    continue
                if got[j * REG:(j + 1) * REG] != want[j * REG:(j + 1) * REG]:
                    self.note("round %d: %s region %d differs (%s)" %
                              (rnd, ALL[t], j, how))
                    break


def rename_loop(mnt, stop, errors):
    os.makedirs(os.path.join(mnt, "sub"), exist_ok=True)
    k = 0
    while not stop.is_set():
        for name in RENAMED:
            a = Names.CYCLE[k % 3] % name
            b = Names.CYCLE[(k % 3) + 1] % name
            try:
                os.rename(os.path.join(mnt, a), os.path.join(mnt, b))
            except OSError as e:
                errors.append("rename %s -> %s: %s" % (a, b, e))
                return
        k += 1
        time.sleep(0.002)
    # back home for the final check
    while k % 3:
        for name in RENAMED:
            os.rename(os.path.join(mnt, Names.CYCLE[k % 3] % name),
                      os.path.join(mnt, Names.CYCLE[(k % 3) + 1] % name))
        k += 1


AS = os.path.join(".ptfs", "as", "model.safetensors")


def as_tensors(mnt):
    """{tensor index: bytes} of .ptfs/as/model.safetensors, read whole"""
    with open(os.path.join(mnt, AS), "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        base = k[4:] if k.startswith("sub.") else k
        base = base[:-6] if base.endswith(".moved") else base
        a, e = v["data_offsets"]
        out[ALL.index(base)] = b[8 + n + a:8 + n + e]
    if len(b) != 8 + n + sum(len(x) for x in out.values()):
        raise ValueError("%s: %d bytes, its header says otherwise"
                         % (AS, len(b)))
    return out


def as_loop(mnt, stop, errors):
    """read .ptfs/as/ over and over while everything changes: each read
    whole, or ESTALE when a rename made another layout under it"""
    n = 0
    while not stop.is_set():
        try:
            got = as_tensors(mnt)
            if sorted(got) != list(range(len(ALL))):
                errors.append("%s holds %s" % (AS, sorted(got)))
            n += 1
        except OSError as e:
            if e.errno != 116:      # ESTALE
                errors.append("%s: %s" % (AS, e))
        except ValueError as e:
            errors.append(str(e))
    return n


def proc_main(mnt, pid, nprocs, threads, rounds, barrier, q):
    """one process: THREADS writers and THREADS readers per round"""
    nw = nprocs * threads
    writers = [Worker(mnt, pid * threads + i, nw, rounds, 1000 * pid + i)
               for i in range(threads)]
    readers = [Worker(mnt, 0, nw, rounds, 5000 + 1000 * pid + i)
               for i in range(threads)]
    errors = []
    try:
        for rnd in range(1, rounds + 1):
            barrier.wait()
            stop = threading.Event()
            rt = [threading.Thread(target=r.read_round, args=(rnd, stop))
                  for r in readers]
            wt = [threading.Thread(target=w.write_round, args=(rnd,))
                  for w in writers]
            ren = asr = None
            if pid == 0:
                ren = threading.Thread(target=rename_loop,
                                       args=(mnt, stop, errors))
                ren.start()
                asr = threading.Thread(target=as_loop,
                                       args=(mnt, stop, errors))
                asr.start()
            for t in rt + wt:
                t.start()
            for t in wt:
                t.join()
            time.sleep(0.05)
            barrier.wait()          # every writer of every process done
            stop.set()
            for t in rt:
                t.join()
            if ren:
                ren.join()
                asr.join()
            barrier.wait()
            if pid == 0:            # the whole state, page cache dropped
                for t in range(len(ALL)):
                    fd = open_any(mnt, ALL[t])
                    try:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                        got = os.pread(fd, TBYTES, 0)
                    finally:
                        os.close(fd)
                    if got != expected(t, rnd):
                        errors.append("after round %d: %s differs" %
                                      (rnd, ALL[t]))
                # .ptfs/as/, made again from the edited model
                got = as_tensors(mnt)
                for t in range(len(ALL)):
                    if got.get(t) != expected(t, rnd):
                        errors.append("after round %d: %s of %s differs" %
                                      (rnd, ALL[t], AS))
            barrier.wait()
    except Exception:
        errors.append(traceback.format_exc().strip().splitlines()[-1])
        barrier.abort()
    for w in writers + readers:
        errors += w.errors
    q.put((sum(w.ops for w in writers), sum(r.ops for r in readers),
           errors[:20]))


def run(mnt, procs, threads, rounds):
    barrier = mp.Barrier(procs, timeout=300)
    q = mp.Queue()
    t0 = time.time()
    ps = [mp.Process(target=proc_main,
                     args=(mnt, i, procs, threads, rounds, barrier, q))
          for i in range(procs)]
    for p in ps:
        p.start()
    res = [q.get(timeout=900) for _ in ps]
    for p in ps:
        p.join()
    w = sum(r[0] for r in res)
    r = sum(r[1] for r in res)
    errors = [e for x in res for e in x[2]]
    summary = ("%d processes x (%d writers + %d readers), %d rounds: %d "
               "writes, %d whole-tensor reads, renames, in %.1f s" %
               (procs, threads, threads, rounds, w, r, time.time() - t0))
    if errors:
        return False, summary + "; " + "; ".join(errors[:4])
    return True, summary


def check(path, rounds):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        prefix = names[0].split("/")[0]
        pkl = z.read(prefix + "/data.pkl")
        bad = []
        for i, name in enumerate(ALL):
            if name.encode() not in pkl:
                bad.append("%s not in data.pkl" % name)
            # keys may be renumbered: find the record by content
        datas = {n: z.read(n) for n in names if "/data/" in n}
        for i, name in enumerate(ALL):
            want = expected(i, rounds)
            if not any(v == want for v in datas.values()):
                bad.append("no record holds %s's final bytes" % name)
    if bad:
        return False, "; ".join(bad[:4])
    return True, "%d records hold the final bytes of all %d tensors" % (
        len(datas), len(ALL))


def torch_check(path, rounds):
    import torch
    kw = [{}]
    try:
        torch.load(path, weights_only=True)
        kw.append({"weights_only": True})
    except TypeError:
        pass
    for k in kw:
        sd = torch.load(path, map_location="cpu", **k)
        for i, name in enumerate(ALL):
            t = sd[name]
            if t.dtype != torch.float32 or tuple(t.shape) != (NUMEL,):
                return False, "%s: %s %s" % (name, t.dtype, tuple(t.shape))
            got = t.contiguous().view(torch.uint8).numpy().tobytes()
            if got != expected(i, rounds):
                return False, "%s: bytes differ" % name
    return True, "torch %s loads all %d tensors with their final bytes%s" % (
        torch.__version__, len(ALL),
        " (also weights_only=True)" if len(kw) > 1 else "")


def verify(mnt, rounds):
    for t, name in enumerate(ALL):
        try:
            fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
        except OSError as e:
            return False, "%s: %s" % (name, e)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            got = os.pread(fd, TBYTES, 0)
        finally:
            os.close(fd)
        if got != expected(t, rounds):
            return False, "%s differs from the state after round %d" % (
                name, rounds)
    return True, "all %d tensors hold the state after round %d" % (
        len(ALL), rounds)


def main(argv):
    if len(argv) >= 3 and argv[1] == "gen":
        print("ok " + gen(argv[2]))
        return 0
    if len(argv) >= 3 and argv[1] in ("run", "check", "torch", "verify"):
        procs, threads, rounds = (int(x) for x in argv[3:6]) \
            if len(argv) >= 6 else (3, 3, 4)
        fn = {"run": lambda: run(argv[2], procs, threads, rounds),
              "check": lambda: check(argv[2], rounds),
              "torch": lambda: torch_check(argv[2], rounds),
              "verify": lambda: verify(argv[2], rounds)}[argv[1]]
        ok, msg = fn()
        print(("ok " if ok else "FAIL ") + msg)
        return 0 if ok else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
