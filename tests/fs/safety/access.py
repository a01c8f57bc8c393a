#!/usr/bin/env python3
"""access.py MODE MOUNT - the calls access.sh makes, one line each:
"ok WHAT: ..." or "FAIL WHAT: ...".

  ro MOUNT       every call that writes fails with EROFS (a -o ro mount)
  denied MOUNT   run as another user on a mount without allow_other:
                 even stat of the root fails with EACCES
  other MOUNT    run as another user with allow_other: reading works,
                 every write fails with EACCES (or EPERM) as the modes say
  nox MOUNT      no file anywhere (tree, .ptfs, views) has an x bit
"""
import errno
import os
import stat
import sys

mode, mnt = sys.argv[1], sys.argv[2]
bad = 0


def expect(what, fn, errs):
    global bad
    try:
        fn()
    except OSError as e:
        if e.errno in errs:
            print("ok   %s: %s" % (what, errno.errorcode[e.errno]))
            return
        print("FAIL %s: %s, expected %s" % (what, e, "/".join(
            errno.errorcode[x] for x in errs)))
        bad += 1
        return
    print("FAIL %s: it worked, expected %s" % (what, "/".join(
        errno.errorcode[x] for x in errs)))
    bad += 1


def works(what, fn):
    global bad
    try:
        r = fn()
        print("ok   %s: %s" % (what, r))
    except OSError as e:
        print("FAIL %s: %s" % (what, e))
        bad += 1


def p(*a):
    return os.path.join(mnt, *a)


def open_close(path, flags):
    os.close(os.open(path, flags, 0o644))


def writes(errs):
    """every call that changes something, on tensors, values, views,
    directories and .ptfs"""
    t = p("t0")
    calls = [
        ("open O_WRONLY", lambda: open_close(t, os.O_WRONLY)),
        ("open O_RDWR", lambda: open_close(t, os.O_RDWR)),
        ("open O_TRUNC", lambda: open_close(t, os.O_WRONLY | os.O_TRUNC)),
        ("open O_APPEND", lambda: open_close(t, os.O_WRONLY | os.O_APPEND)),
        ("create", lambda: open_close(p("new"), os.O_WRONLY | os.O_CREAT)),
        ("create O_EXCL", lambda: open_close(p("new2"), os.O_RDWR |
                                             os.O_CREAT | os.O_EXCL)),
        ("open view .npy O_RDWR", lambda: open_close(t + ".npy", os.O_RDWR)),
        ("open view .txt O_WRONLY", lambda: open_close(t + ".txt",
                                                      os.O_WRONLY)),
        ("truncate", lambda: os.truncate(t, 0)),
        ("truncate same size", lambda: os.truncate(t, os.stat(t).st_size)),
        ("unlink", lambda: os.unlink(t)),
        ("mkdir", lambda: os.mkdir(p("d"))),
        ("rmdir", lambda: os.rmdir(p("sub"))),
        ("rename", lambda: os.rename(t, p("t0.moved"))),
        ("rename onto another", lambda: os.rename(p("t1"), t)),
        ("link", lambda: os.link(t, p("hard"))),
        ("symlink", lambda: os.symlink("t0", p("sym"))),
        ("mknod fifo", lambda: os.mkfifo(p("fifo"))),
        ("setxattr user.dtype", lambda: os.setxattr(t, "user.dtype",
                                                    b"int32")),
        ("setxattr user.new", lambda: os.setxattr(t, "user.new", b"1")),
        ("removexattr", lambda: os.removexattr(t, "user.dtype")),
        ("chmod", lambda: os.chmod(t, 0o600)),
        ("chown", lambda: os.chown(t, 1, 1)),
        ("utime", lambda: os.utime(t, (0, 0))),
        ("write .ptfs/commit", lambda: open_close(p(".ptfs", "commit"),
                                                  os.O_WRONLY)),
        ("open .ptfs/storages/0 O_RDWR",
         lambda: open_close(p(".ptfs", "storages", "0"), os.O_RDWR)),
    ]
    for what, fn in calls:
        # a read-only mount has no control file at all
        expect(what, fn, errs | ({errno.ENOENT} if "commit" in what and
                                 errno.EROFS in errs else set()))


if mode == "ro":
    writes({errno.EROFS})
elif mode == "denied":
    for what, fn in (("stat the root", lambda: os.stat(p("t0"))),
                     ("list the root", lambda: os.listdir(mnt)),
                     ("open a tensor", lambda: open_close(p("t0"),
                                                          os.O_RDONLY))):
        expect(what, fn, {errno.EACCES})
elif mode == "other":
    works("list", lambda: "%d names" % len(os.listdir(mnt)))

    def rd():
        with open(p("t0"), "rb") as f:
            return "%d bytes" % len(f.read())
    works("read a tensor (mode 0644)", rd)
    works("getxattr", lambda: os.getxattr(p("t0"), "user.dtype").decode())
    writes({errno.EACCES, errno.EPERM})
elif mode == "nox":
    n = 0
    for root, dirs, files in os.walk(mnt):
        for f in files:
            for q in (os.path.join(root, f), os.path.join(root, f + ".npy"),
                      os.path.join(root, f + ".txt")):
                try:
                    st = os.lstat(q)
                except OSError:
                    continue
                n += 1
                if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
                    print("FAIL no x bits: %s is %o" % (q, st.st_mode))
                    bad += 1
    for root, dirs, files in os.walk(p(".ptfs")):
        for f in files:
            st = os.lstat(os.path.join(root, f))
            n += 1
            if st.st_mode & 0o111:
                print("FAIL no x bits: %s is %o" % (f, st.st_mode))
                bad += 1
    if not bad:
        print("ok   no x bits: %d files (tree, views, .ptfs)" % n)
sys.exit(1 if bad else 0)
