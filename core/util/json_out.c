/*
 * json_out.c - JSON output for the tools and ptfs (RFC 8259 escapes; bytes that
 * are not valid UTF-8 are written as \u00XX, i.e. read as Latin-1),
 * through a buffer; see json_out.h.
 */
#define _POSIX_C_SOURCE 200809L	/* fileno */
#include "json_out.h"

#include "util/utf8.h"

#include <stdarg.h>
#include <stdbool.h>
#include <unistd.h>

void jw_init(struct jw *w, FILE *f, char *buf, size_t size)
{
	w->f = f;
	w->buf = w->p = buf;
	w->end = buf + size;
}

/*
 * A full buffer goes to the file descriptor itself once stdio holds
 * nothing: fwrite() would copy it into stdio's buffer first, 40 MB for a
 * listing of 100,000 tensors.  What write() does not take goes through
 * fwrite(), which then meets the same error and sets ferror(), where the
 * tools look for it.
 */
void jw_flush(struct jw *w)
{
	const char *s = w->buf;
	size_t n = (size_t)(w->p - w->buf);
	int fd = n >= JW_DIRECT ? fileno(w->f) : -1;
	ssize_t k;

	if (fd >= 0 && !fflush(w->f))
		while (n && (k = write(fd, s, n)) > 0) {
			s += k;
			n -= (size_t)k;
		}
	if (n)
		fwrite(s, 1, n, w->f);
	w->p = w->buf;
}

void jw_add_slow(struct jw *w, const void *s, size_t n)
{
	jw_flush(w);
	if (n > (size_t)(w->end - w->p)) {
		fwrite(s, 1, n, w->f);
		return;
	}
	memcpy(w->p, s, n);
	w->p += n;
}

void jw_indent(struct jw *w, unsigned n)
{
	jw_putc(w, '\n');
	while (n--)
		jw_putc(w, ' ');
}

void jw_printf(struct jw *w, const char *fmt, ...)
{
	size_t room = (size_t)(w->end - w->p);
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(w->p, room, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < room) {
		w->p += n;
		return;
	}
	jw_flush(w);
	va_start(ap, fmt);
	vfprintf(w->f, fmt, ap);
	va_end(ap);
}

/* Length of the UTF-8 sequence at @p (@n bytes there) JSON may hold, or 0:
   RFC 8259 text is UTF-8, and UTF-8 has no surrogates. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	uint32_t cp = 0;
	size_t len = utf8_get(p, n, &cp);

	return cp >= 0xd800 && cp <= 0xdfff ? 0 : len;
}

#define ONES	UINT64_C(0x0101010101010101)
#define HIGHS	UINT64_C(0x8080808080808080)

/*
 * Does one of the 8 bytes in @x need a look: below 0x20, above 0x7e, '"'
 * or '\\'?  Each test is the exact one for "some byte is zero" (or less
 * than n, more than n) of Bit Twiddling Hacks.  The strings a listing
 * writes are mostly plain ASCII names, most shorter than 8 bytes: one test
 * passes a whole word, or a short string padded with 'a'.
 */
static bool special8(uint64_t x)
{
	uint64_t q = x ^ (ONES * '"'), b = x ^ (ONES * '\\');

	return (((x - ONES * 0x20) & ~x) |		/* < 0x20 */
		((x + ONES * (127 - 0x7e)) | x) |	/* > 0x7e */
		((q - ONES) & ~q) | ((b - ONES) & ~b)) & HIGHS;
}

void jw_str(struct jw *w, const char *s, size_t n)
{
	jw_putc(w, '"');
	jw_str_part(w, s, n);
	jw_putc(w, '"');
}

void jw_str_part(struct jw *w, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t run = 0;		/* start of the bytes not yet written */

	for (size_t i = 0; i < n;) {
		uint64_t x = ONES * 'a';	/* a short tail: padded */
		size_t k = n - i < 8 ? n - i : 8;

		/* (a short tail shifted in, not copied: bytes stored one by
		   one and loaded as a word stall the load, half of this
		   function's time) */
		if (k == 8)
			memcpy(&x, p + i, 8);
		else
			for (size_t j = 0; j < k; j++)
				x = x << 8 | p[i + j];
		if (!special8(x)) {
			i += k;
			continue;
		}
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\') {
			i++;	/* plain ASCII: written later as one run */
			continue;
		}
		if (p[i] >= 0x80 && (k = utf8_len(p + i, n - i))) {
			i += k;
			continue;
		}
		jw_add(w, p + run, i - run);
		if (p[i] == '"' || p[i] == '\\') {
			char e[2] = { '\\', (char)p[i] };

			jw_add(w, e, 2);
		} else if (p[i] == '\n') {
			jw_lit(w, "\\n");
		} else {
			char e[6] = { '\\', 'u', '0', '0', hex[p[i] >> 4],
				      hex[p[i] & 15] };

			jw_add(w, e, 6);
		}
		run = ++i;
	}
	jw_add(w, p + run, n - run);
}

void jw_cstr(struct jw *w, const char *s)
{
	if (s)
		jw_str(w, s, strlen(s));
	else
		jw_lit(w, "null");
}

void jw_u64(struct jw *w, uint64_t v)
{
	char buf[24], *p = buf + sizeof(buf);

	do
		*--p = '0' + v % 10;
	while (v /= 10);
	jw_add(w, p, (size_t)(buf + sizeof(buf) - p));
}

void jw_i64(struct jw *w, int64_t v)
{
	if (v < 0)
		jw_putc(w, '-');
	jw_u64(w, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

/* ---- straight to a FILE ---- */

/* Run @call on a jw over @f with a small buffer, then flush it. */
#define ON_FILE(f, call)						\
	do {								\
		char b_[256];						\
		struct jw w_;						\
		jw_init(&w_, (f), b_, sizeof(b_));			\
		call;							\
		jw_flush(&w_);						\
	} while (0)

void json_str(FILE *f, const char *s, size_t n)
{
	ON_FILE(f, jw_str(&w_, s, n));
}

void json_cstr(FILE *f, const char *s)
{
	ON_FILE(f, jw_cstr(&w_, s));
}

void json_u64(FILE *f, uint64_t v)
{
	ON_FILE(f, jw_u64(&w_, v));
}

void json_i64(FILE *f, int64_t v)
{
	ON_FILE(f, jw_i64(&w_, v));
}
