/*
 * pyrepr.c - Python's repr() of str, bytes, int and float
 * (Objects/unicodeobject.c unicode_repr, bytesobject.c PyBytes_Repr,
 * longobject.c, and the shortest round-trip float repr the core already
 * has), for ptdump --pickle to print arguments as pickletools does.
 */
#include "pyrepr.h"

#include "ckpt/ckpt.h"
#include "pyrepr_np.h"
#include "util/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Python 3.11's default limit on int <-> str conversions (digits). */
#define PY_INT_MAX_STR_DIGITS 4300

/* ---- str ---- */

static bool printable(uint32_t c)
{
	size_t lo = 0, hi = ARRAY_SIZE(pyrepr_np);

	if (c < 0x80)
		return c >= 0x20 && c < 0x7f;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (c < pyrepr_np[mid][0])
			hi = mid;
		else if (c > pyrepr_np[mid][1])
			lo = mid + 1;
		else
			return false;
	}
	return true;
}

void py_repr_str(struct sbuf *b, const uint32_t *cp, size_t n)
{
	bool sq = false, dq = false;
	char quote;

	for (size_t i = 0; i < n; i++) {
		sq |= cp[i] == '\'';
		dq |= cp[i] == '"';
	}
	quote = sq && !dq ? '"' : '\'';
	sb_add(b, &quote, 1);
	for (size_t i = 0; i < n; i++) {
		uint32_t c = cp[i];

		if (c == (uint32_t)quote || c == '\\')
			sb_printf(b, "\\%c", (char)c);
		else if (c == '\t')
			sb_puts(b, "\\t");
		else if (c == '\n')
			sb_puts(b, "\\n");
		else if (c == '\r')
			sb_puts(b, "\\r");
		else if (printable(c))
			sb_utf8(b, c);
		else if (c < 0x100)
			sb_printf(b, "\\x%02x", c);
		else if (c < 0x10000)
			sb_printf(b, "\\u%04x", c);
		else
			sb_printf(b, "\\U%08x", c);
	}
	sb_add(b, &quote, 1);
}

long py_utf8_decode(const unsigned char *s, size_t n, uint32_t **out)
{
	uint32_t *cp = malloc((n ? n : 1) * sizeof(*cp));
	size_t k = 0;

	*out = NULL;
	if (!cp)
		return -2;
	for (size_t i = 0; i < n;) {
		uint32_t v;
		size_t len = utf8_get(s + i, n - i, &v);

		if (!len)	/* surrogates pass, as with 'surrogatepass' */
			goto bad;
		cp[k++] = v;
		i += len;
	}
	*out = cp;
	return (long)k;
bad:
	free(cp);
	return -1;
}

/* ---- bytes ---- */

void py_repr_bytes(struct sbuf *b, const unsigned char *s, size_t n,
		   bool bytearray)
{
	bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
	char quote = sq && !dq ? '"' : '\'';

	sb_puts(b, bytearray ? "bytearray(b" : "b");
	sb_add(b, &quote, 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c == (unsigned char)quote || c == '\\')
			sb_printf(b, "\\%c", c);
		else if (c == '\t')
			sb_puts(b, "\\t");
		else if (c == '\n')
			sb_puts(b, "\\n");
		else if (c == '\r')
			sb_puts(b, "\\r");
		else if (c < 0x20 || c >= 0x7f)
			sb_printf(b, "\\x%02x", c);
		else
			sb_add(b, (const char *)&c, 1);
	}
	sb_add(b, &quote, 1);
	if (bytearray)
		sb_puts(b, ")");
}

/* ---- int ---- */

bool py_repr_long(struct sbuf *b, const unsigned char *s, size_t n)
{
	bool neg = n && (s[n - 1] & 0x80);
	uint32_t *limb, *dig;	/* magnitude, base 2^32; digits, base 1e9 */
	size_t nl = (n + 3) / 4, nd = 0;
	int carry = 1;
	bool ok = true;

	if (!n) {
		sb_puts(b, "0");
		return true;
	}
	/* more than 4300 decimal digits: Python 3.11 refuses to print it */
	if ((double)n * 8 * 0.30103 > PY_INT_MAX_STR_DIGITS + 1)
		return false;
	limb = calloc(nl, sizeof(*limb));
	dig = calloc(nl * 2 + 2, sizeof(*dig));
	if (!limb || !dig) {
		free(limb);
		free(dig);
		b->oom = true;
		return true;
	}
	for (size_t i = 0; i < nl * 4; i++) {
		/* sign-extend, then negate (invert + 1) if negative */
		unsigned v = i < n ? s[i] : (neg ? 0xff : 0);

		if (neg) {
			v = (~v & 0xff) + carry;
			carry = v >> 8;
			v &= 0xff;
		}
		limb[i / 4] |= (uint32_t)v << (8 * (i % 4));
	}
	/* repeated division by 1e9, most significant limb first */
	for (size_t top = nl; top > 0;) {
		uint64_t rem = 0;

		for (size_t i = top; i-- > 0;) {
			uint64_t cur = rem << 32 | limb[i];

			limb[i] = (uint32_t)(cur / 1000000000u);
			rem = cur % 1000000000u;
		}
		dig[nd++] = (uint32_t)rem;
		while (top > 0 && !limb[top - 1])
			top--;
	}
	if (neg)
		sb_puts(b, "-");
	sb_printf(b, "%u", dig[nd - 1]);
	for (size_t i = nd - 1; i-- > 0;)
		sb_printf(b, "%09u", dig[i]);
	free(limb);
	free(dig);
	return ok;
}

/* ---- float ---- */

void py_repr_float(struct sbuf *b, double f)
{
	char buf[40];

	sb_puts(b, ckpt_float_repr(f, buf, sizeof(buf)));
}
