"""ckpt_gen.py - the checkpoints the benchmarks generate (never committed):
a GPT-2-small-shaped state_dict (148 tensors, ~500 MB, or 1-element
tensors with the same keys when tiny=True) and N tensors of 16 floats,
each saved once into the benchmarks' work directory by make().
"""
import collections
import os
import time


def gpt2_state(tiny):
    import torch
    shapes = [("wte.weight", (50257, 768)), ("wpe.weight", (1024, 768))]
    for i in range(12):
        p = "h.%d." % i
        shapes += [(p + "ln_1.weight", (768,)), (p + "ln_1.bias", (768,)),
                   (p + "attn.c_attn.weight", (768, 2304)),
                   (p + "attn.c_attn.bias", (2304,)),
                   (p + "attn.c_proj.weight", (768, 768)),
                   (p + "attn.c_proj.bias", (768,)),
                   (p + "ln_2.weight", (768,)), (p + "ln_2.bias", (768,)),
                   (p + "mlp.c_fc.weight", (768, 3072)),
                   (p + "mlp.c_fc.bias", (3072,)),
                   (p + "mlp.c_proj.weight", (3072, 768)),
                   (p + "mlp.c_proj.bias", (768,))]
    shapes += [("ln_f.weight", (768,)), ("ln_f.bias", (768,))]
    sd = collections.OrderedDict()
    for name, shape in shapes:
        sd[name] = torch.zeros((1,) * len(shape) if tiny else shape)
    return sd


def many_state(n):
    import torch
    return {"layer%d.w" % i: torch.full((16,), float(i)) for i in range(n)}


def make(work, name, fn):
    """Path of WORK/NAME, saving torch.save(fn()) there first if missing."""
    path = os.path.join(work, name)
    if not os.path.exists(path):
        import torch
        t = time.time()
        torch.save(fn(), path + ".tmp")
        os.rename(path + ".tmp", path)
        print("generated %s (%.1f MB) in %.1f s" %
              (name, os.path.getsize(path) / 1e6, time.time() - t))
    return path
