#!/bin/sh
# rsync.sh - issue 15 case 5: rsync -a between two mounts.  rsync skips a
# file whose size and mtime (whole seconds) match; every file used to show
# its checkpoint's mtime, so between checkpoints saved in the same second
# rsync copied nothing and said nothing.  Two checkpoints of the same keys
# and sizes, some tensors different (one element of a weight shared by a
# transposed view and a tied name, a whole bias), get the same mtime; rsync
# -a must transfer exactly the files whose bytes differ, and torch.load of
# the destination after ptfs umount must equal the source (views and ties
# kept).  rsync -a between mounts of identical checkpoints transfers
# nothing and the checkpoint stays byte for byte.
#
#   usage: sh tests/fs/mount/rsync.sh 1.13|2 PTFS
# Last line "N passed, N failed"; exit 0/1, 77 without /dev/fuse.
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/surprise_lib.sh"
command -v rsync >/dev/null || { echo "skip: no rsync"; exit 77; }

trun pair a.pt b.pt || { echo "generating failed" >&2; exit 1; }
# saved in the same second: the same mtime, whole seconds and all
t=$(stat -c %Y "$WORK/a.pt")
touch -d "@$t" "$WORK/a.pt" "$WORK/b.pt"
cp -p "$WORK/a.pt" "$WORK/a2.pt"
A=$WORK/mnt/a B=$WORK/mnt/b A2=$WORK/mnt/a2
start_daemon "$WORK/a.pt" "$A" "$WORK/a.err" -o ro &&
	start_daemon "$WORK/b.pt" "$B" "$WORK/b.err" || {
	fail "mount" "$(cat "$WORK/a.err" "$WORK/b.err" | head -n 1)"; summary; exit 1; }
BPID=$DPID

# the files whose bytes differ, as cmp sees them
(cd "$A" && find . -type f | sed 's|^\./||' | sort) >"$WORK/files"
while read -r f; do
	cmp -s "$A/$f" "$B/$f" || echo "$f"
done <"$WORK/files" >"$WORK/want"
[ -s "$WORK/want" ] || note "no file differs: the pair is wrong"
[ "$(wc -l <"$WORK/want")" -lt "$(wc -l <"$WORK/files")" ] ||
	note "every file differs: the pair is wrong"
check "the pair" "$(wc -l <"$WORK/want") of $(wc -l <"$WORK/files") files differ: $(tr '\n' ' ' <"$WORK/want")"

if rsync -a -i "$A/" "$B/" >"$WORK/rs.out" 2>"$DET"; then
	: >"$DET"
	sed -n 's/^>f[^ ]* //p' "$WORK/rs.out" | sort >"$WORK/got"
	cmp -s "$WORK/want" "$WORK/got" ||
		note "rsync transferred: $(tr '\n' ' ' <"$WORK/got"); differing: $(tr '\n' ' ' <"$WORK/want")"
	check "rsync -a transfers exactly the differing files" "$(wc -l <"$WORK/got") files"
else
	fail "rsync -a" "$(head -n 1 "$DET")"
	: >"$DET"
fi
while read -r f; do
	cmp -s "$A/$f" "$B/$f" || note "$f still differs"
done <"$WORK/files"
check "after rsync, every file equal" "$(wc -l <"$WORK/files") files"
# rsync writes each file as a temporary renamed over it: the overlay must
# keep the new bytes once (one copy per storage), no temporary's as well
"$PTFS" status "$B" >"$WORK/st" 2>&1
nf=$(sed -n 's/^overlay: .*, \([0-9]*\) data files* of .*/\1/p' "$WORK/st")
[ -n "$nf" ] && [ "$nf" -le "$(wc -l <"$WORK/want")" ] ||
	note "$(grep '^overlay' "$WORK/st" || head -n 1 "$WORK/st") for $(wc -l <"$WORK/want") files transferred"
check "the overlay holds no rsync temporary" "${nf:-?} data files for $(wc -l <"$WORK/want") files"
DPID=$BPID
if run_limited 60 "$PTFS" umount "$B" >"$DET" 2>&1; then
	: >"$DET"
	r=$(trun compare b.pt a.pt)
	[ "$r" = equal ] || note "torch.load of the destination: $r"
	check "torch.load of the destination equals the source" "tensors, views, ties"
else
	fail "ptfs umount" "$(head -n 1 "$DET")"
	: >"$DET"
fi
stop_daemon "$B"
daemon_clean "$WORK/b.err" "destination daemon log"

# identical checkpoints: a no-op
sum=$(sha256sum <"$WORK/a2.pt")
start_daemon "$WORK/a2.pt" "$A2" "$WORK/a2.err" || {
	fail "mount a2" "$(head -n 1 "$WORK/a2.err")"; summary; exit 1; }
if rsync -a -i "$A/" "$A2/" >"$WORK/rs2.out" 2>"$DET"; then
	: >"$DET"
	n=$(grep -c '^>f' "$WORK/rs2.out")
	[ "$n" -eq 0 ] || note "$n files transferred: $(grep '^>f' "$WORK/rs2.out" | head -n 3 | tr '\n' ' ')"
	check "rsync -a of identical checkpoints" "nothing transferred"
else
	fail "rsync -a of identical checkpoints" "$(head -n 1 "$DET")"
	: >"$DET"
fi
stop_daemon "$A2"
[ "$(sha256sum <"$WORK/a2.pt")" = "$sum" ] || note "a2.pt changed"
check "identical: the checkpoint is untouched" "sha256 as before"
stop_daemon "$A"
daemon_clean "$WORK/a.err" "source daemon log"
summary
[ "$nfail" -eq 0 ]
