"""ranks_write_check.py - per-rank shard sets written back through a
mount, for tests/fs/formats/ranks_write.sh (under the torch being tested).

  expect EXPECTED OUT EDIT...   EXPECTED (what full_tensor() of every
                                DTensor gives, the fixture's) with each
                                EDIT "KEY@OFF=TEXT" made: TEXT's bytes at
                                byte OFF of tensor KEY's row-major bytes,
                                as dd conv=notrunc makes it through the
                                mount; saved as OUT
  check GOT EXPECTED            torch.load both: the same object
                                (ranks_check.py's comparison)
  load DIR PREFIX N [standin]   every rank file DIR/PREFIX_world_size_N_
                                rank_R.pt loads with torch.load (2.x:
                                weights_only; 1.13, which has no DTensor
                                class, with stand-ins for the classes it
                                lacks; "standin": with stand-ins for
                                torch.distributed's classes under either,
                                as FSDP1's ShardedTensor rebuilds only in
                                its process group) and every record's
                                CRC-32 is right (zipfile)
  copies DIR PREFIX N KEY EXPECTED HOW
                                every rank's copy of KEY holds EXPECTED's
                                bytes: HOW "rep" (a Replicate()d DTensor:
                                each local tensor is the whole), "rows2x2"
                                ((Shard(0), Replicate()) on a 2x2 mesh:
                                rank r's is rows of block r // 2), "plain"
                                (no DTensor: each rank's own tensor)
"""
import pickle
import sys
import types
import zipfile

import torch

import ranks_check

TORCH2 = not torch.__version__.startswith("1.")
if TORCH2:
    # its classes, which the weights-only loader then allows
    import torch.distributed.tensor  # noqa: F401


def resolve(obj, key):
    """The container holding KEY's last part, and that part (an int key
    where the dict has one)."""
    parts = key.split("/")
    for p in parts[:-1]:
        obj = obj[int(p)] if isinstance(obj, (list, tuple)) or (
            isinstance(obj, dict) and p not in obj) else obj[p]
    last = parts[-1]
    if isinstance(obj, (list, tuple)) or (isinstance(obj, dict) and
                                          last not in obj):
        last = int(last)
    return obj, last


def edited(t, off, data):
    u = t.detach().contiguous().clone()
    b = u.reshape(-1).view(torch.uint8)
    b[off:off + len(data)] = torch.tensor(list(data), dtype=torch.uint8)
    return u.requires_grad_(t.requires_grad)


def expect(exp, out, edits):
    obj = torch.load(exp, weights_only=False)
    for e in edits:
        key, rest = e.split("@", 1)
        off, text = rest.split("=", 1)
        holder, last = resolve(obj, key)
        holder[last] = edited(holder[last], int(off), text.encode())
    torch.save(obj, out)
    print(f"ok\t{len(edits)} edits made in the expected object")
    return 0


def check(got, exp):
    return ranks_check.check(got, exp)


class Stand:
    """A class torch 1.13 lacks (DTensor's spec, mesh, placements)."""

    def __init__(self, *a, **k):
        self.args = a

    def __setstate__(self, st):
        self.state = st


def rebuild(func, typ, args, state):
    """_rebuild_from_type_v2 of a DTensor: its state (_local_tensor)."""
    out = {"_class": typ}
    for part in state if isinstance(state, tuple) else (state,):
        if isinstance(part, dict):
            out.update(part)
    return out


def stand_in(mod, name):
    return type(name, (Stand,), {"_module": mod})


def lenient_getattr(obj, name):
    """getattr(ShardedTensor, "ProcessGroupState") of a stand-in."""
    return getattr(obj, name, None) or stand_in(repr(obj), name)


class StandInUnpickler(pickle.Unpickler):
    def find_class(self, mod, name):
        if (mod, name) == ("torch._utils", "_rebuild_wrapper_subclass"):
            return lambda *a: None
        if (mod, name) == ("torch._tensor", "_rebuild_from_type_v2"):
            return rebuild
        if name == "getattr" and mod in ("builtins", "__builtin__"):
            return lenient_getattr
        if mod.startswith("torch.distributed"):
            return stand_in(mod, name)
        try:
            return super().find_class(mod, name)
        except (ImportError, AttributeError):
            return stand_in(mod, name)


def load_rank(path, standin=False):
    if TORCH2 and not standin:
        return torch.load(path, weights_only=True)
    mod = types.ModuleType("pickle")
    mod.__dict__.update(pickle.__dict__)
    mod.Unpickler = StandInUnpickler
    if TORCH2:
        return torch.load(path, pickle_module=mod, weights_only=False)
    # torch 1.13's load ignores pickle_module= (it takes the module's own
    # pickle): that one is swapped for the stand-ins' for the call
    import torch.serialization as ser
    saved, ser.pickle = ser.pickle, mod
    try:
        return torch.load(path)
    finally:
        ser.pickle = saved


def local(v):
    """A DTensor's local tensor (either torch's), or the tensor itself."""
    if isinstance(v, dict) and "_local_tensor" in v:
        return v["_local_tensor"]
    return getattr(v, "_local_tensor", v)


def rank_files(d, prefix, n):
    return [f"{d}/{prefix}_world_size_{n}_rank_{r}.pt" for r in range(n)]


def load(d, prefix, n, standin=False):
    bad = []
    for f in rank_files(d, prefix, n):
        try:
            load_rank(f, standin)
            with zipfile.ZipFile(f) as z:
                broken = z.testzip()
            if broken:
                bad.append(f"{f}: record {broken}: bad CRC-32")
        except Exception as e:  # noqa: BLE001 (any failure is the report)
            bad.append(f"{f}: {type(e).__name__}: {e}")
    if bad:
        print(bad[0])
        return 1
    print(f"ok\t{n} rank files load (torch {torch.__version__}"
          f"{', stand-ins' if standin else ''}), every record's CRC-32 right")
    return 0


def copies(d, prefix, n, key, exp, how):
    holder, last = resolve(torch.load(exp, weights_only=False), key)
    full = holder[last]
    bad = 0
    for r, f in enumerate(rank_files(d, prefix, int(n))):
        holder, last = resolve(load_rank(f), key)
        want = full
        if how == "rows2x2":
            k = full.shape[0] // 2
            want = full[(r // 2) * k:(r // 2 + 1) * k]
        why = ranks_check.same(local(holder[last]), want.contiguous(),
                               f"rank {r}: {key}")
        if why:
            print(why)
            bad += 1
    if not bad:
        print(f"ok\tevery rank's copy of {key} holds the edit")
    return 1 if bad else 0


if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "expect":
        sys.exit(expect(a[0], a[1], a[2:]))
    elif cmd == "check":
        sys.exit(check(a[0], a[1]))
    elif cmd == "load":
        sys.exit(load(a[0], a[1], int(a[2]), a[3:] == ["standin"]))
    elif cmd == "copies":
        sys.exit(copies(*a))
    sys.exit(f"unknown command {cmd}")
