#!/bin/sh
# stress.sh PTFS [SHARED_DIR] - many readers and writers at once on a
# writable mount (stress.py: processes x threads, the same and different
# tensors, renames while reading, byte checks every round), then `ptfs
# umount` and the written archive checked: its records (zipfile), and
# torch.load under Debian's torch 1.13 and torch 2.x (the chroot from
# SHARED_DIR/tools/torch2-root) when they are there.
#
#   STRESS="PROCS THREADS ROUNDS"   default "4 4 20"
#   PTFS_TSAN_BUILD=1               PTFS is a ThreadSanitizer build: its
#                                   reports fail the test (none are
#                                   suppressed; see docs/testing.md)
#
# The daemon runs in the foreground with its stderr captured: any
# sanitizer report, or anything it prints, fails the test.  One line per
# check, then "N passed, N failed[, N skipped]"; exit 0, 1, or 77 when
# /dev/fuse cannot be used.
set -u
LC_ALL=C
export LC_ALL
[ $# -ge 1 ] || { echo "usage: sh $0 PTFS [SHARED_DIR]" >&2; exit 2; }
PTFS=$1
shared=${2:-}
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/lib.sh"
WORK=$(mktemp -d /tmp/ptfs-stress.XXXXXX) || exit 1
trap 'cleanup_mounts; [ -n "${PTFS_KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM
set -- ${STRESS:-4 4 20}
procs=$1 threads=$2 rounds=$3
DAEMON_TIMEOUT=600
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1}"
san='ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error\|SUMMARY: .*Sanitizer\|WARNING: ThreadSanitizer\|FATAL: ThreadSanitizer'

D=$WORK/d
MNT=$WORK/mnt/m
mkdir -p "$D" "$MNT"
python3 "$here/stress.py" gen "$D/model.pt" >/dev/null || exit 1
probe_fuse "$D/model.pt" "$MNT" "$WORK/daemon.err"

out=$(run_limited 900 python3 "$here/stress.py" run "$MNT" "$procs" "$threads" "$rounds" 2>&1)
case $out in
ok*) pass "concurrent readers and writers" "${out#ok }" ;;
*) fail "concurrent readers and writers" "$(echo "$out" | tail -n 3 | tr '\n' ' ')" ;;
esac
run_limited 300 "$PTFS" umount "$MNT" >"$WORK/umount.out" 2>"$WORK/umount.err"
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$WORK/umount.err" ]; then
	pass "ptfs umount" "exit 0, nothing printed"
else
	fail "ptfs umount" "exit $rc: $(head -n 2 "$WORK/umount.err" | tr '\n' ' ')"
fi
stop_daemon "$MNT"
[ "${DRC:-0}" -eq 0 ] || fail "daemon exit" "exit status $DRC"
if grep -q "$san" "$WORK/daemon.err"; then
	fail "no sanitizer reports" "$(grep -c "$san" "$WORK/daemon.err") report line(s)" "$WORK/daemon.err"
elif [ -s "$WORK/daemon.err" ]; then
	fail "no sanitizer reports" "the daemon printed" "$WORK/daemon.err"
else
	pass "no sanitizer reports" "the daemon printed nothing${PTFS_TSAN_BUILD:+ (ThreadSanitizer build)}"
fi
out=$(python3 "$here/stress.py" check "$D/model.pt" "$procs" "$threads" "$rounds" 2>&1)
case $out in
ok*) pass "archive records" "${out#ok }" ;;
*) fail "archive records" "$out" ;;
esac
left=$(ls -A "$D" | grep -vx model.pt | tr '\n' ' ')
[ -z "$left" ] && pass "nothing beside the checkpoint" "only model.pt" ||
	fail "nothing beside the checkpoint" "also: $left"

# torch 1.13 (Debian) and 2.x (chroot) load what was written back
. "$fs/../torch/select.sh"
if torch_version /usr/bin/python3 >/dev/null; then
	out=$(/usr/bin/python3 "$here/stress.py" torch "$D/model.pt" "$procs" "$threads" "$rounds" 2>&1 | tail -n 1)
	case $out in
	ok*) pass "torch 1.13" "${out#ok }" ;;
	*) fail "torch 1.13" "$out" ;;
	esac
else
	skip "torch 1.13" "no torch in /usr/bin/python3"
fi
root= root_why=
root=$(torch2_root 2>"$WORK/torch2.why") || root=
root_why=$(tail -n 1 "$WORK/torch2.why")
if [ -n "$root" ] && [ -d "$root/tmp" ]; then
	in=$(mktemp -d "$root/tmp/ptfs-stress.XXXXXX")
	cp "$here/stress.py" "$D/model.pt" "$in/"
	out=$(chroot "$root" python3 "${in#"$root"}/stress.py" torch \
		"${in#"$root"}/model.pt" "$procs" "$threads" "$rounds" 2>&1 | tail -n 1)
	rm -rf "$in"
	case $out in
	ok*) pass "torch 2" "${out#ok }" ;;
	*) fail "torch 2" "$out" ;;
	esac
elif [ "${PT_NO_TORCH2:-0}" = 1 ]; then
	skip "torch 2" "$root_why"
else
	fail "torch 2" "no torch 2.x: $root_why"
fi
if no_mounts_left; then
	pass "no mounts left" "nothing under $WORK/mnt"
else
	fail "no mounts left" "still mounted"
fi
summary
[ "$nfail" -eq 0 ]
