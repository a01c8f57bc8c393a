#!/bin/sh
# ptverify_cli.sh PTVERIFY [SHARED_DIR] - ptverify's findings, messages and
# exit codes (0 clean, 1 problems, 2 unreadable) on good files, on the
# sample rebuilt broken in each way mkbad.py knows (plain Python, no
# torch), on truncated and hostile files, and on every shared fixture.
# Prints one line per check and "N passed, N failed".
set -u
ptverify=$1
shared=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
sample=$here/../data/sample.pt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect STATUS PATTERN -- ARGS...
expect() {
	want=$1 pat=$2; shift 3
	"$ptverify" "$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if grep -q "Sanitizer\|runtime error:" "$tmp/err"; then
		bad "ptverify $*: sanitizer report: $(grep -m 1 "Sanitizer\|runtime error:" "$tmp/err")"
	elif [ "$got" != "$want" ]; then
		bad "ptverify $*: exit $got, want $want: $(head -c 400 "$tmp/out" "$tmp/err")"
	elif [ -n "$pat" ] && ! grep -q -- "$pat" "$tmp/out" "$tmp/err"; then
		bad "ptverify $*: no '$pat' in: $(head -c 400 "$tmp/out" "$tmp/err")"
	else
		ok "ptverify $* (exit $got${pat:+, '$pat'})"
	fi
}

# every problem line is "ptverify: FILE: offset 0x..: message"
lines_ok() {
	if grep -v "^ptverify: $1: offset 0x[0-9a-f]*: " "$tmp/out" |
	   grep -qv "^$1: [0-9]* problems\?$"; then
		bad "a problem line of $1 is not 'ptverify: FILE: offset 0x..: ...': $(head -n 3 "$tmp/out")"
	else
		ok "problem lines of ${1##*/} name the file and the offset"
	fi
}

# ---- command line
expect 0 "usage: ptverify" -- --help
expect 0 "^ptverify 0" -- --version
expect 2 "usage: ptverify" -- --bogus
expect 2 "no checkpoint given" --

# ---- clean files
expect 0 "ok (zip, 22 records, 20 storages, 4503 bytes CRC-checked)" -- "$sample"
expect 0 "" -- --quiet "$sample"
[ ! -s "$tmp/out" ] && ok "--quiet prints nothing for a clean file" ||
	bad "--quiet printed: $(cat "$tmp/out")"
[ ! -s "$tmp/err" ] && ok "nothing on stderr when it is not a terminal" ||
	bad "stderr is not empty: $(cat "$tmp/err")"
expect 0 " 0 bytes CRC-checked" -- --no-crc "$sample"
python3 "$here/mkbad.py" "$sample" clean "$tmp/clean.pt"
expect 0 "ok" -- "$tmp/clean.pt"

# ---- the sample broken in one way each: KIND STATUS PATTERN
while read -r kind st pat; do
	python3 "$here/mkbad.py" "$sample" "$kind" "$tmp/$kind.pt" || {
		bad "mkbad.py $kind failed"; continue; }
	expect "$st" "$pat" -- "$tmp/$kind.pt"
	if [ "$st" = 1 ]; then
		lines_ok "$tmp/$kind.pt"
	elif [ "$(wc -l <"$tmp/err")" = 1 ] &&
	     grep -q "^ptverify: $tmp/$kind.pt: " "$tmp/err"; then
		ok "$kind: unreadable, in one line"
	else
		bad "$kind: the error is not one line: $(cat "$tmp/err")"
	fi
done <<'EOF'
flipcrc 1 record 'sample/data/0': CRC-32 of the data is 54269468, the archive says 54269568
flipdata 1 record 'sample/data/0': CRC-32 of the data is
nocrc 1 has no CRC-32 (0, data
misaligned 1 data is 1-byte aligned, not 64
deflated 1 record 'sample/data/0' is compressed
gap 1 16 bytes after record 'sample/data/0' belong to no record
trailing 1 27 bytes after the end of the zip archive
unused 1 record 'sample/data/999' (40 bytes) is used by no tensor
bigendian 1 byteorder 'big'
versions 1 'version' says 3, '.data/version' (which torch reads) 4
layout 1 torch 2.x computes
evil 1 unsafe global posix.system
overlap 1 run past the next record
badorder 2 byteorder record 'middle' is neither
version11 2 is not a number from 1 to 10
duplicate 1 duplicate record name 'sample/data/0'
outside 2 runs past the central directory
prefix 2 is outside the top folder
short 2 record sample/data/0 has 508 bytes, but storage '0' is 128 x float32 = 512 bytes
extent 2 tensor reaches element 5 of storage '0', which has 4
EOF
[ ! -e pwned ] && ok "nothing in the pickle ran" || bad "something ran"

# an unsafe global: ptverify names the key that holds it, in ptls's words
python3 "$here/mkzip.py" evil "$tmp/evilkey.pt"
ptls=$(dirname "$ptverify")/ptls
v=$("$ptverify" "$tmp/evilkey.pt" | grep "unsafe global" |
	sed 's/^ptverify: [^ ]*: offset 0x[0-9a-f]*: //')
l=$("$ptls" "$tmp/evilkey.pt" | grep "unsafe global" |
	sed 's/^# //; s/ (offset 0x[0-9a-f]*)//')
case $v in
"unsafe global posix.system in data.pkl: "*"; held by x")
	if [ "$v" = "$l" ]; then
		ok "unsafe global: the key named, in ptls's words: $v"
	else
		bad "unsafe global: ptverify says '$v', ptls '$l'"
	fi ;;
*)	bad "unsafe global: ptverify says '$v' (no key)" ;;
esac
expect 1 "offset 0x7a1: record 'sample/data/0': CRC-32" -- "$tmp/flipcrc.pt"
expect 0 "" -- --no-crc "$tmp/flipcrc.pt"
expect 1 "^$tmp/nocrc.pt: 22 problems$" -- "$tmp/nocrc.pt"

# ---- JSON
"$ptverify" --json "$tmp/flipcrc.pt" "$sample" "$tmp/version11.pt" >"$tmp/j" 2>/dev/null
st=$?
[ $st = 2 ] && ok "--json: the worst status wins (2)" || bad "--json exit $st"
if python3 - "$tmp/j" <<'EOF'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1])]
assert [d["status"] for d in docs] == ["problems", "ok", "unreadable"], docs
p = docs[0]["problems"][0]
assert p["check"] == "crc" and p["offset"] == 0x7a1, p
assert "is not a number from 1 to 10" in docs[2]["error"]
assert docs[1]["records"] == 22 and docs[1]["bytes_checked"] == 4503
EOF
then ok "--json: one object per file with status, problems and counts"
else bad "--json output is wrong: $(head -c 300 "$tmp/j")"; fi

# ---- truncated and hostile files: unreadable, one line
: >"$tmp/empty.pt"
printf '<!DOCTYPE html>\n<html></html>\n' >"$tmp/page.pt"
size=$(wc -c <"$sample")
for cut in 1 30 3000 $((size - 30)) $((size - 1)); do
	head -c $cut "$sample" >"$tmp/cut$cut.pt"
	"$ptverify" "$tmp/cut$cut.pt" >/dev/null 2>"$tmp/err"
	st=$?
	if [ $st = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ]; then
		ok "cut at $cut bytes: unreadable, one line"
	else
		bad "cut at $cut bytes: exit $st: $(cat "$tmp/err")"
	fi
done
expect 2 "empty file" -- "$tmp/empty.pt"
expect 2 "HTML page" -- "$tmp/page.pt"
expect 2 "is a directory" -- "$tmp"
expect 2 "No such file" -- "$tmp/missing.pt"
expect 2 "" -- "$sample" "$tmp/empty.pt"
grep -q "^$sample: ok" "$tmp/out" && ok "the readable file is still checked" ||
	bad "several files: the good one was not checked"

# ---- progress: only on a terminal
if command -v script >/dev/null 2>&1; then
	PT_PROGRESS_AFTER_MS=0 script -qec "'$ptverify' '$sample'" /dev/null \
		>"$tmp/tty" 2>&1
	grep -q "checking CRC-32s: .*%" "$tmp/tty" &&
		ok "a progress line on a terminal" ||
		bad "no progress on a terminal: $(head -c 300 "$tmp/tty")"
	PT_PROGRESS_AFTER_MS=0 "$ptverify" "$sample" 2>"$tmp/err" >/dev/null
	[ ! -s "$tmp/err" ] && ok "no progress when stderr is a file" ||
		bad "progress written to a file: $(cat "$tmp/err")"
fi

# ---- legacy streams
if [ -n "$shared" ] && [ -f "$shared/fixtures/torch-1.13/legacy.pt" ]; then
	expect 0 "ok (legacy" -- "$shared/fixtures/torch-1.13/legacy.pt"
	cp "$shared/fixtures/torch-1.13/legacy.pt" "$tmp/legacy_tail.pt"
	printf 'junk' >>"$tmp/legacy_tail.pt"
	expect 1 "4 bytes after the last storage belong to nothing" -- \
		"$tmp/legacy_tail.pt"
fi

# ---- every shared fixture: torch's own files are clean; every file is
# checked or refused in one line
if [ -n "$shared" ] && [ -d "$shared/fixtures" ]; then
	for f in "$shared"/fixtures/torch-1.13/*.pt "$shared"/fixtures/torch-2/*.pt; do
		case ${f##*/} in legacy_tar.pt|script.pt) continue ;; esac
		expect 0 "ok" -- "$f"
	done
	for f in "$shared"/fixtures/real/*.p* "$shared"/fixtures/real/*.bin; do
		[ -e "$f" ] || continue
		"$ptverify" "$f" >"$tmp/out" 2>"$tmp/err"
		st=$?
		if [ $st = 0 ] || [ $st = 1 ] ||
		   { [ $st = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ]; }; then
			ok "ptverify ${f##*/}: exit $st"
		else
			bad "ptverify $f: exit $st: $(cat "$tmp/err")"
		fi
	done
	if [ -e "$shared/fixtures/real/z2_olmo_xtiny_train_state.pt" ]; then
		expect 1 "unsafe global pathlib.PosixPath" -- \
			"$shared/fixtures/real/z2_olmo_xtiny_train_state.pt"
	else
		echo "skip: no real-world corpus (../shared/fixtures/real): its checks are skipped"
	fi
else
	echo "shared fixtures not found: skipping the fixture sweep"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
