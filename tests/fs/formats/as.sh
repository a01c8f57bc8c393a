#!/bin/sh
# as.sh - .ptfs/as/ (issue 43): every mount's checkpoint as safetensors,
# computed from it as it stands, read by safetensors and transformers
# themselves (torch 2.x only: they are in its root).
#
#   usage: sh tests/fs/formats/as.sh [-k CASE] VERSION PTFS PTREPACK
#
# The sources (as_gen.py, in the root): a tiny LlamaForCausalLM saved as a
# DCP directory with its config.json beside .metadata (dcp), as
# save_pretrained's sharded folder (hf), and as torch.save of its state
# dict plus a python value {"train": {"step": 3}} (pt); its logits on fixed
# ids.  Each mounted -o ro:
#
#   single    .ptfs/as/ lists model.safetensors, README and the source's
#             other files (config.json, generation_config.json) and
#             nothing else; model.safetensors is byte for byte `ptrepack
#             --drop-values SRC out.safetensors`; safe_open (mmap and
#             backend="pread") and load_file give torch.load of the .pt's
#             tensors; 8 threads through one mmap read its bytes; the
#             config files are the source's; README names train.step (pt);
#             from_pretrained(m/.ptfs/as) gives the model's logits (dcp, hf)
#   shards    -o ro,shards=200KB: .ptfs/as/ is exactly what `ptrepack
#             --drop-values --max-shard-size 200KB SRC OUT/` writes (every
#             file cmp'd) plus README; the shards as the index says are
#             the .pt's tensors; from_pretrained gives the logits (dcp, hf)
#   edit      a writable mount of a copy of the .pt: 4 bytes dd'ed into
#             model.norm.weight and `mv lm_head.weight lm_head2.weight`;
#             .ptfs/as/model.safetensors opened again has both; after
#             .ptfs/commit it is byte for byte ptrepack of the file written
#   hostile   the DCP directory with config.json a link to a file outside
#             it (another owner, 0640), generation_config.json a fifo and
#             tokenizer a link to a directory outside: ls and cat of
#             .ptfs/as/ end within 20 s; the fifo and the directory are
#             not in it; config.json, if shown, is what .ptfs/files/ shows
#             (the door's rule for a link: read through, its target's
#             owner, no wider mode); model.safetensors as ptrepack's
#
# Exit 0 all passed, 1 a failure, 77 skipped (VERSION 1.13; no /dev/fuse;
# PT_NO_TORCH2=1).  Never leaves a mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTREPACK" 3 3 "$@"
PTFS=$2 ptrepack=$3
if [ "$version" != 2 ]; then
	echo "safetensors and transformers are checked under torch 2.x only: skipping"
	exit 77
fi
fs_progs PTFS ptrepack
fs_need_fuse
fs_torch "" ptfs-as
. "$fs/lib/lib.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
DET=$WORK/details
: >"$DET"
mkdir -p "$WORK/mnt" "$WORK/rp" || exit 1
fs_py as_check.py as_gen.py
umask 022

probe_fuse "$fs/../data/sample.pt" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

S=$WORK/src
if fs_pycall as_gen.py "$inner/src" >"$WORK/gen.out" 2>"$WORK/gen.err" &&
    grep -q "^ok$TAB" "$WORK/gen.out"; then
	pass "generated" "$(grep "^ok$TAB" "$WORK/gen.out" | cut -f2)"
else
	grep -v 'UCX\|cpuinfo\|Warning\|return func' "$WORK/gen.err" >"$WORK/gen.why"
	fail "generated" "as_gen.py: $(tail -n 1 "$WORK/gen.why")" "$WORK/gen.why"
	conclude
	exit 1
fi
SIZE=200KB

src_of() {	# NAME: the source's path ($S/NAME, the .pt's file)
	case $1 in pt) echo "$S/sd.pt" ;; *) echo "$S/$1" ;; esac
}
others_of() {	# NAME: the source's files beside the checkpoint
	case $1 in pt) ;; *) echo config.json generation_config.json ;; esac
}
listing() {	# DIR: its names, sorted, one line
	run_limited 20 ls -A "$1" 2>&1 | sort | tr '\n' ' '
}
# mounted NAME CKPT MNT OPTIONS: start_daemon, or a failure of NAME
mounted() {
	start_daemon "$2" "$3" "$WORK/${3##*/}.err" -o "$4" && return 0
	fail "$1" "not mounted: $(head -n 1 "$WORK/${3##*/}.err")"
	return 1
}
# unmounted NAME MNT: stop_daemon; a note when ptfs did not exit 0
unmounted() {
	stop_daemon "$2" || note "could not unmount $2"
	[ "${DRC:-0}" = 0 ] ||
		note "ptfs exited with $DRC: $(tail -n 1 "$WORK/${2##*/}.err")"
	check "$1: unmounted" "ptfs exited 0"
}

# ------------------------------------------------------ one file
if want single; then
for n in dcp hf pt; do
	src=$(src_of "$n")
	mnt=$WORK/mnt/$n
	A=$mnt/.ptfs/as
	ref=$WORK/rp/$n.safetensors
	if ! o=$(run_limited 120 "$ptrepack" --drop-values "$src" "$ref" 2>&1); then
		fail "$n: ptrepack" "exit $?: $o"
		continue
	fi
	mounted "$n: mounted" "$src" "$mnt" ro || continue
	want_ls=$(for f in README model.safetensors $(others_of "$n"); do
		echo "$f"; done | sort | tr '\n' ' ')
	got_ls=$(listing "$A")
	[ "$got_ls" = "$want_ls" ] || note "ls .ptfs/as/: '$got_ls', not '$want_ls'"
	check "$n: .ptfs/as/ lists" "$want_ls"
	if cmp "$A/model.safetensors" "$ref" >"$WORK/cmp.out" 2>&1; then
		pass "$n: as ptrepack writes it" "cmp .ptfs/as/model.safetensors $n.safetensors: $(stat -c %s "$ref") bytes equal"
	else
		fail "$n: as ptrepack writes it" "cmp: $(head -n 1 "$WORK/cmp.out")"
	fi
	for f in $(others_of "$n"); do
		cmp -s "$A/$f" "$src/$f" || note "$f: not the source's bytes"
	done
	[ -z "$(others_of "$n")" ] ||
		check "$n: the files beside it" "$(others_of "$n"): the source's bytes"
	fs_pycheck "$n: safetensors reads it" tensors \
		"$inner/mnt/$n/.ptfs/as/model.safetensors" "$inner/src/sd.pt"
	fs_pycheck "$n: mmap from 8 threads" threads \
		"$inner/mnt/$n/.ptfs/as/model.safetensors" "$inner/rp/$n.safetensors"
	if [ "$n" = pt ]; then
		fs_pycheck "$n: README" readme "$inner/mnt/$n/.ptfs/as/README"
	else
		run_limited 20 cat "$A/README" >/dev/null 2>"$WORK/cat.err" ||
			note "cat README: $(head -n 1 "$WORK/cat.err")"
		check "$n: README" "readable"
		fs_pycheck "$n: from_pretrained(m/.ptfs/as)" logits \
			"$inner/mnt/$n/.ptfs/as" "$inner/src/ids.pt" \
			"$inner/src/logits.pt"
	fi
	unmounted "$n" "$mnt"
done
fi

# ------------------------------------------------------ -o shards=SIZE
if want shards; then
for n in dcp hf pt; do
	src=$(src_of "$n")
	mnt=$WORK/mnt/$n.shards
	A=$mnt/.ptfs/as
	ref=$WORK/rp/$n.d
	rm -rf "$ref"
	if ! o=$(run_limited 120 "$ptrepack" --drop-values --max-shard-size \
	    "$SIZE" "$src" "$ref/" 2>&1); then
		fail "$n: shards: ptrepack" "exit $?: $o"
		continue
	fi
	mounted "$n: shards: mounted" "$src" "$mnt" "ro,shards=$SIZE" || continue
	want_ls=$( (ls -A "$ref"; echo README) | sort | tr '\n' ' ')
	got_ls=$(listing "$A")
	[ "$got_ls" = "$want_ls" ] || note "ls .ptfs/as/: '$got_ls', not '$want_ls'"
	for f in $(ls -A "$ref"); do
		cmp "$A/$f" "$ref/$f" >"$WORK/cmp.out" 2>&1 ||
			note "$f: $(head -n 1 "$WORK/cmp.out")"
	done
	check "$n: shards: as ptrepack --max-shard-size $SIZE writes them" \
		"$(ls "$ref" | grep -c '^model-') shards, the index and $(ls -A "$ref" | grep -vc '^model') other files equal"
	fs_pycheck "$n: shards: safetensors reads them" union \
		"$inner/mnt/$n.shards/.ptfs/as" "$inner/src/sd.pt"
	if [ "$n" = pt ]; then
		fs_pycheck "$n: shards: README" readme \
			"$inner/mnt/$n.shards/.ptfs/as/README"
	else
		fs_pycheck "$n: shards: from_pretrained(m/.ptfs/as)" logits \
			"$inner/mnt/$n.shards/.ptfs/as" "$inner/src/ids.pt" \
			"$inner/src/logits.pt"
	fi
	unmounted "$n: shards" "$mnt"
done
fi

# ------------------------------------------------------ an edit
if want edit; then
cp "$S/sd.pt" "$WORK/edit.pt" || exit 1
mnt=$WORK/mnt/edit
A=$mnt/.ptfs/as
if mounted "edit: mounted" "$WORK/edit.pt" "$mnt" rw; then
	# read once before the edit: what is computed must not stay stale
	cat "$A/model.safetensors" >/dev/null 2>&1 ||
		note "cat before the edit failed"
	printf '\001\002\003\004' | dd of="$mnt/model.norm.weight" bs=4 \
		count=1 conv=notrunc 2>"$WORK/dd.err" ||
		note "dd: $(head -n 1 "$WORK/dd.err")"
	mv "$mnt/lm_head.weight" "$mnt/lm_head2.weight" 2>"$WORK/mv.err" ||
		note "mv: $(head -n 1 "$WORK/mv.err")"
	check "edit: made" "4 bytes of model.norm.weight, lm_head.weight renamed"
	fs_pycheck "edit: in .ptfs/as/ opened again" edited \
		"$inner/mnt/edit/.ptfs/as/model.safetensors" "$inner/src/sd.pt" \
		model.norm.weight 01020304 lm_head.weight lm_head2.weight
	printf 1 >"$mnt/.ptfs/commit" 2>"$WORK/commit.err" ||
		note "commit: $(head -n 1 "$WORK/commit.err")"
	ref=$WORK/rp/edit.safetensors
	if ! o=$(run_limited 120 "$ptrepack" --drop-values "$WORK/edit.pt" \
	    "$ref" 2>&1); then
		note "ptrepack of the committed file: $o"
	elif ! cmp "$A/model.safetensors" "$ref" >"$WORK/cmp.out" 2>&1; then
		note "cmp: $(head -n 1 "$WORK/cmp.out")"
	fi
	check "edit: committed, as ptrepack writes it" "cmp .ptfs/as/model.safetensors with ptrepack of the file written back"
	unmounted "edit" "$mnt"
fi
fi

# ------------------------------------------------------ hostile neighbours
if want hostile; then
h=$WORK/hostile
rm -rf "$h" "$WORK/outside.json" "$WORK/outdir"
cp -a "$S/dcp" "$h" || exit 1
sed 's/"llama"/"llama" /' "$h/config.json" >"$WORK/outside.json" &&
	chmod 0640 "$WORK/outside.json" &&
	{ [ "$(id -u)" != 0 ] || chown 65534:65534 "$WORK/outside.json"; } &&
	rm "$h/config.json" "$h/generation_config.json" &&
	ln -s ../outside.json "$h/config.json" &&
	mkfifo "$h/generation_config.json" &&
	mkdir "$WORK/outdir" && echo secret >"$WORK/outdir/tokenizer.json" &&
	ln -s ../outdir "$h/tokenizer" || exit 1
mnt=$WORK/mnt/hostile
A=$mnt/.ptfs/as
if mounted "hostile: mounted" "$h" "$mnt" ro; then
	run_limited 20 ls -la "$A" >"$WORK/ls.out" 2>&1
	r=$?
	case $r in 124|137) note "ls .ptfs/as/ hung" ;; esac
	run_limited 20 sh -c 'for f in "$1"/*; do cat "$f"; done' sh "$A" \
		>/dev/null 2>"$WORK/cat.err"
	case $? in 124|137) note "cat .ptfs/as/* hung" ;; esac
	for f in generation_config.json tokenizer tokenizer.json; do
		[ ! -e "$A/$f" ] && [ ! -L "$A/$f" ] ||
			note ".ptfs/as/$f is shown (a fifo, a linked directory)"
	done
	if [ -e "$A/config.json" ]; then
		cmp -s "$A/config.json" "$mnt/.ptfs/files/config.json" ||
			note "config.json: not what .ptfs/files/ shows"
		set -- $(stat -c '%u %g %a' "$A/config.json") \
			$(stat -L -c '%u %g %a' "$WORK/outside.json")
		[ "$1:$2" = "$4:$5" ] && [ $((0$3 & ~0$6)) = 0 ] ||
			note "config.json: $1:$2 mode $3, its target $4:$5 mode $6"
		how="config.json read through as .ptfs/files/ shows it, $1:$2 $3"
	else
		how="config.json (a link out) left out"
	fi
	cmp -s "$A/model.safetensors" "$WORK/rp/dcp.safetensors" ||
		[ ! -f "$WORK/rp/dcp.safetensors" ] ||
		note "model.safetensors: not ptrepack's"
	check "hostile: a link out, a fifo, a linked directory" "ls and cat end; the fifo and the directory left out; $how"
	unmounted "hostile" "$mnt"
fi
fi

conclude
