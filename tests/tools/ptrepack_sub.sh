#!/bin/sh
# ptrepack_sub.sh VERSION PTREPACK - ptrepack IN OUT KEYPATH... (a subtree
# as the new root) and --repickle of a protocol-5 pickle, checked by
# torch VERSION (1.13: /usr/bin/python3; 2: the scripts/torch2-root.sh
# chroot).  ptrepack_sub.py writes a training checkpoint with that torch
# and compares torch.load of each output with what torch.save of the same
# object gives: container type, _metadata, ties and views, only the
# storages used, and data.pkl byte for byte the one torch.save writes.
# Then refusals: one line, exit 2, no output file.
#
# Exit 0 passed, 1 failed (77 only with PT_ALLOW_SKIP_TORCH=1 or
# PT_NO_TORCH2=1 and no torch).  Last line "N passed, N failed".
set -u
[ $# -eq 2 ] || { echo "usage: sh $0 1.13|2 PTREPACK" >&2; exit 2; }
version=$1 ptrepack=$2
here=$(cd "$(dirname "$0")" && pwd) || exit 1
case $ptrepack in /*) ;; *) ptrepack=$(pwd)/$ptrepack ;; esac

. "$here/../torch/select.sh"
torch_select "$version" "" ptrepack-sub
# ptrepack_sub.py's calls go to one python (tests/fs/lib/begin.sh's script
# server), which imports torch once
fs=$here/../fs WORK=$work
. "$fs/lib/begin.sh"
trap 'fs_tserve_stop; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

fs_py ptrepack_sub.py
fs_pycall ptrepack_sub.py gen "$inner" >"$work/gen.log" 2>&1 || {
	echo "ptrepack_sub.py gen failed under torch $version:" >&2
	grep -v "UCX\|cpuinfo" "$work/gen.log" | tail -n 5 >&2
	exit 1
}

# case_ CASE OPTIONS... KEYPATH...: ptrepack OPTIONS train.pt CASE.out
# KEYPATH..., then ptrepack_sub.py check CASE
case_() {
	c=$1
	shift
	if ! "$ptrepack" "$@" 2>"$work/err"; then
		bad "$c: ptrepack $*: $(cat "$work/err")"
	elif fs_pycall ptrepack_sub.py check "$inner" "$c" 2>"$work/check.err"
	then
		ok "$c: torch $version loads what torch.save would write"
	else
		bad "$c: $(grep -v "UCX\|cpuinfo" "$work/check.err" | tail -n 1)"
	fi
}
case_ model "$work/train.pt" "$work/model.out" model
case_ several "$work/train.pt" "$work/several.out" model ema \
	optimizer/state/0
case_ tensor "$work/train.pt" "$work/tensor.out" model/fc.weight
case_ st --format safetensors "$work/train.pt" "$work/st.out" model

# --repickle of a protocol-5 pickle: protocol 2 (ptrepack(1) says why),
# and one note saying so
case_ proto5 --repickle "$work/proto5.pt" "$work/proto5.out"
grep -q "^ptrepack: note: data.pkl was pickle protocol 5, written as protocol 2" \
	"$work/err" && [ "$(wc -l <"$work/err")" = 1 ] &&
	ok "protocol 5 -> 2 is said in one note" ||
	bad "no note on the protocol: $(cat "$work/err")"
"$ptrepack" --repickle "$work/train.pt" "$work/p2.out" 2>"$work/err"
[ ! -s "$work/err" ] && ok "no note for a protocol-2 pickle" ||
	bad "a note for protocol 2: $(cat "$work/err")"

# refusals: one line, exit 2, nothing written
refuse() {
	what=$1 pat=$2 out=$3
	shift 3
	"$ptrepack" "$@" >"$work/out" 2>"$work/err"
	rc=$?
	if [ $rc = 2 ] && [ "$(wc -l <"$work/err")" = 1 ] &&
	   grep -q -- "$pat" "$work/err" && [ ! -e "$out" ]; then
		ok "$what: refused in one line, nothing written"
	else
		bad "$what: exit $rc, $(cat "$work/err"), $(ls "$out" 2>&1)"
	fi
}
refuse "bad key path" "train.pt: model/nope: no such key path" "$work/x.pt" \
	"$work/train.pt" "$work/x.pt" model/nope
refuse "a key path given twice" "model: key path given twice" "$work/x.pt" \
	"$work/train.pt" "$work/x.pt" model model
refuse "a value as a safetensors root" "epoch: an int, not a dict of tensors" \
	"$work/x.safetensors" "$work/train.pt" "$work/x.safetensors" epoch
refuse "a key path for a DCP output" "KEYPATH: not for a DCP output" \
	"$work/d" "$work/train.pt" "$work/d/" model

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
