#!/bin/sh
# dtype.sh - changes of dtype through a real mount (docs/editing.md,
# "Converting a tensor's dtype through the mount"; issue 19 item 1): torch
# writes a checkpoint of bit patterns, ties, a Parameter and an int tensor
# (dtype_torch.py gen, with torch's own t.to() of each planned cast);
# setfattr -n user.dtype casts them through ptfs, each checked at once
# (sizes, bytes, views, .ptfs/storages), refusals change nothing, kill -9
# of the daemon and a remount replay the casts (dtype_check.py); after
# ptfs umount the torch under test loads the file and finds every cast
# tensor bit for bit equal to t.to(dtype), ties still tied
# (dtype_torch.py verify).  float8 casts under torch 2.x only.
#
#   usage: sh tests/fs/edit/dtype.sh VERSION PTFS
#
# VERSION 1.13: Debian's torch (/usr/bin/python3); 2: torch 2.x in the
# scripts/torch2-root.sh chroot.  Prints one line per check and "N
# passed, N failed".  Exit 0 all passed, 1 a failure, 77 skipped.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS" 2 2 "$@"
PTFS=$2
fs_progs PTFS
fs_need_fuse
/usr/bin/python3 -c 'import numpy' 2>/dev/null ||
	{ echo "numpy is missing for /usr/bin/python3" >&2; exit 1; }
fs_torch "" ptfs-dtype
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/py" "$WORK/mnt"
cp "$here/dtype_torch.py" "$WORK/py/"

torch_py() {	# dtype_torch.py ARG under the torch being tested
	if [ "$version" = 1.13 ]; then
		"$py" "$WORK/py/dtype_torch.py" "$1" "$WORK" 2>"$WORK/torch.err"
	else
		chroot "$root" python3 "$inner/py/dtype_torch.py" "$1" "$inner" \
			2>"$WORK/torch.err"
	fi
}

if ! torch_py gen >"$WORK/gen.out"; then
	echo "FAIL generate: $(grep -v UCX "$WORK/torch.err" | tail -n 3)"
	echo "0 passed, 1 failed"
	exit 1
fi
/usr/bin/python3 "$here/dtype_check.py" "$PTFS" "$WORK" >"$WORK/check.out" 2>&1
rc=$?
grep -v '^[0-9]* passed' "$WORK/check.out"
torch_py verify >"$WORK/verify.out"
vrc=$?
grep -v "^[0-9]* passed\\|UCX" "$WORK/verify.out"
[ $vrc -ne 0 ] && grep -v UCX "$WORK/torch.err" | tail -n 3
# the daemons printed nothing but their one-line reasons
for e in "$WORK"/d[0-9]*.err; do
	: >"$WORK/dp"
	DAEMON_LOGS_OK=1 daemon_problems "$e" "$WORK/dp" ||
		{ echo "FAIL daemon log ${e##*/}:"; cat "$WORK/dp"; rc=1; }
done
p1=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$WORK/check.out")
f1=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$WORK/check.out")
p2=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$WORK/verify.out")
f2=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$WORK/verify.out")
[ -n "$f1" ] || { f1=1 p1=0; echo "FAIL dtype_check.py: exit $rc, no summary"; tail -n 5 "$WORK/check.out"; }
[ -n "$f2" ] || { f2=1 p2=0; echo "FAIL verify: exit $vrc, no summary"; }
echo "$((p1 + p2)) passed, $((f1 + f2)) failed"
[ $((f1 + f2)) -eq 0 ] && [ $rc -eq 0 ] && [ $vrc -eq 0 ]
