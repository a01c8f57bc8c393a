"""benchlib.py - what several benchmarks measure with: the best of n
timed runs, whether a path is a mount point, a process's peak or
current memory (VmHWM/VmRSS) from /proc, where torch 2.x's root is, and
a main that unmounts whatever ends it.
"""
import os
import signal
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
