"""hf_check.py - Hugging Face sharded folders for tests/fs/formats/hf_shards.sh, and
the checks of what the tools and a ptfs mount show of them (torch 1.13 or
2.x; st_check.py beside it for the safetensors writer under 1.13).

  gen DIR        write into DIR the folders below, each sharded the way
                 huggingface_hub's split_state_dict_into_shards_factory
                 does (keys in order, a new shard when the next tensor
                 would pass the limit, tensors sharing a storage put in
                 the shard of the first, total_size by unique storage) and
                 indexed as transformers writes it (json.dumps(indent=2,
                 sort_keys=True) + "\n"):
      bin/       torch.save shards (zip) of a state dict with tied weights,
                 a view, a transposed view, several dtypes, a 0-d and an
                 empty tensor; config.json, tokenizer.json, README.md,
                 .gitattributes and a subfolder beside them
      mixed/     the same as the fp16 variant (pytorch_model.bin.index.
                 fp16.json): shard 1 a legacy (torch < 1.6) file, shard 2
                 a zip whose records are deflated, the rest plain zips
      st/        safetensors shards (safetensors.torch.save_file under
                 torch 2.x, st_check.write under 1.13), the tied weight
                 kept once as transformers does
      bin.pt st.pt  the state dicts of bin/ and st/ in one torch.save file
      absent/ twice/ mismatch/ total/ notjson/ escape/ abs/ endian/ twoidx/
                 broken ones: a shard listed but absent, a key in two
                 shards, an index key missing from its shard plus a shard
                 key missing from the index, a wrong total_size, an index
                 that is not JSON, shards named "../outside.bin" (which
                 exists) and "/etc/passwd", shards of two byte orders, two
                 indexes
  check DIR NAME MNT LSJSON
                 folder DIR/NAME against torch's index-driven union (each
                 shard the index names loaded by torch.load, safetensors'
                 load_file or st_check.read; a key two shards hold taken
                 from the one the index names), the mount MNT (names,
                 every tensor's bytes, user.dtype/shape/shard, tied
                 storages, .ptfs/files/) and ptls --json (LSJSON: shard,
                 dtype, shape); then a directory, an attribute change and
                 a write of .ptfs/files/ through MNT must fail with EPERM
                 (hf_write.sh edits the folders)
  one DIR NAME FILE
                 FILE, what `ptrepack DIR/NAME FILE` wrote (one .pt),
                 against the same union: torch.load of it holds every key,
                 each tensor with its dtype, shape, stride, storage offset
                 and bytes, and the tensors that share a storage in the
                 folder share one in FILE (tied weights, views)
  sums DIR       sha256 of every file under DIR, one "sum PATH HASH" a line

Prints "ok<TAB>summary" and exits 0, or the problems and exits 1.
"""
import errno
import glob
import hashlib
import json
import os
import sys
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_check  # noqa: E402  (this folder's safetensors writer/reader)

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
OTHER_FILES = {"config.json": '{"model_type": "llama", "hidden_size": 16}\n',
               "tokenizer.json": '{"version": "1.0", "model": {}}\n',
               "README.md": "# a test model\n",
               ".gitattributes": "*.bin filter=lfs\n"}


def storage_of(t):
    s = t.untyped_storage() if TORCH2 else t.storage()
    return (t.device, s.data_ptr(), s.nbytes() if TORCH2 else
            s.size() * t.element_size())


def state_dict():
    g = torch.Generator().manual_seed(17)
    sd = {}
    emb = torch.randn(40, 16, generator=g)
    sd["model.embed_tokens.weight"] = emb
    for i in range(4):
        p = "model.layers.%d." % i
        sd[p + "self_attn.q_proj.weight"] = torch.randn(16, 16, generator=g)
        sd[p + "self_attn.k_proj.weight"] = torch.randn(
            16, 16, generator=g).to(torch.float16)
        sd[p + "mlp.up_proj.weight"] = torch.randn(
            24, 16, generator=g).to(torch.bfloat16)
        sd[p + "input_layernorm.weight"] = torch.ones(16)
    sd["model.rotary.inv_freq"] = torch.arange(8, dtype=torch.int64)
    sd["model.mask"] = torch.rand(9, generator=g) > 0.5
    sd["model.scale"] = torch.tensor(0.125, dtype=torch.float64)
    sd["model.empty"] = torch.zeros(0, 4)
    base = torch.randn(6, 5, generator=g)
    sd["model.norm.weight"] = base
    sd["model.norm.tail"] = base[2:]            # a view: offset 10
    sd["model.norm.transposed"] = base.t()      # strided
    sd["lm_head.weight"] = emb                   # tied, comes last
    return sd


def split(sd, limit):
    """huggingface_hub's rule (serialization/_base.py): shards of keys in
    order; total_size and sizes by whole storage, counted once."""
    shards, cur, cur_size, total, by_storage = [], {}, 0, 0, {}
    for k, t in sd.items():
        sid = storage_of(t)
        if sid in by_storage:
            by_storage[sid].append(k)
            continue
        by_storage[sid] = [k]
        size = sid[2]
        if size > limit:
            total += size
            shards.append({k: t})
            continue
        if cur_size + size > limit:
            shards.append(cur)
            cur, cur_size = {}, 0
        cur[k] = t
        cur_size += size
        total += size
    if cur:
        shards.append(cur)
    for keys in by_storage.values():
        for sh in shards:
            if keys[0] in sh:
                for k in keys[1:]:
                    sh[k] = sd[k]
                break
    return shards, total


def index_text(weight_map, total):
    return json.dumps({"metadata": {"total_size": total},
                       "weight_map": weight_map}, indent=2,
                      sort_keys=True) + "\n"


def write_folder(d, shards, total, stem, ext, index, save, others=True):
    os.makedirs(d)
    n = len(shards)
    wm = {}
    for i, sh in enumerate(shards):
        name = "%s-%05d-of-%05d.%s" % (stem, i + 1, n, ext)
        save(sh, os.path.join(d, name), i)
        for k in sh:
            wm[k] = name
    with open(os.path.join(d, index), "w") as f:
        f.write(index_text(wm, total))
    if others:
        for k, v in OTHER_FILES.items():
            with open(os.path.join(d, k), "w") as f:
                f.write(v)
        os.makedirs(os.path.join(d, "original"))
        with open(os.path.join(d, "original", "params.json"), "w") as f:
            f.write("{}\n")
    return wm


def big_endian(path):
    """Give a torch zip a byteorder record "big" (torch 1.13 writes none;
    the bytes stay as they are)."""
    tmp = path + ".tmp"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        infos = src.infolist()
        for info in infos:
            if not info.filename.endswith("/byteorder"):
                dst.writestr(info, src.read(info.filename))
        dst.writestr(infos[0].filename.split("/")[0] + "/byteorder", b"big")
    os.replace(tmp, path)


def deflate(path):
    """Rewrite a torch zip with every record deflated (zip -9 does that)."""
    tmp = path + ".tmp"
    with zipfile.ZipFile(path) as src, \
            zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    os.replace(tmp, path)


def save_bin(sh, path, i):
    torch.save(sh, path)


def save_mixed(sh, path, i):
    if i == 0:
        torch.save(sh, path, _use_new_zipfile_serialization=False)
    else:
        torch.save(sh, path)
        if i == 1:
            deflate(path)


def save_st(sh, path, i):
    sh = {k: v.contiguous() for k, v in sh.items()}
    if TORCH2:
        from safetensors.torch import save_file
        save_file(sh, path, metadata={"format": "pt"})
    else:
        st_check.write(path, sh, {"format": "pt"})


def gen(d):
    sd = state_dict()
    shards, total = split(sd, 3000)
    assert len(shards) >= 4, len(shards)
    write_folder(os.path.join(d, "bin"), shards, total, "pytorch_model",
                 "bin", "pytorch_model.bin.index.json", save_bin)
    write_folder(os.path.join(d, "mixed"), shards, total,
                 "pytorch_model.fp16", "bin",
                 "pytorch_model.bin.index.fp16.json", save_mixed,
                 others=False)
    # safetensors: one name per storage, no views (save_file's rules)
    st_sd = {k: v for k, v in sd.items()
             if k not in ("lm_head.weight", "model.norm.tail",
                          "model.norm.transposed")}
    st_shards, st_total = split(st_sd, 3000)
    write_folder(os.path.join(d, "st"), st_shards, st_total, "model",
                 "safetensors", "model.safetensors.index.json", save_st)
    # each state dict whole, for ptdiff against the folder
    torch.save(sd, os.path.join(d, "bin.pt"))
    torch.save(st_sd, os.path.join(d, "st.pt"))
    idx = "pytorch_model.bin.index.json"
    small, stotal = split({k: sd[k] for k in list(sd)[:6]}, 1500)
    assert len(small) >= 2, len(small)
    # a shard listed but absent
    a = os.path.join(d, "absent")
    wm = write_folder(a, small, stotal, "pytorch_model", "bin", idx,
                      save_bin, others=False)
    os.unlink(os.path.join(a, sorted(set(wm.values()))[1]))
    # a key in two shards: shard 1 holds shard 2's first key too
    t = os.path.join(d, "twice")
    wm = write_folder(t, small, stotal, "pytorch_model", "bin", idx,
                      save_bin, others=False)
    names = sorted(set(wm.values()))
    k2 = list(small[1])[0]
    s1 = dict(small[0])
    s1[k2] = torch.full(small[1][k2].shape, 7.0, dtype=small[1][k2].dtype)
    torch.save(s1, os.path.join(t, names[0]))
    # an index key no shard holds, a shard key the index lacks
    m = os.path.join(d, "mismatch")
    wm = write_folder(m, small, stotal, "pytorch_model", "bin", idx,
                      save_bin, others=False)
    names = sorted(set(wm.values()))
    wm["ghost.weight"] = names[0]
    s2 = dict(small[1])
    s2["stray.bias"] = torch.arange(3, dtype=torch.float32)
    torch.save(s2, os.path.join(m, names[1]))
    with open(os.path.join(m, idx), "w") as f:
        f.write(index_text(wm, stotal))
    # total_size off by 4
    t = os.path.join(d, "total")
    wm = write_folder(t, small, stotal, "pytorch_model", "bin", idx,
                      save_bin, others=False)
    with open(os.path.join(t, idx), "w") as f:
        f.write(index_text(wm, stotal + 4))
    # not JSON
    n = os.path.join(d, "notjson")
    write_folder(n, small, stotal, "pytorch_model", "bin", idx, save_bin,
                 others=False)
    with open(os.path.join(n, idx), "w") as f:
        f.write('{"metadata": {"total_size": 12}, "weight_map": {"a": ')
    # shards outside the folder: one that exists, one that is no shard
    torch.save(small[0], os.path.join(d, "outside.bin"))
    for name, where in (("escape", "../outside.bin"),
                        ("abs", "/etc/passwd")):
        e = os.path.join(d, name)
        wm = write_folder(e, small, stotal, "pytorch_model", "bin", idx,
                          save_bin, others=False)
        wm[list(wm)[0]] = where
        with open(os.path.join(e, idx), "w") as f:
            f.write(index_text(wm, stotal))
    # shards of two byte orders
    t = os.path.join(d, "endian")
    wm = write_folder(t, small, stotal, "pytorch_model", "bin", idx,
                      save_bin, others=False)
    big_endian(os.path.join(t, sorted(set(wm.values()))[1]))
    # two indexes
    t = os.path.join(d, "twoidx")
    write_folder(t, small, stotal, "pytorch_model", "bin", idx, save_bin,
                 others=False)
    with open(os.path.join(t, idx), "rb") as f:
        text = f.read()
    with open(os.path.join(t, "model.safetensors.index.json"), "wb") as f:
        f.write(text)
    print("ok\t%d .bin shards, %d safetensors shards, %d keys, torch %s" %
          (len(shards), len(st_shards), len(sd), torch.__version__))


# ---------------------------------------------------------------- check

def load_shard(path):
    if path.endswith(".safetensors"):
        if TORCH2:
            from safetensors.torch import load_file
            return load_file(path)
        _, named, _ = st_check.read(path)
        return {k: st_check.as_tensor(dt, shape, b)
                for k, (dt, shape, b) in named.items()}
    return torch.load(path, map_location="cpu")


def union(folder):
    """transformers' shard files (sorted(set(weight_map.values()))) loaded
    one by one; a key two shards hold comes from the one the index names."""
    idx = [p for p in glob.glob(os.path.join(folder, "*.index*.json"))]
    assert len(idx) == 1, idx
    with open(idx[0]) as f:
        wm = json.load(f)["weight_map"]
    out = {}
    for shard in sorted(set(wm.values())):
        for k, t in load_shard(os.path.join(folder, shard)).items():
            if k in out and wm.get(k) != shard:
                continue
            out[k] = (t, shard)
    return out, os.path.basename(idx[0])


def raw(t):
    return st_check.raw(t)


def xattr(p, name):
    try:
        return os.getxattr(p, name).decode()
    except OSError as e:
        return "<%s>" % errno.errorcode.get(e.errno, e.errno)


def dims(v):
    return ",".join(str(x) for x in v)


def expect_errno(bad, what, fn, want):
    try:
        fn()
    except OSError as e:
        if e.errno != want:
            bad.append("%s: %s, not %s" % (what, os.strerror(e.errno),
                                           errno.errorcode[want]))
        return
    bad.append("%s: succeeded" % what)


def check(d, name, mnt, lsjson):
    folder = os.path.join(d, name)
    want, index = union(folder)
    bad = []
    names = sorted(os.listdir(mnt))
    if names != sorted(want):
        bad.append("names differ: mount only %s, torch only %s" % (
            sorted(set(names) - set(want))[:5],
            sorted(set(want) - set(names))[:5]))
    with open(lsjson) as f:
        ls = {e["path"]: e for e in json.load(f)["entries"]}
    nbytes = 0
    for k, (t, shard) in want.items():
        p = os.path.join(mnt, k)
        if not os.path.exists(p):
            continue
        with open(p, "rb") as f:
            got = f.read()
        nbytes += len(got)
        if got != raw(t):
            bad.append("%s: bytes differ (%d vs %d)" % (k, len(got),
                                                        len(raw(t))))
        for attr, val in (("user.dtype", str(t.dtype)[6:]),
                          ("user.shape", dims(t.shape)),
                          ("user.shard", shard)):
            if xattr(p, attr) != val:
                bad.append("%s: %s is %r, torch/index say %r" % (
                    k, attr, xattr(p, attr), val))
        e = ls.get(k)
        if not e or e.get("shard") != shard or \
                e.get("dtype") != str(t.dtype)[6:] or \
                e.get("shape") != list(t.shape):
            bad.append("%s: ptls --json says %s" % (k, e and {
                x: e.get(x) for x in ("shard", "dtype", "shape")}))
    # tied weights: one storage, shown as one file under .ptfs/storages
    if "lm_head.weight" in want:
        a = xattr(os.path.join(mnt, "lm_head.weight"), "user.storage")
        b = xattr(os.path.join(mnt, "model.embed_tokens.weight"),
                  "user.storage")
        if a != b or a.startswith("<"):
            bad.append("tied weights: storages %r and %r" % (a, b))
        else:
            with open(os.path.join(mnt, ".ptfs", "storages", a), "rb") as f:
                if f.read() != raw(want["lm_head.weight"][0]):
                    bad.append("tied weights: storage %s's bytes" % a)
    # the folder's other files, read-only under .ptfs/files
    shards = set(s for _, s in want.values())
    with open(os.path.join(folder, index)) as f:
        shards |= set(json.load(f)["weight_map"].values())
    others = sorted(f for f in os.listdir(folder)
                    if os.path.isfile(os.path.join(folder, f)) and
                    f not in shards)
    fdir = os.path.join(mnt, ".ptfs", "files")
    shown = sorted(os.listdir(fdir))
    if shown != others:
        bad.append(".ptfs/files lists %s, the folder has %s" % (shown,
                                                               others))
    for f in others:
        with open(os.path.join(fdir, f), "rb") as a, \
                open(os.path.join(folder, f), "rb") as b:
            if a.read() != b.read():
                bad.append(".ptfs/files/%s: bytes differ" % f)
    # edits of anything but tensor bytes, and of the other files
    k0 = sorted(want)[0]
    p0 = os.path.join(mnt, k0)
    for what, fn in (
            ("mkdir", lambda: os.mkdir(os.path.join(mnt, "d"))),
            ("setxattr", lambda: os.setxattr(p0, "user.dtype", b"int8"))):
        expect_errno(bad, what, fn, errno.EPERM)
    if others:
        expect_errno(bad, ".ptfs/files write", lambda: open(
            os.path.join(fdir, others[0]), "r+b"), errno.EPERM)
    if bad:
        print("\n".join(bad[:40]))
        return 1
    print("ok\t%d keys from %d shards (%d bytes) equal to torch's union, "
          "%d other files, other edits EPERM" % (len(want), len(shards),
                                            nbytes, len(others)))
    return 0


def sums(d):
    for root, dirs, files in sorted(os.walk(d)):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                print("sum", os.path.relpath(p, d),
                      hashlib.sha256(fh.read()).hexdigest())
    return 0


def storage_groups(tensors):
    """Keys grouped by the storage they share (groups of two or more)."""
    by = {}
    for k, t in tensors.items():
        dev, ptr, nbytes = storage_of(t)
        if nbytes:      # an empty one's address means nothing
            by.setdefault(ptr, []).append(k)
    return sorted(sorted(v) for v in by.values() if len(v) > 1)


def one(d, name, path):
    want, _ = union(os.path.join(d, name))
    got = torch.load(path, map_location="cpu")
    bad = []
    if sorted(got) != sorted(want):
        bad.append("keys differ: %s" % sorted(set(got) ^ set(want))[:5])
    for k, (t, _) in want.items():
        g = got.get(k)
        if g is None:
            continue
        if (g.dtype, tuple(g.shape), g.stride()) != \
                (t.dtype, tuple(t.shape), t.stride()):
            bad.append("%s: %s %s %s, torch: %s %s %s" % (
                k, g.dtype, tuple(g.shape), g.stride(), t.dtype,
                tuple(t.shape), t.stride()))
        elif raw(g) != raw(t):
            bad.append("%s: other bytes" % k)
    # a safetensors shard holds no views: there, every tensor is its own
    tied = storage_groups({k: t for k, (t, _) in want.items()})
    if storage_groups(got) != tied:
        bad.append("shared storages %s, the folder's %s" % (
            storage_groups(got), tied))
    for b in bad:
        print("%s: %s" % (name, b), file=sys.stderr)
    if bad:
        return 1
    print("ok\t%d tensors, %d shared storage groups, as torch loads the "
          "folder" % (len(got), len(tied)))
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "gen":
        gen(argv[2])
        return 0
    if len(argv) == 6 and argv[1] == "check":
        return check(*argv[2:])
    if len(argv) == 5 and argv[1] == "one":
        return one(*argv[2:])
    if len(argv) == 3 and argv[1] == "sums":
        return sums(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
