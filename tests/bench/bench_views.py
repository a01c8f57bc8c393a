"""bench_views.py - what reading a tensor through its .npy view costs next
to reading the tensor file itself (docs/views.md: the data part is the
tensor's own spliced read, no copy per open), and what a text view costs.

  /usr/bin/python3 tests/bench/bench_views.py BUILD_DIR WORK_DIR [OLD_BUILD]

On gpt2.pt (GPT-2-small-shaped, 148 float32 tensors, ~500 MB; generated
once into WORK_DIR, never committed), mounted read-only:
  raw      cat of every tensor file
  npy      cat of every KEY.npy
  np.load  numpy.load(KEY.npy) of every tensor, and mmap_mode='r' + sum
Each cold (page cache dropped, as far as the kernel lets us) and warm
(best of 5).  Goal: npy >= 0.9x raw, cold and warm.  The text view of
one 768 x 768 tensor (the first render, then warm) is timed for scale.

Then the text view of one big float32 tensor (text.pt: 100M elements of
N(0, 0.02), $PT_BENCH_TEXT_ELEMS to change; 400 MB), each number on a
fresh mount (ptfs -f, nothing learnt yet), warm page cache:
  head     `head -c 300 m/w.txt`: the time to its first bytes (the stat
           that measures the view included), against `ptdump --values w
           --head 30` (the same numbers without a mount)
  cat      the whole view read, against a cat of the tensor file m/w
  VmHWM    the daemon's peak memory after each
With OLD_BUILD (a build of an earlier commit) the same for it, in the same
run.  Goals: head well under 1 s; the daemon's memory bounded (not
growing with the text).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import mounted, vm  # noqa: E402
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


def text_state(n):
    import torch
    torch.manual_seed(0)
    return {"w": torch.randn(n) * 0.02}


def fresh_mount(build, ck, mnt, fn):
    """@fn(mnt) on a new read-only mount by @build's ptfs -f; (its
    result, the daemon's VmHWM after it)"""
    p = subprocess.Popen([os.path.join(build, "ptfs"), "-o", "ro", ck, mnt,
                          "-f"], stdout=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        t = time.perf_counter()
        while not mounted(mnt):
            if p.poll() is not None or time.perf_counter() - t > 60:
                raise RuntimeError("ptfs %s did not mount" % ck)
            time.sleep(0.002)
        r = fn(mnt)
        return r, vm(p.pid, "VmHWM")
    finally:
        subprocess.call(["fusermount3", "-u", mnt])
        p.wait(60)


def text_views(builds):
    n = int(os.environ.get("PT_BENCH_TEXT_ELEMS", 100000000))
    ck = make(WORK, "text%d.pt" % n, lambda: text_state(n))
    mnt = os.path.join(WORK, "mnt-text")
    os.makedirs(mnt, exist_ok=True)
    subprocess.call(["cat", ck], stdout=subprocess.DEVNULL)
    ptdump = os.path.join(BUILD, "ptdump")
    t_dump = min(timed(lambda: subprocess.run(
        [ptdump, "--values", "w", "--head", "30", ck],
        stdout=subprocess.DEVNULL, check=True)) for _ in range(3))

    def raw(m):
        cat([os.path.join(m, "w")])()
        return min(timed(cat([os.path.join(m, "w")])) for _ in range(3))
    t_raw, _ = fresh_mount(BUILD, ck, mnt, raw)

    def head(m):
        return timed(lambda: subprocess.run(
            ["head", "-c", "300", os.path.join(m, "w.txt")],
            stdout=subprocess.DEVNULL, check=True))

    def whole(m):
        p = os.path.join(m, "w.txt")
        return timed(cat([p])), os.path.getsize(p)

    print("text view of a %d-element float32 tensor (%.0f MB): "
          "ptdump --values --head %.4f s, cat of the tensor file %.3f s" %
          (n, n * 4 / 1e6, t_dump, t_raw))
    print("%-10s %10s %9s %12s %10s %9s %10s %12s" % (
        "build", "head s", "/ptdump", "VmHWM MiB", "cat s", "/raw",
        "text MB", "VmHWM MiB"))
    res = []
    for label, build in builds:
        t_head, h1 = fresh_mount(build, ck, mnt, head)
        (t_cat, size), h2 = fresh_mount(build, ck, mnt, whole)
        res.append((label, t_head, t_cat))
        print("%-10s %10.3f %8.0fx %12.1f %10.2f %8.0fx %10.0f %12.1f" % (
            label, t_head, t_head / t_dump, h1 / 2**20, t_cat,
            t_cat / t_raw, size / 1e6, h2 / 2**20))
    if len(res) == 2:
        print("this build vs %s: head %.0fx faster, whole cat %.1fx faster"
              % (res[1][0], res[1][1] / res[0][1], res[1][2] / res[0][2]))
    print("goal head < 1 s: %s" % ("met" if res[0][1] < 1 else "NOT met"))


if __name__ == "__main__":
    if os.environ.get("PT_BENCH_ONLY") != "text":
        main()
    text_views([("this", BUILD)] +
               ([("old", sys.argv[3])] if len(sys.argv) > 3 else []))
