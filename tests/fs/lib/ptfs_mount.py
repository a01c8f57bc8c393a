"""ptfs_mount.py - one ptfs daemon in the foreground, for the python halves
of the mount tests (views_check.py, dtype_check.py): mount and wait for
it, the daemon's log, kill -9, and ptfs umount with what it reported."""
import os
import signal
import subprocess
import time


class Mount:
    def __init__(self, ptfs, ck, mnt, err, *opts):
        self.ptfs, self.ck, self.mnt = ptfs, ck, mnt
        os.makedirs(mnt, exist_ok=True)
        self.err = open(err, "w+")
        self.p = subprocess.Popen([ptfs, "-f", *opts, ck, mnt],
                                  stderr=self.err, stdout=subprocess.DEVNULL)
        for _ in range(6000):      # while ptfs lives: a loaded machine is slow
            if self.mounted():
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("ptfs did not mount %s: %s" % (ck, self.log()[:2]))

    def mounted(self):
        with open("/proc/mounts") as f:
            return any(l.split()[1] == self.mnt for l in f)

    def p_(self, rel):
        return os.path.join(self.mnt, rel)

    def log(self):
        """What the daemon printed so far, one line each."""
        self.err.flush()
        with open(self.err.name) as f:
            return f.read().splitlines()

    def kill(self):
        """kill -9 of the daemon, then the dead mount unmounted lazily."""
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(timeout=60)
        subprocess.call(["fusermount3", "-uz", self.mnt])

    def release(self):
        """fusermount3 -u (a read-only mount), and wait for the daemon."""
        subprocess.call(["fusermount3", "-u", self.mnt])
        self.p.wait(timeout=60)

    def umount(self):
        """ptfs umount: write back and report.  (ok, why): ok when it and
        the daemon exited 0 and the daemon printed nothing but its
        one-line reasons ("ptfs: ...")."""
        r = subprocess.run([self.ptfs, "umount", self.mnt],
                           capture_output=True, text=True, timeout=300)
        try:
            self.p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        other = [l for l in self.log() if not l.startswith("ptfs: ")]
        ok = r.returncode == 0 and self.p.returncode == 0 and not other
        return ok, "umount %d %s; daemon %s; stderr %s" % (
            r.returncode, r.stderr.strip()[:200], self.p.returncode,
            other[:3])
