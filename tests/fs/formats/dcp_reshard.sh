#!/bin/sh
# ptrepack --ranks M IN OUT/: a DCP directory as M ranks would save it
# holding each tensor as Shard(0), checked against torch 2.x itself (real
# dcp.save and dcp.load by M gloo ranks on CPU: dcp_reshard_check.py).
#
#   usage: sh tests/fs/formats/dcp_reshard.sh VERSION PTREPACK
#
#   cut M       (M = 2, 3: 3 cuts unevenly) sd.pt into one/ (one rank),
#               one/ into out-M/: its .metadata as a real dcp.save's by M
#               ranks (every key's chunk boxes, types, properties, the
#               orders, which file holds each item, the files); dcp.load
#               under M ranks into Shard(0) DTensors: each rank's piece
#               and full_tensor() are sd.pt's bytes; dcp.load from one
#               process into plain tensors
#   again       out-2/ cut again into 3 ranks: the chunk boxes of the real
#               3-rank save; orders and files as torch's planner gives
#               them for out-2/ loaded (dcp_to_torch_save()'s key order)
#   planner     10 ranks, sd.pt and tie.pt (empty pieces that tie in
#               dedup_save_plans): as torch's own planner makes them
#   one rank    --ranks 1: byte for byte what no --ranks writes
#   refusals    --ranks with a .pt output, --ranks 0: usage, exit 2; a
#               tuple holding a tensor (met while writing) and an OUT not
#               empty: one line, exit 2, OUT as it was, no temporary left
#
# Exit 0 all passed, 1 a failure, 77 skipped (VERSION 1.13; PT_NO_TORCH2=1).
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTREPACK" 2 2 "$@"
ptrepack=$2
if [ "$version" != 2 ]; then
	echo "dcp.save and dcp.load by several ranks are torch 2.x's: skipping"
	exit 77
fi
fs_progs ptrepack
fs_torch "" ptfs-dcpcut
PTFS=/bin/false
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
DET=$WORK/details
: >"$DET"
fs_py dcp_reshard_check.py

# ranks LABEL M OUT: the M-rank save and load, a process of its own (the
# script server cannot spawn ranks)
ranks() {
	if run_limited 300 chroot "$root" python3 \
	    "$inner/py/dcp_reshard_check.py" ranks "$inner/d" "$2" "$3" \
	    >"$WORK/rk" 2>"$WORK/rk.err"; then
		pass "$1" "$(grep "^ok$TAB" "$WORK/rk" | cut -f2)"
	else
		grep -v 'UCX\|gloo\|Gloo\|cpuinfo' "$WORK/rk.err" >>"$WORK/rk"
		fail "$1" "$(head -n 1 "$WORK/rk")" "$WORK/rk"
	fi
}
# repack LABEL ARG...: ptrepack ARG..., pass, or fail with its message
repack() {
	_l=$1
	shift
	run_limited 60 "$ptrepack" "$@" >"$WORK/rp.txt" 2>&1 ||
		note "ptrepack $*: exit $?: $(head -n 1 "$WORK/rp.txt")"
	check "$_l" "ptrepack $(echo "$*" | sed "s|$WORK/d/||g")"
}

d=$WORK/d
fs_pycheck "generated" gen "$inner/d" || { summary; exit 1; }
repack "one rank" "$d/sd.pt" "$d/one/"

if want cut; then
for m in 2 3; do
	repack "cut $m: written" --ranks "$m" "$d/one" "$d/out-$m/"
	ranks "cut $m: dcp.load under $m ranks" "$m" "$inner/d/out-$m"
	fs_pycheck "cut $m: .metadata as dcp.save's" meta "$inner/d/ref-$m" \
		"$inner/d/out-$m"
	fs_pycheck "cut $m: dcp.load from one process" load "$inner/d/out-$m"
done
fi

if want again; then
	# a DCP input of several chunks, gathered piece by piece; its keys
	# come in its state_dict_metadata's order (as dcp_to_torch_save()
	# gives them), so the orders and the files are the planner's for that
	[ -d "$d/out-2" ] ||
		run_limited 60 "$ptrepack" --ranks 2 "$d/one" "$d/out-2/" >/dev/null
	[ -d "$d/ref-3" ] || ranks "again: dcp.save by 3 ranks" 3 "$inner/d/one"
	repack "again: written" --ranks 3 "$d/out-2" "$d/again/"
	fs_pycheck "again: boxes as dcp.save's" boxes "$inner/d/ref-3" \
		"$inner/d/again"
	fs_pycheck "again: as torch's planner" plan "$inner/d/out-2" \
		"$inner/d/again" 3
	fs_pycheck "again: dcp.load from one process" load "$inner/d/again"
fi

if want planner; then
	for f in sd tie; do
		repack "planner $f: written" --ranks 10 "$d/$f.pt" "$d/p10-$f/"
		fs_pycheck "planner $f: as torch's" plan "$inner/d/$f.pt" \
			"$inner/d/p10-$f" 10
	done
fi

if want one_rank; then
	run_limited 60 "$ptrepack" --ranks 1 "$d/sd.pt" "$d/r1/" \
		>"$WORK/rp.txt" 2>&1 || note "ptrepack: $(head -n 1 "$WORK/rp.txt")"
	diff -r "$d/one" "$d/r1" >/dev/null 2>&1 ||
		note "--ranks 1 differs from no --ranks"
	check "one rank: --ranks 1" "byte for byte what no --ranks writes"
fi

if want refusals; then
	# refuse LABEL RC EXPECTED-TEXT OUT ARG...: exit RC, the first line
	# naming it, OUT as it was, no temporary beside it
	refuse() {
		_l=$1 _want=$2 _t=$3 _o=$4
		shift 4
		_before=$(ls -A "$_o" 2>/dev/null | sort | tr '\n' ' ')
		_was=$([ -e "$_o" ] && echo yes)
		run_limited 60 "$ptrepack" "$@" >"$WORK/r.out" 2>"$WORK/r.err"
		_rc=$?
		[ "$_rc" = "$_want" ] || note "exit $_rc"
		head -n 1 "$WORK/r.err" | grep -q -- "$_t" ||
			note "$(head -n 2 "$WORK/r.err")"
		[ "$_rc" != 2 ] || [ "$_want" != 2 ] ||
			[ "$(grep -vc '^usage:\|^Try ' "$WORK/r.err")" = 1 ] ||
			note "more than one line: $(cat "$WORK/r.err")"
		[ "$([ -e "$_o" ] && echo yes)" = "$_was" ] &&
			[ "$(ls -A "$_o" 2>/dev/null | sort | tr '\n' ' ')" = "$_before" ] ||
			note "$_o changed"
		ls -a "$(dirname "$_o")" | grep -q "ptfs-new" &&
			note "a temporary was left beside $_o"
		check "refusal: $_l" "$(head -n 1 "$WORK/r.err")"
	}
	refuse "a .pt output" 2 "--ranks: only for a DCP output" "$d/x.pt" \
		--ranks 2 "$d/sd.pt" "$d/x.pt"
	refuse "0 ranks" 2 "--ranks 0: not a number of ranks" "$d/zero" \
		--ranks 0 "$d/sd.pt" "$d/zero/"
	refuse "a tuple holding a tensor" 2 "pair: a tuple holding a tensor" \
		"$d/bad" --ranks 3 "$d/bad.pt" "$d/bad/"
	mkdir -p "$d/full" && echo keep >"$d/full/keep" || exit 1
	refuse "OUT not empty" 2 "not empty" "$d/full" \
		--ranks 2 "$d/sd.pt" "$d/full/"
fi

summary
[ "$nfail" -eq 0 ]
