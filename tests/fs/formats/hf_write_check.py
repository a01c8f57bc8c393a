"""hf_write_check.py - edits of a Hugging Face sharded folder through a
ptfs mount, and what torch loads of the folder afterwards, for
tests/fs/formats/hf_write.sh (torch 1.13 or 2.x; hf_check.py beside it).

  edit MNT OUT.json [refusals]
        through the mount MNT: 4 bytes at offset 4 of the first tensor of
        the folder's 2nd shard inverted (pwrite), and every byte of the first
        tensor of its 4th shard (a whole rewrite, same size); the sha256
        of every tensor file before and after into OUT.json ("old",
        "new"), with the names edited and their shards.  With
        "refusals": a directory and two attribute changes of a shard's
        tensor must each fail with EPERM and change nothing
  reshape MNT OUT.json
        through the mount MNT: the first tensor of the 3rd shard renamed
        (to *.moved), the last of the 4th removed, a new float32[16] added
        beside the first of the 5th (*.added.weight), 4 bytes of the 1st
        shard's first tensor inverted; a directory and a dtype change of a
        shard's tensor fail with EPERM; OUT.json as for edit, with the
        key added and its nearest sibling
  written DIR OUT.json INDEX0
        the folder DIR as transformers loads it (the index's shards, one
        by one) holds exactly OUT.json's "new" bytes; its index is INDEX0
        (the index before, saved as a file) with only shard names changed,
        each by a ".gN" before its extension (after a reshape: in its
        JSON style still, transformers' or compact with its key order and
        the new key last, the key added in its nearest sibling's shard,
        total_size counted again), every shard it names is there and no
        other shard file is
  compact DIR
        rewrite DIR's index compact (no blanks), keys in reverse order,
        metadata after weight_map: a style the write-back must keep
  state DIR OUT.json
        prints "old", "new" or "mixed": which of OUT.json's the folder
        holds as the index leads to it (a crash must never leave "mixed")
  shows MNT OUT.json
        the mount shows OUT.json's "new" bytes
  legacy MNT KEY
        a write into KEY (a legacy shard's tensor) fails with EPERM

Prints "ok<TAB>summary" and exits 0, or the problems and exits 1.
"""
import errno
import glob
import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_check  # noqa: E402


def sha(b):
    return hashlib.sha256(b).hexdigest()


def mount_sums(mnt):
    out = {}
    for k in sorted(os.listdir(mnt)):
        with open(os.path.join(mnt, k), "rb") as f:
            out[k] = sha(f.read())
    return out


def by_shard(mnt):
    shards = {}
    for k in sorted(os.listdir(mnt)):
        p = os.path.join(mnt, k)
        if os.path.getsize(p) >= 8:
            sh = os.getxattr(p, "user.shard").decode()
            shards.setdefault(sh, []).append(k)
    return [shards[s] for s in sorted(shards)]


def expect_eperm(bad, what, fn):
    try:
        fn()
    except OSError as e:
        if e.errno != errno.EPERM:
            bad.append("%s: %s, not EPERM" % (what, os.strerror(e.errno)))
        return
    bad.append("%s: succeeded" % what)


def edit(mnt, out, refusals=None):
    old = mount_sums(mnt)
    groups = by_shard(mnt)
    if len(groups) < 4:
        print("fewer than 4 shards with tensors: %d" % len(groups))
        return 1
    a, b = groups[1][0], groups[3][0]
    fd = os.open(os.path.join(mnt, a), os.O_RDWR)
    os.pwrite(fd, bytes(x ^ 0xFF for x in os.pread(fd, 4, 4)), 4)
    os.close(fd)
    with open(os.path.join(mnt, b), "r+b") as f:
        data = f.read()
        f.seek(0)
        f.write(bytes(x ^ 0x5A for x in data))
    bad = []
    if refusals:
        p0 = os.path.join(mnt, a)
        expect_eperm(bad, "mkdir", lambda: os.mkdir(os.path.join(mnt, "d")))
        expect_eperm(bad, "setxattr", lambda: os.setxattr(
            p0, "user.dtype", b"int8"))
        expect_eperm(bad, "a value", lambda: os.setxattr(
            p0, "user.requires_grad", b"true"))
    new = mount_sums(mnt)
    changed = sorted(k for k in new if new[k] != old[k])
    if changed != sorted([a, b]):
        bad.append("changed: %s, wanted %s" % (changed, sorted([a, b])))
    if sorted(new) != sorted(old):
        bad.append("names changed")
    with open(out, "w") as f:
        json.dump({"old": old, "new": new, "edited": [a, b]}, f)
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\tedited %s and %s%s" % (a, b, ", 3 refusals EPERM"
                                      if refusals else ""))
    return 0


def reshape(mnt, out):
    """keys renamed, removed and added through the mount"""
    old = mount_sums(mnt)
    g = by_shard(mnt)
    if len(g) < 5:
        print("fewer than 5 shards with tensors: %d" % len(g))
        return 1
    a, r = g[2][0], g[3][-1]
    moved = a.rsplit(".", 1)[0] + ".moved"
    added = g[4][0].rsplit(".", 2)[0] + ".added.weight"
    fd = os.open(os.path.join(mnt, g[0][0]), os.O_RDWR)
    os.pwrite(fd, bytes(x ^ 0xFF for x in os.pread(fd, 4, 0)), 0)
    os.close(fd)
    os.rename(os.path.join(mnt, a), os.path.join(mnt, moved))
    os.unlink(os.path.join(mnt, r))
    with open(os.path.join(mnt, added), "wb") as f:
        f.write(bytes(range(64)))
    os.setxattr(os.path.join(mnt, added), "user.dtype", b"float32")
    bad = []
    expect_eperm(bad, "mkdir", lambda: os.mkdir(os.path.join(mnt, "d")))
    expect_eperm(bad, "setxattr of a shard's tensor", lambda: os.setxattr(
        os.path.join(mnt, g[1][0]), "user.dtype", b"int8"))
    new = mount_sums(mnt)
    want = dict(old)
    want[moved] = want.pop(a)
    del want[r]
    want[added] = sha(bytes(range(64)))
    # the edited tensor, and what shares its storage (tied weights)
    st0 = os.getxattr(os.path.join(mnt, g[0][0]), "user.storage")
    for k in want:
        if k != added and os.getxattr(os.path.join(mnt, k),
                                      "user.storage") == st0:
            want[k] = new.get(k)
    if new != want or new[g[0][0]] == old[g[0][0]]:
        bad.append("the mount shows %s" % sorted(
            k for k in set(new) | set(want) if new.get(k) != want.get(k)))
    with open(out, "w") as f:
        json.dump({"old": old, "new": new, "edited": [g[0][0], a, r, added],
                   "added": added, "sibling": g[4][0], "renamed": [a, moved],
                   "removed": r}, f)
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\trenamed %s, removed %s, added %s, edited %s; 2 refusals "
          "EPERM" % (a, r, added, g[0][0]))
    return 0


def compact(folder):
    """the index rewritten compact, keys unsorted, metadata last"""
    p = glob.glob(os.path.join(folder, "*.index*.json"))[0]
    with open(p) as f:
        j = json.load(f)
    wm = dict(reversed(list(j["weight_map"].items())))
    with open(p, "w") as f:
        f.write(json.dumps({"weight_map": wm, "metadata": j["metadata"]},
                           separators=(",", ":")))
    print("ok\t%s compact, %d keys in reverse order" % (
        os.path.basename(p), len(wm)))
    return 0


def held(folder):
    want, index = hf_check.union(folder)
    return {k: sha(hf_check.raw(t)) for k, (t, _) in want.items()}, index


def base_names(text):
    return re.sub(r'\.g[1-9][0-9]*(\.[A-Za-z0-9]+")', r'\1', text)


def written(folder, out, index0):
    with open(out) as f:
        o = json.load(f)
    got, index = held(folder)
    bad = ["%s: other bytes" % k for k in sorted(o["new"])
           if got.get(k) != o["new"][k]]
    if sorted(got) != sorted(o["new"]):
        bad.append("keys: %s" % sorted(set(got) ^ set(o["new"]))[:5])
    with open(index0) as f:
        t0 = f.read()
    with open(os.path.join(folder, index)) as f:
        t1 = f.read()
    j1 = json.loads(t1)
    if t0 == t1:
        bad.append("the index did not change")
    elif "added" not in o and base_names(t0) != base_names(t1):
        bad.append("the index changed beyond shard names")
    elif "added" in o:
        wm = j1["weight_map"]
        # keys changed: the index's style still (transformers' own, or
        # compact with keys in its order and new ones last), total_size
        # counted again (each storage once, its first tensor's bytes); a
        # renamed key where its old one was
        j0 = json.loads(t0)
        if t0 == json.dumps(j0, separators=(",", ":")):
            a, moved = o["renamed"]
            keys = [moved if k == a else k for k in j0["weight_map"]
                    if k != o["removed"]] + [o["added"]]
            if t1 != json.dumps(j1, separators=(",", ":")) or \
                    list(wm) != keys:
                bad.append("the compact index lost its style or order")
        elif t1 != json.dumps(j1, indent=2, sort_keys=True) + "\n":
            bad.append("the index is not in transformers' style now")
        if wm.get(o["added"]) != wm.get(o["sibling"]):
            bad.append("%s went to %s, its nearest sibling %s is in %s" % (
                o["added"], wm.get(o["added"]), o["sibling"],
                wm.get(o["sibling"])))
        want, _ = hf_check.union(folder)
        seen, total = set(), 0
        for k in want:
            t = want[k][0]
            key = hf_check.storage_of(t)
            if key in seen and t.numel():
                continue
            seen.add(key)
            total += t.numel() * t.element_size()
        if j1["metadata"]["total_size"] != total:
            bad.append("total_size %s, the shards hold %d" % (
                j1["metadata"]["total_size"], total))
    named = set(json.loads(t1)["weight_map"].values())
    files = set(os.path.basename(p) for p in glob.glob(
        os.path.join(folder, "*")) if re.search(
            r"\.(bin|safetensors)$", p))
    if files != named:
        bad.append("shard files %s, the index names %s" % (
            sorted(files - named), sorted(named - files)))
    if bad:
        print("\n".join(bad[:20]))
        return 1
    renamed = sorted(set(json.loads(t1)["weight_map"].values()) -
                     set(json.loads(t0)["weight_map"].values()))
    print("ok\t%d tensors as torch loads the folder, %d edited; new "
          "shards %s" % (len(got), len(o["edited"]), " ".join(renamed)))
    return 0


def state(folder, out):
    with open(out) as f:
        o = json.load(f)
    got, _ = held(folder)
    print("new" if got == o["new"] else "old" if got == o["old"] else
          "mixed")
    return 0


def shows(mnt, out):
    with open(out) as f:
        o = json.load(f)
    got = mount_sums(mnt)
    if got != o["new"]:
        print("the mount shows other bytes: %s" % sorted(
            k for k in got if got[k] != o["new"].get(k))[:5])
        return 1
    print("ok\t%d tensors with the edits" % len(got))
    return 0


def legacy(mnt, key):
    bad = []

    def poke():
        fd = os.open(os.path.join(mnt, key), os.O_WRONLY)
        try:
            os.pwrite(fd, b"\0", 0)
        finally:
            os.close(fd)
    expect_eperm(bad, "write into %s" % key, poke)
    if bad:
        print(bad[0])
        return 1
    print("ok\twrite into a legacy shard's %s: EPERM" % key)
    return 0


def main(argv):
    cmds = {"edit": (edit, 2, 3), "reshape": (reshape, 2, 2),
            "written": (written, 3, 3),
            "state": (state, 2, 2), "shows": (shows, 2, 2),
            "compact": (compact, 1, 1),
            "legacy": (legacy, 2, 2)}
    if len(argv) >= 2 and argv[1] in cmds:
        fn, lo, hi = cmds[argv[1]]
        if lo <= len(argv) - 2 <= hi:
            return fn(*argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
