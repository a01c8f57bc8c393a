"""ptrepack_dtype_gen.py OUTDIR SEED - checkpoints for ptrepack --dtype,
written by the torch under test (tests/tools/ptrepack_dtype.sh):

  patterns.pt   every float16 and bfloat16 bit pattern, every float8 one
                (2.x), and millions of float32/float64 patterns: uniform
                random bits, values near each narrower type's range ends
                and subnormals, exact ties and their neighbours for each
                type's rounding, NaN payloads, infinities, signed zeros
  model.pt      the shapes a conversion must keep: a module's state_dict
                (_metadata), tied weights, views, a transpose, Parameters,
                requires_grad, ints and bools left alone, float16/float64
                sources, an OrderedDict, nested lists; float8 (2.x)
  model_nograd.pt  the same without the tensor that requires grad
  tie.pt        two keys sharing one storage, for --only refusals
  legacy.pt     a tie and views in the legacy (< 1.6) format
  deflated.pt   model.pt with every record deflated (Python's zipfile)
  bad_*.pt      what torch.save never writes but a file may hold, each
                written with a hand-made pickle (2.x only: they need
                _rebuild_tensor_v3): one storage viewed as float8 and
                bfloat16 (bad_twodtypes.pt), a float32 tensor over an
                untyped storage of 6 bytes (bad_partial.pt), a float
                storage saved on its own beside its tensor
                (bad_storage.pt)
"""
import collections
import io
import os
import pickle
import sys
import zipfile

import numpy as np
import torch

out, seed = sys.argv[1], int(sys.argv[2])
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(seed)
F8 = [n for n in ('float8_e4m3fn', 'float8_e5m2', 'float8_e4m3fnuz',
                  'float8_e5m2fnuz') if hasattr(torch, n)]


def f32_bits(n):
    """float32 bit patterns that exercise every narrowing."""
    parts = [rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)]
    # exponents from float32 subnormals up past float16's range
    for lo, hi in ((0, 1), (90, 145), (100, 135), (112, 160), (250, 256)):
        e = rng.integers(lo, hi, n // 4, dtype=np.uint32)
        m = rng.integers(0, 2**23, n // 4, dtype=np.uint32)
        s = rng.integers(0, 2, n // 4, dtype=np.uint32) << 31
        parts.append(s | (e << 23) | m)
        # ties and their neighbours for 7 (bf16), 10 (f16), 3 and 2
        # (float8) kept fraction bits
        for keep in (7, 10, 3, 2):
            low = 23 - keep
            t = (s | (e << 23) | (m & ~np.uint32((1 << low) - 1)) |
                 np.uint32(1 << (low - 1)))
            parts += [t, t - np.uint32(1), t + np.uint32(1)]
    edge = [0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
            0x7f800001, 0xff800001, 0x7fbfffff, 0x7fffffff, 0xffffffff,
            0x00000001, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff,
            0x477fe000, 0x477ff000, 0x477fefff, 0x47800000,  # f16 max
            0x43e00000, 0x43e80000, 0x43f00000, 0x43efffff,  # 448..480
            0x47600000, 0x47700000, 0x47800000, 0x476fffff,  # e5m2 max
            0x43700000, 0x43780000, 0x43800000,              # fnuz 240
            0x33000000, 0x33000001, 0x32ffffff, 0x387fc000]  # f16 subn.
    parts.append(np.array(edge, dtype=np.uint32))
    return np.concatenate(parts)


def f64_bits(n):
    parts = [rng.integers(0, 2**64, n, dtype=np.uint64)]
    e = rng.integers(1023 - 160, 1023 + 130, n, dtype=np.uint64)
    m = rng.integers(0, 2**52, n, dtype=np.uint64)
    s = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63)
    parts.append(s | (e << np.uint64(52)) | m)
    # float32 ties (double rounding) and their neighbours
    t = (s | (e << np.uint64(52)) | (m & ~np.uint64((1 << 29) - 1)) |
         np.uint64(1 << 28))
    parts += [t, t - np.uint64(1), t + np.uint64(1)]
    edge = [0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000,
            0x7ff8000000000000, 0x7ff0000000000001, 0xfff8000000000001,
            0x7fefffffffffffff, 1, 0x000fffffffffffff, 0x47efffffe0000000,
            0x47efffffefffffff, 0x47effffff0000000, 0x36a0000000000000]
    parts.append(np.array(edge, dtype=np.uint64))
    return np.concatenate(parts)


def from_bits(a, dtype, itype):
    return torch.from_numpy(a.astype(a.dtype).view(itype).copy()).view(dtype)


pat = collections.OrderedDict()
pat['f16'] = from_bits(np.arange(65536, dtype=np.uint16), torch.float16,
                       np.int16)
pat['bf16'] = from_bits(np.arange(65536, dtype=np.uint16), torch.bfloat16,
                        np.int16)
for n in F8:
    pat[n] = torch.arange(256, dtype=torch.uint8).view(getattr(torch, n))
pat["f32"] = from_bits(f32_bits(1 << 18), torch.float32, np.int32)
pat['f64'] = from_bits(f64_bits(1 << 19), torch.float64, np.int64)
# a strided view of the float32 patterns, so a view's elements are
# converted where they lie
pat['f32_view'] = pat['f32'][7::3]
torch.save(pat, os.path.join(out, 'patterns.pt'))

torch.manual_seed(seed)
net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4),
                          torch.nn.Linear(4, 3))
emb = torch.nn.Embedding(7, 3)
head = torch.nn.Linear(3, 7, bias=False)
head.weight = emb.weight                      # tied Parameter
base = torch.randn(6, 8)
model = collections.OrderedDict()
model['net'] = net.state_dict()               # _metadata, int buffer
model['emb'] = emb.state_dict()
model['emb_w'] = emb.weight
model['head_w'] = head.weight
model['base'] = base
model['base_again'] = base                    # the same tensor twice
model['rows'] = base[2:5]                     # views of one storage
model['cols'] = base[:, 1::3]
model['tr'] = base.t()
model['grad'] = torch.randn(3, 2, requires_grad=True)
model['param'] = torch.nn.Parameter(torch.randn(2, 3),
                                    requires_grad=False)
model['half'] = torch.randn(9).half()
model['double'] = torch.randn(2, 2, dtype=torch.float64)
model['bf'] = torch.randn(5).bfloat16()
model['ints'] = torch.arange(6)
model['mask'] = torch.tensor([True, False])
model['empty'] = torch.zeros(0, 3)
model['scalar'] = torch.tensor(2.5)
model['list'] = [torch.randn(2), 3, 'x', base[0]]
for n in F8:
    model[n] = torch.randn(4, 4).to(getattr(torch, n))
if F8:
    # a python attribute: 2.x saves it through _rebuild_from_type_v2
    model['attr'] = torch.randn(3)
    model['attr'].note = 'kept'
torch.save(model, os.path.join(out, 'model.pt'))
# torch cannot load a float8 tensor that requires grad (it saves one),
# and ptrepack cannot move one with attributes to float8: it refuses
# both, so float8 targets get the model without them
del model['grad']
model.pop('attr', None)
torch.save(model, os.path.join(out, 'model_nograd.pt'))

shared = torch.randn(4, 4)
torch.save({'enc': {'w': shared}, 'dec': {'w': shared[1]},
            'other': torch.randn(3)}, os.path.join(out, 'tie.pt'))
with zipfile.ZipFile(os.path.join(out, 'model.pt')) as zin, \
        zipfile.ZipFile(os.path.join(out, 'deflated.pt'), 'w',
                        zipfile.ZIP_DEFLATED) as zout:
    for info in zin.infolist():
        zout.writestr(info.filename, zin.read(info))

legacy_base = torch.randn(4, 3)
torch.save({'w': legacy_base, 'tied': legacy_base, 'col': legacy_base[:, 1],
            'p': torch.nn.Parameter(torch.randn(2)), 'n': torch.arange(3)},
           os.path.join(out, 'legacy.pt'),
           _use_new_zipfile_serialization=False)


class Storage:
    """a persistent id: ('storage', CLS, KEY, 'cpu', NUMEL)"""
    def __init__(self, cls, key, numel):
        self.pid = ('storage', cls, key, 'cpu', numel)


class Call:
    """FUNC(*ARGS) in the pickle, without calling it"""
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, Storage) else None


def hand_made(name, obj, records):
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(obj)
    with zipfile.ZipFile(os.path.join(out, name), 'w') as z:
        z.writestr('archive/data.pkl', buf.getvalue())
        for key, data in records.items():
            z.writestr('archive/data/' + key, data)
        z.writestr('archive/version', '3\n')


if F8:
    u = torch.storage.UntypedStorage
    v2, v3 = torch._utils._rebuild_tensor_v2, torch._utils._rebuild_tensor_v3
    hooks = collections.OrderedDict()
    hand_made('bad_twodtypes.pt', {
        'a': Call(v3, Storage(u, '0', 8), 0, (8,), (1,), False, hooks,
                  torch.float8_e4m3fn),
        'b': Call(v3, Storage(u, '0', 8), 0, (4,), (1,), False, hooks,
                  torch.bfloat16)}, {'0': bytes(range(8))})
    hand_made('bad_partial.pt', {
        'a': Call(v3, Storage(u, '0', 6), 0, (1,), (1,), False, hooks,
                  torch.float32)}, {'0': bytes(6)})
    hand_made('bad_storage.pt', {
        't': Call(v2, Storage(torch.FloatStorage, '0', 2), 0, (2,), (1,),
                  False, hooks),
        's': Storage(torch.FloatStorage, '0', 2)}, {'0': bytes(8)})
print('written with torch', torch.__version__, 'seed', seed)
