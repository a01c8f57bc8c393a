"""names_check.py MOUNT WANT.json - every key of a checkpoint with keys
over NAME_MAX and PATH_MAX (surprise_gen.py names) is listed under a name
the kernel takes, found again from that name (or its user.key attribute)
by docs/names.md's rules, and reads exactly torch's bytes.  One line per
problem; exit 1 when there is any."""
import json
import os
import sys


def unescape(name):
    """docs/names.md: "%" alone is the empty key, %XX a byte."""
    if name == "%":
        return b""
    out, i, b = bytearray(), 0, name.encode("utf-8", "surrogateescape")
    while i < len(b):
        if b[i:i + 1] == b"%":
            out.append(int(b[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(b[i])
            i += 1
    return bytes(out)


def check_dir(path, want, bad):
    try:
        names = os.listdir(path)
    except OSError as e:
        bad.append("%s: listing fails: %s" % (path, e))
        return
    left = {k.encode(): h for k, h in want}
    for n in names:
        if len(os.fsencode(n)) > 255:
            bad.append("%s: a name of %d bytes" % (path, len(n)))
        p = os.path.join(path, n)
        if n[-4:] in (".npy", ".txt") and n[:-4] in names:
            continue            # views (-o views)
        if os.path.isdir(p) or (n[-4:] in (".npy", ".txt") and
                                n[:-4] not in names and "%~" in n):
            continue            # views of cut names (-o views)
        try:
            key = os.getxattr(p, "user.key").decode()
        except OSError:
            key = n
            if "%~" in n:
                bad.append("%s: cut name %s.. without user.key" %
                           (path, n[:30]))
        k = unescape(key)
        if k not in left:
            bad.append("%s: %s.. is no key of the file (or twice)" %
                       (path, n[:30]))
            continue
        data = open(p, "rb").read()
        if data.hex() != left.pop(k):
            bad.append("%s: %s.. reads other bytes than torch" %
                       (path, n[:30]))
    for k in left:
        bad.append("%s: key %r.. (%d bytes) not found" %
                   (path, k[:20], len(k)))


bad = []
mnt, want = sys.argv[1], json.load(open(sys.argv[2]))
check_dir(mnt, want["keys"], bad)
check_dir(os.path.join(mnt, "nested"), want["nested"], bad)
for b in bad[:20]:
    print(b)
sys.exit(1 if bad else 0)
