#!/bin/sh
# ptrepack_fp8.sh VERSION PTREPACK - ptrepack --dequant and --quant
# checked against torch 2.x bit for bit (torch 1.13 has no float8: VERSION
# 1.13 skips, 77).  ptrepack_fp8_gen.py writes, with a fresh seed, block-
# scaled float8 checkpoints (DeepSeek-V3's layout, edge blocks, zero
# blocks, NaN and infinities in weights and scales, e4m3fn and e5m2),
# compressed-tensors ones (per-tensor and per-channel weight_scale,
# input_scale) and plain ones for --quant, each as .pt, .safetensors, a
# Hugging Face folder and a DCP directory, and what torch computes for
# them.  Every input goes into every output format; ptrepack_fp8_check.py
# compares torch's reading of each output with torch's result byte for
# byte (keys, dtypes, shapes, NaN patterns, a folder's index and
# config.json).  Then what ptrepack says, and refusals: one line, exit 2,
# no OUT.
#
# Exit 0 passed, 1 failed, 77 skipped.  Last line "N passed, N failed".
set -u
[ $# -eq 2 ] || { echo "usage: sh $0 1.13|2 PTREPACK" >&2; exit 2; }
version=$1 ptrepack=$2
here=$(cd "$(dirname "$0")" && pwd) || exit 1
case $ptrepack in /*) ;; *) ptrepack=$(pwd)/$ptrepack ;; esac
if [ "$version" != 2 ]; then
	echo "torch $version has no float8 dtypes: the FP8 checks need torch 2.x"
	exit 77
fi

. "$here/../torch/select.sh"
torch_select "$version" "" ptrepack-fp8
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

seed=${PT_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
cp "$here/ptrepack_fp8_gen.py" "$here/ptrepack_fp8_check.py" "$work/" ||
	exit 1
run_py "$inner/ptrepack_fp8_gen.py" "$inner/gen" "$seed" \
	>"$work/gen.log" 2>&1 || {
	echo "ptrepack_fp8_gen.py failed under torch $version:" >&2
	grep -v "UCX\|cpuinfo\|Warning\|return func" "$work/gen.log" |
		tail -n 5 >&2
	exit 1
}
grep "^generated" "$work/gen.log"
in=$work/gen/in want=$inner/gen/want
mkdir "$work/out" || exit 1

man=$work/manifest.tsv
: >"$man"
# conv IN OUT WANT [CONFIG [NAN]] -- OPTIONS...: ptrepack OPTIONS gen/in/IN
# out/OUT (OUT ending in _hf: a Hugging Face folder of 100 KB shards,
# _dcp: a DCP directory), listed
# for the check against gen/want/WANT
conv() {
	src=$1 dst=$2 w=$3 cfg= nan=
	shift 3
	[ "$1" = -- ] || { cfg=$1; shift; }
	[ "$1" = -- ] || { nan=$1; shift; }
	shift
	case $dst in
	*_hf) fmt="--max-shard-size 100KB" ;;
	*_dcp) fmt="--format dcp" ;;
	*) fmt= ;;
	esac
	if "$ptrepack" $fmt "$@" "$in/$src" "$work/out/$dst" \
		>"$work/out/$dst.out" 2>"$work/out/$dst.err"; then
		printf '%s\t%s\t%s\t%s\n' "$inner/out/$dst" "$want/$w" \
			"${cfg:+$want/$cfg}" "${nan:+$want/$nan}" >>"$man"
	else
		bad "ptrepack $* $src $dst: $(cat "$work/out/$dst.err")"
	fi
}

for i in block.pt block.safetensors block_hf block_dcp; do
	for o in pt safetensors hf dcp; do
		case $o in hf|dcp) x=_$o ;; *) x=.$o ;; esac
		c=
		[ "$i$o" = block_hfhf ] && c=config_block.json
		conv "$i" "deq-$i$x" dequant_block_bf16.pt $c -- \
			--dequant bf16
	done
done
# --no-crc reads nothing before the weights are re-typed: a DCP chunk
# must still be found as float8 (it was refused as "not one contiguous
# bfloat16 tensor")
conv block_dcp deq-nocrc.pt dequant_block_bf16.pt -- --no-crc --dequant bf16
# for float16 and float32 a NaN's bits survive: where weight and scale
# are both NaN any NaN is right (ptrepack_fp8_gen.py, nan_both.pt)
conv block.safetensors deq-fp16.safetensors dequant_block_fp16.pt "" \
	nan_both.pt -- --dequant fp16
conv block.pt deq-fp32.pt dequant_block_fp32.pt "" nan_both.pt -- \
	--dequant float32
conv ct.pt deq-ct.pt dequant_ct_bf16.pt -- --dequant bfloat16
conv ct.safetensors deq-ct_hf dequant_ct_bf16.pt -- --dequant bf16
for i in plain.pt plain.safetensors plain_hf plain_dcp; do
	for o in pt hf dcp; do
		case $o in hf|dcp) x=_$o ;; *) x=.$o ;; esac
		conv "$i" "q-$i$x" quant_plain_128.pt -- --quant fp8-block
	done
done
conv plain.safetensors q-64.safetensors quant_plain_64.pt -- \
	--quant fp8-block:64
# round trip: the quantized file dequantized again
cp "$work/out/q-plain.safetensors.pt" "$in/q.pt" 2>/dev/null &&
	conv q.pt rt.safetensors roundtrip.pt -- --dequant bf16

run_checks ptrepack_fp8_check.py manifest.tsv

# said WHAT FILE PATTERN: FILE (a run's .out or .err) has PATTERN
said() {
	if grep -q -- "$3" "$work/out/$2"; then
		ok "$1"
	else
		bad "$1: no '$3' in $2: $(cat "$work/out/$2")"
	fi
}
said "summary line" deq-fp32.pt.out \
	"^3 weights dequantized to float32, 3 scale tensors dropped"
said "input_scale dropped too" deq-ct.pt.out \
	"^4 weights dequantized to bfloat16, 6 scale tensors dropped"
said "index change said" deq-block_hf_hf.err \
	"block_hf_hf/model.safetensors.index.json: 3 scale names left out"
said "config change said" deq-block_hf_hf.err \
	"block_hf_hf/config.json: quantization_config removed"
said "quant summary" q-plain.pt.pt.out \
	"^3 weights quantized to float8_e4m3fn in 128x128 blocks, 3 weight_scale_inv added"
"$ptrepack" -v --dequant bf16 "$in/block.safetensors" "$work/v.pt" \
	>"$work/out/v.out" 2>&1
said "-v names each pair" v.out \
	"^model.layers.0.self_attn.q_proj.weight: float8_e4m3fn (300, 200) x model.layers.0.self_attn.q_proj.weight_scale_inv (a scale per 128x128 block) -> bfloat16"
"$ptrepack" -v --quant fp8-block --only '*up_proj*' \
	"$in/plain.safetensors" "$work/o.safetensors" >"$work/out/o.out" 2>&1
said "--only picks" o.out "^1 weight quantized"

# refuse WANT ARGS...: ptrepack ARGS... OUT refused, WANT named, no OUT
refuse() {
	want=$1
	shift
	refused "$want" "$work/no.pt" "$ptrepack" "$@"
}
refuse "v.weight_scale_inv: shape (2, 1) does not fit weight (100, 70)" \
	--dequant bf16 "$in/bad_shape.safetensors"
refuse "v.weight_scale_inv: the scale of .* is bfloat16, not float32" \
	--dequant bf16 "$in/bad_dtype.safetensors"
refuse "v.weight: is bfloat16, not float8" --dequant bf16 \
	"$in/bad_weight.safetensors"
refuse "x.weight_scale_inv: a scale with no tensor x.weight" \
	--dequant bf16 "$in/bad_alone.safetensors"
refuse "a.weight_scale: shape (4,) does not fit weight (8, 4)" \
	--dequant bf16 "$in/bad_ctshape.safetensors"
refuse "no scaled float8 weight" --dequant bf16 "$in/plain.pt"
refuse "no scaled float8 weight matches" --dequant bf16 --only 'x*' \
	"$in/block.pt"
refuse "not bf16, float16" --dequant int8 "$in/block.pt"
refuse "not fp8-block" --quant fp8-tensor "$in/plain.pt"
refuse "not a number from 1 to 65536" --quant fp8-block:0 "$in/plain.pt"
refuse "once for each" --quant fp8-block --dequant bf16 "$in/plain.pt"
refuse "once for each" --quant fp8-block --dtype float16 "$in/plain.pt"
refuse "float8 already" --quant fp8-block --only '*q_proj.weight' \
	"$in/block.pt"
refuse "not 2-d" --quant fp8-block --only '*norm*' "$in/plain.pt"
refuse "weight_scale_inv is there already" --quant fp8-block \
	--only '*weight' "$in/bad_weight.safetensors"
refuse "b.weight: shares its storage with a.weight" --dequant bf16 \
	"$in/bad_tie.pt"
refuse "y.weight: shares its storage with x.weight" --quant fp8-block \
	--only '[xy].weight' "$in/bad_tie.pt"
rm -rf "$work/no_hf"
"$ptrepack" --format hf --dequant bf16 "$in/bad_shape.safetensors" \
	"$work/no_hf" >/dev/null 2>&1
if [ $? = 2 ] && [ ! -e "$work/no_hf" ] &&
   [ -z "$(ls -A "$work" | grep '^\.')" ]; then
	ok "a refused folder output leaves nothing"
else
	bad "a refused folder output left $(ls -A "$work")"
fi

echo "seed $seed (PT_SEED=$seed repeats this run)"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
