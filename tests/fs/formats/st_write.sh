#!/bin/sh
# The safetensors write side (docs/design.md "safetensors files"): ptrepack
# between torch's format and safetensors, and write-back of a mounted
# safetensors file, checked with torch (and, under 2.x, the safetensors
# package) and byte for byte against the format's header rules.
#
#   usage: sh tests/fs/formats/st_write.sh [-k CASE] VERSION PTFS PTREPACK [CRASHES]
#
# VERSION "1.13": Debian's torch; "2": torch 2.x in the chroot.
# st_write_check.py makes the fixtures and checks the results:
#
#   pt -> st      a tied state_dict with a transposed view, a slice, nested
#                 dicts and a list: every tensor as torch.load gives it,
#                 flattened; the tie one tensor and a __metadata__ entry;
#                 the views said on stderr (-v: one line each)
#   st -> pt      torch.load (also weights_only) gives a dict in header
#                 order; round trip back to the first file's tensors;
#                 under 2.x float8 and uint16 with the note for torch 1.13
#   refused       python values (one line naming the key, no file left;
#                 --drop-values leaves them out), two keys flattening to
#                 one name, a hostile safetensors file
#   identity      a file in save_file's form (ours; under 2.x save_file's
#                 own) repacked, and written back after a write of the
#                 same bytes, comes out byte for byte the same
#   mount         a few bytes, mv, rm, a new tensor from bytes and one from
#                 a .npy, then ptfs umount: the file holds exactly that;
#                 what safetensors cannot hold is refused at the edit
#   crash         CRASHES times (default 8): the same edits, ptfs umount,
#                 kill -9 of the daemon at a random moment of it; the file
#                 is then the old one or the new one, byte for byte, and a
#                 remount and ptfs umount give the new one, nothing left
#                 beside it (an empty overlay directory, when the kill
#                 came between the clean-up's unlinks and its rmdir,
#                 goes at the remount's end)
#
# Prints one line per check and "N passed, N failed".  Exit 0 all passed,
# 1 a failure, 77 skipped (no /dev/fuse; no torch with
# PT_ALLOW_SKIP_TORCH=1).  Never leaves a mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTREPACK [CRASHES]" 3 4 "$@"
PTFS=$2 ptrepack=$3 crashes=${4:-8}
fs_progs PTFS ptrepack
fs_need_fuse
fs_torch "" ptfs-stwrite
. "$fs/lib/lib.sh"
. "$fs/lib/repack.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
D=$WORK/st
mkdir -p "$WORK/mnt" "$WORK/py" "$D" || exit 1
fs_py st_write_check.py st_check.py
I=$inner/st

# check LABEL ARG...: the script with ARG..., pass or fail on its report
check() { fs_pycheck "$@"; }
# logs_ok LABEL FILE: the daemon's stderr holds its one-line notes only
# (refused edits, a resumed overlay), no sanitizer report
logs_ok() {
	: >"$WORK/dp"
	DAEMON_LOGS_OK=1 daemon_problems "$2" "$WORK/dp" ||
		fail "$1: daemon log" "$(head -n 2 "$WORK/dp" | tail -n 1)" \
			"$WORK/dp"
}

probe_fuse "$fs/../data/sample.pt" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"
check "generate" gen "$I" || { summary; exit 1; }

# ------------------------------------------------------ ptrepack .pt -> .st
if want to_st; then
if repack "pt -> safetensors" -v "$D/tied.pt" "$D/tied.safetensors"; then
	check "pt -> safetensors" pt2st "$I"
	n=$(grep -c -e ': extra.t: a strided view of storage' \
		-e ': extra.sl: 12 of the 40 bytes of storage' "$WORK/rp.err")
	if [ "$n" -eq 2 ] && grep -q "note: 2 tensors written as contiguous" \
		"$WORK/rp.err"; then
		pass "views said" "$(grep -c . "$WORK/rp.err") lines on stderr"
	else
		fail "views said" "stderr: $(head -n 3 "$WORK/rp.err")"
	fi
fi
fi
# ------------------------------------------------------ and back
if want back; then
if repack "safetensors -> pt" "$D/tied.safetensors" "$D/back.pt"; then
	check "safetensors -> pt" st2pt "$I/tied.safetensors" "$I/back.pt"
	# the tie's alias is metadata, which a torch file does not keep
	repack "round trip" "$D/back.pt" "$D/again.safetensors" &&
		check "round trip" same "$I/tied.safetensors" \
			"$I/again.safetensors"
fi
if [ "$version" = 2 ] && repack "float8 -> pt" "$D/f8.safetensors" "$D/f8.pt"
then
	check "float8, uint16 -> pt" st2pt "$I/f8.safetensors" "$I/f8.pt"
	if grep -q "note: 2 tensors of .*, which torch 1.13 cannot load" \
		"$WORK/rp.err" && grep -q float8_e4m3fn "$WORK/rp.err" &&
	   grep -q uint16 "$WORK/rp.err"; then
		pass "torch 1.13 note" "$(cat "$WORK/rp.err")"
	else
		fail "torch 1.13 note" "stderr: $(head -n 2 "$WORK/rp.err")"
	fi
fi
fi
# ------------------------------------------------------ refusals
if want refusals; then
refused "values refused" "epoch: an int, not a tensor" "$D/x.safetensors" \
	"$D/values.pt" "$D/x.safetensors"
if repack "--drop-values" --drop-values "$D/values.pt" "$D/drop.safetensors"
then
	if grep -q "note: 2 non-tensor values left out" "$WORK/rp.err"; then
		check "--drop-values" drop "$I"
	else
		fail "--drop-values" "stderr: $(head -n 2 "$WORK/rp.err")"
	fi
fi
refused "two keys, one name" "a.b: two keys flatten to this name" \
	"$D/y.safetensors" "$D/twice.pt" "$D/y.safetensors"
refused "hostile input" "overlaps tensor 'a'" "$D/z.pt" \
	"$D/hostile.safetensors" "$D/z.pt"
run_limited 60 "$ptrepack" --align 4096 "$D/tied.pt" "$D/w.safetensors" \
	>/dev/null 2>"$WORK/rp.err"
rc=$?
if [ $rc -eq 2 ] && [ ! -e "$D/w.safetensors" ] &&
   grep -q "are for a torch zip output" "$WORK/rp.err"; then
	pass "zip option" "usage error: $(head -n 1 "$WORK/rp.err")"
else
	fail "zip option" "exit $rc: $(head -n 1 "$WORK/rp.err")"
fi
fi
# ------------------------------------------------------ identity
if want identity; then
for f in base lib; do
	[ -f "$D/$f.safetensors" ] || continue
	repack "identity: $f" "$D/$f.safetensors" "$D/$f.same.safetensors" &&
	if cmp -s "$D/$f.safetensors" "$D/$f.same.safetensors"; then
		pass "identity: $f" "repacked byte for byte the same"
	else
		fail "identity: $f" "$(cmp "$D/$f.safetensors" "$D/$f.same.safetensors")"
	fi
done
[ -f "$D/lib.safetensors" ] &&
	if cmp -s "$D/base.safetensors" "$D/lib.safetensors"; then
		pass "ours is save_file's" "base.safetensors == save_file's bytes"
	else
		fail "ours is save_file's" "$(cmp "$D/base.safetensors" "$D/lib.safetensors")"
	fi
fi

# ------------------------------------------------------ the mount
if want mount; then
mkdir -p "$D/m"
cp "$D/base.safetensors" "$D/m/m.safetensors"
mnt=$WORK/mnt/m
# the same bytes written: write-back gives the file back unchanged
if start_daemon "$D/m/m.safetensors" "$mnt" "$WORK/m.err"; then
	dd if="$mnt/w" of="$mnt/w" bs=64 count=2 conv=notrunc 2>/dev/null
	out=$(run_limited 60 "$PTFS" umount "$mnt" 2>&1)
	stop_daemon "$mnt"
	logs_ok "same bytes written back" "$WORK/m.err"
	if cmp -s "$D/base.safetensors" "$D/m/m.safetensors"; then
		pass "same bytes written back" "$out"
	else
		fail "same bytes written back" "the file changed: $out"
	fi
else
	fail "same bytes written back" "not mounted: $(head -n 1 "$WORK/m.err")"
fi
if start_daemon "$D/m/m.safetensors" "$mnt" "$WORK/m.err"; then
	check "edits" edit "$inner/mnt/m" "$I/want.json"
	out=$(run_limited 60 "$PTFS" umount "$mnt" 2>&1)
	rc=$?
	stop_daemon "$mnt"
	logs_ok "edits" "$WORK/m.err"
	if [ $rc -eq 0 ]; then
		pass "ptfs umount" "$out"
		check "written back" after "$I/m/m.safetensors" "$I/want.json"
	else
		fail "ptfs umount" "exit $rc: $out"
	fi
	[ "$(ls -A "$D/m")" = m.safetensors ] ||
		fail "nothing left beside" "$(ls -A "$D/m" | head -n 3)"
else
	fail "edits" "not mounted: $(head -n 1 "$WORK/m.err")"
fi
fi

# ------------------------------------------------------ crash loop
# edits of big.safetensors: 4 bytes, a rename, a removal
if want crash; then
edits() {
	printf 'ABCD' | dd of="$1/t1" bs=1 seek=4096 conv=notrunc 2>/dev/null &&
	mv "$1/t2" "$1/moved" && rm "$1/t3"
}
mkdir -p "$D/c"
cp "$D/big.safetensors" "$D/c/ck.safetensors"
start_daemon "$D/c/ck.safetensors" "$mnt" "$WORK/c.err" && edits "$mnt" &&
	"$PTFS" umount "$mnt" >/dev/null 2>&1
stop_daemon "$mnt"
cp "$D/c/ck.safetensors" "$D/new.safetensors"
old=0 new=0 bad=0 i=0
: >"$WORK/crash.details"
: >"$WORK/remounts.err"
while [ $i -lt "$crashes" ]; do
	i=$((i + 1))
	cp "$D/big.safetensors" "$D/c/ck.safetensors"
	if ! start_daemon "$D/c/ck.safetensors" "$mnt" "$WORK/c.err" ||
	   ! edits "$mnt"; then
		echo "iteration $i: mount or edits failed" >>"$WORK/crash.details"
		stop_daemon "$mnt"
		bad=$((bad + 1))
		continue
	fi
	pid=$(ptfs_pid)
	delay=$(awk -v s="$i$$" 'BEGIN { srand(s); printf "%.3f", rand() * 0.25 }')
	"$PTFS" umount "$mnt" >/dev/null 2>&1 &
	upid=$!
	sleep "$delay"
	kill -9 "$pid" 2>/dev/null
	wait "$upid"
	stop_daemon "$mnt"
	if cmp -s "$D/c/ck.safetensors" "$D/big.safetensors"; then
		old=$((old + 1))
	elif cmp -s "$D/c/ck.safetensors" "$D/new.safetensors"; then
		new=$((new + 1))
	else
		echo "iteration $i (kill after ${delay}s): neither the old nor the new file" >>"$WORK/crash.details"
		bad=$((bad + 1))
	fi
	# the remount finishes or keeps what was staged; ptfs umount ends it
	if start_daemon "$D/c/ck.safetensors" "$mnt" "$WORK/c.err"; then
		run_limited 60 "$PTFS" umount "$mnt" >/dev/null 2>&1
		stop_daemon "$mnt"
		cat "$WORK/c.err" >>"$WORK/remounts.err"
	fi
	if ! cmp -s "$D/c/ck.safetensors" "$D/new.safetensors"; then
		echo "iteration $i: after the remount, not the new file" >>"$WORK/crash.details"
		bad=$((bad + 1))
	fi
	[ "$(ls -A "$D/c")" = ck.safetensors ] || {
		echo "iteration $i: left beside: $(ls -A "$D/c" | tr '\n' ' ')(the remount said: $(head -n 2 "$WORK/c.err"))" >>"$WORK/crash.details"
		bad=$((bad + 1))
	}
done
if [ $bad -eq 0 ]; then
	pass "crash loop" "$crashes kills of ptfs umount: $old left the old file, $new the new one; every remount wrote the new one, nothing left beside it"
else
	fail "crash loop" "$bad problems" "$WORK/crash.details"
fi
logs_ok "remounts" "$WORK/remounts.err"
check "crash loop result" rules "$I/new.safetensors"
fi

conclude
