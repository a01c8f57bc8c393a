/*
 * json_out.c - JSON string output for the tools (RFC 8259 escapes; bytes
 * that are not valid UTF-8 are written as \u00XX, i.e. read as Latin-1).
 */
#include "json_out.h"

#include "util/utf8.h"

#include <stdint.h>
#include <string.h>

/* Length of the UTF-8 sequence at @p (@n bytes there) JSON may hold, or 0:
   RFC 8259 text is UTF-8, and UTF-8 has no surrogates. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	uint32_t cp = 0;
	size_t len = utf8_get(p, n, &cp);

	return cp >= 0xd800 && cp <= 0xdfff ? 0 : len;
}

void json_str(FILE *f, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t run = 0;		/* start of the bytes not yet written */

	putc('"', f);
	for (size_t i = 0; i < n;) {
		size_t k;

		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\') {
			i++;	/* plain ASCII: written later as one run */
			continue;
		}
		if (p[i] >= 0x80 && (k = utf8_len(p + i, n - i))) {
			i += k;
			continue;
		}
		fwrite(p + run, 1, i - run, f);
		if (p[i] == '"' || p[i] == '\\')
			fprintf(f, "\\%c", p[i]);
		else if (p[i] == '\n')
			fputs("\\n", f);
		else
			fprintf(f, "\\u%04x", p[i]);
		run = ++i;
	}
	fwrite(p + run, 1, n - run, f);
	putc('"', f);
}

void json_u64(FILE *f, uint64_t v)
{
	char buf[24], *p = buf + sizeof(buf);

	do
		*--p = '0' + v % 10;
	while (v /= 10);
	fwrite(p, 1, buf + sizeof(buf) - p, f);
}

void json_i64(FILE *f, int64_t v)
{
	if (v < 0)
		putc('-', f);
	json_u64(f, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

void json_cstr(FILE *f, const char *s)
{
	if (s)
		json_str(f, s, strlen(s));
	else
		fputs("null", f);
}
