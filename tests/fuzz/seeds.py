#!/usr/bin/env python3
"""seeds.py OUTDIR [SHARED_DIR] - the seed corpora of the fuzz targets.

Writes OUTDIR/<target>/<name> for zip, ckpt, write, pickle, npy, text and
hfindex, and for every target that brings its own seeds: a file
tests/fuzz/seeds_TARGET.py whose seeds(shared) yields (data, hint) pairs
(hint: a suffix for the file's name, "" for none) goes into OUTDIR/TARGET.
The listed targets' seeds come
from:
  - tests/data (sample.pt, values_p*.pkl) and the shared fixtures under
    SHARED_DIR/fixtures (torch-1.13, torch-2, real): whole files up to
    64 KiB for zip/ckpt/write, every data.pkl (and legacy pickles) up to
    256 KiB for pickle;
  - .npy headers as numpy format 1.0/2.0 writes them (built here with
    struct, numpy not needed);
  - safetensors files for ckpt, built here from the format's definition
    (header length, JSON header, data; tests/fs/formats/st_check.py writes the
    same way);
  - text views with the 4-byte prefix fuzz_text.c reads;
  - Hugging Face indexes as transformers writes them, and odd ones;
  - the hostile files of tests/hostile/attacks.py (two end records, names
    listed twice, local headers that lie, pickles in front of zips,
    legacy and tar-era streams with payloads, computed globals and
    odd memo keys) for zip and ckpt, and every pickle in them for pickle.
Plain Python (zipfile, struct).  Seeds are copies made in a build
directory, never committed.
"""
import hashlib
import importlib.util
import io
import json
import os
import struct
import sys
import tarfile
import zipfile

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1]
shared = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "../../../shared")
ZIP_MAX = 64 << 10
PKL_MAX = 256 << 10
counts = {}


def put(target, data, hint=""):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name + hint), "wb") as f:
        f.write(data)
    counts[target] = counts.get(target, 0) + 1


def files():
    yield os.path.join(here, "../data/sample.pt")
    for sub in ("torch-1.13", "torch-2", "real"):
        d = os.path.join(shared, "fixtures", sub)
        if os.path.isdir(d):
            for n in sorted(os.listdir(d)):
                p = os.path.join(d, n)
                if os.path.isfile(p) and not n.endswith(".md"):
                    yield p


for p in files():
    with open(p, "rb") as f:
        data = f.read()
    if len(data) <= ZIP_MAX:
        put("ckpt", data)
        put("write", data)
        if data[:2] == b"PK":
            put("zip", data)
    if data[:2] == b"PK":
        try:
            with zipfile.ZipFile(p) as z:
                for n in z.namelist():
                    if n.endswith(".pkl") and z.getinfo(n).file_size <= PKL_MAX:
                        put("pickle", z.read(n))
        except (zipfile.BadZipFile, OSError):
            pass
    elif data[:1] in (b"\x80", b"L") and len(data) <= PKL_MAX:
        put("pickle", data)         # a legacy stream starts with pickles
for n in sorted(os.listdir(os.path.join(here, "../data"))):
    if n.endswith(".pkl"):
        with open(os.path.join(here, "../data", n), "rb") as f:
            put("pickle", f.read())


def npy(descr, shape, fortran=False, version=1):
    shp = "(%s)" % ("".join("%d, " % s for s in shape)[:-2] +
                    ("," if len(shape) == 1 else ""))
    h = "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (
        descr, fortran, shp)
    pre = 10 if version == 1 else 12
    pad = (64 - (pre + len(h) + 1) % 64) % 64
    h = (h + " " * pad + "\n").encode("latin1")
    ln = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + ln + h


for descr in ("'<f4'", "'<f8'", "'<f2'", "'>f4'", "'|u1'", "'|i1'", "'<i8'",
              "'|b1'", "'<c8'", "'<c16'", "'<u2'", "'<u8'",
              "[('re', '<f2'), ('im', '<f2')]"):
    for shape in ((), (3,), (2, 3), (0, 4), (1, 1, 1, 5)):
        put("npy", npy(descr, shape) + b"\0" * 16)
put("npy", npy("'<f4'", (2, 3), fortran=True))
put("npy", npy("'<f4'", (7,), version=2) + b"\0" * 28)
put("npy", npy("'<f4'", (7,), version=3))



def safetensors(tensors, meta=None, pad=True):
    """(name, dtype, shape, nbytes) in data order -> a safetensors file."""
    hdr, pos = {}, 0
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dt, shape, n in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + n]}
        pos += n
    text = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(range(256)) * (pos // 256) + bytes(range(pos % 256))


put("ckpt", safetensors([("w", "F32", [2, 3], 24), ("b", "BF16", [3], 6),
                         ("e", "F16", [0, 4], 0), ("s", "F64", [], 8),
                         ("q", "F8_E4M3", [4], 4), ("m", "BOOL", [2], 2)],
                        {"format": "pt", "k\u00e9": "v"}))
put("ckpt", safetensors([("a/b", "I64", [1, 1, 2], 16), (".x", "U8", [5], 5)],
                        pad=False))
put("ckpt", safetensors([]))

texts = [
    (1, 0, 6, b"# float32 (2, 3)\n0.5 -1 3.14159274\nnan inf -inf\n"),
    (0, 3, 2, b"1.0000000000000002, -0\n"),
    (2, 5, 4, b"# float16 (4,)\n65504 6.1035e-05 -nan nan(0x7e01)\n"),
    (3, 7, 3, b"1.5 -2.5e+10 3.39e+38\n"),
    (4, 9, 3, b"-9223372036854775808 9223372036854775807 0\n"),
    (7, 11, 2, b"-128 127\n"),
    (9, 13, 3, b"0 1 1\n"),
    (10, 15, 2, b"1+2j -0.5-1e-300j\n"),
    (12, 17, 1, b"# complex32 ()\n1-2j\n"),
    (15, 19, 2, b"18446744073709551615 0\n"),
    (1, 0, 0, b"# float32 (0,)\n"),
]
for dt, seed, numel, t in texts:
    put("text", bytes([dt, seed, numel & 255, numel >> 8]) + t)

# Hugging Face indexes (fuzz_hfindex.c): as transformers and the hub write
# them, with extra metadata, and one refused for a shard outside
wm = {"model.layers.%d.w" % i: "model-%05d-of-00003.safetensors" % (i % 3 + 1)
      for i in range(12)}
put("hfindex", (json.dumps({"metadata": {"total_size": 4096}, "weight_map": wm},
                           indent=2, sort_keys=True) + "\n").encode())
put("hfindex", json.dumps({"weight_map": wm, "metadata": {
    "total_parameters": 7, "x": [1.5, None, True, {"y": "\u00e9"}]}}).encode())
put("hfindex", b'{"weight_map": {"a": "../x.bin", "b\\u0000": "s/t.bin"}}')


# the hostile shapes of tests/hostile/attacks.py (issue 44): every file
# for zip (the archives) and ckpt, and every pickle in them for pickle
# (data.pkl and the other records, legacy streams and bare pickles, the
# tar-era members, DCP .metadata), each read as the bytes attacks.py
# wrote, not as a zip reader would pick them
def attack_pickles(name, data):
    if name.endswith(".metadata") or data[:1] in (b"\x80", b"(", b"c", b"}"):
        yield data
    if data[:2] == b"PK":
        p = 0
        while True:     # each local record's data, by its local header
            p = data.find(b"PK\x03\x04", p)
            if p < 0 or p + 30 > len(data):
                break
            csize, _, nlen, xlen = struct.unpack_from("<IIHH", data, p + 18)
            start = p + 30 + nlen + xlen
            rec = data[start:start + csize]
            if rec[:1] == b"\x80" and data[p + 8] == 0:
                yield rec
            p += 4
    elif len(data) > 262 and data[257:262] == b"ustar":
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as t:
                for m in t.getmembers():
                    if m.isfile():
                        yield t.extractfile(m).read()
        except tarfile.TarError:
            pass


spec = importlib.util.spec_from_file_location(
    "attacks", os.path.join(here, "../hostile/attacks.py"))
attacks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(attacks)
for _, _, members in attacks.cases():
    for rel, data in members.items():
        if data[:2] == b"PK" and len(data) <= ZIP_MAX:
            put("zip", data)
        if len(data) <= ZIP_MAX and not rel.endswith(".json"):
            put("ckpt", data)
        for pkl in attack_pickles(rel, data):
            if len(pkl) <= PKL_MAX:
                put("pickle", pkl)

# a target's own seeds (tests/fuzz/seeds_TARGET.py)
for n in sorted(os.listdir(here)):
    if n.startswith("seeds_") and n.endswith(".py"):
        spec = importlib.util.spec_from_file_location(n[:-3], os.path.join(here, n))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for data, hint in mod.seeds(shared):
            put(n[len("seeds_"):-3], data, hint)
print(", ".join("%s %d" % kv for kv in sorted(counts.items())))
