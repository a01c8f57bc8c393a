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

static uint64_t f64_bits(double f)
{
	uint64_t b;

	memcpy(&b, &f, sizeof(b));
	return b;
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

/* ---- the text view: rendering ---- */

Test(view_text, header_like_python_tuples)
{
	static const int64_t shape[] = { 2, 3, 0, INT64_MAX };
	char buf[64];

	cr_assert_eq(view_text_header(dtype("float32"), 2, shape, buf,
				      sizeof(buf)), 17);
	cr_assert_str_eq(buf, "# float32 (2, 3)\n");
	view_text_header(dtype("bfloat16"), 0, shape, buf, sizeof(buf));
	cr_assert_str_eq(buf, "# bfloat16 ()\n");
	view_text_header(dtype("int8"), 1, shape + 1, buf, sizeof(buf));
	cr_assert_str_eq(buf, "# int8 (3,)\n");
	view_text_header(dtype("complex32"), 4, shape, buf, sizeof(buf));
	cr_assert_str_eq(buf, "# complex32 (2, 3, 0, 9223372036854775807)\n");
	/* too small: the length it needs, and a truncated line */
	cr_assert_eq(view_text_header(dtype("float32"), 2, shape, buf, 8), 17);
	cr_assert_str_eq(buf, "# float");
	cr_assert_eq(view_text_header(dtype("float32"), 2, shape, NULL, 0), 17);
	assert_no_leaks();
}

/* Render @n elements of @dt / @shape at @data; caller frees. */
static char *render(const char *name, bool big, int ndim,
		    const int64_t *shape, const void *data, uint64_t n)
{
	char *out = malloc(n * VIEW_TEXT_ELEM_MAX + 1);
	size_t len;

	cr_assert_not_null(out);
	len = view_text_format(dtype(name), big, ndim, shape, 0, data, n, out);
	cr_assert_leq(len, n * VIEW_TEXT_ELEM_MAX);
	out[len] = 0;
	return out;
}

static void assert_render(const char *name, bool big, int ndim,
			  const int64_t *shape, const void *data, uint64_t n,
			  const char *want)
{
	char *got = render(name, big, ndim, shape, data, n);

	cr_assert_str_eq(got, want, "%s", name);
	free(got);
}

Test(view_text, formats_every_kind)
{
	static const int64_t s23[] = { 2, 3 }, s5[] = { 5 }, s22[] = { 2, 2 };
	static const float f[] = { 0.5f, -1, 3.14159274f, NAN, INFINITY,
				   -INFINITY };
	static const double g[] = { 0.1, -0.0, 1e300, 5e-324, 123456789 };
	static const uint16_t h[] = { 0x3c00, 0x0001, 0x7bff, 0xfe00,
				      0x7e01 };
	static const uint16_t b[] = { 0x3f80, 0x0001, 0x7f7f, 0xffc0,
				      0xff81 };
	static const int8_t i8[] = { -128, 127, 0, -1 };
	static const uint64_t u64[] = { 0, UINT64_MAX };
	static const int64_t i64[] = { INT64_MIN, INT64_MAX };
	static const unsigned char bools[] = { 0, 1, 2, 0 };
	static const float c64[] = { 1.5f, -2, NAN, INFINITY, 0, -0.0f,
				     -NAN, -NAN };
	static const uint16_t c32[] = { 0x3e00, 0xc000, 0x7e00, 0x7c01 };
	static const unsigned char raw[] = { 0, 255, 0x80, 7 };

	assert_render("float32", false, 2, s23, f, 6,
		      "0.5 -1 3.14159274\nnan inf -inf\n");
	assert_render("float64", false, 1, s5, g, 5,
		      "0.10000000000000001 -0 1.0000000000000001e+300 "
		      "4.9406564584124654e-324 123456789\n");
	assert_render("float16", false, 1, s5, h, 5,
		      "1 5.9605e-08 65504 -nan nan(0x7e01)\n");
	assert_render("bfloat16", false, 1, s5, b, 5,
		      "1 9.184e-41 3.39e+38 -nan nan(0xff81)\n");
	assert_render("int8", false, 2, s22, i8, 4, "-128 127\n0 -1\n");
	assert_render("uint64", false, 1, s5, u64, 2,
		      "0 18446744073709551615 ");
	assert_render("int64", false, 0, s5, i64, 1,
		      "-9223372036854775808\n");
	assert_render("bool", false, 2, s22, bools, 4, "0 1\n1 0\n");
	assert_render("complex64", false, 2, s22, c64, 4,
		      "1.5-2j nan+infj\n0-0j -nan-nanj\n");
	assert_render("complex32", false, 1, s5, c32, 2,
		      "1.5-2j nan+nan(0x7c01)j ");
	assert_render("float8_e5m2", true, 2, s22, raw, 4, "0 255\n128 7\n");
	assert_render("quint4x2", false, 1, s5, raw, 4, "0 255 128 7 ");
	assert_no_leaks();
}

Test(view_text, formats_big_endian_and_from_any_element)
{
	static const int64_t s23[] = { 2, 3 };
	static const unsigned char be[] = { 0x3f, 0xc0, 0, 0, 0xff, 0xc0,
					    0, 0, 0x7f, 0xc0, 0, 1 };
	static const unsigned char bits16[] = { 1, 2 };
	static const int32_t v[] = { 1, 2, 3, 4, 5, 6 };
	char out[6 * VIEW_TEXT_ELEM_MAX];
	size_t len;

	assert_render("float32", true, 2, s23, be, 3,
		      "1.5 -nan nan(0x7fc00001)\n");
	assert_render("int16", true, 2, s23, be, 3, "16320 0 -64\n");
	assert_render("bits16", true, 1, s23, bits16, 1, "513 ");
	/* a slice starting inside a row ends its rows where they end */
	len = view_text_format(dtype("int32"), false, 2, s23, 2,
			       (const unsigned char *)(v + 2), 3, out);
	cr_assert_eq(len, 6);
	cr_assert_arr_eq(out, "3\n4 5 ", 6);
	len = view_text_format(dtype("int32"), false, 2, s23, 0,
			       (const unsigned char *)v, 0, out);
	cr_assert_eq(len, 0);
	assert_no_leaks();
}

/* ---- the text view: parsing ---- */

/*
 * Parse @len bytes of @text in chunks of @chunk bytes (0: one chunk)
 * into @out; the error code.  Checks that each call stays within the
 * output it was promised and that nout is whole elements.
 */
static int parse_chunked(const struct ckpt_dtype *dt, bool big,
			 const char *text, size_t len, uint64_t numel,
			 size_t chunk, unsigned char *out, size_t *nout,
			 struct diag *d)
{
	struct view_parser p;
	size_t off = 0, total = 0;
	int rc = 0;

	view_parser_init(&p, dt, big, numel);
	diag_init(d, "t.txt");
	if (!chunk)
		chunk = len ? len : 1;
	do {
		size_t n = len - off < chunk ? len - off : chunk, got = 99;

		rc = view_parse(&p, text + off, n, off + n == len,
				out + total, &got, d);
		cr_assert_leq(got, (n / 2 + 2) * dt->size);
		cr_assert_eq(got % dt->size, 0);
		total += got;
		off += n;
	} while (!rc && off < len);
	*nout = total;
	return rc;
}

/* Whole (0), and cut everywhere: inside numbers, comments, line ends. */
static const size_t chunks[] = { 0, 1, 2, 3, 7 };

/* Parse @text as @numel elements of @name; the bytes must be @want,
 * however the text is cut into chunks. */
static void assert_parse(const char *name, bool big, const char *text,
			 uint64_t numel, const void *want)
{
	const struct ckpt_dtype *dt = dtype(name);
	size_t n = numel * dt->size, nout;
	unsigned char *out = malloc(n + 64);
	struct diag d;
	int rc;

	cr_assert_not_null(out);
	for (size_t i = 0; i < ARRAY_SIZE(chunks); i++) {
		rc = parse_chunked(dt, big, text, strlen(text), numel,
				   chunks[i], out, &nout, &d);
		cr_assert_eq(rc, 0, "%s: %s: %s", name, text, d.msg);
		cr_assert_eq(nout, n);
		cr_assert_arr_eq(out, want, n, "%s: %s (chunks of %zu)", name,
				 text, chunks[i]);
	}
	free(out);
}

/* Parse @text as @name; it must fail with @msg at offset @off, however
 * the text is cut into chunks. */
static void assert_parse_err(const char *name, const char *text,
			     uint64_t numel, const char *msg, uint64_t off)
{
	const struct ckpt_dtype *dt = dtype(name);
	unsigned char *out = malloc(strlen(text) * 8 + 64);
	size_t nout, len = strlen(text);
	struct diag d;

	for (size_t i = 0; i < ARRAY_SIZE(chunks); i++) {
		size_t chunk = chunks[i];
		int rc = parse_chunked(dt, false, text, len, numel, chunk, out,
				       &nout, &d);

		cr_assert_eq(rc, -EINVAL, "%s: %s", name, text);
		cr_assert_eq(d.err, -EINVAL);
		cr_assert_str_eq(d.msg, msg, "%s: %s (chunks of %zu)", name,
				 text, chunk);
		cr_assert_eq(d.off, off, "%s: %s: offset %" PRIu64, name,
			     text, d.off);
	}
	free(out);
}

Test(view_text, parses_what_people_write)
{
	static const float f[] = { 1, -2, 0.5f, 1e-3f, 3, 0.25f };
	static const uint32_t fn[] = { 0x7fc00000, 0xffc00000, 0x7fc00001,
				       0x7f800000, 0xff800000, 0x7f800000 };
	static const uint16_t h[] = { 0x3c00, 0xc000, 0x7e00, 0xfe00 };
	static const unsigned char bools[] = { 1, 0, 1, 0, 1, 0 };
	static const int16_t i16[] = { 1, -1, 32767, -32768 };
	static const float c64[] = { 1.5f, -2, 0, 2, 3, 0, 1, 2, -1, -1e5f };
	static const uint16_t c32[] = { 0x7e00, 0x7c00, 0xfe00, 0xfe00 };
	static const uint64_t dn[] = { UINT64_C(0x7ff8000000000000),
				       UINT64_C(0x7ff0000000000001) };

	assert_parse("float32", false, "1 -2 .5\n1e-3, 3.\t+0.25", 6, f);
	assert_parse("float32", false, "nan -nan nan(0x7fc00001) inf -inf "
		     "Infinity", 6, fn);
	assert_parse("float32", false, "NaN -NAN nan(0X7FC00001) INF -inf "
		     "+inf", 6, fn);
	assert_parse("float16", false, "1 -2 nan -nan", 4, h);
	assert_parse("float64", false, "nan nan(0x7ff0000000000001)", 2, dn);
	assert_parse("bool", false, "True False 1 0 true false", 6, bools);
	assert_parse("int16", false, "1 -1 +32767 -32768", 4, i16);
	assert_parse("complex64", false, "1.5-2j 2j (3+0j) (1+2j) -1-1e5j",
		     5, c64);
	assert_parse("complex64", false, "1.5-2J, 2J 3 1+2j -1-1E+05j", 5,
		     c64);
	assert_parse("complex32", false, "nan+infj -nan-nanj", 2, c32);
	/* comments: lines whose first non-blank is '#' */
	assert_parse("int16", false, "# int16 (4,)\n1 -1\n  # x 9\n"
		     "\t#\n32767\r\n-32768\n# end", 4, i16);
	assert_parse("int16", false, "", 0, i16);
	assert_parse("int16", false, "# int16 (0,)\n", 0, i16);
	assert_no_leaks();
}

Test(view_text, ints_at_their_limits)
{
	static const struct {
		const char *name;
		const char *text;
		unsigned char le[16];
	} cases[] = {
		{ "int8", "-128 127", { 0x80, 0x7f } },
		{ "qint8", "-128 127", { 0x80, 0x7f } },
		{ "uint8", "0 255", { 0, 0xff } },
		{ "quint8", "0 255", { 0, 0xff } },
		{ "int16", "-32768 32767", { 0, 0x80, 0xff, 0x7f } },
		{ "uint16", "0 65535", { 0, 0, 0xff, 0xff } },
		{ "int32", "-2147483648 2147483647",
		  { 0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0x7f } },
		{ "qint32", "-2147483648 2147483647",
		  { 0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0x7f } },
		{ "uint32", "0 4294967295",
		  { 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff } },
		{ "int64", "-9223372036854775808 9223372036854775807",
		  { 0, 0, 0, 0, 0, 0, 0, 0x80,
		    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f } },
		{ "uint64", "0 18446744073709551615",
		  { 0, 0, 0, 0, 0, 0, 0, 0,
		    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } },
		{ "float8_e4m3fn", "0 255", { 0, 0xff } },
		{ "int4", "0 255", { 0, 0xff } },
		{ "bits8", "0 255", { 0, 0xff } },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct ckpt_dtype *dt = dtype(cases[i].name);
		unsigned char be[16];
		char *text;

		memcpy(be, cases[i].le, sizeof(be));
		view_swap(dt, be, 2);
		assert_parse(cases[i].name, false, cases[i].text, 2,
			     cases[i].le);
		assert_parse(cases[i].name, true, cases[i].text, 2, be);
		/* and back: the renderer prints the same text */
		text = render(cases[i].name, false, 1, (const int64_t[]){ 2 },
			      cases[i].le, 2);
		cr_assert_eq(strlen(text), strlen(cases[i].text) + 1);
		cr_assert_arr_eq(text, cases[i].text, strlen(cases[i].text));
		free(text);
		text = render(cases[i].name, true, 1, (const int64_t[]){ 2 },
			      be, 2);
		cr_assert_arr_eq(text, cases[i].text, strlen(cases[i].text));
		free(text);
	}
	/* RAW (bits16) keeps the bytes as stored in either order */
	assert_parse("bits16", true, "513", 1, "\x01\x02");
	assert_parse("bits16", false, "65535 0", 2, "\xff\xff\0\0");
	assert_no_leaks();
}

Test(view_text, rejects_out_of_range_ints)
{
	assert_parse_err("int8", "1 300", 2,
			 "line 1: '300' is out of range for int8", 2);
	assert_parse_err("int8", "-129", 1,
			 "line 1: '-129' is out of range for int8", 0);
	assert_parse_err("uint8", "\n\n 256", 1,
			 "line 3: '256' is out of range for uint8", 3);
	assert_parse_err("uint8", "-1", 1,
			 "line 1: '-1' is out of range for uint8", 0);
	assert_parse_err("uint64", "-1", 1,
			 "line 1: '-1' is out of range for uint64", 0);
	assert_parse_err("uint64", "18446744073709551616", 1,
			 "line 1: '18446744073709551616' is out of range "
			 "for uint64", 0);
	assert_parse_err("int64", "9223372036854775808", 1,
			 "line 1: '9223372036854775808' is out of range "
			 "for int64", 0);
	assert_parse_err("int64", "-99999999999999999999999999", 1,
			 "line 1: '-99999999999999999999999999' is out of "
			 "range for int64", 0);
	assert_parse_err("int16", "32768", 1,
			 "line 1: '32768' is out of range for int16", 0);
	assert_parse_err("uint32", "4294967296", 1,
			 "line 1: '4294967296' is out of range for uint32", 0);
	assert_parse_err("qint8", "128", 1,
			 "line 1: '128' is out of range for qint8", 0);
	assert_parse_err("float8_e5m2", "256", 1,
			 "line 1: '256' is out of range for float8_e5m2", 0);
	assert_parse_err("float16", "65520", 1,
			 "line 1: '65520' is out of range for float16", 0);
	assert_parse_err("float32", "1e39", 1,
			 "line 1: '1e39' is out of range for float32", 0);
	assert_parse_err("float64", "-1e309", 1,
			 "line 1: '-1e309' is out of range for float64", 0);
	assert_parse_err("bfloat16", "3.4e38", 1,
			 "line 1: '3.4e38' is out of range for bfloat16", 0);
	assert_parse_err("complex64", "1+1e39j", 1,
			 "line 1: '1+1e39j' is out of range for complex64", 0);
	assert_no_leaks();
}

Test(view_text, rejects_garbage_with_line_and_offset)
{
	assert_parse_err("float32", "# float32 (3,)\n1 2\nx1 3", 3,
			 "line 3: 'x1' is not a float32", 19);
	assert_parse_err("int8", "1.5", 1, "line 1: '1.5' is not an int8", 0);
	assert_parse_err("int32", "0x10", 1,
			 "line 1: '0x10' is not an int32", 0);
	assert_parse_err("uint8", "1e3", 1, "line 1: '1e3' is not a uint8", 0);
	assert_parse_err("uint8", "+", 1, "line 1: '+' is not a uint8", 0);
	assert_parse_err("bool", "2", 1, "line 1: '2' is not a bool", 0);
	assert_parse_err("bool", "yes", 1, "line 1: 'yes' is not a bool", 0);
	assert_parse_err("float32", "1 2 # 3", 3,
			 "line 1: '#' is not a float32", 4);
	assert_parse_err("float32", "0x1p3", 1,
			 "line 1: '0x1p3' is not a float32", 0);
	assert_parse_err("float32", "1e", 1, "line 1: '1e' is not a float32",
			 0);
	assert_parse_err("float32", ".", 1, "line 1: '.' is not a float32", 0);
	assert_parse_err("float32", "nan(0x7f800000)", 1,
			 "line 1: 'nan(0x7f800000)' is not a float32", 0);
	assert_parse_err("float32", "nan(0x17fc00001)", 1,
			 "line 1: 'nan(0x17fc00001)' is not a float32", 0);
	assert_parse_err("float32", "-nan(0x7fc00001)", 1,
			 "line 1: '-nan(0x7fc00001)' is not a float32", 0);
	assert_parse_err("float32", "nan(0x)", 1,
			 "line 1: 'nan(0x)' is not a float32", 0);
	assert_parse_err("float32", "nanx", 1,
			 "line 1: 'nanx' is not a float32", 0);
	assert_parse_err("float16", "nan(0x7fc00001)", 1,
			 "line 1: 'nan(0x7fc00001)' is not a float16", 0);
	assert_parse_err("complex64", "1+2", 1,
			 "line 1: '1+2' is not a complex64", 0);
	assert_parse_err("complex64", "1+xj", 1,
			 "line 1: '1+xj' is not a complex64", 0);
	assert_parse_err("complex64", "j", 1,
			 "line 1: 'j' is not a complex64", 0);
	assert_parse_err("complex64", "1e39+xj", 1,
			 "line 1: '1e39+xj' is not a complex64", 0);
	assert_parse_err("float32", "\x01\xff\\", 1,
			 "line 1: '\\x01\\xff\\x5c' is not a float32", 0);
	assert_parse_err("float64", "1 "
			 "3.14159265358979323846264338327950288419716939937510"
			 "58209749445923", 2,
			 "line 1: '3.141592653589793238462643383279...' is too "
			 "long for a float64", 2);
	assert_no_leaks();
}

Test(view_text, counts_values)
{
	assert_parse_err("float32", "# float32 (15,)\n1 2 3 4 5 6 7 8 9 10 11 "
			 "12\n", 15, "12 values, the tensor has 15", 43);
	assert_parse_err("float32", "1 2 3", 2,
			 "line 1: too many values, the tensor has 2", 4);
	/* too many is found before the garbage after it */
	assert_parse_err("int8", "1\n2 x", 1,
			 "line 2: too many values, the tensor has 1", 2);
	assert_parse_err("int8", "#1\n", 1, "0 values, the tensor has 1", 3);
	assert_no_leaks();
}

/*
 * Render @n elements at @data as rows of 8 and parse them back in chunks
 * of @chunk bytes (0: whole): the bytes must come back the same.
 */
static void assert_roundtrip(const char *name, bool big, const void *data,
			     uint64_t n, size_t chunk)
{
	const struct ckpt_dtype *dt = dtype(name);
	int64_t shape[2] = { (int64_t)(n / 8), 8 };
	char *text = malloc(n * VIEW_TEXT_ELEM_MAX + 1);
	unsigned char *back = malloc(n * dt->size + 64);
	size_t len, nout;
	struct diag d;
	int rc;

	cr_assert(text && back);
	cr_assert_eq(n % 8, 0);
	len = view_text_format(dt, big, 2, shape, 0, data, n, text);
	rc = parse_chunked(dt, big, text, len, n, chunk, back, &nout, &d);
	cr_assert_eq(rc, 0, "%s: %s", name, d.msg);
	cr_assert_eq(nout, n * dt->size);
	if (memcmp(back, data, nout)) {
		for (uint64_t i = 0; i < n; i++) {
			const unsigned char *a = (const unsigned char *)data +
						 i * dt->size;
			char one[VIEW_TEXT_ELEM_MAX + 1] = "";

			if (!memcmp(a, back + i * dt->size, dt->size))
				continue;
			view_text_format(dt, big, 0, shape, 0, a, 1, one);
			cr_assert_fail("%s: element %" PRIu64 " (%s) came back "
				       "different", name, i, one);
		}
	}
	free(text);
	free(back);
}

Test(view_text, every_float16_and_bfloat16_roundtrips)
{
	uint16_t *h = malloc(0x10000 * 2);

	cr_assert_not_null(h);
	for (uint32_t i = 0; i < 0x10000; i++)
		h[i] = (uint16_t)i;
	assert_roundtrip("float16", false, h, 0x10000, 0);
	assert_roundtrip("float16", true, h, 0x10000, 7);
	assert_roundtrip("bfloat16", false, h, 0x10000, 0);
	assert_roundtrip("bfloat16", true, h, 0x10000, 3);
	/* complex32: every pattern as a real part, then as an imaginary one */
	assert_roundtrip("complex32", false, h, 0x8000, 0);
	assert_roundtrip("complex32", true, h + 1, 0x7ff8, 0);
	free(h);
	assert_no_leaks();
}

/*
 * The precisions in view.h are the smallest that work: one digit fewer
 * loses some float16 / bfloat16 values.  The counts of positive finite
 * values lost agree with numpy 1.24 (np.float16(float("%.4g" % v)), and
 * for bfloat16 the nearest value by exact fractions), which also finds
 * that "%.5g" and "%.4g" lose none.
 */
Test(view_text, float16_needs_5_digits_and_bfloat16_4)
{
	static const struct {
		const char *name;
		int prec;
		uint32_t end;	/* the first inf: positive finite below */
		int lost;	/* as numpy counts them (see below) */
	} cases[] = { { "float16", 4, 0x7c00, 1074 },
		      { "bfloat16", 3, 0x7f80, 2454 } };

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		const struct ckpt_dtype *dt = dtype(cases[c].name);
		bool bf = dt->name[0] == 'b';
		int lost = 0;

		for (uint32_t i = 0; i < cases[c].end; i++) {
			float f = bf ? view_bf16_to_f32((uint16_t)i)
				     : view_f16_to_f32((uint16_t)i);
			char text[40];
			unsigned char back[2 * 4];
			size_t nout;
			struct diag d;

			snprintf(text, sizeof(text), "%.*g", cases[c].prec, f);
			cr_assert_eq(parse_chunked(dt, false, text,
						   strlen(text), 1, 0, back,
						   &nout, &d), 0);
			lost += back[0] != (i & 0xff) || back[1] != (i >> 8);
		}
		cr_assert_eq(lost, cases[c].lost, "%s", cases[c].name);
	}
	assert_no_leaks();
}

Test(view_text, float32_specials_and_random_patterns_roundtrip)
{
	static const uint32_t special[] = {
		0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x00800000,
		0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000,
		0xffc00000, 0x7fc00001, 0x7f800001, 0xffbfffff, 0x7fffffff,
		0x3f800000, 0x3f800001, 0x3effffff, 0x4b000001, 0x33800000,
	};
	uint32_t *v = malloc(65536 * 4);
	uint64_t s = 1;

	cr_assert_not_null(v);
	memcpy(v, special, sizeof(special));
	for (size_t i = ARRAY_SIZE(special); i < 64; i++)
		v[i] = special[i % ARRAY_SIZE(special)] ^ 0x80000000;
	assert_roundtrip("float32", false, v, 64, 1);
	assert_roundtrip("float32", true, v, 64, 2);
	for (int batch = 0; batch < 32; batch++) {
		for (size_t i = 0; i < 65536; i++)
			v[i] = (uint32_t)rnd(&s);
		assert_roundtrip("float32", batch & 1, v, 65536, 0);
	}
	free(v);
	assert_no_leaks();
}

Test(view_text, float64_and_complex_random_patterns_roundtrip)
{
	uint64_t *v = malloc(65536 * 8), s = 7;
	static const double special[] = { 0.0, -0.0, DBL_MIN, DBL_MAX,
					  -DBL_MAX, DBL_TRUE_MIN, INFINITY,
					  -INFINITY, NAN, -NAN, 0.1, 1.0 / 3 };

	cr_assert_not_null(v);
	for (size_t i = 0; i < 16; i++)
		v[i] = f64_bits(special[i % ARRAY_SIZE(special)]);
	assert_roundtrip("float64", false, v, 16, 3);
	assert_roundtrip("complex128", true, v, 8, 2);
	for (int batch = 0; batch < 8; batch++) {
		for (size_t i = 0; i < 65536; i++)
			v[i] = rnd(&s);
		assert_roundtrip("float64", batch & 1, v, 65536, 0);
		assert_roundtrip("complex128", !(batch & 1), v, 32768, 0);
		assert_roundtrip("complex64", batch & 1, v, 65536, 0);
	}
	free(v);
	assert_no_leaks();
}

Test(view_text, bool_and_raw_roundtrip)
{
	unsigned char b[256];

	for (int i = 0; i < 256; i++)
		b[i] = (unsigned char)(i & 1);
	assert_roundtrip("bool", false, b, 256, 1);
	for (int i = 0; i < 256; i++)
		b[i] = (unsigned char)i;
	assert_roundtrip("float8_e4m3fn", true, b, 256, 2);
	assert_roundtrip("bits16", true, b, 128, 3);
	assert_roundtrip("uint4", false, b, 256, 7);
	assert_roundtrip("int8", true, b, 256, 0);
	assert_roundtrip("uint8", false, b, 256, 0);
	assert_roundtrip("int16", true, b, 128, 1);
	assert_roundtrip("uint32", true, b, 64, 2);
	assert_roundtrip("int64", false, b, 32, 3);
	assert_roundtrip("uint64", true, b, 32, 7);
	assert_no_leaks();
}

/* Parse one number of a 2-byte float type; its bits. */
static uint16_t parse16(const char *name, const char *text)
{
	unsigned char out[16];
	size_t nout;
	struct diag d;

	cr_assert_eq(parse_chunked(dtype(name), false, text, strlen(text), 1,
				   0, out, &nout, &d), 0, "%s", text);
	return (uint16_t)(out[0] | out[1] << 8);
}

Test(view_text, narrow_floats_round_once_from_the_decimal)
{
	char text[64];

	/* 1 + 2^-11 is halfway between 0x3c00 and 0x3c01 */
	cr_assert_eq(parse16("float16", "1.00048828125"), 0x3c00);
	cr_assert_eq(parse16("float16", "1.00048828125000000000000001"),
		     0x3c01);
	cr_assert_eq(parse16("float16", "1.00048828124999999999999999"),
		     0x3c00);
	cr_assert_eq(parse16("float16", "-1.00048828125000000000000001"),
		     0xbc01);
	cr_assert_eq(parse16("float16", "1.00146484375"), 0x3c02);
	cr_assert_eq(parse16("float16", "100048828125000000000000001e-26"),
		     0x3c01);
	/* going through float would land on the halfway point: 2^-30 lost */
	snprintf(text, sizeof(text), "%.30g", 1 + pow2(-11) + pow2(-30));
	cr_assert_eq(parse16("float16", text), 0x3c01);
	snprintf(text, sizeof(text), "%.30g", 1 + pow2(-8) + pow2(-30));
	cr_assert_eq(parse16("bfloat16", text), 0x3f81);
	cr_assert_eq(parse16("bfloat16", "1.00390625"), 0x3f80);
	cr_assert_eq(parse16("bfloat16", "1.01171875"), 0x3f82);
	/* the overflow threshold, 65520, and just below it */
	cr_assert_eq(parse16("float16", "65519.99"), 0x7bff);
	cr_assert_eq(parse16("float16", "65519.9999999999999999999"), 0x7bff);
	cr_assert_eq(parse16("float16", "-65504"), 0xfbff);
	/* subnormals and underflow: half of 2^-24 ties to 0 */
	cr_assert_eq(parse16("float16", "5.9604644775390625e-8"), 0x0001);
	cr_assert_eq(parse16("float16", "2.98023223876953125e-8"), 0x0000);
	cr_assert_eq(parse16("float16", "2.98023223876953125000001e-8"),
		     0x0001);
	cr_assert_eq(parse16("float16", "-1e-30"), 0x8000);
	cr_assert_eq(parse16("float16", "8.940696716308594e-8"), 0x0002);
	/*
	 * bfloat16: half the smallest subnormal is 2^-134, 94 digits long.
	 * Cut to 48 digits it is below; with the last digit raised, above;
	 * both read as exactly 2^-134 in double.
	 */
	{
		char exact[160], *e;

		snprintf(exact, sizeof(exact), "%.100e", pow2(-134));
		e = strchr(exact, 'e');
		snprintf(text, sizeof(text), "%.50s%s", exact, e);
		cr_assert_eq(parse16("bfloat16", text), 0x0000, "%s", text);
		cr_assert_neq(text[49], '9');
		text[49]++;
		cr_assert_eq(parse16("bfloat16", text), 0x0001, "%s", text);
	}
	cr_assert_eq(parse16("bfloat16", "1e-50"), 0x0000);
	cr_assert_eq(parse16("bfloat16", "3.3895e38"), 0x7f7f);
	/* the smallest normal from a subnormal rounding up */
	cr_assert_eq(parse16("float16", "6.1035e-5"), 0x0400);
	assert_no_leaks();
}

#ifdef __FLT16_MANT_DIG__
/* Random decimals near float16's range against gcc's double -> _Float16,
 * which rounds once (a random double is never exactly halfway). */
Test(view_text, float16_parse_matches_compiler)
{
	const struct ckpt_dtype *dt = dtype("float16");
	uint64_t s = 11;

	for (int i = 0; i < 200000; i++) {
		uint64_t r = rnd(&s);
		uint64_t b = (r & UINT64_C(0x800fffffffffffff)) |
			     (uint64_t)(1023 - 27 + (r >> 52) % 45) << 52;
		double x;
		char text[40];
		_Float16 c;
		uint16_t cb;
		unsigned char out[16];
		size_t nout;
		struct diag d;
		int rc;

		memcpy(&x, &b, sizeof(x));
		snprintf(text, sizeof(text), "%.17g", x);
		x = strtod(text, NULL);
		c = (_Float16)x;
		memcpy(&cb, &c, 2);
		rc = parse_chunked(dt, false, text, strlen(text), 1, 0, out,
				   &nout, &d);
		if ((cb & 0x7fff) == 0x7c00) {
			cr_assert_eq(rc, -EINVAL, "%s", text);
			continue;
		}
		cr_assert_eq(rc, 0, "%s: %s", text, d.msg);
		cr_assert_eq(out[0] | out[1] << 8, cb, "%s", text);
	}
	assert_no_leaks();
}
#endif

/* Text with every kind of cut: the same numbers whatever the chunks. */
Test(view_text, chunks_of_any_size_give_the_same_result)
{
	static const char text[] =
		"# complex64 (2, 3)\r\n"
		"1.5-2j, nan+infj\t(3+4j)\n"
		"   # a comment cut anywhere, 1 2 3 #\n"
		"\n"
		"-1.25e-3+6.0000001e10j    nan(0x7fc00001)+nan(0xffc00002)j"
		"\n# trailing comment without newline 5";
	float want[10] = { 1.5f, -2, NAN, INFINITY, 3, 4, -1.25e-3f,
			   6.0000001e10f };
	static const uint32_t nb[2] = { 0x7fc00001, 0xffc00002 };

	memcpy(&want[8], nb, 8);
	/* 5 values: the sixth comes from a line that is a comment */
	assert_parse_err("complex64", text, 6, "5 values, the tensor has 6",
			 sizeof(text) - 1);
	assert_parse("complex64", false, text, 5, want);
	assert_no_leaks();
}

/* ---- the .npy header ---- */

/*
 * What numpy 1.24.2 (Debian 12's python3-numpy) writes, made with
 *
 *   b = io.BytesIO(); np.save(b, np.zeros((2, 3), '<f4'))  # and so on
 *
 * keeping the bytes before the data, or, for shapes numpy cannot
 * allocate (or its 32-dimension limit), with the function np.save calls:
 * numpy.lib.format._write_array_header(b, {'descr': '<i8',
 * 'fortran_order': False, 'shape': (2**63 - 1, 0)}, (1, 0)).  The last
 * case is the one where the dict and its "\n" end on a 64-byte boundary,
 * so numpy pads 64 more spaces rather than none.
 */
#define E18	1000000000000000000
#define ONES64	{ 1 }
static const struct {
	const char *name;
	bool big;
	int ndim;
	int64_t shape[CKPT_MAX_DIMS];
	const char *bytes;
	size_t len;
} numpy_headers[] = {
	{ "float32", false, 2, { 2, 3 },
	  "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': "
	  "False, 'shape': (2, 3), }                   "
	  "                                       \x0a", 128 },
	{ "float64", false, 0, { 0 },
	  "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': "
	  "False, 'shape': (), }                       "
	  "                                       \x0a", 128 },
	{ "int8", false, 1, { 5 },
	  "\x93NUMPY\x01\x00v\x00{'descr': '|i1', 'fortran_order': "
	  "False, 'shape': (5,), }                     "
	  "                                       \x0a", 128 },
	{ "bool", true, 1, { 0 },
	  "\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': "
	  "False, 'shape': (0,), }                     "
	  "                                       \x0a", 128 },
	{ "float32", true, 2, { 2, 3 },
	  "\x93NUMPY\x01\x00v\x00{'descr': '>f4', 'fortran_order': "
	  "False, 'shape': (2, 3), }                   "
	  "                                       \x0a", 128 },
	{ "complex32", false, 1, { 4 },
	  "\x93NUMPY\x01\x00v\x00{'descr': [('re', '<f2'), ('im', '"
	  "<f2')], 'fortran_order': False, 'shape': (4,"
	  "), }                                   \x0a", 128 },
	{ "complex32", true, 2, { 1, 1 },
	  "\x93NUMPY\x01\x00v\x00{'descr': [('re', '>f2'), ('im', '"
	  ">f2')], 'fortran_order': False, 'shape': (1,"
	  " 1), }                                 \x0a", 128 },
	{ "bfloat16", false, 1, { 3 },
	  "\x93NUMPY\x01\x00v\x00{'descr': '<u2', 'fortran_order': "
	  "False, 'shape': (3,), }                     "
	  "                                       \x0a", 128 },
	{ "complex128", true, 3, { 1, 2, 3 },
	  "\x93NUMPY\x01\x00v\x00{'descr': '>c16', 'fortran_order':"
	  " False, 'shape': (1, 2, 3), }               "
	  "                                       \x0a", 128 },
	{ "int64", false, 2, { 9223372036854775807, 0 },
	  "\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': "
	  "False, 'shape': (9223372036854775807, 0), } "
	  "                                       \x0a", 128 },
	{ "uint8", false, 64, ONES64,
	  "\x93NUMPY\x01\x00" "6\x01{'descr': '|u1', 'fortran_order': "
	  "False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1, "
	  "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,"
	  " 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1"
	  ", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
	  "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), }         "
	  "                                            "
	  "           \x0a", 320 },
	{ "float32", false, 6, { 0, E18, E18, E18, E18, E18 },
	  "\x93NUMPY\x01\x00\xf6\x00{'descr': '<f4', 'fortran_order': "
	  "False, 'shape': (0, 1000000000000000000, 100"
	  "0000000000000000, 1000000000000000000, 10000"
	  "00000000000000, 1000000000000000000), }     "
	  "                                            "
	  "                                   \x0a", 256 },
};

/* @len bytes copied to a buffer of exactly that size (ASan sees any read
 * past it), then parsed. */
static int npy_parse(const void *bytes, size_t len, struct view_npy *v,
		     struct diag *d)
{
	unsigned char *b = malloc(len ? len : 1);
	int rc;

	cr_assert_not_null(b);
	memcpy(b, bytes, len);
	diag_init(d, "t.npy");
	rc = view_npy_parse(b, len, v, d);
	free(b);
	cr_assert(rc == 0 || rc == -EINVAL, "rc %d", rc);
	cr_assert_eq(rc == 0, !diag_failed(d));
	if (!rc) {
		cr_assert_leq(v->header_len, len);
		cr_assert_not_null(v->dtype);
		cr_assert_leq(v->ndim, CKPT_MAX_DIMS);
		cr_assert_leq(v->nbytes, (uint64_t)INT64_MAX);
		cr_assert_eq(v->nbytes, v->numel * v->dtype->size);
	}
	return rc;
}

static void fill_shape(int64_t *shape, int ndim)
{
	if (ndim == CKPT_MAX_DIMS)
		for (int i = 0; i < ndim; i++)
			shape[i] = 1;
}

Test(view_npy, descr_for_every_dtype)
{
	static const struct {
		const char *name, *le, *be;
	} cases[] = {
		{ "float32", "'<f4'", "'>f4'" },
		{ "float64", "'<f8'", "'>f8'" },
		{ "float16", "'<f2'", "'>f2'" },
		{ "bfloat16", "'<u2'", "'>u2'" },
		{ "int8", "'|i1'", "'|i1'" },
		{ "uint8", "'|u1'", "'|u1'" },
		{ "int64", "'<i8'", "'>i8'" },
		{ "uint64", "'<u8'", "'>u8'" },
		{ "bool", "'|b1'", "'|b1'" },
		{ "complex64", "'<c8'", "'>c8'" },
		{ "complex128", "'<c16'", "'>c16'" },
		{ "complex32", "[('re', '<f2'), ('im', '<f2')]",
		  "[('re', '>f2'), ('im', '>f2')]" },
		{ "qint8", "'|i1'", "'|i1'" },
		{ "qint32", "'<i4'", "'>i4'" },
		{ "quint8", "'|u1'", "'|u1'" },
		{ "quint4x2", "'|u1'", "'|u1'" },
		{ "float8_e4m3fn", "'|u1'", "'|u1'" },
		{ "float4_e2m1fn_x2", "'|u1'", "'|u1'" },
		{ "bits16", "'<u2'", "'>u2'" },
		{ "bits8", "'|u1'", "'|u1'" },
		{ "int4", "'|u1'", "'|u1'" },
		{ "uint3", "'|u1'", "'|u1'" },
	};
	char buf[64];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct ckpt_dtype *dt = dtype(cases[i].name);

		cr_assert_str_eq(view_npy_descr(dt, false, buf, sizeof(buf)),
				 cases[i].le);
		cr_assert_str_eq(view_npy_descr(dt, true, buf, sizeof(buf)),
				 cases[i].be);
	}
	assert_no_leaks();
}

Test(view_npy, header_bytes_match_numpy)
{
	for (size_t i = 0; i < ARRAY_SIZE(numpy_headers); i++) {
		unsigned char buf[VIEW_NPY_HEADER_MAX];
		int64_t shape[CKPT_MAX_DIMS];
		size_t len;

		memcpy(shape, numpy_headers[i].shape, sizeof(shape));
		fill_shape(shape, numpy_headers[i].ndim);
		len = view_npy_header(dtype(numpy_headers[i].name),
				      numpy_headers[i].big,
				      numpy_headers[i].ndim, shape, buf);
		cr_assert_eq(len, numpy_headers[i].len, "case %zu", i);
		cr_assert_eq(len % 64, 0);
		cr_assert_arr_eq(buf, numpy_headers[i].bytes, len,
				 "case %zu: %.*s", i, (int)len, buf);
	}
	assert_no_leaks();
}

Test(view_npy, parses_numpy_headers)
{
	for (size_t i = 0; i < ARRAY_SIZE(numpy_headers); i++) {
		const struct ckpt_dtype *dt = dtype(numpy_headers[i].name);
		int64_t shape[CKPT_MAX_DIMS];
		struct view_npy v;
		struct diag d;
		char descr[64];
		uint64_t numel = 1;

		memcpy(shape, numpy_headers[i].shape, sizeof(shape));
		fill_shape(shape, numpy_headers[i].ndim);
		cr_assert_eq(npy_parse(numpy_headers[i].bytes,
				       numpy_headers[i].len, &v, &d), 0,
			     "case %zu: %s", i, d.msg);
		cr_assert_eq(v.header_len, numpy_headers[i].len);
		/* bfloat16 comes back as what numpy sees: uint16 */
		cr_assert_str_eq(v.dtype->name, strcmp(dt->name, "bfloat16")
				 ? dt->name : "uint16");
		cr_assert_eq(v.big, numpy_headers[i].big && dt->size > 1);
		cr_assert_str_eq(v.descr, view_npy_descr(dt, v.big, descr,
							 sizeof(descr)));
		cr_assert_not(v.fortran_order);
		cr_assert_eq(v.ndim, numpy_headers[i].ndim);
		for (int k = 0; k < v.ndim; k++) {
			cr_assert_eq(v.shape[k], shape[k]);
			numel *= (uint64_t)shape[k];
		}
		cr_assert_eq(v.numel, numel);
		cr_assert_eq(v.nbytes, numel * dt->size);
	}
	assert_no_leaks();
}

/* Every dtype's header reads back as the dtype numpy sees. */
Test(view_npy, every_dtype_reads_back)
{
	static const struct {
		const char *name, *as;
	} cases[] = {
		{ "float64", "float64" }, { "float32", "float32" },
		{ "float16", "float16" }, { "bfloat16", "uint16" },
		{ "int64", "int64" }, { "int32", "int32" },
		{ "int16", "int16" }, { "int8", "int8" },
		{ "uint8", "uint8" }, { "bool", "bool" },
		{ "complex128", "complex128" }, { "complex64", "complex64" },
		{ "complex32", "complex32" }, { "qint8", "int8" },
		{ "qint32", "int32" }, { "quint8", "uint8" },
		{ "quint4x2", "uint8" }, { "uint16", "uint16" },
		{ "uint32", "uint32" }, { "uint64", "uint64" },
		{ "float8_e5m2", "uint8" }, { "float4_e2m1fn_x2", "uint8" },
		{ "bits16", "uint16" }, { "bits1x8", "uint8" },
		{ "int1", "uint8" }, { "uint7", "uint8" },
	};
	static const int ndims[] = { 0, 1, 2, 7, 63, CKPT_MAX_DIMS };
	int64_t shape[CKPT_MAX_DIMS];
	unsigned char buf[VIEW_NPY_HEADER_MAX];

	for (int i = 0; i < CKPT_MAX_DIMS; i++)
		shape[i] = i % 3 + 1;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		for (int big = 0; big < 2; big++)
			for (size_t k = 0; k < ARRAY_SIZE(ndims); k++) {
				const struct ckpt_dtype *dt =
					dtype(cases[i].name);
				int ndim = ndims[k];
				size_t len = view_npy_header(dt, big, ndim,
							     shape, buf);
				struct view_npy v;
				struct diag d;

				cr_assert_eq(len % 64, 0);
				cr_assert_eq(npy_parse(buf, len, &v, &d), 0,
					     "%s: %s", cases[i].name, d.msg);
				cr_assert_str_eq(v.dtype->name, cases[i].as);
				cr_assert_eq(v.big, big && dt->size > 1);
				cr_assert_eq(v.ndim, ndim);
				cr_assert_arr_eq(v.shape, shape,
						 ndim * sizeof(int64_t));
				cr_assert_eq(v.header_len, len);
			}
	/* the longest header there is fits, and is refused for its size */
	for (int i = 0; i < CKPT_MAX_DIMS; i++)
		shape[i] = INT64_MAX;
	{
		size_t len = view_npy_header(dtype("complex32"), true,
					     CKPT_MAX_DIMS, shape, buf);
		struct view_npy v;
		struct diag d;

		cr_assert_leq(len, VIEW_NPY_HEADER_MAX);
		cr_assert_eq(npy_parse(buf, len, &v, &d), -EINVAL);
		cr_assert_str_eq(d.msg, ".npy shape has too many elements");
	}
	assert_no_leaks();
}

/* A .npy prefix of version @major.0 around the dict text @dict. */
static size_t mk_npy(unsigned char *buf, int major, const char *dict)
{
	size_t n = strlen(dict), pre = major == 1 ? 10 : 12;

	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = (unsigned char)major;
	buf[7] = 0;
	if (major == 1)
		put_le16(buf + 8, (uint16_t)n);
	else
		put_le32(buf + 8, (uint32_t)n);
	memcpy(buf + pre, dict, n);
	return pre + n;
}

static struct view_npy npy_ok(int major, const char *dict)
{
	unsigned char buf[8192];
	size_t len = mk_npy(buf, major, dict);
	struct view_npy v;
	struct diag d;

	cr_assert_eq(npy_parse(buf, len, &v, &d), 0, "%s: %s", dict, d.msg);
	return v;
}

/*
 * @dict must fail with @msg at the last place where @at occurs in it
 * ("" for its end), as an offset in the .npy (10 + the index).
 */
static void npy_bad(const char *dict, const char *msg, const char *at)
{
	unsigned char buf[8192];
	size_t len = mk_npy(buf, 1, dict);
	uint64_t off = len;
	struct view_npy v;
	struct diag d;

	for (const char *p = dict; *at && (p = strstr(p, at)); p++)
		off = 10 + (uint64_t)(p - dict);
	cr_assert(!*at || off < len, "%s not in %s", at, dict);

	cr_assert_eq(npy_parse(buf, len, &v, &d), -EINVAL, "%s", dict);
	cr_assert_str_eq(d.msg, msg, "%s", dict);
	cr_assert_eq(d.off, off, "%s: offset %" PRIu64, dict, d.off);
}

Test(view_npy, parses_what_python_may_write)
{
	struct view_npy v;

	v = npy_ok(1, "{\"shape\": (2,3,), \"descr\":\"f4\",\n"
		   "\t\"fortran_order\" : True}");
	cr_assert_str_eq(v.dtype->name, "float32");
	cr_assert_str_eq(v.descr, "'<f4'");
	cr_assert(v.fortran_order);
	cr_assert_eq(v.ndim, 2);
	cr_assert_eq(v.shape[1], 3);
	cr_assert_eq(v.numel, 6);
	cr_assert_eq(v.nbytes, 24);
#define D2 "{'descr': '=i2', 'fortran_order': False, 'shape': ( 7 , ) , }\n"
	v = npy_ok(2, D2);
	cr_assert_str_eq(v.dtype->name, "int16");
	cr_assert_not(v.big);
	cr_assert_eq(v.header_len, 12 + strlen(D2));
	v = npy_ok(3, "{'descr':'>u8','fortran_order':False,'shape':()}");
	cr_assert_str_eq(v.dtype->name, "uint64");
	cr_assert(v.big);
	cr_assert_eq(v.ndim, 0);
	cr_assert_eq(v.numel, 1);
	cr_assert_str_eq(v.descr, "'>u8'");
	v = npy_ok(1, "{'descr': '>i1', 'fortran_order': False, "
		   "'shape': (0, 9223372036854775807)}");
	cr_assert_str_eq(v.dtype->name, "int8");
	cr_assert_not(v.big);
	cr_assert_eq(v.numel, 0);
	v = npy_ok(1, "{'descr': '|f8', 'fortran_order': False, "
		   "'shape': (1152921504606846975,)}");
	cr_assert_eq(v.nbytes, UINT64_C(1152921504606846975) * 8);
	v = npy_ok(1, "{'descr': [(\"re\", '>f2'), ('im', '>f2',),], "
		   "'fortran_order': False, 'shape': (2,)}");
	cr_assert_str_eq(v.dtype->name, "complex32");
	cr_assert(v.big);
	cr_assert_str_eq(v.descr, "[('re', '>f2'), ('im', '>f2')]");
	v = npy_ok(1, "{'descr': '<c8', 'fortran_order': False, "
		   "'shape': (3,)}");
	cr_assert_str_eq(v.dtype->name, "complex64");
	v = npy_ok(1, "{'descr': '|b1', 'fortran_order': False, "
		   "'shape': (3,)}");
	cr_assert_str_eq(v.dtype->name, "bool");
	assert_no_leaks();
}

#define NPY_D	"{'descr': '<f4', 'fortran_order': False, 'shape': "

Test(view_npy, rejects_bad_dicts_with_offsets)
{
	npy_bad("{'descr': 'O', 'fortran_order': False, 'shape': ()}",
		".npy descr 'O' has no torch dtype", "'O'");
	npy_bad("{'descr': '<U5', 'fortran_order': False, 'shape': ()}",
		".npy descr '<U5' has no torch dtype", "'<U5'");
	npy_bad("{'descr': '<M8[s]', 'fortran_order': False, 'shape': ()}",
		".npy descr '<M8[s]' has no torch dtype", "'<M8");
	npy_bad("{'descr': '|O', 'fortran_order': False, 'shape': ()}",
		".npy descr '|O' has no torch dtype", "'|O'");
	npy_bad("{'descr': '<f3', 'fortran_order': False, 'shape': ()}",
		".npy descr '<f3' has no torch dtype", "'<f3'");
	npy_bad("{'descr': '', 'fortran_order': False, 'shape': ()}",
		".npy descr '' has no torch dtype", "''");
	npy_bad("{'descr': '[<f2', 'fortran_order': False, 'shape': ()}",
		".npy descr '[<f2' has no torch dtype", "'[");
	npy_bad("{'descr': [('re', '<f2'), ('im', '<f4')], "
		"'fortran_order': False, 'shape': ()}",
		".npy header: structured descr other than complex32", "[");
	npy_bad("{'descr': [('im', '<f2'), ('re', '<f2')], "
		"'fortran_order': False, 'shape': ()}",
		".npy header: structured descr other than complex32", "[");
	npy_bad("{'descr': [('re', '<f2'), ('im', '>f2')], "
		"'fortran_order': False, 'shape': ()}",
		".npy header: structured descr other than complex32", "[");
	npy_bad("{'descr': [('re', '<f2'), ('im', '<f2'), ('x', '<f2')], "
		"'fortran_order': False, 'shape': ()}",
		".npy header: expected ']'", "('x'");
	npy_bad("{'descr': [[[[[[[[[[[[[[[[", ".npy header: expected '('",
		"[[[[[[[[[[[[[[[");
	npy_bad(NPY_D "(), 'shape': ()}",
		".npy header: duplicate key 'shape'", "'shape'");
	npy_bad(NPY_D "(), 'fortran_order': True}",
		".npy header: duplicate key 'fortran_order'",
		"'fortran_order'");
	npy_bad(NPY_D "(), 'x': 1}", ".npy header: unknown key 'x'", "'x'");
	npy_bad("{'descr': '<f4', 'shape': ()}",
		".npy header: no 'fortran_order'", "}");
	npy_bad("{}", ".npy header: no 'descr'", "}");
	npy_bad(NPY_D "(-1,)}",
		".npy header: negative dimension in the shape", "-");
	npy_bad(NPY_D "(9223372036854775808,)}",
		".npy header: dimension out of range", "9");
	npy_bad(NPY_D "(1, 99999999999999999999999999999,)}",
		".npy header: dimension out of range",
		"99999999999999999999999999999,");
	npy_bad(NPY_D "(4294967296, 4294967296)}",
		".npy shape has too many elements", "(");
	npy_bad(NPY_D "(2305843009213693952,)}",
		".npy shape has too many elements", "(");
	npy_bad(NPY_D "(5)}", ".npy header: shape is not a tuple", ")");
	npy_bad(NPY_D "5}", ".npy header: expected '('", "5");
	npy_bad(NPY_D "[5]}", ".npy header: expected '('", "[");
	npy_bad(NPY_D "(,)}", ".npy header: expected a dimension", ",");
	npy_bad(NPY_D "(1,,)}", ".npy header: expected a dimension", ",");
	npy_bad(NPY_D "(1 2)}",
		".npy header: expected ',' or ')' in the shape", "2");
	npy_bad(NPY_D "(05,)}", ".npy header: leading zero in a dimension",
		"0");
	npy_bad(NPY_D "(+5,)}", ".npy header: expected a dimension", "+");
	npy_bad(NPY_D "(5.0,)}",
		".npy header: expected ',' or ')' in the shape", ".");
	npy_bad(NPY_D "(5L,)}",
		".npy header: expected ',' or ')' in the shape", "L");
	npy_bad(NPY_D "((((((((((((((((()}",
		".npy header: expected a dimension", "((((((((((((((((");
	npy_bad("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}",
		".npy header: fortran_order is not True or False", "0");
	npy_bad("{'descr': '<f4', 'fortran_order': Truely, 'shape': ()}",
		".npy header: fortran_order is not True or False", "Tr");
	npy_bad("{'descr': '<f4', 'fortran_order': Tru",
		".npy header: fortran_order is not True or False", "Tr");
	npy_bad("{'descr': '<f4', 'fortran_order': False_",
		".npy header: fortran_order is not True or False", "Fa");
	npy_bad(NPY_D "()} x", ".npy header: bytes after the dict", "x");
	npy_bad(NPY_D "()", ".npy header: expected ',' or '}'", "");
	npy_bad(NPY_D "() 'x'}", ".npy header: expected ',' or '}'", "'x'");
	npy_bad("{'descr' '<f4'}", ".npy header: expected ':'", "'<f4'");
	npy_bad("{'descr': '<f4}", ".npy header: unterminated string",
		"'<f4}");
	npy_bad("{'descr': '<f\\x34'}",
		".npy header: unsupported character in a string", "\\");
	npy_bad("{'descr': '\xc3\xa9'}",
		".npy header: unsupported character in a string", "\xc3");
	npy_bad("{'descr': \"<f4'}", ".npy header: unterminated string",
		"\"");
	npy_bad("{'descr': b'<f4'}", ".npy header: expected a string", "b");
	/* Python would join the strings: we do not */
	npy_bad("{'descr' 'x': '<f4'}", ".npy header: expected ':'", "'x'");
	npy_bad("{'desc' 'r': '<f4'}", ".npy header: unknown key 'desc'",
		"'desc'");
	npy_bad("['descr', '<f4']", ".npy header: expected '{'", "[");
	npy_bad("", ".npy header: expected '{'", "");
	npy_bad("{'descr': '0123456789012345678901234567890123456789"
		"01234567890123456789012345'}", ".npy header: string too long",
		"'0");
	assert_no_leaks();
}

Test(view_npy, rejects_more_than_64_dimensions)
{
	char dict[512] = NPY_D "(";
	struct view_npy v;

	for (int i = 0; i < 64; i++)
		strcat(dict, "1, ");
	strcat(dict, ")}");
	v = npy_ok(1, dict);
	cr_assert_eq(v.ndim, 64);
	dict[strlen(dict) - 2] = 0;
	strcat(dict, "1)}");
	npy_bad(dict, ".npy header: shape has more than 64 dimensions",
		"1)");
	assert_no_leaks();
}

Test(view_npy, rejects_bad_prefixes)
{
	const char *good = numpy_headers[0].bytes;
	unsigned char buf[256];
	struct view_npy v;
	struct diag d;

	/* every truncation of two headers numpy wrote */
	for (size_t h = 0; h < ARRAY_SIZE(numpy_headers); h += 10)
		for (size_t len = 0; len < numpy_headers[h].len; len++)
			cr_assert_eq(npy_parse(numpy_headers[h].bytes, len, &v,
					       &d), -EINVAL, "%zu", len);
	/* bad magic: each of its bytes */
	for (int i = 0; i < 6; i++) {
		memcpy(buf, good, 128);
		buf[i] ^= 0x20;
		cr_assert_eq(npy_parse(buf, 128, &v, &d), -EINVAL);
		cr_assert_str_eq(d.msg, "not a .npy file (bad magic)");
		cr_assert_eq(d.off, 0);
	}
	/* versions: 1.0, 2.0 and 3.0 only */
	{
		static const unsigned char vers[][2] = {
			{ 0, 0 }, { 4, 0 }, { 1, 1 }, { 2, 1 }, { 255, 0 },
		};

		for (size_t i = 0; i < ARRAY_SIZE(vers); i++) {
			char want[64];

			memcpy(buf, good, 128);
			buf[6] = vers[i][0];
			buf[7] = vers[i][1];
			snprintf(want, sizeof(want), "unsupported .npy version "
				 "%u.%u", vers[i][0], vers[i][1]);
			cr_assert_eq(npy_parse(buf, 128, &v, &d), -EINVAL);
			cr_assert_str_eq(d.msg, want);
			cr_assert_eq(d.off, 6);
		}
	}
	/* lying lengths: past the buffer, past the limits, cutting the dict */
	memcpy(buf, good, 128);
	put_le16(buf + 8, 119);
	cr_assert_eq(npy_parse(buf, 128, &v, &d), -EINVAL);
	cr_assert_str_eq(d.msg, ".npy header of 119 bytes runs past the 118 "
			 "available");
	cr_assert_eq(d.off, 8);
	put_le16(buf + 8, 0xffff);
	cr_assert_eq(npy_parse(buf, 128, &v, &d), -EINVAL);
	cr_assert_str_eq(d.msg, ".npy header of 65535 bytes is over the limit "
			 "of 4086");
	for (unsigned n = 0; n < 118; n++) {
		put_le16(buf + 8, (uint16_t)n);
		cr_assert_eq(npy_parse(buf, 128, &v, &d),
			     n >= 59 ? 0 : -EINVAL, "%u", n);
	}
	buf[6] = 2;
	put_le32(buf + 8, 0xffffffff);
	cr_assert_eq(npy_parse(buf, 128, &v, &d), -EINVAL);
	cr_assert_str_eq(d.msg, ".npy header of 4294967295 bytes is over the "
			 "limit of 1048576");
	put_le32(buf + 8, 1u << 20);
	cr_assert_eq(npy_parse(buf, 128, &v, &d), -EINVAL);
	cr_assert_str_eq(d.msg, ".npy header of 1048576 bytes runs past the "
			 "116 available");
	cr_assert_eq(npy_parse(buf, 11, &v, &d), -EINVAL);
	cr_assert_str_eq(d.msg, "truncated .npy header");
	cr_assert_eq(d.off, 11);
	cr_assert_eq(npy_parse(buf, 7, &v, &d), -EINVAL);
	cr_assert_str_eq(d.msg, "truncated .npy header");
	cr_assert_eq(d.off, 7);
	cr_assert_eq(npy_parse(buf, 0, &v, &d), -EINVAL);
	cr_assert_str_eq(d.msg, "truncated .npy header");
	cr_assert_eq(npy_parse("\x93NUMPZ", 6, &v, &d), -EINVAL);
	cr_assert_str_eq(d.msg, "not a .npy file (bad magic)");
	cr_assert_eq(npy_parse("PK", 2, &v, &d), -EINVAL);
	cr_assert_str_eq(d.msg, "not a .npy file (bad magic)");
	assert_no_leaks();
}

/* Byte flips and splices of numpy's headers: 0 or -EINVAL, no crash. */
Test(view_npy, survives_random_damage)
{
	uint64_t s = 3;
	unsigned char buf[512];
	struct view_npy v;
	struct diag d;
	static const char junk[] = "{}[](),:'\" \n\\TrueFalse0123456789-<>|=";

	for (int i = 0; i < 40000; i++) {
		size_t h = rnd(&s) % ARRAY_SIZE(numpy_headers);
		size_t len = numpy_headers[h].len;
		int flips = 1 + (int)(rnd(&s) % 4);

		memcpy(buf, numpy_headers[h].bytes, len);
		for (int f = 0; f < flips; f++) {
			size_t at = 10 + rnd(&s) % (len - 10);
			uint64_t r = rnd(&s);

			buf[at] = r & 1 ? (unsigned char)(r >> 8)
				: (unsigned char)junk[(r >> 8) %
						      (sizeof(junk) - 1)];
		}
		npy_parse(buf, len - rnd(&s) % 2 * (rnd(&s) % len), &v, &d);
	}
	assert_no_leaks();
}
