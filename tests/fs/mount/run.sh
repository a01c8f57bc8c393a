#!/bin/sh
# Real-mount tests: mount every shared fixture with ptfs and check the
# files, xattrs and links against torch.load of the same file.
#
#   usage: sh tests/fs/mount/run.sh [-k CASE] VERSION PTFS PTLS SHARED_DIR
#
# VERSION "1.13": Debian's torch (/usr/bin/python3); "2": torch 2.x in the
# chroot built by SHARED_DIR/tools/torch2-root (the mounts are made under
# its /tmp, so the chroot sees them).  Per file: `ptls --json` natively;
# files ptls refuses (broken, hostile) must be refused by ptfs
# with the same one-line error and nothing mounted; the others are mounted
# (ptfs -f, stderr captured for sanitizer reports) and check_mount.py, one
# torch process for the whole run, checks the mount; then unmounted.
# Then: concurrent readers (concurrent_readers.py), bad input, command line,
# daemon mode and read-only checks.
#
# Prints one line per check and finally "N passed, N failed[, N skipped]".
# Exit 0 all passed, 1 a failure, 77 skipped (no usable /dev/fuse, no
# fixtures; no torch with PT_ALLOW_SKIP_TORCH=1).  Never leaves a mount
# behind.  PTFS_TEST_TIMEOUT (default 120) bounds each ptfs daemon's life.
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
fs_need_fuse

fs_torch "$shared" ptfs-fs

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
mkdir -p "$WORK/mnt" "$WORK/py" "$WORK/files" || exit 1
cp "$here/check_mount.py" "$fs/lib/ptfs_expect.py" "$here/concurrent_readers.py" \
	"$here/gen_fs.py" "$WORK/py/" || exit 1
cp "$fs/../torch/compare.py" "$fs/../torch/gen_edge.py" "$WORK/py/" ||
	exit 1

# pyrun SECONDS SCRIPT ARG...: run a script of $WORK/py under the torch in
# test, time-limited; paths in ARG are as the python sees them ($inner/...)
pyrun() {
	_t=$1 _s=$2
	shift 2
	if [ "$version" = 1.13 ]; then
		run_limited "$_t" "$py" "$WORK/py/$_s" "$@"
	else
		run_limited "$_t" chroot "$root" python3 "$inner/py/$_s" "$@"
	fi
}

# Is FUSE usable at all?  A tiny mount of the sample checkpoint.
probe_fuse "$sample" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
stop_daemon "$WORK/mnt/probe"

# Edge cases the fixtures lack, written by the torch under test.
pyrun 300 gen_fs.py "$inner/generated" "$inner/py/gen_edge.py" \
	>"$WORK/gen.log" 2>&1 || {
	echo "gen_fs.py failed under torch $version:" >&2
	grep -v 'UCX\|cpuinfo' "$WORK/gen.log" | tail -n 5 >&2
	exit 1
}

# The worker: one torch process answering "check" requests over FIFOs.
mkfifo "$WORK/req" "$WORK/resp" || exit 1
WORKER_PY=check_mount.py WORKER_ARG=$inner
start_worker || exit 1
echo "$("$PTFS" --version 2>/dev/null | grep '^ptfs ' | head -n 1); ${ready#*"$TAB"}"

# check_file LABEL HOSTPATH PYPATH: one checkpoint
n=0
check_file() {
	label=$1 host=$2 pyp=$3
	n=$((n + 1))
	stem=$(printf 'r%03d' "$n")
	det=$WORK/$stem.details
	: >"$det"
	run_limited 60 "$ptls" --json "$host" >"$WORK/$stem.json" \
		2>"$WORK/$stem.err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		# ptfs must refuse it with ptls's message, and mount nothing
		want=$(head -n 1 "$WORK/$stem.err" | sed 's/^ptls: /ptfs: /')
		expect_refusal "$label" "$host" "$want"
		return
	fi
	mnt=$WORK/mnt/$stem
	if ! start_daemon "$host" "$mnt" "$WORK/$stem.ptfs.err" -o ro; then
		fail "$label" "ptls lists it but ptfs did not mount it: $(head -n 1 "$WORK/$stem.ptfs.err")"
		return
	fi
	reply=
	if printf 'check\t%s\t%s\t%s\t%s\n' "$label" "$pyp" "$stem" \
		"mnt/$stem" >&3; then
		IFS= read -r reply <&4 || reply=
	fi
	if [ -z "$reply" ]; then
		echo "check_mount.py died: $(grep -v 'UCX\|cpuinfo' "$WORK/worker.err" | tail -n 1)" >>"$det"
		stop_worker
		unmount "$mnt"
		start_worker || exit 1
	fi
	stop_daemon "$mnt" || echo "could not unmount $mnt" >>"$det"
	status=${reply%%"$TAB"*} summary=${reply#*"$TAB"}
	[ -f "$WORK/$stem.report" ] && cat "$WORK/$stem.report" >>"$det"
	case ${DRC:-0} in
	0) ;;
	124|137) echo "ptfs was killed after ${DAEMON_TIMEOUT}s" >>"$det" ;;
	*) echo "ptfs exited with status $DRC after unmount" >>"$det" ;;
	esac
	daemon_problems "$WORK/$stem.ptfs.err" "$det"
	if [ "$status" = ok ] && [ ! -s "$det" ]; then
		pass "$label" "$summary"
	else
		fail "$label" "${summary:-no answer}" "$det"
	fi
}

nfiles=0
for d in torch-1.13 torch-2 real generated; do
	dir=$fx/$d
	[ "$d" = generated ] && dir=$WORK/generated
	for f in "$dir"/*; do
		[ -f "$f" ] || continue
		name=${f##*/}
		[ "$name" = SOURCES.md ] && continue
		want "$d/$name" || continue
		nfiles=$((nfiles + 1))
		if [ "$version" = 1.13 ]; then
			pyp=$f
		elif [ "$d" = generated ]; then
			pyp=$inner/generated/$name
		else
			cp "$f" "$WORK/files/$d-$name" || exit 1
			pyp=$inner/files/$d-$name
		fi
		check_file "$d/$name" "$f" "$pyp"
	done
done
if [ "$nfiles" -eq 0 ]; then
	echo "shared fixtures not found at $fx (no files): skipping"
	exit 77
fi
stop_worker

# Concurrent readers: processes x threads on one mount, same and different
# tensors, strided views included.
concurrent() {
	label="concurrent ${1##*/}"
	n=$((n + 1))
	c=$WORK/conc$n
	: >"$c.details"
	"$ptls" --json "$1" >"$c.json" 2>/dev/null || {
		fail "$label" "ptls refuses it"
		return
	}
	mnt=$WORK/mnt/conc$n
	if ! start_daemon "$1" "$mnt" "$c.ptfs.err" -o ro; then
		fail "$label" "not mounted: $(head -n 1 "$c.ptfs.err")"
		return
	fi
	# $2 is "PROCS THREADS ROUNDS", split on purpose
	if [ "$version" = 1.13 ]; then
		# shellcheck disable=SC2086
		out=$(pyrun 300 concurrent_readers.py "$mnt" "$c.json" "$1" $2 \
			2>"$c.err")
	else
		cp "$1" "$c.pt"
		# shellcheck disable=SC2086
		out=$(pyrun 300 concurrent_readers.py "$inner/mnt/conc$n" \
			"$inner/conc$n.json" "$inner/conc$n.pt" $2 2>"$c.err")
	fi
	crc=$?
	stop_daemon "$mnt" || echo "could not unmount $mnt" >>"$c.details"
	printf '%s\n' "$out" | sed -n '2,$p' >>"$c.details"
	[ "$crc" -eq 0 ] || [ -n "$out" ] ||
		echo "concurrent_readers.py: $(grep -v 'UCX\|cpuinfo' "$c.err" | tail -n 1)" >>"$c.details"
	[ "${DRC:-0}" -eq 0 ] || echo "ptfs exited with status $DRC" >>"$c.details"
	daemon_problems "$c.ptfs.err" "$c.details"
	line=$(printf '%s\n' "$out" | head -n 1)
	if [ "$crc" -eq 0 ] && [ ! -s "$c.details" ]; then
		pass "$label" "${line#ok }"
	else
		line=${line#FAIL }
		fail "$label" "${line:-exit $crc}" "$c.details"
	fi
}
concurrent "$WORK/generated/strided.pt" "4 4 3"
concurrent "$WORK/generated/huge_views.pt" "3 3 2"
[ "$fx_has_real" = 1 ] &&
	concurrent "$fx/real/z2_agilerl_matd3_300_storages.pt" "4 3 2"

# Bad input, command line, daemon mode and read-only.
EXTRA_TRUNCATE="$fx/torch-1.13/legacy.pt"
[ "$fx_has_real" = 1 ] &&
	EXTRA_TRUNCATE="$EXTRA_TRUNCATE $fx/real/z2_burn_mnist_state_dict.pt"
bad_inputs "$ptls" "$sample"
cli_checks "$sample"
daemon_mode_checks "$sample"

conclude
