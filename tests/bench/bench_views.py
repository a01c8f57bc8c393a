"""bench_views.py - what reading a tensor through its .npy view costs next
to reading the tensor file itself (docs/views.md: the data part is the
tensor's own spliced read, no copy per open), and what a text view costs.

  /usr/bin/python3 tests/bench/bench_views.py BUILD_DIR WORK_DIR

On gpt2.pt (GPT-2-small-shaped, 148 float32 tensors, ~500 MB; generated
once into WORK_DIR, never committed), mounted read-only:
  raw      cat of every tensor file
  npy      cat of every KEY.npy
  np.load  numpy.load(KEY.npy) of every tensor, and mmap_mode='r' + sum
Each cold (page cache dropped, as far as the kernel lets us) and warm
(best of 5).  Goal: npy >= 0.9x raw, cold and warm.  The text view of
one 768 x 768 tensor (the first render, then warm) is timed for scale.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_gen import gpt2_state, make  # noqa: E402

BUILD, WORK = sys.argv[1], sys.argv[2]
PTFS = os.path.join(BUILD, "ptfs")


def drop_caches():
    subprocess.call(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cat(paths):
    def run():
        for p in paths:
            with open(p, "rb", buffering=0) as f:
                while f.readinto(BUF):
                    pass
    return run


BUF = bytearray(1 << 20)


def main():
    import numpy as np
    os.makedirs(WORK, exist_ok=True)
    ck = make(WORK, "gpt2.pt", lambda: gpt2_state(False))
    mnt = os.path.join(WORK, "mnt-views")
    os.makedirs(mnt, exist_ok=True)
    subprocess.check_call([PTFS, "-o", "ro", ck, mnt])
    try:
        keys = sorted(os.listdir(mnt))
        raw = [os.path.join(mnt, k) for k in keys]
        npy = [p + ".npy" for p in raw]
        size = sum(os.path.getsize(p) for p in raw)

        def load():
            for p in npy:
                np.load(p)

        def mmap_sum():
            for p in npy:
                np.load(p, mmap_mode="r").sum()

        rows = []
        for label, fn in (("raw", cat(raw)), ("npy", cat(npy)),
                          ("np.load", load), ("np.load mmap + sum", mmap_sum)):
            drop_caches()
            cold = timed(fn)
            warm = min(timed(fn) for _ in range(5))
            rows.append((label, cold, warm))
        print("%-20s %10s %10s %12s %12s" % ("read of gpt2.pt", "cold s",
                                             "warm s", "cold MB/s",
                                             "warm MB/s"))
        for label, cold, warm in rows:
            print("%-20s %10.3f %10.3f %12.0f %12.0f" % (
                label, cold, warm, size / cold / 1e6, size / warm / 1e6))
        r, n = rows[0], rows[1]
        print("npy vs raw: cold %.2fx, warm %.2fx (goal >= 0.9x): %s" % (
            r[1] / n[1], r[2] / n[2],
            "met" if r[1] / n[1] >= 0.9 and r[2] / n[2] >= 0.9 else
            "NOT met"))
        txt = os.path.join(mnt, "h.0.attn.c_proj.weight.txt")
        first = timed(cat([txt]))
        warm = min(timed(cat([txt])) for _ in range(3))
        print("text view of a 768 x 768 float32 tensor: %.1f MB of text, "
              "first read %.3f s, warm %.3f s" % (
                  os.path.getsize(txt) / 1e6, first, warm))
    finally:
        subprocess.call(["fusermount3", "-u", mnt])


if __name__ == "__main__":
    main()
