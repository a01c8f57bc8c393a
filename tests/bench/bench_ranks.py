#!/usr/bin/python3
"""bench_ranks.py - consolidating a per-rank FSDP2 checkpoint (issue 41):
ptrepack against the Python route, wall time and peak RSS, in one run.

    /usr/bin/python3 tests/bench/bench_ranks.py [BUILD_DIR]

Needs the torch 2.x root (sh scripts/torch2-root.sh; PT_TORCH2_ROOT).
Generates once, in the root's /tmp/ptfs-bench-ranks: four/, what 4 gloo
ranks write with torch.save(model.state_dict()) after fully_shard of
Sequential(8 x Linear(8192, 8192)) (2.1 GB of float32: 537 MB a rank).
Then, warm cache, each contender's best of 2 runs:

  ptrepack 'four/model_world_size_4_rank_*.pt' one.pt
  the Python route: 4 ranks in a gloo group, each torch.load()s its file,
      full_tensor() of every DTensor in place, rank 0 torch.save()s the
      state dict
      (its time is the work's alone, from after the import and the group's
      start to the save's end; its RSS the largest rank's, rank 0's)

and checks that ptdiff -q finds one.pt and the route's ref.pt equal.
Goals: ptrepack at most 0.3x the route's time, at most 64 MiB of RSS.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import TORCH2_ROOT as ROOT, timed_call  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
INNER = "/tmp/ptfs-bench-ranks"
WORK = os.path.join(ROOT, INNER.lstrip("/"))
MB = 1e6
MiB = 1 << 20

GEN = """
import os, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.distributed.fsdp import fully_shard
def run(rank):
    dist.init_process_group("gloo", init_method="file://%(d)s/store",
                            rank=rank, world_size=4)
    with torch.device("meta"):
        m = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192)
                                  for _ in range(8)])
    fully_shard(m)
    m.to_empty(device="cpu")
    g = torch.Generator().manual_seed(rank)
    with torch.no_grad():
        for p in m.parameters():
            p.to_local().normal_(generator=g)
    torch.save(m.state_dict(), "%(d)s/four/model_world_size_4_rank_%%d.pt"
               %% rank)
    dist.destroy_process_group()
if __name__ == "__main__":
    os.makedirs("%(d)s/four", exist_ok=True)
    mp.spawn(run, nprocs=4)
    os.unlink("%(d)s/store")
"""

ROUTE = """
import os, time, torch, torch.distributed as dist, torch.multiprocessing as mp
def run(rank):
    dist.init_process_group("gloo", init_method="file://%(d)s/store2",
                            rank=rank, world_size=4)
    dist.barrier()
    t = time.monotonic()
    sd = torch.load("%(d)s/four/model_world_size_4_rank_%%d.pt" %% rank,
                    weights_only=False)
    for k in sd:    # in place: the OrderedDict and its _metadata kept
        sd[k] = sd[k].full_tensor()
    if rank == 0:
        torch.save(sd, "%(d)s/ref.pt")
        print("call", time.monotonic() - t, flush=True)
    dist.barrier()
    dist.destroy_process_group()
if __name__ == "__main__":
    mp.spawn(run, nprocs=4)
    os.unlink("%(d)s/store2")
"""


def script(name, code):
    """@code written as WORK/@name (spawned ranks import their main)"""
    with open(os.path.join(WORK, name), "w") as f:
        f.write(code % {"d": INNER})
    return ["chroot", ROOT, "python3", INNER + "/" + name]


def timed(argv):
    return timed_call(argv, "bench_ranks")


def best(argv, out):
    runs = []
    for _ in range(2):
        if os.path.exists(out):
            os.unlink(out)
        runs.append(timed(argv))
    return min(r[0] for r in runs), max(r[1] for r in runs)


def main():
    if not os.path.isdir(os.path.join(ROOT, "usr")):
        print("skip: no torch 2.x root at %s (sh scripts/torch2-root.sh)"
              % ROOT)
        return 0
    four = os.path.join(WORK, "four")
    if not os.path.exists(os.path.join(four, "model_world_size_4_rank_3.pt")):
        shutil.rmtree(WORK, ignore_errors=True)
        os.makedirs(WORK)
        subprocess.run(script("gen.py", GEN), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    size = sum(os.path.getsize(os.path.join(four, f))
               for f in os.listdir(four))
    for f in os.listdir(four):
        with open(os.path.join(four, f), "rb") as h:
            while h.read(1 << 24):
                pass
    one = os.path.join(WORK, "one.pt")
    ref = os.path.join(WORK, "ref.pt")
    pt = best([os.path.join(BUILD, "ptrepack"),
               os.path.join(four, "model_world_size_4_rank_*.pt"), one], one)
    route = best(script("route.py", ROUTE), ref)
    same = subprocess.run([os.path.join(BUILD, "ptdiff"), "-q", one, ref])
    print("consolidating a 4-rank FSDP2 checkpoint, %.0f MB in 4 files:"
          % (size / MB))
    print("  ptrepack      %6.2f s  %7.1f MiB peak RSS" % (pt[0], pt[1] / MiB))
    print("  Python route  %6.2f s  %7.1f MiB peak RSS (largest rank)"
          % (route[0], route[1] / MiB))
    print("  ratio         %6.2fx (goal <= 0.3x); RSS %s 64 MiB"
          % (pt[0] / route[0], "<=" if pt[1] <= 64 * MiB else ">"))
    print("  outputs       %s" % ("equal (ptdiff -q)" if not same.returncode
                                  else "DIFFER"))
    for p in (one, ref):
        os.unlink(p)
    return 1 if same.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
