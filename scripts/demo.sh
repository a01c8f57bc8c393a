#!/bin/sh
# demo.sh - set up ptfs on a fresh Debian 12 machine (as root) and show it
# on the bundled sample checkpoint tests/data/sample.pt: list it, mount it,
# browse it with ls/getfattr/cat/od, check a tensor against torch, unmount.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh build >/dev/null
sample=tests/data/sample.pt
mnt=$(mktemp -d /tmp/ptfs-demo.XXXXXX)
trap 'grep -q " $mnt " /proc/mounts && fusermount3 -u "$mnt"; rmdir "$mnt" 2>/dev/null || true' EXIT

run() { echo "\$ $*"; "$@"; echo; }

run build/ptls --tensors "$sample"
run build/ptfs "$sample" "$mnt"
run ls -l "$mnt" "$mnt/model"
run getfattr -d "$mnt/model/block.0.weight"
run cat "$mnt/epoch" "$mnt/optimizer/param_groups/0/lr"
run od -A d -t f4 "$mnt/model/block.0.bias"
echo "\$ # the mounted bytes against torch.load:"
/usr/bin/python3 - "$sample" "$mnt" <<'PY'
import sys, numpy as np, torch
ck = torch.load(sys.argv[1])
t = ck["model"]["block.0.weight"]
f = np.fromfile(sys.argv[2] + "/model/block.0.weight", dtype=np.float32)
ok = np.array_equal(f.reshape(t.shape), t.numpy())
print("model/block.0.weight equals torch.load's:", ok)
sys.exit(0 if ok else 1)
PY
echo
run fusermount3 -u "$mnt"
echo "demo done: ptls listed it, ptfs mounted it, the bytes match torch"
