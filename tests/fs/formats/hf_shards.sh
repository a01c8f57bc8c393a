#!/bin/sh
# Hugging Face sharded folders through the tools and a real mount
# (docs/design.md "Sharded Hugging Face folders").
#
#   usage: sh tests/fs/formats/hf_shards.sh [-k CASE] VERSION PTFS PTLS SHARED_DIR
#
# VERSION "1.13": Debian's torch (/usr/bin/python3); "2": torch 2.x in the
# chroot scripts/torch2-root.sh builds.  hf_check.py writes the folders
# with that torch (torch.save per shard, safetensors.torch.save_file under
# 2.x and st_check.py's writer under 1.13, an index as transformers writes
# it).  Each good folder (bin/ and st/ given as the folder, mixed/ as its
# fp16 variant index file: a legacy shard and a deflated one) is
#
#   listed      ptls --json and ptdump --json parse; ptverify says ok
#               (mixed/: only its deflated records); ptdiff finds no
#               difference from torch.save of the whole state dict
#   mounted     ptfs mounts it without a word; names, every tensor's
#               bytes, user.dtype/shape/shard, tied storages and
#               .ptfs/files/ equal torch's index-driven union and the
#               folder; a directory, an attribute change and a write of
#               .ptfs/files/ fail with EPERM (hf_write.sh edits); no file
#               of the folder changed (sha256 before and after)
#
#   one file    ptrepack writes it into one .pt: torch.load of that holds
#               the union, tied weights and views still sharing storage
#
# A shard rewritten under the mount makes reads of its tensors fail with
# ESTALE while the other shards still read.  The broken ones: a key in
# two shards and index/shard mismatches mount
# (with a note line) and ptverify exits 1 naming file and key; a wrong
# total_size the same; a shard listed but absent makes ptverify exit 1
# and ptfs and ptrepack (into .pt or .safetensors) refuse it, as ptrepack
# does --clone, --dtype and an output of no known format, writing no
# file; an index that is not JSON, shards named "../outside.bin" and
# "/etc/passwd", shards of two byte orders, two
# indexes and a folder without
# an index are refused with one line by ptfs and ptls.
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
ptrepack=$bin/ptrepack
fs_progs ptdump ptdiff ptverify ptrepack
fs_need_fuse

fs_torch "$shared" ptfs-hfshards
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/py" "$WORK/hf" || exit 1
fs_py hf_check.py st_check.py

probe_fuse "$sample" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

if fs_pyrun gen.rep gen "$inner/hf"; then
	pass "generate" "$(grep "^ok$TAB" "$WORK/gen.rep" | cut -f2)"
else
	fail "generate" "hf_check.py gen failed under torch $version" \
		"$WORK/gen.rep.err"
	summary
	exit 1
fi
H=$WORK/hf

# mounted NAME ARG NOTE PY...: mount ARG (folder NAME or its index), check it
# against torch, its files unchanged, ptfs's stderr exactly NOTE
mounted() {
	_n=$1 _arg=$2 _note=$3 _det=$WORK/$1.mdetails
	shift 3
	: >"$_det"
	_mnt=$WORK/mnt/$_n
	fs_pyrun "$_n.sum0" sums "$inner/hf/$_n" ||
		echo "sums failed" >>"$_det"
	if ! start_daemon "$_arg" "$_mnt" "$WORK/$_n.err"; then
		fail "$_n: mounted" "not mounted: $(head -n 1 "$WORK/$_n.err")"
		return
	fi
	fs_pyrun "$_n.rep" check "$inner/hf" "$_n" "$inner/mnt/$_n" \
		"$inner/hf/$_n.ls.json" ||
		cat "$WORK/$_n.rep" "$WORK/$_n.rep.err" >>"$_det"
	stop_daemon "$_mnt" || echo "could not unmount" >>"$_det"
	[ "${DRC:-0}" = 0 ] || echo "ptfs exited with status $DRC" >>"$_det"
	# (the daemon logs each edit it refused: check's, on purpose)
	[ "$(grep -v -e ': a sharded folder takes tensor bytes' \
		-e ': a sharded folder holds no directories' \
		-e ': safetensors files hold no directories' \
		-e ' shard is not written back in a folder' \
		"$WORK/$_n.err")" = "$_note" ] || {
		echo "ptfs printed (expected: $_note):"
		head -n 5 "$WORK/$_n.err"
	} >>"$_det"
	fs_pyrun "$_n.sum1" sums "$inner/hf/$_n" ||
		echo "sums failed" >>"$_det"
	# (torch 2.x's python may print UCX noise on stdout: "sum" lines only)
	grep '^sum ' "$WORK/$_n.sum0" >"$WORK/$_n.s0"
	grep '^sum ' "$WORK/$_n.sum1" >"$WORK/$_n.s1"
	[ -s "$WORK/$_n.s0" ] && cmp -s "$WORK/$_n.s0" "$WORK/$_n.s1" ||
		echo "files of the folder changed: $(diff "$WORK/$_n.s0" "$WORK/$_n.s1" | head -n 3)" >>"$_det"
	if [ -s "$_det" ]; then
		fail "$_n: mounted" "$(head -n 1 "$_det")" "$_det"
	else
		pass "$_n: mounted" "$(grep "^ok$TAB" "$WORK/$_n.rep" | cut -f2); files unchanged"
	fi
}

# ------------------------------------------------------ each folder: tools, a mount, ptrepack
if want folders; then
for n in bin mixed st; do
	arg=$H/$n
	[ $n = mixed ] && arg=$H/mixed/pytorch_model.bin.index.fp16.json
	det=$WORK/$n.details
	: >"$det"
	run_limited 60 "$ptls" --json "$arg" >"$H/$n.ls.json" 2>"$det.err" ||
		echo "ptls --json: exit $?: $(head -n 1 "$det.err")" >>"$det"
	run_limited 60 "$ptdump" --json "$arg" >"$WORK/dump.json" 2>"$det.err" ||
		echo "ptdump --json: exit $?: $(head -n 1 "$det.err")" >>"$det"
	for j in "$H/$n.ls.json" "$WORK/dump.json"; do
		python3 -c 'import json, sys; json.load(open(sys.argv[1]))' \
			"$j" 2>>"$det" || echo "${j##*/} is not JSON" >>"$det"
	done
	run_limited 60 "$ptdump" "$arg" >"$WORK/dump.txt" 2>&1 ||
		echo "ptdump: exit $?: $(head -n 1 "$WORK/dump.txt")" >>"$det"
	out=$(run_limited 60 "$ptverify" "$arg" 2>&1)
	rc=$?
	if [ $n = mixed ]; then
		# the deflated shard's records, and nothing else
		other=$(printf '%s\n' "$out" | grep -v 'fp16-00002-of-00005.bin: offset 0x[0-9a-f]*: record ' | grep -v ': [0-9]* problems$')
		[ $rc = 1 ] && [ -z "$other" ] ||
			echo "ptverify: exit $rc: $out" >>"$det"
	else
		case $rc:$out in
		0:*": ok (hf-sharded, "*) ;;
		*) echo "ptverify: exit $rc: $out" >>"$det" ;;
		esac
	fi
	whole=$H/bin.pt
	[ $n = st ] && whole=$H/st.pt
	run_limited 60 "$ptdiff" "$arg" "$whole" >"$WORK/diff.txt" 2>&1 ||
		echo "ptdiff against torch.save of the whole state dict: exit $?: $(tail -n 1 "$WORK/diff.txt")" >>"$det"
	if [ -s "$det" ]; then
		fail "$n: ptls, ptdump, ptverify, ptdiff" "$(head -n 1 "$det")" "$det"
	else
		pass "$n: ptls, ptdump, ptverify, ptdiff" "JSON parses, verified, $(tail -n 1 "$WORK/diff.txt")"
	fi
	mounted "$n" "$arg" "" "$@"
	# one file: shard by shard into a new .pt (no shard is written)
	rm -f "$H/$n.one.pt"
	if ! out=$(run_limited 60 "$ptrepack" "$arg" "$H/$n.one.pt" 2>&1); then
		fail "$n: ptrepack into one .pt" "exit $?: $out"
	elif fs_pyrun "$n.one" one "$inner/hf" "$n" "$inner/hf/$n.one.pt"; then
		pass "$n: ptrepack into one .pt" "$(grep "^ok$TAB" "$WORK/$n.one" | cut -f2)"
	else
		fail "$n: ptrepack into one .pt" "$(head -n 1 "$WORK/$n.one.err")" "$WORK/$n.one.err"
	fi
done
fi

# ------------------------------------------------------ a shard rewritten
# under the mount (same bytes, cp keeps the inode): reads of its tensors
# fail with ESTALE, never showing other bytes; other shards still read
if want shard_rewritten; then
S=$WORK/stale s5=pytorch_model-00005-of-00005.bin
cp -r "$H/bin" "$S" && cp "$S/$s5" "$WORK/s5.copy"
if start_daemon "$S" "$WORK/mnt/stale" "$WORK/stale.err"; then
	sleep 0.02
	cp "$WORK/s5.copy" "$S/$s5"
	e5=$(cat "$WORK/mnt/stale/model.norm.weight" 2>&1 >/dev/null)
	r5=$?
	cat "$WORK/mnt/stale/model.embed_tokens.weight" >/dev/null 2>&1
	r1=$?
	stop_daemon "$WORK/mnt/stale"
	case $r5:$r1:$e5 in
	[1-9]*:0:*"Stale file handle"*)
		pass "shard rewritten under the mount" "its tensor: $e5; shard 1 reads" ;;
	*)	fail "shard rewritten under the mount" "exit $r5 ($e5), shard 1 exit $r1" ;;
	esac
else
	fail "shard rewritten under the mount" "not mounted: $(head -n 1 "$WORK/stale.err")"
fi
fi

# ------------------------------------------------------ disagreements
# verified NAME STATUS PATTERN...: ptverify's exit and one line per pattern
if want disagreements; then
verified() {
	_n=$1 _want=$2
	shift 2
	_out=$(run_limited 60 "$ptverify" "$H/$_n" 2>&1)
	_rc=$?
	_miss=
	for _p in "$@"; do
		printf '%s\n' "$_out" | grep -q -- "$_p" || _miss="$_miss [$_p]"
	done
	if [ "$_rc" = "$_want" ] && [ -z "$_miss" ]; then
		pass "$_n: ptverify" "exit $_rc: $(printf '%s\n' "$_out" | head -n 1)"
	else
		fail "$_n: ptverify" "exit $_rc, missing:$_miss; said: $(printf '%s\n' "$_out" | head -n 3)"
	fi
}
I=pytorch_model.bin.index.json
verified twice 1 \
	"^ptverify: $H/twice/$I: offset 0x[0-9a-f]*: key 'model.layers.0.self_attn.q_proj.weight' is in two shards, pytorch_model-00001-of-00004.bin and pytorch_model-00002-of-00004.bin$"
verified mismatch 1 \
	"^ptverify: $H/mismatch/$I: key 'stray.bias' of shard pytorch_model-00002-of-00004.bin is not in the index$" \
	"^ptverify: $H/mismatch/$I: offset 0x[0-9a-f]*: key 'ghost.weight': the index says shard pytorch_model-00001-of-00004.bin, which does not hold it$"
verified absent 1 \
	"^ptverify: $H/absent/$I: offset 0x[0-9a-f]*: shard 'pytorch_model-00002-of-00004.bin' the index names is absent$"
expect_refusal "absent: not mounted" "$H/absent" \
	"ptfs: $H/absent: shard 'pytorch_model-00002-of-00004.bin' the index names is absent: not mounted"
# what ptrepack refuses to write from a folder: one line, no file
# (FOLDER|OPTION|MESSAGE|OUT)
absent="1 shard of the index is absent: their tensors would be missing"
mkdir -p "$WORK/one"
for a in "absent||$absent|x.pt" "absent||$absent|x.safetensors" \
	"bin|--clone|--clone cuts the storages of one file, not of Hugging Face sharded folders|x.pt" \
	"bin|--dtype=bfloat16|--dtype: not for Hugging Face sharded folders; ptrepack it into one file, then convert that|x.pt" \
	"bin||Hugging Face sharded folders are written into one new file only, a .pt or a .safetensors (ptrepack --format)|x.out"; do
	f=${a%%|*} rest=${a#*|}
	opt=${rest%%|*} rest=${rest#*|}
	msg=${rest%|*} o=${rest##*|}
	out=$(run_limited 60 "$ptrepack" ${opt:+"$opt"} "$H/$f" \
		"$WORK/one/$o" 2>&1)
	r=$?
	if [ "$r:$out" = "2:ptrepack: $H/$f: $msg" ] &&
	    [ -z "$(ls -A "$WORK/one")" ]; then
		pass "$f: ptrepack $opt $o refused" "$out"
	else
		fail "$f: ptrepack $opt $o refused" "exit $r: $out; $(ls -A "$WORK/one")"
	fi
done
verified total 1 \
	"^ptverify: $H/total/$I: offset 0x[0-9a-f]*: metadata.total_size is [0-9]*, but the shards hold [0-9]* bytes"
for n in twice mismatch; do
	"$ptls" --json "$H/$n" >"$H/$n.ls.json" 2>/dev/null
	case $n in twice) k="1 time" ;; mismatch) k="3 times" ;; esac
	mounted "$n" "$H/$n" "ptfs: $H/$n: the index and its shards disagree $k (ptverify lists them)" "$@"
done
fi

# ------------------------------------------------------ refusals
# refused NAME MESSAGE: ptfs and ptls refuse with one line ending so
if want refusals; then
refused() {
	_f=$H/$1
	_l=$(ptls_line "$ptls" "$_f")
	case $_l in
	*"$2") ;;
	*) fail "$1: ptls" "said: $_l (expected ...$2)"; return ;;
	esac
	expect_refusal "$1: refused" "$_f" "$_l"
}
refused notjson "$I: index ends where the shard of 'a' was expected"
refused escape "$I: shard '../outside.bin' has an empty, '.' or '..' part: shards must be inside the folder"
refused abs "$I: shard '/etc/passwd' is an absolute path: shards must be inside the folder"
refused endian "shard pytorch_model-00002-of-00004.bin is big-endian, shard pytorch_model-00001-of-00004.bin little-endian: one byte order per folder"
refused twoidx "holds 2 Hugging Face indexes (model.safetensors.index.json, $I): give the one to open, DIR/NAME"
mkdir -p "$H/plain" && echo x >"$H/plain/config.json"
refused plain "is a directory without a Hugging Face index (*.index.json) or a .metadata: no checkpoint folder"
fi

conclude
