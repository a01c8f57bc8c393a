"""overlay_check.py - the torch side of tests/fs/safety/overlay.sh and crash.sh,
run by the torch under test (natively for 1.13, in the torch 2.x root for
2), one command per run:

  make PATH SEED [MB]   torch.save a small training checkpoint: w (1024
                        float32, arange + SEED), b (16 ones * SEED), epoch
                        (an int), lr (a float), opt/m (a tensor), and MB
                        MiB more in
                        big (float32) when MB is given
  replace PATH SEED     a job saving to a temporary file and renaming it
                        over PATH (os.replace), as torch training loops do
  inplace PATH SEED     a job calling torch.save on PATH itself (the same
                        inode, truncated and rewritten)
  show PATH             one line: w[0] w[1] b[0] epoch and the sorted keys
                        (torch.load, weights_only where the torch has it)
  crashmake PATH        the crash loop's checkpoint: t0..t7 (4096 float32
                        each), big (8M float32, never edited), epoch
  serve -               read paths on stdin, answer each with one line of
                        JSON: key -> sha256 of a tensor's bytes, a dict's
                        sorted keys, or a value's repr; or {"error": ...}

Prints "error: ..." and exits 1 when torch cannot load the file.
"""
import os
import sys

import torch


def obj(seed, mb=0):
    o = {
        "w": torch.arange(1024, dtype=torch.float32) + seed,
        "b": torch.ones(16) * seed,
        "epoch": 3,
        "lr": 0.5,
        "opt": {"m": torch.zeros(8)},
    }
    if mb:
        o["big"] = torch.zeros(mb * (1 << 18), dtype=torch.float32)
    return o


def load(path):
    try:
        return torch.load(path, weights_only=True)
    except Exception as e:  # noqa: BLE001
        # torch 1.13's weights-only loader has no BINFLOAT (lr); these
        # are files the tests made, so the full loader is safe
        if "Weights only" not in str(e) and not isinstance(e, TypeError):
            raise
        return torch.load(path)


def digest(o):
    import hashlib
    out = {}
    for k, v in o.items():
        if isinstance(v, torch.Tensor):
            out[str(k)] = hashlib.sha256(
                v.contiguous().numpy().tobytes()).hexdigest()[:16]
        elif isinstance(v, dict):
            out[str(k)] = "dict:" + ",".join(sorted(str(x) for x in v))
        else:
            out[str(k)] = repr(v)
    return out


def serve():
    import json
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            ans = digest(load(line.strip()))
        except Exception as e:  # noqa: BLE001 - reported to the driver
            ans = {"error": str(e).splitlines()[0] if str(e) else repr(e)}
        print(json.dumps(ans, sort_keys=True), flush=True)


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "serve":
        serve()
        return
    if cmd == "crashmake":
        o = {"t%d" % i: torch.arange(4096, dtype=torch.float32) * (i + 1)
             for i in range(8)}
        o["big"] = torch.zeros(8 << 20, dtype=torch.float32)
        o["epoch"] = 3
        torch.save(o, path)
        return
    if cmd == "make":
        mb = int(sys.argv[4]) if len(sys.argv) > 4 else 0
        torch.save(obj(float(sys.argv[3]), mb), path)
    elif cmd == "replace":
        tmp = path + ".job-tmp"
        torch.save(obj(float(sys.argv[3])), tmp)
        os.replace(tmp, path)
    elif cmd == "inplace":
        torch.save(obj(float(sys.argv[3])), path)
    elif cmd == "show":
        try:
            o = load(path)
        except Exception as e:  # noqa: BLE001 - any failure is the answer
            print("error: %s" % str(e).splitlines()[0])
            sys.exit(1)
        print("%g %g %g %s %s" % (float(o["w"][0]), float(o["w"][1]),
                                  float(o["b"][0]), o.get("epoch"),
                                  ",".join(sorted(str(k) for k in o))))
    else:
        sys.exit("unknown command " + cmd)


main()
