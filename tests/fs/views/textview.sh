#!/bin/sh
# textview.sh - issue 15 case 12: text views (KEY.txt) used to be rendered
# whole into unlinked files in $TMPDIR, about three times the tensor's
# size each, kept until unmount: reading the text views of a large model
# filled the disk.  Now they are formatted on demand by offset and nothing
# is stored.  Checks, with the daemon's TMPDIR a private directory: no
# file and no descriptor of the daemon there after reading every text view
# whole; reads at random offsets of a fresh mount (nothing learnt yet)
# equal the same bytes of a whole read; the text gives torch's values back
# bit for bit (rows straddling the formatting chunks, a transposed view);
# once a view was measured, head and a read in the middle of a big one
# format only what they cover; an edit shows in the view at once.
# Issue 39 item 16: the measure no longer formats the view (37 s before
# head of a 412 MB tensor's view got a byte).
#
#   usage: sh tests/fs/views/textview.sh 1.13|2 PTFS [MB]
# Last line "N passed, N failed"; exit 0/1, 77 without /dev/fuse.
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
: "${PTFS_TEST_TIMEOUT:=600}"	# whole formatting passes under ASan
. "$fs/lib/surprise_lib.sh"
mb=${3:-32}

trun big big.pt "$mb" || { echo "generating failed" >&2; exit 1; }
mkdir -p "$WORK/tmp"
TMPDIR=$WORK/tmp
export TMPDIR
M=$WORK/mnt/t

# daemon_pid: the ptfs process (start_daemon's $DPID may be timeout's)
daemon_pid() {
	_c=$(ps -o pid= --ppid "$DPID" | tr -d ' ' | head -n 1)
	echo "${_c:-$DPID}"
}

# tmp_use: descriptors of the daemon into $TMPDIR, and their bytes
tmp_use() {
	_p=$(daemon_pid) _n=0 _b=0
	for _f in /proc/"$_p"/fd/*; do
		case $(readlink "$_f") in
		"$TMPDIR"/*) _n=$((_n + 1)); _b=$((_b + $(stat -L -c %s "$_f"))) ;;
		esac
	done
	echo "$_n $_b $(ls -A "$TMPDIR" | wc -l)"
}

# a fresh read-only mount (nothing is ever dropped there: renderings
# used to stay until unmount): reads at odd offsets before anything else
start_daemon "$WORK/big.pt" "$M" "$WORK/t.err" -o ro || {
	fail "mount" "$(head -n 1 "$WORK/t.err")"; summary; exit 1; }
for o in 7 40000 1234567 2000001; do
	dd if="$M/small.txt" bs=1 skip=$o count=333 of="$WORK/at.$o" 2>/dev/null ||
		note "dd at $o failed"
done
dd if="$M/t.txt" bs=1 skip=100001 count=5000 of="$WORK/tat" 2>/dev/null
cat "$M/small.txt" >"$WORK/small.txt" && cat "$M/t.txt" >"$WORK/t.txt" ||
	note "reading the views failed"
for o in 7 40000 1234567 2000001; do
	dd if="$WORK/small.txt" bs=1 skip=$o count=333 2>/dev/null |
		cmp -s - "$WORK/at.$o" || note "offset $o reads other bytes"
done
dd if="$WORK/t.txt" bs=1 skip=100001 count=5000 2>/dev/null |
	cmp -s - "$WORK/tat" || note "t.txt at 100001 reads other bytes"
[ "$(stat -c %s "$M/small.txt")" -eq "$(wc -c <"$WORK/small.txt")" ] ||
	note "stat size $(stat -c %s "$M/small.txt") != $(wc -c <"$WORK/small.txt") bytes read"
check "reads by offset" "5 offsets before a whole read, same bytes; size as read"
for k in small t; do
	r=$(trun textcheck big.pt "$k" "tmp/../$k.txt")
	[ "$r" = ok ] || note "$k.txt: $r"
done
check "the text gives torch's values back" "small (1000x301, nan, inf, -0) and its transpose, bit for bit"

# the big one: the first open measures it (each element's length
# counted, not printed: view_text_measure); reads anywhere then format
# only what they cover (test_ovl_text.c counts that work)
t0=$(date +%s%N)
n=$(wc -c <"$M/w.txt")
t1=$(date +%s%N)
head -c 100 "$M/w.txt" >"$WORK/head" || note "head failed"
dd if="$M/w.txt" bs=4096 skip=$((n / 8192)) count=3 of="$WORK/mid" 2>/dev/null
t2=$(date +%s%N)
tw=$(( (t1 - t0) / 1000000 )) th=$(( (t2 - t1) / 1000000 ))
[ "$(head -n 1 "$WORK/head")" = "# float32 ($((mb * 262144)),)" ] ||
	note "head: '$(head -n 1 "$WORK/head")'"
[ "$(wc -c <"$WORK/mid")" -eq 12288 ] || note "a read in the middle gave $(wc -c <"$WORK/mid") bytes"
[ $((th * 4)) -lt "$tw" ] || note "head and a read in the middle took ${th} ms, the whole read ${tw} ms"
check "a ${mb} MB tensor's text view" "whole read ${tw} ms ($n bytes), then head + a read in the middle ${th} ms"
u=$(tmp_use)
[ "$u" = "0 0 0" ] || note "daemon descriptors, bytes, files in TMPDIR: $u"
check "nothing in TMPDIR after reading every text view" "fds, bytes, files: $u"

stop_daemon "$M"
daemon_clean "$WORK/t.err" "daemon log (read-only)"

# an edit shows at once (the learnt offsets are dropped)
start_daemon "$WORK/big.pt" "$M" "$WORK/t.err" || {
	fail "writable mount" "$(head -n 1 "$WORK/t.err")"; summary; exit 1; }
cat "$M/small.txt" >/dev/null
printf '\000\000\200\077' | dd of="$M/small" conv=notrunc bs=4 count=1 2>/dev/null
sed -n 2p "$M/small.txt" | cut -d' ' -f1 >"$WORK/first"
[ "$(cat "$WORK/first")" = 1 ] || note "first value after the edit: $(cat "$WORK/first")"
check "an edit shows in the text view" "first element 1"
stop_daemon "$M"
daemon_clean "$WORK/t.err" "daemon log (writable)"
summary
[ "$nfail" -eq 0 ]
