"""seeds_gguf.py - the seeds of fuzz_gguf.c (seeds.py calls seeds()).

GGUF files written here with struct from ggml's docs/gguf.md (the layout
is in core/fmt/gguf/gguf_parse.c), gguf-py not needed: valid ones with
every value type, arrays, a custom alignment, plain and block tensor
types, in both byte orders; and hostile ones, each refused with one line
(counts past the file, names over the limit, 5 dimensions, dimensions
whose product overflows, offsets out of range, overlapping or unaligned,
unknown value and tensor types, nested arrays, a huge string length).
Deterministic: the same bytes every run.
"""
import struct

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f",
       BOOL: "?", U64: "Q", I64: "q", F64: "d"}
# ggml type id: (elements, bytes) per block
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22),
         7: (32, 24), 8: (32, 34), 9: (32, 36), 10: (256, 84),
         11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
         15: (256, 292), 20: (32, 18), 24: (1, 1), 25: (1, 2), 26: (1, 4),
         27: (1, 8), 28: (1, 8), 30: (1, 2), 35: (256, 66), 39: (32, 17)}


class W:
    """One GGUF file; @e is '<' or '>'."""

    def __init__(self, e="<", version=3):
        self.e, self.version, self.kv, self.ti, self.align = e, version, [], [], 32
        self.data = b""

    def p(self, f, *v):
        return struct.pack(self.e + f, *v)

    def s(self, b):
        b = b.encode() if isinstance(b, str) else b
        return self.p("Q", len(b)) + b

    def val(self, t, v):
        return self.s(v) if t == STR else self.p(FMT[t], v)

    def add(self, key, t, v, at=None):
        if t == ARR:
            body = self.p("IQ", at, len(v)) + b"".join(self.val(at, x) for x in v)
        else:
            body = self.val(t, v)
        self.kv.append(self.s(key) + self.p("I", t) + body)
        if key == "general.alignment" and t == U32 and v and not v & (v - 1):
            self.align = v

    def raw_kv(self, b):
        self.kv.append(b)

    def tensor(self, name, ne, t, data=None, off=None):
        blk, nb = TYPES.get(t, (1, 1))
        n = 1
        for x in ne:
            n *= x
        size = n // blk * nb
        if off is None:
            self.data += b"\0" * (-len(self.data) % self.align)
            off = len(self.data)
            self.data += data if data is not None else pattern(size)
        self.ti.append(self.s(name) + self.p("I", len(ne)) +
                       b"".join(self.p("Q", x) for x in ne) +
                       self.p("IQ", t, off))

    def bytes(self, nt=None, nkv=None):
        h = b"GGUF" + self.p("I", self.version)
        h += self.p("QQ", len(self.ti) if nt is None else nt,
                    len(self.kv) if nkv is None else nkv)
        h += b"".join(self.kv) + b"".join(self.ti)
        h += b"\0" * (-len(h) % self.align)
        return h + self.data


def pattern(n):
    """Bytes that decode to sane values: small f16 scales, mixed quants."""
    return bytes((i * 37 + 11) & 0x3f for i in range(n))


def valid(e):
    w = W(e)
    w.add("general.architecture", STR, "llama")
    w.add("general.name", STR, "fuzz \u00e9 \"q\" \\ \n")
    w.add("general.quantization_version", U32, 2)
    for t, v in ((U8, 200), (I8, -100), (U16, 60000), (I16, -30000),
                 (U32, 4000000000), (I32, -2000000000), (F32, 0.1),
                 (BOOL, True), (U64, 2**63 + 5), (I64, -(2**62)),
                 (F64, 1e-300)):
        w.add("t.%d" % t, t, v)
    w.add("t.nan", F32, float("nan"))
    w.add("t.inf", F64, float("-inf"))
    w.add("t.arr_i32", ARR, [1, -2, 3], I32)
    w.add("t.arr_f32", ARR, [0.5, float("inf"), 3e38], F32)
    w.add("t.arr_bool", ARR, [True, False], BOOL)
    w.add("t.arr_str", ARR, ["a", "", "b c", "\u00fc\u00df", "\"\\\n\x01"], STR)
    w.add("t.arr_empty", ARR, [], U8)
    w.add("tokenizer.ggml.tokens", ARR, ["<s>", "</s>"] + ["t%d" % i for i in range(40)], STR)
    w.add("tokenizer.ggml.scores", ARR, [float(-i) for i in range(42)], F32)
    w.tensor("token_embd.weight", [4, 3], 0)
    w.tensor("blk.0.attn_q.weight", [64, 2], 8)
    w.tensor("blk.0.ffn.weight", [256, 2], 12)
    w.tensor("h", [8], 1)
    w.tensor("b", [2, 2], 30)
    w.tensor("s", [], 0)
    w.tensor("e", [0, 4], 0)
    w.tensor("i", [3], 27)
    return w.bytes()


def every_type(e):
    """One tensor of each type, two blocks of it (a row of 2 blocks)."""
    w = W(e)
    w.add("general.architecture", STR, "x")
    for t, (blk, nb) in sorted(TYPES.items()):
        w.tensor("t%d" % t, [2 * blk, 1], t)
    return w.bytes()


def aligned(e, align):
    w = W(e)
    w.add("general.alignment", U32, align)
    w.add("general.architecture", STR, "x")
    w.tensor("a", [3], 0)
    w.tensor("b", [32], 2)
    w.tensor("c/d.e", [5], 24)
    return w.bytes()


def hostile(e):
    def one(build, **kw):
        w = W(e)
        w.add("general.architecture", STR, "x")
        build(w)
        return w.bytes(**kw)

    yield one(lambda w: w.tensor("a", [4], 0), nt=1 << 40)      # counts past the file
    yield one(lambda w: w.tensor("a", [4], 0), nkv=2**64 - 1)
    yield one(lambda w: w.tensor("n" * 70000, [4], 0))          # name over the limit
    yield one(lambda w: w.tensor("n" * 64, [4], 0))             # over ggml's 63
    yield one(lambda w: w.tensor("a", [1, 1, 1, 1, 1], 0, data=b"\0" * 4))
    yield one(lambda w: w.tensor("a", [2**32, 2**32, 2], 0, data=b"", off=0))
    yield one(lambda w: w.tensor("a", [2**63, 2], 0, data=b"", off=0))
    yield one(lambda w: w.tensor("a", [2**62 // 32 * 32], 8, data=b"", off=0))
    yield one(lambda w: w.tensor("a", [4], 0, off=1 << 40))     # out of range
    yield one(lambda w: w.tensor("a", [4], 0, off=2**64 - 32))
    yield one(lambda w: (w.tensor("a", [16], 0), w.tensor("b", [4], 0, off=32)))
    yield one(lambda w: (w.tensor("a", [16], 0), w.tensor("a", [4], 0)))
    yield one(lambda w: w.tensor("a", [4], 0, off=3))           # unaligned
    yield one(lambda w: w.tensor("a", [4], 4))                  # Q4_2: removed
    yield one(lambda w: w.tensor("a", [4], 1000))
    yield one(lambda w: w.tensor("a", [33], 8))                 # half a block
    yield one(lambda w: w.tensor("a", [], 8, data=b"\0" * 34))
    yield one(lambda w: w.raw_kv(w.s("k") + w.p("I", 13) + b"\0" * 8))
    yield one(lambda w: w.raw_kv(w.s("k") + w.p("IIQ", ARR, ARR, 1) +
                                 w.p("IQ", U8, 1) + b"\1"))     # nested
    yield one(lambda w: w.raw_kv(w.s("k") + w.p("IIQ", ARR, 99, 1)))
    yield one(lambda w: w.raw_kv(w.s("k") + w.p("IQ", STR, 2**63) + b"x"))
    yield one(lambda w: w.raw_kv(w.s("k") + w.p("IIQ", ARR, U64, 2**61)))
    yield one(lambda w: w.raw_kv(w.s("k") + w.p("IIQ", ARR, STR, 2**64 - 1) +
                                 w.s("a") * 3))
    yield one(lambda w: w.raw_kv(w.s("k\0x") + w.p("IB", U8, 1)))
    yield one(lambda w: (w.add("k", U8, 1), w.add("k", U8, 2)))
    yield one(lambda w: w.add("general.alignment", U32, 48))
    yield one(lambda w: w.add("general.alignment", U32, 0))
    yield one(lambda w: w.add("general.alignment", U64, 64))
    yield one(lambda w: w.add("t", ARR, [True] * 3000, BOOL))
    yield one(lambda w: w.add("t", ARR, ["\x01" * 300] * 10, STR))
    yield b"GGUF" + struct.pack(e + "I", 1) + b"\0" * 16         # version 1
    yield b"GGUF" + struct.pack(e + "IQ", 3, 0)                  # cut header


def seeds(shared):
    del shared
    for e in "<>":
        hint = "_le" if e == "<" else "_be"
        yield valid(e), hint
        yield every_type(e), hint
        for a in (1, 8, 64, 4096):
            yield aligned(e, a), hint
        for h in hostile(e):
            yield h, "_bad" + hint
    w = W("<", version=2)
    w.add("general.architecture", STR, "x")
    w.tensor("a", [2], 0)
    yield w.bytes(), "_v2"
    yield W().bytes(), "_empty"
