#!/bin/sh
# ptdiff_ml.sh VERSION PTDIFF - ptdiff for ML comparisons (issue 19.4) on
# pairs the torch under test writes (ptdiff_ml_gen.py): structural
# differences that used to compare "equal" (OrderedDict -> dict,
# _metadata dropped, ties lost), a Parameter turned into a tensor, values
# across dtypes with the relative L2 error against torch's own, --rtol
# with --ignore-dtype, and key-path arguments; README's recipe on a real
# bfloat16 conversion of a model holding fp32 subnormals, --count and --sort
# (issue 39.15).  "N passed, N failed".
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
# README's "did the conversion stay close?" line, run as it stands
recipe=$(sed -n 's/^\(ptdiff --ignore-dtype [^#]*model-bf16\.pt\).*/\1/p' \
	"$here/../../README.md")
[ -n "$recipe" ] || { echo "no ptdiff recipe in README.md" >&2; exit 1; }
tol() { printf '%s\n' "$recipe" | sed -n "s/.*--$1 \([^ ]*\).*/\1/p"; }
atol=$(tol atol) rtol=$(tol rtol)
if [ "$version" = 1.13 ]; then
	(cd "$work" && "$py" ptdiff_ml_gen.py out "${atol:-0}" "${rtol:-0}") \
		>"$work/gen.log" 2>&1
else
	chroot "$root" sh -c 'cd "$1" && python3 ptdiff_ml_gen.py out "$2" "$3"' \
		sh "$inner" "${atol:-0}" "${rtol:-0}" >"$work/gen.log" 2>&1
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

# ---- README's recipe on model.pt against model.to(torch.bfloat16)
expect_true() { python3 -c 'import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))[sys.argv[2]] else 1)' "$d/expect.json" "$1"; }
if expect_true recipe_close; then
	ok "torch.isclose: the recipe's tolerances ($recipe) hold on the bf16 conversion"
else
	bad "torch says the recipe's tolerances do not hold: $recipe"
fi
expect_true rtol_only_close && bad "the fixture has no value only --atol saves" ||
	ok "without --atol, torch too says the subnormals differ"
set -f
# shellcheck disable=SC2086
(cd "$d" && "$ptdiff" ${recipe#ptdiff }) >"$work/o" 2>"$work/e"; st=$?
set +f
[ "$st" = 0 ] && ok "README's recipe passes on a correct bf16 conversion: $recipe" ||
	bad "README's recipe exits $st on a correct bf16 conversion: $(cat "$work/o" "$work/e" | head -c 300)"
pd 1 --ignore-dtype --rtol "$rtol" "$d/model.pt" "$d/model-bf16.pt"
grep -q "^values: 0.weight: .*max rel inf" "$work/o" &&
	ok "--rtol alone: the subnormals rounded to 0 give max rel inf" ||
	bad "--rtol alone: $(cat "$work/o")"

# ---- --count COUNT (h5diff -n) and --sort, against torch's figures (expect.json)
pd 1 --count 1 "$d/plain.pt" "$d/bf16.pt"
[ "$(grep -c '^values: ' "$work/o")" = 1 ] &&
	grep -q "^# stopped after 1 difference (--count 1): the rest was not compared$" "$work/o" &&
	grep -q "; 1 compared (1 tensor" "$work/o" &&
	ok "--count 1: stops after the first difference" || bad "--count 1: $(cat "$work/o")"
pd 1 --count 2 --json "$d/plain.pt" "$d/bf16.pt"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["limit"] == 2 and d["stopped"] is True and d["differences"] == 2, d
assert [i["status"] for i in d["items"]] == ["changed", "changed"], d["items"]' "$work/o" &&
	ok "--count 2 --json: two items, stopped" || bad "--count 2 --json: $(head -c 300 "$work/o")"
for key in abs rel l2; do
	pd 1 --sort=$key "$d/plain.pt" "$d/bf16.pt"
	sed -n 's/^values: \([^:]*\):.*/\1/p' "$work/o" >"$work/got"
	python3 -c 'import json, sys
w = json.load(open(sys.argv[1])); f = {"abs": "max_abs", "rel": "max_rel", "l2": "rel_l2"}[sys.argv[2]]
ks = sorted((k[5:] for k in w if k.startswith("bf16/")), key=lambda k: -w["bf16/" + k][f])
print("\n".join(ks))' "$d/expect.json" $key >"$work/want"
	cmp -s "$work/got" "$work/want" && ok "--sort=$key: largest first, as torch orders them" ||
		bad "--sort=$key: $(tr '\n' ' ' <"$work/got") vs torch $(tr '\n' ' ' <"$work/want")"
done
pd 1 --sort --count 2 --json "$d/plain.pt" "$d/bf16.pt"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); w = json.load(open(sys.argv[2]))
ks = sorted((k[5:] for k in w if k.startswith("bf16/")), key=lambda k: -w["bf16/" + k]["max_abs"])
got = [i["path"] for i in d["items"] if i["status"] != "equal"]
assert got == ks[:2], (got, ks)
assert d["sort"] == "abs" and d["not_shown"] == 2 and d["stopped"] is False, d
assert d["differences"] == 4' "$work/o" "$d/expect.json" &&
	ok "--sort -n 2 --json: the two largest, two not listed" || bad "--sort -n 2: $(head -c 300 "$work/o")"
pd 1 --sort --count 2 "$d/plain.pt" "$d/bf16.pt"
grep -q "^# 2 smaller differences not listed (--count 2)$" "$work/o" && ok "--sort -n 2: says what it left out" ||
	bad "--sort -n 2 text: $(cat "$work/o")"
for a in "--count 0" "--count x" "-n 1" "--sort=big"; do
	# shellcheck disable=SC2086
	pd 2 $a "$d/plain.pt" "$d/bf16.pt"
	grep -q usage "$work/e" && ok "ptdiff $a: usage, exit 2" || bad "ptdiff $a: $(cat "$work/e")"
done

# ---- --rel-l2 TOL: a tensor equal when its relative L2 error is within TOL
pd 0 --ignore-dtype --rel-l2 1e-2 "$d/model.pt" "$d/model-bf16.pt"
ok "--rel-l2 1e-2: the bf16 conversion with subnormals passes"
tol=$(python3 -c 'import json, sys
w = json.load(open(sys.argv[1])); v = sorted(x["rel_l2"] for k, x in w.items() if k.startswith("bf16/"))
print((v[1] + v[2]) / 2)' "$d/expect.json")
pd 1 --ignore-dtype --rel-l2 "$tol" --json "$d/plain.pt" "$d/bf16.pt"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); w = json.load(open(sys.argv[2])); tol = float(sys.argv[3])
got = sorted(i["path"] for i in d["items"] if "values" in i["diffs"])
want = sorted(k[5:] for k, x in w.items() if k.startswith("bf16/") and x["rel_l2"] > tol)
assert got == want and len(want) == 2, (got, want)
assert d["rel_l2"] == tol, d["rel_l2"]' "$work/o" "$d/expect.json" "$tol" &&
	ok "--rel-l2 $tol: exactly the tensors whose torch rel L2 is above it" ||
	bad "--rel-l2 $tol: $(head -c 300 "$work/o")"
pd 2 --rel-l2 -1 "$d/plain.pt" "$d/bf16.pt"
grep -q "not a number >= 0" "$work/e" && ok "--rel-l2 -1: refused" || bad "--rel-l2 -1: $(cat "$work/e")"

# ---- ptdiff(1) says what ptdiff does (issue 39.21f)
man=$here/../../docs/ptdiff.1
syn=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH DESCRIPTION/p' "$man" | sed 's/\\f[BIR]//g; s/\\-/-/g')
miss=
for o in $("$ptdiff" --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
	case $o in --json|--quiet|--verbose|--help|--version) continue ;; esac
	printf '%s\n' "$syn" | grep -q -- "$o" || miss="$miss $o"
done
[ -z "$miss" ] && ok "ptdiff(1)'s SYNOPSIS has every option of --help" ||
	bad "ptdiff(1)'s SYNOPSIS lacks$miss"
grep -q "torch.distributed.checkpoint (DCP)" "$man" && ok "ptdiff(1) names DCP directories" ||
	bad "ptdiff(1) does not name DCP directories"
python3 - "$d/plain.pt" "$d/deflated.pt" <<'PY'
import sys, zipfile
src = zipfile.ZipFile(sys.argv[1])
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as z:
    for i in src.infolist():
        z.writestr(i.filename, src.read(i.filename))
PY
pd 0 "$d/deflated.pt" "$d/plain.pt"
pd 1 "$d/deflated.pt" "$d/bf16.pt"
grep -q "^values: 0.weight" "$work/o" && ! grep -qi "compressed.*cannot be read" "$man" &&
	ok "deflated records are compared, and ptdiff(1) no longer says they cannot be" ||
	bad "deflated records: $(head -c 200 "$work/o") / $(grep -i "compressed" "$man")"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
