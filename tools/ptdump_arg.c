/*
 * ptdump_arg.c - the argument of each pickle opcode, decoded as
 * pickletools' readers decode it (read_uint1 ... read_long4, escape and
 * raw-unicode-escape decoding, int() of a decimal line) and printed as
 * Python's repr() prints the value (pyrepr.c), with pickletools' errors
 * for arguments it cannot read.
 */
#include "ptdump_pkl.h"

#include "pyrepr.h"
#include "util/le.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dis_fail(struct dis *s, uint64_t pos, const char *fmt, const char *a)
{
	snprintf(s->err, sizeof(s->err), fmt, a);
	s->err_pos = pos;
	return -1;
}


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
		return dis_fail(s, pos, "no newline found when trying to read "
			    "stringnl%s", "");
	if (quotes) {
		if (!n || (p[0] != '\'' && p[0] != '"'))
			return dis_fail(s, pos, "no string quotes around the "
				    "argument%s", "");
		if (n < 2 || p[n - 1] != p[0])
			return dis_fail(s, pos, "string quote %s not found at both "
				    "ends", p[0] == '"' ? "'\"'" : "\"'\"");
		p++;
		n -= 2;
	}
	*cp = malloc((2 * n + 1) * sizeof(**cp));
	if (!*cp)
		return dis_fail(s, pos, "out of memory%s", "");
	*ncp = escape_decode(p, n, *cp);
	if (*ncp < 0) {
		free(*cp);
		*cp = NULL;
		return dis_fail(s, pos, "%s", *ncp == -1 ?
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
		return dis_fail(s, pos, "invalid literal for int() with base "
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
			return dis_fail(s, pos, "%s", k == -1 ? "'utf-8' codec "
				    "can't decode the argument" :
				    "out of memory");
	} else {
		cp = malloc((n ? n : 1) * sizeof(*cp));
		if (!cp)
			return dis_fail(s, pos, "out of memory%s", "");
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
		return dis_fail(s, pos, "out of memory%s", "");
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
				return dis_fail(s, pos, "'rawunicodeescape' codec "
					    "can't decode the argument%s", "");
			}
			v = v * 16 + (c <= '9' ? c - '0' : c - 'a' + 10);
		}
		if (v > 0x10ffff) {
			free(cp);
			return dis_fail(s, pos, "\\Uxxxxxxxx out of range%s", "");
		}
		cp[k++] = v;
	}
	py_repr_str(b, cp, k);
	free(cp);
	return 0;
}

/* See ptdump_pkl.h. */
int dis_read_arg(struct dis *s, const struct opinfo *op, uint64_t pos,
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
			return dis_fail(s, pos, "not enough data in stream to read "
				    "%s", op->arg == A_UINT1 ? "uint1" :
				    op->arg == A_UINT2 ? "uint2" :
				    op->arg == A_UINT4 ? "uint4" : "uint8");
		*key = le(p, n);
		sb_printf(b, "%" PRIu64, *key);
		return 1;
	case A_INT4:
		if (!take(s, 4, &p))
			return dis_fail(s, pos, "not enough data in stream to read "
				    "int4%s", "");
		i4 = (int32_t)(uint32_t)le(p, 4);
		sb_printf(b, "%" PRId64, i4);
		return 1;
	case A_DECIMALNL_SHORT:
	case A_DECIMALNL_LONG:
		if (!line(s, &p, &n))
			return dis_fail(s, pos, "no newline found when trying to "
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
			return dis_fail(s, pos, "no newline found when trying to "
				    "read stringnl%s", "");
		if (n >= sizeof(tmp))
			return dis_fail(s, pos, "could not convert string to "
				    "float%s", "");
		memcpy(tmp, p, n);
		tmp[n] = '\0';
		f = strtod(tmp, &end);
		while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
			end++;
		if (end == tmp || *end)
			return dis_fail(s, pos, "could not convert string to "
				    "float%s", "");
		py_repr_float(b, f);
		return 1;
	}
	case A_FLOAT8:
		if (!take(s, 8, &p))
			return dis_fail(s, pos, "not enough data in stream to read "
				    "float8%s", "");
		{
			uint64_t u = 0;

			for (int k = 0; k < 8; k++)
				u = u << 8 | p[k];
			f = f64_of(u);
		}
		py_repr_float(b, f);
		return 1;
	case A_LONG1:
	case A_LONG4:
		if (op->arg == A_LONG1 ? !take(s, 1, &p) : !take(s, 4, &p))
			return dis_fail(s, pos, "not enough data in stream to read "
				    "%s", op->arg == A_LONG1 ? "uint1" : "int4");
		i4 = op->arg == A_LONG1 ? p[0] : (int32_t)(uint32_t)le(p, 4);
		if (i4 < 0)
			return dis_fail(s, pos, "long4 byte count < 0%s", "");
		if (!take(s, (size_t)i4, &p))
			return dis_fail(s, pos, "not enough data in stream to read "
				    "%s", op->arg == A_LONG1 ? "long1" : "long4");
		if (!py_repr_long(b, p, (size_t)i4))
			return dis_fail(s, pos, "Exceeds the limit (4300 digits) "
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
			return dis_fail(s, pos, "not enough data in stream to read "
				    "the argument's length%s", "");
		cnt = le(p, lb);
		if (op->arg == A_STRING4 && (cnt & 0x80000000u))
			return dis_fail(s, pos, "string4 byte count < 0%s", "");
		if (cnt > s->len - s->pos)
			return dis_fail(s, pos, "expected more bytes than remain "
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
			return dis_fail(s, pos, "no newline found when trying to "
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
		return both ? 1 : dis_fail(s, pos, "out of memory%s", "");
	}
	}
	return 0;
}
