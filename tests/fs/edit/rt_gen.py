# rt_gen.py - write the checkpoints of tests/fs/edit/roundtrip.sh with the torch
# running this script: the files torch writes that ptfs once refused or
# could not write back (issue 16; issue 14 case 13).
#
#   usage: python3 rt_gen.py OUTDIR [CASE...]
#
# Writes OUTDIR/CASE.pt for each case this torch can write and prints
# "torch VERSION", then one line per case: "CASE written" or "CASE skip:
# why" (a torch that cannot write it, e.g. CRC-less files before 2.x).
import io
import os
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import rt_classes  # noqa: E402

T2 = int(torch.__version__.split('.')[0]) >= 2


def legacy_module(p):
    torch.manual_seed(1)
    torch.save(torch.nn.Linear(1, 2), p, _use_new_zipfile_serialization=False)


def legacy_seq(p):
    torch.manual_seed(2)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                            torch.nn.BatchNorm1d(4))
    torch.save({'model': m, 'epoch': 7}, p,
               _use_new_zipfile_serialization=False)


def empty_two_dtypes(p):
    # view() between item sizes works on an empty tensor: one storage,
    # three dtypes (torch checks dtypes only for storages with data)
    e = torch.empty(0)
    torch.save({'a': e, 'b': e.view(torch.int64), 'h': e.view(torch.half),
                'w': torch.arange(4.)}, p)


def crcless(p):
    if not T2:
        return 'torch 1.13 always writes CRCs'
    # the same object with CRCs, in a folder of its own so that the
    # archive's top folder (the file's base name) is the same
    on = os.path.join(os.path.dirname(p), 'crc_on')
    os.makedirs(on, exist_ok=True)
    for crc, path in ((True, os.path.join(on, os.path.basename(p))),
                      (False, p)):
        torch.serialization.set_crc32_options(crc)
        try:
            torch.manual_seed(3)
            torch.save({'w': torch.randn(5, 3), 'b': torch.arange(6),
                        'e': torch.empty(0), 'n': 3}, path)
        finally:
            torch.serialization.set_crc32_options(True)


def onecycle(p):
    torch.manual_seed(4)
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    s = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    m(torch.randn(2, 3)).sum().backward()
    opt.step()
    s.step()
    torch.save({'model': m.state_dict(), 'optimizer': opt.state_dict(),
                'scheduler': s.state_dict(), 'epoch': 1}, p)


def slots(p):
    torch.save({'obj': rt_classes.Slotted(3, 'three'),
                'only': rt_classes.OnlySlots(1, 'b'),
                'w': torch.ones(2, 2)}, p)


def slots_moved(p):
    # a slot moved out and back, a slot and an attribute made anew
    torch.save({'o': rt_classes.SlotChild(2, 3, 'foo'),
                'p': rt_classes.SlotChild(4, 5, 'bar'),
                'only': rt_classes.OnlySlots(1, 'b')}, p)


def scalar_lists(p):
    # long lists of python scalars: one value file each in the mount
    import random
    random.seed(8)
    torch.save({'rng': random.getstate(),
                'hist': [i / 7 for i in range(20)] + [float('inf'), -0.0],
                'flags': [True, None, 0, 1.0] * 5, 'w': torch.ones(3)}, p)


def shared_dict(p):
    s = {'x': torch.arange(3.), 'y': 5, 'z': {'deep': torch.ones(2)}}
    torch.save({'a': s, 'b': s, 'c': [s, 1]}, p)


def many(p):
    n = int(os.environ.get('RT_MANY', '530000'))
    d = {}
    for i in range(n):
        d['t%d' % i] = torch.tensor([float(i)])
    torch.save(d, p)


def zip_of_ckpts(p):
    torch.manual_seed(5)
    pol = io.BytesIO()
    torch.save({'mlp.weight': torch.randn(4, 3), 'mlp.bias': torch.zeros(4)},
               pol)
    var = io.BytesIO()
    torch.save({'log_std': torch.tensor([0.5, -0.5])}, var)
    opt = io.BytesIO()
    torch.save({'state': {}, 'param_groups': [{'lr': 0.001, 'params': [0]}]},
               opt)
    with zipfile.ZipFile(p, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr('data', '{"policy_class": "ActorCriticPolicy"}')
        z.writestr('policy.optimizer.pth', opt.getvalue())
        z.writestr('policy.pth', pol.getvalue())
        z.writestr('pytorch_variables.pth', var.getvalue())
        z.writestr('_stable_baselines3_version', '2.3.2')
        z.writestr('system_info.txt', 'OS: Linux\n')


def subclass(p):
    if not T2:
        return 'torch 1.13 cannot pickle wrapper subclasses'
    from torch.testing._internal.two_tensor import TwoTensor
    torch.manual_seed(6)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    tt = TwoTensor(a, b)
    h = rt_classes.Holder(torch.arange(6.).reshape(2, 3), 'tag1')
    torch.save({'tt': tt, 'holder': h, 'plain': torch.ones(2)}, p)


def meta_subclass(p):
    st = rt_classes.MetaState(torch.arange(4.))
    st.note = 'a'
    sl = rt_classes.MetaSlots(torch.ones(2, 3), 5)
    sl.x = 1  # a __dict__ of its own: torch 1.13 needs one to load it
    torch.save({'st': st, 'sl': sl, 'plain': torch.zeros(2)}, p)


CASES = {
    'legacy_module': legacy_module, 'legacy_seq': legacy_seq,
    'empty_two_dtypes': empty_two_dtypes, 'crcless': crcless,
    'onecycle': onecycle, 'slots': slots, 'slots_moved': slots_moved,
    'scalar_lists': scalar_lists, 'shared_dict': shared_dict,
    'many': many, 'zip_of_ckpts': zip_of_ckpts, 'subclass': subclass,
    'meta_subclass': meta_subclass,
}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(CASES)
    print('torch %s' % torch.__version__)
    for n in names:
        why = CASES[n](os.path.join(out, n + '.pt'))
        print('%s %s' % (n, 'skip: ' + why if why else 'written'))
        sys.stdout.flush()


if __name__ == '__main__':
    main()
