#!/bin/sh
# test.sh - the whole test suite, from a fresh Debian 12 machine (as root):
# installs what is missing, builds with warnings as errors, runs every test
# (Criterion units, tool tests, torch 1.13 and torch 2.x cross-checks), then
# does it all again in an ASan+UBSan build.  Exit status 0 only if all pass.
set -eu
cd "$(dirname "$0")/.."
shared=${PT_SHARED_DIR:-$(cd .. && pwd)/shared}
jobs=$(nproc)

run_suite() {	# build-dir sanitize
	PT_WERROR=ON PT_SANITIZE=$2 scripts/setup.sh "$1"
	cmake "$1" -DPT_SHARED_DIR="$shared" >/dev/null
	(cd "$1" && ctest --output-on-failure -j"$jobs")
}

# torch 2.x lives in a Debian unstable root built once (a few minutes) for
# the cross-checks; PT_NO_TORCH2=1 (README) skips them instead
if [ "${PT_NO_TORCH2:-0}" != 1 ]; then
	sh scripts/torch2-root.sh >/dev/null
fi
echo "== core/ and tools/ stand alone (no FUSE) =="
if grep -rlnE '#include *[<"]fuse|\bfuse_[a-z]' core tools --include='*.[ch]'; then
	echo "core/ or tools/ mention FUSE" >&2
	exit 1
fi
cmake -S . -B build-nofs -DPT_BUILD_FS=OFF -DPT_BUILD_TESTS=OFF -DPT_WERROR=ON >/dev/null
cmake --build build-nofs -j"$jobs" >/dev/null
echo "ok"
echo "== build and test =="
run_suite build OFF
echo "== ASan + UBSan build and test =="
run_suite build-asan ON
