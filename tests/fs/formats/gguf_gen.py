"""gguf_gen.py - GGUF files written by gguf-py (GGUFWriter), the oracle of
tests/fs/formats/gguf.sh: every key/value type, arrays of strings and
numbers, names of odd lengths (unaligned), the plain types and every block
type gguf-py quantizes (the others as random blocks with sane f16
scales), a custom alignment, and big-endian copies.

    usage: python3 gguf_gen.py OUTDIR      (python3 of the torch 2.x root)

Deterministic: the same files every run (seeded).
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES


def kvs(w):
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo \"q\" \\ \n end")
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, -1.25, 3e38])
    w.add_array("t.arr_str", ["a", "", "b c", "\u00fc\u00df", "\"\\\n"])
    w.add_array("t.arr_empty", [])
    w.add_string("general.name", "ptfs-test")


def rnd(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[0] = 0.0
    return x


def quantizable(t):
    try:
        gguf.quants.quantize(np.zeros((1, 256), np.float32), t)
        return True
    except Exception:
        return False


def blocks(rng, t, shape):
    """Random blocks of block type t for a tensor of shape (rows, cols),
    every f16 field set to a small finite value."""
    bs, ts = GGML_QUANT_SIZES[t]
    n = shape[0] * shape[1] // bs
    raw = rng.integers(0, 256, (n, ts), dtype=np.uint8)
    # f16 scales (d, dmin) sit at the start or the end of the block:
    # overwrite the candidates with 0.01-ish values
    h = np.frombuffer(np.float16(0.0123).tobytes(), np.uint8)
    for off in (0, 2, ts - 2, ts - 4):
        raw[:, off:off + 2] = h
    return raw.reshape(shape[0], shape[1] // bs * ts)


BLOCK_TYPES = (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K,
               Q.Q4_K, Q.Q5_K, Q.Q6_K)


def write(path, big=False, align=None, quant=True):
    rng = np.random.default_rng(42)
    e = gguf.GGUFEndian.BIG if big else gguf.GGUFEndian.LITTLE
    w = gguf.GGUFWriter(path, "llama", endianess=e)
    if align:
        w.add_custom_alignment(align)
    kvs(w)
    w.add_tensor("f32.w", rnd(rng, (3, 5)))
    w.add_tensor("f16.odd_name_x", rnd(rng, (7,)).astype(np.float16))
    w.add_tensor("i32.v", np.arange(-4, 5, dtype=np.int32))
    w.add_tensor("f64.s", np.array(2.5, np.float64).reshape(1))
    bf = gguf.quants.quantize(rnd(rng, (2, 8)), Q.BF16)
    w.add_tensor("bf16.w", bf, raw_dtype=Q.BF16)
    if quant:
        w.add_uint32("general.quantization_version", 2)
        for t in BLOCK_TYPES:
            shape = (4, 512)
            if quantizable(t):
                data = gguf.quants.quantize(rnd(rng, shape), t)
            else:
                data = blocks(rng, t, shape)
            w.add_tensor("q." + t.name.lower(), data, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "all.gguf"))
    write(os.path.join(out, "align64.gguf"), align=64)
    write(os.path.join(out, "big.gguf"), big=True)
    write(os.path.join(out, "plain.gguf"), quant=False)


if __name__ == "__main__":
    main()
