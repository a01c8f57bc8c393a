"""dequant_check.py MNT WANT - the -o dequant=bf16 view MNT of a block
FP8 checkpoint against torch's dequantization WANT (ptrepack_fp8_gen.py's
want/dequant_block_bf16.pt: the block loops in float32, then
.to(bfloat16)), for tests/fs/views/dequant.sh (torch 2.x):

  - every tensor of WANT is a file of MNT (a dotted key: a file of that
    name, or a folder path for a DCP directory's nesting) whose bytes are
    WANT's, bit for bit, with user.dtype bfloat16 for the weights
  - no *_scale_inv, *weight_scale or *input_scale is shown
  - the .npy view of a weight holds the same bits
  - writes fail with EROFS

Prints "ok<TAB>summary" and exits 0, or the problems and exits 1.
"""
import errno
import os
import sys

import torch


def path_of(mnt, key):
    p = os.path.join(mnt, key)
    if os.path.exists(p):
        return p
    return os.path.join(mnt, *key.split("."))


def main():
    mnt, want = sys.argv[1], sys.argv[2]
    ref = torch.load(want, weights_only=True)
    bad, weights = [], 0
    for k, t in ref.items():
        p = path_of(mnt, k)
        try:
            with open(p, "rb") as f:
                got = f.read()
        except OSError as e:
            bad.append("%s: %s" % (k, e))
            continue
        b = t.contiguous().view(torch.uint8).numpy().tobytes()
        if got != b:
            bad.append("%s: %d bytes, not torch's %d (%s)" %
                       (k, len(got), len(b), t.dtype))
        if t.dtype == torch.bfloat16 and k.endswith(".weight"):
            weights += 1
            if os.getxattr(p, "user.dtype") != b"bfloat16":
                bad.append("%s: user.dtype %r" %
                           (k, os.getxattr(p, "user.dtype")))
    for root, dirs, files in os.walk(mnt):
        for n in files:
            if n.endswith(("_scale_inv", "weight_scale", "input_scale")):
                bad.append("a scale is shown: %s" % os.path.join(root, n))
    try:
        open(path_of(mnt, next(iter(ref))), "r+b")
        bad.append("opened for writing")
    except OSError as e:
        if e.errno != errno.EROFS:
            bad.append("open for writing: %s, not EROFS" % e)
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\t%d tensors as torch dequantizes them (%d weights bfloat16), "
          "bit for bit; no scale shown; read-only" % (len(ref), weights))
    return 0


if __name__ == "__main__":
    sys.exit(main())
