#!/bin/sh
# ptrepack_dtype.sh VERSION PTREPACK - ptrepack --dtype checked against
# torch's own .to() under torch VERSION (1.13: /usr/bin/python3; 2: the
# scripts/torch2-root.sh chroot).  ptrepack_dtype_gen.py writes, with that
# torch and a fresh seed, every float16/bfloat16/float8 bit pattern and
# millions of float32/float64 ones (patterns.pt), a model with ties,
# views, Parameters and _metadata (model.pt) and a tie for --only
# (tie.pt).  Each is converted to every float dtype that torch has
# (--torch 1.13 under 1.13), and ptrepack_dtype_check.py compares
# torch.load of the result with {k: v.to(dtype)} bit for bit, storage
# sharing, views, Parameters and requires_grad included.  Then --only, and
# refusals: one line, exit 2, no output file.
#
# Exit 0 passed, 1 failed (77 only with PT_ALLOW_SKIP_TORCH=1 or
# PT_NO_TORCH2=1 and no torch).  Last line "N passed, N failed".
set -u
[ $# -eq 2 ] || { echo "usage: sh $0 1.13|2 PTREPACK" >&2; exit 2; }
version=$1 ptrepack=$2
here=$(cd "$(dirname "$0")" && pwd) || exit 1
case $ptrepack in /*) ;; *) ptrepack=$(pwd)/$ptrepack ;; esac

. "$here/../torch/select.sh"
torch_select "$version" "" ptrepack-dtype
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

seed=${PT_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
cp "$here/ptrepack_dtype_gen.py" "$here/ptrepack_dtype_check.py" \
	"$work/" || exit 1
run_py "$inner/ptrepack_dtype_gen.py" "$inner/gen" "$seed" \
	>"$work/gen.log" 2>&1 || {
	echo "ptrepack_dtype_gen.py failed under torch $version:" >&2
	grep -v "UCX\|cpuinfo" "$work/gen.log" | tail -n 5 >&2
	exit 1
}
grep -v "UCX\|cpuinfo" "$work/gen.log"

types="float64 float32 float16 bfloat16"
flavour=
if [ "$version" = 1.13 ]; then
	flavour="--torch 1.13"
else
	types="$types float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz"
fi

man=$work/manifest.tsv
: >"$man"
# conv FILE DTYPE [GLOB]: convert gen/FILE, list it for the check
nconv=0
conv() {
	nconv=$((nconv + 1))
	out=$work/out$nconv-$1-$2.pt
	set -- "$1" "$2" "${3:-}"
	if "$ptrepack" $flavour --dtype "$2" ${3:+--only "$3"} \
		"$work/gen/$1" "$out" 2>"$work/err"; then
		printf '%s\t%s\t%s\t%s\n' "$inner/gen/$1" "$inner/${out##*/}" \
			"$2" "${3:--}" >>"$man"
	else
		bad "ptrepack --dtype $2 ${3:+--only $3 }$1: $(cat "$work/err")"
	fi
}

for t in $types; do
	conv patterns.pt "$t"
	case $t in
	float8*) conv model_nograd.pt "$t" ;;
	*) conv model.pt "$t" ;;
	esac
done
conv model.pt bfloat16 'net/*'
# emb/weight, emb_w and head_w (one storage) match, base and its views not
conv model.pt float16 '*e[am]*'
conv model.pt bfloat16 half
conv tie.pt bfloat16 '*/w'
conv legacy.pt bfloat16
conv deflated.pt float16
conv legacy.pt float64

run_checks ptrepack_dtype_check.py manifest.tsv

# refuse WANT ARGS...: ptrepack ARGS... OUT refused, WANT named, no OUT
refuse() {
	want=$1
	shift
	refused "$want" "$work/no.pt" "$ptrepack" "$@"
}
g=$work/gen
refuse "shares storage" --dtype bfloat16 --only 'enc/*' "$g/tie.pt"
refuse "shares storage" --dtype float16 --only 'dec/w' "$g/tie.pt"
refuse "shares storage" --dtype bfloat16 --only 'emb_w' "$g/model.pt"
if [ "$version" = 2 ]; then
	refuse "requires grad" --dtype float8_e5m2 "$g/model.pt"
	refuse "legacy" --dtype float8_e4m3fn "$g/legacy.pt"
	refuse "python attributes" --dtype float8_e4m3fn --only attr \
		"$g/model.pt"
	refuse "viewed as two dtypes" --dtype float16 "$g/bad_twodtypes.pt"
	refuse "whole number of elements" --dtype float16 "$g/bad_partial.pt"
	refuse "saved on its own" --dtype bfloat16 "$g/bad_storage.pt"
fi
refuse "no floating tensor" --dtype bfloat16 --only 'nothing*' "$g/tie.pt"
refuse "not one of" --dtype int8 "$g/tie.pt"
refuse "not one of" --dtype bogus "$g/tie.pt"
refuse "needs --dtype" --only 'x' "$g/tie.pt"
refuse "once for each" --dtype float16 --clone "$g/tie.pt"
refuse "not 2 or 1.13" --dtype float16 --torch 3 "$g/tie.pt"
head -c 3000 "$g/model.pt" >"$work/cut.pt"
refuse "cut.pt" --dtype bfloat16 "$work/cut.pt"
printf 'version https://git-lfs.github.com/spec/v1\n' >"$work/lfs.pt"
refuse "lfs.pt" --dtype bfloat16 "$work/lfs.pt"

echo "seed $seed (PT_SEED=$seed repeats this run)"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
