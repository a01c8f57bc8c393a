#!/bin/sh
# ptdiff_cli.sh VERSION PTDIFF SHARED_DIR - ptdiff against torch and numpy.
#
# VERSION "1.13": Debian's torch (/usr/bin/python3); "2": torch 2.x in the
# chroot that SHARED_DIR/tools/torch2-root builds (tests/torch/select.sh).
# ptdiff_gen.py writes pairs of checkpoints under that torch; ptdiff runs
# natively on each pair (--json, text, exit status); ptdiff_gen.py check
# then recomputes every item with numpy from the torch-loaded tensors.
# This script adds the options, the messages and the exit status 2 on
# files that are not checkpoints.  One line per check, then
# "N passed, N failed".  Exit 0 all passed, 1 a failure, 77 skipped
# (no torch, with PT_ALLOW_SKIP_TORCH=1).
set -u

usage() { echo "usage: sh $0 1.13|2 PTDIFF SHARED_DIR" >&2; exit 2; }
[ $# -eq 3 ] || usage
version=$1 ptdiff=$2 shared=$3
case $version in 1.13|2) ;; *) usage ;; esac
here=$(cd "$(dirname "$0")" && pwd) || exit 1
if [ ! -x "$ptdiff" ]; then
	echo "ptdiff not found or not executable: $ptdiff" >&2
	exit 1
fi
case $ptdiff in /*) ;; *) ptdiff=$(pwd)/$ptdiff ;; esac

. "$here/../torch/select.sh"
torch_select "$version" "$shared" ptdiff-test
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

# run the torch under test: torch_py SCRIPT-ARGS... (paths inside $work
# are given relative to it)
torch_py() {
	if [ "$version" = 1.13 ]; then
		(cd "$work" && "$py" "$here/ptdiff_gen.py" "$@")
	else
		cp "$here/ptdiff_gen.py" "$work/ptdiff_gen.py" &&
			chroot "$root" sh -c 'cd "$1" && shift && python3 ptdiff_gen.py "$@"' \
				sh "$inner" "$@"
	fi
}

if ! torch_py gen gen >"$work/gen.err" 2>&1; then
	echo "ptdiff_gen.py gen failed under torch $version:" >&2
	grep -v UCX "$work/gen.err" | tail -n 5 >&2
	exit 1
fi
g=$work/gen

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# every case: JSON, text and status for the checker
while IFS='	' read -r name a b opts; do
	# shellcheck disable=SC2086 # opts are words
	"$ptdiff" --json $opts "$g/$a" "$g/$b" >"$g/$name.json" 2>"$g/$name.err"
	echo $? >"$g/$name.rc"
	# shellcheck disable=SC2086
	"$ptdiff" $opts "$g/$a" "$g/$b" >"$g/$name.txt" 2>>"$g/$name.err"
	rc=$?
	if [ "$rc" = "$(cat "$g/$name.rc")" ] && [ ! -s "$g/$name.err" ]; then
		ok "$name: text and --json agree on status $rc, stderr empty"
	else
		bad "$name: text status $rc, --json $(cat "$g/$name.rc"): $(head -c 300 "$g/$name.err")"
	fi
done <"$g/manifest.tsv"

torch_py check gen >"$work/check.out" 2>"$work/check.err"
crc=$?
# torch's UCX library may print to stdout
grep -v -e '^[0-9]* passed, [0-9]* failed$' -e UCX "$work/check.out"
counts=$(grep -v UCX "$work/check.out" | tail -n 1)
case $counts in
*" passed, "*" failed")
	pass=$((pass + ${counts%% *}))
	f=${counts#*, }
	fail=$((fail + ${f%% *}))
	;;
*)
	bad "ptdiff_gen.py check crashed (status $crc): $(grep -v UCX "$work/check.err" | tail -n 3)"
	;;
esac

# expect STATUS PATTERN ARGS...: the status, and PATTERN (grep) in
# stdout or stderr ("" for none)
expect() {
	want=$1 pat=$2
	shift 2
	"$ptdiff" "$@" >"$work/out" 2>"$work/err"
	got=$?
	if [ "$got" != "$want" ]; then
		bad "ptdiff $*: exit $got, want $want: $(head -c 300 "$work/err")"
	elif [ -n "$pat" ] && ! grep -q -- "$pat" "$work/out" "$work/err"; then
		bad "ptdiff $*: no '$pat' in: $(head -c 300 "$work/out" "$work/err")"
	else
		ok "ptdiff $* -> $want${pat:+, '$pat'}"
	fi
}

# a failure is exactly one line on stderr naming the file, nothing on stdout
one_line() {
	file=$1
	shift
	"$ptdiff" "$@" >"$work/out" 2>"$work/err"
	got=$?
	# --json: stdout is one error object (issue 15.13), else nothing
	case " $* " in
	*" --json "*) outok() { python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "unreadable" and d["file"] == sys.argv[2], d
assert d["error"].startswith(sys.argv[2] + ": "), d' "$work/out" "$file"; } ;;
	*) outok() { [ ! -s "$work/out" ]; } ;;
	esac
	if [ "$got" = 2 ] && [ "$(wc -l <"$work/err")" = 1 ] &&
	   grep -q "^ptdiff: $file: " "$work/err" && outok; then
		ok "ptdiff $*: status 2, one line: $(cat "$work/err")"
	else
		bad "ptdiff $*: status $got, stderr: $(cat "$work/err"), stdout: $(head -c 200 "$work/out")"
	fi
}

same=$g/same_a.pt
expect 0 "" --help
expect 0 "^ptdiff 0" --version
expect 2 "usage" --bogus "$same" "$same"
expect 2 "usage" "$same"
expect 2 "no such key path" "$same" "$same" "$same"
expect 2 "--atol: 'x' is not" --atol x "$same" "$same"
expect 2 "--rtol: '-1' is not" --rtol -1 "$same" "$same"
expect 0 "^# 0 differences" "$same" "$g/copy_b.pt"
expect 1 "^only in A: old/$" "$g/keys_a.pt" "$g/keys_b.pt"
expect 1 "^only in B: old/$" "$g/keys_b.pt" "$g/keys_a.pt"
expect 1 "^values: w: 3 of 2048 differ, max abs 0.5, max rel " \
	"$g/perturbed_a.pt" "$g/perturbed_b.pt"
expect 1 "^layout: t: stride (1, 16) vs (10, 1)$" \
	"$g/layout_a.pt" "$g/layout_b.pt"
expect 0 "" --ignore-layout "$g/layout_a.pt" "$g/layout_b.pt"
expect 1 "^dtype: x: float32 vs float16$" "$g/dtype_a.pt" "$g/dtype_b.pt"
expect 1 "^shape: y: (16, 8) vs (8, 16)$" "$g/shape_a.pt" "$g/shape_b.pt"
expect 1 "^value: epoch: 12 vs 13$" "$g/values_a.pt" "$g/values_b.pt"

# -q: nothing at all, the status only (and it stops at the first one)
for args in "$g/perturbed_a.pt $g/perturbed_b.pt" "$same $g/copy_b.pt" \
	    "$g/keys_a.pt $g/keys_b.pt"; do
	# shellcheck disable=SC2086
	"$ptdiff" -q $args >"$work/out" 2>&1
	st=$?
	# shellcheck disable=SC2086
	"$ptdiff" $args >/dev/null 2>&1
	want=$?
	if [ "$st" = "$want" ] && [ ! -s "$work/out" ]; then
		ok "ptdiff -q ${args##*/}: status $st, silent"
	else
		bad "ptdiff -q ${args##*/}: status $st (want $want), output: $(head -c 200 "$work/out")"
	fi
done

# -v: the equal items too, one "equal:" line each
"$ptdiff" -v "$g/perturbed_a.pt" "$g/perturbed_b.pt" >"$work/out"
if grep -qx "equal: same" "$work/out" && grep -q "^values: w: " "$work/out"; then
	ok "ptdiff -v lists equal items"
else
	bad "ptdiff -v: $(cat "$work/out")"
fi
"$ptdiff" "$g/perturbed_a.pt" "$g/perturbed_b.pt" >"$work/out"
if grep -q "^equal:" "$work/out"; then
	bad "ptdiff without -v lists equal items"
else
	ok "ptdiff without -v lists only differences"
fi

# not checkpoints, and a read failure in the middle of a comparison
printf '<!DOCTYPE html>\n<html><body>404</body></html>\n' >"$work/page.pt"
head -c $(($(wc -c <"$g/large_a.pt") / 2)) "$g/large_a.pt" >"$work/cut.pt"
: >"$work/empty.pt"
one_line "$work/missing.pt" "$work/missing.pt" "$same"
one_line "$work/missing.pt" "$same" "$work/missing.pt"
one_line "$work/page.pt" "$same" "$work/page.pt"
one_line "$work/page.pt" --json "$work/page.pt" "$same"
one_line "$work/cut.pt" "$work/cut.pt" "$g/large_a.pt"
one_line "$work/empty.pt" -q "$same" "$work/empty.pt"
expect 2 "HTML page" "$same" "$work/page.pt"
expect 2 "truncated" "$g/large_a.pt" "$work/cut.pt"
expect 2 "is a directory" "$work" "$same"

"$ptdiff" "$g/perturbed_a.pt" "$g/deflated.pt" >"$work/out" 2>"$work/err"
st=$?
if [ "$st" = 2 ] && [ "$(wc -l <"$work/err")" = 1 ] &&
   grep -q "^ptdiff: $g/deflated.pt: .*not a valid deflate stream" "$work/err"; then
	ok "read failure mid-run: status 2, $(cat "$work/err")"
else
	bad "read failure mid-run: status $st, stderr $(cat "$work/err")"
fi
"$ptdiff" --json "$g/perturbed_a.pt" "$g/deflated.pt" >"$work/out" 2>/dev/null
st=$?
if [ "$st" = 2 ] && grep -q '"error":"[^"]*not a valid deflate stream' "$work/out" &&
   python3 -m json.tool "$work/out" >/dev/null 2>&1; then
	ok "read failure mid-run: --json closes with \"error\""
else
	bad "read failure mid-run, --json: status $st: $(tail -c 300 "$work/out")"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
