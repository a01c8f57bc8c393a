#!/usr/bin/env python3
# gguf_vectors.py - make tests/data/gguf_vectors.bin, the vectors
# test_gguf_types.c checks core/fmt/gguf's codecs against: gguf-py's
# gguf.quants.quantize / dequantize (the oracle) on seeded random inputs
# with zeros, ties, tiny and huge values, zero blocks and, for the float
# types, NaN and Inf.  Made with the torch 2.x root's gguf-py and numpy:
#
#   cp tests/unit/gguf_vectors.py /var/cache/ptfs/torch2-root/tmp/
#   chroot /var/cache/ptfs/torch2-root python3 /tmp/gguf_vectors.py \
#       /tmp/gguf_vectors.bin
#   cp /var/cache/ptfs/torch2-root/tmp/gguf_vectors.bin tests/data/
#
# Layout, all little-endian:
#
#   OFFSET  SIZE      FIELD
#   0       8         magic "PTGGUFV1"
#   8       4         T: entries of constants.py's GGML_QUANT_SIZES
#   12      4         R: records
#   16      T*20      table: u32 id, u32 block, u32 bytes, char name[8]
#                     (NUL-padded gguf-py name)
#   ...     R times   record:
#             4         u32 type id
#             4         u32 N: blocks
#             4         u32 flags: bit 0 = the input follows
#             N*bytes   raw blocks: gguf.quants.quantize(input) when bit 0
#                       is set, else random bytes (f16 scales made finite)
#             N*block*4 f32: gguf.quants.dequantize(raw)
#             N*block*4 f32 input (when bit 0 is set)
#
# gguf-py has no dequantization for I8..I64 and F64: those records hold
# numpy's astype(np.float32) of the raw values.  Nor for Q8_K: its record
# holds numpy's d * qs in float32, as ggml's dequantize_row_q8_K does it.
import struct
import sys
import warnings

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

warnings.simplefilter("ignore")		# overflow to inf is wanted here
rng = np.random.default_rng(20240611)
records = []


def f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def add(qtype, raw, deq, inp=None):
    block, size = GGML_QUANT_SIZES[qtype]
    raw = np.ascontiguousarray(raw).view(np.uint8).ravel()
    deq = np.ascontiguousarray(deq, dtype=np.float32).ravel()
    assert raw.size % size == 0
    n = raw.size // size
    assert deq.size == n * block, (qtype, deq.size, n * block)
    rec = struct.pack("<III", int(qtype), n, 0 if inp is None else 1)
    rec += raw.tobytes() + deq.astype("<f4").tobytes()
    if inp is not None:
        inp = np.ascontiguousarray(inp, dtype=np.float32).ravel()
        assert inp.size == n * block
        rec += inp.astype("<f4").tobytes()
    records.append(rec)


# ---- float inputs

# float32 patterns where float16 and bfloat16 rounding has its traps
SPECIAL = f32([
    0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa00000,
    0x7f802000, 0x7fffe000, 0x7fbfffff, 0x7f801fff, 0xffffffff,
    0x7f800000, 0xff800000, 0x00000000, 0x80000000, 0x7f7fffff,
    0xff7fffff, 0x00000001, 0x80000001, 0x007fffff, 0x00800000,
    0x477fe000, 0x477fefff, 0x477ff000, 0x477fffff,	# f16 max, ties
    0x33000000, 0x33000001, 0x33800000, 0x33c00000,	# f16 subnormals
    0x387fc000, 0x38800000, 0x3f808000, 0x3f818000,	# f16/bf16 ties
    0x3f807fff, 0x3f808001, 0x7f7f8000, 0x7f7f7fff,
])


def float_input(n):
    """SPECIAL, random bit patterns (some NaN), then values of every scale."""
    bits = rng.integers(0, 1 << 32, size=n // 4, dtype=np.uint64)
    bits = f32(bits.astype(np.uint32))
    scale = 10.0 ** rng.uniform(-44, 38, size=n)
    vals = (rng.standard_normal(n) * scale).astype(np.float32)
    return np.concatenate([SPECIAL, bits, vals])[:n]


def block_input(block, nblocks, finite=True):
    """Blocks for the quantizers: random at many scales, a zero block,
    tiny and huge values, one non-zero element, a constant block, ties at
    .5 after scaling, equal magnitudes of both signs, and (unless
    @finite) blocks with a NaN or an Inf; 11 blocks or more hold them
    all."""
    x = rng.standard_normal((max(nblocks, 11), block)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-8, 8, size=(x.shape[0], 1))).astype(np.float32)
    x[0] = 0
    x[1] *= np.float32(1e-40)
    x[2] *= np.float32(1e37)
    x[2, 3] = np.float32(3.4e38)
    x[3] = 0
    x[3, 5] = -2.5
    x[4] = -0.75
    k = np.arange(block, dtype=np.float32) - block // 2
    x[5] = (k + np.float32(0.5)) / 8
    x[5, 0] = np.float32(127 / 8)
    x[6] = k
    x[6, 0], x[6, 1] = 9, -9
    x[7] = 0
    x[7, 2] = np.float32(-0.0)
    x[7, 4] = np.float32(6e-39)
    if not finite:
        x[8, 7] = np.nan
        x[9, 1] = np.inf
        x[10, 3] = f32(0x7fa00001)
    # fewer blocks: the first few patterns, then the last random one
    if nblocks < x.shape[0]:
        x = np.concatenate([x[:nblocks - 1], x[-1:]])
    return x


# ---- plain types

for qtype, n in ((T.F32, 1024), (T.F16, 2048), (T.BF16, 2048)):
    inp = float_input(n)
    raw = gguf.quants.quantize(inp, qtype)
    add(qtype, raw, gguf.quants.dequantize(raw, qtype), inp)

# every float16 exponent 31 and 0 pattern, of both signs, and random ones
h = np.concatenate([np.arange(0x7c00, 0x8000), np.arange(0xfc00, 0x10000),
                    np.arange(0, 0x400, 4), np.arange(0x8000, 0x8400, 4),
                    rng.integers(0, 1 << 16, size=256)]).astype(np.uint16)
add(T.F16, h, gguf.quants.dequantize(h.view(np.uint8), T.F16))
b = rng.integers(0, 1 << 16, size=1024).astype(np.uint16)
b[:256] = 0x7f80 + np.arange(256, dtype=np.uint16)	# NaN, inf and up
add(T.BF16, b, gguf.quants.dequantize(b.view(np.uint8), T.BF16))

for qtype, dt in ((T.I8, np.int8), (T.I16, np.int16), (T.I32, np.int32),
                  (T.I64, np.int64)):
    size = np.dtype(dt).itemsize
    v = rng.integers(0, 256, size=512 * size).astype(np.uint8).view(dt)
    v = v.copy()
    v[:4] = [np.iinfo(dt).min, np.iinfo(dt).max, 0, -1]
    if size == 8:	# float32 rounding ties of int64
        v[4:8] = [(1 << 62) + (1 << 38), (1 << 62) + (3 << 38),
                  (1 << 24) + 1, -((1 << 24) + 3)]
    add(qtype, v, v.astype(np.float32))

d = np.concatenate([SPECIAL.astype(np.float64),
                    np.array([1e300, -1e300, 3.4028235677973366e38,
                              3.4028235677973362e38, 1e-46, 7e-46,
                              1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24]),
                    rng.standard_normal(256) * 10.0 ** rng.uniform(
                        -50, 50, size=256),
                    rng.integers(0, 1 << 63, size=64).view(np.float64)])
d[-1] = np.array([0x7ff0000000000001], np.uint64).view(np.float64)[0]
add(T.F64, d, d.astype(np.float32))

# ---- block types gguf-py can quantize

QUANTIZABLE = (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.TQ1_0, T.TQ2_0,
               T.MXFP4)
for qtype in QUANTIZABLE:
    block, _ = GGML_QUANT_SIZES[qtype]
    nblocks = 16 if block == 32 else 3
    # the NaN and Inf blocks only where numpy's result is defined: Q8_0
    inp = block_input(block, nblocks, finite=qtype != T.Q8_0)
    raw = gguf.quants.quantize(inp, qtype)
    add(qtype, raw, gguf.quants.dequantize(raw, qtype), inp)


# ---- random blocks, for all types ptfs dequantizes

def random_f16(n):
    """Finite float16 scales of every exponent, zeros and the largest."""
    v = rng.integers(0, 1 << 16, size=n).astype(np.uint16)
    v = np.where((v & 0x7c00) == 0x7c00, v & 0xbfff, v).astype(np.uint16)
    v[: min(n, 3)] = [0, 0x8000, 0x7bff][: min(n, 3)]
    return v


# offsets of each type's f16 fields in its block
F16_AT = {T.Q4_0: (0,), T.Q4_1: (0, 2), T.Q5_0: (0,), T.Q5_1: (0, 2),
          T.Q8_0: (0,), T.Q2_K: (80, 82), T.Q3_K: (108,), T.Q4_K: (0, 2),
          T.Q5_K: (0, 2), T.Q6_K: (208,)}
for qtype, offs in F16_AT.items():
    block, size = GGML_QUANT_SIZES[qtype]
    nblocks = 16 if block == 32 else 6
    raw = rng.integers(0, 256, size=(nblocks, size)).astype(np.uint8)
    for o in offs:
        raw[:, o:o + 2] = random_f16(nblocks).view(np.uint8).reshape(-1, 2)
    add(qtype, raw, gguf.quants.dequantize(raw, qtype))

# Q8_K: f32 d, int8 qs[256], int16 bsums[16] (unused by dequantization)
raw = rng.integers(0, 256, size=(4, 292)).astype(np.uint8)
dq = (rng.standard_normal(4) * 10.0 ** rng.uniform(-30, 30, 4))
raw[:, 0:4] = dq.astype("<f4").view(np.uint8).reshape(4, 4)
qd = raw[:, 0:4].copy().view("<f4").astype(np.float32)
add(T.Q8_K, raw, qd * raw[:, 4:260].view(np.int8).astype(np.float32))

# ---- the file

table = b""
for qtype, (block, size) in GGML_QUANT_SIZES.items():
    name = qtype.name.encode()
    assert len(name) < 8
    table += struct.pack("<III8s", int(qtype), block, size, name)
out = b"PTGGUFV1" + struct.pack("<II", len(GGML_QUANT_SIZES), len(records))
out += table + b"".join(records)
with open(sys.argv[1], "wb") as f:
    f.write(out)
print(f"{sys.argv[1]}: {len(records)} records, {len(out)} bytes")
