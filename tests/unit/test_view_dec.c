/*
 * test_view_dec.c - core/view/view_dec.c, the text view's printer: its
 * bytes are those snprintf printed before it (text_ref.h) for every
 * float16 and bfloat16 pattern, millions of float32 and float64 patterns
 * (random bits, the neighbours of every power of ten, short decimals,
 * weights-like values) and random elements of every dtype in both byte
 * orders; and view_text_measure() counts exactly those bytes, for any run
 * of elements, without printing them.
 */
#include "test_util.h"

#include "text_ref.h"
#include "util/le.h"
#include "view/view.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char *const every_dtype[] = {
	"float64", "float32", "float16", "bfloat16", "int64", "int32",
	"int16", "int8", "uint8", "bool", "complex128", "complex64", "qint8",
	"qint32", "quint8", "quint4x2", "quint2x4", "complex32", "uint16",
	"uint32", "uint64", "float8_e5m2", "float8_e4m3fn",
	"float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu",
	"float4_e2m1fn_x2", "bits8", "bits1x8", "bits2x4", "bits4x2",
	"bits16", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6",
	"uint7", "int1", "int2", "int3", "int4", "int5", "int6", "int7",
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(0x2545F4914F6CDD1D);
}

static const struct ckpt_dtype *dtype(const char *name)
{
	const struct ckpt_dtype *dt = ckpt_dtype_by_name(name);

	cr_assert_not_null(dt, "no dtype %s", name);
	return dt;
}

/* The first element where the printer and the reference differ. */
static void show_first_difference(const struct ckpt_dtype *dt, bool big,
				  const unsigned char *data, uint64_t n)
{
	char a[VIEW_TEXT_ELEM_MAX + 1], b[VIEW_TEXT_ELEM_MAX + 1];

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *p = data + i * dt->size;
		size_t la = view_text_format(dt, big, 0, NULL, 0, p, 1, a);
		size_t lb = ref_elem(dt, big, p, b);

		b[lb++] = '\n';
		if (la != lb || memcmp(a, b, la)) {
			a[la - 1] = b[lb - 1] = 0;
			cr_assert_fail("%s%s: element %" PRIu64 " (bits %016"
				       PRIx64 "): '%s', printf gives '%s'",
				       dt->name, big ? " (big)" : "", i,
				       ord_load(p, dt->size < 8 ? dt->size : 8,
						big), a, b);
		}
	}
}

/*
 * @n elements at @data, in rows of 7 starting at column @first % 7:
 * printed as the reference prints them, and measured to the byte, whole
 * and in random runs.
 */
static void assert_like_printf(const struct ckpt_dtype *dt, bool big,
			       const unsigned char *data, uint64_t n,
			       uint64_t first)
{
	int64_t shape[2] = { (int64_t)(n / 7 + 2), 7 };
	char *got = malloc(n * VIEW_TEXT_ELEM_MAX + 1);
	char *want = malloc(n * VIEW_TEXT_ELEM_MAX + 1);
	uint64_t s = n * 31 + first + 1;
	size_t g, w;

	cr_assert(got && want);
	g = view_text_format(dt, big, 2, shape, first, data, n, got);
	w = ref_text(dt, big, 2, shape, first, data, n, want);
	if (g != w || memcmp(got, want, w))
		show_first_difference(dt, big, data, n);
	cr_assert_eq(g, w);
	cr_assert_eq(memcmp(got, want, w), 0);
	cr_assert_eq(view_text_measure(dt, big, data, n), w, "%s: measured "
		     "%" PRIu64 " bytes, printed %zu", dt->name,
		     view_text_measure(dt, big, data, n), w);
	for (int i = 0; i < 50 && n; i++) {
		uint64_t a = rnd(&s) % n, k = rnd(&s) % (n - a + 1) % 4096;

		cr_assert_eq(view_text_measure(dt, big, data + a * dt->size, k),
			     ref_text(dt, big, 2, shape, first + a,
				      data + a * dt->size, k, want));
	}
	free(got);
	free(want);
}

/* Little-endian words of @size bytes from @v into @buf, and both orders
 * checked (the big-endian copy holds the same values). */
static void check_words(const char *name, const uint64_t *v, uint64_t n)
{
	const struct ckpt_dtype *dt = dtype(name);
	unsigned size = dt->size;
	unsigned char *le = malloc(n * size), *be = malloc(n * size);

	cr_assert(le && be);
	for (uint64_t i = 0; i < n; i++) {
		ord_store(le + i * size, size, false, v[i]);
		ord_store(be + i * size, size, true, v[i]);
	}
	assert_like_printf(dt, false, le, n, 0);
	assert_like_printf(dt, true, be, n, 3);
	free(le);
	free(be);
}

Test(view_dec, every_float16_and_bfloat16_as_printf)
{
	uint64_t *v = malloc(65536 * sizeof(*v));

	cr_assert_not_null(v);
	for (uint64_t i = 0; i < 65536; i++)
		v[i] = i;
	check_words("float16", v, 65536);
	check_words("bfloat16", v, 65536);
	free(v);
	assert_no_leaks();
}

static uint32_t fbits(float f)
{
	return f32_bits(f);
}

Test(view_dec, float32_as_printf)
{
	enum { N = 1 << 21 };
	uint64_t *v = malloc(N * sizeof(*v)), s = 7, n = 0;

	cr_assert_not_null(v);
	/* around every power of ten a float32 reaches, 1e-45 .. 1e38 */
	for (int e = -45; e <= 38; e++) {
		uint32_t b = fbits((float)pow(10, e));

		for (int d = -40; d <= 40; d++)
			if (b + d < 0x7f800000u)
				v[n++] = (uint32_t)(b + d);
	}
	/* short decimals, integers, binary fractions */
	for (int k = 0; k < 200000; k++) {
		v[n++] = fbits((float)k / 1000);
		v[n++] = fbits((float)k * 1000);
		v[n++] = fbits((float)k / 1024);
	}
	for (int k = 0; k < 100000; k++)
		v[n++] = fbits((float)k / 3) | (k & 1 ? 0x80000000u : 0);
	/* weights: N(0, 0.02)-like, by Box-Muller */
	for (int k = 0; k < 300000; k++) {
		double u1 = (rnd(&s) >> 11) * 0x1p-53 + 0x1p-60;
		double u2 = (rnd(&s) >> 11) * 0x1p-53;

		v[n++] = fbits((float)(0.02 * sqrt(-2 * log(u1)) *
				       cos(6.283185307179586 * u2)));
	}
	while (n < N)
		v[n++] = (uint32_t)rnd(&s);
	check_words("float32", v, n);
	free(v);
	assert_no_leaks();
}

Test(view_dec, float64_as_printf)
{
	enum { N = 1 << 20 };
	uint64_t *v = malloc(N * sizeof(*v)), s = 11, n = 0;

	cr_assert_not_null(v);
	for (int e = -320; e <= 308; e++) {
		uint64_t b;
		char lit[16];

		snprintf(lit, sizeof(lit), "1e%d", e);
		b = f64_bits(strtod(lit, NULL));
		for (int d = -30; d <= 30; d++)
			if (b + d < UINT64_C(0x7ff0000000000000))
				v[n++] = b + d;
	}
	for (int k = 0; k < 150000; k++) {
		v[n++] = f64_bits((double)k / 1000);
		v[n++] = f64_bits((double)k * 1e-7);
		v[n++] = f64_bits((double)k / 3) | (uint64_t)(k & 1) << 63;
		v[n++] = f64_bits((double)(UINT64_C(1) << 53) - k);
	}
	while (n < N)
		v[n++] = rnd(&s);
	check_words("float64", v, n);
	free(v);
	assert_no_leaks();
}

/* Random bytes of every dtype; complex parts and ints at their limits
 * come up often enough with 20000 elements of random bits. */
Test(view_dec, every_dtype_as_before)
{
	enum { N = 20000 };
	unsigned char *data = malloc(N * 16);
	uint64_t s = 3;

	cr_assert_not_null(data);
	for (size_t i = 0; i < ARRAY_SIZE(every_dtype); i++) {
		const struct ckpt_dtype *dt = dtype(every_dtype[i]);

		for (size_t b = 0; b < N * 16; b++)
			data[b] = (unsigned char)rnd(&s);
		/* some all-ones and all-zeros elements: -1, 0, -0, NaNs */
		memset(data, 0xff, 3 * dt->size);
		memset(data + 3 * dt->size, 0, 3 * dt->size);
		data[4 * dt->size + dt->size - 1] = 0x80;
		assert_like_printf(dt, false, data, N, i);
		assert_like_printf(dt, true, data, N, i + 1);
	}
	free(data);
	assert_no_leaks();
}

Test(view_dec, measures_empty_runs_and_bool)
{
	unsigned char b[4] = { 0, 1, 2, 255 };

	cr_assert_eq(view_text_measure(dtype("float32"), false, b, 0), 0);
	cr_assert_eq(view_text_measure(dtype("bool"), false, b, 4), 8);
	assert_like_printf(dtype("bool"), false, b, 4, 0);
	assert_no_leaks();
}
