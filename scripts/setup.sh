#!/bin/sh
# setup.sh - install what ptfs needs to build, test and benchmark on Debian 12
# (run as root), then configure and build into build/ (or $1).
#   PT_SANITIZE=ON scripts/setup.sh build-asan    for the ASan+UBSan build
set -eu
cd "$(dirname "$0")/.."
pkgs="build-essential cmake pkg-config libfuse3-dev fuse3 libarchive-dev debootstrap fuse-zip
libcriterion-dev libdeflate-dev zlib1g-dev libcurl4-openssl-dev python3-torch python3-numpy attr rsync
libarchive-tools time clang libclang-rt-14-dev xfsprogs btrfs-progs zsh"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "setup: installing$missing"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
build=${1:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DPT_WERROR="${PT_WERROR:-OFF}" -DPT_SANITIZE="${PT_SANITIZE:-OFF}" >/dev/null
cmake --build "$build" -j"$(nproc)"
