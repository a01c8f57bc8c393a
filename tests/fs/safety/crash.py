"""crash.py - the overlay's crash loop (issue 14): random edits of every
kind through a real mount, the daemon killed with SIGKILL at a random
moment (between edits, in the middle of one, or during `ptfs umount`'s
write-back), then a remount; at the end one clean unmount.

Checked after every kill: the checkpoint is the file it was or a complete
new one that torch loads with exactly the edits made so far; the remount
shows every edit that returned success (an edit cut short by the kill
may be there or not, never half); at the end torch.load of the file
equals the model of all edits and nothing but model.pt is left.

  python3 crash.py PTFS DIR INNER ITERATIONS SEED WORKER...

DIR holds model.pt (made by the worker's crashmake); INNER is DIR as the
worker sees it; WORKER... runs overlay_check.py serve.  Plain python (no
torch here).  Prints the counts and where the kills landed, then
"N passed, N failed"; exit 0 when nothing failed.
"""
import hashlib
import json
import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time

PTFS, DIR, INNER = sys.argv[1], sys.argv[2], sys.argv[3]
ITERS, SEED = int(sys.argv[4]), int(sys.argv[5])
WORKER = sys.argv[6:]
CK = os.path.join(DIR, "model.pt")
MNT = os.path.join(DIR, "mnt", "m")
rng = random.Random(SEED)
fails = []


def h(b):
    return hashlib.sha256(b).hexdigest()[:16]


def fsum(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def mounted():
    with open("/proc/mounts") as f:
        return any(line.split()[1] == MNT for line in f)


class Worker:
    def __init__(self):
        self.p = subprocess.Popen(WORKER + ["serve", "-"], text=True,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        while self.p.stdout.readline().strip() != "ready":
            pass

    def dump(self):
        self.p.stdin.write(os.path.join(INNER, "model.pt") + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())


class Daemon:
    def __init__(self):
        self.err = open(os.path.join(DIR, "daemon.err"), "a")
        self.p = subprocess.Popen([PTFS, "-f", CK, MNT], stderr=self.err,
                                  stdout=subprocess.DEVNULL)
        t0 = time.time()
        while not mounted():
            if self.p.poll() is not None or time.time() - t0 > 30:
                raise SystemExit("ptfs did not mount: see daemon.err")
            time.sleep(0.01)

    def kill(self):
        try:
            self.p.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()
        subprocess.run(["fusermount3", "-uz", MNT], stderr=subprocess.DEVNULL)
        self.err.close()


def npy(data):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % (
        len(data) // 4)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + \
        hdr.encode() + data


# ---- the model: key -> bytes (tensor), "dict", or an int (epoch)
model = {}


def initial():
    for i in range(8):
        model["t%d" % i] = struct.pack("<4096f", *[float(k * (i + 1))
                                                   for k in range(4096)])
    model["epoch"] = 3
    model["big"] = None  # never edited, never read


BIG = hashlib.sha256(bytes(32 << 20)).hexdigest()[:16]


def expect_digest():
    out = {}
    for k, v in model.items():
        if v is None:
            out[k] = BIG  # "big": zeros, never edited
            continue
        if isinstance(v, bytes):
            out[k] = h(v)
        elif v == "dict":
            out[k] = "dict:"
        else:
            out[k] = repr(v)
    return out


def tensors():
    """Tensors to edit: not a replacement's leftover temporary file."""
    return [k for k, v in model.items()
            if isinstance(v, bytes) and len(v) >= 8 and
            not k.startswith("tmp")]


def p(k):
    return os.path.join(MNT, k)


# Each edit returns (keys it touches, new values): applied to the model
# when it returns; when the kill cuts it, the remount decides.
counter = [0]


def new_name(prefix):
    counter[0] += 1
    return "%s%d_%d" % (prefix, SEED, counter[0])


def e_inplace():
    k = rng.choice(tensors())
    off = rng.randrange(0, len(model[k]) - 4, 4)
    b = struct.pack("<f", rng.random())
    nb = model[k][:off] + b + model[k][off + 4:]
    return {k: nb}, lambda: _inplace(k, off, b)


def _inplace(k, off, b):
    with open(p(k), "r+b") as f:
        f.seek(off)
        f.write(b)


def e_replace():
    k = rng.choice(tensors())
    nb = os.urandom(len(model[k]) // 4) * 4
    tmp = new_name("tmp")
    return {k: nb, tmp: None}, lambda: _replace(k, tmp, nb)


def _replace(k, tmp, nb):
    with open(p(tmp), "wb") as f:
        f.write(nb)
    os.rename(p(tmp), p(k))


def e_rename():
    k = rng.choice(tensors())
    n = new_name("r")
    return {k: None, n: model[k]}, lambda: os.rename(p(k), p(n))


def e_remove():
    k = rng.choice(tensors())
    return {k: None}, lambda: os.unlink(p(k))


def e_mkdir():
    n = new_name("d")
    return {n: "dict"}, lambda: os.mkdir(p(n))


def e_newtensor():
    n = new_name("n")
    data = os.urandom(256)
    return {n: data}, lambda: _write(p(n + ".npy"), npy(data))


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def e_value():
    v = rng.randrange(1000)
    return {"epoch": v}, lambda: _write(p("epoch"), b"%d\n" % v)


EDITS = [("in place", e_inplace), ("replace", e_replace),
         ("rename", e_rename), ("remove", e_remove), ("mkdir", e_mkdir),
         ("new tensor", e_newtensor), ("value", e_value)]


def observe(k):
    """What the mount shows for key k: bytes, "dict", an int, or None."""
    path = p(k)
    if not os.path.lexists(path):
        return None
    if os.path.isdir(path):
        return "dict"
    with open(path, "rb") as f:
        data = f.read()
    if k == "epoch":
        return int(data)
    return data


def settle(pending):
    """After a remount: an edit cut by the kill is all there or not at all."""
    for k, after in pending["after"].items():
        seen = observe(k)
        before = pending["before"].get(k)
        if k.startswith("tmp"):
            # a replacement's temporary file: a new file while it lived
            if seen is None:
                model.pop(k, None)
            else:
                model[k] = seen
            continue
        if seen == after:
            if after is None:
                model.pop(k, None)
            else:
                model[k] = after
        elif seen != before:
            fails.append("%s after a kill during %s: neither before nor "
                         "after (%s)" % (k, pending["kind"],
                                         "absent" if seen is None else
                                         "%d bytes" % len(seen)
                                         if isinstance(seen, bytes) else
                                         repr(seen)))
            if seen is None:
                model.pop(k, None)
            else:
                model[k] = seen


def check_mount(where):
    names = set(os.listdir(MNT))
    want = set(k for k in model)
    if names != want:
        fails.append("%s: the mount lists %s, the model %s" % (
            where, sorted(names - want), sorted(want - names)))
        return
    for k, v in model.items():
        if v is None:
            continue
        seen = observe(k)
        if seen != v:
            fails.append("%s: %s differs from the edits made" % (where, k))


def check_file(where, before_sum, worker):
    """The checkpoint: the file it was, or a complete new one with the
    edits.  Returns its sum."""
    now = fsum(CK)
    if now == before_sum:
        return now
    got = worker.dump()
    if got != expect_digest():
        diff = sorted(k for k in set(got) | set(expect_digest())
                      if got.get(k) != expect_digest().get(k))
        fails.append("%s: a new checkpoint that is not the edits: %s" % (
            where, diff[:5]))
    return now


def main():
    worker = Worker()
    initial()
    kills = {}
    edits_ok = {}
    last_sum = fsum(CK)
    d = Daemon()
    for it in range(ITERS):
        mode = rng.random()
        # 0-0.45: kill in the middle of an edit, 0.45-0.65: between
        # edits, 0.65-0.95: during the write-back, else a clean unmount
        n = rng.randint(1, 4)
        pending = None
        for j in range(n):
            kind, make = rng.choice(EDITS)
            if kind in ("rename", "remove", "in place", "replace") and \
                    len(tensors()) < 3:
                kind, make = "new tensor", e_newtensor
            after, run = make()
            before = {k: model.get(k) for k in after}
            last = j == n - 1
            timer = None
            if last and mode < 0.45:
                timer = threading.Timer(rng.random() * 0.004, d.kill)
                timer.start()
            try:
                run()
                ok = True
            except OSError:
                ok = False
            if timer:
                timer.join()
                pending = {"kind": kind, "before": before, "after": after}
                kills["during an edit (%s)" % kind] = kills.get(
                    "during an edit (%s)" % kind, 0) + 1
                break
            if not ok:
                fails.append("iteration %d: %s failed with the daemon "
                             "alive" % (it, kind))
                continue
            edits_ok[kind] = edits_ok.get(kind, 0) + 1
            for k, v in after.items():
                if v is None:
                    model.pop(k, None)
                else:
                    model[k] = v
        if pending is None and mode < 0.65:
            d.kill()
            kills["between edits"] = kills.get("between edits", 0) + 1
        elif pending is None and mode < 0.95:
            um = subprocess.Popen([PTFS, "umount", MNT],
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
            delay = rng.random() * 0.1
            time.sleep(delay)
            done = um.poll() is not None
            d.kill()
            um.wait()
            b = "during ptfs umount, %s" % (
                "after it returned" if done else
                "%d-%d ms in" % (int(delay * 50) * 20,
                                 int(delay * 50) * 20 + 20))
            kills[b] = kills.get(b, 0) + 1
        elif pending is None:
            r = subprocess.run([PTFS, "umount", MNT],
                               stderr=subprocess.PIPE, text=True)
            d.p.wait()
            if r.returncode != 0:
                fails.append("iteration %d: ptfs umount: %s" % (
                    it, r.stderr.strip()))
            kills["none (clean unmount)"] = kills.get(
                "none (clean unmount)", 0) + 1
        last_sum = check_file("iteration %d" % it, last_sum, worker)
        d = Daemon()
        if pending:
            settle(pending)
        check_mount("iteration %d" % it)
        if len(fails) > 20:
            break
    r = subprocess.run([PTFS, "umount", MNT], stderr=subprocess.PIPE,
                       text=True)
    d.p.wait()
    if r.returncode != 0:
        fails.append("final ptfs umount: " + r.stderr.strip())
    got = worker.dump()
    if got != expect_digest():
        fails.append("final: torch.load differs from the edits: %s" % sorted(
            k for k in set(got) | set(expect_digest())
            if got.get(k) != expect_digest().get(k))[:5])
    left = sorted(set(os.listdir(DIR)) - {"model.pt", "mnt", "daemon.err",
                                          "py"})
    if left:
        fails.append("left beside the checkpoint: %s" % left)
    print("iterations: %d; edits that returned success: %d (%s)" % (
        ITERS, sum(edits_ok.values()),
        ", ".join("%s %d" % kv for kv in sorted(edits_ok.items()))))
    print("kills: %d; where: %s" % (
        sum(v for k, v in kills.items() if not k.startswith("none")),
        "; ".join("%s %d" % kv for kv in sorted(kills.items()))))
    for f in fails:
        print("FAIL " + f)
    print("%d passed, %d failed" % (0 if fails else 1, len(fails)))
    return 1 if fails else 0


daemons = []
_Daemon = Daemon


def tracked():
    d = _Daemon()
    daemons.append(d)
    return d


Daemon = tracked
try:
    rc = main()
finally:
    # never leave a daemon behind, whatever happened above
    for dm in daemons:
        if dm.p.poll() is None:
            dm.p.kill()
            dm.p.wait()
    subprocess.run(["fusermount3", "-uz", MNT], stderr=subprocess.DEVNULL)
sys.exit(rc)
