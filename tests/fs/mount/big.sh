#!/bin/sh
# A checkpoint past the 32-bit limits, through a real mount: one storage of
# more than 4 GiB and more than 65,535 records (ZIP64 sizes, offsets and
# counts), generated in the test run and removed afterwards.
#
#   usage: sh tests/fs/mount/big.sh PTFS PTLS SHARED_DIR
#
# big_check.py writes 70,000 float32 tensors of 4 elements and, in the
# middle of the dict, a uint8 tensor of 2^32 + 2^26 + 123 bytes, in
# torch.save's layout with plain python.  That record is a hole in a sparse
# file (patches at its start, middle, end and across 4 GiB), so making it
# costs no disk and seconds.  Then: ptls lists it; a writable mount reads
# the patches, a hole and small tensors at their offsets (half of them
# past 4 GiB), through the tensor files, .ptfs/storages and the .npy
# view; dd conv=notrunc edits the big tensor (before and past 4 GiB) and
# one small tensor; `ptfs umount` writes it back (the edited storage is
# copied into the overlay first: 4.4 GB, and written again into the new
# archive: 4.4 GB more); zipfile checks the archive (CRC of every record,
# alignment, ZIP64 end records); torch 2.x loads it with mmap=True and
# torch 1.13 whole, and both see every small tensor and the edits.
#
# Needs about 2 x 4.4 GB free where the scratch directory goes (the torch
# 2.x chroot's /tmp, else $TMPDIR or /tmp): skips (77) saying so when not.
# Prints one line per check, the time each step took, and finally "N
# passed, N failed[, N skipped]".  Exit 0, 1, or 77 (no usable /dev/fuse,
# not enough disk, no torch at all).
set -u
LC_ALL=C
export LC_ALL

usage() { echo "usage: sh $0 PTFS PTLS SHARED_DIR" >&2; exit 2; }
[ $# -eq 3 ] || usage
PTFS=$1 ptls=$2 shared=$3
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
case $PTFS in /*) ;; *) PTFS=$(pwd)/$PTFS ;; esac
case $ptls in /*) ;; *) ptls=$(pwd)/$ptls ;; esac
for b in "$PTFS" "$ptls"; do
	if [ ! -x "$b" ]; then
		echo "not found or not executable: $b" >&2
		exit 1
	fi
done
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null 2>&1; then
	echo "no /dev/fuse or no fusermount3: skipping"
	exit 77
fi
NSMALL=70000
BIG=4362076283		# 2^32 + 2^26 + 123
py=python3
command -v "$py" >/dev/null 2>&1 || py=/usr/bin/python3

# torch 2.x sees files under its chroot's /tmp: put everything there
root=
. "$fs/../torch/select.sh"
root=$(torch2_root 2>/dev/null) || root=
[ -n "$root" ] && [ -d "$root/tmp" ] || root=
if [ -n "$root" ]; then
	work=$(mktemp -d "$root/tmp/ptfs-big.XXXXXX") || exit 1
	chmod 755 "$work"
	inner=/tmp/${work##*/}
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/ptfs-big.XXXXXX") || exit 1
fi
WORK=$work
# the daemon copies 4.4 GB up and writes 4.4 GB back: give it time
: "${PTFS_TEST_TIMEOUT:=1500}"
. "$fs/lib/lib.sh"

wpid=
cleanup() {
	trap '' INT TERM HUP
	release_work
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
trap '' PIPE

need_kb=$(( (2 * BIG + (2 << 30)) / 1024 ))
have_kb=$(df -Pk "$WORK" | awk 'NR == 2 { print $4 }')
if [ "${have_kb:-0}" -lt "$need_kb" ]; then
	echo "big.sh: $((have_kb / 1048576)) GiB free in ${WORK%/*}, the test needs $((need_kb / 1048576)) GiB (a 4.4 GB storage copied into the overlay and written back): skipping"
	exit 77
fi
mkdir -p "$WORK/mnt" "$WORK/d" || exit 1
cp "$here/big_check.py" "$WORK/" || exit 1

t0=$(date +%s)
since() { echo "$(( $(date +%s) - $1 )) s"; }
# check LABEL CMD...: CMD prints "ok ..." or "FAIL ..." (big_check.py)
check() {
	_l=$1
	shift
	_s=$(date +%s)
	"$@" >"$WORK/check.out" 2>"$WORK/check.err"
	_rc=$?
	_line=$(head -n 1 "$WORK/check.out")
	case $_rc$_line in
	"0ok "*) pass "$_l" "${_line#ok } ($(since "$_s"))" ;;
	*)
		[ -n "$_line" ] || _line="exit $_rc: $(grep -v 'UCX\|cpuinfo' "$WORK/check.err" | tail -n 1)"
		sed 1d "$WORK/check.out" >"$WORK/check.more"
		fail "$_l" "${_line#FAIL }" "$WORK/check.more" ;;
	esac
}

CK=$WORK/d/big.pt M=$WORK/mnt/big
check "generate" "$py" "$WORK/big_check.py" gen "$CK" $NSMALL $BIG
[ -f "$CK" ] || { summary; exit 1; }

s=$(date +%s)
"$ptls" "$CK" >"$WORK/ptls.out" 2>&1
rc=$?
last=$(tail -n 1 "$WORK/ptls.out")
case $rc$last in
"0# $((NSMALL + 1)) tensors, $((NSMALL + 1)) storages, "*)
	pass "ptls" "$last ($(since "$s"))" ;;
*) fail "ptls" "exit $rc: $last" ;;
esac

s=$(date +%s)
if ! start_daemon "$CK" "$M" "$WORK/ptfs.err"; then
	fail "mount" "$(head -n 1 "$WORK/ptfs.err")"
	summary
	exit 1
fi
pass "mount" "writable, $((NSMALL + 1)) tensors ($(since "$s"))"
check "read through the mount" "$py" "$WORK/big_check.py" read "$M" \
	$NSMALL $BIG

# the edits big_check.py's EDITS describe: the first write into "big"
# copies its 4.4 GB into the overlay
det=$WORK/edit.details
: >"$det"
s=$(date +%s)
printf 'EDITED-1' | dd of="$M/big" bs=1 seek=1000 conv=notrunc \
	status=none 2>>"$det" || echo "dd into big at 1000 failed" >>"$det"
copied=$(since "$s")
printf 'EDITED-2' | dd of="$M/big" bs=1 seek=$(( (1 << 32) + 5 )) \
	conv=notrunc status=none 2>>"$det" ||
	echo "dd into big past 4 GiB failed" >>"$det"
printf '\000\000\367\302' | dd of="$M/t$(printf %05d $((NSMALL - 1)))" \
	bs=1 seek=4 conv=notrunc status=none 2>>"$det" ||
	echo "dd into t$((NSMALL - 1)) failed" >>"$det"
got=$(dd if="$M/big" bs=1 skip=$(( (1 << 32) + 5 )) count=8 status=none)
[ "$got" = EDITED-2 ] || echo "big past 4 GiB reads '$got' after the edit" >>"$det"
disk_ovl=$(du -sk "$WORK/d" | cut -f1)
if [ -s "$det" ]; then
	fail "edit" "$(head -n 1 "$det")" "$det"
else
	pass "edit" "dd conv=notrunc into big at 1000 (copy-up of the storage: $copied) and past 4 GiB, and into t$((NSMALL - 1)); read back ($(since "$s"))"
fi

s=$(date +%s)
run_limited 1500 "$PTFS" umount "$M" >"$WORK/umount.out" 2>"$WORK/umount.err"
rc=$?
took=$(since "$s")
stop_daemon "$M" || echo "could not unmount" >>"$WORK/umount.err"
: >"$det"
[ "$rc" -eq 0 ] || echo "ptfs umount exited $rc: $(head -n 1 "$WORK/umount.err")" >>"$det"
[ "${DRC:-0}" -eq 0 ] || echo "the daemon exited with status $DRC" >>"$det"
daemon_problems "$WORK/ptfs.err" "$det"
left=$(ls -A "$WORK/d" | grep -vx big.pt | head -n 3 | tr '\n' ' ')
[ -z "$left" ] || echo "left beside the checkpoint: $left" >>"$det"
disk_new=$(du -sk "$WORK/d" | cut -f1)
if [ -s "$det" ]; then
	fail "ptfs umount" "$(head -n 1 "$det")" "$det"
else
	pass "ptfs umount" "written back in $took, $(stat -c %s "$CK") bytes"
fi

check "the written archive" "$py" "$WORK/big_check.py" zip "$CK" $NSMALL $BIG
if [ -n "$root" ]; then
	check "torch 2.x" run_limited 900 chroot "$root" python3 \
		"$inner/big_check.py" torch "$inner/d/big.pt" $NSMALL $BIG
elif [ "${PT_NO_TORCH2:-0}" = 1 ]; then
	skip "torch 2.x" "PT_NO_TORCH2=1"
else
	fail "torch 2.x" "no torch 2.x root (sh scripts/torch2-root.sh says why)"
fi
if torch_version /usr/bin/python3 >/dev/null; then
	check "torch 1.13" run_limited 900 /usr/bin/python3 \
		"$WORK/big_check.py" torch "$CK" $NSMALL $BIG
else
	skip "torch 1.13" "/usr/bin/python3 has no torch"
fi
echo "time $(since "$t0"); disk: $((disk_ovl / 1024)) MiB with the overlay, $((disk_new / 1024)) MiB after write-back (both at once during it)"

conclude || exit 1
[ "$npass" -gt 0 ] || exit 77
