/*
 * sbuf.h - a growable NUL-terminated string (text built piece by piece:
 * names, repr()s, messages).  Zeroed is empty; an append that cannot get
 * memory sets ->oom and the text stays cut short, so callers check once
 * at the end (sb_detach) instead of after every append.
 */
#ifndef PT_UTIL_SBUF_H
#define PT_UTIL_SBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sbuf {
	char *p;
	size_t n, cap;
	bool oom;		/* an append failed; the text is cut short */
};

void sb_add(struct sbuf *b, const void *s, size_t n);
void sb_puts(struct sbuf *b, const char *s);
void sb_printf(struct sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Code point @c as UTF-8. */
void sb_utf8(struct sbuf *b, uint32_t c);
/* @n bytes of @s as a JSON string, quotes included, as serde_json (and
 * Python's json with ensure_ascii=False) writes one: '"', '\\' and
 * control characters escaped (\b \f \n \r \t, else \u00xx), the rest
 * as is. */
void sb_json_str(struct sbuf *b, const char *s, size_t n);
/* ... as Python's json.dumps writes it by default (ensure_ascii): the
 * same, and every code point past 0x7f as \uxxxx (a surrogate pair past
 * 0xffff).  @s is valid UTF-8 (names checked by ckpt_st_name_ok()). */
void sb_json_ascii(struct sbuf *b, const char *s, size_t n);
/* ... as sb_json_str(), for bytes that may not be UTF-8 (a GGUF string):
 * what is not, byte by byte, as \u00xx (as jw_str() writes it), so the
 * text stays JSON that a strict reader takes. */
void sb_json_utf8(struct sbuf *b, const char *s, size_t n);
/* @n bytes of @s percent-encoded as a URL's path or query part (and as
 * AWS Signature V4 canonicalizes one): the unreserved A-Z a-z 0-9 - _ .
 * ~ kept, '/' kept when @slash, any other byte as %XX. */
void sb_pct(struct sbuf *b, const char *s, size_t n, bool slash);
/* Number of characters (UTF-8 code points) in @b, as Python's len(). */
size_t sb_chars(const struct sbuf *b);
/* Cut @b back to its first @n bytes (nothing if it is shorter). */
void sb_cut(struct sbuf *b, size_t n);
/* The text (malloc'd, "" when empty; its length in *@len if @len), or
 * NULL when an append failed (then freed).  @b is spent. */
char *sb_detach(struct sbuf *b, size_t *len);

#endif
