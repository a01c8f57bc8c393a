#!/usr/bin/python3
"""bench_dcpverify.py - ptverify's time against the number of chunks of a
DCP directory, and ptls's memory on a .metadata of repeated chunk
references (issue 38), measured in one run.

    /usr/bin/python3 tests/bench/bench_dcpverify.py [BUILD_DIR] [WORKDIR]
        [BASE_BUILD_DIR]

Generates once, in WORKDIR (default /tmp/ptfs-bench), with dcp_gen.py
(no torch): dcp-N/ and dcp-4N/, one float32 tensor of N (4N) rows saved
in N (4N) chunks of one row, each its own item (N = 50,000: 32 MB and
127 MB of .distcp), and dcp-refs/, a .metadata of 20 MB listing one chunk
10,000,000 times by memo reference.  Then, warm cache, best of 3:

  ptverify dcp-N/ and dcp-4N/   and the ratio 4N / N: linear is 4x
  ptls dcp-N/ and dcp-4N/       the open alone, the baseline: what
                                ptverify adds per chunk is the difference
  ptls dcp-refs/                its peak RSS (VmHWM, /usr/bin/time %M)
                                against the .metadata's size; refused

With BASE_BUILD_DIR (a build of an older commit), the same programs of
that build are measured too, in the same run: before and after.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
WORK = sys.argv[2] if len(sys.argv) > 2 else "/tmp/ptfs-bench"
BASE = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
N = 50000
REFS = 10 ** 7
MB = 1e6


def gen(kind, name, n):
    d = os.path.join(WORK, name)
    if not os.path.exists(os.path.join(d, ".metadata")):
        subprocess.run(["python3", os.path.join(HERE, "dcp_gen.py"), kind,
                        d, str(n)], check=True)
    for f in os.listdir(d):
        subprocess.run(["cat", os.path.join(d, f)],
                       stdout=subprocess.DEVNULL)    # warm cache
    return d


def timed(argv, n=3):
    """best wall time of @n runs, the last run's peak RSS and status"""
    best = None
    for _ in range(n):
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        t = time.perf_counter() - t
        best = t if best is None or t < best else best
    kb = int(p.stderr.strip().splitlines()[-1])
    return best, kb * 1024, p.returncode


def measure(build, small, big, refs):
    ptv, ptls = os.path.join(build, "ptverify"), os.path.join(build, "ptls")
    r = {}
    r["v1"], _, st1 = timed([ptv, small])
    r["v4"], _, st4 = timed([ptv, big], 1 if r["v1"] > 5 else 3)
    if st1 or st4:
        sys.exit("%s: ptverify exit %d, %d" % (build, st1, st4))
    r["l1"], _, _ = timed([ptls, small])
    r["l4"], _, _ = timed([ptls, big])
    r["rt"], r["rss"], r["rst"] = timed([ptls, refs], 1)
    return r


def show(label, r):
    print("%-6s ptverify N %7.2f s  4N %7.2f s  4N/N %5.2fx  "
          "(%5.1f us a chunk)" % (label, r["v1"], r["v4"],
                                  r["v4"] / r["v1"], r["v4"] / (4 * N) * 1e6))
    print("%-6s ptls     N %7.2f s  4N %7.2f s  4N/N %5.2fx  "
          "ptverify/ptls at 4N %5.1fx" % ("", r["l1"], r["l4"],
                                          r["l4"] / r["l1"],
                                          r["v4"] / r["l4"]))
    print("%-6s ptls refs: %7.1f MB peak (VmHWM), %.2f s, exit %d" %
          ("", r["rss"] / MB, r["rt"], r["rst"]))


def main():
    os.makedirs(WORK, exist_ok=True)
    small = gen("chunks", "dcp-%d" % N, N)
    big = gen("chunks", "dcp-%d" % (4 * N), 4 * N)
    refs = gen("refs", "dcp-refs", REFS)
    size = os.path.getsize(os.path.join(refs, ".metadata"))
    print("N = %d chunks; dcp-refs/.metadata %.1f MB, %d references to "
          "one chunk" % (N, size / MB, REFS))
    runs = [("after", BUILD)] + ([("before", BASE)] if BASE else [])
    res = {label: measure(b, small, big, refs) for label, b in runs}
    for label, _ in runs:
        show(label, res[label])
    a = res["after"]
    print("ptverify 4N/N: %.2fx (goal: about 4x, linear)" %
          (a["v4"] / a["v1"]))
    print("ptls refs: VmHWM %.1fx the .metadata's size" % (a["rss"] / size))
    if BASE:
        b = res["before"]
        print("before/after: ptverify at 4N %.1fx, ptls refs VmHWM %.1fx" %
              (b["v4"] / a["v4"], b["rss"] / a["rss"]))


if __name__ == "__main__":
    main()
