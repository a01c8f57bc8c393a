"""seeds_zip.py - the zip target's own seeds (seeds.py calls seeds()):
archives that torch's zip reader (miniz) and other zip readers read
otherwise (issue 44), each as core/zip must refuse or read it.

Written here with struct from APPNOTE's layouts, not with zipfile, so that
every field can disagree with every other: two end records (one inside
the other's comment), ZIP64 and classic values that differ, names listed
twice or differing in case only, a name with a NUL, a count short of the
central directory, local headers that disagree with the central directory,
records miniz takes for directories, a pickle or junk in front of a zip.

cases() gives (name, data, note); the note says what torch 1.13 and 2.x
load, as measured with both (core/zip/ptz_amb.c has the table).  Each
archive holds a torch checkpoint whose data.pkl is the dict {"who": ...}:
the object torch loads names the record it read.  Nothing in them runs
anything.  Deterministic: the same bytes every run.
"""
import struct
import zlib

SIG_LOCAL, SIG_CD, SIG_EOCD = 0x04034B50, 0x02014B50, 0x06054B50
SIG_Z64, SIG_LOC = 0x06064B50, 0x07064B50


def pkl(who):
    """pickle protocol 2 of {"who": who} (what pickle.dumps writes)"""
    w = who.encode()
    return (b"\x80\x02}q\x00X\x03\x00\x00\x00whoq\x01X" +
            struct.pack("<I", len(w)) + w + b"q\x02s.")


def tensor_pkl(key="0", n=4):
    """{"w": a float32 tensor of @n elements on storage @key}, as torch
    1.13's torch.save pickles it"""
    k = key.encode()
    return (b"\x80\x02}q\x00X\x01\x00\x00\x00wq\x01ctorch._utils\n"
            b"_rebuild_tensor_v2\nq\x02((X\x07\x00\x00\x00storageq\x03"
            b"ctorch\nFloatStorage\nq\x04X" + struct.pack("<I", len(k)) + k +
            b"q\x05X\x03\x00\x00\x00cpuq\x06K" + bytes([n]) +
            b"tq\x07QK\x00K" + bytes([n]) + b"\x85q\x08K\x01\x85q\t\x89"
            b"ccollections\nOrderedDict\nq\n)Rq\x0btq\x0cRq\rs.")


class Z:
    """An archive written piece by piece: local records, then central
    directories and end records wherever a case puts them."""

    def __init__(self, head=b""):
        self.b = bytearray(head)

    def rec(self, name, data, method=0, **kw):
        """a local header and data at the current end; @kw overrides the
        local header's fields (lname, lextra, lmethod, lflags, lcrc,
        lcsize, lusize) and the central entry's (cname, flags, attr,
        cextra, csize, usize, crc, disk)"""
        comp = data
        if method == 8:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            comp = c.compress(data) + c.flush()
        r = dict(name=name.encode() if isinstance(name, str) else name,
                 off=len(self.b), crc=zlib.crc32(data), csize=len(comp),
                 usize=len(data), method=method, flags=0, attr=0,
                 cextra=b"", disk=0)
        r.update({k: v for k, v in kw.items() if not k.startswith("l")})
        lname = kw.get("lname", r["name"])
        lextra = kw.get("lextra", b"")
        self.b += struct.pack(
            "<IHHHHHIIIHH", SIG_LOCAL, 20, kw.get("lflags", 0),
            kw.get("lmethod", method), 0, 0x21, kw.get("lcrc", r["crc"]),
            kw.get("lcsize", len(comp)), kw.get("lusize", len(data)),
            len(lname), len(lextra)) + lname + lextra + comp
        return r

    def cd(self, recs):
        """central entries of @recs at the current end: (offset, size)"""
        off = len(self.b)
        for r in recs:
            name = r.get("cname", r["name"])
            self.b += struct.pack(
                "<IHHHHHHIIIHHHHHII", SIG_CD, 0x031E, 20, r["flags"],
                r["method"], 0, 0x21, r["crc"], r["csize"], r["usize"],
                len(name), len(r["cextra"]), 0, r["disk"], 0, r["attr"],
                r["off"]) + name + r["cextra"]
        return off, len(self.b) - off

    def z64(self, n, size, off, at=None):
        """a ZIP64 end record (or none, @at given) and its locator"""
        rec = len(self.b) if at is None else at
        if at is None:
            self.b += struct.pack("<IQHHIIQQQQ", SIG_Z64, 44, 0x031E, 45, 0,
                                  0, n, n, size, off)
        self.b += struct.pack("<IIQI", SIG_LOC, 0, rec, 1)

    def eocd(self, n, size, off, comment=b"", clen=None):
        self.b += struct.pack("<IHHHHIIH", SIG_EOCD, 0, 0, n, n, size, off,
                              len(comment) if clen is None else clen)
        self.b += comment
        return len(self.b)

    def put(self, raw):
        self.b += raw

    def bytes(self):
        return bytes(self.b)


def plain(recs_spec, head=b"", zip64=False, comment=b""):
    """a whole archive of (name, data[, kw]) records"""
    z = Z(head)
    recs = [z.rec(s[0], s[1], **(s[2] if len(s) > 2 else {}))
            for s in recs_spec]
    off, size = z.cd(recs)
    if zip64:
        z.z64(len(recs), size, off)
    z.eocd(len(recs), size, off, comment)
    return z.bytes()


def ckpt(who, extra=(), order=None):
    """the records of a torch checkpoint whose data.pkl says @who"""
    recs = [("archive/data.pkl", pkl(who))] + list(extra) + \
           [("archive/version", b"3\n")]
    return [recs[i] for i in order] if order else recs


def eocd_cases():
    out = []
    # A second end record inside the first one's comment, 8 bytes before
    # the end of the file, pointing at another central directory: miniz
    # takes the last signature with 22 bytes after it
    z = Z()
    good = [z.rec(n, d) for n, d in ckpt("first")]
    other = [z.rec(n, d) for n, d in ckpt("comment")]
    eo, es = z.cd(other)
    go, gs = z.cd(good)
    inner = struct.pack("<IHHHHIIH", SIG_EOCD, 0, 0, 2, 2, es, eo, 0)
    z.eocd(2, gs, go, inner + b"junk1234")
    out.append(("eocd_in_comment", z.bytes(),
                "torch: the inner record's directory"))
    z = Z()
    good = [z.rec(n, d) for n, d in ckpt("first")]
    other = [z.rec(n, d) for n, d in ckpt("comment")]
    eo, es = z.cd(other)
    go, gs = z.cd(good)
    inner = struct.pack("<IHHHHIIH", SIG_EOCD, 0, 0, 2, 2, es, eo, 0)
    z.eocd(2, gs, go, inner)
    out.append(("eocd_in_comment_at_end", z.bytes(),
                "torch: the inner record's directory"))
    # a second end record appended after the first (no comment)
    z = Z()
    good = [z.rec(n, d) for n, d in ckpt("first")]
    other = [z.rec(n, d) for n, d in ckpt("appended")]
    eo, es = z.cd(other)
    go, gs = z.cd(good)
    z.eocd(2, gs, go)
    z.eocd(2, es, eo)
    z.put(b"junk1234")
    out.append(("eocd_appended", z.bytes(), "torch: the last record's"))
    # ZIP64 and classic end records pointing at different directories
    z = Z()
    good = [z.rec(n, d) for n, d in ckpt("classic")]
    other = [z.rec(n, d) for n, d in ckpt("zip64")]
    go, gs = z.cd(good)
    eo, es = z.cd(other)
    z.z64(2, es, eo)
    z.eocd(2, gs, go)
    out.append(("zip64_classic_disagree", z.bytes(), "torch: the ZIP64 one's"))
    # a ZIP64 locator that points at no ZIP64 end record
    z = Z()
    good = [z.rec(n, d) for n, d in ckpt("classic")]
    go, gs = z.cd(good)
    z.z64(2, gs, go, at=0)
    z.eocd(2, gs, go)
    out.append(("zip64_locator_to_nothing", z.bytes(),
                "torch: the classic values"))
    # the ZIP64 end record away from its locator, another right before
    # it (where zipfile reads one) after a directory of its own
    z = Z()
    good = [z.rec(n, d) for n, d in ckpt("located")]
    other = [z.rec(n, d) for n, d in ckpt("before_locator")]
    go, gs = z.cd(good)
    far = len(z.b)
    z.put(struct.pack("<IQHHIIQQQQ", SIG_Z64, 44, 0x031E, 45, 0, 0, 2, 2,
                      gs, go))
    eo, es = z.cd(other)
    z.z64(2, es, eo)
    z.b[-20:] = struct.pack("<IIQI", SIG_LOC, 0, far, 1)
    z.eocd(0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    out.append(("zip64_record_not_before_locator", z.bytes(),
                "torch: the locator's; zipfile: the one before it"))
    # the central directory not right before the end record: zipfile
    # takes the bytes before the end record as the directory and shifts
    # every offset by the difference
    z = Z()
    good = [z.rec(n, d) for n, d in ckpt("offset")]
    other = [z.rec(n, d) for n, d in ckpt("before_end")]
    go, gs = z.cd(good)
    shift = sum(46 + len(r["name"]) for r in other)
    for r in other:
        r["off"] -= shift
    eo, es = z.cd(other)
    z.eocd(2, gs, go)
    out.append(("cdir_not_before_end", z.bytes(),
                "torch: at its offset; zipfile: before the end record"))
    return out


def count_cases():
    out = []
    # the end record counts 2 records of a directory of 3
    z = Z()
    recs = [z.rec(n, d) for n, d in ckpt("counted")]
    recs.append(z.rec("archive/data.pkl", pkl("uncounted")))
    off, size = z.cd(recs)
    z.eocd(2, size, off)
    out.append(("cdir_count_short", z.bytes(),
                "torch: the 2 counted; zipfile: all 3"))
    return out


def name_cases():
    out = []
    # 2 to 5 records of one name: torch loads record 0, 2, 3, 3
    for n in (2, 3, 4, 5):
        z = Z()
        recs = [z.rec("archive/data.pkl", pkl("dup%d" % i)) for i in range(n)]
        recs.append(z.rec("archive/version", b"3\n"))
        off, size = z.cd(recs)
        z.eocd(len(recs), size, off)
        out.append(("dup_exact_%d" % n, z.bytes(),
                    "torch: record %d" % (0, 2, 3, 3)[n - 2]))
    # names equal ignoring case: torch loads record 0, 0, 2
    for names in (("archive/data.pkl", "archive/DATA.PKL"),
                  ("archive/DATA.PKL", "archive/data.pkl"),
                  ("archive/Data.pkl", "archive/data.pkl",
                   "archive/DATA.pkl")):
        z = Z()
        recs = [z.rec(nm, pkl(nm[8:])) for nm in names]
        recs.append(z.rec("archive/version", b"3\n"))
        off, size = z.cd(recs)
        z.eocd(len(recs), size, off)
        out.append(("dup_case_" + "_".join(nm[8:12] for nm in names),
                    z.bytes(), "torch: record %d" % (len(names) // 3 * 2)))
    # the duplicate among other names (the sort moves them about)
    z = Z()
    recs = [z.rec("archive/data.pkl", pkl("mixed0"))]
    recs += [z.rec("archive/data/%d" % i, b"\0" * 4) for i in range(6)]
    recs.append(z.rec("archive/data.pkl", pkl("mixed1")))
    recs.append(z.rec("archive/version", b"3\n"))
    off, size = z.cd(recs)
    z.eocd(len(recs), size, off)
    out.append(("dup_among_others", z.bytes(), "torch: the first"))
    # a name with a NUL after "data.pkl"
    z = Z()
    recs = [z.rec("archive/data.pkl", pkl("plain")),
            z.rec(b"archive/data.pkl\0x", pkl("nul")),
            z.rec("archive/version", b"3\n")]
    off, size = z.cd(recs)
    z.eocd(3, size, off)
    out.append(("name_with_nul", z.bytes(),
                "torch: the plain one; zipfile: the other"))
    return out


def local_cases():
    out = []
    base = ckpt("local")
    # the local header names another file (as long, shorter, longer)
    out.append(("local_name_same_length", plain(
        [base[0] + ({"lname": b"archive/else.pkl"},), base[1]]),
        "torch: by the central directory"))
    out.append(("local_name_shorter", plain(
        [base[0] + ({"lname": b"archive/e"},), base[1]]),
        "torch: by the central directory"))
    out.append(("local_name_longer", plain(
        [base[0] + ({"lname": b"archive/something/else.pkl"},), base[1]]),
        "torch: by the central directory"))
    # method, sizes, CRC, flags disagree; an extra field only in the
    # local header
    out.append(("local_method_differs", plain(
        [base[0] + ({"lmethod": 8},), base[1]]),
        "torch: by the central directory"))
    out.append(("local_sizes_differ", plain(
        [base[0] + ({"lcsize": 3, "lusize": 1000},), base[1]]),
        "torch: by the central directory"))
    out.append(("local_crc_flags_differ", plain(
        [base[0] + ({"lcrc": 0x12345678, "lflags": 0x0809},), base[1]]),
        "torch: by the central directory"))
    out.append(("local_extra_only", plain(
        [base[0] + ({"lextra": b"FB\x04\x00ZZZZ"},), base[1]]),
        "torch: the data after the local extra field"))
    return out


def dir_cases():
    out = []
    st = struct.pack("<4f", 1, 2, 3, 4)
    # data/0 marked as a DOS directory (external attributes 0x10)
    out.append(("dir_attr_storage", plain(
        [("archive/data.pkl", tensor_pkl()), ("archive/data/0", st,
                                              {"attr": 0x10}),
         ("archive/version", b"3\n")]),
        "torch: none of data/0 (its buffer unwritten)"))
    out.append(("dir_attr_pickle", plain(
        [("archive/data.pkl", pkl("dir"), {"attr": 0x10}),
         ("archive/version", b"3\n")]), "torch: none of data.pkl"))
    # a storage key ending in '/': its record's name ends in '/'
    out.append(("dir_slash_storage", plain(
        [("archive/data.pkl", tensor_pkl("0/")), ("archive/data/0/", st),
         ("archive/version", b"3\n")]), "torch: none of data/0/"))
    # a ZIP64 compressed size of 0 for 16 bytes
    z = Z()
    recs = [z.rec("archive/data.pkl", tensor_pkl()),
            z.rec("archive/data/0", st),
            z.rec("archive/version", b"3\n")]
    recs[1].update(csize=0xFFFFFFFF, usize=0xFFFFFFFF,
                   cextra=struct.pack("<HHQQ", 1, 16, 16, 0))
    off, size = z.cd(recs)
    z.eocd(3, size, off)
    out.append(("zip64_csize_zero", z.bytes(),
                "torch 1.13: none of data/0; 2.x refuses the file"))
    return out


def front_cases():
    out = []
    # a legacy checkpoint (torch < 1.6) in front of a zip: torch reads
    # the legacy stream (its first 4 bytes are not "PK\3\4")
    sysinfo = (b"\x80\x02}q\x00(X\x10\x00\x00\x00protocol_versionq\x01M"
               b"\xe9\x03X\r\x00\x00\x00little_endianq\x02\x88X\n\x00\x00"
               b"\x00type_sizesq\x03}q\x04(X\x05\x00\x00\x00shortq\x05K\x02"
               b"X\x03\x00\x00\x00intq\x06K\x04X\x04\x00\x00\x00longq\x07"
               b"K\x08uu.")
    stub = (b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19." +
            b"\x80\x02M\xe9\x03." + sysinfo + pkl("legacy") +
            b"\x80\x02]q\x00.")
    out.append(("legacy_before_zip", plain(ckpt("zip"), head=stub),
                "torch: the legacy stream"))
    # junk starting with a bogus "PK\3\4" in front, offsets counted from
    # the file's start
    junk = struct.pack("<IHHHHHIIIHH", SIG_LOCAL, 20, 0, 0, 0, 0, 0, 0, 0,
                       4, 0) + b"junk" + b"\xff" * 30
    out.append(("pk_junk_before_zip", plain(ckpt("after_junk"), head=junk),
                "torch: the zip's records"))
    return out


def cases():
    return (eocd_cases() + count_cases() + name_cases() + local_cases() +
            dir_cases() + front_cases())


def seeds(shared):
    for name, data, _ in cases():
        yield data, ""
