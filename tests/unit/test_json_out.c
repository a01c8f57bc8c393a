/*
 * test_json_out.c - the JSON string writer (core/util/json_out.c)
 * against a plain byte-at-a-time escaper: jw_str() looks at 8 bytes at a
 * time, so every byte value is tried at every position of strings longer
 * and shorter than 8, next to UTF-8 sequences whole and cut.
 */
#include "test_util.h"

#include "json_out.h"
#include "util/utf8.h"

#include <stdlib.h>

/* What jw_str() must write for @s (@n bytes) into @out: the rules of
 * json_out.c, one byte at a time. */
static size_t oracle(const unsigned char *s, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	out[o++] = '"';
	for (size_t i = 0; i < n;) {
		uint32_t cp = 0;
		size_t k;

		if (s[i] >= 0x80 && (k = utf8_get(s + i, n - i, &cp)) &&
		    !(cp >= 0xd800 && cp <= 0xdfff)) {
			memcpy(out + o, s + i, k);
			o += k;
			i += k;
		} else if (s[i] == '"' || s[i] == '\\') {
			out[o++] = '\\';
			out[o++] = (char)s[i++];
		} else if (s[i] == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
			i++;
		} else if (s[i] < 0x20 || s[i] >= 0x7f) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[s[i] >> 4];
			out[o + 5] = hex[s[i] & 15];
			o += 6;
			i++;
		} else {
			out[o++] = (char)s[i++];
		}
	}
	out[o++] = '"';
	return o;
}

/* jw_str() of @s through a buffer of @bufsize bytes into a memory FILE */
static void check(const unsigned char *s, size_t n, size_t bufsize)
{
	char want[6 * 64 + 2], *have = NULL, *buf = malloc(bufsize);
	size_t wlen = oracle(s, n, want), hlen = 0;
	FILE *f = open_memstream(&have, &hlen);
	struct jw w;

	cr_assert(f && buf && n <= 64);
	jw_init(&w, f, buf, bufsize);
	jw_str(&w, (const char *)s, n);
	jw_flush(&w);
	fclose(f);
	cr_assert_eq(hlen, wlen, "length %zu, expected %zu", hlen, wlen);
	cr_assert(!memcmp(have, want, wlen), "%.*s, expected %.*s",
		  (int)hlen, have, (int)wlen, want);
	free(have);
	free(buf);
}

Test(json_out, every_byte_at_every_position)
{
	unsigned char s[24];

	for (size_t len = 1; len <= sizeof(s); len++)
		for (size_t at = 0; at < len; at++)
			for (unsigned v = 0; v < 256; v++) {
				memset(s, 'a', len);
				s[at] = (unsigned char)v;
				check(s, len, 4096);
			}
}

Test(json_out, utf8_whole_and_cut)
{
	static const char *seq[] = {
		"\xc3\xbc", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
		"\xed\xa0\x80",		/* a surrogate: escaped bytes */
		"\xc0\xaf",		/* overlong */
		"\xf4\x90\x80\x80",	/* past U+10FFFF */
	};
	unsigned char s[32];

	for (size_t q = 0; q < sizeof(seq) / sizeof(seq[0]); q++)
		for (size_t len = strlen(seq[q]); len > 0; len--)
			for (size_t at = 0; at + len <= 20; at++) {
				memset(s, 'x', 20);
				memcpy(s + at, seq[q], len);
				check(s, 20, 4096);
				check(s, at + len, 4096);
			}
}

Test(json_out, random_bytes_small_buffers)
{
	unsigned char s[64];
	unsigned seed = 12345;

	for (int round = 0; round < 20000; round++) {
		size_t n = (size_t)(rand_r(&seed) % 65);

		for (size_t i = 0; i < n; i++) {
			unsigned r = (unsigned)rand_r(&seed);

			/* mostly plain ASCII, as names are */
			s[i] = (unsigned char)(r % 8 ? 0x20 + r / 8 % 0x5f :
					       r / 8 % 256);
		}
		check(s, n, 1 + (size_t)(round % 17));
	}
}

/* Full buffers bypass stdio (jw_flush()): what stdio holds goes first,
 * and what comes after through stdio follows, in order. */
Test(json_out, direct_writes_keep_the_order)
{
	static char buf[3 * JW_DIRECT];
	FILE *f = tmpfile();
	char *want = malloc(4 << 20), *have = malloc(4 << 20);
	size_t n = 0, got;
	struct jw w;

	cr_assert(f && want && have);
	jw_init(&w, f, buf, sizeof(buf));
	for (int round = 0; round < 40; round++) {
		char head[32];
		int k = snprintf(head, sizeof(head), "<%d>", round);

		fputs(head, f);		/* through stdio, between flushes */
		memcpy(want + n, head, (size_t)k);
		n += (size_t)k;
		/* below JW_DIRECT, above it, and past the buffer */
		for (size_t i = 0; i < JW_DIRECT / 2 + 2000u * (size_t)round;
		     i++) {
			char c = (char)('a' + (i + (size_t)round) % 26);

			jw_putc(&w, c);
			want[n++] = c;
		}
		jw_flush(&w);
	}
	fflush(f);
	rewind(f);
	got = fread(have, 1, 4 << 20, f);
	cr_assert_eq(got, n);
	cr_assert(!memcmp(have, want, n));
	cr_assert(!ferror(f));
	fclose(f);
	free(want);
	free(have);
}
