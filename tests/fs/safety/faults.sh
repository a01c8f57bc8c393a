#!/bin/sh
# Fault injection for editing and write-back (docs/editing.md, "Safety"):
# kill -9 of the daemon at several points, a full disk and a read-only
# directory during write-back, and an overlay staged for another version
# of the checkpoint.
#
#   usage: sh tests/fs/safety/faults.sh [-k CASE] VERSION PTFS PTLS SHARED_DIR
#
# VERSION "1.13" (Debian's torch, /usr/bin/python3) or "2" (torch 2.x in
# the chroot from SHARED_DIR/tools/torch2-root; the scratch directory is
# under its /tmp) writes the checkpoints and torch.loads every result
# that is not byte for byte a file it wrote or loaded already (faults.py,
# one process for the run).  PTLS is accepted for the same
# command line as run.sh and not used.
#
# a. kill -9 right after an fsync'd in-place write, after close() of a
#    whole-file replacement and a value edit, right after a rename and an
#    rm, in the middle of a 50 MB write (replacement and in place, paused
#    after 20 MiB), during the copy of a 50 MB storage on its first write
#    (as soon as "<i>.tmp" shows in the overlay), and during write-back of
#    a ~200 MB checkpoint: $FAULTS_DELAYS seconds after starting `ptfs
#    umount` (default "0.05 0.2 0.5" plus 0.9 x the reference write-back's
#    time), right after its rename (a watcher sees the checkpoint's inode
#    change), and $FAULTS_FU_DELAYS (default "0.1") after `fusermount3 -u`.
#    Then: fusermount3 -u -z; the checkpoint is byte for byte the
#    original, or (write-back kills only) the complete new archive of a
#    reference write-back (cmp; torch.loaded once, after the reference);
#    nothing beside it that docs/editing.md does not name, and the remount
#    removes what it names; a remount shows every edit that
#    close()/fsync()/rename() reported done; a clean `ptfs umount` writes
#    them all (torch.load, or byte for byte the reference's archive) and
#    leaves no temporary file and no staged changes.
# b. disk full during write-back (checkpoint on a small tmpfs, overlay
#    elsewhere with -o overlay=DIR): `ptfs umount` fails with one line
#    about space, original and overlay intact, still mounted with the
#    edits; after growing the tmpfs, `ptfs umount` succeeds.
# c. the checkpoint's directory read-only during write-back (the tmpfs
#    remounted ro): the same, then rw and retry.
# d. an overlay for another version of the checkpoint (edit, kill -9,
#    replace the file; or touch it; or put a copy of the original back):
#    the mount is refused with one line; -o discard drops them.
#
# b and c need root (tmpfs mounts); without root they are skipped.
# Prints one line per check, then "N passed, N failed[, N skipped]".
# Exit 0 all passed, 1 a failure, 77 no usable /dev/fuse (or no torch with
# PT_ALLOW_SKIP_TORCH=1).  Never leaves a mount behind (no loop devices
# are used).  PTFS_KEEP_WORK=1 keeps the scratch directory; -k NAME runs
# the parts whose names match (kill_edits, kill_writeback, disk_full,
# readonly_dir, other_version: a, wb, b, c, d); FAULTS_ALLOW_RO=1 goes on
# when a mount is read-only (to try the script on a ptfs without writes).
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS SHARED_DIR" 4 4 "$@"
PTFS=$2 shared=$4
sample=$fs/../data/sample.pt
fs_progs PTFS
fs_need_fuse
DELAYS=${FAULTS_DELAYS:-0.05 0.2 0.5}
# the parts (-k NAME, lib/cases.sh): a, wb, b, c, d below
parts=
for _p in a:kill_edits wb:kill_writeback b:disk_full c:readonly_dir \
    d:other_version; do
	want "${_p#*:}" && parts="$parts ${_p%%:*}"
done
part() { case "$parts " in *" $1 "*) return 0 ;; esac; return 1; }
FU_DELAYS=${FAULTS_FU_DELAYS:-0.1}

fs_torch "$shared" ptfs-faults

. "$fs/lib/lib.sh"

wpid=
cleanup() {
	trap '' INT TERM HUP
	stop_worker 2>/dev/null
	# our writers and umount commands, then our daemons (nothing of
	# theirs needs keeping): by pid, children of timeout first
	if [ -f "$WORK/bgpids" ]; then
		while read -r _p; do
			kill -9 "$_p" 2>/dev/null
		done <"$WORK/bgpids"
	fi
	if [ -f "$WORK/daemons" ]; then
		while read -r _p _m; do
			for _c in $(pgrep -P "$_p" 2>/dev/null); do
				kill -9 "$_c" 2>/dev/null
			done
			kill -9 "$_p" 2>/dev/null
		done <"$WORK/daemons"
	fi
	cleanup_mounts
	awk -v w="$WORK/mnt/" 'index($2, w) == 1 { print $2 }' /proc/mounts |
		while read -r _m; do fusermount3 -uz "$_m" 2>/dev/null; done
	# the small file systems, innermost first
	awk -v w="$WORK/fs/" 'index($2, w) == 1 { print $2 }' /proc/mounts |
		sort -r | while read -r _m; do
			umount "$_m" 2>/dev/null || umount -l "$_m" 2>/dev/null
		done
	if no_mounts_left && ! awk -v w="$WORK/fs/" \
		'index($2, w) == 1 { f = 1 } END { exit !f }' /proc/mounts; then
		[ -n "${PTFS_KEEP_WORK:-}" ] || rm -rf "$WORK"
	else
		echo "mounts left under $WORK; not removing it" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
trap '' PIPE
mkdir -p "$WORK/mnt" "$WORK/py" "$WORK/files" "$WORK/s" "$WORK/fs" \
	"$WORK/ovl" || exit 1
: >"$WORK/bgpids"
cp "$here/faults.py" "$WORK/py/" || exit 1
t_start=$(date +%s)

# ip PATH: PATH (under $WORK) as the torch in test sees it
ip() { printf '%s' "$inner${1#"$WORK"}"; }
# same FILE REF: FILE holds REF's bytes.  cmp, not a digest of each: the
# files are up to 200 MB, read many times, and cmp costs a sixth of
# sha256sum's CPU.  differ FILE REF: how they differ, for a failure's line
same() { cmp -s "$1" "$2"; }
differ() {
	printf '%s bytes, %s' "$(wc -c <"$1" 2>/dev/null || echo no)" \
		"$(cmp "$1" "$2" 2>&1 | head -n 1 | sed 's|^.*differ: |differ at |')"
}
first_line() { grep -m 1 . "$1" 2>/dev/null | cut -c1-200; }

# Is FUSE usable at all?  A tiny mount of a copy of the sample.
cp "$sample" "$WORK/files/probe.pt" || exit 1
probe_fuse "$WORK/files/probe.pt" "$WORK/mnt/probe" "$WORK/probe.err"
stop_daemon "$WORK/mnt/probe"

# ------------------------------------------------------------ torch worker
mkfifo "$WORK/req" "$WORK/resp" || exit 1
WORKER_PY=faults.py WORKER_ARG=
# ask FIELD...: one request; sets rstatus (ok/FAIL) and rtext
ask() {
	_req=$1
	shift
	for _a in "$@"; do _req="$_req$TAB$_a"; done
	reply=
	if printf '%s\n' "$_req" >&3; then
		while IFS= read -r reply <&4; do
			case $reply in
			"ok$TAB"*|"FAIL$TAB"*) break ;;
			esac
			reply=
		done
	fi
	if [ -z "$reply" ]; then
		reply="FAIL${TAB}faults.py died: $(grep -v 'UCX\|cpuinfo' "$WORK/worker.err" | tail -n 1)"
		stop_worker
		start_worker || exit 1
	fi
	rstatus=${reply%%"$TAB"*} rtext=${reply#*"$TAB"}
}
start_worker || exit 1
echo "$("$PTFS" --version 2>/dev/null | grep '^ptfs ' | head -n 1); ${ready#*"$TAB"}"

F=$WORK/files
ask gen "$(ip "$F")"
if [ "$rstatus" != ok ]; then
	echo "faults.py gen failed under torch $version: $rtext" >&2
	exit 1
fi
head -c 128 /dev/urandom >"$F/b.new"            # small.pt's b: int64[16]
head -c 50000000 /dev/urandom >"$F/big.new"     # big.pt's big: float32[12.5M]

# the writer of a large file, killed in the middle (host python, no torch):
# writes SRC over PATH in 1 MiB writes (replace: O_TRUNC first; inplace:
# no truncation), creates FLAG after PAUSE MiB, waits for GO, goes on
cat >"$WORK/py/writer.py" <<'EOF'
import os, sys, time
path, src, mode, pause, flag, go = sys.argv[1:7]
n = 0
try:
    fd = os.open(path, os.O_WRONLY | (os.O_TRUNC if mode == "replace" else 0))
    with open(src, "rb") as f:
        while True:
            buf = f.read(1 << 20)
            if not buf:
                break
            while buf:
                buf = buf[os.write(fd, buf):]
            n += 1
            if n == int(pause):
                open(flag, "w").close()
                t = time.time()
                while not os.path.exists(go) and time.time() - t < 20:
                    time.sleep(0.01)
    os.close(fd)
except OSError as e:
    print("writer: %s after %d MiB" % (e, n), file=sys.stderr)
    sys.exit(1)
print("writer: all written and closed")
EOF
# killwatch.py PID READY ino FILE | glob PATTERN: kill -9 PID as soon as
# FILE is another inode (the rename of write-back has happened), or a file
# matching PATTERN exists; says when
cat >"$WORK/py/killwatch.py" <<'EOF'
import glob, os, sys, time
pid, ready, mode, arg = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ino = os.stat(arg).st_ino if mode == "ino" else None
open(ready, "w").close()
t = time.time()
while time.time() - t < 30:
    try:
        if (os.stat(arg).st_ino != ino if mode == "ino" else glob.glob(arg)):
            os.kill(pid, 9)
            print("killed %.3f s after start, %s" % (time.time() - t,
                  "right after the rename" if mode == "ino" else
                  "once %s existed" % os.path.basename(glob.glob(arg)[0])))
            sys.exit(0)
    except (FileNotFoundError, IndexError):
        pass
    except ProcessLookupError:
        break
print("the daemon was gone first")
EOF
# chunks.py FILE OLD NEW: how many 1 MiB chunks of FILE equal OLD's, NEW's,
# neither
cat >"$WORK/py/chunks.py" <<'EOF'
import sys
a, b, c = (open(p, "rb") for p in sys.argv[1:4])
old = new = neither = 0
while True:
    x, y, z = a.read(1 << 20), b.read(1 << 20), c.read(1 << 20)
    if not x and not y:
        break
    if x == y:
        old += 1
    elif x == z:
        new += 1
    else:
        neither += 1
print("old=%d new=%d neither=%d" % (old, new, neither))
EOF

# --------------------------------------------------------------- scenarios
# A scenario works on $D/model.pt (a fresh copy), mounted at $MNT; its
# edits are listed in $OPS (faults.py's format, host paths); $ORIG is the
# original (the copy's source, which nothing changes), $OVL the overlay
# directory.
nd=0
fresh() {
	S=$1
	D=$WORK/s/$S
	rm -rf "$WORK/s"/*	# the last scenario's files (up to 200 MB)
	mkdir -p "$D"
	cp "$2" "$D/model.pt" || exit 1
	CK=$D/model.pt MNT=$WORK/mnt/$S OPS=$WORK/$S.ops
	OVL=$D/.model.pt.ptfs
	MOPTS=
	ORIG=$2
	: >"$OPS"
}

# mount_rw LABEL [OPTION...]: ptfs -f, writable; 0 when mounted rw
mount_rw() {
	_l=$1
	shift
	nd=$((nd + 1))
	ERR=$WORK/daemon$nd.err
	if ! start_daemon "$CK" "$MNT" "$ERR" "$@"; then
		fail "$_l" "expected a mount, seen: $(first_line "$ERR")"
		return 1
	fi
	case ${FAULTS_ALLOW_RO:-},$(mount_opts "$MNT"), in
	,*,ro,*)
		fail "$_l" "expected a writable mount, seen options $(mount_opts "$MNT"); stderr: $(first_line "$ERR")"
		kill_daemon
		return 1 ;;
	esac
	return 0
}

# daemon_pid: the ptfs process itself (start_daemon's $DPID is timeout's)
daemon_pid() {
	if [ -n "$tmo" ]; then
		pgrep -P "$DPID" 2>/dev/null | head -n 1
	else
		echo "$DPID"
	fi
}

# kill_daemon: kill -9 of ptfs, then fusermount3 -u -z; KILLED=yes when
# the daemon was still there to be killed
kill_daemon() {
	KILLED=no
	_p=$(daemon_pid)
	if [ -n "$_p" ] && kill -9 "$_p" 2>/dev/null; then
		KILLED=yes
	fi
	_i=0
	while [ -n "$_p" ] && kill -0 "$_p" 2>/dev/null && [ $_i -lt 100 ]; do
		sleep 0.02
		_i=$((_i + 1))
	done
	[ -n "${DPID:-}" ] && wait "$DPID" 2>/dev/null
	DPID=
	is_mounted "$MNT" && fusermount3 -u -z "$MNT" 2>/dev/null
	_i=0
	while is_mounted "$MNT" && [ $_i -lt 50 ]; do
		sleep 0.02
		_i=$((_i + 1))
	done
}

# wait_daemon: wait (120 s at most: the machine may be loaded) for the
# daemon to exit; DRC its status
wait_daemon() {
	DRC=
	[ -n "${DPID:-}" ] || return 0
	_i=0
	while kill -0 "$DPID" 2>/dev/null && [ $_i -lt 2400 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
	if kill -0 "$DPID" 2>/dev/null; then
		DRC=running
		return 1
	fi
	wait "$DPID"
	DRC=$?
	DPID=
}

# poke KEY OFFSET HEX: write the bytes into MNT/KEY in place, fsync'd
poke() {
	_o=$WORK/poke.err
	for _b in $(printf '%s' "$3" | sed 's/../& /g'); do
		printf "\\$(printf %03o "0x$_b")" 2>/dev/null
	done | dd of="$MNT/$1" bs=64 seek="$2" oflag=seek_bytes \
		conv=notrunc,fsync 2>"$_o" || {
		echo "dd into $1: $(grep -v records "$_o" | head -n 1)"
		return 1
	}
	printf 'poke\t%s\t%s\t%s\n' "$1" "$2" "$3" >>"$OPS"
}

# leftovers: entries beside the checkpoint other than it and its overlay
leftovers() {
	ls -A "$D" | grep -v -x -e model.pt -e .model.pt.ptfs | tr '\n' ' ' |
		sed 's/ $//'
}
# documented_leftover NAMES: does docs/editing.md name such a file (as
# model.pt's or as NAME's, without its random suffix)?
documented_leftover() {
	_doc=$fs/../../docs/editing.md
	for _n in $1; do
		_pat=$(printf '%s' "$_n" | sed 's/[0-9A-Za-z]\{6,\}$//')
		_pat=${_pat#.}
		grep -qiF -- "$_pat" "$_doc" 2>/dev/null && continue
		grep -qiF -- "NAME${_pat#model.pt}" "$_doc" 2>/dev/null ||
			return 1
	done
}

# verify_mount: every edit in $OPS shows through $MNT; prints what is off
verify_mount() {
	while IFS="$TAB" read -r _op _a _b _c; do
		case $_op in
		poke)
			_n=$((${#_c} / 2))
			_s=$(od -An -tx1 -j "$_b" -N "$_n" "$MNT/$_a" 2>&1 |
				tr -d ' \n')
			[ "$_s" = "$_c" ] ||
				echo "$_a at byte $_b: expected $_c, seen ${_s:-nothing}" ;;
		fill)
			same "$MNT/$_a" "$_b" ||
				echo "$_a: expected the replacement's bytes, seen $(differ "$MNT/$_a" "$_b")" ;;
		rename)
			[ -e "$MNT/$_b" ] || echo "$_b: expected it (renamed from $_a), missing"
			[ ! -e "$MNT/$_a" ] || echo "$_a: expected it gone (renamed to $_b), still there" ;;
		value)
			_s=$(cat "$MNT/$_a" 2>&1)
			[ "$_s" = "$_b" ] || echo "$_a: expected '$_b', seen '$_s'" ;;
		delete)
			[ ! -e "$MNT/$_a" ] || echo "$_a: expected it deleted, still there" ;;
		esac
	done <"$OPS"
}

# torch_check LABEL ORIG RESULT OPS: torch.load(RESULT) == ORIG + OPS
torch_check() {
	sed "s|$WORK|$inner|g" "$4" >"$4.py"
	ask expect "$(ip "$2")" "$(ip "$3")" "$(ip "$4.py")"
	if [ "$rstatus" = ok ]; then
		pass "$1" "$rtext"
	else
		fail "$1" "$rtext"
	fi
}

# after_kill LABEL: the checkpoint is the original, byte for byte (the
# file torch wrote: a torch.load of it would tell nothing more), and
# nothing undocumented lies beside it
after_kill() {
	if same "$CK" "$ORIG"; then
		pass "$1: original intact" "byte for byte the file torch wrote"
	else
		fail "$1: original intact" "expected the original's bytes, seen $(differ "$CK" "$ORIG")"
	fi
	check_leftovers "$1: nothing beside the checkpoint after the kill"
}

# check_leftovers LABEL: nothing but model.pt and its overlay in $D
check_leftovers() {
	_lo=$(leftovers)
	if [ -z "$_lo" ]; then
		pass "$1" "only model.pt$([ -e "$OVL" ] && echo " and its overlay")"
	elif documented_leftover "$_lo"; then
		pass "$1" "documented leftover: $_lo"
	else
		fail "$1" "expected only model.pt and .model.pt.ptfs, seen also: $_lo (not in docs/editing.md)"
	fi
}

# remount_check LABEL: mount again; every reported edit shows
# (0 when mounted, whatever it shows)
remount_check() {
	mount_rw "$1: remount shows the edits" $MOPTS || return 1
	verify_mount >"$WORK/verify.out"
	if [ -s "$WORK/verify.out" ]; then
		fail "$1: remount shows the edits" "$(head -n 3 "$WORK/verify.out" | tr '\n' ';')"
	else
		pass "$1: remount shows the edits" "$(wc -l <"$OPS") edit(s) visible"
	fi
	return 0
}

# commit_check LABEL: `ptfs umount` writes everything back: exit 0,
# unmounted, the daemon exits 0, torch.load == ORIG + OPS, nothing left
commit_check() {
	_d=$WORK/commit.details
	: >"$_d"
	_t0=$(date +%s.%N)
	run_limited 90 "$PTFS" umount "$MNT" >"$WORK/commit.out" \
		2>"$WORK/commit.err"
	_rc=$?
	awk -v a="$_t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f\n", b - a }' \
		>"$WORK/commit.secs"
	cat "$WORK/commit.err" >>"$WORK/daemon-cmds.err"	# sanitizer check
	[ $_rc -eq 0 ] ||
		echo "ptfs umount: expected exit 0, seen $_rc: $(first_line "$WORK/commit.err")" >>"$_d"
	if is_mounted "$MNT"; then
		echo "expected unmounted, still mounted" >>"$_d"
		kill_daemon
	fi
	wait_daemon
	case ${DRC:-0} in
	0) ;;
	running) echo "the daemon still runs 10 s after ptfs umount" >>"$_d"
		kill_daemon ;;
	*) echo "the daemon exited with status $DRC: $(grep . "$ERR" | tail -n 1 | cut -c1-200)" >>"$_d" ;;
	esac
	if [ -s "$_d" ]; then
		fail "$1: ptfs umount" "$(head -n 2 "$_d" | tr '\n' ';')"
	else
		pass "$1: ptfs umount" "exit 0, unmounted, daemon exit 0"
	fi
	# the same edits written again into the reference write-back's bytes:
	# torch loaded those (the reference's own check); else torch loads it
	if [ -n "${REF:-}" ] && same "$OPS" "$REF_OPS" && same "$CK" "$REF"; then
		rstatus=ok
		pass "$1: written back" "byte for byte the reference write-back's archive, which torch loaded with these edits"
	else
		torch_check "$1: written back" "$ORIG" "$CK" "$OPS"
	fi
	_lo=$(leftovers)
	_ov=
	if [ -d "$OVL" ] && [ -n "$(ls -A "$OVL" 2>/dev/null)" ]; then
		_ov="overlay $OVL still holds: $(ls -A "$OVL" | head -n 5 | tr '\n' ' ')"
	fi
	if [ -z "$_lo" ] && [ -z "$_ov" ]; then
		pass "$1: clean after write-back" "no temporary files, no staged changes left"
	else
		fail "$1: clean after write-back" "expected only model.pt${_lo:+, seen also: $_lo}${_ov:+; $_ov}"
	fi
}

# ------------------------------------------------------------- a. kill -9
if part a; then
echo "# a. kill -9 of the daemon"
# a1: right after an fsync'd in-place write
L="kill after fsync'd write"
fresh a1 "$F/small.pt"
if mount_rw "$L: mount"; then
	w=$(poke a 8 deadbeef && poke p 4 01020304) || fail "$L: write" "$w"
	kill_daemon
	after_kill "$L"
	remount_check "$L" && commit_check "$L"
fi

# a2: after close() of a whole-file replacement and of a value edit
L="kill after close() of a replacement"
fresh a2 "$F/small.pt"
if mount_rw "$L: mount"; then
	if cp "$F/b.new" "$MNT/b" 2>"$WORK/a2.err"; then
		printf 'fill\tb\t%s\n' "$F/b.new" >>"$OPS"
	else
		fail "$L: cp over b" "expected success, seen: $(first_line "$WORK/a2.err")"
	fi
	if (echo 8 >"$MNT/epoch") 2>"$WORK/a2.err"; then
		printf 'value\tepoch\t8\n' >>"$OPS"
	else
		fail "$L: echo 8 > epoch" "expected success, seen: $(first_line "$WORK/a2.err")"
	fi
	kill_daemon
	after_kill "$L"
	remount_check "$L" && commit_check "$L"
fi

# a3: right after a rename (and an rm)
L="kill after mv"
fresh a3 "$F/small.pt"
if mount_rw "$L: mount"; then
	if mv "$MNT/a" "$MNT/a2" 2>"$WORK/a3.err"; then
		printf 'rename\ta\ta2\n' >>"$OPS"
	else
		fail "$L: mv a a2" "expected success, seen: $(first_line "$WORK/a3.err")"
	fi
	if rm "$MNT/c" 2>"$WORK/a3.err"; then
		printf 'delete\tc\n' >>"$OPS"
	else
		fail "$L: rm c" "expected success, seen: $(first_line "$WORK/a3.err")"
	fi
	kill_daemon
	after_kill "$L"
	remount_check "$L" && commit_check "$L"
fi

# a4/a5: in the middle of writing a 50 MB tensor (after 20 MiB, paused),
# as a replacement (O_TRUNC: never closed, so the old values must stay)
# and in place (not fsync'd: each MiB old or new, nothing else)
bigwrite() {
	_mode=$1 _wmode=$1 _pause=20 _at="at 20 MiB"
	L="kill during a 50 MB write ($_mode)"
	if [ "$_mode" = copy ]; then
		L="kill during the copy of a 50 MB storage on its first write"
		_wmode=inplace _pause=1000 _at="in its first write"
	fi
	fresh "a_$_mode" "$F/big.pt"
	mount_rw "$L: mount" || return
	[ -f "$F/big.old" ] || cat "$MNT/big" >"$F/big.old"
	w=$(poke a 0 01020304) || fail "$L: write" "$w"
	rm -f "$WORK/flag" "$WORK/go" "$WORK/watch.ready"
	_watch=
	if [ "$_mode" = copy ]; then
		# the copy is built as "<i>.tmp" in the overlay (core/ovl/ovl.c)
		/usr/bin/python3 -S "$WORK/py/killwatch.py" "$(daemon_pid)" \
			"$WORK/watch.ready" glob "$OVL/*.tmp" >"$WORK/watch.out" \
			2>&1 &
		_watch=$!
		echo "$_watch" >>"$WORK/bgpids"
		_i=0
		# the watcher's python may start slowly on a loaded machine:
		# wait for it as long as it lives (60 s at the most)
		while [ ! -e "$WORK/watch.ready" ] && kill -0 "$_watch" 2>/dev/null &&
			[ $_i -lt 6000 ]; do
			sleep 0.01
			_i=$((_i + 1))
		done
	fi
	/usr/bin/python3 -S "$WORK/py/writer.py" "$MNT/big" "$F/big.new" \
		"$_wmode" "$_pause" "$WORK/flag" "$WORK/go" >"$WORK/writer.out" \
		2>"$WORK/writer.err" &
	_wp=$!
	echo "$_wp" >>"$WORK/bgpids"
	_i=0
	if [ -n "$_watch" ]; then
		while kill -0 "$_watch" 2>/dev/null && kill -0 "$_wp" 2>/dev/null &&
			[ $_i -lt 1000 ]; do
			sleep 0.01
			_i=$((_i + 1))
		done
		# the writer fails as soon as the watcher kills its daemon,
		# often before the watcher itself has exited: what the watcher
		# did is what it printed, not whether it is still running
		if kill -0 "$_watch" 2>/dev/null && kill -0 "$_wp" 2>/dev/null
		then
			kill "$_watch" 2>/dev/null
		fi
		wait "$_watch"
		case $(first_line "$WORK/watch.out") in
		killed*) _was=paused ;;
		*) _was="not killed in the copy: no $OVL/*.tmp seen" ;;
		esac
		_at="$_at ($(first_line "$WORK/watch.out"))"
	else
		while [ ! -e "$WORK/flag" ] && kill -0 "$_wp" 2>/dev/null &&
			[ $_i -lt 1000 ]; do
			sleep 0.01
			_i=$((_i + 1))
		done
		_was=paused
		[ -e "$WORK/flag" ] ||
			_was="not paused: $(first_line "$WORK/writer.err")"
	fi
	kill_daemon
	: >"$WORK/go"
	_i=0
	while kill -0 "$_wp" 2>/dev/null && [ $_i -lt 500 ]; do
		sleep 0.02
		_i=$((_i + 1))
	done
	if kill -0 "$_wp" 2>/dev/null; then
		kill -9 "$_wp" 2>/dev/null
		fail "$L: writer" "expected the writer to get an error, it hangs (killed)"
	else
		wait "$_wp"
		_wrc=$?
		if [ "$_wrc" -ne 0 ] && [ "$_was" = paused ]; then
			pass "$L: writer" "killed $_at; writer exit $_wrc: $(first_line "$WORK/writer.err")"
		else
			fail "$L: writer" "expected a failing writer killed $_at; $_was; writer exit $_wrc: $(first_line "$WORK/writer.out")"
		fi
	fi
	after_kill "$L"
	remount_check "$L" || return
	_c=$(/usr/bin/python3 -S "$WORK/py/chunks.py" "$MNT/big" "$F/big.old" \
		"$F/big.new" 2>&1)
	if [ "$_mode" = replace ]; then
		case $_c in
		"old=48 new=0 neither=0") pass "$L: big keeps its old values" "$_c (of 48 MiB chunks)" ;;
		*) fail "$L: big keeps its old values" "expected old=48 new=0 neither=0 (a replacement that was never closed), seen $_c" ;;
		esac
	else
		case $_c in
		*neither=0) pass "$L: big is old or new per MiB" "$_c" ;;
		*) fail "$L: big is old or new per MiB" "expected every 1 MiB chunk old or new, seen $_c" ;;
		esac
		# finish the write, so the result is known
		if dd if="$F/big.new" of="$MNT/big" bs=1M conv=notrunc,fsync \
			2>"$WORK/dd.err"; then
			printf 'fill\tbig\t%s\n' "$F/big.new" >>"$OPS"
		else
			fail "$L: rewriting big in place" "expected success, seen: $(grep -v records "$WORK/dd.err" | head -n 1)"
		fi
	fi
	commit_check "$L"
}
bigwrite replace
bigwrite inplace
bigwrite copy
fi

# a6: during write-back of ~200 MB.  First a reference write-back of the
# same edits, whose result ($REF, kept beside the fixtures, torch-checked
# by its commit_check) is the only other acceptable file; $REF_OPS its
# edits.
wb_edits() {
	w=$(poke w7 1000 cafebabe) || { fail "$1: write" "$w"; return 1; }
	if (echo 2 >"$MNT/epoch") 2>"$WORK/wb.err"; then
		printf 'value\tepoch\t2\n' >>"$OPS"
	else
		fail "$1: echo 2 > epoch" "expected success, seen: $(first_line "$WORK/wb.err")"
	fi
}
part wb && echo "# a. kill -9 during write-back"
L="write-back reference (200 MB)"
REF= REF_OPS=
part wb && fresh wbref "$F/wb.pt"
if part wb && mount_rw "$L: mount"; then
	wb_edits "$L"
	sync
	commit_check "$L"
	REF_T=$(cat "$WORK/commit.secs")
	if [ "$rstatus" = ok ] && ! same "$CK" "$ORIG"; then
		ln -f "$CK" "$F/wb.ref" && REF=$F/wb.ref
		cp "$OPS" "$F/wb.ref.ops" && REF_OPS=$F/wb.ref.ops
	fi
	echo "#   reference: ptfs umount took $REF_T s;$([ -n "$REF" ] || echo " no") new archive kept"
fi

# wb_kill LABEL DELAY CMD...: edit, start CMD MNT (ptfs umount or
# fusermount3 -u), kill -9 the daemon DELAY seconds later
wb_kill() {
	L=$1 _delay=$2
	shift 2
	fresh "wb$nd" "$F/wb.pt"
	sync	# the copy's dirty pages would make the timing vary
	mount_rw "$L: mount" || return
	wb_edits "$L" || { kill_daemon; return; }
	_watch=
	if [ "$_delay" = rename ]; then
		# kill -9 as soon as the checkpoint is another inode
		rm -f "$WORK/watch.ready"
		/usr/bin/python3 -S "$WORK/py/killwatch.py" "$(daemon_pid)" \
			"$WORK/watch.ready" ino "$CK" >"$WORK/watch.out" 2>&1 &
		_watch=$!
		echo "$_watch" >>"$WORK/bgpids"
		_i=0
		# the watcher's python may start slowly on a loaded machine:
		# wait for it as long as it lives (60 s at the most)
		while [ ! -e "$WORK/watch.ready" ] && kill -0 "$_watch" 2>/dev/null &&
			[ $_i -lt 6000 ]; do
			sleep 0.01
			_i=$((_i + 1))
		done
	fi
	if [ -n "$tmo" ]; then
		"$tmo" -k 5 60 "$@" "$MNT" >/dev/null 2>"$WORK/wbk.err" &
	else
		"$@" "$MNT" >/dev/null 2>"$WORK/wbk.err" &
	fi
	_up=$!
	echo "$_up" >>"$WORK/bgpids"
	if [ -n "$_watch" ]; then
		wait "$_watch"
		_w=$(first_line "$WORK/watch.out")
	else
		sleep "$_delay"
	fi
	kill_daemon
	[ -n "$_watch" ] && KILLED="$KILLED (watcher: ${_w:-nothing})"
	_i=0
	while kill -0 "$_up" 2>/dev/null && [ $_i -lt 500 ]; do
		sleep 0.02
		_i=$((_i + 1))
	done
	kill -9 "$_up" 2>/dev/null
	wait "$_up"
	_urc=$?
	cat "$WORK/wbk.err" >>"$WORK/daemon-cmds.err"
	_how="daemon killed: $KILLED; '${1##*/} ${2:-}' exit $_urc $(first_line "$WORK/wbk.err")"
	# byte for byte one of two files torch loaded: a torch.load of the
	# checkpoint would tell nothing more
	if same "$CK" "$ORIG"; then
		_state=original
	elif [ -n "$REF" ] && same "$CK" "$REF"; then
		_state="new archive"
	else
		_state=
	fi
	if [ -n "$_state" ]; then
		pass "$L: checkpoint original or new" "the $_state, byte for byte; $_how"
	else
		fail "$L: checkpoint original or new" "expected the original's bytes or the reference write-back's, seen $(differ "$CK" "$ORIG")${REF:+; against the reference: $(differ "$CK" "$REF")}; $_how"
	fi
	check_leftovers "$L: nothing beside the checkpoint after the kill"
	_lo=$(leftovers)
	nd=$((nd + 1))
	ERR=$WORK/daemon$nd.err
	if ! start_daemon "$CK" "$MNT" "$ERR"; then
		fail "$L: remount shows the edits" "expected a mount (checkpoint: the $_state), seen: $(first_line "$ERR")"
		# the rename landed but the overlay was not retired: go on
		# without it, so the rest can still be checked
		[ "$_state" = "new archive" ] || return
		nd=$((nd + 1))
		ERR=$WORK/daemon$nd.err
		start_daemon "$CK" "$MNT" "$ERR" -o discard || return
	else
		verify_mount >"$WORK/verify.out"
		if [ -s "$WORK/verify.out" ]; then
			fail "$L: remount shows the edits" "checkpoint: the $_state; $(head -n 3 "$WORK/verify.out" | tr '\n' ';')"
		else
			pass "$L: remount shows the edits" "checkpoint: the $_state; $(wc -l <"$OPS") edits visible"
		fi
		if [ -n "$_lo" ]; then
			_lo2=$(leftovers)
			if [ -z "$_lo2" ]; then
				pass "$L: the remount removed $_lo" "only model.pt$([ -e "$OVL" ] && echo " and its overlay")"
			else
				fail "$L: the remount removed $_lo" "expected only model.pt and its overlay (docs/editing.md), seen also: $_lo2"
			fi
		fi
	fi
	commit_check "$L"
}
part wb || { DELAYS=''; FU_DELAYS=''; }
# and once near the end of the reference write-back (around the rename)
if [ -n "${REF_T:-}" ] && [ -z "${FAULTS_DELAYS:-}" ]; then
	DELAYS="$DELAYS $(awk -v t="$REF_T" 'BEGIN { printf "%.2f", t * 0.9 }')"
fi
for t in $DELAYS; do
	wb_kill "kill ${t}s into ptfs umount (200 MB)" "$t" "$PTFS" umount
done
[ -n "${REF_T:-}" ] &&
	wb_kill "kill right after the rename of ptfs umount (200 MB)" rename \
		"$PTFS" umount
for t in $FU_DELAYS; do
	wb_kill "kill ${t}s after fusermount3 -u (200 MB)" "$t" fusermount3 -u
done

# ------------------------------------------------------ b, c: small disks
# smallfs NAME SIZE: a tmpfs at $WORK/fs/NAME; the scenario's $D is there
smallfs() {
	mkdir -p "$WORK/fs/$1"
	mount -t tmpfs -o "size=$2" "ptfs-faults-$1" "$WORK/fs/$1"
}
# ovl_sum DIR: the overlay's files and their sha256s, as one line
# ovl_sum DIR: the staged data files' sums, and the journal's bytes up to
# its current end (a failed write-back may append a record naming its
# temporary file, docs/design.md; the staged edits before it must stay)
ovl_sum() {
	(cd "$1" 2>/dev/null && find . -type f ! -name ptfs.journal | sort |
		xargs -r sha256sum | sha256sum | cut -c1-16)
	_jl=$(wc -c <"$1/ptfs.journal" 2>/dev/null)
	echo "${_jl:-0}"
}
# ovl_kept DIR SUM: DIR's data files as ovl_sum saw them, and its journal
# starting with the bytes it had then
ovl_kept() {
	_k1=$(printf '%s\n' "$2" | head -n 1)
	_k2=$(printf '%s\n' "$2" | tail -n 1)
	[ "$(ovl_sum "$1" | head -n 1)" = "$_k1" ] || return 1
	[ -z "$_oj" ] || [ "$(head -c "$_k2" "$1/ptfs.journal" | sha256sum)" = "$_oj" ]
}
# failed_commit LABEL WANT_REGEX: ptfs umount must fail with one line
# matching WANT_REGEX; original, overlay and mount as they were
failed_commit() {
	_osum=$(ovl_sum "$OVL")
	_oj=$(sha256sum <"$OVL/ptfs.journal" 2>/dev/null)
	run_limited 90 "$PTFS" umount "$MNT" >"$WORK/commit.out" \
		2>"$WORK/commit.err"
	_rc=$?
	cat "$WORK/commit.err" >>"$WORK/daemon-cmds.err"
	_line=$(first_line "$WORK/commit.err")
	_n=$(grep -c . "$WORK/commit.err")
	if [ $_rc -ne 0 ] && [ "$_n" -eq 1 ] && grep -qiE "$2" "$WORK/commit.err"; then
		pass "$1: ptfs umount fails" "exit $_rc: $_line"
	else
		fail "$1: ptfs umount fails" "expected non-zero exit and one line matching /$2/, seen exit $_rc, $_n line(s): ${_line:-nothing}"
	fi
	_lo=$(leftovers)
	if same "$CK" "$ORIG" && [ -z "$_lo" ]; then
		pass "$1: original intact" "byte for byte, nothing beside it"
	else
		fail "$1: original intact" "expected the original's bytes and nothing beside it, seen $(differ "$CK" "$ORIG")${_lo:+ and $_lo}; $(df -k "$D" | awk 'NR == 2 { print $4 " KiB free" }')"
	fi
	_nsum=$(ovl_sum "$OVL")
	if [ -n "$_osum" ] && ovl_kept "$OVL" "$_osum"; then
		pass "$1: overlay intact" "$(find "$OVL" -type f | wc -l) files unchanged"
	else
		fail "$1: overlay intact" "expected the overlay's files unchanged (sum $_osum), seen ${_nsum:-no files}"
	fi
	if is_mounted "$MNT"; then
		verify_mount >"$WORK/verify.out"
		if [ -s "$WORK/verify.out" ]; then
			fail "$1: still mounted with the edits" "$(head -n 3 "$WORK/verify.out" | tr '\n' ';')"
		else
			_r=$(cat "$MNT/.ptfs/commit" 2>&1 | head -n 1)
			pass "$1: still mounted with the edits" "$(wc -l <"$OPS") edit(s) visible; .ptfs/commit says: $_r"
		fi
		return 0
	fi
	fail "$1: still mounted with the edits" "expected the mount to stay, it is gone"
	return 1
}

if [ "$(id -u)" -ne 0 ]; then
	skip "disk full during write-back" "needs root (tmpfs)"
	skip "read-only directory during write-back" "needs root (tmpfs)"
else
	part b && echo "# b. disk full during write-back"
	L="disk full"
	sz=$(wc -c <"$F/big.pt")
	if ! part b; then
		:
	elif smallfs full "$(((sz + 4 * 1048576) / 1024))k"; then
		mkdir -p "$WORK/fs/full/d"
		fresh b "$F/big.pt"
		rm -rf "$D"
		D=$WORK/fs/full/d CK=$WORK/fs/full/d/model.pt
		cp "$F/big.pt" "$CK"
		# the overlay: on the disk, created by ptfs
		OVL=$WORK/ovl/full MOPTS="-o overlay=$OVL"
		if mount_rw "$L: mount" $MOPTS; then
			w=$(poke a 12 0badf00d) || fail "$L: write" "$w"
			if failed_commit "$L" 'no space|ENOSPC'; then
				mount -o remount,size=$((3 * sz / 1024))k "$WORK/fs/full"
				commit_check "$L, after freeing space"
			else
				kill_daemon
			fi
		fi
	else
		fail "$L: tmpfs" "cannot mount a tmpfs at $WORK/fs/full"
	fi

	part c && echo "# c. read-only directory during write-back"
	L="read-only directory"
	if ! part c; then
		:
	elif smallfs rofs 64m; then
		fresh c "$F/small.pt"
		rm -rf "$D"
		mkdir -p "$WORK/fs/rofs/d"
		D=$WORK/fs/rofs/d CK=$WORK/fs/rofs/d/model.pt
		cp "$F/small.pt" "$CK"
		OVL=$WORK/ovl/rofs MOPTS="-o overlay=$OVL"
		if mount_rw "$L: mount" $MOPTS; then
			w=$(poke b 16 11223344) || fail "$L: write" "$w"
			if mount -o remount,ro "$WORK/fs/rofs" 2>"$WORK/ro.err"; then
				if failed_commit "$L" 'read-only|EROFS'; then
					mount -o remount,rw "$WORK/fs/rofs"
					commit_check "$L, after remounting rw"
				else
					mount -o remount,rw "$WORK/fs/rofs"
					kill_daemon
				fi
			else
				fail "$L: remount ro" "expected the tmpfs to go read-only, seen: $(first_line "$WORK/ro.err") (does ptfs keep the checkpoint open for writing?)"
				kill_daemon
			fi
		fi
	else
		fail "$L: tmpfs" "cannot mount a tmpfs at $WORK/fs/rofs"
	fi
	for m in full rofs; do
		umount "$WORK/fs/$m" 2>/dev/null
	done
fi

# ------------------------------------------- d. overlay of another version
part d && echo "# d. overlay staged for another version"
L="overlay of another version"
part d && fresh d "$F/small.pt"
if part d && mount_rw "$L: mount"; then
	w=$(poke a 4 abcdef01) || fail "$L: write" "$w"
	(echo 7 >"$MNT/epoch") 2>/dev/null && printf 'value\tepoch\t7\n' >>"$OPS"
	kill_daemon
	cp -p "$CK" "$F/d.pristine"
	cp "$F/other.pt" "$CK"
	expect_refusal "$L: other file, refused" "$CK" ""
	_l=$(head -n 1 "$WORK/refuse.err")
	case $_l in
	*[Oo]verlay*|*[Cc]hanged*|*discard*)
		pass "$L: the reason is clear" "$_l" ;;
	*) fail "$L: the reason is clear" "expected a line naming the overlay, the change or -o discard, seen: ${_l:-nothing}" ;;
	esac
	# a copy of the original is another file (inode, ctime): the
	# overlay is bound to the one it was staged on (docs/design.md)
	cp -p "$F/d.pristine" "$CK"
	expect_refusal "$L: a restored copy, refused" "$CK" ""
	touch -d '2020-01-01 00:00:00' "$CK"
	expect_refusal "$L: same file touched, refused" "$CK" ""
	nd=$((nd + 1))
	ERR=$WORK/daemon$nd.err
	if start_daemon "$CK" "$MNT" "$ERR" -o discard; then
		_s=$(od -An -tx1 -j 4 -N 4 "$MNT/a" | tr -d ' \n')
		_e=$(cat "$MNT/epoch" 2>&1)
		if [ "$_e" = 12 ] && [ "$_s" != abcdef01 ]; then
			pass "$L: -o discard mounts without the edits" "epoch $_e, a[1] bytes $_s"
		else
			fail "$L: -o discard mounts without the edits" "expected epoch 12 and a's old bytes, seen epoch '$_e', a bytes $_s"
		fi
		: >"$OPS"
		ORIG=$F/d.pristine
		commit_check "$L: -o discard"
		if same "$CK" "$ORIG"; then
			pass "$L: -o discard then ptfs umount writes nothing" "byte for byte as before"
		else
			fail "$L: -o discard then ptfs umount writes nothing" "expected the bytes of before, seen $(differ "$CK" "$ORIG")"
		fi
	else
		fail "$L: -o discard mounts without the edits" "expected a mount, seen: $(first_line "$ERR")"
	fi
fi

# ---------------------------------------------------------------- the end
stop_worker
: >"$WORK/san.txt"
for e in "$WORK"/daemon*.err; do
	[ -f "$e" ] || continue
	if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error\|SUMMARY: .*Sanitizer' "$e"; then
		echo "${e##*/}: $(grep -m 1 'ERROR: \|runtime error' "$e")" >>"$WORK/san.txt"
	fi
done
if [ -s "$WORK/san.txt" ]; then
	fail "no sanitizer reports" "$(wc -l <"$WORK/san.txt") daemon(s) reported" "$WORK/san.txt"
else
	pass "no sanitizer reports" "$(ls "$WORK"/daemon[0-9]*.err 2>/dev/null | wc -l) daemons and every ptfs umount"
fi
if no_mounts_left; then
	pass "no mounts left" "after $(($(date +%s) - t_start)) s"
else
	fail "no mounts left" "$(awk -v w="$WORK/mnt/" 'index($2, w) == 1 { print $2 }' /proc/mounts | head -n 3 | tr '\n' ' ')"
fi
summary
[ "$nfail" -eq 0 ]
