"""ranks_check.py - per-rank shard sets for tests/fs/formats/ranks.sh.

  gen OUT            (torch 2.x) write the sets, each rank its own process
                     in a gloo group on CPU, and beside each set what
                     full_tensor() of every DTensor gives, under that group:
    OUT/fsdp2_2/     fully_shard(Sequential(Linear(5,7), Linear(7,3))) on 2
                     ranks: model_ and optim_ (Adam after one step) files,
                     expected_model.pt, expected_optim.pt
    OUT/fsdp2_4/     the same on 4 ranks (uneven: 7 rows over 4, 3 over 4
                     leaves rank 3 an empty piece)
    OUT/dt_4/        distribute_tensor on 4 ranks: Shard(0), Shard(1),
                     uneven sizes, Replicate(), a 2x2 mesh (Shard(0),
                     Shard(1)) and (Shard(0), Replicate()), bfloat16, int64,
                     python values; expected_model.pt
    OUT/fsdp1_2/     FSDP1 (FullyShardedDataParallel) of the same model on 2
                     ranks under StateDictType.SHARDED_STATE_DICT: its
                     ShardedTensors, model_ and optim_ (Adam, by
                     FSDP.optim_state_dict); expected_*.pt from each
                     ShardedTensor's gather() under the same group
    OUT/fsdp1_4/     the same on 4 ranks, model only (rank 3 holds an
                     empty list of local shards for the 3-row tensors)
    OUT/other_2/     fsdp2_2's model saved from another model (Linear(6,7)):
                     a rank file from it is of another run
    OUT/drift_2/     a value the ranks hold otherwise (epoch 3 and 4)
    OUT/evil_2/      rank 1 alone holds an object of a class of this
                     script's (an unsafe global rank 0's file lacks)
  check GOT EXPECTED torch.load both: the same containers, keys, values,
                     tensors (dtype, shape, requires_grad, bytes)
  bytes EXPECTED MNT every tensor of EXPECTED against its file in the mount
"""
import os
import sys

import torch


class Evil:
    """An object torch's weights-only loader refuses to rebuild."""


def full(v):
    """The object with every DTensor made its full_tensor(), and every
    ShardedTensor what its gather() gives (on rank 0; None elsewhere)."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from torch.distributed._shard.sharded_tensor import ShardedTensor
    if isinstance(v, ShardedTensor):
        out = (torch.empty(v.size(), dtype=v.dtype)
               if dist.get_rank() == 0 else None)
        v.gather(dst=0, out=out)
        if out is not None:
            out.requires_grad_(v.requires_grad)
        return out
    if isinstance(v, DTensor) and v.dtype == torch.bfloat16:
        # gloo gathers no bfloat16: through float32, exactly
        return v.to(torch.float32).full_tensor().to(torch.bfloat16)
    if isinstance(v, DTensor):
        return v.full_tensor()
    if isinstance(v, dict):
        out = type(v)() if type(v) is not dict else {}
        for k, x in v.items():
            out[k] = full(x)
        return out
    if isinstance(v, list):
        return [full(x) for x in v]
    if isinstance(v, tuple):
        return tuple(full(x) for x in v)
    return v


def make(rank, world, out, kind):
    """Set @kind into @out, this rank's files (every rank calls it)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard, Replicate
    torch.manual_seed(0)
    if kind in ("fsdp2", "other"):
        from torch.distributed.fsdp import fully_shard
        m = torch.nn.Sequential(torch.nn.Linear(6 if kind == "other" else 5,
                                                7), torch.nn.Linear(7, 3))
        fully_shard(m)
        sd = m.state_dict()
        torch.save(sd, f"{out}/model_world_size_{world}_rank_{rank}.pt")
        exp_m = full(sd)
        if kind == "fsdp2":
            opt = torch.optim.Adam(m.parameters(), lr=0.1)
            m(torch.randn(2, 5)).sum().backward()
            opt.step()
            osd = opt.state_dict()
            torch.save(osd, f"{out}/optim_world_size_{world}_rank_{rank}.pt")
            exp_o = full(osd)
            if rank == 0:
                torch.save(exp_o, f"{out}/expected_optim.pt")
    elif kind == "fsdp1":
        import warnings
        from torch.distributed.fsdp import (FullyShardedDataParallel as FSDP,
                                            StateDictType)
        warnings.simplefilter("ignore")
        m = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Linear(7, 3))
        m = FSDP(m, device_id=torch.device("cpu"), use_orig_params=True)
        opt = torch.optim.Adam(m.parameters(), lr=0.1)
        m(torch.randn(2, 5)).sum().backward()
        opt.step()
        with FSDP.state_dict_type(m, StateDictType.SHARDED_STATE_DICT):
            sd = m.state_dict()
            osd = FSDP.optim_state_dict(m, opt)
        torch.save(sd, f"{out}/model_world_size_{world}_rank_{rank}.pt")
        if world == 2:
            torch.save(osd, f"{out}/optim_world_size_{world}_rank_{rank}.pt")
        # (not FULL_STATE_DICT: its optimizer state gives exp_avg_sq as
        # exp_avg too, under torch 2.14)
        exp_m = full(sd)
        exp_o = full(osd)
        if rank == 0 and world == 2:
            torch.save(exp_o, f"{out}/expected_optim.pt")
    elif kind in ("drift", "evil"):
        m1 = init_device_mesh("cpu", (world,))
        sd = {"w": distribute_tensor(torch.arange(6.0), m1, [Shard(0)]),
              "epoch": 3 + rank if kind == "drift" else 3}
        if kind == "evil":
            sd["hook"] = Evil() if rank == 1 else None
        torch.save(sd, f"{out}/model_world_size_{world}_rank_{rank}.pt")
        exp_m = full(sd)
    else:
        m1 = init_device_mesh("cpu", (world,))
        m2 = init_device_mesh("cpu", (2, 2))
        g = torch.Generator().manual_seed(1)
        sd = {
            "s0": distribute_tensor(torch.randn(8, 3, generator=g), m1,
                                    [Shard(0)]),
            "s1": distribute_tensor(torch.randn(3, 8, generator=g), m1,
                                    [Shard(1)]),
            "uneven": distribute_tensor(torch.randn(5, 2, generator=g), m1,
                                        [Shard(0)]),
            "tiny": distribute_tensor(torch.arange(3, dtype=torch.int64), m1,
                                      [Shard(0)]),
            "rep": distribute_tensor(torch.randn(2, 3, generator=g), m1,
                                     [Replicate()]),
            "grid": distribute_tensor(torch.randn(6, 5, generator=g), m2,
                                      [Shard(0), Shard(1)]),
            "gridrep": distribute_tensor(torch.randn(4, 3, generator=g), m2,
                                         [Shard(0), Replicate()]),
            # (gloo scatters no bfloat16: cast after)
            "half": distribute_tensor(torch.randn(4, 6, generator=g), m1,
                                      [Shard(1)]).to(torch.bfloat16),
            "meta": {"epoch": 3, "name": "run-1", "lr": [0.1, 0.01]},
        }
        torch.save(sd, f"{out}/model_world_size_{world}_rank_{rank}.pt")
        exp_m = full(sd)
    if rank == 0:
        torch.save(exp_m, f"{out}/expected_model.pt")
    dist.barrier()


def run(rank, world, jobs, store):
    """Every set of one world size in one process group: torch is
    imported once per rank, not once per set."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=world)
    for out, kind in jobs:
        make(rank, world, out, kind)
    dist.destroy_process_group()


def gen(out):
    import torch.multiprocessing as mp
    sets = (("fsdp2_2", 2, "fsdp2"), ("fsdp2_4", 4, "fsdp2"),
            ("dt_4", 4, "dt"), ("fsdp1_2", 2, "fsdp1"),
            ("fsdp1_4", 4, "fsdp1"),
            ("other_2", 2, "other"),
            ("drift_2", 2, "drift"),
            ("evil_2", 2, "evil"))
    for world in (2, 4):
        jobs = []
        for name, w, kind in sets:
            if w == world:
                jobs.append((os.path.join(out, name), kind))
                os.makedirs(jobs[-1][0], exist_ok=True)
        store = os.path.join(out, f"world{world}.store")
        mp.spawn(run, args=(world, jobs, store), nprocs=world)
        if os.path.exists(store):
            os.unlink(store)
    print("ok\tranks sets written by torch", torch.__version__)


def same(a, b, where):
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} where {type(b).__name__} expected"
    if isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{where}: {a.dtype} {tuple(a.shape)}, expected {b.dtype} {tuple(b.shape)}"
        if a.requires_grad != b.requires_grad:
            return f"{where}: requires_grad {a.requires_grad}"
        x, y = a.detach().contiguous(), b.detach().contiguous()
        if x.dtype == torch.bfloat16:
            x, y = x.view(torch.int16), y.view(torch.int16)
        if not torch.equal(x, y):
            return f"{where}: other values"
        return None
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return f"{where}: keys {list(a.keys())}, expected {list(b.keys())}"
        for k in a:
            r = same(a[k], b[k], f"{where}/{k}")
            if r:
                return r
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: {len(a)} items, expected {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            r = same(x, y, f"{where}/{i}")
            if r:
                return r
        return None
    return None if a == b else f"{where}: {a!r}, expected {b!r}"


def check(got, exp):
    r = same(torch.load(got, weights_only=False),
             torch.load(exp, weights_only=False), ".")
    print(r or "same")
    return 1 if r else 0


def tensors(v, path):
    if isinstance(v, torch.Tensor):
        yield path, v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from tensors(x, f"{path}/{k}" if path else str(k))
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            yield from tensors(x, f"{path}/{i}" if path else str(i))


def bytes_of(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def mounted(exp, mnt):
    bad = 0
    n = 0
    for path, t in tensors(torch.load(exp, weights_only=False), ""):
        n += 1
        with open(os.path.join(mnt, path), "rb") as f:
            got = f.read()
        if got != bytes_of(t):
            print(f"{path}: {len(got)} bytes differ from full_tensor()'s "
                  f"{t.numel() * t.element_size()}")
            bad += 1
    print(f"{n} tensors, {bad} differ")
    return 1 if bad or not n else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2])
    elif cmd == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    elif cmd == "bytes":
        sys.exit(mounted(sys.argv[2], sys.argv[3]))
