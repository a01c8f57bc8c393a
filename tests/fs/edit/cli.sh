#!/bin/sh
# cli.sh - the `ptfs` subcommands as a user types them (issue 39 items 3,
# 6 and 21g): ptfs --help (each option once, libfuse's under their own
# heading), the subcommands' -h/-V/unknown options, ptfs status -q (exit
# 1 when edits are staged) and -j (JSON, errors as {"error": ..}), ptfs
# umount -v (each edit written back), ptfs revert of a key whose name
# holds a newline beside keys named like its halves, lines .ptfs/revert
# cannot parse refused with nothing reverted, and the progress line of
# ptfs umount on a terminal while the new file is fsync'd.  Torch (the
# version under test) writes the checkpoint and loads what was written
# back (cli_gen.py).
#
#   usage: sh tests/fs/edit/cli.sh [-k CASE] VERSION PTFS
#
# VERSION "1.13": Debian's torch (/usr/bin/python3); "2": torch 2.x in the
# root scripts/torch2-root.sh builds.  Prints one line per check and
# finally "N passed, N failed"; exit 0 when all passed, 1 otherwise, 77
# without /dev/fuse.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS" 2 2 "$@"
PTFS=$2
fs_progs PTFS
fs_need_fuse
: "${PTFS_TEST_TIMEOUT:=120}"
fs_torch "" ptfs-cli
DAEMON_LOGS_OK=1	# refused edits log why, one "ptfs: " line each
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" || exit 1
fs_py cli_gen.py
DET=$WORK/det
: >"$DET"
NL='
'
# the key with a newline, as its file name
AB="a${NL}b"

# tpy CMD PATH: cli_gen.py under the torch being tested
tpy() {
	fs_pyrun tpy.out "$1" "$inner${2#"$work"}"
	_r=$?
	grep -v ' UCX ' "$WORK/tpy.out"
	return $_r
}
# setup NAME: a fresh $ck (cli_gen.py make), mount point $m, daemon
# stderr $e; startd [OPTION...] mounts it in the foreground
setup() {
	d=$WORK/$1 m=$WORK/mnt/$1 e=$WORK/$1.err ck=$WORK/$1/model.pt
	mkdir -p "$d" "$m"
	tpy make "$ck" >/dev/null || note "cli_gen.py make failed: $(cat "$WORK/tpy.out.err")"
	tpy digest "$ck" >"$d/orig"
}
startd() { start_daemon "$ck" "$m" "$e" "$@"; }
has() { case $1 in *"$2"*) return 0 ;; esac; return 1; }
one() { printf '\1\1\1\1' | dd of="$1" conv=notrunc status=none; }
# st [OPTION...]: ptfs status OPTION... $m into $WORK/st (its exit status)
st() { "$PTFS" status "$@" "$m" >"$WORK/st" 2>"$WORK/st.err"; }
stline() { grep -q -x -F -- "$1" "$WORK/st"; }
# json EXPR FILE [ARG]: the python expression EXPR over j (FILE's JSON)
# is true (ARG is sys.argv[3])
json() {
	/usr/bin/python3 -c 'import json, sys
j = json.load(open(sys.argv[2]))
sys.exit(0 if eval(sys.argv[1]) else 1)' "$@" 2>>"$WORK/json.err"
}

setup probe
probe_fuse "$ck" "$m" "$WORK/probe.err"
stop_daemon "$m"

# ---- ptfs --help: every option once, libfuse's under a heading of theirs
if want help; then
"$PTFS" --help >"$WORK/h" 2>"$WORK/h.err"
rc=$?
[ $rc = 0 ] || note "ptfs --help: exit $rc"
for o in '-h, --help' '-V, --version' '-f' '-d' '-s'; do
	n=$(grep -c -- "^ *$o  " "$WORK/h")
	[ "$n" = 1 ] || note "ptfs --help lists '$o' $n times"
done
grep -q -- '^ *-h  *--help' "$WORK/h" && note "ptfs --help has libfuse's own '-h   --help' line"
fh=$(grep -n '^FUSE options' "$WORK/h" | cut -d: -f1)
ao=$(grep -n 'allow_other' "$WORK/h" | head -n 1 | cut -d: -f1)
ro=$(grep -n -- '-o ro ' "$WORK/h" | head -n 1 | cut -d: -f1)
if [ -z "$fh" ]; then
	note "no 'FUSE options' heading in ptfs --help"
elif [ -z "$ao" ] || [ "$ao" -lt "$fh" ] || [ -z "$ro" ] || [ "$ro" -gt "$fh" ]; then
	note "ptfs's -o ro (line $ro) and libfuse's allow_other (line $ao) on the wrong side of the FUSE heading (line $fh)"
fi
check "ptfs --help: each option once, libfuse's under their own heading" "$(wc -l <"$WORK/h") lines"
for sub in umount status revert; do
	for h in --help -h; do
		"$PTFS" $sub $h >"$WORK/h" 2>"$WORK/h.err"
		rc=$?
		[ $rc = 0 ] && [ ! -s "$WORK/h.err" ] &&
			head -n 1 "$WORK/h" | grep -q "^usage: ptfs $sub " ||
			note "ptfs $sub $h: exit $rc: $(head -n 1 "$WORK/h") $(head -n 1 "$WORK/h.err")"
	done
	"$PTFS" $sub -V >"$WORK/h" 2>"$WORK/h.err"
	rc=$?
	[ $rc = 0 ] && grep -q '^ptfs [0-9]' "$WORK/h" ||
		note "ptfs $sub -V: exit $rc: $(head -n 1 "$WORK/h") $(head -n 1 "$WORK/h.err")"
	"$PTFS" $sub --bogus "$WORK" >"$WORK/h" 2>"$WORK/h.err"
	rc=$?
	[ $rc = 2 ] && [ ! -s "$WORK/h" ] &&
		grep -q "^ptfs: $sub: unrecognized option '--bogus'" "$WORK/h.err" &&
		grep -q "^usage: ptfs $sub " "$WORK/h.err" ||
		note "ptfs $sub --bogus: exit $rc: $(tr '\n' '|' <"$WORK/h.err")"
done
check "ptfs umount|status|revert: --help, -h, -V, an unknown option" "exit 0, 0, 2"
"$PTFS" umount -v "$WORK" >"$WORK/h" 2>"$WORK/h.err"
rc=$?
[ $rc = 1 ] && [ "$(cat "$WORK/h.err")" = "ptfs: $WORK: not a ptfs mount" ] ||
	note "ptfs umount -v of no mount: exit $rc: $(cat "$WORK/h.err")"
check "ptfs umount -v is an option" "exit 1: not a ptfs mount"
fi

# ---- ptfs status -q: the exit status says whether edits are staged
if want status_quiet; then
setup quiet
if startd; then
	st -q
	rc=$?
	[ $rc = 0 ] && [ ! -s "$WORK/st" ] && [ ! -s "$WORK/st.err" ] ||
		note "nothing staged: exit $rc: $(cat "$WORK/st" "$WORK/st.err")"
	one "$m/w"
	st -q
	rc=$?
	[ $rc = 1 ] && [ ! -s "$WORK/st" ] && [ ! -s "$WORK/st.err" ] ||
		note "one edit staged: exit $rc: $(cat "$WORK/st" "$WORK/st.err")"
	"$PTFS" status --quiet "$m/epoch" >"$WORK/st" 2>&1
	rc=$?
	[ $rc = 1 ] && [ ! -s "$WORK/st" ] || note "status --quiet of a path inside: exit $rc"
	st
	rc=$?
	[ $rc = 0 ] && stline "  changed  w" || note "without -q: exit $rc: $(tr '\n' '|' <"$WORK/st")"
	stop_daemon "$m"
else
	note "no mount: $(head -n 1 "$e")"
fi
"$PTFS" status -q "$WORK" >"$WORK/st" 2>"$WORK/st.err"
rc=$?
[ $rc = 2 ] && [ ! -s "$WORK/st" ] &&
	[ "$(cat "$WORK/st.err")" = "ptfs: $WORK: not in a ptfs mount" ] ||
	note "-q of no mount: exit $rc: $(cat "$WORK/st.err")"
if startd -o ro; then
	st -q
	rc=$?
	[ $rc = 0 ] && [ ! -s "$WORK/st" ] || note "-q of a read-only mount: exit $rc"
	stop_daemon "$m"
fi
check "ptfs status -q: exit 0 nothing staged, 1 staged, 2 no mount; silent" "0, 1, 2"
fi

# ---- ptfs status -j: JSON, errors as {"error": ..}
if want status_json; then
setup json
if startd; then
	st -j
	rc=$?
	[ $rc = 0 ] && json 'j["checkpoint"] == sys.argv[3] and j["staged"] == [] and j["refused"] == []' "$WORK/st" "$ck" ||
		note "nothing staged: exit $rc: $(head -c 300 "$WORK/st")"
	one "$m/w"
	one "$m/$AB"
	mv "$m/b" "$m/b2"
	echo 8 >"$m/epoch"
	echo eight >"$m/epoch" 2>/dev/null
	st -j
	rc=$?
	cp "$WORK/st" "$WORK/st.json"
	[ $rc = 0 ] || note "exit $rc: $(cat "$WORK/st.err")"
	for want in \
	    '{"kind": "changed", "path": "w", "dir": False} in j["staged"]' \
	    '{"kind": "changed", "path": "a\nb", "dir": False} in j["staged"]' \
	    '{"kind": "renamed", "from": "b", "path": "b2", "dir": False} in j["staged"]' \
	    '{"kind": "value", "path": "epoch", "from": "3", "to": "8", "dir": False} in j["staged"]' \
	    'len(j["staged"]) == 4' \
	    'j["counts"] == {"changed": 2, "renamed": 1, "removed": 0, "added": 0, "value": 1, "metadata": 0}' \
	    'j["daemon_pid"] > 0 and j["read_only"] is False and j["overlay"]["dir"].endswith(".model.pt.ptfs")' \
	    '[(r["path"], r["errno"]) for r in j["refused"]] == [("epoch", "EINVAL")] and "python literal" in j["refused"][0]["message"]'; do
		json "$want" "$WORK/st.json" || note "not true of status -j: $want: $(head -c 600 "$WORK/st.json")"
	done
	st -j -q
	rc=$?
	[ $rc = 1 ] && [ ! -s "$WORK/st" ] || note "-jq: exit $rc, $(wc -c <"$WORK/st") bytes"
	stop_daemon "$m"
else
	note "no mount: $(head -n 1 "$e")"
fi
"$PTFS" status -j "$WORK" >"$WORK/st" 2>"$WORK/st.err"
rc=$?
[ $rc = 2 ] && json 'set(j) == {"path", "error"} and j["error"] == "not in a ptfs mount"' "$WORK/st" &&
	[ "$(cat "$WORK/st.err")" = "ptfs: $WORK: not in a ptfs mount" ] ||
	note "-j of no mount: exit $rc: $(cat "$WORK/st") $(cat "$WORK/st.err")"
if startd -o ro; then
	st -j
	rc=$?
	[ $rc = 0 ] && json 'j["read_only"] is True and j["staged"] == [] and j["checkpoint"] == sys.argv[3]' "$WORK/st" "$ck" ||
		note "-j of a read-only mount: exit $rc: $(cat "$WORK/st")"
	stop_daemon "$m"
fi
check "ptfs status -j: the staged edits, counts, refusals; errors as JSON" "json.load reads them"
fi

# ---- ptfs umount -v: what was written back, edit by edit
if want umount_verbose; then
setup verbose
if startd; then
	one "$m/w"
	echo 8 >"$m/epoch"
	"$PTFS" umount -v "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	size=$(stat -c %s "$ck")
	[ $rc = 0 ] && [ ! -s "$WORK/err" ] &&
		[ "$(sed -n 1p "$WORK/out")" = "written back: 1 tensor changed, 1 value edited; $size bytes to $ck" ] &&
		[ "$(sed -n 2p "$WORK/out")" = "  changed  w" ] &&
		[ "$(sed -n 3p "$WORK/out")" = "  value    epoch: 3 -> 8" ] &&
		[ "$(wc -l <"$WORK/out")" = 3 ] && ! is_mounted "$m" ||
		note "exit $rc: $(tr '\n' '|' <"$WORK/out") $(cat "$WORK/err")"
	stop_daemon "$m"
	tpy digest "$ck" | grep -qx "$(printf "'epoch'\t8")" || note "torch.load: epoch is not 8"
else
	note "no mount: $(head -n 1 "$e")"
fi
check "ptfs umount -v: the summary, then each edit" "3 lines"
fi

# ---- ptfs revert of a name with a newline (issue 39 item 6)
if want revert_newline; then
setup newline
if startd; then
	one "$m/a"
	one "$m/$AB"
	one "$m/b"
	st
	stline '  changed  "a\nb"' && stline '  changed  a' && stline '  changed  b' &&
		[ "$(grep -c '^  ' "$WORK/st")" = 3 ] ||
		note "status before: $(tr '\n' '|' <"$WORK/st")"
	# a refused edit of that key: its line and its reason one line
	# (the reason names it as diag.c does, control characters as ?)
	printf 'xx' >"$m/$AB" 2>/dev/null
	st
	sed -n '/^refused: /,$p' "$WORK/st" >"$WORK/refused"
	[ "$(wc -l <"$WORK/refused")" = 2 ] &&
		grep -q '^  "a\\nb": EINVAL: a?b: ' "$WORK/refused" ||
		note "the refusal: $(tr '\n' '|' <"$WORK/refused")"
	check "ptfs status prints a name with a newline escaped, on one line" "  changed  \"a\\nb\""
	out=$("$PTFS" revert "$m/$AB" 2>&1)
	rc=$?
	[ $rc = 0 ] && [ "$out" = 'reverted: "a\nb"' ] || note "exit $rc: $out"
	[ "$(od -An -tx1 "$m/$AB" | tr -d ' ')" = 00000000000000000000000000000000 ] ||
		note "a\\nb is not zeros again"
	for k in a b; do
		[ "$(od -An -tx1 -N4 "$m/$k" | tr -d ' ')" = 01010101 ] || note "$k lost its edit"
	done
	st
	stline '  changed  a' && stline '  changed  b' && ! stline '  changed  "a\nb"' ||
		note "status after: $(tr '\n' '|' <"$WORK/st")"
	"$PTFS" umount -q "$m" >/dev/null 2>"$WORK/err" || note "ptfs umount: $(cat "$WORK/err")"
	stop_daemon "$m"
	tpy digest "$ck" >"$WORK/got"
	for k in "'a'" "'b'"; do
		[ "$(grep "^$k	" "$WORK/got")" != "$(grep "^$k	" "$d/orig")" ] ||
			note "torch.load: $k is the original"
	done
	[ "$(grep "^'a.nb'	" "$WORK/got")" = "$(grep "^'a.nb'	" "$d/orig")" ] ||
		note "torch.load: 'a\\nb' is not the original"
	check "ptfs revert m/a<LF>b reverts that key only" "a and b keep their edits"
else
	fail "revert_newline" "no mount: $(head -n 1 "$e")"
fi
fi

# ---- lines .ptfs/revert cannot parse are refused, nothing reverted
if want revert_lines; then
setup lines
# edited3: a, a<LF>b and b are still edited (listed in ptfs status)
edited3() {
	st && stline '  changed  a' && stline '  changed  b' &&
		stline '  changed  "a\nb"'
}
# refused LABEL BYTES: writing BYTES (printf format) fails, and nothing
# is reverted
refused() {
	printf "$2" >"$m/.ptfs/revert" 2>"$WORK/w.err" &&
		note "$1: the write succeeded"
	edited3 || note "$1: something was reverted: $(tr '\n' '|' <"$WORK/st")"
}
if startd; then
	one "$m/a"
	one "$m/$AB"
	one "$m/b"
	refused "a line starting with a NUL" '\0a\n'
	refused "a NUL line" '\0'
	refused "a NUL-terminated path, then a newline" 'a\0\n'
	refused "a path after the last NUL" 'a\0b'
	refused "an empty path between NULs" 'a\0\0'
	long=$(printf '%4000s' '' | tr ' ' x)
	refused "a name longer than any file name" "a/$long\\n"
	check "what .ptfs/revert cannot parse is refused; nothing reverted" "6 refused"
	printf 'a\nb\0' >"$m/.ptfs/revert" 2>"$WORK/w.err" || note "NUL form: $(cat "$WORK/w.err")"
	st
	stline '  changed  a' && stline '  changed  b' && ! grep -q 'a\\nb' "$WORK/st" ||
		note "after the NUL form: $(tr '\n' '|' <"$WORK/st")"
	echo a >"$m/.ptfs/revert" 2>"$WORK/w.err" || note "line form: $(cat "$WORK/w.err")"
	st
	stline '  changed  b' && ! stline '  changed  a' ||
		note "after the line form: $(tr '\n' '|' <"$WORK/st")"
	check "NUL-terminated paths revert any key; one a line still works" "a<LF>b, then a"
	stop_daemon "$m"
else
	fail "revert_lines" "no mount: $(head -n 1 "$e")"
fi
fi

# ---- the progress line while the new file is fsync'd (issue 39 21g)
if want progress_sync; then
setup progress
if ! command -v script >/dev/null 2>&1; then
	skip "progress line during fsync" "no script(1) for a terminal"
elif ! faultinj_ready; then
	skip "progress line during fsync" "$FAULTINJ_WHY"
elif LD_PRELOAD=$INJ startd; then
	one "$m/w"
	pid=$(ptfs_pid)
	printf 'sync .ptfs-new. 1 STOP\n' >"$CTL"
	: >"$CTL.log"
	# a terminal for ptfs umount's stderr (the daemon stops at the new
	# file's fsync; the line is drawn from a second on)
	run_limited 120 script -qec \
		"'$PTFS' umount '$m'" "$WORK/tty" </dev/null >/dev/null 2>&1 &
	upid=$!
	i=0
	while [ $i -lt 1200 ] && [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != T ]; do
		sleep 0.05
		i=$((i + 1))
	done
	grep -q STOP "$CTL.log" || note "the daemon did not stop at the fsync"
	: >"$CTL"
	sleep 1.5	# ptfs umount asks for the progress now, and waits
	kill -CONT "$pid"
	wait $upid
	rc=$?
	[ $rc = 0 ] || note "ptfs umount: exit $rc: $(tr '\r' '|' <"$WORK/tty" | head -c 300)"
	tr '\r' '\n' <"$WORK/tty" >"$WORK/tty.lines"
	grep -q "syncing" "$WORK/tty.lines" || note "no 'syncing' on the terminal: $(tr '\n' '|' <"$WORK/tty.lines" | head -c 300)"
	grep -q "100%" "$WORK/tty.lines" && note "the terminal said 100% while fsync ran: $(grep -m 1 '100%' "$WORK/tty.lines")"
	stop_daemon "$m"
	check "ptfs umount on a terminal says it is syncing while fsync runs" "syncing, no 100%"
else
	fail "progress_sync" "no mount: $(head -n 1 "$e")"
fi
fi

for f in "$WORK"/*.err; do
	case $f in */tpy.out.err|*/st.err|*/h.err|*/w.err|*/json.err|*/err|*/tserve.err) continue ;; esac
	daemon_problems "$f" "$DET" || :
done
check "the daemons printed nothing unexpected" "clean"
conclude
