#!/bin/sh
# faults_io.sh PTFS [SHARED_DIR] - I/O errors while writing, injected
# into the daemon with LD_PRELOAD (faultinj.c, built here with cc; no
# device-mapper):
# what faults.sh (kill -9, full disk, read-only directory) does not cover.
#
#  write-back (`ptfs umount`) with EIO on the temporary archive's 1st and
#  2nd write (its writer writes in 4 MiB runs: the direct part, then the
#  tail), its fsync, and copy_file_range (where the writer copies in the
#  kernel: XFS, btrfs, tmpfs), and ENOSPC on its 2nd write:
#    each fails with one line naming the error, the checkpoint stays byte
#    for byte the original, no temporary file is left, the mount stays with
#    every edit; once the fault is gone `ptfs umount` writes it all
#  editing with EIO in the overlay:
#    the copy-up of a storage on its first write fails: the write gets EIO,
#    the tensor keeps its bytes; the journal's fdatasync fails under a
#    rename: the rename gets EIO, and after kill -9 and a remount it has
#    not happened either (the torn record was cut off); once the fault is
#    gone the same edits work
#  and at the end torch 1.13 and torch 2.x (SHARED_DIR/tools/torch2-root)
#  load what was written back, with every tensor's final bytes.
#
# The edits are stress.py's first round (1 process, 1 thread): in-place
# writes by pwrite, write and mmap, and renames.  One line per check, then
# "N passed, N failed[, N skipped]"; exit 77 without /dev/fuse.
set -u
LC_ALL=C
export LC_ALL
[ $# -ge 1 ] || { echo "usage: sh $0 PTFS [SHARED_DIR]" >&2; exit 2; }
PTFS=$1 shared=${2:-}
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/lib.sh"
WORK=$(mktemp -d /tmp/ptfs-faultsio.XXXXXX) || exit 1
trap 'cleanup_mounts; [ -n "${PTFS_KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM
D=$WORK/d MNT=$WORK/mnt/m CK=$WORK/d/model.pt
if ! faultinj_ready; then
	echo "skip: $FAULTINJ_WHY"
	exit 77
fi
mkdir -p "$D" "$MNT"
san='ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error\|SUMMARY: .*Sanitizer'
stress() { python3 "$here/stress.py" "$@" 2>&1 | tail -n 1; }
nd=0
# mount: ptfs -f under the injector, stderr to daemonN.err
mount_inj() {
	nd=$((nd + 1))
	LD_PRELOAD=$INJ start_daemon "$CK" "$MNT" "$WORK/daemon$nd.err"
}
arm() {
	# a new mtime for sure: the injector reloads on any change
	printf '%s\n' "$1" >"$CTL.new"
	mv "$CTL.new" "$CTL"
	: >"$CTL.log"
}
disarm() { arm ""; }
hit() { [ -s "$CTL.log" ] && head -n 1 "$CTL.log" || echo "not hit"; }
leftovers() { ls -A "$D" | grep -vx 'model.pt' | grep -vx '.model.pt.ptfs' | tr '\n' ' '; }

python3 "$here/stress.py" gen "$CK" >/dev/null || exit 1
OSHA=$(sha256sum <"$CK")
probe_fuse "$CK" "$MNT" "$WORK/probe.err"
stop_daemon "$MNT"
if ! LD_PRELOAD=$INJ /bin/true 2>/dev/null; then
	echo "skip: cannot preload $INJ"
	exit 77
fi

# ------------------------------------------------ EIO in the overlay
if want eio_overlay; then
echo "# editing with EIO in the overlay"
mount_inj || { fail "mount" "$(head -n 1 "$WORK/daemon$nd.err")"; summary; exit 1; }
# poke NAME: pwrite 4 KiB of 0xab at offset 0, fsync, close; prints the
# error or "it worked"
poke() {
	python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    os.pwrite(fd, b"\xab" * 4096, 0)
    os.fsync(fd)
    print("it worked")
except OSError as e:
    print(e.strerror)
finally:
    try:
        os.close(fd)
    except OSError as e:
        print("close: " + e.strerror)
' "$MNT/$1" 2>&1
}
for case in "journal creation|t0|write .model.pt.ptfs/ptfs.journal 1 EIO" \
	    "copy-up of a storage|t1|copy .model.pt.ptfs/ 1 EIO
write .1.tmp 1 EIO"; do
	L=${case%%|*} rest=${case#*|}
	t=${rest%%|*} rule=${rest#*|}
	arm "$rule"
	out=$(poke "$t")
	case $out in
	"Input/output error"*) pass "$L fails: the write gets EIO" "$out; injector: $(hit)" ;;
	*) fail "$L fails: the write gets EIO" "expected 'Input/output error', seen: $out; injector: $(hit)" ;;
	esac
	disarm
	out=$(stress verify "$MNT" 1 1 0)
	case $out in
	ok*) pass "$L fails: nothing changed" "${out#ok }" ;;
	*) fail "$L fails: nothing changed" "$out" ;;
	esac
done
tmp=$(ls -A "$D/.model.pt.ptfs" 2>/dev/null | grep '\.tmp$' | tr '\n' ' ')
[ -z "$tmp" ] && pass "no half-copied storage left" "$(ls -A "$D/.model.pt.ptfs" 2>/dev/null | tr '\n' ' ')" ||
	fail "no half-copied storage left" "$tmp"
arm "sync .model.pt.ptfs 1 EIO"
out=$( (mv "$MNT/r0" "$MNT/r0.renamed") 2>&1)
case $out in
*"Input/output error"*) pass "journal fdatasync fails: rename gets EIO" "injector: $(hit)" ;;
*) fail "journal fdatasync fails: rename gets EIO" "expected EIO, seen: ${out:-it worked}; injector: $(hit)" ;;
esac
disarm
if [ -e "$MNT/r0" ] && [ ! -e "$MNT/r0.renamed" ]; then
	pass "journal fdatasync fails: nothing renamed" "r0 is still r0"
else
	fail "journal fdatasync fails: nothing renamed" "$(ls "$MNT" | tr '\n' ' ')"
fi
# kill -9 and remount: the journal must not replay the failed rename
pid=$(pgrep -P "$DPID" -x ptfs || echo "$DPID")
kill -9 "$pid" 2>/dev/null
wait "$DPID" 2>/dev/null
fusermount3 -uz "$MNT" 2>/dev/null
mount_inj || fail "remount after kill -9" "$(head -n 1 "$WORK/daemon$nd.err")"
if [ -e "$MNT/r0" ] && [ ! -e "$MNT/r0.renamed" ]; then
	pass "after kill -9: the failed rename did not come back" "r0 is still r0"
else
	fail "after kill -9: the failed rename did not come back" "$(ls "$MNT" | tr '\n' ' ')"
fi
out=$(stress run "$MNT" 1 1 1)
case $out in
ok*) pass "faults gone: the edits work" "${out#ok }" ;;
*) fail "faults gone: the edits work" "$out" ;;
esac
fi

# ------------------------------------------------ faults during write-back
if want writeback; then
echo "# write-back with I/O errors"
for rule in "write .ptfs-new. 1 EIO" "write .ptfs-new. 2 EIO" \
	    "write .ptfs-new. 2 ENOSPC" "sync .ptfs-new. 1 EIO" \
	    "copy .ptfs-new. 1 EIO"; do
	L="write-back, $rule"
	# the writer copies a record in the kernel (copy_file_range) only
	# where blocks can be shared or there is no direct I/O; elsewhere
	# (ext4) records go through its buffers: the write rules cover that
	case $rule:$(stat -f -c %T "$D") in
	copy*:xfs|copy*:btrfs|copy*:tmpfs|write*|sync*) ;;
	*) skip "$L" "$(stat -f -c %T "$D") copies records through the writer's own writes, no copy_file_range"
	   continue ;;
	esac
	arm "$rule"
	run_limited 120 "$PTFS" umount "$MNT" >"$WORK/u.out" 2>"$WORK/u.err"
	rc=$?
	n=$(grep -c . "$WORK/u.err")
	line=$(head -n 1 "$WORK/u.err")
	case $rule in *ENOSPC) want="No space left" ;; *) want="Input/output error" ;; esac
	if [ $rc -ne 0 ] && [ "$n" -eq 1 ] && echo "$line" | grep -q "$want"; then
		pass "$L: ptfs umount fails" "exit $rc: $line"
	else
		fail "$L: ptfs umount fails" "expected one line with '$want', seen exit $rc, $n line(s): $line; injector: $(hit)"
	fi
	[ "$(hit)" != "not hit" ] || fail "$L: the fault was hit" "the injector saw no matching call"
	lo=$(leftovers)
	if [ "$(sha256sum <"$CK")" = "$OSHA" ] && [ -z "$lo" ]; then
		pass "$L: original intact" "sha256 unchanged, no temporary file"
	else
		fail "$L: original intact" "sha256 $( [ "$(sha256sum <"$CK")" = "$OSHA" ] && echo same || echo changed)${lo:+, left: $lo}"
	fi
	if is_mounted "$MNT"; then
		out=$(stress verify "$MNT" 1 1 1)
		case $out in
		ok*) pass "$L: still mounted with the edits" "${out#ok }" ;;
		*) fail "$L: still mounted with the edits" "$out" ;;
		esac
	else
		fail "$L: still mounted with the edits" "not mounted"
		mount_inj
	fi
done
disarm
run_limited 120 "$PTFS" umount "$MNT" >"$WORK/u.out" 2>"$WORK/u.err"
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$WORK/u.err" ]; then
	pass "faults gone: ptfs umount" "exit 0, nothing printed"
else
	fail "faults gone: ptfs umount" "exit $rc: $(head -n 1 "$WORK/u.err")"
fi
stop_daemon "$MNT"
lo=$(ls -A "$D" | grep -vx 'model.pt' | tr '\n' ' ')
[ -z "$lo" ] && pass "nothing left beside the checkpoint" "no overlay, no temporary" ||
	fail "nothing left beside the checkpoint" "$lo"
out=$(stress check "$CK" 1 1 1)
case $out in
ok*) pass "archive records" "${out#ok }" ;;
*) fail "archive records" "$out" ;;
esac
fi

# ------------------------------------------------ torch
if want torch; then
. "$fs/../torch/select.sh"
if torch_version /usr/bin/python3 >/dev/null; then
	out=$(/usr/bin/python3 "$here/stress.py" torch "$CK" 1 1 1 2>&1 | tail -n 1)
	case $out in
	ok*) pass "torch 1.13" "${out#ok }" ;;
	*) fail "torch 1.13" "$out" ;;
	esac
else
	skip "torch 1.13" "no torch in /usr/bin/python3"
fi
root= root_why=
root=$(torch2_root 2>"$WORK/torch2.why") || root=
root_why=$(tail -n 1 "$WORK/torch2.why")
if [ -n "$root" ] && [ -d "$root/tmp" ]; then
	in=$(mktemp -d "$root/tmp/ptfs-faultsio.XXXXXX")
	cp "$here/stress.py" "$CK" "$in/"
	out=$(chroot "$root" python3 "${in#"$root"}/stress.py" torch \
		"${in#"$root"}/model.pt" 1 1 1 2>&1 | tail -n 1)
	rm -rf "$in"
	case $out in
	ok*) pass "torch 2" "${out#ok }" ;;
	*) fail "torch 2" "$out" ;;
	esac
elif [ "${PT_NO_TORCH2:-0}" = 1 ]; then
	skip "torch 2" "$root_why"
else
	fail "torch 2" "no torch 2.x: $root_why"
fi

: >"$WORK/san.txt"
fi
for e in "$WORK"/daemon*.err; do
	grep -q "$san" "$e" && echo "${e##*/}: $(grep -m 1 "$san" "$e")" >>"$WORK/san.txt"
	# anything but the one-line reasons of refused calls
	grep -v '^ptfs: ' "$e" | grep -v "$san" | head -n 1 | grep . >>"$WORK/san.txt"
done
if [ -s "$WORK/san.txt" ]; then
	fail "daemons: no sanitizer report, only one-line reasons" "" "$WORK/san.txt"
else
	pass "daemons: no sanitizer report, only one-line reasons" "$nd daemons"
fi
no_mounts_left && pass "no mounts left" "nothing under $WORK/mnt" ||
	fail "no mounts left" "still mounted"
summary
[ "$nfail" -eq 0 ]
