#!/bin/sh
# Jagged nested tensors (torch.nested.nested_tensor(..., layout=
# torch.jagged)) through the tools, a mount and write-back: torch 2.x only
# (torch 1.13 has no jagged layout; the tools themselves use no torch).
#
#   usage: sh tests/fs/formats/njt.sh [-k CASE] VERSION PTFS PTLS
#
# njt_check.py saves the file with torch 2.x and checks the results:
#
#   list      ptls and ptls --tree list each NJT as a directory of its
#             _values and _offsets tensors and its attributes, no unsafe
#             global (torch's weights-only loader takes NJTs); ptverify ok
#   mount     -o ro: _values and _offsets hold the tensors' bytes
#   edits     written back by ptfs umount, each from a fresh copy: a
#             write into w (data.pkl kept), w renamed (the pickle
#             written anew), the first value of nt/_values set to 42.0;
#             torch.load (also weights_only=True) gives equal NJTs
#
# Prints one line per check and "N passed, N failed".  Exit 0 all passed,
# 1 a failure, 77 skipped (VERSION 1.13; no /dev/fuse).  Never leaves a
# mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS" 3 3 "$@"
PTFS=$2 ptls=$3
if [ "$version" != 2 ]; then
	echo "torch $version has no jagged nested tensors: skipping"
	exit 77
fi
ptverify=$(dirname "$ptls")/ptverify
fs_progs PTFS ptls ptverify
fs_need_fuse
fs_torch "" ptfs-njt
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/py" "$WORK/n" || exit 1
fs_py njt_check.py
probe_fuse "$fs/../data/sample.pt" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

# check LABEL ARG...: the script with ARG..., pass or fail on its report
check() { fs_pycheck "$@"; }

check "generate" gen "$inner/n" || { summary; exit 1; }
f=$WORK/n/njt.pt

# ------------------------------------------------------ ptls, ptverify
if want list; then
run_limited 60 "$ptls" "$f" >"$WORK/ls.txt" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "^nt/_values  *float32  *(5, 2)" "$WORK/ls.txt" &&
   grep -q "^ni/_offsets  *int64  *(4,)" "$WORK/ls.txt" &&
   grep -q "^nt/_ragged_idx  *int  *= 1" "$WORK/ls.txt" &&
   ! grep -q "unsafe global" "$WORK/ls.txt"; then
	pass "ptls" "$(grep -c . "$WORK/ls.txt") lines, no unsafe global"
else
	fail "ptls" "exit $rc: $(head -n 2 "$WORK/ls.txt")" "$WORK/ls.txt"
fi
run_limited 60 "$ptls" --tree "$f" >"$WORK/tree.txt" 2>&1
if grep -q "^  nt/  *torch.nested._internal.nested_tensor.NestedTensor" \
	"$WORK/tree.txt"; then
	pass "ptls --tree" "nt/ is a NestedTensor directory"
else
	fail "ptls --tree" "$(head -n 3 "$WORK/tree.txt")" "$WORK/tree.txt"
fi
out=$(run_limited 60 "$ptverify" "$f" 2>&1)
case $? in
0)	pass "ptverify" "$out" ;;
*)	fail "ptverify" "$out" ;;
esac
fi

# ------------------------------------------------------ a read-only mount
if want mount; then
if start_daemon "$f" "$WORK/mnt/ro" "$WORK/ro.err" -o ro; then
	check "mount" mount "$inner/n" "$inner/mnt/ro"
	stop_daemon "$WORK/mnt/ro"
else
	fail "mount" "not mounted: $(head -n 1 "$WORK/ro.err")"
fi
fi

# ------------------------------------------------------ edits written back
# edit NAME: a fresh copy, the edit NAME through a mount, ptfs umount
edit() {
	cp "$f" "$WORK/n/$1.pt"
	mnt=$WORK/mnt/$1
	if ! start_daemon "$WORK/n/$1.pt" "$mnt" "$WORK/$1.err"; then
		fail "edit $1" "not mounted: $(head -n 1 "$WORK/$1.err")"
		return 1
	fi
	case $1 in
	w)	printf '\000\000\240\100' | dd of="$mnt/w" conv=notrunc \
			2>/dev/null ;;
	rename)	mv "$mnt/w" "$mnt/w2" ;;
	values)	printf '\000\000\050\102' | dd of="$mnt/nt/_values" \
			conv=notrunc 2>/dev/null ;;
	esac || echo "the edit failed" >"$WORK/$1.det"
	run_limited 60 "$PTFS" umount "$mnt" >"$WORK/$1.out" 2>&1 ||
		echo "ptfs umount: exit $?: $(head -n 1 "$WORK/$1.out")" >>"$WORK/$1.det"
	stop_daemon "$mnt"
	if [ -s "$WORK/$1.det" ]; then
		fail "edit $1" "$(head -n 1 "$WORK/$1.det")"
		return 1
	fi
	check "edit $1" loaded "$inner/n" "$inner/n/$1.pt" "$1"
}
if want edits; then
	for e in w rename values; do edit $e; done
	if cmp -s "$f" "$WORK/n/w.pt"; then
		fail "edit w" "the file did not change"
	fi
fi

conclude
