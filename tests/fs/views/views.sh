#!/bin/sh
# The .npy and .txt views and the cross-checkpoint workflows through real
# mounts (docs/views.md): torch writes two checkpoints of one architecture
# (views_torch.py gen), numpy and the standard tools read and edit them
# through ptfs (views_check.py: numpy.load and mmap, text round trips,
# diff -rq, diff of text views, rsync -a with and without --inplace,
# rsync -n --checksum, cmp/sha256, np.save/cp/sed -i/echo into views,
# refused writes), and torch loads what was written back
# (views_torch.py verify).
#
#   usage: sh tests/fs/views/views.sh VERSION PTFS SHARED_DIR
#
# VERSION 1.13: Debian's torch (/usr/bin/python3); 2: torch 2.x in the
# chroot SHARED_DIR/tools/torch2-root builds.  Prints one line per check
# and "N passed, N failed".  Exit 0 all passed, 1 a failure, 77 skipped.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS SHARED_DIR" 3 3 "$@"
PTFS=$2 shared=$3
fs_progs PTFS
[ -d "$shared" ] && shared=$(cd "$shared" && pwd)
fs_need_fuse
for t in rsync diff sed cmp; do
	command -v $t >/dev/null 2>&1 || { echo "$t is missing" >&2; exit 1; }
done
/usr/bin/python3 -c 'import numpy' 2>/dev/null ||
	{ echo "numpy is missing for /usr/bin/python3" >&2; exit 1; }
fs_torch "$shared" ptfs-views
cleanup() {
	awk -v w="$WORK/mnt/" 'index($2, w) == 1 { print $2 }' /proc/mounts |
		while read -r m; do fusermount3 -uz "$m" 2>/dev/null; done
	[ -n "${PTFS_KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/py" "$WORK/mnt"
cp "$here/views_torch.py" "$WORK/py/"

torch_py() {	# views_torch.py ARGS under the torch being tested
	if [ "$version" = 1.13 ]; then
		"$py" "$WORK/py/views_torch.py" "$1" "$WORK" 2>"$WORK/torch.err"
	else
		chroot "$root" python3 "$inner/py/views_torch.py" "$1" "$inner" \
			2>"$WORK/torch.err"
	fi
}

if ! torch_py gen; then
	echo "FAIL generate: $(grep -v UCX "$WORK/torch.err" | tail -n 3)"
	echo "0 passed, 1 failed"
	exit 1
fi
/usr/bin/python3 "$here/views_check.py" "$PTFS" "$WORK" >"$WORK/check.out" 2>&1
rc=$?
grep -v '^[0-9]* passed' "$WORK/check.out"
torch_py verify >"$WORK/verify.out"
vrc=$?
grep -v "^[0-9]* passed\\|UCX" "$WORK/verify.out"
[ -s "$WORK/torch.err" ] && [ $vrc -ne 0 ] && grep -v UCX "$WORK/torch.err" | tail -n 3
p1=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$WORK/check.out")
f1=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$WORK/check.out")
p2=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$WORK/verify.out")
f2=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$WORK/verify.out")
[ -n "$f1" ] || { f1=1 p1=0; echo "FAIL views_check.py: exit $rc, no summary"; }
[ -n "$f2" ] || { f2=1 p2=0; echo "FAIL verify: exit $vrc, no summary"; }
echo "$((p1 + p2)) passed, $((f1 + f2)) failed"
[ $((f1 + f2)) -eq 0 ] && [ $rc -eq 0 ] && [ $vrc -eq 0 ]
