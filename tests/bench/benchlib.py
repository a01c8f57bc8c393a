"""benchlib.py - what several benchmarks measure with: the best of n
timed runs, whether a path is a mount point, a process's peak or
current memory (VmHWM/VmRSS) from /proc, where torch 2.x's root is, and
a main that unmounts whatever ends it.
"""
import os
import signal
import subprocess
import sys
import time

# torch 2.x's root (sh scripts/torch2-root.sh makes it)
TORCH2_ROOT = os.environ.get("PT_TORCH2_ROOT", "/var/cache/ptfs/torch2-root")


def best(fn, n):
    """the shortest of @n timed calls of @fn, in seconds"""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def timed_call(argv, who):
    """(wall seconds, peak RSS bytes) of one command under /usr/bin/time;
    a python one that prints "call SECONDS" gives the seconds of its work
    itself (torch's import left out).  A failure exits, naming @who."""
    t = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    wall = time.monotonic() - t
    if p.returncode:
        sys.exit("%s: %s failed: %s" % (who, argv[0], p.stderr.strip()))
    said = [ln for ln in p.stdout.splitlines() if ln.startswith("call ")]
    if said:
        wall = float(said[-1].split()[1])
    return wall, int(p.stderr.strip().splitlines()[-1]) * 1024


def drop_caches():
    """Empty the page cache (root only)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def mounted(mnt):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)


def vm(pid, key):
    """VmHWM/VmRSS of @pid in bytes, None when it is gone"""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _on_term(signum, frame):
    raise KeyboardInterrupt


def run_main(body, cleanup):
    """body(), with SIGTERM and SIGHUP taken as Ctrl-C (exit 130), and
    cleanup() (unmount, stop) however it ends"""
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGHUP, _on_term)
    try:
        body()
    except KeyboardInterrupt:
        print("\ninterrupted; unmounting", file=sys.stderr)
        sys.exit(130)
    finally:
        cleanup()
