/*
 * pyrepr.h - Python's repr() of the values a pickle opcode carries (str,
 * bytes, int of any size, float), written into a growable buffer, so that
 * ptdump --pickle prints arguments exactly as pickletools.dis does.
 */
#ifndef PT_TOOLS_PYREPR_H
#define PT_TOOLS_PYREPR_H

#include "util/sbuf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* repr() of a str given as code points. */
void py_repr_str(struct sbuf *b, const uint32_t *cp, size_t n);

/*
 * Decode UTF-8 as Python's 'surrogatepass' does into *@cp (malloc'd,
 * caller frees).  Returns the number of code points, or -1 when the bytes
 * are not UTF-8 (then *@cp is NULL); -2 when out of memory.
 */
long py_utf8_decode(const unsigned char *s, size_t n, uint32_t **cp);

/* repr() of bytes: b'..' (with @bytearray: bytearray(b'..')). */
void py_repr_bytes(struct sbuf *b, const unsigned char *s, size_t n,
		   bool bytearray);

/*
 * repr() of the int whose two's complement little-endian bytes are
 * @s[0..@n) (pickle's LONG1/LONG4).  False when it has more digits than
 * Python 3.11 converts (4300), as int.__repr__ refuses those.
 */
bool py_repr_long(struct sbuf *b, const unsigned char *s, size_t n);

/* repr() of a float. */
void py_repr_float(struct sbuf *b, double f);

#endif
