"""reflink_check.py - the python side of tests/fs/safety/reflink.sh, one command
per run:

  make PATH             torch.save a checkpoint of 12 float32 tensors w0..w11
                        (256 KiB to 3 MiB each, seeded), epoch and a dict
                        (run by the torch under test)
  deflate IN OUT        IN with every record ZIP_DEFLATED (as zip -9 or a
                        hub's tooling leave it); plain python
  check PATH KEY OFF HEX [GONE NEW]
                        torch.load PATH (weights_only from torch 2 on): tensor KEY's bytes at OFF are HEX, every other
                        tensor is what make saved, and with GONE and NEW,
                        key GONE is gone and NEW holds what GONE held
  shared FILE           the percentage of FILE's blocks in extents that
                        filefrag -v flags shared (plain python)

Prints "error: ..." and exits 1 when a check fails.
"""
import re
import subprocess
import sys
import zipfile


def saved():
    import torch
    g = torch.Generator().manual_seed(18)
    sd = {}
    for i in range(12):
        n = (64 << 10) * (1 + (i * 5) % 12)     # 256 KiB .. 3 MiB
        sd["w%d" % i] = torch.randn(n, generator=g)
    sd["epoch"] = 18
    sd["tag"] = b"ab\xffc"    # bytes: _codecs.encode(str, 'latin1')
    sd["opt"] = {"lr": 0.1, "step": torch.tensor(7)}
    return sd


def load(path):
    import torch
    if int(torch.__version__.split(".")[0]) < 2:
        # 1.13's weights_only loader knows no floats (BINFLOAT)
        return torch.load(path, map_location="cpu")
    return torch.load(path, map_location="cpu", weights_only=True)


def raw(t):
    return t.contiguous().view(-1).numpy().tobytes()


def check(path, key, off, hexbytes, gone=None, new=None):
    want = saved()
    got = load(path)
    b = bytes.fromhex(hexbytes)
    if gone:
        if gone in got or new not in got:
            sys.exit("error: %s: keys %s" % (path, sorted(got)))
        want[new] = want.pop(gone)
    w = bytearray(raw(want[key]))
    w[off:off + len(b)] = b
    for k, v in want.items():
        if k not in got:
            sys.exit("error: %s: no key %s" % (path, k))
        if k == key:
            ok = raw(got[k]) == bytes(w)
        elif hasattr(v, "numpy"):
            ok = raw(got[k]) == raw(v)
        else:
            ok = k in ("epoch", "opt") or got[k] == v
        if not ok:
            sys.exit("error: %s: %s differs" % (path, k))
    if got["epoch"] != 18 or int(got["opt"]["step"]) != 7:
        sys.exit("error: %s: values differ" % path)
    print("ok")


def shared(path):
    out = subprocess.run(["filefrag", "-v", path], capture_output=True,
                         text=True, check=True).stdout
    tot = sh = 0
    for line in out.splitlines():
        m = re.match(r"\s*\d+:\s*\d+\.\.\s*\d+:\s*\d+\.\.\s*\d+:\s*(\d+):",
                     line)
        if m:
            n = int(m.group(1))
            tot += n
            sh += n if "shared" in line else 0
    print(100 * sh // tot if tot else 0)


def main():
    cmd = sys.argv[1]
    if cmd == "make":
        import torch
        torch.save(saved(), sys.argv[2])
    elif cmd == "deflate":
        with zipfile.ZipFile(sys.argv[2]) as zi, \
                zipfile.ZipFile(sys.argv[3], "w", zipfile.ZIP_DEFLATED) as zo:
            for i in zi.infolist():
                zo.writestr(i.filename, zi.read(i.filename))
    elif cmd == "check":
        check(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5],
              *sys.argv[6:8])
    elif cmd == "shared":
        shared(sys.argv[2])
    else:
        sys.exit("usage: see the docstring")


if __name__ == "__main__":
    main()
