# begin.sh - how every mount test starts (POSIX sh; sourced right after
# the caller sets `here`, its own directory, and `set -u`):
#
#   fs_args USAGE MIN MAX "$@"  MIN to MAX arguments, the first 1.13 or 2
#                               (into $version); else "usage: sh $0 USAGE"
#                               and exit 2
#   fs_progs VAR...             each $VAR made an absolute path, and
#                               executable, or one line and exit 1
#   fs_need_fuse                exit 77 (skipped, one line) without
#                               /dev/fuse or fusermount3
#   fs_torch SHARED TAG         the torch under test and its scratch
#                               directory TAG.XXXXXX (tests/torch/select.sh:
#                               $py or $root, $work, $inner), into $WORK
#   fs_py SCRIPT.py [MORE.py...] copied from here into $WORK/py, then
#   fs_pyrun REPORT ARG...      runs SCRIPT.py ARG... with the torch under
#                               test (in its root for 2.x: paths as $inner
#                               names them), for 300 s at most; stdout in
#                               $WORK/REPORT, stderr in $WORK/REPORT.err
#
# Then the caller sources lib.sh (which reads $WORK and $PTFS).

LC_ALL=C
export LC_ALL

fs_args() {
	_usage=$1 _min=$2 _max=$3
	shift 3
	if [ $# -lt "$_min" ] || [ $# -gt "$_max" ]; then
		echo "usage: sh $0 $_usage" >&2
		exit 2
	fi
	case $1 in
	1.13|2) version=$1 ;;
	*) echo "usage: sh $0 $_usage" >&2; exit 2 ;;
	esac
}

fs_progs() {
	for _v in "$@"; do
		eval "_p=\$$_v"
		case $_p in /*) ;; *) _p=$(pwd)/$_p ;; esac
		if [ ! -x "$_p" ] || [ -d "$_p" ]; then
			echo "not found or not executable: $_p" >&2
			exit 1
		fi
		eval "$_v=\$_p"
	done
}

fs_need_fuse() {
	if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null 2>&1; then
		echo "no /dev/fuse or no fusermount3: skipping"
		exit 77
	fi
}

fs_torch() {
	. "$fs/../torch/select.sh"
	torch_select "$version" "$1" "$2"
	WORK=$work
}

fs_py() {
	mkdir -p "$WORK/py" || exit 1
	for _f; do
		# the caller's own folder first, then the shared lib/
		if [ -f "$here/$_f" ]; then
			cp "$here/$_f" "$WORK/py/" || exit 1
		else
			cp "$fs/lib/$_f" "$WORK/py/" || exit 1
		fi
	done
	FS_PY=$1
}

fs_pyrun() {	# (run_limited is lib.sh's)
	_rep=$WORK/$1
	shift
	if [ "$version" = 1.13 ]; then
		run_limited 300 "$py" "$WORK/py/$FS_PY" "$@" \
			>"$_rep" 2>"$_rep.err"
	else
		run_limited 300 chroot "$root" python3 "$inner/py/$FS_PY" "$@" \
			>"$_rep" 2>"$_rep.err"
	fi
}
