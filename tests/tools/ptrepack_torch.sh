#!/bin/sh
# ptrepack_torch.sh VERSION PTREPACK SHARED_DIR - what ptrepack writes,
# loaded by torch: VERSION 1.13 is Debian's torch (/usr/bin/python3), 2 the
# torch 2.x chroot (SHARED_DIR/tools/torch2-root).  ptrepack_gen.py writes
# slices of big storages and legacy files with that torch; then
# ptrepack_check.py compares torch.load of each result with torch.load of
# its source:
#
#   legacy -> zip   every legacy fixture and generated legacy file: the
#                   same objects, also with weights_only=True (2.x)
#   --clone         the same values, views still sharing, storages no
#                   bigger than the spans the tensors use
#   --align 4096    the same objects; under 2.x also with mmap=True, every
#                   storage 4096-aligned in the mapping, and with
#                   calculate_storage_offsets
#   --repickle      the same objects, every fixture; and a file this torch
#                   wrote comes back byte for byte
#
# Exit 0 passed, 1 failed, 77 skipped (no torch with PT_ALLOW_SKIP_TORCH=1,
# or no fixtures).  Prints one line per check and "N passed, N failed".
set -u
[ $# -eq 3 ] || { echo "usage: sh $0 1.13|2 PTREPACK SHARED_DIR" >&2; exit 2; }
version=$1 ptrepack=$2 shared=$3
here=$(cd "$(dirname "$0")" && pwd) || exit 1
case $ptrepack in /*) ;; *) ptrepack=$(pwd)/$ptrepack ;; esac
. "$here/../fixtures/fx.sh"

. "$here/../torch/select.sh"
torch_select "$version" "$shared" ptrepack-torch
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

# run PYTHON-SCRIPT ARGS... under the torch being tested (paths inside)
cp "$here/ptrepack_gen.py" "$here/ptrepack_check.py" "$work/" || exit 1
run_py "$inner/ptrepack_gen.py" "$inner/gen" >"$work/gen.log" 2>&1 || {
	echo "ptrepack_gen.py failed under torch $version:" >&2
	tail -n 5 "$work/gen.log" >&2
	exit 1
}

man=$work/manifest.tsv
: >"$man"
fail=0
n=0
# rp MODE OPTIONS SRC [EXTRA]: repack SRC (copied beside the others) and
# list it for the comparison
rp() {
	mode=$1 opts=$2 src=$3 extra=${4:-}
	n=$((n + 1))
	base=${src##*/}
	case $src in "$work"/*) in_src=$inner/${src#"$work"/} ;;
	*) cp "$src" "$work/src$n-$base" || exit 1
	   in_src=$inner/src$n-$base ;; esac
	if "$ptrepack" $opts "$src" "$work/out$n-$base" 2>"$work/err"; then
		printf '%s\t%s\t%s\t%s\n' "$mode" "$in_src" \
			"$inner/out$n-$base" "$extra" >>"$man"
	else
		echo "FAIL ptrepack $opts $src: $(cat "$work/err")"
		fail=$((fail + 1))
	fi
}

# legacy -> zip
for f in "$fx"/torch-1.13/legacy.pt "$fx"/torch-2/legacy.pt \
	 "$fx"/real/legacy_* "$work"/gen/legacy_*.pt; do
	[ -e "$f" ] || continue
	case ${f##*/} in legacy_view.pt) rp view "" "$f" ;;
	*) rp same "" "$f" ;; esac
done
# --clone on the generated slices, with the most bytes they may keep
while IFS="$(printf '\t')" read -r name most; do
	case $name in legacy_view.pt) ;; *) rp clone --clone "$work/gen/$name" "$most" ;; esac
done <"$work/gen/clone.tsv"
# every fixture: --clone=100, --align 4096, --repickle
mm=same
[ "$version" = 2 ] && mm=mmap
for f in "$fx"/torch-1.13/*.pt "$fx"/torch-2/*.pt "$fx"/real/z*.p* \
	 "$fx"/real/*.bin "$work"/gen/*.pt; do
	[ -e "$f" ] || continue
	case ${f##*/} in script.pt|legacy_tar.pt) continue ;; esac
	# a legacy view's offset moves into its tensors
	same=same
	[ "${f##*/}" = legacy_view.pt ] && same=view
	rp clone --clone=100 "$f" 999999999999
	case ${f##*/} in legacy*)
		rp $same "--align 4096" "$f" ;;
	*)	rp $mm "--align 4096" "$f" 4096 ;; esac
	rp $same --repickle "$f"
done
echo "$n files written by ptrepack, $fail refused"
# --repickle gives a file torch wrote back byte for byte: data.pkl as
# torch's pickler writes it (the memo of each persistent id and its key),
# which is what lets a structural edit keep the records' places (issue 18)
k=0
for f in "$fx/torch-$version"/*.pt; do
	case ${f##*/} in legacy*|script.pt) continue ;; esac
	"$ptrepack" --repickle "$f" "$work/rq.pt" 2>/dev/null || continue
	k=$((k + 1))
	if ! cmp -s "$f" "$work/rq.pt"; then
		echo "FAIL --repickle ${f##*/}: not the bytes torch wrote"
		fail=$((fail + 1))
	fi
done
echo "$k torch $version files repickled: each byte for byte the original"

run_py "$inner/ptrepack_check.py" "$inner/manifest.tsv" 2>"$work/check.err"
rc=$?
grep -v "UCX\|cpuinfo" "$work/check.err" | tail -n 5 >&2
[ $rc = 0 ] && [ $fail = 0 ] && exit 0
exit 1
