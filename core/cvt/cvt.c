/*
 * cvt.c - elements from one floating dtype to another, rounded exactly as
 * torch's .to() rounds them (c10/util/Half.h, BFloat16.h, Float8_*.h, and
 * the CPU copy kernel), checked bit for bit against torch 1.13 and 2.x by
 * tests/tools/ptrepack_dtype.sh.
 *
 * Every pair goes through float32, as in c10: a float64 is first rounded
 * to float32 by the FPU (so float64 -> float16 rounds twice, like torch),
 * and a float32 widens to float64 exactly.  Narrowing rounds to nearest,
 * ties to even (float16 and bfloat16 through view_num.c's bit routines);
 * overflow and NaN follow each type:
 *
 *   type        bias  overflow        NaN in              NaN out
 *   float16     15    +-inf           sign | 0x7e00       quieted payload
 *   bfloat16    127   +-inf           0x7fc0 (1.13: 0xffff from f32/f64)
 *   e4m3fn      7     +-448, inf too  sign | 0x7f         sign | 0x7ff00000
 *   e5m2        15    +-inf (>=61440) sign | 0x7f         as float16 << 8
 *   e4m3fnuz    8     NaN 0x80        0x80 (no -0)        0x7f800001
 *   e5m2fnuz    16    NaN 0x80        0x80 (no -0)        0x7f800001
 *
 * "NaN out" is the float32 a NaN widens to; float64 gets it from the FPU,
 * which quiets a signalling one.
 */
#include "cvt/cvt.h"
#include "util/le.h"

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "view/view.h"

enum kind {
	K_NONE, K_F64, K_F32, K_F16, K_BF16, K_E4M3FN, K_E5M2, K_E4M3FNUZ,
	K_E5M2FNUZ,
};

static const char *const kind_names[] = {
	[K_F64] = "float64", [K_F32] = "float32", [K_F16] = "float16",
	[K_BF16] = "bfloat16", [K_E4M3FN] = "float8_e4m3fn",
	[K_E5M2] = "float8_e5m2", [K_E4M3FNUZ] = "float8_e4m3fnuz",
	[K_E5M2FNUZ] = "float8_e5m2fnuz",
};

static enum kind kind_of(const struct ckpt_dtype *dt)
{
	if (!dt || dt->cls != CKPT_DT_FLOAT)
		return K_NONE;
	for (int k = K_F64; k <= K_E5M2FNUZ; k++)
		if (!strcmp(dt->name, kind_names[k]))
			return (enum kind)k;
	return K_NONE;
}

bool cvt_supported(const struct ckpt_dtype *dt)
{
	return kind_of(dt) != K_NONE;
}

const struct ckpt_dtype *cvt_dtype(unsigned k)
{
	if (k > K_E5M2FNUZ - K_F64)
		return NULL;
	return ckpt_dtype_by_name(kind_names[K_F64 + k]);
}

/*
 * Round the float32 magnitude @a (no NaN; infinity is fine) to a format
 * with @m fraction bits and exponent bias @bias, ties to even, as if its
 * exponent had no upper end: the caller decides what too large means.
 * The result is the format's magnitude code.
 */
static uint32_t round_mag(uint32_t a, unsigned m, int bias)
{
	uint32_t sig = a & 0x7fffff, q, rem, half;
	int e = (int)(a >> 23), ce, shift;

	if (e)
		sig |= 0x800000;
	else
		e = 1;			/* float32 subnormal: same scale */
	ce = e - 127 + bias;		/* the code's biased exponent */
	shift = 23 - (int)m + (ce >= 1 ? 0 : 1 - ce);
	/* sig < 2^24 <= half the unit: rounds to zero, never a tie */
	if (shift > 24)
		return 0;
	q = sig >> shift;
	rem = sig & ((UINT32_C(1) << shift) - 1);
	half = UINT32_C(1) << (shift - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	/* q holds the implicit bit: adding it carries into the exponent;
	   a subnormal rounded up to 1 << m is the smallest normal */
	return ce >= 1 ? ((uint32_t)(ce - 1) << m) + q : q;
}

/* float32 bits to an 8-bit float. */
static uint8_t to_f8(uint32_t f, enum kind k)
{
	uint32_t sign = (f >> 24) & 0x80, a = f & 0x7fffffff, r;
	bool nan = a > 0x7f800000;

	switch (k) {
	case K_E4M3FN:
		/* torch 2.x saturates: past 448, infinities too */
		r = nan ? 0x7f : round_mag(a, 3, 7);
		return (uint8_t)(sign | (!nan && r > 0x7e ? 0x7e : r));
	case K_E5M2:
		if (nan)
			return (uint8_t)(sign | 0x7f);
		r = round_mag(a, 2, 15);
		return (uint8_t)(sign | (r > 0x7b ? 0x7c : r));
	case K_E4M3FNUZ:
	case K_E5M2FNUZ:
		r = nan ? 0x80 : round_mag(a, k == K_E4M3FNUZ ? 3 : 2,
					   k == K_E4M3FNUZ ? 8 : 16);
		if (r > 0x7f)
			return 0x80;	/* their only NaN */
		return (uint8_t)(r ? sign | r : 0);	/* no -0 */
	default:
		return 0;
	}
}

/* An 8-bit float to float32 bits (exact). */
static uint32_t from_f8(uint8_t x, enum kind k)
{
	uint32_t sign = (uint32_t)(x & 0x80) << 24, a = x & 0x7f;
	unsigned m = k == K_E4M3FN || k == K_E4M3FNUZ ? 3 : 2;
	int bias = k == K_E4M3FN ? 7 : k == K_E5M2 ? 15 : k == K_E4M3FNUZ ?
		   8 : 16;
	uint32_t frac = a & ((1u << m) - 1);
	int e = (int)(a >> m);

	switch (k) {
	case K_E4M3FN:
		if (a == 0x7f)
			return sign | 0x7ff00000;
		break;
	case K_E5M2:
		/* c10 widens it as the float16 x << 8 */
		return f32_bits(view_f16_to_f32((uint16_t)(x << 8))) |
		       (a > 0x7c ? 0x400000 : 0);
	default:
		if (x == 0x80)
			return 0x7f800001;
		break;
	}
	if (!a)
		return sign;
	if (!e) {
		/* subnormal frac * 2^(1 - bias - m): normalise it */
		e = 1;
		while (!(frac & (1u << m))) {
			frac <<= 1;
			e--;
		}
		frac &= (1u << m) - 1;
	}
	return sign | (uint32_t)(e - bias + 127) << 23 | frac << (23 - m);
}

/* Element @x (raw bits of @k) as float32 bits; float64 not here. */
static uint32_t to_f32(uint64_t x, enum kind k)
{
	uint32_t f;

	switch (k) {
	case K_F32:
		return (uint32_t)x;
	case K_F16:
		f = f32_bits(view_f16_to_f32((uint16_t)x));
		/* torch's widening quiets a signalling NaN */
		return (f & 0x7fffffff) > 0x7f800000 ? f | 0x400000 : f;
	case K_BF16:
		return f32_bits(view_bf16_to_f32((uint16_t)x));
	default:
		return from_f8((uint8_t)x, k);
	}
}

/* float32 bits to @k's raw bits; float64 not here.  @wide: the value
   came from a float32 or float64 element (torch 1.13's bfloat16 NaN). */
static uint64_t from_f32(uint32_t f, enum kind k, enum cvt_flavour fl,
			 bool wide)
{
	bool nan = (f & 0x7fffffff) > 0x7f800000;

	switch (k) {
	case K_F32:
		return f;
	case K_F16:
		if (nan)
			return (f >> 16 & 0x8000) | 0x7e00;
		return view_f32_to_f16(f32_of(f));
	case K_BF16:
		if (nan)
			return fl == CVT_TORCH1 && wide ? 0xffff : 0x7fc0;
		return view_f32_to_bf16(f32_of(f));
	default:
		return to_f8(f, k);
	}
}

static const uint8_t kind_size[] = {
	[K_F64] = 8, [K_F32] = 4, [K_F16] = 2, [K_BF16] = 2, [K_E4M3FN] = 1,
	[K_E5M2] = 1, [K_E4M3FNUZ] = 1, [K_E5M2FNUZ] = 1,
};

/*
 * The loop.  Always inlined, so that each call below with constant kinds
 * becomes its own loop with the switches folded away and the byte-wise
 * load and store merged into one access (about 8x faster for float32 ->
 * bfloat16); the last call is the general one.
 */
static inline __attribute__((always_inline)) void
run(enum kind a, enum kind b, bool big, enum cvt_flavour fl,
    const unsigned char *p, unsigned char *q, size_t n)
{
	unsigned sa = kind_size[a], sb = kind_size[b];
	bool wide = a == K_F32 || a == K_F64;

	for (size_t i = 0; i < n; i++, p += sa, q += sb) {
		uint64_t x = ord_load(p, sa, big), y;
		uint32_t f;

		if (a == K_F64)
			f = f32_bits((float)f64_of(x));
		else
			f = to_f32(x, a);
		if (b == K_F64)
			y = f64_bits((double)f32_of(f));
		else
			y = from_f32(f, b, fl, wide);
		ord_store(q, sb, big, y);
	}
}

/*
 * float32 -> bfloat16, little-endian, the conversion every --dtype bf16
 * does: the bits of view_f32_to_bf16() and from_f32()'s NaN (@nan), four
 * elements at a time with SSE2 (in x86-64's baseline), about 10x faster
 * than run()'s call per element, which took 0.8 s of 1 GB.  The packing
 * is signed, so each result is sign-extended from 16 bits first: packs
 * then keeps its bits exactly.
 */
static void f32_to_bf16(const unsigned char *p, unsigned char *q, size_t n,
			uint16_t nan)
{
	size_t i = 0;

#ifdef __SSE2__
	const __m128i one = _mm_set1_epi32(1), half = _mm_set1_epi32(0x7fff);
	const __m128i mag = _mm_set1_epi32(0x7fffffff);
	const __m128i inf = _mm_set1_epi32(0x7f800000);
	const __m128i qnan = _mm_set1_epi32(nan);

	for (; i + 8 <= n; i += 8) {
		__m128i x[2], r[2], m[2];

		x[0] = _mm_loadu_si128((const __m128i *)(const void *)(p + 4 * i));
		x[1] = _mm_loadu_si128((const __m128i *)(const void *)(p + 4 * i + 16));
		for (int k = 0; k < 2; k++) {
			__m128i lsb = _mm_and_si128(_mm_srli_epi32(x[k], 16),
						    one);

			r[k] = _mm_srli_epi32(_mm_add_epi32(x[k],
					      _mm_add_epi32(half, lsb)), 16);
			/* signed compare: both sides are below 2^31 */
			m[k] = _mm_cmpgt_epi32(_mm_and_si128(x[k], mag), inf);
			r[k] = _mm_or_si128(_mm_andnot_si128(m[k], r[k]),
					    _mm_and_si128(m[k], qnan));
			r[k] = _mm_srai_epi32(_mm_slli_epi32(r[k], 16), 16);
		}
		_mm_storeu_si128((__m128i *)(void *)(q + 2 * i),
				 _mm_packs_epi32(r[0], r[1]));
	}
#endif
	for (; i < n; i++) {
		uint32_t f = (uint32_t)ord_load(p + 4 * i, 4, false);
		uint32_t h = (f + 0x7fff + ((f >> 16) & 1)) >> 16;

		ord_store(q + 2 * i, 2, false,
			  (f & 0x7fffffff) > 0x7f800000 ? nan : h);
	}
}

void cvt_elems(const struct ckpt_dtype *from, const struct ckpt_dtype *to,
	       bool big, enum cvt_flavour fl, const void *src, void *dst,
	       size_t n)
{
	enum kind a = kind_of(from), b = kind_of(to);

	if (a == b)
		memcpy(dst, src, n * from->size);
	else if (!big && a == K_F32 && b == K_BF16)
		f32_to_bf16(src, dst, n, fl == CVT_TORCH1 ? 0xffff : 0x7fc0);
	else if (!big && a == K_F32 && b == K_F16)
		run(K_F32, K_F16, false, fl, src, dst, n);
	else if (!big && a == K_BF16 && b == K_F32)
		run(K_BF16, K_F32, false, fl, src, dst, n);
	else if (!big && a == K_F16 && b == K_F32)
		run(K_F16, K_F32, false, fl, src, dst, n);
	else
		run(a, b, big, fl, src, dst, n);
}
