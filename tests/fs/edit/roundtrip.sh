#!/bin/sh
# Every checkpoint torch writes opens, mounts and round-trips (issue 16,
# and issue 14's shared dict): the torch under test writes each case with
# rt_gen.py; ptls must list it, a writable mount takes an edit, `ptfs
# umount` writes it back, and torch 1.13 and torch 2.x (rt_check.py) must
# load exactly the original with the same edit made in python.
#
#   usage: sh tests/fs/edit/roundtrip.sh [-k CASE] VERSION PTFS PTLS PTREPACK [CASE...]
#
# Cases (default: all but "many"): legacy_module, legacy_seq (whole
# modules saved with _use_new_zipfile_serialization=False),
# empty_two_dtypes, crcless (2.x only), onecycle (a scheduler whose state
# holds a bound method of itself), slots, slots_moved (a slot moved out
# and back, made anew: it must come back a slot), scalar_lists (an RNG
# state and long lists of scalars, one value file each), shared_dict ({'a': s, 'b': s},
# rm -r a), subclass (wrapper subclasses, 2.x only), meta_subclass
# (subclasses of a meta tensor holding their real tensor in a state
# from __getstate__: a tuple, or (dict, slots)), zip_of_ckpts (a
# Stable-Baselines3-like zip), many (530,000 one-element tensors; RT_MANY
# sets the count).  Beside the round trip each case checks what it is
# about: the mount's view, xattrs, CRCs, ptrepack.
#
# Prints one line per check and "N passed, N failed[, N skipped]"; exits
# 0, 1, or 77 (no /dev/fuse).  Never leaves a mount or daemon behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS PTREPACK [CASE...]" 4 99 "$@"
PTFS=$2 ptls=$3 ptrepack=$4 asked=$1
shift 4
cases=${*:-legacy_module legacy_seq empty_two_dtypes crcless onecycle slots slots_moved scalar_lists shared_dict subclass meta_subclass zip_of_ckpts}
fs_progs PTFS ptls ptrepack
fs_need_fuse

: "${PTFS_TEST_TIMEOUT:=600}"
# both torches check every file: the scratch directory lives in the torch
# 2.x root, where 1.13 (on the host) sees it too
# (fs_torch picks by $version: the torch under test is put back after)
under_test=$version
version=2
fs_torch "" ptfs-rt
version=$under_test
py13=/usr/bin/python3
torch_version "$py13" >/dev/null || no_torch 1.13 "$py13 has no torch"
. "$fs/lib/lib.sh"

cleanup() {
	trap '' INT TERM HUP
	release_work
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/in" "$WORK/py" "$WORK/c" "$WORK/mnt" || exit 1
cp "$here/rt_gen.py" "$here/rt_check.py" "$here/rt_classes.py" \
	"$WORK/py/" || exit 1

# py13/py2 SCRIPT ARG...: run with torch 1.13 / 2.x, paths relative to
# WORK, each torch's calls in one process (lib/tserve.py)
pyts() {	# VERSION DIR SCRIPT ARG...
	_pv=$1 _pd=$2 _ps=$3
	shift 3
	fs_tcall "$_pv" py.out "$_pd" "$_pd/py/$_ps" "$@"
	_pr=$?
	cat "$WORK/py.out"
	cp "$WORK/py.out.err" "$WORK/py.err"
	return $_pr
}
py13() {
	if _ts_sendable "$@" && fs_tserve 1.13; then
		pyts 1.13 "$WORK" "$@"
		return
	fi
	(cd "$WORK" && "$py13" "py/$@") 2>"$WORK/py.err"
}
py2() {
	if _ts_sendable "$@" && fs_tserve 2; then
		pyts 2 "$inner" "$@"
		return
	fi
	chroot "$root" sh -c 'cd "$1" && shift && exec python3 "$@"' sh \
		"$inner" "py/$@" 2>"$WORK/py.err"
}
pyv() { if [ "$version" = 1.13 ]; then py13 "$@"; else py2 "$@"; fi; }
fs_tserve 1.13 || :
fs_tserve 2 || :

echo "# $("$PTFS" --version 2>/dev/null | head -n 1); files written by torch $version"
if ! pyv rt_gen.py in $cases >"$WORK/gen.out"; then
	echo "rt_gen.py failed under torch $version: $(grep -v 'UCX\|cpuinfo' "$WORK/py.err" | tail -n 1)" >&2
	exit 1
fi
# the torch under test wrote them (1.13 wrote nothing here for a while)
writer=$(sed -n 's/^torch //p' "$WORK/gen.out" | head -n 1)
case $asked:$writer in
1.13:1.13*|2:2.*) pass "writer" "torch $writer" ;;
*) fail "writer" "the files were written by torch ${writer:-?}, not $asked" ;;
esac

# ------------------------------------------------------------ helpers
DET=
step() { check "$CASE: $1" "$2"; }	# note and check: lib.sh
# run CMD...: must succeed, else a note with its first stderr line
run() {
	run_limited 300 "$@" >"$C/cmd.out" 2>"$C/cmd.err" && return 0
	note "$*: exit $?: $(grep -v '^$' "$C/cmd.err" | head -n 1)"
	return 1
}
f32_10() { printf '\000\000\040\101' | dd of="$1" conv=notrunc status=none; }
f32_11() { printf '\000\000\060\101' | dd of="$1" conv=notrunc status=none; }

# torch_check FILE: rt_check.py with both torches (skip where the torch
# cannot load the original either, and say so)
torch_check() {
	for v in 1.13 2; do
		if [ $v = 1.13 ]; then
			py13 rt_check.py "$CASE" "in/$CASE.pt" "$1" >"$C/chk.out"
		else
			py2 rt_check.py "$CASE" "in/$CASE.pt" "$1" >"$C/chk.out"
		fi
		st=$?
		msg=$(tail -n 1 "$C/chk.out")
		[ -n "$msg" ] || msg="rt_check.py died: $(grep -v 'UCX\|cpuinfo' "$WORK/py.err" | tail -n 1)"
		case $st in
		0) pass "$CASE: torch $v" "${msg#ok: }" ;;
		77) skip "$CASE: torch $v" "${msg#skip: }" ;;
		*) fail "$CASE: torch $v" "${msg#FAIL: }" ;;
		esac
	done
}

# edit_CASE M: the edit rt_check.py's edit() mirrors, through mount M
edit_legacy_module() { f32_10 "$1/_parameters/weight"; }
edit_legacy_seq() {
	echo 8 >"$1/epoch" && f32_10 "$1/model/_modules/0/_parameters/bias"
}
edit_empty_two_dtypes() { mkdir "$1/new" && f32_10 "$1/w"; }
edit_crcless() { f32_10 "$1/w"; }
edit_onecycle() { mkdir "$1/extra" && echo 2 >"$1/epoch"; }
edit_slots() {
	echo 5 >"$1/obj/x" && echo 9 >"$1/only/a" && mkdir "$1/obj/newattr"
}
# a slot moved out and back (issue 39 item 7), a slot removed and made
# anew, a dict attribute removed and made anew, a slot of a class with
# no __dict__ moved away and back by rename
edit_slots_moved() {
	mkdir "$1/probe" && mv "$1/o/y" "$1/probe/" && mv "$1/probe/y" "$1/o/" &&
		rmdir "$1/probe" && rm "$1/p/y" && mkdir "$1/p/y" &&
		mv "$1/only/b" "$1/only/b2" && mv "$1/only/b2" "$1/only/b"
}
edit_scalar_lists() {
	mkdir "$1/new" &&
		printf '[0.5, None, True, 3, -1e-300%s]\n' "$(printf ', 2%.0s' $(seq 15))" >"$1/hist"
}
edit_shared_dict() { rm -r "$1/a"; }
edit_many() { f32_10 "$1/t123" && mkdir "$1/newdir"; }
edit_zip_of_ckpts() { f32_10 "$1/mlp.bias"; }
edit_subclass() {
	echo tag2 >"$1/holder/tag" && f32_10 "$1/tt/a" && mkdir "$1/tt/extra"
}
edit_meta_subclass() {
	# the tuple's parts by position: 0 'v1', 1 the tensor, 2 the dict
	f32_10 "$1/st/1" && echo b >"$1/st/2/note" && mkdir "$1/st/2/extra" &&
		f32_11 "$1/sl/elem" && echo 7 >"$1/sl/other" || return 1
	# a part of a tuple has no name to give up or take: refused
	if mv "$1/st/0" "$1/st/marker" 2>/dev/null || mkdir "$1/st/x" 2>/dev/null; then
		echo "st: a part of its tuple state was renamed or added" >&2
		return 1
	fi
}

# view_CASE M: what the mount shows, before the edit
view_empty_two_dtypes() {
	[ "$(getfattr --only-values -n user.dtype "$1/b" 2>/dev/null)" = int64 ] ||
		note "b: user.dtype is not int64"
	[ "$(getfattr --only-values -n user.dtype "$1/h" 2>/dev/null)" = float16 ] ||
		note "h: user.dtype is not float16"
	[ "$(stat -c %s "$1/a")" = 0 ] || note "a is not empty"
}
view_legacy_module() {
	[ "$(getfattr --only-values -n user.type "$1" 2>/dev/null)" = Linear ] ||
		note "the root's user.type is not Linear"
	[ "$(stat -c %s "$1/_parameters/weight")" = 8 ] ||
		note "_parameters/weight is not 8 bytes"
}
view_scalar_lists() {
	for f in rng/1 hist flags; do
		[ -f "$1/$f" ] || note "$f is not one value file"
	done
	case $(head -c 12 "$1/flags") in
	"[True, None,") ;;
	*) note "flags reads '$(head -c 12 "$1/flags")'" ;;
	esac
}
view_shared_dict() {
	[ "$(readlink "$1/b")" = a ] || note "b is not a link to a"
}
view_subclass() {
	for a in class:torch.testing._internal.two_tensor.TwoTensor \
	    shape:2,3 stride:3,1 dtype:float32 device:cpu; do
		got=$(getfattr --only-values -n "user.${a%%:*}" "$1/tt" 2>/dev/null)
		[ "$got" = "${a#*:}" ] || note "tt: user.${a%%:*} is '$got', not '${a#*:}'"
	done
	cmp -s "$1/tt/a" "$1/.ptfs/storages/0" ||
		note "tt/a is not the bytes of storage 0"
	[ "$(cat "$1/holder/tag")" = tag1 ] || note "holder/tag is not tag1"
}

view_meta_subclass() {
	[ "$(ls "$1/st" | tr '\n' ' ')" = "0 1 2 " ] ||
		note "st holds '$(ls "$1/st" | tr '\n' ' ')', not 0 1 2"
	[ "$(cat "$1/st/0")" = v1 ] || note "st/0 is not v1"
	[ "$(getfattr --only-values -n user.class "$1/st" 2>/dev/null)" = rt_classes.MetaState ] ||
		note "st: user.class is not rt_classes.MetaState"
	[ "$(getfattr --only-values -n user.device "$1/st" 2>/dev/null)" = meta ] ||
		note "st: user.device is not meta"
	[ "$(stat -c %s "$1/st/1")" = 16 ] || note "st/1 is not 16 bytes"
	[ "$(ls "$1/sl" | tr '\n' ' ')" = "elem other x " ] ||
		note "sl holds '$(ls "$1/sl" | tr '\n' ' ')', not elem other x"
	[ "$(stat -c %s "$1/sl/elem")" = 24 ] || note "sl/elem is not 24 bytes"
}

# after_CASE FILE: checks of the written file beside torch's
after_shared_dict() {
	# the kernel drops its cached symlink b once ptfs's invalidation
	# thread gets to it, after the rmdir is answered: poll, bounded
	_i=0
	while { [ ! -d "$M/b" ] || [ -L "$M/b" ]; } && [ $_i -lt 500 ]; do
		sleep 0.02
		_i=$((_i + 1))
	done
	[ -d "$M/b" ] && [ ! -L "$M/b" ] || note "after rm -r a, b is no directory"
	[ "$(readlink "$M/c/0")" = ../b ] || note "c/0 does not link to ../b"
	[ "$(ls "$M/b" | tr '\n' ' ')" = "x y z " ] ||
		note "b holds '$(ls "$M/b" | tr '\n' ' ')', not x y z"
	[ -f "$M/b/z/deep" ] || note "b/z/deep is gone"
}
after_crcless() {
	"$py13" - "$1" <<'EOF' >"$C/crc.out" 2>&1 || note "$(tail -n 1 "$C/crc.out")"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
zero = [i.filename for i in z.infolist() if i.CRC == 0 and i.file_size]
bad = z.testzip()
if zero or bad:
    sys.exit('CRC 0 in %s, wrong in %s' % (zero[:3], bad))
EOF
}

# ------------------------------------------------------------ the cases
for CASE in $cases; do
	want "$CASE" || continue
	line=$(grep "^$CASE " "$WORK/gen.out")
	case $line in
	*" skip: "*) skip "$CASE" "${line#* skip: }"; continue ;;
	*" written") ;;
	*) fail "$CASE" "rt_gen.py wrote nothing"; continue ;;
	esac
	C=$WORK/c/$CASE M=$WORK/mnt/$CASE DET=$WORK/c/$CASE/details
	mkdir -p "$C" "$M"
	: >"$DET"
	IN=$WORK/in/$CASE.pt CK=$C/$CASE.pt RCK=c/$CASE/$CASE.pt
	cp "$IN" "$CK" || exit 1

	if [ "$CASE" = zip_of_ckpts ]; then
		# named for what it is, members listed; then a member mounts
		want="ptls: $IN: offset 0x0: a zip of 6 files, not a checkpoint; it holds 3 checkpoints inside: policy.optimizer.pth, policy.pth, pytorch_variables.pth (unzip one and open that)"
		"$ptls" "$IN" >/dev/null 2>"$C/ls.err"
		st=$?
		[ $st -ne 0 ] || note "ptls exits 0"
		[ "$(cat "$C/ls.err")" = "$want" ] ||
			note "ptls says: $(head -n 2 "$C/ls.err")"
		step "named" "ptls: $(sed 's/.*offset 0x0: //' "$C/ls.err")"
		expect_refusal "$CASE: ptfs" "$IN" "ptfs: ${want#ptls: }"
		rm -f "$CK"
		(cd "$C" && unzip -q -o "$IN" policy.pth) || note "unzip failed"
		CK=$C/policy.pth RCK=c/$CASE/policy.pth
	fi

	# listed
	run "$ptls" "$CK" && [ -s "$C/cmd.out" ]
	step "ptls" "$(grep -c . "$C/cmd.out") lines"

	if [ "$CASE" = crcless ]; then
		# every CRC filled, all else torch's bytes: the same object
		# saved with CRCs, but for serialization_id (only logged)
		run "$ptrepack" "$CK" "$C/repack.pt" && after_crcless "$C/repack.pt"
		"$py13" - "$C/repack.pt" "$WORK/in/crc_on/$CASE.pt" <<'EOF' >"$C/cmp.out" 2>&1 || note "$(tail -n 1 "$C/cmp.out")"
import sys, zipfile
a, b = (zipfile.ZipFile(p) for p in sys.argv[1:3])
def recs(z):
    return [(i.filename, i.header_offset,
             0 if i.filename.endswith('serialization_id') else i.CRC)
            for i in z.infolist()]
na, nb = recs(a), recs(b)
if na != nb:
    sys.exit('records differ: %s' % [x for x in zip(na, nb) if x[0] != x[1]][:2])
for i in a.infolist():
    if a.read(i) != b.read(i.filename) and not i.filename.endswith('serialization_id'):
        sys.exit('%s differs' % i.filename)
EOF
		step "ptrepack" "every CRC filled; records, offsets and CRCs those of torch's save with CRCs"
	fi

	# mounted, viewed, edited, written back
	if start_daemon "$CK" "$M" "$C/ptfs.err"; then
		command -v "view_$CASE" >/dev/null && "view_$CASE" "$M"
		step "mount" "mounted$(command -v "view_$CASE" >/dev/null && echo ', the view checked')"
		"edit_$CASE" "$M" 2>"$C/edit.err" ||
			note "the edit failed: $(head -n 1 "$C/edit.err")"
		command -v "after_$CASE" >/dev/null && [ "$CASE" = shared_dict ] &&
			after_shared_dict
		step "edit" "edited through the mount"
		[ "$CASE" = meta_subclass ] && "$PTFS" status "$M" >"$C/status.out" 2>&1
		run_limited 600 "$PTFS" umount "$M" >"$C/umount.out" 2>&1 ||
			note "ptfs umount failed: $(head -n 1 "$C/umount.out")"
		is_mounted "$M" && note "still mounted after ptfs umount"
		stop_daemon "$M"
		if [ "$CASE" = meta_subclass ]; then
			# edit_meta_subclass's two refused calls: one line each
			_r="st: the state of a rt_classes.MetaState is what its __getstate__ gave, by position"
			[ "$(grep -c "$_r" "$C/ptfs.err")" = 2 ] ||
				note "not two lines '$_r...' in the daemon's log"
			# status lists the mkdir, saying where attributes go
			# (issue 39 item 9)
			grep -q "^  st/x: EPERM: $_r.*; to add an attribute, make it inside st/2, the dict among them$" "$C/status.out" ||
				note "ptfs status: the refused mkdir st/x does not point to st/2: $(grep "st/x" "$C/status.out" | head -n 1)"
			grep -v "$_r" "$C/ptfs.err" >"$C/ptfs.rest"
			mv "$C/ptfs.rest" "$C/ptfs.err"
		fi
		daemon_problems "$C/ptfs.err" "$DET"
		step "umount" "written back"
	else
		fail "$CASE: mount" "$(head -n 1 "$C/ptfs.err")"
		continue
	fi
	[ "$CASE" = crcless ] && { after_crcless "$CK"; step "crc" "every record's CRC right after the write-back"; }
	torch_check "$RCK"
done
summary
[ "$nfail" -eq 0 ]
