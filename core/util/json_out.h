/*
 * json_out.h - the JSON writers of the tools and of `ptfs status -j`:
 * strings escaped so the output is always valid UTF-8 JSON, whatever
 * bytes a key holds, and a buffer (struct jw) that long outputs go
 * through.  In core/util (it prints nothing by itself: it writes to the
 * FILE it is given) because fs/ may not link tools/.
 *
 * Why the buffer: an entry of `ptls --json` is some 45 pieces, and a
 * stdio call costs 5-7 ns where a memcpy into a buffer costs 0.4; on
 * 100,000 tensors that was 25 ms of ptls's 130 (docs/benchmarks.md).
 * Whatever writes a document through a jw must write all of it through
 * the same jw, or the pieces come out of order.
 */
#ifndef PT_UTIL_JSON_OUT_H
#define PT_UTIL_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct jw {
	char *p, *end;		/* next free byte of buf, its end */
	char *buf;
	FILE *f;
};

/* From this many buffered bytes on, jw_flush() bypasses stdio. */
#define JW_DIRECT	(16u << 10)

/* Write through @buf (@size bytes, at least 1) to @f. */
void jw_init(struct jw *w, FILE *f, char *buf, size_t size);
/* Hand what is buffered to @w's FILE (errors show in ferror()). */
void jw_flush(struct jw *w);
void jw_add_slow(struct jw *w, const void *s, size_t n);

static inline void jw_add(struct jw *w, const void *s, size_t n)
{
	if (n <= (size_t)(w->end - w->p)) {
		memcpy(w->p, s, n);
		w->p += n;
	} else {
		jw_add_slow(w, s, n);
	}
}

/* A string literal, its length known at compile time. */
#define jw_lit(w, s)	jw_add(w, "" s, sizeof(s) - 1)

static inline void jw_putc(struct jw *w, char c)
{
	if (w->p == w->end)
		jw_flush(w);
	*w->p++ = c;
}

static inline void jw_puts(struct jw *w, const char *s)
{
	jw_add(w, s, strlen(s));
}

/* A new line and @n spaces. */
void jw_indent(struct jw *w, unsigned n);

void jw_printf(struct jw *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* @s[0..@n) as a JSON string; invalid UTF-8 bytes become \u00XX. */
void jw_str(struct jw *w, const char *s, size_t n);
/* Same for a NUL-terminated string; NULL writes null. */
void jw_cstr(struct jw *w, const char *s);
/* jw_str() without the quotes, for a string written in pieces (each is
 * checked for UTF-8 alone: cut them at ASCII bytes only). */
void jw_str_part(struct jw *w, const char *s, size_t n);
/* @v in decimal (no printf: it is the hot path of --json). */
void jw_u64(struct jw *w, uint64_t v);
void jw_i64(struct jw *w, int64_t v);

/* The same, straight to a FILE, for short outputs. */
void json_str(FILE *f, const char *s, size_t n);
void json_cstr(FILE *f, const char *s);
void json_u64(FILE *f, uint64_t v);
void json_i64(FILE *f, int64_t v);

#endif
