"""cli_gen.py - the torch side of tests/fs/edit/cli.sh, run by the torch
under test (natively for 1.13, in the torch 2.x root for 2):

  make PATH      torch.save a dict whose keys are "a", "a\\nb" (a newline
                 in it), "b" (4 float32 zeros each), "w" (1024 float32,
                 arange) and "epoch" (3)
  digest PATH    torch.load it and print one line per key, sorted:
                 repr(KEY), a tab, then a tensor's sha256 (16 hex digits)
                 or a value's repr

Prints "error: ..." and exits 1 when torch cannot load the file.
"""
import hashlib
import sys

import torch


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "make":
        torch.save({"a": torch.zeros(4), "a\nb": torch.zeros(4),
                    "b": torch.zeros(4),
                    "w": torch.arange(1024, dtype=torch.float32),
                    "epoch": 3}, path)
        return
    try:
        o = torch.load(path)
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        print("error: %s" % str(e).splitlines()[0])
        sys.exit(1)
    for k in sorted(o):
        v = o[k]
        if isinstance(v, torch.Tensor):
            d = hashlib.sha256(v.contiguous().numpy().tobytes())
            print("%r\t%s" % (k, d.hexdigest()[:16]))
        else:
            print("%r\t%r" % (k, v))


main()
