#!/bin/sh
# run.sh - build ptfs and run its benchmarks (one command; see docs/benchmarks.md):
# ptls listing, the mount (reads, memory per tensor), write-back of an edit (also on
# XFS and btrfs), DCP verification
set -eu
cd "$(dirname "$0")/../.."
scripts/setup.sh build >/dev/null
# the baselines the mount is measured against
for p in fuse-zip archivemount httpfs2 rclone; do
	command -v "$p" >/dev/null ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null
done
/usr/bin/python3 tests/bench/bench_ptls.py build/ptls "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
/usr/bin/python3 tests/bench/bench_ptdiff.py build/ptdiff "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
/usr/bin/python3 tests/bench/bench_stats.py build/ptls "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
/usr/bin/python3 tests/bench/bench_mount.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
/usr/bin/python3 tests/bench/bench_mem.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
/usr/bin/python3 tests/bench/bench_views.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
/usr/bin/python3 tests/bench/bench_writeback.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
# ext4, XFS and btrfs on loop images: needs root, skipped without
if [ "$(id -u)" = 0 ]; then
	/usr/bin/python3 tests/bench/bench_reflink.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
else
	echo "bench_reflink.py: needs root (loop devices), skipped"
fi
/usr/bin/python3 tests/bench/bench_cvt.py build/ptrepack "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
# ptrepack --dequant of 2 GB of block float8 against cp and torch: the
# torch 2.x root (its files go in the root's /tmp)
/usr/bin/python3 tests/bench/bench_fp8.py build/ptrepack
/usr/bin/python3 tests/bench/bench_hfshards.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
# ptverify against the number of DCP chunks, ptls on repeated chunk references
/usr/bin/python3 tests/bench/bench_dcpverify.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
# remote checkpoints over nginx: ptls URL and ptfs URL against curl, httpfs2, rclone
/usr/bin/python3 tests/bench/bench_remote.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
# DCP both ways: needs the torch 2.x root (scripts/torch2-root.sh)
/usr/bin/python3 tests/bench/bench_dcp.py build
# per-rank FSDP2 shards consolidated, against the Python route: torch 2.x root
/usr/bin/python3 tests/bench/bench_ranks.py build
# a GGUF from a safetensors folder, against gguf-py's writer: torch 2.x root
/usr/bin/python3 tests/bench/bench_gguf.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}"
# many readers at once, as loaders read (issue 43); the mmap case 100
# times in a row: no deadlock, no wrong byte
/usr/bin/python3 tests/bench/bench_parallel.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}" \
	--temps warm,hot,cold
/usr/bin/python3 tests/bench/bench_parallel.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}" \
	--repeat-mmap 100
# many files into one and --dtype bf16 against cp of the same bytes (issue
# 43); its DCP input needs the torch 2.x root
/usr/bin/python3 tests/bench/bench_conv.py build "${PT_BENCH_DIR:-/tmp/ptfs-bench}/conv"
