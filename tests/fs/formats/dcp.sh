#!/bin/sh
# torch.distributed.checkpoint (DCP) directories through the tools and a
# real mount (docs/design.md "DCP directories").
#
#   usage: sh tests/fs/formats/dcp.sh [-k CASE] VERSION PTFS PTLS SHARED_DIR
#
# The directories are always written by torch 2.x (the chroot that
# scripts/torch2-root.sh builds): dcp_check.py gen saves them with
# torch.distributed.checkpoint.save and FileSystemWriter, one of them from
# 3 ranks and one from 4 (gloo process groups on localhost, one process a
# rank, DTensors on CPU device meshes), and writes expected.json from what
# DCP loads back; nocoll/ is rows/ saved without collectives (one
# __R.metadata per rank, no .metadata), read as one tree.  torch 1.13 has no DCP writer (nor reader): with VERSION
# "1.13" the same directories are checked with Debian's torch against that
# JSON; with "2" the check also loads them with dcp.load.  Each of plain/,
# objs/, rows/, grid/ and nocoll/ is
#
#   listed      ptls and ptls --json, ptdump --values, ptverify (ok, every
#               chunk's item and CRC-32 read; for objs/, whose deque value
#               holds a tensor, exactly its one unsafe global) given the
#               directory and its .metadata
#   mounted     every tensor's bytes (also at odd offsets across chunk
#               edges), dtype, shape, user.dcp.chunks and .npy view, and
#               every value's text, as DCP loads them; nocoll/ mounts
#               read-only with one note line, writes fail with EROFS; the
#               others are writable (dcp_write.sh writes them back): mkdir
#               and a write into a value fail with EPERM, one line each;
#               no file of the directory changes
#   one file    ptrepack DIR ONE.pt: torch.load of it gives every tensor
#               and value as DCP does (under 2.x: the same object as
#               dcp_to_torch_save's, container types and key order
#               included); grid/ also into a .safetensors, which ptdiff
#               finds equal to the directory
#   DCP again   plain/, rows/ and grid/ through ptrepack DIR NEW/ (one
#               item a tensor, gathered from the ranks' chunks) and back
#               into one .pt: as expected.json, and under 2.x
#               dcp_to_torch_save of NEW/ the same object
#
# and the other way: ptrepack topt/src.pt DIR/ (a state dict with every
# dtype, views, tied weights, a Parameter, int keys, lists of tensors,
# tuples, an empty dict and an OrderedDict's _metadata), then DIR back into
# one .pt: every leaf as DCP flattens the source, and under 2.x the
# .metadata as torch_save_to_dcp writes it, dcp_to_torch_save giving the
# same object, dcp.load the same bytes; the notes for what DCP drops;
# refusals (a tuple holding a tensor, a list, two keys that flatten alike,
# an output that is a file or a directory not empty) with one line and
# nothing made or changed;
#
# and the directory's other files (withcfg/, -k files): config.json and
# generation_config.json, a link out of the directory, a fifo and a linked
# directory beside .metadata: .ptfs/files/ of a mount and `ptrepack
# --format hf` show and copy exactly what they would of an HF folder;
#
# and two keys over one item (twokeys/, -k overlap: model.w2 given
# model.w's item): ptfs and ptls refuse it with one line naming the
# .distcp, the bytes and both keys, ptverify exits 1 naming both, nothing
# changes;
#
# and broken copies: a .metadata whose pickle would run os.system (never
# run: its marker file must not appear; ptverify exit 1 names the global),
# an item past its file's end, chunks that overlap, a hole, a missing
# .distcp, a relative_path out of the directory, a zstd item: ptfs and
# ptls refuse each with one line, ptverify reports it (exit 1 or 2); and a
# flipped byte of a chunk's data, which ptverify finds by its CRC-32.
#
# Prints one line per check and finally "N passed, N failed".  Exit 0 all
# passed, 1 a failure, 77 skipped (no usable /dev/fuse; PT_NO_TORCH2=1).
# Never leaves a mount behind.
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
ptdump=$bin/ptdump ptverify=$bin/ptverify ptrepack=$bin/ptrepack
ptdiff=$bin/ptdiff
fs_progs ptdump ptverify ptrepack ptdiff
fs_need_fuse

# the writer is torch 2.x, whatever VERSION checks
. "$fs/../torch/select.sh"
torch_select_writer "$version" "$shared" ptfs-dcp
WORK=$work
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/py" || exit 1
cp "$here/dcp_check.py" "$WORK/py/" || exit 1

probe_fuse "$sample" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

# the directories: written once per build by torch 2.x (the setup test
# fixtures_dcp: tests/fixtures/make.sh TESTENV SHARED dcp)
if [ -f "$shared/fixtures/dcp/expected.json" ] &&
    cp -a "$shared/fixtures/dcp" "$WORK/out"; then
	pass "generated (torch 2.x)" "$(cat "$shared/fixtures/dcp/.stamp")"
else
	fail "generated (torch 2.x)" "no $shared/fixtures/dcp: run the fixtures_dcp test"
	summary
	exit 1
fi
out=$WORK/out
# dcp_check.py's check and pt run under the torch being tested
FS_PY=dcp_check.py
in_=$WORK
[ "$version" = 1.13 ] || in_=$inner

mkdir -p "$WORK/one" || exit 1

sums() {	# DIR: a checksum of every file in it, names included
	(cd "$1" && find . -type f | sort | xargs sha256sum) | sha256sum
}

# ------------------------------------------------------ each directory: tools, a mount, ptrepack
if want directories; then
for n in plain objs rows grid nocoll; do
	d=$out/$n
	det=$WORK/$n.details
	: >"$det"
	before=$(sums "$d")
	# ------------------------------------------------------ the tools
	meta=$d/.metadata
	[ -f "$meta" ] || meta=$d	# nocoll/: its __R.metadata together
	for arg in "$d" "$meta"; do
		run_limited 60 "$ptls" "$arg" >"$WORK/ls.txt" 2>&1 ||
			echo "ptls $arg: exit $?: $(head -n 1 "$WORK/ls.txt")" >>"$det"
		[ "$n" != objs ] || sed -i '/^# unsafe global/d' "$WORK/ls.txt"
		grep -q "; dcp format" "$WORK/ls.txt" ||
			echo "ptls $arg: $(tail -n 1 "$WORK/ls.txt")" >>"$det"
		out1=$(run_limited 60 "$ptverify" "$arg" 2>&1)
		r=$?
		case $n:$r:$out1 in
		objs:1:*"unsafe global collections.deque"*"1 problem") ;;
		*:0:*": ok (dcp, "*) ;;
		*) echo "ptverify $arg: exit $r: $out1" >>"$det" ;;
		esac
	done
	run_limited 60 "$ptls" --json "$d" >"$WORK/ls.json" 2>>"$det" ||
		echo "ptls --json: exit $?" >>"$det"
	python3 -c 'import json, sys; json.load(open(sys.argv[1]))' \
		"$WORK/ls.json" 2>>"$det" || echo "ptls --json is not JSON" >>"$det"
	key=$(awk '$2 ~ /^(float|bfloat|int)/ { print $1; exit }' "$WORK/ls.txt")
	run_limited 60 "$ptdump" --values "$key" "$d" >"$WORK/dump.txt" 2>&1 ||
		echo "ptdump --values $key: exit $?: $(head -n 1 "$WORK/dump.txt")" >>"$det"
	if [ -s "$det" ]; then
		fail "$n: ptls, ptverify, ptdump" "$(head -n 1 "$det")" "$det"
	else
		pass "$n: ptls, ptverify, ptdump" "$(tail -n 1 "$WORK/ls.txt")"
	fi
	# ------------------------------------------------------ the mount
	: >"$det"
	mnt=$WORK/mnt/$n
	if ! start_daemon "$d" "$mnt" "$WORK/$n.err"; then
		fail "$n: mounted" "not mounted: $(head -n 1 "$WORK/$n.err")"
		continue
	fi
	fs_pyrun "$n.rep" check "$in_/out/expected.json" "$n" \
		"$in_/mnt/$n" "$in_/out/$n" ||
		cat "$WORK/$n.rep" "$WORK/$n.rep.err" >>"$det"
	stop_daemon "$mnt" || echo "could not unmount" >>"$det"
	[ "${DRC:-0}" = 0 ] || echo "ptfs exited with status $DRC" >>"$det"
	if [ $n = nocoll ]; then
		# no .metadata: read-only, with one note line
		case $(cat "$WORK/$n.err") in
		"ptfs: $d: "*read-only*) [ "$(grep -c . "$WORK/$n.err")" = 1 ] ;;
		*) false ;;
		esac || {
			echo "ptfs printed (expected only the read-only note):"
			head -n 5 "$WORK/$n.err"
		} >>"$det"
	elif grep -v '^ptfs: ' "$WORK/$n.err" | grep -q . ||
	    grep -q 'read-only' "$WORK/$n.err"; then
		# writable: the refusals' lines only (mkdir, a value)
		{
			echo "ptfs printed (expected only refusals' lines):"
			head -n 5 "$WORK/$n.err"
		} >>"$det"
	fi
	[ "$(sums "$d")" = "$before" ] ||
		echo "a file of the directory changed" >>"$det"
	if [ -s "$det" ]; then
		fail "$n: mounted" "$(head -n 1 "$det")" "$det"
	else
		pass "$n: mounted" "$(grep "^ok$TAB" "$WORK/$n.rep" | cut -f2)"
	fi
	# ------------------------------------------------------ one file
	one=$WORK/one/$n.pt
	if ! o=$(run_limited 120 "$ptrepack" "$d" "$one" 2>&1); then
		fail "$n: ptrepack into one .pt" "exit $?: $o"
		continue
	fi
	# (DCP's own reader needs a .metadata: not for nocoll/)
	dd=$in_/out/$n
	[ $n = nocoll ] && dd=
	if fs_pyrun "$n.one" pt "$in_/out/expected.json" "$n" \
		"$in_/one/$n.pt" $dd; then
		pass "$n: ptrepack into one .pt" "$(grep "^ok$TAB" "$WORK/$n.one" | cut -f2)"
	else
		fail "$n: ptrepack into one .pt" "$(head -n 1 "$WORK/$n.one.err")" "$WORK/$n.one.err"
	fi
	[ "$(sums "$d")" = "$before" ] ||
		fail "$n: ptrepack into one .pt" "a file of the directory changed"
	# ------------------------------------------------------ DCP again
	# (ranks' chunks gathered into one item a tensor; objs/'s deque
	# holds a tensor, which ptrepack refuses to pickle whole)
	case $n in plain|rows|grid) ;; *) continue ;; esac
	dd=$WORK/one/$n.dcp
	if ! o=$(run_limited 120 "$ptrepack" "$d" "$dd/" 2>&1) ||
		! o=$(run_limited 120 "$ptrepack" "$dd" "$WORK/one/$n.again.pt" 2>&1); then
		fail "$n: ptrepack into a DCP directory" "exit $?: $o"
	elif fs_pyrun "$n.again" pt "$in_/out/expected.json" "$n" \
		"$in_/one/$n.again.pt" "$in_/one/$n.dcp"; then
		pass "$n: ptrepack into a DCP directory" "and back: $(grep "^ok$TAB" "$WORK/$n.again" | cut -f2)"
	else
		fail "$n: ptrepack into a DCP directory" "$(head -n 1 "$WORK/$n.again.err")" "$WORK/$n.again.err"
	fi
done
st=$WORK/one/grid.safetensors
if ! o=$(run_limited 120 "$ptrepack" "$out/grid" "$st" 2>&1); then
	fail "grid: ptrepack into a .safetensors" "exit $?: $o"
elif o=$(run_limited 60 "$ptdiff" "$out/grid" "$st" 2>&1); then
	pass "grid: ptrepack into a .safetensors" "$(printf '%s\n' "$o" | tail -n 1)"
else
	fail "grid: ptrepack into a .safetensors" "ptdiff: $(printf '%s\n' "$o" | head -n 3)"
fi
fi

# ------------------------------------------------------ one file into DCP
if want to_dcp; then
t=$out/topt
dd=$WORK/one/todcp
if ! o=$(run_limited 120 "$ptrepack" "$t/src.pt" "$dd/" 2>&1); then
	fail "src.pt: ptrepack into a DCP directory" "exit $?: $o"
elif ! o2=$(run_limited 120 "$ptrepack" "$dd" "$WORK/one/back.pt" 2>&1); then
	fail "src.pt: ptrepack into a DCP directory" "and back: exit $?: $o2"
else
	case $o in
	*"model: the OrderedDict's own attributes left out"*"empty: an empty dict: DCP keeps no key"*)
		pass "src.pt: ptrepack into a DCP directory: notes" "$(printf '%s\n' "$o" | wc -l) lines: what DCP cannot keep" ;;
	*)	fail "src.pt: ptrepack into a DCP directory: notes" "$o" ;;
	esac
	if fs_pyrun todcp.rep todcp "$in_/out/topt/src.pt" "$in_/one/todcp" \
		"$in_/one/back.pt" "$in_/out/topt/ref"; then
		pass "src.pt: ptrepack into a DCP directory" "$(grep "^ok$TAB" "$WORK/todcp.rep" | cut -f2)"
	else
		fail "src.pt: ptrepack into a DCP directory" "$(head -n 1 "$WORK/todcp.rep.err")" "$WORK/todcp.rep.err"
	fi
	o=$(run_limited 60 "$ptverify" "$dd" 2>&1)
	case $?:$o in
	0:*": ok (dcp, "*) pass "todcp: ptverify" "$o" ;;
	*)	fail "todcp: ptverify" "$o" ;;
	esac
	# made like any directory of the user's: the umask decides
	want=$(printf '%o' $((0777 & ~0$(umask))))
	got=$(stat -c %a "$dd")
	if [ "$got" = "$want" ]; then
		pass "todcp: mode" "$got, as mkdir makes it under umask $(umask)"
	else
		fail "todcp: mode" "$got, not $want (umask $(umask))"
	fi
fi
# what DCP cannot hold, and outputs that are not new: one line, nothing made
mkdir -p "$WORK/one/full" && echo keep >"$WORK/one/full/keep" &&
	echo keep >"$WORK/one/file" || exit 1
for c in "tuple.pt:tuple:a tuple holding a tensor: DCP would pickle it whole" \
	"list.pt:list:the checkpoint is a list, not a dict" \
	"dup.pt:dup:a.b: two keys flatten to this name" \
	"src.pt:full:full: a directory that is not empty" \
	"src.pt:file:file: exists and is not a directory"; do
	f=${c%%:*} rest=${c#*:}
	o=${rest%%:*} why=${rest#*:}
	msg=$(run_limited 60 "$ptrepack" "$t/$f" "$WORK/one/$o/" 2>&1)
	r=$?
	left=$(ls -a "$WORK/one" | grep -c 'ptfs-new')
	case $r:$msg in
	2:*"$why"*)
		if [ "$left" != 0 ] || { [ $o != full ] && [ $o != file ] &&
			[ -e "$WORK/one/$o" ]; }; then
			fail "todcp refuses $f -> $o/" "something was made: $(ls -a "$WORK/one" | tr '\n' ' ')"
		elif [ "$(cat "$WORK/one/full/keep" "$WORK/one/file")" != "keep
keep" ] || [ "$(ls "$WORK/one/full")" != keep ]; then
			fail "todcp refuses $f -> $o/" "an existing file changed"
		else
			pass "todcp refuses $f -> $o/" "exit 2: $(printf '%s\n' "$msg" | tail -n 1)"
		fi ;;
	*)	fail "todcp refuses $f -> $o/" "exit $r: $msg" ;;
	esac
done
fi

# ------------------------------------------------------ the directory's other files
# withcfg/: config.json and generation_config.json beside .metadata, as a
# training script saves them; here also linked.json -> a file outside the
# directory, a fifo and a link to a directory.  Mounted, .ptfs/files/
# shows exactly what an HF folder's would (the config files and the link,
# read through with its target's owner and mode; neither the fifo nor the
# directory, nor .metadata and the .distcp), and `ptrepack --format hf`
# copies the same beside its shards, neither hanging on the fifo.
if want files; then
mkdir -p "$WORK/wc" && rm -rf "$WORK/wc/withcfg" "$WORK/wc/hf" &&
	cp -a "$out/withcfg" "$WORK/wc/" || exit 1
d=$WORK/wc/withcfg
printf '{"outside": 1}\n' >"$WORK/wc/outside.json" &&
	chmod 0640 "$WORK/wc/outside.json" &&
	ln -s ../outside.json "$d/linked.json" && ln -s .. "$d/up" &&
	mkfifo "$d/special_tokens_map.json" || exit 1
mnt=$WORK/mnt/withcfg
if ! start_daemon "$d" "$mnt" "$WORK/wc.err" -o ro; then
	fail "withcfg: .ptfs/files/" "not mounted: $(head -n 1 "$WORK/wc.err")"
elif ! o=$(run_limited 120 "$ptrepack" --format hf "$d" "$WORK/wc/hf/" 2>&1); then
	fail "withcfg: .ptfs/files/" "ptrepack --format hf: exit $?: $o"
	stop_daemon "$mnt"
else
	fs_pyrun wc.rep files "$in_/mnt/withcfg" "$in_/wc/withcfg" \
		"$in_/wc/outside.json" "$in_/wc/hf"
	r=$?
	stop_daemon "$mnt"
	if [ $r = 0 ]; then
		pass "withcfg: .ptfs/files/" "$(grep "^ok$TAB" "$WORK/wc.rep" | cut -f2)"
	else
		fail "withcfg: .ptfs/files/" "$(head -n 1 "$WORK/wc.rep.err")" "$WORK/wc.rep.err"
	fi
fi
fi

# ------------------------------------------------------ two keys over one item
# twokeys/: torch 2.x saved model.w and model.w2, then its .metadata was
# edited to give model.w2 model.w's item (issue 38).  Mounted, that was
# two tensors over the same bytes: an edit of w changed w2 for dcp.load,
# and ptverify said ok.  Now ptfs and ptls refuse it with one line naming
# the data file, the bytes and both keys, ptverify exits 1 naming both.
if want overlap; then
d=$out/twokeys
before=$(sums "$d")
line=$(ptls_line "$ptls" "$d")
case $line in
"ptfs: $d: offset "*": __0_0.distcp: item of 'model.w2' at bytes ["*") overlaps the item of 'model.w' at ["*")")
	expect_refusal "twokeys: ptfs" "$d" "$line" ;;
*)	fail "twokeys: ptfs" "ptls says: $line" ;;
esac
o=$(run_limited 60 "$ptverify" "$d" 2>&1)
r=$?
case $r:$o in
1:*": __0_0.distcp: item of 'model.w2' at bytes ["*"overlaps the item of 'model.w' at ["*": 1 problem")
	pass "twokeys: ptverify" "exit 1: $(printf '%s\n' "$o" | head -n 1)" ;;
*)	fail "twokeys: ptverify" "exit $r: $o" ;;
esac
if [ "$(sums "$d")" = "$before" ]; then
	pass "twokeys: unchanged" "no file of the directory changed"
else
	fail "twokeys: unchanged" "a file of the directory changed"
fi
fi

# ------------------------------------------------------ broken directories
if want broken; then
d=$out/evil
# its payload would touch this file (tests/fixtures/make.sh)
pwned=$shared/fixtures/dcp.PWNED
rm -f "$pwned"
out1=$(run_limited 60 "$ptverify" "$d" 2>&1)
rc=$?
"$ptls" --check "$d" >/dev/null 2>&1
crc=$?
if start_daemon "$d" "$WORK/mnt/evil" "$WORK/evil.err"; then
	ls -R "$WORK/mnt/evil" >/dev/null 2>&1
	stop_daemon "$WORK/mnt/evil"
fi
case $rc:$crc:$out1 in
1:1:*"unsafe global posix.system"*|1:1:*"unsafe global os.system"*)
	if [ -e "$pwned" ]; then
		fail "evil .metadata" "its reduce ran: the marker file exists"
	else
		pass "evil .metadata" "never run; ptls --check exit 1; ptverify: $(printf '%s\n' "$out1" | head -n 1)"
	fi ;;
*)	fail "evil .metadata" "ptverify exit $rc, ptls --check exit $crc: $out1" ;;
esac

# NAME REFUSAL-TEXT VERIFY-STATUS VERIFY-TEXT
broken() {
	d=$out/$1
	expect_refusal "$1: ptfs" "$d" ""
	o=$(run_limited 60 "$ptls" "$d" 2>&1)
	r=$?
	case $r:$o in
	2:"ptls: $d: "*"$2"*) pass "$1: ptls" "exit 2: $o" ;;
	*)	fail "$1: ptls" "exit $r: $o" ;;
	esac
	o=$(run_limited 60 "$ptverify" "$d" 2>&1)
	r=$?
	case $r:$o in
	"$3":*"$4"*) pass "$1: ptverify" "exit $r: $(printf '%s\n' "$o" | head -n 1)" ;;
	*)	fail "$1: ptverify" "exit $r: $o" ;;
	esac
}
broken pastend "runs past the end of the file" 1 "__0_0.distcp: item of 'layer.rows'"
broken overlap "chunk at (0, 2) has no item" 1 "chunks at (0, 0) and (0, 2) overlap"
broken hole "its chunks leave 6 of its 42 elements uncovered" 1 "6 of its 42 elements uncovered"
broken missing "__2_0.distcp: No such file or directory" 1 "__2_0.distcp: No such file or directory"
broken escape "relative_path '../rows/__0_0.distcp' is not a file name" 2 "is not a file name in the directory"
broken zstd "transform 'stream.zstd/1'" 2 "not supported"
# a flipped data byte: it mounts (reads check no CRC), ptverify tells
d=$out/crc
o=$(run_limited 60 "$ptverify" "$d" 2>&1)
r=$?
case $r:$o in
1:*"chunk of 'layer.cube': CRC-32 "*", its record says "*)
	pass "crc: ptverify" "exit 1: $(printf '%s\n' "$o" | head -n 1)" ;;
*)	fail "crc: ptverify" "exit $r: $o" ;;
esac
fi

conclude
