#!/bin/sh
# Cross-check `ptls --json` against torch.load on every shared fixture.
#
#   usage: sh tests/torch/run.sh VERSION PTLS SHARED_DIR
#
# VERSION "1.13": Debian's torch (/usr/bin/python3); "2": torch 2.x in the
# chroot built by SHARED_DIR/tools/torch2-root.  ptls runs natively on each
# file; compare.py then loads everything once under that torch.  Exit 0 all
# passed, 1 a failure, 77 skipped (no fixtures; no torch with
# PT_ALLOW_SKIP_TORCH=1).
set -u

usage() { echo "usage: sh $0 1.13|2 PTLS SHARED_DIR" >&2; exit 2; }
[ $# -eq 3 ] || usage
version=$1 ptls=$2 shared=$3
case $version in 1.13|2) ;; *) usage ;; esac
here=$(cd "$(dirname "$0")" && pwd) || exit 1

. "$here/../fixtures/fx.sh"
if [ ! -x "$ptls" ]; then
	echo "ptls not found or not executable: $ptls" >&2
	exit 1
fi
case $ptls in /*) ;; *) ptls=$(pwd)/$ptls ;; esac

. "$here/select.sh"
torch_select "$version" "$shared" ptfs-torch

trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

tmo=
command -v timeout >/dev/null 2>&1 && tmo="timeout 120"

# edge cases the fixtures lack, written by the torch under test
if [ "$version" = 1.13 ]; then
	"$py" "$here/gen_edge.py" "$work/generated" 2>/dev/null
else
	cp "$here/gen_edge.py" "$work/gen_edge.py" &&
		chroot "$root" python3 "/tmp/${work##*/}/gen_edge.py" \
			"/tmp/${work##*/}/generated" 2>/dev/null
fi || { echo "gen_edge.py failed under torch $version" >&2; exit 1; }

manifest=$work/manifest.tsv
: >"$manifest"
n=0
for d in torch-1.13 torch-2 real generated; do
	dir=$fx/$d
	[ "$d" = generated ] && dir=$work/generated
	for f in "$dir"/*; do
		[ -f "$f" ] || continue
		name=${f##*/}
		[ "$name" = SOURCES.md ] && continue
		n=$((n + 1))
		stem=$(printf 'r%03d' "$n")
		$tmo "$ptls" --json "$f" >"$work/$stem.json" 2>"$work/$stem.err"
		echo $? >"$work/$stem.rc"
		if [ "$version" = 1.13 ]; then
			ckpt=$f
		else
			mkdir -p "$work/files"
			cp "$f" "$work/files/$stem-$name" || exit 1
			ckpt=files/$stem-$name
		fi
		printf '%s/%s\t%s\t%s\n' "$d" "$name" "$ckpt" "$stem" >>"$manifest"
	done
done
if [ "$n" -eq 0 ]; then
	echo "shared fixtures not found at $fx (no files): skipping"
	exit 77
fi

if [ "$version" = 1.13 ]; then
	"$py" "$here/compare.py" "$manifest"
	rc=$?
else
	cp "$here/compare.py" "$work/compare.py" || exit 1
	inner=/tmp/${work##*/}
	chroot "$root" python3 "$inner/compare.py" "$inner/manifest.tsv"
	rc=$?
fi
# compare.py exits 0 (all passed) or 1 (a failure); anything else is a crash
case $rc in 0|1) exit "$rc" ;; *) echo "compare.py exited with status $rc" >&2; exit 1 ;; esac
