#!/bin/sh
# Write-back on file systems with reflinks (issue 18): XFS (mkfs.xfs -m
# reflink=1) and btrfs on loop devices this script makes, each checked as
# follows, with checkpoints written by the torch under test:
#
# - a 4-byte in-place edit (dd conv=notrunc), written back by `ptfs
#   umount`: the result is byte for byte what the full writer makes of the
#   same edit on ext4 (the scratch directory's file system, which has no
#   reflinks; said so when it has), torch loads it with the new bytes, the
#   original (kept by a hard link) is unchanged, and filefrag -v shows the
#   new file's extents shared with it: the clone happened;
# - a rename of a key plus an edit (a new data.pkl, 5 bytes longer, which
#   the padding before the first storage absorbs): the same checks, the
#   unchanged runs copied by copy_file_range, which clones their blocks
#   (shared again);
# - on the scratch directory, a key renamed and renamed back gives the file
#   torch wrote, byte for byte;
# - a deflated checkpoint (records move when written stored: the clone is
#   given up, the full writer starts again): the same checks;
# - mixed edits: 4 bytes in place, a tensor replaced whole, kill -9, a
#   remount that resumes them (no dirty map then: compared whole), 4 more
#   bytes: byte for byte the full writer's result of the same, cloned;
# - kill -9 at each step of the clone-and-patch write-back of the 4-byte
#   edit (faultinj.c's KILL rules: the clone into the temporary, its first
#   patch write, its fsync, the rename over the checkpoint, the journal's
#   removal after it): the checkpoint is then the original or the new
#   file, byte for byte, the remount shows the edit, and its `ptfs
#   umount` writes the full writer's result;
# - tests/fs/safety/faults.sh (parts kill_edits, kill_writeback and
#   other_version; disk_full and readonly_dir test a tmpfs of their own)
#   with its scratch directory on that file system (PT_SCRATCH_DIR);
# - tests/fs/safety/crash.sh's random loop there, ITERATIONS times
#   (default 0: the kill points above are the test; --long runs 100).
#
#   usage: sh tests/fs/safety/reflink.sh [-k CASE] VERSION PTFS [ITERATIONS]
#
# Needs root (loop devices, mounts); a file system whose mkfs tool, kernel
# module or loop device is missing is skipped with one line; exit 77 when
# none can be made, or without /dev/fuse.  Loop devices and mounts are
# always removed, on failure and Ctrl-C too.  Prints one line per check,
# then "N passed, N failed[, N skipped]"; exit 0 or 1.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS [ITERATIONS]" 2 3 "$@"
PTFS=$2 iters=${3:-0}
fs_progs PTFS
if [ "$(id -u)" != 0 ]; then
	echo "not root: skipping (loop devices and mounts need root)"
	exit 77
fi
fs_need_fuse
for t in losetup filefrag; do
	if ! command -v $t >/dev/null 2>&1; then
		echo "no $t: skipping"
		exit 77
	fi
done

fs_torch "" ptfs-reflink
. "$fs/lib/lib.sh"

loops= fsmounts=
# release_fs: unmount the file systems made so far, detach their loops
release_fs() {
	for m in $fsmounts; do
		# FUSE mounts of the crash and fault runs first (they clean up
		# after themselves; this is for a kill of this script)
		awk -v w="$m/" 'index($2, w) == 1 { print $2 }' /proc/mounts |
			while read -r x; do
				fusermount3 -uz "$x" 2>/dev/null ||
					umount -l "$x" 2>/dev/null
			done
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done
	for l in $loops; do
		losetup -d "$l" 2>/dev/null
	done
	loops= fsmounts=
	rm -f "$WORK"/*.img
}
cleanup() {
	trap '' INT TERM HUP
	cleanup_mounts
	release_fs
	if awk -v w="$WORK/" 'index($2, w) == 1 { f = 1 } END { exit !f }' \
		/proc/mounts; then
		echo "mounts left under $WORK; not removing it" >&2
	elif [ -z "${PTFS_KEEP_WORK:-}" ]; then
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/py" "$WORK/mnt/m" "$WORK/ref"
fs_py reflink_check.py
# torch ARG...: reflink_check.py under the torch being tested (one process)
torch() { fs_pycall reflink_check.py "$@"; }
if [ "$version" = 1.13 ]; then
	inside() { echo "$1"; }
else
	inside() { echo "${1#"$root"}"; }
fi
helper() { python3 "$WORK/py/reflink_check.py" "$@"; }

# mkfs_mount FS: a fresh FS on a loop device, mounted at $WORK/FS
mkfs_mount() {
	_img=$WORK/$1.img _dir=$WORK/$1
	if ! command -v "mkfs.$1" >/dev/null 2>&1; then
		skip "$1" "no mkfs.$1 (apt-get install ${1}progs)"
		return 1
	fi
	grep -qw "$1" /proc/filesystems || modprobe "$1" 2>/dev/null
	if ! grep -qw "$1" /proc/filesystems; then
		skip "$1" "the kernel has no $1"
		return 1
	fi
	truncate -s 3G "$_img" || return 1
	case $1 in
	xfs) mkfs.xfs -q -m reflink=1 "$_img" ;;
	btrfs) mkfs.btrfs -q "$_img" ;;
	esac >"$WORK/mkfs.log" 2>&1 || {
		skip "$1" "mkfs.$1 failed: $(tail -n 1 "$WORK/mkfs.log")"
		return 1
	}
	_loop=$(losetup -f --show "$_img" 2>"$WORK/mkfs.log") || {
		skip "$1" "no loop device: $(tail -n 1 "$WORK/mkfs.log")"
		return 1
	}
	loops="$_loop $loops"
	mkdir -p "$_dir"
	if ! mount -t "$1" "$_loop" "$_dir" 2>"$WORK/mkfs.log"; then
		skip "$1" "mount failed: $(tail -n 1 "$WORK/mkfs.log")"
		return 1
	fi
	fsmounts="$_dir $fsmounts"
	chmod 755 "$_dir"
}

# writeback FILE KIND: mount FILE, edit (inplace: 4 bytes of w3 at 4000;
# rename: also w1 -> renamed), ptfs umount
writeback() {
	_m=$WORK/mnt/m
	"$PTFS" "$1" "$_m" 2>>"$WORK/ptfs.log" || return 1
	printf '\001\002\003\004' |
		dd of="$_m/w3" bs=1 seek=4000 conv=notrunc status=none &&
		if [ "$2" = rename ]; then mv "$_m/w1" "$_m/renamed"; fi
	_st=$?
	"$PTFS" umount "$_m" 2>>"$WORK/ptfs.log" || _st=1
	return $_st
}

# mixed FILE: a 4-byte write into w3, w5 replaced whole (cp), the daemon
# killed (-9) without writing back, a remount that resumes both (staged
# before it: no dirty map, compared whole), 4 bytes into w9, ptfs umount
mixed() {
	_m=$WORK/mnt/m
	"$PTFS" -f "$1" "$_m" 2>>"$WORK/ptfs.log" &
	_p=$!
	_i=0
	while ! is_mounted "$_m" && [ $_i -lt 100 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	printf '\011\012\013\014' |
		dd of="$_m/w3" bs=1 seek=70000 conv=notrunc status=none &&
		head -c "$(stat -c %s "$_m/w5")" "$WORK/orig.pt" >"$WORK/new5" &&
		cp "$WORK/new5" "$_m/w5" || { kill -9 $_p; return 1; }
	kill -9 $_p
	wait $_p 2>/dev/null
	fusermount3 -uz "$_m" 2>/dev/null
	"$PTFS" "$1" "$_m" 2>>"$WORK/ptfs.log" || return 1
	printf '\021\022\023\024' |
		dd of="$_m/w9" bs=1 seek=12 conv=notrunc status=none
	_st=$?
	"$PTFS" umount "$_m" 2>>"$WORK/ptfs.log" || _st=1
	return $_st
}

# check LABEL FILE KIND: torch loads FILE with the edit of KIND
check_load() {
	if [ "$3" = rename ]; then
		set -- "$1" "$2" w3 4000 01020304 w1 renamed
	else
		set -- "$1" "$2" w3 4000 01020304
	fi
	_l=$1
	shift
	if torch check "$(inside "$1")" "$2" "$3" "$4" ${5:+"$5"} ${6:+"$6"} \
		>"$WORK/check.log" 2>&1; then
		pass "$_l" "torch $version loads it, with the edit"
	else
		fail "$_l" "torch $version: $(grep -v UCX "$WORK/check.log" |
			tail -n 1)"
	fi
}

# the checkpoints, and the full writer's results on the scratch directory
torch make "$inner/orig.pt" >/dev/null 2>"$WORK/make.log" ||
	{ echo "torch could not make the checkpoint"; cat "$WORK/make.log"; exit 1; }
helper deflate "$WORK/orig.pt" "$WORK/defl.pt" || exit 1
if cp --reflink=always "$WORK/orig.pt" "$WORK/ref/probe" 2>/dev/null; then
	echo "# note: $WORK has reflinks; its results are the clone's, not the full writer's"
fi
rm -f "$WORK/ref/probe"
for k in inplace rename deflated; do
	src=orig
	[ $k = deflated ] && src=defl
	cp "$WORK/$src.pt" "$WORK/ref/$k.pt"
	writeback "$WORK/ref/$k.pt" "${k%deflated}" ||
		{ echo "write-back on $WORK failed"; tail -n 3 "$WORK/ptfs.log"; exit 1; }
done
cp "$WORK/orig.pt" "$WORK/ref/mixed.pt"
mixed "$WORK/ref/mixed.pt" ||
	{ echo "the mixed edits on $WORK failed"; tail -n 3 "$WORK/ptfs.log"; exit 1; }

# a key renamed and renamed back: the file torch wrote, byte for byte
# (data.pkl is repickled as torch's pickler writes it, twice)
cp "$WORK/orig.pt" "$WORK/ref/back.pt"
_m=$WORK/mnt/m
for step in "w1 w1_r" "w1_r w1"; do
	set -- $step
	"$PTFS" "$WORK/ref/back.pt" "$_m" 2>>"$WORK/ptfs.log" &&
		mv "$_m/$1" "$_m/$2" &&
		"$PTFS" umount "$_m" 2>>"$WORK/ptfs.log" ||
		fail "rename back" "mount, mv or umount failed"
done
if cmp -s "$WORK/ref/back.pt" "$WORK/orig.pt"; then
	pass "rename back" "a key renamed and back: the file torch wrote"
else
	fail "rename back" "not the file torch wrote: $(cmp "$WORK/ref/back.pt" "$WORK/orig.pt" 2>&1)"
fi

# a bytes value edited and back: the file torch wrote (the edited bytes
# are pickled as pickle does, memo entries included)
cp "$WORK/orig.pt" "$WORK/ref/bytes.pt"
for v in 'q\200r' 'ab\377c'; do
	"$PTFS" "$WORK/ref/bytes.pt" "$_m" 2>>"$WORK/ptfs.log" &&
		printf "$v" >"$_m/tag" &&
		"$PTFS" umount "$_m" 2>>"$WORK/ptfs.log" ||
		fail "bytes back" "mount, write or umount failed"
done
if cmp -s "$WORK/ref/bytes.pt" "$WORK/orig.pt"; then
	pass "bytes back" "a bytes value edited and back: the file torch wrote"
else
	fail "bytes back" "not the file torch wrote: $(cmp "$WORK/ref/bytes.pt" "$WORK/orig.pt" 2>&1)"
fi

# kill_sweep FS DIR: the 4-byte edit of "inplace" on FS (mounted at
# DIR), its write-back killed at each step in turn
kill_sweep() {
	if ! faultinj_ready; then
		skip "$1 kill points" "$FAULTINJ_WHY"
		return
	fi
	_m=$WORK/mnt/m _ck=$2/kill.pt
	for _c in "clone into the temporary|clone .ptfs-new. 1 KILL" \
	    "first patch write|write .ptfs-new. 1 KILL" \
	    "fsync of the temporary|sync .ptfs-new. 1 KILL" \
	    "rename over the checkpoint|rename .ptfs-new. 1 KILL" \
	    "journal removed after the rename|unlink ptfs.journal 1 KILL"; do
		_step=${_c%%|*} _rule=${_c#*|}
		_det=$WORK/kill.det
		: >"$_det"
		rm -rf "$_ck" "$2/.kill.pt.ptfs"
		cp --reflink=never "$WORK/orig.pt" "$_ck" && sync
		: >"$CTL"
		if ! LD_PRELOAD=$INJ start_daemon "$_ck" "$_m" "$WORK/kill.err"; then
			fail "$1 kill at $_step" "not mounted: $(head -n 1 "$WORK/kill.err")"
			continue
		fi
		printf '\001\002\003\004' |
			dd of="$_m/w3" bs=1 seek=4000 conv=notrunc status=none ||
			echo "the edit failed" >>"$_det"
		killed_umount "$_m" "$_rule" "$_det"
		if cmp -s "$_ck" "$WORK/orig.pt"; then
			_was=original
		elif cmp -s "$_ck" "$WORK/ref/inplace.pt"; then
			_was=new
		else
			_was=
			echo "the checkpoint is neither the original nor the new file" >>"$_det"
		fi
		_left=$(ls -A "$2" | grep -vx 'kill.pt\|\.kill\.pt\.ptfs' | head -n 3)
		# a temporary the kill left is named .NAME.ptfs-new.* and
		# removed by the remount (docs/editing.md)
		case $_left in ''|.kill.pt.ptfs-new.*) ;;
		*) echo "left beside it: $_left" >>"$_det" ;; esac
		if start_daemon "$_ck" "$_m" "$WORK/kill2.err"; then
			[ "$(od -An -tx1 -j4000 -N4 "$_m/w3" | tr -d ' \n')" = 01020304 ] ||
				echo "the remount does not show the edit" >>"$_det"
			"$PTFS" umount "$_m" >/dev/null 2>>"$_det" ||
				echo "ptfs umount after the remount failed" >>"$_det"
			stop_daemon "$_m"
			cmp -s "$_ck" "$WORK/ref/inplace.pt" ||
				echo "after the remount's write-back: not the full writer's result" >>"$_det"
			[ -z "$(ls -A "$2" | grep -vx 'kill.pt')" ] ||
				echo "left after the remount's write-back: $(ls -A "$2" | tr '\n' ' ')" >>"$_det"
		else
			echo "no remount: $(head -n 1 "$WORK/kill2.err")" >>"$_det"
		fi
		verdict "$1 kill at $_step" \
			"then the $_was file; the remount writes the edit" "$_det"
	done
	rm -rf "$_ck" "$2/.kill.pt.ptfs"
}

made=0
for fsys in xfs btrfs; do
	want "$fsys" || continue
	mkfs_mount $fsys || continue
	made=$((made + 1))
	d=$WORK/$fsys
	for k in inplace rename deflated mixed; do
		src=orig
		[ $k = deflated ] && src=defl
		cp --reflink=never "$WORK/$src.pt" "$d/$k.pt"
		ln "$d/$k.pt" "$d/$k.orig"	# keeps the original's extents
		sync
		if [ $k = mixed ]; then
			mixed "$d/$k.pt"
		else
			writeback "$d/$k.pt" "${k%deflated}"
		fi || {
			fail "$fsys $k" "write-back failed: $(tail -n 1 "$WORK/ptfs.log")"
			continue
		}
		if cmp -s "$d/$k.pt" "$WORK/ref/$k.pt"; then
			pass "$fsys $k" "byte for byte the full writer's result"
		else
			fail "$fsys $k" "differs from the full writer's result: $(cmp "$d/$k.pt" "$WORK/ref/$k.pt" 2>&1)"
		fi
		if cmp -s "$d/$k.orig" "$WORK/$src.pt"; then
			pass "$fsys $k" "the original is unchanged"
		else
			fail "$fsys $k" "the original changed"
		fi
		[ $k = mixed ] || check_load "$fsys $k" "$d/$k.pt" "${k%deflated}"
		pct=$(helper shared "$d/$k.pt")
		if [ $k != deflated ]; then
			if [ "${pct:-0}" -ge 90 ]; then
				pass "$fsys $k" "cloned: $pct% of its blocks shared with the original"
			else
				fail "$fsys $k" "not cloned: ${pct:-?}% of its blocks shared"
			fi
		else
			echo "#    $fsys $k: $pct% of its blocks shared"
		fi
		rm -f "$d/$k.pt" "$d/$k.orig"
	done
	kill_sweep "$fsys" "$d"
	if [ "$iters" != 0 ]; then
		if PT_SCRATCH_DIR=$d sh "$here/crash.sh" "$version" "$PTFS" \
		    "$iters" >"$WORK/crash.log" 2>&1; then
			pass "$fsys crash" "crash.sh, $iters iterations: $(tail -n 1 "$WORK/crash.log")"
		else
			fail "$fsys crash" "crash.sh failed" "$WORK/crash.log"
			grep -E '^(FAIL|not ok)' "$WORK/crash.log" | head -n 20
		fi
	fi
	if PT_SCRATCH_DIR=$d sh "$here/faults.sh" \
		-k kill_edits,kill_writeback,other_version \
		"$version" "$PTFS" "$PTFS" "" >"$WORK/faults.log" 2>&1; then
		pass "$fsys faults" "faults.sh a, wb, d: $(tail -n 1 "$WORK/faults.log")"
	else
		fail "$fsys faults" "faults.sh failed"
		grep -E '^FAIL' "$WORK/faults.log" | head -n 20
	fi
	release_fs
done
if [ $made = 0 ]; then
	echo "neither XFS nor btrfs could be made here: skipping"
	exit 77
fi
summary
[ "$nfail" = 0 ]
