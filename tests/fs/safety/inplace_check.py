"""inplace_check.py - the python side of tests/fs/safety/inplace.sh, one command
per run:

  big PATH              torch.save 8 float32 tensors b0..b7 of 8 MiB each
                        (seeded) and an int: the crash loop's checkpoint
                        (run by the torch under test)
  legacy PATH           torch.save a small dict in the legacy (< 1.6)
                        format (run by the torch under test)
  noise OUT SIZE SEED   SIZE random bytes into OUT (plain python)
  diffok ORIG NEW       NEW is ORIG with only record data and the CRC-32
                        fields (local header, data descriptor, central
                        directory) of records whose data changed, every
                        record in the same place; prints "K records
                        changed, N CRC fields" (plain python)

Prints "error: ..." and exits 1 when a check fails.
"""
import random
import struct
import sys
import zipfile


def big(path):
    import torch
    g = torch.Generator().manual_seed(1818)
    sd = {"b%d" % i: torch.randn(2 << 20, generator=g) for i in range(8)}
    sd["step"] = 7
    torch.save(sd, path)


def legacy(path):
    import torch
    torch.save({"a": torch.arange(16, dtype=torch.float32)}, path,
               _use_new_zipfile_serialization=False)


def noise(out, size, seed):
    r = random.Random(int(seed))
    with open(out, "wb") as f:
        f.write(r.randbytes(int(size)))


def layout(path):
    """Per record: (data range, CRC field offsets), and the raw bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    recs = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            h = info.header_offset
            n, x = struct.unpack_from("<HH", raw, h + 26)
            data = h + 30 + n + x
            crcs = [h + 14]
            if info.flag_bits & 8 and info.file_size:
                d = data + info.compress_size
                sig = struct.unpack_from("<I", raw, d)[0] == 0x08074b50
                crcs.append(d + 4 if sig else d)
            recs.append([info.filename, data, data + info.compress_size,
                         crcs])
    # central directory entries: their CRC at +16
    eocd = raw.rfind(b"PK\5\6")
    off = struct.unpack_from("<I", raw, eocd + 16)[0]
    if off == 0xffffffff:
        loc = raw.rfind(b"PK\6\7")
        z64 = struct.unpack_from("<Q", raw, loc + 8)[0]
        off = struct.unpack_from("<Q", raw, z64 + 48)[0]
    for r in recs:
        if struct.unpack_from("<I", raw, off)[0] != 0x02014b50:
            sys.exit("error: %s: bad central directory" % path)
        r[3].append(off + 16)
        n, x, c = struct.unpack_from("<HHH", raw, off + 28)
        off += 46 + n + x + c
    return recs, raw


def diffok(orig, new):
    a, ra = layout(orig)
    b, rb = layout(new)
    if len(ra) != len(rb) or [r[:3] for r in a] != [r[:3] for r in b]:
        sys.exit("error: %s: records moved or the size changed" % new)
    allowed, changed, crcs = [], 0, 0
    for r in a:
        if ra[r[1]:r[2]] != rb[r[1]:r[2]]:
            changed += 1
            allowed.append((r[1], r[2]))
            for c in r[3]:
                allowed.append((c, c + 4))
                crcs += ra[c:c + 4] != rb[c:c + 4]
    pos = 0
    for x, y in sorted(allowed) + [(len(ra), len(ra))]:
        if pos < x and ra[pos:x] != rb[pos:x]:
            k = next(i for i in range(pos, x) if ra[i] != rb[i])
            sys.exit("error: %s: a byte outside record data and CRC "
                     "fields differs, at offset %d" % (new, k))
        pos = max(pos, y)
    print("%d records changed, %d CRC fields" % (changed, crcs))


def main():
    cmd = sys.argv[1]
    if cmd == "big":
        big(sys.argv[2])
    elif cmd == "legacy":
        legacy(sys.argv[2])
    elif cmd == "noise":
        noise(*sys.argv[2:5])
    elif cmd == "diffok":
        diffok(sys.argv[2], sys.argv[3])
    else:
        sys.exit("error: unknown command %s" % cmd)


if __name__ == "__main__":
    main()
