#!/usr/bin/python3
"""bench_stats.py - ptls --stats (issue 19.2) over a 500 MB checkpoint,
against `cat FILE > /dev/null` and against the torch script a user would
write, in the same run, and its memory.

    /usr/bin/python3 tests/bench/bench_stats.py [--no-torch] [PTLS] [WORKDIR]

Uses gpt2.pt (GPT-2-small-shaped state_dict, 148 float32 tensors,
~500 MB; ckpt_gen.py, cached in WORKDIR, default /tmp/ptfs-bench, shared
with the other benchmarks).  Warm page cache (the file read once first),
output dropped:
  cat        cat gpt2.pt > /dev/null
  ptls       ptls --stats gpt2.pt
  torch      /usr/bin/python3 (torch 1.13): torch.load, then per tensor
             min, max, mean, std, norm over the finite values and the
             NaN/+Inf/-Inf/zero counts (the script in TORCH_SCRIPT);
             best of 3, skipped with --no-torch (a minute a run)
cat and ptls run RUNS times each, interleaved (cat, ptls, cat, ...), so
a burst of load on the shared machine hits both alike; each one's best
wall time and best CPU time (user + system of the child, from wait4) is
kept, and the ratio is best against best.  CPU time hardly depends on
what else runs, so it is the steadier of the two ratios.
Goal: ptls --stats >= 0.5x cat's speed.  Peak RSS (GNU time's %M) of
ptls --stats on gpt2.pt and on the 148-key tiny file: one 1 MiB buffer
plus the metadata, not the data.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_gen import gpt2_state, make  # noqa: E402

ARGS = [a for a in sys.argv[1:] if a != "--no-torch"]
TORCH = "--no-torch" not in sys.argv[1:]
PTLS = ARGS[0] if len(ARGS) > 0 else "build/ptls"
WORK = ARGS[1] if len(ARGS) > 1 else "/tmp/ptfs-bench"
RUNS = 3
PAIRED_RUNS = 9
MB = 1e6

TORCH_SCRIPT = r"""
import sys, torch
sd = torch.load(sys.argv[1])
for k, t in sd.items():
    x = t.double() if t.is_floating_point() else t
    fin = x[torch.isfinite(x)]
    print(k, fin.min().item(), fin.max().item(), fin.mean().item(),
          fin.std(unbiased=False).item(), fin.norm().item(),
          torch.isnan(x).sum().item(), torch.isposinf(x).sum().item(),
          torch.isneginf(x).sum().item(), (x == 0).sum().item())
"""


def best(cmd, want=0):
    """best wall time of @cmd over RUNS runs, stdout dropped"""
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        times.append(time.perf_counter() - t)
        if rc != want:
            sys.exit("%s: exit %d, want %d" % (" ".join(cmd), rc, want))
    return min(times)


def once(cmd, want=0):
    """(wall, user + system CPU) of one run of @cmd, stdout dropped"""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    rc = os.waitstatus_to_exitcode(status)
    if rc != want:
        sys.exit("%s: exit %d, want %d" % (" ".join(cmd), rc, want))
    return wall, ru.ru_utime + ru.ru_stime


def paired(cmds):
    """best (wall, cpu) of each of @cmds, run PAIRED_RUNS times in turn"""
    runs = [[] for _ in cmds]
    for _ in range(PAIRED_RUNS):
        for i, cmd in enumerate(cmds):
            runs[i].append(once(cmd))
    return [(min(w for w, _ in r), min(c for _, c in r)) for r in runs]


def peak_rss(cmd):
    if not os.path.exists("/usr/bin/time"):
        return None
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    return int(r.stderr.split()[-1])


def mib(kib):
    return "n/a (no /usr/bin/time)" if kib is None else "%.1f MiB" % (kib / 1024)


def main():
    os.makedirs(WORK, exist_ok=True)
    f = make(WORK, "gpt2.pt", lambda: gpt2_state(False))
    tiny = make(WORK, "gpt2tiny.pt", lambda: gpt2_state(True))
    script = os.path.join(WORK, "stats_torch.py")
    with open(script, "w") as s:
        s.write(TORCH_SCRIPT)
    subprocess.run(["cat", f], stdout=subprocess.DEVNULL, check=True)
    size = os.path.getsize(f) / MB
    (t_cat, c_cat), (t_ls, c_ls) = paired([["cat", f],
                                           [PTLS, "--stats", f]])
    t_torch = best(["/usr/bin/python3", script, f]) if TORCH else None
    print("%-34s %8s %8s %9s %8s %8s" % ("gpt2.pt (%.0f MB), warm" % size,
                                         "wall s", "CPU s", "MB/s",
                                         "vs cat", "CPU vs"))
    print("%-34s %8.3f %8.3f %9.0f %7.2fx %7.2fx" %
          ("cat > /dev/null", t_cat, c_cat, size / t_cat, 1, 1))
    print("%-34s %8.3f %8.3f %9.0f %7.2fx %7.2fx" %
          ("ptls --stats", t_ls, c_ls, size / t_ls, t_cat / t_ls,
           c_cat / c_ls))
    print("(best of %d each, interleaved; CPU = user + system)" %
          PAIRED_RUNS)
    if TORCH:
        print("%-34s %8.3f %8s %9.0f %7.3fx" %
              ("torch.load + per-tensor stats", t_torch, "", size / t_torch,
               t_cat / t_torch))
        print("ptls --stats vs the torch script: %.1fx faster" %
              (t_torch / t_ls))
    print("peak RSS ptls --stats gpt2.pt:     %s" % mib(peak_rss([PTLS, "--stats", f])))
    print("peak RSS ptls --stats gpt2tiny.pt: %s" % mib(peak_rss([PTLS, "--stats", tiny])))
    if TORCH:
        print("peak RSS torch script gpt2.pt:     %s" %
              mib(peak_rss(["/usr/bin/python3", script, f])))
    ratio, cpu_ratio = t_cat / t_ls, c_cat / c_ls
    print("goal ptls --stats >= 0.5x cat (warm): wall %s (%.2fx), "
          "CPU %s (%.2fx)" % ("met" if ratio >= 0.5 else "NOT met", ratio,
                              "met" if cpu_ratio >= 0.5 else "NOT met",
                              cpu_ratio))

if __name__ == "__main__":
    main()
