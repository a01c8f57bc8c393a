#!/bin/sh
# Per-rank shard sets (PREFIX_world_size_N_rank_R.pt, FSDP2 and DTensor
# state dicts saved on every rank) through the tools and a real mount
# (docs/design.md "Per-rank shard sets").
#
#   usage: sh tests/fs/formats/ranks.sh VERSION PTFS PTLS TESTENV
#
# The sets are written by torch 2.x once per build (the setup test
# fixtures_ranks: ranks_check.py gen, gloo process groups on CPU, one
# process a rank), with what full_tensor() of every DTensor gives under
# the same group beside them; copied here.  Under VERSION:
#
#   listed      ptls DIR and DIR/PREFIX_world_size_N_rank_*.pt, ptverify
#               ok (every rank file's records and CRC-32s; an FSDP1 set's
#               files each hold ShardedTensor's builtins.getattr, which
#               torch's weights-only loader refuses: that, and no more)
#   mounted     every tensor's bytes as full_tensor() has them, user.ranks
#               naming each piece's rank file; -o ro: EROFS, no rank
#               file changed
#   one file    ptrepack SET ONE.pt: torch.load gives full_tensor()'s
#               object (containers, keys, requires_grad, bytes), model and
#               Adam optimizer state, FSDP2's DTensors and FSDP1's
#               ShardedTensors (against their gather()); dt_4/ (Shard(0), Shard(1), uneven,
#               Replicate, 2x2 meshes, bfloat16) also into a .safetensors
#               and a DCP directory that ptdiff finds equal to the set
#   refusals    a missing rank, a rank file of another run, pieces that
#               overlap, a folder of two sets: one line, exit 2, nothing
#               written; a value the ranks disagree on: shown by ptls,
#               ptverify exit 1 naming it, the mount's note; a global
#               only rank 1's file holds: ptls --check and ptverify name
#               that file and its offset
#
# Exit 0 all passed, 1 a failure, 77 skipped (no FUSE; PT_NO_TORCH2=1).
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS TESTENV" 4 4 "$@"
PTFS=$2 ptls=$3 testenv=$4
sample=$fs/../data/sample.pt
fs_progs PTFS ptls
bin=$(dirname "$ptls")
ptverify=$bin/ptverify ptrepack=$bin/ptrepack ptdiff=$bin/ptdiff
fs_progs ptverify ptrepack ptdiff
fs_need_fuse
. "$fs/../torch/select.sh"
torch_select_writer "$version" "" ptfs-ranks
WORK=$work
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
DET=$WORK/details
: >"$DET"
mkdir -p "$WORK/mnt" || exit 1
fs_py ranks_check.py	# (one python for all its calls: begin.sh)
probe_fuse "$sample" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

# ------------------------------------------------------ the sets (torch 2.x)
if [ -f "$testenv/fixtures/ranks/evil_2/expected_model.pt" ] &&
    cp -a "$testenv/fixtures/ranks" "$gwork/out"; then
	pass "generated (torch 2.x)" "$(cat "$gwork/out/.stamp")"
else
	fail "generated (torch 2.x)" "no $testenv/fixtures/ranks: run the fixtures_ranks test"
	summary
	exit 1
fi
out=$gwork/out
py() {	# ranks_check.py under the torch being tested, paths as it sees them
	if [ "$version" = 1.13 ]; then
		fs_pycall ranks_check.py "$@"
	else
		_a= ; for _x in "$@"; do _a="$_a ${_x#"$groot"}"; done
		# shellcheck disable=SC2086
		fs_pycall ranks_check.py $_a
	fi
}
sums() { (cd "$1" && find . -type f | sort | xargs sha256sum) | sha256sum; }

for set in fsdp2_2:model fsdp2_2:optim fsdp2_4:model fsdp2_4:optim \
    dt_4:model fsdp1_2:model fsdp1_2:optim fsdp1_4:model; do
	n=${set%:*} p=${set#*:}
	w=$(ls "$out/$n" | sed -n 's/.*_world_size_\([0-9]*\)_rank_0.pt/\1/p' |
	    head -n 1)
	arg="$out/$n/${p}_world_size_${w}_rank_*.pt"
	[ "$n" = dt_4 ] && arg=$out/$n	# one set in the folder
	before=$(sums "$out/$n")
	# ------------------------------------------------------ the tools
	run_limited 60 "$ptls" "$arg" >"$WORK/ls.txt" 2>&1 ||
		note "ptls: exit $?: $(head -n 1 "$WORK/ls.txt")"
	grep -q "; ranks format" "$WORK/ls.txt" ||
		note "ptls: $(tail -n 1 "$WORK/ls.txt")"
	r=$(run_limited 60 "$ptverify" "$arg" 2>&1)
	rc=$?
	case $n in
	fsdp1_*)	# ShardedTensor's process-group state: getattr, per rank
		[ "$rc" = 1 ] || note "ptverify: exit $rc: $r"
		[ "$(printf '%s\n' "$r" | grep -c "_rank_[0-9]*.pt: unsafe global __builtin__.getattr")" = "$w" ] &&
			[ "$(printf '%s\n' "$r" | grep -vc "__builtin__.getattr")" = 1 ] ||
			note "ptverify: $r" ;;
	*)	[ "$rc" = 0 ] || note "ptverify: exit $rc: $r"
		case $r in *": ok (ranks, "*) ;; *) note "ptverify: $r" ;; esac ;;
	esac
	check "$n $p: listed" "ptls, ptverify ok (FSDP1: getattr in each rank file, and nothing else)"
	# ------------------------------------------------------ a mount
	m=$WORK/mnt/$n-$p
	# (-o ro: a write fails EROFS; ranks_write.sh writes into sets)
	if start_daemon "$arg" "$m" "$WORK/ptfs.err" -o ro; then
		py bytes "$out/$n/expected_$p.pt" "$m" >"$WORK/bytes.txt" 2>&1 ||
			note "bytes: $(head -n 1 "$WORK/bytes.txt")"
		case $n:$p in	# a DTensor's or ShardedTensor's file
		fsdp1_*:optim) f=$m/state/0.weight/exp_avg ;;
		*:optim) f=$m/state/0/exp_avg ;;
		dt_4:*) f=$m/grid ;;
		*) f=$m/0.weight ;;
		esac
		getfattr --only-values -n user.ranks "$f" 2>/dev/null |
			grep -q "file=${p}_world_size_${w}_rank_0.pt offset=" ||
			note "user.ranks of $f names no rank file"
		( : >"$f" ) 2>"$WORK/w.err" && note "a write into $f succeeded"
		grep -q "Read-only file system" "$WORK/w.err" ||
			note "a write: $(cat "$WORK/w.err")"
		stop_daemon "$m"
	else
		note "ptfs: $(head -n 1 "$WORK/ptfs.err")"
	fi
	check "$n $p: mounted" "$(tail -n 1 "$WORK/bytes.txt" 2>/dev/null) (full_tensor()'s bytes), -o ro EROFS"
	# ------------------------------------------------------ one file
	one=$out/$n-$p.pt
	run_limited 120 "$ptrepack" "$arg" "$one" >"$WORK/rp.txt" 2>&1 ||
		note "ptrepack: exit $?: $(head -n 1 "$WORK/rp.txt")"
	r=$(py check "$one" "$out/$n/expected_$p.pt" 2>&1 | tail -n 1)
	[ "$r" = same ] || note "torch.load: $r"
	[ "$(sums "$out/$n")" = "$before" ] || note "a rank file changed"
	check "$n $p: one file" "torch.load gives full_tensor()'s object"
done

# ------------------------------------------------------ safetensors, ptdiff
st=$out/dt_4.safetensors
if run_limited 60 "$ptrepack" --drop-values "$out/dt_4" "$st" \
    >"$WORK/st.txt" 2>&1; then
	# the tensors (the set's python values are dropped in the file)
	r=$(run_limited 60 "$ptdiff" "$out/dt_4" "$st" s0 s1 uneven tiny rep \
	    grid gridrep half 2>&1) || note "ptdiff: exit $?: $r"
else
	note "ptrepack to safetensors: $(head -n 1 "$WORK/st.txt")"
fi
check "dt_4: safetensors" "ptdiff finds the set and the file equal"
# a DCP directory, gathered from the ranks' pieces
if run_limited 60 "$ptrepack" "$out/dt_4" "$out/dt_4.dcp/" >"$WORK/dcp.txt" \
    2>&1; then
	r=$(run_limited 60 "$ptdiff" "$out/dt_4" "$out/dt_4.dcp" 2>&1) ||
		note "ptdiff: exit $?: $r"
	[ -f "$out/dt_4.dcp/.metadata" ] || note "no .metadata written"
else
	note "ptrepack to a DCP directory: $(head -n 1 "$WORK/dcp.txt")"
fi
check "dt_4: DCP directory" "ptdiff finds the set and the directory equal"

# ------------------------------------------------------ refusals
refuse() {	# LABEL DIR EXPECTED-TEXT: ptls, ptfs and ptrepack refuse it
	_before=$(sums "$2")
	for _tool in ptls ptrepack ptfs; do
		case $_tool in
		ptls) run_limited 60 "$ptls" "$2" >/dev/null 2>"$WORK/r.err" ;;
		ptrepack) run_limited 60 "$ptrepack" "$2" "$WORK/r.pt" \
			>/dev/null 2>"$WORK/r.err" ;;
		ptfs) mkdir -p "$WORK/mnt/r"
			run_limited 60 "$PTFS" "$2" "$WORK/mnt/r" \
			>/dev/null 2>"$WORK/r.err" ;;
		esac
		_rc=$?
		[ "$_rc" = 2 ] || [ "$_tool" = ptfs ] && [ "$_rc" != 0 ] ||
			note "$_tool: exit $_rc"
		[ "$(wc -l <"$WORK/r.err")" = 1 ] &&
			grep -q "$3" "$WORK/r.err" ||
			note "$_tool: $(head -n 2 "$WORK/r.err")"
		is_mounted "$WORK/mnt/r" && { unmount "$WORK/mnt/r"; note "$_tool: mounted"; }
	done
	[ ! -e "$WORK/r.pt" ] || note "ptrepack wrote $WORK/r.pt"
	[ "$(sums "$2")" = "$_before" ] || note "a file changed"
	check "refusal: $1" "$(head -n 1 "$WORK/r.err")"
}
b=$WORK/bad
mkdir -p "$b" || exit 1
cp -r "$out/fsdp2_2" "$b/miss" && rm "$b/miss/model_world_size_2_rank_1.pt" \
	"$b"/miss/optim_* && refuse "a missing rank" "$b/miss" "rank 1 of 2 is missing"
cp -r "$out/fsdp2_2" "$b/two" && rm "$b"/two/optim_* &&
	cp "$out/other_2/model_world_size_2_rank_1.pt" "$b/two/" &&
	refuse "two runs" "$b/two" "another dtype or global shape"
cp -r "$out/dt_4" "$b/ovl" && cp "$b/ovl/model_world_size_4_rank_0.pt" \
	"$b/ovl/model_world_size_4_rank_1.pt" &&
	refuse "overlapping pieces" "$b/ovl" "overlaps model_world_size_4_rank_0.pt"
refuse "two sets in a folder" "$out/fsdp2_2" "two sets (model_ and optim_)"

# ------------------------------------------------------ a disagreement
d=$out/drift_2
"$ptls" "$d" 2>&1 | grep -q "^# the ranks disagree 1 time" ||
	note "ptls shows no disagreement"
r=$("$ptverify" "$d" 2>&1)
[ $? = 1 ] || note "ptverify: exit not 1"
case $r in *"'epoch': rank 1 holds 4, rank 0 3"*) ;; *) note "ptverify: $r" ;; esac
if start_daemon "$d" "$WORK/mnt/drift" "$WORK/ptfs.err"; then
	[ "$(cat "$WORK/mnt/drift/epoch")" = 3 ] || note "epoch is not rank 0's"
	stop_daemon "$WORK/mnt/drift"
	grep -q "the ranks disagree 1 time" "$WORK/ptfs.err" ||
		note "the mount did not say so: $(cat "$WORK/ptfs.err")"
else
	note "ptfs: $(head -n 1 "$WORK/ptfs.err")"
fi
check "a disagreement" "shown by ptls and the mount, ptverify exit 1"

# ------------------------------------------------------ a rank's own global
e=$out/evil_2 r1=model_world_size_2_rank_1.pt
r=$("$ptls" --check "$e" 2>&1)
[ $? = 1 ] || note "ptls --check: exit not 1"
case $r in *"Evil"*"$r1 offset 0x"*) ;; *) note "ptls --check: $r" ;; esac
r=$("$ptverify" "$e" 2>&1)
[ $? = 1 ] || note "ptverify: exit not 1"
case $r in *"$r1: "*"Evil"*) ;; *) note "ptverify: $r" ;; esac
case $r in *DTensor*|*DeviceMesh*) note "ptverify: $r" ;; esac
check "an unsafe global of rank 1" "ptls --check and ptverify name its file"

conclude
