# surprise_lib.sh - sourced by the issue-15/14 mount tests (xattrs.sh,
# names.sh, owners.sh, stale.sh, rsync.sh, textview.sh): checks the
# arguments "VERSION PTFS" (VERSION 1.13, 2, or "none" for a test that
# needs no torch), finds torch (tests/torch/select.sh), makes the scratch
# directory $WORK (seen by that torch as $inner) and sources lib.sh.
# trun ARGS... runs surprise_gen.py with the torch under test; paths under
# $WORK are given relative to it.

set -u
LC_ALL=C
export LC_ALL
[ $# -ge 2 ] || { echo "usage: sh $0 1.13|2|none PTFS" >&2; exit 2; }
version=$1 PTFS=$2
case $version in 1.13|2|none) ;; *) echo "bad version $version" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
[ -x "$PTFS" ] || { echo "not executable: $PTFS" >&2; exit 1; }
case $PTFS in /*) ;; *) PTFS=$(pwd)/$PTFS ;; esac
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null 2>&1; then
	echo "no /dev/fuse or no fusermount3: skipping"
	exit 77
fi
: "${PTFS_TEST_TIMEOUT:=120}"
if [ "$version" = none ]; then
	work=$(mktemp -d "${TMPDIR:-/tmp}/ptfs-surprise.XXXXXX") || exit 1
	inner=$work
else
	. "$fs/../torch/select.sh"
	torch_select "$version" "" ptfs-surprise
fi
WORK=$work
. "$fs/lib/lib.sh"
mkdir -p "$WORK/mnt" || exit 1
cp "$fs/lib/surprise_gen.py" "$WORK/" || exit 1
# the script server (begin.sh), started in the test's own shell so that
# calls from subshells share it
. "$fs/lib/begin.sh"
mkdir -p "$WORK/py" || exit 1
[ "$version" = none ] || fs_tserve || :

surprise_cleanup() {
	trap '' INT TERM HUP
	cleanup_mounts
	[ -n "${EXTRA_CLEANUP:-}" ] && eval "$EXTRA_CLEANUP"
	release_work
}
trap surprise_cleanup EXIT
trap 'exit 130' INT TERM HUP

# trun ARGS...: python3 surprise_gen.py ARGS under the torch under test
# ($WORK-relative paths), from inside $WORK, through the script server
# (lib/tserve.py); output without torch's noise
trun() {
	if [ "$version" = none ]; then
		(cd "$WORK" && python3 surprise_gen.py "$@") >"$WORK/trun.out" 2>&1
	elif _ts_sendable "$@" && fs_tserve; then
		fs_tcall "$version" trun.out "$inner" "$inner/surprise_gen.py" "$@"
		_tr=$?
		cat "$WORK/trun.out.err" >>"$WORK/trun.out"
		grep -v 'UCX\|cpuinfo' "$WORK/trun.out"
		return $_tr
	elif [ "$version" = 1.13 ]; then
		(cd "$WORK" && "$py" surprise_gen.py "$@") >"$WORK/trun.out" 2>&1
	else
		chroot "$root" sh -c 'cd "$1" && shift && python3 surprise_gen.py "$@"' \
			sh "$inner" "$@" >"$WORK/trun.out" 2>&1
	fi
	_tr=$?
	grep -v 'UCX\|cpuinfo' "$WORK/trun.out"
	return $_tr
}

# note and check (lib.sh) over this file
DET=$WORK/details
: >"$DET"

# daemon_clean ERRFILE LABEL: the daemon logged no sanitizer report and
# nothing else unexpected
daemon_clean() {
	: >"$WORK/dp"
	if daemon_problems "$1" "$WORK/dp"; then
		pass "$2" "the daemon printed nothing unexpected"
	else
		fail "$2" "daemon output" "$WORK/dp"
	fi
}
