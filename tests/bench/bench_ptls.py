#!/usr/bin/python3
"""bench_ptls.py - how fast ptls lists a checkpoint, against torch.load and
Python's zipfile listing, measured in the same run on the same files.

    /usr/bin/python3 tests/bench/bench_ptls.py [PTLS] [WORKDIR]

Generates (once, cached in WORKDIR, default /tmp/ptfs-bench):
  many.pt      100,000 tensors of 16 float32 each (a dict)
  gpt2.pt      GPT-2-small-shaped state_dict: 148 tensors, ~500 MB
  gpt2tiny.pt  the same 148 keys with 1-element tensors (~40 KB)
Prints best-of-N wall times and the ratios the goals are about:
  torch.load / ptls on many.pt (goal >= 10x), and ptls on gpt2.pt against
  gpt2tiny.pt (goal ~1x: listing cost must not grow with data size).
Needs torch (Debian's /usr/bin/python3 has 1.13).
"""
import os
import subprocess
import sys
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_gen import gpt2_state, make, many_state  # noqa: E402
from benchlib import best  # noqa: E402

PTLS = sys.argv[1] if len(sys.argv) > 1 else "build/ptls"
WORK = sys.argv[2] if len(sys.argv) > 2 else "/tmp/ptfs-bench"
os.makedirs(WORK, exist_ok=True)


def run_ptls(path):
    subprocess.run([PTLS, "--json", path], check=True,
                   stdout=subprocess.DEVNULL)


def main():
    many = make(WORK, "many.pt", lambda: many_state(100000))
    gpt2 = make(WORK, "gpt2.pt", lambda: gpt2_state(False))
    tiny = make(WORK, "gpt2tiny.pt", lambda: gpt2_state(True))
    rows = []
    for path in (many, gpt2, tiny):
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL)  # warm cache
        t_ptls = best(lambda: run_ptls(path), 5)
        t_zip = best(lambda: zipfile.ZipFile(path).infolist(), 5)
        t_torch = best(lambda: torch.load(path, map_location="cpu"),
                       2 if path == many else 3)
        rows.append((os.path.basename(path), t_ptls, t_torch, t_zip))
    print("%-12s %10s %12s %12s %12s %12s" % ("file", "ptls s", "torch.load s",
          "zipfile s", "torch/ptls", "zipfile/ptls"))
    for name, p, t, z in rows:
        print("%-12s %10.4f %12.4f %12.4f %11.1fx %11.2fx" %
              (name, p, t, z, t / p, z / p))
    ratio = rows[1][1] / rows[2][1]
    print("ptls gpt2.pt (500 MB) / gpt2tiny.pt (same 148 keys): %.2fx "
          "(1.0 = cost independent of data size)" % ratio)
    print("goal torch.load/ptls >= 10 on many.pt: %s (%.1fx)" %
          ("met" if rows[0][2] / rows[0][1] >= 10 else "NOT met",
           rows[0][2] / rows[0][1]))


if __name__ == "__main__":
    main()
