"""gen_fs.py OUTDIR [SCRIPT...] - checkpoints for the mount tests,
written by the torch under test (1.13 or 2.x): shared and self-containing
containers (symlinks), python values of every kind, roots that are not a
dict, strided views of odd shapes and dtypes big enough to span several
FUSE requests (and one whose storage is larger than ptfs's 8 MiB gather
span), a storage saved on its own, and legacy-format copies.

Each SCRIPT given after OUTDIR is then run in this process (runpy) with
argv [SCRIPT, OUTDIR], so run.sh pays for one torch start only (it passes
tests/torch/gen_edge.py this way).
"""
import collections
import os
import pathlib
import runpy
import sys
import warnings

import torch

warnings.simplefilter("ignore")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(7)


def save(name, obj, legacy=False):
    kw = {"_use_new_zipfile_serialization": False} if legacy else {}
    torch.save(obj, os.path.join(out, name), **kw)


# -- links: containers reached twice become symlinks to the first place
shared = {"k": torch.arange(3.0), "v": 1}
inner = [1, 2]
selfref = [0.5]
selfref.append(selfref)
links = {
    "a": {"b": {"c": shared}},
    "x": {"y": shared, "z": [shared, inner]},
    "inner": inner,
    "self": selfref,
    "empty1": {}, "empty2": [],
}
links["x"]["again"] = links["x"]["z"]
save("links.pt", links)
top = [1]
top.append(top)
top.append({"up": top})
save("root_selfref.pt", top)

# -- python values: the text files' exact content
vals = collections.OrderedDict([
    ("ints", [0, -1, 7, 2 ** 31, 2 ** 63 - 1, -2 ** 63, 2 ** 64, -(2 ** 100),
              10 ** 30]),
    ("floats", [0.0, -0.0, 0.1, 1.5, -2.25, 1e-05, 1e-300, 5e-324, 1e16,
                1.7976931348623157e308, 123456789.125, 1 / 3,
                float("nan"), float("inf"), float("-inf")]),
    ("strs", ["", "plain", "two\nlines", "tab\there", "quote'\"", "ü€😀",
              "%/.x", " lead"]),
    ("bytes", [b"abc", b"\x00\xff\x80 bin", b"\n"]),
    ("flags", [True, False, None]),
    ("device", [torch.device("cpu"), torch.device("cuda", 1)]),
    ("dtype", torch.bfloat16),
    ("layout", torch.strided),
    ("tuple", (1, "a", (2.5,))),
    ("set", {3, 1, 2}),
    ("path", pathlib.PurePosixPath("a", "b")),
    ("size", torch.Size([2, 3])),
    (".ptfs", "a key named like the plumbing directory"),
    ("storages", [1]),
])
save("values.pt", vals)
# pickle protocol 2 writes b"" as bytes() and a bytearray as
# bytearray(_codecs.encode(...)): still bytes values, raw in the mount
save("bytes_calls.pt", {"empty": b"", "bytearray": bytearray(b"ba\x01"),
                        "empty_bytearray": bytearray()})
save("root_value.pt", "just a string")
save("root_int.pt", -42)
save("root_bytes.pt", b"\x01\x02raw")
save("root_object.pt", pathlib.PurePosixPath("x"))
save("root_list.pt", [torch.arange(6, dtype=torch.int16).view(2, 3).t(),
                      3, "s"])

# -- views: strided gathers of every itemsize, several FUSE requests long
base = torch.randn(512, 1024)                        # 2 MiB
i8 = torch.randint(-128, 127, (999, 1001), dtype=torch.int8)
f16 = torch.randn(37, 53, 29).half()
f64 = torch.randn(300, 301, dtype=torch.float64)
views = collections.OrderedDict([
    ("base", base),
    ("t", base.t()),                                 # 2 MiB transposed
    ("slice", base[3:500:7, 5:1000:3]),
    ("rows", base[100:300]),                         # contiguous, offset
    ("i8", i8[:, 1::2]),
    ("i8_t", i8.t()[3:]),
    ("f16", f16.permute(2, 0, 1)),
    ("f64", f64[::2].t()),
    ("bool", (torch.randn(100, 77) > 0).t()),
    ("c64", torch.randn(33, 7, dtype=torch.complex64).t()),
    ("bf16", torch.randn(65, 17).bfloat16()[:, 1:]),
    ("expand", torch.randn(5, 1).expand(5, 700)),
    ("scalar", torch.tensor(3.5)),
    ("elem", base[7, 9]),
    ("empty", torch.empty(4, 0, 3)),
    ("param", torch.nn.Parameter(torch.randn(3, 4).t())),
])
save("strided.pt", views)
# the storage is larger than ptfs's 8 MiB gather span: run by run reads
huge = torch.arange(2400 * 1024, dtype=torch.float32).view(2400, 1024)
save("huge_views.pt", {"cols": huge[:, 10:1014], "narrow": huge[:, :3],
                       "sparse_t": huge[::50, ::100].t(), "last": huge[-1]})
save("strided_legacy.pt", collections.OrderedDict(
    (k, views[k]) for k in ("t", "slice", "i8", "f16", "f64", "elem",
                            "param", "scalar")), legacy=True)
save("links_legacy.pt", {"a": shared, "b": shared, "vals": vals["floats"]},
     legacy=True)
save("root_tensor.pt", base[::3, 1::5])
save("root_tensor_legacy.pt", f16[1], legacy=True)

# -- other tensor kinds
q = torch.quantize_per_tensor(torch.randn(6, 5), 0.05, 3, torch.quint8)
qc = torch.quantize_per_channel(torch.randn(4, 6), torch.tensor([0.1, 0.2, 0.3, 0.4]),
                                torch.tensor([0, 1, -1, 2]), 0, torch.qint8)
save("kinds.pt", {
    "q": q, "q_t": q.t(), "qc": qc,
    "q32": torch.quantize_per_tensor(torch.randn(4), 0.5, 0, torch.qint32),
    "meta": torch.empty(3, 4, device="meta"),
    "storage": torch.arange(10, dtype=torch.int16).storage(),
    "grad": torch.randn(2, 2).requires_grad_(),
    "long": torch.arange(-5, 5),
})
# conjugate and negative views: torch 2 saves the bits, the mount shows
# the stored values (like ptls), torch 1.13 saves them resolved
z = torch.randn(3, 2, dtype=torch.complex64)
save("conj_neg.pt", {"conj": z.conj().t(),
                     "neg": torch._neg_view(torch.randn(3, 4)).t()})
save("module.pt", torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))

for script in sys.argv[2:]:
    sys.argv = [script, out]
    runpy.run_path(script, run_name="__main__")
