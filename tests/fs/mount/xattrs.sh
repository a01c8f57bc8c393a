#!/bin/sh
# xattrs.sh - issue 15 cases 7 and 10: extended attributes that the file
# controls.  A Parameter (and a tensor subclass, whose state torch 1.13
# also pickles) with 30 attributes of 200-character names overflowed a
# 4 KiB stack buffer in listxattr; 60 attributes made every getxattr fail
# with ERANGE, because all of them had to fit one 8 KiB buffer.  Checks
# getfattr -d and each attribute alone against torch.load's vars(), the
# ERANGE contract for small buffers, cp -a and getfattr -R of the mount,
# and
# that the daemon (also the ASan build) reported nothing.
#
#   usage: sh tests/fs/mount/xattrs.sh 1.13|2 PTFS
# Last line "N passed, N failed"; exit 0/1, 77 without /dev/fuse.
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/surprise_lib.sh"

trun attrs attrs.pt attrs.json || { echo "generating failed" >&2; exit 1; }
M=$WORK/mnt/a
start_daemon "$WORK/attrs.pt" "$M" "$WORK/a.err" || {
	fail "mount" "$(head -n 1 "$WORK/a.err")"; summary; exit 1; }

for k in p30 t30 p60 t60; do
	if getfattr -d -m - "$M/$k" >"$WORK/gf.$k" 2>&1; then
		n=$(grep -c '^user\.attr\.' "$WORK/gf.$k")
		pass "getfattr -d $k" "exit 0, $n user.attr.* attributes"
	else
		fail "getfattr -d $k" "$(grep -v '^#' "$WORK/gf.$k" | head -n 1)"
	fi
	v=$(getfattr --only-values -n user.dtype "$M/$k" 2>"$WORK/gerr")
	[ -n "$v" ] || v=$(grep -v "Removing leading" "$WORK/gerr")
	if [ "$v" = float32 ]; then
		pass "getfattr -n user.dtype $k" "float32"
	else
		fail "getfattr -n user.dtype $k" "got '$v'"
	fi
done
if python3 "$here/xattr_probe.py" "$M" "$WORK/attrs.json" >"$DET" 2>&1; then
	pass "each attribute alone, lists, ERANGE" \
		"$(grep -o '"attrs"' "$WORK/attrs.json" | wc -l) tensors as torch.load says"
else
	fail "each attribute alone, lists, ERANGE" "$(head -n 1 "$DET")" "$DET"
fi
: >"$DET"
# the tools that copy attributes along
mkdir -p "$WORK/copy"
if cp -a "$M/p30" "$M/t60" "$WORK/copy/" 2>"$DET" &&
    cmp -s "$M/t60" "$WORK/copy/t60"; then
	pass "cp -a" "copied with attributes"
else
	fail "cp -a" "$(head -n 1 "$DET")"
fi
: >"$DET"
# a recursive dump, as backup tools read them (rsync -X, tar --xattrs;
# their destinations here may not hold 30 names of 200 bytes)
if getfattr -R -d -m - "$M" >"$WORK/gfr" 2>"$DET"; then
	pass "getfattr -R -d" "$(grep -c '^user\.attr\.' "$WORK/gfr") user.attr.* in the mount"
else
	fail "getfattr -R -d" "$(grep -v 'Removing leading' "$DET" | head -n 1)"
fi
: >"$DET"
ls "$M" >/dev/null 2>&1 || note "the mount does not answer (daemon died?)"
check "still answering" "after all of it"
stop_daemon "$M"
daemon_clean "$WORK/a.err" "daemon log"
summary
[ "$nfail" -eq 0 ]
