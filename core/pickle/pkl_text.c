/*
 * pkl_text.c - the protocol 0 opcodes whose argument is a text line (INT,
 * LONG, FLOAT, STRING, UNICODE, GET, PUT), decoded the way CPython's C
 * unpickler (Modules/_pickle.c, what torch.load runs) decodes them: the
 * numbers in pkl_textnum.c, here STRING's quoted repr as
 * PyBytes_DecodeEscape() and UNICODE as raw-unicode-escape (turned into
 * UTF-8).  Also the UTF-8 checks of the binary string opcodes.
 * tests/unit/pkl_text_cases.py holds all of it to a CPython.
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

static int bad(const char **why, const char *reason)
{
	*why = reason;
	return -EILSEQ;
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

/* UTF-8, surrogates encoded as they are allowed if @pass. */
static bool utf8_ok(const unsigned char *s, size_t n, bool pass)
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

		if (!len || (!pass && cp >= 0xd800 && cp <= 0xdfff))
			return false;
		k += len;
	}
	return true;
}

bool pkl_utf8_valid(const unsigned char *s, size_t n)
{
	return utf8_ok(s, n, true);
}

void pkl_string_mark(struct pkl_value *v)
{
	if (utf8_ok((const unsigned char *)v->u.s.p, v->u.s.n, false))
		v->how |= PKL_S_UTF8;
}

/* INT and LONG (load_int, load_long): ints, big ints, INT's bools. */
int pkl_op_text_int(struct pkl_parser *p, bool is_long)
{
	struct pkl_text_int v;
	const unsigned char *s;
	const char *why;
	size_t n;
	int rc = pkl_line(p, &s, &n);

	if (rc < 0)
		return rc;
	rc = pkl_text_int(s, n, is_long ? PKL_TEXT_LONG : PKL_TEXT_INT, &v,
			  &why);
	if (rc == -ENOMEM)
		return diag_nomem(p->d);
	if (rc < 0)
		return diag_corrupt(p->d, p->off, "%s: %s", p->name, why);
	if (v.kind == PKL_BIGINT)
		return pkl_push_owned(p, PKL_BIGINT, (char *)v.big, v.nbig);
	return pkl_push_scalar(p, v.kind, v.i);
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
	rc = pkl_text_float(s, n, &f, &why);
	if (rc == -ENOMEM)
		return diag_nomem(p->d);
	if (rc < 0)
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
	rc = pkl_push_owned(p, is_unicode ? PKL_STR : PKL_STRING, out, nout);
	if (!rc && !is_unicode)
		pkl_string_mark(PKL_TOP(p, 0));
	return rc;
}

/*
 * GET and PUT (load_get, load_put): the memo key as Python reads it, so
 * that "PUT 10" and "GET 1_0" are one entry.  A key past 32 bits is
 * ptfs's refusal (CPython's memo would need more than 32 GiB for it).
 */
int pkl_op_text_memo(struct pkl_parser *p, bool put)
{
	struct pkl_text_int v;
	const unsigned char *s;
	const char *why;
	size_t n;
	bool neg;
	int rc = pkl_line(p, &s, &n);

	if (rc < 0)
		return rc;
	rc = pkl_text_int(s, n, PKL_TEXT_KEY, &v, &why);
	if (rc == -ENOMEM)
		return diag_nomem(p->d);
	if (rc < 0)
		return diag_corrupt(p->d, p->off, "%s: %s", p->name, why);
	neg = v.kind == PKL_BIGINT ? v.big[v.nbig - 1] & 0x80 : v.i < 0;
	free(v.big);
	if (neg && put)
		return diag_corrupt(p->d, p->off, "negative PUT argument");
	if (neg)	/* CPython looks it up, as a size_t: never there */
		return diag_corrupt(p->d, p->off, "GET of a negative memo "
				    "key");
	if (v.kind == PKL_BIGINT || v.i > UINT32_MAX)
		return diag_corrupt(p->d, p->off, "%s memo key out of range",
				    p->name);
	return put ? pkl_op_put(p, (uint64_t)v.i)
		   : pkl_op_get(p, (uint64_t)v.i);
}
