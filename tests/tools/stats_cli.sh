#!/bin/sh
# stats_cli.sh VERSION PTLS PTDUMP - ptls --stats and ptdump --values
# against numpy (issue 19.2).  stats_gen.py writes a checkpoint of every
# dtype the torch under test has (float8 only in 2.x) with NaN, +/-Inf
# and zeros planted, views, 0-d, empty and multi-chunk tensors, and what
# numpy computes from the tensors torch loads back; stats_check.py
# compares.  Then the table, exit statuses (1 only when something is
# non-finite), key-path subtrees, --head, stdin, and broken files.
# Prints "N passed, N failed"; exit 0/1 (77: no torch, when allowed).
set -u
[ $# -eq 3 ] || { echo "usage: sh $0 1.13|2 PTLS PTDUMP" >&2; exit 2; }
version=$1 ptls=$2 ptdump=$3
here=$(cd "$(dirname "$0")" && pwd) || exit 1
case $ptls in /*) ;; *) ptls=$(pwd)/$ptls ;; esac
case $ptdump in /*) ;; *) ptdump=$(pwd)/$ptdump ;; esac

. "$here/../torch/select.sh"
torch_select "$version" "" stats-test
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

cp "$here/stats_gen.py" "$work/stats_gen.py" || exit 1
if [ "$version" = 1.13 ]; then
	(cd "$work" && "$py" stats_gen.py out) >"$work/gen.log" 2>&1
else
	chroot "$root" sh -c 'cd "$1" && python3 stats_gen.py out' sh \
		"$inner" >"$work/gen.log" 2>&1
fi || { echo "stats_gen.py failed under torch $version:" >&2
	grep -v UCX "$work/gen.log" | tail -n 5 >&2; exit 1; }
d=$work/out f=$work/out/stats.pt

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
san() { grep -q "Sanitizer\|runtime error:" "$1"; }

# run TOOL ARGS...: $st, $work/o, $work/e
run() { "$@" >"$work/o" 2>"$work/e"; st=$?; ! san "$work/e" ||
	bad "sanitizer report: $*: $(grep -m1 "Sanitizer\|runtime error:" "$work/e")"; }

# ---- against numpy, every dtype
run "$ptls" --stats --json "$f"
[ "$st" = 1 ] && ok "--stats --json: exit 1 (NaN/Inf present)" ||
	bad "--stats --json: exit $st: $(head -c 300 "$work/e")"
cp "$work/o" "$d/got.json"
mkdir -p "$d/v"
for k in $(python3 -c 'import json, sys
print(" ".join(k for k, e in json.load(open(sys.argv[1])).items() if "values" in e))' "$d/expect.json"); do
	"$ptdump" --values "$k" --json "$f" >"$d/v/$k.json" 2>"$work/e" ||
		bad "ptdump --values $k: $(cat "$work/e")"
done
if python3 "$here/stats_check.py" "$d/expect.json" "$d/got.json" "$d/v" \
	>"$work/chk" 2>&1; then
	ok "$(tail -n 1 "$work/chk") (torch $version, numpy)"
else
	bad "stats against numpy: $(grep FAIL "$work/chk" | head -n 5)"
fi
if [ "$version" = 2 ]; then
	grep -q '"f8.all_float8_e4m3fn"' "$d/expect.json" &&
		ok "float8 dtypes are in the check" ||
		bad "torch $version wrote no float8 tensor"
fi

# ---- the table, statuses, subtrees
run "$ptls" --stats "$f"
[ "$st" = 1 ] && grep -q "^f.float32  *float32 .* 1  *2  *1  *5$" "$work/o" &&
	ok "table: f.float32 has 1 NaN, 2 +Inf, 1 -Inf, 5 zeros" ||
	bad "table (exit $st): $(grep '^f.float32 ' "$work/o")"
grep -q "^# [0-9]* tensors, [1-9][0-9]* with NaN or Inf$" "$work/o" &&
	ok "table: the summary line" || bad "no summary: $(tail -n 1 "$work/o")"
run "$ptls" --stats "$f" f.clean32 f.big i.int64
[ "$st" = 0 ] && [ "$(grep -c '^f.clean32 \|^f.big \|^i.int64 ' "$work/o")" = 3 ] &&
	ok "key paths: only finite tensors, exit 0" ||
	bad "key paths: exit $st: $(head -c 300 "$work/o" "$work/e")"
run "$ptls" --stats --quiet "$f" f.allnan
[ "$st" = 1 ] && [ ! -s "$work/o" ] && ok "--quiet: nothing printed, exit 1" ||
	bad "--quiet: exit $st, $(head -c 100 "$work/o")"
run "$ptls" --stats "$f" no.such.key
[ "$st" = 2 ] && [ "$(wc -l <"$work/e")" = 1 ] &&
	grep -q "no.such.key: no such key path" "$work/e" &&
	ok "unknown key path: one line, exit 2" || bad "unknown key: exit $st: $(cat "$work/e")"
run "$ptls" --stats "$f" f.allnan
grep -q "^f.allnan  *float32  *-  *-  *-  *-  *0  *7 " "$work/o" &&
	ok "all-NaN tensor: no min/max/mean/std, 7 NaN" ||
	bad "all-NaN: $(grep '^f.allnan' "$work/o")"
run sh -c 'cat "$1" | "$2" --stats --json - f.scalar' sh "$f" "$ptls"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["file"] == "(stdin)" and d["stats"][0]["mean"] == 2.5, d' "$work/o" 2>/dev/null &&
	[ "$st" = 0 ] && ok "stdin through a pipe: spooled, same figures" ||
	bad "stdin: exit $st: $(head -c 300 "$work/o" "$work/e")"

# ---- ptdump --values --head, text
run "$ptdump" --values f.float32 --head 3 --json "$f"
python3 -c 'import json, sys
v = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2]))["f.float32"]
assert v["shown"] == 3 and v["numel"] == 1000 and len(v["values"]) == 3, v
assert [round(x, 5) for x in v["values"]] == [round(x, 5) for x in e["values"][:3]], v' \
	"$work/o" "$d/expect.json" && ok "--values --head 3: the first three" ||
	bad "--values --head 3: $(head -c 300 "$work/o" "$work/e")"
run "$ptdump" --values f.transposed "$f"
[ "$st" = 0 ] && [ "$(sed -n 1p "$work/o")" = "# float32 (3, 64)" ] &&
	[ "$(grep -vc '^#' "$work/o")" = 3 ] &&
	ok "--values text: header and one line per row of the view" ||
	bad "--values text: $(head -c 200 "$work/o")"
run "$ptdump" --values f "$f"
[ "$st" = 2 ] && [ "$(wc -l <"$work/e")" = 1 ] && ok "--values of a non-tensor: one line, exit 2" ||
	bad "--values f: exit $st: $(cat "$work/e")"
run "$ptdump" --head 3 "$f"
[ "$st" = 2 ] && grep -q "usage" "$work/e" && ok "--head without --values: usage, exit 2" ||
	bad "--head alone: exit $st"

# ---- broken input: one line, exit 2, a JSON error object
size=$(wc -c <"$f")
head -c $((size / 2)) "$f" >"$work/cut.pt"
run "$ptls" --stats --json "$work/cut.pt"
[ "$st" = 2 ] && [ "$(wc -l <"$work/e")" = 1 ] &&
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
assert d["status"] == "unreadable" and d["error"], d' "$work/o" &&
	ok "truncated file: exit 2, one line, a JSON error object" ||
	bad "truncated: exit $st: $(head -c 300 "$work/o" "$work/e")"
# a storage record cut short inside the archive: the zip index still
# says its old size, so reading the data must fail cleanly, not crash
python3 - "$f" "$work/short.pt" <<'PY'
import sys, zipfile
src, dst = sys.argv[1:]
zin = zipfile.ZipFile(src)
with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as z:
    for i in zin.infolist():
        data = zin.read(i)
        z.writestr(i, data[:len(data) // 2] if i.filename.endswith("/data/0") else data)
PY
run "$ptls" --stats "$work/short.pt"
[ "$st" = 2 ] && [ "$(wc -l <"$work/e")" = 1 ] && ok "short storage: exit 2, one line: $(cat "$work/e")" ||
	bad "short storage: exit $st: $(head -c 300 "$work/e")"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
