#!/bin/sh
# demo.sh - set up ptfs on a fresh Debian 12 machine (as root) and run it on
# the bundled sample checkpoint tests/data/sample.pt.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh build >/dev/null
sample=tests/data/sample.pt
echo "\$ ptls $sample"
build/ptls "$sample"
echo
echo "\$ ptls --json $sample | head -c 600"
build/ptls --json "$sample" | head -c 600
echo
