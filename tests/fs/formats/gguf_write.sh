#!/bin/sh
# The GGUF writer (core/fmt/gguf/gguf_write.c): ptrepack IN OUT.gguf from
# safetensors, torch and Hugging Face folder inputs and from GGUF files,
# checked against gguf-py (GGUFWriter's bytes, GGUFReader, gguf.quants):
# torch 2.x only, the root where gguf-py is installed.  No mount.
#
#   usage: sh tests/fs/formats/gguf_write.sh [-k CASE] VERSION PTFS PTREPACK
#
# gguf_write_check.py makes the fixtures and checks the results:
#
#   to_gguf   sd.safetensors, sd.pt and its big-endian copy, nested.pt,
#             an HF folder (its config.json's model_type), a file beside
#             a config.json naming architectures only, --format gguf
#             OUT.bin, typed --gguf-kv values and a custom alignment: each
#             byte for byte what GGUFWriter writes, and GGUFReader reads
#             it back
#   types     --gguf-type f32, f16, bf16 (convert_hf_to_gguf.py's rule of
#             which tensors stay F32): GGUFWriter's bytes, the data
#             gguf.quants.quantize's of the float32 values
#   gguf      gguf_gen.py's files (little- and big-endian, every block
#             type, alignment 64) copied byte for byte; with --gguf-kv
#             keys replaced and added, GGUFReader sees them and the same
#             tensors; --gguf-type of a GGUF converts its floating tensors
#             only, in its byte order
#   q8_0      --gguf-type q8_0 from torch, safetensors and GGUF inputs (the
#             Q8_0 codec of gguf_types.h against gguf.quants)
#   refused   bad options, no architecture, a python value (--drop-values
#             leaves it out), a bool tensor: exit 2, one line, no OUT
#   mount     a little- and a big-endian GGUF mounted, 4 bytes written, a
#             tensor renamed, one removed, one added (float32, 4x4), then
#             ptfs umount: the file holds just that, in its byte order
#             (skipped while GGUF mounts are read-only)
#
# Prints one line per check and "N passed, N failed".  Exit 0 all passed,
# 1 a failure, 77 skipped (VERSION 1.13, which has no gguf-py).  Never
# leaves a mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTREPACK" 3 3 "$@"
PTFS=$2 ptrepack=$3
if [ "$version" != 2 ]; then
	echo "gguf-py is in the torch 2.x root only: skipping"
	exit 77
fi
fs_progs PTFS ptrepack
fs_torch "" ptfs-ggufwrite
. "$fs/lib/lib.sh"
. "$fs/lib/repack.sh"
trap release_work EXIT
trap 'exit 130' INT TERM HUP
D=$WORK/g
mkdir -p "$WORK/mnt" "$WORK/py" "$D" || exit 1
fs_py gguf_write_check.py gguf_gen.py formats_check.py
I=$inner/g
arch="general.architecture=llama"

check() { fs_pycheck "$@"; }
# to LABEL SRC OUT TYPE KV...: ptrepack SRC OUT (--gguf-type TYPE unless
# "-", --gguf-kv KV...), then the check against GGUFWriter
to() {
	_l=$1 _s=$2 _o=$3 _t=$4
	shift 4
	_a=
	[ "$_t" = - ] || _a="--gguf-type $_t"
	for _k; do _a="$_a --gguf-kv $_k"; done
	# shellcheck disable=SC2086
	repack "$_l" "$D/$_s" "$D/$_o" $_a &&
		check "$_l" expect "$I/$_s" "$I/$_o" "$_t" "$@"
}

check "generate" gen "$I" || { summary; exit 1; }

# ------------------------------------------------------ into GGUF
if want to_gguf; then
to "safetensors" st/sd.safetensors st.gguf - "$arch" t.u32:u32=7 \
	t.f:f32=0.1 t.d:f64=-2.5e-300 t.b:bool=true t.i:i64=-9 t.s=hello \
	"t.u8:u8=255" "t.e:string="
to "torch .pt" sd.pt pt.gguf - "$arch"
# elements swapped into a little-endian file
to "big-endian .pt" sdbe.pt be.gguf - "$arch"
to "big-endian .pt, f16" sdbe.pt be16.gguf f16 "$arch"
to "nested dicts, a list" nested.pt nested.gguf - general.architecture=gpt2 \
	general.alignment:u32=64
# the architecture from the folder's config.json, and from one beside
to "HF folder" hf hf.gguf - "$arch"
repack "HF folder: no --gguf-kv" "$D/hf" "$D/hf2.gguf" &&
	check "HF folder: no --gguf-kv" expect "$I/hf" "$I/hf2.gguf" - "$arch"
repack "config.json beside" "$D/arch/sd.safetensors" "$D/arch.gguf" &&
	check "config.json beside" expect "$I/arch/sd.safetensors" \
		"$I/arch.gguf" - general.architecture=LlamaForCausalLM
repack "--format gguf" --format gguf "$D/sd.pt" "$D/fmt.bin" \
	--gguf-kv "$arch" &&
	check "--format gguf" expect "$I/sd.pt" "$I/fmt.bin" - "$arch"
fi
# ------------------------------------------------------ --gguf-type
if want types; then
for t in f32 f16 bf16; do
	to "--gguf-type $t" st/sd.safetensors "t-$t.gguf" "$t" "$arch"
done
to "--gguf-type bf16 from .pt" sd.pt pt-bf16.gguf bf16 "$arch"
fi
# ------------------------------------------------------ GGUF in
if want gguf; then
for f in all align64 big plain bigplain w wbig; do
	repack "identity: $f" "$D/gen/$f.gguf" "$D/$f.same.gguf" &&
	if cmp -s "$D/gen/$f.gguf" "$D/$f.same.gguf"; then
		pass "identity: $f" "ptrepack IN.gguf OUT.gguf: the same bytes"
	else
		fail "identity: $f" "$(cmp "$D/gen/$f.gguf" "$D/$f.same.gguf")"
	fi
done
for f in all big; do
	repack "keys added: $f" "$D/gen/$f.gguf" "$D/$f.kv.gguf" \
		--gguf-kv t.u8:u8=7 --gguf-kv new.key=v --gguf-kv t.str:i32=-5 &&
	check "keys added: $f" same "$I/gen/$f.gguf" "$I/$f.kv.gguf" \
		t.u8:u8=7 new.key=v t.str:i32=-5
done
for f in w wbig bigplain; do
	for t in f32 f16 bf16; do
		repack "retyped: $f $t" "$D/gen/$f.gguf" "$D/$f.$t.gguf" \
			--gguf-type "$t" &&
		check "retyped: $f $t" retype "$I/gen/$f.gguf" "$I/$f.$t.gguf" "$t"
	done
done
fi
# ------------------------------------------------------ Q8_0
if want q8_0; then
to "--gguf-type q8_0" st/sd.safetensors t-q8_0.gguf q8_0 "$arch"
to "--gguf-type q8_0 from .pt" sd.pt pt-q8_0.gguf q8_0 "$arch"
for f in w wbig; do
	repack "retyped: $f q8_0" "$D/gen/$f.gguf" "$D/$f.q8_0.gguf" \
		--gguf-type q8_0 &&
	check "retyped: $f q8_0" retype "$I/gen/$f.gguf" "$I/$f.q8_0.gguf" q8_0
done
fi
# ------------------------------------------------------ refusals
if want refused; then
o=$D/bad.gguf
refused "--gguf-type q3" "--gguf-type q3: not one of f32, f16, bf16, q8_0" \
	"$o" "$D/sd.pt" "$o" --gguf-kv "$arch" --gguf-type q3
refused "--gguf-kv nokey" "--gguf-kv nokey: not KEY=VALUE" "$o" \
	"$D/sd.pt" "$o" --gguf-kv "$arch" --gguf-kv nokey
refused "--gguf-kv a:u8=300" "'300' is not of type u8" "$o" \
	"$D/sd.pt" "$o" --gguf-kv "$arch" --gguf-kv a:u8=300
refused "--gguf-kv a:u9=1" "'u9' is not a type" "$o" \
	"$D/sd.pt" "$o" --gguf-kv "$arch" --gguf-kv a:u9=1
refused "alignment not a power of two" "general.alignment is a u32 power" \
	"$o" "$D/sd.pt" "$o" --gguf-kv "$arch" \
	--gguf-kv general.alignment:u32=48
refused "unknown option" "--gguf-foo: no such option" "$o" \
	"$D/sd.pt" "$o" --gguf-kv "$arch" --gguf-foo 1
refused "no architecture" "pass --gguf-kv general.architecture=NAME" "$o" \
	"$D/st/sd.safetensors" "$o"
refused "a python value" "epoch: an int, not a tensor: GGUF files hold" \
	"$o" "$D/values.pt" "$o" --gguf-kv "$arch"
refused "a bool tensor" "flag: GGUF has no type for bool" "$o" \
	"$D/flag.pt" "$o" --gguf-kv "$arch"
if repack "--drop-values" --drop-values "$D/values.pt" "$D/drop.gguf" \
	--gguf-kv "$arch"; then
	if grep -q "note: 1 non-tensor value left out" "$WORK/rp.err"; then
		pass "--drop-values" "the int left out, said once"
	else
		fail "--drop-values" "stderr: $(head -n 2 "$WORK/rp.err")"
	fi
fi
fi

# ------------------------------------------------------ the mount
if want mount; then
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null 2>&1; then
	skip "mount" "no /dev/fuse or no fusermount3"
else
mnt=$WORK/mnt/m
awk 'BEGIN { for (i = 0; i < 64; i++) printf "%c", 65 + i % 26 }' \
	>"$D/new.bin"
for f in all big; do
	mkdir -p "$D/m"
	cp "$D/gen/$f.gguf" "$D/m/m.gguf"
	if ! start_daemon "$D/m/m.gguf" "$mnt" "$WORK/m.err"; then
		fail "mount: $f" "not mounted: $(head -n 1 "$WORK/m.err")"
		continue
	fi
	if ! printf 'ABCD' 2>/dev/null | dd of="$mnt/f32.w" bs=1 seek=4 \
	     conv=notrunc 2>/dev/null; then
		stop_daemon "$mnt"
		skip "mount: $f" "GGUF mounts are read-only: no write-back yet"
		continue
	fi
	mv "$mnt/q.q4_0" "$mnt/renamed.q4_0" && rm "$mnt/i32.v" &&
		cp "$D/new.bin" "$mnt/newt" &&
		setfattr -n user.dtype -v float32 "$mnt/newt" &&
		setfattr -n user.shape -v 4,4 "$mnt/newt" ||
		fail "mount: $f" "an edit failed"
	out=$(run_limited 60 "$PTFS" umount "$mnt" 2>&1)
	rc=$?
	stop_daemon "$mnt"
	if [ $rc -eq 0 ]; then
		check "mount: $f" edited "$I/gen/$f.gguf" "$I/m/m.gguf" \
			"$I/new.bin"
	else
		fail "mount: $f" "ptfs umount: exit $rc: $out"
	fi
	rm -rf "$D/m"
done
fi
fi

conclude
