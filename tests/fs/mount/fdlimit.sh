#!/bin/sh
# fdlimit.sh - issue 14 case 14: every staged storage holds an open file
# in the daemon, so editing more tensors than the open-file limit used to
# fail with EMFILE, and then the write-back failed too.
#
# a. Under the usual soft limit (ulimit -Sn 1024, hard limit higher),
#    1,100 tensors are edited one after the other (open, write, close):
#    every write succeeds (the daemon takes the hard limit), `ptfs umount`
#    writes them all back, torch.load sees each one.
# b. Under a hard limit of 300: the edits that would leave the daemon
#    fewer than 64 free descriptors fail with EMFILE (the writer sees it,
#    the daemon logs why), the ones before them succeed, and `ptfs umount`
#    still writes back exactly those; nothing is left beside the file.
#
#   usage: sh tests/fs/mount/fdlimit.sh 1.13|2 PTFS
# Last line "N passed, N failed"; exit 0/1, 77 without /dev/fuse.
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/surprise_lib.sh"

N=1100
trun many many.pt $N || { echo "generating failed" >&2; exit 1; }
M=$WORK/mnt/f

# edit_first K: write four 1.0 floats into t0..t{K-1} of the mount, one
# file at a time; prints "ok COUNT" then the errors met, one per line
edit_first() {
	/usr/bin/env python3 - "$M" "$1" <<'EOF'
import errno, os, struct, sys
m, k = sys.argv[1], int(sys.argv[2])
ok, errs = 0, {}
for i in range(k):
    try:
        fd = os.open("%s/t%d" % (m, i), os.O_WRONLY)
        try:
            os.write(fd, struct.pack("<4f", 1, 1, 1, 1))
        finally:
            os.close(fd)
        if errs:
            errs["a success after a failure at t%d" % i] = 1
        else:
            ok += 1
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        errs[name] = errs.get(name, 0) + 1
print("ok", ok)
for e, n in sorted(errs.items()):
    print(e, n)
EOF
}

# a. soft limit 1024, as most shells have it
cp "$WORK/many.pt" "$WORK/a.pt"
(
	ulimit -Sn 1024 || exit 1
	start_daemon "$WORK/a.pt" "$M" "$WORK/a.err" || exit 2
	edit_first $N >"$WORK/a.out"
	"$PTFS" umount "$M" >"$WORK/a.umount" 2>&1 || echo "umount failed" >>"$WORK/a.out"
	stop_daemon "$M"
)
case $? in
1) note "ulimit -Sn 1024 refused" ;;
2) note "mount: $(head -n 1 "$WORK/a.err")" ;;
esac
[ -s "$WORK/a.out" ] && [ "$(cat "$WORK/a.out")" = "ok $N" ] ||
	note "edits: $(tr '\n' ' ' <"$WORK/a.out" 2>/dev/null) $(head -n 1 "$WORK/a.umount" 2>/dev/null)"
check "soft limit 1024: $N tensors edited" "all $N writes succeeded"
trun manycheck a.pt $N $N >"$WORK/a.chk" || note "torch.load: $(head -n 1 "$WORK/a.chk")"
check "soft limit 1024: written back" "torch.load sees all $N edits"

# b. hard limit 300: refused beyond the reserve, the rest written back
cp "$WORK/many.pt" "$WORK/b.pt"
(
	ulimit -n 300 || exit 1
	start_daemon "$WORK/b.pt" "$M" "$WORK/b.err" || exit 2
	edit_first 400 >"$WORK/b.out"
	"$PTFS" umount "$M" >"$WORK/b.umount" 2>&1 || echo "umount-failed" >>"$WORK/b.out"
	stop_daemon "$M"
)
case $? in
1) note "ulimit -n 300 refused" ;;
2) note "mount: $(head -n 1 "$WORK/b.err")" ;;
esac
k=$(sed -n 's/^ok //p' "$WORK/b.out")
[ -n "$k" ] && [ "$k" -gt 100 ] && [ "$k" -lt 300 ] ||
	note "$k edits succeeded under a limit of 300, want 100..299"
grep -qv '^ok \|^EMFILE ' "$WORK/b.out" &&
	note "other outcomes: $(grep -v '^ok \|^EMFILE ' "$WORK/b.out" | tr '\n' ' ')"
grep -q "^EMFILE $((400 - ${k:-0}))\$" "$WORK/b.out" ||
	note "not every edit past the limit failed with EMFILE: $(tr '\n' ' ' <"$WORK/b.out")"
check "hard limit 300: edits past the reserve refused" "$k succeeded, the rest EMFILE"
grep -q "open-file limit (300)" "$WORK/b.err" ||
	note "the daemon did not say why: $(head -n 1 "$WORK/b.err")"
check "hard limit 300: the daemon says why" "$(grep -m 1 'open-file limit' "$WORK/b.err" | cut -c1-90)"
trun manycheck b.pt $N "${k:-0}" >"$WORK/b.chk" || note "torch.load: $(head -n 1 "$WORK/b.chk")"
ls -A "$WORK" | grep -q '^\.b\.pt\.ptfs$\|^\.b\.pt\..*tmp' &&
	note "left beside the file: $(ls -A "$WORK" | grep '^\.b\.pt' | tr '\n' ' ')"
check "hard limit 300: the accepted edits written back" "torch.load sees exactly $k"
summary
[ "$nfail" -eq 0 ]
