#!/bin/sh
# ptrepack --max-shard-size SIZE IN OUT/: any checkpoint written as a
# Hugging Face sharded folder, checked against transformers itself (torch
# 2.x only: transformers is in its root, Debian unstable's).
#
#   usage: sh tests/fs/formats/hf_reshard.sh VERSION PTREPACK TESTENV
#
#   cut SIZE      a tiny LlamaForCausalLM's state dict (tied embeddings)
#                 at 100KB (a tensor larger than SIZE: a shard of its own),
#                 200KB and 50MB (one file, no index): every file byte for
#                 byte what save_pretrained(max_shard_size=SIZE) writes,
#                 and the index-driven union (safe_open of every shard)
#   again         save_pretrained's 200KB folder cut at 100KB: the union,
#                 config.json and generation_config.json copied, and
#                 from_pretrained() of it gives the state dict, lm_head
#                 tied again
#   ranks         a 4-rank FSDP2 set (fixtures_ranks) at 0.1KB (100 bytes,
#                 3 shards, one a tensor larger than that): the union is
#                 what full_tensor() of each DTensor gives
#   refusals      a python value (without --drop-values), an OUT that is
#                 not empty: one line, exit 2, nothing written
#
# Without transformers in the root the cuts are checked by the union only
# (said so).  Exit 0 all passed, 1 a failure, 77 skipped (VERSION 1.13;
# PT_NO_TORCH2=1).
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTREPACK TESTENV" 3 3 "$@"
ptrepack=$2 testenv=$3
if [ "$version" != 2 ]; then
	echo "transformers is checked under torch 2.x only: skipping"
	exit 77
fi
fs_progs ptrepack
fs_torch "" ptfs-hfcut
PTFS=/bin/false
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
DET=$WORK/details
: >"$DET"
fs_py hf_reshard_check.py


h=$WORK/h
fs_pycheck "generated" gen "$inner/h" 100KB 200KB 50MB || { summary; exit 1; }
tf=false
[ -d "$h/ref-200KB" ] && tf=true
for size in 100KB 200KB 50MB; do
	o=$h/out-$size
	if ! run_limited 60 "$ptrepack" --max-shard-size "$size" "$h/sd.pt" \
	    "$o/" >"$WORK/rp.txt" 2>&1; then
		fail "cut $size" "ptrepack: $(head -n 1 "$WORK/rp.txt")"
		continue
	fi
	grep -q "1 tied name left out" "$WORK/rp.txt" ||
		note "no note of the tie: $(head -n 1 "$WORK/rp.txt")"
	check "cut $size: written" "the tie lm_head.weight left out, and said"
	if $tf; then
		fs_pycheck "cut $size: as save_pretrained" same "$inner/h/ref-$size" \
			"$inner/h/out-$size"
	fi
	fs_pycheck "cut $size: union" union "$inner/h/out-$size" "$inner/h/sd.pt"
done
if $tf; then
	# a folder cut again: its config.json and generation_config.json
	# come along, and from_pretrained() loads it as it is
	if run_limited 60 "$ptrepack" -v --max-shard-size 100KB "$h/ref-200KB/" \
	    "$h/re/" >"$WORK/rp.txt" 2>&1; then
		for f in config.json generation_config.json; do
			cmp -s "$h/ref-200KB/$f" "$h/re/$f" || note "$f not copied"
		done
		grep -q "2 other files copied" "$WORK/rp.txt" ||
			note "ptrepack -v: $(cat "$WORK/rp.txt")"
		check "a folder cut again: its files" "config.json, generation_config.json copied"
		# (a folder keeps no state-dict order: its keys are cut in the
		# order it lists them, so not as save_pretrained's 100KB)
		fs_pycheck "a folder cut again: union" union "$inner/h/re" \
			"$inner/h/sd.pt"
		fs_pycheck "loads" load "$inner/h/re" "$inner/h/sd.pt"
	else
		fail "a folder cut again" "ptrepack: $(head -n 1 "$WORK/rp.txt")"
	fi
else
	echo "transformers is not in $root: the cuts were checked by the union only"
fi

# ------------------------------------------------------ a rank set
if [ -f "$testenv/fixtures/ranks/fsdp2_4/expected_model.pt" ] &&
    cp -r "$testenv/fixtures/ranks/fsdp2_4" "$h/"; then
	if run_limited 60 "$ptrepack" --max-shard-size 0.1KB \
	    "$h/fsdp2_4/model_world_size_4_rank_*.pt" "$h/ranks/" \
	    >"$WORK/rp.txt" 2>&1; then
		fs_pycheck "ranks" union "$inner/h/ranks" \
			"$inner/h/fsdp2_4/expected_model.pt"
	else
		fail "ranks" "ptrepack: $(head -n 1 "$WORK/rp.txt")"
	fi
else
	fail "ranks" "no $testenv/fixtures/ranks: run the fixtures_ranks test"
fi

# ------------------------------------------------------ refusals
refuse() {	# LABEL EXPECTED-TEXT OUT ARG...
	_l=$1 _t=$2 _o=$3
	shift 3
	_before=$(ls -A "$_o" 2>/dev/null | sort | tr '\n' ' ')
	run_limited 60 "$ptrepack" "$@" >"$WORK/r.out" 2>"$WORK/r.err"
	_rc=$?
	[ "$_rc" = 2 ] || note "exit $_rc"
	[ "$(wc -l <"$WORK/r.err")" = 1 ] && grep -q "$_t" "$WORK/r.err" ||
		note "$(head -n 2 "$WORK/r.err")"
	[ "$(ls -A "$_o" 2>/dev/null | sort | tr '\n' ' ')" = "$_before" ] ||
		note "$_o changed"
	ls -a "$(dirname "$_o")" | grep -q "ptfs-new" &&
		note "a temporary was left beside $_o"
	check "refusal: $_l" "$(head -n 1 "$WORK/r.err")"
}
fs_pycall hf_reshard_check.py >/dev/null 2>&1 || :	# (the server runs)
run_py -c "import torch; torch.save({'w': torch.ones(2), 'epoch': 3},
'$inner/h/val.pt')" 2>/dev/null
refuse "a python value" "epoch: an int, not a tensor" "$h/val-out" \
	--max-shard-size 1KB "$h/val.pt" "$h/val-out/"
mkdir -p "$h/full" && : >"$h/full/keep"
refuse "a folder not empty" "not empty" "$h/full" \
	--max-shard-size 1KB "$h/sd.pt" "$h/full/"
run_limited 60 "$ptrepack" --drop-values --max-shard-size 1KB "$h/val.pt" \
	"$h/val-drop/" >/dev/null 2>"$WORK/r.err" ||
	note "--drop-values: $(head -n 1 "$WORK/r.err")"
[ -f "$h/val-drop/model.safetensors" ] || note "--drop-values wrote no model.safetensors"
grep -q "1 non-tensor value left out" "$WORK/r.err" ||
	note "--drop-values said: $(head -n 1 "$WORK/r.err")"
check "--drop-values" "the value left out, and said so"

conclude
