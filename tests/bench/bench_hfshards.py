#!/usr/bin/python3
"""bench_hfshards.py - a Hugging Face sharded folder of 100 shards and
50,000 tensors, read side (issue 17): ptfs against cp -r of the folder and
against the Python route, measured in the same run.

    /usr/bin/python3 tests/bench/bench_hfshards.py [BUILD_DIR] [WORKDIR]

Generates (once, cached in WORKDIR/hf100, default /tmp/ptfs-bench):
  st/   100 safetensors shards of 500 float32[1024] tensors each (written
        from the format's definition), model.safetensors.index.json
  bin/  the same as torch.save shards, pytorch_model.bin.index.json
  (205 MB of tensor data each)

For each folder:
1. ptls and ptverify -n (no CRCs): wall time and peak RSS.
2. mount + `ls -lR`: from starting ptfs -f until `ls -lR MNT > file` is
   done, best of 3, page cache warm; the daemon's VmHWM after it.
3. first read of one tensor right after a cold mount (`drop_caches`), and
   reading every tensor file once cold (a fresh mount, caches dropped)
   and once warm (the same mount again); the daemon's VmHWM after.
4. cp -r of the folder (cold, caches dropped) into WORKDIR.
5. the Python route (bin/ only, torch 1.13): torch.load of every shard
   into one dict (cold), then torch.save of every shard again (what an
   edit costs there).
6. into one file: `ptrepack FOLDER one.pt` (cold) against the Python
   route (bin/ only: torch.load of every shard, then torch.save of the
   union), each with its wall time and peak RSS, and the two files
   compared by ptdiff.
7. write-back after a 4-byte edit: a copy of the folder mounted, 4 bytes
   written into one tensor, `ptfs umount` timed (the shard holding it
   written anew, the index renamed: docs/design.md "Writing a sharded
   folder back"); the daemon's peak RSS over its whole life; the edit
   read back; then one key renamed and written back (its shard written
   anew from the tree, a new weight_map).  Against cp -r of the folder
   (warm, the same run) and the Python route's load + save of every shard
   (step 5).
Every mount is unmounted on exit.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import best, mounted, vm  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
WORK = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "/tmp/ptfs-bench")
HF = os.path.join(WORK, "hf100")
NSHARDS, PER, NUMEL = 100, 500, 1024
MB = 1e6


def key(s, k):
    return "model.layers.%d.mlp.w%d.weight" % (s, k)


def gen_st(d):
    os.makedirs(d)
    wm, total = {}, 0
    for s in range(NSHARDS):
        name = "model-%05d-of-%05d.safetensors" % (s + 1, NSHARDS)
        hdr, off = {"__metadata__": {"format": "pt"}}, 0
        for k in range(PER):
            hdr[key(s, k)] = {"dtype": "F32", "shape": [NUMEL],
                              "data_offsets": [off, off + 4 * NUMEL]}
            off += 4 * NUMEL
            wm[key(s, k)] = name
        text = json.dumps(hdr, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(d, name), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + os.urandom(off))
        total += off
    index(d, "model.safetensors.index.json", wm, total)


def gen_bin(d):
    import torch
    os.makedirs(d)
    wm, total = {}, 0
    for s in range(NSHARDS):
        name = "pytorch_model-%05d-of-%05d.bin" % (s + 1, NSHARDS)
        sd = {key(s, k): torch.randn(NUMEL) for k in range(PER)}
        torch.save(sd, os.path.join(d, name))
        for k in sd:
            wm[k] = name
        total += PER * NUMEL * 4
    index(d, "pytorch_model.bin.index.json", wm, total)


def index(d, name, wm, total):
    with open(os.path.join(d, name), "w") as f:
        f.write(json.dumps({"metadata": {"total_size": total},
                            "weight_map": wm}, indent=2, sort_keys=True) + "\n")


def drop_caches():
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def timed(cmd, **kw):
    """wall seconds and peak RSS (KiB) of @cmd, via /usr/bin/time"""
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, **kw)
    return time.perf_counter() - t, int(r.stderr.strip().splitlines()[-1])


class Mount:
    def __init__(self, folder, mnt):
        self.folder, self.mnt = folder, mnt
        os.makedirs(mnt, exist_ok=True)
        self.p = subprocess.Popen([os.path.join(BUILD, "ptfs"), "-f",
                                   folder, mnt], stderr=subprocess.DEVNULL)
        while not mounted(mnt):
            if self.p.poll() is not None:
                raise SystemExit("ptfs %s failed" % folder)
            time.sleep(0.002)

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mnt])
        self.p.wait()


def writeback(name, folder):
    """step 7: a 4-byte edit written back, against cp -r (warm)"""
    mnt = os.path.join(WORK, "hfmnt")
    dst = os.path.join(WORK, "hfedit")
    shutil.rmtree(dst, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run(["cp", "-r", folder, dst])
    tcp = time.perf_counter() - t
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M",
                          os.path.join(BUILD, "ptfs"), "-f", dst, mnt],
                         stderr=subprocess.PIPE, text=True)
    while not mounted(mnt):
        if p.poll() is not None:
            raise SystemExit("ptfs %s failed" % dst)
        time.sleep(0.002)
    fd = os.open(os.path.join(mnt, key(57, 333)), os.O_WRONLY)
    os.pwrite(fd, b"\xde\xad\xbe\xef", 8)
    os.close(fd)
    t = time.perf_counter()
    r = subprocess.run([os.path.join(BUILD, "ptfs"), "umount", mnt],
                       capture_output=True, text=True)
    twb = time.perf_counter() - t
    peak = int(p.communicate()[1].strip().splitlines()[-1])
    m = Mount(dst, mnt)
    with open(os.path.join(mnt, key(57, 333)), "rb") as f:
        ok = f.read()[8:12] == b"\xde\xad\xbe\xef"
    m.close()
    new = [e.name for e in os.scandir(dst) if ".g1." in e.name]
    print("write-back, 4-byte edit  %7.3f s (%s); cp -r warm %6.3f s: "
          "%.3fx; daemon %.1f MB peak; edit %s; new: %s" % (
              twb, r.stdout.strip().split(";")[-1].strip(), tcp, twb / tcp,
              peak / 1e3, "read back" if ok else "NOT FOUND",
              " ".join(new)))
    # a key renamed: its shard's pickle or header and the index anew
    m = Mount(dst, mnt)
    os.rename(os.path.join(mnt, key(12, 7)),
              os.path.join(mnt, key(12, 7) + ".renamed"))
    t = time.perf_counter()
    r = subprocess.run([os.path.join(BUILD, "ptfs"), "umount", mnt],
                       capture_output=True, text=True)
    trn = time.perf_counter() - t
    m.p.wait()
    with open(os.path.join(dst, [e.name for e in os.scandir(dst)
                                 if ".index" in e.name][0])) as f:
        ok = (key(12, 7) + ".renamed") in json.load(f)["weight_map"]
    print("write-back, 1 key renamed %6.3f s (%s); %.3fx cp -r; %s" % (
        trn, r.stdout.strip().split(";")[-1].strip(), trn / tcp,
        "in the index" if ok else "NOT IN THE INDEX"))
    shutil.rmtree(dst)


def read_all(mnt):
    """every tensor file once, 1 MiB reads, in a child (its own cache)"""
    code = ("import os,sys\nm=sys.argv[1]\nn=0\nfor e in os.scandir(m):\n"
            " f=os.open(e.path,os.O_RDONLY)\n while True:\n"
            "  b=os.read(f,1<<20)\n  n+=len(b)\n  if not b: break\n"
            " os.close(f)\nprint(n)")
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, mnt],
                         capture_output=True, text=True).stdout
    return time.perf_counter() - t, int(out)


def bench(name, folder):
    mnt = os.path.join(WORK, "hfmnt")
    print("\n== %s: %d shards, %d tensors, %.0f MB" % (
        name, NSHARDS, NSHARDS * PER,
        sum(e.stat().st_size for e in os.scandir(folder)) / MB))
    t, rss = timed([os.path.join(BUILD, "ptls"), folder])
    print("ptls                      %7.2f s   %6.1f MB peak" % (t, rss / 1e3))
    t, rss = timed([os.path.join(BUILD, "ptverify"), "-n", folder])
    print("ptverify -n               %7.2f s   %6.1f MB peak" % (t, rss / 1e3))
    hwm = 0

    def mount_ls():
        nonlocal hwm
        m = Mount(folder, mnt)
        with open(os.path.join(WORK, "ls.out"), "w") as f:
            subprocess.run(["ls", "-lR", mnt], stdout=f)
        hwm = vm(m.p.pid, "VmHWM")
        m.close()
    print("mount + ls -lR (best of 3) %6.2f s   daemon %6.1f MB after" % (
        best(mount_ls, 3), hwm / MB))
    cold = drop_caches()
    m = Mount(folder, mnt)
    t = time.perf_counter()
    with open(os.path.join(mnt, key(57, 333)), "rb") as f:
        f.read()
    print("first read, one tensor     %6.1f ms%s" % (
        (time.perf_counter() - t) * 1e3, "" if cold else " (caches not dropped)"))
    m.close()
    drop_caches()
    m = Mount(folder, mnt)
    tc, n = read_all(mnt)
    tw, _ = read_all(mnt)
    print("read every tensor: cold %6.2f s (%.0f MB/s), warm %6.2f s; "
          "daemon %.1f MB after" % (tc, n / MB / tc, tw,
                                    vm(m.p.pid, "VmHWM") / MB))
    m.close()
    dst = os.path.join(WORK, "hfcopy")
    shutil.rmtree(dst, ignore_errors=True)
    drop_caches()
    t = time.perf_counter()
    subprocess.run(["cp", "-r", folder, dst])
    print("cp -r of the folder (cold) %6.2f s" % (time.perf_counter() - t))
    shutil.rmtree(dst)
    if name == "bin":
        drop_caches()
        code = ("import torch,os,sys,time\nd=sys.argv[1]\nsh=sorted(x for x in"
                " os.listdir(d) if x.endswith('.bin'))\nt=time.time()\nsd={}\n"
                "parts=[torch.load(os.path.join(d,s)) for s in sh]\n"
                "for p in parts: sd.update(p)\nt1=time.time()\n"
                "o=sys.argv[2]\nos.makedirs(o,exist_ok=True)\n"
                "for s,p in zip(sh,parts): torch.save(p,os.path.join(o,s))\n"
                "print(t1-t,time.time()-t1,len(sd))")
        out = subprocess.run(["/usr/bin/python3", "-c", code, folder, dst],
                             capture_output=True, text=True).stdout.split()
        shutil.rmtree(dst, ignore_errors=True)
        print("Python: torch.load of every shard %6.2f s (%s keys), "
              "torch.save of every shard %6.2f s" % (float(out[0]), out[2],
                                                     float(out[1])))
    one = os.path.join(WORK, "one.pt")
    drop_caches()
    t, rss = timed([os.path.join(BUILD, "ptrepack"), folder, one])
    print("into one .pt: ptrepack (cold) %6.2f s   %6.1f MB peak" % (
        t, rss / 1e3))
    if name == "bin":
        ref = os.path.join(WORK, "one-torch.pt")
        code = ("import torch,os,sys\nd=sys.argv[1]\nsd={}\n"
                "for s in sorted(x for x in os.listdir(d) "
                "if x.endswith('.bin')):\n"
                " sd.update(torch.load(os.path.join(d,s)))\n"
                "torch.save(sd,sys.argv[2])")
        drop_caches()
        t, rss = timed(["/usr/bin/python3", "-c", code, folder, ref])
        same = subprocess.run([os.path.join(BUILD, "ptdiff"), "-q", one,
                               ref]).returncode == 0
        print("into one .pt: torch.load + torch.save %6.2f s   %6.1f MB "
              "peak; ptdiff: %s" % (t, rss / 1e3,
                                    "equal" if same else "DIFFERENT"))
        os.unlink(ref)
    os.unlink(one)


def main():
    os.makedirs(HF, exist_ok=True)
    for name, gen in (("st", gen_st), ("bin", gen_bin)):
        if not os.path.isdir(os.path.join(HF, name)):
            gen(os.path.join(HF, name))
    try:
        for name in ("st", "bin"):
            bench(name, os.path.join(HF, name))
            writeback(name, os.path.join(HF, name))
    finally:
        mnt = os.path.join(WORK, "hfmnt")
        if mounted(mnt):
            subprocess.run(["fusermount3", "-u", mnt])


if __name__ == "__main__":
    main()
