#!/bin/sh
# Undo and status through real mounts (issue 19 item 5, issue 15 item 6):
# `ptfs status` after each kind of edit (and on a dead daemon, a path that
# is no mount, a path inside one), the summary `ptfs umount` prints (counts,
# bytes written, refused edits, "nothing to write back", -q).  Torch (the
# version under test) writes the checkpoints and loads what was written
# back (undo_check.py).
#
#   usage: sh tests/fs/edit/undo.sh [-k CASE] VERSION PTFS PTLS SHARED_DIR
#
# VERSION "1.13": Debian's torch (/usr/bin/python3); "2": torch 2.x in the
# root scripts/torch2-root.sh builds (the scratch directory and the mounts
# are under its /tmp, so the chroot sees them).  SHARED_DIR holds the
# generated fixtures (a state dict of each torch is edited and reverted).
# Prints one line per check and finally "N passed, N failed"; exit 0 when
# all passed, 1 otherwise, 77 without /dev/fuse.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS SHARED_DIR" 4 4 "$@"
PTFS=$2 ptls=$3 shared=$4
fs_progs PTFS ptls
fs_need_fuse
: "${PTFS_TEST_TIMEOUT:=120}"
. "$fs/../fixtures/fx.sh"
fs_torch "$shared" ptfs-undo
DAEMON_LOGS_OK=1	# refused edits log why, one "ptfs: " line each
. "$fs/lib/lib.sh"

cleanup() {
	trap '' INT TERM HUP
	release_work
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

mkdir -p "$WORK/py" "$WORK/mnt" || exit 1
fs_py undo_check.py
# tpy CMD PATH: undo_check.py under the torch being tested
tpy() {
	fs_pyrun tpy.out "$1" "$inner${2#"$work"}"
	_tpy_r=$?
	# torch 2's UCX warns on stdout: keep only the answer
	grep -v ' UCX ' "$WORK/tpy.out"
	cat "$WORK/tpy.out.err" >>"$WORK/py.err"
	return $_tpy_r
}
sum() { sha256sum <"$1" | cut -c1-16; }
has() { case $1 in *"$2"*) return 0 ;; esac; return 1; }
# check LABEL COND-STATUS DETAIL: pass when the status before is 0
check() {
	if [ "$2" = 0 ]; then pass "$1" "$3"; else fail "$1" "$3"; fi
}
# startd [OPTION...]: ptfs -f on $ck at $m, its stderr in a file of its
# own ($e; all are scanned for sanitizer reports at the end)
ndaemon=0
startd() {
	ndaemon=$((ndaemon + 1))
	e=$WORK/daemon.$ndaemon.err
	start_daemon "$ck" "$m" "$e" "$@"
}
# setup NAME: a fresh $d/model.pt (undo_check.py make), its digest in
# $d/orig, mount point $m, daemon stderr $e
# place NAME: only the paths and directories of setup NAME
place() {
	d=$WORK/$1 m=$WORK/mnt/$1 e=$WORK/$1.err ck=$WORK/$1/model.pt
	mkdir -p "$d" "$m"
}
setup() {
	place "$1"
	tpy make "$ck"
	tpy digest "$ck" >"$d/orig"
}
# digest_is FILE EXPECTED: torch.load of FILE gives the digest lines in
# EXPECTED (a file); the difference on failure in $WORK/diff
digest_is() {
	tpy digest "$1" >"$WORK/got"
	diff "$2" "$WORK/got" >"$WORK/diff"
}
# expect SED-SCRIPT: $d/orig edited by sed into $d/want
expect() { sed "$1" "$d/orig" >"$d/want"; }
# st: ptfs status of $m into $WORK/st (its exit status)
st() { "$PTFS" status "$m" >"$WORK/st" 2>"$WORK/st.err"; }
stline() { grep -c -x -F -- "$1" "$WORK/st" >/dev/null; }

# a state dict of the torch under test, from the fixtures
fxf=$fx/torch-$version/state_dict.pt

# Is FUSE usable at all?
setup probe
probe_fuse "$ck" "$m" "$WORK/probe.err"
stop_daemon "$m"

# ---- status: nothing staged, then each kind of edit
if want status; then
setup status
if startd; then
	st
	rc=$?
	[ $rc = 0 ] && stline "checkpoint: $ck" &&
		stline "daemon: pid $(ptfs_pid)" &&
		stline "overlay: $d/.model.pt.ptfs: nothing in it yet" &&
		stline "staged: nothing (unmounting writes nothing)"
	check "status of a fresh mount" $? "exit $rc: $(tr '\n' '|' <"$WORK/st")"
	printf '\1\2\3\4' | dd of="$m/w" conv=notrunc 2>/dev/null
	st && stline "staged: 1 tensor changed" && stline "  changed  w"
	check "status after an in-place write" $? "$(tr '\n' '|' <"$WORK/st")"
	mv "$m/b" "$m/b2"
	st && stline "  renamed  b -> b2" &&
		stline "staged: 1 tensor changed, 1 key renamed"
	check "status after mv" $? "$(tr '\n' '|' <"$WORK/st")"
	rm -r "$m/opt"
	st && stline "  removed  opt/"
	check "status after rm -r" $? "$(tr '\n' '|' <"$WORK/st")"
	mkdir "$m/extra" && printf '\0\0\200\77' >"$m/extra/one"
	st && stline "  added    extra/" && ! grep -q "extra/one" "$WORK/st"
	check "status after mkdir and a new file in it" $? "$(tr '\n' '|' <"$WORK/st")"
	echo 8 >"$m/epoch"
	st && stline "  value    epoch: 3 -> 8" &&
		stline "staged: 1 tensor changed, 1 key renamed, 1 removed, 1 added, 1 value edited"
	check "status after a value edit" $? "$(tr '\n' '|' <"$WORK/st")"
	echo eight >"$m/epoch"		# refused at close(); the shell cannot tell
	st && stline "refused: 1 edit since the mount (not staged; the reasons are in the daemon's log too)" &&
		stline "  epoch: EINVAL: epoch: 'eight' is not a python literal; the value stays 8"
	check "status lists a refused edit with its reason" $? "$(tr '\n' '|' <"$WORK/st")"
	# w's copy (4096 bytes) and extra/one's data (4)
	grep -q "^overlay: $d/.model.pt.ptfs: journal [0-9]* bytes, 2 data files of 4100 bytes$" "$WORK/st"
	check "status describes the overlay" $? "$(grep overlay "$WORK/st")"
	# a refused rename (a temp file of the wrong size over w) is listed
	# under the name it was refused for
	printf '\0\0\0\0' >"$m/.w.tmp"
	mv "$m/.w.tmp" "$m/w" 2>/dev/null
	rc=$?
	rm -f "$m/.w.tmp"
	st && [ $rc != 0 ] &&
		stline "refused: 2 edits since the mount (not staged; the reasons are in the daemon's log too)" &&
		grep -q "^  .w.tmp: EINVAL: w: new contents are 4 bytes, the tensor is [0-9]*; it keeps its old values$" "$WORK/st"
	check "status lists a refused rename under its name" $? "mv exit $rc: $(tr '\n' '|' <"$WORK/st")"
	"$PTFS" status "$m/layer3" >"$WORK/st2" 2>&1 && cmp -s "$WORK/st" "$WORK/st2"
	check "status of a path inside the mount" $? "$(head -n 2 "$WORK/st2" | tr '\n' '|')"
	cat "$m/.ptfs/status" >"$WORK/st3" && cmp -s "$WORK/st" "$WORK/st3"
	check ".ptfs/status reads the same" $? "$(diff "$WORK/st" "$WORK/st3" | head -n 3)"
	# the daemon dies: status says so in one line, exit 2
	cp "$WORK/st" "$WORK/st.before"
	kill -9 "$(ptfs_pid)"
	wait "$DPID" 2>/dev/null
	DPID=
	"$PTFS" status "$m" >"$WORK/st" 2>"$WORK/st.err"
	rc=$?
	[ $rc = 2 ] && [ ! -s "$WORK/st" ] && [ "$(wc -l <"$WORK/st.err")" = 1 ] &&
		has "$(cat "$WORK/st.err")" "daemon is gone" &&
		has "$(cat "$WORK/st.err")" "fusermount3 -u $m, then ptfs $ck $m"
	check "status on a dead daemon: one line, exit 2" $? "exit $rc: $(cat "$WORK/st.err")"
	fusermount3 -uz "$m"
	# mounted again: the same edits, and how many records were resumed
	if startd; then
		st
		grep -v '^daemon: \|^resumed: \|^refused: \|^  \(epoch\|\.w\.tmp\): EINVAL' "$WORK/st.before" >"$WORK/a"
		grep -v '^daemon: \|^resumed: ' "$WORK/st" >"$WORK/b"
		cmp -s "$WORK/a" "$WORK/b" && grep -q '^resumed: what is staged below comes from an earlier mount$' "$WORK/st"
		check "status after a crash and a new mount: the same, resumed" $? "$(diff "$WORK/a" "$WORK/b" | tr '\n' '|')"
		stop_daemon "$m"
	else
		fail "mount after kill -9" "$(head -n 1 "$e")"
	fi
else
	fail "status" "no mount: $(head -n 1 "$e")"
fi
"$PTFS" status "$WORK" >"$WORK/st" 2>"$WORK/st.err"
rc=$?
[ $rc = 2 ] && [ "$(cat "$WORK/st.err")" = "ptfs: $WORK: not in a ptfs mount" ]
check "status of a path in no ptfs mount: one line, exit 2" $? "exit $rc: $(cat "$WORK/st.err")"
"$PTFS" status >/dev/null 2>"$WORK/st.err"
rc=$?
[ $rc = 2 ] && grep -q "usage: ptfs status" "$WORK/st.err"
check "status without a path: usage, exit 2" $? "exit $rc: $(head -n 1 "$WORK/st.err")"
fi

# ---- ptfs umount says what it wrote, and what was refused
if want summary; then
setup summary
if startd; then
	printf '\0\0\0\100' | dd of="$m/w" bs=4 seek=1 conv=notrunc 2>/dev/null
	mv "$m/b" "$m/b2"
	rm -r "$m/opt"
	mkdir "$m/extra"
	echo 8 >"$m/epoch"
	echo 8.5 >"$m/epoch"
	"$PTFS" umount "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	size=$(stat -c %s "$ck")
	[ $rc = 0 ] && [ ! -s "$WORK/err" ] &&
		[ "$(sed -n 1p "$WORK/out")" = "written back: 1 tensor changed, 1 key renamed, 1 removed, 1 added, 1 value edited; $size bytes to $ck" ] &&
		[ "$(sed -n 2p "$WORK/out")" = "refused: 1 edit since the mount (not staged; the reasons are in the daemon's log too)" ] &&
		[ "$(sed -n 3p "$WORK/out")" = "  epoch: EINVAL: epoch: is an int, '8.5' is a float: a change of type is refused; the value stays 8" ] &&
		[ "$(wc -l <"$WORK/out")" = 3 ]
	check "ptfs umount: counts, bytes, output path, refused edits" $? "exit $rc: $(tr '\n' '|' <"$WORK/out") $(cat "$WORK/err")"
	stop_daemon "$m"
	expect '/^b\t/s/^b/b2/; /^opt/d; s/^epoch\t3$/epoch\t8/; /^w\t/d'
	printf 'extra\tdict\n' >>"$d/want"
	tpy digest "$ck" | grep -v '^w	' >"$WORK/got"
	sort "$d/want" | diff - "$WORK/got" >"$WORK/diff" &&
		[ "$(tpy digest "$ck" | grep '^w	')" != "$(grep '^w	' "$d/orig")" ]
	check "torch.load of what was written back" $? "$(head -n 4 "$WORK/diff" | tr '\n' '|')"
else
	fail "summary" "no mount: $(head -n 1 "$e")"
fi
setup nothing
before=$(sum "$ck")
if startd; then
	cat "$m/w" >/dev/null
	"$PTFS" umount "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	stop_daemon "$m"
	[ $rc = 0 ] && [ "$(cat "$WORK/out")" = "nothing to write back" ] &&
		[ "$(sum "$ck")" = "$before" ]
	check "ptfs umount without edits: nothing to write back" $? "exit $rc: $(cat "$WORK/out" "$WORK/err")"
fi
if startd; then
	echo 9 >"$m/epoch"
	"$PTFS" umount -q "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	stop_daemon "$m"
	[ $rc = 0 ] && [ ! -s "$WORK/out" ] && [ ! -s "$WORK/err" ] &&
		tpy digest "$ck" | grep -qx "$(printf 'epoch\t9')"
	check "ptfs umount -q: written back, nothing printed" $? "exit $rc: $(cat "$WORK/out" "$WORK/err")"
fi
if startd -o ro; then
	"$PTFS" umount "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	stop_daemon "$m"
	[ $rc = 0 ] && [ "$(cat "$WORK/out")" = "nothing to write back (a read-only mount)" ]
	check "ptfs umount of a read-only mount" $? "exit $rc: $(cat "$WORK/out" "$WORK/err")"
fi
fi

# ---- ptfs umount --discard: every staged edit dropped, then unmounted
if want discard; then
setup discard
before=$(sum "$ck")
if startd; then
	printf '\1\2\3\4' | dd of="$m/w" conv=notrunc 2>/dev/null
	rm -r "$m/opt"
	mkdir "$m/extra"
	"$PTFS" umount --discard "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	i=0
	while kill -0 "$DPID" 2>/dev/null && [ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	is_mounted "$m" && um=mounted || um=
	stop_daemon "$m"
	[ $rc = 0 ] && [ -z "$um" ] && [ "${DRC:-x}" = 0 ] && [ ! -s "$WORK/err" ] &&
		[ "$(cat "$WORK/out")" = "discarded: 1 tensor changed, 1 removed, 1 added; $d/.model.pt.ptfs removed, $ck untouched" ]
	check "ptfs umount --discard: says what it dropped, unmounts, the daemon exits 0" $? "exit $rc, daemon ${DRC:-?} $um: $(cat "$WORK/out" "$WORK/err")"
	[ "$(sum "$ck")" = "$before" ] && [ ! -e "$d/.model.pt.ptfs" ] &&
		[ "$(ls -A "$d" | tr '\n' ' ')" = "model.pt orig " ]
	check "--discard: the checkpoint byte-identical, no overlay left" $? "$(ls -A "$d" | tr '\n' ' ')"
	digest_is "$ck" "$d/orig"
	check "--discard: torch.load gives the original" $? "$(head -n 3 "$WORK/diff" | tr '\n' '|')"
else
	fail "discard" "no mount: $(head -n 1 "$e")"
fi
# -o overlay=DIR with the user's own files in it: only ptfs's go
mkdir -p "$d/runs"
for f in 2024 journal ptfs.journal.bak; do echo "$f" >"$d/runs/$f"; done
if startd -o overlay="$d/runs"; then
	printf '\1\2\3\4' | dd of="$m/b" conv=notrunc 2>/dev/null
	echo 4 >"$m/epoch"
	"$PTFS" umount --discard "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	stop_daemon "$m"
	[ $rc = 0 ] && [ "$(sum "$ck")" = "$before" ] &&
		[ "$(ls -A "$d/runs" | tr '\n' ' ')" = "2024 journal ptfs.journal.bak " ]
	check "--discard with -o overlay=DIR keeps the user's files" $? "exit $rc: $(ls -A "$d/runs" | tr '\n' ' ') $(cat "$WORK/err")"
fi
# through the control file: the mount goes away by itself, nothing is
# written back at its end
if startd; then
	echo 11 >"$m/epoch"
	mv "$m/b" "$m/b2"
	echo discard >"$m/.ptfs/discard"
	rc=$?
	i=0
	while is_mounted "$m" && [ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	is_mounted "$m" && um=mounted || um=
	stop_daemon "$m"
	[ $rc = 0 ] && [ -z "$um" ] && [ "${DRC:-x}" = 0 ] &&
		[ "$(sum "$ck")" = "$before" ] && [ ! -e "$d/.model.pt.ptfs" ]
	check "echo > .ptfs/discard: dropped, unmounted, nothing written back" $? "exit $rc, daemon ${DRC:-?} $um; $(ls -A "$d" | tr '\n' ' ')"
	if startd; then
		st
		stop_daemon "$m"
		[ ! -s "$e" ] && stline "staged: nothing (unmounting writes nothing)"
		check "the next mount resumes nothing" $? "$(head -n 1 "$e") $(grep staged "$WORK/st")"
	fi
fi
# after a write-back there is nothing left to drop: refused, still mounted
if startd; then
	echo 12 >"$m/epoch"
	echo commit >"$m/.ptfs/commit"
	"$PTFS" umount --discard "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	is_mounted "$m" && um=mounted || um=
	"$PTFS" umount "$m" >/dev/null 2>&1
	stop_daemon "$m"
	[ $rc = 1 ] && [ "$um" = mounted ] &&
		has "$(cat "$WORK/err")" "nothing to discard (written back: 1 value edited;" &&
		tpy digest "$ck" | grep -qx "$(printf 'epoch\t12')"
	check "--discard after a write-back is refused; the mount stays" $? "exit $rc: $(cat "$WORK/err")"
fi
# a dead daemon: say exactly what to run, and it works
setup discard_dead
before=$(sum "$ck")
if startd; then
	rm -r "$m/layer3"
	kill9x() { kill -9 "$(ptfs_pid)" 2>/dev/null; wait "$DPID" 2>/dev/null; DPID=; }
	kill9x
	"$PTFS" umount --discard "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	want="ptfs: $m: the ptfs daemon is gone (killed?); to drop the staged edits: fusermount3 -u $m; ptfs $ck $m -o discard; ptfs umount $m"
	[ $rc = 1 ] && [ "$(cat "$WORK/err")" = "$want" ]
	check "--discard on a dead daemon says what to run" $? "exit $rc: $(cat "$WORK/err")"
	fusermount3 -u "$m" && "$PTFS" "$ck" "$m" -o discard 2>"$WORK/dd.err" &&
		"$PTFS" umount "$m" >"$WORK/out" 2>>"$WORK/dd.err" &&
		[ "$(sum "$ck")" = "$before" ] && [ ! -e "$d/.model.pt.ptfs" ] &&
		[ "$(cat "$WORK/out")" = "nothing to write back" ]
	check "... and what it says works" $? "$(cat "$WORK/dd.err" "$WORK/out")"
	unmount "$m"
fi
fi

# ---- ptfs revert PATH: that path as the checkpoint has it, the other
# edits kept
if want revert; then
setup revert
if startd; then
	od -An -tx1 "$m/w" >"$WORK/w.orig"
	printf '\1\2\3\4' | dd of="$m/w" conv=notrunc 2>/dev/null
	echo 8 >"$m/epoch"
	rm -r "$m/layer3"
	mv "$m/b" "$m/b2"
	mkdir "$m/extra" && printf 'abcd' >"$m/extra/x"
	mv "$m/opt" "$m/opt2" && printf '\1\2\3\4' | dd of="$m/opt2/m" conv=notrunc 2>/dev/null
	out=$("$PTFS" revert "$m/w" 2>&1)
	rc=$?
	od -An -tx1 "$m/w" >"$WORK/w.now"
	st
	[ $rc = 0 ] && [ "$out" = "reverted: w" ] && cmp -s "$WORK/w.orig" "$WORK/w.now" &&
		! grep -q "changed  w" "$WORK/st" && stline "  value    epoch: 3 -> 8"
	check "revert of an edited tensor: its bytes back, the rest kept" $? "exit $rc: $out; $(tr '\n' '|' <"$WORK/st")"
	out=$("$PTFS" revert "$m/layer3" 2>&1)
	rc=$?
	[ $rc = 0 ] && [ "$(ls "$m/layer3" 2>&1 | tr '\n' ' ')" = "bias weight " ] &&
		! "$PTFS" status "$m" | grep -q "removed  layer3"
	check "revert of an rm -r'd subtree" $? "exit $rc: $out; $(ls "$m/layer3" 2>&1 | tr '\n' ' ')"
	out=$("$PTFS" revert "$m/b" 2>&1)
	rc=$?
	[ $rc = 0 ] && [ -f "$m/b" ] && [ ! -e "$m/b2" ] &&
		[ "$(ls "$m" | tr '\n' ' ')" = "b epoch extra layer3 lr model name opt2 w " ]
	check "revert of a renamed key: back under its name, the new name gone" $? "exit $rc: $out; $(ls "$m" | tr '\n' ' ')"
	out=$("$PTFS" revert "$m/extra" 2>&1)
	rc=$?
	[ $rc = 0 ] && [ ! -e "$m/extra" ]
	check "revert of a new key removes it" $? "exit $rc: $out; $(ls "$m" | tr '\n' ' ')"
	out=$("$PTFS" revert "$m/opt" 2>&1)
	rc=$?
	[ $rc = 0 ] && [ ! -e "$m/opt2" ] && [ "$(ls "$m/opt" | tr '\n' ' ')" = "m v " ] &&
		[ "$(od -An -tx1 -N4 "$m/opt/m" | tr -d ' ')" = 00000000 ]
	check "revert of a renamed directory with an edit inside" $? "exit $rc: $out; $(ls "$m" | tr '\n' ' ')"
	out=$("$PTFS" revert "$m/no/such" 2>&1)
	rc=$?
	[ $rc = 2 ] || [ $rc = 1 ]
	out2=$("$PTFS" revert "$m/nosuch" 2>&1)
	rc2=$?
	[ $rc2 = 0 ] && [ "$out2" = "nothing to revert at nosuch: it is what the checkpoint holds" ] &&
		[ $rc = 1 ] && [ "$out" = "ptfs: no/such: no is not in the mount (revert it first, or with it)" ]
	check "revert of what is in neither: says so" $? "exit $rc: $out; exit $rc2: $out2"
	st
	cp "$WORK/st" "$WORK/st.before"
	stline "staged: 1 value edited"
	check "status after the reverts: only the value edit is left" $? "$(tr '\n' '|' <"$WORK/st")"
	# a crash right after the reverts: the next mount shows the same
	kill9 "$m"
	if startd; then
		st
		grep -v '^daemon: \|^resumed: \|^overlay: ' "$WORK/st.before" >"$WORK/a"
		grep -v '^daemon: \|^resumed: \|^overlay: ' "$WORK/st" >"$WORK/b"
		od -An -tx1 "$m/w" >"$WORK/w.now"
		cmp -s "$WORK/a" "$WORK/b" && cmp -s "$WORK/w.orig" "$WORK/w.now" &&
			[ "$(ls "$m" | tr '\n' ' ')" = "b epoch layer3 lr model name opt w " ]
		check "revert across kill -9: the same state after the next mount" $? "$(diff "$WORK/a" "$WORK/b" | tr '\n' '|') $(ls "$m" | tr '\n' ' ')"
		"$PTFS" umount "$m" >"$WORK/out" 2>"$WORK/err"
		rc=$?
		stop_daemon "$m"
		expect 's/^epoch\t3$/epoch\t8/'
		digest_is "$ck" "$d/want"
		[ $rc = 0 ] && [ -z "$(cat "$WORK/diff")" ] &&
			[ "$(head -n 1 "$WORK/out")" = "written back: 1 value edited; $(stat -c %s "$ck") bytes to $ck" ]
		check "torch.load after the reverts: the checkpoint's, with the kept edit" $? "exit $rc: $(head -n 4 "$WORK/diff" | tr '\n' '|') $(cat "$WORK/out" "$WORK/err")"
	else
		fail "mount after kill -9 of a revert" "$(head -n 1 "$e")"
	fi
else
	fail "revert" "no mount: $(head -n 1 "$e")"
fi

# tied weights: a staged storage shared with a key outside the path
setup tied
if startd; then
	printf '\1\2\3\4' | dd of="$m/model/emb" conv=notrunc 2>/dev/null
	echo 5 >"$m/epoch"
	"$PTFS" revert "$m/model/emb" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	[ $rc = 1 ] && [ ! -s "$WORK/out" ] && [ "$(wc -l <"$WORK/err")" = 1 ] &&
		has "$(cat "$WORK/err")" "model/emb: its storage" &&
		has "$(cat "$WORK/err")" "model/head views it too" &&
		[ "$(od -An -tx1 -N4 "$m/model/emb" | tr -d ' ')" = 01020304 ]
	check "revert of one of two tied tensors is refused, naming the other" $? "exit $rc: $(cat "$WORK/err")"
	"$PTFS" revert "$m/model/emb" "$m/model/head" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	[ $rc = 0 ] && [ "$(cat "$WORK/out")" = "$(printf 'reverted: model/emb\nreverted: model/head')" ] &&
		[ "$(od -An -tx1 -N4 "$m/model/head" | tr -d ' ')" = 00000000 ]
	check "reverting both at once is fine" $? "exit $rc: $(cat "$WORK/out" "$WORK/err")"
	"$PTFS" umount "$m" >"$WORK/out" 2>&1
	stop_daemon "$m"
	expect 's/^epoch\t3$/epoch\t5/'
	digest_is "$ck" "$d/want"
	check "torch.load: the tie kept, the other edit kept" $? "$(head -n 4 "$WORK/diff" | tr '\n' '|')"
fi

# a state dict the torch under test wrote (fixtures): edit everything
# kind of way, revert it all, and nothing is left to write back
d=$WORK/sd m=$WORK/mnt/sd e=$WORK/sd.err ck=$d/state_dict.pt
mkdir -p "$d" "$m"
cp "$fxf" "$ck"
before=$(sum "$ck")
if startd; then
	rm "$m/1.running_mean"
	printf '\1\2\3\4' | dd of="$m/0.weight" conv=notrunc 2>/dev/null
	mv "$m/0.bias" "$m/zz"
	mkdir "$m/new"
	"$PTFS" revert "$m/1.running_mean" "$m/0.weight" >/dev/null 2>"$WORK/err" &&
		"$PTFS" revert "$m/" >"$WORK/out" 2>>"$WORK/err"
	rc=$?
	st
	[ $rc = 0 ] && [ "$(cat "$WORK/out")" = "reverted: ." ] &&
		stline "staged: nothing (unmounting writes nothing)" &&
		[ "$(ls "$m" | tr '\n' ' ')" = "$(ls "$m" | sort | tr '\n' ' ')" ]
	check "a fixture state dict: revert of the whole mount" $? "exit $rc: $(cat "$WORK/err") $(tr '\n' '|' <"$WORK/st")"
	"$PTFS" umount "$m" >"$WORK/out" 2>&1
	rc=$?
	stop_daemon "$m"
	[ $rc = 0 ] && [ "$(cat "$WORK/out")" = "nothing to write back" ] &&
		[ "$(sum "$ck")" = "$before" ]
	check "... then nothing to write back, the file byte-identical" $? "exit $rc: $(cat "$WORK/out")"
else
	fail "fixture state dict" "no mount: $(head -n 1 "$e")"
fi
fi

# ---- two writers and readers of one value file: only the writer that
# truncated applies its text, at its own close()
if want writers; then
setup writers
if startd; then
	/usr/bin/python3 "$fs/lib/writers.py" "$m" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	"$PTFS" status "$m" >"$WORK/st" 2>&1
	[ $rc = 0 ] && [ "$(cat "$WORK/out")" = 91 ] && ! grep -q '^refused' "$WORK/st"
	check "an earlier writer's release and readers' closes apply nothing" $? "exit $rc: $(cat "$WORK/out" "$WORK/err" | tr '\n' ' ') $(grep -A2 '^refused' "$WORK/st" | tr '\n' ' ')"
	"$PTFS" umount "$m" >/dev/null 2>&1
	stop_daemon "$m"
else
	fail "two writers" "no mount: $(head -n 1 "$e")"
fi
fi

# ---- a cast undone: revert leaves no converted copy in the overlay
if want cast; then
place cast
cp "$fxf" "$ck"
before=$(sum "$ck")
ov=$(dirname "$ck")/.$(basename "$ck").ptfs
if startd; then
	setfattr -n user.dtype -v bfloat16 "$m/0.weight" 2>"$WORK/err" &&
		"$PTFS" revert "$m/0.weight" >/dev/null 2>>"$WORK/err"
	rc=$?
	"$PTFS" umount "$m" >"$WORK/out" 2>>"$WORK/err"
	stop_daemon "$m"
	[ $rc = 0 ] && [ "$(cat "$WORK/out")" = "nothing to write back" ] &&
		[ "$(sum "$ck")" = "$before" ] && [ ! -e "$ov" ]
	check "setfattr user.dtype, revert, umount: nothing written, no overlay left" $? "exit $rc: $(cat "$WORK/out" "$WORK/err") $(ls -A "$ov" 2>/dev/null | tr '\n' ' ')"
else
	fail "a cast undone" "no mount: $(head -n 1 "$e")"
fi
fi

# ---- a control file still open when the mount goes away: the kernel
# never sends its release, and the daemon frees the handle itself (the
# ASan build's leak check below fails if it does not)
if want open_ctl; then
place open_ctl
cp "$fxf" "$ck"
if startd; then
	exec 7<"$m/.ptfs/status"
	kill -TERM "$(ptfs_pid)"
	wait "$DPID"
	rc=$?
	DPID=
	exec 7<&-
	fusermount3 -uz "$m" 2>/dev/null
	check "status open at SIGTERM: the daemon exits 0" $rc "exit $rc: $(head -n 1 "$e")"
else
	fail "status open at SIGTERM" "no mount: $(head -n 1 "$e")"
fi
fi

# ---- every daemon's stderr: refusals log one "ptfs: " line each, and
# nothing else may be there (sanitizer reports in the ASan build)
: >"$WORK/reports"
for f in "$WORK"/daemon.*.err; do
	daemon_problems "$f" "$WORK/reports" || echo "  (${f##*/})" >>"$WORK/reports"
done
[ ! -s "$WORK/reports" ]
check "no daemon printed anything but refusals ($ndaemon daemons)" $? "$(head -n 8 "$WORK/reports" | tr '\n' '|')"

summary
[ "$nfail" -eq 0 ]
