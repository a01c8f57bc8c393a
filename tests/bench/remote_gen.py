"""remote_gen.py - the 2 GB checkpoints bench_remote.py serves (never
committed): a Llama-shaped state_dict (hidden 2048, 8 layers, a 32000-row
embedding and head: 75 float32 tensors, 2.2 GB) saved by torch.save as
one zip, and the same tensors as a Hugging Face folder of 4 safetensors
shards (written from the format's definition: torch 1.13 has none) with
model.safetensors.index.json.  Each is made once in its directory.
"""
import json
import math
import os
import struct
import time

H, FF, LAYERS, VOCAB = 2048, 5632, 8, 32000


def shapes():
    out = [("model.embed_tokens.weight", (VOCAB, H))]
    for i in range(LAYERS):
        p = "model.layers.%d." % i
        out += [(p + "input_layernorm.weight", (H,))]
        out += [(p + "self_attn.%s_proj.weight" % k, (H, H))
                for k in "qkvo"]
        out += [(p + "post_attention_layernorm.weight", (H,))]
        out += [(p + "mlp.%s_proj.weight" % k, (FF, H) if k != "down"
                 else (H, FF)) for k in ("gate", "up", "down")]
    out += [("model.norm.weight", (H,)), ("lm_head.weight", (VOCAB, H))]
    return out


def tensor(name, shape, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g)


def save_zip(path):
    import torch
    sd = {name: tensor(name, shape, i)
          for i, (name, shape) in enumerate(shapes())}
    torch.save(sd, path + ".tmp")
    os.rename(path + ".tmp", path)


def save_folder(d, nshards=4):
    """@nshards shards of about equal size, tensors in order"""
    sh = shapes()
    nbytes = [4 * math.prod(s) for _, s in sh]
    total, per = sum(nbytes), sum(nbytes) / nshards
    groups, acc = [[] for _ in range(nshards)], 0
    for i, n in enumerate(nbytes):
        groups[min(int(acc / per), nshards - 1)].append(i)
        acc += n
    tmp = d + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    wm = {}
    for s, g in enumerate(groups):
        name = "model-%05d-of-%05d.safetensors" % (s + 1, nshards)
        hdr, off = {"__metadata__": {"format": "pt"}}, 0
        for i in g:
            hdr[sh[i][0]] = {"dtype": "F32", "shape": list(sh[i][1]),
                             "data_offsets": [off, off + nbytes[i]]}
            off += nbytes[i]
            wm[sh[i][0]] = name
        text = json.dumps(hdr, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for i in g:
                f.write(tensor(*sh[i], i).numpy().tobytes())
    with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f,
                  indent=2, sort_keys=True)
    os.rename(tmp, d)


def make(work):
    """(the zip's path, the folder's path), generated first if missing"""
    os.makedirs(work, exist_ok=True)
    z, d = os.path.join(work, "big.pt"), os.path.join(work, "hf4")
    for path, fn in ((z, save_zip), (d, save_folder)):
        if not os.path.exists(path):
            t = time.time()
            fn(path)
            print("generated %s in %.1f s" % (path, time.time() - t))
    return z, d
