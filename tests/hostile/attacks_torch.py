"""attacks_torch.py - the torch half of tests/hostile/attacks.sh, run by the
torch under test (Debian's 1.13, or python3 in the torch 2.x root).

  gen OUTDIR
        files this torch writes itself, none with a payload: OUTDIR/NAME
        and OUTDIR/manifest.tsv in attacks.py's columns (role benign)
  truth MANIFEST BASE MARKS OUT
        the ground truth of every case of MANIFEST (its paths relative to
        BASE): each load in a child process of its own (forked: torch is
        imported once), with PTFS_CANARY set to a marker of its own under
        MARKS and the working directory a fresh one (the TorchScript case
        writes its marker there); the payload ran iff a marker exists
        once the child and everything it started are gone.  Loads: v1 /
        v2 torch.load(weights_only=False) and v1w / v2w weights_only=True
        (the first or second by this torch's version); a Hugging Face
        folder or per-rank set loads every shard (each on its own), a
        DCP directory is FileSystemReader.read_metadata() (a plain
        pickle.load; 1.13 has no torch.distributed here, so
        pickle.load as that reader does; DCP has no weights_only mode).
        OUT: NAME <TAB> LOAD <TAB> ran|- <TAB> what happened, one line a
        load.
"""
import collections
import json
import os
import pickle
import signal
import sys
import time
import warnings

import torch

warnings.filterwarnings("ignore")
V2 = int(torch.__version__.split(".")[0]) >= 2
TAG = "v2" if V2 else "v1"
TIMEOUT = 20
JOBS = 4


# ------------------------------------------------------------------- gen
def gen(out):
    os.makedirs(out, exist_ok=True)
    rows = []

    def save(name, technique, obj, **kw):
        torch.save(obj, os.path.join(out, name + ".pt"), **kw)
        rows.append((name, "file", name + ".pt", technique))

    torch.manual_seed(44)
    save("dtypes", "a state dict of several dtypes", collections.OrderedDict(
        (str(dt).split(".")[1], torch.arange(6).to(dt).reshape(2, 3))
        for dt in (torch.float32, torch.float64, torch.float16,
                   torch.bfloat16, torch.int64, torch.int32, torch.int16,
                   torch.int8, torch.uint8, torch.bool, torch.complex64)))
    save("nested", "nested dicts, lists and tuples of tensors and python "
         "values", {"a": [torch.ones(2), {"b": (torch.zeros(3), 7)}],
                    "cfg": {"lr": 0.1, "name": "run", "steps": [1, 2, 3],
                            "none": None, "flag": True},
                    "t": (1, 2.5, "x")})
    p = torch.nn.Parameter(torch.randn(3, 2))
    save("parameters", "Parameters and a tensor that requires grad",
         {"p": p, "frozen": torch.nn.Parameter(torch.ones(2),
                                               requires_grad=False),
          "g": torch.ones(3, requires_grad=True)})
    save("legacy", "the legacy stream (_use_new_zipfile_serialization="
         "False)", {"w": torch.randn(4, 4), "v": torch.arange(5),
                    "half": torch.randn(4, 4)[::2]},
         _use_new_zipfile_serialization=False)
    sparse = {"coo": torch.sparse_coo_tensor(
        torch.tensor([[0, 1, 2], [2, 0, 1]]), torch.tensor([1., 2., 3.]),
        (3, 3))}
    if V2:
        sparse["csr"] = torch.eye(3).to_sparse_csr()
    save("sparse", "sparse tensors", sparse)
    save("quantized", "quantized tensors (per tensor, per channel)", {
        "qt": torch.quantize_per_tensor(torch.randn(4), 0.1, 3,
                                        torch.quint8),
        "qc": torch.quantize_per_channel(
            torch.randn(2, 3), torch.tensor([0.1, 0.2]),
            torch.tensor([0, 1]), 0, torch.qint8)})
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                              torch.nn.Linear(4, 2))
    net(torch.randn(5, 3))
    save("module_state_dict", "a module's state_dict: buffers, "
         "num_batches_tracked, _metadata", net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(5, 3)).sum().backward()
    opt.step()
    save("optimizer", "a model and its Adam state after one step",
         {"model": net.state_dict(), "optimizer": opt.state_dict(),
          "epoch": 3})
    base = torch.arange(24, dtype=torch.float32)
    emb = torch.nn.Embedding(5, 3)
    save("views_tied", "views of one storage, a transpose, tied weights",
         {"base": base, "odd": base[1::2], "t": base.view(4, 6).t(),
          "emb": emb.weight, "head": emb.weight})
    save("scalars_empty", "0-d, empty and 1-element tensors",
         {"s": torch.tensor(3.5), "i": torch.tensor(7), "e": torch.empty(0),
          "e2": torch.empty(0, 4), "one": torch.ones(1)})
    save("torch_values", "torch.Size, dtypes and devices as values",
         {"size": torch.Size([2, 3]), "dtype": torch.float16,
          "device": torch.device("cpu"), "t": torch.ones(2)})
    save("rng_state", "torch's RNG state", {"rng": torch.get_rng_state(),
                                            "seed": torch.initial_seed()})
    if V2:
        save("new_dtypes", "float8, uint16/32/64 (torch >= 2.3)",
             {"f8": torch.ones(4).to(torch.float8_e4m3fn),
              "f8b": torch.ones(4).to(torch.float8_e5m2),
              "u16": torch.arange(4).to(torch.uint16),
              "u32": torch.arange(4).to(torch.uint32)})
    # a Hugging Face sharded folder, as save_pretrained writes .bin shards
    d = os.path.join(out, "hf")
    os.makedirs(d, exist_ok=True)
    sd = net.state_dict()
    keys = list(sd)
    half = len(keys) // 2
    wm = {}
    total = sum(t.numel() * t.element_size() for t in sd.values())
    for i, part in enumerate((keys[:half], keys[half:])):
        shard = "pytorch_model-%05d-of-00002.bin" % (i + 1)
        torch.save({k: sd[k] for k in part}, os.path.join(d, shard))
        wm.update({k: shard for k in part})
    with open(os.path.join(d, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f,
                  indent=2, sort_keys=True)
    rows.append(("hf", "hf", "hf", "a Hugging Face sharded folder"))
    # per-rank files of plain (replicated) tensors
    d = os.path.join(out, "ranks")
    os.makedirs(d, exist_ok=True)
    for r in range(2):
        torch.save({"w": torch.ones(3), "step": 5},
                   os.path.join(d, "model_world_size_2_rank_%d.pt" % r))
    rows.append(("ranks", "ranks", "ranks", "per-rank files"))
    if V2:
        import torch.distributed.checkpoint as dcp
        d = os.path.join(out, "dcp")
        dcp.save({"w": torch.randn(3, 4), "step": 9, "name": "x"},
                 checkpoint_id=d)
        rows.append(("dcp", "dcp", "dcp", "a DCP directory "
                     "(torch.distributed.checkpoint.save, one process)"))
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        for name, kind, path, technique in rows:
            f.write("\t".join((name, kind, path, "benign", "-", "-",
                               "torch %s" % torch.__version__,
                               technique)) + "\n")


# ----------------------------------------------------------------- truth
def shards(kind, path):
    if kind == "hf":
        with open(os.path.join(path, "pytorch_model.bin.index.json")) as f:
            wm = json.load(f)["weight_map"]
        return [os.path.join(path, s) for s in sorted(set(wm.values()))]
    if kind == "ranks":
        return [os.path.join(path, n) for n in sorted(os.listdir(path))
                if n.endswith(".pt")]
    return [path]


def load(kind, path, wo):
    if kind == "dcp":
        if V2:
            from torch.distributed.checkpoint import FileSystemReader
            FileSystemReader(path).read_metadata()
        else:
            with open(os.path.join(path, ".metadata"), "rb") as f:
                pickle.load(f)
        return "read_metadata" if V2 else "pickle.load of .metadata"
    errs = []
    for s in shards(kind, path):
        try:
            torch.load(s, map_location="cpu", weights_only=wo)
        except BaseException as e:      # noqa: a payload may raise anything
            errs.append("%s: %s" % (type(e).__name__, str(e).split("\n")[0]))
    if errs:
        raise RuntimeError("; ".join(errs))
    return "loaded"


def child(kind, path, wo, marker, cwd, result):
    try:
        run_child(kind, path, wo, marker, cwd, result)
    finally:
        os._exit(0)


def run_child(kind, path, wo, marker, cwd, result):
    os.setsid()
    os.environ["PTFS_CANARY"] = marker
    os.chdir(cwd)
    fd = os.open(os.devnull, os.O_RDWR)
    for k in (0, 1, 2):
        os.dup2(fd, k)
    signal.alarm(TIMEOUT)
    try:
        what = load(kind, path, wo)
    except BaseException as e:          # noqa: SystemExit from a payload too
        what = "error: %s: %s" % (type(e).__name__,
                                  str(e).split("\n")[0][:160])
    with open(result, "w") as f:
        f.write(what.replace("\t", " "))
    # what the payload started (Popen) must end before the verdict
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue


def truth(manifest, base, marks, out):
    base, marks = os.path.abspath(base), os.path.abspath(marks)
    loads = [TAG, TAG + "w"]
    jobs = []
    with open(manifest) as f:
        for line in f:
            name, kind, path = line.rstrip("\n").split("\t")[:3]
            for ld in loads:
                jobs.append((name, kind, os.path.join(base, path), ld))
    running = {}
    results = []
    while jobs or running:
        while jobs and len(running) < JOBS:
            name, kind, path, ld = jobs.pop(0)
            d = os.path.join(marks, ld)
            os.makedirs(os.path.join(d, name + ".cwd"), exist_ok=True)
            marker = os.path.join(d, name + ".marker")
            cwd = os.path.join(d, name + ".cwd")
            result = os.path.join(d, name + ".result")
            if kind == "dcp" and ld.endswith("w"):
                results.append((name, ld, "-", "n/a (DCP has no "
                                "weights_only mode)"))
                continue
            pid = os.fork()
            if pid == 0:
                child(kind, path, ld.endswith("w"), marker, cwd, result)
            running[pid] = (name, ld, marker, cwd, result, time.time())
        for pid, (name, ld, marker, cwd, result, t0) in list(running.items()):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got == 0:
                if time.time() - t0 > TIMEOUT + 5:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    os.waitpid(pid, 0)
                    status = -1
                else:
                    continue
            del running[pid]
            ran = os.path.exists(marker) or os.path.exists(
                os.path.join(cwd, "ptfs-canary"))
            if status == -1:
                what = "timeout (killed after %d s)" % (TIMEOUT + 5)
            elif os.WIFSIGNALED(status) and os.WTERMSIG(status) == 14:
                what = "timeout (its alarm after %d s)" % TIMEOUT
            elif os.WIFSIGNALED(status):
                what = "crash: signal %d" % os.WTERMSIG(status)
            elif os.path.exists(result):
                with open(result) as f:
                    what = f.read()
            else:
                what = "no result (exit %d)" % os.WEXITSTATUS(status)
            results.append((name, ld, "ran" if ran else "-", what))
        time.sleep(0.01)
    with open(out, "w") as f:
        for r in sorted(results):
            f.write("\t".join(r) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif sys.argv[1] == "truth":
        truth(*sys.argv[2:6])
    else:
        sys.exit("usage: attacks_torch.py gen OUTDIR | truth MANIFEST BASE "
                 "MARKS OUT")
