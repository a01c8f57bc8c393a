#!/bin/sh
# stale.sh - issue 14 case 3: a checkpoint rewritten in place under a mount
# (cp new.pt model.pt, or torch.save to the same path: same inode, other
# bytes at the offsets the mount knows).  Reads of what the kernel has not
# cached must fail (ESTALE or EIO) rather than return the new file's bytes,
# for every read path: spliced contiguous tensors, gathered strided views,
# .ptfs/storages, .ptfs records, .npy and .txt views; the daemon logs it
# once with the path.  What was read before stays readable (the page cache
# holds what the mount showed), and a checkpoint replaced by rename (a new
# inode) is no change: the mount keeps showing the old file's bytes.
#
#   usage: sh tests/fs/safety/stale.sh [-k CASE] 1.13|2 PTFS
# Cases: cp, torch.save, rename.
# Last line "N passed, N failed"; exit 0/1, 77 without /dev/fuse.
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/surprise_lib.sh"

trun pair a.pt b.pt || { echo "generating failed" >&2; exit 1; }
[ "$(wc -c <"$WORK/a.pt")" -eq "$(wc -c <"$WORK/b.pt")" ] ||
	echo "note: a.pt and b.pt differ in size"
M=$WORK/mnt/s
# the paths read after the change; none of them read before it
paths="enc.weight dec.view .ptfs/storages/1 .ptfs/data.pkl head.npy dec.weight.txt"

# reads_fail LABEL: every path in $paths fails, and none reads $NEW's bytes
reads_fail() {
	for p in $paths; do
		if out=$(dd if="$M/$p" bs=1M 2>&1 >"$WORK/got"); then
			note "$p: read $(wc -c <"$WORK/got") bytes after the change"
		else
			case $out in
			*"Stale file handle"*|*"Input/output error"*) ;;
			*) note "$p: $(printf '%s' "$out" | head -n 1)" ;;
			esac
		fi
	done
	check "$1" "$(echo $paths | wc -w) paths fail with ESTALE"
}

# log_once ERRFILE LABEL: one line naming the checkpoint, nothing else
log_once() {
	n=$(grep -c 'changed under the mount' "$1")
	[ "$n" -eq 1 ] || note "$n log lines about the change, not 1"
	grep -q "^ptfs: $2: .*changed under the mount" "$1" ||
		note "no line 'ptfs: $2: ...changed under the mount'"
	[ "$(grep -vc 'changed under the mount' "$1")" -eq 0 ] ||
		note "other output: $(grep -v 'changed under the mount' "$1" | head -n 1)"
	check "logged once" "$(head -n 1 "$1" | cut -c1-100)"
}

for how in cp torch.save; do
	want "$how" || continue
	cp "$WORK/a.pt" "$WORK/ck.pt"
	start_daemon "$WORK/ck.pt" "$M" "$WORK/$how.err" -o ro || {
		fail "mount" "$(head -n 1 "$WORK/$how.err")"; continue; }
	cat "$M/enc.bias" >"$WORK/before" || note "reading before the change failed"
	ino=$(stat -c %i "$WORK/ck.pt")
	if [ "$how" = cp ]; then
		cp "$WORK/b.pt" "$WORK/ck.pt"
	else
		trun resave ck.pt b.pt || note "torch.save in place failed"
	fi
	[ "$(stat -c %i "$WORK/ck.pt")" = "$ino" ] || note "$how made a new inode"
	check "$how over the mounted file" "same inode $ino"
	reads_fail "$how: reads after the change"
	cmp -s "$M/enc.bias" "$WORK/before" ||
		note "a tensor read before the change now reads differently"
	check "$how: what was read stays" "enc.bias from the page cache"
	stop_daemon "$M"
	log_once "$WORK/$how.err" "$WORK/ck.pt"
done

# replaced by rename: the mount still shows the file it opened
if want rename; then
cp "$WORK/a.pt" "$WORK/ck.pt"
start_daemon "$WORK/ck.pt" "$M" "$WORK/mv.err" -o ro || {
	fail "mount" "$(head -n 1 "$WORK/mv.err")"; summary; exit 1; }
cp "$WORK/b.pt" "$WORK/new.pt" && mv "$WORK/new.pt" "$WORK/ck.pt"
for p in $paths; do
	dd if="$M/$p" of="$WORK/got.${p##*/}" bs=1M 2>"$DET" && : >"$DET" ||
		note "$p: $(tail -n 1 "$DET")"
done
check "replaced by rename: reads work" "$(echo $paths | wc -w) paths"
stop_daemon "$M"
M2=$WORK/mnt/orig
start_daemon "$WORK/a.pt" "$M2" "$WORK/o.err" -o ro || {
	fail "mount a.pt" "$(head -n 1 "$WORK/o.err")"; summary; exit 1; }
for p in $paths; do
	cmp -s "$M2/$p" "$WORK/got.${p##*/}" || note "$p: not the original's bytes"
done
check "replaced by rename: the original's bytes" "as a mount of a copy of it"
stop_daemon "$M2"
[ -s "$WORK/mv.err" ] && note "the daemon logged: $(head -n 1 "$WORK/mv.err")"
check "replaced by rename: nothing logged" "no change seen"
fi
summary
[ "$nfail" -eq 0 ]
