#!/bin/sh
# safetensors files through the tools and a real mount (docs/design.md
# "safetensors files").
#
#   usage: sh tests/fs/formats/safetensors.sh [-k CASE] VERSION PTFS PTLS SHARED_DIR
#
# VERSION "1.13": Debian's torch (/usr/bin/python3); "2": torch 2.x in the
# chroot scripts/torch2-root.sh builds.  st_check.py writes the files: with
# its own writer (from the format's definition: any torch) and, under
# torch 2.x, with safetensors.torch.save_file; every dtype the torch has,
# an empty and a 0-d tensor, names to escape, metadata.  Each file is
#
#   listed      ptls --json and ptdump --json parse; ptverify says ok;
#               ptdiff finds no difference from torch.save of the same
#               tensors
#   mounted     ptfs -o ro mounts it without a word; every tensor's
#               bytes, xattrs, the root's user.meta.* and .ptfs/header.json
#               equal what torch (and safetensors.load_file) read; writes
#               fail with EROFS and the file stays byte for byte the same
#               (tests/fs/formats/st_write.sh writes through a writable mount)
#
# Sub-byte dtypes: F6_E2M3 and an F4 of odd last size as their bytes,
# named, a cast refused, edits written back with the header's dtypes and
# shapes, a torch file refused; under 2.x save_file's F4 as torch's
# float4_e2m1fn_x2 (ptls, ptrepack to .pt loaded by torch, and back).
#
# A file with "__metadata__": null (MLX writes it) lists, verifies,
# mounts, and an edit written back gives a file without __metadata__,
# as safetensors' own writer writes a None.
#
# And two broken ones: 3 bytes after the data (ptverify exit 1, naming
# them) and tensors that overlap (ptfs refuses with one line naming the
# offset, ptls too).
#
# Prints one line per check and finally "N passed, N failed".  Exit 0 all
# passed, 1 a failure, 77 skipped (no usable /dev/fuse; no torch with
# PT_ALLOW_SKIP_TORCH=1).  Never leaves a mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS SHARED_DIR" 4 4 "$@"
PTFS=$2 ptls=$3 shared=$4
sample=$fs/../data/sample.pt
fs_progs PTFS ptls
bin=$(dirname "$ptls")
ptdump=$bin/ptdump ptdiff=$bin/ptdiff ptverify=$bin/ptverify
fs_progs ptdump ptdiff ptverify
fs_need_fuse

fs_torch "$shared" ptfs-safetensors
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/py" "$WORK/st" || exit 1
fs_py st_check.py

probe_fuse "$sample" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

if fs_pyrun gen.rep gen "$inner/st"; then
	pass "generate" "$(grep "^ok$TAB" "$WORK/gen.rep" | cut -f2)"
else
	fail "generate" "st_check.py gen failed under torch $version" \
		"$WORK/gen.rep.err"
	summary
	exit 1
fi

# ------------------------------------------------------ each file: tools and a read-only mount
if want files; then
names=own
[ -f "$WORK/st/lib.safetensors" ] && names="own lib"
for n in $names; do
	f=$WORK/st/$n.safetensors
	det=$WORK/$n.details
	: >"$det"
	# ------------------------------------------------------ the tools
	run_limited 60 "$ptls" --json "$f" >"$WORK/st/$n.json" 2>"$det.err" ||
		echo "ptls --json: exit $?: $(head -n 1 "$det.err")" >>"$det"
	run_limited 60 "$ptdump" --json "$f" >"$WORK/dump.json" 2>"$det.err" ||
		echo "ptdump --json: exit $?: $(head -n 1 "$det.err")" >>"$det"
	for j in "$WORK/st/$n.json" "$WORK/dump.json"; do
		python3 -c 'import json, sys; json.load(open(sys.argv[1]))' \
			"$j" 2>>"$det" || echo "${j##*/} is not JSON" >>"$det"
	done
	run_limited 60 "$ptdump" --records "$f" >"$WORK/rec.txt" 2>&1 ||
		echo "ptdump --records: exit $?" >>"$det"
	grep -q "safetensors file, header .*; no zip records" "$WORK/rec.txt" ||
		echo "ptdump --records: $(head -n 1 "$WORK/rec.txt")" >>"$det"
	out=$(run_limited 60 "$ptverify" "$f" 2>&1) ||
		echo "ptverify: exit $?: $out" >>"$det"
	case $out in *": ok (safetensors, "*) ;;
	*) echo "ptverify said: $out" >>"$det" ;;
	esac
	run_limited 60 "$ptdiff" "$f" "$WORK/st/$n.pt" >"$WORK/diff.txt" 2>&1 ||
		echo "ptdiff against torch.save's file: exit $?: $(tail -n 1 "$WORK/diff.txt")" >>"$det"
	if [ -s "$det" ]; then
		fail "$n: ptls, ptdump, ptverify, ptdiff" "$(head -n 1 "$det")" "$det"
	else
		pass "$n: ptls, ptdump, ptverify, ptdiff" "JSON parses, verified ok, $(tail -n 1 "$WORK/diff.txt")"
	fi
	# ------------------------------------------------------ the mount
	: >"$det"
	mnt=$WORK/mnt/$n
	if ! start_daemon "$f" "$mnt" "$WORK/$n.err" -o ro; then
		fail "$n: mounted" "not mounted: $(head -n 1 "$WORK/$n.err")"
		continue
	fi
	fs_pyrun "$n.rep" check "$inner/st" "$n" "$inner/mnt/$n" ||
		cat "$WORK/$n.rep" "$WORK/$n.rep.err" >>"$det"
	stop_daemon "$mnt" || echo "could not unmount" >>"$det"
	[ "${DRC:-0}" = 0 ] || echo "ptfs exited with status $DRC" >>"$det"
	# nothing: -o ro is what was asked for
	[ ! -s "$WORK/$n.err" ] || {
		echo "ptfs printed (expected nothing):"
		head -n 5 "$WORK/$n.err"
	} >>"$det"
	if [ -s "$det" ]; then
		fail "$n: mounted" "$(head -n 1 "$det")" "$det"
	else
		pass "$n: mounted" "$(grep "^ok$TAB" "$WORK/$n.rep" | cut -f2)"
	fi
done
fi

# ------------------------------------------------------ broken files
if want broken; then
f=$WORK/st/trail.safetensors
out=$(run_limited 60 "$ptverify" "$f" 2>&1)
rc=$?
case $rc:$out in
1:*"3 bytes after the last tensor's data"*)
	pass "trailing bytes" "ptverify exit 1: $(printf '%s\n' "$out" | head -n 1)" ;;
*)	fail "trailing bytes" "ptverify exit $rc: $out" ;;
esac
f=$WORK/st/overlap.safetensors
expect_refusal "overlapping tensors: ptfs" "$f" ""
out=$(run_limited 60 "$ptls" "$f" 2>&1)
rc=$?
case $rc:$out in
[1-9]*:"ptls: $f: offset 0x"*": tensor 'b' at data bytes [2, 6) overlaps tensor 'a'")
	pass "overlapping tensors: ptls" "exit $rc: $out" ;;
*)	fail "overlapping tensors: ptls" "exit $rc: $out" ;;
esac
fi

# ------------------------------------------------------ "__metadata__": null
if want null_metadata; then
f=$WORK/st/nullmeta.safetensors
: >"$WORK/nm.det"
for t in "$ptls" "$ptverify"; do
	run_limited 60 "$t" "$f" >"$WORK/nm.out" 2>&1 ||
		echo "${t##*/}: exit $?: $(head -n 1 "$WORK/nm.out")" >>"$WORK/nm.det"
done
mnt=$WORK/mnt/nullmeta
cp "$f" "$WORK/st/nullmeta.out.safetensors"
if start_daemon "$WORK/st/nullmeta.out.safetensors" "$mnt" "$WORK/nm.err"
then
	printf '\052' | dd of="$mnt/a" conv=notrunc 2>/dev/null ||
		echo "write to a failed" >>"$WORK/nm.det"
	run_limited 60 "$PTFS" umount "$mnt" >"$WORK/nm.out" 2>&1 ||
		echo "ptfs umount: exit $?: $(head -n 1 "$WORK/nm.out")" >>"$WORK/nm.det"
	stop_daemon "$mnt"
	fs_pyrun nm.rep nullmeta "$inner/st" ||
		cat "$WORK/nm.rep" "$WORK/nm.rep.err" >>"$WORK/nm.det"
else
	echo "not mounted: $(head -n 1 "$WORK/nm.err")" >>"$WORK/nm.det"
fi
if [ -s "$WORK/nm.det" ]; then
	fail "null __metadata__" "$(head -n 1 "$WORK/nm.det")" "$WORK/nm.det"
else
	pass "null __metadata__" "ptls, ptverify, mount; $(grep "^ok$TAB" "$WORK/nm.rep" | cut -f2)"
fi
fi

# ------------------------------------------------------ sub-byte dtypes
if want sub_byte; then
fs_pyrun sb.rep subbyte_gen "$inner/st" ||
	fail "sub-byte: generate" "$(cat "$WORK/sb.rep" "$WORK/sb.rep.err" | head -n 3)"
f=$WORK/st/sub.safetensors
out=$(run_limited 60 "$ptls" "$f" 2>&1)
case $? in
0)	if printf '%s\n' "$out" | grep -q "^f6  *F6_E2M3  *(3,)" &&
	   printf '%s\n' "$out" | grep -q "^f4odd  *F4  *(3,)" &&
	   printf '%s\n' "$out" | grep -q "^w  *float32  *(2,)"; then
		pass "sub-byte: ptls" "F6_E2M3, F4 as bytes; the F32 beside them"
	else
		fail "sub-byte: ptls" "$out"
	fi ;;
*)	fail "sub-byte: ptls" "exit $?: $out" ;;
esac
cp "$f" "$WORK/st/sub.out.safetensors"
mnt=$WORK/mnt/sub
if start_daemon "$WORK/st/sub.out.safetensors" "$mnt" "$WORK/sb.err"; then
	fs_pyrun sbm.rep subbyte "$inner/st" "$inner/mnt/sub"
	r=$?
	run_limited 60 "$PTFS" umount "$mnt" >"$WORK/sb.out" 2>&1
	u=$?
	stop_daemon "$mnt"
	if [ $r != 0 ]; then
		fail "sub-byte: mount" "$(cat "$WORK/sbm.rep" "$WORK/sbm.rep.err" | head -n 3)"
	elif [ $u != 0 ]; then
		fail "sub-byte: mount" "ptfs umount: exit $u: $(head -n 1 "$WORK/sb.out")"
	elif fs_pyrun sba.rep subbyte_after "$inner/st"; then
		pass "sub-byte: mount" "$(cut -f2 "$WORK/sbm.rep"); $(cut -f2 "$WORK/sba.rep")"
	else
		fail "sub-byte: mount" "$(cat "$WORK/sba.rep" "$WORK/sba.rep.err" | head -n 3)"
	fi
else
	fail "sub-byte: mount" "not mounted: $(head -n 1 "$WORK/sb.err")"
fi
ptrepack=$bin/ptrepack
out=$(run_limited 60 "$ptrepack" "$f" "$WORK/st/sub.pt" 2>&1)
rc=$?
case $rc:$out in
2:*"f6: torch has no dtype for safetensors' F6_E2M3"*)
	if [ -e "$WORK/st/sub.pt" ]; then
		fail "sub-byte: to torch" "refused, but sub.pt was left"
	else
		pass "sub-byte: to torch" "exit 2: $out"
	fi ;;
*)	fail "sub-byte: to torch" "exit $rc: $out" ;;
esac
if [ -f "$WORK/st/f4.safetensors" ]; then
	g=$WORK/st/f4.safetensors
	if run_limited 60 "$ptls" "$g" 2>&1 | grep -q "^f4  *float4_e2m1fn_x2  *(2, 4)" &&
	   run_limited 60 "$ptrepack" "$g" "$WORK/st/f4.pt" >"$WORK/f4.out" 2>&1 &&
	   run_limited 60 "$ptrepack" "$g" "$WORK/st/f4.same.safetensors" >>"$WORK/f4.out" 2>&1 &&
	   cmp -s "$g" "$WORK/st/f4.same.safetensors" &&
	   fs_pyrun f4.rep f4 "$inner/st"; then
		pass "F4 as float4_e2m1fn_x2" "ptls (2, 4); repacked byte for byte; $(cut -f2 "$WORK/f4.rep")"
	else
		fail "F4 as float4_e2m1fn_x2" "$(cat "$WORK/f4.out" "$WORK/f4.rep" "$WORK/f4.rep.err" 2>/dev/null | head -n 3)"
	fi
fi
fi

conclude
