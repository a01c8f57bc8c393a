/*
 * utf8.h - one code point to UTF-8 and back (1 to 4 bytes; surrogates
 * pass as they are, as Python's 'surrogatepass' does): the one encoder the
 * JSON reader, the pickle text decoder and the repr()s share, and the one
 * decoder the pickle's str check, the repr()s and the JSON writer share.
 */
#ifndef PT_UTIL_UTF8_H
#define PT_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Write @c (<= 0x10ffff) at @o: the number of bytes written. */
static inline size_t utf8_put(unsigned char *o, uint32_t c)
{
	if (c < 0x80) {
		o[0] = (unsigned char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (unsigned char)(0xc0 | c >> 6);
		o[1] = (unsigned char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (unsigned char)(0xe0 | c >> 12);
		o[1] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
		o[2] = (unsigned char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | c >> 18);
	o[1] = (unsigned char)(0x80 | (c >> 12 & 0x3f));
	o[2] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
	o[3] = (unsigned char)(0x80 | (c & 0x3f));
	return 4;
}

/*
 * The code point of the UTF-8 sequence at @s (@n >= 1 bytes there) in
 * *@cp: the sequence's length, or 0 if it is not valid UTF-8 (a bad lead
 * or continuation byte, cut short, overlong, beyond U+10FFFF).
 * Surrogates are valid here; a caller that must refuse them checks *@cp.
 */
static inline size_t utf8_get(const unsigned char *s, size_t n, uint32_t *cp)
{
	uint32_t v, min;
	size_t len;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, v = s[0] & 0x1f, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, v = s[0] & 0x0f, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, v = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff)
		return 0;
	*cp = v;
	return len;
}

#endif
