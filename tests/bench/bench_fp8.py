#!/usr/bin/python3
"""bench_fp8.py - `ptrepack --dequant bf16` of a ~2 GB block-FP8
safetensors checkpoint (DeepSeek-V3's layout) against cp of the same file
and against the torch CPU reference, in the same run on the same file.

    /usr/bin/python3 tests/bench/bench_fp8.py [PTREPACK] [WORKDIR]

Generates (once, cached in WORKDIR, default the torch 2.x root's
/tmp/ptfs-bench-fp8, which that torch must see) fp8_block.safetensors:
64 weights of 4096 x 7680 float8_e4m3fn (random codes, NaN ones
included) with their float32 weight_scale_inv (32, 60), 2.0 GB, written
by numpy alone.  With a warm page cache (the file read once first):

  cp         cp IN OUT (best of 3)
  cp+sync    cp IN OUT, then sync of the copy: cp as durable as ptrepack's
             output, which it fsyncs before its rename
  cp 2x      cp of a file as large as the output (IN twice over, made
             for it and removed), then sync of the copy: what writing
             that many bytes durably through the page cache costs here
  dd 2x      the same file by dd oflag=direct bs=4M conv=fsync: what
             writing that many bytes durably costs the disk itself
  ptrepack   ptrepack --dequant bf16 IN OUT.safetensors (best of 3)
  torch      the reference in torch 2.x on the CPU, once: load_file, per
             weight w.float() * the scale over its 128x128 blocks,
             .to(bfloat16), save_file (the call timed inside python)

and throughput in input bytes per second, its ratio to cp's, and peak RSS
(GNU time's %M).  Goals: ptrepack at least 0.5x cp's throughput, at most
64 MiB.  bfloat16 doubles the bytes, so "dd 2x" is the floor for any
tool on the same disk.  The two bfloat16 files must be equal byte for byte (ptrepack
writes save_file's layout).  The machine is shared: run it idle.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import TORCH2_ROOT, timed_call  # noqa: E402

PTREPACK = sys.argv[1] if len(sys.argv) > 1 else "build/ptrepack"
WORK = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    TORCH2_ROOT, "tmp/ptfs-bench-fp8")
ROWS, COLS, N = 4096, 7680, 64
RUNS = 3

TORCH = """
import sys, time, torch
from safetensors.torch import load_file, save_file
t = time.perf_counter()
sd = load_file(sys.argv[1])
out = {}
for k, v in sd.items():
    if k.endswith("_scale_inv"):
        continue
    s = sd.get(k + "_scale_inv")
    if s is not None:
        e = s.repeat_interleave(128, 0)[:v.shape[0]]
        e = e.repeat_interleave(128, 1)[:, :v.shape[1]]
        v = (v.float() * e).to(torch.bfloat16)
    out[k] = v
save_file(out, sys.argv[2], metadata={"format": "pt"})
print("call", time.perf_counter() - t)
"""


def generate(path):
    """the checkpoint, as safetensors lays one out, from numpy"""
    import numpy as np
    rng = np.random.default_rng(0)
    br, bc = -(-ROWS // 128), -(-COLS // 128)
    names = []
    for i in range(N):
        names.append(("model.layers.%d.mlp.up_proj.weight" % i, "F8_E4M3",
                      [ROWS, COLS], ROWS * COLS))
        names.append(("model.layers.%d.mlp.up_proj.weight_scale_inv" % i,
                      "F32", [br, bc], br * bc * 4))
    # save_file's order: dtype widest first, then name
    names.sort(key=lambda x: (-(4 if x[1] == "F32" else 1), x[0]))
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape, size in names:
        hdr[name] = {"dtype": dt, "shape": shape,
                     "data_offsets": [off, off + size]}
        off += size
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for name, dt, shape, size in names:
            if dt == "F32":
                f.write((rng.random(size // 4, dtype=np.float32) *
                         1e-2).tobytes())
            else:
                f.write(rng.integers(0, 256, size, dtype=np.uint8)
                        .tobytes())
    os.rename(path + ".tmp", path)


def inner(path):
    return "/" + os.path.relpath(path, TORCH2_ROOT)


def main():
    os.makedirs(WORK, exist_ok=True)
    src = os.path.join(WORK, "fp8_block.safetensors")
    if not os.path.exists(src):
        generate(src)
    ours, theirs, copy = (os.path.join(WORK, n) for n in (
        "ours.safetensors", "torch.safetensors", "copy.safetensors"))
    with open(src, "rb") as f:          # warm the page cache
        while f.read(1 << 24):
            pass
    size = os.path.getsize(src)
    double = os.path.join(WORK, "double.bin")
    with open(double, "wb") as f:
        for _ in range(2):
            with open(src, "rb") as g:
                while True:
                    b = g.read(1 << 24)
                    if not b:
                        break
                    f.write(b)
    subprocess.run(["sync"])
    res = {}
    for name, argv in (("cp", ["cp", src, copy]),
                       ("cp+sync", ["sh", "-c", 'cp "$1" "$2" && sync "$2"',
                                    "sh", src, copy]),
                       ("dd 2x", ["dd", "if=" + double, "of=" + copy,
                                  "bs=4M", "oflag=direct", "conv=fsync",
                                  "status=none"]),
                       ("cp 2x", ["sh", "-c", 'cp "$1" "$2" && sync "$2"',
                                  "sh", double, copy]),
                       ("ptrepack", [PTREPACK, "--dequant", "bf16", src,
                                     ours])):
        runs = []
        for _ in range(RUNS):
            subprocess.run(["sync"])    # no run pays for another's writes
            runs.append(timed_call(argv, name))
        res[name] = (min(r[0] for r in runs), max(r[1] for r in runs))
    os.unlink(copy)
    os.unlink(double)
    res["torch"] = timed_call(["chroot", TORCH2_ROOT, "python3", "-c", TORCH,
                               inner(src), inner(theirs)], "torch")
    same = subprocess.run(["cmp", "-s", ours, theirs]).returncode == 0
    print("dequant of %s (%.2f GB, %d weights 4096x7680 float8_e4m3fn, "
          "128x128 blocks) to bfloat16, warm cache; cp and ptrepack best "
          "of %d, torch once" % (os.path.basename(src), size / 1e9, N, RUNS))
    print("%-10s %8s %9s %10s %12s" % ("", "s", "MB/s", "x cp", "peak RSS"))
    for name in ("cp", "cp+sync", "cp 2x", "dd 2x", "ptrepack", "torch"):
        t, rss = res[name]
        print("%-10s %8.2f %9.0f %10.2f %9.1f MiB" % (
            name, t, size / 1e6 / t, res["cp"][0] / t, rss / 2**20))
    print("outputs %s" % ("equal byte for byte" if same else "DIFFER"))
    for p in (ours, theirs):
        os.unlink(p)
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
