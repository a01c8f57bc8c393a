#!/bin/sh
# Per-rank shard sets written back through a mount (docs/design.md
# "Per-rank shard sets"): a same-size edit of a tensor goes back into the
# rank files that hold its bytes, each written whole under a temporary
# beside it and renamed over it once the overlay's journal holds the plan
# of renames, the commit point.
#
#   usage: sh tests/fs/formats/ranks_write.sh [-k CASE] VERSION PTFS PTLS TESTENV
#
# The sets are the fixtures_ranks setup test's (torch 2.x, in
# TESTENV/fixtures/ranks), copied here; VERSION "1.13" or "2" is the
# torch that loads what was written.  Each case edits through a mount
# with dd conv=notrunc and writes back with `ptfs umount`:
#
#   shard0    4 bytes of dt_4's s0 (Shard(0), 2 rows a rank) inside rank
#             1's piece: rank 1's file alone is written anew
#   edge      8 bytes across s0's edge between ranks 0 and 1: those two
#   rep       4 bytes of rep (Replicate()): every rank holds it, all four
#             files change
#   gridrep   4 bytes in row 2 of gridrep ((Shard(0), Replicate()) on a
#             2x2 mesh): ranks 2 and 3, which both hold that row
#   adam      4 bytes of fsdp2_2's optimizer state/0/exp_avg (the set
#             given as DIR/optim_world_size_2_rank_*.pt): optim rank 0's
#             file alone, the model_ files untouched
#   step      4 bytes of fsdp2_4's state/0/step, a plain tensor (no
#             DTensor: each rank saved its own): all four optim files
#   fsdp1     4 bytes of fsdp1_2's 0.weight (FSDP1's SHARDED_STATE_DICT:
#             a ShardedTensor) and of its optimizer's exp_avg: the rank 0
#             files
#
# Then only the files named changed (the others' sha256 the same), each
# rank file loads with torch.load and has every CRC-32 right, ptverify of
# the set is clean (no disagreement, every record), every rank's copy
# holds the edit (rep, gridrep, step), `ptrepack SET ONE.pt` loads as the
# fixture's expected object with the same edit made in python, and no
# temporary or overlay is left.
#
#   refusals  a rename, an rm, a truncation (a size change), a value, a
#             new file, mkdir and user.dtype fail when made (EPERM,
#             EINVAL), one line each in the daemon's log; nothing written
#   newer_save  the rank files saved again in place while an edit is
#               staged: `ptfs umount` writes nothing, one line;
#               -o discard drops the edit
#   planted   a rename plan planted in the journal of a killed mount:
#             one naming a file out of the folder, or a rank file that is
#             neither the old nor the new one, refuses the mount with one
#             line and renames nothing; one whose files are all old and
#             whose temporary is gone (a write-back that undid itself) is
#             ignored, the edit still staged and then written
#   packed    a set whose rank 1 file has deflated records mounts
#             read-only with one note line: its bytes cannot be patched
#             where they lie
#   crash     faultinj.c KILLs the daemon in edge's write-back: syncing
#             the first temporary, the second, at the journaled commit
#             (the sync of the plan's record) and at the second rename.
#             Before any remount the rank files are all old, or after
#             the first rename rank 0 new and rank 1 old (the window the
#             design admits); the remount leaves them all new (rolled
#             forward) or, killed before the commit, all old with the
#             edit staged, which its `ptfs umount` writes.  Never a mix
#             after the remount, no temporary left, the remount shows the
#             edit, and the set is all new and clean at the end.  Then
#             the second rename fails (EIO) after the commit: `ptfs
#             umount` says so in one line, the mount takes no more edits,
#             -o ro refuses the mix with one line, the next mount
#             finishes it.
#
# Prints one line per check and finally "N passed, N failed".  Exit 0 all
# passed, 1 a failure, 77 skipped (no usable /dev/fuse).  Never leaves a
# mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS TESTENV" 4 4 "$@"
PTFS=$2 ptls=$3 testenv=$4
sample=$fs/../data/sample.pt
fs_progs PTFS ptls
bin=$(dirname "$ptls")
ptverify=$bin/ptverify ptrepack=$bin/ptrepack
fs_progs ptverify ptrepack
fs_need_fuse
fs_torch "" ptfs-rankswrite
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
DET=$WORK/details
: >"$DET"
mkdir -p "$WORK/mnt" "$WORK/w" || exit 1
fs_py ranks_write_check.py ranks_check.py
probe_fuse "$sample" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

fx=$testenv/fixtures/ranks
for n in dt_4 fsdp2_2 fsdp2_4; do
	[ -f "$fx/$n/expected_model.pt" ] || {
		fail "fixtures" "no $fx/$n: run the fixtures_ranks test"
		summary
		exit 1
	}
done
W=$WORK/w IW=$inner/w M=$WORK/mnt/m

# report NAME: the summary of $WORK/NAME's ok line
report() {
	grep "^ok$TAB" "$WORK/$1" | cut -f2
}
# why NAME: what python said in $WORK/NAME and its .err
why() {
	grep -hv 'UCX\|cpuinfo\|device_mesh\|^ok' "$WORK/$1" "$WORK/$1.err" \
		2>/dev/null | head -n 2 | tr '\n' ' '
}
# sums DIR: each rank file's sha256
sums() {
	(cd "$1" && sha256sum ./*_rank_*.pt)
}
# changed DIR SUMS: the rank files whose bytes differ from the file SUMS
changed() {
	sums "$1" | diff "$2" - | sed -n 's/^> [0-9a-f]*  \.\///p' | tr '\n' ' '
}
# leftovers DIR: temporaries in DIR, an overlay in it (a pattern's) or
# beside it (the folder's)
leftovers() {
	ls -A "$1" | grep -e 'ptfs-new' -e '\.ptfs$' | tr '\n' ' '
	ls -A "$(dirname "$1")" | grep -x "\.$(basename "$1")\.ptfs" | tr '\n' ' '
}
# setarg DIR PREFIX N: how the set in DIR is given: the folder when it
# holds one set (dt_4), else the pattern (fsdp*: model_ and optim_)
setarg() {
	if [ "$(ls "$1" | grep -c '_rank_0\.pt$')" = 1 ]; then
		echo "$1"
	else
		echo "$1/$2_world_size_$3_rank_*.pt"
	fi
}
# clean LABEL DIR PREFIX N: the set loads rank file by rank file and
# ptverify finds nothing (notes otherwise).  FSDP1's files: their
# ShardedTensors rebuild only in a process group (loaded with stand-ins),
# and each file's getattr global is all ptverify may name, as in the
# fixture
clean() {
	case $2 in */fsdp1*) _how=standin ;; *) _how= ;; esac
	fs_pyrun "$1.load" load "$IW/${2##*/}" "$3" "$4" $_how ||
		note "rank files: $(why "$1.load")"
	_v=$(run_limited 60 "$ptverify" "$(setarg "$2" "$3" "$4")" 2>&1)
	_r=$?
	case $_how:$_r in
	standin:1) _v=$(printf '%s\n' "$_v" | grep -v -e \
		': unsafe global __builtin__.getattr in data.pkl: ' -e ': [0-9]* problems$') ;;
	*:0) ;;
	*) note "ptverify: exit $_r: $_v" ;;
	esac
	case $_how:$_v in
	*": ok (ranks, "*|standin:) ;;
	*) note "ptverify: $_v" ;;
	esac
}

# round CASE SET PREFIX N WANT KEY OFF TEXT [HOW]: fixture SET copied,
# mounted, TEXT written at byte OFF of KEY, `ptfs umount`; WANT the rank
# files that must change (names, each followed by a blank); HOW: how
# every rank's copy of KEY is checked (ranks_write_check.py copies)
round() {
	k=$1 set=$2 p=$3 n=$4 want=$5 key=$6 off=$7 text=$8 how=${9:-}
	D=$W/$k
	rm -rf "$D" "$W/.$k.ptfs"
	cp -r "$fx/$set" "$D" || exit 1
	arg=$(setarg "$D" "$p" "$n")
	sums "$D" >"$WORK/$k.sums"
	if start_daemon "$arg" "$M" "$WORK/$k.err"; then
		printf '%s' "$text" | dd of="$M/$key" bs=1 seek="$off" \
			conv=notrunc status=none 2>>"$DET" ||
			note "dd into $key failed"
		o=$(run_limited 120 "$PTFS" umount "$M" 2>&1)
		r=$?
		stop_daemon "$M"
		case $r:$o in
		0:"written back: 1 tensor changed; "*" bytes to "*) ;;
		*) note "ptfs umount: exit $r: $o" ;;
		esac
		[ "${DRC:-0}" = 0 ] || note "ptfs exited with status $DRC"
		[ ! -s "$WORK/$k.err" ] ||
			note "the daemon said: $(head -n 1 "$WORK/$k.err")"
	else
		note "not mounted: $(head -n 1 "$WORK/$k.err")"
	fi
	got=$(changed "$D" "$WORK/$k.sums")
	[ "$got" = "$want" ] || note "rank files changed: '$got', not '$want'"
	clean "$k" "$D" "$p" "$n"
	fs_pyrun "$k.exp" expect "$IW/$k/expected_$p.pt" "$IW/$k.exp.pt" \
		"$key@$off=$text" || note "the expected object: $(why "$k.exp")"
	o=$(run_limited 60 "$ptrepack" "$arg" "$W/$k.one.pt" 2>&1) ||
		note "ptrepack: exit $?: $o"
	fs_pyrun "$k.check" check "$IW/$k.one.pt" "$IW/$k.exp.pt"
	r=$(tail -n 1 "$WORK/$k.check")
	[ "$r" = same ] || note "torch.load of ptrepack's file: $r $(why "$k.check")"
	if [ -n "$how" ]; then
		fs_pyrun "$k.copies" copies "$IW/$k" "$p" "$n" "$key" \
			"$IW/$k.exp.pt" "$how" || note "$(why "$k.copies")"
	fi
	[ -z "$(leftovers "$D")" ] || note "left: $(leftovers "$D")"
	check "$k: written back" "changed $got(the others the same); $(report "$k.load"); ptverify ok; ptrepack's file is the expected object with the edit${how:+; $(report "$k.copies")}"
}

# ------------------------------------------------------ edits
if want shard0; then
	round shard0 dt_4 model 4 'model_world_size_4_rank_1.pt ' s0 28 ABCD
fi
if want edge; then
	round edge dt_4 model 4 \
		'model_world_size_4_rank_0.pt model_world_size_4_rank_1.pt ' \
		s0 20 ABCDEFGH
fi
if want rep; then
	round rep dt_4 model 4 \
		'model_world_size_4_rank_0.pt model_world_size_4_rank_1.pt model_world_size_4_rank_2.pt model_world_size_4_rank_3.pt ' \
		rep 4 ABCD rep
fi
if want gridrep; then
	round gridrep dt_4 model 4 \
		'model_world_size_4_rank_2.pt model_world_size_4_rank_3.pt ' \
		gridrep 24 ABCD rows2x2
fi
if want adam; then
	round adam fsdp2_2 optim 2 'optim_world_size_2_rank_0.pt ' \
		state/0/exp_avg 0 ABCD
fi
if want step; then
	round step fsdp2_4 optim 4 \
		'optim_world_size_4_rank_0.pt optim_world_size_4_rank_1.pt optim_world_size_4_rank_2.pt optim_world_size_4_rank_3.pt ' \
		state/0/step 0 ABCD plain
fi

if want fsdp1; then
	round fsdp1 fsdp1_2 model 2 'model_world_size_2_rank_0.pt ' \
		0.weight 0 ABCD
	round fsdp1_optim fsdp1_2 optim 2 'optim_world_size_2_rank_0.pt ' \
		state/0.weight/exp_avg 0 ABCD
fi

# ------------------------------------------------------ refusals
# refused when made, one line each in the daemon's log; nothing written
if want refusals; then
	D=$W/refuse
	rm -rf "$D" "$W/.refuse.ptfs"
	cp -r "$fx/dt_4" "$D" || exit 1
	sums "$D" >"$WORK/refuse.sums"
	nref=0
	refused() {	# ERRTEXT CMD...: CMD fails, saying ERRTEXT
		_want=$1
		shift
		nref=$((nref + 1))
		if "$@" 2>"$WORK/refused.out"; then
			note "$* succeeded"
		elif ! grep -q "$_want" "$WORK/refused.out"; then
			note "$*: $(head -n 1 "$WORK/refused.out"), not $_want"
		fi
	}
	if start_daemon "$D" "$M" "$WORK/refuse.err"; then
		refused "not permitted" mv "$M/s0" "$M/s0x"
		refused "not permitted" rm "$M/s1"
		# (by path: applied at once, as truncate(2) is)
		refused "Invalid argument" python3 -c \
			'import os, sys; os.truncate(sys.argv[1], 4)' "$M/s0"
		refused "not permitted" sh -c "echo 5 >'$M/meta/epoch'"
		refused "not permitted" touch "$M/new"
		refused "not permitted" mkdir "$M/new.d"
		refused "not permitted" setfattr -n user.dtype -v float16 "$M/s0"
		o=$(run_limited 60 "$PTFS" umount "$M" 2>&1) ||
			note "ptfs umount: exit $?: $o"
		stop_daemon "$M"
		l=$(grep -c . "$WORK/refuse.err")
		[ "$l" = "$nref" ] ||
			note "$l lines in the daemon's log for $nref refusals: $(head -n 2 "$WORK/refuse.err")"
		grep -q "^ptfs: $D: a per-rank shard set keeps its keys" \
			"$WORK/refuse.err" || note "no line for the rename: $(head -n 1 "$WORK/refuse.err")"
	else
		note "not mounted: $(head -n 1 "$WORK/refuse.err")"
	fi
	[ -z "$(changed "$D" "$WORK/refuse.sums")" ] ||
		note "rank files changed: $(changed "$D" "$WORK/refuse.sums")"
	[ -z "$(leftovers "$D")" ] || note "left: $(leftovers "$D")"
	check "refusals" "$nref edits refused when made, one line each; nothing written"
fi

# ------------------------------------------------------ a newer save
# the training job saves again while an edit is staged (torch.save
# rewrites each rank file in place): `ptfs umount` writes nothing and
# says so in one line, the mount stays; -o discard drops the edit
if want newer_save; then
	D=$W/stale
	rm -rf "$D" "$W/.stale.ptfs"
	cp -r "$fx/dt_4" "$D" || exit 1
	if start_daemon "$D" "$M" "$WORK/stale.err"; then
		printf 'ABCD' | dd of="$M/s0" bs=1 seek=28 conv=notrunc \
			status=none || note "the edit through the mount failed"
		for f in "$D"/*_rank_*.pt; do
			cat "$f" >"$WORK/stale.tmp" && cat "$WORK/stale.tmp" >"$f"
		done
		stale_check "$D" "$M" "$DET"
	else
		note "not mounted: $(head -n 1 "$WORK/stale.err")"
	fi
	[ -z "$(leftovers "$D")" ] || note "left: $(leftovers "$D")"
	check "a newer save while mounted" "ptfs umount: exit 1, one line, the mount kept; the job's files as it wrote them; -o discard drops the edit"
fi

# ------------------------------------------------------ compressed records
# (zipfile rewrites rank 1's file deflated: torch and ptfs still read it)
if want packed; then
	D=$W/packed
	rm -rf "$D" "$W/.packed.ptfs"
	cp -r "$fx/dt_4" "$D" || exit 1
	python3 - "$D/model_world_size_4_rank_1.pt" <<'EOF' || note "cannot deflate rank 1"
import sys, zipfile
p = sys.argv[1]
with zipfile.ZipFile(p) as z:
    recs = [(i.filename, z.read(i)) for i in z.infolist()]
with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
    for name, data in recs:
        z.writestr(name, data)
EOF
	sums "$D" >"$WORK/packed.sums"
	if start_daemon "$D" "$M" "$WORK/packed.err"; then
		printf 'ABCD' | dd of="$M/s0" conv=notrunc status=none \
			2>"$WORK/packed.dd" && note "a write into s0 succeeded"
		grep -q "Read-only file system" "$WORK/packed.dd" ||
			note "the write: $(cat "$WORK/packed.dd")"
		stop_daemon "$M"
		[ "$(cat "$WORK/packed.err")" = "ptfs: $D: per-rank shard sets with a compressed record mount read-only" ] ||
			note "not the one note line: $(head -n 2 "$WORK/packed.err")"
	else
		note "not mounted: $(head -n 1 "$WORK/packed.err")"
	fi
	[ -z "$(changed "$D" "$WORK/packed.sums")" ] || note "a rank file changed"
	[ -z "$(leftovers "$D")" ] || note "left: $(leftovers "$D")"
	check "packed: read-only" "$(cat "$WORK/packed.err" 2>/dev/null); EROFS"
fi

# ------------------------------------------------------ crash
if want crash; then
if ! faultinj_ready; then
	skip "crash across rank files" "$FAULTINJ_WHY"
else
	r0=model_world_size_4_rank_0.pt r1=model_world_size_4_rank_1.pt
	# the new files, as a write-back that was not killed makes them
	R=$W/crashref
	rm -rf "$R" "$W/.crashref.ptfs"
	cp -r "$fx/dt_4" "$R" || exit 1
	sums "$R" >"$WORK/crash.old"
	if start_daemon "$R" "$M" "$WORK/crashref.err"; then
		printf 'ABCDEFGH' | dd of="$M/s0" bs=1 seek=20 conv=notrunc \
			status=none
		run_limited 60 "$PTFS" umount "$M" >/dev/null 2>&1
		stop_daemon "$M"
	fi
	sums "$R" >"$WORK/crash.new"
	# state DIR: old (every rank file as it was), new (as the write-back
	# makes them), mix (ranks 0 and 1: one old, one new) or other
	state() {
		sums "$1" >"$WORK/crash.now"
		if cmp -s "$WORK/crash.now" "$WORK/crash.old"; then
			echo old
		elif cmp -s "$WORK/crash.now" "$WORK/crash.new"; then
			echo new
		elif [ "$(grep -c -F -x -f "$WORK/crash.now" "$WORK/crash.old")" = 3 ] &&
		    [ "$(grep -c -F -x -f "$WORK/crash.now" "$WORK/crash.new")" = 3 ]; then
			echo mix
		else
			echo other
		fi
	}
	# STEP|RULE|BEFORE|AFTER: where the kill lands, the set on disk
	# after it, and after the remount
	for c in "the first temporary synced|sync .$r0.ptfs-new. 1 KILL|old|old" \
	    "the second temporary synced|sync .$r1.ptfs-new. 1 KILL|old|old" \
	    "the journaled commit|sync ptfs.journal 3 KILL|old|new" \
	    "the second rename|rename .$r1.ptfs-new. 1 KILL|mix|new"; do
		step=${c%%|*} rest=${c#*|}
		rule=${rest%%|*} rest=${rest#*|}
		before=${rest%|*} after=${rest#*|}
		D=$W/crash
		rm -rf "$D" "$W/.crash.ptfs"
		cp -r "$fx/dt_4" "$D" || exit 1
		: >"$CTL"
		if ! LD_PRELOAD=$INJ start_daemon "$D" "$M" "$WORK/crash.err"; then
			note "not mounted: $(head -n 1 "$WORK/crash.err")"
			check "crash at $step" ""
			continue
		fi
		printf 'ABCDEFGH' | dd of="$M/s0" bs=1 seek=20 conv=notrunc \
			status=none || note "the edit failed"
		killed_umount "$M" "$rule" "$DET"
		case $step:$(cat "$CTL.log") in
		*commit:*ptfs.journal:\ KILL|*synced:*ptfs-new.*|*rename:*ptfs-new.*) ;;
		*) note "killed elsewhere: $(cat "$CTL.log")" ;;
		esac
		killed=$(state "$D")
		tmps=$(ls -A "$D" | grep -c 'ptfs-new')
		[ "$killed" = "$before" ] ||
			note "after the kill the rank files are $killed, not $before"
		[ "$tmps" -gt 0 ] || note "the kill left no temporary"
		# the next mount: rolls forward, or removes the temporaries
		if start_daemon "$D" "$M" "$WORK/crash.err2"; then
			now=$(state "$D")
			[ "$now" = "$after" ] ||
				note "after the remount the rank files are $now, not $after"
			[ -z "$(ls -A "$D" | grep 'ptfs-new')" ] ||
				note "temporaries after the remount: $(leftovers "$D")"
			case $after:$(cat "$WORK/crash.err2") in
			new:*"finished a write-back into it that had been interrupted"*) ;;
			old:*"resumed the edits staged"*) ;;
			*) note "the remount said: $(head -n 1 "$WORK/crash.err2")" ;;
			esac
			shown=$(dd if="$M/s0" bs=1 skip=20 count=8 status=none)
			[ "$shown" = ABCDEFGH ] || note "the remount shows '$shown'"
			o=$(run_limited 60 "$PTFS" umount "$M" 2>&1) ||
				note "ptfs umount of the remount: exit $?: $o"
			stop_daemon "$M"
			[ "${DRC:-0}" = 0 ] || note "the remount exited $DRC"
		else
			note "no remount: $(head -n 1 "$WORK/crash.err2")"
		fi
		[ "$(state "$D")" = new ] || note "at the end the rank files are $(state "$D")"
		clean crash "$D" model 4
		[ -z "$(leftovers "$D")" ] || note "left: $(leftovers "$D")"
		check "crash at $step" "rank files $killed after the kill, $after after the remount (with $tmps temporar$( [ "$tmps" = 1 ] && echo y || echo ies) found), all new and clean at the end"
	done
	# the second rename fails (EIO) after the commit: `ptfs umount`
	# says so in one line, the mount takes no more edits, the journal
	# stays; a read-only mount of the mix refuses; a writable one
	# finishes it
	D=$W/crash
	rm -rf "$D" "$W/.crash.ptfs"
	cp -r "$fx/dt_4" "$D" || exit 1
	: >"$CTL"
	if LD_PRELOAD=$INJ start_daemon "$D" "$M" "$WORK/crash.err3"; then
		printf 'ABCDEFGH' | dd of="$M/s0" bs=1 seek=20 conv=notrunc \
			status=none || note "the edit failed"
		printf 'rename .%s.ptfs-new. 1 EIO\n' "$r1" >"$CTL"
		o=$(run_limited 60 "$PTFS" umount "$M" 2>&1)
		r=$?
		: >"$CTL"
		case $r:$o in
		1:"ptfs: write-back failed, $M stays mounted and nothing is lost: "*"$r1: cannot rename .$r1.ptfs-new."*"Input/output error; the write-back is committed, and the next mount finishes it") ;;
		*) note "ptfs umount: exit $r: $o" ;;
		esac
		printf 'XX' | dd of="$M/s1" conv=notrunc status=none \
			2>/dev/null && note "an edit after the commit was taken"
		stop_daemon "$M"
	else
		note "not mounted: $(head -n 1 "$WORK/crash.err3")"
	fi
	[ "$(state "$D")" = mix ] || note "after the failed rename the rank files are $(state "$D")"
	mkdir -p "$WORK/mnt/ro"
	o=$(run_limited 30 "$PTFS" -o ro "$D" "$WORK/mnt/ro" 2>&1) &&
		note "a read-only mount of the mix was made"
	unmount "$WORK/mnt/ro"
	case $o in
	"ptfs: $D: a write-back into it committed and did not finish its renames"*"mount it writable once to finish them"*) ;;
	*) note "the read-only mount said: $o" ;;
	esac
	[ "$(state "$D")" = mix ] || note "the read-only mount changed the files"
	if start_daemon "$D" "$M" "$WORK/crash.err4"; then
		stop_daemon "$M"
	else
		note "no remount: $(head -n 1 "$WORK/crash.err4")"
	fi
	[ "$(state "$D")" = new ] || note "after the remount the rank files are $(state "$D")"
	clean crash "$D" model 4
	[ -z "$(leftovers "$D")" ] || note "left: $(leftovers "$D")"
	check "a failing rename after the commit" "ptfs umount: one line, no more edits; -o ro refused the mix; the next mount finished it"
fi
fi

# ------------------------------------------------------ planted plans
# a rename plan in the journal that the files do not bear out renames
# nothing: a name out of the folder, or a rank file that is neither the
# old one nor the new one (another program's), refuses the mount with
# one line; every file old and no temporary (a record that outlived a
# write-back undone) mounts with the edit still staged
if want planted; then
	D=$W/planted J=$W/.planted.ptfs/ptfs.journal
	rm -rf "$D" "$W/.planted.ptfs"
	cp -r "$fx/dt_4" "$D" || exit 1
	sums "$D" >"$WORK/planted.sums"
	r1=model_world_size_4_rank_1.pt
	if start_daemon "$D" "$M" "$WORK/planted.err"; then
		printf 'ABCD' | dd of="$M/s0" bs=1 seek=28 conv=notrunc \
			status=none || note "the edit failed"
		kill9 "$M" || note "cannot kill the daemon"
	else
		note "not mounted: $(head -n 1 "$WORK/planted.err")"
	fi
	size=$(stat -c %s "$J" 2>/dev/null)
	odev=$(stat -c %d "$D/$r1") oino=$(stat -c %i "$D/$r1")
	tmp=.$r1.ptfs-new.0
	# plant PLAN: the journal as the kill left it, and one JR_SWAP
	plant() {
		truncate -s "$size" "$J" &&
			python3 "$fs/lib/journal_tool.py" append "$J" S "$1
" || note "cannot plant a record"
	}
	for c in "out of the folder|1 2 $odev $oino ${#tmp} 6 $tmp../r1x|bad rename plan record" \
	    "another program's file|1 2 3 4 ${#tmp} ${#r1} $tmp$r1|is neither the file it replaced"; do
		what=${c%%|*} rest=${c#*|}
		plan=${rest%|*} want=${rest#*|}
		plant "$plan"
		mkdir -p "$WORK/mnt/p"
		o=$(run_limited 30 "$PTFS" "$D" "$WORK/mnt/p" 2>&1) &&
			note "$what: mounted"
		unmount "$WORK/mnt/p"
		case $o in
		"ptfs: "*"$want"*) [ "$(printf '%s\n' "$o" | wc -l)" = 1 ] ||
			note "$what: more than one line: $o" ;;
		*) note "$what: $o" ;;
		esac
	done
	[ -z "$(changed "$D" "$WORK/planted.sums")" ] ||
		note "a planted plan changed $(changed "$D" "$WORK/planted.sums")"
	plant "1 2 $odev $oino ${#tmp} ${#r1} $tmp$r1"
	if start_daemon "$D" "$M" "$WORK/planted.err2"; then
		shown=$(dd if="$M/s0" bs=1 skip=28 count=4 status=none)
		[ "$shown" = ABCD ] || note "the edit is not shown: '$shown'"
		o=$(run_limited 60 "$PTFS" umount "$M" 2>&1) ||
			note "ptfs umount: exit $?: $o"
		stop_daemon "$M"
		grep -q "resumed the edits staged" "$WORK/planted.err2" ||
			note "the mount said: $(head -n 1 "$WORK/planted.err2")"
	else
		note "not mounted with an undone plan: $(head -n 1 "$WORK/planted.err2")"
	fi
	[ "$(changed "$D" "$WORK/planted.sums")" = "$r1 " ] ||
		note "written back: '$(changed "$D" "$WORK/planted.sums")', not $r1"
	[ -z "$(leftovers "$D")" ] || note "left: $(leftovers "$D")"
	check "planted rename plans" "out of the folder and another program's file refused with one line, nothing renamed; an undone one ignored, the edit written"
fi

# every daemon's stderr: refusals' and notes' one-line reasons only
check_daemon_logs

conclude
