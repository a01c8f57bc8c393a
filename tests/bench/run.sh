#!/bin/sh
# run.sh - build ptfs and run its benchmarks (one command; see docs/benchmarks.md)
set -eu
cd "$(dirname "$0")/../.."
scripts/setup.sh build >/dev/null
/usr/bin/python3 tests/bench/bench_ptls.py build/ptls "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
