/*
 * utf8.h - one code point as UTF-8 (1 to 4 bytes; surrogates are written
 * as they are, as Python's 'surrogatepass' does): the one encoder the JSON
 * reader, the pickle text decoder and the repr()s share.
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

#endif
