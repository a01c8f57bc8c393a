#!/bin/sh
# access.sh PTFS - who may enter a mount and what it lets them do.
#   - mounted by root without allow_other: user nobody (setpriv) cannot
#     stat, list or open anything in it (EACCES), root can
#   - with -o allow_other (ptfs always adds default_permissions): nobody
#     lists and reads (files are 0644), and every write is refused with
#     EACCES/EPERM as the modes say; nothing changes
#   - no file has an x bit: tree, views, .ptfs
#   - -o ro: open for writing, create, truncate, unlink, mkdir, rmdir,
#     rename, link, symlink, mknod, setxattr, removexattr, chmod, chown,
#     utime, .ptfs/commit and storages all fail with EROFS; the checkpoint
#     is unchanged after unmounting
# Needs root (to mount as one user and enter as another); exit 77 without
# it or without /dev/fuse.  One line per check, "N passed, N failed".
set -u
LC_ALL=C
export LC_ALL
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
[ $# -ge 1 ] || { echo "usage: sh $0 [-k CASE] PTFS" >&2; exit 2; }
PTFS=$1
. "$fs/lib/lib.sh"
if [ "$(id -u)" -ne 0 ]; then
	echo "skip: needs root (mount as root, enter as nobody)"
	exit 77
fi
if ! command -v setpriv >/dev/null; then
	echo "skip: no setpriv (util-linux)"
	exit 77
fi
WORK=$(mktemp -d /tmp/ptfs-access.XXXXXX) || exit 1
trap 'cleanup_mounts; rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM
chmod 755 "$WORK"
D=$WORK/d MNT=$WORK/mnt/m
mkdir -p "$D" "$MNT"
chmod 755 "$D" "$WORK/mnt" "$MNT"
python3 "$here/stress.py" gen "$D/model.pt" >/dev/null || exit 1
apy=$(for_others "$here/access.py") || exit 1
as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
}

# results ACCESS.PY-OUTPUT-FILE LABEL: count its lines
results() {
	while IFS= read -r l; do
		case $l in
		"ok   "*) l=${l#"ok   "}; pass "$2: ${l%%: *}" "${l#*: }" ;;
		"FAIL "*) l=${l#"FAIL "}; fail "$2: ${l%%: *}" "${l#*: }" ;;
		*) fail "$2" "$l" ;;
		esac
	done <"$1"
}

# without allow_other
probe_fuse "$D/model.pt" "$MNT" "$WORK/d1.err"
if want no_allow_other; then
mkdir "$MNT/sub" 2>/dev/null
if [ "$(ls "$MNT" | wc -l)" -gt 0 ]; then
	pass "root enters its mount" "$(ls "$MNT" | wc -l) names"
else
	fail "root enters its mount" "nothing listed"
fi
as_nobody /usr/bin/python3 "$apy" denied "$MNT" >"$WORK/out" 2>&1
results "$WORK/out" "nobody, no allow_other"
python3 "$here/access.py" nox "$MNT" >"$WORK/out" 2>&1
results "$WORK/out" "mode bits"
fi
stop_daemon "$MNT"
# that mount wrote back its one change (the directory "sub", for rmdir);
# from here on nothing may change the file
sum=$(sha256sum <"$D/model.pt")

# with allow_other: permissions apply
if want allow_other; then
start_daemon "$D/model.pt" "$MNT" "$WORK/d2.err" -o allow_other ||
	fail "mount -o allow_other" "$(head -n 1 "$WORK/d2.err")"
if is_mounted "$MNT"; then
	as_nobody /usr/bin/python3 "$apy" other "$MNT" >"$WORK/out" 2>&1
	results "$WORK/out" "nobody, allow_other"
	stop_daemon "$MNT"
fi
fi

# -o ro
if want ro; then
start_daemon "$D/model.pt" "$MNT" "$WORK/d3.err" -o ro ||
	fail "mount -o ro" "$(head -n 1 "$WORK/d3.err")"
if is_mounted "$MNT"; then
	python3 "$here/access.py" ro "$MNT" >"$WORK/out" 2>&1
	results "$WORK/out" "-o ro"
	stop_daemon "$MNT"
fi
fi
for e in "$WORK"/d*.err; do
	if grep -q 'ERROR: AddressSanitizer\|runtime error\|SUMMARY: .*Sanitizer' "$e"; then
		fail "no sanitizer reports" "${e##*/}: $(grep -m 1 'ERROR\|runtime error' "$e")"
	fi
done
[ "$(sha256sum <"$D/model.pt")" = "$sum" ] &&
	pass "checkpoint unchanged" "sha256 as before: nobody's and -o ro's calls wrote nothing" ||
	fail "checkpoint unchanged" "its sha256 changed"
no_mounts_left && pass "no mounts left" "nothing under $WORK/mnt" ||
	fail "no mounts left" "still mounted"
summary
[ "$nfail" -eq 0 ]
