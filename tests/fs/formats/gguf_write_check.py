"""gguf_write_check.py - the GGUF writer (core/fmt/gguf/gguf_write.c) for
tests/fs/formats/gguf_write.sh, torch 2.x only: gguf-py (GGUFWriter,
GGUFReader, gguf.quants) is the oracle.  Uses gguf_gen.py and formats_check.py beside it.

  gen DIR            write into DIR: st/sd.safetensors (no config.json
                     beside it), arch/sd.safetensors beside a config.json
                     naming only "architectures", sd.pt (the same state
                     dict: float32, float16, bfloat16, float64, int8,
                     int64, 0-d and 1-d, rows that are and are not whole
                     Q8_0 blocks, names the conversion rule keeps in F32,
                     NaN, inf, subnormals), sdbe.pt (its big-endian copy,
                     formats_check.py's), nested.pt (dicts and a list),
                     values.pt (an int beside a tensor), flag.pt (a bool
                     tensor), hf/ (two safetensors shards, an index and a
                     config.json with model_type), gen/ (gguf_gen.py's
                     little- and big-endian files; w.gguf and wbig.gguf:
                     floating ".weight" tensors and a Q8_0 one)
  expect SRC OUT TYPE KV...
                     OUT, what ptrepack wrote from SRC (.safetensors,
                     .pt, a folder) with --gguf-type TYPE ("-": none) and
                     --gguf-kv KV...: byte for byte what GGUFWriter writes
                     for the same key/values and tensors (convert_hf_to_
                     gguf.py's type rule, gguf.quants.quantize of the
                     float32 data), and GGUFReader reads it back with the
                     same key/values (types, values) and tensors (names,
                     types, shapes reversed, bytes)
  same A B KV...     B, ptrepack of GGUF A with --gguf-kv KV...: as
                     GGUFReader reads them, A's key/values in order with
                     KV... replaced or appended, and A's tensors (names,
                     types, shapes, bytes)
  retype A B TYPE    B, ptrepack of GGUF A with --gguf-type TYPE: A's
                     plain floating tensors converted by the rule (in A's
                     byte order), the block-quantized and integer ones
                     the same bytes
  edited A B NEW     B, GGUF A written back through a mount after the
                     edits gguf_write.sh makes (a write, a rename, a
                     removal, a new tensor of NEW's bytes): just those

Prints "ok<TAB>summary" and exits 0, or the problems and exits 1.
"""
import json
import logging
import os
import sys
import warnings

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
_stdout = os.dup(1)
import formats_check  # noqa: E402  (big_endian_copy)
os.dup2(_stdout, 1)  # which that import pointed at stderr, for its own use
os.close(_stdout)
import gguf_gen  # noqa: E402  (the GGUF fixtures, gguf-py written)

# GGUFWriter's notes (a key set twice) and numpy's on f16 overflow, which
# the data holds on purpose
logging.getLogger("gguf").setLevel(logging.ERROR)
warnings.simplefilter("ignore", RuntimeWarning)

TYPES = {"u8": V.UINT8, "i8": V.INT8, "u16": V.UINT16, "i16": V.INT16,
         "u32": V.UINT32, "i32": V.INT32, "u64": V.UINT64, "i64": V.INT64,
         "f32": V.FLOAT32, "f64": V.FLOAT64, "bool": V.BOOL,
         "string": V.STRING}
PLAIN = {torch.float32: Q.F32, torch.float16: Q.F16, torch.float64: Q.F64,
         torch.bfloat16: Q.BF16, torch.int8: Q.I8, torch.int16: Q.I16,
         torch.int32: Q.I32, torch.int64: Q.I64}
OUTTYPE = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0}
# convert_hf_to_gguf.py's kinds kept in F32 (gguf-py TENSOR_NAMES)
ALWAYS_F32 = ["blk.{bid}.ffn_gate_inp", "blk.{bid}.ffn_gate_inp_shexp",
              "position_embd", "token_types", "blk.{bid}.ssm_conv1d",
              "blk.{bid}.shortconv.conv", "blk.{bid}.time_mix_first",
              "blk.{bid}.time_mix_w1", "blk.{bid}.time_mix_w2",
              "blk.{bid}.time_mix_decay_w1", "blk.{bid}.time_mix_decay_w2",
              "blk.{bid}.time_mix_lerp_fused", "posnet.{bid}.norm1",
              "posnet.{bid}.norm2", "v.position_embd", "a.position_embd",
              "blk.{bid}.altup_correct_coef", "blk.{bid}.altup_predict_coef",
              "blk.{bid}.ssm_conv1d_q", "blk.{bid}.ssm_conv1d_k",
              "blk.{bid}.ssm_conv1d_v"]


def state_dict():
    g = torch.Generator().manual_seed(11)
    emb = torch.randn(16, 64, generator=g)
    up = torch.randn(6, 48, generator=g).half()
    # NaN, infinities, subnormals, f16 overflow, -0: only where Q8_0
    # does not go (rows of 48 fall back to F16)
    up[0, :6] = torch.tensor([float("nan"), float("inf"), -float("inf"),
                              1e-7, 6e-8, -0.0]).half()
    f32up = torch.randn(4, 48, generator=g)
    f32up[0, :6] = torch.tensor([float("nan"), 1e-40, -1e-45, 65520.0,
                                 3.4e38, -0.0])
    return {
        "token_embd.weight": emb,
        "blk.0.attn_q.weight": torch.randn(32, 64, generator=g).to(
            torch.bfloat16),
        "blk.0.ffn_up.weight": up,
        "blk.0.ffn_down.weight": f32up,
        "blk.0.attn_norm.weight": torch.randn(64, generator=g),
        "blk.0.ffn_gate_inp.weight": torch.randn(4, 64, generator=g),
        "blk.0.x_norm.weight": torch.randn(2, 32, generator=g),
        "output.bias2d": torch.randn(2, 32, generator=g),
        "f64.weight": torch.randn(3, 32, generator=g).double(),
        "lora.lora_a": torch.randn(2, 64, generator=g),
        "pos": torch.arange(-3, 5, dtype=torch.int64),
        "i8.weight": torch.arange(-32, 32, dtype=torch.int8).reshape(2, 32),
        "scalar": torch.tensor(2.5),
        "cube.weight": torch.randn(2, 3, 32, generator=g),
    }


def nested():
    g = torch.Generator().manual_seed(12)
    return {"model": {"layers": [{"w.weight": torch.randn(4, 32, generator=g),
                                  "b": torch.randn(4, generator=g)}
                                 for _ in range(2)],
                      "norm": {"weight": torch.ones(32)}},
            "lm_head.weight": torch.randn(8, 32, generator=g).half()}


def write_hf(d):
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(13)
    # one dtype, names in order: shard order, header order and the
    # index's sorted order agree
    sd = {"a.weight": torch.randn(4, 32, generator=g),
          "b.weight": torch.randn(8, 32, generator=g),
          "c.weight": torch.randn(2, 64, generator=g),
          "d.bias": torch.randn(2, generator=g)}
    os.makedirs(d, exist_ok=True)
    wm = {}
    for i, keys in enumerate((["a.weight", "b.weight"],
                              ["c.weight", "d.bias"])):
        name = "model-%05d-of-00002.safetensors" % (i + 1)
        save_file({k: sd[k] for k in keys}, os.path.join(d, name),
                  metadata={"format": "pt"})
        wm.update({k: name for k in keys})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(
            t.numel() * t.element_size() for t in sd.values())},
            "weight_map": wm}, f, indent=2, sort_keys=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": 32}, f)


def gen(d):
    from safetensors.torch import save_file
    sd = state_dict()
    for sub in ("st", "arch"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
        save_file(sd, os.path.join(d, sub, "sd.safetensors"))
    with open(os.path.join(d, "arch", "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"]}, f)
    torch.save(sd, os.path.join(d, "sd.pt"))
    formats_check.big_endian_copy(os.path.join(d, "sd.pt"),
                                  os.path.join(d, "sdbe.pt"))
    torch.save(nested(), os.path.join(d, "nested.pt"))
    torch.save({"w": torch.ones(2, 32), "epoch": 3},
               os.path.join(d, "values.pt"))
    torch.save({"w": torch.ones(2, 32), "flag": torch.tensor([True])},
               os.path.join(d, "flag.pt"))
    write_hf(os.path.join(d, "hf"))
    g = os.path.join(d, "gen")
    os.makedirs(g, exist_ok=True)
    gguf_gen.write(os.path.join(g, "all.gguf"))
    gguf_gen.write(os.path.join(g, "align64.gguf"), align=64)
    gguf_gen.write(os.path.join(g, "big.gguf"), big=True)
    gguf_gen.write(os.path.join(g, "plain.gguf"), quant=False)
    gguf_gen.write(os.path.join(g, "bigplain.gguf"), big=True, quant=False)
    for name, big in (("w.gguf", False), ("wbig.gguf", True)):
        weights_gguf(os.path.join(g, name), big)
    return "sd.safetensors, sd.pt, sdbe.pt, nested.pt, values.pt, flag.pt, hf/, gen/"


def weights_gguf(path, big):
    """A GGUF of floating ".weight" tensors the type rule converts, one
    Q8_0 tensor it keeps, in either byte order."""
    rng = np.random.default_rng(7)
    e = gguf.GGUFEndian.BIG if big else gguf.GGUFEndian.LITTLE
    w = gguf.GGUFWriter(path, "llama", endianess=e)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    x[0, :2] = [1e-40, -0.0]
    w.add_tensor("a.weight", x)
    w.add_tensor("b.weight", x.astype(np.float16))
    w.add_tensor("c.weight", gguf.quants.quantize(x, Q.BF16),
                 raw_dtype=Q.BF16)
    # NaN and infinities where Q8_0 does not go (rows of 48: F16)
    y = x[:, :48].copy()
    y[1, :3] = [np.nan, np.inf, -np.inf]
    w.add_tensor("d.weight", y.astype(np.float64))
    w.add_tensor("e.weight", y)
    w.add_tensor("blk.1.attn_norm.weight", x[0].copy())
    w.add_uint32("general.quantization_version", 2)
    w.add_tensor("q.weight", gguf.quants.quantize(x * 0.5, Q.Q8_0),
                 raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------- inputs

def flatten(obj, pre, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, pre + [str(k)], out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, pre + [str(i)], out)
    else:
        out[".".join(pre)] = obj


def st_tensors(path):
    """A safetensors file's tensors in its header's order."""
    from safetensors.torch import load_file
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        head = json.loads(f.read(n))
    sd = load_file(path)
    return {k: sd[k] for k in head if k != "__metadata__"}


def tensors_of(src):
    if os.path.isdir(src):
        with open(os.path.join(src, "model.safetensors.index.json")) as f:
            wm = json.load(f)["weight_map"]
        out = {}
        for shard in sorted(set(wm.values())):
            out.update(st_tensors(os.path.join(src, shard)))
        return out
    if src.endswith(".safetensors"):
        return st_tensors(src)
    out = {}
    flatten(torch.load(src, weights_only=True), [], out)
    return out


def parse_kv(kv):
    key, val = kv.split("=", 1)
    typ = "string"
    if ":" in key:
        key, typ = key.rsplit(":", 1)
    vt = TYPES[typ]
    if vt == V.STRING:
        v = val
    elif vt == V.BOOL:
        v = val.lower() in ("true", "1")
    elif vt in (V.FLOAT32, V.FLOAT64):
        v = float(val)
    else:
        v = int(val)
    return key, v, vt


# ---------------------------------------------------------------- the rule

def match_bid(name, pat):
    head, _, tail = pat.partition("{bid}")
    if not _:
        return name == pat
    if not name.startswith(head):
        return False
    rest = name[len(head):]
    n = len(rest) - len(rest.lstrip("0123456789"))
    return n > 0 and rest[n:] == tail


def qtype_of(name, t, want):
    """convert_hf_to_gguf.py's prepare_tensors() for a floating tensor."""
    if want is None or not t.dtype.is_floating_point:
        return PLAIN[t.dtype]
    if t.dim() <= 1 or name.endswith("_norm.weight"):
        return Q.F32
    if any(match_bid(name, p + ".weight") for p in ALWAYS_F32) or \
            name[-7:] not in (".weight", ".lora_a", ".lora_b"):
        return Q.F32
    if want == Q.Q8_0 and t.shape[-1] % 32:
        return Q.F16  # QuantError: "falling back to F16"
    return want


def raw_u8(t):
    """@t's bytes as uint8, the last size in bytes (BF16 as gguf-py)."""
    b = t.contiguous().view(torch.uint8) if t.dim() else \
        t.reshape(1).view(torch.uint8)
    return b.numpy()


def oracle(path, named, want, kvs):
    """What GGUFWriter writes for these key/values and tensors."""
    kv = [parse_kv(k) for k in kvs]
    arch = [v for k, v, _ in kv if k == "general.architecture"]
    w = gguf.GGUFWriter(path, arch[0] if arch else "llama")
    for k, v, vt in kv:
        if k == "general.alignment":
            w.add_custom_alignment(v)
        else:
            w.add_key_value(k, v, vt)
    expect = {}
    quantized = False
    for name, t in named.items():
        q = qtype_of(name, t, want)
        if q == PLAIN[t.dtype]:  # copied: its own bytes
            data = raw_u8(t) if q == Q.BF16 else t.numpy()
        else:
            data = gguf.quants.quantize(t.float().numpy(), q)
            quantized |= q == Q.Q8_0
        w.add_tensor(name, data, raw_dtype=q)
        expect[name] = (q, list(t.shape), data.tobytes())
    if quantized and "general.quantization_version" not in w.kv_data[0]:
        w.add_quantization_version(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expect, [(k, vt, v) for k, v, vt in kv]


def expect(src, out, typ, *kvs):
    bad = []
    named = tensors_of(src)
    want = None if typ == "-" else OUTTYPE[typ]
    ref = out + ".oracle"
    exp, kv = oracle(ref, named, want, kvs)
    got, ora = open(out, "rb").read(), open(ref, "rb").read()
    if got != ora:
        i = next((i for i, (x, y) in enumerate(zip(got, ora)) if x != y),
                 min(len(got), len(ora)))
        bad.append("%s: %d bytes, GGUFWriter's %d: they differ from "
                   "offset %d (0x%x)" % (out, len(got), len(ora), i, i))
    r = gguf.GGUFReader(out)
    fields = {k: f for k, f in r.fields.items() if not k.startswith("GGUF.")}
    kvw = dict((k, (vt, v)) for k, vt, v in kv)
    for k, (vt, v) in kvw.items():
        f = fields.get(k)
        if f is None:
            bad.append("key %s missing" % k)
        elif f.types[0] != vt or (f.contents() != v and not (
                vt in (V.FLOAT32,) and abs(f.contents() - v) <=
                abs(v) * 1e-7)):
            bad.append("key %s: %s %r, expected %s %r" % (
                k, f.types[0].name, f.contents(), vt.name, v))
    names = [t.name for t in r.tensors]
    if names != list(exp):
        bad.append("tensors %s, expected %s" % (names[:6], list(exp)[:6]))
    for t in r.tensors:
        if t.name not in exp:
            continue
        q, shape, data = exp[t.name]
        if t.tensor_type != q:
            bad.append("%s: %s, expected %s" % (t.name, t.tensor_type.name,
                                                q.name))
        if [int(x) for x in reversed(t.shape)] != shape and shape:
            bad.append("%s: shape %s reversed, expected %s" % (
                t.name, list(t.shape), shape))
        if bytes(t.data.tobytes()) != data:
            bad.append("%s: its bytes differ" % t.name)
    os.unlink(ref)
    kinds = sorted(set(q.name for q, _, _ in exp.values()))
    return bad, "%d tensors (%s), %d keys: GGUFWriter's bytes" % (
        len(exp), " ".join(kinds), len(fields))


# ---------------------------------------------------------------- GGUF in

def fields_of(r):
    return [(k, [t.name for t in f.types], f.contents())
            for k, f in r.fields.items() if not k.startswith("GGUF.")]


def same(a, b, *kvs):
    bad = []
    ra, rb = gguf.GGUFReader(a), gguf.GGUFReader(b)
    want = fields_of(ra)
    for k, v, vt in (parse_kv(x) for x in kvs):
        ent = (k, [vt.name], v)
        at = [i for i, e in enumerate(want) if e[0] == k]
        if at:
            want[at[0]] = ent
        else:
            want.append(ent)
    got = fields_of(rb)
    if [(k, t) for k, t, _ in got] != [(k, t) for k, t, _ in want]:
        bad.append("keys %s, expected %s" % ([g[:2] for g in got][-4:],
                                              [w[:2] for w in want][-4:]))
    for (k, t, v), (_, _, wv) in zip(got, want):
        if v != wv and not (t == ["FLOAT32"] and abs(v - wv) <= 1e-6):
            bad.append("key %s: %r, expected %r" % (k, v, wv))
    if rb.byte_order != ra.byte_order:
        bad.append("byte order %s, expected %s" % (rb.byte_order,
                                                   ra.byte_order))
    ta = [(t.name, t.tensor_type, list(t.shape), t.data.tobytes())
          for t in ra.tensors]
    tb = [(t.name, t.tensor_type, list(t.shape), t.data.tobytes())
          for t in rb.tensors]
    if ta != tb:
        bad.append("tensors differ: %s" % [x[0] for x, y in zip(ta, tb)
                                           if x != y][:4])
    return bad, "%d keys, %d tensors as GGUFReader reads them" % (
        len(got), len(tb))


def as_torch(t):
    """GGUFReader tensor @t as a float32 torch tensor of its shape."""
    shape = [int(x) for x in reversed(t.shape)]
    if t.tensor_type == Q.BF16:
        f = gguf.quants.dequantize(t.data, Q.BF16)
    else:
        f = np.asarray(t.data).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(f).reshape(shape))


def retype(a, b, typ):
    bad = []
    want = OUTTYPE[typ]
    ra, rb = gguf.GGUFReader(a), gguf.GGUFReader(b)
    big = ra.byte_order == "S"
    kinds = set()
    for x, y in zip(ra.tensors, rb.tensors):
        plainf = x.tensor_type in (Q.F32, Q.F16, Q.BF16, Q.F64)
        if not plainf:
            q, data = x.tensor_type, x.data.tobytes()
        else:
            t = as_torch(x)
            q = qtype_of(x.name, t, want)
            arr = gguf.quants.quantize(t.numpy(), q)
            if big and q in (Q.F32, Q.F16):
                arr = arr.byteswap()
            data = arr.tobytes()
        kinds.add(q.name)
        if y.name != x.name or y.tensor_type != q:
            bad.append("%s: %s %s, expected %s" % (
                x.name, y.name, y.tensor_type.name, q.name))
        elif list(y.shape) != list(x.shape):
            bad.append("%s: shape %s, expected %s" % (x.name, list(y.shape),
                                                      list(x.shape)))
        elif y.data.tobytes() != data:
            bad.append("%s: its bytes differ from quantize()'s" % x.name)
    if len(ra.tensors) != len(rb.tensors):
        bad.append("%d tensors, expected %d" % (len(rb.tensors),
                                                len(ra.tensors)))
    return bad, "%d tensors: %s" % (len(rb.tensors), " ".join(sorted(kinds)))


def edited(a, b, new):
    """B, GGUF A written back after the mount's edits (gguf_write.sh):
    4 bytes "ABCD" at 4 of f32.w, q.q4_0 renamed to renamed.q4_0, i32.v
    removed, newt added from the bytes of file NEW as float32 (4, 4)."""
    bad = []
    ra, rb = gguf.GGUFReader(a), gguf.GGUFReader(b)
    with open(new, "rb") as f:
        nb = f.read()
    want = []
    for t in ra.tensors:
        data = t.data.tobytes()
        if t.name == "i32.v":
            continue
        if t.name == "f32.w":
            data = data[:4] + b"ABCD" + data[8:]
        name = "renamed.q4_0" if t.name == "q.q4_0" else t.name
        want.append((name, t.tensor_type.name, list(t.shape), data))
    want.append(("newt", "F32", [4, 4], nb))
    got = [(t.name, t.tensor_type.name, [int(x) for x in t.shape],
            t.data.tobytes()) for t in rb.tensors]
    if [g[:3] for g in got] != [w[:3] for w in want]:
        bad.append("tensors %s, expected %s" % ([g[:2] for g in got][-3:],
                                                [w[:2] for w in want][-3:]))
    bad += ["%s: its bytes differ" % g[0] for g, w in zip(got, want)
            if g[3] != w[3]]
    if fields_of(ra) != fields_of(rb) or ra.byte_order != rb.byte_order:
        bad.append("the key/values or the byte order changed")
    return bad, "%d tensors: a write, a rename, a removal, a new one" % (
        len(got))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "gen":
        print("ok\t" + gen(args[0]))
        return 0
    bad, what = {"expect": expect, "same": same, "retype": retype,
                 "edited": edited}[cmd](*args)
    if bad:
        print("\n".join(bad))
        return 1
    print("ok\t" + what)
    return 0


if __name__ == "__main__":
    sys.exit(main())
