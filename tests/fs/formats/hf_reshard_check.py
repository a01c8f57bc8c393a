"""hf_reshard_check.py - Hugging Face folders written by ptrepack
--max-shard-size, for tests/fs/formats/hf_reshard.sh (torch 2.x).

  gen DIR SIZE...   a tiny LlamaForCausalLM with tied embeddings:
                    DIR/sd.pt (torch.save of its state_dict()), and for
                    each SIZE DIR/ref-SIZE/, what save_pretrained(...,
                    max_shard_size=SIZE) writes; without transformers a
                    module of the same kind (tied) and no ref-SIZE/
  same REF OUT      OUT's files are exactly REF's weight files (shards and
                    index), byte for byte
  load OUT SD       transformers' from_pretrained(OUT) gives SD's tensors
                    (the tied lm_head.weight included)
  union OUT EXP     the index-driven union: the index's total_size and
                    weight_map against safe_open() of every shard (each
                    holds what the index maps to it, nothing else), and
                    the union is EXP's tensors (torch.load) but ties, each
                    left out only where it equals a name kept
Prints "ok<TAB>detail" and exits 0, or a line saying what differs, exit 1.
"""
import json
import os
import sys

import torch


def fail(msg):
    print(msg)
    sys.exit(1)


def tied_module():
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(1000, 64)
            self.layers = torch.nn.ModuleList(torch.nn.Linear(64, 64)
                                              for _ in range(4))
            self.lm_head = torch.nn.Linear(64, 1000, bias=False)
            self.lm_head.weight = self.embed.weight
    return Tiny()


def gen(out, sizes):
    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        import transformers
    except ImportError:
        torch.save(tied_module().state_dict(), out + "/sd.pt")
        print("ok\tno transformers in this torch's root: the union checks")
        return
    cfg = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, tie_word_embeddings=True)
    m = LlamaForCausalLM(cfg)
    torch.save(m.state_dict(), out + "/sd.pt")
    for s in sizes:
        m.save_pretrained(out + "/ref-" + s, max_shard_size=s)
    print("ok\ttransformers", transformers.__version__, "save_pretrained")


def weights(d):
    return sorted(f for f in os.listdir(d) if f.startswith("model"))


def same(ref, out):
    a, b = weights(ref), sorted(os.listdir(out))
    if a != b:
        fail(f"files: {b}, save_pretrained wrote {a}")
    for f in a:
        with open(os.path.join(ref, f), "rb") as x, \
                open(os.path.join(out, f), "rb") as y:
            if x.read() != y.read():
                fail(f"{f} differs from save_pretrained's")
    print(f"ok\t{len(a)} files byte-identical to save_pretrained's")


def equal(a, b):
    return (a.dtype == b.dtype and a.shape == b.shape and
            a.contiguous().view(torch.uint8).reshape(-1).tolist() ==
            b.contiguous().view(torch.uint8).reshape(-1).tolist())


def load(out, sd):
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(out)
    exp = torch.load(sd, weights_only=True)
    got = m.state_dict()
    if sorted(got) != sorted(exp):
        fail(f"keys: {sorted(set(got) ^ set(exp))} differ")
    for k in exp:
        if not equal(got[k], exp[k]):
            fail(f"{k}: from_pretrained gives other values")
    print(f"ok\tfrom_pretrained: {len(exp)} tensors equal, lm_head tied")


def union(out, exp_path):
    from safetensors import safe_open
    exp = torch.load(exp_path, weights_only=True)
    idx = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            index = json.load(f)
        wmap = index["weight_map"]
        total = index["metadata"]["total_size"]
    else:
        with safe_open(os.path.join(out, "model.safetensors"), "pt") as f:
            wmap = {k: "model.safetensors" for k in f.keys()}
        total = None
    got, size = {}, 0
    for shard in sorted(set(wmap.values())):
        with safe_open(os.path.join(out, shard), "pt") as f:
            if f.metadata() != {"format": "pt"}:
                fail(f"{shard}: __metadata__ {f.metadata()}")
            keys = set(f.keys())
            if keys != {k for k, v in wmap.items() if v == shard}:
                fail(f"{shard}: holds {sorted(keys)}, not what the index "
                     "maps to it")
            for k in keys:
                got[k] = f.get_tensor(k)
                size += got[k].numel() * got[k].element_size()
    if total is not None and total != size:
        fail(f"total_size {total}, the shards hold {size} bytes")
    for k, v in exp.items():
        if k in got:
            if not equal(got[k], v):
                fail(f"{k}: other values")
        elif not any(equal(v, g) for g in got.values()):
            fail(f"{k}: missing, and no tensor written equals it")
    extra = set(got) - set(exp)
    if extra:
        fail(f"not in the checkpoint: {sorted(extra)}")
    print(f"ok\t{len(got)} tensors in {len(set(wmap.values()))} shards, "
          f"{len(exp) - len(got)} tied left out")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2], sys.argv[3:])
    elif cmd == "same":
        same(sys.argv[2], sys.argv[3])
    elif cmd == "load":
        load(sys.argv[2], sys.argv[3])
    elif cmd == "union":
        union(sys.argv[2], sys.argv[3])
    else:
        fail("usage: hf_reshard_check.py gen|same|load|union ...")
