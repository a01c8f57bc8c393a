"""ptdiff_ml_gen.py OUTDIR - pairs for ptdiff's structural and cross-dtype
checks (issue 19.4), written by the torch under test, and what torch says
about them (expect.json): a state_dict against dict(state_dict) and
against an OrderedDict without _metadata, tied weights against untied, a
Parameter against a plain tensor, and the model against its bfloat16 and
float16 conversions with torch's own relative L2 error per tensor; and
README's recipe on a model holding fp32 subnormals (~1e-42, which bfloat16
rounds to 0) against its model.to(torch.bfloat16), with what
torch.isclose() says under the recipe's ATOL and RTOL (argv[2:4])."""
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
# README's recipe: a real model (a Module, converted by .to()), whose
# weights include values only fp32 can hold
atol, rtol = float(sys.argv[2]), float(sys.argv[3])
net = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.LayerNorm(8))
with torch.no_grad():
    net[0].weight[0, :6] = torch.tensor([1e-42, -3e-42, 1.5e-40, 2e-39,
                                         1e-45, 5e-41])
torch.save(net.state_dict(), os.path.join(out, "model.pt"))
torch.save(net.to(torch.bfloat16).state_dict(),
           os.path.join(out, "model-bf16.pt"))
b = torch.load(os.path.join(out, "model-bf16.pt"))
a = torch.load(os.path.join(out, "model.pt"))
assert b["0.weight"][0, 0].item() == 0 and a["0.weight"][0, 0].item() != 0
expect["recipe_close"] = all(
    bool(torch.isclose(a[k].double(), b[k].double(), rtol=rtol,
                       atol=atol).all()) for k in a)
expect["rtol_only_close"] = all(
    bool(torch.isclose(a[k].double(), b[k].double(), rtol=rtol,
                       atol=0).all()) for k in a)
json.dump(expect, open(os.path.join(out, "expect.json"), "w"))
