#!/bin/sh
# ptdiff_ml.sh VERSION PTDIFF - ptdiff for ML comparisons (issue 19.4) on
# pairs the torch under test writes (ptdiff_ml_gen.py): structural
# differences that used to compare "equal" (OrderedDict -> dict,
# _metadata dropped, ties lost), a Parameter turned into a tensor, values
# across dtypes with the relative L2 error against torch's own, --rtol
# with --ignore-dtype, and key-path arguments.  "N passed, N failed".
set -u
[ $# -eq 2 ] || { echo "usage: sh $0 1.13|2 PTDIFF" >&2; exit 2; }
version=$1 ptdiff=$2
here=$(cd "$(dirname "$0")" && pwd) || exit 1
case $ptdiff in /*) ;; *) ptdiff=$(pwd)/$ptdiff ;; esac
. "$here/../torch/select.sh"
torch_select "$version" "" ptdiff-ml
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP
cp "$here/ptdiff_ml_gen.py" "$work/" || exit 1
if [ "$version" = 1.13 ]; then
	(cd "$work" && "$py" ptdiff_ml_gen.py out) >"$work/gen.log" 2>&1
else
	chroot "$root" sh -c 'cd "$1" && python3 ptdiff_ml_gen.py out' sh \
		"$inner" >"$work/gen.log" 2>&1
fi || { echo "ptdiff_ml_gen.py failed:" >&2; tail -n 5 "$work/gen.log" >&2
	exit 1; }
d=$work/out
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
# pd WANT-STATUS ARGS...: $out (stdout); sanitizer reports fail
pd() {
	want=$1; shift
	"$ptdiff" "$@" >"$work/o" 2>"$work/e"; st=$?
	grep -q "Sanitizer\|runtime error:" "$work/e" && bad "sanitizer: $*"
	[ "$st" = "$want" ] || bad "ptdiff $*: exit $st, want $want: $(head -c 200 "$work/e")"
}

pd 1 "$d/sd.pt" "$d/plain.pt"
grep -qx "attrs: \.: type OrderedDict vs dict, state _metadata vs None" "$work/o" &&
	ok "OrderedDict -> dict: type and _metadata" || bad "plain: $(cat "$work/o")"
pd 1 "$d/sd.pt" "$d/nometa.pt"
grep -qx "attrs: \.: state _metadata vs None" "$work/o" &&
	ok "_metadata dropped" || bad "nometa: $(cat "$work/o")"
pd 1 --json "$d/sd.pt" "$d/nometa.pt"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); it = [i for i in d["items"] if i["path"] == "."]
assert it and it[0]["attrs"] == {"state": ["_metadata", "None"]}, it' "$work/o" &&
	ok "--json: the container item with its attrs" || bad "json nometa: $(head -c 300 "$work/o")"
pd 0 "$d/sd.pt" "$d/sd.pt"
ok "a checkpoint against itself: equal"
pd 1 "$d/tied.pt" "$d/untied.pt"
grep -qx "attrs: head: shares_storage_with emb vs None" "$work/o" &&
	ok "ties lost: head shared emb's storage in A only" || bad "ties: $(cat "$work/o")"
pd 1 "$d/untied.pt" "$d/tied.pt"
grep -qx "attrs: head: shares_storage_with None vs emb" "$work/o" &&
	ok "ties made: the other way round" || bad "ties 2: $(cat "$work/o")"
pd 0 --ignore-layout "$d/tied.pt" "$d/untied.pt"
ok "--ignore-layout: sharing does not count"
pd 1 "$d/param.pt" "$d/tensor.pt"
grep -q "^attrs: p: .*parameter True vs False" "$work/o" &&
	ok "Parameter -> tensor" || bad "param: $(cat "$work/o")"

for conv in bf16 f16; do
	pd 1 --json "$d/sd.pt" "$d/$conv.pt"
	if python3 - "$work/o" "$d/expect.json" "$conv" <<'PY'
import json, math, sys
got = json.load(open(sys.argv[1])); want = json.load(open(sys.argv[2]))
conv = sys.argv[3]; n = 0
for it in got["items"]:
    w = want.get(conv + "/" + it["path"])
    if w is None:
        continue
    e = it["elements"]; n += 1
    assert it["diffs"] == ["dtype", "values"], it
    for k in ("rel_l2", "max_abs", "max_rel"):
        assert math.isclose(e[k], w[k], rel_tol=1e-9), (it["path"], k, e[k], w[k])
assert n == 4, n
PY
	then ok "$conv: rel L2, max abs, max rel per tensor equal torch's"
	else bad "$conv: figures differ from torch's"; fi
done
pd 0 --ignore-dtype --rtol 1e-2 "$d/plain.pt" "$d/f16.pt"
ok "float16 within 1e-2 with --ignore-dtype --rtol 1e-2: exit 0"
python3 -c 'import json, sys
w = json.load(open(sys.argv[1]))
sys.exit(0 if all(v["within_1e-2"] for k, v in w.items() if k.startswith("bf16/")) else 1)' "$d/expect.json"
bf_ok=$?
want=1
[ "$bf_ok" = 0 ] && want=0
pd $want --ignore-dtype --rtol 1e-2 "$d/plain.pt" "$d/bf16.pt"
ok "bfloat16 within 1e-2: exit $st, as torch says"
pd 1 "$d/sd.pt" "$d/bf16.pt" 0.weight
[ "$(grep -c '^dtype: \|^values: ' "$work/o")" = 2 ] && grep -q "^values: 0.weight: " "$work/o" &&
	! grep -q "0.bias\|^attrs: \." "$work/o" &&
	ok "key path 0.weight: only that tensor" || bad "key path: $(cat "$work/o")"
pd 2 "$d/sd.pt" "$d/bf16.pt" nothing.here
grep -q "no such key path" "$work/e" && ok "unknown key path: exit 2" ||
	bad "unknown key path: $(cat "$work/e")"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
