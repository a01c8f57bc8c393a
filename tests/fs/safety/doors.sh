#!/bin/sh
# doors.sh - the member files of the multi-file formats (HF sharded
# folders, DCP directories) through real mounts: issue 38's defects 1, 2,
# 3, 4 and 6, and the Hugging Face cache layout the fix must keep.  Each
# case is a way a member file could be reached other than through the one
# door the issue asks for (beneath the root, a regular file, its identity
# checked, its owner and mode shown):
#
#   symlinked_subdir  the index names sub/important.pt, sub -> ../victim:
#                     ptfs and ptls refuse with one line naming sub; if it
#                     mounts anyway, an edit of important.pt and rm of a
#                     tensor of precious.pt, then `ptfs umount`: victim/
#                     must still hold exactly important.pt, same bytes
#   named_twice       B.bin -> A.bin, the index names both: refused with
#                     one line naming both (the folder unchanged), or
#                     mounted as aliases: after an edit and `ptfs umount`
#                     every name the index gives exists and torch loads
#                     it, ptls opens the folder, no removal is claimed
#   named_twice_dir   sub -> . and the names x.bin and sub/x.bin: refused
#                     (sub is a symlinked directory), the folder unchanged
#   dcp_rewritten     a DCP directory mounted -o ro, a tensor and `step`
#                     read, then dcp.save of other values into it (the
#                     .distcp rewritten on its inode): every later read of
#                     w, v (not read before) and step fails or gives the
#                     old bytes, never the new ones
#   fifo              a fifo as .metadata, as the .distcp it names, as the
#                     index of an HF folder (the folder and the index
#                     given): ptls, ptverify and ptfs each exit non-zero
#                     within 10 s with one line naming the file and saying
#                     it is not a regular file
#   allow_other       root mounts -o ro,allow_other, a second real user
#                     (useradd) reads: a 0600 shard (refused, a 0644 one
#                     read), a 0600 file under .ptfs/files/, shadow.txt ->
#                     /etc/shadow, the tensors of 0600 .distcp files behind
#                     a 0644 .metadata, .ptfs/as/model.safetensors of
#                     either (it holds the 0600 file's bytes) and the same
#                     files under .ptfs/as/: all refused, none listed as
#                     readable by others; a 0600 .pt as the baseline
#   hf_cache          repo/snapshots/REV/* each a symlink to
#                     ../../blobs/SHA256: ptls lists, ptfs mounts, bytes as
#                     torch loads them, an edit of shard 1 written back:
#                     blobs/ byte for byte the same, the snapshot loads
#                     with the edit, a second mount shows it
#
# The HF shards are written and loaded by the torch under test; the DCP
# directories by torch 2.x whatever VERSION is (the scratch directory lies
# in its root, where both torches see it).
#
#   usage: sh tests/fs/safety/doors.sh [-k CASE] VERSION PTFS PTLS PTVERIFY
#
# allow_other needs root, useradd and setpriv (skipped without).  Prints
# one line per check and finally "N passed, N failed"; exit 0 when all
# passed, 1 otherwise, 77 without /dev/fuse.  Never leaves a mount behind.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}	# tests/fs: lib/ and the other areas
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 PTFS PTLS PTVERIFY" 4 4 "$@"
PTFS=$2 ptls=$3 ptverify=$4
fs_progs PTFS ptls ptverify
fs_need_fuse
umask 022

: "${PTFS_TEST_TIMEOUT:=120}"
# the scratch directory in torch 2.x's root, which torch 1.13 (on the
# host) sees too (fs_torch picks by $version: put back after)
under_test=$version
version=2
fs_torch "" ptfs-doors
version=$under_test
DAEMON_LOGS_OK=1
. "$fs/lib/lib.sh"

U2=ptfsdoor$$ made_user=
cleanup() {
	trap '' INT TERM HUP
	cleanup_mounts
	fs_tserve_stop
	[ -z "$made_user" ] || userdel "$U2" 2>/dev/null
	release_work
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/py" || exit 1
cp "$here/doors_check.py" "$WORK/py/" || exit 1

# pyts VERSION CMD ARG...: doors_check.py CMD ARG... under torch VERSION,
# from $WORK (paths relative to it), through the script server; its
# stdout on ours, its stderr in $WORK/py.stderr
pyts() {
	_pv=$1
	shift
	if [ "$_pv" = 2 ]; then _pd=$inner; else _pd=$WORK; fi
	if _ts_sendable "$@" && fs_tserve "$_pv"; then
		fs_tcall "$_pv" py.out "$_pd" "$_pd/py/doors_check.py" "$@"
		_pr=$?
		cat "$WORK/py.out"
		cp "$WORK/py.out.err" "$WORK/py.stderr"
		return $_pr
	fi
	if [ "$_pv" = 2 ]; then
		chroot "$root" sh -c 'cd "$1" && shift && exec python3 "$@"' \
			sh "$inner" py/doors_check.py "$@" 2>"$WORK/py.stderr"
	else
		(cd "$WORK" && /usr/bin/python3 py/doors_check.py "$@") \
			2>"$WORK/py.stderr"
	fi
}
pyv() { pyts "$version" "$@"; }	# the torch under test: HF shards
py2() { pyts 2 "$@" >/dev/null; }	# torch 2.x: DCP directories
pyerr() { grep -v 'UCX\|cpuinfo\|Warning\|return func' "$WORK/py.stderr" | tail -n 1; }

DET=$WORK/det
: >"$DET"
# setup_failed LABEL: a case whose files could not be made
setup_failed() { fail "$1" "setup: $(pyerr)"; }

# tree DIR: every entry below DIR, links by target, files by sha256 and
# mode (find does not follow links): equal when nothing changed
tree() {
	(cd "$1" && find . -mindepth 1 | sort | while IFS= read -r _f; do
		if [ -L "$_f" ]; then
			echo "$_f -> $(readlink "$_f")"
		elif [ -f "$_f" ]; then
			echo "$_f $(stat -c %a "$_f") $(sha256sum <"$_f" | cut -c1-16)"
		else
			echo "$_f $(stat -c '%a %F' "$_f")"
		fi
	done)
}

# tool OUT CMD...: CMD under timeout 20 (a hang is killed), stdout in
# $WORK/OUT.out, stderr in $WORK/OUT.stderr; sets T_RC and T_MS (its
# wall time in ms)
tool() {
	_to=$1
	shift
	_t0=$(date +%s%N)
	timeout -k 5 20 "$@" >"$WORK/$_to.out" 2>"$WORK/$_to.stderr"
	T_RC=$?
	T_MS=$((($(date +%s%N) - _t0) / 1000000))
}
# refused OUT NEEDLES [report]: the last tool() exited non-zero on its
# own within 10 s with one line on stderr that holds every |-separated
# NEEDLE (case blind).  "report" (ptverify, whose findings are its report
# on stdout): at most one line on stderr, and one line of stdout or
# stderr holding them.  What is wrong goes to $DET.
refused() {
	_e=$WORK/$1.stderr _a=$WORK/$1.all
	_before=$(wc -c <"$DET")
	case $T_RC in
	0) note "exit 0" ;;
	124|137) note "hung: killed after 20 s" ;;
	*) [ "$T_MS" -le 10000 ] || note "took $T_MS ms" ;;
	esac
	_nl=$(wc -l <"$_e")
	if [ "${3:-}" = report ]; then
		[ "$_nl" -le 1 ] || note "stderr has $_nl lines"
		cat "$WORK/$1.out" "$_e" >"$_a"
	else
		[ "$_nl" -eq 1 ] || note "stderr has $_nl lines, not 1"
		cp "$_e" "$_a"
	fi
	_ifs=$IFS
	IFS='|'
	for _n in $2; do
		grep -iF -- "$_n" "$_a" >"$_a.1"
		mv "$_a.1" "$_a"
	done
	IFS=$_ifs
	[ -s "$_a" ] || note "no line says: $2"
	[ "$(wc -c <"$DET")" = "$_before" ] ||
		note "output: $(cat "$WORK/$1.out" "$_e" | head -n 3)"
}
# try_mount OUT CKPT MNT [OPTION...]: ptfs CKPT MNT as a user runs it
# (daemon mode, under tool()); 0 when MNT is mounted after it
try_mount() {
	_o=$1 _c=$2 _m=$3
	shift 3
	mkdir -p "$_m"
	tool "$_o" "$PTFS" "$@" "$_c" "$_m"
	is_mounted "$_m"
}
# umount_report MNT: `ptfs umount MNT` (its output in $UMOUNT, status in
# $UMOUNT_RC), then nothing left mounted there
umount_report() {
	UMOUNT=$(run_limited 60 "$PTFS" umount "$1" 2>&1)
	UMOUNT_RC=$?
	unmount "$1" || note "$1 stays mounted"
}
# unblock FIFO: a reader stuck opening FIFO (a hung tool that timeout did
# not reach) is let go
unblock() { [ -p "$1" ] && { exec 7<>"$1"; exec 7>&-; }; :; }
# edit4 FILE BYTES: BYTES (printf escapes) over FILE's first bytes
# shellcheck disable=SC2059
edit4() { printf "$2" | dd of="$1" conv=notrunc status=none; }
# ocheck LABEL FILE: FILE's mode has no read bit for others
ocheck() {
	[ -e "$2" ] || return 0
	_md=$(stat -c %a "$2")
	[ $((0$_md & 4)) -eq 0 ] || note "$1 is listed as $(stat -c %A "$2")"
}

echo "# $("$PTFS" --version 2>/dev/null | head -n 1); shards by torch $version, DCP by torch 2.x"

# ------------------------------------------------------------ 1
if want symlinked_subdir; then
L=symlinked_subdir
d=$WORK/c1/folder v=$WORK/c1/victim m=$WORK/mnt/c1
mkdir -p "$d" "$v"
if pyv save c1/victim/important.pt imp >/dev/null &&
    pyv save c1/folder/precious.pt p1 p2 >/dev/null &&
    pyv index c1/folder/pytorch_model.bin.index.json imp=sub/important.pt \
	p1=precious.pt p2=precious.pt && ln -s ../victim "$d/sub"; then
	vt=$(tree "$v") ft=$(tree "$d")
	tool c1ls "$ptls" "$d"
	refused c1ls "sub"
	check "$L: ptls refuses" "exit $T_RC: $(head -n 1 "$WORK/c1ls.stderr")"
	if try_mount c1fs "$d" "$m"; then
		note "it mounts (exit $T_RC)"
		edit4 "$m/imp" 'ABCD' || note "the edit of imp failed"
		rm "$m/p1" 2>/dev/null || note "rm p1 failed"
		umount_report "$m"
		note "ptfs umount: exit $UMOUNT_RC: $UMOUNT"
	else
		refused c1fs "sub"
	fi
	check "$L: ptfs refuses" "exit $T_RC: $(head -n 1 "$WORK/c1fs.stderr")"
	[ "$(tree "$v")" = "$vt" ] ||
		note "victim/ now holds: $(ls -A "$v" | tr '\n' ' ')"
	[ "$(tree "$d")" = "$ft" ] ||
		note "the folder now holds: $(ls -A "$d" | tr '\n' ' ')"
	check "$L: victim/ and the folder untouched" "byte for byte"
else
	setup_failed "$L"
fi
fi

# ------------------------------------------------------------ 2
for L in named_twice named_twice_dir; do
	want "$L" || continue
	d=$WORK/$L m=$WORK/mnt/$L
	mkdir -p "$d"
	if [ $L = named_twice ]; then
		pyv save "$L/A.bin" a b >/dev/null && ln -s A.bin "$d/B.bin" &&
			pyv index "$L/pytorch_model.bin.index.json" a=A.bin b=B.bin
		names="A.bin|B.bin" ek=a
	else
		pyv save "$L/x.bin" x y >/dev/null && ln -s . "$d/sub" &&
			pyv index "$L/pytorch_model.bin.index.json" x=x.bin y=sub/x.bin
		names="sub" ek=x
	fi || { setup_failed "$L"; continue; }
	ft=$(tree "$d")
	if try_mount "$L" "$d" "$m"; then
		# aliases are an answer for named_twice, not for a linked dir
		[ $L = named_twice ] || note "it mounts (exit $T_RC)"
		edit4 "$m/$ek" '\0\0\200\77' || note "the edit of $ek failed"
		umount_report "$m"
		[ "$UMOUNT_RC" = 0 ] || note "ptfs umount: exit $UMOUNT_RC: $UMOUNT"
		case $UMOUNT in *removed*)
			note "ptfs umount claims a removal: $UMOUNT" ;; esac
		pyv folder "$L" "$ek" 0000803f >"$WORK/fold.out" ||
			note "$(grep -m 3 error "$WORK/fold.out" | tr '\n' ' ')$(pyerr)"
		tool "$L.ls" "$ptls" "$d"
		[ "$T_RC" = 0 ] || note "ptls: exit $T_RC: $(head -n 1 "$WORK/$L.ls.stderr")"
		! grep -q 'absent' "$WORK/$L.ls.out" ||
			note "ptls: $(grep -m 1 absent "$WORK/$L.ls.out")"
		note_what="mounted; after an edit and ptfs umount: $UMOUNT"
	else
		refused "$L" "$names"
		[ "$(tree "$d")" = "$ft" ] || note "the folder changed: $(ls -A "$d" | tr '\n' ' ')"
		note_what="refused: $(head -n 1 "$WORK/$L.stderr"); the folder unchanged"
	fi
	check "$L" "$note_what"
done

# ------------------------------------------------------------ 3
if want dcp_rewritten; then
L=dcp_rewritten
d=$WORK/c3 m=$WORK/mnt/c3
if py2 dcpsave c3 0 && py2 raw c3.w0 w 0 && py2 raw c3.v0 v 0 &&
    py2 raw c3.v1 v 1 && py2 raw c3.w1 w 1; then
	if start_daemon "$d" "$m" "$WORK/c3.err" -o ro; then
		if ! cat "$m/model/w" >"$WORK/c3.w" 2>"$WORK/c3.why" ||
		    ! cat "$m/step" >"$WORK/c3.step" 2>>"$WORK/c3.why"; then
			note "reads before the save failed: $(cat "$WORK/c3.why")"
		fi
		cmp -s "$WORK/c3.w" "$WORK/c3.w0" || note "model/w is not what was saved"
		ino=$(stat -c %i "$d/__0_0.distcp")
		py2 dcpsave c3 1 || note "the second dcp.save failed: $(pyerr)"
		# the point: the data file rewritten on its inode
		[ "$(stat -c %i "$d/__0_0.distcp")" = "$ino" ] ||
			note "setup: dcp.save did not rewrite __0_0.distcp in place"
		check "$L: setup" "mounted, w and step read, the directory saved again in place"
		for k in model/w:c3.w:c3.w1 step:c3.step:- model/v:c3.v0:c3.v1; do
			f=${k%%:*} k=${k#*:}
			old=${k%%:*} new=${k#*:}
			if cat "$m/$f" >"$WORK/c3.got" 2>"$WORK/c3.why"; then
				if cmp -s "$WORK/c3.got" "$WORK/$old"; then
					said="the old bytes"
				elif [ "$new" != - ] && cmp -s "$WORK/c3.got" "$WORK/$new"; then
					note "$f reads the new save's bytes"
				else
					note "$f reads other bytes: $(od -An -tx1 -N8 "$WORK/c3.got")"
				fi
			else
				said="$(cat "$WORK/c3.why")"
			fi
			check "$L: $f after the save" "$said"
		done
		stop_daemon "$m" || note "unmount failed"
		check "$L: unmounted" "exit ${DRC:-?}"
	else
		fail "$L" "no mount: $(head -n 1 "$WORK/c3.err")"
	fi
else
	setup_failed "$L"
fi
fi

# ------------------------------------------------------------ 4
if want fifo; then
L=fifo
m=$WORK/mnt/c4
mkdir -p "$WORK/c4/hf"
if py2 dcpsave c4/meta 0 && py2 dcpsave c4/data 0 &&
    pyv save c4/hf/a.bin a >/dev/null; then
	rm "$WORK/c4/meta/.metadata" "$WORK/c4/data/__0_0.distcp"
	mkfifo "$WORK/c4/meta/.metadata" "$WORK/c4/data/__0_0.distcp" \
		"$WORK/c4/hf/pytorch_model.bin.index.json" || exit 1
	ix=pytorch_model.bin.index.json
	# each directory given, and the index given itself; the 12 runs at
	# once, so that a build that hangs fails in 20 s, not in 4 minutes
	runs="meta:.metadata:. data:__0_0.distcp:. hf:$ix:. hf:$ix:$ix"
	i=0 pids=
	for k in $runs; do
		i=$((i + 1))
		n=${k%%:*} k=${k#*:}
		ck=$WORK/c4/$n
		[ "${k#*:}" = . ] || ck=$ck/${k#*:}
		for t in ptls ptverify ptfs; do
			o=c4.$i.$t
			if [ $t = ptfs ]; then
				set -- "$PTFS" "$ck" "$m.$i"
				mkdir -p "$m.$i"
			else
				eval "set -- \"\$$t\" \"\$ck\""
			fi
			(tool "$o" "$@"; echo "$T_RC $T_MS" >"$WORK/$o.rc") &
			pids="$pids $!"
		done
	done
	for p in $pids; do wait "$p"; done
	i=0
	for k in $runs; do
		i=$((i + 1))
		n=${k%%:*} k=${k#*:}
		f=${k%%:*} ck=$WORK/c4/$n
		[ "${k#*:}" = . ] || ck=$ck/${k#*:}
		unblock "$WORK/c4/$n/$f"
		for t in ptls ptverify ptfs; do
			o=c4.$i.$t
			read -r T_RC T_MS <"$WORK/$o.rc"
			if [ $t = ptfs ] && is_mounted "$m.$i"; then
				note "it mounts"
				unmount "$m.$i"
			fi
			if [ $t = ptverify ]; then r=report; else r=; fi
			refused "$o" "$f|not a regular file" $r
			check "$L: $t ${ck#"$WORK"/}" "exit $T_RC in $T_MS ms: $(head -n 1 "$WORK/$o.all")"
		done
	done
else
	setup_failed "$L"
fi
fi

# ------------------------------------------------------------ 6
if want allow_other; then
L=allow_other
if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null 2>&1 ||
    ! command -v setpriv >/dev/null 2>&1; then
	skip "$L" "needs root, useradd and setpriv (a second real user)"
elif ! useradd -M -N -s /usr/sbin/nologin "$U2" 2>"$DET"; then
	fail "$L" "useradd $U2: $(head -n 1 "$DET")"
	: >"$DET"
else
made_user=1
G2=$(id -g "$U2")
as2() { setpriv --reuid="$U2" --regid="$G2" --clear-groups -- "$@"; }
# denied WHAT FILE [SECRET]: the second user cannot read FILE (and gets
# none of SECRET's bytes)
denied() {
	if as2 cat "$2" >"$WORK/c6.got" 2>"$WORK/c6.why"; then
		note "$U2 reads $1 ($(wc -c <"$WORK/c6.got") bytes)"
	elif [ -n "${3:-}" ] && [ -s "$WORK/c6.got" ] &&
	    cmp -s "$WORK/c6.got" "$3"; then
		note "$U2 got the bytes of $3"
	fi
}
d=$WORK/c6 m=$WORK/mnt/c6
mkdir -p "$d/hf" "$m"
chmod 755 "$WORK" "$WORK/mnt" "$d" "$m"
if pyv save c6/hf/A.bin a >/dev/null && pyv save c6/hf/B.bin b >/dev/null &&
    pyv save c6/single.pt s >/dev/null && pyv raw c6.b b &&
    pyv index c6/hf/pytorch_model.bin.index.json a=A.bin b=B.bin &&
    py2 dcpsave c6/dcp 0; then
	echo "only root may read this" >"$d/hf/secret.txt"
	echo "anyone may read this" >"$d/hf/readme.txt"
	ln -s /etc/shadow "$d/hf/shadow.txt"
	chmod 600 "$d/hf/A.bin" "$d/hf/secret.txt" "$d/single.pt" \
		"$d/dcp/__0_0.distcp"
	chmod 644 "$d/hf/B.bin" "$d/hf/readme.txt" "$d/dcp/.metadata" \
		"$d/hf/pytorch_model.bin.index.json"
	chmod 755 "$d/hf" "$d/dcp"
	# the baseline: one 0600 .pt stays private
	if start_daemon "$d/single.pt" "$m" "$WORK/c6p.err" -o ro,allow_other; then
		denied "the tensor of a 0600 .pt" "$m/s"
		ocheck s "$m/s"
		stop_daemon "$m"
		check "$L: a 0600 .pt" "$U2 refused"
	else
		fail "$L: a 0600 .pt" "no mount: $(head -n 1 "$WORK/c6p.err")"
	fi
	if start_daemon "$d/hf" "$m" "$WORK/c6a.err" -o ro,allow_other; then
		F=$m/.ptfs/files
		as2 cat "$m/b" >"$WORK/c6.got" 2>"$WORK/c6.why" ||
			note "$U2 cannot read b of the 0644 shard: $(cat "$WORK/c6.why")"
		cmp -s "$WORK/c6.got" "$WORK/c6.b" || note "$U2 reads other bytes of b"
		as2 cat "$F/readme.txt" 2>&1 | cmp -s - "$d/hf/readme.txt" ||
			note "$U2 cannot read the 0644 readme.txt"
		check "$L: what is public stays public" "$U2 reads b (0644 B.bin) and .ptfs/files/readme.txt"
		if denied "a of the 0600 A.bin" "$m/a" && [ ! -s "$DET" ]; then
			grep -q 'Permission denied' "$WORK/c6.why" ||
				note "reading a: $(cat "$WORK/c6.why")"
		fi
		ocheck a "$m/a"
		check "$L: a 0600 shard" "$U2: $(cat "$WORK/c6.why")"
		denied ".ptfs/files/secret.txt (0600)" "$F/secret.txt" "$d/hf/secret.txt"
		ocheck .ptfs/files/secret.txt "$F/secret.txt"
		check "$L: a 0600 file of the folder" "$U2: $(cat "$WORK/c6.why")"
		denied "shadow.txt -> /etc/shadow" "$F/shadow.txt" /etc/shadow
		ocheck .ptfs/files/shadow.txt "$F/shadow.txt"
		check "$L: a link to /etc/shadow" "$U2: $(cat "$WORK/c6.why")"
		# .ptfs/as/: one file of every shard's bytes, and the
		# folder's files again
		A=$m/.ptfs/as
		denied ".ptfs/as/model.safetensors (a 0600 shard's tensor in it)" \
			"$A/model.safetensors"
		ocheck .ptfs/as/model.safetensors "$A/model.safetensors"
		denied ".ptfs/as/secret.txt (0600)" "$A/secret.txt" "$d/hf/secret.txt"
		denied ".ptfs/as/shadow.txt -> /etc/shadow" "$A/shadow.txt" /etc/shadow
		as2 cat "$A/readme.txt" 2>&1 | cmp -s - "$d/hf/readme.txt" ||
			note "$U2 cannot read .ptfs/as/readme.txt (0644)"
		check "$L: .ptfs/as/ of a folder with a 0600 shard" "$U2 refused model.safetensors, secret.txt, shadow.txt; reads readme.txt"
		stop_daemon "$m"
	else
		fail "$L: HF folder" "no mount: $(head -n 1 "$WORK/c6a.err")"
	fi
	if start_daemon "$d/dcp" "$m" "$WORK/c6d.err" -o ro,allow_other; then
		as2 ls "$m/model" >/dev/null 2>"$WORK/c6.why" ||
			note "$U2 cannot list the mount: $(cat "$WORK/c6.why")"
		denied "model/w of a 0600 .distcp" "$m/model/w"
		ocheck model/w "$m/model/w"
		check "$L: 0600 .distcp behind a 0644 .metadata" "$U2 lists the tree; model/w: $(cat "$WORK/c6.why")"
		denied ".ptfs/as/model.safetensors of a 0600 .distcp" \
			"$m/.ptfs/as/model.safetensors"
		ocheck .ptfs/as/model.safetensors "$m/.ptfs/as/model.safetensors"
		check "$L: .ptfs/as/ of 0600 .distcp files" "$U2: $(cat "$WORK/c6.why")"
		stop_daemon "$m"
	else
		fail "$L: DCP directory" "no mount: $(head -n 1 "$WORK/c6d.err")"
	fi
else
	setup_failed "$L"
fi
fi
fi

# ------------------------------------------------------------ 7
if want hf_cache; then
L=hf_cache
r=$WORK/c7/repo s=$WORK/c7/repo/snapshots/0123abcd m=$WORK/mnt/c7
t=$WORK/c7/made
sh1=pytorch_model-00001-of-00002.bin sh2=pytorch_model-00002-of-00002.bin
mkdir -p "$r/blobs" "$s" "$t"
if pyv save "c7/made/$sh1" w1 b1 >/dev/null &&
    pyv save "c7/made/$sh2" w2 b2 >/dev/null &&
    pyv index c7/made/pytorch_model.bin.index.json w1=$sh1 b1=$sh1 \
	w2=$sh2 b2=$sh2 && pyv raw c7.w2 w2 && pyv raw c7.b1 b1 &&
    echo '{"model_type": "doors"}' >"$t/config.json"; then
	for f in "$t"/*; do
		h=$(sha256sum <"$f" | cut -d' ' -f1)
		mv "$f" "$r/blobs/$h" && ln -s "../../blobs/$h" "$s/${f##*/}"
	done
	blobs=$(dir_sums "$r/blobs")
	tool c7ls "$ptls" "$s"
	[ "$T_RC" = 0 ] || note "ptls: exit $T_RC: $(head -n 1 "$WORK/c7ls.stderr")"
	for k in w1 b1 w2 b2; do
		grep -q "^$k " "$WORK/c7ls.out" || note "ptls does not list $k"
	done
	check "$L: ptls" "4 tensors listed"
	if start_daemon "$s" "$m" "$WORK/c7.err"; then
		pyv mountcmp mnt/c7 "${s#"$WORK"/}/$sh1" "${s#"$WORK"/}/$sh2" \
			>"$WORK/c7.cmp" ||
			note "$(grep -m 3 error "$WORK/c7.cmp" | tr '\n' ' ')$(pyerr)"
		check "$L: mounted" "$(cat "$WORK/c7.cmp")"
		edit4 "$m/w1" '\0\0\200\77' || note "the edit of w1 failed"
		umount_report "$m"
		stop_daemon "$m"
		[ "$UMOUNT_RC" = 0 ] || note "ptfs umount: exit $UMOUNT_RC: $UMOUNT"
		[ "$(dir_sums "$r/blobs")" = "$blobs" ] ||
			note "blobs/ changed: $(dir_sums "$r/blobs" | cut -c1-12 | tr '\n' ' ')"
		pyv folder "${s#"$WORK"/}" w1 0000803f >"$WORK/fold.out" ||
			note "$(grep -m 3 error "$WORK/fold.out" | tr '\n' ' ')$(pyerr)"
		check "$L: written back" "$UMOUNT; blobs/ the same; $(cat "$WORK/fold.out")"
		if start_daemon "$s" "$m" "$WORK/c7b.err" -o ro; then
			[ "$(od -An -tx1 -N4 "$m/w1" | tr -d ' ')" = 0000803f ] ||
				note "w1 lacks the edit"
			cmp -s "$m/w2" "$WORK/c7.w2" || note "w2 changed"
			cmp -s "$m/b1" "$WORK/c7.b1" || note "b1 changed"
			stop_daemon "$m"
		else
			note "no second mount: $(head -n 1 "$WORK/c7b.err")"
		fi
		check "$L: mounted again" "w1 edited, w2 and b1 as saved"
	else
		fail "$L: mounted" "$(head -n 1 "$WORK/c7.err")"
	fi
else
	setup_failed "$L"
fi
fi

[ "$PT_CASE" = list ] && exit 0
check_daemon_logs
conclude
