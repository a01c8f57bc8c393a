# lib.sh - shell helpers shared by the mount tests (tests/fs/*.sh)
# (POSIX sh; sourced, not run).  The caller sets:
#   PTFS   the ptfs binary (absolute path)
#   WORK   a scratch directory (mount points go under $WORK/mnt)
# and gets: result counting (pass/fail/skip, summary), mounting in the
# foreground with the daemon's stderr captured (for sanitizer reports),
# unmounting that never leaves a mount behind, and the checks that need no
# torch (command line, bad input, read-only).

npass=0 nfail=0 nskip=0
TAB=$(printf '\t')
# per-daemon time limit: a hung ptfs is killed, so a test cannot hang
DAEMON_TIMEOUT=${PTFS_TEST_TIMEOUT:-600}
tmo=
command -v timeout >/dev/null 2>&1 && tmo=timeout

# pass LABEL MSG / fail LABEL MSG [DETAILS_FILE] / skip LABEL MSG
pass() {
	npass=$((npass + 1))
	printf 'ok   %s: %s\n' "$1" "$2"
}
fail() {
	nfail=$((nfail + 1))
	printf 'FAIL %s: %s\n' "$1" "$2"
	if [ -n "${3:-}" ] && [ -s "$3" ]; then
		head -n 20 "$3" | sed 's/^/      /'
	fi
}
skip() {
	nskip=$((nskip + 1))
	printf 'skip %s: %s\n' "$1" "$2"
}
# note LINE: one detail for the next check, into $DET (the script names
# that file); check LABEL OKMSG: pass when nothing was noted since the
# last check, else fail with the first note (the rest as details)
note() { printf '%s\n' "$*" >>"$DET"; }
check() {
	if [ -s "$DET" ]; then
		sed 1d "$DET" >"$DET.more"
		fail "$1" "$(head -n 1 "$DET")" "$DET.more"
	else
		pass "$1" "$2"
	fi
	: >"$DET"
}
# verdict LABEL OKMSG DETFILE: fail LABEL with DETFILE's first line (all
# of it as details) when it holds anything, else pass with OKMSG
verdict() {
	if [ -s "$3" ]; then
		fail "$1" "$(head -n 1 "$3")" "$3"
	else
		pass "$1" "$2"
	fi
}

summary() {
	# -k NAME (lib/cases.sh): how many cases it chose; none is a failure
	if [ -n "${PT_CASE:-}" ] && ! cases_report; then
		nfail=$((nfail + 1))
	fi
	if [ "$nskip" -gt 0 ]; then
		echo "$npass passed, $nfail failed, $nskip skipped"
	else
		echo "$npass passed, $nfail failed"
	fi
}

# for_others FILE: a copy of FILE in $WORK/others/ that any user may read
# and run, its path on stdout.  A clone may sit in a 0700 directory (a
# home, a mktemp -d), so a second user never runs a binary, script or
# fixture straight out of it; $WORK (made 0755 here) is the test's own.
for_others() {
	mkdir -p "$WORK/others" && chmod 755 "$WORK" "$WORK/others" &&
		cp "$1" "$WORK/others/" && chmod a+rX "$WORK/others/${1##*/}" ||
		return 1
	echo "$WORK/others/${1##*/}"
}

# is_mounted DIR: a mount at DIR is listed in /proc/mounts
is_mounted() {
	awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/mounts
}

# mount_opts DIR: the options field of DIR's mount
mount_opts() {
	awk -v m="$1" '$2 == m { print $4 }' /proc/mounts | tail -n 1
}

# run_limited SECONDS CMD...: CMD under timeout(1) when there is one
run_limited() {
	_rl_s=$1
	shift
	if [ -n "$tmo" ]; then
		"$tmo" -k 5 "$_rl_s" "$@"
	else
		"$@"
	fi
}

# run_cpu_limited SECONDS CMD...: CMD with at most SECONDS of CPU time
# (ulimit -t: a loop or a blow-up is caught whatever else the machine is
# doing), and ten times that of wall time for a hang
run_cpu_limited() {
	_rc_s=$1
	shift
	(ulimit -t "$_rc_s" && run_limited $((_rc_s * 10)) "$@")
}

# start_daemon CKPT MNT ERRFILE [OPTION...]: ptfs -f in the background,
# stderr to ERRFILE; sets DPID.  Returns 0 once MNT is mounted, 1 when the
# daemon exits (or 10 s pass) first (then it is stopped and reaped).
start_daemon() {
	_ck=$1 _mnt=$2 _err=$3
	shift 3
	mkdir -p "$_mnt"
	# a simple command, so that $! is timeout's (or ptfs's) own pid
	if [ -n "$tmo" ]; then
		"$tmo" -k 5 "$DAEMON_TIMEOUT" "$PTFS" -f "$@" "$_ck" "$_mnt" \
			>/dev/null 2>"$_err" &
	else
		"$PTFS" -f "$@" "$_ck" "$_mnt" >/dev/null 2>"$_err" &
	fi
	DPID=$!
	echo "$DPID $_mnt" >>"$WORK/daemons"
	_i=0
	# as long as the daemon lives (a loaded machine and an ASan build
	# can take seconds); DAEMON_TIMEOUT ends a hung one
	while [ $_i -lt 6000 ]; do
		is_mounted "$_mnt" && return 0
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.02
		_i=$((_i + 1))
	done
	is_mounted "$_mnt" && return 0
	kill "$DPID" 2>/dev/null
	wait "$DPID" 2>/dev/null
	DPID=
	return 1
}

# unmount MNT: fusermount3 -u, retried while busy, then lazily.  0 when
# MNT is no longer mounted.
# probe_fuse SAMPLE MNT ERRFILE: mount SAMPLE at MNT, or exit: 77 (skip)
# when FUSE itself is unusable here, 1 when ptfs fails on the sample.
probe_fuse() {
	start_daemon "$@" && return 0
	_why=$(head -n 1 "$3")
	case $_why in
	"fuse: "*|fusermount*|*/dev/fuse*) ;;
	*)
		echo "ptfs cannot mount $1: ${_why:-no message (crashed?)}" >&2
		exit 1 ;;
	esac
	echo "cannot mount with FUSE here ($_why): skipping"
	exit 77
}

unmount() {
	_i=0
	while is_mounted "$1" && [ $_i -lt 50 ]; do
		fusermount3 -u "$1" 2>/dev/null && break
		sleep 0.1
		_i=$((_i + 1))
	done
	if is_mounted "$1"; then
		fusermount3 -uz "$1" 2>/dev/null
	fi
	! is_mounted "$1"
}

# stop_daemon MNT: unmount, then reap $DPID; sets DRC to its exit status
# (124/137: it was killed for taking too long).  0 when all went well.
stop_daemon() {
	DRC=
	unmount "$1" || return 1
	[ -n "${DPID:-}" ] || return 0
	_i=0
	# its write-back and exit take what they take; DAEMON_TIMEOUT
	# (timeout(1)) ends a hung one, so this only bounds the wait
	while kill -0 "$DPID" 2>/dev/null && [ $_i -lt 2400 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
	kill "$DPID" 2>/dev/null
	wait "$DPID"
	DRC=$?
	DPID=
	return 0
}

# ptfs_pid: the ptfs process of the last start_daemon ($DPID, or the
# child of timeout(1) that is ptfs, found in /proc: no procps needed)
ptfs_pid() {
	if [ -z "$tmo" ]; then
		echo "$DPID"
		return
	fi
	cat /proc/[0-9]*/stat 2>/dev/null |
		awk -v p="$DPID" '$4 == p && $2 == "(ptfs)" { print $1; exit }'
}

# kill9 MNT: kill -9 that process, reap it, and lazily unmount the dead
# MNT.  1 when there was no such process or MNT stays mounted.
kill9() {
	_p=$(ptfs_pid)
	[ -n "$_p" ] || return 1
	kill -9 "$_p"
	wait "$DPID" 2>/dev/null
	DPID=
	fusermount3 -u -z "$1" 2>/dev/null
	_i=0
	while is_mounted "$1" && [ $_i -lt 50 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	! is_mounted "$1"
}

# daemon_problems ERRFILE OUTFILE: sanitizer reports or anything else the
# daemon printed (a good mount prints nothing); 0 when there are none
daemon_problems() {
	[ -s "$1" ] || return 0
	# edits that are refused log their one-line reason: expected there
	if [ -n "${DAEMON_LOGS_OK:-}" ] &&
	    ! grep -qv '^ptfs: ' "$1"; then
		return 0
	fi
	if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error\|SUMMARY: .*Sanitizer' "$1"; then
		echo "sanitizer report from ptfs:" >>"$2"
		grep -m 5 'ERROR: \|runtime error\|SUMMARY: \|#[0-9] ' "$1" |
			head -n 12 >>"$2"
	else
		echo "ptfs printed on stderr:" >>"$2"
		head -n 5 "$1" >>"$2"
	fi
	return 1
}

# cleanup_mounts: unmount everything still mounted under $WORK/mnt and
# stop the daemons we started (by pid).  For EXIT traps.
# release_work: unmount what is left, then remove WORK, unless a mount
# stayed (or PTFS_KEEP_WORK is set): the scripts' EXIT trap ends with it
release_work() {
	cleanup_mounts
	if no_mounts_left; then
		[ -n "${PTFS_KEEP_WORK:-}" ] || rm -rf "$WORK"
		# torch_select_writer's scratch directory, when it is another
		[ -n "${PTFS_KEEP_WORK:-}" ] || [ -z "${gwork:-}" ] ||
			[ "$gwork" = "$WORK" ] || rm -rf "$gwork"
	else
		echo "mounts left under $WORK; not removing it" >&2
	fi
}

cleanup_mounts() {
	[ -n "${WORK:-}" ] && [ -d "$WORK" ] || return 0
	awk -v w="$WORK/mnt/" 'index($2, w) == 1 { print $2 }' /proc/mounts |
		while read -r _m; do
			fusermount3 -u "$_m" 2>/dev/null ||
				fusermount3 -uz "$_m" 2>/dev/null
		done
	if [ -f "$WORK/daemons" ]; then
		while read -r _p _m; do
			kill "$_p" 2>/dev/null
		done <"$WORK/daemons"
	fi
}

# no_mounts_left: nothing under $WORK/mnt is mounted
no_mounts_left() {
	! awk -v w="$WORK/mnt/" 'index($2, w) == 1 { f = 1 } END { exit !f }' \
		/proc/mounts
}

# conclude: the last check of a mount test (no mount left below
# $WORK/mnt), then the summary line; true when nothing failed.
conclude() {
	if ! no_mounts_left; then
		fail "no mounts left" "$(awk -v w="$WORK/mnt/" \
			'index($2, w) == 1 { print $2 }' /proc/mounts | head -n 3)"
	fi
	summary
	[ "$nfail" -eq 0 ]
}

# faultinj_ready: build $here/faultinj.c (tests/fs/) into $INJ
# ($WORK/faultinj.so) and point the daemons started after it at the rule
# file $CTL ($WORK/faults, exported as PTFS_FAULTS; empty: no fault).  1,
# with the reason in $FAULTINJ_WHY, when it cannot be built.
faultinj_ready() {
	INJ=$WORK/faultinj.so CTL=$WORK/faults
	if ! ${CC:-cc} -shared -fPIC -O2 -o "$INJ" "$fs/lib/faultinj.c" \
	    -ldl -lpthread >"$WORK/cc.log" 2>&1; then
		FAULTINJ_WHY="cannot build the fault injector: $(head -n 1 "$WORK/cc.log")"
		return 1
	fi
	: >"$CTL"
	# the injector must come after ASan's runtime in an ASan build
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
	PTFS_FAULTS=$CTL
	export ASAN_OPTIONS PTFS_FAULTS
}

# killed_umount MNT RULE DET: `ptfs umount MNT` with the fault RULE in
# force (the daemon was started with LD_PRELOAD=$INJ); the rule must have
# killed it, else a line goes to DET.  The rule file is empty after.
killed_umount() {
	printf '%s\n' "$2" >"$CTL"
	: >"$CTL.log"
	run_limited 120 "$PTFS" umount "$1" >/dev/null 2>&1
	stop_daemon "$1"
	grep -q KILL "$CTL.log" 2>/dev/null ||
		echo "the kill was not hit ($2)" >>"$3"
	: >"$CTL"
}

# dir_sums DIR: every file of DIR with its sha256, names included
dir_sums() {
	(cd "$1" && ls -A | xargs sha256sum)
}

# stale_check DIR MNT DET: DIR, mounted at MNT with edits staged, was
# rewritten by another program (a training job's newer save).  `ptfs
# umount` must exit 1 with one line saying so, without advising
# -o output= (a folder or DCP directory refuses it), keep the mount and
# write nothing; then -o discard mounts it and drops the edits.  DIR's
# files must stay as the other program wrote them.  Problems go to DET.
stale_check() {
	_s1=$(dir_sums "$1")
	_msg=$(run_limited 60 "$PTFS" umount "$2" 2>&1)
	_r=$?
	case $_r:$_msg in
	1:"ptfs: write-back failed, $2 stays mounted and nothing is lost: $1: changed since it was mounted"*) ;;
	*) echo "ptfs umount: exit $_r: $_msg" >>"$3" ;;
	esac
	[ "$(printf '%s\n' "$_msg" | wc -l)" = 1 ] ||
		echo "more than one line: $_msg" >>"$3"
	case $_msg in *"-o output"*)
		echo "advises -o output=, which $1 refuses" >>"$3" ;;
	esac
	is_mounted "$2" || echo "not mounted after the refused write-back" >>"$3"
	stop_daemon "$2"
	[ "$(dir_sums "$1")" = "$_s1" ] ||
		echo "the other program's files changed: $(ls -A "$1" | tr '\n' ' ')" >>"$3"
	if start_daemon "$1" "$2" "$WORK/stale.err2" -o discard; then
		stop_daemon "$2"
	else
		echo "no mount with -o discard: $(head -n 1 "$WORK/stale.err2")" >>"$3"
	fi
	[ "$(dir_sums "$1")" = "$_s1" ] ||
		echo "the other program's files changed after -o discard" >>"$3"
}

# check_daemon_logs: every daemon's stderr in $WORK (*.err, *.errN; not
# python's NAME.X.err) holds one-line refusals only, no sanitizer report.
check_daemon_logs() {
	: >"$WORK/logs.det"
	for _e in "$WORK"/*.err "$WORK"/*.err[0-9]; do
		case ${_e##*/} in *.*.err*) continue ;; esac
		[ -f "$_e" ] || continue
		DAEMON_LOGS_OK=1 daemon_problems "$_e" "$WORK/logs.det" ||
			echo "(in ${_e##*/})" >>"$WORK/logs.det"
	done
	if [ -s "$WORK/logs.det" ]; then
		fail "daemon logs" "$(head -n 1 "$WORK/logs.det")" \
			"$WORK/logs.det"
	else
		pass "daemon logs" "one-line refusals only"
	fi
}

# expect_refusal LABEL CKPT WANT_LINE: ptfs CKPT MNT (daemon mode, as a
# user runs it) must exit non-zero with exactly one stderr line
# "ptfs: CKPT: ..." (equal to WANT_LINE unless that is empty), and leave
# the mount point unmounted and empty.  Counts a result; $2 may be a
# missing file or a directory.
expect_refusal() {
	_label=$1 _ck=$2 _want=$3
	_m=$WORK/mnt/refuse.$$
	_e=$WORK/refuse.err _d=$WORK/refuse.details
	mkdir -p "$_m"
	: >"$_d"
	run_limited 30 "$PTFS" "$_ck" "$_m" >/dev/null 2>"$_e"
	_rc=$?
	_line=$(head -n 1 "$_e")
	[ "$_rc" -ne 0 ] || echo "exit status 0" >>"$_d"
	[ "$(wc -l <"$_e")" -eq 1 ] ||
		echo "stderr has $(wc -l <"$_e") lines, not 1" >>"$_d"
	case $_line in
	"ptfs: $_ck: "?*) ;;
	*) echo "stderr does not start with 'ptfs: $_ck: '" >>"$_d" ;;
	esac
	if [ -n "$_want" ] && [ "$_line" != "$_want" ]; then
		echo "expected: $_want" >>"$_d"
	fi
	if is_mounted "$_m"; then
		echo "it is mounted anyway" >>"$_d"
		unmount "$_m"
	fi
	[ -z "$(ls -A "$_m" 2>/dev/null)" ] ||
		echo "the mount point is not empty" >>"$_d"
	if [ -s "$_d" ]; then
		echo "stderr: $(head -n 3 "$_e")" >>"$_d"
		fail "$_label" "exit $_rc" "$_d"
	else
		pass "$_label" "exit $_rc: $_line"
	fi
	rmdir "$_m" 2>/dev/null
}

# ptls_line PTLS FILE: ptls's one-line error for FILE as ptfs says it
# (nothing when PTLS is empty)
ptls_line() {
	[ -n "$1" ] || return 0
	"$1" "$2" 2>&1 >/dev/null | head -n 1 | sed 's/^ptls: /ptfs: /'
}

# bad_inputs PTLS SAMPLE: LFS pointer, HTML page, empty file, truncated
# copies, a missing file and a directory must all be refused cleanly.
bad_inputs() {
	_ptls=$1 _sample=$2 _b=$WORK/bad
	mkdir -p "$_b"
	printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 1513258\n' \
		4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393 \
		>"$_b/lfs_pointer.pt"
	printf '<!DOCTYPE html>\n<html lang="en"><head><title>model.pt</title></head>\n<body><p>Sign in to download</p></body></html>\n' \
		>"$_b/download_page.pt"
	: >"$_b/empty.pt"
	_sz=$(wc -c <"$_sample")
	head -c $((_sz / 2)) "$_sample" >"$_b/truncated_half.pt"
	head -c $((_sz - 1)) "$_sample" >"$_b/truncated_last_byte.pt"
	head -c 100 "$_sample" >"$_b/truncated_100.pt"
	for _f in "$_b"/*.pt; do
		expect_refusal "bad input ${_f##*/}" "$_f" \
			"$(ptls_line "$_ptls" "$_f")"
	done
	for _f in ${EXTRA_TRUNCATE:-}; do
		[ -f "$_f" ] || continue
		_sz=$(wc -c <"$_f")
		_t=$_b/truncated_${_f##*/}
		head -c $((_sz * 2 / 3)) "$_f" >"$_t"
		expect_refusal "bad input truncated ${_f##*/}" "$_t" \
			"$(ptls_line "$_ptls" "$_t")"
	done
	expect_refusal "bad input missing file" "$_b/no_such.pt" \
		"$(ptls_line "$_ptls" "$_b/no_such.pt")"
	mkdir -p "$_b/a_directory.pt"
	expect_refusal "bad input directory" "$_b/a_directory.pt" \
		"$(ptls_line "$_ptls" "$_b/a_directory.pt")"
}

# cli_checks SAMPLE: --help/-h and --version/-V exit 0; a missing mount
# point (or no argument at all) prints usage and exits non-zero.
cli_checks() {
	_s=$1 _o=$WORK/cli.out _e=$WORK/cli.err
	for _a in --help -h; do
		"$PTFS" "$_a" >"$_o" 2>"$_e"
		_rc=$?
		if [ $_rc -eq 0 ] && grep -q 'usage:.*CHECKPOINT MOUNTPOINT' "$_o"; then
			pass "cli $_a" "exit 0, usage on stdout"
		else
			fail "cli $_a" "exit $_rc; stdout: $(head -n 1 "$_o"); stderr: $(grep -m 1 "[A-Za-z]" "$_e")"
		fi
	done
	for _a in --version -V; do
		"$PTFS" "$_a" >"$_o" 2>"$_e"
		_rc=$?
		if [ $_rc -eq 0 ] && head -n 1 "$_o" | grep -q '^ptfs [0-9]'; then
			pass "cli $_a" "exit 0, $(head -n 1 "$_o")"
		else
			fail "cli $_a" "exit $_rc; stdout: $(head -n 1 "$_o"); stderr: $(grep -m 1 "[A-Za-z]" "$_e")"
		fi
	done
	"$PTFS" "$_s" >"$_o" 2>"$_e"
	_rc=$?
	if [ $_rc -ne 0 ] && grep -q 'usage:' "$_e" && [ ! -s "$_o" ]; then
		pass "cli no mount point" "exit $_rc: $(head -n 1 "$_e")"
	else
		fail "cli no mount point" "exit $_rc; stderr: $(head -n 1 "$_e")"
	fi
	"$PTFS" >"$_o" 2>"$_e"
	_rc=$?
	if [ $_rc -ne 0 ] && grep -q 'usage:' "$_e"; then
		pass "cli no arguments" "exit $_rc: $(head -n 1 "$_e")"
	else
		fail "cli no arguments" "exit $_rc; stderr: $(head -n 1 "$_e")"
	fi
}

# daemon_mode_checks SAMPLE: ptfs -o ro without -f daemonizes, mounts
# read-only (also with rw after it), is listed as fuse.ptfs, refuses
# writes, and goes away on fusermount3 -u.  (Writable mounts: edit.sh.)
daemon_mode_checks() {
	_s=$1 _m=$WORK/mnt/daemon _d=$WORK/daemon.details
	mkdir -p "$_m"
	: >"$_d"
	for _o in "-o ro" "-o ro,rw"; do
		_label="daemon mode${_o:+ $_o}"
		: >"$_d"
		# shellcheck disable=SC2086
		run_limited 30 "$PTFS" $_o "$_s" "$_m" >"$WORK/daemon.out" \
			2>"$WORK/daemon.err"
		_rc=$?
		if [ $_rc -ne 0 ] || ! is_mounted "$_m"; then
			fail "$_label" "exit $_rc, not mounted: $(head -n 1 "$WORK/daemon.err")"
			unmount "$_m"
			continue
		fi
		_opts=$(mount_opts "$_m")
		case ,$_opts, in
		*,ro,*) ;;
		*) echo "mount options '$_opts' lack ro" >>"$_d" ;;
		esac
		awk -v m="$_m" '$2 == m { print $3 }' /proc/mounts |
			grep -qx 'fuse.ptfs' ||
			echo "not listed as fuse.ptfs in /proc/mounts" >>"$_d"
		_f=$(find "$_m" -maxdepth 3 -type f ! -path '*/.ptfs/*' | head -n 1)
		if [ -z "$_f" ]; then
			echo "no regular file in the mount" >>"$_d"
		else
			_w=$( (: >>"$_f") 2>&1)
			case $_w in
			*"Read-only file system"*|*"Permission denied"*) ;;
			*) echo "appending to ${_f#"$_m"/}: '${_w:-it worked}'" >>"$_d" ;;
			esac
			_w=$( (: >"$_m/new_file") 2>&1)
			case $_w in
			*"Read-only file system"*|*"Permission denied"*) ;;
			*) echo "creating a file: '${_w:-it worked}'" >>"$_d" ;;
			esac
		fi
		unmount "$_m" || echo "fusermount3 -u failed" >>"$_d"
		[ -z "$(ls -A "$_m" 2>/dev/null)" ] ||
			echo "mount point not empty after unmount" >>"$_d"
		if [ -s "$_d" ]; then
			fail "$_label" "mounted $_opts" "$_d"
		else
			pass "$_label" "mounted $_opts; writes refused; unmounted"
		fi
	done
	rmdir "$_m" 2>/dev/null
}

# The torch worker: $WORK/py/$WORKER_PY [$WORKER_ARG], natively for torch
# 1.13 ($py) or in the chroot for torch 2 ($root, paths as $inner sees
# them), answering requests over the FIFOs $WORK/req and $WORK/resp (fds 3
# and 4).  start_worker waits for its "ready" line (torch 2's UCX may print
# lines before it); stop_worker ends it.  The caller makes the FIFOs.
start_worker() {
	if [ "$version" = 1.13 ]; then
		"$py" "$WORK/py/$WORKER_PY" ${WORKER_ARG:+"$WORKER_ARG"} \
			<"$WORK/req" >"$WORK/resp" 2>>"$WORK/worker.err" &
	else
		chroot "$root" python3 "$inner/py/$WORKER_PY" \
			${WORKER_ARG:+"$WORKER_ARG"} <"$WORK/req" \
			>"$WORK/resp" 2>>"$WORK/worker.err" &
	fi
	wpid=$!
	exec 3>"$WORK/req" 4<"$WORK/resp"
	_i=0
	while IFS= read -r ready <&4 && [ $_i -lt 20 ]; do
		case $ready in
		"ready$TAB"*) return 0 ;;
		esac
		_i=$((_i + 1))
	done
	echo "$WORKER_PY did not start under torch $version:" >&2
	grep -v 'UCX\|cpuinfo' "$WORK/worker.err" | tail -n 5 >&2
	return 1
}

stop_worker() {
	exec 3>&- 4<&-
	[ -n "$wpid" ] && kill "$wpid" 2>/dev/null && wait "$wpid" 2>/dev/null
	wpid=
}

# pyreq REPORT CMD ARG...: one request to the worker, whose one-line
# answer sets PYS (ok/FAIL) and PYM; 0 when ok.  REPORT and the paths in
# ARG are relative to the scratch directory.  A worker that died is
# reported and started again.
pyreq() {
	_pq_line=$2$TAB$1
	shift 2
	for _pq_a in "$@"; do
		_pq_line=$_pq_line$TAB$_pq_a
	done
	_pq_r=
	if printf '%s\n' "$_pq_line" >&3; then
		IFS= read -r _pq_r <&4 || _pq_r=
	fi
	if [ -z "$_pq_r" ]; then
		PYS=FAIL
		PYM="$WORKER_PY died: $(grep -v 'UCX\|cpuinfo' "$WORK/worker.err" | tail -n 1)"
		stop_worker
		start_worker || exit 1
		return 1
	fi
	PYS=${_pq_r%%"$TAB"*} PYM=${_pq_r#*"$TAB"}
	[ "$PYS" = ok ]
}
