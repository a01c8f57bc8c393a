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
#   fs_pycheck LABEL ARG...      fs_pyrun rep ARG..., then pass LABEL with
#                               its "ok<TAB>detail" line, or fail with its
#                               first line and the rest (lib.sh's)
#
# Then the caller sources lib.sh (which reads $WORK and $PTFS).

LC_ALL=C
export LC_ALL
TAB=$(printf '\t')	# the script server's field separator (below)

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
	fs_tserve || :
}

fs_pyrun() {	# (run_limited is lib.sh's)
	_rep=$1
	shift
	if _ts_sendable "$@" && fs_tserve; then
		fs_tcall "$version" "$_rep" - "$inner/py/$FS_PY" "$@"
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

fs_pycheck() {
	_pl=$1
	shift
	if fs_pyrun rep "$@"; then
		pass "$_pl" "$(grep "^ok$TAB" "$WORK/rep" | cut -f2)"
	else
		cat "$WORK/rep.err" >>"$WORK/rep"
		fail "$_pl" "$(head -n 1 "$WORK/rep")" "$WORK/rep"
	fi
}

# fs_pycall SCRIPT.py ARG...: $WORK/py/SCRIPT.py ARG... under the torch
# under test, through the script server when there is one; its stdout
# and stderr on ours, its exit status ours
fs_pycall() {
	_pc_s=$1
	shift
	if _ts_sendable "$@" && fs_tserve; then
		fs_tcall "$version" pycall.out - "$inner/py/$_pc_s" "$@"
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

# The script servers (lib/tserve.py): one python per torch that runs a
# test's python scripts one request at a time, so that torch is imported
# once per test, not once per call.  The torch under test's on fds 5 and
# 6; the other torch's (tests that check with both) on 8 and 9.  Started
# on first use, or by fs_py in the test's own shell, so that calls from
# subshells ($(...)) share it.  PT_NO_TSERVE=1: none, a process per call.
#
#   fs_tserve [VERSION]   the server of VERSION (default $version) runs,
#                         or 1 (then the caller runs a process)
#   fs_tcall VERSION REPORT DIR SCRIPT ARG...
#                         one request: SCRIPT ARG... in DIR ("-": any),
#                         stdout in $WORK/REPORT, stderr in REPORT.err;
#                         DIR and SCRIPT as that python sees them
#   fs_tserve_stop        ends them

# _ts_sendable ARG...: no argument holds a tab or a newline (the
# request's separators), so the call can go to a server
_ts_sendable() {
	for _ts_a; do
		case $_ts_a in *"$TAB"*|*"
"*) return 1 ;; esac
	done
	return 0
}

# _ts VERSION: its slot (_tk), fds (_ti, _to) and $WORK as it sees it (_tw)
_ts() {
	if [ "$1" = "$version" ]; then
		_tk=a _ti=5 _to=6
	else
		_tk=b _ti=8 _to=9
	fi
	if [ "$1" = 2 ]; then _tw=$inner; else _tw=$WORK; fi
}

ts_pid_a= ts_pid_b= ts_broken_a= ts_broken_b=
fs_tserve() {
	[ "${PT_NO_TSERVE:-0}" != 1 ] || return 1
	_ts "${1:-$version}"
	eval "[ -z \"\$ts_pid_$_tk\" ]" || return 0
	eval "[ -z \"\$ts_broken_$_tk\" ]" || return 1
	eval "ts_broken_$_tk=1"
	mkdir -p "$WORK/py" && cp "$fs/lib/tserve.py" "$WORK/py/" || return 1
	rm -f "$WORK/ts$_tk.req" "$WORK/ts$_tk.resp"
	# 0600: in a directory others may enter, nobody else talks to it
	mkfifo -m 600 "$WORK/ts$_tk.req" "$WORK/ts$_tk.resp" || return 1
	if [ "${1:-$version}" = 1.13 ]; then
		/usr/bin/python3 "$WORK/py/tserve.py" <"$WORK/ts$_tk.req" \
			>"$WORK/ts$_tk.resp" 2>>"$WORK/tserve.err" &
	else
		chroot "$root" python3 "$inner/py/tserve.py" \
			<"$WORK/ts$_tk.req" >"$WORK/ts$_tk.resp" \
			2>>"$WORK/tserve.err" &
	fi
	eval "ts_pid_$_tk=\$!"
	eval "exec $_ti>\"\$WORK/ts$_tk.req\" $_to<\"\$WORK/ts$_tk.resp\""
	while IFS= read -r _ts_r <&"$_to"; do
		if [ "$_ts_r" = ready ]; then
			eval "ts_broken_$_tk="
			return 0
		fi
	done
	_ts_stop "$_tk" "$_ti" "$_to"
	return 1
}

fs_tcall() {
	_ts "$1"
	_ts_line="$_tw/$2$TAB$_tw/$2.err$TAB$3$TAB$4"
	_ts_rep=$2
	shift 4
	for _ts_a; do
		_ts_line=$_ts_line$TAB$_ts_a
	done
	_ts_rc=
	printf '%s\n' "$_ts_line" >&"$_ti" && IFS= read -r _ts_rc <&"$_to"
	[ -n "$_ts_rc" ] && return "$_ts_rc"
	# the server died (a crash in the call): that call failed, the
	# next starts another
	echo "tserve.py died: $(tail -n 3 "$WORK/tserve.err")" \
		>>"$WORK/$_ts_rep.err"
	_ts_stop "$_tk" "$_ti" "$_to"
	eval "ts_broken_$_tk="
	return 1
}

_ts_stop() {	# SLOT FD-IN FD-OUT
	eval "exec $2>&- $3<&-"
	eval "_ts_p=\$ts_pid_$1"
	[ -n "$_ts_p" ] && kill "$_ts_p" 2>/dev/null && wait "$_ts_p" 2>/dev/null
	eval "ts_pid_$1="
}

fs_tserve_stop() {
	_ts_stop a 5 6
	_ts_stop b 8 9
}
