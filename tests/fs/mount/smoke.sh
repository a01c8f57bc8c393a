#!/bin/sh
# Quick mount test without torch or python: mount the sample checkpoint
# and look at it with ls, stat, getfattr, cat, od and dd; then bad input,
# the command line, daemon mode and read-only.
#
#   usage: sh tests/fs/mount/smoke.sh PTFS SAMPLE
#
# SAMPLE is tests/data/sample.pt (what tests/data/make_sample.py writes).
# Expected tensor bytes come from the zip record itself (unzip -p) when
# unzip is installed.  Bad input is also compared with ptls's message when
# a ptls sits next to PTFS.  Prints one line per check and finally
# "N passed, N failed[, N skipped]"; exit 0 all passed, 1 a failure, 77 no
# usable FUSE.  The daemon runs in the foreground with stderr captured, so
# a sanitizer build's reports fail the test.
set -u
LC_ALL=C
export LC_ALL

[ $# -eq 2 ] || { echo "usage: sh $0 PTFS SAMPLE" >&2; exit 2; }
PTFS=$1 sample=$2
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
[ -x "$PTFS" ] || { echo "not found or not executable: $PTFS" >&2; exit 1; }
[ -f "$sample" ] || { echo "no such file: $sample" >&2; exit 1; }
case $PTFS in /*) ;; *) PTFS=$(pwd)/$PTFS ;; esac
case $sample in /*) ;; *) sample=$(pwd)/$sample ;; esac
ptls=$(dirname "$PTFS")/ptls
[ -x "$ptls" ] || ptls=
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null 2>&1; then
	echo "no /dev/fuse or no fusermount3: skipping"
	exit 77
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptfs-smoke.XXXXXX") || exit 1
. "$fs/lib/lib.sh"
cleanup() {
	trap '' INT TERM HUP
	cleanup_mounts
	no_mounts_left && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt"

m=$WORK/mnt/sample
probe_fuse "$sample" "$m" "$WORK/ptfs.err" -o ro

# check LABEL EXPECTED ACTUAL
check() {
	if [ "$2" = "$3" ]; then
		pass "$1" "$(printf '%s' "$3" | head -n 1)"
	else
		printf 'expected: %s\nactual:   %s\n' "$2" "$3" >"$WORK/check.txt"
		fail "$1" "mismatch" "$WORK/check.txt"
	fi
}

# .ptfs/ and the views are reached by name, never listed (docs/views.md)
check "ls -A" "config epoch loss model optimizer" \
	"$(cd "$m" && ls -A | tr '\n' ' ' | sed 's/ $//')"
check "ls model" "block.0.bias block.0.weight block.1.bias block.1.weight embed.weight head.weight" \
	"$(ls "$m/model" | tr '\n' ' ' | sed 's/ $//')"
check "ls optimizer/state" "0 1 2 3 4" \
	"$(ls "$m/optimizer/state" | tr '\n' ' ' | sed 's/ $//')"
check "ls .ptfs" "as data.pkl storages version" \
	"$(ls "$m/.ptfs" | tr '\n' ' ' | sed 's/ $//')"
check "ls .ptfs/storages" 20 "$(ls "$m/.ptfs/storages" | wc -l)"
check "file types" "directory regular file regular file directory" \
	"$(stat -c %F "$m/model" "$m/model/embed.weight" "$m/epoch" "$m/.ptfs" | tr '\n' ' ' | sed 's/ $//')"
check "stat sizes" "512 256 32 4 3 7 5" \
	"$(stat -c %s "$m/model/embed.weight" "$m/model/block.0.weight" \
		"$m/model/block.0.bias" "$m/optimizer/state/0/step" "$m/epoch" \
		"$m/loss" "$m/config/name" | tr '\n' ' ' | sed 's/ $//')"
check "ls -lR sizes" 3124 \
	"$(ls -lR "$m/model" "$m/optimizer/state" | awk '$1 ~ /^-/ { s += $5 } END { print s }')"
check "modes" "555 444" "$(stat -c %a "$m/model" "$m/epoch" | tr '\n' ' ' | sed 's/ $//')"

check "getfattr user.dtype" float32 \
	"$(getfattr --only-values -n user.dtype "$m/model/embed.weight" 2>/dev/null)"
check "getfattr user.shape" 16,8 \
	"$(getfattr --only-values -n user.shape "$m/model/embed.weight" 2>/dev/null)"
check "getfattr user.stride" 8,1 \
	"$(getfattr --only-values -n user.stride "$m/model/embed.weight" 2>/dev/null)"
check "getfattr 0-d shape" "" \
	"$(getfattr --only-values -n user.shape "$m/optimizer/state/0/step" 2>/dev/null)"
check "getfattr tied storage" "0 0" \
	"$(for f in embed.weight head.weight; do getfattr --only-values -n user.storage "$m/model/$f" 2>/dev/null; echo; done | tr '\n' ' ' | sed 's/ $//')"
check "getfattr -d" "user.byteorder user.device user.dtype user.layout user.parameter user.requires_grad user.shape user.storage user.storage_offset user.stride user.type" \
	"$(getfattr -d "$m/model/block.0.bias" 2>/dev/null | sed -n 's/=.*//p' | sort | tr '\n' ' ' | sed 's/ $//')"
check "getfattr values" "float32 8 cpu false strided little Tensor" \
	"$(for a in dtype shape device requires_grad layout byteorder type; do getfattr --only-values -n user.$a "$m/model/block.0.bias" 2>/dev/null; echo; done | tr '\n' ' ' | sed 's/ $//')"
check "getfattr user.type of a dir" OrderedDict \
	"$(getfattr --only-values -n user.type "$m/model" 2>/dev/null)"
check "getfattr storage" "float32 128" \
	"$(for a in dtype numel; do getfattr --only-values -n user.$a "$m/.ptfs/storages/0" 2>/dev/null; echo; done | tr '\n' ' ' | sed 's/ $//')"

check "cat epoch" 12 "$(cat "$m/epoch")"
check "cat loss" 0.4375 "$(cat "$m/loss")"
check "cat config/name" tiny "$(cat "$m/config/name")"
check "cat config/dropout" None "$(cat "$m/config/dropout")"
check "cat lr, eps, amsgrad" "0.001 1e-08 False" \
	"$(cd "$m/optimizer/param_groups/0" && cat lr eps amsgrad | tr '\n' ' ' | sed 's/ $//')"
check "od epoch" "1 2 \\n" "$(od -A n -c "$m/epoch" | tr -s ' ' | sed 's/^ //;s/ $//')"
check "cat .ptfs/version" 3 "$(cat "$m/.ptfs/version")"

if cmp -s "$m/model/embed.weight" "$m/model/head.weight"; then
	pass "tied weights" "embed.weight and head.weight hold the same bytes"
else
	fail "tied weights" "embed.weight and head.weight differ"
fi
if cmp -s "$m/model/embed.weight" "$m/.ptfs/storages/0"; then
	pass "storage file" "embed.weight = .ptfs/storages/0"
else
	fail "storage file" "embed.weight differs from .ptfs/storages/0"
fi
if command -v unzip >/dev/null 2>&1; then
	for r in 0:model/embed.weight 2:model/block.0.bias 6:optimizer/state/0/exp_avg; do
		unzip -p "$sample" "sample/data/${r%%:*}" >"$WORK/rec"
		check "od ${r#*:}" "$(od -A d -t x4 "$WORK/rec")" \
			"$(od -A d -t x4 "$m/${r#*:}")"
		# unaligned direct reads: ptfs itself answers "3 bytes at 5"
		for at in 5:3 1:7 509:9 250:100; do
			check "dd iflag=direct ${at%%:*}+${at#*:} ${r#*:}" \
				"$(dd if="$WORK/rec" iflag=skip_bytes,count_bytes \
					skip=${at%%:*} count=${at#*:} bs=4096 2>/dev/null | od -A n -t x1)" \
				"$(dd if="$m/${r#*:}" iflag=direct,skip_bytes,count_bytes \
					skip=${at%%:*} count=${at#*:} bs=4096 2>/dev/null | od -A n -t x1)"
		done
	done
	unzip -p "$sample" sample/data.pkl >"$WORK/rec"
	if cmp -s "$WORK/rec" "$m/.ptfs/data.pkl"; then
		pass ".ptfs/data.pkl" "the raw record"
	else
		fail ".ptfs/data.pkl" "differs from the zip record"
	fi
else
	skip "od against the zip records" "no unzip"
fi

w=$( (: >>"$m/epoch") 2>&1)
case $w in
*"Read-only file system"*|*"Permission denied"*) pass "write refused" "$w" ;;
*) fail "write refused" "appending to epoch: ${w:-it worked}" ;;
esac
case ,$(mount_opts "$m"), in
*,ro,*) pass "mounted ro" "$(mount_opts "$m")" ;;
*) fail "mounted ro" "options: $(mount_opts "$m")" ;;
esac

: >"$WORK/unmount.txt"
stop_daemon "$m" || echo "could not unmount" >>"$WORK/unmount.txt"
[ "${DRC:-0}" -eq 0 ] || echo "ptfs exited with status $DRC" >>"$WORK/unmount.txt"
daemon_problems "$WORK/ptfs.err" "$WORK/unmount.txt"
is_mounted "$m" && echo "still mounted" >>"$WORK/unmount.txt"
[ -z "$(ls -A "$m" 2>/dev/null)" ] || echo "mount point not empty" >>"$WORK/unmount.txt"
if [ -s "$WORK/unmount.txt" ]; then
	fail "unmount" "problems after fusermount3 -u" "$WORK/unmount.txt"
else
	pass "unmount" "daemon exited 0, nothing on its stderr, mount point empty"
fi

if [ -n "$ptls" ]; then
	bad_inputs "$ptls" "$sample"
else
	bad_inputs "" "$sample"
fi
cli_checks "$sample"
daemon_mode_checks "$sample"
no_mounts_left || fail "no mounts left" "something is still mounted under $WORK/mnt"
summary
[ "$nfail" -eq 0 ]
