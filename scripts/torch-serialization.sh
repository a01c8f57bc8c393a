#!/bin/sh
# torch-serialization.sh - PyTorch's own test/test_serialization.py with
# every torch.save round-tripped through ptfs (issue 16's harness).
#
#   usage: sh scripts/torch-serialization.sh [1.13|2|both] [BUILD_DIR] [MODE...]
#
# The test file comes from Debian's source package "pytorch", fetched at
# run time with apt-get source --download-only through a scratch apt
# configuration with deb-src entries for bookworm and sid (never
# committed): the version of the torch under test when the mirror has it,
# else the nearest one it has (the output says which).  Only
# test/test_serialization.py is taken from the tarball.  Each torch runs
# it unmodified (the baseline), then once per MODE (default: repack
# repickle mount) under scripts/ptfs_hook.py, which replaces what each
# torch.save wrote by ptfs's output (ptrepack, ptrepack --repickle, or a
# real mount with a structural edit and `ptfs umount`).  The report: tests
# passed against the baseline, the tests lost, and the saves rewritten,
# identical and refused, by reason.  Needs root (mounts, the chroot) and
# the network; takes about 10-20 minutes per torch on an idle machine.
# Scratch: $PT_HARNESS_DIR (default /var/tmp/ptfs-serialization), kept.
set -u
LC_ALL=C
export LC_ALL
which=${1:-both}
here=$(cd "$(dirname "$0")" && pwd) || exit 1
src=$(cd "$here/.." && pwd)
build=${2:-$src/build}
[ $# -gt 2 ] && shift 2 || set --
modes=${*:-repack repickle mount}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
for b in ptfs ptrepack; do
	[ -x "$build/$b" ] || { echo "no $build/$b: build first" >&2; exit 1; }
done
W=${PT_HARNESS_DIR:-/var/tmp/ptfs-serialization}
mkdir -p "$W/apt/lists/partial" "$W/apt/cache/archives/partial" || exit 1

# ---- the source package, through a scratch apt configuration
cat >"$W/apt/sources.list" <<EOF
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian sid main
EOF
cat >"$W/apt/apt.conf" <<EOF
Dir::Etc::SourceList "$W/apt/sources.list";
Dir::Etc::SourceParts "/nonexistent";
Dir::State::Lists "$W/apt/lists";
Dir::Cache "$W/apt/cache";
EOF
APT_CONFIG=$W/apt/apt.conf
export APT_CONFIG
apt-get -q update >"$W/apt/update.log" 2>&1 ||
	{ echo "apt-get update failed: $(tail -n 1 "$W/apt/update.log")" >&2; exit 1; }
have=$(apt-cache showsrc pytorch 2>/dev/null | sed -n 's/^Version: //p' | sort -u)

# fetch VERSION: test_serialization.py of the source nearest VERSION into
# $W/src-VERSION; sets SRCVER
fetch() {
	want=$1
	SRCVER=$(printf '%s\n' "$have" | grep "^$want" | sort -V | tail -n 1)
	note="matches torch $want"
	if [ -z "$SRCVER" ]; then
		SRCVER=$(printf '%s\n%s\n' "$have" "$want~" | sort -V |
			grep -B1 -A1 "^$want~$" | grep -v '~$' | tail -n 1)
		note="nearest to torch $want, which the mirror lacks"
	fi
	[ -n "$SRCVER" ] || { echo "no pytorch source package on the mirror" >&2; return 1; }
	d=$W/src-$want
	mkdir -p "$d"
	if [ ! -f "$d/test_serialization.py" ]; then
		# the mirror may lack the Debian part (404): the upstream
		# tarball holds the test file (then without Debian's patches);
		# it may list a version whose files it lacks altogether: then
		# the nearest other version it serves, newest first
		rm -f "$d/tried" "$d/note" "$d/version"
		for v in $SRCVER $(printf '%s\n' "$have" | grep -vx "$SRCVER" | sort -V -r); do
			rm -f "$d"/pytorch_*
			(cd "$d" && apt-get -q source --download-only \
				"pytorch=$v" >"$d/fetch.log" 2>&1) && break
			ls "$d"/pytorch_*.orig.tar.xz >/dev/null 2>&1 && {
				echo "# apt-get source: $(grep -m 1 '^E: Failed to fetch' "$d/fetch.log" | sed 's/.*\///') : the upstream file, without Debian's patches" >"$d/note"
				break
			}
			echo "# apt-get source pytorch=$v: $(grep -m 1 '^E: Failed to fetch' "$d/fetch.log" | sed 's/.*\///')" >>"$d/tried"
		done
		ls "$d"/pytorch_*.orig.tar.xz >/dev/null 2>&1 ||
			{ echo "apt-get source failed for every version: $(tail -n 1 "$d/fetch.log")" >&2; return 1; }
		if [ "$v" != "$SRCVER" ]; then
			note="torch $want's source ($SRCVER) is listed but not served by the mirror; the nearest it serves"
			SRCVER=$v
			echo "$SRCVER" >"$d/version"
		fi
		tar -xJf "$d"/pytorch_*.orig.tar.xz -C "$d" --wildcards \
			'*/test/test_serialization.py' 2>>"$d/fetch.log" ||
			{ echo "no test/test_serialization.py in the tarball" >&2; return 1; }
		find "$d" -path '*/test/test_serialization.py' -exec mv {} "$d/" \;
		rm -f "$d"/pytorch_*.tar.xz
	fi
	[ -f "$d/version" ] && SRCVER=$(cat "$d/version") &&
		note="torch $want's source is listed but not served by the mirror; the nearest it serves"
	echo "# torch $want: test_serialization.py from Debian's pytorch $SRCVER ($note)"
	cat "$d/tried" "$d/note" 2>/dev/null
	return 0
}

# serve ROOT FIFO: the host half of ptfs_hook.py's via_host(): each
# request "MODE IN OUT" (paths inside ROOT) answered "STATUS<TAB>stderr"
serve() {
	while :; do
		IFS='	' read -r m i o <"$2.req" || continue
		e=$W/serve.err
		case $m in
		mount) PTFS_HOOK_TMP= python3 "$here/ptfs_hook.py" mount-one \
			"$build" "$1$i" "$1$o" >/dev/null 2>"$e" ;;
		repickle) "$build/ptrepack" --repickle "$1$i" "$1$o" 2>"$e" ;;
		*) "$build/ptrepack" "$1$i" "$1$o" 2>"$e" ;;
		esac
		printf '%s\t%s\n' "$?" "$(tail -n 1 "$e")" >"$2.rep"
	done
}

# run WANT: the baseline and each mode under that torch
run_one() {
	want=$1
	fetch "$want" || return 1
	if [ "$want" = 1.13 ]; then
		root='' py='/usr/bin/python3' R=$W/run-1.13 IN=$R
	else
		root=$(sh "$src/scripts/torch2-root.sh" | tail -n 1)
		[ -d "$root/tmp" ] || { echo "no torch 2.x root" >&2; return 1; }
		R=$root/tmp/ptfs-serialization IN=/tmp/ptfs-serialization
		py=python3
	fi
	rm -rf "$R/out"
	mkdir -p "$R/out"
	cp "$W/src-$want/test_serialization.py" "$here/ptfs_hook.py" "$R/"
	# torch 1.13's test helpers import expecttest, which Debian 12 lacks:
	# the little of it they use, when it is missing
	if ! ${root:+chroot "$root"} $py -c 'import expecttest' 2>/dev/null; then
		cat >"$R/expecttest.py" <<'EOF'
# stand-in for expecttest (not installed): what common_utils needs
import unittest
ACCEPT = False
class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertEqual(actual, expect)
EOF
		echo "# torch $want: expecttest is not installed; a stand-in (scripts/torch-serialization.sh) is used"
	fi
	mkdir -p "$R/tmp"
	for mode in none $modes; do
		t0=$(date +%s)
		: >"$R/out/$mode.saves"
		# in the chroot there is no FUSE: the hook asks this shell,
		# through two fifos, to run ptfs on the host
		spid=
		if [ -n "$root" ] && [ "$mode" != none ]; then
			rm -f "$R/fifo.req" "$R/fifo.rep"
			mkfifo "$R/fifo.req" "$R/fifo.rep"
			serve "$root" "$R/fifo" </dev/null >/dev/null 2>&1 &
			spid=$!
		fi
		PTFS_HOOK_FIFO=${root:+$IN/fifo} PTFS_HOOK_TMP=$IN/tmp \
		${root:+chroot "$root"} sh -c 'cd "$1" && shift && exec "$@"' sh \
			"$IN" $py ptfs_hook.py "$mode" "$build" \
			"$IN/out/$mode.saves" test_serialization.py -v \
			>"$R/out/$mode.log" 2>&1
		if [ -n "$spid" ]; then
			kill "$spid" 2>/dev/null
			wait "$spid" 2>/dev/null
		fi
		sed -n 's/^\(test[^ ]*\) (\([^)]*\)) \.\.\. \(.*\)$/\2.\1 \3/p' \
			"$R/out/$mode.log" | sort >"$R/out/$mode.res"
		echo "# torch $want, $mode: $(($(date +%s) - t0)) s"
	done
	echo "torch $want ($(${root:+chroot "$root"} $py -c 'import torch; print(torch.__version__)' 2>/dev/null | tail -n 1)), test_serialization.py of pytorch $SRCVER:"
	base=$R/out/none.res
	nbase=$(grep -c ' ok$' "$base")
	echo "  baseline: $(wc -l <"$base") tests, $nbase ok, $(grep -c ' skipped' "$base") skipped, $(grep -c -v ' ok$\| skipped\|expected failure' "$base") failed or errors"
	for mode in $modes; do
		res=$R/out/$mode.res
		n=$(grep -c ' ok$' "$res")
		echo "  $mode: $n of the $nbase ok"
		grep ' ok$' "$base" | cut -d' ' -f1 | while read -r t; do
			grep -q "^$t ok$" "$res" ||
				echo "    lost: $t ($(grep "^$t " "$res" | cut -d' ' -f2- | head -c 60))"
		done
		s=$R/out/$mode.saves
		echo "    saves: $(wc -l <"$s"): $(grep -c '	rewritten	' "$s") rewritten, $(grep -c '	identical	' "$s") identical, $(grep -c '	refused	' "$s") refused"
		grep '	refused	' "$s" | cut -f3 | sort | uniq -c | sort -rn |
			sed 's/^ */      /'
		n=$(grep -c '	identical	mounted and read' "$s")
		[ "$n" = 0 ] || echo "      ($n of the identical: mounted and read, no str key to move, nothing written back)"
	done
}

case $which in
1.13) run_one 1.13 ;;
2) run_one 2 ;;
both) run_one 1.13; run_one 2 ;;
*) echo "usage: sh $0 [1.13|2|both] [BUILD_DIR] [MODE...]" >&2; exit 2 ;;
esac
