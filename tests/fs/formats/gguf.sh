#!/bin/sh
# GGUF files through the tools, a read-only mount and ptrepack, against
# gguf-py (docs/user-guide.md, "GGUF files").  torch 2.x only: gguf-py
# needs the numpy of the torch 2.x root (scripts/torch2-root.sh installs
# python3-gguf there); the tools themselves use neither.
#
#   usage: sh tests/fs/formats/gguf.sh [-k CASE] VERSION PTFS PTLS
#
# gguf_check.py gen writes, with gguf-py's GGUFWriter, all.gguf (every
# key/value type, arrays of strings, names of odd lengths, F32 F16 F64
# I32 BF16 and ten block types: Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K..Q6_K),
# align64.gguf, big.gguf (big-endian) and plain.gguf, and 18 hostile
# headers byte by byte.  Cases:
#
#   listing   ptls --json and ptdump --json of each: every key/value and
#             tensor as GGUFReader reads it; ptverify ok
#   mount     -o ro: bytes, user.ggml_type/ggml_shape, the .npy and .txt
#             views dequantized bit for bit as gguf.quants.dequantize,
#             user.meta.*, writes EROFS, the file unchanged
#   edits     a writable mount of a copy of all.gguf and big.gguf: its
#             key/values set through .ptfs/gguf/KEY and setfattr, added,
#             removed, bad values refused at close (EINVAL); ptfs umount
#             writes them back with nothing else changed (GGUFReader)
#   diff      ptdiff of all.gguf against torch.save of its values: equal
#             with --ignore-dtype, the codings reported without it, a
#             changed value found
#   repack    ptrepack to safetensors (block types to bfloat16 by default)
#             and to .pt with --dtype float32: torch's values bit for bit;
#             torch 1.13 (/usr/bin/python3) loads the .pt to those values
#   hostile   each header refused by ptls, ptverify and ptfs with one
#             line naming the problem (and an offset), nothing mounted
#
# Prints one line per check and "N passed, N failed".  Exit 0 all passed,
# 1 a failure, 77 skipped (VERSION 1.13; no /dev/fuse; no gguf-py).  Never
# leaves a mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS" 3 3 "$@"
PTFS=$2 ptls=$3
if [ "$version" != 2 ]; then
	echo "gguf-py, the oracle, runs under the torch 2.x root only: skipping"
	exit 77
fi
bin=$(dirname "$ptls")
ptdump=$bin/ptdump ptdiff=$bin/ptdiff ptverify=$bin/ptverify
ptrepack=$bin/ptrepack
fs_progs PTFS ptls ptdump ptdiff ptverify ptrepack
fs_need_fuse
fs_torch "" ptfs-gguf
if ! chroot "$root" python3 -c 'import importlib.util as u, sys
sys.exit(not u.find_spec("gguf"))' 2>/dev/null; then
	echo "no gguf-py (python3-gguf) in $root: skipping"
	exit 77
fi
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/py" "$WORK/g" || exit 1
fs_py gguf_check.py gguf_gen.py

# pycheck NAME FUNC ARG...: gguf_check.py FUNC, one pass or fail line
pycheck() {
	_name=$1
	shift
	if fs_pyrun c.rep "$@"; then
		pass "$_name" "$(grep "^ok$TAB" "$WORK/c.rep" | cut -f2)"
	else
		fail "$_name" "$(cat "$WORK/c.rep" "$WORK/c.rep.err" | head -n 3)" \
			"$WORK/c.rep"
	fi
}

pycheck "generate" gen "$inner/g"
files="all align64 big plain"

# ------------------------------------------------------ the tools
if want listing; then
for n in $files; do
	f=$WORK/g/$n.gguf
	det=$WORK/$n.det
	: >"$det"
	run_limited 60 "$ptls" --json "$f" >"$WORK/g/$n.ls.json" 2>"$det.err" ||
		echo "ptls --json: exit $?: $(head -n 1 "$det.err")" >>"$det"
	run_limited 60 "$ptdump" --json "$f" >"$WORK/g/$n.dump.json" \
		2>"$det.err" ||
		echo "ptdump --json: exit $?: $(head -n 1 "$det.err")" >>"$det"
	out=$(run_limited 60 "$ptverify" "$f" 2>&1) ||
		echo "ptverify: exit $?: $out" >>"$det"
	if [ -s "$det" ]; then
		fail "$n: ptls, ptdump, ptverify" "$(head -n 1 "$det")" "$det"
		continue
	fi
	pycheck "$n: ptls, ptdump against gguf-py" listing "$inner/g" "$n"
done
fi

# ------------------------------------------------------ a read-only mount
if want mount; then
for n in $files; do
	mnt=$WORK/mnt/$n
	if start_daemon "$WORK/g/$n.gguf" "$mnt" "$WORK/$n.err" -o ro; then
		pycheck "$n: mounted" mount "$inner/g" "$n" "$inner/mnt/$n"
		stop_daemon "$mnt"
	else
		fail "$n: mounted" "not mounted: $(head -n 1 "$WORK/$n.err")"
	fi
done
fi

# ------------------------------------------------------ metadata edits
if want edits; then
for n in all big; do
	cp "$WORK/g/$n.gguf" "$WORK/g/$n.edit.gguf"
	mnt=$WORK/mnt/e$n
	if ! start_daemon "$WORK/g/$n.edit.gguf" "$mnt" "$WORK/e$n.err"; then
		fail "$n: metadata edits" "not mounted: $(head -n 1 "$WORK/e$n.err")"
		continue
	fi
	pycheck "$n: metadata edits" edit "$inner/g" "$n" "$inner/mnt/e$n"
	if run_limited 60 "$PTFS" umount "$mnt" >"$WORK/e$n.out" 2>&1; then
		pycheck "$n: metadata written back" edited "$inner/g" "$n"
	else
		fail "$n: metadata written back" "ptfs umount: $(head -n 1 "$WORK/e$n.out")"
	fi
	stop_daemon "$mnt"
done
fi

# ------------------------------------------------------ ptdiff
if want diff; then
g=$WORK/g
out=$(run_limited 60 "$ptdiff" --ignore-dtype "$g/all.gguf" "$g/all.pt" 2>&1)
rc=$?
case $rc:$out in
0:*"0 differences"*) pass "ptdiff --ignore-dtype" "$(printf '%s\n' "$out" | tail -n 1)" ;;
*)	fail "ptdiff --ignore-dtype" "exit $rc: $(printf '%s\n' "$out" | head -n 2)" ;;
esac
out=$(run_limited 60 "$ptdiff" "$g/all.gguf" "$g/all.pt" 2>&1)
rc=$?
case $rc:$out in
1:*"q.q8_0: coding Q8_0 vs float32"*"10 differences"*)
	pass "ptdiff: codings" "exit 1, 10 tensors Q8_0 .. Q6_K vs float32" ;;
*)	fail "ptdiff: codings" "exit $rc: $(printf '%s\n' "$out" | tail -n 2)" ;;
esac
out=$(run_limited 60 "$ptdiff" --ignore-dtype "$g/all.gguf" "$g/all.bad.pt" 2>&1)
rc=$?
case $rc:$out in
1:*"q.q4_k"*"1 difference"*)
	pass "ptdiff: a changed value" "exit 1: $(printf '%s\n' "$out" | head -n 1)" ;;
*)	fail "ptdiff: a changed value" "exit $rc: $(printf '%s\n' "$out" | head -n 3)" ;;
esac
out=$(run_limited 60 "$ptdiff" "$g/all.gguf" "$g/big.gguf" 2>&1)
rc=$?
case $rc:$out in
0:*"0 differences"*) pass "ptdiff: little- and big-endian" "$(printf '%s\n' "$out" | tail -n 1)" ;;
*)	fail "ptdiff: little- and big-endian" "exit $rc: $(printf '%s\n' "$out" | head -n 2)" ;;
esac
fi

# ------------------------------------------------------ ptrepack
if want repack; then
g=$WORK/g
: >"$WORK/rp.det"
for n in all align64; do
	run_limited 60 "$ptrepack" "$g/$n.gguf" "$g/$n.bf16.safetensors" \
		>"$WORK/rp.out" 2>&1 ||
		echo "ptrepack to safetensors: exit $?: $(head -n 1 "$WORK/rp.out")" >>"$WORK/rp.det"
	grep -q "note: 10 gguf tensors decoded to bfloat16" "$WORK/rp.out" ||
		echo "ptrepack said: $(head -n 1 "$WORK/rp.out")" >>"$WORK/rp.det"
	run_limited 60 "$ptrepack" --dtype float32 "$g/$n.gguf" "$g/$n.f32.pt" \
		>"$WORK/rp.out" 2>&1 ||
		echo "ptrepack --dtype float32: exit $?: $(head -n 1 "$WORK/rp.out")" >>"$WORK/rp.det"
	if [ -s "$WORK/rp.det" ]; then
		fail "$n: ptrepack" "$(head -n 1 "$WORK/rp.det")" "$WORK/rp.det"
	else
		pycheck "$n: ptrepack" repack "$inner/g" "$n"
	fi
	: >"$WORK/rp.det"
done
# torch 1.13 loads what ptrepack made of a GGUF: the values torch 2.x saved
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	if out=$(run_limited 120 /usr/bin/python3 -c 'import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert list(a) == list(b), (list(a), list(b))
for k in a:
    x, y = a[k], b[k]
    assert x.shape == y.shape and torch.equal(x.double(), y.double()), k
print(torch.__version__, len(a))' "$g/all.f32.pt" "$g/all.pt" 2>&1); then
		pass "torch 1.13 loads the .pt" "torch $out tensors, the values gguf-py reads"
	else
		fail "torch 1.13 loads the .pt" "$(printf '%s\n' "$out" | tail -n 2)"
	fi
else
	skip "torch 1.13 loads the .pt" "no torch in /usr/bin/python3"
fi
fi

# ------------------------------------------------------ hostile headers
if want hostile; then
h=$WORK/g/hostile
: >"$WORK/h.det"
n=0
while IFS="$TAB" read -r name why; do
	f=$h/$name.gguf
	n=$((n + 1))
	for t in "$ptls" "$ptverify"; do
		out=$(run_limited 30 "$t" "$f" 2>&1)
		rc=$?
		case $rc in
		2) ;;
		*) echo "$name: ${t##*/} exit $rc (want 2): $out" >>"$WORK/h.det" ;;
		esac
		case $out in
		*"$why"*) ;;
		*) echo "$name: ${t##*/} said '$out', not '$why'" >>"$WORK/h.det" ;;
		esac
		[ "$(printf '%s\n' "$out" | wc -l)" -le 2 ] ||
			echo "$name: ${t##*/}: more than one line: $out" >>"$WORK/h.det"
	done
	mkdir -p "$WORK/mnt/h"
	run_limited 30 "$PTFS" "$f" "$WORK/mnt/h" >/dev/null 2>"$WORK/h.err"
	rc=$?
	case $rc:$(cat "$WORK/h.err") in
	0:*) echo "$name: ptfs mounted it" >>"$WORK/h.det" ;;
	*:"ptfs: $f: "*"$why"*) ;;
	*) echo "$name: ptfs exit $rc: $(head -n 2 "$WORK/h.err")" >>"$WORK/h.det" ;;
	esac
	[ "$(wc -l <"$WORK/h.err")" -eq 1 ] ||
		echo "$name: ptfs printed $(wc -l <"$WORK/h.err") lines" >>"$WORK/h.det"
	if is_mounted "$WORK/mnt/h"; then
		echo "$name: mounted anyway" >>"$WORK/h.det"
		unmount "$WORK/mnt/h"
	fi
done <"$h/expect"
if [ -s "$WORK/h.det" ]; then
	fail "hostile headers" "$(head -n 1 "$WORK/h.det")" "$WORK/h.det"
else
	pass "hostile headers" "$n refused by ptls, ptverify and ptfs with one line each"
fi
fi

conclude
