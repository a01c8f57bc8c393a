"""as_check.py - the checks of tests/fs/formats/as.sh on a mount's .ptfs/as/
(torch 2.x, safetensors 0.8, transformers 5.x in its root).

  tensors FILE PT     FILE (a mount's .ptfs/as/model.safetensors) through
                      safe_open (mmap, and backend="pread"), and
                      safetensors.torch.load_file: each the keys and
                      tensors of torch.load(PT) (its tensors, nested keys
                      joined with "."; torch.equal, dtype and shape)
  union DIR PT        DIR (.ptfs/as/ with -o shards=SIZE): the index's
                      weight_map names every key once, each in a shard of
                      DIR, which safe_open reads as PT's tensor
  threads FILE REF    FILE mmap'ed and read by 8 threads at once (whole,
                      then slices that start anywhere): REF's bytes
  logits DIR IDS LOGITS
                      AutoModelForCausalLM.from_pretrained(DIR) on IDS
                      gives LOGITS exactly (torch.equal)
  readme FILE         FILE (.ptfs/as/README) names train.step, the python
                      value of the .pt source that was left out
  edited FILE PT KEY HEX OLD NEW
                      FILE, after an edit through a writable mount of PT:
                      the first bytes of KEY are HEX, OLD is renamed NEW,
                      every other tensor as in PT

Prints "ok<TAB>summary" on success; a problem is one line on stderr and
exit 1.
"""
import json
import mmap
import os
import re
import sys
import threading

import torch


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def flat(obj, prefix="", out=None):
    """The tensors of a state dict, nested keys joined as ptrepack does."""
    out = {} if out is None else out
    for k, v in obj.items():
        name = prefix + str(k)
        if isinstance(v, torch.Tensor):
            out[name] = v
        elif isinstance(v, dict):
            flat(v, name + ".", out)
    return out


def expected(pt):
    return flat(torch.load(pt, weights_only=True))


def equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def same(what, got, exp):
    if sorted(got) != sorted(exp):
        fail("%s: keys %s differ from the source's"
             % (what, sorted(set(got) ^ set(exp))[:5]))
    for k in exp:
        if not equal(got[k], exp[k]):
            fail("%s: %s: %s %s, the source has %s %s"
                 % (what, k, got[k].dtype, tuple(got[k].shape),
                    exp[k].dtype, tuple(exp[k].shape)))


def tensors(path, pt):
    from safetensors import safe_open
    from safetensors.torch import load_file
    exp = expected(pt)
    readers = ["safe_open"]
    with safe_open(path, "pt") as f:
        same("safe_open", {k: f.get_tensor(k) for k in f.keys()}, exp)
    try:
        g = safe_open(path, "pt", backend="pread")
    except TypeError:
        g = None        # a safetensors without backends
    if g is not None:
        with g as f:
            same("safe_open(backend='pread')",
                 {k: f.get_tensor(k) for k in f.keys()}, exp)
        readers.append("safe_open pread")
    same("load_file", load_file(path), exp)
    readers.append("load_file")
    print("ok\t%d tensors equal to the source's through %s"
          % (len(exp), ", ".join(readers)))


def union(d, pt):
    from safetensors import safe_open
    exp = expected(pt)
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        wm = json.load(f)["weight_map"]
    got = {}
    for shard in sorted(set(wm.values())):
        with safe_open(os.path.join(d, shard), "pt") as f:
            for k in f.keys():
                if wm.get(k) != shard:
                    fail("%s: %s is in it, the index says %s"
                         % (shard, k, wm.get(k)))
                got[k] = f.get_tensor(k)
    same("the shards", got, exp)
    print("ok\t%d tensors in %d shards, as the index says, equal to the "
          "source's" % (len(got), len(set(wm.values()))))


def threads(path, ref):
    want = open(ref, "rb").read()
    n = len(want)
    errors = []
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size != n:
            fail("%s: %d bytes, %s has %d" % (path, os.fstat(f.fileno())
                                              .st_size, ref, n))
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)

        def reader(t):
            try:
                if mm[:] != want:
                    errors.append("thread %d: the whole file differs" % t)
                step = 4093 + 17 * t
                for off in range((t * 977) % step, n, step):
                    ln = 1 + (off * 31 + t) % 9000
                    if mm[off:off + ln] != want[off:off + ln]:
                        errors.append("thread %d: bytes [%d, %d) differ"
                                      % (t, off, off + ln))
                        return
            except Exception as e:      # a SIGBUS is not caught: it kills
                errors.append("thread %d: %r" % (t, e))

        ts = [threading.Thread(target=reader, args=(t,)) for t in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        mm.close()
    if errors:
        fail(errors[0])
    print("ok\t8 threads through one mmap: the %d bytes of %s"
          % (n, os.path.basename(ref)))


def logits(d, ids, want):
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    with torch.no_grad():
        got = m(input_ids=torch.load(ids)).logits
    want = torch.load(want)
    if got.shape != want.shape or not torch.equal(got, want):
        diff = (got - want).abs().max().item() \
            if got.shape == want.shape else "shape %s" % (tuple(got.shape),)
        fail("from_pretrained(%s): logits differ from the model's (max "
             "difference %s)" % (d, diff))
    print("ok\tfrom_pretrained: %s logits equal to the model's"
          % "x".join(map(str, want.shape)))


def readme(path):
    text = open(path, encoding="utf-8").read()
    if not re.search(r"train.step", text):
        fail("%s does not name train.step: %r" % (path, text[:300]))
    print("ok\tnames train.step: %s" % text.strip().splitlines()[0][:100])


def edited(path, pt, key, hexbytes, old, new):
    from safetensors import safe_open
    exp = expected(pt)
    b = bytes.fromhex(hexbytes)
    t = exp[key].contiguous().clone()
    raw = bytearray(t.view(torch.uint8).reshape(-1).numpy().tobytes())
    raw[:len(b)] = b
    exp[key] = torch.frombuffer(raw, dtype=torch.uint8).view(
        t.dtype).reshape(t.shape)
    exp[new] = exp.pop(old)
    with safe_open(path, "pt") as f:
        same("after the edit", {k: f.get_tensor(k) for k in f.keys()}, exp)
    print("ok\t%s's first %d bytes written, %s renamed %s: the file opened "
          "again has them" % (key, len(b), old, new))


if __name__ == "__main__":
    cmds = {"tensors": tensors, "union": union, "threads": threads,
            "logits": logits, "readme": readme, "edited": edited}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        fail("usage: as_check.py tensors|union|threads|logits|readme|"
             "edited ARG...")
    try:
        cmds[sys.argv[1]](*sys.argv[2:])
    except OSError as e:        # one line: the file the feature should show
        fail("%s: %s" % (e.filename or sys.argv[2], e.strerror or e))
