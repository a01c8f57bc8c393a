# rt_check.py - torch.load checks for tests/fs/edit/roundtrip.sh: the file ptfs
# wrote back must load (with the torch running this script) as exactly the
# original with the test's edit made in python.
#
#   usage: python3 rt_check.py CASE ORIGINAL EDITED
#
# Prints one line, "ok: ..." or "FAIL: ..." (or "skip: ..." when this torch
# cannot load the original either, e.g. a torch 2.x subclass under 1.13),
# and exits 0, 1 or 77.
import io
import os
import sys
import types
import warnings
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.simplefilter('ignore')
import torch  # noqa: E402
import rt_classes  # noqa: E402,F401  (the pickles name it)

T2 = int(torch.__version__.split('.')[0]) >= 2


def load(path, weights_only=False):
    if isinstance(path, bytes):
        path = io.BytesIO(path)
    if T2:
        return torch.load(path, weights_only=weights_only)
    return torch.load(path)


class Diff(Exception):
    pass


def eq(a, b, where, seen):
    """Deep equality with identity: a pair already being compared is
    taken as equal (cycles), and sharing in a must be sharing in b."""
    key = (id(a), id(b))
    if key in seen:
        return
    seen[key] = (a, b)
    if type(a) is not type(b):
        raise Diff('%s: type %s != %s' % (where, type(a).__name__,
                                            type(b).__name__))
    if isinstance(a, torch.Tensor):
        if (a.dtype, a.shape, a.requires_grad) != (b.dtype, b.shape,
                                                   b.requires_grad):
            raise Diff('%s: %s %s != %s %s' % (where, a.dtype,
                                               tuple(a.shape), b.dtype,
                                               tuple(b.shape)))
        if type(a) is torch.Tensor or type(a) is torch.nn.Parameter:
            if a.stride() != b.stride():
                raise Diff('%s: stride %s != %s' % (where, a.stride(),
                                                    b.stride()))
            if not torch.equal(a.detach(), b.detach()):
                raise Diff('%s: values differ' % where)
        eq(getattr(a, '__dict__', {}), getattr(b, '__dict__', {}),
           where + '.__dict__', seen)
        for s in getattr(type(a), '__slots__', ()):
            eq(getattr(a, s, None), getattr(b, s, None),
               '%s.%s' % (where, s), seen)
        return
    if isinstance(a, torch.nn.Module):
        eq(a.__dict__, b.__dict__, where + '.__dict__', seen)
        return
    if isinstance(a, dict):
        # keys may be tensors (an optimizer's state): compared as values,
        # in order
        if len(a) != len(b):
            raise Diff('%s: keys %s != %s' % (where, list(a)[:8],
                                              list(b)[:8]))
        for i, ((ka, va), (kb, vb)) in enumerate(zip(a.items(),
                                                     b.items())):
            eq(ka, kb, '%s.keys()[%d]' % (where, i), seen)
            eq(va, vb, '%s[%r]' % (where, ka if isinstance(
                ka, (str, int)) else i), seen)
        return
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            raise Diff('%s: %d != %d items' % (where, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            eq(x, y, '%s[%d]' % (where, i), seen)
        return
    if isinstance(a, types.MethodType):
        if a.__func__ is not b.__func__:
            raise Diff('%s: method %s != %s' % (where, a, b))
        eq(a.__self__, b.__self__, where + '.__self__', seen)
        return
    if hasattr(a, '__slots__') or hasattr(a, '__dict__'):
        for s in getattr(type(a), '__slots__', ()):
            if s != '__dict__':
                eq(getattr(a, s, None), getattr(b, s, None),
                   '%s.%s' % (where, s), seen)
        if hasattr(a, '__dict__'):
            eq(a.__dict__, b.__dict__, where + '.__dict__', seen)
        return
    if a != b and not (a != a and b != b):
        raise Diff('%s: %r != %r' % (where, a, b))


def sharing(a, b):
    """Objects reached twice in a must be one object in b too."""
    def walk(x, path, out, depth=0):
        if depth > 50 or isinstance(x, (int, float, str, bytes, bool,
                                        type(None))):
            return
        if id(x) in out:
            out[id(x)][1].append(path)
            return
        out[id(x)] = (x, [path])
        if isinstance(x, dict):
            for k, v in x.items():
                if isinstance(k, (str, int)):
                    walk(v, path + (k,), out, depth + 1)
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, path + (i,), out, depth + 1)

    def at(x, path):
        for p in path:
            x = x[p]
        return x
    sa = {}
    walk(a, (), sa)
    for _, paths in sa.values():
        if len(paths) > 1:
            first = at(b, paths[0])
            for p in paths[1:]:
                if at(b, p) is not first:
                    raise Diff('%s and %s are one object in the original, '
                               'two after' % (paths[0], p))


def f32(t, v=10.0):
    t.view(-1)[0] = v


def edit(case, d):
    """The edit roundtrip.sh makes through the mount, made in python."""
    if case == 'legacy_module':
        f32(d.weight.data)
    elif case == 'legacy_seq':
        d['epoch'] = 8
        f32(d['model'][0].bias.data)
    elif case == 'empty_two_dtypes':
        d['new'] = {}
        f32(d['w'])
    elif case == 'crcless':
        f32(d['w'])
    elif case == 'onecycle':
        d['extra'] = {}
        d['epoch'] = 2
    elif case == 'slots':
        d['obj'].x = 5
        d['only'].a = 9
        d['obj'].newattr = {}
    elif case == 'slots_moved':
        d['o'].y = 3
        d['p'].y = {}
        d['only'].b = 'b'
    elif case == 'scalar_lists':
        d['new'] = {}
        d['hist'] = [0.5, None, True, 3, -1e-300] + [2] * 15
    elif case == 'shared_dict':
        del d['a']
    elif case == 'many':
        f32(d['t123'])
        d['newdir'] = {}
    elif case == 'zip_of_ckpts':
        f32(d['mlp.bias'])
    elif case == 'meta_subclass':
        f32(d['st'].elem)
        d['st'].__dict__['note'] = 'b'
        d['st'].extra = {}  # where the refused mkdir st/x points to
        f32(d['sl'].elem, 11.0)
        d['sl'].other = 7
    elif case == 'subclass':
        d['holder'].tag = 'tag2'
        f32(d['tt'].a)
        d['tt'].extra = {}
    else:
        raise SystemExit('unknown case ' + case)
    return d


def main():
    case, orig, edited = sys.argv[1:4]
    src = orig
    if case == 'zip_of_ckpts':
        src = zipfile.ZipFile(orig).read('policy.pth')
    try:
        want = edit(case, load(src))
    except Exception as e:  # noqa: BLE001 - any failure to load
        print('skip: torch %s cannot load the original either: %s' %
              (torch.__version__, str(e).splitlines()[0][:100]))
        return 77
    try:
        got = load(edited)
        eq(want, got, 'obj', {})
        if case == 'slots_moved':
            # where each name went: a slot in the slots, never in __dict__
            for k in 'op':
                if 'y' in got[k].__dict__ or got[k].__dict__ != {'c': want[k].c}:
                    raise Diff('%s.__dict__ is %r' % (k, got[k].__dict__))
        sharing(want, got)
        if T2 and case in ('empty_two_dtypes', 'crcless', 'many',
                           'shared_dict', 'zip_of_ckpts'):
            # what loaded weights-only before must still load so
            eq(want, load(edited, weights_only=True), 'weights_only', {})
    except Diff as e:
        print('FAIL: torch %s: %s' % (torch.__version__, e))
        return 1
    except Exception as e:  # noqa: BLE001
        print('FAIL: torch %s: %s: %s' % (torch.__version__,
                                          type(e).__name__,
                                          str(e).splitlines()[0][:160]))
        return 1
    print('ok: torch %s loads the edit' % torch.__version__)
    return 0


if __name__ == '__main__':
    sys.exit(main())
