#!/bin/sh
# resources.sh PTFS - no descriptor or memory leak in the daemon over
# 10,000 open/read/close cycles (resources.py: tensors, views, storages,
# xattrs, in-place writes, renames), on a writable mount; then the daemon
# must exit cleanly at unmount (a LeakSanitizer report in an ASan build
# fails the test) and its peak RSS stay bounded.  Memory for files that
# claim huge sizes is checked by tests/hostile/run.sh.  RESOURCE_CYCLES
# changes the count.  One line per check, "N passed, N failed"; 77
# without /dev/fuse.
set -u
LC_ALL=C
export LC_ALL
[ $# -ge 1 ] || { echo "usage: sh $0 PTFS" >&2; exit 2; }
PTFS=$1
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/lib.sh"
WORK=$(mktemp -d /tmp/ptfs-res.XXXXXX) || exit 1
trap 'cleanup_mounts; rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM
# ASan's quarantine would look like growth: keep it small here
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4:detect_leaks=1"
export ASAN_OPTIONS
D=$WORK/d MNT=$WORK/mnt/m
mkdir -p "$D" "$MNT"
python3 "$here/stress.py" gen "$D/model.pt" >/dev/null || exit 1
probe_fuse "$D/model.pt" "$MNT" "$WORK/daemon.err"
pid=$(pgrep -P "$DPID" -x ptfs || echo "$DPID")
out=$(run_limited 600 python3 "$here/resources.py" "$MNT" "$pid" \
	"${RESOURCE_CYCLES:-10000}" 2>&1)
echo "$out" | while IFS= read -r l; do echo "$l"; done >"$WORK/out"
while IFS= read -r l; do
	case $l in
	"ok   "*) l=${l#"ok   "}; pass "${l%%: *}" "${l#*: }" ;;
	"FAIL "*) l=${l#"FAIL "}; fail "${l%%: *}" "${l#*: }" ;;
	*) fail "resources.py" "$l" ;;
	esac
done <"$WORK/out"
hwm=$(awk '/^VmHWM/ { print int($2 / 1024) }' "/proc/$pid/status")
stop_daemon "$MNT"
if [ "${DRC:-1}" -eq 0 ] && ! grep -q 'Sanitizer\|runtime error' "$WORK/daemon.err"; then
	pass "clean exit" "exit 0, no leak or sanitizer report; peak RSS $hwm MB"
else
	fail "clean exit" "exit ${DRC:-?}" "$WORK/daemon.err"
fi
no_mounts_left && pass "no mounts left" "nothing under $WORK/mnt" ||
	fail "no mounts left" "still mounted"
summary
[ "$nfail" -eq 0 ]
