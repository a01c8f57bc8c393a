/*
 * sbuf.c - the growable string of sbuf.h: doubling, NUL-terminated after
 * every append, out of memory remembered rather than returned.
 */
#include "sbuf.h"

#include "utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool sb_room(struct sbuf *b, size_t n)
{
	if (b->oom)
		return false;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return false;
		}
		b->p = p;
		b->cap = cap;
	}
	return true;
}

void sb_add(struct sbuf *b, const void *s, size_t n)
{
	if (!sb_room(b, n))
		return;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

void sb_puts(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !sb_room(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)n;
}

void sb_utf8(struct sbuf *b, uint32_t c)
{
	unsigned char u[4];

	sb_add(b, u, utf8_put(u, c));
}

/* A JSON string as serde_json writes it. */
/* A JSON string's body: '"', '\\' and control characters escaped. */
static void json_body(struct sbuf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t run = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		char esc[7] = { '\\', 0 };

		if (ch >= 0x20 && ch != '"' && ch != '\\')
			continue;
		sb_add(b, s + run, i - run);
		run = i + 1;
		switch (ch) {
		case '"': case '\\': esc[1] = (char)ch; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[ch >> 4];
			esc[5] = hex[ch & 15];
		}
		sb_puts(b, esc);
	}
	sb_add(b, s + run, n - run);
}

void sb_json_str(struct sbuf *b, const char *s, size_t n)
{
	sb_add(b, "\"", 1);
	json_body(b, s, n);
	sb_add(b, "\"", 1);
}

/*
 * sb_json_ascii() and sb_json_utf8(): a code point past 0x7f escaped
 * (@ascii) or kept as it is; a byte that is not UTF-8 (or a surrogate's,
 * which JSON's UTF-8 cannot hold, when kept) as \u00XX either way.
 */
static void json_nonascii(struct sbuf *b, const char *s, size_t n,
			  bool ascii)
{
	size_t i = 0, run = 0, len;
	uint32_t cp;

	sb_add(b, "\"", 1);
	while (i < n) {
		if ((unsigned char)s[i] < 0x80) {
			i++;
			continue;
		}
		len = utf8_get((const unsigned char *)s + i, n - i, &cp);
		if (!ascii && len && (cp < 0xd800 || cp > 0xdfff)) {
			i += len;
			continue;
		}
		/* not UTF-8 (or a surrogate): the byte as a code point */
		if (!len || !ascii)
			len = 1, cp = (unsigned char)s[i];
		json_body(b, s + run, i - run);	/* the ASCII before it */
		if (cp > 0xffff)
			sb_printf(b, "\\u%04x\\u%04x",
				  0xd800 + ((cp - 0x10000) >> 10),
				  0xdc00 + ((cp - 0x10000) & 0x3ff));
		else
			sb_printf(b, "\\u%04x", cp);
		i += len;
		run = i;
	}
	json_body(b, s + run, n - run);
	sb_add(b, "\"", 1);
}

void sb_json_ascii(struct sbuf *b, const char *s, size_t n)
{
	json_nonascii(b, s, n, true);
}

void sb_json_utf8(struct sbuf *b, const char *s, size_t n)
{
	json_nonascii(b, s, n, false);
}

size_t sb_chars(const struct sbuf *b)
{
	size_t k = 0;

	for (size_t i = 0; i < b->n; i++)
		k += ((unsigned char)b->p[i] & 0xc0) != 0x80;
	return k;
}

void sb_cut(struct sbuf *b, size_t n)
{
	if (b->p && n <= b->n) {
		b->n = n;
		b->p[n] = 0;
	}
}

char *sb_detach(struct sbuf *b, size_t *len)
{
	if (len)
		*len = b->oom ? 0 : b->n;
	if (b->oom) {
		free(b->p);
		return NULL;
	}
	return b->p ? b->p : strdup("");
}

void sb_pct(struct sbuf *b, const char *s, size_t n, bool slash)
{
	static const char hex[] = "0123456789ABCDEF";

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[3] = { '%', hex[c >> 4], hex[c & 15] };

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~' || (slash && c == '/'))
			sb_add(b, s + i, 1);
		else
			sb_add(b, e, 3);
	}
}
