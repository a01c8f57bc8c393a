#!/usr/bin/python3
"""bench_dcp.py - DCP conversions both ways (issue 17): ptrepack against
torch's own format_utils, wall time and peak RSS, measured in one run.

    /usr/bin/python3 tests/bench/bench_dcp.py [BUILD_DIR] [WORKDIR]

Needs the torch 2.x root (sh scripts/torch2-root.sh builds it; its path
from PT_TORCH2_ROOT, default /var/cache/ptfs/torch2-root): torch 1.13 has
no DCP.  Generates once, in the root's /tmp/ptfs-bench-dcp: big.pt, a
torch.save of {"layers": [3 x {"w": float32[2048, 8192], "b":
float32[8192]}], "step": 7} (193 MB), and src/, torch_save_to_dcp of it.
Then, warm cache (each input read once first), each contender's best of
2 runs (torch's wall time is the call's alone, after the import):

  DCP -> one file   ptrepack src one.pt   vs  dcp_to_torch_save(src, ref.pt)
  one file -> DCP   ptrepack big.pt out/  vs  torch_save_to_dcp(big.pt, ref/)

and checks the outputs: ptdiff -q one.pt ref.pt, and dcp_to_torch_save
of out/ and ref/ equal tensor by tensor; then removes them (big.pt and
src/ stay for the next run).  Peak RSS is the process's
(the python side includes importing torch, printed apart).

Then the write-back of a 4-byte edit, on four/ (the same state dict
saved with FileSystemWriter(thread_count=4): four .distcp files, as four
ranks would write them): a copy of it mounted, 4 bytes written into
layers/1/w, `ptfs umount` timed (it writes the one .distcp file holding
them anew, cloned where the file system can, and .metadata), against
cp -r of four/ and sync, and against the Python route
(dcp_to_torch_save, torch.load, the edit, torch_save_to_dcp); the edit is
checked by reading the tensor back with torch's dcp_to_torch_save.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import TORCH2_ROOT as ROOT, timed_call  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
INNER = "/tmp/ptfs-bench-dcp"
WORK = os.path.join(ROOT, INNER.lstrip("/"))
MB = 1e6

GEN = """
import torch
from torch.distributed.checkpoint.format_utils import torch_save_to_dcp
g = torch.Generator().manual_seed(1)
sd = {"layers": [{"w": torch.randn(2048, 8192, generator=g),
                  "b": torch.randn(8192, generator=g)} for _ in range(3)],
      "step": 7}
torch.save(sd, "%(d)s/big.pt")
torch_save_to_dcp("%(d)s/big.pt", "%(d)s/src")
import torch.distributed.checkpoint as dcp
dcp.save(sd, storage_writer=dcp.FileSystemWriter("%(d)s/four",
                                                 thread_count=4))
"""
IMPORT = "import torch, torch.distributed.checkpoint.format_utils"
SAME = """
import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
def flat(v, p=""):
    if isinstance(v, dict):
        return [x for k in v for x in flat(v[k], p + "/" + str(k))]
    if isinstance(v, list):
        return [x for i, y in enumerate(v) for x in flat(y, p + "/%%d" %% i)]
    return [(p, v)]
dcp_to_torch_save("%(d)s/out", "%(d)s/a.pt")
dcp_to_torch_save("%(d)s/ref", "%(d)s/b.pt")
a = flat(torch.load("%(d)s/a.pt", weights_only=False))
b = flat(torch.load("%(d)s/b.pt", weights_only=False))
assert [k for k, _ in a] == [k for k, _ in b], "keys differ"
for (k, x), (_, y) in zip(a, b):
    same = (x.dtype, x.shape) == (y.dtype, y.shape) and torch.equal(x, y) \\
        if isinstance(x, torch.Tensor) else x == y
    assert same, k
print(len(a))
"""


def timed(argv):
    return timed_call(argv, "bench_dcp")


def py(code):
    return ["chroot", ROOT, "python3", "-c", code]


def call(fn, *args):
    """python code timing format_utils.@fn(@args) alone"""
    return py("import time\nfrom torch.distributed.checkpoint.format_utils "
              "import %s as f\nt = time.monotonic()\nf(%s)\nprint('call', "
              "time.monotonic() - t)" % (fn, ", ".join(repr(a) for a in args)))


def best(argv, clean):
    runs = []
    for _ in range(2):
        clean()
        runs.append(timed(argv))
    return min(r[0] for r in runs), max(r[1] for r in runs)


def rm(*paths):
    def clean():
        for p in paths:
            if os.path.isdir(p):
                shutil.rmtree(p)
            elif os.path.exists(p):
                os.unlink(p)
    return clean


def warm(path):
    for dp, _, fs in os.walk(path) if os.path.isdir(path) else [("", 0, [path])]:
        for f in fs:
            with open(os.path.join(dp, f), "rb") as h:
                while h.read(1 << 20):
                    pass


def main():
    if not os.path.isdir(os.path.join(ROOT, "usr")):
        print("skip: no torch 2.x root at %s (sh scripts/torch2-root.sh)"
              % ROOT)
        return 0
    rep = os.path.join(BUILD, "ptrepack")
    os.makedirs(WORK, exist_ok=True)
    if not os.path.exists(os.path.join(WORK, "four", ".metadata")):
        rm(os.path.join(WORK, "src"), os.path.join(WORK, "four"))()
        subprocess.run(py(GEN % {"d": INNER}), check=True,
                       stderr=subprocess.DEVNULL)
    big, src = os.path.join(WORK, "big.pt"), os.path.join(WORK, "src")
    one, out = os.path.join(WORK, "one.pt"), os.path.join(WORK, "out")
    warm(big)
    warm(src)
    size = os.path.getsize(big)
    imp = timed(py(IMPORT))
    rows = [
        ("DCP -> one file", "ptrepack src one.pt",
         best([rep, "-q", src, one], rm(one)),
         "dcp_to_torch_save",
         best(call("dcp_to_torch_save", INNER + "/src", INNER + "/ref.pt"),
              rm(os.path.join(WORK, "ref.pt")))),
        ("one file -> DCP", "ptrepack big.pt out/",
         best([rep, "-q", big, out + "/"], rm(out)),
         "torch_save_to_dcp",
         best(call("torch_save_to_dcp", INNER + "/big.pt", INNER + "/ref"),
              rm(os.path.join(WORK, "ref")))),
    ]
    d = subprocess.run([os.path.join(BUILD, "ptdiff"), "-q", one,
                        os.path.join(WORK, "ref.pt")])
    n = subprocess.run(py(SAME % {"d": INNER}), capture_output=True,
                       text=True)
    print("# %.0f MB of tensors; torch import alone: %.2f s, %.0f MB peak"
          % (size / MB, imp[0], imp[1] / MB))
    print("| conversion | ptrepack | wall | peak RSS | torch | wall | "
          "peak RSS | wall ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for what, a, (aw, am), b, (bw, bm) in rows:
        print("| %s | `%s` | %.2f s | %.1f MB | `%s` | %.2f s | %.0f MB | "
              "%.2fx |" % (what, a, aw, am / MB, b, bw, bm / MB, aw / bw))
    print("# one.pt and dcp_to_torch_save's file: %s; out/ and "
          "torch_save_to_dcp's directory: %s"
          % ("equal" if d.returncode == 0 else "DIFFER",
             "the same %s leaves" % n.stdout.split()[-1] if n.returncode == 0
             else "DIFFER: " + (n.stderr.strip().splitlines() or ["?"])[-1]))
    ok = d.returncode == 0 and n.returncode == 0 and writeback()
    # the inputs stay for the next run, the outputs go (800 MB)
    rm(one, out, *(os.path.join(WORK, f) for f in
                   ("ref.pt", "ref", "a.pt", "b.pt")))()
    return 0 if ok else 1


PYEDIT = """
import time, torch
from torch.distributed.checkpoint.format_utils import (dcp_to_torch_save,
                                                       torch_save_to_dcp)
t = time.monotonic()
dcp_to_torch_save("%(d)s/four", "%(d)s/py.pt")
sd = torch.load("%(d)s/py.pt", weights_only=False)
sd["layers"][1]["w"].view(-1)[2] = 5.0
torch.save(sd, "%(d)s/py2.pt")
torch_save_to_dcp("%(d)s/py2.pt", "%(d)s/pyout")
print("call", time.monotonic() - t)
"""
CHECK = """
import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
dcp_to_torch_save("%(d)s/wb", "%(d)s/wb.pt")
sd = torch.load("%(d)s/wb.pt", weights_only=False)
print(sd["layers"][1]["w"].view(-1)[2].item())
"""


def writeback():
    """a 4-byte edit of four/ written back, against cp -r and Python"""
    four, wb = os.path.join(WORK, "four"), os.path.join(WORK, "wb")
    mnt = os.path.join(WORK, "mnt")
    rm(wb)()
    warm(four)
    t = time.monotonic()
    subprocess.run(["cp", "-r", four, wb], check=True)
    subprocess.run(["sync", "-f", wb], check=True)
    tcp = time.monotonic() - t
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M",
                          os.path.join(BUILD, "ptfs"), "-f", wb, mnt],
                         stderr=subprocess.PIPE, text=True)
    while not os.path.ismount(mnt):
        if p.poll() is not None:
            sys.exit("bench_dcp: ptfs %s failed" % wb)
        time.sleep(0.005)
    fd = os.open(os.path.join(mnt, "layers", "1", "w"), os.O_WRONLY)
    os.pwrite(fd, b"\x00\x00\xa0\x40", 8)	# 5.0f at element 2
    os.close(fd)
    t = time.monotonic()
    subprocess.run([os.path.join(BUILD, "ptfs"), "umount", mnt],
                   check=True, capture_output=True)
    twb = time.monotonic() - t
    peak = int(p.communicate()[1].strip().splitlines()[-1]) * 1024
    new = sorted(e.name for e in os.scandir(wb) if ".g1." in e.name)
    tpy, pym = timed(py(PYEDIT % {"d": INNER}))
    got = subprocess.run(py(CHECK % {"d": INNER}), capture_output=True,
                         text=True).stdout.split()
    ok = got[-1:] == ["5.0"] and len(new) == 1
    print("| write-back of a 4-byte edit (%d MB in 4 .distcp files) | "
          "`ptfs umount` | %.3f s | %.1f MB | `cp -r` + sync | %.3f s | | "
          "%.2fx |" % (du(four) / MB, twb, peak / MB, tcp, twb / tcp))
    print("| the same, the Python route | | | | dcp_to_torch_save, "
          "torch.load, edit, torch_save_to_dcp | %.2f s | %.0f MB | "
          "%.3fx |" % (tpy, pym / MB, twb / tpy))
    print("# written anew: %s and .metadata; the edit %s" % (
        " ".join(new) or "nothing", "read back by torch" if ok else
        "NOT READ BACK (%s)" % got[-1:]))
    rm(wb, *(os.path.join(WORK, f) for f in
             ("py.pt", "py2.pt", "pyout", "wb.pt")))()
    return ok


def du(path):
    return sum(os.path.getsize(os.path.join(path, f))
               for f in os.listdir(path))


if __name__ == "__main__":
    sys.exit(main())
