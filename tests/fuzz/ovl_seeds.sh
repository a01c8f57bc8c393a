#!/bin/sh
# ovl_seeds.sh PTFS OUTDIR - seeds for fuzz_ovl from real journals: mount
# tests/data/sample.pt, make edits of every kind (in place, value, mkdir,
# rename, remove, new tensor from raw bytes and xattrs, new tensor from a
# .npy, replacement by rename), kill -9 the daemon so the journal stays,
# and save its records (after the header) as "\001" + bytes: fuzz_ovl puts
# its own valid header in front (see fuzz_ovl.c).  One seed per stage.
set -u
PTFS=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd) || exit 1
w=$(mktemp -d /tmp/ovl-seeds.XXXXXX) || exit 1
trap 'fusermount3 -uz "$w/m" 2>/dev/null; rm -rf "$w"' EXIT
mkdir -p "$w/m" "$out"
cp "$here/../data/sample.pt" "$w/model.pt"
"$PTFS" -f "$w/model.pt" "$w/m" 2>"$w/err" &
pid=$!
i=0
while ! grep -q " $w/m " /proc/mounts && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
J=$w/.model.pt.ptfs/ptfs.journal
n=0
save() {
	n=$((n + 1))
	python3 - "$J" "$out/real_$n" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<I", data, 0)[0]
open(sys.argv[2], "wb").write(b"\x01" + data[16 + n:])
PY
}
m=$w/m
printf '\0\0\200\77' | dd of="$m/model/block.0.bias" bs=4 seek=1 conv=notrunc 2>/dev/null; save
echo 13 >"$m/epoch"; save
mkdir "$m/extra"; save
mv "$m/model/block.0.weight" "$m/model/renamed.weight"; save
rm -r "$m/optimizer"; save
head -c 24 /dev/urandom >"$m/extra/new"
setfattr -n user.dtype -v float32 "$m/extra/new"
setfattr -n user.shape -v 2,3 "$m/extra/new"; save
python3 -c "
import struct
h = \"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\"
h += ' ' * (63 - (10 + len(h)) % 64) + '\n'
open('$m/extra/arr.npy', 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + bytes(16))"; save
head -c "$(stat -c %s "$m/model/block.0.bias")" /dev/zero >"$m/tmpfile"
mv "$m/tmpfile" "$m/model/block.0.bias"; save
echo "'tinier'" >"$m/config/name"; save
kill -9 $pid
wait $pid 2>/dev/null
# the whole journal too (its header names another file: refused, read)
cp "$J" "$out/real_whole" && printf '\0' | cat - "$J" >"$out/real_whole"
echo "$n seeds in $out"
