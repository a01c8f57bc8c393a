"""ptdiff_ml_gen.py OUTDIR - pairs for ptdiff's structural and cross-dtype
checks (issue 19.4), written by the torch under test, and what torch says
about them (expect.json): a state_dict against dict(state_dict) and
against an OrderedDict without _metadata, tied weights against untied, a
Parameter against a plain tensor, and the model against its bfloat16 and
float16 conversions with torch's own relative L2 error per tensor."""
import collections
import json
import os
import sys

import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(4)
m = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Linear(8, 4))
sd = m.state_dict()
w = torch.randn(32, 8)
save = {
    "sd": sd, "plain": dict(sd), "nometa": collections.OrderedDict(sd),
    "tied": {"emb": w, "head": w}, "untied": {"emb": w, "head": w.clone()},
    "param": {"p": torch.nn.Parameter(w)}, "tensor": {"p": w},
    "bf16": {k: v.bfloat16() for k, v in sd.items()},
    "f16": {k: v.half() for k, v in sd.items()},
}
for name, obj in save.items():
    torch.save(obj, os.path.join(out, name + ".pt"))
expect = {}
for conv in ("bf16", "f16"):
    b = torch.load(os.path.join(out, conv + ".pt"))
    for k, a in sd.items():
        a64, b64 = a.double(), b[k].double()
        d = (a64 - b64).abs()
        expect["%s/%s" % (conv, k)] = {
            "rel_l2": ((d ** 2).sum() / (b64 ** 2).sum()).sqrt().item(),
            "max_abs": d.max().item(),
            "max_rel": (d / b64.abs()).max().item(),
            "within_1e-2": bool((d <= 1e-2 * b64.abs()).all()),
        }
json.dump(expect, open(os.path.join(out, "expect.json"), "w"))
