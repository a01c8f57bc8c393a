#!/usr/bin/python3
"""bench_ptdiff.py - how fast ptdiff compares two 500 MB checkpoints,
against `cat A B > /dev/null` on the same files, and how much memory it
takes.

    /usr/bin/python3 tests/bench/bench_ptdiff.py [PTDIFF] [WORKDIR]

Generates (once, cached in WORKDIR, default /tmp/ptfs-bench):
  gpt2.pt         GPT-2-small-shaped state_dict: 148 tensors, ~500 MB
                  (ckpt_gen.py; shared with bench_ptls.py, bench_mount.py)
  gpt2_pert.pt    the same with a few elements of 3 tensors changed: the
                  common case, mostly equal bytes (memcmp, no decoding)
  gpt2_shift.pt   every element of every tensor + 0.5: the worst case,
                  every element decoded and compared
With a warm page cache (each file read once first), best of 3 wall times
of `cat A B > /dev/null` and `ptdiff A B > /dev/null`; MB/s counts the
bytes of both files.  Goal: ptdiff >= 0.5x cat on gpt2_pert.pt.  Peak RSS
(GNU time's %M) of ptdiff on each pair and on the tiny 148-key
file: it must not grow with the data (two 1 MiB buffers + metadata).
Needs torch only to generate the files (Debian's /usr/bin/python3 has 1.13).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_gen import gpt2_state, make  # noqa: E402

PTDIFF = sys.argv[1] if len(sys.argv) > 1 else "build/ptdiff"
WORK = sys.argv[2] if len(sys.argv) > 2 else "/tmp/ptfs-bench"
RUNS = 3
MB = 1e6


def perturbed():
    sd = gpt2_state(False)
    for name in ("wte.weight", "h.5.attn.c_attn.weight", "ln_f.bias"):
        flat = sd[name].view(-1)
        for i in range(0, flat.numel(), flat.numel() // 5 + 1):
            flat[i] = 1.0
    return sd


def shifted():
    sd = gpt2_state(False)
    for t in sd.values():
        t += 0.5
    return sd


def best(cmd, want):
    """best wall time of @cmd over RUNS runs, stdout dropped"""
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
        times.append(time.perf_counter() - t)
        if rc != want:
            sys.exit("%s: exit %d, want %d" % (" ".join(cmd), rc, want))
    return min(times)


def peak_rss(cmd):
    """Peak RSS of @cmd in KiB.  Through GNU time: a child forked from
    this python would report python's own RSS at the fork as its peak."""
    if not os.path.exists("/usr/bin/time"):
        return None     # Debian's "time" package is not installed
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    return int(r.stderr.split()[-1])


def mib(kib):
    if kib is None:
        return "n/a (no /usr/bin/time)"
    return "%7.1f MiB" % (kib / 1024)


def main():
    os.makedirs(WORK, exist_ok=True)
    base = make(WORK, "gpt2.pt", lambda: gpt2_state(False))
    pert = make(WORK, "gpt2_pert.pt", perturbed)
    shift = make(WORK, "gpt2_shift.pt", shifted)
    tiny = make(WORK, "gpt2tiny.pt", lambda: gpt2_state(True))
    for f in (base, pert, shift):
        subprocess.run(["cat", f], stdout=subprocess.DEVNULL, check=True)
    print("%-28s %9s %9s %9s %9s %8s %10s" % (
        "pair", "MB", "cat s", "cat MB/s", "ptdiff s", "MB/s", "vs cat"))
    rows = []
    for label, b, want in (("gpt2 vs itself", base, 0),
                           ("gpt2 vs gpt2_pert", pert, 1),
                           ("gpt2 vs gpt2_shift", shift, 1)):
        size = (os.path.getsize(base) + os.path.getsize(b)) / MB
        t_cat = best(["cat", base, b], 0)
        t_pd = best([PTDIFF, base, b], want)
        rows.append((label, t_pd / t_cat, peak_rss([PTDIFF, base, b])))
        print("%-28s %9.0f %9.3f %9.0f %9.3f %8.0f %9.2fx" % (
            label, size, t_cat, size / t_cat, t_pd, size / t_pd,
            t_cat / t_pd))
    rss_tiny = peak_rss([PTDIFF, tiny, tiny])
    for label, _, rss in rows:
        print("peak RSS ptdiff %-24s %s" % (label + ":", mib(rss)))
    print("peak RSS ptdiff %-24s %s" % ("gpt2tiny vs itself:", mib(rss_tiny)))
    ratio = 1 / rows[1][1]
    print("goal ptdiff >= 0.5x cat on gpt2 vs gpt2_pert: %s (%.2fx)" %
          ("met" if ratio >= 0.5 else "NOT met", ratio))


if __name__ == "__main__":
    main()
