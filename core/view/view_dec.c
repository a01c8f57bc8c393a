/*
 * view_dec.c - one element as the text view prints it (view.h: "%.9g"
 * for float32 and so on, ints in decimal), and the length of that text
 * without printing it.  A text view's size is the sum of these lengths
 * over every element and is asked before any read (stat, open), so it
 * must be cheap: a float's %g digits come from one multiply by an exact
 * power of ten in double (long double for float64) and an integer
 * rounding.  Where that cannot decide (within rounding error of halfway
 * between two decimals, or past the exact powers of ten) glibc's snprintf,
 * which rounds the exact binary value, decides.  Either way the bytes are
 * what "%.*g" prints (C11 7.21.6.1, the %g and %e conversions).  float32
 * lengths, the common big view, are measured 8 at a time with AVX2 where
 * the CPU has it (PT_VIEW_NO_SIMD=1 turns that off), each lane the scalar
 * code cannot vouch for done again by it.
 */
#include "view/view_int.h"
#include "util/le.h"

#include <float.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct ffmt view_f16 = { 2, 10, 5, 5 };
const struct ffmt view_bf16 = { 2, 7, 8, 4 };
const struct ffmt view_f32 = { 4, 23, 8, 9 };
const struct ffmt view_f64 = { 8, 52, 11, 17 };

const struct ffmt *view_ffmt_of(const struct ckpt_dtype *dt)
{
	unsigned size = dt->size;

	if (view_kind_of(dt) == VIEW_COMPLEX)
		size /= 2;	/* complex32's parts are float16 */
	else if (!strcmp(dt->name, "bfloat16"))
		return &view_bf16;
	return size == 2 ? &view_f16 : size == 4 ? &view_f32 : &view_f64;
}

double view_ffmt_value(const struct ffmt *f, uint64_t bits)
{
	if (f == &view_f16)
		return view_f16_to_f32((uint16_t)bits);
	if (f == &view_bf16)
		return view_bf16_to_f32((uint16_t)bits);
	if (f == &view_f32)
		return f32_of((uint32_t)bits);
	return f64_of(bits);
}

static const uint64_t u10[20] = {
	UINT64_C(1), UINT64_C(10), UINT64_C(100), UINT64_C(1000),
	UINT64_C(10000), UINT64_C(100000), UINT64_C(1000000),
	UINT64_C(10000000), UINT64_C(100000000), UINT64_C(1000000000),
	UINT64_C(10000000000), UINT64_C(100000000000),
	UINT64_C(1000000000000), UINT64_C(10000000000000),
	UINT64_C(100000000000000), UINT64_C(1000000000000000),
	UINT64_C(10000000000000000), UINT64_C(100000000000000000),
	UINT64_C(1000000000000000000), UINT64_C(10000000000000000000),
};

/* 10^0 .. 10^22: the powers of ten a double holds exactly */
static const double p10[23] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
	1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

#if LDBL_MANT_DIG >= 64
/* 10^0 .. 10^27: exact in a 64-bit significand (5^27 < 2^64) */
static const long double p10l[28] = {
	1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L, 1e10L,
	1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
	1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L,
};
#endif

/* A decimal as %g prints it: the digits @dig (@nd of them, the last not
 * 0) of d.ddd x 10^@x. */
struct dec {
	uint64_t dig;
	int nd, x;
};

/* floor(log10(2^@e)): log10(2) * e is never within 1e-6 of an integer
 * for 0 < |e| < 1100, far more than a double's error here */
static int floor_log10_pow2(int e)
{
	double t = e * 0.30102999566398120;
	int i = (int)t;

	return t < i ? i - 1 : i;
}

/*
 * @s: |value| x 10^(prec - 1 - @e), computed with one rounding of at most
 * @err; into @o the digits %.{prec}g prints.  false when @s lies too near
 * halfway between two integers for that rounding to tell which.
 */
static bool dec_round(uint64_t n, double fr, double err, int prec, int e,
		      struct dec *o)
{
	if (fr > 0.5 - err && fr < 0.5 + err)
		return false;
	n += fr > 0.5;
	if (n >= u10[prec]) {	/* 9.9999999996 -> 10: one more digit up */
		n /= 10;
		e++;
	}
	if (n < u10[prec - 1])
		return false;	/* cannot be (e is at most floor(log10)) */
	o->nd = prec;
	for (; n % 10 == 0; n /= 10)
		o->nd--;
	o->dig = n;
	o->x = e;
	return true;
}

/* The decimal of finite @x > 0 at @prec <= 9 digits (float16, bfloat16,
 * float32: @x exact). */
static bool dec_dbl(double x, int prec, struct dec *o)
{
	int e = floor_log10_pow2((int)((f64_bits(x) >> 52) & 0x7ff) - 1023);
	double s = 0, hi = (double)u10[prec];

	/* e is floor(log10 x) or one less: then s >= 10^prec, once */
	for (int pass = 0; pass < 2; pass++, e++) {
		int k = prec - 1 - e;

		if (k > 22 || k < -22)
			return false;
		s = k >= 0 ? x * p10[k] : x / p10[-k];
		if (s < hi)
			break;
	}
	/* s < 2^30: off by at most 2^-23 from the exact product */
	return dec_round((uint64_t)s, s - (double)(uint64_t)s, 1e-6, prec, e,
			 o);
}

/* The decimal of finite @x > 0 at 17 digits (float64). */
static bool dec_f64(double x, struct dec *o)
{
#if LDBL_MANT_DIG >= 64
	int e = floor_log10_pow2((int)((f64_bits(x) >> 52) & 0x7ff) - 1023);
	long double s = 0, hi = 1e17L;

	for (int pass = 0; pass < 2; pass++, e++) {
		int k = 16 - e;

		if (k > 27 || k < -27)
			return false;
		s = k >= 0 ? (long double)x * p10l[k]
			   : (long double)x / p10l[-k];
		if (s < hi)
			break;
	}
	/* s < 2^57 in a 64-bit significand: off by at most 2^-8 */
	return dec_round((uint64_t)s, (double)(s - (long double)(uint64_t)s),
			 1e-2, 17, e, o);
#else
	(void)x;
	(void)o;
	return false;	/* NEEDSWORK: no wide type: printf decides */
#endif
}

static bool dec_of(const struct ffmt *f, uint64_t mag, struct dec *o)
{
	double x = view_ffmt_value(f, mag);

	return f == &view_f64 ? dec_f64(x, o) : dec_dbl(x, f->prec, o);
}

/* The length of @d as %.{prec}g lays it out: %e style when its exponent
 * is below -4 or at least the precision, else %f style; trailing zeros
 * and a bare point dropped. */
static size_t dec_len(const struct dec *d, int prec)
{
	int x = d->x, nd = d->nd;

	if (x < -4 || x >= prec)
		return (size_t)(nd > 1 ? nd + 1 : 1) + 2 +
		       (x >= 100 || x <= -100 ? 3 : 2);
	if (x >= 0)
		return (size_t)(nd > x + 1 ? nd + 1 : x + 1);
	return (size_t)(nd + 1 - x);	/* "0." then -x - 1 zeros */
}

static size_t dec_put(const struct dec *d, int prec, char *out)
{
	int nd = d->nd, x = d->x, ax = x < 0 ? -x : x;
	uint64_t n = d->dig;
	char dig[20] = "", *o = out;

	for (int i = nd; i-- > 0; n /= 10)
		dig[i] = (char)('0' + n % 10);
	if (x < -4 || x >= prec) {
		*o++ = dig[0];
		if (nd > 1) {
			*o++ = '.';
			memcpy(o, dig + 1, (size_t)nd - 1);
			o += nd - 1;
		}
		*o++ = 'e';
		*o++ = x < 0 ? '-' : '+';
		if (ax >= 100)
			*o++ = (char)('0' + ax / 100);
		*o++ = (char)('0' + ax / 10 % 10);
		*o++ = (char)('0' + ax % 10);
	} else if (x >= 0) {
		for (int i = 0; i <= x; i++)
			*o++ = i < nd ? dig[i] : '0';
		if (nd > x + 1) {
			*o++ = '.';
			memcpy(o, dig + x + 1, (size_t)(nd - x - 1));
			o += nd - x - 1;
		}
	} else {
		*o++ = '0';
		*o++ = '.';
		for (int i = -1; i > x; i--)
			*o++ = '0';
		memcpy(o, dig, (size_t)nd);
		o += nd;
	}
	return (size_t)(o - out);
}

static size_t put_str(char *out, const char *s)
{
	size_t n = strlen(s);

	memcpy(out, s, n);
	return n;
}

/* One float into @out (32 bytes); its length. */
static size_t float_put(const struct ffmt *f, uint64_t bits, char *out)
{
	uint64_t neg = bits & ffmt_sign(f), mag = bits & ~neg;
	struct dec d;

	if ((bits & ffmt_exp(f)) == ffmt_exp(f)) {
		if (!(bits & ffmt_frac(f)))
			return put_str(out, neg ? "-inf" : "inf");
		if (mag == ffmt_qnan(f))
			return put_str(out, neg ? "-nan" : "nan");
		return (size_t)snprintf(out, 32, "nan(0x%" PRIx64 ")", bits);
	}
	if (neg)
		out[0] = '-';
	if (!mag) {
		out[!!neg] = '0';
		return 1 + !!neg;
	}
	if (dec_of(f, mag, &d))
		return !!neg + dec_put(&d, f->prec, out + !!neg);
	return (size_t)snprintf(out, 32, "%.*g", f->prec,
				view_ffmt_value(f, bits));
}

/* The length float_put() gives; *@minus: the text starts with '-'. */
static size_t float_len(const struct ffmt *f, uint64_t bits, bool *minus)
{
	uint64_t neg = bits & ffmt_sign(f), mag = bits & ~neg;
	struct dec d;
	size_t n;

	*minus = neg;
	if ((bits & ffmt_exp(f)) == ffmt_exp(f)) {
		if (!(bits & ffmt_frac(f)) || mag == ffmt_qnan(f))
			return 3 + !!neg;
		*minus = false;	/* "nan(0x...)": the sign is in the bits */
		for (n = 0; bits; bits >>= 4)
			n++;
		return 7 + n;
	}
	if (!mag)
		return 1 + !!neg;
	if (dec_of(f, mag, &d))
		return !!neg + dec_len(&d, f->prec);
	{
		char buf[32];

		return float_put(f, bits, buf);
	}
}

static size_t u64_len(uint64_t v)
{
	size_t n = 1;

	while (n < 20 && v >= u10[n])
		n++;
	return n;
}

static size_t u64_put(uint64_t v, char *out)
{
	size_t n = u64_len(v);

	for (size_t i = n; i-- > 0; v /= 10)
		out[i] = (char)('0' + v % 10);
	return n;
}

/* An INT element: its magnitude, *@neg its sign. */
static uint64_t int_mag(const struct view_dec *c, const unsigned char *p,
			bool *neg)
{
	unsigned size = c->dt->size;
	uint64_t v = ord_load(p, size, c->big);

	*neg = v >> (8 * size - 1);
	return *neg ? (~v + 1) & (size < 8 ? (UINT64_C(1) << (8 * size)) - 1
				  : ~UINT64_C(0)) : v;
}

void view_dec_init(struct view_dec *c, const struct ckpt_dtype *dt,
		   bool big)
{
	c->dt = dt;
	c->kind = view_kind_of(dt);
	c->f = c->kind == VIEW_FLOAT || c->kind == VIEW_COMPLEX ?
	       view_ffmt_of(dt) : NULL;
	c->big = big;
}

size_t view_dec_put(const struct view_dec *c, const unsigned char *p,
		    char *out)
{
	unsigned size = c->dt->size;
	char im[32];
	size_t n, m;
	bool neg;

	switch (c->kind) {
	case VIEW_FLOAT:
		return float_put(c->f, ord_load(p, size, c->big), out);
	case VIEW_COMPLEX:
		n = float_put(c->f, ord_load(p, c->f->size, c->big), out);
		m = float_put(c->f, ord_load(p + c->f->size, c->f->size,
					     c->big), im);
		if (im[0] != '-')
			out[n++] = '+';
		memcpy(out + n, im, m);
		out[n + m] = 'j';
		return n + m + 1;
	case VIEW_INT:
		n = int_mag(c, p, &neg);
		if (neg)
			out[0] = '-';
		return !!neg + u64_put(n, out + !!neg);
	case VIEW_BOOL:
		out[0] = p[0] ? '1' : '0';
		return 1;
	case VIEW_UINT:
		return u64_put(ord_load(p, size, c->big), out);
	default:
		/* RAW: the bytes as stored, whatever the checkpoint's order */
		return u64_put(ord_load(p, size, false), out);
	}
}

size_t view_dec_len(const struct view_dec *c, const unsigned char *p)
{
	unsigned size = c->dt->size;
	size_t n;
	bool neg;

	switch (c->kind) {
	case VIEW_FLOAT:
		return float_len(c->f, ord_load(p, size, c->big), &neg);
	case VIEW_COMPLEX:
		n = float_len(c->f, ord_load(p, c->f->size, c->big), &neg);
		n += float_len(c->f, ord_load(p + c->f->size, c->f->size,
					      c->big), &neg);
		return n + !neg + 1;
	case VIEW_INT:
		n = u64_len(int_mag(c, p, &neg));
		return n + !!neg;
	case VIEW_BOOL:
		return 1;
	case VIEW_UINT:
		return u64_len(ord_load(p, size, c->big));
	default:
		return u64_len(ord_load(p, size, false));
	}
}

/* ---- runs of elements: the size pass's loops ---- */

/* The length of every float16 and of every bfloat16 pattern's text
 * (128 KiB), and per float32 exponent the scalings f32_run() uses, made
 * on first use. */
static unsigned char len16[2][65536];
/* per float32 exponent field: 10^(8 - e) and 10^(7 - e) (0: no fast
 * path), and e = floor(log10(2^(exponent - 127))); apart, for gathers */
static double f32hi[256], f32lo[256];
static int32_t f32e[256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_make(void)
{
	bool minus;

	for (uint32_t b = 0; b < 65536; b++) {
		len16[0][b] = (unsigned char)float_len(&view_f16, b, &minus);
		len16[1][b] = (unsigned char)float_len(&view_bf16, b, &minus);
	}
	/* exponents 0 and 255 (zero, subnormals, inf, NaN) stay slow */
	for (int x = 1; x < 255; x++) {
		int e = floor_log10_pow2(x - 127), k = 8 - e;

		f32e[x] = e;
		if (k >= 1 && k <= 22) {
			f32hi[x] = p10[k];
			f32lo[x] = p10[k - 1];
		}
	}
}

/*
 * The length of float32 @b: dec_dbl() and dec_len() unrolled for the
 * common case, a normal number between 1e-14 and 1e8 (10^k and 10^(k-1)
 * both exact doubles); everything else through float_len().
 */
static inline unsigned f32_len1(uint32_t b)
{
	uint32_t mag = b & 0x7fffffff, x = mag >> 23;
	double s = (double)f32_of(mag) * f32hi[x], fr;
	int e = f32e[x], nd;
	int32_t d;
	bool minus;

	if (!f32hi[x])
		goto slow;
	if (s >= 1e9) {
		s = (double)f32_of(mag) * f32lo[x];
		e++;
	}
	d = (int32_t)s;
	fr = s - (double)d;
	if (fr > 0.5 - 1e-6 && fr < 0.5 + 1e-6)
		goto slow;
	d += fr > 0.5;
	if (d >= 1000000000) {
		d /= 10;
		e++;
	}
	if (d < 100000000)
		goto slow;
	for (nd = 9; d % 10 == 0; d /= 10)
		nd--;
	return (b >> 31) + (e < -4 || e >= 9 ?
		(unsigned)(nd > 1 ? nd + 1 : 1) + 4 :
		e >= 0 ? (unsigned)(nd > e + 1 ? nd + 1 : e + 1) :
		(unsigned)(nd + 1 - e));
slow:
	return (unsigned)float_len(&view_f32, b, &minus);
}

static uint64_t f32_run(const unsigned char *p, uint64_t n, bool big)
{
	uint64_t len = 0;

	for (uint64_t i = 0; i < n; i++, p += 4)
		len += f32_len1(big ? (uint32_t)ord_load(p, 4, true) : le32(p));
	return len;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/*
 * f32_run() for little-endian data, 8 elements at a time (AVX2): the same
 * arithmetic in 4-lane doubles, for the lanes where it gives 9 digits
 * without a trailing zero (nine in ten of random data); a lane that is
 * near halfway, has a trailing zero, or lies outside the fast range is
 * done again by f32_len1().  The tests compare both with printf.
 */
/* d / 10 of each lane below 2^31: (d * 0xcccccccd) >> 35, in 64 bits
 * (lanes 0 and 2, then 1 and 3) */
__attribute__((target("avx2")))
static inline __m128i div10(__m128i d)
{
	const __m128i m = _mm_set1_epi32((int)0xcccccccd);
	__m128i q02 = _mm_srli_epi64(_mm_mul_epu32(d, m), 35);
	__m128i q13 = _mm_srli_epi64(_mm_mul_epu32(_mm_srli_epi64(d, 32), m),
				     35);

	return _mm_blend_epi16(q02, _mm_slli_epi64(q13, 32), 0xcc);
}

__attribute__((target("avx2")))
static void f32_half(__m128i bits, __m128i *len, int *redo)
{
	const __m256d one = _mm256_set1_pd(1.0);
	__m128i mag = _mm_and_si128(bits, _mm_set1_epi32(0x7fffffff));
	__m128i x = _mm_srli_epi32(mag, 23);
	__m256d v = _mm256_cvtps_pd(_mm_castsi128_ps(mag));
	__m256d hi = _mm256_i32gather_pd(f32hi, x, 8);
	/* e = floor(log10(2^(x - 127))), as floor_log10_pow2() */
	__m128i e = _mm256_cvtpd_epi32(_mm256_floor_pd(_mm256_mul_pd(
		_mm256_cvtepi32_pd(_mm_sub_epi32(x, _mm_set1_epi32(127))),
		_mm256_set1_pd(0.30102999566398120))));
	__m256d s = _mm256_mul_pd(v, hi), fr, t;
	__m256d up = _mm256_cmp_pd(s, _mm256_set1_pd(1e9), _CMP_GE_OQ);
	__m128i d, bad, q, nd, tz, l, lpos, lneg;

	/* s / 10 as s * 0.1: off by less than 2^-22 more, inside the 1e-6
	   window that sends a lane near halfway to f32_len1() */
	s = _mm256_blendv_pd(s, _mm256_mul_pd(s, _mm256_set1_pd(0.1)), up);
	/* a 64-bit lane mask as an int32 1: and with 1.0, convert */
	e = _mm_add_epi32(e, _mm256_cvtpd_epi32(_mm256_and_pd(up, one)));
	d = _mm256_cvttpd_epi32(s);
	fr = _mm256_sub_pd(s, _mm256_cvtepi32_pd(d));
	t = _mm256_and_pd(_mm256_cmp_pd(fr, _mm256_set1_pd(0.5 - 1e-6),
					_CMP_GT_OQ),
			  _mm256_cmp_pd(fr, _mm256_set1_pd(0.5 + 1e-6),
					_CMP_LT_OQ));
	t = _mm256_or_pd(t, _mm256_cmp_pd(hi, _mm256_setzero_pd(),
					  _CMP_EQ_OQ));
	bad = _mm_sub_epi32(_mm_setzero_si128(), _mm256_cvtpd_epi32(
		_mm256_and_pd(t, one)));	/* 0 or -1 */
	d = _mm_add_epi32(d, _mm256_cvtpd_epi32(_mm256_and_pd(
		_mm256_cmp_pd(fr, _mm256_set1_pd(0.5), _CMP_GT_OQ), one)));
	bad = _mm_or_si128(bad, _mm_cmpgt_epi32(d, _mm_set1_epi32(999999999)));
	bad = _mm_or_si128(bad, _mm_cmplt_epi32(d, _mm_set1_epi32(100000000)));
	/* one trailing zero: 8 digits; two or more: f32_len1() */
	q = div10(d);
	tz = _mm_cmpeq_epi32(d, _mm_mullo_epi32(q, _mm_set1_epi32(10)));
	nd = _mm_add_epi32(_mm_set1_epi32(9), tz);
	bad = _mm_or_si128(bad, _mm_and_si128(tz, _mm_cmpeq_epi32(q,
		_mm_mullo_epi32(div10(q), _mm_set1_epi32(10)))));
	/* dec_len() for nd of 8 or 9: %e style nd + 5 ("d.ddddddde-05");
	   e >= 0: nd > e + 1 ? nd + 1 : e + 1; e < 0: nd + 1 - e */
	lpos = _mm_blendv_epi8(_mm_add_epi32(e, _mm_set1_epi32(1)),
			       _mm_add_epi32(nd, _mm_set1_epi32(1)),
			       _mm_cmpgt_epi32(nd, _mm_add_epi32(e,
						_mm_set1_epi32(1))));
	lneg = _mm_sub_epi32(_mm_add_epi32(nd, _mm_set1_epi32(1)), e);
	l = _mm_blendv_epi8(lneg, lpos, _mm_cmpgt_epi32(e,
						_mm_set1_epi32(-1)));
	l = _mm_blendv_epi8(l, _mm_add_epi32(nd, _mm_set1_epi32(5)),
			    _mm_or_si128(_mm_cmplt_epi32(e, _mm_set1_epi32(-4)),
					 _mm_cmpgt_epi32(e, _mm_set1_epi32(8))));
	l = _mm_add_epi32(l, _mm_srli_epi32(bits, 31));
	l = _mm_andnot_si128(bad, l);
	*len = _mm_add_epi32(*len, l);
	*redo = _mm_movemask_ps(_mm_castsi128_ps(bad));
}

__attribute__((target("avx2")))
static uint64_t f32_run_avx2(const unsigned char *p, uint64_t n)
{
	uint64_t len = 0, i = 0;

	while (i + 8 <= n) {
		/* lane sums stay below 2^31: at most 16 bytes a lane a step */
		uint64_t stop = i + 8 * (UINT64_C(1) << 24);
		__m128i acc = _mm_setzero_si128();

		for (; i + 8 <= n && i < stop; i += 8) {
			__m256i b = _mm256_loadu_si256((const void *)(p + 4 * i));
			int r0, r1;

			f32_half(_mm256_castsi256_si128(b), &acc, &r0);
			f32_half(_mm256_extracti128_si256(b, 1), &acc, &r1);
			for (int m = r0 | r1 << 4; m; m &= m - 1)
				len += f32_len1(le32(p + 4 * (i + (uint64_t)
						__builtin_ctz((unsigned)m))));
		}
		acc = _mm_add_epi32(acc, _mm_srli_si128(acc, 8));
		acc = _mm_add_epi32(acc, _mm_srli_si128(acc, 4));
		len += (uint32_t)_mm_cvtsi128_si32(acc);
	}
	return len + f32_run(p + 4 * i, n - i, false);
}
#endif

/* float32's lengths: AVX2 where the CPU has it */
static uint64_t f32_lens(const unsigned char *p, uint64_t n, bool big)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (!big && __builtin_cpu_supports("avx2") && !getenv("PT_VIEW_NO_SIMD"))
		return f32_run_avx2(p, n);
#endif
	return f32_run(p, n, big);
}

uint64_t view_dec_len_run(const struct view_dec *c, const unsigned char *p,
			  uint64_t n)
{
	unsigned size = c->dt->size;
	uint64_t len = 0;

	pthread_once(&tables_once, tables_make);
	if (c->kind == VIEW_FLOAT && c->f == &view_f32)
		return f32_lens(p, n, c->big);
	if (c->kind == VIEW_FLOAT && size == 2) {
		const unsigned char *t = len16[c->f == &view_bf16];

		for (uint64_t i = 0; i < n; i++, p += 2)
			len += t[ord_load(p, 2, c->big)];
		return len;
	}
	if (c->kind == VIEW_BOOL)
		return n;
	for (uint64_t i = 0; i < n; i++, p += size)
		len += view_dec_len(c, p);
	return len;
}
