#!/usr/bin/python3
"""bench_gguf.py - a GGUF file from a ~2 GB Hugging Face safetensors
folder: `ptrepack --gguf-type T FOLDER/ OUT.gguf` against gguf-py's
GGUFWriter fed the same tensors (what convert_hf_to_gguf.py does once
names are mapped), in the same run, on the same folder.

    /usr/bin/python3 tests/bench/bench_gguf.py [BUILD] [WORKDIR]

Generates (once, cached in WORKDIR, default /tmp/ptfs-bench) llama_2g/:
a llama-shaped state dict (8 layers of hidden 2048, MLP 5632, a 32000
vocabulary: 536 M float32 values, 2.1 GB) of normal random values, cut
into safetensors shards by ptrepack --max-shard-size 1GB, with a
config.json ("model_type": "llama").  For T = f16 and q8_0, with a warm
page cache, best of 2 wall times and the peak RSS (GNU time's %M) of:

  ptrepack    ptrepack --gguf-type T llama_2g/ OUT.gguf
  gguf-py     in the torch 2.x root: safetensors' safe_open (numpy),
              convert_hf_to_gguf.py's rule of which tensors become T
              (2-d .weight not a norm; the rest F32), gguf.quants.
              quantize, GGUFWriter(use_temp_file=False) and its three
              writes; the whole command, interpreter and imports included

The two outputs must be equal byte for byte (cmp).  Goals
(docs/benchmarks.md): ptrepack at most 64 MiB of RSS, and at most 0.5x
gguf-py's time.  Needs Debian's torch 1.13 (/usr/bin/python3) to make
the folder and the torch 2.x root (scripts/torch2-root.sh) with gguf-py.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import TORCH2_ROOT, best, timed_call  # noqa: E402

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
WORK = sys.argv[2] if len(sys.argv) > 2 else "/tmp/ptfs-bench"
RUNS = 2
LAYERS, HIDDEN, MLP, VOCAB = 8, 2048, 5632, 32000

GEN = """
import sys, torch
torch.manual_seed(0)
h, m, v, n = %d, %d, %d, %d
sd = {"model.embed_tokens.weight": torch.randn(v, h)}
for i in range(n):
    p = "model.layers.%%d." %% i
    for k in ("q_proj", "k_proj", "v_proj", "o_proj"):
        sd[p + "self_attn." + k + ".weight"] = torch.randn(h, h)
    sd[p + "mlp.gate_proj.weight"] = torch.randn(m, h)
    sd[p + "mlp.up_proj.weight"] = torch.randn(m, h)
    sd[p + "mlp.down_proj.weight"] = torch.randn(h, m)
    sd[p + "input_layernorm.weight"] = torch.randn(h)
    sd[p + "post_attention_layernorm.weight"] = torch.randn(h)
sd["model.norm.weight"] = torch.randn(h)
sd["lm_head.weight"] = torch.randn(v, h)
torch.save(sd, sys.argv[1])
""" % (HIDDEN, MLP, VOCAB, LAYERS)

# gguf-py fed the same tensors, by convert_hf_to_gguf.py's rule
GGUFPY = r"""
import json, os, sys, time
import numpy as np
import gguf
from safetensors import safe_open
t0 = time.perf_counter()
folder, out, qt, names = sys.argv[1:5]
to = {"f16": gguf.GGMLQuantizationType.F16,
      "q8_0": gguf.GGMLQuantizationType.Q8_0}[qt]
index = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
# the order ptls lists the folder in, which ptrepack writes
order = [(k, index["weight_map"][k]) for k in open(names).read().split()]
w = gguf.GGUFWriter(out, "llama")
w.add_uint32("general.quantization_version", 2) if qt == "q8_0" else None
files = {}
for name, f in order:
    if f not in files:
        files[f] = safe_open(os.path.join(folder, f), "np")
    x = files[f].get_tensor(name).astype(np.float32)
    if x.ndim <= 1 or name.endswith("_norm.weight") or \
            not name.endswith(".weight"):
        w.add_tensor(name, x)
        continue
    try:
        q = gguf.quants.quantize(x, to)
    except gguf.quants.QuantError:
        to2 = gguf.GGMLQuantizationType.F16
        q = gguf.quants.quantize(x, to2)
        w.add_tensor(name, q, raw_dtype=to2)
        continue
    w.add_tensor(name, q, raw_dtype=to)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print("call %.3f" % (time.perf_counter() - t0))
"""


def sh(argv):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode:
        sys.exit("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                      r.stderr.strip()[-400:]))
    return r.stdout


def folder():
    d = os.path.join(WORK, "llama_2g")
    if os.path.exists(os.path.join(d, "model.safetensors.index.json")):
        return d
    pt = os.path.join(WORK, "llama_2g.pt")
    sh(["/usr/bin/python3", "-c", GEN, pt])
    shutil.rmtree(d, ignore_errors=True)
    sh([os.path.join(BUILD, "ptrepack"), "--max-shard-size", "1GB", pt,
        d + "/"])
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "architectures":
                   ["LlamaForCausalLM"]}, f)
    os.unlink(pt)
    return d


def main():
    if not os.path.exists(os.path.join(TORCH2_ROOT, "usr/lib/python3/"
                                       "dist-packages/gguf")):
        sys.exit("bench_gguf.py: no gguf-py in %s (sh scripts/torch2-root.sh)"
                 % TORCH2_ROOT)
    os.makedirs(WORK, exist_ok=True)
    src = folder()
    inner = os.path.join(TORCH2_ROOT, "tmp", "ptfs-bench-gguf")
    os.makedirs(inner, exist_ok=True)
    # gguf-py sees the folder through a bind of WORK into the root
    bound = os.path.join(inner, "work")
    os.makedirs(bound, exist_ok=True)
    sh(["mount", "--bind", WORK, bound])
    try:
        with open(os.path.join(inner, "ggufpy.py"), "w") as f:
            f.write(GGUFPY)
        ls = json.loads(sh([os.path.join(BUILD, "ptls"), "--json", src]))
        with open(os.path.join(inner, "names"), "w") as f:
            f.write("\n".join(e["path"] for e in ls["entries"]) + "\n")
        size = sum(os.path.getsize(os.path.join(src, n))
                   for n in os.listdir(src) if n.endswith(".safetensors"))
        for n in os.listdir(src):	# warm the page cache
            with open(os.path.join(src, n), "rb") as f:
                while f.read(1 << 24):
                    pass
        print("a GGUF from %s (%.2f GB of float32 safetensors shards), "
              "warm cache, best of %d" % (os.path.basename(src), size / 1e9,
                                           RUNS))
        print("%-6s %-10s %8s %9s %12s %9s" % ("type", "", "s", "MB/s",
                                              "peak RSS", "ratio"))
        for t in ("f16", "q8_0"):
            ours = os.path.join(WORK, "ours_%s.gguf" % t)
            theirs = os.path.join(WORK, "ggufpy_%s.gguf" % t)
            res = {}
            for who, argv in (
                    ("ptrepack", [os.path.join(BUILD, "ptrepack"),
                                  "--gguf-type", t, src + "/", ours]),
                    ("gguf-py", ["chroot", TORCH2_ROOT, "python3",
                                 "/tmp/ptfs-bench-gguf/ggufpy.py",
                                 "/tmp/ptfs-bench-gguf/work/llama_2g",
                                 "/tmp/ptfs-bench-gguf/work/ggufpy_%s.gguf"
                                 % t, t, "/tmp/ptfs-bench-gguf/names"])):
                runs = [timed_call(argv, who) for _ in range(RUNS)]
                res[who] = (min(r[0] for r in runs), max(r[1] for r in runs))
            same = subprocess.run(["cmp", ours, theirs]).returncode == 0
            for who in ("ptrepack", "gguf-py"):
                s, rss = res[who]
                print("%-6s %-10s %8.2f %9.0f %9.1f MiB %8.2fx" % (
                    t, who, s, size / 1e6 / s, rss / 2**20,
                    s / res["gguf-py"][0]))
            print("%-6s outputs %s" % (t, "equal byte for byte" if same else
                                       "DIFFER"))
            for p in (ours, theirs):
                os.unlink(p)
            if not same:
                sys.exit(1)
    finally:
        subprocess.run(["umount", bound])


if __name__ == "__main__":
    main()
