#!/bin/sh
# ptfs -o dequant=bf16: a read-only view of a block-scaled float8
# checkpoint with its weights as bfloat16 (made as they are read), their
# scales hidden, against torch's dequantization (docs/user-guide.md,
# "Scaled float8 weights").  torch 2.x only: 1.13 has no float8.
#
#   usage: sh tests/fs/views/dequant.sh [-k CASE] VERSION PTFS
#
# ptrepack_fp8_gen.py (tests/tools) writes block.pt, block.safetensors,
# block_hf/ and block_dcp/ (DeepSeek-V3's layout: edge blocks, a zero
# block, NaN and infinities in weights and scales, e4m3fn and e5m2, and
# tensors left alone) and torch's result, want/dequant_block_bf16.pt.
# Cases:
#
#   view      each input mounted -o dequant=bf16: every tensor's bytes as
#             torch's, the scales not shown, writes EROFS
#   refused   -o dequant=int8 and a checkpoint without scaled weights:
#             one line, exit 2, nothing mounted
#
# Prints one line per check and "N passed, N failed".  Exit 0 all passed,
# 1 a failure, 77 skipped (VERSION 1.13; no /dev/fuse).
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS" 2 2 "$@"
PTFS=$2
if [ "$version" != 2 ]; then
	echo "torch $version has no float8 dtypes: skipping"
	exit 77
fi
fs_progs PTFS
fs_need_fuse
fs_torch "" ptfs-dequant
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/py" || exit 1
cp "$fs/../tools/ptrepack_fp8_gen.py" "$WORK/py/" || exit 1
fs_py dequant_check.py

if run_limited 300 chroot "$root" python3 "$inner/py/ptrepack_fp8_gen.py" \
	"$inner/gen" 17 >"$WORK/gen.rep" 2>&1; then
	pass "generate" "block.pt, .safetensors, _hf/, _dcp/ and torch's result"
else
	fail "generate" "$(tail -n 3 "$WORK/gen.rep")"
	conclude
	exit 1
fi

if want view; then
for i in block.pt block.safetensors block_hf block_dcp; do
	mnt=$WORK/mnt/$i
	if start_daemon "$WORK/gen/in/$i" "$mnt" "$WORK/$i.err" -o dequant=bf16; then
		if fs_pyrun "$i.rep" "$inner/mnt/$i" "$inner/gen/want/dequant_block_bf16.pt"; then
			pass "$i -o dequant=bf16" "$(grep "^ok$TAB" "$WORK/$i.rep" | cut -f2)"
		else
			fail "$i -o dequant=bf16" "$(cat "$WORK/$i.rep" "$WORK/$i.rep.err" | head -n 3)"
		fi
		stop_daemon "$mnt"
	else
		fail "$i -o dequant=bf16" "not mounted: $(head -n 1 "$WORK/$i.err")"
	fi
done
fi

if want refused; then
: >"$WORK/r.det"
for c in "int8 block.pt not bf16, float16" "bf16 plain.pt no scaled float8 weight"; do
	set -- $c
	t=$1 f=$2
	shift 2
	mkdir -p "$WORK/mnt/r"
	run_limited 30 "$PTFS" -o "dequant=$t" "$WORK/gen/in/$f" "$WORK/mnt/r" \
		>/dev/null 2>"$WORK/r.err"
	rc=$?
	case $rc:$(cat "$WORK/r.err") in
	2:"ptfs: "*"$*"*) ;;
	*) echo "-o dequant=$t $f: exit $rc: $(head -n 2 "$WORK/r.err")" >>"$WORK/r.det" ;;
	esac
	[ "$(wc -l <"$WORK/r.err")" -eq 1 ] ||
		echo "-o dequant=$t $f: $(wc -l <"$WORK/r.err") lines" >>"$WORK/r.det"
	is_mounted "$WORK/mnt/r" && { echo "mounted anyway" >>"$WORK/r.det"; unmount "$WORK/mnt/r"; }
done
if [ -s "$WORK/r.det" ]; then
	fail "refused" "$(head -n 1 "$WORK/r.det")" "$WORK/r.det"
else
	pass "refused" "a bad TYPE and a checkpoint without scaled weights: one line, exit 2"
fi
fi

conclude
