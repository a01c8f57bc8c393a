/*
 * text_ref.h - the text view's numbers as they were printed before
 * view_dec.c (snprintf "%.*g" of the exact value, "%" PRId64 for ints):
 * the reference that the faster printer and its unprinted lengths are
 * held to, byte for byte (test_view.c, test_ovl_text.c).
 */
#ifndef PT_TESTS_TEXT_REF_H
#define PT_TESTS_TEXT_REF_H

#include "util/le.h"
#include "view/view.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* One float of @size bytes (2: float16 unless @bf16) as printed. */
static inline int ref_float(uint64_t bits, unsigned size, bool bf16,
			    char *buf)
{
	int mbits = size == 2 ? (bf16 ? 7 : 10) : size == 4 ? 23 : 52;
	int ebits = size == 2 ? (bf16 ? 8 : 5) : size == 4 ? 8 : 11;
	int prec = size == 2 ? (bf16 ? 4 : 5) : size == 4 ? 9 : 17;
	uint64_t sign = UINT64_C(1) << (mbits + ebits), neg = bits & sign;
	uint64_t em = ((UINT64_C(1) << ebits) - 1) << mbits;
	uint64_t fm = (UINT64_C(1) << mbits) - 1;
	double x;

	if ((bits & em) == em) {
		if (!(bits & fm))
			return snprintf(buf, 32, "%s", neg ? "-inf" : "inf");
		if ((bits & ~neg) == (em | UINT64_C(1) << (mbits - 1)))
			return snprintf(buf, 32, "%s", neg ? "-nan" : "nan");
		return snprintf(buf, 32, "nan(0x%" PRIx64 ")", bits);
	}
	x = size == 2 ? (bf16 ? view_bf16_to_f32((uint16_t)bits)
			      : view_f16_to_f32((uint16_t)bits))
	    : size == 4 ? f32_of((uint32_t)bits) : f64_of(bits);
	return snprintf(buf, 32, "%.*g", prec, x);
}

/* One element, without its separator; its length. */
static inline size_t ref_elem(const struct ckpt_dtype *dt, bool big,
			      const unsigned char *p, char *out)
{
	bool bf16 = !strcmp(dt->name, "bfloat16");
	struct view_num v;
	unsigned h = dt->size / 2;
	char im[32];
	int n;

	switch (view_kind_of(dt)) {
	case VIEW_FLOAT:
		return (size_t)ref_float(ord_load(p, dt->size, big), dt->size,
					 bf16, out);
	case VIEW_COMPLEX:
		n = ref_float(ord_load(p, h, big), h, false, out);
		ref_float(ord_load(p + h, h, big), h, false, im);
		n += sprintf(out + n, "%s%sj", im[0] == '-' ? "" : "+", im);
		return (size_t)n;
	case VIEW_INT:
		view_get(dt, big, p, &v);
		return (size_t)sprintf(out, "%" PRId64, v.i);
	default:
		view_get(dt, big, p, &v);
		return (size_t)sprintf(out, "%" PRIu64, v.u);
	}
}

/* view_text_format() as it was: @out holds @n * VIEW_TEXT_ELEM_MAX. */
static inline size_t ref_text(const struct ckpt_dtype *dt, bool big, int ndim,
			      const int64_t *shape, uint64_t first,
			      const unsigned char *data, uint64_t n, char *out)
{
	uint64_t row = ndim > 0 ? (uint64_t)shape[ndim - 1] : 1;
	uint64_t col = row ? first % row : 0;
	char *o = out;

	for (uint64_t i = 0; i < n; i++, data += dt->size) {
		o += ref_elem(dt, big, data, o);
		*o++ = ++col >= row ? '\n' : ' ';
		if (col >= row)
			col = 0;
	}
	return (size_t)(o - out);
}

#endif
