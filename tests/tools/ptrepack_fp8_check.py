"""ptrepack_fp8_check.py MANIFEST - each line: OUT, WANT (a torch.save of
the state dict torch computed: ptrepack_fp8_gen.py), optionally a
config.json OUT/config.json must equal byte for byte and a file of masks
(nan_both.pt) where any NaN is right.  OUT is read as
what it is (.pt with weights_only, .safetensors, a Hugging Face folder:
its index and shards, a DCP directory: its state dict loaded in place);
it must hold exactly WANT's keys, each of WANT's dtype and shape and
with the same bytes (compared as uint8, so NaN patterns count).  One
line each: "ok OUT" or "FAIL OUT: why".
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file


def load_dcp(path):
    import torch.distributed.checkpoint as dcp
    md = dcp.FileSystemReader(path).read_metadata()
    sd = {}
    for k, m in md.state_dict_metadata.items():
        sd[k] = torch.empty(m.size, dtype=m.properties.dtype)
    dcp.load(sd, checkpoint_id=path)
    return sd


def load_hf(path):
    idx = os.path.join(path, 'model.safetensors.index.json')
    sd = {}
    if not os.path.exists(idx):
        return load_file(os.path.join(path, 'model.safetensors')), None
    with open(idx) as f:
        wm = json.load(f)['weight_map']
    for shard in sorted(set(wm.values())):
        sd.update(load_file(os.path.join(path, shard)))
    return sd, sorted(wm)


def load(path):
    if path.endswith('.pt'):
        return torch.load(path, weights_only=True), None
    if path.endswith('.safetensors'):
        return load_file(path), None
    if os.path.exists(os.path.join(path, '.metadata')):
        return load_dcp(path), None
    return load_hf(path)


def same(a, b, nan=None):
    if a.dtype != b.dtype or a.shape != b.shape:
        return '%s %s, want %s %s' % (a.dtype, tuple(a.shape), b.dtype,
                                       tuple(b.shape))
    if nan is not None and nan.any():
        if not a[nan].float().isnan().all():
            return 'not NaN where weight and scale are'
        a, b = a[~nan], b[~nan]
    x = a.contiguous().reshape(-1).view(torch.uint8)
    y = b.contiguous().reshape(-1).view(torch.uint8)
    if not torch.equal(x, y):
        n = int((x != y).sum())
        return '%d of %d bytes differ' % (n, x.numel())
    return None


def check(out, want, cfg, nan):
    got, index = load(out)
    w = torch.load(want, weights_only=True)
    nan = torch.load(nan, weights_only=True) if nan else {}
    if set(got) != set(w):
        return 'keys %s, want %s' % (sorted(got), sorted(w))
    if index is not None and index != sorted(w):
        return 'index names %s, want %s' % (index, sorted(w))
    for k in w:
        why = same(got[k], w[k], nan.get(k))
        if why:
            return '%s: %s' % (k, why)
    if cfg:
        with open(os.path.join(out, 'config.json'), 'rb') as f:
            a = f.read()
        with open(cfg, 'rb') as f:
            b = f.read()
        if a != b:
            return 'config.json is %r, want %r' % (a[:200], b[:200])
    return None


for line in open(sys.argv[1]):
    parts = line.rstrip('\n').split('\t')
    out, want = parts[0], parts[1]
    cfg = parts[2] if len(parts) > 2 and parts[2] else None
    nan = parts[3] if len(parts) > 3 and parts[3] else None
    try:
        why = check(out, want, cfg, nan)
    except Exception as e:       # a file torch cannot read fails the case
        why = '%s: %s' % (type(e).__name__, e)
    print('FAIL %s: %s' % (out, why) if why else 'ok %s' % out)
    sys.stdout.flush()
