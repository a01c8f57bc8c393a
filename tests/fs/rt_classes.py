# rt_classes.py - classes the round-trip cases pickle (tests/fs/roundtrip.sh).
# They must be importable wherever the checkpoints are loaded, so the
# generator and the checker put this directory on sys.path.
import torch


class Slotted:
    """A class whose pickled state is a (dict, slots) pair."""
    __slots__ = ('x', 'name', '__dict__')

    def __init__(self, x, name):
        self.x = x
        self.name = name
        self.extra = [1, 2]

    def __eq__(self, other):
        return (type(other) is Slotted and self.x == other.x and
                self.name == other.name and self.extra == other.extra)


class OnlySlots:
    """State (None, slots): no __dict__ at all."""
    __slots__ = ('a', 'b')

    def __init__(self, a, b):
        self.a = a
        self.b = b

    def __eq__(self, other):
        return type(other) is OnlySlots and (self.a, self.b) == (other.a,
                                                                 other.b)


class Holder(torch.Tensor):
    """A wrapper subclass holding its real tensor as an attribute: the
    outer tensor has no storage (torch 2.x pickles it with
    _rebuild_wrapper_subclass, the inner tensor in its state)."""

    @staticmethod
    def __new__(cls, inner, tag):
        r = torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, strides=inner.stride(), dtype=inner.dtype,
            device=inner.device, requires_grad=False)
        r.inner = inner
        r.tag = tag
        return r

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}

        def un(x):
            return x.inner if isinstance(x, Holder) else x
        args = [un(a) for a in args]
        kwargs = {k: un(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)

    def __repr__(self):
        return 'Holder(%r, %r)' % (self.inner, self.tag)
