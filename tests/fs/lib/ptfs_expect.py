"""ptfs_expect.py - what a ptfs mount should show, from `ptls --json` and
the checkpoint's zip records alone (no torch): used by check_mount.py (which
adds torch's view) and concurrent.py.  Python 3.11 + numpy 1.24 and
python 3.14 + numpy 2.x.
"""
import codecs
import json
import os
import zipfile

import numpy as np

ROOT_NAMES = {"tensor": "tensor", "value": "value", "object": "object"}
FILE_KINDS = ("tensor", "value", "object")


def load_listing(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def escape_name(s):
    """A str key (or record name) as a file name (docs/names.md)."""
    if s == "":
        return "%"
    out = s.replace("%", "%25").replace("/", "%2F").replace("\0", "%00")
    if out.startswith("."):
        out = "%2E" + out[1:]
    return out


def root_is_dir(listing):
    """False when the root object is a tensor/value/opaque object: the
    mount root then holds one entry named tensor/value/object."""
    ents = listing.get("entries", [])
    return not (len(ents) == 1 and ents[0].get("path") == ""
                and ents[0].get("kind") in FILE_KINDS)


def mount_rel(listing, entry):
    """The entry's path relative to the mount root ("" = the root)."""
    p = entry.get("path", "")
    if p == "" and entry.get("kind") in FILE_KINDS:
        return ROOT_NAMES[entry["kind"]]
    return p


def expected_tree(listing):
    """{relpath: "dir" | "file" | "link"} for everything below the root
    (but .ptfs), from the listing: each leaf and every directory above."""
    tree = {}
    for e in listing.get("entries", []):
        rel = mount_rel(listing, e)
        if rel == "":
            continue            # an empty root container
        comps = rel.split("/")
        for i in range(1, len(comps)):
            tree["/".join(comps[:i])] = "dir"
        kind = e.get("kind")
        tree[rel] = ("file" if kind in FILE_KINDS else
                     "link" if kind == "link" else "dir")
    return tree


def link_target_rel(entry):
    """The mount-relative path a link entry points at."""
    return entry.get("target", "")


class Archive:
    """The zip records of a checkpoint (None-ish for legacy files)."""

    def __init__(self, path, listing):
        self.listing = listing
        self.zip = None
        self.prefix = None
        self._cache = {}
        self.storages = {s["key"]: s for s in listing.get("storages", [])}
        if listing.get("format") in ("zip", "torchscript") and \
                zipfile.is_zipfile(path):
            self.zip = zipfile.ZipFile(path)
            names = self.zip.namelist()
            self.prefix = listing.get("prefix") or (
                names[0].split("/", 1)[0] if names else "")

    def close(self):
        if self.zip is not None:
            self.zip.close()

    def record(self, name):
        if name not in self._cache:
            self._cache[name] = self.zip.read(name)
        return self._cache[name]

    def storage_bytes(self, key):
        s = self.storages.get(key)
        if s is None or self.zip is None or not s.get("record"):
            return None
        return self.record(s["record"])

    def other_records(self):
        """{file name under .ptfs/: zip record name} (not the storages)."""
        if self.zip is None:
            return {}
        used = {s.get("record") for s in self.storages.values()}
        n = len(self.prefix) + 1
        return {escape_name(name[n:]): name for name in self.zip.namelist()
                if name not in used}

    def tensor_bytes(self, e):
        """t.contiguous() bytes of a tensor entry gathered from its zip
        record (raw stored values: int_repr for quantized, no conj/neg
        applied), b"" for meta, None when unknown (legacy, inline)."""
        if e.get("layout") == "meta":
            return b""
        shape, stride = e.get("shape"), e.get("stride")
        off, nbytes = e.get("offset"), e.get("nbytes")
        numel = 1
        for n in shape:
            numel *= n
        if numel == 0:
            return b""
        data = self.storage_bytes(e.get("storage"))
        if data is None:
            return None
        isz = nbytes // numel
        last = off + sum((n - 1) * s for n, s in zip(shape, stride))
        if off < 0 or any(s < 0 for s in stride) or (last + 1) * isz > len(data):
            raise ValueError("offset %d shape %s stride %s reach past the "
                             "%d-byte record" % (off, shape, stride, len(data)))
        buf = np.frombuffer(data, dtype=np.uint8)[off * isz:]
        view = np.lib.stride_tricks.as_strided(
            buf, shape=tuple(shape) + (isz,),
            strides=tuple(s * isz for s in stride) + (1,), writeable=False)
        return np.ascontiguousarray(view).tobytes()


def value_text(entry):
    """The file content ptls's value says the mount shows (bytes), or
    None when it cannot be rebuilt from JSON (bytes values: see
    bytes_matches)."""
    typ, v = entry.get("type"), entry.get("value")
    if entry.get("kind") == "object":
        return (entry.get("repr", "") + "\n").encode("utf-8", "surrogatepass")
    if typ in ("bytes", "bytearray"):
        return None
    if typ == "bool":
        s = "True" if v else "False"
    elif typ == "NoneType":
        s = "None"
    elif typ == "float":
        s = v if isinstance(v, str) else repr(float(v))
    elif isinstance(v, bool):
        s = "True" if v else "False"
    elif v is None:
        s = "None"
    else:
        s = str(v)
    return (s + "\n").encode("utf-8", "surrogatepass")


def _bytes_escape_handler(err):
    # each invalid byte becomes U+00XX; decoding resumes at the next byte
    return chr(err.object[err.start]), err.start + 1


codecs.register_error("ptfs_bytes", _bytes_escape_handler)


def escape_bytes(b):
    """bytes as ptls's JSON shows them: invalid UTF-8 bytes as U+00XX."""
    return bytes(b).decode("utf-8", errors="ptfs_bytes")


def bytes_matches(entry, content):
    return escape_bytes(content) == entry.get("value")


XATTR_BASE = ("user.dtype", "user.shape", "user.stride", "user.storage_offset",
              "user.device", "user.requires_grad", "user.parameter",
              "user.layout", "user.byteorder", "user.type")


def tf(b):
    return "true" if b else "false"


def dims(v):
    return ",".join(str(int(x)) for x in v)


def tensor_xattrs(listing, e, byteorder):
    """The user.* xattrs of a tensor entry, from ptls's listing."""
    x = {
        "user.dtype": e.get("dtype"),
        "user.shape": dims(e.get("shape", [])),
        "user.stride": dims(e.get("stride", [])),
        "user.storage_offset": str(e.get("offset")),
        "user.device": e.get("device") or "cpu",
        "user.requires_grad": tf(e.get("requires_grad")),
        "user.parameter": tf(e.get("parameter")),
        "user.layout": e.get("layout"),
        "user.byteorder": byteorder,
        "user.type": e.get("type"),
    }
    if e.get("storage") is not None:
        x["user.storage"] = e["storage"]
    if e.get("conj"):
        x["user.conj"] = "true"
    if e.get("neg"):
        x["user.neg"] = "true"
    if e.get("qscheme"):
        x["user.qscheme"] = e["qscheme"]
        if "q_axis" in e:
            x["user.q_axis"] = str(e["q_axis"])
        else:
            sc = e.get("q_scale")
            x["user.q_scale"] = sc if isinstance(sc, str) else repr(float(sc))
            x["user.q_zero_point"] = str(e.get("q_zero_point"))
    return x


def archive_byteorder(archive):
    """user.byteorder: the byteorder record, little when absent."""
    if archive.zip is not None:
        name = archive.prefix + "/byteorder"
        if name in archive.zip.namelist():
            return archive.record(name).decode().strip()
    return archive.listing.get("byteorder") or "little"


def read_xattrs(path, follow=True):
    out = {}
    for name in os.listxattr(path, follow_symlinks=follow):
        out[name] = os.getxattr(path, name, follow_symlinks=follow).decode(
            "utf-8", "surrogateescape")
    return out


def spots(n):
    """(offset, length) pairs for spot reads of an n-byte file: odd,
    unaligned, across page boundaries, at and past the end."""
    s = [(5, 3), (0, 1), (1, 2), (3, 4097), (7, 1), (4093, 6), (4095, 8194),
         (n // 2 | 1, 13), (n // 3, 8191), (max(n - 3, 0), 10), (0, n + 100),
         (n, 7), (n + 4096, 1), (max(n - 1, 0), 1)]
    return [(o, ln) for o, ln in s if o >= 0 and ln > 0]
