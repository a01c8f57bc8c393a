#!/bin/sh
# In-place write-back (-o inplace, issue 18), through real mounts, with
# checkpoints written by the torch under test:
#
# - a 4-byte edit written back in place: the inode stays, the file is byte
#   for byte what the normal write-back makes of the same edit, only record
#   data and CRC fields differ from the original (inplace_check.py diffok),
#   and torch loads it with the edit;
# - refusals, each leaving the checkpoint as it was: a rename (structure
#   change: ptfs umount exits 1 with one line, the edits stay staged and a
#   mount without -o inplace writes them back), a legacy file (refused at
#   mount), -o output= with -o inplace (a usage error), another program
#   holding the file open for writing (refused until it closes it);
# - a rename over the file between the patch's writes and its commit
#   (faultinj.c's STOP holds the daemon there): ptfs umount refuses with
#   one line, the mount, the overlay and the edit stay, the renamed-in
#   file is untouched, and the next mount of it refuses as for any file
#   replaced under the edits;
# - the crash loop (ITERATIONS, default 30): a 64 MiB checkpoint with every
#   tensor replaced, kill -9 of the daemon at a random moment of ptfs
#   umount's in-place write-back, a remount that finishes it: the file ends
#   as exactly the normal write-back's, never a mix, the same inode, and
#   nothing else is left in its directory; every third time the mount
#   that finishes the write-back is killed too.  Where the kills landed is
#   counted from the journal and the file (before the plan, planned, mid
#   patch, patched, committed, cleaned up, or after the daemon exited).
#
#   usage: sh tests/fs/safety/inplace.sh [-k CASE] VERSION PTFS [ITERATIONS [SEED]]
#
# Prints one line per check, then "N passed, N failed"; exit 0 or 1, 77
# without /dev/fuse.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS [ITERATIONS [SEED]]" 2 4 "$@"
PTFS=$2 iters=${3:-30} seed=${4:-$$}
fs_progs PTFS
fs_need_fuse
fs_torch "" ptfs-inplace
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/py" "$WORK/mnt/m" "$WORK/ref" "$WORK/ip" "$WORK/rnd"
fs_py reflink_check.py inplace_check.py
# torch SCRIPT.py ARG...: under the torch being tested (one process)
torch() { fs_pycall "$@"; }
if [ "$version" = 1.13 ]; then
	inside() { echo "$1"; }
else
	inside() { echo "${1#"$root"}"; }
fi
helper() { python3 "$WORK/py/inplace_check.py" "$@"; }
M=$WORK/mnt/m
LOG=$WORK/ptfs.log

# edit4 FILE [OPTION...]: mount, 4 bytes into w3 at 4000, ptfs umount
edit4() {
	_f=$1
	shift
	"$PTFS" "$@" "$_f" "$M" 2>>"$LOG" || return 1
	printf '\001\002\003\004' |
		dd of="$M/w3" bs=1 seek=4000 conv=notrunc status=none
	_st=$?
	"$PTFS" umount "$M" >/dev/null 2>>"$LOG" || _st=1
	return $_st
}

# nothing_else DIR NAME...: DIR holds exactly NAME... (dot files too)
nothing_else() {
	_d=$1
	shift
	[ "$(ls -A "$_d" | sort | tr '\n' ' ')" = "$(printf '%s\n' "$@" |
		sort | tr '\n' ' ')" ]
}

torch reflink_check.py make "$inner/orig.pt" >/dev/null 2>"$WORK/make.log" &&
	torch inplace_check.py big "$inner/big.pt" 2>>"$WORK/make.log" &&
	torch inplace_check.py legacy "$inner/legacy.pt" 2>>"$WORK/make.log" ||
	{ echo "torch could not make the checkpoints"; cat "$WORK/make.log"; exit 1; }
probe_fuse "$WORK/orig.pt" "$M" "$WORK/probe.err"
stop_daemon "$M"

# ---- a 4-byte edit
if want edit; then
cp "$WORK/orig.pt" "$WORK/ref/e4.pt"
edit4 "$WORK/ref/e4.pt" || { echo "the normal write-back failed"; tail -n 3 "$LOG"; exit 1; }
cp "$WORK/orig.pt" "$WORK/ip/e4.pt"
ino=$(stat -c %i "$WORK/ip/e4.pt")
if edit4 "$WORK/ip/e4.pt" -o inplace; then
	pass "edit" "written back in place (ptfs umount exit 0)"
else
	fail "edit" "ptfs umount failed: $(tail -n 1 "$LOG")"
fi
if [ "$(stat -c %i "$WORK/ip/e4.pt")" = "$ino" ]; then
	pass "edit" "the same inode ($ino)"
else
	fail "edit" "inode $ino became $(stat -c %i "$WORK/ip/e4.pt")"
fi
if cmp -s "$WORK/ip/e4.pt" "$WORK/ref/e4.pt"; then
	pass "edit" "byte for byte the normal write-back's file"
else
	fail "edit" "differs from the normal write-back's: $(cmp "$WORK/ip/e4.pt" "$WORK/ref/e4.pt" 2>&1)"
fi
if out=$(helper diffok "$WORK/orig.pt" "$WORK/ip/e4.pt" 2>&1) &&
    [ "$(cmp -l "$WORK/orig.pt" "$WORK/ip/e4.pt" | wc -l)" -le 12 ]; then
	pass "edit" "only record data and CRC fields changed ($out; $(cmp -l "$WORK/orig.pt" "$WORK/ip/e4.pt" | wc -l) bytes)"
else
	fail "edit" "other bytes changed: $out"
fi
if torch reflink_check.py check "$(inside "$WORK/ip/e4.pt")" w3 4000 01020304 \
	>"$WORK/check.log" 2>&1; then
	pass "edit" "torch $version loads it, with the edit"
else
	fail "edit" "torch $version: $(grep -v UCX "$WORK/check.log" | tail -n 1)"
fi
if nothing_else "$WORK/ip" e4.pt; then
	pass "edit" "nothing left beside it"
else
	fail "edit" "left beside it: $(ls -A "$WORK/ip" | tr '\n' ' ')"
fi
fi

# ---- refusals
# a rename: refused at write-back, edits kept, written by a normal mount
if want refusals; then
cp "$WORK/orig.pt" "$WORK/ip/ren.pt"
: >"$WORK/ren.err"
"$PTFS" -o inplace "$WORK/ip/ren.pt" "$M" 2>>"$LOG" &&
	mv "$M/w1" "$M/renamed" && printf '\001\002\003\004' |
	dd of="$M/w3" bs=1 seek=4000 conv=notrunc status=none
"$PTFS" umount "$M" >/dev/null 2>"$WORK/ren.err"
rc=$?
if [ $rc = 1 ] && [ "$(wc -l <"$WORK/ren.err")" = 1 ] &&
    grep -q 'inplace refused (the structure changed' "$WORK/ren.err" &&
    cmp -s "$WORK/ip/ren.pt" "$WORK/orig.pt"; then
	pass "rename" "refused with one line, exit 1, the file untouched"
else
	fail "rename" "exit $rc" "$WORK/ren.err"
fi
unmount "$M"
if "$PTFS" "$WORK/ip/ren.pt" "$M" 2>>"$LOG" &&
    "$PTFS" umount "$M" >/dev/null 2>>"$LOG" &&
    torch reflink_check.py check "$(inside "$WORK/ip/ren.pt")" w3 4000 01020304 \
	w1 renamed >"$WORK/check.log" 2>&1 && nothing_else "$WORK/ip" e4.pt ren.pt; then
	pass "rename" "the edits stayed staged; a mount without -o inplace wrote them"
else
	fail "rename" "not written back after: $(tail -n 1 "$LOG") $(tail -n 1 "$WORK/check.log")"
fi

# a legacy file: refused at mount, nothing mounted
cp "$WORK/legacy.pt" "$WORK/ip/legacy.pt"
"$PTFS" -o inplace "$WORK/ip/legacy.pt" "$M" 2>"$WORK/leg.err"
rc=$?
if [ $rc = 1 ] && [ "$(wc -l <"$WORK/leg.err")" = 1 ] &&
    grep -q 'inplace refused: a legacy' "$WORK/leg.err" && ! is_mounted "$M" &&
    cmp -s "$WORK/ip/legacy.pt" "$WORK/legacy.pt"; then
	pass "legacy" "refused at mount with one line, exit 1"
else
	fail "legacy" "exit $rc" "$WORK/leg.err"
	unmount "$M"
fi

# -o output= with -o inplace: a usage error
"$PTFS" -o inplace,output="$WORK/ip/out.pt" "$WORK/ip/e4.pt" "$M" 2>"$WORK/out.err"
rc=$?
if [ $rc = 2 ] && [ "$(wc -l <"$WORK/out.err")" = 1 ] && ! is_mounted "$M" &&
    [ ! -e "$WORK/ip/out.pt" ]; then
	pass "output" "-o output= with -o inplace refused, exit 2"
else
	fail "output" "exit $rc" "$WORK/out.err"
	unmount "$M"
fi

# another program has it open for writing: refused until it closes it
cp "$WORK/orig.pt" "$WORK/ip/busy.pt"
"$PTFS" -o inplace "$WORK/ip/busy.pt" "$M" 2>>"$LOG" &&
	printf '\001\002\003\004' |
	dd of="$M/w3" bs=1 seek=4000 conv=notrunc status=none
exec 3<>"$WORK/ip/busy.pt"
"$PTFS" umount "$M" >/dev/null 2>"$WORK/busy.err"
rc=$?
exec 3>&-
if [ $rc = 1 ] && grep -q 'open for writing by another program' "$WORK/busy.err" &&
    cmp -s "$WORK/ip/busy.pt" "$WORK/orig.pt"; then
	pass "writer" "refused while another program has it open for writing"
else
	fail "writer" "exit $rc" "$WORK/busy.err"
fi
if "$PTFS" umount "$M" >/dev/null 2>>"$LOG" &&
    cmp -s "$WORK/ip/busy.pt" "$WORK/ref/e4.pt"; then
	pass "writer" "written in place once it was closed"
else
	fail "writer" "not written after: $(tail -n 1 "$LOG")"
	unmount "$M"
fi
rm -f "$WORK/ip/"*.pt
fi

# ---- a rename over the file while it is patched (issue 38, defect 7)
# The daemon stops itself (faultinj.c's STOP) at the patch's fdatasync,
# its writes done; the training job's save is renamed over the path (cp
# job.pt tmp && mv tmp NAME) and the daemon goes on.  The patch went into
# the old inode, which nobody reads again: ptfs umount must exit 1 with
# the one line that the file changed since it was mounted, keep the
# mount, the overlay and the staged edit, and leave the job's file as the
# job wrote it.  A later mount of that file with the same overlay must
# refuse, as it does when the file was replaced before the write-back
# began; -o discard then drops the edits, the job's file as it is.  Twice:
# the old file unlinked by the rename (no link left), and kept under
# another name (a link left: only its inode tells it from the new one).
if want rename_during_patch; then
# stopped PID: the process is stopped (SIGSTOP)
stopped() {
	[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ]
}
# rdp_run LABEL KEEP: the case, with the old file kept as rdp.old when
# KEEP is 1
rdp_run() {
	_l=$1 R=$WORK/ip/rdp.pt D=$WORK/rdp.det
	J=$WORK/ip/.rdp.pt.ptfs/ptfs.journal
	: >"$D"
	rm -rf "$R" "$WORK/ip/rdp.old" "$WORK/ip/.rdp.pt.ptfs"
	cp "$WORK/orig.pt" "$R"
	: >"$CTL"
	if ! LD_PRELOAD=$INJ start_daemon "$R" "$M" "$WORK/rdp.err" -o inplace; then
		fail "$_l" "not mounted" "$WORK/rdp.err"
		return
	fi
	printf '\001\002\003\004' |
		dd of="$M/w3" bs=1 seek=4000 conv=notrunc status=none ||
		echo "the edit failed" >>"$D"
	_pid=$(ptfs_pid)
	printf 'sync /ip/rdp.pt 1 STOP\n' >"$CTL"
	: >"$CTL.log"
	run_limited 120 "$PTFS" umount "$M" >"$WORK/rdp.out" 2>"$WORK/rdp.uerr" &
	_upid=$!
	_i=0
	while [ $_i -lt 1200 ] && ! stopped "$_pid"; do
		sleep 0.05
		_i=$((_i + 1))
	done
	if stopped "$_pid" && grep -q STOP "$CTL.log"; then
		: >"$CTL"	# the rule off; the fdatasync comes when it goes on
		cmp -s "$R" "$WORK/ref/rdp.pt" ||
			echo "stopped, but the patch's writes are not all done" >>"$D"
		[ "$2" = 0 ] || ln "$R" "$WORK/ip/rdp.old" ||
			echo "no link to the old file" >>"$D"
		cp "$WORK/job.pt" "$WORK/ip/rdp.tmp" &&
			mv "$WORK/ip/rdp.tmp" "$R" ||
			echo "the job's rename failed" >>"$D"
	else
		echo "the daemon did not stop at the patch's fdatasync" >>"$D"
		: >"$CTL"
	fi
	kill -CONT "$_pid" 2>/dev/null
	wait $_upid
	_rc=$?
	_line=$(head -n 1 "$WORK/rdp.uerr")
	case $_rc:$_line in
	1:"ptfs: write-back failed, $M stays mounted and nothing is lost: $R: changed since it was mounted (another program replaced or rewrote it)"*) ;;
	*) echo "ptfs umount: exit $_rc: $_line$(head -n 1 "$WORK/rdp.out")" >>"$D" ;;
	esac
	[ "$(wc -l <"$WORK/rdp.uerr")" = 1 ] ||
		echo "ptfs umount printed $(wc -l <"$WORK/rdp.uerr") lines on stderr" >>"$D"
	is_mounted "$M" || echo "not mounted after the refused write-back" >>"$D"
	[ -f "$J" ] || echo "the overlay is gone ($J)" >>"$D"
	cmp -s "$R" "$WORK/job.pt" ||
		echo "the job's file changed: $(cmp "$R" "$WORK/job.pt" 2>&1)" >>"$D"
	if is_mounted "$M"; then
		"$PTFS" status "$M" >"$WORK/rdp.status" 2>&1
		grep -q '^ *changed *w3$' "$WORK/rdp.status" ||
			echo "ptfs status does not list the staged edit of w3: $(tr '\n' ' ' <"$WORK/rdp.status" | cut -c 1-300)" >>"$D"
	fi
	stop_daemon "$M"
	[ -f "$J" ] || echo "the overlay is gone after the unmount" >>"$D"
	verdict "$_l" "ptfs umount exit 1 with one line, mounted, the edit staged, the job's file intact" "$D"

	# the next mount of the job's file, with that overlay
	: >"$D"
	"$PTFS" "$R" "$M" >/dev/null 2>"$WORK/rdp.m2"
	_rc=$?
	if [ $_rc = 0 ] || [ "$(wc -l <"$WORK/rdp.m2")" != 1 ] ||
	    ! grep -q "holds edits for another version of this file.*-o discard" "$WORK/rdp.m2" ||
	    is_mounted "$M"; then
		echo "the next mount: exit $_rc: $(head -n 1 "$WORK/rdp.m2")" >>"$D"
		unmount "$M"
	fi
	[ -f "$J" ] || echo "the overlay is gone after the next mount" >>"$D"
	cmp -s "$R" "$WORK/job.pt" || echo "the job's file changed at the next mount" >>"$D"
	if start_daemon "$R" "$M" "$WORK/rdp.m3" -o discard; then
		stop_daemon "$M"
	else
		echo "no mount with -o discard: $(head -n 1 "$WORK/rdp.m3")" >>"$D"
	fi
	[ ! -e "$J" ] || echo "-o discard left the overlay" >>"$D"
	cmp -s "$R" "$WORK/job.pt" || echo "the job's file changed with -o discard" >>"$D"
	verdict "$_l" "the next mount refuses as for any replaced file; -o discard drops the edits" "$D"
}
if ! faultinj_ready; then
	skip "rename during patch" "$FAULTINJ_WHY"
else
	# the job's save: the same checkpoint with other bytes in w3, the
	# same size and layout (a plan made for the old file fits it)
	cp "$WORK/orig.pt" "$WORK/job.pt"
	"$PTFS" "$WORK/job.pt" "$M" 2>>"$LOG" && printf '\011\012\013\014' |
		dd of="$M/w3" bs=1 seek=8000 conv=notrunc status=none &&
		"$PTFS" umount "$M" >/dev/null 2>>"$LOG" ||
		{ echo "could not make the job's file"; tail -n 3 "$LOG"; exit 1; }
	# what the patch writes: the normal write-back's file
	cp "$WORK/orig.pt" "$WORK/ref/rdp.pt"
	edit4 "$WORK/ref/rdp.pt" ||
		{ echo "the normal write-back failed"; tail -n 3 "$LOG"; exit 1; }
	rdp_run "rename during patch" 0
	rdp_run "rename during patch, old file linked" 1
fi
rm -rf "$WORK/ip/"*.pt "$WORK/ip/rdp.old" "$WORK/ip/rdp.tmp" \
	"$WORK/ip/.rdp.pt.ptfs" "$WORK/job.pt"
fi

# ---- the crash loop
# every tensor replaced by random bytes, and 4 bytes into b3
if want crash; then
editbig() {
	for k in 0 1 2 3 4 5 6 7; do
		cp "$WORK/rnd/b$k" "$M/b$k" || return 1
	done
	printf '\001\002\003\004' |
		dd of="$M/b3" bs=1 seek=4000 conv=notrunc status=none
}
n=0
for k in 0 1 2 3 4 5 6 7; do
	helper noise "$WORK/rnd/b$k" $((8 << 20)) $((seed + k)) || exit 1
done
cp "$WORK/big.pt" "$WORK/ref/big.pt"
"$PTFS" "$WORK/ref/big.pt" "$M" 2>>"$LOG" && editbig &&
	"$PTFS" umount "$M" >/dev/null 2>>"$LOG" ||
	{ echo "the normal write-back of the big edit failed"; tail -n 3 "$LOG"; exit 1; }
# how long an in-place write-back takes here: kills fall within 1.5 times that
cp "$WORK/big.pt" "$WORK/ip/c.pt"
"$PTFS" -o inplace "$WORK/ip/c.pt" "$M" 2>>"$LOG" && editbig || exit 1
t0=$(date +%s%N)
"$PTFS" umount "$M" >/dev/null 2>>"$LOG" || { echo "in-place write-back failed"; exit 1; }
ms=$((($(date +%s%N) - t0) / 1000000))
if cmp -s "$WORK/ip/c.pt" "$WORK/ref/big.pt" &&
    out=$(helper diffok "$WORK/big.pt" "$WORK/ip/c.pt"); then
	pass "crash" "64 MiB rewritten in place in $ms ms, the normal write-back's bytes ($out)"
else
	fail "crash" "the big in-place write-back differs from the normal one"
fi
echo "# seed $seed, $iters iterations, kills within $((ms * 3 / 2)) ms"

J=$WORK/ip/.c.pt.ptfs/ptfs.journal
where_before= where_planned= where_mid= where_patched= where_committed=
where_clean= where_done= bad=0 i=0 again=0
while [ $i -lt "$iters" ]; do
	i=$((i + 1))
	cp "$WORK/big.pt" "$WORK/ip/c.pt"
	ino=$(stat -c %i "$WORK/ip/c.pt")
	start_daemon "$WORK/ip/c.pt" "$M" "$WORK/d.err" -o inplace &&
		editbig || { fail "crash $i" "mount or edit failed" "$WORK/d.err"; bad=1; break; }
	"$PTFS" umount "$M" >/dev/null 2>&1 &
	upid=$!
	sleep "$(awk -v s=$((seed + i)) -v m="$ms" \
		'BEGIN { srand(s); printf "%.3f", rand() * m * 1.5 / 1000 }')"
	if kill9 "$M"; then
		if [ ! -e "$J" ]; then
			where=clean
		else
			ops=$(python3 "$fs/lib/journal_tool.py" ops "$J")
			case $ops in
			*PK) where=committed ;;
			*P)
				if cmp -s "$WORK/ip/c.pt" "$WORK/big.pt"; then
					where=planned
				elif cmp -s "$WORK/ip/c.pt" "$WORK/ref/big.pt"; then
					where=patched
				else
					where=mid
				fi ;;
			*) where=before ;;
			esac
		fi
	else
		where=done
		stop_daemon "$M"
	fi
	wait $upid 2>/dev/null
	eval "where_$where=\$((\${where_$where:-0} + 1))"
	# every third time, kill the mount that finishes it too, at a random
	# moment of its recovery (a second crash before the first is mended)
	if [ $((i % 3)) = 0 ] && [ "$where" != done ]; then
		"$PTFS" -f "$WORK/ip/c.pt" "$M" 2>/dev/null &
		p2=$!
		sleep "$(awk -v s=$((seed + i + 7)) -v m="$ms" \
			'BEGIN { srand(s); printf "%.3f", rand() * m / 1000 }')"
		kill -9 $p2 2>/dev/null
		wait $p2 2>/dev/null
		fusermount3 -uz "$M" 2>/dev/null
		again=$((again + 1))
	fi
	# the remount finishes it (with or without -o inplace), or resumes
	# the edits when the kill came before the plan
	opt=
	[ $((i % 2)) = 0 ] && opt="-o inplace"
	if ! start_daemon "$WORK/ip/c.pt" "$M" "$WORK/d2.err" $opt; then
		fail "crash $i" "remount after a kill ($where) failed" "$WORK/d2.err"
		bad=1
		break
	fi
	if { [ "$where" = mid ] || [ "$where" = planned ] ||
	    [ "$where" = patched ]; } && [ $((i % 3)) != 0 ]; then
		grep -q 'finished an in-place write-back' "$WORK/d2.err" ||
			{ fail "crash $i" "($where) the remount did not say it finished it" "$WORK/d2.err"; bad=1; }
	fi
	"$PTFS" umount "$M" >/dev/null 2>>"$LOG"
	stop_daemon "$M"
	# sanitizer reports of both daemons; the one that ended must exit 0
	: >"$WORK/problems"
	if ! DAEMON_LOGS_OK=1 daemon_problems "$WORK/d.err" "$WORK/problems" ||
	    ! DAEMON_LOGS_OK=1 daemon_problems "$WORK/d2.err" "$WORK/problems" ||
	    [ "${DRC:-0}" != 0 ]; then
		fail "crash $i" "killed $where: the daemon exited ${DRC:-?} or printed" "$WORK/problems"
		bad=1
	fi
	if ! cmp -s "$WORK/ip/c.pt" "$WORK/ref/big.pt"; then
		fail "crash $i" "killed $where: not the expected file after the remount: $(cmp "$WORK/ip/c.pt" "$WORK/ref/big.pt" 2>&1)"
		bad=1
		break
	fi
	if [ -z "$opt" ] && [ "$where" = before ]; then
		:	# written anew by a normal write-back: another inode
	elif [ "$(stat -c %i "$WORK/ip/c.pt")" != "$ino" ]; then
		fail "crash $i" "killed $where: the inode changed"
		bad=1
	fi
	if ! nothing_else "$WORK/ip" c.pt; then
		fail "crash $i" "killed $where: left beside it: $(ls -A "$WORK/ip" | tr '\n' ' ')"
		bad=1
		break
	fi
done
if [ $bad = 0 ]; then
	pass "crash" "$i kills, each time the expected file after the remount, nothing left"
fi
echo "# $again of them followed by a kill of the mount that finishes the write-back"
echo "# kills: ${where_before:-0} before the plan, ${where_planned:-0} planned (nothing written), ${where_mid:-0} mid patch (mixed bytes), ${where_patched:-0} patched (not committed), ${where_committed:-0} committed (not cleaned up), ${where_clean:-0} cleaned up, ${where_done:-0} after the daemon was done"
fi
summary
[ "$nfail" = 0 ]
