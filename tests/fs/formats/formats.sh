#!/bin/sh
# Deflated and big-endian checkpoints, and the real fixtures' odd cases,
# through real mounts (docs/design.md "Deflated records", docs/editing.md).
#
#   usage: sh tests/fs/formats/formats.sh [-k CASE] VERSION PTFS PTLS SHARED_DIR
#
# VERSION "1.13": Debian's torch (/usr/bin/python3); "2": torch 2.x in the
# chroot built by SHARED_DIR/tools/torch2-root (the scratch directory is
# under its /tmp).  formats_check.py saves checkpoints with the torch under
# test and rewrites them and the shared fixtures with Python's zipfile:
#
#   deflated    every record ZIP_DEFLATED (one file: only the storages, at
#               level 9).  Each is mounted and checked by check_mount.py
#               against torch.load and the zip's records (tree, xattrs,
#               every tensor byte by read, O_DIRECT, mmap, numpy.memmap,
#               .ptfs/storages and records); the daemon's peak memory stays
#               far below a 96 MiB deflated tensor it serves; readers that
#               race for the first inflation all get the right bytes; ptls,
#               ptdiff and ptrepack see the same checkpoint as the stored
#               original (a repack is byte-identical to torch's file); an
#               edit written back (values only, and a structural one) loads
#               in torch with every record now stored
#   big-endian  every storage swapped per element and byteorder "big": raw
#               bytes as stored, user.byteorder=big, .npy descriptors
#               ">f4", text views equal to the little-endian copy's, torch
#               2.x values equal to the original's (1.13: the raw bytes);
#               edits (dd, a little-endian .npy, a new tensor) written back
#               keep the byte order and its record
#   real        the fixtures torch.load cannot load here for a missing
#               module (torchtext, gymnasium, peft): loaded with those
#               classes stubbed, torch's tensors must be exactly the
#               mount's tensor files; broken_zip_version_record_only.pt:
#               one clear line, nothing mounted
#
# Prints one line per check and finally "N passed, N failed[, N skipped]".
# Exit 0 all passed, 1 a failure, 77 skipped (no usable /dev/fuse, no
# fixtures; no torch with PT_ALLOW_SKIP_TORCH=1).  Never leaves a mount
# behind.  PTFS_TEST_TIMEOUT (default here 120) bounds each daemon's life.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS SHARED_DIR" 4 4 "$@"
PTFS=$2 ptls=$3 shared=$4
sample=$fs/../data/sample.pt
. "$fs/../fixtures/fx.sh"
fs_progs PTFS ptls
bin=$(dirname "$ptls")
ptdiff=$bin/ptdiff ptrepack=$bin/ptrepack
fs_progs ptdiff ptrepack
fs_need_fuse

fs_torch "$shared" ptfs-formats
. "$fs/lib/lib.sh"

wpid=
cleanup() {
	trap '' INT TERM HUP
	stop_worker 2>/dev/null
	release_work
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
trap '' PIPE
mkdir -p "$WORK/mnt" "$WORK/py" "$WORK/fx" "$WORK/c" || exit 1
cp "$here/formats_check.py" "$fs/mount/check_mount.py" "$fs/lib/ptfs_expect.py" \
	"$WORK/py/" || exit 1
cp "$fs/../torch/compare.py" "$WORK/py/" || exit 1
# the fixtures the rewrites start from (scratch copies, removed at exit)
for f in "$fx"/torch-1.13/*.pt; do cp "$f" "$WORK/fx/t113-${f##*/}"; done
for f in "$fx"/torch-2/*.pt; do cp "$f" "$WORK/fx/t214-${f##*/}"; done
for f in "$fx"/real/z* "$fx"/real/legacy_*; do
	cp "$f" "$WORK/fx/real-${f##*/}"
done

probe_fuse "$sample" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"
mkfifo "$WORK/req" "$WORK/resp" || exit 1

# pycheck LABEL CMD ARG...: one check line from a request (report in
# $WORK/py.rep)
pycheck() {
	_l=$1
	shift
	rm -f "$WORK/py.rep"
	if pyreq py.rep "$@"; then
		pass "$_l" "$PYM"
	else
		fail "$_l" "$PYM" "$WORK/py.rep"
	fi
}

# daemon_done LABEL-DETAILS: after stop_daemon, note a bad exit or any
# report of the daemon's into DETAILS (ERRFILE in $2)
daemon_done() {
	case ${DRC:-0} in
	0) ;;
	124|137) echo "ptfs was killed after ${DAEMON_TIMEOUT}s" >>"$1" ;;
	*) echo "ptfs exited with status $DRC" >>"$1" ;;
	esac
	daemon_problems "$2" "$1"
}

# ------------------------------------------------------------- generate
WORKER_PY=formats_check.py WORKER_ARG=$inner
start_worker || exit 1
echo "$("$PTFS" --version 2>/dev/null | grep '^ptfs ' | head -n 1); ${ready#*"$TAB"}"
if ! pyreq gen.rep gen; then
	echo "generating the inputs failed under torch $version: $PYM" >&2
	cat "$WORK/gen.rep" >&2 2>/dev/null
	exit 1
fi
pass "generate" "$PYM"

# ------------------------------------------- big-endian: read-only mounts
if want big_endian; then
for f in "$WORK"/be/*.pt; do
	name=${f##*/}
	orig=fx/$name
	[ "$name" = net.pt ] && orig=in/net.pt
	det=$WORK/be-$name.details
	: >"$det"
	if ! start_daemon "$WORK/$orig" "$WORK/mnt/beo" "$WORK/beo.err" -o ro; then
		fail "big-endian $name" "the original did not mount: $(head -n 1 "$WORK/beo.err")"
		continue
	fi
	po=$DPID
	if ! start_daemon "$f" "$WORK/mnt/beb" "$WORK/beb.err" -o ro; then
		fail "big-endian $name" "not mounted: $(head -n 1 "$WORK/beb.err")"
		DPID=$po
		stop_daemon "$WORK/mnt/beo"
		continue
	fi
	rm -f "$WORK/py.rep"
	pyreq py.rep be_mount "$orig" "be/$name" mnt/beo mnt/beb
	stop_daemon "$WORK/mnt/beb" || echo "could not unmount" >>"$det"
	daemon_done "$det" "$WORK/beb.err"
	DPID=$po
	stop_daemon "$WORK/mnt/beo" || echo "could not unmount" >>"$det"
	daemon_done "$det" "$WORK/beo.err"
	[ -f "$WORK/py.rep" ] && cat "$WORK/py.rep" >>"$det"
	if [ "$PYS" = ok ] && [ ! -s "$det" ]; then
		pass "big-endian $name" "$PYM"
	else
		fail "big-endian $name" "$PYM" "$det"
	fi
done
fi

# ------------------------------------------------ edits, then write-back
# edit CASE INPUT: a copy of INPUT as c/CASE/NAME mounted writable at
# mnt/CASE; sets C, CK, M.  Then the caller edits, and finish_edit
# writes back with `ptfs umount` and verifies.
if want edits; then
edit() {
	CASE=$1 C=$WORK/c/$1 M=$WORK/mnt/$1
	CK=$C/${2##*/}
	mkdir -p "$C"
	: >"$C/details"
	cp "$WORK/$2" "$CK" || exit 1
	start_daemon "$CK" "$M" "$C/ptfs.err"
}
enote() { printf '%s\n' "$*" >>"$C/details"; }
# run DESC CMD...: CMD must succeed
run() {
	_d=$1
	shift
	run_limited 60 "$@" >"$C/cmd.out" 2>"$C/cmd.err" ||
		enote "$_d: exit $?: $(head -n 1 "$C/cmd.err")"
}
finish_edit() {	# INPUT
	run "ptfs umount" "$PTFS" umount "$M"
	[ -s "$C/cmd.err" ] && enote "ptfs umount printed: $(head -n 1 "$C/cmd.err")"
	stop_daemon "$M" || enote "could not unmount"
	daemon_done "$C/details" "$C/ptfs.err"
	if [ -s "$C/details" ]; then
		fail "$CASE: edit and ptfs umount" "$(head -n 1 "$C/details")" \
			"$C/details"
	else
		pass "$CASE: edit and ptfs umount" "exit 0, daemon exit 0, quiet"
	fi
	pycheck "$CASE: written back" verify "$CASE" "$1" "c/$CASE/${CK##*/}"
}

if edit defl_values def/net.pt; then
	key=$(getfattr --only-values -n user.storage "$M/emb" 2>/dev/null)
	run "dd into fc.weight" dd if="$WORK/pay/eight.bin" of="$M/fc.weight" \
		bs=1 seek=16 conv=notrunc status=none
	run "dd into .ptfs/storages/$key" dd if="$WORK/pay/eight.bin" \
		of="$M/.ptfs/storages/$key" conv=notrunc status=none
	finish_edit def/net.pt
else
	fail "defl_values: mount" "$(head -n 1 "$C/ptfs.err")"
fi
if edit defl_struct def/net_st.pt; then
	run "rm zeros" rm "$M/zeros"
	run "mv fc.bias bias2" mv "$M/fc.bias" "$M/bias2"
	run "dd into noisy" dd if="$WORK/pay/eight.bin" of="$M/noisy" bs=1 \
		seek=1048579 conv=notrunc status=none
	finish_edit def/net_st.pt
else
	fail "defl_struct: mount" "$(head -n 1 "$C/ptfs.err")"
fi
if edit be_edit be/net.pt; then
	run "dd into fc.bias" dd if="$WORK/pay/be_one_five.bin" \
		of="$M/fc.bias" bs=4 seek=2 conv=notrunc status=none
	run "cp emb_new.npy emb.npy" cp "$WORK/pay/emb_new.npy" "$M/emb.npy"
	run "cp new_be.bin newt" cp "$WORK/pay/new_be.bin" "$M/newt"
	run "setfattr user.dtype" setfattr -n user.dtype -v float32 "$M/newt"
	run "setfattr user.shape" setfattr -n user.shape -v 3 "$M/newt"
	finish_edit be/net.pt
else
	fail "be_edit: mount" "$(head -n 1 "$C/ptfs.err")"
fi
# real fixtures that torch loads only with their missing classes stubbed
while read -r name; do
	if ! start_daemon "$WORK/fx/$name" "$WORK/mnt/stub" "$WORK/stub.err" \
		-o ro; then
		fail "real ${name#real-}, stubbed" "not mounted: $(head -n 1 "$WORK/stub.err")"
		continue
	fi
	rm -f "$WORK/py.rep"
	pyreq py.rep stubbed "fx/$name" mnt/stub
	det=$WORK/stub.details
	: >"$det"
	stop_daemon "$WORK/mnt/stub" || echo "could not unmount" >>"$det"
	daemon_done "$det" "$WORK/stub.err"
	[ -f "$WORK/py.rep" ] && cat "$WORK/py.rep" >>"$det"
	if [ "$PYS" = ok ] && [ ! -s "$det" ]; then
		pass "real ${name#real-}, stubbed" "$PYM"
	else
		fail "real ${name#real-}, stubbed" "$PYM" "$det"
	fi
done <"$WORK/stub.list"
fi
stop_worker

# ------------------------------------------- deflated: read-only mounts
if want deflated_mounts; then
WORKER_PY=check_mount.py WORKER_ARG=$inner
start_worker || exit 1
n=0
for f in "$WORK"/def/*; do
	name=${f##*/}
	n=$((n + 1))
	stem=d$n
	det=$WORK/$stem.details
	: >"$det"
	if ! run_limited 60 "$ptls" --json "$f" >"$WORK/$stem.json" \
		2>"$WORK/$stem.err"; then
		fail "deflated $name" "ptls: $(head -n 1 "$WORK/$stem.err")"
		continue
	fi
	mnt=$WORK/mnt/$stem
	if ! start_daemon "$f" "$mnt" "$WORK/$stem.ptfs.err" -o ro; then
		fail "deflated $name" "not mounted: $(head -n 1 "$WORK/$stem.ptfs.err")"
		continue
	fi
	reply=
	if printf 'check\t%s\t%s\t%s\t%s\n' "deflated $name" "def/$name" \
		"$stem" "mnt/$stem" >&3; then
		IFS= read -r reply <&4 || reply=
	fi
	if [ -z "$reply" ]; then
		echo "check_mount.py died: $(grep -v 'UCX\|cpuinfo' "$WORK/worker.err" | tail -n 1)" >>"$det"
		stop_worker
		unmount "$mnt"
		start_worker || exit 1
	fi
	stop_daemon "$mnt" || echo "could not unmount $mnt" >>"$det"
	[ -f "$WORK/$stem.report" ] && cat "$WORK/$stem.report" >>"$det"
	daemon_done "$det" "$WORK/$stem.ptfs.err"
	status=${reply%%"$TAB"*} summary=${reply#*"$TAB"}
	if [ "$status" = ok ] && [ ! -s "$det" ]; then
		pass "deflated $name" "$summary"
	else
		fail "deflated $name" "${summary:-no answer}" "$det"
	fi
done
fi
stop_worker

# ------------------------------------- deflated: the tools, without torch
if want deflated_tools; then
det=$WORK/tools.details
: >"$det"
nt=0
for f in "$WORK"/def/*; do
	name=${f##*/}
	case $name in
	net.pt|hog.pt) o=$WORK/in/$name ;;
	net_st.pt) o=$WORK/in/net.pt ;;
	*) o=$WORK/fx/$name ;;
	esac
	nt=$((nt + 1))
	# the same but for the path and data.pkl's place in the file
	"$ptls" --json "$o" 2>&1 | sed -e 's/^{"file":"[^"]*",//' \
		-e '/"module":/s/"offset":[0-9]*//' >"$WORK/t.o"
	"$ptls" --json "$f" 2>&1 | sed -e 's/^{"file":"[^"]*",//' \
		-e '/"module":/s/"offset":[0-9]*//' >"$WORK/t.d"
	cmp -s "$WORK/t.o" "$WORK/t.d" ||
		echo "ptls --json of $name differs from its stored original's" >>"$det"
	"$ptls" --check "$o" >/dev/null 2>&1
	a=$?
	"$ptls" --check "$f" >/dev/null 2>&1
	b=$?
	[ $a -eq $b ] ||
		echo "ptls --check $name: exit $b, its stored original $a" >>"$det"
	run_limited 60 "$ptdiff" "$o" "$f" >"$WORK/t.diff" 2>&1 ||
		echo "ptdiff $name against its original: exit $?: $(head -n 1 "$WORK/t.diff")" >>"$det"
	# a torch file comes back from ptrepack as it was: every record
	# written stored in torch's layout, whatever the input compressed
	case $name in t113-*|t214-*|net.pt|hog.pt)
		rm -f "$WORK/t.rp"
		if ! run_limited 60 "$ptrepack" "$f" "$WORK/t.rp" >"$WORK/t.out" 2>&1; then
			echo "ptrepack $name: $(head -n 1 "$WORK/t.out")" >>"$det"
		elif ! cmp -s "$WORK/t.rp" "$o"; then
			echo "ptrepack of deflated $name is not byte-identical to torch's file" >>"$det"
		fi ;;
	esac
done
if [ -s "$det" ]; then
	fail "deflated: ptls, ptdiff, ptrepack" "$(head -n 1 "$det")" "$det"
else
	pass "deflated: ptls, ptdiff, ptrepack" "$nt files: the same listing, --check status and no differences as their stored originals; torch files repack byte-identical"
fi
fi

# ------------------------- deflated: bounded memory, racing first reads
if want deflated_memory; then
det=$WORK/hog.details
: >"$det"
want=$(cat "$WORK/pay/hog.sha256")
if start_daemon "$WORK/def/hog.pt" "$WORK/mnt/hog" "$WORK/hog.err" -o ro; then
	pid=$(ptfs_pid)
	ls -l "$WORK/mnt/hog" >/dev/null
	hwm0=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
	# four readers race for the first inflation, then one more each way
	pids=
	for i in 1 2 3 4; do
		sha256sum "$WORK/mnt/hog/hog" >"$WORK/hog.$i" 2>&1 &
		pids="$pids $!"
	done
	for p in $pids; do
		wait "$p"
	done
	dd if="$WORK/mnt/hog/.ptfs/storages/0" bs=1M iflag=direct \
		status=none | sha256sum >"$WORK/hog.5"
	hl=$(od -An -tu2 -j8 -N2 "$WORK/mnt/hog/hog.npy" | tr -d ' ')
	tail -c +$((hl + 11)) "$WORK/mnt/hog/hog.npy" | sha256sum >"$WORK/hog.6"
	hwm1=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
	for i in 1 2 3 4 5 6; do
		[ "$(cut -d' ' -f1 "$WORK/hog.$i")" = "$want" ] ||
			echo "reader $i: $(cat "$WORK/hog.$i"), expected $want" >>"$det"
	done
	grow=$(( (hwm1 - hwm0) / 1024 ))
	[ "$grow" -lt 32 ] ||
		echo "daemon's peak memory grew by $grow MiB serving a 96 MiB deflated tensor" >>"$det"
	stop_daemon "$WORK/mnt/hog" || echo "could not unmount" >>"$det"
	daemon_done "$det" "$WORK/hog.err"
	if [ -s "$det" ]; then
		fail "deflated 96 MiB tensor" "$(head -n 1 "$det")" "$det"
	else
		pass "deflated 96 MiB tensor" "4 racing first readers, O_DIRECT .ptfs/storages and .npy agree; daemon peak memory +$grow MiB"
	fi
else
	fail "deflated 96 MiB tensor" "not mounted: $(head -n 1 "$WORK/hog.err")"
fi
fi

# ------------------------------------------------------ real fixtures
if want real_fixtures; then
b=$fx/real/broken_zip_version_record_only.pt
if [ "$fx_has_real" = 1 ]; then
	expect_refusal "real/broken_zip_version_record_only.pt" "$b" \
		"ptfs: $b: offset 0x52: no data.pkl record: not a torch.save checkpoint (an aborted save?)"
else
	skip "real/broken_zip_version_record_only.pt" "no real-world corpus"
fi
fi

conclude
