#!/bin/sh
# names.sh - issue 15 case 8: keys the kernel cannot take as names.  A key
# of 4096 bytes or more made the whole directory unlistable (readdir EIO:
# ls, rm -r, rsync, diff -r all failed) and keys over NAME_MAX (255 bytes)
# could be listed but not opened.  Now every key has a name of at most 255
# bytes (docs/names.md: cut, "%~<slot>", the whole key in user.key):
# listing, reading every key's bytes against torch's, cp -r + diff -r,
# find, views (-o views), then an rm and an in-place write through such
# names, renames onto them (mv, rsync's temporary file, onto a cut name's
# .npy view), a long key given with setfattr user.key, written back and
# checked with torch.load.
#
#   usage: sh tests/fs/mount/names.sh 1.13|2 PTFS
# Last line "N passed, N failed"; exit 0/1, 77 without /dev/fuse.
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/surprise_lib.sh"

trun names names.pt names.json || { echo "generating failed" >&2; exit 1; }
cp "$WORK/names.pt" "$WORK/orig.pt"
M=$WORK/mnt/n
start_daemon "$WORK/names.pt" "$M" "$WORK/n.err" -o ro,views || {
	fail "mount" "$(head -n 1 "$WORK/n.err")"; summary; exit 1; }

for d in "" /nested; do
	if ls -la "$M$d" >"$WORK/ls.out" 2>"$DET"; then
		long=$(ls "$M$d" | awk 'length($0) > 255' | wc -l)
		[ "$long" -eq 0 ] || note "$long names over 255 bytes"
		check "ls -la ${d:-/}" "exit 0, $(ls "$M$d" | wc -l) entries, none over 255 bytes"
	else
		fail "ls -la ${d:-/}" "$(head -n 1 "$DET")"
		: >"$DET"
	fi
done
if python3 "$here/names_check.py" "$M" "$WORK/names.json" >"$DET" 2>&1; then
	pass "every key found, bytes as torch's" \
		"$(grep -o '\], \[' "$WORK/names.json" | wc -l) keys"
else
	fail "every key found, bytes as torch's" "$(head -n 1 "$DET")" "$DET"
fi
: >"$DET"
# views of a cut name: listed with -o views, each at most 255 bytes
nv=$(ls "$M" | grep -c '\.npy$')
bad=$(ls "$M" | awk 'length($0) > 255' | wc -l)
v=$(ls "$M" | grep '^xxxx.*\.npy$' | head -n 1)
if [ "$nv" -eq 10 ] && [ "$bad" -eq 0 ] && [ -n "$v" ] &&
    [ "$(head -c 6 "$M/$v" | od -An -c | tr -d ' ')" = '223NUMPY' ]; then
	pass "views of cut names" "$nv .npy views, ${#v} bytes for the longest key's"
else
	fail "views of cut names" "$nv .npy views, $bad over 255, '$(printf %.30s "$v")' reads '$(head -c 6 "$M/$v" 2>&1 | od -An -c)'"
fi
if find "$M" >/dev/null 2>"$DET" && cp -r "$M" "$WORK/copy" 2>>"$DET" &&
    diff -r "$M" "$WORK/copy" >>"$DET" 2>&1; then
	pass "find, cp -r, diff -r" "$(find "$WORK/copy" -type f | wc -l) files copied and equal"
else
	fail "find, cp -r, diff -r" "$(head -n 1 "$DET")"
fi
: >"$DET"
stop_daemon "$M"
daemon_clean "$WORK/n.err" "daemon log (read-only mount)"

# edits through cut names, then write-back
start_daemon "$WORK/names.pt" "$M" "$WORK/w.err" || {
	fail "writable mount" "$(head -n 1 "$WORK/w.err")"; summary; exit 1; }
k=$(ls "$M" | grep '^kkk' | head -n 1)
x=$(ls "$M" | grep '^xxx' | head -n 1)
rm "$M/$k" 2>"$DET" || note "rm: $(cat "$DET")"
printf '\000\000\200\077' | dd of="$M/$x" conv=notrunc bs=4 count=1 \
	2>"$WORK/dd.err" || note "dd: $(tail -n 1 "$WORK/dd.err")"
[ "$(getfattr --only-values -n user.key "$M/$x" 2>/dev/null | wc -c)" -eq 5000 ] ||
	note "user.key of the 5000-byte key is not 5000 bytes"
check "rm and dd through cut names" "${#k}- and ${#x}-byte names"
# renames onto cut names replace those long keys (they failed with
# EINVAL); setfattr user.key gives an entry a key longer than NAME_MAX
kb=$(ls "$M" | grep '^kkk' | head -n 1)
e=$(ls "$M" | grep '^é' | head -n 1)
n=$(printf 'n%.0s' $(seq 255))
q=$(printf 'q%.0s' $(seq 300))
xv="$(printf 'x%.0s' $(seq 248))%~4.npy"	# the .npy view of "x"*5000+"y"
mv "$M/short" "$M/$kb" 2>"$DET.e" || note "mv short onto ${kb%%k*}k..${kb##*k}: $(cat "$DET.e")"
[ -e "$M/short" ] && note "short is still there after mv onto $kb"
[ "$(od -An -tf4 "$M/$kb" 2>/dev/null | tr -s ' ')" = " 5 5 5" ] ||
	note "$kb does not hold short's values: $(od -An -tf4 "$M/$kb" 2>&1)"
printf '\000\000\340\100\000\000\340\100\000\000\340\100' >"$M/tmp.rsync" &&
	mv "$M/tmp.rsync" "$M/$e" 2>"$DET.e" ||
	note "a temporary file renamed onto ${#e}-byte $e: $(cat "$DET.e")"
[ "$(getfattr --only-values -n user.dtype "$M/$e" 2>/dev/null)" = float32 ] ||
	note "$e is no longer float32 after the rename onto it"
python3 -c 'import sys; sys.stdout.buffer.write(b"\x93NUMPY\x01\x00v\x00" + (b"{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (3,), }").ljust(117) + b"\n" + b"\x00\x00\x90\x40" * 3)' \
	>"$M/tmp.npy.rsync" && mv "$M/tmp.npy.rsync" "$M/$xv" 2>"$DET.e" ||
	note "a .npy renamed onto the view $xv: $(cat "$DET.e")"
setfattr -n user.key -v "$q" "$M/$n" 2>"$DET.e" ||
	note "setfattr user.key q*300 on n*255: $(cat "$DET.e")"
qn=$(ls "$M" | grep '^qqq' | head -n 1)
[ "$(getfattr --only-values -n user.key "$M/$qn" 2>/dev/null)" = "$q" ] ||
	note "no entry with user.key q*300 (listing has '$(printf %.20s "$qn")')"
[ -e "$M/$n" ] && note "n*255 is still there after setfattr user.key"
if setfattr -n user.key -v "$(printf 'x%.0s' $(seq 5000))" "$M/$qn" 2>"$DET.e"; then
	note "setfattr user.key onto an existing key worked"
else
	grep -q "File exists" "$DET.e" || note "setfattr user.key onto an existing key: $(cat "$DET.e"), not EEXIST"
fi
check "renames onto cut names, user.key" "mv onto ${#kb}-byte $(printf %.3s "$kb")..., rsync-style onto $(printf %.2s "$e")... and a view, user.key q*300"
if run_limited 60 "$PTFS" umount "$M" >"$DET" 2>&1; then
	: >"$DET"
	r=$(trun names_edited names.pt names.json)
	[ "$r" = ok ] || note "torch.load after write-back: $r"
	check "written back, torch.load" "the key removed, the write landed, the rest as saved"
else
	fail "ptfs umount" "$(head -n 1 "$DET")"
	: >"$DET"
	stop_daemon "$M"
fi
DPID=
# the refused setfattr user.key logged its one line, and nothing else
grep -v 'user.key: another entry has that key' "$WORK/w.err" >"$WORK/w.rest"
[ "$(grep -c 'user.key: another entry has that key' "$WORK/w.err")" = 1 ] ||
	echo "no line for the refused setfattr user.key" >>"$WORK/w.rest"
daemon_clean "$WORK/w.rest" "daemon log (writable mount)"
summary
[ "$nfail" -eq 0 ]
