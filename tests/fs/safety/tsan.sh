#!/bin/sh
# tsan.sh SRC BUILD [SHARED_DIR [--build]] - build the daemon with
# ThreadSanitizer (gcc -fsanitize=thread, PT_TSAN=ON) in BUILD and run
# stress.sh on it (--build: only build it, for scripts/test.sh's set-up).
# libfuse itself is not instrumented; TSan still sees its pthread calls,
# and no report needed suppressing (docs/testing.md).  Exit 77 when the
# compiler cannot build a TSan program here.
set -u
src=$1 B=$2 shared=${3:-}
mkdir -p "$B" || exit 1
printf '#include <pthread.h>\nstatic void *f(void *a) { return a; }\nint main(void) { pthread_t t; return pthread_create(&t, 0, f, 0) || pthread_join(t, 0); }\n' >"$B/probe.c"
if ! ${CC:-cc} -fsanitize=thread "$B/probe.c" -o "$B/probe" -lpthread >"$B/probe.log" 2>&1 ||
   ! "$B/probe" >>"$B/probe.log" 2>&1; then
	echo "skip: cannot build and run a ThreadSanitizer program: $(head -n 1 "$B/probe.log")"
	exit 77
fi
if ! { cmake -S "$src" -B "$B" -DPT_TSAN=ON -DPT_BUILD_TESTS=OFF \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$B" -j"$(nproc)" \
	--target ptfs; } >"$B/build.log" 2>&1; then
	echo "FAIL tsan build: $(grep -m 1 -i error "$B/build.log")"
	echo "0 passed, 1 failed"
	exit 1
fi
[ "${4:-}" = --build ] && exit 0
PTFS_TSAN_BUILD=1 exec sh "$(dirname "$0")/stress.sh" "$B/ptfs" $shared
