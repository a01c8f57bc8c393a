#!/usr/bin/python3
"""bench_conv.py - conversions at disk speed (issue 43): ptrepack of many
files into one and ptrepack --dtype bf16, each against cp of the same
input bytes, in one run.

    /usr/bin/python3 tests/bench/bench_conv.py [BUILD_DIR] [WORKDIR]

Generates once, cached in WORKDIR (default /tmp/ptfs-bench/conv), one
state dict of 32 float32 weights [2048, 4096] and their float32 biases
[4096] (1.07 GB, normal random values, so every element is really
rounded) in five layouts:

  f32.pt           torch.save (torch 1.13)
  f32.safetensors  save_file's layout, written from numpy
  hf_st/           a Hugging Face folder: 4 safetensors shards + index
  hf_bin/          the same as 4 torch.save shards (pytorch_model.bin)
  dcp/             dcp.save of it (torch 2.x's root, scripts/torch2-root.sh;
                   made in the root's /tmp, then moved here)

Then, page cache warm (every input read once first), a sync before each
run so that no run pays for another's writes, best of RUNS (3), each
row's contenders run in turn (cp, cp+sync, ptrepack, cp, ...) so that a
load that comes and goes meets them alike:

  cp         cp -r IN OUT: the baseline, per row
  cp+sync    the same, then sync of every copied file: as durable as
             ptrepack's output, which it fsyncs before its rename
  dd direct  f32.pt by dd oflag=direct bs=4M conv=fsync, once beside
             cp: what writing that many bytes durably costs the disk
             itself (the floor of any output as large as its input)
  ptrepack   DCP -> one .pt / .safetensors, HF folder (both) -> one .pt
             / .safetensors, --dtype bf16 .pt -> .pt and safetensors ->
             safetensors

With PT_BENCH_BEFORE=BUILD_DIR, that build's ptrepack runs every row
too, interleaved with this one's (a before/after in one run).  For each,
seconds, MB/s of input, the ratio to cp's and to cp+sync's
throughput on the same input, and peak RSS (GNU time's %M).  Goals:
ptrepack at least 0.5x cp, and at most 64 MiB where the writers stream.
Each output is checked once against its input (ptdiff -q; for --dtype,
only that it opens: ptls).  The machine is shared: run it idle.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import TORCH2_ROOT, timed_call  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
WORK = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else
                       "/tmp/ptfs-bench/conv")
NL, ROWS, COLS, NSHARD = 32, 2048, 4096, 4
RUNS = int(os.environ.get("PT_BENCH_RUNS", "3"))
MB = 1e6


def state():
    """(key, numpy array) in order: the one state dict of every layout"""
    import numpy as np
    rng = np.random.default_rng(43)
    for i in range(NL):
        p = "model.layers.%d.mlp." % i
        yield p + "weight", rng.standard_normal((ROWS, COLS),
                                                dtype=np.float32)
        yield p + "bias", rng.standard_normal(COLS, dtype=np.float32)


def st_write(path, items):
    """@items (key, array) as save_file lays them out (sorted by key:
    all one dtype)"""
    items = sorted(items, key=lambda kv: kv[0])
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for k, a in items:
        hdr[k] = {"dtype": "F32", "shape": list(a.shape),
                  "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for _, a in items:
            f.write(a.tobytes())
    os.rename(path + ".tmp", path)


def shards():
    """the state dict cut into NSHARD runs of whole layers"""
    items = list(state())
    per = -(-len(items) // NSHARD)
    return [items[i:i + per] for i in range(0, len(items), per)]


def index(d, name, wm, total):
    with open(os.path.join(d, name), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f,
                  indent=2, sort_keys=True)


def gen_hf(d, ext):
    import torch
    tmp = d + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    wm, total, parts = {}, 0, shards()
    for s, part in enumerate(parts):
        if ext == "safetensors":
            name = "model-%05d-of-%05d.safetensors" % (s + 1, len(parts))
            st_write(os.path.join(tmp, name), part)
        else:
            name = "pytorch_model-%05d-of-%05d.bin" % (s + 1, len(parts))
            torch.save({k: torch.from_numpy(a) for k, a in part},
                       os.path.join(tmp, name))
        for k, a in part:
            wm[k] = name
            total += a.nbytes
    index(tmp, "model.safetensors.index.json" if ext == "safetensors" else
          "pytorch_model.bin.index.json", wm, total)
    os.rename(tmp, d)


DCP = """
import torch, torch.distributed.checkpoint as dcp
sd = torch.load("%(pt)s", weights_only=True)
dcp.save(sd, storage_writer=dcp.FileSystemWriter("%(d)s"))
"""


def gen_dcp(d, pt):
    """dcp.save of f32.pt's state dict, in torch 2.x's root (hard links:
    the root and WORK are one file system, else a copy)"""
    if not os.path.isdir(os.path.join(TORCH2_ROOT, "usr")):
        return False
    inner = "/tmp/ptfs-bench-conv"
    root_work = os.path.join(TORCH2_ROOT, inner.lstrip("/"))
    shutil.rmtree(root_work, ignore_errors=True)
    os.makedirs(root_work)
    try:
        os.link(pt, os.path.join(root_work, "f32.pt"))
    except OSError:
        shutil.copy(pt, os.path.join(root_work, "f32.pt"))
    subprocess.run(["chroot", TORCH2_ROOT, "python3", "-c", DCP % {
        "pt": inner + "/f32.pt", "d": inner + "/dcp"}], check=True,
        stderr=subprocess.DEVNULL)
    shutil.move(os.path.join(root_work, "dcp"), d)
    shutil.rmtree(root_work)
    return True


def generate():
    os.makedirs(WORK, exist_ok=True)
    pt = os.path.join(WORK, "f32.pt")
    if not os.path.exists(pt):
        import torch
        torch.save({k: torch.from_numpy(a) for k, a in state()}, pt + ".tmp")
        os.rename(pt + ".tmp", pt)
    st = os.path.join(WORK, "f32.safetensors")
    if not os.path.exists(st):
        st_write(st, list(state()))
    for d, ext in (("hf_st", "safetensors"), ("hf_bin", "bin")):
        if not os.path.isdir(os.path.join(WORK, d)):
            gen_hf(os.path.join(WORK, d), ext)
    dcp = os.path.join(WORK, "dcp")
    have_dcp = os.path.isdir(dcp) or gen_dcp(dcp, pt)
    return have_dcp


def files(path):
    if not os.path.isdir(path):
        return [path]
    return [os.path.join(dp, f) for dp, _, fs in os.walk(path) for f in fs]


def nbytes(path):
    return sum(os.path.getsize(f) for f in files(path))


def warm(path):
    for f in files(path):
        with open(f, "rb") as h:
            while h.read(1 << 24):
                pass


def rm(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)


def interleaved(contenders, out):
    """{name: (best seconds, peak RSS)} of @contenders [(name, argv)], run
    in turn RUNS times (a load that comes and goes hits them alike)"""
    runs = {name: [] for name, _ in contenders}
    for _ in range(RUNS):
        for name, argv in contenders:
            rm(out)
            subprocess.run(["sync"])    # no run pays for another's writes
            runs[name].append(timed_call(argv, "bench_conv"))
    rm(out)
    return {n: (min(r[0] for r in v), max(r[1] for r in v))
            for n, v in runs.items()}


def cp_argv(src, out, sync):
    if not sync:
        return ["cp", "-r", src, out]
    return ["sh", "-c", 'cp -r "$1" "$2" && find "$2" -type f -exec sync {} +',
            "sh", src, out]


def main():
    rep, ptdiff, ptls = (os.path.join(BUILD, n) for n in
                         ("ptrepack", "ptdiff", "ptls"))
    old = os.environ.get("PT_BENCH_BEFORE")
    have_dcp = generate()
    out = os.path.join(WORK, "out")
    inputs = ["dcp"] if have_dcp else []
    inputs += ["hf_st", "hf_bin", "f32.pt", "f32.safetensors"]
    rows = []       # (what, input, output extension, options, ptdiff it)
    for src in inputs[:-2]:
        for ext in ("pt", "safetensors"):
            rows.append(("%s/ -> one .%s" % (src, ext), src, ext, ["-q"],
                         True))
    rows.append(("--dtype bf16 .pt -> .pt", "f32.pt", "pt",
                 ["-q", "--dtype", "bfloat16"], False))
    rows.append(("--dtype bf16 .safetensors -> .safetensors",
                 "f32.safetensors", "safetensors",
                 ["-q", "--dtype", "bfloat16"], False))
    for src in inputs:
        warm(os.path.join(WORK, src))
    pt = os.path.join(WORK, "f32.pt")
    floor = interleaved([("cp", cp_argv(pt, out, False)),
                         ("dd", ["dd", "if=" + pt, "of=" + out, "bs=4M",
                                 "oflag=direct", "conv=fsync",
                                 "status=none"])], out)
    res, bad = [], []
    for what, src, ext, opts, same in rows:
        path, o = os.path.join(WORK, src), out + "." + ext
        who = [("cp", cp_argv(path, o, False)),
               ("cp+sync", cp_argv(path, o, True))]
        if old:
            who.append(("before", [os.path.join(old, "ptrepack")] + opts +
                        [path, o]))
        who.append(("ptrepack", [rep] + opts + [path, o]))
        res.append((what, nbytes(path), interleaved(who, o)))
        subprocess.run([rep] + opts + [path, o], check=True)
        chk = [ptdiff, "-q", path, o] if same else [ptls, o]
        if subprocess.run(chk, stdout=subprocess.DEVNULL).returncode:
            bad.append(what)
        rm(o)
    print("# %d float32 [%d, %d] weights and [%d] biases, warm cache, "
          "best of %d, each row's contenders in turn; MB/s of input"
          % (NL, ROWS, COLS, COLS, RUNS))
    print("# the disk: dd oflag=direct conv=fsync of f32.pt %.2f s "
          "(%.2fx cp's %.2f s)" % (floor["dd"][0], floor["cp"][0] /
                                   floor["dd"][0], floor["cp"][0]))
    print("| conversion | MB in | cp | cp+sync |%s ptrepack | MB/s | x cp "
          "| x cp+sync | peak RSS |" % (" before (x cp) |" if old else ""))
    print("| --- | ---: | ---: | ---: |%s ---: | ---: | ---: | ---: | ---: |"
          % (" ---: |" if old else ""))
    for what, n, r in res:
        cp, cs, (t, m) = r["cp"][0], r["cp+sync"][0], r["ptrepack"]
        print("| %s | %.0f | %.2f s | %.2f s |%s %.2f s | %.0f | %.2f | "
              "%.2f | %.1f MiB |" % (
                  what, n / MB, cp, cs,
                  " %.2f s (%.2f) |" % (r["before"][0], cp / r["before"][0])
                  if old else "", t, n / MB / t, cp / t, cs / t,
                  m / 2**20))
    if not have_dcp:
        print("# no DCP rows: no torch 2.x root at %s" % TORCH2_ROOT)
    print("# outputs: %s" % ("checked" if not bad else
                             "DIFFER: " + ", ".join(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
