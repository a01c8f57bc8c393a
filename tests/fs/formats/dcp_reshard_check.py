"""dcp_reshard_check.py - DCP directories written by ptrepack --ranks M,
for tests/fs/formats/dcp_reshard.sh (torch 2.x), against real dcp.save
and dcp.load by M gloo ranks on CPU (one process a rank, a FileStore).

  gen DIR           DIR/sd.pt: the state dict (even and uneven dim 0,
                    dim 0 under M, no rows, rows of no bytes, 0-dim,
                    bfloat16, int64, a view, nested, python values);
                    DIR/bad.pt: a tuple holding a tensor (refused
                    mid-write); DIR/tie.pt: two tensors of 6 rows, whose
                    empty pieces tie on 10 ranks (dedup's min() then meets
                    rank 8 first: python's set order)
  ranks DIR M OUT   M ranks: dcp.save of sd.pt's tensors as
                    distribute_tensor(t, mesh, [Shard(0)]) (0-dim ones and
                    values as they are) into DIR/ref-M, then dcp.load of
                    OUT into Shard(0) DTensors of the global shapes: each
                    rank's piece and full_tensor() are sd.pt's bytes
  meta REF OUT      the two .metadata alike: keys and their order, types,
                    properties, sizes, every key's chunk boxes (offsets,
                    sizes, in order), planner_data, storage_data's keys
                    (fqn, offsets, index hint) in order and their files;
                    the same data files (names, empty or not)
  boxes REF OUT     meta's keys, types, properties, sizes, chunk boxes and
                    planner_data alone, whatever their order (a DCP input
                    comes in its state_dict_metadata's order, as
                    dcp_to_torch_save() gives it)
  plan SD OUT M     OUT's .metadata (but item offsets) and files as torch's
                    planner makes them for M ranks holding SD (a .pt, or a
                    DCP directory as dcp_to_torch_save() loads it) as
                    Shard(0) pieces: create_default_local_save_plan of
                    each rank's, dedup_save_plans,
                    create_default_global_save_plan; no process group, so
                    any M
  load OUT          dcp.load of OUT from one process (no process group)
                    into plain tensors: sd.pt's bytes and values
Prints "ok<TAB>detail" and exits 0, or a line saying what differs, exit 1.
"""
import os
import pickle
import sys

import torch


def fail(msg):
    print(msg)
    sys.exit(1)


def state():
    g = torch.Generator().manual_seed(7)
    return {
        "step": 12,
        "even": torch.randn(6, 4, generator=g),            # 6 = 2*3 = 3*2
        "uneven": torch.randn(7, 3, generator=g),          # 4+3, 3+3+1
        "few": torch.randn(1, 5, generator=g),             # dim 0 under M
        "scalar": torch.tensor(2.5),                       # 0-dim
        "name": "reshard",
        "half": torch.randn(5, 2, generator=g).to(torch.bfloat16),
        "ids": torch.arange(9, dtype=torch.int64) * 3,
        "layer": {"w": torch.randn(4, 2, 3, generator=g),
                  "b": torch.randn(2, generator=g),
                  "cfg": [1, 2, 3]},
        "empty": torch.zeros(0, 3),
        "hollow": torch.zeros(3, 0),                       # rows, no bytes
        "view": torch.arange(12.0).reshape(3, 4).t(),      # not contiguous
        "six": torch.randn(6, generator=g),                # M = 10: ties
    }


def flat(sd, pre=""):
    out = {}
    for k, v in sd.items():
        if isinstance(v, dict):
            out.update(flat(v, pre + k + "."))
        else:
            out[pre + k] = v
    return out


def same_bytes(a, b):
    return (a.dtype == b.dtype and a.shape == b.shape and
            torch.equal(a.contiguous().reshape(-1).view(torch.uint8),
                        b.contiguous().reshape(-1).view(torch.uint8)))


def gen(d):
    os.makedirs(d, exist_ok=True)
    torch.save(state(), d + "/sd.pt")
    torch.save({"w": torch.ones(4), "pair": (torch.ones(2), 1)},
               d + "/bad.pt")
    torch.save({"a": torch.arange(6.0), "b": torch.ones(6, 2)},
               d + "/tie.pt")
    print("ok\t%d keys" % len(flat(state())))


# ---------------------------------------------------------------- M ranks
def rank_main(rank, m, d, out):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor
    from torch.distributed.tensor._utils import \
        compute_local_shape_and_global_offset as local_box
    dist.init_process_group("gloo", init_method="file://%s/store-%d" %
                            (d, m), rank=rank, world_size=m)
    mesh = init_device_mesh("cpu", (m,))

    def conv(v, fill):
        if isinstance(v, dict):
            return {k: conv(x, fill) for k, x in v.items()}
        if isinstance(v, torch.Tensor):
            t = torch.zeros_like(v) if fill else v
            if v.dim() == 0:
                return t
            # every rank has the whole tensor: no scatter (gloo has none
            # for bfloat16), each keeps its own piece
            return distribute_tensor(t, mesh, [Shard(0)], src_data_rank=None)
        return None if fill else v

    sd = state()
    dcp.save(conv(sd, False), checkpoint_id="%s/ref-%d" % (d, m))
    dist.barrier()
    got = conv(sd, True)
    dcp.load(got, checkpoint_id=out)
    bad = []
    for k, v in flat(sd).items():
        x = flat(got)[k]
        if isinstance(x, DTensor):
            # full_tensor() is a collective: every rank, every key
            if v.dtype == torch.bfloat16:       # gloo gathers no bfloat16
                full = x.to(torch.float32).full_tensor().to(v.dtype)
            else:
                full = x.full_tensor()
            size, off = local_box(v.shape, mesh, x.placements)
            piece = v[off[0]:off[0] + size[0]]
            if tuple(x.shape) != tuple(v.shape):
                bad.append("%s: global shape %s" % (k, tuple(x.shape)))
            elif not same_bytes(x.to_local(), piece):
                bad.append("%s: rank %d's piece differs" % (k, rank))
            elif not same_bytes(full, v):
                bad.append("%s: full_tensor() differs" % k)
        elif isinstance(v, torch.Tensor):
            if not isinstance(x, torch.Tensor) or not same_bytes(x, v):
                bad.append("%s: differs" % k)
        elif x != v:
            bad.append("%s: %r, not %r" % (k, x, v))
    with open("%s/res-%d-%d" % (d, m, rank), "w") as f:
        f.write("\n".join(bad))
    dist.barrier()
    dist.destroy_process_group()


def ranks(d, m, out):
    import torch.multiprocessing as mp
    for f in ["%s/store-%d" % (d, m)] + ["%s/res-%d-%d" % (d, m, r)
                                          for r in range(m)]:
        if os.path.exists(f):
            os.unlink(f)
    mp.start_processes(rank_main, args=(m, d, out), nprocs=m, join=True,
                       start_method="spawn")
    bad = []
    for r in range(m):
        with open("%s/res-%d-%d" % (d, m, r)) as f:
            bad += [x for x in f.read().split("\n") if x]
    if bad:
        fail("dcp.load under %d ranks: %s" % (m, "; ".join(bad[:3])))
    print("ok\tevery rank's piece and full_tensor() as sd.pt (ref-%d/ "
          "saved by them)" % m)


# ---------------------------------------------------------------- .metadata
def metadata(d):
    with open(d + "/.metadata", "rb") as f:
        return pickle.load(f)


def boxes(md):
    """Every key: its type, properties, size and chunk boxes, in order."""
    out = {}
    for k, v in md.state_dict_metadata.items():
        if hasattr(v, "chunks"):
            out[k] = ("tensor", v.properties, tuple(v.size),
                      [(tuple(c.offsets), tuple(c.sizes)) for c in v.chunks])
        else:
            out[k] = (type(v).__name__,)
    return out


def storage(md):
    """storage_data's keys in order: (fqn, offsets, hint) -> its file."""
    return [((i.fqn, None if i.offset is None else tuple(i.offset), i.index),
             s.relative_path) for i, s in md.storage_data.items()]


def compare(ref, got):
    """What differs between two Metadata, as one line, or None."""
    rb, gb = boxes(ref), boxes(got)
    if list(rb) != list(gb):
        return "keys: %s, torch's %s" % (list(gb), list(rb))
    for k in rb:
        if rb[k] != gb[k]:
            return "%s: %s, torch's %s" % (k, gb[k], rb[k])
    if ref.planner_data != got.planner_data:
        return "planner_data: %s, torch's %s" % (got.planner_data,
                                                 ref.planner_data)
    rs, gs = storage(ref), storage(got)
    for a, b in zip(rs, gs):
        if a != b:
            return "storage_data: %s, torch's %s" % (b, a)
    if len(rs) != len(gs):
        return "storage_data: %d items, torch's %d" % (len(gs), len(rs))
    return None


def files(d):
    return sorted((f, os.path.getsize(os.path.join(d, f)) > 0)
                  for f in os.listdir(d) if f.endswith(".distcp"))


def meta(ref, out):
    why = compare(metadata(ref), metadata(out))
    if why:
        fail(why)
    if files(ref) != files(out):
        fail("files (name, holds any): %s, torch's %s" % (files(out),
                                                          files(ref)))
    md = metadata(out)
    n = sum(len(v.chunks) for v in md.state_dict_metadata.values()
            if hasattr(v, "chunks"))
    print("ok\t%d keys, %d chunks, %d files: boxes, order and files as "
          "torch's" % (len(md.state_dict_metadata), n, len(files(out))))


def same_boxes(ref, out):
    rb, gb = boxes(metadata(ref)), boxes(metadata(out))
    if rb != gb:
        k = sorted(set(rb) ^ set(gb)) or [k for k in rb if rb[k] != gb[k]]
        fail("%s: %s, torch's %s" % (k[0], gb.get(k[0]), rb.get(k[0])))
    if metadata(ref).planner_data != metadata(out).planner_data:
        fail("planner_data differs")
    print("ok\t%d keys: boxes as torch's" % len(gb))


def loaded(path):
    """A .pt, or a DCP directory as torch converts it."""
    if os.path.isdir(path):
        from torch.distributed.checkpoint.format_utils import \
            dcp_to_torch_save
        pt = path.rstrip("/") + ".pt"
        dcp_to_torch_save(path, pt)
        path = pt
    return torch.load(path, weights_only=False)


def plan(sdpath, out, m):
    """The Metadata torch's planner makes for M ranks, without a group."""
    from torch.distributed.checkpoint._dedup_save_plans import \
        dedup_save_plans
    from torch.distributed.checkpoint.default_planner import (
        create_default_global_save_plan, create_default_local_save_plan)
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import (
        ChunkStorageMetadata, MetadataIndex, TensorProperties)
    from torch.distributed.checkpoint.planner import (
        TensorWriteData, WriteItem, WriteItemType)
    from torch.distributed.tensor import Shard

    class Piece:
        """Rank r's Shard(0) piece, as DTensor.__create_write_items__
        describes it (planner_helpers._create_write_items_for_dtensor)."""
        def __init__(self, t, r):
            self.t, self.r = t, r

        def __create_write_items__(self, fqn, obj):
            t = self.t
            size, off = Shard.local_shard_size_and_offset(t.shape[0], m,
                                                          self.r)
            sizes = torch.Size((size,) + tuple(t.shape[1:]))
            offs = torch.Size((off,) + (0,) * (t.dim() - 1))
            return [WriteItem(
                index=MetadataIndex(fqn, offs), type=WriteItemType.SHARD,
                tensor_data=TensorWriteData(
                    chunk=ChunkStorageMetadata(offsets=offs, sizes=sizes),
                    properties=TensorProperties.create_from_tensor(t),
                    size=t.size()))]

    sd = flat(loaded(sdpath))
    plans = []
    for r in range(m):
        mine = {k: Piece(v, r) if isinstance(v, torch.Tensor) and v.dim()
                else v for k, v in sd.items()}
        plans.append(create_default_local_save_plan(mine, r == 0))
    plans, md = create_default_global_save_plan(dedup_save_plans(plans))
    md.planner_data = metadata(out).planner_data
    # FileSystemWriter: each rank's values, then its tensors
    md.storage_data = {}
    for r, p in enumerate(plans):
        for it in sorted(p.items,
                         key=lambda i: i.type != WriteItemType.BYTE_IO):
            md.storage_data[it.index] = _StorageInfo("__%d_0.distcp" % r,
                                                     0, 0)
    why = compare(md, metadata(out))
    if why:
        fail(why)
    held = set(s.relative_path for s in md.storage_data.values())
    want = sorted(("__%d_0.distcp" % r, "__%d_0.distcp" % r in held)
                  for r in range(m))
    if files(out) != want:
        fail("files (name, holds any): %s, the planner's %s" %
             (files(out), want))
    print("ok\t%d ranks: boxes, order and files as torch's planner's" % m)


def load(out):
    import torch.distributed.checkpoint as dcp
    sd = state()

    def zeros(v):
        if isinstance(v, dict):
            return {k: zeros(x) for k, x in v.items()}
        return torch.zeros_like(v) if isinstance(v, torch.Tensor) else None

    got = zeros(sd)
    dcp.load(got, checkpoint_id=out)
    g = flat(got)
    for k, v in flat(sd).items():
        if isinstance(v, torch.Tensor):
            if not same_bytes(g[k], v):
                fail("%s: differs" % k)
        elif g[k] != v:
            fail("%s: %r, not %r" % (k, g[k], v))
    print("ok\t%d keys as sd.pt" % len(g))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["gen"] and len(a) == 2:
        gen(a[1])
    elif a[:1] == ["ranks"] and len(a) == 4:
        ranks(a[1], int(a[2]), a[3])
    elif a[:1] == ["meta"] and len(a) == 3:
        meta(a[1], a[2])
    elif a[:1] == ["boxes"] and len(a) == 3:
        same_boxes(a[1], a[2])
    elif a[:1] == ["plan"] and len(a) == 4:
        plan(a[1], a[2], int(a[3]))
    elif a[:1] == ["load"] and len(a) == 2:
        load(a[1])
    else:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
