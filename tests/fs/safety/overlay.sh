#!/bin/sh
# The overlay and write-back through real mounts (issue 14, and issue 15's
# items 1, 11 and 13): one check per way they used to lose or clobber
# something.  A job replacing or rewriting the checkpoint under a mount
# (cases 1, 2), overlays planted, symlinked or pointed at a user's
# directory by a second real user in a group-shared directory (4-6), a
# leftover data file (7), a killed write-back to -o output= (8), journal
# damage (9), a long journal (10), a removed overlay (11), read-only use of
# a staged checkpoint (12), SIGTERM (15), two mounts of one overlay (16);
# relative -o output=/overlay=, a mount point holding the checkpoint, exit
# statuses.  Torch (the version under test) writes and loads the files.
#
#   usage: sh tests/fs/safety/overlay.sh [-k CASE] VERSION PTFS
#
# Makes the user ptfsovl<pid> (useradd) and removes it at the end.
# Prints one line per check and finally "N passed, N failed"; exit 0 when
# all passed, 1 otherwise, 77 without /dev/fuse or useradd.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS" 2 2 "$@"
PTFS=$2
fs_progs PTFS
fs_need_fuse
if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null 2>&1 ||
    ! command -v setpriv >/dev/null 2>&1; then
	echo "needs root, useradd and setpriv (a second real user): skipping"
	exit 77
fi

: "${PTFS_TEST_TIMEOUT:=120}"
fs_torch "" ptfs-ovl
DAEMON_LOGS_OK=1
. "$fs/lib/lib.sh"
chmod 755 "$WORK"

U2=ptfsovl$$ robind=
cleanup() {
	trap '' INT TERM HUP
	cleanup_mounts
	if [ -n "$robind" ] && is_mounted "$robind"; then
		umount "$robind" 2>/dev/null || umount -l "$robind" 2>/dev/null
	fi
	id "$U2" >/dev/null 2>&1 && userdel "$U2" 2>/dev/null
	release_work
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
useradd -M -N -s /usr/sbin/nologin "$U2" 2>/dev/null ||
	{ echo "useradd $U2 failed: skipping"; exit 77; }
G2=$(id -g "$U2")
as2() { setpriv --reuid="$U2" --regid="$G2" --clear-groups -- "$@"; }
# as2_fuse CMD...: CMD as the second user, in a private mount namespace
# whose /dev/fuse is open to everyone (a node of its own on a tmpfs that
# only that namespace sees); its mounts live and die in there
as2_fuse() {
	mkdir -p "$WORK/fusedev"
	unshare -m --propagation private sh -c '
		mount -t tmpfs -o mode=755 none "$1" &&
		mknod -m 666 "$1/fuse" c 10 229 &&
		mount --bind "$1/fuse" /dev/fuse || exit 1
		u=$2 g=$3
		shift 3
		exec setpriv --reuid="$u" --regid="$g" --clear-groups -- "$@"
	' sh "$WORK/fusedev" "$U2" "$G2" "$@"
}

mkdir -p "$WORK/py" "$WORK/mnt"
fs_py overlay_check.py
# tpy CMD PATH [ARG...]: overlay_check.py under the torch being tested,
# its output on stdout
tpy() {
	_c=$1 _p=$2
	shift 2
	fs_pyrun tpy.out "$_c" "$inner${_p#"$work"}" "$@"
	_tpy_r=$?
	cat "$WORK/tpy.out"
	cat "$WORK/tpy.out.err" >>"$WORK/py.err"
	return $_tpy_r
}
jt() { python3 "$fs/lib/journal_tool.py" "$@"; }
sum() { sha256sum <"$1" | cut -c1-16; }
has() { case $1 in *"$2"*) return 0 ;; esac; return 1; }
# the first 4 bytes of a file, in hex
head4() { od -An -tx1 -N4 "$1" | tr -d ' \n'; }
# setup NAME: a fresh $d with $d/model.pt (seed 0) and mount point $m
setup() {
	d=$WORK/$1 m=$WORK/mnt/$1 e=$WORK/$1.err
	mkdir -p "$d" "$m"
	tpy make "$d/model.pt" 0 "${2:-0}"
	ck=$d/model.pt
}
set_w1() { printf '\0\0\0\100' | dd of="$1" bs=4 seek=1 conv=notrunc 2>/dev/null; }

# ---- 1, 2: a job saves the checkpoint while an edit is staged
if want job_saves; then
for how in replace inplace; do
	L="case $([ $how = replace ] && echo 1 || echo 2) ($how)"
	setup c_$how
	start_daemon "$ck" "$m" "$e" || { fail "$L" "no mount: $(head -n 1 "$e")"; continue; }
	set_w1 "$m/w"		# w[1] = 2.0
	tpy "$how" "$ck" 5
	before=$(sum "$ck")
	out=$("$PTFS" umount "$m" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && has "$out" "changed since it was mounted"; then
		pass "$L: ptfs umount refuses" "exit $rc"
	else
		fail "$L: ptfs umount refuses" "exit $rc: $out"
	fi
	shown=$(tpy show "$ck")
	if [ "$(sum "$ck")" = "$before" ] && has "$shown" "5 6 5 3"; then
		pass "$L: the job's save is intact" "$shown"
	else
		fail "$L: the job's save is intact" "$shown"
	fi
	stop_daemon "$m"
	if [ -f "$d/.model.pt.ptfs/ptfs.journal" ] && [ "${DRC:-0}" != 0 ]; then
		pass "$L: the edit stays staged, the daemon exits non-zero" "exit $DRC"
	else
		fail "$L: the edit stays staged, the daemon exits non-zero" "exit ${DRC:-?}; $(ls -A "$d")"
	fi
done
fi

# ---- 1 with -o output=: the job's saves and the edits both kept
if want job_saves_output; then
setup c_output
if start_daemon "$ck" "$m" "$e" -o output="$d/edited.pt"; then
	set_w1 "$m/w"
	tpy replace "$ck" 5
	out=$("$PTFS" umount "$m" 2>&1)
	rc=$?
	stop_daemon "$m"
	a=$(tpy show "$d/edited.pt")
	b=$(tpy show "$ck")
	[ $rc = 0 ] && has "$a" "0 2 0 3" && has "$b" "5 6 5 3" &&
		pass "case 1 with -o output=: the edits and the job's save both kept" "$a / $b" ||
		fail "case 1 with -o output=: the edits and the job's save both kept" "exit $rc $out; $a / $b"
else
	fail "case 1 with -o output=" "$(head -n 1 "$e")"
fi

# a group-shared directory that the second user can write
S=$WORK/shared
mkdir -p "$S"
chgrp "$G2" "$S"
chmod 2770 "$S"
fi

# ---- 4: another user plants an overlay with storage 0's bytes
if want plant; then
d=$S m=$WORK/mnt/c4 e=$WORK/c4.err ck=$S/model.pt
mkdir -p "$m"
tpy make "$ck" 0
before=$(sum "$ck")
as2 mkdir -m 777 "$S/.model.pt.ptfs"
as2 sh -c "head -c 4096 /dev/zero | tr '\\0' A >'$S/.model.pt.ptfs/0'"
if start_daemon "$ck" "$m" "$e"; then
	w=$(head4 "$m/w")
	"$PTFS" umount "$m" >/dev/null 2>&1
	stop_daemon "$m"
	fail "case 4: a planted overlay is refused" "mounted; w starts $w"
elif has "$(cat "$e")" "nobody else can write"; then
	pass "case 4: a planted overlay is refused" "$(head -n 1 "$e")"
else
	fail "case 4: a planted overlay is refused" "$(head -n 1 "$e")"
fi
if start_daemon "$ck" "$m" "$e" -o ro; then
	w=$(head4 "$m/w")
	stop_daemon "$m"
	[ "$w" = 00000000 ] && pass "case 4: -o ro shows the file as on disk" "$(head -n 1 "$e")" ||
		fail "case 4: -o ro shows the file as on disk" "w starts $w"
else
	fail "case 4: -o ro shows the file as on disk" "$(head -n 1 "$e")"
fi
[ "$(sum "$ck")" = "$before" ] && pass "case 4: the checkpoint is unchanged" "" ||
	fail "case 4: the checkpoint is unchanged" "it changed"
rm -rf "$S/.model.pt.ptfs"
fi

# ---- 5: the overlay is a symlink to a directory of the victim's
if want overlay_symlink; then
V=$WORK/victim
mkdir -m 700 "$V"
for f in 2024 12 journal; do echo "$f" >"$V/$f"; done
as2 ln -s "$V" "$S/.model.pt.ptfs"
e=$WORK/c5.err
if start_daemon "$ck" "$m" "$e"; then
	mkdir "$m/x" 2>/dev/null
	"$PTFS" umount "$m" >/dev/null 2>&1
	stop_daemon "$m"
	fail "case 5: a symlinked overlay is refused" "mounted"
elif has "$(cat "$e")" "symbolic link"; then
	pass "case 5: a symlinked overlay is refused" "$(head -n 1 "$e")"
else
	fail "case 5: a symlinked overlay is refused" "$(head -n 1 "$e")"
fi
[ "$(ls "$V" | tr '\n' ' ')" = "12 2024 journal " ] &&
	pass "case 5: the victim's files are untouched" "" ||
	fail "case 5: the victim's files are untouched" "$(ls -A "$V" | tr '\n' ' ')"
rm -f "$S/.model.pt.ptfs"
fi

# ---- 6: -o overlay= pointing at a directory with the user's files
if want overlay_dir; then
R=$WORK/runs
mkdir -p "$R"
for f in 2024 12 journal 7.tmp; do echo "$f" >"$R/$f"; done
e=$WORK/c6.err
if start_daemon "$ck" "$m" "$e" -o overlay="$R"; then
	set_w1 "$m/w"
	mkdir "$m/x"
	out=$("$PTFS" umount "$m" 2>&1)
	rc=$?
	stop_daemon "$m"
	[ $rc = 0 ] && [ "$(ls -A "$R" | tr '\n' ' ')" = "12 2024 7.tmp journal " ] &&
		pass "case 6: -o overlay=DIR keeps the user's files" "written back" ||
		fail "case 6: -o overlay=DIR keeps the user's files" "exit $rc $out; left: $(ls -A "$R" | tr '\n' ' ')"
else
	fail "case 6: -o overlay=DIR keeps the user's files" "$(head -n 1 "$e")"
fi
as2 mkdir "$S/runs2"
as2 sh -c "echo x >'$S/runs2/2024'"
if start_daemon "$ck" "$m" "$e" -o overlay="$S/runs2"; then
	mkdir "$m/y" 2>/dev/null
	"$PTFS" umount "$m" >/dev/null 2>&1
	stop_daemon "$m"
fi
[ -f "$S/runs2/2024" ] && [ ! -e "$S/runs2/ptfs.journal" ] &&
	pass "case 6: another user's directory is never used" "$(head -n 1 "$e")" ||
	fail "case 6: another user's directory is never used" "$(ls -A "$S/runs2" | tr '\n' ' ')"
fi

# ---- 7: a data file left without its journal is never data
if want orphan_data; then
setup c7
mkdir -m 700 "$d/.model.pt.ptfs"
head -c 4096 /dev/zero | tr '\0' B >"$d/.model.pt.ptfs/0"
cp "$d/.model.pt.ptfs/0" "$d/.model.pt.ptfs/0123456789abcdef.0"
before=$(sum "$ck")
if start_daemon "$ck" "$m" "$e"; then
	w=$(head4 "$m/w")
	"$PTFS" umount "$m" >/dev/null 2>&1
	stop_daemon "$m"
	[ "$w" = 00000000 ] && [ "$(sum "$ck")" = "$before" ] &&
		pass "case 7: leftover data files are not attached" "" ||
		fail "case 7: leftover data files are not attached" "w starts $w"
else
	fail "case 7: leftover data files are not attached" "$(head -n 1 "$e")"
fi
fi

# ---- 7b: the empty overlay directory a kill leaves between the journal's
# unlink and the rmdir (ptfs_inplace's crash loop found it under load):
# the next mount with nothing staged removes it; an -o overlay=DIR stays
if want empty_overlay; then
setup c7b
mkdir -m 700 "$d/.model.pt.ptfs" "$d/mine"
if start_daemon "$ck" "$m" "$e" && "$PTFS" umount "$m" >/dev/null 2>&1 &&
    stop_daemon "$m" && start_daemon "$ck" "$m" "$e" -o overlay="$d/mine" &&
    "$PTFS" umount "$m" >/dev/null 2>&1 && stop_daemon "$m"; then
	[ "$(ls -A "$d" | tr '\n' ' ')" = "mine model.pt " ] &&
		pass "case 7b: an empty overlay directory left by a kill goes" "-o overlay=DIR kept" ||
		fail "case 7b: an empty overlay directory left by a kill goes" "left: $(ls -A "$d" | tr '\n' ' ')"
else
	fail "case 7b: an empty overlay directory left by a kill goes" "$(head -n 1 "$e")"
fi
stop_daemon "$m"
fi

# ---- 8: write-back to -o output= killed before its rename
if want killed_output; then
setup c8 192
out8=$d/slim.pt
if start_daemon "$ck" "$m" "$e" -o output="$out8"; then
	set_w1 "$m/w"
	"$PTFS" umount "$m" >/dev/null 2>&1 &
	upid=$!
	seen=
	i=0
	while [ $i -lt 20000 ]; do
		set -- "$d"/.slim.pt.ptfs-new.*
		[ -e "$1" ] && { seen=$1; break; }
		kill -0 $upid 2>/dev/null || break
		i=$((i + 1))
	done
	kill9 "$m"
	wait $upid 2>/dev/null
	if [ -z "$seen" ]; then
		skip "case 8: killed write-back leaves no temporary" "the write-back finished before it could be killed"
	else
		start_daemon "$ck" "$m" "$e" -o output="$out8" && stop_daemon "$m"
		set -- "$d"/.slim.pt.ptfs-new.*
		[ ! -e "$1" ] && pass "case 8: killed write-back leaves no temporary" "removed at the next mount" ||
			fail "case 8: killed write-back leaves no temporary" "$(ls -A "$d" | tr '\n' ' ')"
	fi
else
	fail "case 8: killed write-back leaves no temporary" "$(head -n 1 "$e")"
fi
fi

# ---- 9: one flipped bit in a middle record
if want flipped_bit; then
setup c9
J=$d/.model.pt.ptfs/ptfs.journal
if start_daemon "$ck" "$m" "$e"; then
	mkdir "$m/x1" "$m/x2" "$m/x3"
	kill9 "$m"
	jt flip "$J" 2 2>/dev/null	# header, x1, x2 (flipped), x3
	jsum=$(sum "$J" 2>/dev/null)
	for ro in "" "-o ro"; do
		# shellcheck disable=SC2086
		if start_daemon "$ck" "$m" "$e" $ro; then
			stop_daemon "$m"
			fail "case 9: damage refuses the mount ${ro:-rw}" "mounted"
		elif has "$(cat "$e")" "damaged"; then
			pass "case 9: damage refuses the mount ${ro:-rw}" "$(head -n 1 "$e")"
		else
			fail "case 9: damage refuses the mount ${ro:-rw}" "$(head -n 1 "$e")"
		fi
	done
	[ -n "$jsum" ] && [ "$(sum "$J")" = "$jsum" ] &&
		pass "case 9: nothing truncated" "$(jt count "$J")" ||
		fail "case 9: nothing truncated" "the journal changed"
else
	fail "case 9: damage" "$(head -n 1 "$e")"
fi
fi

# ---- 10: a 400 MB journal costs no 400 MB of memory
if want long_journal; then
setup c10
J=$d/.model.pt.ptfs/ptfs.journal
if start_daemon "$ck" "$m" "$e"; then
	mkdir "$m/x1"
	kill9 "$m"
	jt append-temps "$J" 100000 4000
	if start_daemon "$ck" "$m" "$e"; then
		hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$(ptfs_pid)/status")
		hwm=${hwm:-999999}
		jmb=$(($(wc -c <"$J" 2>/dev/null || echo 0) >> 20))
		stop_daemon "$m"
		[ "$hwm" -lt 204800 ] && [ "$jmb" -ge 300 ] &&
			pass "case 10: journal read by streaming" "$jmb MB journal, peak RSS $((hwm >> 10)) MB" ||
			fail "case 10: journal read by streaming" "$jmb MB journal, peak RSS $hwm kB"
	else
		fail "case 10: journal read by streaming" "$(head -n 1 "$e")"
	fi
else
	fail "case 10: journal read by streaming" "$(head -n 1 "$e")"
fi
fi

# ---- 11: the overlay removed under the mount
if want removed_overlay; then
setup c11
if start_daemon "$ck" "$m" "$e"; then
	set_w1 "$m/w"
	rm -rf "$d/.model.pt.ptfs"
	if set_w1 "$m/w" || mkdir "$m/late" 2>/dev/null; then
		fail "case 11: edits into a removed overlay fail" "succeeded"
	else
		pass "case 11: edits into a removed overlay fail" "$(grep -m1 removed "$e")"
	fi
	kill9 "$m"
else
	fail "case 11: removed overlay" "$(head -n 1 "$e")"
fi
fi

# ---- 12: staged edits, then read-only use (bind mount, another user)
if want readonly_use; then
setup c12
if start_daemon "$ck" "$m" "$e"; then
	mkdir "$m/z"
	kill9 "$m"
	robind=$WORK/robind
	mkdir -p "$robind"
	mount --bind "$d" "$robind" && mount -o remount,bind,ro "$robind"
	if start_daemon "$robind/model.pt" "$m" "$e" -o ro; then
		[ -d "$m/z" ] && pass "case 12: read-only bind mount shows staged edits" "" ||
			fail "case 12: read-only bind mount shows staged edits" "no z"
		stop_daemon "$m"
	else
		fail "case 12: read-only bind mount shows staged edits" "$(head -n 1 "$e")"
	fi
	umount "$robind"
	robind=
	m2=$WORK/mnt/c12u
	mkdir -p "$m2"
	chown "$U2" "$m2"
	chmod 755 "$d"
	: >"$WORK/c12u.err" && chmod 666 "$WORK/c12u.err"
	# /dev/fuse is often 0600 (containers): give the second user one of
	# its own in a private mount namespace, so the system's is untouched
	as2_fuse sh -c '"$1" -o ro "$2" "$3" 2>"$4"; echo "rc=$?"
		ls "$3"; fusermount3 -u "$3"' sh "$(for_others "$PTFS")" "$ck" "$m2" \
		"$WORK/c12u.err" >"$WORK/c12u.out" 2>&1
	if grep -qx 'rc=0' "$WORK/c12u.out" && grep -qx 'w' "$WORK/c12u.out"; then
		pass "case 12: another user mounts it read-only" "$(head -n 1 "$WORK/c12u.err")"
	else
		fail "case 12: another user mounts it read-only" "$(tr '\n' ' ' <"$WORK/c12u.out") $(head -n 1 "$WORK/c12u.err")"
	fi
else
	fail "case 12: read-only use" "$(head -n 1 "$e")"
fi
fi

# ---- 15: SIGTERM to ptfs -f with a clean write-back
if want sigterm; then
setup c15
if start_daemon "$ck" "$m" "$e"; then
	set_w1 "$m/w"
	kill -TERM "$(ptfs_pid)"
	wait "$DPID"
	rc=$?
	DPID=
	unmount "$m"
	shown=$(tpy show "$ck")
	[ $rc = 0 ] && has "$shown" "0 2 0 3" &&
		pass "case 15: SIGTERM writes back and exits 0" "$shown" ||
		fail "case 15: SIGTERM writes back and exits 0" "exit $rc; $shown"
else
	fail "case 15: SIGTERM" "$(head -n 1 "$e")"
fi
fi

# ---- 16: the checkpoint replaced; a second writable mount of the new file
if want replaced_second; then
setup c16
m2=$WORK/mnt/c16b
if start_daemon "$ck" "$m" "$e"; then
	a=$DPID
	set_w1 "$m/w"
	tpy replace "$ck" 5
	if start_daemon "$ck" "$m2" "$WORK/c16b.err"; then
		stop_daemon "$m2"
		fail "case 16: a second mount cannot share the overlay" "mounted"
	else
		has "$(cat "$WORK/c16b.err")" "in use by another ptfs" &&
			pass "case 16: a second mount cannot share the overlay" "$(head -n 1 "$WORK/c16b.err")" ||
			fail "case 16: a second mount cannot share the overlay" "$(head -n 1 "$WORK/c16b.err")"
	fi
	DPID=$a
	kill9 "$m"
else
	fail "case 16: two mounts" "$(head -n 1 "$e")"
fi
fi

# ---- issue 15, item 1: relative -o output= and -o overlay=
if want relative_paths; then
setup rel
name=slim$$.pt
(cd "$d" && "$PTFS" model.pt "$m" -o output="$name",overlay=stage) 2>"$e"
if is_mounted "$m"; then
	set_w1 "$m/w"
	[ -d "$d/stage" ] && ok1=1 || ok1=
	"$PTFS" umount "$m" 2>>"$e"
	if [ -n "$ok1" ] && [ -f "$d/$name" ] && [ ! -e "/$name" ]; then
		pass "relative -o output= and -o overlay= mean the caller's directory" ""
	else
		fail "relative -o output= and -o overlay= mean the caller's directory" "$(ls -A "$d" | tr '\n' ' ')"
		rm -f "/$name"
	fi
	unmount "$m"
else
	fail "relative -o output=" "$(head -n 1 "$e")"
fi
fi

# ---- issue 15, item 11: a mount point holding the checkpoint
if want mountpoint_holds; then
setup layout
run_limited 20 "$PTFS" "$ck" "$d" >/dev/null 2>"$e"
rc=$?
if is_mounted "$d"; then
	fusermount3 -uz "$d"
	fail "a mount point over the checkpoint is refused" "mounted"
elif [ $rc = 2 ] && [ "$(wc -l <"$e")" = 1 ] && has "$(cat "$e")" "the mount point holds"; then
	pass "a mount point over the checkpoint is refused" "$(cat "$e")"
else
	fail "a mount point over the checkpoint is refused" "exit $rc: $(head -n 1 "$e")"
fi
run_limited 20 "$PTFS" "$ck" "$m" -o output="$m/out.pt" >/dev/null 2>"$e"
rc=$?
is_mounted "$m" && fusermount3 -uz "$m"
[ $rc = 2 ] && has "$(cat "$e")" "the output file" &&
	pass "an output inside the mount point is refused" "$(cat "$e")" ||
	fail "an output inside the mount point is refused" "exit $rc: $(head -n 1 "$e")"
fi

# ---- issue 15, item 13: exit 2 for unreadable input and usage errors
if want exit_codes; then
setup exit_codes
echo "<html>not a checkpoint</html>" >"$WORK/bad.pt"
run_limited 20 "$PTFS" "$WORK/bad.pt" "$m" >/dev/null 2>"$e"
rc1=$?
run_limited 20 "$PTFS" "$WORK/bad.pt" >/dev/null 2>"$e"
rc2=$?
[ $rc1 = 2 ] && [ $rc2 = 2 ] && pass "ptfs exits 2 for unreadable input and usage" "" ||
	fail "ptfs exits 2 for unreadable input and usage" "exits $rc1, $rc2"
fi

# ---- issue 15, items 3 and 4: values that do not parse or change type
if want values; then
setup values
if start_daemon "$ck" "$m" "$e"; then
	r=$(python3 - "$m" <<'PY'
import errno, sys
m = sys.argv[1]
out = []
for key, text in (("epoch", "eight"), ("epoch", "8.5"), ("epoch", "8"),
                  ("lr", "2")):
    try:
        with open(m + "/" + key, "w") as f:
            f.write(text + "\n")
        out.append("ok")
    except OSError as e:
        out.append(errno.errorcode.get(e.errno, str(e.errno)))
print(" ".join(out), open(m + "/epoch").read().strip(),
      open(m + "/lr").read().strip())
PY
)
	[ "$r" = "EINVAL EINVAL ok ok 8 2.0" ] &&
		pass "a value that does not parse or changes type fails close() with EINVAL" "$r; $(grep -m1 'change of type' "$e")" ||
		fail "a value that does not parse or changes type fails close() with EINVAL" "$r"
	"$PTFS" umount "$m" >/dev/null 2>&1
	stop_daemon "$m"
	shown=$(tpy show "$ck")
	has "$shown" "0 1 0 8" && pass "the int stays an int after write-back" "$shown" ||
		fail "the int stays an int after write-back" "$shown"
else
	fail "values" "$(head -n 1 "$e")"
fi
fi

# ---- issue 15, item 6: ptfs umount on a dead daemon, and after a commit
if want dead_daemon; then
setup dead
if start_daemon "$ck" "$m" "$e"; then
	set_w1 "$m/w"
	kill -9 "$(ptfs_pid)"
	wait "$DPID" 2>/dev/null
	DPID=
	out=$("$PTFS" umount "$m" 2>&1)
	rc=$?
	fusermount3 -uz "$m" 2>/dev/null
	[ $rc = 1 ] && has "$out" "daemon is gone" && has "$out" "fusermount3 -u" &&
		pass "ptfs umount on a dead daemon says what to do" "$out" ||
		fail "ptfs umount on a dead daemon says what to do" "exit $rc: $out"
fi
if start_daemon "$ck" "$m" "$e"; then
	echo commit >"$m/.ptfs/commit"
	out=$("$PTFS" umount "$m" 2>&1)
	rc=$?
	is_mounted "$m" && um=still || um=
	stop_daemon "$m"
	[ $rc = 0 ] && [ -z "$um" ] &&
		pass "ptfs umount after .ptfs/commit unmounts" "" ||
		fail "ptfs umount after .ptfs/commit unmounts" "exit $rc ${um:+mounted }$out"
	shown=$(tpy show "$ck")
	has "$shown" "0 2 0 3" && pass "the resumed edit was written back" "$shown" ||
		fail "the resumed edit was written back" "$shown"
else
	fail "resumed edits" "$(head -n 1 "$e")"
fi
fi

summary
[ "$nfail" -eq 0 ]
