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
#                               $WORK/REPORT, stderr in $WORK/REPORT.err.
#                               All calls of a script go to one python
#                               (lib/tserve.py), which imports torch once;
#                               PT_NO_TSERVE=1: a process per call
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
	# started here, in the test's own shell, so that calls from
	# subshells ($(...)) share it
	[ "${PT_NO_TSERVE:-0}" = 1 ] || fs_tserve || :
}

fs_pyrun() {	# (run_limited is lib.sh's)
	_rep=$1
	shift
	if [ "${PT_NO_TSERVE:-0}" != 1 ] && fs_tserve; then
		fs_tcall "$_rep" - "$inner/py/$FS_PY" "$@"
		return
	fi
	if [ "$version" = 1.13 ]; then
		run_limited 300 "$py" "$WORK/py/$FS_PY" "$@" \
			>"$WORK/$_rep" 2>"$WORK/$_rep.err"
	else
		run_limited 300 chroot "$root" python3 "$inner/py/$FS_PY" "$@" \
			>"$WORK/$_rep" 2>"$WORK/$_rep.err"
	fi
}

# fs_tcall REPORT DIR SCRIPT ARG...: one request to the script server
# (fs_tserve); REPORT relative to $WORK, DIR and SCRIPT as python sees them
fs_tcall() {
	_ts_line="$inner/$1$TAB$inner/$1.err$TAB$2$TAB$3"
	_ts_rep=$1
	shift 3
	for _ts_a; do
		_ts_line=$_ts_line$TAB$_ts_a
	done
	_ts_rc=
	printf '%s\n' "$_ts_line" >&5 && IFS= read -r _ts_rc <&6
	[ -n "$_ts_rc" ] && return "$_ts_rc"
	# the server died (a crash in the call): that call failed
	echo "tserve.py died: $(tail -n 3 "$WORK/tserve.err")" \
		>>"$WORK/$_ts_rep.err"
	fs_tserve_stop
	ts_broken=
	return 1
}

# fs_pycall SCRIPT.py ARG...: $WORK/py/SCRIPT.py ARG... under the torch
# under test, through the script server when there is one; its stdout
# and stderr on ours, its exit status ours
fs_pycall() {
	_pc_s=$1
	shift
	if [ "${PT_NO_TSERVE:-0}" != 1 ] && fs_tserve; then
		fs_tcall pycall.out - "$inner/py/$_pc_s" "$@"
		_pc_r=$?
		cat "$WORK/pycall.out"
		cat "$WORK/pycall.out.err" >&2
		return $_pc_r
	fi
	if [ "$version" = 1.13 ]; then
		"$py" "$WORK/py/$_pc_s" "$@"
	else
		chroot "$root" python3 "$inner/py/$_pc_s" "$@"
	fi
}

# fs_tserve: the script server runs (started on first use, on fds 5 and
# 6), or 1
ts_pid= ts_broken=
fs_tserve() {
	[ -n "$ts_pid" ] && return 0
	[ -z "$ts_broken" ] || return 1
	ts_broken=1
	cp "$fs/lib/tserve.py" "$WORK/py/" || return 1
	rm -f "$WORK/tsreq" "$WORK/tsresp"
	mkfifo "$WORK/tsreq" "$WORK/tsresp" || return 1
	if [ "$version" = 1.13 ]; then
		"$py" "$WORK/py/tserve.py" <"$WORK/tsreq" >"$WORK/tsresp" \
			2>>"$WORK/tserve.err" &
	else
		chroot "$root" python3 "$inner/py/tserve.py" <"$WORK/tsreq" \
			>"$WORK/tsresp" 2>>"$WORK/tserve.err" &
	fi
	ts_pid=$!
	exec 5>"$WORK/tsreq" 6<"$WORK/tsresp"
	while IFS= read -r _ts_r <&6; do
		[ "$_ts_r" = ready ] && ts_broken= && return 0
	done
	fs_tserve_stop
	return 1
}

fs_tserve_stop() {
	exec 5>&- 6<&-
	[ -n "$ts_pid" ] && kill "$ts_pid" 2>/dev/null && wait "$ts_pid" 2>/dev/null
	ts_pid=
}
