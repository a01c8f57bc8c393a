"""family_gen.py OUTDIR - a training checkpoint as people save them, for
tools_family.sh: a model's state_dict, Adam's state, an epoch, the
python and torch RNG states (625 python ints), an argparse.Namespace
(a global outside torch's weights-only allowlist) and a 12 MiB tensor."""
import argparse
import os
import random
import sys

import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
random.seed(0)
torch.manual_seed(0)
m = torch.nn.Linear(4, 3)
opt = torch.optim.Adam(m.parameters())
m(torch.randn(2, 4)).sum().backward()
opt.step()
torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(),
            "epoch": 3,
            "rng": {"python": random.getstate(),
                    "torch": torch.get_rng_state()},
            "cfg": argparse.Namespace(lr=0.1, name="run"),
            "big": torch.zeros(3, 1024, 1024)},
           os.path.join(out, "train.pt"))
torch.save(m.state_dict(), os.path.join(out, "model.pt"))
m2 = torch.nn.Linear(4, 3)
torch.save(m2.state_dict(), os.path.join(out, "other.pt"))
