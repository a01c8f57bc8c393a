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
	. "$here/../torch/select.sh"
	torch_select "$version" "$1" "$2"
	WORK=$work
}
