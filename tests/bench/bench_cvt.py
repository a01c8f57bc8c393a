#!/usr/bin/python3
"""bench_cvt.py - dtype conversion of a ~500 MB checkpoint: `ptrepack
--dtype bfloat16 IN OUT` against what a user would otherwise run, torch's
load + .to() + save, in the same run on the same file.

    /usr/bin/python3 tests/bench/bench_cvt.py [PTREPACK] [WORKDIR]

Generates (once, cached in WORKDIR, default /tmp/ptfs-bench)
gpt2_randn.pt: the GPT-2-small-shaped state_dict of ckpt_gen.py (148
float32 tensors, 498 MB) filled with normal random values, so that every
element is really rounded.  With a warm page cache (the file read once
first), best of 3 wall times of:

  ptrepack     ptrepack --dtype bfloat16 gpt2_randn.pt OUT
  torch        python3 -c 'load, {k: v.to(bfloat16)}, save' (the whole
               command, interpreter and import included: what a user
               waits for)
  torch core   the same three calls timed inside python (no start-up)

and the ratios torch / ptrepack.  Peak RSS (GNU time's %M) of each: the
conversion streams, so ptrepack's must not grow with the file.  The
outputs are checked to be equal (torch.load of both, bit for bit).
Needs Debian's torch 1.13 (/usr/bin/python3).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_gen import gpt2_state, make  # noqa: E402

PTREPACK = sys.argv[1] if len(sys.argv) > 1 else "build/ptrepack"
WORK = sys.argv[2] if len(sys.argv) > 2 else "/tmp/ptfs-bench"
RUNS = 3

TORCH = """
import sys, time, torch
t = time.perf_counter()
sd = torch.load(sys.argv[1])
sd = {k: v.to(torch.bfloat16) for k, v in sd.items()}
torch.save(sd, sys.argv[2])
print(time.perf_counter() - t)
"""

SAME = """
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert list(a) == list(b)
for k in a:
    assert a[k].dtype == b[k].dtype == torch.bfloat16, k
    assert torch.equal(a[k].view(torch.int16), b[k].view(torch.int16)), k
print("outputs equal: %d tensors, bit for bit" % len(a))
"""


def randn():
    import torch
    torch.manual_seed(0)
    sd = gpt2_state(False)
    for t in sd.values():
        t.normal_()
    return sd


def run(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    wall = time.perf_counter() - t
    if r.returncode:
        sys.exit("%s: exit %d: %s" % (" ".join(cmd), r.returncode,
                                      r.stderr.strip()[-300:]))
    return wall, r.stdout


def peak_rss(cmd):
    if not os.path.exists("/usr/bin/time"):
        return None
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    return int(r.stderr.split()[-1]) / 1024


def main():
    os.makedirs(WORK, exist_ok=True)
    src = make(WORK, "gpt2_randn.pt", randn)
    ours, theirs = (os.path.join(WORK, "cvt_ours.pt"),
                    os.path.join(WORK, "cvt_torch.pt"))
    with open(src, "rb") as f:          # warm the page cache
        while f.read(1 << 24):
            pass
    pt = [run([PTREPACK, "--dtype", "bfloat16", src, ours])[0]
          for _ in range(RUNS)]
    py, core = [], []
    for _ in range(RUNS):
        wall, out = run(["/usr/bin/python3", "-c", TORCH, src, theirs])
        py.append(wall)
        core.append(float(out.split()[-1]))
    print(run(["/usr/bin/python3", "-c", SAME, ours, theirs])[1].strip())
    mb = os.path.getsize(src) / 1e6
    rss_pt = peak_rss([PTREPACK, "--dtype", "bfloat16", src, ours])
    rss_py = peak_rss(["/usr/bin/python3", "-c", TORCH, src, theirs])
    print("float32 -> bfloat16 of %s (%.0f MB), warm cache, best of %d"
          % (os.path.basename(src), mb, RUNS))
    print("%-12s %8s %9s %10s %12s" % ("", "s", "MB/s", "x faster",
                                      "peak RSS"))
    for name, t, rss in (("ptrepack", min(pt), rss_pt),
                         ("torch", min(py), rss_py),
                         ("torch core", min(core), None)):
        print("%-12s %8.2f %9.0f %10.1f %12s" % (
            name, t, mb / t, t / min(pt),
            "%.1f MiB" % rss if rss is not None else "-"))
    os.unlink(ours)
    os.unlink(theirs)


if __name__ == "__main__":
    main()
