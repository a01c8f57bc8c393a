#!/bin/sh
# The overlay's crash loop (issue 14; tests/fs/safety/crash.py says what is
# checked): random edits of every kind through a real mount, kill -9 of
# the daemon at random moments (during edits and during ptfs umount's
# write-back), remount, and one clean unmount at the end; torch (the
# version under test) loads every new checkpoint.
#
#   usage: sh tests/fs/safety/crash.sh VERSION PTFS [ITERATIONS [SEED]]
#
# ITERATIONS defaults to 300 (ctest runs a smaller count).  Prints the
# counts, where the kills landed, then "N passed, N failed"; exit 0/1, 77
# without /dev/fuse.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS [ITERATIONS [SEED]]" 2 4 "$@"
PTFS=$2 iters=${3:-300} seed=${4:-$$}
fs_progs PTFS
fs_need_fuse
fs_torch "" ptfs-crash
. "$fs/lib/lib.sh"
cleanup() {
	cleanup_mounts
	fusermount3 -uz "$WORK/mnt/m" 2>/dev/null
	[ -n "${PTFS_KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/py" "$WORK/mnt/m"
cp "$here/overlay_check.py" "$WORK/py/"
if [ "$version" = 1.13 ]; then
	set -- "$py" "$WORK/py/overlay_check.py"
else
	set -- chroot "$root" python3 "$inner/py/overlay_check.py"
fi
"$@" crashmake "$inner/model.pt" || { echo "torch could not make the checkpoint"; exit 1; }
echo "# seed $seed, $iters iterations, torch $version"
python3 "$here/crash.py" "$PTFS" "$WORK" "$inner" "$iters" "$seed" "$@"
