"""doors_check.py - the python side of tests/fs/safety/doors.sh: makes the
folders and DCP directories that test the multi-file formats' member
files (issue 38), and checks with torch what a mount and a write-back
left.  One command per run (under lib/tserve.py, many in one process):

  save PATH KEY...        torch.save {KEY: tensor(KEY)} to PATH (the
                          torch under test)
  index PATH KEY=FILE...  an HF index (weight_map) at PATH (plain python)
  raw OUT KEY [SEED]      tensor(KEY, SEED)'s bytes into OUT
  mountcmp MNT SHARD...   every tensor of each torch.save SHARD equals
                          the bytes of MNT/KEY
  folder DIR EDIT HEX     the HF folder DIR as torch sees it after a
                          write-back: every file its index names exists
                          and loads, holds the keys the index gives it;
                          EDIT's bytes start with HEX, every other key
                          is tensor(KEY) (EDIT "-": no edit)
  dcpsave DIR SEED        dcp.save {"model": {"w", "v"}, "step": 7+SEED}
                          into DIR (torch 2.x)

tensor(KEY, SEED) is 4x3 float32, exact in binary, different for every
key and seed.  A failed check prints "error: ..." lines and exits 1.
"""
import glob
import json
import os
import sys


def tensor(key, seed=0):
    import torch
    base = sum(ord(ch) for ch in key) % 97
    return (torch.arange(12, dtype=torch.float32).reshape(4, 3) +
            base * 16 + seed * 1024) / 4


def tbytes(t):
    return t.contiguous().numpy().tobytes()


def load(path):
    import torch
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:
        return torch.load(path, map_location="cpu")


def save(path, keys):
    import torch
    torch.save({k: tensor(k) for k in keys}, path)


def index(path, pairs):
    wm = dict(p.split("=", 1) for p in pairs)
    with open(path, "w") as f:	# every tensor(KEY) is 48 bytes
        json.dump({"metadata": {"total_size": 48 * len(wm)},
                   "weight_map": wm}, f)


def raw(out, key, seed=0):
    with open(out, "wb") as f:
        f.write(tbytes(tensor(key, int(seed))))


def mountcmp(mnt, shards):
    bad, n = [], 0
    for s in shards:
        for k, t in load(s).items():
            try:
                with open(os.path.join(mnt, k), "rb") as f:
                    got = f.read()
            except OSError as e:
                bad.append("%s: %s" % (k, e))
                continue
            n += 1
            if got != tbytes(t):
                bad.append("%s: the mount's %d bytes differ from %s's" %
                           (k, len(got), os.path.basename(s)))
    return bad, "%d tensors as torch loads them" % n


def folder(d, edit, hexs):
    bad = []
    ix = glob.glob(os.path.join(d, "*.index.json"))
    if len(ix) != 1:
        return ["%d index files in %s" % (len(ix), d)], ""
    with open(ix[0]) as f:
        wm = json.load(f)["weight_map"]
    loaded = {}
    for k, name in sorted(wm.items()):
        p = os.path.join(d, name)
        if name not in loaded:
            if not os.path.exists(p):
                bad.append("the index names %s, which %s" % (name,
                           "dangles" if os.path.islink(p) else "is gone"))
                loaded[name] = None
                continue
            try:
                loaded[name] = load(p)
            except Exception as e:	# torch's own error: report it
                bad.append("torch cannot load %s: %s" % (name, e))
                loaded[name] = None
                continue
        sd = loaded[name]
        if sd is None:
            continue
        if k not in sd:
            bad.append("%s has no %s" % (name, k))
            continue
        got = tbytes(sd[k])
        if k == edit:
            if not got.startswith(bytes.fromhex(hexs)):
                bad.append("%s in %s lacks the edit" % (k, name))
        elif got != tbytes(tensor(k)):
            bad.append("%s in %s changed" % (k, name))
    return bad, "%d keys in %d files load as expected" % (len(wm),
                                                           len(loaded))


def dcpsave(d, seed):
    import torch.distributed.checkpoint as dcp
    seed = int(seed)
    sd = {"model": {"w": tensor("w", seed), "v": tensor("v", seed)},
          "step": 7 + seed}
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(d))


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "save":
        save(args[0], args[1:])
    elif cmd == "index":
        index(args[0], args[1:])
    elif cmd == "raw":
        raw(*args)
    elif cmd == "dcpsave":
        dcpsave(*args)
    else:
        bad, what = (mountcmp(args[0], args[1:]) if cmd == "mountcmp"
                     else folder(*args))
        for b in bad:
            print("error: " + b)
        if bad:
            return 1
        print(what)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
