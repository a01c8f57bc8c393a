/*
 * pkl_text.c - the protocol 0 opcodes whose argument is a text line (INT,
 * LONG, FLOAT, STRING, UNICODE, GET, PUT), decoded the way Python 3's
 * pickle.py reads them: int() for integers (with CPython's 4300-digit
 * limit), float() for floats, codecs.escape_decode for STRING's quoted repr
 * and raw-unicode-escape for UNICODE (turned into UTF-8 here).  Also the
 * UTF-8 check the binary unicode opcodes use.
 */
#ifndef PT_INTERNAL
#define PT_INTERNAL 1
#endif
#include "pkl_int.h"

#include "diag/diag.h"
#include "util/utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIGITS	4300	/* sys.int_info.default_max_str_digits */
/* Each chunk of 9 digits adds less than one 32-bit limb. */
#define MAX_LIMBS	(MAX_DIGITS / 9 + 2)
#define MAX_FLOAT_TEXT	400

static bool is_space(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static void trim(const unsigned char **s, size_t *n)
{
	while (*n && is_space((*s)[*n - 1]))
		(*n)--;
	while (*n && is_space(**s)) {
		(*s)++;
		(*n)--;
	}
}

static int bad(const char **why, const char *reason)
{
	*why = reason;
	return -EILSEQ;
}

/* Decimal digits @s[0..@n) (already checked) to two's complement bytes. */
static int decimal_to_bytes(const unsigned char *s, size_t n, bool neg,
			    unsigned char **big, size_t *nbig)
{
	uint32_t limb[MAX_LIMBS];
	size_t nl = 0, nb, k = 0;
	unsigned char *b;

	while (k < n) {
		size_t chunk = (n - k) % 9 ? (n - k) % 9 : 9;
		uint64_t carry = 0, mul = 1;

		for (size_t j = 0; j < chunk; j++) {
			carry = carry * 10 + (uint64_t)(s[k + j] - '0');
			mul *= 10;
		}
		k += chunk;
		for (size_t j = 0; j < nl; j++) {
			uint64_t t = (uint64_t)limb[j] * mul + carry;

			limb[j] = (uint32_t)t;
			carry = t >> 32;
		}
		if (carry)
			limb[nl++] = (uint32_t)carry;
	}
	nb = 4 * nl + 1;
	b = malloc(nb + 1);
	if (!b)
		return -ENOMEM;
	for (size_t j = 0; j < nb - 1; j++)
		b[j] = (unsigned char)(limb[j / 4] >> (8 * (j % 4)));
	b[nb - 1] = 0;
	if (neg) {
		unsigned carry = 1;

		for (size_t j = 0; j < nb; j++) {
			carry += (unsigned char)~b[j];
			b[j] = (unsigned char)carry;
			carry >>= 8;
		}
	}
	while (nb > 1 && ((b[nb - 1] == 0 && !(b[nb - 2] & 0x80)) ||
			  (b[nb - 1] == 0xff && (b[nb - 2] & 0x80))))
		nb--;
	b[nb] = 0;
	*big = b;
	*nbig = nb;
	return 0;
}

int pkl_text_int(const unsigned char *s, size_t n, int64_t *i,
		 unsigned char **big, size_t *nbig, const char **why)
{
	uint64_t mag = 0, lim;
	bool neg = false;

	*big = NULL;
	*nbig = 0;
	trim(&s, &n);
	if (n && (*s == '+' || *s == '-')) {
		neg = *s == '-';
		s++;
		n--;
	}
	if (!n)
		return bad(why, "no digits");
	if (n > MAX_DIGITS)
		return bad(why, "more than 4300 digits");
	for (size_t k = 0; k < n; k++)
		if (s[k] < '0' || s[k] > '9')
			return bad(why, "not a decimal integer");
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (size_t k = 0; k < n; k++) {
		unsigned dgt = s[k] - '0';

		if (mag > (lim - dgt) / 10)
			return decimal_to_bytes(s, n, neg, big, nbig);
		mag = mag * 10 + dgt;
	}
	/* Negate in unsigned arithmetic: -2^63 has no positive twin. */
	mag = neg ? 0 - mag : mag;
	memcpy(i, &mag, sizeof(*i));
	return 0;
}

int pkl_text_float(const unsigned char *s, size_t n, double *f,
		   const char **why)
{
	char tmp[MAX_FLOAT_TEXT + 1], *end;

	trim(&s, &n);
	if (!n)
		return bad(why, "empty float");
	/* strtod needs a NUL; Python's repr of a double is far shorter. */
	if (n > MAX_FLOAT_TEXT)
		return bad(why, "float text too long");
	memcpy(tmp, s, n);
	tmp[n] = 0;
	*f = strtod(tmp, &end);
	if (end != tmp + n)
		return bad(why, "not a float");
	return 0;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* @cnt hex digits at @s, or -1. */
static int64_t hexnum(const unsigned char *s, int cnt)
{
	int64_t v = 0;

	for (int k = 0; k < cnt; k++) {
		int h = hexval(s[k]);

		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

static bool is_octal(unsigned char c)
{
	return c >= '0' && c <= '7';
}

int pkl_text_string(const unsigned char *s, size_t n, char **out,
		    size_t *nout, const char **why)
{
	static const char esc_from[] = "abfnrtv", esc_to[] = "\a\b\f\n\r\t\v";
	const char *e;
	unsigned char *o, *b;
	size_t k = 1, end = n - 1;
	int rc;

	if (n < 2 || s[0] != s[n - 1] || (s[0] != '\'' && s[0] != '"'))
		return bad(why, "STRING argument is not quoted");
	b = o = malloc(n);
	if (!b)
		return -ENOMEM;
	while (k < end) {
		unsigned char c = s[k++];
		int64_t x;

		if (c != '\\') {
			*o++ = c;
			continue;
		}
		if (k == end) {
			rc = bad(why, "trailing backslash in STRING");
			goto out_free;
		}
		c = s[k++];
		e = c ? strchr(esc_from, c) : NULL;
		if (e) {
			*o++ = (unsigned char)esc_to[e - esc_from];
			continue;
		}
		switch (c) {
		case '\n':
			break;
		case '\\':
		case '\'':
		case '"':
			*o++ = c;
			break;
		case 'x':
			x = end - k >= 2 ? hexnum(s + k, 2) : -1;
			if (x < 0) {
				rc = bad(why, "bad \\x escape in STRING");
				goto out_free;
			}
			*o++ = (unsigned char)x;
			k += 2;
			break;
		default:
			if (is_octal(c)) {
				unsigned v = c - '0';

				/* Up to 3 digits; Python keeps the low byte. */
				for (int d = 0; d < 2 && k < end &&
						is_octal(s[k]); d++)
					v = v * 8 + (s[k++] - '0');
				*o++ = (unsigned char)v;
				break;
			}
			/* Unknown escapes stay as written, as in Python. */
			*o++ = '\\';
			*o++ = c;
			break;
		}
	}
	*o = 0;
	*out = (char *)b;
	*nout = (size_t)(o - b);
	return 0;

out_free:
	free(b);
	return rc;
}

int pkl_text_unicode(const unsigned char *s, size_t n, char **out,
		     size_t *nout, const char **why)
{
	unsigned char *o, *b;
	size_t k = 0;
	int rc;

	/* Worst case: each latin-1 byte above 0x7f becomes two bytes. */
	b = o = malloc(2 * n + 1);
	if (!b)
		return -ENOMEM;
	while (k < n) {
		unsigned char c = s[k++];
		int cnt;
		int64_t cp;

		if (c != '\\' || k == n) {
			o += utf8_put(o, c);
			continue;
		}
		if (s[k] != 'u' && s[k] != 'U') {
			/* A backslash pair: neither starts an escape. */
			*o++ = '\\';
			o += utf8_put(o, s[k++]);
			continue;
		}
		cnt = s[k++] == 'u' ? 4 : 8;
		cp = n - k >= (size_t)cnt ? hexnum(s + k, cnt) : -1;
		if (cp < 0) {
			rc = bad(why, "bad \\u escape in UNICODE");
			goto out_free;
		}
		if (cp > 0x10ffff) {
			rc = bad(why, "\\U escape past U+10FFFF in UNICODE");
			goto out_free;
		}
		o += utf8_put(o, (uint32_t)cp);
		k += cnt;
	}
	*o = 0;
	*out = (char *)b;
	*nout = (size_t)(o - b);
	return 0;

out_free:
	free(b);
	return rc;
}

bool pkl_utf8_valid(const unsigned char *s, size_t n)
{
	size_t k = 0;

	while (k < n) {
		/* ASCII runs 8 bytes at a time (names are mostly ASCII) */
		while (n - k >= 8) {
			uint64_t w;

			memcpy(&w, s + k, 8);
			if (w & UINT64_C(0x8080808080808080))
				break;
			k += 8;
		}
		if (k >= n)
			break;
		uint32_t cp;
		size_t len = utf8_get(s + k, n - k, &cp);

		if (!len)
			return false;
		k += len;
	}
	return true;
}

/* INT and LONG's decimal text (Python int()); LONG may end in 'L'. */
int pkl_op_text_int(struct pkl_parser *p, bool is_long)
{
	const unsigned char *s;
	unsigned char *big;
	const char *why;
	size_t n, nbig;
	int64_t i;
	int rc = pkl_line(p, &s, &n);

	if (rc < 0)
		return rc;
	if (!is_long && n == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1'))
		return pkl_push_scalar(p, PKL_BOOL, s[1] == '1');
	if (is_long && n && s[n - 1] == 'L')
		n--;
	rc = pkl_text_int(s, n, &i, &big, &nbig, &why);
	if (rc == -ENOMEM)
		return diag_nomem(p->d);
	if (rc < 0)
		return diag_corrupt(p->d, p->off, "%s: %s", p->name, why);
	if (big)
		return pkl_push_owned(p, PKL_BIGINT, (char *)big, nbig);
	return pkl_push_scalar(p, PKL_INT, i);
}

int pkl_op_float(struct pkl_parser *p)
{
	const unsigned char *s;
	const char *why;
	struct pkl_value *v;
	size_t n;
	double f;
	int rc = pkl_line(p, &s, &n);

	if (rc < 0)
		return rc;
	if (pkl_text_float(s, n, &f, &why) < 0)
		return diag_corrupt(p->d, p->off, "FLOAT: %s", why);
	v = pkl_mkpush(p, PKL_FLOAT);
	if (!v)
		return p->rc;
	v->u.f = f;
	return 0;
}

/* STRING (quoted, escaped) and UNICODE (raw-unicode-escape) lines. */
int pkl_op_text_str(struct pkl_parser *p, bool is_unicode)
{
	const unsigned char *s;
	const char *why;
	char *out;
	size_t n, nout;
	int rc = pkl_line(p, &s, &n);

	if (rc < 0)
		return rc;
	if (is_unicode)
		rc = pkl_text_unicode(s, n, &out, &nout, &why);
	else
		rc = pkl_text_string(s, n, &out, &nout, &why);
	if (rc == -ENOMEM)
		return diag_nomem(p->d);
	if (rc < 0)
		return diag_corrupt(p->d, p->off, "%s", why);
	return pkl_push_owned(p, is_unicode ? PKL_STR : PKL_STRING, out, nout);
}

/* GET and PUT: decimal memo key as a text line. */
int pkl_op_text_memo(struct pkl_parser *p, bool put)
{
	const unsigned char *s;
	unsigned char *big;
	const char *why;
	size_t n, nbig;
	bool huge;
	int64_t i;
	int rc = pkl_line(p, &s, &n);

	if (rc < 0)
		return rc;
	rc = pkl_text_int(s, n, &i, &big, &nbig, &why);
	huge = big != NULL;
	free(big);
	if (rc == -ENOMEM)
		return diag_nomem(p->d);
	if (rc < 0)
		return diag_corrupt(p->d, p->off, "%s: %s", p->name, why);
	if (huge || i < 0 || i > UINT32_MAX)
		return diag_corrupt(p->d, p->off, "%s memo key out of range",
				    p->name);
	return put ? pkl_op_put(p, (uint64_t)i) : pkl_op_get(p, (uint64_t)i);
}
