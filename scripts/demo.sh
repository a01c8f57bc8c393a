#!/bin/sh
# demo.sh - set up ptfs on a fresh Debian 12 machine (as root) and show it
# on a copy of the bundled sample checkpoint tests/data/sample.pt: list it,
# mount it, browse it with ls/getfattr/cat/od, check a tensor against
# torch, read its .npy and text views, edit it (a value, tensor bytes,
# a tensor through its text view, a rename, dropping the optimizer state),
# write it back with `ptfs umount`, and verify with torch.load.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh build >/dev/null
work=$(mktemp -d /tmp/ptfs-demo.XXXXXX)
mnt=$work/m
sample=$work/sample.pt
mkdir "$mnt"
cp tests/data/sample.pt "$sample"
trap 'grep -q " $mnt " /proc/mounts && fusermount3 -u "$mnt"; rm -rf "$work"' EXIT

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
run cat "$mnt/model/block.1.bias.txt"
echo "\$ python3 -c 'import numpy as np; a = np.load(\"$mnt/model/embed.weight.npy\"); print(a.dtype, a.shape)'"
/usr/bin/python3 -c 'import sys, numpy as np; a = np.load(sys.argv[1]); print(a.dtype, a.shape)' "$mnt/model/embed.weight.npy"
echo
printf '%s\n' "\$ printf '1 2 3 4 5 6 7 8\\n' > $mnt/model/block.1.bias.txt"
printf '1 2 3 4 5 6 7 8\n' >"$mnt/model/block.1.bias.txt"
echo "\$ echo 13 > $mnt/epoch"
echo 13 >"$mnt/epoch"
echo "\$ printf '\\000\\000\\200\\077' | dd of=$mnt/model/block.0.bias conv=notrunc"
printf '\000\000\200\077' | dd of="$mnt/model/block.0.bias" conv=notrunc 2>/dev/null
run mv "$mnt/model/head.weight" "$mnt/model/out.weight"
run rm -r "$mnt/optimizer"
run ls "$mnt" "$mnt/model"
run build/ptfs umount "$mnt"
echo "\$ # the written-back file, loaded by torch:"
/usr/bin/python3 - "$sample" <<'PY'
import sys, torch
ck = torch.load(sys.argv[1])
orig = torch.load("tests/data/sample.pt")
m = ck["model"]
ok = (ck["epoch"] == 13 and "optimizer" not in ck
      and list(m) == ["embed.weight", "block.0.weight", "block.0.bias",
                      "block.1.weight", "block.1.bias", "out.weight"]
      and m["block.0.bias"][0].item() == 1.0
      and m["block.1.bias"].tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
      and torch.equal(m["block.0.bias"][1:], orig["model"]["block.0.bias"][1:])
      and torch.equal(m["out.weight"], orig["model"]["head.weight"])
      and m._metadata == orig["model"]._metadata)
print("epoch", ck["epoch"], "| keys", list(ck), "| block.0.bias[0]",
      m["block.0.bias"][0].item(), "| block.1.bias", m["block.1.bias"].tolist())
print("the edits are in the file, everything else as it was:", ok)
sys.exit(0 if ok else 1)
PY
echo
echo "demo done: ptls listed it, ptfs mounted it, the bytes match torch, the edits were written back"
