#!/bin/sh
# mountpoint.sh - the mount's own life (issue 39, items 1, 2, 4 and 5):
# what ptfs says and how it exits when the mount itself fails or would
# surprise, and what it says at mount about the edits an overlay holds.
#
#   no_fuse       a second real user (useradd) for whom /dev/fuse cannot
#                 be opened (a 0600 root node bound over it in a private
#                 mount namespace, as in a container without --device):
#                 `ptfs` and `ptfs -f` exit 1 with one ptfs line naming
#                 /dev/fuse and saying what a container needs; nothing
#                 mounted, no overlay made (they used to exit 0)
#   stacked       A mounted at m, then `ptfs B m` (and with -o nonempty):
#                 exit 1, one line, one mount at m, still A's keys
#   nonempty      a directory with a file in it: refused (exit 1, one
#                 line naming -o nonempty); with -o nonempty mounted, and
#                 the file there again after the unmount
#   not_dir       a regular file as the mount point: exit 1, one line, the
#                 file unchanged and nothing mounted
#   other_mount   a tmpfs mounted at the mount point: refused, one line;
#                 with -o nonempty mounted over it
#   nothing_changed  `-o discard` with a refused mount point: the staged
#                 edits are still there and resume at the next mount
#   resumed       a tensor and a value (twice) edited, kill -9, mounted
#                 again: the line says what is resumed as `ptfs status`
#                 counts it (it used to count journal records)
#   discard       the same staged, `-o discard`: the line says what was
#                 discarded, counted the same; nothing staged: it says
#                 so; staged for a file since replaced: it says that
#   ro_second     a writable mount with staged edits, then a second,
#                 -o ro, mount of the file: it shows the staged edits and
#                 says so at mount, with the same counts
#
#   usage: sh tests/fs/mount/mountpoint.sh [-k CASE] PTFS
# Uses tests/data/sample.pt (no torch).  no_fuse needs root, useradd,
# setpriv and unshare (skipped without).  Prints one line per check and
# finally "N passed, N failed"; exit 0 when all passed, 1 otherwise, 77
# without /dev/fuse.  Never leaves a mount behind.  Every daemon's stderr
# may hold one-line ptfs messages only (a sanitizer's report fails).
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
set -- none "$@"
. "$fs/lib/surprise_lib.sh"
DAEMON_LOGS_OK=1
SAMPLE=$fs/../data/sample.pt
[ -f "$SAMPLE" ] || { echo "no $SAMPLE" >&2; exit 1; }
chmod 755 "$WORK" "$WORK/mnt"
U2=ptfsmnt$$ made_user= tmpmnt=
EXTRA_CLEANUP='[ -z "$tmpmnt" ] || umount -l "$tmpmnt" 2>/dev/null
	[ -z "$made_user" ] || userdel "$U2" 2>/dev/null'

has() { case $1 in *"$2"*) return 0 ;; esac; return 1; }
sum() { sha256sum <"$1" | cut -c1-16; }
# setup NAME: a fresh $D/model.pt ($CK), its overlay $OV, mount point $M
setup() {
	D=$WORK/$1 M=$WORK/mnt/$1 E=$WORK/$1.err
	mkdir -p "$D" "$M"
	CK=$D/model.pt OV=$D/.model.pt.ptfs
	cp "$SAMPLE" "$CK"
}
# one_line FILE WHAT: note unless FILE is one "ptfs: " line holding WHAT
one_line() {
	[ "$(wc -l <"$1")" = 1 ] ||
		note "$(wc -l <"$1") lines on stderr, not 1: $(tr '\n' '|' <"$1")"
	case $(head -n 1 "$1") in
	"ptfs: "*"$2"*) ;;
	*) note "not a ptfs line with '$2': $(head -n 1 "$1")" ;;
	esac
}
# mounts_at DIR: how many mounts /proc/mounts lists at DIR
mounts_at() { awk -v m="$1" '$2 == m { n++ } END { print n + 0 }' /proc/mounts; }
# refused LABEL WHAT CMD...: CMD (a ptfs mount) exits 1 with one ptfs
# line holding WHAT and mounts nothing new at $M
refused() {
	_l=$1 _w=$2
	shift 2
	_n=$(mounts_at "$M")
	run_limited 20 "$@" >/dev/null 2>"$E"
	_r=$?
	[ $_r = 1 ] || note "exit $_r, not 1"
	one_line "$E" "$_w"
	[ "$(mounts_at "$M")" = "$_n" ] ||
		note "mounted anyway ($(mounts_at "$M") mounts at it)"
	while [ "$(mounts_at "$M")" -gt "$_n" ]; do
		fusermount3 -u "$M" 2>/dev/null || fusermount3 -uz "$M"
	done
	check "$_l" "exit 1: $(head -n 1 "$E")"
}
# edit: a tensor changed and a value edited twice in the mount at $M;
# $WANT is what `ptfs status` counts
edit() {
	printf '\0\0\200\77' | dd of="$M/model/block.0.bias" bs=4 seek=1 \
		conv=notrunc 2>/dev/null
	echo 13 >"$M/epoch" && echo 14 >"$M/epoch"
	WANT=$("$PTFS" status "$M" | sed -n 's/^staged: //p')
	[ -n "$WANT" ] || note "ptfs status counts nothing"
}

# ---- item 1: /dev/fuse cannot be opened
if want no_fuse; then
if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null 2>&1 ||
    ! command -v setpriv >/dev/null 2>&1 || ! command -v unshare >/dev/null 2>&1; then
	skip "no_fuse" "needs root, useradd, setpriv and unshare"
elif ! useradd -M -N -s /usr/sbin/nologin "$U2" 2>"$DET"; then
	fail "no_fuse" "useradd $U2: $(head -n 1 "$DET")"
	: >"$DET"
else
	made_user=1
	setup nofuse
	chown -R "$U2" "$D" "$M"
	P2=$(for_others "$PTFS")
	before=$(sum "$CK")
	for fg in -f ""; do
		L="no_fuse: ptfs ${fg:+-f }as a user who cannot open /dev/fuse"
		: >"$E" && chmod 666 "$E"
		# a private mount namespace: a 0600 root /dev/fuse of its own
		mkdir -p "$WORK/fusedev"
		run_limited 30 unshare -m --propagation private sh -c '
			mount -t tmpfs -o mode=755 none "$1" &&
			mknod -m 600 "$1/fuse" c 10 229 &&
			mount --bind "$1/fuse" /dev/fuse || exit 9
			setpriv --reuid="$2" --regid="$(id -g "$2")" --clear-groups \
				-- "$3" $4 "$5" "$6" 2>"$7"
			echo "rc=$?"
			awk -v m="$6" "\$2 == m" /proc/self/mounts
		' sh "$WORK/fusedev" "$U2" "$P2" "$fg" "$CK" "$M" "$E" \
			>"$WORK/nofuse.out" 2>&1
		grep -qx 'rc=1' "$WORK/nofuse.out" ||
			note "$(head -n 1 "$WORK/nofuse.out" | sed 's/^rc=/exit /'), not 1"
		one_line "$E" "/dev/fuse"
		has "$(cat "$E")" "--device /dev/fuse" ||
			note "does not say what a container needs: $(head -n 1 "$E")"
		[ "$(wc -l <"$WORK/nofuse.out")" = 1 ] ||
			note "mounted: $(sed -n 2p "$WORK/nofuse.out")"
		[ ! -e "$OV" ] || note "an overlay was made"
		[ "$(sum "$CK")" = "$before" ] || note "the checkpoint changed"
		check "$L" "exit 1: $(head -n 1 "$E")"
	done
fi
fi

# ---- item 2: a second mount over a ptfs mount
if want stacked; then
setup stacked
cp "$SAMPLE" "$D/B.pt"
if start_daemon "$CK" "$M" "$E.a"; then
	keys=$(ls "$M" | tr '\n' ' ')
	refused "stacked: ptfs B.pt over A's mount" "already" "$PTFS" "$D/B.pt" "$M"
	refused "stacked: the same with -o nonempty" "already" \
		"$PTFS" -o nonempty "$D/B.pt" "$M"
	[ "$(mounts_at "$M")" = 1 ] || note "$(mounts_at "$M") mounts at it"
	[ "$(ls "$M" | tr '\n' ' ')" = "$keys" ] || note "other keys: $(ls "$M" | tr '\n' ' ')"
	[ "$(awk -v m="$M" '$2 == m { print $1 }' /proc/mounts)" = "$CK" ] ||
		note "the mount is not A's"
	"$PTFS" umount "$M" >"$WORK/stacked.out" 2>&1 ||
		note "ptfs umount of A: $(cat "$WORK/stacked.out")"
	is_mounted "$M" && note "still mounted after one ptfs umount"
	check "stacked: A is still served, one umount unmounts it" "$keys"
	stop_daemon "$M"
else
	fail "stacked" "no mount: $(head -n 1 "$E.a")"
fi
fi

# ---- item 2: a directory with something in it
if want nonempty; then
setup nonempty
echo mine >"$M/keep"
refused "nonempty: a directory with a file in it is refused" "-o nonempty" \
	"$PTFS" "$CK" "$M"
if start_daemon "$CK" "$M" "$E" -o nonempty; then
	[ -e "$M/model" ] && [ ! -e "$M/keep" ] || note "not the checkpoint: $(ls "$M" | tr '\n' ' ')"
	stop_daemon "$M"
	[ "$(cat "$M/keep" 2>/dev/null)" = mine ] || note "the file is gone"
	check "nonempty: -o nonempty mounts over it, the file comes back" "$(ls "$M")"
else
	fail "nonempty: -o nonempty mounts over it" "$(head -n 1 "$E")"
fi
fi

# ---- item 2: a regular file
if want not_dir; then
setup not_dir
rmdir "$M"
echo data >"$M"
refused "not_dir: a regular file as the mount point" "not a directory" \
	"$PTFS" "$CK" "$M"
refused "not_dir: the same with -f" "not a directory" "$PTFS" -f "$CK" "$M"
[ -f "$M" ] && [ "$(cat "$M")" = data ] || note "the file changed"
check "not_dir: the file is as it was" ""
rm -f "$M"
fi

# ---- item 2: a mount point of another file system
if want other_mount; then
setup other_mount
if mount -t tmpfs -o size=1m none "$M" 2>"$DET"; then
	tmpmnt=$M
	refused "other_mount: a tmpfs mount point is refused" "-o nonempty" \
		"$PTFS" "$CK" "$M"
	# in the background: $M is listed before ptfs mounts (start_daemon
	# would not wait); ptfs returns once it is mounted
	if run_limited 20 "$PTFS" -o nonempty "$CK" "$M" 2>"$E" &&
	    [ "$(mounts_at "$M")" = 2 ]; then
		[ -e "$M/model" ] || note "not the checkpoint: $(ls "$M" | tr '\n' ' ')"
		fusermount3 -u "$M"
		[ "$(mounts_at "$M")" = 1 ] || note "$(mounts_at "$M") mounts after one unmount"
		check "other_mount: -o nonempty mounts over it" ""
	else
		fail "other_mount: -o nonempty mounts over it" "$(head -n 1 "$E")"
	fi
	umount "$M" && tmpmnt=
else
	skip "other_mount" "cannot mount a tmpfs: $(head -n 1 "$DET")"
	: >"$DET"
fi
fi

# ---- item 2: a refused mount point changes nothing, -o discard included
if want nothing_changed; then
setup nothing
if start_daemon "$CK" "$M" "$E"; then
	edit
	kill9 "$M"
	rmdir "$M" && echo data >"$M"
	refused "nothing_changed: -o discard with a file as the mount point" \
		"not a directory" "$PTFS" -o discard "$CK" "$M"
	rm -f "$M"
	[ -f "$OV/ptfs.journal" ] || note "the overlay was dropped"
	if start_daemon "$CK" "$M" "$E"; then
		[ "$(cat "$M/epoch")" = 14 ] || note "epoch is $(cat "$M/epoch"), not 14"
		"$PTFS" umount --discard "$M" >/dev/null 2>&1
		stop_daemon "$M"
	else
		note "no mount after: $(head -n 1 "$E")"
	fi
	check "nothing_changed: the staged edits are still there" "$WANT"
else
	fail "nothing_changed" "no mount: $(head -n 1 "$E")"
fi
fi

# ---- item 4: what is resumed, counted as ptfs status counts
if want resumed; then
setup resumed
if start_daemon "$CK" "$M" "$E"; then
	edit
	kill9 "$M"
	if start_daemon "$CK" "$M" "$E"; then
		one_line "$E" "resumed"
		has "$(cat "$E")" ": $WANT " || note "not the counts of ptfs status ($WANT): $(cat "$E")"
		now=$("$PTFS" status "$M" | sed -n 's/^staged: //p')
		[ "$now" = "$WANT" ] || note "ptfs status now says $now"
		"$PTFS" umount --discard "$M" >/dev/null 2>&1
		stop_daemon "$M"
	else
		note "no mount: $(head -n 1 "$E")"
	fi
	check "resumed: the line counts what ptfs status counts" "$(cat "$E")"
else
	fail "resumed" "no mount: $(head -n 1 "$E")"
fi
fi

# ---- item 4: what -o discard drops
if want discard; then
setup discard
before=$(sum "$CK")
if start_daemon "$CK" "$M" "$E"; then
	edit
	kill9 "$M"
	if start_daemon "$CK" "$M" "$E" -o discard; then
		one_line "$E" "discarded: $WANT;"
		[ "$(cat "$M/epoch")" = 12 ] || note "epoch is $(cat "$M/epoch")"
		stop_daemon "$M"
	else
		note "no mount: $(head -n 1 "$E")"
	fi
	[ ! -e "$OV" ] || note "the overlay is still there"
	[ "$(sum "$CK")" = "$before" ] || note "the checkpoint changed"
	check "discard: the line says what was dropped, as ptfs status counts" "$(cat "$E")"
	if start_daemon "$CK" "$M" "$E" -o discard; then
		one_line "$E" "nothing was staged"
		stop_daemon "$M"
	else
		note "no mount: $(head -n 1 "$E")"
	fi
	check "discard: with nothing staged, it says so" "$(cat "$E")"
	if start_daemon "$CK" "$M" "$E"; then
		edit
		kill9 "$M"
		cp "$SAMPLE" "$CK.new" && mv "$CK.new" "$CK"
		if start_daemon "$CK" "$M" "$E" -o discard; then
			one_line "$E" "another version"
			stop_daemon "$M"
		else
			note "no mount: $(head -n 1 "$E")"
		fi
		[ ! -e "$OV" ] || note "the overlay is still there"
	else
		note "no mount: $(head -n 1 "$E")"
	fi
	check "discard: edits staged for a file since replaced" "$(cat "$E")"
else
	fail "discard" "no mount: $(head -n 1 "$E")"
fi
fi

# ---- item 5: a read-only mount beside a writable one with staged edits
if want ro_second; then
setup ro_second
M2=$WORK/mnt/ro_second2
before=$(sum "$CK")
if start_daemon "$CK" "$M" "$E"; then
	a=$DPID
	edit
	if start_daemon "$CK" "$M2" "$E.ro" -o ro; then
		one_line "$E.ro" "read-only"
		has "$(cat "$E.ro")" ": $WANT" || note "not the counts of ptfs status ($WANT): $(cat "$E.ro")"
		has "$(cat "$E.ro")" "ptfs umount writes them back" &&
			note "a read-only mount's umount writes nothing back"
		[ "$(cat "$M2/epoch")" = 14 ] || note "epoch is $(cat "$M2/epoch"), not the staged 14"
		stop_daemon "$M2"
	else
		note "no read-only mount: $(head -n 1 "$E.ro")"
	fi
	DPID=$a
	"$PTFS" umount --discard "$M" >/dev/null 2>&1
	stop_daemon "$M"
	[ "$(sum "$CK")" = "$before" ] || note "the checkpoint changed"
	check "ro_second: -o ro shows the staged edits and says so" "$(cat "$E.ro")"
else
	fail "ro_second" "no mount: $(head -n 1 "$E")"
fi
fi

# what the daemons printed: one-line ptfs messages only (sanitizers)
check_daemon_logs
conclude
