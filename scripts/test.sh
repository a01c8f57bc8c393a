#!/bin/sh
# test.sh - the whole test suite, from a fresh Debian 12 machine (as root),
# with nothing beside the clone: installs what is missing (scripts/setup.sh),
# builds torch 2.x's root once (scripts/torch2-root.sh, cached in
# /var/cache/ptfs), builds with warnings as errors, runs every test (Criterion
# units, tool tests, torch 1.13 and 2.x cross-checks, real mounts), then does
# it all again in an ASan+UBSan build.  Exit status 0 only if all pass.
#
#   PT_NO_TORCH2=1     go without torch 2.x (its checks are skipped and say so)
#   PT_SHARED_DIR=DIR  where the optional real-world corpus is
#                      (default: ../shared beside the clone, if it is there)
#   PT_TEST_JOBS=N     ctest's parallelism (default: the number of cores)
set -eu
cd "$(dirname "$0")/.."
shared=${PT_SHARED_DIR:-$(cd .. && pwd)/shared}
jobs=${PT_TEST_JOBS:-$(nproc)}
t0=$(date +%s)
since() { echo "$(($(date +%s) - $1)) s"; }

echo "== set-up =="
PT_WERROR=ON scripts/setup.sh build >/dev/null
if [ "${PT_NO_TORCH2:-0}" = 1 ]; then
	echo "PT_NO_TORCH2=1: the torch 2.x checks will be skipped"
else
	t=$(date +%s)
	sh scripts/torch2-root.sh >/dev/null || {
		echo "test.sh: torch 2.x is needed for the cross-checks; set PT_NO_TORCH2=1 to run without them" >&2
		exit 1
	}
	echo "torch 2.x root: ready ($(since "$t"))"
fi
setup=$(since "$t0")
echo "set-up: $setup"

t1=$(date +%s)
echo "== core/ and tools/ stand alone (no FUSE) =="
if grep -rlnE '#include *[<"]fuse|\bfuse_[a-z]' core tools --include='*.[ch]'; then
	echo "core/ or tools/ mention FUSE" >&2
	exit 1
fi
cmake -S . -B build-nofs -DPT_BUILD_FS=OFF -DPT_BUILD_TESTS=OFF -DPT_WERROR=ON >/dev/null
cmake --build build-nofs -j"$jobs" >/dev/null
echo "ok"

# label manual: by hand only (ctest -L manual); label slow (the 4 GiB
# storage): in the optimized build only, where it checks what it is for
run_suite() {	# build-dir sanitize labels-to-leave-out
	PT_WERROR=ON PT_SANITIZE=$2 scripts/setup.sh "$1" >/dev/null
	cmake "$1" -DPT_SHARED_DIR="$shared" >/dev/null
	(cd "$1" && ctest --output-on-failure -j"$jobs" -LE "$3")
}
echo "== build and test =="
run_suite build OFF manual
echo "== ASan + UBSan build and test =="
run_suite build-asan ON 'manual|slow'
echo "set-up $setup, build and tests $(since "$t1"), in all $(since "$t0")"
