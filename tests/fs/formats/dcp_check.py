"""dcp_check.py - DCP directories for tests/fs/formats/dcp.sh, and the checks of
their mounts.

  gen OUT [MARKER]
                (torch 2.x only) write DCP directories with
                torch.distributed.checkpoint.save and FileSystemWriter:
                  plain/  one process: several dtypes, an int, a str, a
                          float, a dict, a list, an optimizer-like nested
                          state (state/<int>/exp_avg, param_groups)
                  objs/   one process: a deque holding a tensor (a value
                          item with a tensor record inside; its global,
                          collections.deque, is what ptverify reports)
                  rows/   3 ranks (gloo, one process each, a FileStore):
                          DTensors sharded on dim 0 (uneven: 7 rows over
                          3), on dim 1 (columns), dim 1 of a 3-d tensor,
                          a replicated one, and values
                  grid/   4 ranks on a 2x2 CPU device mesh: a tensor cut
                          both ways at once (Shard(0), Shard(1))
                  nocoll/ rows/'s state saved with use_collectives=False:
                          one __R.metadata per rank, no .metadata, the
                          replicated tensor and the values saved by each
                and broken copies (evil/ pastend/ overlap/ hole/ missing/
                escape/ zstd/ crc/; twokeys/: model.w and model.w2
                saved, then .metadata giving model.w2 model.w's item);
                withcfg/: config.json and generation_config.json
                beside .metadata;
                topt/: src.pt (torch.save of a state
                dict for `ptrepack src.pt DIR/`: every dtype, views, tied
                weights, a Parameter, int keys, lists of tensors, an
                empty dict, tuples, an OrderedDict with _metadata), ref/
                (torch_save_to_dcp of it) and files DCP cannot take
                (tuple.pt, list.pt, dup.pt); then OUT/expected.json: every tensor's
                dtype, shape and SHA-256 and every value's text, from what
                torch.distributed.checkpoint itself loads back
                (dcp_to_torch_save, then torch.load).  evil/'s payload
                would touch MARKER (default OUT/PWNED).
  check JSON NAME MNT [DIR]
                compare the mount MNT of directory NAME with JSON: each
                tensor's bytes (whole, and reads at odd offsets that cross
                chunk edges), user.dtype, user.shape, user.dcp.chunks, its
                .npy view; each value's text; that edits fail: nocoll/
                (no .metadata) mounts read-only, so a write, mkdir and
                unlink give EROFS; the others are writable, where mkdir
                and a write into a value's file are refused with EPERM
                (nothing is staged: the unmount writes nothing).
                With DIR under torch 2.x also against
                torch.distributed.checkpoint.load into empty tensors of
                the right shapes (a second route, besides the JSON).
  files MNT DIR OUTSIDE HF
                withcfg/ (DIR, with linked.json -> OUTSIDE, a fifo and a
                link to a directory added) mounted at MNT: .ptfs/files/
                holds exactly its config files and linked.json (no
                .metadata, .distcp, fifo or directory), each with DIR's
                bytes, linked.json with OUTSIDE's owner and no wider mode;
                HF (ptrepack --format hf DIR HF/) holds the same copies.
  pt JSON NAME FILE [DIR]
                FILE, what `ptrepack DIR FILE` wrote (one .pt), loaded
                by torch.load: every tensor's dtype, shape and SHA-256 and
                every value's text as in JSON.  With DIR under torch 2.x
                also the whole object against dcp_to_torch_save's: the
                same keys in the same order, the same container types.
  todcp SRC DIR BACK [REF]
                DIR, what `ptrepack SRC DIR/` wrote, and BACK, what
                `ptrepack DIR BACK` made of it again: BACK holds every
                leaf of SRC as DCP flattens it (keys, order, tensors,
                values).  With REF (torch_save_to_dcp's directory) under
                torch 2.x also: DIR's .metadata against REF's (keys in
                order, dtype, requires_grad, size, chunks, planner_data,
                which items are values), dcp_to_torch_save of DIR the
                same object as of REF, and dcp.load of DIR into SRC's
                tensors' shapes gives SRC's bytes.

Prints "ok<TAB>summary" on success; a problem is one line on stderr and
exit 1.  Works with any torch for check (1.13 has no DCP: the JSON made
under torch 2.x is the reference then).
"""
import collections
import collections.abc
import errno
import hashlib
import json
import os
import sys

import numpy as np
import torch

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32",
          "int16", "int8", "uint8", "bool", "complex64"]


def raw(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def sha(b):
    return hashlib.sha256(b).hexdigest()


def sample(dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g) * 50
    if dtype == torch.bool:
        return t > 0
    if dtype == torch.complex64:
        return torch.complex(t, -t)
    return t.to(dtype)


def plain_state():
    sd = {"model": {}, "epoch": 7, "name": "run-1", "lr": 0.25,
          "cfg": {"layers": 2, "act": "gelu", "sizes": [3, 4]},
          "optim": {"state": {}, "param_groups": [
              {"lr": 0.1, "betas": (0.9, 0.99), "params": [0, 1]}]}}
    for i, name in enumerate(DTYPES):
        sd["model"][name] = sample(getattr(torch, name), (3, 5), i)
    sd["model"]["scalar"] = torch.tensor(2.5)
    sd["model"]["empty"] = torch.zeros(0, 4)
    for p in range(2):
        sd["optim"]["state"][p] = {
            "exp_avg": sample(torch.float32, (4, 3), 100 + p),
            "exp_avg_sq": sample(torch.float32, (4, 3), 200 + p),
            "step": torch.tensor(float(p + 3))}
    return sd


def objs_state():
    # not a dict or list: saved whole as one value item, a tensor inside
    return {"queue": collections.deque([sample(torch.int32, (2, 3), 50), 9]),
            "w": sample(torch.float32, (3, 2), 51)}


def full(name):
    specs = {"rows": (torch.float32, (7, 6)), "cols": (torch.float32, (4, 9)),
             "cube": (torch.bfloat16, (2, 6, 3)), "rep": (torch.int64, (5,)),
             "grid": (torch.float32, (6, 8)), "gridh": (torch.float16, (5, 7))}
    dt, shape = specs[name]
    return sample(dt, shape, sum(map(ord, name)))


def rank_main(rank, ws, store, jobs):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=ws)
    for out, kind in jobs:
        save_rank(ws, out, kind)
    dist.destroy_process_group()


def save_rank(ws, out, kind):
    """This rank's part of the DCP directory OUT of KIND."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor import distribute_tensor as dt

    def distribute_tensor(t, mesh, placements):
        # every rank has the whole tensor: no scatter (gloo has none for
        # bfloat16), each keeps its own piece
        return dt(t, mesh, placements, src_data_rank=None)

    if kind in ("rows", "nocoll"):
        mesh = init_device_mesh("cpu", (ws,))
        sd = {"layer": {"rows": distribute_tensor(full("rows"), mesh,
                                                  [Shard(0)]),
                        "cols": distribute_tensor(full("cols"), mesh,
                                                  [Shard(1)]),
                        "cube": distribute_tensor(full("cube"), mesh,
                                                  [Shard(1)]),
                        "rep": distribute_tensor(full("rep"), mesh,
                                                 [Replicate()])},
              "step": 11, "note": "sharded"}
    else:
        mesh = init_device_mesh("cpu", (2, 2))
        sd = {"grid": distribute_tensor(full("grid"), mesh,
                                        [Shard(0), Shard(1)]),
              "gridh": distribute_tensor(full("gridh"), mesh,
                                         [Shard(1), Shard(0)])}
    # nocoll: each rank writes __R.metadata of its own chunks (and of the
    # replicated tensor and the values, which every rank saves)
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(out),
             use_collectives=kind != "nocoll")
    dist.barrier()


def ranks(jobs, ws):
    """Each (OUT, KIND) of JOBS saved by WS ranks: one process group, so
    that the ranks' processes (2.5 s of CPU each to start) serve them all."""
    import torch.multiprocessing as mp
    store = jobs[0][0] + ".store"
    if os.path.exists(store):
        os.unlink(store)
    mp.start_processes(rank_main, args=(ws, store, jobs), nprocs=ws,
                       join=True, start_method="spawn")
    os.unlink(store) if os.path.exists(store) else None


def loaded(d):
    """What torch.distributed.checkpoint loads back: the nested dict."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    pt = d.rstrip("/") + ".pt"
    dcp_to_torch_save(d, pt)
    sd = torch.load(pt, weights_only=False)
    os.unlink(pt)
    return sd


def walk(v, path, out):
    if isinstance(v, dict):
        for k, x in v.items():
            walk(x, path + [str(k)], out)
    elif isinstance(v, (list, tuple, collections.deque)):   # directories
        for i, x in enumerate(v):
            walk(x, path + [str(i)], out)
    elif isinstance(v, torch.Tensor):
        out["/".join(path)] = {"dtype": str(v.dtype).split(".")[-1],
                               "shape": list(v.shape), "sha256": sha(raw(v))}
    else:
        text = v if isinstance(v, str) else repr(v)
        out["/".join(path)] = {"value": text}


def rewrite(src, dst, change, drop=None):
    """Copy DCP directory @src to @dst with .metadata changed by @change."""
    import pickle
    import shutil
    shutil.copytree(src, dst)
    if drop:
        os.unlink(os.path.join(dst, drop))
    if change:
        with open(os.path.join(dst, ".metadata"), "rb") as f:
            md = pickle.load(f)     # our own file, written just now
        change(md)
        with open(os.path.join(dst, ".metadata"), "wb") as f:
            pickle.dump(md, f)


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch " + self.marker,))


def broken(out, marker=None):
    import dataclasses
    rows = os.path.join(out, "rows")

    def items_of(md, fqn):
        return [k for k in md.storage_data if k.fqn == fqn]

    def evil(md):
        md.storage_meta.save_id = Evil(marker or os.path.join(out, "PWNED"))

    def pastend(md):
        k = items_of(md, "layer.rows")[0]
        md.storage_data[k] = dataclasses.replace(
            md.storage_data[k], length=md.storage_data[k].length + 10 ** 6)

    def overlap(md):
        ch = md.state_dict_metadata["layer.cols"].chunks
        ch[1] = dataclasses.replace(ch[1], offsets=torch.Size(
            (ch[1].offsets[0], ch[1].offsets[1] - 1)))

    def hole(md):
        ch = md.state_dict_metadata["layer.rows"].chunks
        last = ch.pop()
        for k in items_of(md, "layer.rows"):
            if tuple(k.offset) == tuple(last.offsets):
                del md.storage_data[k]

    def escape(md):
        k = items_of(md, "layer.rows")[0]
        md.storage_data[k] = dataclasses.replace(
            md.storage_data[k], relative_path="../rows/__0_0.distcp")

    def zstd(md):
        k = items_of(md, "layer.cols")[0]
        md.storage_data[k] = dataclasses.replace(
            md.storage_data[k], transform_descriptors=["stream.zstd/1"])

    for name, fn in [("evil", evil), ("pastend", pastend),
                     ("overlap", overlap), ("hole", hole),
                     ("escape", escape), ("zstd", zstd)]:
        rewrite(rows, os.path.join(out, name), fn)
    rewrite(rows, os.path.join(out, "missing"), None, drop="__2_0.distcp")
    # two keys over one item: what shows them as two tensors, edits one
    # and leaves dcp.load seeing the other changed too (issue 38)
    import shutil
    import torch.distributed.checkpoint as dcp
    src = os.path.join(out, "twokeys.src")
    dcp.save({"model": {"w": sample(torch.float32, (4, 3), 60),
                        "w2": sample(torch.float32, (4, 3), 61)}, "step": 5},
             storage_writer=dcp.FileSystemWriter(src))

    def twokeys(md):
        w2 = items_of(md, "model.w2")[0]
        md.storage_data[w2] = md.storage_data[items_of(md, "model.w")[0]]

    rewrite(src, os.path.join(out, "twokeys"), twokeys)
    shutil.rmtree(src)
    # one byte of a chunk's data flipped: only its CRC-32 tells
    import io
    import pickle
    import zipfile
    d = os.path.join(out, "crc")
    rewrite(rows, d, None)
    md = pickle.load(open(os.path.join(d, ".metadata"), "rb"))
    k = [k for k in md.storage_data if k.fqn == "layer.cube"][0]
    si = md.storage_data[k]
    with open(os.path.join(d, si.relative_path), "r+b") as f:
        f.seek(si.offset)
        z = zipfile.ZipFile(io.BytesIO(f.read(si.length)))
        zi = z.getinfo("archive/data/0")
        f.seek(si.offset + zi.header_offset + 26)
        n, m = np.frombuffer(f.read(4), "<u2")
        at = si.offset + zi.header_offset + 30 + int(n) + int(m) + 1
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x40]))


def gen(out, marker=None):
    import torch.distributed.checkpoint as dcp
    os.makedirs(out, exist_ok=True)
    expected = {}
    d = os.path.join(out, "plain")
    dcp.save(plain_state(), storage_writer=dcp.FileSystemWriter(d))
    d = os.path.join(out, "objs")
    dcp.save(objs_state(), storage_writer=dcp.FileSystemWriter(d))
    ranks([(os.path.join(out, "rows"), "rows"),
           (os.path.join(out, "nocoll"), "nocoll")], 3)
    ranks([(os.path.join(out, "grid"), "grid")], 4)
    for name in ("plain", "objs", "rows", "grid"):
        e = {}
        d = os.path.join(out, name)
        walk(loaded(d), [], e)
        # the tensors of .metadata itself (not inside a value) have chunks
        md = dcp.FileSystemReader(d).read_metadata()
        for fqn, m in md.state_dict_metadata.items():
            path = "/".join(str(p) for p in md.planner_data[fqn])
            if path in e and "sha256" in e[path]:
                e[path]["chunks"] = len(m.chunks)
        expected[name] = e
    # the same state dict as rows/: DCP's own reader needs a .metadata
    expected["nocoll"] = expected["rows"]
    gen_withcfg(out)
    broken(out, marker)
    gen_topt(out)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
    n = sum(len(v) for v in expected.values())
    print("ok\t5 DCP directories (1, 1, 3, 4 and 3 ranks), %d entries, "
          "torch %s"
          % (n, torch.__version__))


# what a training script saves beside .metadata (withcfg/)
CFG_FILES = {
    "config.json": b'{\n  "architectures": ["LlamaForCausalLM"],\n'
                   b'  "hidden_size": 4,\n  "model_type": "llama"\n}\n',
    "generation_config.json": b'{"bos_token_id": 1, "eos_token_id": 2}\n',
}


def gen_withcfg(out):
    """withcfg/: a DCP directory with config files beside .metadata."""
    import torch.distributed.checkpoint as dcp
    d = os.path.join(out, "withcfg")
    dcp.save({"model": {"embed.weight": sample(torch.float32, (8, 4), 60),
                        "norm.weight": sample(torch.bfloat16, (4,), 61)}},
             storage_writer=dcp.FileSystemWriter(d))
    for name, text in CFG_FILES.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(text)


def files(mnt, d, outside, hf):
    """withcfg/ mounted at MNT (dcp.sh added linked.json -> OUTSIDE, a
    fifo and a link to a directory), and HF, what `ptrepack --format hf`
    made of it: its other files under .ptfs/files/ and beside the shards,
    as an HF folder's are."""
    shown = os.path.join(mnt, ".ptfs", "files")
    want = sorted(list(CFG_FILES) + ["linked.json"])
    names = sorted(os.listdir(shown))
    if names != want:
        fail(".ptfs/files/ lists %s, not %s (no .metadata, .distcp, fifo "
             "or directory)" % (names, want))
    for n in want:
        src = open(os.path.join(d, n), "rb").read()     # a link: followed
        if n in CFG_FILES and src != CFG_FILES[n]:
            fail("%s: the fixture's %s changed" % (d, n))
        if open(os.path.join(shown, n), "rb").read() != src:
            fail(".ptfs/files/%s: other bytes than %s/%s" % (n, d, n))
        if open(os.path.join(hf, n), "rb").read() != src:
            fail("%s/%s: ptrepack's folder has other bytes" % (hf, n))
    # a link out of the directory: its target's owner, never wider
    st, o = os.stat(os.path.join(shown, "linked.json")), os.stat(outside)
    if (st.st_uid, st.st_gid) != (o.st_uid, o.st_gid) or \
            st.st_mode & 0o777 & ~o.st_mode:
        fail(".ptfs/files/linked.json: owner %d:%d mode %o, its target "
             "%d:%d %o" % (st.st_uid, st.st_gid, st.st_mode & 0o7777,
                           o.st_uid, o.st_gid, o.st_mode & 0o7777))
    for n in ("special_tokens_map.json", "up", ".metadata"):
        if os.path.lexists(os.path.join(shown, n)):
            fail(".ptfs/files/%s: shown" % n)
        if os.path.lexists(os.path.join(hf, n)):
            fail("%s/%s: copied by ptrepack" % (hf, n))
    print("ok\t.ptfs/files/ holds %s, the bytes of the directory's and of "
          "ptrepack's folder; the fifo and the linked directory left out"
          % ", ".join(want))


def topt_state():
    """A state dict as training code saves one, for ptrepack SRC DIR/."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    sd = {"model": model.state_dict(), "dtypes": {}, "step": 11,
          "rng": (1, 2.5, "x"), "names": ["a", "b"], "empty": {},
          "layers": [sample(torch.float32, (2, 2), 300),
                     [sample(torch.int64, (3,), 301), 5]],
          "opt": {"state": {0: {"m": sample(torch.float32, (3, 4), 302),
                                "step": torch.tensor(4.0)}},
                  "param_groups": [{"lr": 0.01, "params": [0],
                                    "betas": (0.9, 0.999)}]}}
    for i, name in enumerate(DTYPES):
        sd["dtypes"][name] = sample(getattr(torch, name), (2, 3), 310 + i)
    base = sample(torch.float32, (4, 6), 330)
    sd["views"] = {"t": base.t(), "row": base[2], "cols": base[:, 1:4],
                   "tied_a": base, "tied_b": base,
                   "scalar": torch.tensor(7, dtype=torch.int16),
                   "empty": torch.zeros(0, 3),
                   "param": torch.nn.Parameter(sample(torch.float32, (2,),
                                                      331))}
    return sd


def gen_topt(out):
    from torch.distributed.checkpoint.format_utils import torch_save_to_dcp
    d = os.path.join(out, "topt")
    os.makedirs(d, exist_ok=True)
    torch.save(topt_state(), os.path.join(d, "src.pt"))
    torch_save_to_dcp(os.path.join(d, "src.pt"), os.path.join(d, "ref"))
    t = sample(torch.float32, (2,), 340)
    torch.save({"a": (t, 1)}, os.path.join(d, "tuple.pt"))
    torch.save([t], os.path.join(d, "list.pt"))
    torch.save({"a.b": t, "a": {"b": t}}, os.path.join(d, "dup.pt"))


def dcp_flat(sd):
    """{path: leaf} as DCP's traverse_state_dict() (torch >= 2.4) sees sd."""
    flat = {}

    def terminal(x):
        if isinstance(x, collections.abc.Mapping):
            return False
        if isinstance(x, list):
            return not any(isinstance(e, torch.Tensor) or
                           isinstance(e, collections.abc.Mapping) or
                           (isinstance(e, list) and not terminal(e))
                           for e in x)
        return True

    def trav(path, x):
        if isinstance(x, collections.abc.Mapping):
            for k, y in x.items():
                trav(path + (str(k),), y)
        elif terminal(x):
            flat[path] = x
        else:
            for i, y in enumerate(x):
                trav(path + (i,), y)
    for k, v in sd.items():
        trav((str(k),), v)
    return flat


def leaf_eq(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and (a.dtype, tuple(a.shape), raw(a)) ==
                (b.dtype, tuple(b.shape), raw(b)))
    return type(a) is type(b) and a == b


def todcp(src, d, back, ref=None):
    want = dcp_flat(torch.load(src, weights_only=False))
    got = dcp_flat(torch.load(back, weights_only=False))
    if list(got) != list(want):
        fail("%s: keys %s, DCP flattens %s to %s" % (
            os.path.basename(back), list(got)[:5], os.path.basename(src),
            list(want)[:5]))
    for k in want:
        if not leaf_eq(want[k], got[k]):
            fail("%s: %r in %s, %r in %s" % (
                ".".join(map(str, k)), got[k], os.path.basename(back),
                want[k], os.path.basename(src)))
    extra = ""
    if ref is not None and int(torch.__version__.split(".")[0]) >= 2:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.metadata import \
            TensorStorageMetadata as TSM
        m = dcp.FileSystemReader(d).read_metadata()
        r = dcp.FileSystemReader(ref).read_metadata()
        if list(m.state_dict_metadata) != list(r.state_dict_metadata):
            fail(".metadata keys %s, torch_save_to_dcp's %s" % (
                list(m.state_dict_metadata)[:5],
                list(r.state_dict_metadata)[:5]))
        for k, x in m.state_dict_metadata.items():
            y = r.state_dict_metadata[k]
            if type(x) is not type(y) or (isinstance(x, TSM) and (
                    x.properties != y.properties or x.size != y.size or
                    x.chunks != y.chunks)):
                fail("%s: .metadata says %r, torch_save_to_dcp's %r" % (
                    k, x, y))
        if m.planner_data != r.planner_data:
            fail(".metadata planner_data differs from torch_save_to_dcp's")
        same(loaded(ref), loaded(d), "")
        sd = {k: torch.zeros(x.size, dtype=x.properties.dtype)
              for k, x in r.state_dict_metadata.items() if isinstance(x, TSM)}
        dcp.load(sd, storage_reader=dcp.FileSystemReader(d))
        flat = {".".join(map(str, p)): v for p, v in want.items()}
        for k, t in sd.items():
            if not leaf_eq(flat[k].detach(), t):
                fail("%s: dcp.load gives other bytes than %s" % (
                    k, os.path.basename(src)))
        extra = (", .metadata as torch_save_to_dcp's, dcp_to_torch_save "
                 "the same object, dcp.load %d tensors" % len(sd))
    print("ok\t%d keys back as DCP flattens them%s" % (len(want), extra))


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def by_dcp_load(d, exp):
    """The tensors again, through torch.distributed.checkpoint.load."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    md = dcp.FileSystemReader(d).read_metadata()
    sd = {}
    for fqn, m in md.state_dict_metadata.items():
        if isinstance(m, TensorStorageMetadata):
            sd[fqn] = torch.empty(m.size, dtype=m.properties.dtype)
    dcp.load(sd, storage_reader=dcp.FileSystemReader(d))
    got = {}
    for fqn, t in sd.items():
        path = "/".join(str(p) for p in md.planner_data[fqn])
        got[path] = sha(raw(t))
    for path, e in exp.items():     # tensors inside values: JSON only
        if "chunks" in e and got.get(path) != e["sha256"]:
            fail("%s: dcp.load gives other bytes than the JSON" % path)
    return len(got)


def check(jpath, name, mnt, d=None):
    exp = json.load(open(jpath))[name]
    ro = name == "nocoll"   # the others take edits (dcp_write.sh)
    ntens = nval = nodd = 0
    for path, e in sorted(exp.items()):
        f = os.path.join(mnt, path)
        if "value" in e:
            text = open(f, "rb").read().decode()
            if text != e["value"] + "\n":
                fail("%s: value file holds %r, torch loads %r"
                     % (path, text, e["value"]))
            nval += 1
            continue
        data = open(f, "rb").read()
        if sha(data) != e["sha256"]:
            fail("%s: %d bytes differ from what DCP loads" % (path, len(data)))
        dt = os.getxattr(f, "user.dtype").decode()
        shape = os.getxattr(f, "user.shape").decode()
        if dt != e["dtype"] or shape != ",".join(map(str, e["shape"])):
            fail("%s: xattrs say %s (%s), DCP loads %s %s"
                 % (path, dt, shape, e["dtype"], e["shape"]))
        try:
            chunks = os.getxattr(f, "user.dcp.chunks").decode()
        except OSError as x:
            if x.errno != errno.ENODATA:
                raise
            chunks = None       # a tensor inside a value: no chunks
        lines = chunks.splitlines() if chunks is not None else None
        if e.get("chunks") is None and lines is not None:
            fail("%s: user.dcp.chunks on a tensor inside a value" % path)
        if e.get("chunks") is not None and (
                lines is None or len(lines) != e["chunks"] or not all(
                    ln.startswith("offsets=") and ".distcp offset=" in ln
                    for ln in lines)):
            fail("%s: user.dcp.chunks is %r, not %d chunks"
                 % (path, chunks, e["chunks"]))
        # reads at odd offsets and lengths: runs that cross chunk edges
        fd = os.open(f, os.O_RDONLY)
        try:
            for off in range(0, len(data), 7):
                for n in (1, 5, 13):
                    if os.pread(fd, n, off) != data[off:off + n]:
                        fail("%s: pread(%d, %d) differs" % (path, n, off))
                    nodd += 1
        finally:
            os.close(fd)
        a = np.load(f + ".npy")
        if list(a.shape) != e["shape"] or a.tobytes() != data:
            fail("%s.npy: shape %s or bytes differ" % (path, a.shape))
        if ro:      # (a write elsewhere would be an edit to write back)
            try:
                with open(f, "r+b") as w:
                    w.write(b"\0")
                fail("%s: a write succeeded on a read-only mount" % path)
            except OSError as x:
                if x.errno != errno.EROFS:
                    fail("%s: write failed with %s, not EROFS" % (path, x))
        ntens += 1

    def write_value(p):
        with open(os.path.join(mnt, p), "r+b") as w:
            w.write(b"\0")
    vals = [p for p in sorted(exp) if "value" in exp[p]]
    ops = [lambda: os.mkdir(os.path.join(mnt, "new"))]
    if ro:
        ops.append(lambda: os.unlink(os.path.join(mnt, sorted(exp)[0])))
    elif vals:
        ops.append(lambda: write_value(vals[0]))
    want = errno.EROFS if ro else errno.EPERM
    for op in ops:
        try:
            op()
            fail("an edit of the tree succeeded%s" % (
                " on a read-only mount" if ro else " (mkdir or a value)"))
        except OSError as x:
            if x.errno != want:
                fail("edit of the tree failed with %s, not %s" % (
                    x, errno.errorcode[want]))
    again = ""
    if d and int(torch.__version__.split(".")[0]) >= 2 and \
            os.path.exists(os.path.join(d, ".metadata")):
        again = ", and dcp.load's %d tensors" % by_dcp_load(d, exp)
    print("ok\t%d tensors (%d odd reads), %d values as DCP loads them%s, "
          "%s" % (ntens, nodd, nval, again, "EROFS" if ro else
                  "EPERM for mkdir and a value's write"))


def same(a, b, path):
    """@b is @a: container types, key order, tensors, values."""
    if type(a) is not type(b):
        fail("%s: %s, dcp_to_torch_save gives %s" % (
            path, type(b).__name__, type(a).__name__))
    if isinstance(a, dict):
        if list(a) != list(b):
            fail("%s: keys %s, dcp_to_torch_save gives %s" % (
                path, list(b)[:6], list(a)[:6]))
        for k in a:
            same(a[k], b[k], "%s/%s" % (path, k))
    elif isinstance(a, (list, tuple, collections.deque)):
        if len(a) != len(b):
            fail("%s: %d items, dcp_to_torch_save gives %d" % (
                path, len(b), len(a)))
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s/%d" % (path, i))
    elif isinstance(a, torch.Tensor):
        if (a.dtype, a.shape, raw(a)) != (b.dtype, b.shape, raw(b)):
            fail("%s: another tensor than dcp_to_torch_save's" % path)
    elif a != b:
        fail("%s: %r, dcp_to_torch_save gives %r" % (path, b, a))


def pt(jpath, name, path, d=None):
    exp = json.load(open(jpath))[name]
    obj = torch.load(path, weights_only=False)
    got = {}
    walk(obj, [], got)
    for k, e in exp.items():
        e = {x: y for x, y in e.items() if x != "chunks"}
        if got.get(k) != e:
            fail("%s: %s in %s, the DCP directory has %s" % (
                k, got.get(k), os.path.basename(path), e))
    for k in got:
        if k not in exp:
            fail("%s: in %s, not in the DCP directory" % (
                k, os.path.basename(path)))
    extra = ""
    if d is not None and int(torch.__version__.split(".")[0]) >= 2:
        same(loaded(d), obj, name)
        extra = ", and as dcp_to_torch_save writes it"
    print("ok\t%d entries as in the directory%s" % (len(got), extra))


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(*sys.argv[2:4])
    elif sys.argv[1] == "check":
        check(*sys.argv[2:])
    elif sys.argv[1] == "pt":
        pt(*sys.argv[2:])
    elif sys.argv[1] == "todcp":
        todcp(*sys.argv[2:])
    elif sys.argv[1] == "files":
        files(*sys.argv[2:])
    else:
        fail("usage: dcp_check.py gen OUT [MARKER] | check JSON NAME MNT [DIR] | "
             "pt JSON NAME FILE [DIR] | todcp SRC DIR BACK [REF] | "
             "files MNT DIR OUTSIDE HF")
