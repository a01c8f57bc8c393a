#!/usr/bin/python3
"""Make tests/data/sample.pt, the small training checkpoint the README demo
and the tests use: a model state_dict (with tied weights), optimizer state
with int keys, python scalars and a nested config.

Run with Debian's torch 1.13:  /usr/bin/python3 tests/data/make_sample.py
torch.save writes no timestamps, so the output is reproducible.
"""
import os

import torch
import torch.nn as nn

torch.manual_seed(0)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.block = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.embed.weight      # tied weights


model = Tiny()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
out = model.head(model.block(model.embed(torch.tensor([1, 2, 3])))).sum()
out.backward()
opt.step()

ckpt = {
    "model": model.state_dict(),
    "optimizer": opt.state_dict(),
    "epoch": 12,
    "loss": 0.4375,
    "config": {"name": "tiny", "dims": [16, 8], "dropout": None},
}
out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample.pt")
torch.save(ckpt, out_path)
print(out_path, os.path.getsize(out_path), "bytes")
