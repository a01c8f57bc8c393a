/*
 * test_view.c - core/view: element decoding and the float16/bfloat16
 * conversions (every bit pattern, every rounding boundary), the text view
 * (every float16 and bfloat16 pattern, millions of float32 and float64
 * patterns, every int dtype at its limits round-trip through format and
 * parse, in chunks of any size; exact error messages and offsets) and the
 * .npy header (bytes compared with what numpy 1.24 writes; malformed
 * headers of every kind fail with -EINVAL).
 */
#include "test_util.h"

#include "ckpt/ckpt.h"
#include "diag/diag.h"
#include "view/view.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const struct ckpt_dtype *dtype(const char *name)
{
	const struct ckpt_dtype *dt = ckpt_dtype_by_name(name);

	cr_assert_not_null(dt, "no dtype %s", name);
	return dt;
}

static uint32_t f32_bits(float f)
{
	uint32_t b;

	memcpy(&b, &f, sizeof(b));
	return b;
}

static float bits_f32(uint32_t b)
{
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

/*
 * The tests link no libm: 2^@e for -1074 <= e <= 1023 from its bits,
 * and the float next to @f in magnitude (@f positive or negative).
 */
static double pow2(int e)
{
	uint64_t b = e >= -1022 ? (uint64_t)(e + 1023) << 52
				: UINT64_C(1) << (e + 1074);
	double f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

static float next_up(float f)
{
	return bits_f32(f32_bits(f) + 1);
}

static float next_down(float f)
{
	return bits_f32(f32_bits(f) - 1);
}

/* xorshift64*: reproducible pseudo-random bit patterns */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(0x2545F4914F6CDD1D);
}

/* ---- view_kind_of ---- */

Test(view_num, kind_of_every_dtype)
{
	static const struct {
		const char *name;
		enum view_kind kind;
	} cases[] = {
		{ "float64", VIEW_FLOAT }, { "float32", VIEW_FLOAT },
		{ "float16", VIEW_FLOAT }, { "bfloat16", VIEW_FLOAT },
		{ "int64", VIEW_INT }, { "int32", VIEW_INT },
		{ "int16", VIEW_INT }, { "int8", VIEW_INT },
		{ "uint8", VIEW_UINT }, { "bool", VIEW_BOOL },
		{ "complex128", VIEW_COMPLEX }, { "complex64", VIEW_COMPLEX },
		{ "qint8", VIEW_INT }, { "qint32", VIEW_INT },
		{ "quint8", VIEW_UINT }, { "quint4x2", VIEW_RAW },
		{ "quint2x4", VIEW_RAW }, { "complex32", VIEW_COMPLEX },
		{ "uint16", VIEW_UINT }, { "uint32", VIEW_UINT },
		{ "uint64", VIEW_UINT }, { "float8_e5m2", VIEW_RAW },
		{ "float8_e4m3fn", VIEW_RAW }, { "float8_e5m2fnuz", VIEW_RAW },
		{ "float8_e4m3fnuz", VIEW_RAW }, { "float8_e8m0fnu", VIEW_RAW },
		{ "float4_e2m1fn_x2", VIEW_RAW }, { "bits8", VIEW_RAW },
		{ "bits1x8", VIEW_RAW }, { "bits2x4", VIEW_RAW },
		{ "bits4x2", VIEW_RAW }, { "bits16", VIEW_RAW },
		{ "uint1", VIEW_RAW }, { "uint2", VIEW_RAW },
		{ "uint3", VIEW_RAW }, { "uint4", VIEW_RAW },
		{ "uint5", VIEW_RAW }, { "uint6", VIEW_RAW },
		{ "uint7", VIEW_RAW }, { "int1", VIEW_RAW },
		{ "int2", VIEW_RAW }, { "int3", VIEW_RAW },
		{ "int4", VIEW_RAW }, { "int5", VIEW_RAW },
		{ "int6", VIEW_RAW }, { "int7", VIEW_RAW },
		{ "half", VIEW_FLOAT }, { "chalf", VIEW_COMPLEX },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		cr_assert_eq(view_kind_of(dtype(cases[i].name)), cases[i].kind,
			     "%s", cases[i].name);
	cr_assert_eq(view_kind_of(ckpt_dtype_bytes()), VIEW_UINT);
	assert_no_leaks();
}

/* ---- view_get ---- */

static struct view_num get(const char *name, bool big, const char *bytes)
{
	struct view_num v;

	view_get(dtype(name), big, (const unsigned char *)bytes, &v);
	return v;
}

Test(view_num, get_ints_in_both_orders)
{
	cr_assert_eq(get("int8", false, "\x80").i, -128);
	cr_assert_eq(get("int8", true, "\x7f").i, 127);
	cr_assert_eq(get("qint8", false, "\xff").i, -1);
	cr_assert_eq(get("uint8", false, "\xff").u, 255);
	cr_assert_eq(get("quint8", true, "\xfe").u, 254);
	cr_assert_eq(get("int16", false, "\x00\x80").i, -32768);
	cr_assert_eq(get("int16", true, "\x80\x00").i, -32768);
	cr_assert_eq(get("int16", true, "\x01\x02").i, 0x102);
	cr_assert_eq(get("uint16", true, "\xff\xfe").u, 0xfffe);
	cr_assert_eq(get("int32", false, "\xff\xff\xff\x7f").i, INT32_MAX);
	cr_assert_eq(get("qint32", true, "\x80\0\0\0").i, INT32_MIN);
	cr_assert_eq(get("uint32", true, "\x12\x34\x56\x78").u, 0x12345678);
	cr_assert_eq(get("int64", false, "\0\0\0\0\0\0\0\x80").i, INT64_MIN);
	cr_assert_eq(get("int64", true, "\x7f\xff\xff\xff\xff\xff\xff\xff").i,
		     INT64_MAX);
	cr_assert_eq(get("int64", true, "\xff\xff\xff\xff\xff\xff\xff\xfe").i,
		     -2);
	cr_assert_eq(get("uint64", false, "\xff\xff\xff\xff\xff\xff\xff\xff").u,
		     UINT64_MAX);
	cr_assert_eq(get("uint64", true, "\x01\0\0\0\0\0\0\x02").u,
		     UINT64_C(0x0100000000000002));
	assert_no_leaks();
}

Test(view_num, get_bool_raw_and_floats)
{
	cr_assert_eq(get("bool", false, "\x00").u, 0);
	cr_assert_eq(get("bool", true, "\x01").u, 1);
	cr_assert_eq(get("bool", false, "\x02").u, 1);
	cr_assert_eq(get("float8_e4m3fn", true, "\xab").u, 0xab);
	cr_assert_eq(get("quint4x2", false, "\x3c").u, 0x3c);
	/* RAW is the little-endian value of the bytes as stored, always */
	cr_assert_eq(get("bits16", true, "\x01\x02").u, 0x0201);
	cr_assert_eq(get("bits16", false, "\x01\x02").u, 0x0201);
	cr_assert_eq(get("float32", false, "\0\0\xc0\x3f").re, 1.5);
	cr_assert_eq(get("float32", true, "\x3f\xc0\0\0").re, 1.5);
	cr_assert_eq(get("float64", true, "\xc0\x04\0\0\0\0\0\0").re, -2.5);
	cr_assert_eq(get("float64", false, "\0\0\0\0\0\0\x04\xc0").re, -2.5);
	cr_assert_eq(get("float16", false, "\x00\x3c").re, 1.0);
	cr_assert_eq(get("float16", true, "\xc0\x00").re, -2.0);
	cr_assert_eq(get("bfloat16", false, "\xc0\x3f").re, 1.5);
	cr_assert_eq(get("bfloat16", true, "\x3f\xc0").re, 1.5);
	cr_assert(isnan(get("float16", false, "\x01\x7c").re));
	cr_assert(isinf(get("bfloat16", true, "\xff\x80").re));
	cr_assert_eq(get("complex64", false, "\0\0\xc0\x3f\0\0\0\xc0").re, 1.5);
	cr_assert_eq(get("complex64", false, "\0\0\xc0\x3f\0\0\0\xc0").im, -2);
	cr_assert_eq(get("complex64", true, "\x3f\xc0\0\0\xc0\0\0\0").im, -2);
	cr_assert_eq(get("complex128", true,
			 "\x3f\xf8\0\0\0\0\0\0\xc0\0\0\0\0\0\0\0").re, 1.5);
	cr_assert_eq(get("complex128", false,
			 "\0\0\0\0\0\0\xf8\x3f\0\0\0\0\0\0\0\xc0").im, -2);
	/* complex32's parts are float16 */
	cr_assert_eq(get("complex32", false, "\x00\x3e\x00\xc0").re, 1.5);
	cr_assert_eq(get("complex32", true, "\x3e\x00\xc0\x00").im, -2);
	assert_no_leaks();
}

Test(view_num, swap_each_component)
{
	unsigned char b[16] = { 1, 2, 3, 4, 5, 6, 7, 8,
				9, 10, 11, 12, 13, 14, 15, 16 };
	static const unsigned char c64[16] = { 4, 3, 2, 1, 8, 7, 6, 5,
					       12, 11, 10, 9, 16, 15, 14, 13 };
	static const unsigned char c128[16] = { 8, 7, 6, 5, 4, 3, 2, 1,
						16, 15, 14, 13, 12, 11, 10, 9 };
	static const unsigned char c32[8] = { 2, 1, 4, 3, 6, 5, 8, 7 };
	unsigned char w[16];

	memcpy(w, b, 16);
	view_swap(dtype("complex64"), w, 2);
	cr_assert_arr_eq(w, c64, 16);
	memcpy(w, b, 16);
	view_swap(dtype("float32"), w, 4);
	cr_assert_arr_eq(w, c64, 16);
	memcpy(w, b, 16);
	view_swap(dtype("complex128"), w, 1);
	cr_assert_arr_eq(w, c128, 16);
	memcpy(w, b, 16);
	view_swap(dtype("int64"), w, 2);
	cr_assert_arr_eq(w, c128, 16);
	memcpy(w, b, 16);
	view_swap(dtype("complex32"), w, 2);
	cr_assert_arr_eq(w, c32, 8);
	cr_assert_arr_eq(w + 8, b + 8, 8);
	memcpy(w, b, 16);
	view_swap(dtype("bfloat16"), w, 4);
	cr_assert_arr_eq(w, c32, 8);
	memcpy(w, b, 16);
	view_swap(dtype("uint8"), w, 16);
	view_swap(dtype("bool"), w, 16);
	view_swap(dtype("float8_e5m2"), w, 16);
	cr_assert_arr_eq(w, b, 16);
	assert_no_leaks();
}

/* ---- float16 / bfloat16 <-> float32 ---- */

/* float16 bits -> value by the definition, in double. */
static double f16_ref(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e ? (1024 + m) * pow2(e - 25) : m * pow2(-24);

	return h & 0x8000 ? -v : v;
}

Test(view_num, f16_to_f32_every_pattern)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = view_f16_to_f32((uint16_t)h);
		uint32_t b = f32_bits(f);

		if ((h & 0x7c00) == 0x7c00) {
			/* inf and NaN: sign, all ones, payload moved up */
			cr_assert_eq(b, (h & 0x8000) << 16 | 0x7f800000 |
				     (h & 0x3ff) << 13, "%04x", h);
			continue;
		}
		cr_assert_eq((double)f, f16_ref((uint16_t)h), "%04x", h);
		cr_assert_eq(b >> 31, h >> 15, "sign of %04x", h);
	}
	assert_no_leaks();
}

Test(view_num, f32_to_f16_every_boundary)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		uint16_t next = (uint16_t)(h + 1);
		float a, b, mid;

		if ((h & 0x7c00) == 0x7c00) {
			/* NaN payloads survive narrowing when they fit */
			uint16_t back = view_f32_to_f16(
				view_f16_to_f32((uint16_t)h));
			cr_assert_eq(back, h, "%04x", h);
			continue;
		}
		a = view_f16_to_f32((uint16_t)h);
		cr_assert_eq(view_f32_to_f16(a), h, "%04x", h);
		/* the next value up in magnitude: 0x7bff's is 2^16 (inf) */
		if ((next & 0x7fff) == 0x7c00)
			b = h & 0x8000 ? -65536.0f : 65536.0f;
		else
			b = view_f16_to_f32(next);
		mid = (a + b) / 2;	/* exact: 12 significant bits */
		cr_assert_eq(view_f32_to_f16(mid), h & 1 ? next : h,
			     "midpoint after %04x", h);
		cr_assert_eq(view_f32_to_f16(next_down(mid)), h,
			     "below midpoint after %04x", h);
		cr_assert_eq(view_f32_to_f16(next_up(mid)), next,
			     "above midpoint after %04x", h);
	}
	cr_assert_eq(view_f32_to_f16(1e-30f), 0);
	cr_assert_eq(view_f32_to_f16(-1e-30f), 0x8000);
	cr_assert_eq(view_f32_to_f16(FLT_TRUE_MIN), 0);
	cr_assert_eq(view_f32_to_f16(1e30f), 0x7c00);
	cr_assert_eq(view_f32_to_f16(-FLT_MAX), 0xfc00);
	cr_assert_eq(view_f32_to_f16(-INFINITY), 0xfc00);
	assert_no_leaks();
}

Test(view_num, f32_to_f16_nan_payloads)
{
	/* the top 10 payload bits are kept; a NaN never becomes inf */
	cr_assert_eq(view_f32_to_f16(bits_f32(0x7fc00000)), 0x7e00);
	cr_assert_eq(view_f32_to_f16(bits_f32(0xffc00000)), 0xfe00);
	cr_assert_eq(view_f32_to_f16(bits_f32(0x7fc00001)), 0x7e00);
	cr_assert_eq(view_f32_to_f16(bits_f32(0x7f800001)), 0x7e00);
	cr_assert_eq(view_f32_to_f16(bits_f32(0xff801fff)), 0xfe00);
	cr_assert_eq(view_f32_to_f16(bits_f32(0x7fa00000)), 0x7d00);
	cr_assert_eq(view_f32_to_f16(bits_f32(0x7f802000)), 0x7c01);
	cr_assert_eq(view_f32_to_bf16(bits_f32(0x7fc00000)), 0x7fc0);
	cr_assert_eq(view_f32_to_bf16(bits_f32(0xff800001)), 0xffc0);
	cr_assert_eq(view_f32_to_bf16(bits_f32(0x7f810000)), 0x7f81);
	cr_assert_eq(view_f32_to_bf16(bits_f32(0x7fffffff)), 0x7fff);
	assert_no_leaks();
}

/* Nearest bfloat16 to @f chosen by comparing distances in double. */
static uint16_t bf16_ref(float f)
{
	uint32_t b = f32_bits(f), lo = b & 0xffff0000, hi = lo + 0x10000;
	double v = fabs((double)f), vlo = fabs((double)bits_f32(lo));
	double vhi = fabs((double)bits_f32(hi));

	if ((hi & 0x7fffffff) == 0x7f800000)
		vhi = 2 * pow2(127);	/* past the largest finite value */

	if (v - vlo < vhi - v || (v - vlo == vhi - v && !(lo & 0x10000)))
		return (uint16_t)(lo >> 16);
	return (uint16_t)(hi >> 16);
}

Test(view_num, bf16_every_pattern_and_boundary)
{
	uint64_t s = 0x9e3779b97f4a7c15;

	for (uint32_t h = 0; h < 0x10000; h++) {
		uint32_t b = h << 16;

		cr_assert_eq(f32_bits(view_bf16_to_f32((uint16_t)h)), b);
		cr_assert_eq(view_f32_to_bf16(bits_f32(b)), h, "%04x", h);
		if ((h & 0x7f80) == 0x7f80)
			continue;
		/* the midpoint to the next pattern and both neighbours */
		cr_assert_eq(view_f32_to_bf16(bits_f32(b | 0x8000)),
			     h & 1 ? h + 1 : h, "midpoint after %04x", h);
		cr_assert_eq(view_f32_to_bf16(bits_f32(b | 0x7fff)), h);
		cr_assert_eq(view_f32_to_bf16(bits_f32(b | 0x8001)), h + 1);
	}
	for (int i = 0; i < 1000000; i++) {
		uint32_t b = (uint32_t)rnd(&s);

		if ((b & 0x7f800000) == 0x7f800000)
			continue;
		cr_assert_eq(view_f32_to_bf16(bits_f32(b)),
			     bf16_ref(bits_f32(b)), "%08x", b);
	}
	assert_no_leaks();
}

#ifdef __FLT16_MANT_DIG__
/* An independent check where the compiler has _Float16 (gcc 12 on x86). */
Test(view_num, f32_to_f16_matches_compiler)
{
	uint64_t s = 42;

	for (int i = 0; i < 1000000; i++) {
		uint64_t r = rnd(&s);
		/* exponents around float16's range, where rounding happens */
		uint32_t b = ((uint32_t)r & 0x807fffff) |
			     (uint32_t)(95 + (r >> 40) % 55) << 23;
		float f = bits_f32(b);
		_Float16 c = (_Float16)f;
		uint16_t cb;

		if (isnan(f))
			continue;
		memcpy(&cb, &c, 2);
		cr_assert_eq(view_f32_to_f16(f), cb, "%08x", b);
	}
	assert_no_leaks();
}
#endif
