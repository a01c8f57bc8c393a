"""journal_tool.py - read and damage an overlay journal for the tests
(plain python, no torch).  The format is core/ovl/ovl_journal.c's:
records of u32 length, u32 CRC-32 of (sequence + payload), u64 sequence,
payload (op byte, then fields of u32 length + bytes), little-endian.

  count J                      records, and whether the tail is torn
  ops J                        the records' op letters in order ("HDDPK")
  flip J N                     flip one bit in record N's payload
  append-temps J COUNT LEN     append COUNT write-back temporary records
                               (op 'W') naming one path of LEN bytes
  append J OP FIELD...         append one record of op OP (a letter) with
                               these fields (e.g. N NAME DEV INO: a new
                               shard file of a folder's write-back)
"""
import struct
import sys
import zlib


def records(data):
    pos, out = 0, []
    while pos + 16 <= len(data):
        n, crc, seq = struct.unpack_from("<IIQ", data, pos)
        if pos + 16 + n > len(data):
            break
        out.append((pos, n, seq))
        pos += 16 + n
    return out, pos


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        data = f.read()
    recs, end = records(data)
    if cmd == "count":
        print("%d %s" % (len(recs), "torn" if end != len(data) else "whole"))
    elif cmd == "ops":
        print("".join(chr(data[p + 16]) for p, n, _ in recs if n))
    elif cmd == "flip":
        pos, n, _ = recs[int(sys.argv[3])]
        with open(path, "r+b") as f:
            f.seek(pos + 16 + min(2, n - 1))
            b = f.read(1)
            f.seek(pos + 16 + min(2, n - 1))
            f.write(bytes([b[0] ^ 0x04]))
    elif cmd in ("append-temps", "append"):
        if cmd == "append":
            count, fields = 1, [a.encode() for a in sys.argv[4:]]
            payload = sys.argv[3].encode()
        else:
            count, ln = int(sys.argv[3]), int(sys.argv[4])
            fields = [("/nonexistent-ptfs-test/" + "a" * ln)[:ln].encode()]
            payload = b"W"
        for p in fields:
            payload += struct.pack("<I", len(p)) + p
        seq = recs[-1][2] + 1
        with open(path, "r+b") as f:
            f.seek(end)
            f.truncate()
            for i in range(count):
                body = struct.pack("<Q", seq + i) + payload
                f.write(struct.pack("<II", len(payload),
                                    zlib.crc32(body) & 0xffffffff) + body)
    else:
        sys.exit("unknown command " + cmd)


main()
