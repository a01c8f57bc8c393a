# ptfs_hook.py - run a python test file with every torch.save round-tripped
# through ptfs (scripts/torch-serialization.sh).
#
#   usage: python3 ptfs_hook.py MODE BINDIR LOG TEST.py [TEST ARGS...]
#
# MODE is "none" (the baseline: no hook), "repack" (ptrepack IN OUT),
# "repickle" (ptrepack --repickle IN OUT) or "mount" (ptfs -f; the last
# str key of the first dict or object that has one renamed away and back,
# which keeps the object and its order but makes the tree differ from
# data.pkl; then ptfs umount: a new data.pkl).  After each torch.save returns, the bytes it wrote (to
# a path or a file object) are replaced by ptfs's output, so the test's
# own torch.load reads what ptfs wrote.  One line per save goes to LOG:
# "MODE<TAB>identical|rewritten|refused<TAB>reason".
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

MODE, BINDIR, LOG = sys.argv[1:4]
TEST = sys.argv[4]
sys.argv = [TEST] + sys.argv[5:]
sys.path.insert(0, os.path.dirname(os.path.abspath(TEST)))
SCRATCH = tempfile.mkdtemp(prefix='ptfs-hook.',
                           dir=os.environ.get('PTFS_HOOK_TMP') or None)


def log(kind, why=''):
    with open(LOG, 'a') as f:
        f.write('%s\t%s\t%s\n' % (MODE, kind, why.replace('\n', ' ')))


def reason(err, path):
    """The error line without the paths and offsets that differ per save."""
    line = err.strip().splitlines()[-1] if err.strip() else 'no message'
    for p in (path, os.path.dirname(path)):
        # (from the torch 2.x chroot the host names it with the root's
        # path in front: that goes too)
        line = re.sub(r'\S*' + re.escape(p), 'FILE', line)
    parts = line.split(': ')
    parts = [p for p in parts if not p.startswith('offset 0x') and
             p not in ('ptrepack', 'ptfs', 'FILE')]
    return ': '.join(parts)[:160]


def run(cmd, timeout=120):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout)


def mounted(m):
    with open('/proc/mounts') as f:
        return any(line.split()[1] == m for line in f)


def plain_str(name):
    """A name that can only be a str key (ints print as digits, floats as
    their repr, True/False/None as such, other keys escaped with %)."""
    if '%' in name or name in ('True', 'False', 'None'):
        return False
    try:
        float(name)
        return False
    except ValueError:
        return True


def last_str_key(m):
    """The first directory (breadth first) whose last entry has a str key,
    and that entry's name; (None, None) if there is none."""
    try:
        os.getxattr(m, 'user.type')
    except OSError:
        # no type: the checkpoint is one tensor, value or object, shown
        # as the root's only entry, which has no key to move
        return None, None
    todo = [m]
    while todo:
        d = todo.pop(0)
        try:
            names = os.listdir(d)
        except OSError:
            continue
        if names and plain_str(names[-1]):
            return d, names[-1]
        todo += [os.path.join(d, n) for n in names
                 if os.path.isdir(os.path.join(d, n)) and
                 not os.path.islink(os.path.join(d, n))]
    return None, None


NO_EDIT = 'mounted and read, no str key to move: nothing written back'


def via_mount(src, dst):
    """Copy @src to @dst, mount it, edit, ptfs umount: (status, error)."""
    m = os.path.join(SCRATCH, 'm')
    os.makedirs(m, exist_ok=True)
    shutil.copyfile(src, dst)
    with open(os.path.join(SCRATCH, 'ptfs.err'), 'w+') as err:
        return mount_edit(m, dst, err)


def mount_edit(m, dst, err):
    """via_mount()'s work, the daemon's stderr in @err."""
    p = subprocess.Popen([os.path.join(BINDIR, 'ptfs'), '-f', dst, m],
                         stdout=subprocess.DEVNULL, stderr=err)
    for _ in range(1000):
        if mounted(m) or p.poll() is not None:
            break
        time.sleep(0.01)
    if not mounted(m):
        p.wait()
        err.seek(0)
        return 1, err.read()
    try:
        d, n = last_str_key(m)
        if d is None:
            # nothing to rename (a bare tensor, a list): the mount is
            # still read through, and unmounted with nothing to write
            for top, _, files in os.walk(m):
                for name in files:
                    with open(os.path.join(top, name), 'rb') as f:
                        f.read()
            r = run([os.path.join(BINDIR, 'ptfs'), 'umount', m])
            p.wait()
            return r.returncode, r.stderr or NO_EDIT
        # the last key away and back: the same object in the same order,
        # but the directory no longer matches data.pkl
        os.rename(os.path.join(d, n), os.path.join(d, '__ptfs_tmp'))
        os.rename(os.path.join(d, '__ptfs_tmp'), os.path.join(d, n))
    except OSError as e:
        subprocess.run(['fusermount3', '-u', m])
        p.wait()
        return 1, 'edit refused: %s' % e.strerror
    r = run([os.path.join(BINDIR, 'ptfs'), 'umount', m], timeout=600)
    if mounted(m):
        subprocess.run(['fusermount3', '-u', m])
    p.wait()
    return r.returncode, r.stderr


def via_host(src, dst):
    """Inside the torch 2.x chroot, where no FUSE is: ask the driver on
    the host (PTFS_HOOK_FIFO: a request and a reply fifo) to do it."""
    req = os.environ['PTFS_HOOK_FIFO']
    with open(req + '.req', 'w') as f:
        f.write('%s\t%s\t%s\n' % (MODE, src, dst))
    with open(req + '.rep') as f:
        rc, _, err = f.read().partition('\t')
    return int(rc), err.strip()


def roundtrip(data):
    """ptfs's version of the bytes @data, or None (refused, logged)."""
    src = os.path.join(SCRATCH, 'in.pt')
    dst = os.path.join(SCRATCH, 'out.pt')
    with open(src, 'wb') as f:
        f.write(data)
    if os.path.exists(dst):
        os.unlink(dst)
    if os.environ.get('PTFS_HOOK_FIFO'):
        rc, err = via_host(src, dst)
    elif MODE == 'mount':
        rc, err = via_mount(src, dst)
    else:
        r = run([os.path.join(BINDIR, 'ptrepack')] +
                (['--repickle'] if MODE == 'repickle' else []) + [src, dst])
        rc, err = r.returncode, r.stderr
    if rc:
        log('refused', reason(err, dst if MODE == 'mount' else src))
        keep = os.environ.get('PTFS_HOOK_KEEP')
        if keep:
            # the refused input, for a look (torch-serialization.sh
            # points this at its scratch directory)
            os.makedirs(keep, exist_ok=True)
            shutil.copyfile(src, os.path.join(
                keep, '%s-%d-%d.pt' % (MODE, os.getpid(), time.time_ns())))
        return None
    with open(dst, 'rb') as f:
        out = f.read()
    log('identical' if out == data else 'rewritten',
        NO_EDIT if MODE == 'mount' and err == NO_EDIT else '')
    return out


def hook():
    import torch
    import torch.serialization as ser
    orig = ser.save

    def save(obj, f, *args, **kwargs):
        if isinstance(f, (str, bytes, os.PathLike)):
            r = orig(obj, f, *args, **kwargs)
            with open(f, 'rb') as h:
                out = roundtrip(h.read())
            if out is not None:
                with open(f, 'wb') as h:
                    h.write(out)
            return r
        start = f.tell() if hasattr(f, 'tell') else None
        r = orig(obj, f, *args, **kwargs)
        if start is None or not hasattr(f, 'seek'):
            log('refused', 'a stream without seek: left as is')
            return r
        if hasattr(f, 'flush'):
            f.flush()
        end = f.tell()
        try:
            f.seek(start)
            data = f.read(end - start)
        except (OSError, io.UnsupportedOperation):
            f.seek(end)
            log('refused', 'a stream that cannot be read back: left as is')
            return r
        out = roundtrip(data)
        if (out is not None and len(out) < len(data) and
                not hasattr(f, 'truncate')):
            # torch's file-like contract is read/write/seek/tell: a
            # shorter archive cannot replace this one without truncate
            log('refused', 'a shorter result for a stream without '
                'truncate: left as is')
            out = None
        f.seek(start)
        if out is not None:
            f.write(out)
            if hasattr(f, 'truncate'):
                f.truncate()
        else:
            f.seek(end)
        return r
    ser.save = save
    torch.save = save


if MODE == 'mount-one':
    # the host half for the torch 2.x chroot: ptfs_hook.py mount-one
    # BINDIR IN OUT (torch-serialization.sh's serve())
    rc, err = via_mount(LOG, TEST)  # LOG is IN here
    shutil.rmtree(SCRATCH, ignore_errors=True)
    sys.stderr.write(err)
    sys.exit(1 if rc else 0)
if MODE != 'none':
    hook()
import runpy  # noqa: E402
try:
    runpy.run_path(TEST, run_name='__main__')
finally:
    shutil.rmtree(SCRATCH, ignore_errors=True)
