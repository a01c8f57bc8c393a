#!/usr/bin/python3
"""Make the small pickles test_pkl.c reads: one object, pickled with each
protocol 0 to 5 (values_p0.pkl ... values_p5.pkl).  Nothing torch-specific;
any Python 3.8+ gives the same bytes.  Run from anywhere:

    /usr/bin/python3 tests/data/make_pickles.py

test_pkl.c (python_pickles_of_every_protocol) checks the values listed in
obj below, so change both together.
"""
import os
import pickle


class Point:
    """Pickled by reference as __main__.Point: NEWOBJ (or REDUCE) + BUILD."""

    def __init__(self):
        self.x = 1


shared = ['shared']
obj = {
    'int': 7,
    'neg': -300,
    'i32': -2**31,
    'i64': 2**63 - 1,
    'big': 2**64 + 1,
    'negbig': -2**70,
    'float': -1.25,
    'str': 'h\xe9llo \u20ac\U0001f600 \\ \n end',
    'bytes': b'\x00\xff\'"\\',
    'none': None,
    'yes': True,
    'no': False,
    'tuple': (1, 'a', None),
    'list': [1, 2, 3],
    'set': {5},
    'frozen': frozenset({6}),
    'a': shared,
    'b': shared,
    'point': Point(),
}

here = os.path.dirname(os.path.abspath(__file__))
for proto in range(6):
    with open(os.path.join(here, 'values_p%d.pkl' % proto), 'wb') as f:
        f.write(pickle.dumps(obj, protocol=proto))
