#!/bin/sh
# setup.sh - install what ptfs needs to build, test and benchmark on Debian 12
# (run as root), then configure and build into build/ (or $1).
#   PT_SANITIZE=ON scripts/setup.sh build-asan    for the ASan+UBSan build
set -eu
cd "$(dirname "$0")/.."
pkgs="build-essential cmake pkg-config libfuse3-dev fuse3 libarchive-dev debootstrap fuse-zip
libcriterion-dev libdeflate-dev zlib1g-dev libcurl4-openssl-dev python3-torch python3-numpy attr rsync
libarchive-tools time clang libclang-rt-14-dev xfsprogs btrfs-progs zsh
nginx-light python3-botocore nodejs curl"
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
# s3rver, the S3 store of the remote tests (tests/remote/servers.py), from
# npm into a fixed place, once (Debian's nodejs comes without npm, the
# nodesource one with it)
s3rver=/var/cache/ptfs/s3rver
if [ ! -f "$s3rver/node_modules/s3rver/bin/s3rver.js" ]; then
	echo "setup: installing s3rver 3.7.1 into $s3rver"
	command -v npm >/dev/null 2>&1 ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
	mkdir -p "$s3rver"
	npm install --prefix "$s3rver" --no-audit --no-fund --silent \
		s3rver@3.7.1 >/dev/null
fi
build=${1:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DPT_WERROR="${PT_WERROR:-OFF}" -DPT_SANITIZE="${PT_SANITIZE:-OFF}" >/dev/null
cmake --build "$build" -j"$(nproc)"
