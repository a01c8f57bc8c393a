#!/usr/bin/python3
# pkl_text_cases.py - the table test_pkl_text.c holds core/pickle's text
# arguments to: protocol 0 pickles with tricky INT, LONG, FLOAT, STRING,
# UNICODE, GET and PUT lines (and the counted strings beside them),
# each loaded by this CPython's C unpickler (_pickle, what torch.load
# runs) and written down with what it gave.  ctest runs it into the build
# directory at every run (the pkl_text_cases test); nothing is committed.
#
#   /usr/bin/python3 tests/unit/pkl_text_cases.py OUT
#
# One case a line, fields separated by one space (hex "-": no bytes):
#
#   NAME PICKLE-HEX RESULT
#
#   error             pickle.loads raised
#   int DECIMAL       an int that fits int64
#   big HEX           any other int: minimal little-endian two's complement
#   bool 0|1          INT's False / True
#   float HEX         a float's IEEE 754 bits, big-endian (NaN sign kept)
#   str HEX           a str, encoded UTF-8 with "surrogatepass"
#   string HEX 0|1    STRING/BINSTRING's bytes (encoding="bytes"), and 1
#                     if torch.load's encoding="utf-8" makes them a str
#   memo I            the root is a tuple whose last item is item I
#
# The fuzz is seeded: the same CPython writes the same table.
import pickle
import random
import struct
import sys
import warnings

import _pickle

if sys.version_info < (3, 11) or pickle.loads is not _pickle.loads:
    sys.exit("pkl_text_cases.py: needs CPython 3.11+ with its C _pickle")
# STRING's unknown escapes warn (DeprecationWarning); torch.load runs
# without -Werror, so they are no errors here either
warnings.simplefilter("ignore")

cases = []


def hexs(b):
    return b.hex() or "-"


def add(name, data, result):
    assert " " not in name and "\n" not in name
    cases.append("%s %s %s" % (name, hexs(data), result))


def int_result(v):
    if isinstance(v, bool):
        return "bool %d" % v
    if -(1 << 63) <= v < (1 << 63):
        return "int %d" % v
    n = 1
    while not -(1 << (8 * n - 1)) <= v < (1 << (8 * n - 1)):
        n += 1
    return "big " + v.to_bytes(n, "little", signed=True).hex()


def load(data, **kw):
    try:
        return True, pickle.loads(data, **kw)
    except Exception:  # any refusal: UnpicklingError, ValueError, ...
        return False, None


def number(name, data):
    ok, v = load(data)
    if not ok:
        add(name, data, "error")
    elif isinstance(v, float):
        add(name, data, "float " + struct.pack(">d", v).hex())
    else:
        assert isinstance(v, int), (data, v)
        add(name, data, int_result(v))


def text(name, data):
    ok, v = load(data)
    add(name, data, "str " + hexs(v.encode("utf-8", "surrogatepass"))
        if ok else "error")


def string(name, data):
    ok, v = load(data, encoding="bytes")
    if not ok:
        add(name, data, "error")
        return
    is_str, _ = load(data, encoding="utf-8")
    add(name, data, "string %s %d" % (hexs(v), is_str))


def memo(name, data):
    ok, v = load(data)
    if not ok:
        add(name, data, "error")
        return
    hits = [i for i, x in enumerate(v[:-1]) if x is v[-1]]
    assert len(hits) == 1, (data, v)
    add(name, data, "memo %d" % hits[0])


ints = [
    b"0", b"1", b"00", b"01", b"02", b"10", b"-0", b"+0", b"-1", b"+1",
    b" 0", b" 1", b"0 ", b"1 ", b"\t1", b"1\t", b"\x0b1", b"\x0c1", b"\r1",
    b"1\r", b"\x1c1", b"1\x1c", b"\xa01", b"1\x85", b"\x00", b"\x00\x00",
    b"1\x00", b"0\x00", b"\x001", b"12\x00abc", b"1_0\x00xyz", b" \x00",
    b"+\x00", b"", b" ", b"+", b"-", b"+-1", b"--1", b"- 1", b"1-",
    b"007", b"010", b"017", b"08", b"09", b"0_7", b"0_0", b"00_0", b"0_",
    b"010 ", b"00 ", b" 0 ", b"0777777777777777777777777",
    b"0x1f", b"0X1F", b"0x1F ", b"-0x1f", b" +0x1f", b"0x", b"0x ", b"0xg",
    b"0x\x00", b"0x_1", b"0x__1", b"0x1_", b"0x_", b"0x1_f", b"0x1__f",
    b"0o17", b"0O17", b"0o8", b"0o_7", b"0o", b"0b11", b"0B11", b"0b2",
    b"0b_1", b"0b", b"0b1_0_1", b"1_0", b"1__0", b"1_", b"_1", b"1_000_000",
    b"1 0", b"1.0", b"1e3", b"1L", b"1l", b"L", b"1LL", b"1 L", b"0L",
    b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808",
    b"-9223372036854775809", b"18446744073709551615", b"18446744073709551616",
    b"0x7fffffffffffffff", b"0x8000000000000000", b"-0x8000000000000000",
    b"-0x8000000000000001", b"0xffffffffffffffff", b"0x10000000000000000",
    b"01777777777777777777777", b"0o1777777777777777777777",
    b"99999999999999999999", b"-99999999999999999999", b"1" * 100,
    b"0" * 4300, b"0" * 4301, b"1" * 4300, b"1" * 4301, b"1_" * 4300 + b"1",
    b"-" + b"9" * 4300, b"0x" + b"f" * 5000, b"0b" + b"1" * 3000,
    b"0o" + b"7" * 4500, b"0x" + b"0" * 6000 + b"1", b"0b" + b"0" * 9 + b"1",
    b"\xd9\xa1", b"\xef\xbc\x91", b"\xe2\x80\x83" + b"1",
]
for i, a in enumerate(ints):
    number("int_%d" % i, b"I" + a + b"\n.")
    number("long_%d" % i, b"L" + a + b"\n.")
    number("longL_%d" % i, b"L" + a + b"L\n.")

floats = [
    b"0", b"1.5", b"-2e3", b"1.", b".5", b".", b"-.5", b"+.5e-3", b"1e",
    b"1e+", b"1e-", b"1e5", b"1E5", b"1e+5", b"1.e5", b".e5", b"e5",
    b" 1.5", b"1.5 ", b"\t1", b"1.5\x00x", b"\x00", b"", b"-", b"+",
    b"1_0.5", b"1.5_0", b"0x1p3", b"0x10", b"inf", b"-inf", b"+inf",
    b"INF", b"Infinity", b"-Infinity", b"iNfInItY", b"infin", b"infinit",
    b"infinityx", b"nan", b"-nan", b"+nan", b"NaN", b"NAN", b"nan(1)",
    b"nanq", b"in", b"na", b"- inf", b"1e999", b"-1e999", b"1e308",
    b"1.7976931348623157e308", b"1.7976931348623158e308",
    b"1.7976931348623159e308", b"-1.7976931348623159e308", b"1e-999",
    b"-1e-999", b"4.9e-324", b"2e-324", b"2.5e-324", b"3e-324",
    b"2.2250738585072011e-308", b"2.2250738585072014e-308",
    b"0.1", b"0.3", b"9007199254740993", b"9007199254740993.0000000001",
    b"1e0000000000000000000005", b"1e99999999999999", b"0e99999999999",
    b"1e-99999999999999", b"0." + b"0" * 500 + b"1", b"1" * 400,
    b"1" * 400 + b"e-400", b"0" * 1000 + b"1.5", b"00.5", b"-0", b"-0.0",
    b"1,5", b"\xef\xbc\x91", b"1e5.", b"1e5e5", b"..5", b"1..5",
]
for i, a in enumerate(floats):
    number("float_%d" % i, b"F" + a + b"\n.")

strings = [
    b"''", b'""', b"'", b'"', b"'a", b"a'", b"'a\"", b"'a'b'", b"'it''",
    b"abc", b"", b" 'a'", b"'a' ", rb"'\x41'", rb"'\x4'", rb"'\x'",
    rb"'\x4g'", rb"'\xG1'", rb"'\xfF'", rb"'\x414'", rb"'\0'", rb"'\08'",
    rb"'\1234'", rb"'\777'", rb"'\400'", rb"'\8'", rb"'\q'", rb"'\\'",
    rb"'a\'", rb"'\'", rb"'\''", rb"'\"'", rb"'\n\t\r\a\b\f\v'",
    rb"'\N{DASH}'", rb"'\u0041'", rb"'\U00000041'", b"'\\\x00'",
    b"'\x00'", b"'\xff'", rb"'\xff'", rb"'\xc3\xa9'", b"'\xc3\xa9'",
    rb"'\xed\xa0\x80'", rb"'\xf0\x9f\x98\x80'", rb"'\xf4\x90\x80\x80'",
    rb"'\xc0\x80'", b"'\\\xe9'", rb"'\\\\'", rb"'\\\'",
]
for i, a in enumerate(strings):
    string("string_%d" % i, b"S" + a + b"\n.")

unicodes = [
    b"", b"abc", rb"\u0041", rb"\\u0041", rb"\\\u0041", rb"\\\\u0041",
    rb"\\\\\u0041", rb"\u004", rb"\u", rb"\u004g", rb"\U", rb"\U0001F600",
    rb"\U00110000", rb"\U0010ffff", rb"\UFFFFFFFF", rb"\U0010FFFF",
    rb"\ud800", rb"\udfff", rb"\ud83d\ude00", b"\\", b"a\\", b"\\\\",
    b"\\\\\\", rb"\x41", rb"\n", rb"\N{DASH}", b"\xe9", b"\x80\xff",
    b"a\x00b", b"\\\x00", b"\\\xe9", rb"\u00e9x", rb"\u20ac", rb"\U000020ac",
    rb"\u005c\u0041", rb"\u005cu0041", b"\\u\\u0041", rb"\u 041",
    rb"\u+041", rb"\u-041", rb"\u0_41", rb"\u0000",
]
for i, a in enumerate(unicodes):
    text("unicode_%d" % i, b"V" + a + b"\n.")

counted = [
    b"", b"abc", b"\xc3\xa9", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0",
    b"\xed", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xc0\x80",
    b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xf0\x80\x80\x80",
    b"\xf0\x8f\xbf\xbf", b"\xed\xa0\xbd\xed\xb8\x80", b"\xf0\x9f\x98\x80",
    b"\xef\xbf\xbf", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff", b"\x80",
    b"a\x00b", b"\xe2\x82", b"\xe2\x82\xac", b"\xc3", b"\xc3\x28",
]
for i, a in enumerate(counted):
    text("binunicode_%d" % i, b"X" + struct.pack("<I", len(a)) + a + b".")
    text("short_binunicode_%d" % i, b"\x8c" + bytes([len(a)]) + a + b".")
    string("binstring_%d" % i, b"T" + struct.pack("<i", len(a)) + a + b".")
    string("short_binstring_%d" % i, b"U" + bytes([len(a)]) + a + b".")

# memo keys: small enough that no PUT makes CPython's memo list huge
keys = [
    b"10", b"010", b"0010", b"1_0", b"+10", b" 10", b"10 ", b"\t10\r",
    b"10\x00zz", b"0_10", b"1__0", b"_10", b"10_", b"0x10", b"0xa", b"1e1",
    b"10L", b"10.0", b"-10", b"-0", b"+0", b"0", b"00", b"", b" ", b"+",
    b"-", b"\x00", b"1" + b"0" * 4300, b"0" * 4299 + b"10",
    b"0" * 4300 + b"10", b"99999999999999999999", b"-99999999999999999999",
    b"-9223372036854775808", b"9223372036854775808", b"\xd9\xa1\xd9\xa0",
]
for i, a in enumerate(keys):
    memo("get_%d" % i, b"(]p10\ng" + a + b"\nt.")
    memo("put_%d" % i, b"(]p" + a + b"\ng10\nt.")
    memo("putget_%d" % i, b"(]p" + a + b"\n]p7\ng" + a + b"\nt.")

# the fuzz: the same spellings shuffled, a few hundred of each
rng = random.Random(20240615)
int_bits = [b"0", b"1", b"7", b"9", b"_", b"__", b"+", b"-", b" ", b"\t",
            b"0x", b"0X", b"0o", b"0b", b"a", b"f", b"F", b"L", b"x",
            b"\x00", b"00", b"8", b"12345678901234567890"]
for i in range(400):
    a = b"".join(rng.choice(int_bits) for _ in range(rng.randint(1, 7)))
    number("fuzz_int_%d" % i, b"I" + a + b"\n.")
    number("fuzz_long_%d" % i, b"L" + a + b"\n.")
for i in range(200):
    a = b"".join(rng.choice(int_bits[:10] + [b"\x00", b"00"])
                 for _ in range(rng.randint(1, 6)))
    memo("fuzz_get_%d" % i, b"(]p10\ng" + a + b"\nt.")
    try:
        k = int(a.split(b"\x00")[0].decode(), 10)
    except ValueError:
        k = -1
    if k < 100000:	# else CPython's memo grows to 2 * k entries
        memo("fuzz_put_%d" % i, b"(]p" + a + b"\ng10\nt.")
float_bits = [b"0", b"1", b"5", b"9", b".", b"e", b"E", b"+", b"-", b"_",
              b" ", b"\x00", b"inf", b"nan", b"INF", b"inity", b"x",
              b"e308", b"e-324", b"00", b"123456789"]
for i in range(400):
    a = b"".join(rng.choice(float_bits) for _ in range(rng.randint(1, 6)))
    number("fuzz_float_%d" % i, b"F" + a + b"\n.")
esc_bits = [b"\\", b"\\\\", b"x", b"u", b"U", b"0", b"4", b"7", b"8", b"a",
            b"f", b"G", b"'", b'"', b"n", b"q", b"\x00", b"\xe9", b"\xc3",
            b"\xa9", b"\xed", b"\xa0", b"\x80", b"00", b"41", b"d8", b"10"]
for i in range(300):
    a = b"".join(rng.choice(esc_bits) for _ in range(rng.randint(1, 8)))
    string("fuzz_string_%d" % i, b"S'" + a + b"'\n.")
    text("fuzz_unicode_%d" % i, b"V" + a + b"\n.")
utf8_bits = [b"a", b"\x00", b"\x7f", b"\x80", b"\xbf", b"\xc0", b"\xc2",
             b"\xdf", b"\xe0", b"\xed", b"\xee", b"\xef", b"\xf0", b"\xf4",
             b"\xf5", b"\xff", b"\xa0", b"\x9f", b"\x90", b"\x8f"]
for i in range(300):
    a = b"".join(rng.choice(utf8_bits) for _ in range(rng.randint(1, 6)))
    text("fuzz_binunicode_%d" % i, b"X" + struct.pack("<I", len(a)) + a +
         b".")
    string("fuzz_binstring_%d" % i, b"U" + bytes([len(a)]) + a + b".")



# spellings of random values, most of them valid: the values themselves
def spell_int(v):
    base = rng.choice([10, 10, 10, 16, 8, 2])
    digits = {10: "%d", 16: "%x", 8: "%o", 2: "{:b}"}[base]
    d = (digits.format(abs(v)) if base == 2 else digits % abs(v))
    if rng.random() < 0.3:
        d = "".join(c + rng.choice(["", "", "_"]) for c in d[:-1]) + d[-1]
    if base == 16 and rng.random() < 0.5:
        d = d.upper()
    prefix = {10: "", 16: "0x", 8: "0o", 2: "0b"}[base]
    if prefix and rng.random() < 0.2:
        prefix = prefix.upper() + rng.choice(["", "_"])
    if base == 10 and rng.random() < 0.1:
        d = "0" + d	# CPython: an error in base 0, octal to strtol
    sign = "-" if v < 0 else rng.choice(["", "", "+"])
    sp = rng.choice(["", "", " ", "\t", "\r"])
    tail = rng.choice(["", "", "", " ", "\x00", "\x00junk"])
    return (sp + sign + prefix + d + tail).encode()


for i in range(500):
    v = rng.choice([rng.randint(-2, 2), rng.randint(-1 << 40, 1 << 40),
                    rng.randint(-1 << 64, 1 << 64),
                    rng.randint(-1 << 300, 1 << 300)])
    a = spell_int(v)
    number("spelt_int_%d" % i, b"I" + a + b"\n.")
    number("spelt_long_%d" % i, b"L" + a + rng.choice([b"", b"L"]) +
           b"\n.")


def spell_key(v):
    d = "%d" % v
    if rng.random() < 0.3:
        d = "".join(c + rng.choice(["", "", "_", "__"]) for c in d[:-1]) + \
            d[-1]
    d = "0" * rng.choice([0, 0, 1, 3]) + d
    sign = rng.choice(["", "", "", "+", "-"]) if v == 0 else \
        rng.choice(["", "", "", "+"])
    sp = rng.choice(["", "", " ", "\t"])
    tail = rng.choice(["", "", "", " ", "\r", "\x00", "\x00x", "L"])
    return (sp + sign + d + tail).encode()


for i in range(400):
    k1 = rng.randint(0, 40)
    k2 = k1 if rng.random() < 0.7 else rng.randint(0, 40)
    memo("spelt_memo_%d" % i, b"(]p" + spell_key(k1) + b"\n]p" +
         spell_key(rng.randint(0, 40)) + b"\ng" + spell_key(k2) + b"\nt.")

for i in range(400):
    kind = rng.random()
    if kind < 0.4:	# a double, as repr writes it or longer
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        t = repr(x) if rng.random() < 0.5 else "%.25e" % x
    elif kind < 0.8:	# decimal digits around a rounding boundary
        t = "%d.%de%d" % (rng.randint(1, 9), rng.getrandbits(80),
                          rng.randint(-330, 310))
    else:
        t = rng.choice(["0", "-0", "1", "5e-324", "1e308", "2e308",
                        "inf", "-nan", "Infinity"])
    if rng.random() < 0.2:
        t = t.upper()
    t += rng.choice(["", "", "", "\x00", " ", "_", "0"])
    number("spelt_float_%d" % i, b"F" + t.encode() + b"\n.")

for i in range(300):
    cps = [rng.choice([rng.randint(0, 0x7f), rng.randint(0x80, 0x7ff),
                       rng.randint(0x800, 0xffff), rng.randint(0xd800, 0xdfff),
                       rng.randint(0x10000, 0x10ffff)])
           for _ in range(rng.randint(1, 4))]
    a = bytearray("".join(map(chr, cps)).encode("utf-8", "surrogatepass"))
    if rng.random() < 0.3:
        a[rng.randrange(len(a))] = rng.randrange(256)
    if rng.random() < 0.1:
        del a[-1]
    a = bytes(a)
    text("spelt_binunicode_%d" % i, b"X" + struct.pack("<I", len(a)) + a +
         b".")
    string("spelt_binstring_%d" % i, b"U" + bytes([len(a)]) + a + b".")
    u = "".join(rng.choice(["\\u%04x" % c, "\\U%08x" % c] if c > 0xff
                           else [chr(c)]) if c != 0x5c and c != 0x0a
                else "\\u%04x" % c for c in cps)
    text("spelt_unicode_%d" % i, b"V" + u.encode("latin-1") + b"\n.")

with open(sys.argv[1], "w") as f:
    f.write("".join(c + "\n" for c in cases))
print("pkl_text_cases.py: %d cases" % len(cases))
