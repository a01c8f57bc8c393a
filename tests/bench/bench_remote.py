#!/usr/bin/python3
"""bench_remote.py - remote checkpoints (issue 40, "Benchmark"): ptls and a
ptfs mount of a URL against downloading the object and against ptls over
the generic HTTP mounts (httpfs2, rclone mount), in the same run, served
by the same nginx on 127.0.0.1 (tests/remote/servers.py's, its access log
giving requests and body bytes).

    /usr/bin/python3 tests/bench/bench_remote.py [BUILD_DIR] [WORKDIR]

Generates (once, cached in WORKDIR/remote, default /tmp/ptfs-bench;
remote_gen.py): big.pt, a 2.2 GB torch zip of 75 float32 tensors, and
hf4/, the same tensors as 4 safetensors shards and their index.

1. Listing.  `ptls URL` (a new process each time: no cache survives)
   against (a) `curl -o` of the object(s), then ptls of the local copy,
   (b) ptls over httpfs2 (one mount per file, the folder a directory of
   links to them; Debian's httpfs2 0.1.4 dies on a lookup of an object
   over 2 GiB, and reads of the others, answered 206 by nginx, end in
   EIO: the row gives its failure) and (c) over `rclone mount :http:`
   (nginx's autoindex on: rclone lists the folder from it).  Mount times
   include mounting.  Best of 3 (curl: 2); requests and body bytes of the
   first run, from the log.  Goals: ptls URL's bytes <= 0.1% of the
   download's, its time <= 0.05x the download's (curl -o alone).
2. Reading every tensor through `ptfs -f URL MNT` (1 MiB reads in a
   child, bench_mount.py's reader, each pass on a fresh mount) against
   `curl -o /dev/null` of the object(s): MB/s of tensor bytes against
   curl's of the whole objects, best of 3.  Goal >= 0.8x.  The requests
   of the best pass and their commonest range sizes are printed: what
   limits the mount shows there.  And ptfs of the local big.pt (page
   cache warm, spliced): what any FUSE read reaches here.
3. The daemon's VmHWM after each pass of 2 (/proc), with the default
   cache (256 MiB) and with -o cache=64M.  Goal <= cache + 32 MiB.
Every mount is unmounted and nginx stopped on exit.
"""
import collections
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
import remote_gen  # noqa: E402
import servers  # noqa: E402
from benchlib import mounted, run_main, vm  # noqa: E402
from bench_mount import read_all, tensor_files  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
WORK = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "/tmp/ptfs-bench")
PTLS, PTFS = os.path.join(BUILD, "ptls"), os.path.join(BUILD, "ptfs")
MB, MIB = 1e6, 1 << 20
RUNS = 3


# ------------------------------------------------------------- the server

class Log:
    """nginx's access log (METHOD URI STATUS BYTES "RANGE" ...) from a
    point on"""

    def __init__(self, path):
        self.path = path
        self.mark()

    def mark(self):
        self.off = os.path.getsize(self.path)

    def since(self):
        """[(uri, status, bytes, range length or None)] since mark()"""
        time.sleep(0.1)        # aborted transfers are logged at close
        with open(self.path, "rb") as f:
            f.seek(self.off)
            text = f.read().decode("utf-8", "replace")
        out = []
        for ln in text.splitlines():
            p = ln.split(" ")
            rng = p[4].strip('"')
            n = None
            if rng.startswith("bytes=") and "," not in rng:
                a, _, b = rng[6:].partition("-")
                n = int(b) - int(a) + 1 if a and b else None
            out.append((p[1], int(p[2]), int(p[3]), n))
        return out


def sums(reqs):
    return len(reqs), sum(r[2] for r in reqs)


def common_ranges(reqs, k=3):
    c = collections.Counter(r[3] for r in reqs if r[3])
    return ", ".join("%d x %d KiB" % (n, size // 1024)
                     for size, n in c.most_common(k))


# ----------------------------------------------------------------- mounts

class Mounts:
    """Foreground FUSE daemons, each ours; all unmounted by close()."""

    def __init__(self, base):
        self.base = base
        self.seq = 0
        self.active = {}        # mount point -> (Popen, stderr file)
        self.said = ""          # the last words of the last one unmounted

    def mount(self, argv_of, what):
        """@argv_of(mount point) in the foreground; (mount point, Popen)
        once mounted, or (None, the reason) when it did not mount"""
        self.seq += 1
        mnt = os.path.join(self.base, "m%d" % self.seq)
        os.mkdir(mnt)
        err = open(os.path.join(self.base, "m%d.err" % self.seq), "w+")
        p = subprocess.Popen(argv_of(mnt), stdout=err, stderr=err,
                             stdin=subprocess.DEVNULL,
                             start_new_session=True)
        self.active[mnt] = (p, err)
        t = time.perf_counter()
        while not mounted(mnt):
            if p.poll() is not None or time.perf_counter() - t > 30:
                self.umount(mnt)
                return None, "%s did not mount: %s" % (what, self.said)
            time.sleep(0.002)
        return mnt, p

    def umount(self, mnt):
        p, err = self.active.pop(mnt)
        if mounted(mnt):
            if subprocess.run(["fusermount3", "-u", mnt],
                              stderr=subprocess.DEVNULL).returncode:
                subprocess.run(["fusermount3", "-uz", mnt],
                               stderr=subprocess.DEVNULL)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        err.seek(0)
        self.said = " ".join(err.read().split()[-12:])
        err.close()
        os.rmdir(mnt)

    def close(self):
        for mnt in list(self.active):
            try:
                self.umount(mnt)
            except Exception as e:      # keep unmounting the rest
                print("warning: unmounting %s: %s" % (mnt, e),
                      file=sys.stderr)


# ---------------------------------------------------------------- listing

def ptls(target):
    r = subprocess.run([PTLS, target], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise RuntimeError("ptls %s: %s" % (target, r.stderr.strip()))


class Row:
    def __init__(self, name):
        self.name, self.runs, self.reqs, self.note = name, [], None, ""

    @property
    def secs(self):
        return min(self.runs) if self.runs else None


def measure(row, log, fn, n=RUNS):
    """@fn() timed @n times; the log of the first run kept"""
    for i in range(n):
        log.mark()
        t = time.perf_counter()
        fn()
        row.runs.append(time.perf_counter() - t)
        if not i:
            row.reqs = log.since()
    return row


def list_case(env, log, mounts, scratch, name, url, path_in, files):
    """The rows of listing @name: ptls URL, curl + ptls, httpfs2, rclone.
    @path_in(root) is what ptls is given under a tree holding the
    served files (@files: their paths relative to the served root)."""
    rows = [measure(Row("ptls URL"), log, lambda: ptls(url))]
    dl = os.path.join(scratch, "dl")
    urls = [env["PT_HTTP"] + "/" + f for f in files]
    curl = Row("curl -o")

    def download():
        shutil.rmtree(dl, ignore_errors=True)
        argv = ["curl", "-sSf", "--create-dirs"]
        for f, u in zip(files, urls):
            argv += ["-o", os.path.join(dl, f), u]
        t = time.perf_counter()
        subprocess.run(argv, check=True)
        curl.runs.append(time.perf_counter() - t)
        ptls(path_in(dl))
    both = measure(Row("curl -o, then ptls"), log, download, 2)
    curl.reqs = both.reqs
    shutil.rmtree(dl, ignore_errors=True)
    rows += [curl, both]

    # httpfs2 mounts one URL on a directory: one mount per file, and the
    # folder as a directory of links to them
    h = Row("httpfs2, ptls")

    def httpfs2():
        tree = os.path.join(scratch, "h")
        shutil.rmtree(tree, ignore_errors=True)
        mnts = []
        try:
            for f, u in zip(files, urls):
                os.makedirs(os.path.dirname(os.path.join(tree, f)),
                            exist_ok=True)
                mnt, p = mounts.mount(lambda m: ["httpfs2", "-f", "-c",
                                                 "/dev/null", u, m],
                                      "httpfs2 " + f)
                if mnt is None:
                    raise RuntimeError(p)
                mnts.append(mnt)
                os.symlink(os.path.join(mnt, os.path.basename(f)),
                           os.path.join(tree, f))
            ptls(path_in(tree))
        finally:
            for m in mnts:
                mounts.umount(m)
            shutil.rmtree(tree, ignore_errors=True)
    if shutil.which("httpfs2"):
        try:
            measure(h, log, httpfs2)
        except RuntimeError as e:
            h.runs, h.note = [], "%s; httpfs2 said: %s" % (
                str(e)[:120], mounts.said[-120:])
            h.reqs = log.since()
        rows.append(h)

    r = Row("rclone mount, ptls")

    def rclone():
        mnt, p = mounts.mount(lambda m: [
            "rclone", "mount", ":http:", m, "--http-url",
            env["PT_HTTP"] + "/", "--read-only"], "rclone")
        if mnt is None:
            raise RuntimeError(p)
        try:
            ptls(path_in(mnt))
        finally:
            mounts.umount(mnt)
    if shutil.which("rclone"):
        try:
            measure(r, log, rclone)
        except RuntimeError as e:
            r.runs, r.note = [], str(e)[:150]
        rows.append(r)
    return rows


def print_list(name, rows):
    print("\n== ptls of %s ==" % name)
    print("%-20s %9s %14s %9s %9s  %s" % ("route", "requests", "body bytes",
                                           "best s", "x curl", "runs s"))
    curl = rows[1].secs
    for r in rows:
        n, b = sums(r.reqs or [])
        if r.secs is None:
            print("%-20s %9d %14d %9s %9s  %s" % (r.name, n, b, "-", "-",
                                                  r.note))
            continue
        print("%-20s %9d %14d %9.3f %8.3fx  %s" % (
            r.name, n, b, r.secs, r.secs / curl,
            " ".join("%.3f" % s for s in r.runs)))


# ---------------------------------------------------------------- reading

def curl_null(urls):
    argv = ["curl", "-sSf"]
    for u in urls:
        argv += ["-o", "/dev/null", u]
    t = time.perf_counter()
    subprocess.run(argv, check=True)
    return time.perf_counter() - t


def read_case(log, mounts, url, nbytes, ntensors, opts):
    """passes of reading every tensor on fresh mounts: [(Read, VmHWM,
    log of the pass)]"""
    out = []
    for _ in range(RUNS):
        log.mark()
        mnt, p = mounts.mount(lambda m: [PTFS, "-f"] + opts + [url, m],
                              "ptfs " + url)
        if mnt is None:
            raise RuntimeError(p)
        files = tensor_files("ptfs", mnt)
        if len(files) != ntensors:
            raise RuntimeError("ptfs %s: %d tensor files, want %d" %
                               (url, len(files), ntensors))
        r = read_all(files)
        hwm = vm(p.pid, "VmHWM")
        mounts.umount(mnt)
        if r.status != "ok" or r.nbytes != nbytes:
            raise RuntimeError("ptfs %s: read %s, %d bytes of %d" %
                               (url, r.status, r.nbytes, nbytes))
        out.append((r, hwm, log.since()))
    return out


def goal(text, ok, figure):
    print("goal %s: %s (%s)" % (text, "met" if ok else "NOT met", figure))


# ------------------------------------------------------------------- main

def main(mounts, scratch):
    if not (os.access(PTLS, os.X_OK) and os.access(PTFS, os.X_OK)):
        sys.exit("bench_remote: no ptls/ptfs in %s (build first)" % BUILD)
    served = os.path.join(WORK, "remote")
    big, hf = remote_gen.make(served)
    hfshards = sorted(f for f in os.listdir(hf) if f.endswith(".safetensors"))
    hffiles = ["hf4/model.safetensors.index.json"] + \
        ["hf4/" + f for f in hfshards]
    sizes = {f: os.path.getsize(os.path.join(served, f))
             for f in ["big.pt"] + hffiles}
    tensor_bytes = sum(4 * math.prod(s)
                       for _, s in remote_gen.shapes())
    ntensors = len(remote_gen.shapes())
    for f in ["big.pt"] + hffiles:             # nginx serves from memory
        subprocess.run(["cat", os.path.join(served, f)],
                       stdout=subprocess.DEVNULL)

    # rclone lists a folder from nginx's autoindex; ranges are unchanged
    servers.NGINX_CONF = servers.NGINX_CONF.replace("autoindex off",
                                                    "autoindex on")
    srv = servers.Servers(os.path.join(scratch, "srv"), served)
    os.makedirs(srv.d)
    try:
        srv.nginx()
        env = srv.env
        log = Log(env["PT_HTTP_LOG"])
        run(env, log, mounts, scratch, big, hf, hffiles, sizes,
            tensor_bytes, ntensors)
    finally:
        mounts.close()
        srv.stop()


def run(env, log, mounts, scratch, big, hf, hffiles, sizes, tensor_bytes,
        ntensors):
    base = env["PT_HTTP"]
    print("machine: %d cores, load average %s; %s; nginx at %s" %
          (os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3]),
           BUILD, base))
    print("big.pt %.1f MB, hf4/ %.1f MB in %d files, %d tensors" % (
        sizes["big.pt"] / MB, sum(sizes[f] for f in hffiles) / MB,
        len(hffiles), ntensors))

    # the folder by its URL; the index's URL when the folder's fails
    hf_url = base + "/hf4/"
    r = subprocess.run([PTLS, hf_url], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode:
        print("ptls %s fails (%s); the folder is given by its index's "
              "URL instead" % (hf_url, r.stderr.strip()))
        hf_url = base + "/" + hffiles[0]

    # 1. listing --------------------------------------------------------
    cases = [("big.pt", base + "/big.pt", lambda root: os.path.join(
        root, "big.pt"), ["big.pt"]),
        ("hf4/ (4 shards)", hf_url, lambda root: os.path.join(
            root, "hf4") + "/", hffiles)]
    lists = []
    for name, url, path_in, files in cases:
        rows = list_case(env, log, mounts, scratch, name, url, path_in,
                         files)
        print_list(name + " (" + url + ")", rows)
        lists.append((name, rows))

    # 2, 3. reading every tensor, memory ----------------------------------
    reads = []
    for name, url, urls in (("big.pt", base + "/big.pt", [base + "/big.pt"]),
                            ("hf4/", hf_url, [base + "/" + f
                                              for f in hffiles[1:]])):
        c = min(curl_null(urls) for _ in range(RUNS))
        total = sum(sizes[u[len(base) + 1:]] for u in urls)
        for cache, opts in ((256, []), (64, ["-o", "cache=64M"])):
            if cache == 64 and name != "big.pt":
                continue
            passes = read_case(log, mounts, url, tensor_bytes, ntensors,
                               opts)
            reads.append((name, cache, total / c / MB, passes))
    # the ceiling of any FUSE read here: ptfs of the local file, page
    # cache warm, spliced, no copy in the daemon
    local = read_case(log, mounts, big, tensor_bytes, ntensors, [])
    lbest = max(local, key=lambda p: p[0].mbs)
    print("\n== reading all %d tensors (%.1f MB) through ptfs URL MNT, "
          "1 MiB reads, fresh mount per pass ==" % (ntensors,
                                                     tensor_bytes / MB))
    print("%-7s %6s %9s %9s %7s %10s %9s %13s  %s" % (
        "source", "cache", "curl MB/s", "ptfs MB/s", "x curl", "VmHWM MiB",
        "requests", "body MB", "runs s"))
    for name, cache, cmbs, passes in reads:
        best = max(passes, key=lambda p: p[0].mbs)
        n, b = sums(best[2])
        print("%-7s %5dM %9.0f %9.0f %6.2fx %10.1f %9d %13.1f  %s" % (
            name, cache, cmbs, best[0].mbs, best[0].mbs / cmbs,
            max(p[1] for p in passes) / MIB, n, b / MB,
            " ".join("%.2f" % p[0].secs for p in passes)))
        print("        commonest ranges: %s" % common_ranges(best[2]))
    print("%-7s %6s %9.0f %9.0f %6.2fx %10.1f %9s %13s  %s" % (
        "local", "-", reads[0][2], lbest[0].mbs, lbest[0].mbs / reads[0][2],
        max(p[1] for p in local) / MIB, "-", "-",
        " ".join("%.2f" % p[0].secs for p in local)))
    print("(local: ptfs of big.pt itself, page cache warm: the FUSE "
          "ceiling on this machine, against the remote big.pt's curl)")

    # goals -----------------------------------------------------------------
    print()
    for name, rows in lists:
        p, curl = rows[0], rows[1]
        pb, cb = sums(p.reqs)[1], sums(curl.reqs)[1]
        goal("%s: ptls URL bytes <= 0.1%% of the download" % name,
             pb <= 0.001 * cb, "%.4f%%: %d of %d" % (100 * pb / cb, pb, cb))
        goal("%s: ptls URL time <= 0.05x the download" % name,
             p.secs <= 0.05 * curl.secs, "%.4fx: %.4f s vs %.3f s" % (
                 p.secs / curl.secs, p.secs, curl.secs))
    for name, cache, cmbs, passes in reads:
        best = max(passes, key=lambda p: p[0].mbs)
        x = best[0].mbs / cmbs
        goal("%s, cache %dM: reading >= 0.8x curl" % (name, cache), x >= 0.8,
             "%.2fx: %.0f vs %.0f MB/s" % (x, best[0].mbs, cmbs))
        h = max(p[1] for p in passes)
        lim = cache * MIB + 32 * MIB
        goal("%s, cache %dM: VmHWM <= cache + 32 MiB" % (name, cache),
             h <= lim, "%.1f MiB, limit %.0f MiB" % (h / MIB, lim / MIB))


def cleanup(m, tmp):
    m.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    tmp = tempfile.mkdtemp(prefix="ptfs-bench-remote-")
    m = Mounts(tmp)
    run_main(lambda: main(m, tmp), lambda: cleanup(m, tmp))
