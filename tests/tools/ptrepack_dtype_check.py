"""ptrepack_dtype_check.py MANIFEST - compare what ptrepack --dtype wrote
with torch's own .to() (tests/tools/ptrepack_dtype.sh).  Each manifest
line is SRC OUT DTYPE GLOB ('-': every tensor).  torch.load(OUT) must
equal {k: v.to(DTYPE)} for every floating tensor whose key path matches
(the others unchanged), bit for bit, and keep what .to() would lose:
storage sharing (ties and views), strides and offsets, Parameters,
requires_grad, container types, _metadata; under 2.x it must load with
weights_only=True too.  One line per file; exit 1 on any failure.
"""
import fnmatch
import sys

import torch

INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
two = int(torch.__version__.split('.')[0]) >= 2


def sid(t):
    return t.untyped_storage().data_ptr() if two else t.storage().data_ptr()


class Bad(Exception):
    pass


def check(a, b, dt, glob):
    seen = []                     # (path, src tensor, out tensor)

    def walk(x, y, path):
        if type(x) is not type(y):
            raise Bad('%s: %s became %s' % (path, type(x).__name__,
                                              type(y).__name__))
        if isinstance(x, torch.Tensor):
            want = x
            if x.is_floating_point() and (glob is None or
                                          fnmatch.fnmatchcase(path, glob)):
                want = x.to(dt)
            for what in ('dtype', 'shape', 'requires_grad'):
                if getattr(want, what) != getattr(y, what):
                    raise Bad('%s: %s %s, .to() gives %s' % (
                        path, what, getattr(y, what), getattr(want, what)))
            if y.stride() != x.stride() or \
               y.storage_offset() != x.storage_offset():
                raise Bad('%s: view %s+%d, was %s+%d' % (
                    path, y.stride(), y.storage_offset(), x.stride(),
                    x.storage_offset()))
            if y.numel():
                it = INT[y.element_size()]
                yb, wb = y.detach().view(it), want.detach().view(it)
                diff = yb != wb
                if not two and x.dtype in (torch.float32, torch.float64) \
                   and dt == torch.bfloat16:
                    # torch 1.13 writes such a NaN as 0xffff inside its
                    # vectorised loop and 0x7fc0 in its scalar one (a
                    # strided tensor; float64's last numel % 16): that
                    # is per tensor, not per storage, so of views sharing
                    # a storage only "one of the two" can be asked
                    nan2 = (((yb == -1) | (yb == 0x7fc0)) &
                            ((wb == -1) | (wb == 0x7fc0)))
                    diff &= ~(x.detach().isnan() & nan2)
                ne = diff.nonzero()
                if len(ne):
                    i = tuple(ne[0].tolist())
                    xb = x.detach().view(INT[x.element_size()])
                    raise Bad('%s: %d elements differ, first at %s: %s '
                              '0x%x -> 0x%x, .to() gives 0x%x' % (
                                  path, len(ne), i, x.dtype,
                                  xb[i].item() & (1 << 8 * x.element_size()) - 1,
                                  yb[i].item() & (1 << 8 * y.element_size()) - 1,
                                  wb[i].item() & (1 << 8 * y.element_size()) - 1))
            if getattr(x, '__dict__', {}) != getattr(y, '__dict__', {}):
                raise Bad('%s: python attributes %r, were %r' % (
                    path, getattr(y, '__dict__', {}),
                    getattr(x, '__dict__', {})))
            seen.append((path, x, y))
            return
        if isinstance(x, dict):
            if list(x) != list(y):
                raise Bad('%s: keys %s, were %s' % (path, list(y), list(x)))
            if getattr(x, '_metadata', None) != getattr(y, '_metadata', None):
                raise Bad('%s: _metadata changed' % path)
            for k in x:
                walk(x[k], y[k], '%s/%s' % (path, k) if path else str(k))
        elif isinstance(x, (list, tuple)):
            if len(x) != len(y):
                raise Bad('%s: length changed' % path)
            for i, (p, q) in enumerate(zip(x, y)):
                walk(p, q, '%s/%d' % (path, i) if path else str(i))
        elif x != y:
            raise Bad('%s: %r became %r' % (path, x, y))

    walk(a, b, '')
    # sharing: two tensors share a storage (or are one object) in the
    # output exactly when they did in the source
    for i, (p, x, y) in enumerate(seen):
        for q, x2, y2 in seen[i + 1:]:
            if (sid(x) == sid(x2)) != (sid(y) == sid(y2)) or \
               (x is x2) != (y is y2):
                raise Bad('%s and %s: sharing changed' % (p, q))
    return len(seen)


fail = 0
for line in open(sys.argv[1]):
    src, out, name, glob = line.rstrip('\n').split('\t')
    glob = None if glob == '-' else glob
    try:
        a = torch.load(src)
        b = torch.load(out)
        n = check(a, b, getattr(torch, name), glob)
        if two:
            torch.load(out, weights_only=True)
        print('ok %s -> %s%s: %d tensors' % (
            src.rsplit('/', 1)[-1], name, ' --only ' + glob if glob else '',
            n))
    except Exception as e:          # a Bad, or torch refusing the file
        fail += 1
        print('FAIL %s -> %s%s: %s' % (out.rsplit('/', 1)[-1], name,
                                      ' --only ' + glob if glob else '', e))
sys.exit(1 if fail else 0)
