"""ptrepack_sub.py gen DIR | check DIR CASE - for ptrepack_sub.sh, under the
torch being tested.

gen writes DIR/train.pt, a training checkpoint: a model's state_dict (an
OrderedDict with _metadata) whose embed and head weights are tied, a view
(a slice and a transpose of one storage) and a Parameter; an "ema" dict
sharing one tensor with the model; an optimizer state; an int.  Also
DIR/proto5.pt, the same saved with pickle_protocol=5.

check compares torch.load of DIR/CASE.out (what ptrepack wrote) with what
torch.save of the same object writes, CASE one of:
  model      torch.load(train.pt)['model']: same OrderedDict, _metadata,
             keys, values, ties and views (storage data_ptr), only the
             storages it uses; data.pkl byte for byte what torch.save of
             it writes
  several    {'model': ..., 'ema': ..., 'optimizer/state/0': ...}, the
             model and ema still sharing their tensor; data.pkl as
             torch.save of that dict writes it
  tensor     torch.load(train.pt)['model']['fc.weight'] alone, data.pkl
             as torch.save writes it
  st         a safetensors file: the model's tensors by name, head.weight
             an alias of embed.weight in __metadata__, bytes equal
  proto5     torch.load(proto5.pt); on torch 2 also with weights_only=True,
             which refuses proto5.pt itself
Exit 0 when equal; else one line on stderr.
"""
import collections
import json
import struct
import sys
import zipfile

import torch


def gen(d):
    emb = torch.nn.Parameter(torch.randn(6, 4))
    big = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    sd = collections.OrderedDict()
    sd["embed.weight"] = emb
    sd["fc.weight"] = torch.randn(3, 4)
    sd["fc.bias"] = torch.zeros(3, dtype=torch.float64)
    sd["slice"] = big[1:3]
    sd["t"] = big.t()
    sd["head.weight"] = emb
    sd._metadata = collections.OrderedDict(
        [("", {"version": 1}), ("fc", {"version": 2})])
    ck = {
        "model": sd,
        "ema": {"fc.weight": sd["fc.weight"], "other": torch.ones(2)},
        "optimizer": {"state": {0: {"step": torch.tensor(3.0),
                                    "exp_avg": torch.randn(6, 4)}},
                      "param_groups": [{"lr": 0.1, "params": [0]}]},
        "epoch": 7,
    }
    torch.save(ck, d + "/train.pt")
    torch.save(ck, d + "/proto5.pt", pickle_protocol=5)


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def same(a, b, where):
    if type(a) is not type(b):
        fail("%s: %s, want %s" % (where, type(a).__name__, type(b).__name__))
    if isinstance(a, torch.Tensor):
        if (a.dtype, a.shape, a.stride(), a.storage_offset(),
                a.requires_grad) != (b.dtype, b.shape, b.stride(),
                                     b.storage_offset(), b.requires_grad):
            fail("%s: tensor layout differs" % where)
        if not torch.equal(a, b):
            fail("%s: values differ" % where)
    elif isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            fail("%s: keys %s, want %s" % (where, list(a), list(b)))
        if getattr(a, "_metadata", None) != getattr(b, "_metadata", None):
            fail("%s: _metadata %r, want %r" % (
                where, getattr(a, "_metadata", None),
                getattr(b, "_metadata", None)))
        for k in a:
            same(a[k], b[k], "%s/%s" % (where, k))
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            fail("%s: length differs" % where)
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s/%d" % (where, i))
    elif a != b:
        fail("%s: %r, want %r" % (where, a, b))


def ptr(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr()


def storages(path):
    with zipfile.ZipFile(path) as z:
        return sorted(n for n in z.namelist() if "/data/" in n)


def pickle_of(path):
    with zipfile.ZipFile(path) as z:
        return z.read([n for n in z.namelist()
                       if n.endswith("/data.pkl")][0])


def check_model(m, where):
    if ptr(m["embed.weight"]) != ptr(m["head.weight"]):
        fail("%s: embed.weight and head.weight no longer tied" % where)
    if ptr(m["slice"]) != ptr(m["t"]):
        fail("%s: the slice and the transpose no longer share" % where)


def check(d, case):
    src = torch.load(d + "/train.pt", weights_only=False)
    out = d + "/" + case + ".out"
    if case == "st":
        return check_st(src["model"], out)
    got = torch.load(out, weights_only=False)
    if case == "model":
        same(got, src["model"], "model")
        check_model(got, "model")
        # embed/head, fc.weight, fc.bias, the big storage
        if len(storages(out)) != 4:
            fail("%s: %d storage records, want 4" % (out,
                                                    len(storages(out))))
        # and the very pickle torch.save(ck['model']) writes
        torch.save(src["model"], d + "/want.pt")
        if pickle_of(out) != pickle_of(d + "/want.pt"):
            fail("%s: data.pkl is not what torch.save(ck['model']) "
                 "writes" % out)
    elif case == "several":
        want = {"model": src["model"], "ema": src["ema"],
                "optimizer/state/0": src["optimizer"]["state"][0]}
        same(got, want, "several")
        torch.save(want, d + "/want.pt")
        if pickle_of(out) != pickle_of(d + "/want.pt"):
            fail("%s: data.pkl is not what torch.save of the dict writes"
                 % out)
        check_model(got["model"], "several/model")
        if ptr(got["model"]["fc.weight"]) != ptr(got["ema"]["fc.weight"]):
            fail("several: model and ema no longer share fc.weight")
    elif case == "tensor":
        same(got, src["model"]["fc.weight"], "tensor")
        torch.save(src["model"]["fc.weight"], d + "/want.pt")
        if pickle_of(out) != pickle_of(d + "/want.pt"):
            fail("%s: data.pkl is not what torch.save of the tensor writes"
                 % out)
    elif case == "proto5":
        # torch 2.6 on loads with weights_only=True unless told otherwise
        p5 = torch.load(d + "/proto5.pt", weights_only=False)
        same(got, p5, "proto5")
        check_model(got["model"], "proto5/model")
        if torch.__version__ >= "2":
            # why protocol 2 (ptrepack(1)): the weights-only unpickler
            # refuses protocol 5's FRAME, and reads what ptrepack wrote
            try:
                torch.load(d + "/proto5.pt", weights_only=True)
                fail("torch %s now loads protocol 5 with weights_only=True:"
                     " keep the protocol (ptrepack(1))" % torch.__version__)
            except Exception as e:
                if "Unsupported operand" not in str(e):
                    raise
            same(torch.load(out, weights_only=True), p5,
                 "proto5 (weights_only)")
    else:
        fail("unknown case " + case)


def check_st(model, path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    meta = hdr.pop("__metadata__", {})
    if meta.get("head.weight") != "embed.weight":
        fail("%s: __metadata__ %r: head.weight is not an alias" % (path, meta))
    want = sorted(k for k in model if k != "head.weight")
    if sorted(hdr) != want:
        fail("%s: names %s, want %s" % (path, sorted(hdr), want))
    for k in want:
        b, e = hdr[k]["data_offsets"]
        if data[b:e] != model[k].detach().contiguous().numpy().tobytes():
            fail("%s: %s: bytes differ" % (path, k))


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
