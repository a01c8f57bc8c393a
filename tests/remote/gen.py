"""gen.py - the checkpoints the remote tests serve (tests/remote/run.sh),
written by the torch under test.

  gen OUT   (torch 1.13 or 2.x) into OUT:
              model.pt       torch.save (zip): 12 float32 tensors of
                             128x1024 (6 MiB), a float16 and an int64
                             one, a tied pair, values
              model.pt.v2    the same names, shapes and size, other
                             values: what faultproxy.py's "change" mode
                             serves as the object changed in between
              legacy.pt      the same state, the legacy (pre-zip) format
              model.safetensors  float32, float16, bfloat16 and int64
                             tensors, written from the format's
                             definition (1.13 has no safetensors)
              hf_bin/        3 shards pytorch_model-0000N-of-00003.bin
                             and pytorch_model.bin.index.json
              hf_st/         3 shards model-0000N-of-00003.safetensors
                             and model.safetensors.index.json
              econ.json      what the economy limits are made of: each
                             zip's data.pkl record and central directory
                             sizes, each file's size
  dcp OUT   (torch 2.x) OUT/dcp1/ (one process) and OUT/dcp2/ (2 ranks,
            gloo: a DTensor sharded on dim 0, one on dim 1, a replicated
            one, a value), torch.distributed.checkpoint.save
"""
import json
import os
import struct
import sys
import zipfile

import torch


def sample(shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def state(seed):
    sd = {}
    for i in range(12):
        sd["layers.%d.weight" % i] = sample((128, 1024), seed + i)
    sd["norm.half"] = sample((64, 33), seed + 50, torch.float16)
    sd["steps"] = torch.arange(1000, dtype=torch.int64) * (seed + 1)
    sd["embed.weight"] = sample((256, 64), seed + 60)
    sd["lm_head.weight"] = sd["embed.weight"]	# tied
    return sd


def save_st(tensors, path):
    """A safetensors file as the format defines it: 8-byte little-endian
    header length, the JSON header, the data in header order."""
    header, blobs, off = {}, [], 0
    names = {torch.float32: "F32", torch.float16: "F16",
             torch.bfloat16: "BF16", torch.int64: "I64"}
    for name, t in tensors.items():
        t = t.contiguous()
        if t.dtype == torch.bfloat16:
            b = t.view(torch.int16).numpy().tobytes()
        else:
            b = t.numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def shards(sd, n):
    """@sd's keys split into @n shards in order (tied names together)."""
    keys = [k for k in sd if k != "lm_head.weight"]
    per = -(-len(keys) // n)
    out = [dict((k, sd[k]) for k in keys[i * per:(i + 1) * per])
           for i in range(n)]
    return out


def index(folder, stem, ext, parts, total):
    wm = {}
    for i, p in enumerate(parts):
        name = "%s-%05d-of-%05d.%s" % (stem, i + 1, len(parts), ext)
        for k in p:
            wm[k] = name
    with open(os.path.join(folder, "%s.%s.index.json" %
                           ("pytorch_model" if ext == "bin" else "model",
                            ext)), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f,
                  indent=2, sort_keys=True)
    return wm


def zip_econ(path):
    """data.pkl's record (local header + data) and the central
    directory's size, as the zip says."""
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        pkl = [i for i in infos if i.filename.endswith("/data.pkl")][0]
        start = min(i.header_offset for i in infos)
        cd = z.start_dir
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(pkl.header_offset)
        n, m = struct.unpack("<HH", f.read(30)[26:30])
    local = 30 + n + m + pkl.compress_size
    return {"data_pkl": local, "central_directory": size - cd,
            "first_record": start}


def gen(out):
    os.makedirs(out, exist_ok=True)
    sd = state(1)
    sd_obj = dict(sd)
    sd_obj["epoch"] = 7
    sd_obj["cfg"] = {"lr": 0.25, "name": "run-1"}
    torch.save(sd_obj, os.path.join(out, "model.pt"))
    sd2 = dict(state(101))
    sd2["epoch"] = 7
    sd2["cfg"] = {"lr": 0.25, "name": "run-1"}
    # saved as model.pt (the archive's folder is named after the file),
    # so that it is the same size
    os.makedirs(os.path.join(out, "v2"), exist_ok=True)
    torch.save(sd2, os.path.join(out, "v2", "model.pt"))
    os.rename(os.path.join(out, "v2", "model.pt"),
              os.path.join(out, "model.pt.v2"))
    os.rmdir(os.path.join(out, "v2"))
    torch.save(sd_obj, os.path.join(out, "legacy.pt"),
               _use_new_zipfile_serialization=False)
    st = {"a.float": sample((300, 1000), 7), "b.half": sample((77, 500), 8,
          torch.float16), "c.bf16": sample((40, 600), 9, torch.bfloat16),
          "d.int": torch.arange(5000, dtype=torch.int64)}
    save_st(st, os.path.join(out, "model.safetensors"))
    total = sum(t.numel() * t.element_size() for k, t in sd.items()
                if k != "lm_head.weight")
    parts = shards(sd, 3)
    hb = os.path.join(out, "hf_bin")
    hs = os.path.join(out, "hf_st")
    os.makedirs(hb, exist_ok=True)
    os.makedirs(hs, exist_ok=True)
    for i, p in enumerate(parts):
        torch.save(p, os.path.join(hb, "pytorch_model-%05d-of-00003.bin" %
                                   (i + 1)))
        save_st(p, os.path.join(hs, "model-%05d-of-00003.safetensors" %
                                (i + 1)))
    index(hb, "pytorch_model", "bin", parts, total)
    index(hs, "model", "safetensors", parts, total)
    econ = {"model.pt": zip_econ(os.path.join(out, "model.pt"))}
    for i in range(3):
        n = "pytorch_model-%05d-of-00003.bin" % (i + 1)
        econ["hf_bin/" + n] = zip_econ(os.path.join(hb, n))
    sizes = {}
    for top, _, files in os.walk(out):
        for f in files:
            p = os.path.join(top, f)
            sizes[os.path.relpath(p, out)] = os.path.getsize(p)
    econ["sizes"] = sizes
    with open(os.path.join(out, "econ.json"), "w") as f:
        json.dump(econ, f, indent=1, sort_keys=True)
    print("ok\tmodel.pt, legacy.pt, model.safetensors, hf_bin/, hf_st/ "
          "by torch %s" % torch.__version__)


def rank_main(rank, ws, store, out):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=ws)
    mesh = init_device_mesh("cpu", (ws,))

    def dt(t, p):
        return distribute_tensor(t, mesh, p, src_data_rank=None)
    sd = {"model": {"rows": dt(sample((512, 512), 31), [Shard(0)]),
                    "cols": dt(sample((256, 900), 32), [Shard(1)]),
                    "rep": dt(sample((1000,), 33, torch.float16),
                              [Replicate()])},
          "step": 11}
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(out))
    dist.barrier()
    dist.destroy_process_group()


def gen_dcp(out):
    import torch.distributed.checkpoint as dcp
    import torch.multiprocessing as mp
    os.makedirs(out, exist_ok=True)
    sd = {"model": dict(list(state(21).items())[:6]), "epoch": 3,
          "name": "one-rank"}
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(
        os.path.join(out, "dcp1")), no_dist=True)
    store = os.path.join(out, "dcp2.store")
    if os.path.exists(store):
        os.unlink(store)
    mp.start_processes(rank_main, args=(2, store, os.path.join(out, "dcp2")),
                       nprocs=2, join=True, start_method="spawn")
    if os.path.exists(store):
        os.unlink(store)
    print("ok\tdcp1/ (1 rank), dcp2/ (2 ranks) by torch %s" %
          torch.__version__)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "dcp":
        gen_dcp(sys.argv[2])
    else:
        sys.exit("usage: gen.py gen|dcp OUT")
