#!/bin/sh
# family_cli.sh VERSION BINDIR - the tools as one family (issues 15.2,
# 15.13, 19.3): one table of short options, exit statuses 0/1/2 in every
# tool, JSON error objects, "-" for stdin and stdout, ptrepack never
# replacing anything but a regular file, and ptls for people (key paths,
# --depth, collapsed scalar lists, -H, unsafe globals by key) on a
# training checkpoint the torch under test writes (family_gen.py).
# Prints "N passed, N failed"; exit 0/1 (77: no torch, when allowed).
set -u
[ $# -eq 2 ] || { echo "usage: sh $0 1.13|2 BINDIR" >&2; exit 2; }
version=$1 bin=$2
here=$(cd "$(dirname "$0")" && pwd) || exit 1
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
sample=$here/../data/sample.pt

. "$here/../torch/select.sh"
torch_select "$version" "" family-test
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP
cp "$here/family_gen.py" "$work/" || exit 1
if [ "$version" = 1.13 ]; then
	(cd "$work" && "$py" family_gen.py out) >"$work/gen.log" 2>&1
else
	chroot "$root" sh -c 'cd "$1" && python3 family_gen.py out' sh \
		"$inner" >"$work/gen.log" 2>&1
fi || { echo "family_gen.py failed:" >&2; tail -n 5 "$work/gen.log" >&2
	exit 1; }
t=$work/out/train.pt m=$work/out/model.pt
tmp=$work/t
mkdir -p "$tmp"

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
# run TOOL ARGS...: $st, $tmp/o, $tmp/e; a sanitizer report fails
run() {
	tool=$1; shift
	"$bin/$tool" "$@" >"$tmp/o" 2>"$tmp/e"; st=$?
	if grep -q "Sanitizer\|runtime error:" "$tmp/e"; then
		bad "$tool $*: $(grep -m1 "Sanitizer\|runtime error:" "$tmp/e")"
	fi
}
# expect STATUS TOOL ARGS...
expect() {
	want=$1; shift
	run "$@"
	[ "$st" = "$want" ] && ok "$* -> $st" ||
		bad "$*: exit $st, want $want: $(head -c 200 "$tmp/e")"
}

# ---- 15.13: one table of short options, the same help block
for tool in ptls ptdump ptverify ptrepack ptdiff; do
	"$bin/$tool" --help >"$tmp/help.$tool" 2>&1 || bad "$tool --help failed"
	sed -n '/^Common options:/,/^$/p' "$tmp/help.$tool" >"$tmp/common.$tool"
done
for tool in ptdump ptverify ptrepack ptdiff; do
	[ -s "$tmp/common.ptls" ] && cmp -s "$tmp/common.ptls" "$tmp/common.$tool" &&
		ok "$tool --help: the common options exactly as ptls shows them" ||
		bad "$tool --help: common options differ from ptls's"
done
# every "-x, --long" pair in every --help: one long option per letter
cat "$tmp"/help.* | sed -n 's/^ *-\([A-Za-z]\), --\([a-z-]*\).*/\1 \2/p' |
	sort -u >"$tmp/pairs"
dup=$(cut -d' ' -f1 "$tmp/pairs" | uniq -d)
[ -s "$tmp/pairs" ] && [ -z "$dup" ] &&
	ok "each short option means one thing ($(wc -l <"$tmp/pairs") pairs)" ||
	bad "short options with two meanings: $(for l in $dup; do grep "^$l " "$tmp/pairs" | tr '\n' ' '; done)"

# ---- 15.13: exit statuses 0 / 1 / 2 everywhere
python3 "$here/mkbad.py" "$sample" evil "$tmp/evil.pt"
printf '<html><body>404</body></html>\n' >"$tmp/page.pt"
for tool in ptls ptdump ptverify; do
	expect 0 $tool "$sample"
	expect 2 $tool --bogus "$sample"
	expect 2 $tool "$tmp/missing.pt"
	expect 2 $tool "$tmp/page.pt"
done
expect 1 ptls --check "$tmp/evil.pt"
expect 1 ptverify "$tmp/evil.pt"
expect 0 ptdiff "$m" "$m"
expect 1 ptdiff "$m" "$work/out/other.pt"
expect 2 ptdiff "$m" "$tmp/page.pt"
expect 2 ptdiff --bogus "$m" "$m"
expect 2 ptrepack "$tmp/page.pt" "$tmp/x.pt"
expect 2 ptrepack --bogus "$m" "$tmp/x.pt"
[ ! -e "$tmp/x.pt" ] && ok "nothing written on errors" || bad "x.pt written"
# -q: nothing on stdout, the status says it
for c in "ptls -q --check $tmp/evil.pt 1" "ptverify -q $tmp/evil.pt 1" \
	 "ptdiff -q $m $work/out/other.pt 1" "ptdump -q $sample 0" \
	 "ptrepack -q -v $m $tmp/q.pt 0"; do
	# shellcheck disable=SC2086 # words
	set -- $c
	want=$(eval echo "\${$#}")
	args=$(echo "$c" | sed 's/ [0-9]$//')
	# shellcheck disable=SC2086
	run $args
	[ "$st" = "$want" ] && [ ! -s "$tmp/o" ] && ok "$args: silent, exit $st" ||
		bad "$args: exit $st, stdout $(head -c 100 "$tmp/o")"
done

# ---- 15.13: JSON error objects a script can read
for c in "ptls --json" "ptdump --json" "ptverify --json" "ptdiff --json $m" \
	 "ptls --stats --json"; do
	# shellcheck disable=SC2086
	run $c "$tmp/page.pt"
	if [ "$st" = 2 ] && [ "$(wc -l <"$tmp/e")" = 1 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "unreadable" and d["file"] == sys.argv[2], d
assert d["kind"] == "corrupt" and d["offset"] == 0 and d["errno"] > 0, d
assert "HTML page" in d["error"], d' "$tmp/o" "$tmp/page.pt"; then
		ok "$c on an HTML page: exit 2, a JSON error object"
	else
		bad "$c: exit $st: $(head -c 300 "$tmp/o")"
	fi
done

# ---- 15.2: ptrepack's output: never renamed over a special file
"$bin/ptrepack" "$m" "$tmp/ref.pt" || bad "ptrepack to a file failed"
ln -s /proc/self/fd/1 "$tmp/stdout-link"   # what /dev/stdout is
"$bin/ptrepack" "$m" "$tmp/stdout-link" >"$tmp/via-link.pt" 2>"$tmp/e"
[ -L "$tmp/stdout-link" ] && cmp -s "$tmp/via-link.pt" "$tmp/ref.pt" &&
	ok "a link to standard output: the archive on stdout, the link kept" ||
	bad "link to stdout: $(ls -l "$tmp/stdout-link") $(cat "$tmp/e")"
"$bin/ptrepack" "$m" "$tmp/stdout-link" 2>"$tmp/e" | cat >"$tmp/via-pipe.pt"
cmp -s "$tmp/via-pipe.pt" "$tmp/ref.pt" && [ -L "$tmp/stdout-link" ] &&
	ok "a link to standard output that is a pipe: spooled, same bytes" ||
	bad "link to stdout (pipe): $(cat "$tmp/e")"
"$bin/ptrepack" "$m" - | cat >"$tmp/dash.pt"
cmp -s "$tmp/dash.pt" "$tmp/ref.pt" && ok "OUT - into a pipe: same bytes" ||
	bad "OUT - into a pipe differs"
printf 'head' >"$tmp/app.pt"
"$bin/ptrepack" "$m" - >>"$tmp/app.pt"
[ "$(head -c 4 "$tmp/app.pt")" = head ] &&
	tail -c +5 "$tmp/app.pt" | cmp -s - "$tmp/ref.pt" &&
	ok "OUT - appended (O_APPEND): spooled, written after what was there" ||
	bad "OUT - with >>: wrong bytes"
ln -s /dev/null "$tmp/null-link"
expect 0 ptrepack "$m" "$tmp/null-link"
[ -L "$tmp/null-link" ] && [ -c /dev/null ] &&
	ok "a link to /dev/null: written into it, the link kept" ||
	bad "null-link: $(ls -l "$tmp/null-link")"
mkfifo "$tmp/fifo"
cat "$tmp/fifo" >"$tmp/from-fifo.pt" &
reader=$!
"$bin/ptrepack" "$m" "$tmp/fifo" 2>"$tmp/e"
# a tool that never opened the pipe must not hang the test: give the
# reader an end of file (a no-op once the tool's own write end closed)
[ -p "$tmp/fifo" ] || kill $reader 2>/dev/null
python3 -c 'import errno, os, sys
try:
    os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK))
except OSError as e:
    if e.errno not in (errno.ENXIO, errno.ENOENT):
        raise' "$tmp/fifo"
wait $reader
[ -p "$tmp/fifo" ] && cmp -s "$tmp/from-fifo.pt" "$tmp/ref.pt" &&
	ok "a named pipe: written in order, still a pipe" ||
	bad "fifo: $(ls -l "$tmp/fifo") $(cat "$tmp/e")"
echo keep >"$tmp/target.pt"
ln -s target.pt "$tmp/file-link"
expect 0 ptrepack "$m" "$tmp/file-link"
[ -L "$tmp/file-link" ] && cmp -s "$tmp/target.pt" "$tmp/ref.pt" &&
	ok "a link to a regular file: the target replaced, the link kept" ||
	bad "file-link: $(ls -l "$tmp/file-link")"
ln -s nowhere/x.pt "$tmp/dangling"
expect 2 ptrepack "$m" "$tmp/dangling"
[ -L "$tmp/dangling" ] && [ "$(wc -l <"$tmp/e")" = 1 ] &&
	ok "a dangling link: refused in one line, kept" || bad "dangling: $(cat "$tmp/e")"
mkdir "$tmp/dir"
expect 2 ptrepack "$m" "$tmp/dir"
[ -d "$tmp/dir" ] && grep -q "a directory" "$tmp/e" &&
	ok "a directory: refused in one line" || bad "dir: $(cat "$tmp/e")"
cat "$m" | "$bin/ptrepack" - "$tmp/from-stdin.pt" 2>"$tmp/e"
cmp -s "$tmp/from-stdin.pt" "$tmp/ref.pt" && ok "IN - from a pipe: spooled, same bytes" ||
	bad "IN -: $(cat "$tmp/e")"
"$bin/ptrepack" "$m" - <"$m" 1<>"$m" 2>"$tmp/e"
[ $? = 2 ] && cmp -s "$m" "$work/out/model.pt" && grep -q "input file itself" "$tmp/e" &&
	ok "stdout that is the input file: refused" || bad "stdout = input: $(cat "$tmp/e")"

# ---- 19.3: ptls for people
run ptls "$t"
[ "$st" = 0 ] && [ "$(wc -l <"$tmp/o")" -lt 40 ] &&
	grep -q "^rng/python/1  *tuple  *\[625 int: " "$tmp/o" &&
	ok "625 RNG ints on one line ($(wc -l <"$tmp/o") lines in all)" ||
	bad "collapse: $(wc -l <"$tmp/o") lines: $(grep rng "$tmp/o" | head -n 3)"
run ptls -v "$t"
[ "$(grep -c "^rng/python/1/" "$tmp/o")" = 625 ] && ok "-v lists all 625" ||
	bad "-v: $(grep -c "^rng/python/1/" "$tmp/o") lines"
run ptls "$t" optimizer/state
[ "$st" = 0 ] && [ "$(grep -vc '^optimizer/state/\|^#' "$tmp/o")" = 0 ] &&
	[ "$(grep -c '^optimizer/state/' "$tmp/o")" = 6 ] &&
	ok "key path optimizer/state: its 6 tensors only" ||
	bad "key path: $(head -c 300 "$tmp/o")"
run ptls -L 1 "$t"
grep -q "^optimizer  *dict  *(2 items, 6 tensors, 128 B)$" "$tmp/o" &&
	! grep -q "^optimizer/" "$tmp/o" &&
	ok "--depth 1: optimizer as one summary line" ||
	bad "-L 1: $(grep optimizer "$tmp/o" | head -n 3)"
run ptls -T -L 1 -H "$t"
grep -q "^  optimizer/  *dict (2) \.\.\. 6 tensors, 128 B$" "$tmp/o" &&
	grep -q "^  big  *float32 (3, 1024, 1024)  storage 9  12 MiB$" "$tmp/o" &&
	ok "--tree --depth 1 -H: summaries, 12 MiB" ||
	bad "-T -L 1 -H: $(head -c 400 "$tmp/o")"
run ptls -H "$t" big
grep -q "  12 MiB  cpu" "$tmp/o" && ok "-H in the flat list" ||
	bad "-H: $(cat "$tmp/o")"
run ptls "$t"
grep -q "^# unsafe global argparse.Namespace in data.pkl (offset 0x[0-9a-f]*): a plain torch.load would import it, and weights_only=True refuses the file; held by cfg$" "$tmp/o" &&
	ok "unsafe global named by its key (cfg)" ||
	bad "global by key: $(grep unsafe "$tmp/o")"
run ptls --json "$t"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
g = d["unsafe_globals"]
assert [(x["module"], x["name"], x["path"]) for x in g] == [("argparse", "Namespace", "cfg")], g' "$tmp/o" &&
	ok "--json: unsafe_globals[].path" || bad "--json globals: $(grep -o '"unsafe_globals.*' "$tmp/o")"
expect 2 ptls "$t" optimizer/nothing
expect 2 ptls -L x "$t"
cat "$m" | "$bin/ptls" - weight >"$tmp/o" 2>"$tmp/e"
[ $? = 0 ] && grep -q "^weight  *float32  *(3, 4) " "$tmp/o" &&
	[ "$(grep -vc '^#' "$tmp/o")" = 1 ] &&
	ok "ptls - KEY from a pipe" || bad "ptls -: $(head -c 200 "$tmp/o" "$tmp/e")"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
