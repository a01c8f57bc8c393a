#!/bin/sh
# torch2-root.sh - the torch 2.x the tests check against: a minimal Debian
# unstable root holding its python3-torch and numpy (and safetensors,
# transformers and gguf-py where sid has them), made once with debootstrap
# from the mirror apt already uses, then reused.
# Root only.  Prints the root's path on its last line; exit 1 with one line
# on stderr when it cannot be made (no mirror, no network, no space).
#
#   sh scripts/torch2-root.sh            build if missing, print the path
#   PT_TORCH2_ROOT=DIR                   where it lives
#                                        (default /var/cache/ptfs/torch2-root)
#
# Concurrent callers (ctest -j) wait on one lock; a build that was killed
# leaves only DIR.partial, which the next call throws away.  The root is
# complete exactly when DIR exists: it is renamed into place last.
set -eu
root=${PT_TORCH2_ROOT:-/var/cache/ptfs/torch2-root}
pkgs=python3-torch,python3-numpy

# usable: the root has its python, torch and numpy.  The modules are
# found, not imported (an import of torch costs 2 s of CPU, and every
# torch 2.x test asks): a root is moved into place only after they
# imported (below), and a torch that breaks later fails its tests with
# torch's own message.
usable() {
	[ -x "$root/usr/bin/python3" ] &&
		chroot "$root" python3 -c 'import importlib.util as u, sys
sys.exit(not (u.find_spec("torch") and u.find_spec("numpy")))' >/dev/null 2>&1
}

# the optional packages of the checks, each tried once (a root made before
# one was wanted gets it on its next use): transformers, whose
# save_pretrained and from_pretrained the Hugging Face folder checks
# compare with, and gguf-py (python3-gguf), the GGUF checks' oracle
extras="python3-transformers python3-gguf"
with_extras() {
	for p in $extras; do
		[ -e "$1/var/lib/ptfs-tried-$p" ] && continue
		chroot "$1" sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $p" \
			>>"$root.log" 2>&1 ||
			echo "torch2-root: no $p in sid (optional)" >&2
		: >"$1/var/lib/ptfs-tried-$p"
	done
	chroot "$1" apt-get clean >/dev/null 2>&1 || true
}

mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9
if usable; then
	with_extras "$root"
	echo "$root"
	exit 0
fi
if [ -e "$root" ]; then
	echo "torch2-root: $root exists but has no working torch; remove it to rebuild" >&2
	exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
	{ apt-get update -qq &&
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } \
		>"$root.log" 2>&1 || {
		echo "torch2-root: cannot install debootstrap (see $root.log)" >&2
		exit 1
	}
fi
# the mirror apt uses, deb822 (Debian 12's default) or one-line sources
mirror=$(sed -n 's|^URIs: *\([^ ]*/debian\)/*$|\1|p' \
	/etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2; exit }' \
	/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
if [ -z "$mirror" ]; then
	echo "torch2-root: no Debian mirror in apt's sources to build the torch 2.x root from" >&2
	exit 1
fi
echo "torch2-root: building $root from $mirror (sid, a few minutes, once)" >&2
rm -rf "$root.partial"
if ! debootstrap --variant=minbase --include="$pkgs" sid "$root.partial" \
	"$mirror" >"$root.log" 2>&1; then
	rm -rf "$root.partial"
	echo "torch2-root: debootstrap of sid from $mirror failed: $(tail -n 1 "$root.log") (log: $root.log)" >&2
	exit 1
fi
if ! chroot "$root.partial" python3 -c 'import torch, numpy' >>"$root.log" 2>&1; then
	rm -rf "$root.partial"
	echo "torch2-root: the new root cannot import torch (log: $root.log)" >&2
	exit 1
fi
# safetensors' own reader, for the multi-format checks; optional
chroot "$root.partial" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-safetensors' \
	>>"$root.log" 2>&1 || echo "torch2-root: no python3-safetensors in sid (optional)" >&2
with_extras "$root.partial"
chroot "$root.partial" apt-get clean >/dev/null 2>&1 || true
mv "$root.partial" "$root"
echo "torch2-root: $(chroot "$root" python3 -c 'import torch; print("torch", torch.__version__)' 2>/dev/null | tail -n 1)" >&2
echo "$root"
