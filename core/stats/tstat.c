/*
 * tstat.c - per-tensor statistics, streamed (tstat.h).  Elements are
 * decoded TSTAT_BLOCK at a time into doubles, the finite ones kept; each
 * block's mean and sum of squared differences are computed in two passes
 * over the block (in cache) and merged into the running figures with
 * Chan et al.'s pairwise update, so std stays accurate over 10^9
 * elements where a naive sum of squares would cancel.
 */
#include "stats/tstat.h"
#include "stats/tstat_int.h"
#include "util/le.h"

#include "ckpt/ckpt.h"
#include "view/view.h"

#include <math.h>
#include <string.h>

enum fmt { F_NONE, F_F16, F_BF16, F_F32, F_F64, F_E4M3FN, F_E5M2,
	   F_E4M3FNUZ, F_E5M2FNUZ, F_E8M0FNU, F_I8, F_I16, F_I32, F_I64,
	   F_U8, F_U16, F_U32, F_U64, F_BOOL, F_C32, F_C64, F_C128 };

static const struct {
	const char *name;
	int fmt, kind;
} fmts[] = {
	{ "float16", F_F16, TSTAT_FLOAT }, { "bfloat16", F_BF16, TSTAT_FLOAT },
	{ "float32", F_F32, TSTAT_FLOAT }, { "float64", F_F64, TSTAT_FLOAT },
	{ "float8_e4m3fn", F_E4M3FN, TSTAT_FLOAT },
	{ "float8_e5m2", F_E5M2, TSTAT_FLOAT },
	{ "float8_e4m3fnuz", F_E4M3FNUZ, TSTAT_FLOAT },
	{ "float8_e5m2fnuz", F_E5M2FNUZ, TSTAT_FLOAT },
	{ "float8_e8m0fnu", F_E8M0FNU, TSTAT_FLOAT },
	{ "int8", F_I8, TSTAT_INT }, { "int16", F_I16, TSTAT_INT },
	{ "int32", F_I32, TSTAT_INT }, { "int64", F_I64, TSTAT_INT },
	{ "uint8", F_U8, TSTAT_UINT }, { "uint16", F_U16, TSTAT_UINT },
	{ "uint32", F_U32, TSTAT_UINT }, { "uint64", F_U64, TSTAT_UINT },
	{ "bool", F_BOOL, TSTAT_BOOL }, { "complex32", F_C32, TSTAT_COMPLEX },
	{ "complex64", F_C64, TSTAT_COMPLEX },
	{ "complex128", F_C128, TSTAT_COMPLEX },
};

static int fmt_of(const struct ckpt_dtype *dt, int *kind)
{
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
		if (!strcmp(dt->name, fmts[i].name)) {
			*kind = fmts[i].kind;
			return fmts[i].fmt;
		}
	*kind = TSTAT_NONE;
	return F_NONE;
}

bool tstat_supported(const struct ckpt_dtype *dt)
{
	int kind;

	return fmt_of(dt, &kind) != F_NONE;
}

/*
 * The float8 formats (OCP FP8 and the fnuz variants of Graphcore/AMD):
 * sign, E exponent bits with bias B, M mantissa bits.  e4m3fn has no
 * infinity and one NaN per sign (all ones); e5m2 is IEEE-like; the fnuz
 * kinds have no -0, no infinity, and 0x80 is their only NaN; e8m0fnu is
 * 2^(e - 127), unsigned, 0xff NaN.
 */
static double fp8(int fmt, uint8_t b)
{
	int e_bits = fmt == F_E5M2 || fmt == F_E5M2FNUZ ? 5 : 4;
	int m_bits = 7 - e_bits;
	int bias = fmt == F_E4M3FN ? 7 : fmt == F_E5M2 ? 15 :
		   fmt == F_E4M3FNUZ ? 8 : 16;
	int sign = b >> 7, e = (b >> m_bits) & ((1 << e_bits) - 1);
	int m = b & ((1 << m_bits) - 1);
	double v;

	if (fmt == F_E8M0FNU)
		return b == 0xff ? NAN : ldexp(1.0, b - 127);
	if ((fmt == F_E4M3FNUZ || fmt == F_E5M2FNUZ) && b == 0x80)
		return NAN;
	if (fmt == F_E4M3FN && e == 15 && m == 7)
		return sign ? -NAN : NAN;
	if (fmt == F_E5M2 && e == 31)
		return m ? NAN : sign ? -INFINITY : INFINITY;
	if (e)
		v = ldexp(1.0 + m / (double)(1 << m_bits), e - bias);
	else
		v = ldexp(m / (double)(1 << m_bits), 1 - bias);
	return sign ? -v : v;
}

double tstat_fp8(const struct ckpt_dtype *dt, uint8_t b)
{
	int kind, f = fmt_of(dt, &kind);

	return f >= F_E4M3FN && f <= F_E8M0FNU ? fp8(f, b) : NAN;
}

void tstat_init(struct tstat *s, const struct ckpt_dtype *dt, bool big)
{
	memset(s, 0, offsetof(struct tstat, blk));
	s->fmt = fmt_of(dt, &s->kind);
	s->size = dt->size;
	s->big = big && dt->size > 1;
	s->isa = tstat_f32_isa();
	s->min = INFINITY;
	s->max = -INFINITY;
	s->imin = INT64_MAX;
	s->imax = INT64_MIN;
	s->umin = UINT64_MAX;
	s->umax = 0;
}

static double as_double(int fmt, uint64_t bits)
{
	switch (fmt) {
	case F_F16:
		return view_f16_to_f32((uint16_t)bits);
	case F_BF16:
		return view_bf16_to_f32((uint16_t)bits);
	case F_F32:
		return f32_of((uint32_t)bits);
	case F_F64:
		return f64_of(bits);
	default:
		return fp8(fmt, (uint8_t)bits);
	}
}

/* Merge the @k finite values in s->blk into the running figures. */
static void merge_block(struct tstat *s, size_t k)
{
	double sum = 0, m2 = 0, sq = 0, bmean, delta, n;

	if (!k)
		return;
	for (size_t i = 0; i < k; i++) {
		double v = s->blk[i];

		sum += v;
		sq += v * v;
		if (v < s->min)
			s->min = v;
		if (v > s->max)
			s->max = v;
	}
	bmean = sum / (double)k;
	for (size_t i = 0; i < k; i++) {
		double d = s->blk[i] - bmean;

		m2 += d * d;
	}
	n = (double)(s->finite + k);
	delta = bmean - s->mean;
	s->mean += delta * ((double)k / n);
	s->m2 += m2 + delta * delta * ((double)s->finite * (double)k / n);
	s->finite += k;
	s->sumsq += sq;
}

/* A float or complex modulus @v: counted, and kept in blk if finite. */
static inline size_t put(struct tstat *s, size_t k, double v)
{
	if (isnan(v)) {
		s->nan++;
		return k;
	}
	if (isinf(v)) {
		if (v > 0)
			s->pinf++;
		else
			s->ninf++;
		return k;
	}
	s->zero += v == 0;
	s->blk[k] = v;
	return k + 1;
}

/*
 * The common case, a block of little-endian float32 with nothing
 * non-finite, in one pass (tstat_f32.c): sums of the elements shifted by
 * the first one (K) and of their squares; the block's mean is K + S1/n
 * and its sum of squared differences S2 - S1^2/n.  K being one of the
 * elements bounds the cancellation: (K - mean)^2 <= m2 * n / (n - 1), so
 * the error stays within about n * 2^-53 of m2 (the shifted-data
 * algorithm).  Returns false (nothing counted) if the block has a NaN or
 * an Inf.
 */
static bool f32_block(struct tstat *s, const unsigned char *p, size_t n)
{
	struct tstat_f32 o;
	double k, bmean, delta, tot;
	float x0;

	if (!n)
		return false;
	memcpy(&x0, p, 4);
	k = x0;
	tstat_f32_run(s->isa, p, n, k, &o);
	/*
	 * No pre-scan for NaN and Inf: a float32's square cannot overflow a
	 * double, so the sums are finite exactly when every element is
	 * (an Inf makes S2 inf, a NaN makes both NaN; x0 NaN or Inf too).
	 * Otherwise nothing was counted yet: the general path redoes it.
	 */
	if (!isfinite(o.s1) || !isfinite(o.s2) || !isfinite(k))
		return false;
	if (o.mn < s->min)
		s->min = o.mn;
	if (o.mx > s->max)
		s->max = o.mx;
	s->zero += o.zeros;
	s->sumsq += o.s2 + 2 * k * o.s1 + (double)n * k * k;
	bmean = k + o.s1 / (double)n;
	tot = (double)(s->finite + n);
	delta = bmean - s->mean;
	s->mean += delta * ((double)n / tot);
	s->m2 += (o.s2 - o.s1 * o.s1 / (double)n) +
		 delta * delta * ((double)s->finite * (double)n / tot);
	s->finite += n;
	return true;
}

static void feed_float(struct tstat *s, const unsigned char *p, size_t n)
{
	size_t k = 0;

	if (s->fmt == F_F32 && !s->big && f32_block(s, p, n))
		return;
	if (s->fmt == F_F32 && !s->big) {
		for (size_t i = 0; i < n; i++) {
			float f;

			memcpy(&f, p + 4 * i, 4);
			k = put(s, k, f);
		}
	} else {
		for (size_t i = 0; i < n; i++)
			k = put(s, k, as_double(s->fmt, ord_load(p + i * s->size,
							      s->size,
							      s->big)));
	}
	merge_block(s, k);
}

static void feed_complex(struct tstat *s, const unsigned char *p, size_t n)
{
	int half = s->size / 2, part = s->fmt == F_C32 ? F_F16 :
		   s->fmt == F_C64 ? F_F32 : F_F64;
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		const unsigned char *q = p + i * s->size;
		double re = as_double(part, ord_load(q, half, s->big));
		double im = as_double(part, ord_load(q + half, half, s->big));

		if (isnan(re) || isnan(im))
			s->nan++;
		else if (isinf(re) || isinf(im))
			s->pinf++;
		else
			k = put(s, k, hypot(re, im));
	}
	merge_block(s, k);
}

static void feed_int(struct tstat *s, const unsigned char *p, size_t n)
{
	int bits = 8 * s->size;

	for (size_t i = 0; i < n; i++) {
		uint64_t u = ord_load(p + i * s->size, s->size, s->big);

		if (s->kind == TSTAT_INT) {
			int64_t v = bits == 64 ? (int64_t)u :
				    (int64_t)(u << (64 - bits)) >> (64 - bits);

			s->imin = v < s->imin ? v : s->imin;
			s->imax = v > s->imax ? v : s->imax;
			s->blk[i] = (double)v;
		} else {
			if (s->kind == TSTAT_BOOL)
				u = u != 0;
			s->umin = u < s->umin ? u : s->umin;
			s->umax = u > s->umax ? u : s->umax;
			s->blk[i] = (double)u;
		}
		s->zero += u == 0;
	}
	merge_block(s, n);
}

void tstat_feed(struct tstat *s, const void *p, size_t n)
{
	const unsigned char *b = p;

	if (s->kind == TSTAT_NONE) {
		s->n += n;
		return;
	}
	while (n) {
		size_t k = n < TSTAT_BLOCK ? n : TSTAT_BLOCK;

		if (s->kind == TSTAT_FLOAT)
			feed_float(s, b, k);
		else if (s->kind == TSTAT_COMPLEX)
			feed_complex(s, b, k);
		else
			feed_int(s, b, k);
		s->n += k;
		b += k * s->size;
		n -= k;
	}
}

double tstat_std(const struct tstat *s)
{
	return s->finite ? sqrt(s->m2 / (double)s->finite) : NAN;
}

double tstat_l2(const struct tstat *s)
{
	return s->kind == TSTAT_NONE ? NAN : sqrt(s->sumsq);
}
