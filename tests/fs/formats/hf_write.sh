#!/bin/sh
# Hugging Face sharded folders written back through a mount
# (docs/design.md "Writing a sharded folder back").
#
#   usage: sh tests/fs/formats/hf_write.sh [-k CASE] VERSION PTFS
#
# VERSION "1.13" or "2": the torch that writes the folders (hf_check.py
# gen) and loads them afterwards.  For bin/ (torch.save shards) and st/
# (safetensors shards):
#
#   edit        through the mount, 4 bytes into a tensor of shard 2 and a
#               whole rewrite of one of shard 4; a directory and two
#               attribute changes fail with EPERM; `ptfs umount` writes
#               back
#   written     the folder as transformers loads it (index, then shards)
#               holds exactly the edited bytes; shards 2 and 4 have new
#               names (.g1), the old files are gone, the others and the
#               folder's other files are byte for byte the same, the index
#               differs in those names only; no temporary or overlay left
#   again       a second edit of shards 2 and 4 gives them their first
#               names back
#   keys        a key of shard 3 renamed, one of shard 4 removed, a new
#               tensor added (it goes to shard 5, its nearest sibling's),
#               4 bytes of shard 1 edited; a directory and a dtype change
#               EPERM: torch loads exactly that, the index is still in
#               transformers' style with total_size counted again, shard
#               2 is the same file
#
# An index written compact, keys unsorted, keeps that style and order
# through a reshape.  Then mixed/'s legacy shard refuses writes (EPERM),
# a newer save into the mounted folder (shards and index rewritten in
# place) makes `ptfs umount` fail with one line and write nothing, and
# -o discard drops the edits; -o inplace and -o output= are refused with
# one line, and a crash test
# across files: the daemon kills itself (faultinj.c's KILL) at each step
# of the commit (syncing the 1st new shard, the 2nd, the index rename,
# removing an old shard; the last two also with keys changed).  Each
# time the folder must load as the old one or the new one, never a mix
# (old before the rename, new after); a remount removes the files the
# killed write-back left (new shards before the rename, old ones after)
# and shows the edits; its unmount writes them back and leaves no file
# behind.  A file the killed write-back made and another program then
# replaced (a new inode under the journaled name) is left alone, and so
# are shards in use that planted journal records name; a record naming a
# file outside the folder makes the mount refuse with one line.
#
# Prints one line per check and finally "N passed, N failed".  Exit 0 all
# passed, 1 a failure, 77 skipped (no usable /dev/fuse; no torch with
# PT_ALLOW_SKIP_TORCH=1).  Never leaves a mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS" 2 2 "$@"
PTFS=$2
sample=$fs/../data/sample.pt
fs_progs PTFS
fs_need_fuse

fs_torch "" ptfs-hfwrite
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/hf" || exit 1
fs_py hf_write_check.py hf_check.py st_check.py

probe_fuse "$sample" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

FS_PY=hf_check.py
if ! fs_pyrun gen.rep gen "$inner/hf"; then
	fail "generate" "hf_check.py gen failed under torch $version" \
		"$WORK/gen.rep.err"
	summary
	exit 1
fi
FS_PY=hf_write_check.py
H=$WORK/hf M=$WORK/mnt/m IM=$inner/mnt/m

# files DIR: every file of DIR but shards and the index, with its sha256
files() {
	(cd "$1" && find . -type f ! -name '*.bin' ! -name '*.safetensors' \
		! -name '*.index*.json' | sort | xargs sha256sum)
}
# shards DIR: each shard file's name and sha256
shards() {
	(cd "$1" && ls | grep -E '\.(bin|safetensors)$' | xargs sha256sum)
}
# leftovers DIR: temporaries in DIR, an overlay beside it
leftovers() {
	ls -A "$1" | grep -e '\.ptfs-new\.' | tr '\n' ' '
	ls -A "$(dirname "$1")" | grep -x "\.$(basename "$1")\.ptfs" | tr '\n' ' '
}
# report NAME: the first line of $WORK/NAME (or its .err)
report() {
	grep "^ok$TAB" "$WORK/$1" | cut -f2
}
why() {
	head -n 1 "$WORK/$1"
	head -n 2 "$WORK/$1.err"
}

# ------------------------------------------------------ edits written back
if want written_back; then
for n in bin st; do
	F=$H/w$n
	cp -r "$H/$n" "$F" || exit 1
	idx=$(cd "$F" && ls *.index*.json)
	cp "$F/$idx" "$WORK/$n.index0"
	files "$F" >"$WORK/$n.files0"
	shards "$F" >"$WORK/$n.shards0"
	if ! start_daemon "$F" "$M" "$WORK/$n.err"; then
		fail "$n: mount" "$(head -n 1 "$WORK/$n.err")"
		continue
	fi
	if fs_pyrun "$n.edit" edit "$IM" "$inner/$n.json" refusals; then
		pass "$n: edit" "$(report "$n.edit")"
	else
		fail "$n: edit" "$(why "$n.edit")"
	fi
	out=$(run_limited 120 "$PTFS" umount "$M" 2>&1)
	r=$?
	stop_daemon "$M"
	case $r:$out in
	0:"written back: 2 tensors changed; "*" bytes to $F"*) ;;
	*) fail "$n: ptfs umount" "exit $r: $out" ;;
	esac
	det=$WORK/$n.det
	: >"$det"
	fs_pyrun "$n.written" written "$inner/hf/w$n" "$inner/$n.json" \
		"$inner/$n.index0" || why "$n.written" >>"$det"
	files "$F" | cmp -s - "$WORK/$n.files0" ||
		echo "the folder's other files changed" >>"$det"
	# shards 1, 3 and 5 are the same files; 2 and 4 have .g1 names
	shards "$F" >"$WORK/$n.shards1"
	kept=$(grep -v -e '-00002-' -e '-00004-' "$WORK/$n.shards0")
	[ "$(grep -v -e '-00002-' -e '-00004-' "$WORK/$n.shards1")" = "$kept" ] ||
		echo "shards 1, 3, 5 changed" >>"$det"
	[ "$(grep -c '\.g1\.' "$WORK/$n.shards1")" = 2 ] ||
		echo "not two .g1 shards: $(cut -c67- "$WORK/$n.shards1" | tr '\n' ' ')" >>"$det"
	[ -z "$(leftovers "$F")" ] || echo "left: $(leftovers "$F")" >>"$det"
	if [ -s "$det" ]; then
		fail "$n: written back" "$(head -n 1 "$det")" "$det"
	else
		pass "$n: written back" "$(report "$n.written")"
	fi
	# a second write-back of shards 2 and 4: their first names again
	cp "$F/$idx" "$WORK/$n.index1"
	if start_daemon "$F" "$M" "$WORK/$n.err2" &&
	    fs_pyrun "$n.edit2" edit "$IM" "$inner/$n.json2" &&
	    stop_daemon "$M" && [ "$DRC" = 0 ] &&
	    fs_pyrun "$n.written2" written "$inner/hf/w$n" \
		"$inner/$n.json2" "$inner/$n.index1"; then
		s=$(cd "$F" && ls | grep -e '-00002-' -e '-00004-' | tr '\n' ' ')
		case $s in
		*-00002-of-00005.bin" "*-00004-of-00005.bin" "|*-00002-of-00005.safetensors" "*-00004-of-00005.safetensors" ")
			pass "$n: again" "shards now: $s" ;;
		*)	fail "$n: again" "shards now: $s" ;;
		esac
	else
		stop_daemon "$M"
		fail "$n: again" "$(why "$n.written2")$(why "$n.edit2")"
	fi
	# keys renamed, removed and added: the shards holding them anew
	cp "$F/$idx" "$WORK/$n.index2"
	shards "$F" >"$WORK/$n.shards2"
	if start_daemon "$F" "$M" "$WORK/$n.err3" &&
	    fs_pyrun "$n.reshape" reshape "$IM" "$inner/$n.json3" &&
	    stop_daemon "$M" && [ "$DRC" = 0 ] &&
	    fs_pyrun "$n.written3" written "$inner/hf/w$n" \
		"$inner/$n.json3" "$inner/$n.index2"; then
		# shard 2 has no key that changed: the same file
		same2=$(grep -e '-00002-' "$WORK/$n.shards2")
		if [ "$(shards "$F" | grep -e '-00002-')" = "$same2" ] &&
		    [ -z "$(leftovers "$F")" ]; then
			pass "$n: keys renamed, removed, added" "$(report "$n.reshape"); $(report "$n.written3")"
		else
			fail "$n: keys renamed, removed, added" "shard 2 changed, or left: $(leftovers "$F")"
		fi
	else
		stop_daemon "$M"
		fail "$n: keys renamed, removed, added" "$(why "$n.reshape")$(why "$n.written3")"
	fi
done

# an index in another style (compact, keys unsorted, metadata last) keeps
# it: the order of its keys, the new one last, no blanks
F=$H/compact
cp -r "$H/bin" "$F" && cp "$H/bin/pytorch_model.bin.index.json" "$WORK/c.index0"
if fs_pyrun c.rep compact "$inner/hf/compact" &&
    cp "$F/pytorch_model.bin.index.json" "$WORK/c.index1" &&
    start_daemon "$F" "$M" "$WORK/c.err" &&
    fs_pyrun c.reshape reshape "$IM" "$inner/c.json" &&
    stop_daemon "$M" && [ "$DRC" = 0 ] &&
    fs_pyrun c.written written "$inner/hf/compact" "$inner/c.json" \
	"$inner/c.index1"; then
	pass "compact index: its style kept" "$(report c.written)"
else
	stop_daemon "$M"
	fail "compact index: its style kept" "$(why c.rep)$(why c.reshape)$(why c.written)"
fi
fi

# ------------------------------------------------------ refusals
# mixed/: shard 1 is a legacy (torch < 1.6) file, not written back
# ------------------------------------------------------ .npy views
# a whole np.save of the same dtype and shape into KEY.npy is a write of
# the tensor's bytes, as a write of KEY is: written back, read again
if want npy; then
DET=$WORK/npy.det
: >"$DET"
for n in bin st; do
	F=$H/n$n
	cp -r "$H/$n" "$F" || exit 1
	if start_daemon "$F" "$M" "$WORK/npy$n.err"; then
		k=
		for f in "$M"/*; do
			[ -f "$f" ] || continue
			case $(getfattr --only-values -n user.dtype "$f" 2>/dev/null) in
			float32|float16) k=${f##*/}; break ;;
			esac
		done
		[ -n "$k" ] || echo "no float tensor in the mount" >>"$DET"
		[ -z "$k" ] || /usr/bin/python3 -c '
import sys, numpy as np
p, out = sys.argv[1], sys.argv[2]
a = np.load(p + ".npy")
assert a.tobytes() == open(p, "rb").read(), "the view is not the file"
b = (a + 1).astype(a.dtype)
np.save(p + ".npy", b)
open(out, "wb").write(b.tobytes())
' "$M/$k" "$WORK/npy$n.want" 2>>"$DET" || echo "np.save of $k.npy failed" >>"$DET"
		out=$(run_limited 120 "$PTFS" umount "$M" 2>&1)
		r=$?
		stop_daemon "$M"
		case $r:$out in
		0:"written back: "[12]" tensor"*" changed; "*) ;;	# (bin/ ties two)
		*) echo "ptfs umount: exit $r: $out" >>"$DET" ;;
		esac
		if [ -n "$k" ] && start_daemon "$F" "$M" "$WORK/npy$n.err2" -o ro; then
			cmp -s "$M/$k" "$WORK/npy$n.want" ||
				echo "$k after write-back: not the bytes np.save wrote" >>"$DET"
			stop_daemon "$M"
		fi
		[ -z "$(leftovers "$F")" ] || echo "left: $(leftovers "$F")" >>"$DET"
	else
		echo "not mounted: $(head -n 1 "$WORK/npy$n.err")" >>"$DET"
	fi
	check "$n: np.save into KEY.npy written back" "$k"
done
fi

if want refusals; then
X=$H/mixed
shards "$X" >"$WORK/mixed.sums0"
if start_daemon "$X/pytorch_model.bin.index.fp16.json" "$M" "$WORK/mixed.err"; then
	k=
	for f in "$M"/*; do
		case $(getfattr --only-values -n user.shard "$f" 2>/dev/null) in
		*-00001-of-*) k=${f##*/}; break ;;
		esac
	done
	if [ -n "$k" ] && fs_pyrun mixed.rep legacy "$IM" "$k"; then
		pass "mixed: legacy shard" "$(report mixed.rep)"
	else
		fail "mixed: legacy shard" "key '$k': $(why mixed.rep)"
	fi
	stop_daemon "$M"
	shards "$X" | cmp -s - "$WORK/mixed.sums0" ||
		fail "mixed: unchanged" "its shards changed"
else
	fail "mixed: mount" "$(head -n 1 "$WORK/mixed.err")"
fi
# a newer save into the mounted folder (save_pretrained rewrites each
# shard in place and the index after them) while edits are staged:
# `ptfs umount` writes nothing and says so in one line, without advising
# -o output= (refused for a folder); the mount and the edits stay, and
# -o discard drops them; the new save's files are left as written
F=$H/stale
cp -r "$H/bin" "$F" || exit 1
det=$WORK/stale.det
: >"$det"
if start_daemon "$F" "$M" "$WORK/stale.err"; then
	fs_pyrun stale.edit edit "$IM" "$inner/stale.json" ||
		why stale.edit >>"$det"
	for f in "$F"/*.bin "$F"/*.index.json; do
		cat "$f" >"$WORK/stale.tmp" && cat "$WORK/stale.tmp" >"$f"
	done
	stale_check "$F" "$M" "$det"
	[ -z "$(leftovers "$F")" ] || echo "left: $(leftovers "$F")" >>"$det"
else
	echo "not mounted: $(head -n 1 "$WORK/stale.err")" >>"$det"
fi
if [ -s "$det" ]; then
	fail "a newer save while mounted" "$(head -n 1 "$det")" "$det"
else
	pass "a newer save while mounted" "ptfs umount: exit 1, one line, the mount kept; the new save's files as written; -o discard drops the edits"
fi

sums0=$(shards "$H/bin")
for o in inplace output=$WORK/one.pt; do
	mkdir -p "$WORK/mnt/r"
	out=$(run_limited 30 "$PTFS" -o "$o" "$H/bin" "$WORK/mnt/r" 2>&1)
	r=$?
	case $r:$out in
	[1-9]*:"ptfs: $H/bin: -o ${o%%=*} refused: a sharded folder is written back into itself"*)
		if [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] &&
		    ! is_mounted "$WORK/mnt/r" && [ ! -e "$WORK/one.pt" ] &&
		    [ "$(shards "$H/bin")" = "$sums0" ]; then
			pass "-o ${o%%=*} refused" "exit $r: $out"
		else
			fail "-o ${o%%=*} refused" "not one line, or something changed: $out"
		fi ;;
	*)	fail "-o ${o%%=*} refused" "exit $r: $out" ;;
	esac
	unmount "$WORK/mnt/r"
done
fi

# ------------------------------------------------------ crash across files
if want crash; then
if ! faultinj_ready; then
	skip "crash across files" "$FAULTINJ_WHY"
	conclude
	exit
fi
# STEP|RULE|STATE|EDIT: where the kill lands, what the folder must hold
for c in "1st new shard synced|sync 00002-of-00005.g1.bin 1 KILL|old|edit" \
	"2nd new shard synced|sync 00004-of-00005.g1.bin 1 KILL|old|edit" \
	"index rename|rename .ptfs-new. 1 KILL|old|edit" \
	"old shard removed|unlink 00002-of-00005.bin 1 KILL|new|edit" \
	"index rename, keys changed|rename .ptfs-new. 1 KILL|old|reshape" \
	"old shard removed, keys changed|unlink 00004-of-00005.bin 1 KILL|new|reshape"; do
	step=${c%%|*} rest=${c#*|}
	rule=${rest%%|*} rest=${rest#*|}
	want=${rest%|*} how=${rest#*|}
	F=$H/crash
	rm -rf "$F" "$H/.crash.ptfs"
	cp -r "$H/bin" "$F" || exit 1
	: >"$CTL"
	det=$WORK/crash.det
	: >"$det"
	if ! LD_PRELOAD=$INJ start_daemon "$F" "$M" "$WORK/crash.err"; then
		fail "crash at $step" "not mounted: $(head -n 1 "$WORK/crash.err")"
		continue
	fi
	fs_pyrun crash.edit "$how" "$IM" "$inner/crash.json" ||
		why crash.edit >>"$det"
	killed_umount "$M" "$rule" "$det"
	fs_pyrun crash.state state "$inner/hf/crash" "$inner/crash.json"
	got=$(grep -x -e old -e new -e mixed "$WORK/crash.state")
	[ "$got" = "$want" ] ||
		echo "after the kill the folder holds '$got', not '$want': $(why crash.state)" >>"$det"
	# the next mount shows the edits, its unmount writes them back
	if start_daemon "$F" "$M" "$WORK/crash.err2"; then
		fs_pyrun crash.shows shows "$IM" "$inner/crash.json" ||
			why crash.shows >>"$det"
		# what the killed write-back left is gone: new shards the
		# index does not name, or the old ones it replaced
		named=$(grep -o '"[^"]*\.bin"' "$F/pytorch_model.bin.index.json" |
			tr -d '"' | sort -u)
		[ "$(cd "$F" && ls | grep '\.bin$')" = "$named" ] ||
			echo "after the remount: shard files $(cd "$F" && ls | grep '\.bin$' | tr '\n' ' ')" >>"$det"
		stop_daemon "$M"
		[ "$DRC" = 0 ] || echo "remount: ptfs exited $DRC" >>"$det"
	else
		echo "no remount: $(head -n 1 "$WORK/crash.err2")" >>"$det"
	fi
	cp "$H/bin/pytorch_model.bin.index.json" "$WORK/crash.index0"
	fs_pyrun crash.written written "$inner/hf/crash" "$inner/crash.json" \
		"$inner/crash.index0" || why crash.written >>"$det"
	[ -z "$(leftovers "$F")" ] || echo "left: $(leftovers "$F")" >>"$det"
	if [ -s "$det" ]; then
		fail "crash at $step" "$(head -n 1 "$det")" "$det"
	else
		pass "crash at $step" "the folder was $got; remounted, written back: $(report crash.written)"
	fi
done

# a file the killed write-back made, replaced by another program (a new
# inode under the journaled name): not ptfs's any more, so the remount
# leaves it, and the write-back takes the next name
F=$H/crash
rm -rf "$F" "$H/.crash.ptfs"
cp -r "$H/bin" "$F" || exit 1
g1=$F/pytorch_model-00002-of-00005.g1.bin
: >"$CTL"
det=$WORK/foreign.det
: >"$det"
if LD_PRELOAD=$INJ start_daemon "$F" "$M" "$WORK/foreign.err"; then
	fs_pyrun foreign.edit edit "$IM" "$inner/foreign.json" ||
		why foreign.edit >>"$det"
	printf '%s\n' "sync 00002-of-00005.g1.bin 1 KILL" >"$CTL"
	run_limited 120 "$PTFS" umount "$M" >/dev/null 2>&1
	stop_daemon "$M"
	: >"$CTL"
	if [ -f "$g1" ] && cp "$g1" "$g1.x" && mv "$g1.x" "$g1"; then
		start_daemon "$F" "$M" "$WORK/foreign.err2" ||
			echo "no remount" >>"$det"
		[ -f "$g1" ] || echo "the remount removed the other program's file" >>"$det"
		stop_daemon "$M"
		grep -q '"pytorch_model-00002-of-00005.g2.bin"' \
			"$F/pytorch_model.bin.index.json" ||
			echo "shard 2 is not .g2 in the index" >>"$det"
		[ -f "$g1" ] || echo "the write-back removed the other program's file" >>"$det"
		fs_pyrun foreign.state state "$inner/hf/crash" "$inner/foreign.json"
		grep -qx new "$WORK/foreign.state" ||
			echo "the folder does not hold the edits: $(why foreign.state)" >>"$det"
	else
		echo "no .g1 file after the kill" >>"$det"
	fi
else
	echo "not mounted: $(head -n 1 "$WORK/foreign.err")" >>"$det"
fi
if [ -s "$det" ]; then
	fail "a journaled file replaced by another program" "$(head -n 1 "$det")" "$det"
else
	pass "a journaled file replaced by another program" "left alone by the remount and the write-back (shard 2 is .g2 now)"
fi

# records in the journal that name what ptfs did not make (a journal is
# the user's own file, but never a reason to remove a shard in use): a
# "new file" record naming shard 1 and a "retired" one naming shard 3,
# each with its real dev and ino, and no commit: both stay.  A record
# naming a file outside the folder is refused with one line.
jt() { python3 "$fs/lib/journal_tool.py" "$@"; }
for case in inuse outside; do
	F=$H/hostile
	rm -rf "$F" "$H/.hostile.ptfs"
	cp -r "$H/bin" "$F" || exit 1
	J=$H/.hostile.ptfs/ptfs.journal
	det=$WORK/hostile.det
	: >"$det"
	if ! start_daemon "$F" "$M" "$WORK/hostile.err" ||
	    ! fs_pyrun hostile.edit edit "$IM" "$inner/hostile.json" ||
	    ! kill9 "$M" || [ ! -f "$J" ]; then
		fail "journal naming others' files: $case" "no journal to plant records in"
		continue
	fi
	s1=$F/pytorch_model-00001-of-00005.bin s3=$F/pytorch_model-00003-of-00005.bin
	sums=$(shards "$F")
	if [ $case = inuse ]; then
		jt append "$J" N "${s1##*/}" $(stat -c '%d %i' "$s1")
		jt append "$J" O "${s3##*/}" $(stat -c '%d %i' "$s3")
		if start_daemon "$F" "$M" "$WORK/hostile.err2"; then
			[ -f "$s1" ] && [ -f "$s3" ] ||
				echo "the remount removed a shard in use" >>"$det"
			fs_pyrun hostile.shows shows "$IM" "$inner/hostile.json" ||
				why hostile.shows >>"$det"
			stop_daemon "$M"
			fs_pyrun hostile.state state "$inner/hf/hostile" \
				"$inner/hostile.json"
			grep -qx new "$WORK/hostile.state" ||
				echo "not written back: $(why hostile.state)" >>"$det"
		else
			echo "no remount: $(head -n 1 "$WORK/hostile.err2")" >>"$det"
		fi
	else
		echo outside >"$H/outside.bin"
		jt append "$J" N ../outside.bin $(stat -c '%d %i' "$H/outside.bin")
		mkdir -p "$WORK/mnt/r"
		out=$(run_limited 30 "$PTFS" "$F" "$WORK/mnt/r" 2>&1)
		r=$?
		case $r:$out in
		[1-9]*:"ptfs: "*"bad data file record"*) ;;
		*) echo "mounted anyway, or said: $out" >>"$det" ;;
		esac
		[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] ||
			echo "more than one line: $out" >>"$det"
		unmount "$WORK/mnt/r"
		[ -f "$H/outside.bin" ] || echo "the file outside was removed" >>"$det"
		[ "$(shards "$F")" = "$sums" ] || echo "the folder changed" >>"$det"
	fi
	if [ -s "$det" ]; then
		fail "journal naming others' files: $case" "$(head -n 1 "$det")" "$det"
	else
		pass "journal naming others' files: $case" "$([ $case = inuse ] && echo "shards 1 and 3 kept, the edits written back" || echo "refused: $out")"
	fi
done
fi

# every daemon's stderr: refusals' one-line reasons only, no sanitizer
check_daemon_logs

conclude
