#!/bin/sh
# test.sh - the test suite, from a fresh Debian 12 machine (as root), with
# nothing beside the clone.  Set-up: installs what is missing
# (scripts/setup.sh), builds torch 2.x's root once (scripts/torch2-root.sh,
# cached in /var/cache/ptfs), builds an optimized and an ASan+UBSan tree
# with warnings as errors.  Then two passes (tests/README.md):
#
#   optimized   every test: Criterion units, the tools, torch 1.13 and
#               2.x cross-checks, real mounts, fuzz smoke, TSan stress
#   ASan+UBSan  the C code paths again under the sanitizers: the units,
#               the tools and every mount test, each under one torch (2.x)
#
#   sh scripts/test.sh           both passes (what CI runs)
#   sh scripts/test.sh --quick   the unit tests and one smoke mount, in
#                                the optimized build: the edit-compile loop
#   sh scripts/test.sh --long    both passes, then the soak versions: the
#                                random crash loops and every fuzz target
#                                for minutes (for releases)
#
#   PT_NO_TORCH2=1     go without torch 2.x (its checks are skipped and say so)
#   PT_SHARED_DIR=DIR  where the optional real-world corpus is
#                      (default: ../shared beside the clone, if it is there)
#   PT_TEST_JOBS=N     tests run at once (default: three per core; most
#                      of a mount test's time is spent waiting)
# Exit status 0 only if every test that ran passed.
set -eu
cd "$(dirname "$0")/.."
mode=full
case ${1:-} in
'') ;;
--quick) mode=quick ;;
--long) mode=long ;;
-h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
*) echo "usage: sh scripts/test.sh [--quick | --long]" >&2; exit 2 ;;
esac
shared=${PT_SHARED_DIR:-$(cd .. && pwd)/shared}
jobs=${PT_TEST_JOBS:-$(($(nproc) * 3))}
t0=$(date +%s)
since() { echo "$(($(date +%s) - $1)) s"; }

echo "== set-up =="
PT_WERROR=ON scripts/setup.sh build >/dev/null
root2=${PT_TORCH2_ROOT:-/var/cache/ptfs/torch2-root}
if [ "$mode" = quick ] && [ ! -x "$root2/usr/bin/python3" ]; then
	# --quick builds no torch 2.x root: the fixtures it would write wait
	PT_NO_TORCH2=1
	export PT_NO_TORCH2
fi
if [ "${PT_NO_TORCH2:-0}" = 1 ]; then
	echo "PT_NO_TORCH2=1: the torch 2.x checks will be skipped"
elif [ "$mode" != quick ]; then
	t=$(date +%s)
	sh scripts/torch2-root.sh >/dev/null || {
		echo "test.sh: torch 2.x is needed for the cross-checks; set PT_NO_TORCH2=1 to run without them" >&2
		exit 1
	}
	echo "torch 2.x root: ready ($(since "$t"))"
fi
if grep -rlnE '#include *[<"]fuse|\bfuse_[a-z]' core tools --include='*.[ch]'; then
	echo "core/ or tools/ mention FUSE" >&2
	exit 1
fi
if [ "$mode" != quick ]; then
	# core/ and tools/ stand alone, without FUSE
	cmake -S . -B build-nofs -DPT_BUILD_FS=OFF -DPT_BUILD_TESTS=OFF \
		-DPT_WERROR=ON >/dev/null
	cmake --build build-nofs -j"$(nproc)" >/dev/null
	PT_WERROR=ON PT_SANITIZE=ON scripts/setup.sh build-asan >/dev/null
	# the fuzz targets and the ThreadSanitizer daemon the optimized pass
	# runs (fuzz_smoke, stress_tsan): builds, so set-up; the tests build
	# them themselves when run alone
	FUZZ_BUILD=$(pwd)/build/fuzz sh tests/fuzz/run build >/dev/null || :
	sh tests/fs/safety/tsan.sh "$(pwd)" "$(pwd)/build/tsan" "" --build \
		>/dev/null || :
fi
# the fixtures are made once, in build/testenv, for both passes (the
# unit tests have the path built in: build again)
builds=build
[ "$mode" = quick ] || builds="build build-asan"
for b in $builds; do
	cmake "$b" -DPT_SHARED_DIR="$shared" \
		-DPT_TESTENV_DIR="$(pwd)/build/testenv" >/dev/null
	cmake --build "$b" -j"$(nproc)" >/dev/null
done
setup=$(since "$t0")
echo "set-up: $setup"

# pass NAME BUILD CTEST-ARGS...: one pass, its wall time in $times
times= failed=
pass() {
	_n=$1 _b=$2
	shift 2
	echo "== $_n =="
	_t=$(date +%s)
	(cd "$_b" && ctest --output-on-failure -j"$jobs" "$@") || failed="$failed $_n"
	times="$times, $_n $(since "$_t")"
}
case $mode in
quick)
	pass "quick (optimized build)" build -L quick ;;
*)
	# labels (tests/CMakeLists.txt): manual by hand only; long with
	# --long; slow and once in the optimized build only
	pass "optimized" build -LE 'manual|long'
	pass "ASan + UBSan" build-asan -LE 'manual|long|slow|once|v1\.13' ;;
esac
[ "$mode" = long ] && pass "long (soak)" build -L long
echo "set-up $setup$times; in all $(since "$t0")"
[ -z "$failed" ] || { echo "failed:$failed" >&2; exit 1; }
