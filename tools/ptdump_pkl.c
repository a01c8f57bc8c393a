/*
 * ptdump_pkl.c - ptdump --pickle: a symbolic listing of a pickle that is
 * line for line what Python's `python3 -m pickletools` prints
 * (Lib/pickletools.py dis(): offset, opcode, argument as repr(), MARK
 * blocks indented, "(MARK at N)" where a mark is popped, memo checks), and
 * with --annotate what `pickletools -a` adds.  It decodes opcodes only; it
 * shares no code with the parser (core/pickle), so it also lists pickles
 * the parser refuses, up to the first opcode pickletools would refuse.
 */
#include "ptdump.h"

#include "json_out.h"
#include "pyrepr.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

enum arg {
	A_NONE, A_UINT1, A_UINT2, A_INT4, A_UINT4, A_UINT8,
	A_DECIMALNL_SHORT, A_DECIMALNL_LONG, A_STRINGNL, A_STRINGNL_NOESCAPE,
	A_STRINGNL_NOESCAPE_PAIR, A_STRING1, A_STRING4, A_BYTES1, A_BYTES4,
	A_BYTES8, A_BYTEARRAY8, A_UNICODESTRINGNL, A_UNICODESTRING1,
	A_UNICODESTRING4, A_UNICODESTRING8, A_FLOATNL, A_FLOAT8, A_LONG1,
	A_LONG4,
};

/*
 * pickletools.opcodes: code, name, argument, protocol, a markobject among
 * stack_before / stack_after, items popped below the mark (or all), items
 * pushed, and the first line of the doc (for --annotate).
 */
static const struct opinfo {
	unsigned char code;
	const char *name;
	uint8_t arg, proto, mark_before, mark_after, npop, npush;
	const char *doc;
} ops[] = {
	{ 0x49, "INT", A_DECIMALNL_SHORT, 0, 0, 0, 0, 1,
	  "Push an integer or bool." },
	{ 0x4a, "BININT", A_INT4, 1, 0, 0, 0, 1,
	  "Push a four-byte signed integer." },
	{ 0x4b, "BININT1", A_UINT1, 1, 0, 0, 0, 1,
	  "Push a one-byte unsigned integer." },
	{ 0x4d, "BININT2", A_UINT2, 1, 0, 0, 0, 1,
	  "Push a two-byte unsigned integer." },
	{ 0x4c, "LONG", A_DECIMALNL_LONG, 0, 0, 0, 0, 1,
	  "Push a long integer." },
	{ 0x8a, "LONG1", A_LONG1, 2, 0, 0, 0, 1,
	  "Long integer using one-byte length." },
	{ 0x8b, "LONG4", A_LONG4, 2, 0, 0, 0, 1,
	  "Long integer using found-byte length." },
	{ 0x53, "STRING", A_STRINGNL, 0, 0, 0, 0, 1,
	  "Push a Python string object." },
	{ 0x54, "BINSTRING", A_STRING4, 1, 0, 0, 0, 1,
	  "Push a Python string object." },
	{ 0x55, "SHORT_BINSTRING", A_STRING1, 1, 0, 0, 0, 1,
	  "Push a Python string object." },
	{ 0x42, "BINBYTES", A_BYTES4, 3, 0, 0, 0, 1,
	  "Push a Python bytes object." },
	{ 0x43, "SHORT_BINBYTES", A_BYTES1, 3, 0, 0, 0, 1,
	  "Push a Python bytes object." },
	{ 0x8e, "BINBYTES8", A_BYTES8, 4, 0, 0, 0, 1,
	  "Push a Python bytes object." },
	{ 0x96, "BYTEARRAY8", A_BYTEARRAY8, 5, 0, 0, 0, 1,
	  "Push a Python bytearray object." },
	{ 0x97, "NEXT_BUFFER", A_NONE, 5, 0, 0, 0, 1,
	  "Push an out-of-band buffer object." },
	{ 0x98, "READONLY_BUFFER", A_NONE, 5, 0, 0, 1, 1,
	  "Make an out-of-band buffer object read-only." },
	{ 0x4e, "NONE", A_NONE, 0, 0, 0, 0, 1,
	  "Push None on the stack." },
	{ 0x88, "NEWTRUE", A_NONE, 2, 0, 0, 0, 1,
	  "Push True onto the stack." },
	{ 0x89, "NEWFALSE", A_NONE, 2, 0, 0, 0, 1,
	  "Push False onto the stack." },
	{ 0x56, "UNICODE", A_UNICODESTRINGNL, 0, 0, 0, 0, 1,
	  "Push a Python Unicode string object." },
	{ 0x8c, "SHORT_BINUNICODE", A_UNICODESTRING1, 4, 0, 0, 0, 1,
	  "Push a Python Unicode string object." },
	{ 0x58, "BINUNICODE", A_UNICODESTRING4, 1, 0, 0, 0, 1,
	  "Push a Python Unicode string object." },
	{ 0x8d, "BINUNICODE8", A_UNICODESTRING8, 4, 0, 0, 0, 1,
	  "Push a Python Unicode string object." },
	{ 0x46, "FLOAT", A_FLOATNL, 0, 0, 0, 0, 1,
	  "Newline-terminated decimal float literal." },
	{ 0x47, "BINFLOAT", A_FLOAT8, 1, 0, 0, 0, 1,
	  "Float stored in binary form, with 8 bytes of data." },
	{ 0x5d, "EMPTY_LIST", A_NONE, 1, 0, 0, 0, 1,
	  "Push an empty list." },
	{ 0x61, "APPEND", A_NONE, 0, 0, 0, 2, 1,
	  "Append an object to a list." },
	{ 0x65, "APPENDS", A_NONE, 1, 1, 0, 1, 1,
	  "Extend a list by a slice of stack objects." },
	{ 0x6c, "LIST", A_NONE, 0, 1, 0, 0, 1,
	  "Build a list out of the topmost stack slice, after markobject." },
	{ 0x29, "EMPTY_TUPLE", A_NONE, 1, 0, 0, 0, 1,
	  "Push an empty tuple." },
	{ 0x74, "TUPLE", A_NONE, 0, 1, 0, 0, 1,
	  "Build a tuple out of the topmost stack slice, after markobject." },
	{ 0x85, "TUPLE1", A_NONE, 2, 0, 0, 1, 1,
	  "Build a one-tuple out of the topmost item on the stack." },
	{ 0x86, "TUPLE2", A_NONE, 2, 0, 0, 2, 1,
	  "Build a two-tuple out of the top two items on the stack." },
	{ 0x87, "TUPLE3", A_NONE, 2, 0, 0, 3, 1,
	  "Build a three-tuple out of the top three items on the stack." },
	{ 0x7d, "EMPTY_DICT", A_NONE, 1, 0, 0, 0, 1,
	  "Push an empty dict." },
	{ 0x64, "DICT", A_NONE, 0, 1, 0, 0, 1,
	  "Build a dict out of the topmost stack slice, after markobject." },
	{ 0x73, "SETITEM", A_NONE, 0, 0, 0, 3, 1,
	  "Add a key+value pair to an existing dict." },
	{ 0x75, "SETITEMS", A_NONE, 1, 1, 0, 1, 1,
	  "Add an arbitrary number of key+value pairs to an existing dict." },
	{ 0x8f, "EMPTY_SET", A_NONE, 4, 0, 0, 0, 1,
	  "Push an empty set." },
	{ 0x90, "ADDITEMS", A_NONE, 4, 1, 0, 1, 1,
	  "Add an arbitrary number of items to an existing set." },
	{ 0x91, "FROZENSET", A_NONE, 4, 1, 0, 0, 1,
	  "Build a frozenset out of the topmost slice, after markobject." },
	{ 0x30, "POP", A_NONE, 0, 0, 0, 1, 0,
	  "Discard the top stack item, shrinking the stack by one item." },
	{ 0x32, "DUP", A_NONE, 0, 0, 0, 1, 2,
	  "Push the top stack item onto the stack again, duplicating it." },
	{ 0x28, "MARK", A_NONE, 0, 0, 1, 0, 0,
	  "Push markobject onto the stack." },
	{ 0x31, "POP_MARK", A_NONE, 1, 1, 0, 0, 0,
	  "Pop all the stack objects at and above the topmost markobject." },
	{ 0x67, "GET", A_DECIMALNL_SHORT, 0, 0, 0, 0, 1,
	  "Read an object from the memo and push it on the stack." },
	{ 0x68, "BINGET", A_UINT1, 1, 0, 0, 0, 1,
	  "Read an object from the memo and push it on the stack." },
	{ 0x6a, "LONG_BINGET", A_UINT4, 1, 0, 0, 0, 1,
	  "Read an object from the memo and push it on the stack." },
	{ 0x70, "PUT", A_DECIMALNL_SHORT, 0, 0, 0, 0, 0,
	  "Store the stack top into the memo.  The stack is not popped." },
	{ 0x71, "BINPUT", A_UINT1, 1, 0, 0, 0, 0,
	  "Store the stack top into the memo.  The stack is not popped." },
	{ 0x72, "LONG_BINPUT", A_UINT4, 1, 0, 0, 0, 0,
	  "Store the stack top into the memo.  The stack is not popped." },
	{ 0x94, "MEMOIZE", A_NONE, 4, 0, 0, 1, 1,
	  "Store the stack top into the memo.  The stack is not popped." },
	{ 0x82, "EXT1", A_UINT1, 2, 0, 0, 0, 1, "Extension code." },
	{ 0x83, "EXT2", A_UINT2, 2, 0, 0, 0, 1, "Extension code." },
	{ 0x84, "EXT4", A_INT4, 2, 0, 0, 0, 1, "Extension code." },
	{ 0x63, "GLOBAL", A_STRINGNL_NOESCAPE_PAIR, 0, 0, 0, 0, 1,
	  "Push a global object (module.attr) on the stack." },
	{ 0x93, "STACK_GLOBAL", A_NONE, 4, 0, 0, 2, 1,
	  "Push a global object (module.attr) on the stack." },
	{ 0x52, "REDUCE", A_NONE, 0, 0, 0, 2, 1,
	  "Push an object built from a callable and an argument tuple." },
	{ 0x62, "BUILD", A_NONE, 0, 0, 0, 2, 1,
	  "Finish building an object, via __setstate__ or dict update." },
	{ 0x69, "INST", A_STRINGNL_NOESCAPE_PAIR, 0, 1, 0, 0, 1,
	  "Build a class instance." },
	{ 0x6f, "OBJ", A_NONE, 1, 1, 0, 0, 1, "Build a class instance." },
	{ 0x81, "NEWOBJ", A_NONE, 2, 0, 0, 2, 1, "Build an object instance." },
	{ 0x92, "NEWOBJ_EX", A_NONE, 4, 0, 0, 3, 1,
	  "Build an object instance." },
	{ 0x80, "PROTO", A_UINT1, 2, 0, 0, 0, 0,
	  "Protocol version indicator." },
	{ 0x2e, "STOP", A_NONE, 0, 0, 0, 1, 0,
	  "Stop the unpickling machine." },
	{ 0x95, "FRAME", A_UINT8, 4, 0, 0, 0, 0,
	  "Indicate the beginning of a new frame." },
	{ 0x50, "PERSID", A_STRINGNL_NOESCAPE, 0, 0, 0, 0, 1,
	  "Push an object identified by a persistent ID." },
	{ 0x51, "BINPERSID", A_NONE, 1, 0, 0, 1, 1,
	  "Push an object identified by a persistent ID." },
};

static const struct opinfo *by_code[256];

/* ---- the emulated stack and memo (only "object" or "mark" matters) ---- */

struct dis {
	const unsigned char *p;	/* the pickle; positions are base + i */
	size_t len, pos;
	uint64_t base;
	unsigned char *stack;	/* 1 = markobject */
	size_t nstack, capstack;
	uint64_t *marks;	/* positions of the open MARKs */
	size_t nmarks, capmarks;
	uint64_t *memo;		/* open addressing; key + 1, 0 = empty */
	size_t capmemo, nmemo;
	char err[200];
	uint64_t err_pos;
};

static bool grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 64;
	void *nv;

	if (need <= *cap)
		return true;
	while (c < need)
		c *= 2;
	nv = realloc(*v, c * size);
	if (!nv)
		return false;
	*v = nv;
	*cap = c;
	return true;
}

static uint64_t *memo_slot(struct dis *s, uint64_t key)
{
	size_t i = (key * 0x9e3779b97f4a7c15ull >> 17) & (s->capmemo - 1);

	while (s->memo[i] && s->memo[i] != key + 1)
		i = (i + 1) & (s->capmemo - 1);
	return &s->memo[i];
}

static bool memo_has(struct dis *s, uint64_t key)
{
	return s->capmemo && *memo_slot(s, key);
}

static bool memo_add(struct dis *s, uint64_t key)
{
	if (2 * (s->nmemo + 1) > s->capmemo) {
		uint64_t *old = s->memo;
		size_t ocap = s->capmemo;

		s->capmemo = ocap ? 2 * ocap : 256;
		s->memo = calloc(s->capmemo, sizeof(*s->memo));
		if (!s->memo) {
			s->memo = old;
			s->capmemo = ocap;
			return false;
		}
		for (size_t i = 0; i < ocap; i++)
			if (old[i])
				*memo_slot(s, old[i] - 1) = old[i];
		free(old);
	}
	*memo_slot(s, key) = key + 1;
	s->nmemo++;
	return true;
}

static int fail(struct dis *s, uint64_t pos, const char *fmt, const char *a)
{
	snprintf(s->err, sizeof(s->err), fmt, a);
	s->err_pos = pos;
	return -1;
}

/* ---- argument readers: Python's value, as repr(), appended to @b ---- */

static bool take(struct dis *s, size_t n, const unsigned char **out)
{
	if (n > s->len - s->pos)
		return false;
	*out = s->p + s->pos;
	s->pos += n;
	return true;
}

static uint64_t le(const unsigned char *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = n; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* readline(): up to and including '\n'; false when there is none */
static bool line(struct dis *s, const unsigned char **out, size_t *n)
{
	const unsigned char *nl = memchr(s->p + s->pos, '\n', s->len - s->pos);

	if (!nl)
		return false;
	*out = s->p + s->pos;
	*n = (size_t)(nl - *out);
	s->pos += *n + 1;
	return true;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* codecs.escape_decode() then .decode('ascii'), as code points */
static long escape_decode(const unsigned char *p, size_t n, uint32_t *cp)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = p[i];
		int v;

		if (c != '\\') {
			if (c >= 0x80)
				return -1;	/* not ASCII */
			cp[k++] = c;
			continue;
		}
		if (++i == n)
			return -2;	/* trailing \ */
		switch (c = p[i]) {
		case '\n': continue;
		case 'a': cp[k++] = 7; continue;
		case 'b': cp[k++] = 8; continue;
		case 'f': cp[k++] = 12; continue;
		case 'n': cp[k++] = 10; continue;
		case 'r': cp[k++] = 13; continue;
		case 't': cp[k++] = 9; continue;
		case 'v': cp[k++] = 11; continue;
		case '\\': case '\'': case '"': cp[k++] = c; continue;
		case 'x':
			if (i + 2 >= n || hexval(p[i + 1]) < 0 ||
			    hexval(p[i + 2]) < 0)
				return -3;
			v = hexval(p[i + 1]) * 16 + hexval(p[i + 2]);
			if (v >= 0x80)
				return -1;
			cp[k++] = (uint32_t)v;
			i += 2;
			continue;
		default:
			if (c >= '0' && c <= '7') {
				v = c - '0';
				for (int j = 0; j < 2 && i + 1 < n &&
				     p[i + 1] >= '0' && p[i + 1] <= '7'; j++)
					v = v * 8 + (p[++i] - '0');
				if (v >= 0x80)
					return -1;
				cp[k++] = (uint32_t)v;
				continue;
			}
			if (c >= 0x80)
				return -1;
			cp[k++] = '\\';
			cp[k++] = c;
		}
	}
	return (long)k;
}

/* read_stringnl(): optional quotes, escapes undone, ASCII only */
static int stringnl(struct dis *s, uint64_t pos, bool quotes, uint32_t **cp,
		    long *ncp)
{
	const unsigned char *p;
	size_t n;

	if (!line(s, &p, &n))
		return fail(s, pos, "no newline found when trying to read "
			    "stringnl%s", "");
	if (quotes) {
		if (!n || (p[0] != '\'' && p[0] != '"'))
			return fail(s, pos, "no string quotes around the "
				    "argument%s", "");
		if (n < 2 || p[n - 1] != p[0])
			return fail(s, pos, "string quote %s not found at both "
				    "ends", p[0] == '"' ? "'\"'" : "\"'\"");
		p++;
		n -= 2;
	}
	*cp = malloc((2 * n + 1) * sizeof(**cp));
	if (!*cp)
		return fail(s, pos, "out of memory%s", "");
	*ncp = escape_decode(p, n, *cp);
	if (*ncp < 0) {
		free(*cp);
		*cp = NULL;
		return fail(s, pos, "%s", *ncp == -1 ?
			    "'ascii' codec can't decode the argument" :
			    "invalid escape in the argument");
	}
	return 0;
}

/* int(s) of a decimal line, as Python prints it (no bignum needed) */
static int decimal(struct dis *s, uint64_t pos, const unsigned char *p,
		   size_t n, struct sbuf *b)
{
	size_t i = 0, j = n, start;
	bool neg = false, digit = false;

	while (i < j && (p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r')))
		i++;
	while (j > i && (p[j - 1] == ' ' ||
			 (p[j - 1] >= '\t' && p[j - 1] <= '\r')))
		j--;
	if (i < j && (p[i] == '+' || p[i] == '-'))
		neg = p[i++] == '-';
	start = i;
	for (size_t k = i; k < j; k++) {
		if (p[k] >= '0' && p[k] <= '9') {
			digit = true;
			continue;
		}
		/* one '_' between digits, as int() allows */
		if (p[k] == '_' && k > start && k + 1 < j &&
		    p[k - 1] != '_' && p[k + 1] >= '0' && p[k + 1] <= '9')
			continue;
		digit = false;
		break;
	}
	if (!digit || i == j)
		return fail(s, pos, "invalid literal for int() with base "
			    "10%s", "");
	while (i + 1 < j && (p[i] == '0' || p[i] == '_'))
		i++;
	if (neg && !(j - i == 1 && p[i] == '0'))
		sb_puts(b, "-");
	for (; i < j; i++)
		if (p[i] != '_')
			sb_add(b, (const char *)p + i, 1);
	return 0;
}

static int str_arg(struct dis *s, uint64_t pos, const unsigned char *p,
		   size_t n, bool utf8, struct sbuf *b)
{
	uint32_t *cp;
	long k;

	if (utf8) {
		k = py_utf8_decode(p, n, &cp);
		if (k < 0)
			return fail(s, pos, "%s", k == -1 ? "'utf-8' codec "
				    "can't decode the argument" :
				    "out of memory");
	} else {
		cp = malloc((n ? n : 1) * sizeof(*cp));
		if (!cp)
			return fail(s, pos, "out of memory%s", "");
		for (size_t i = 0; i < n; i++)
			cp[i] = p[i];	/* latin-1 */
		k = (long)n;
	}
	py_repr_str(b, cp, (size_t)k);
	free(cp);
	return 0;
}

/* raw-unicode-escape: latin-1, except \uXXXX and \UXXXXXXXX escapes */
static int raw_unicode(struct dis *s, uint64_t pos, const unsigned char *p,
		       size_t n, struct sbuf *b)
{
	uint32_t *cp = malloc((n ? n : 1) * sizeof(*cp));
	size_t k = 0;

	if (!cp)
		return fail(s, pos, "out of memory%s", "");
	for (size_t i = 0; i < n;) {
		size_t bs = 0, digits;
		uint32_t v = 0;

		while (i + bs < n && p[i + bs] == '\\')
			bs++;
		if (!bs || bs % 2 == 0 || i + bs >= n ||
		    (p[i + bs] != 'u' && p[i + bs] != 'U')) {
			for (size_t j = 0; j < (bs ? bs : 1); j++)
				cp[k++] = p[i++];
			continue;
		}
		for (size_t j = 0; j + 1 < bs; j++)
			cp[k++] = p[i++];
		digits = p[i + 1] == 'u' ? 4 : 8;
		i += 2;
		for (size_t j = 0; j < digits; j++, i++) {
			unsigned char c = i < n ? p[i] | 0x20 : 0;

			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
				free(cp);
				return fail(s, pos, "'rawunicodeescape' codec "
					    "can't decode the argument%s", "");
			}
			v = v * 16 + (c <= '9' ? c - '0' : c - 'a' + 10);
		}
		if (v > 0x10ffff) {
			free(cp);
			return fail(s, pos, "\\Uxxxxxxxx out of range%s", "");
		}
		cp[k++] = v;
	}
	py_repr_str(b, cp, k);
	free(cp);
	return 0;
}

/*
 * Read the argument of @op at s->pos and append its repr() to @b.  For
 * memo opcodes *@key gets the key.  Returns 1 when there is an argument,
 * 0 when there is none, -1 on failure (s->err set).
 */
static int read_arg(struct dis *s, const struct opinfo *op, uint64_t pos,
		    struct sbuf *b, uint64_t *key)
{
	const unsigned char *p;
	size_t n;
	int64_t i4;
	double f;
	uint32_t *cp;
	long ncp;

	switch (op->arg) {
	case A_NONE:
		return 0;
	case A_UINT1:
	case A_UINT2:
	case A_UINT4:
	case A_UINT8:
		n = op->arg == A_UINT1 ? 1 : op->arg == A_UINT2 ? 2 :
		    op->arg == A_UINT4 ? 4 : 8;
		if (!take(s, n, &p))
			return fail(s, pos, "not enough data in stream to read "
				    "%s", op->arg == A_UINT1 ? "uint1" :
				    op->arg == A_UINT2 ? "uint2" :
				    op->arg == A_UINT4 ? "uint4" : "uint8");
		*key = le(p, n);
		sb_printf(b, "%" PRIu64, *key);
		return 1;
	case A_INT4:
		if (!take(s, 4, &p))
			return fail(s, pos, "not enough data in stream to read "
				    "int4%s", "");
		i4 = (int32_t)(uint32_t)le(p, 4);
		sb_printf(b, "%" PRId64, i4);
		return 1;
	case A_DECIMALNL_SHORT:
	case A_DECIMALNL_LONG:
		if (!line(s, &p, &n))
			return fail(s, pos, "no newline found when trying to "
				    "read stringnl%s", "");
		if (op->arg == A_DECIMALNL_SHORT && n == 2 && p[0] == '0' &&
		    (p[1] == '0' || p[1] == '1')) {
			sb_puts(b, p[1] == '1' ? "True" : "False");
			*key = p[1] - '0';
			return 1;
		}
		if (op->arg == A_DECIMALNL_LONG && n && p[n - 1] == 'L')
			n--;
		*key = strtoull((const char *)p, NULL, 10);
		return decimal(s, pos, p, n, b) ? -1 : 1;
	case A_FLOATNL: {
		char tmp[64], *end;

		if (!line(s, &p, &n))
			return fail(s, pos, "no newline found when trying to "
				    "read stringnl%s", "");
		if (n >= sizeof(tmp))
			return fail(s, pos, "could not convert string to "
				    "float%s", "");
		memcpy(tmp, p, n);
		tmp[n] = '\0';
		f = strtod(tmp, &end);
		while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
			end++;
		if (end == tmp || *end)
			return fail(s, pos, "could not convert string to "
				    "float%s", "");
		py_repr_float(b, f);
		return 1;
	}
	case A_FLOAT8:
		if (!take(s, 8, &p))
			return fail(s, pos, "not enough data in stream to read "
				    "float8%s", "");
		{
			uint64_t u = 0;

			for (int k = 0; k < 8; k++)
				u = u << 8 | p[k];
			memcpy(&f, &u, sizeof(f));
		}
		py_repr_float(b, f);
		return 1;
	case A_LONG1:
	case A_LONG4:
		if (op->arg == A_LONG1 ? !take(s, 1, &p) : !take(s, 4, &p))
			return fail(s, pos, "not enough data in stream to read "
				    "%s", op->arg == A_LONG1 ? "uint1" : "int4");
		i4 = op->arg == A_LONG1 ? p[0] : (int32_t)(uint32_t)le(p, 4);
		if (i4 < 0)
			return fail(s, pos, "long4 byte count < 0%s", "");
		if (!take(s, (size_t)i4, &p))
			return fail(s, pos, "not enough data in stream to read "
				    "%s", op->arg == A_LONG1 ? "long1" : "long4");
		if (!py_repr_long(b, p, (size_t)i4))
			return fail(s, pos, "Exceeds the limit (4300 digits) "
				    "for integer string conversion%s", "");
		return 1;
	case A_STRING1:
	case A_STRING4:
	case A_BYTES1:
	case A_BYTES4:
	case A_BYTES8:
	case A_BYTEARRAY8:
	case A_UNICODESTRING1:
	case A_UNICODESTRING4:
	case A_UNICODESTRING8: {
		size_t lb = op->arg == A_STRING1 || op->arg == A_BYTES1 ||
			    op->arg == A_UNICODESTRING1 ? 1 :
			    op->arg == A_BYTES8 || op->arg == A_BYTEARRAY8 ||
			    op->arg == A_UNICODESTRING8 ? 8 : 4;
		uint64_t cnt;

		if (!take(s, lb, &p))
			return fail(s, pos, "not enough data in stream to read "
				    "the argument's length%s", "");
		cnt = le(p, lb);
		if (op->arg == A_STRING4 && (cnt & 0x80000000u))
			return fail(s, pos, "string4 byte count < 0%s", "");
		if (cnt > s->len - s->pos)
			return fail(s, pos, "expected more bytes than remain "
				    "in %s", op->name);
		take(s, (size_t)cnt, &p);
		if (op->arg == A_STRING1 || op->arg == A_STRING4)
			return str_arg(s, pos, p, (size_t)cnt, false, b) ? -1 : 1;
		if (op->arg >= A_UNICODESTRING1)
			return str_arg(s, pos, p, (size_t)cnt, true, b) ? -1 : 1;
		py_repr_bytes(b, p, (size_t)cnt, op->arg == A_BYTEARRAY8);
		return 1;
	}
	case A_UNICODESTRINGNL:
		if (!line(s, &p, &n))
			return fail(s, pos, "no newline found when trying to "
				    "read unicodestringnl%s", "");
		return raw_unicode(s, pos, p, n, b) ? -1 : 1;
	case A_STRINGNL:
	case A_STRINGNL_NOESCAPE:
		if (stringnl(s, pos, op->arg == A_STRINGNL, &cp, &ncp))
			return -1;
		py_repr_str(b, cp, (size_t)ncp);
		free(cp);
		return 1;
	case A_STRINGNL_NOESCAPE_PAIR: {
		uint32_t *cp2, *both;
		long n2;

		if (stringnl(s, pos, false, &cp, &ncp))
			return -1;
		if (stringnl(s, pos, false, &cp2, &n2)) {
			free(cp);
			return -1;
		}
		both = malloc((size_t)(ncp + n2 + 1) * sizeof(*both));
		if (both) {
			memcpy(both, cp, (size_t)ncp * sizeof(*cp));
			both[ncp] = ' ';
			memcpy(both + ncp + 1, cp2, (size_t)n2 * sizeof(*cp2));
			py_repr_str(b, both, (size_t)(ncp + n2 + 1));
		}
		free(both);
		free(cp);
		free(cp2);
		return both ? 1 : fail(s, pos, "out of memory%s", "");
	}
	}
	return 0;
}

/* ---- the listing ---- */

static void json_op(FILE *f, bool first, uint64_t pos,
		    const struct opinfo *op, const struct sbuf *arg,
		    int has_arg, size_t depth, const char *markmsg)
{
	fputs(first ? "\n  {\"pos\":" : ",\n  {\"pos\":", f);
	json_u64(f, pos);
	fputs(",\"op\":", f);
	json_cstr(f, op->name);
	fprintf(f, ",\"code\":%u,\"depth\":%zu,\"arg\":", op->code, depth);
	if (has_arg)
		json_str(f, arg->p, arg->n);
	else
		fputs("null", f);
	if (markmsg) {
		fputs(",\"note\":", f);
		json_cstr(f, markmsg);
	}
	putc('}', f);
}

/*
 * Disassemble the one pickle in @p[0..@len), whose first byte is at
 * position @base (pickletools prints positions of the file it reads), as
 * pickletools.dis(annotate=@annotate) does.  *@end gets the position
 * after STOP.  Returns 0, or -1 with the error printed (one line).
 */
static int dis_one(FILE *out, const struct dump_opts *o,
		   const unsigned char *p, size_t len, uint64_t base,
		   uint64_t *end, const char *path, uint64_t delta)
{
	struct dis s = { .p = p, .len = len, .base = base };
	struct sbuf ln = { 0 }, arg = { 0 };
	size_t annocol = o->annotate ? 30 : 0;
	int maxproto = -1, rc = -1;
	bool first = true, stopped = false;

	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		by_code[ops[i].code] = &ops[i];
	if (o->json)
		fputs("{\"offset\":", out), json_u64(out, base),
		fputs(",\"ops\":[", out);
	while (!stopped) {
		uint64_t pos = base + s.pos, key = 0;
		const struct opinfo *op;
		char markmsg[64] = "";
		size_t npop;
		int has;
		char code[8];

		if (s.pos >= s.len) {
			fail(&s, pos, "pickle exhausted before seeing STOP%s",
			     "");
			goto out;
		}
		op = by_code[s.p[s.pos]];
		if (!op) {
			snprintf(code, sizeof(code), "0x%02x", s.p[s.pos]);
			fail(&s, pos, "opcode %s unknown", code);
			goto out;
		}
		s.pos++;
		arg.n = 0;
		if (arg.p)
			arg.p[0] = '\0';
		has = read_arg(&s, op, pos, &arg, &key);
		if (has < 0)
			goto out;
		ln.n = 0;
		if (op->code >= 0x20 && op->code < 0x7f)
			snprintf(code, sizeof(code), "%c", op->code);
		else
			snprintf(code, sizeof(code), "\\x%02x", op->code);
		sb_printf(&ln, "%-4s %*s%s", code, (int)(4 * s.nmarks), "",
			  op->name);
		if (op->proto > maxproto)
			maxproto = op->proto;
		npop = op->npop;
		if (op->mark_before || (op->code == '0' && s.nstack &&
					s.stack[s.nstack - 1])) {
			if (s.nmarks) {
				snprintf(markmsg, sizeof(markmsg),
					 "(MARK at %" PRIu64 ")",
					 s.marks[--s.nmarks]);
				while (s.nstack && !s.stack[s.nstack - 1])
					s.nstack--;
				/* an opcode before popped the mark as an item:
				   Python's emulation raises IndexError here */
				if (!s.nstack) {
					fail(&s, pos, "list index out of range "
					     "(MARK popped as an item)%s", "");
					goto out;
				}
				s.nstack--;
				if (!op->mark_before)
					npop = 0;
			} else {
				strcpy(markmsg, "no MARK exists on stack");
				fail(&s, pos, "%s", markmsg);
			}
		}
		if (op->code == 'p' || op->code == 'q' || op->code == 'r' ||
		    op->code == 0x94) {
			if (op->code == 0x94) {
				key = s.nmemo;
				snprintf(markmsg, sizeof(markmsg), "(as %zu)",
					 s.nmemo);
			}
			if (memo_has(&s, key))
				fail(&s, pos, "memo key %s already defined",
				     arg.p ? arg.p : "");
			else if (!s.nstack)
				fail(&s, pos, "stack is empty -- can't store "
				     "into memo%s", "");
			else if (s.stack[s.nstack - 1])
				fail(&s, pos, "can't store markobject in the "
				     "memo%s", "");
			else if (!memo_add(&s, key))
				fail(&s, pos, "out of memory%s", "");
		} else if ((op->code == 'g' || op->code == 'h' ||
			    op->code == 'j') && !memo_has(&s, key)) {
			fail(&s, pos, "memo key %s has never been stored into",
			     arg.p ? arg.p : "");
		}
		if (has || markmsg[0]) {
			size_t nl = strlen(op->name);

			sb_printf(&ln, "%*s", nl < 10 ? (int)(10 - nl) : 0, "");
			if (has)
				sb_printf(&ln, " %s", arg.p);
			if (markmsg[0])
				sb_printf(&ln, " %s", markmsg);
		}
		if (annocol) {
			size_t chars = sb_chars(&ln);

			if (annocol > chars)
				sb_printf(&ln, "%*s", (int)(annocol - chars), "");
			annocol = sb_chars(&ln);
			if (annocol > 50)
				annocol = 30;
			sb_printf(&ln, " %s", op->doc);
		}
		if (ln.oom || arg.oom) {
			fail(&s, pos, "out of memory%s", "");
			goto out;
		}
		if (o->json)
			json_op(out, first, pos, op, &arg, has, s.nmarks,
				markmsg[0] ? markmsg : NULL);
		else
			fprintf(out, "%5" PRIu64 ": %s\n", pos, ln.p);
		first = false;
		if (s.err[0])
			goto out;
		/* the stack effect */
		if (s.nstack < npop) {
			snprintf(s.err, sizeof(s.err), "tries to pop %zu items "
				 "from stack with only %zu items", npop,
				 s.nstack);
			s.err_pos = pos;
			goto out;
		}
		s.nstack -= npop;
		if (op->mark_after) {
			if (!grow((void **)&s.marks, &s.capmarks, s.nmarks + 1,
				  sizeof(*s.marks))) {
				fail(&s, pos, "out of memory%s", "");
				goto out;
			}
			s.marks[s.nmarks++] = pos;
		}
		if (!grow((void **)&s.stack, &s.capstack,
			  s.nstack + op->npush + op->mark_after, 1)) {
			fail(&s, pos, "out of memory%s", "");
			goto out;
		}
		for (int k = 0; k < op->npush; k++)
			s.stack[s.nstack++] = 0;
		if (op->mark_after)
			s.stack[s.nstack++] = 1;
		stopped = op->code == '.';
	}
	if (o->json)
		fprintf(out, "\n ],\"highest_protocol\":%d}", maxproto);
	else
		fprintf(out, "highest protocol among opcodes = %d\n", maxproto);
	if (s.nstack) {
		snprintf(s.err, sizeof(s.err), "stack not empty after STOP "
			 "(%zu items)", s.nstack);
		s.err_pos = base + s.pos;
		goto out;
	}
	*end = base + s.pos;
	rc = 0;
out:
	if (rc && o->json && !first)
		fputs("\n ]}", out);
	else if (rc && o->json)
		fputs("]}", out);
	if (rc)
		dump_error(path, s.err_pos + delta, "pickle: %s", s.err);
	free(s.stack);
	free(s.marks);
	free(s.memo);
	free(ln.p);
	free(arg.p);
	return rc;
}

int dump_pickles(FILE *out, const struct dump_opts *o, const char *path,
		 const unsigned char *p, size_t len, uint64_t base, int count,
		 uint64_t file_off)
{
	uint64_t pos = base, end;
	int rc = 0;

	if (o->json) {
		fputs("{\"file\":", out);
		json_cstr(out, path);
		fputs(",\"pickles\":[", out);
	}
	for (int i = 0; i < count && !rc; i++) {
		if (o->json && i)
			fputs(",\n", out);
		rc = dis_one(out, o, p + (pos - base), len - (pos - base), pos,
			     &end, path, file_off - base);
		pos = end;
	}
	if (o->json)
		fputs("]}\n", out);
	return rc;
}
