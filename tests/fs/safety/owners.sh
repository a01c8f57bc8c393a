#!/bin/sh
# owners.sh - issue 15 case 9: owner, group and modes in the mount come from
# the checkpoint file.  They used to be fixed (files 0644, directories
# 0755, owned by whoever mounted), so with -o allow_other (the fstab
# example in ptfs(1)) a 0600 checkpoint became readable by every user.
# A second real user (made here with useradd, removed at the end) owns the
# checkpoint; root mounts it with allow_other.  Checks stat of every kind
# of entry, that the owner reads and (writable mount) writes, that nobody
# and a user outside the group are refused exactly where the checkpoint's
# own modes refuse them, and that a 0644 checkpoint stays readable by all.
#
#   usage: sh tests/fs/safety/owners.sh [-k CASE] PTFS
# Cases: ro_600, ro_640, writable, everyone.
# Needs root and useradd; last line "N passed, N failed"; exit 0/1, 77.
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (useradd, mount as root)"; exit 77; }
command -v useradd >/dev/null && command -v setpriv >/dev/null ||
	{ echo "skip: no useradd or setpriv"; exit 77; }
set -- none "$@"
. "$fs/lib/surprise_lib.sh"
U=ptfsown$$
useradd -M -U -s /usr/sbin/nologin "$U" || { echo "useradd failed" >&2; exit 1; }
EXTRA_CLEANUP='userdel "$U" 2>/dev/null'
as() { _u=$1; shift; setpriv --reuid="$_u" --regid="$(id -g "$_u")" --clear-groups "$@"; }
chmod 755 "$WORK" "$WORK/mnt"
D=$WORK/d M=$WORK/mnt/o
mkdir -p "$D" "$M" && chmod 755 "$D" "$M"
CK=$D/model.pt
cp "$fs/../data/sample.pt" "$CK" || exit 1
chown "$U:$U" "$CK"

# stat_all MNT: "mode user group" of the root, a tensor, a directory (when
# there is one), .ptfs/, a record, a storage
stat_all() {
	_t=$(find "$1" -maxdepth 2 -type f ! -path '*/.ptfs*' | head -n 1)
	_d=$(find "$1" -mindepth 1 -maxdepth 2 -type d ! -path '*/.ptfs*' | head -n 1)
	for _p in "$1" "$_t" ${_d:+"$_d"} "$1/.ptfs" "$1/.ptfs/version" \
	    "$1/.ptfs/storages/$(ls "$1/.ptfs/storages" | head -n 1)"; do
		stat -c '%a %U %G %n' "$_p"
	done
}

# want_modes FILE DIR: every line of $WORK/st has the new user and group,
# files mode FILE (or its read-only part for records), dirs mode DIR
want_modes() {
	while read -r m u g p; do
		[ "$u $g" = "$U $U" ] || note "${p#"$M"} is owned by $u:$g, not $U:$U"
		if [ -d "$p" ]; then w=$2; else w=$1; fi
		case $p in */.ptfs) w=$(printf '%o' $((0$2 & 0555))) ;;
		*/.ptfs/version) w=$(printf '%o' $((0$1 & 0444))) ;; esac
		[ "$m" = "$w" ] || note "${p#"$M"} has mode $m, not $w"
	done <"$WORK/st"
}

T=
for mode in 600 640; do
	want "ro_$mode" || continue
	chmod "$mode" "$CK"
	start_daemon "$CK" "$M" "$WORK/o$mode.err" -o ro,allow_other || {
		fail "mount $mode" "$(head -n 1 "$WORK/o$mode.err")"; continue; }
	stat_all "$M" >"$WORK/st"
	T=$(sed -n 2p "$WORK/st" | cut -d' ' -f4-)
	want_modes "$(printf '%o' $((0$mode & 0444)))" \
		"$(printf '%o' $((0$mode & 0444 | (0$mode & 0444) >> 2)))"
	check "checkpoint $mode, -o ro: owner, group, modes" "$(head -n 2 "$WORK/st" | tail -n 1 | cut -d' ' -f1-3) for a tensor"
	as "$U" cat "$T" >"$WORK/own.out" 2>"$DET" && cmp -s "$WORK/own.out" "$T" &&
		: >"$DET" || note "the owner cannot read ${T#"$M"}: $(cat "$DET")"
	check "checkpoint $mode: the owner reads" "${T#"$M"/}, $(wc -c <"$WORK/own.out") bytes"
	for who in nobody; do
		r=$(as "$who" cat "$T" 2>&1 >/dev/null)
		case $r in *"Permission denied"*) ;; *) note "$who: '${r:-read it}'" ;; esac
		r=$(as "$who" ls "$M" 2>&1 >/dev/null)
		case $mode:$r in 600:*"Permission denied"*|640:*"Permission denied"*) ;;
		*) note "$who lists the root: '${r:-it worked}'" ;; esac
		check "checkpoint $mode: $who refused" "cat and ls: Permission denied"
	done
	# a member of the checkpoint's group (nobody with that group)
	r=$(setpriv --reuid=nobody --regid="$(id -g "$U")" --clear-groups \
		cat "$T" 2>&1 >/dev/null)
	case $mode:$r in 600:*"Permission denied"*|640:) ;;
	*) note "a group member: '${r:-read it}'" ;; esac
	check "checkpoint $mode: a group member" "$([ $mode = 640 ] && echo reads || echo refused)"
	stop_daemon "$M"
	daemon_clean "$WORK/o$mode.err" "checkpoint $mode: daemon log"
done

# writable: the owner writes, nobody may not; 0644 stays readable by all
chmod 600 "$CK"
if want writable; then
sum=$(sha256sum <"$CK")
start_daemon "$CK" "$M" "$WORK/w.err" -o allow_other || {
	fail "writable mount" "$(head -n 1 "$WORK/w.err")"; summary; exit 1; }
stat_all "$M" >"$WORK/st"
T=$(sed -n 2p "$WORK/st" | cut -d' ' -f4-)
want_modes 600 700
check "checkpoint 600, writable: modes" "files 600, directories 700"
r=$(as nobody sh -c "printf x | dd of='$T' conv=notrunc 2>&1")
case $r in *"Permission denied"*) ;; *) note "nobody writes: '$r'" ;; esac
check "checkpoint 600, writable: nobody cannot write" "Permission denied"
as "$U" sh -c "printf x | dd of='$T' conv=notrunc" 2>"$DET" && : >"$DET" ||
	note "the owner cannot write: $(tail -n 1 "$DET")"
[ "$(head -c 1 "$T")" = x ] || note "the write did not show"
check "checkpoint 600, writable: the owner writes" "one byte through dd"
stop_daemon "$M"
[ "$(sha256sum <"$CK")" != "$sum" ] || note "write-back did not change the file"
[ "$(stat -c '%U %a' "$CK")" = "$U 600" ] || note "after write-back: $(stat -c '%U %a' "$CK")"
check "written back" "owner and mode of the checkpoint kept"
daemon_clean "$WORK/w.err" "writable: daemon log"
fi
if want everyone; then
chmod 644 "$CK"
start_daemon "$CK" "$M" "$WORK/r.err" -o ro,allow_other || {
	fail "mount 644" "$(head -n 1 "$WORK/r.err")"; summary; exit 1; }
T=$(find "$M" -maxdepth 2 -type f ! -path '*/.ptfs*' | head -n 1)
as nobody cat "$T" >/dev/null 2>"$DET" && : >"$DET" || note "nobody cannot read: $(cat "$DET")"
check "checkpoint 644: everyone reads" "nobody read ${T#"$M"/}"
stop_daemon "$M"
fi
summary
[ "$nfail" -eq 0 ]
