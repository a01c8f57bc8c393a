#!/usr/bin/python3
"""bench_mem.py - the mount daemon's memory per tensor and the time to list
and mount checkpoints of 100,000 and 1,000,000 tensors (issue 18).

    /usr/bin/python3 tests/bench/bench_mem.py BUILD_DIR [WORKDIR]

Generates (once, cached in WORKDIR, default /tmp/ptfs-bench):
  many.pt      100,000 tensors of 16 float32 each (a dict; bench_ptls.py's)
  many1m.pt    1,000,000 tensors of 16 float32 each (a dict)

For each file: `ptls --json FILE > /dev/null` (best of 3; 1 on many1m.pt), then
`ptfs FILE MNT -f` (pid kept) and `ls -lR MNT > /dev/null`, timed from the
start of the daemon until ls exits, then the daemon's VmHWM (and VmRSS)
from /proc/PID/status, then `fusermount3 -u`.  VmHWM / tensors is printed
against the goal of 400 bytes a tensor.  On many.pt, torch.load (best of 2,
torch already imported) against ptls (best of 5, `--json` as in
bench_ptls.py) in the same run: goal >= 20x.  Measured with torch 1.13
(Debian's /usr/bin/python3, needed) and, when its root is there
(PT_TORCH2_ROOT, default /var/cache/ptfs/torch2-root, made by
scripts/torch2-root.sh), with torch 2.x too: its torch.load as called
(weights_only=True by default since 2.6) and with weights_only=False.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_gen import make, many_state  # noqa: E402
from benchlib import TORCH2_ROOT as ROOT, best, mounted, vm  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
WORK = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "/tmp/ptfs-bench")
PTFS = os.path.join(BUILD, "ptfs")
PTLS = os.path.join(BUILD, "ptls")
GOAL = 400          # bytes of daemon VmHWM per tensor
RATIO = 20          # torch.load / ptls on 100,000 tensors
MIB = 1 << 20


def ptls(path):
    subprocess.run([PTLS, "--json", path], check=True,
                   stdout=subprocess.DEVNULL)


def mount_ls(path, base):
    """(seconds from starting the daemon until ls -lR exits, seconds until
    the mount appeared, VmHWM after ls, VmHWM when the mount appeared,
    VmRSS after ls, files ls listed)"""
    mnt = tempfile.mkdtemp(prefix="mnt-", dir=base)
    err = open(os.path.join(base, "stderr"), "w+")
    t = time.perf_counter()
    p = subprocess.Popen([PTFS, path, mnt, "-f"], stdout=subprocess.DEVNULL,
                         stderr=err, start_new_session=True)
    try:
        while not mounted(mnt):
            if p.poll() is not None or time.perf_counter() - t > 600:
                err.seek(0)
                raise RuntimeError("ptfs %s failed (%s): %s" %
                                   (path, p.returncode, err.read()))
            time.sleep(0.002)
        t_mount = time.perf_counter() - t
        h_mount = vm(p.pid, "VmHWM")
        ls = subprocess.run(["ls", "-lR", mnt], stdout=subprocess.PIPE,
                            check=True)
        secs = time.perf_counter() - t
        hwm = vm(p.pid, "VmHWM")
        rss = vm(p.pid, "VmRSS")
        nfiles = sum(1 for line in ls.stdout.splitlines()
                     if line.startswith(b"-"))
    finally:
        if mounted(mnt):
            subprocess.run(["fusermount3", "-u", mnt])
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        os.rmdir(mnt)
    if p.returncode:
        err.seek(0)
        raise RuntimeError("ptfs exited %d: %s" % (p.returncode, err.read()))
    return secs, t_mount, hwm, h_mount, rss, nfiles


def main():
    files = [(make(WORK, "many.pt", lambda: many_state(100000)), 100000),
             (make(WORK, "many1m.pt", lambda: many_state(1000000)), 1000000)]
    base = tempfile.mkdtemp(prefix="ptfs-bench-mem-")
    rows = []
    try:
        for path, n in files:
            subprocess.run(["cat", path], stdout=subprocess.DEVNULL)
            t_ls = best(lambda: ptls(path), 3 if n <= 100000 else 1)
            secs, t_mount, hwm, h_mount, rss, nfiles = mount_ls(path, base)
            if nfiles != n:
                raise RuntimeError("ls -lR listed %d files, not %d" %
                                   (nfiles, n))
            rows.append((os.path.basename(path), n, t_ls, t_mount, secs,
                         h_mount, hwm, rss))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("%-10s %9s %8s %9s %12s %12s %11s %8s %11s" %
          ("file", "tensors", "ptls s", "mount s", "+ls -lR s",
           "HWM mount", "HWM ls -lR", "B/tensor", "RSS ls -lR"))
    for name, n, t_ls, t_mount, secs, h_mount, hwm, rss in rows:
        print("%-10s %9d %8.3f %9.3f %12.3f %9.1f MiB %7.1f MiB %8.0f "
              "%7.1f MiB" % (name, n, t_ls, t_mount, secs, h_mount / MIB,
                             hwm / MIB, hwm / n, rss / MIB))
    for name, n, _, _, _, _, hwm, _ in rows:
        print("goal daemon VmHWM after ls -lR <= %d B/tensor on %s: %s "
              "(%.0f B)" % (GOAL, name, "met" if hwm / n <= GOAL else
                            "NOT met", hwm / n))

    import torch
    many = files[0][0]
    t_ptls = best(lambda: ptls(many), 5)
    loads = [("torch %s" % torch.__version__.split("+")[0],
              best(lambda: torch.load(many, map_location="cpu"), 2))]
    loads += torch2_loads(many)
    print("many.pt: ptls %.3f s" % t_ptls)
    for who, t_torch in loads:
        r = t_torch / t_ptls
        print("goal torch.load/ptls >= %d on many.pt, %s (torch.load "
              "%.3f s): %s (%.1fx)" % (RATIO, who, t_torch,
                                       "met" if r >= RATIO else "NOT met", r))


def torch2_loads(path):
    """[(who, seconds)]: torch 2.x's torch.load of @path (best of 2, torch
    imported), as called and with weights_only=False; [] without its root"""
    if not os.path.isdir(os.path.join(ROOT, "usr")):
        print("torch 2.x: no root at %s (sh scripts/torch2-root.sh): "
              "compared with torch 1.13 only" % ROOT)
        return []
    inner = tempfile.mkdtemp(prefix="ptfs-bench-mem-", dir=ROOT + "/tmp")
    try:
        shutil.copy(path, inner)
        f = "/tmp/%s/%s" % (os.path.basename(inner), os.path.basename(path))
        code = ("import time, torch\n"
                "def best(**kw):\n"
                "    t = []\n"
                "    for _ in range(2):\n"
                "        s = time.perf_counter()\n"
                "        torch.load(%r, map_location='cpu', **kw)\n"
                "        t.append(time.perf_counter() - s)\n"
                "    return min(t)\n"
                "print(torch.__version__.split('+')[0], best(), "
                "best(weights_only=False))\n" % f)
        out = subprocess.run(["chroot", ROOT, "python3", "-c", code],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        if out.returncode:
            raise RuntimeError("torch 2.x: %s" % out.stderr.strip())
        ver, t_default, t_full = out.stdout.split()[-3:]
    finally:
        shutil.rmtree(inner, ignore_errors=True)
    return [("torch %s as called" % ver, float(t_default)),
            ("torch %s weights_only=False" % ver, float(t_full))]


if __name__ == "__main__":
    main()
