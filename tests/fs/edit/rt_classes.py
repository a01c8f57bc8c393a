# rt_classes.py - classes the round-trip cases pickle (tests/fs/edit/roundtrip.sh).
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


class SlotBase:
    """A base class with __slots__ whose subclass has a __dict__: state
    ({'c': ...}, {'x': ..., 'y': ...}) (issue 39 item 7)."""
    __slots__ = ('x', 'y')


class SlotChild(SlotBase):
    def __init__(self, x, y, c):
        self.x = x
        self.y = y
        self.c = c

    def __eq__(self, other):
        return (type(other) is SlotChild and
                (self.x, self.y, self.c) == (other.x, other.y, other.c))


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


class MetaState(torch.Tensor):
    """torch 1.13's kind of wrapper subclass (PyTorch's own
    test_serialization.py has it): a subclass of a meta tensor, no data of
    its own, holding its real tensor as an attribute; pickled with the
    tuple its __getstate__ gives.  No __torch_function__: torch 2.x would
    otherwise hand the inner tensor out as a MetaState too."""
    __slots__ = ['elem']
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, elem):
        r = torch.Tensor._make_subclass(cls, elem.to('meta'),
                                        elem.requires_grad)
        r.elem = elem
        return r

    def __getstate__(self):
        return ('v1', self.elem, self.__dict__)

    def __setstate__(self, state):
        marker, self.elem, self.__dict__ = state
        if marker != 'v1':
            raise RuntimeError('not a MetaState state: %r' % (marker,))


class MetaSlots(torch.Tensor):
    """The same with the real tensor in __slots__: a (dict, slots) state."""
    __slots__ = ['elem', 'other']
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, elem, other):
        r = torch.Tensor._make_subclass(cls, elem.to('meta'),
                                        elem.requires_grad)
        r.elem = elem
        r.other = other
        return r
