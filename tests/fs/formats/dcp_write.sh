#!/bin/sh
# DCP directories (torch.distributed.checkpoint) written back through a
# mount (docs/design.md "DCP directories"): the write side follows the
# sharded folders' protocol (hf_write.sh), with .metadata as the one
# commit point.
#
#   usage: sh tests/fs/formats/dcp_write.sh [-k CASE] VERSION PTFS PTLS SHARED_DIR
#
# The directories are written by torch 2.x whatever VERSION is (the
# chroot of scripts/torch2-root.sh; dcp_write_check.py gen runs
# dcp_check.py's generator): plain/ (one process, nested optimizer-like
# state), rows/ (3 ranks: row- and column-sharded DTensors, a replicated
# one, values), grid/ (4 ranks on a 2x2 mesh: cut both ways) and nocoll/
# (no collectives: __R.metadata per rank, no .metadata).  VERSION "1.13"
# or "2" is the torch that edits through the mount and loads the result:
# under 2.x DCP itself (dcp_to_torch_save then torch.load, and dcp.load
# into a state dict of the new keys); under both, a reader in
# dcp_write_check.py that takes nothing from ptfs (.metadata unpickled
# with stand-in classes, each chunk's item loaded and put in its box) and
# ptfs's own tools (ptls, ptverify, ptrepack DIR ONE.pt loaded by torch).
#
#   rows1     4 bytes into layer/rows (dd conv=notrunc), in rank 0's
#             chunk only, written back by `ptfs umount`: that file alone
#             is written anew as __0_0.g1.distcp, the old one gone;
#             .metadata rewritten; the other files byte for byte the
#             same, same names
#   rows2     8 bytes across layer/rows's first chunk edge: two files
#             rewritten; __0_0.g1.distcp takes its first name back,
#             __1_0.distcp becomes .g1
#   grid1     `cp` of a file over grid (cut both ways, every byte
#             changed): all 4 files .g1
#   grid2     a whole rewrite of gridh (numpy.memmap r+) in which one
#             chunk's bytes differ: only that chunk's file is rewritten
#             (back to its first name); the 3 others keep theirs
#   npy1      as rows1, through the view layer/rows.npy (a pwrite past
#             its header): the same file rewritten
#   npy2      as grid1, through grid.npy (np.save of the array with
#             every byte changed): all 4 files .g1
#   pkeys     plain/: tensors and values renamed (in their dict, nested
#             state/0/exp_avg, into another dict) and removed
#   rkeys     rows/: a sharded tensor renamed, a value moved into another
#             dict, a value and the replicated tensor removed: only
#             .metadata changes, every .distcp file the same by name and
#             bytes; loads give the new keys with the old values
#
# Each time the directory loads as exactly what the mount showed, its
# items are where they were (in the renamed files), .metadata names
# exactly the .distcp files there are, no temporary or overlay is left,
# ptls, ptverify and ptrepack read it.  Then: a new file, mkdir,
# user.dtype and user.shape, a write into a value and `echo` into it, a
# .npy of another shape and a .txt fail with EPERM, truncations with
# EINVAL or EFBIG (as in one .pt), one line each in the daemon's stderr
# and in `ptfs status`, and nothing changes;
# a newer save into the mounted directory (each .distcp rewritten in
# place, .metadata renamed over) makes `ptfs umount` fail with one line
# and write nothing, and -o discard drops the edit;
# nocoll/ stays read-only (EROFS, one note line); -o inplace and
# -o output= are refused with one line; a failing disk under the
# write-back (the clone of a .distcp, a write into the new one: ENOSPC
# from faultinj.c) gives one line naming the file and the error and
# changes nothing, and the next unmount writes the edit; and a crash
# test: the daemon
# kills itself (faultinj.c's KILL) syncing each new .distcp, at the
# .metadata rename and at the removal of an old file (also with keys
# changed).  The directory must load as the old one before the rename and
# the new one after, never a mix; a remount removes what the killed
# write-back left (new files .metadata does not name, or the old ones once
# committed), shows the edits, and its unmount writes them back.
#
# Prints one line per check and finally "N passed, N failed".  Exit 0 all
# passed, 1 a failure, 77 skipped (no usable /dev/fuse; PT_NO_TORCH2=1).
# Never leaves a mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS SHARED_DIR" 4 4 "$@"
PTFS=$2 ptls=$3 shared=$4
sample=$fs/../data/sample.pt
fs_progs PTFS ptls
bin=$(dirname "$ptls")
ptverify=$bin/ptverify ptrepack=$bin/ptrepack
fs_progs ptverify ptrepack
fs_need_fuse

# the writer is torch 2.x, whatever VERSION checks (as dcp.sh)
. "$fs/../torch/select.sh"
torch_select_writer "$version" "$shared" ptfs-dcpwrite
WORK=$work
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/w" "$WORK/one" "$gwork/py" || exit 1
fs_py dcp_write_check.py dcp_check.py
cp "$here/dcp_write_check.py" "$here/dcp_check.py" "$gwork/py/" || exit 1

probe_fuse "$sample" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

# the directories: written once per build by torch 2.x (the setup test
# fixtures_dcp, as dcp_write_check.py gen would); torch 2.x checks the
# reader here against them
fxd=$shared/fixtures/dcp
mkdir -p "$gwork/out" || exit 1
for n in plain rows grid nocoll; do
	[ -d "$fxd/$n" ] && cp -a "$fxd/$n" "$gwork/out/" || {
		fail "generated (torch 2.x)" "no $fxd/$n: run the fixtures_dcp test"
		summary
		exit 1
	}
done
if run_limited 600 chroot "$groot" python3 "$ginner/py/dcp_write_check.py" \
	readers "$ginner/out" >"$WORK/gen.rep" 2>"$WORK/gen.rep.err"; then
	pass "generated (torch 2.x)" "$(grep "^ok$TAB" "$WORK/gen.rep" | cut -f2)"
else
	fail "generated (torch 2.x)" "$(grep -v 'UCX\|cpuinfo' "$WORK/gen.rep" |
		head -n 1)" "$WORK/gen.rep.err"
	summary
	exit 1
fi
if [ "$gwork" != "$WORK" ]; then
	cp -a "$gwork/out" "$WORK/out" || exit 1
fi
out=$WORK/out W=$WORK/w M=$WORK/mnt/m IM=$inner/mnt/m

# report NAME: the summary of $WORK/NAME's ok line
report() {
	grep "^ok$TAB" "$WORK/$1" | cut -f2
}
# why NAME: what $WORK/NAME and its .err say (not torch 2's import noise)
why() {
	grep -v 'UCX\|cpuinfo' "$WORK/$1" 2>/dev/null | head -n 1
	grep -v 'UCX\|cpuinfo' "$WORK/$1.err" 2>/dev/null | tail -n 2
}
# leftovers DIR: temporaries in DIR, an overlay beside it
leftovers() {
	ls -A "$1" | grep -e 'ptfs-new' -e '\.tmp$' | tr '\n' ' '
	ls -A "$(dirname "$1")" | grep -x "\.$(basename "$1")\.ptfs" | tr '\n' ' '
}
# listing DIR: its file names on one line
listing() {
	ls -A "$1" | tr '\n' ' '
}
# tools DIR NAME: what ptfs's own tools make of DIR; problems on stdout.
# ptrepack writes $WORK/one/NAME.pt, which `written` loads.
tools() {
	o=$(run_limited 60 "$ptls" "$1" 2>&1)
	r=$?
	case $r in
	0) printf '%s\n' "$o" | grep -q "; dcp format" ||
		echo "ptls: $(printf '%s\n' "$o" | tail -n 1)" ;;
	*) echo "ptls: exit $r: $(printf '%s\n' "$o" | head -n 1)" ;;
	esac
	o=$(run_limited 60 "$ptverify" "$1" 2>&1)
	r=$?
	case $r:$o in
	0:*": ok (dcp, "*) ;;
	*) echo "ptverify: exit $r: $(printf '%s\n' "$o" | head -n 2)" ;;
	esac
	rm -f "$WORK/one/$2.pt"
	o=$(run_limited 120 "$ptrepack" "$1" "$WORK/one/$2.pt" 2>&1) ||
		echo "ptrepack into one .pt: exit $?: $o"
}

# round KIND DIR WANT [UMOUNT]: mount DIR, make edit KIND through it and
# unmount (`ptfs umount`, its line starting with UMOUNT, when given),
# then check what was written back; WANT: an extended regular expression
# for DIR's listing after it (names sorted, each followed by a blank)
round() {
	k=$1 D=$2 want=$3 um=${4:-}
	det=$WORK/$k.det
	: >"$det"
	if ! start_daemon "$D" "$M" "$WORK/$k.err"; then
		fail "$k: written back" "not mounted: $(head -n 1 "$WORK/$k.err")"
		return
	fi
	fs_pyrun "$k.edit" edit "$IM" "$inner/w/${D##*/}" "$inner/$k.json" \
		"$k" || why "$k.edit" >>"$det"
	if [ -n "$um" ]; then
		o=$(run_limited 120 "$PTFS" umount "$M" 2>&1)
		r=$?
		stop_daemon "$M"
		case $r:$o in
		0:"written back: $um"*" bytes to $D"*) ;;
		*) echo "ptfs umount: exit $r: $o" >>"$det" ;;
		esac
	else
		stop_daemon "$M"
	fi
	[ "${DRC:-0}" = 0 ] || echo "ptfs exited with status $DRC" >>"$det"
	listing "$D" | grep -Eqx "$want" ||
		echo "files now: $(listing "$D")" >>"$det"
	tools "$D" "$k" >>"$det"
	one=$inner/one/$k.pt
	[ -f "$WORK/one/$k.pt" ] || one=
	fs_pyrun "$k.written" written "$inner/w/${D##*/}" "$inner/$k.json" \
		$one || why "$k.written" >>"$det"
	[ -z "$(leftovers "$D")" ] || echo "left: $(leftovers "$D")" >>"$det"
	if [ -s "$det" ]; then
		fail "$k: written back" "$(head -n 1 "$det")" "$det"
	else
		pass "$k: written back" "$(report "$k.edit"); $(report "$k.written")"
	fi
}

# ------------------------------------------------------ tensor bytes
if want tensor_bytes; then
cp -r "$out/rows" "$W/rows" && cp -r "$out/grid" "$W/grid" || exit 1
# (rank R's chunks are in __R_0.distcp; a changed file's new name is the
# first free of BASE.distcp, BASE.g1.distcp, ... other than its own)
round rows1 "$W/rows" \
	'\.metadata __0_0\.g1\.distcp __1_0\.distcp __2_0\.distcp ' \
	"1 tensor changed; "
round rows2 "$W/rows" \
	'\.metadata __0_0\.distcp __1_0\.g1\.distcp __2_0\.distcp '
round grid1 "$W/grid" '\.metadata (__[0-3]_0\.g1\.distcp ){4}'
# gridh's last chunk: its file (whichever) takes its first name back
round grid2 "$W/grid" \
	'\.metadata (__[0-3]_0\.g1\.distcp )*__[0-3]_0\.distcp (__[0-3]_0\.g1\.distcp )*'
fi

# ------------------------------------------------------ .npy views
# written as the tensor's own file is: in place, or a whole .npy of the
# same dtype and shape
if want npy; then
cp -r "$out/rows" "$W/nrows" && cp -r "$out/grid" "$W/ngrid" || exit 1
round npy1 "$W/nrows" \
	'\.metadata __0_0\.g1\.distcp __1_0\.distcp __2_0\.distcp ' \
	"1 tensor changed; "
round npy2 "$W/ngrid" '\.metadata (__[0-3]_0\.g1\.distcp ){4}'
fi

# ------------------------------------------------------ keys
# renamed and removed: .metadata alone changes ("written" checks every
# .distcp file by name and bytes)
if want keys; then
cp -r "$out/plain" "$W/plain" && cp -r "$out/rows" "$W/rkeys" || exit 1
round pkeys "$W/plain" '\.metadata __0_0\.distcp ' "4 keys renamed, 3 removed; "
round rkeys "$W/rkeys" '\.metadata __0_0\.distcp __1_0\.distcp __2_0\.distcp '
fi

# ------------------------------------------------------ refusals
# refused when made, one line each in the daemon's stderr; the
# unmount writes nothing
if want refusals; then
F=$W/refuse
cp -r "$out/plain" "$F" || exit 1
s0=$(dir_sums "$F")
det=$WORK/refuse.det
: >"$det"
if start_daemon "$F" "$M" "$WORK/refuse.err"; then
	fs_pyrun refuse.rep refuse "$IM" "$inner/w/refuse" "$inner/refuse.json" ||
		grep -hv 'UCX\|cpuinfo' "$WORK/refuse.rep" "$WORK/refuse.rep.err" \
			>>"$det"
	# each refusal listed in ptfs status, with its reason
	n=$(report refuse.rep | cut -d' ' -f1)
	"$PTFS" status "$M" >"$WORK/refuse.st" 2>&1 ||
		echo "ptfs status: exit $?: $(head -n 1 "$WORK/refuse.st")" >>"$det"
	grep -qx "refused: $n edits since the mount (not staged; the reasons are in the daemon's log too)" "$WORK/refuse.st" ||
		echo "ptfs status does not say $n refused: $(grep -A 2 '^refused' "$WORK/refuse.st" | tr '\n' ' ')" >>"$det"
	k=$(sed -n '/^refused: /,$p' "$WORK/refuse.st" | grep -c '^  [^ ].*: E[A-Z0-9]*: ')
	[ -z "$n" ] || [ "$k" = "$n" ] ||
		echo "ptfs status lists $k refusals of $n: $(sed -n '/^refused: /,$p' "$WORK/refuse.st" | tr '\n' ' ')" >>"$det"
	stop_daemon "$M"
	[ "${DRC:-0}" = 0 ] || echo "ptfs exited with status $DRC" >>"$det"
	n=$(report refuse.rep | cut -d' ' -f1)
	l=$(grep -c . "$WORK/refuse.err")
	if [ -n "$n" ] && [ "$l" != "$n" ]; then
		echo "$l lines in the daemon's stderr for $n refusals: $(head -n 3 "$WORK/refuse.err")" >>"$det"
	fi
	! grep -v '^ptfs: ' "$WORK/refuse.err" | grep -q . ||
		echo "the daemon printed: $(grep -v '^ptfs: ' "$WORK/refuse.err" | head -n 2)" >>"$det"
	[ "$(dir_sums "$F")" = "$s0" ] || echo "a file of the directory changed: $(listing "$F")" >>"$det"
	[ -z "$(leftovers "$F")" ] || echo "left: $(leftovers "$F")" >>"$det"
else
	echo "not mounted: $(head -n 1 "$WORK/refuse.err")" >>"$det"
fi
if [ -s "$det" ]; then
	fail "refusals" "$(head -n 1 "$det")" "$det"
else
	pass "refusals" "$(report refuse.rep); one line each, in the log and in ptfs status; no file changed"
fi
fi

# ------------------------------------------------------ a newer save
# a training job saves into the directory while it is mounted with an
# edit staged (torch's writer rewrites each .distcp in place and renames
# .metadata over the old): `ptfs umount` writes nothing and says so in
# one line, the mount stays, the edit stays staged; -o discard drops it.
# The job's files are left exactly as it wrote them.
if want newer_save; then
F=$W/stale
cp -r "$out/rows" "$F" || exit 1
det=$WORK/stale.det
: >"$det"
if start_daemon "$F" "$M" "$WORK/stale.err"; then
	printf 'ABCD' | dd of="$M/layer/rows" conv=notrunc status=none ||
		echo "the edit through the mount failed" >>"$det"
	for f in "$F"/*.distcp; do
		cat "$f" >"$WORK/stale.tmp" && cat "$WORK/stale.tmp" >"$f"
	done
	cp "$F/.metadata" "$F/.metadata.tmp" && mv "$F/.metadata.tmp" "$F/.metadata"
	stale_check "$F" "$M" "$det"
	[ -z "$(leftovers "$F")" ] || echo "left: $(leftovers "$F")" >>"$det"
else
	echo "not mounted: $(head -n 1 "$WORK/stale.err")" >>"$det"
fi
if [ -s "$det" ]; then
	fail "a newer save while mounted" "$(head -n 1 "$det")" "$det"
else
	pass "a newer save while mounted" "ptfs umount: exit 1, one line, the mount kept; the job's files as it wrote them; -o discard drops the edit"
fi

# nocoll/ (no .metadata, one __R.metadata per rank): read-only as before
F=$W/nocoll
cp -r "$out/nocoll" "$F" || exit 1
s0=$(dir_sums "$F")
det=$WORK/nocoll.det
: >"$det"
if start_daemon "$F" "$M" "$WORK/nocoll.err"; then
	fs_pyrun nocoll.rep rofs "$IM" || why nocoll.rep >>"$det"
	stop_daemon "$M"
	[ "${DRC:-0}" = 0 ] || echo "ptfs exited with status $DRC" >>"$det"
	case $(cat "$WORK/nocoll.err") in
	"ptfs: $F: "*read-only*) [ "$(grep -c . "$WORK/nocoll.err")" = 1 ] ||
		echo "more than the note: $(head -n 3 "$WORK/nocoll.err")" >>"$det" ;;
	*) echo "not the read-only note: $(head -n 3 "$WORK/nocoll.err")" >>"$det" ;;
	esac
	[ "$(dir_sums "$F")" = "$s0" ] || echo "a file of the directory changed" >>"$det"
	[ -z "$(leftovers "$F")" ] || echo "left: $(leftovers "$F")" >>"$det"
else
	echo "not mounted: $(head -n 1 "$WORK/nocoll.err")" >>"$det"
fi
if [ -s "$det" ]; then
	fail "nocoll: read-only" "$(head -n 1 "$det")" "$det"
else
	pass "nocoll: read-only" "$(report nocoll.rep); $(cat "$WORK/nocoll.err")"
fi

# -o inplace and -o output=: a DCP directory is written back into itself
D=$out/rows
s0=$(dir_sums "$D")
for o in inplace output=$WORK/one/o.pt; do
	mkdir -p "$WORK/mnt/r"
	msg=$(run_limited 30 "$PTFS" -o "$o" "$D" "$WORK/mnt/r" 2>&1)
	r=$?
	case $r:$msg in
	[1-9]*:"ptfs: $D: -o ${o%%=*} refused: "*)
		if [ "$(printf '%s\n' "$msg" | wc -l)" = 1 ] &&
		    ! is_mounted "$WORK/mnt/r" && [ ! -e "$WORK/one/o.pt" ] &&
		    [ "$(dir_sums "$D")" = "$s0" ] && [ -z "$(leftovers "$D")" ]; then
			pass "-o ${o%%=*} refused" "exit $r: $msg"
		else
			fail "-o ${o%%=*} refused" "not one line, or something changed: $msg"
		fi ;;
	*)	fail "-o ${o%%=*} refused" "exit $r: $msg" ;;
	esac
	unmount "$WORK/mnt/r"
done
fi

# ------------------------------------------------------ crash across files
if want crash; then
if ! faultinj_ready; then
	skip "crash across files" "$FAULTINJ_WHY"
	conclude
	exit
fi
# STEP|RULE|STATE|EDIT: where the kill lands, what the directory must
# hold.  rows2 rewrites __0_0 and __1_0; rkeys changes .metadata only;
# rmix renames and removes keys and edits layer/cols's chunk in __0_0.
for c in "__0_0.g1.distcp synced|sync __0_0.g1.distcp 1 KILL|old|rows2" \
	"__1_0.g1.distcp synced|sync __1_0.g1.distcp 1 KILL|old|rows2" \
	".metadata rename|rename ..metadata.ptfs-new. 1 KILL|old|rows2" \
	"old file removed|unlink __0_0.distcp 1 KILL|new|rows2" \
	".metadata rename, keys changed|rename ..metadata.ptfs-new. 1 KILL|old|rkeys" \
	"old file removed, keys changed|unlink __0_0.distcp 1 KILL|new|rmix"; do
	step=${c%%|*} rest=${c#*|}
	rule=${rest%%|*} rest=${rest#*|}
	want=${rest%|*} how=${rest#*|}
	F=$W/crash
	rm -rf "$F" "$W/.crash.ptfs"
	cp -r "$out/rows" "$F" || exit 1
	: >"$CTL"
	det=$WORK/crash.det
	: >"$det"
	if ! LD_PRELOAD=$INJ start_daemon "$F" "$M" "$WORK/crash.err"; then
		fail "crash at $step" "not mounted: $(head -n 1 "$WORK/crash.err")"
		continue
	fi
	fs_pyrun crash.edit edit "$IM" "$inner/w/crash" "$inner/crash.json" \
		"$how" || why crash.edit >>"$det"
	killed_umount "$M" "$rule" "$det"
	killed=$(listing "$F")
	fs_pyrun crash.state state "$inner/w/crash" "$inner/crash.json"
	got=$(grep -x -e old -e new -e mixed -e 'broken: .*' "$WORK/crash.state")
	# (the kill left files for the remount to remove, or a temporary)
	[ "$killed" != "$(listing "$out/rows")" ] ||
		echo "the kill left the directory as it was: $killed" >>"$det"
	[ "$got" = "$want" ] ||
		echo "after the kill the directory holds '$got', not '$want': $(why crash.state)" >>"$det"
	# the next mount tidies up, shows the edits; its unmount writes them
	if start_daemon "$F" "$M" "$WORK/crash.err2"; then
		fs_pyrun crash.named named "$inner/w/crash" ||
			echo "after the remount: $(why crash.named)" >>"$det"
		fs_pyrun crash.shows shows "$IM" "$inner/crash.json" ||
			why crash.shows >>"$det"
		stop_daemon "$M"
		[ "$DRC" = 0 ] || echo "remount: ptfs exited $DRC" >>"$det"
	else
		echo "no remount: $(head -n 1 "$WORK/crash.err2")" >>"$det"
	fi
	tools "$F" crash >>"$det"
	one=$inner/one/crash.pt
	[ -f "$WORK/one/crash.pt" ] || one=
	fs_pyrun crash.written written "$inner/w/crash" "$inner/crash.json" \
		$one || why crash.written >>"$det"
	[ -z "$(leftovers "$F")" ] || echo "left: $(leftovers "$F")" >>"$det"
	if [ -s "$det" ]; then
		fail "crash at $step" "$(head -n 1 "$det")" "$det"
	else
		pass "crash at $step" "the directory was $got (files: $killed); remounted, written back: $(report crash.written)"
	fi
done
fi

# ------------------------------------------------------ a failing disk
# the clone of the edited chunk's .distcp, or a write into the new file,
# fails (ENOSPC): `ptfs umount` exits 1 with one line naming the file and
# the error, the directory is as it was, the mount and the edit stay;
# with the fault gone the next `ptfs umount` writes the edit back
if want failing_disk; then
for rule in "clone .g1.distcp 1 ENOSPC" "write .g1.distcp 1 ENOSPC"; do
	what=${rule%% *}
	F=$W/disk
	rm -rf "$F" "$W/.disk.ptfs"
	cp -r "$out/rows" "$F" || exit 1
	s0=$(dir_sums "$F")
	det=$WORK/disk.det
	: >"$det"
	: >"$CTL"
	if LD_PRELOAD=$INJ start_daemon "$F" "$M" "$WORK/disk.err"; then
		printf 'ABCD' | dd of="$M/layer/rows" conv=notrunc status=none ||
			echo "the edit through the mount failed" >>"$det"
		printf '%s\n' "$rule" >"$CTL"
		: >"$CTL.log"
		msg=$(run_limited 60 "$PTFS" umount "$M" 2>&1)
		r=$?
		: >"$CTL"
		grep -q ENOSPC "$CTL.log" || echo "the fault was not hit ($rule)" >>"$det"
		case $r:$msg in
		1:"ptfs: write-back failed, $M stays mounted and nothing is lost: $F: "*__0_0*"No space left on device") ;;
		*) echo "ptfs umount: exit $r: $msg" >>"$det" ;;
		esac
		[ "$(printf '%s\n' "$msg" | wc -l)" = 1 ] ||
			echo "more than one line: $msg" >>"$det"
		[ "$(dir_sums "$F")" = "$s0" ] ||
			echo "the directory changed: $(listing "$F")" >>"$det"
		is_mounted "$M" || echo "not mounted after the failed write-back" >>"$det"
		m2=$(run_limited 60 "$PTFS" umount "$M" 2>&1) ||
			echo "the second ptfs umount failed: $m2" >>"$det"
		stop_daemon "$M"
		case $(listing "$F") in
		*__0_0.g1.distcp*) ;;
		*) echo "the edit was not written back: $(listing "$F")" >>"$det" ;;
		esac
		[ -z "$(leftovers "$F")" ] || echo "left: $(leftovers "$F")" >>"$det"
	else
		echo "not mounted: $(head -n 1 "$WORK/disk.err")" >>"$det"
	fi
	if [ -s "$det" ]; then
		fail "a failing $what at write-back" "$(head -n 1 "$det")" "$det"
	else
		pass "a failing $what at write-back" "one line: ${msg:-}; then written back"
	fi
done
fi

# every daemon's stderr: refusals' one-line reasons only, no sanitizer
check_daemon_logs

conclude
