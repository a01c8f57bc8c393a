/*
 * view_num.c - one tensor element as a number: how each dtype is shown
 * (view_kind_of), decoding an element in either byte order (view_get),
 * byte swapping, and exact IEEE 754 binary16 / bfloat16 <-> binary32
 * conversions done on the bits (round to nearest, ties to even), so that
 * nothing depends on the compiler's _Float16 or on the FPU's handling of
 * signaling NaNs.
 */
#include "view/view.h"
#include "util/le.h"

#include <string.h>

/*
 * By class first (view_get asks once per element), then by name where a
 * class mixes kinds: CKPT_DT_FLOAT holds the 1-byte float8/float4 types
 * beside the 2- to 8-byte IEEE ones, CKPT_DT_INT and CKPT_DT_UINT the
 * 1-byte sub-byte int1..uint7 beside int8/uint8, CKPT_DT_QUANT the packed
 * quint4x2/2x4 beside the plain quantized ints.
 */
enum view_kind view_kind_of(const struct ckpt_dtype *dt)
{
	switch (dt->cls) {
	case CKPT_DT_FLOAT:
		return dt->size >= 2 ? VIEW_FLOAT : VIEW_RAW;
	case CKPT_DT_INT:
		return dt->size >= 2 || !strcmp(dt->name, "int8") ? VIEW_INT
								 : VIEW_RAW;
	case CKPT_DT_UINT:
		return dt->size >= 2 || !strcmp(dt->name, "uint8") ? VIEW_UINT
								  : VIEW_RAW;
	case CKPT_DT_BOOL:
		return VIEW_BOOL;
	case CKPT_DT_COMPLEX:
		return VIEW_COMPLEX;
	case CKPT_DT_QUANT:
		if (!strcmp(dt->name, "qint8") || !strcmp(dt->name, "qint32"))
			return VIEW_INT;
		return strcmp(dt->name, "quint8") ? VIEW_RAW : VIEW_UINT;
	default:
		return VIEW_RAW;
	}
}

/* A float component of @size bytes (2: float16 or bfloat16). */
static double get_float(uint64_t bits, unsigned size, bool bf16)
{
	switch (size) {
	case 2:
		return bf16 ? view_bf16_to_f32((uint16_t)bits)
			    : view_f16_to_f32((uint16_t)bits);
	case 4:
		return f32_of((uint32_t)bits);
	default:
		return f64_of(bits);
	}
}

void view_get(const struct ckpt_dtype *dt, bool big, const unsigned char *p,
	      struct view_num *out)
{
	enum view_kind kind = view_kind_of(dt);
	unsigned size = dt->size, half = size / 2;
	uint64_t v;

	memset(out, 0, sizeof(*out));
	switch (kind) {
	case VIEW_FLOAT:
		out->re = get_float(ord_load(p, size, big), size,
				    !strcmp(dt->name, "bfloat16"));
		break;
	case VIEW_COMPLEX:
		/* complex32's parts are float16, never bfloat16 */
		out->re = get_float(ord_load(p, half, big), half, false);
		out->im = get_float(ord_load(p + half, half, big), half, false);
		break;
	case VIEW_INT:
		v = ord_load(p, size, big);
		/* sign-extend without shifting into the sign bit */
		if (size < 8 && v >> (8 * size - 1))
			v |= ~UINT64_C(0) << (8 * size);
		out->i = v > INT64_MAX ? -(int64_t)(~v) - 1 : (int64_t)v;
		break;
	case VIEW_BOOL:
		out->u = p[0] != 0;
		break;
	case VIEW_UINT:
		out->u = ord_load(p, size, big);
		break;
	case VIEW_RAW:
		/* the bytes as stored, whatever the checkpoint's order */
		out->u = ord_load(p, size, false);
		break;
	}
}

/*
 * float16: 1 sign, 5 exponent (bias 15), 10 fraction bits.  Widening is
 * exact: subnormals become normal floats, NaN payloads move up 13 bits.
 */
float view_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, frac = h & 0x3ff, bits;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000 | frac << 13;
	} else if (exp == 0) {
		if (!frac) {
			bits = sign;
		} else {
			/* frac * 2^-24: shift the leading 1 to bit 10 */
			exp = 1;
			while (!(frac & 0x400)) {
				frac <<= 1;
				exp--;
			}
			bits = sign | (exp + 112) << 23 | (frac & 0x3ff) << 13;
		}
	} else {
		bits = sign | (exp + 112) << 23 | frac << 13;
	}
	return f32_of(bits);
}

/*
 * Narrowing rounds the 24-bit significand once, to 11 bits for normal
 * results or fewer for subnormal ones, with a carry that may move into
 * the exponent (and from the largest finite value into infinity).
 */
uint16_t view_f32_to_f16(float f)
{
	uint32_t bits, sign, exp, frac, sig, q, rem, halfway;
	int shift;

	bits = f32_bits(f);
	sign = (bits >> 16) & 0x8000;
	exp = (bits >> 23) & 0xff;
	frac = bits & 0x7fffff;
	if (exp == 0xff) {
		if (!frac)
			return (uint16_t)(sign | 0x7c00);
		/* keep the payload's top bits; a NaN must stay a NaN */
		q = frac >> 13;
		return (uint16_t)(sign | 0x7c00 | (q ? q : 0x200));
	}
	/* below half the smallest subnormal (2^-25), float subnormals too */
	if (exp < 102)
		return (uint16_t)sign;
	sig = frac | 0x800000;
	if (exp >= 113) {		/* a normal float16, or overflow */
		shift = 13;
	} else {			/* subnormal: 2^-24 units */
		shift = 13 + (113 - (int)exp);
	}
	q = sig >> shift;
	rem = sig & ((UINT32_C(1) << shift) - 1);
	halfway = UINT32_C(1) << (shift - 1);
	if (rem > halfway || (rem == halfway && (q & 1)))
		q++;
	/* a subnormal rounded up to 0x400 is the smallest normal: right */
	if (exp < 113)
		return (uint16_t)(sign | q);
	/* q holds the implicit bit: adding it carries into the exponent */
	q += (exp - 113) << 10;
	if (q >= 0x7c00)
		return (uint16_t)(sign | 0x7c00);
	return (uint16_t)(sign | q);
}

/* bfloat16 is the top half of a float32. */
float view_bf16_to_f32(uint16_t h)
{
	return f32_of((uint32_t)h << 16);
}

uint16_t view_f32_to_bf16(float f)
{
	uint32_t bits = f32_bits(f);

	if ((bits & 0x7f800000) == 0x7f800000 && (bits & 0x7fffff)) {
		uint32_t h = bits >> 16;

		return (uint16_t)(h & 0x7f ? h : h | 0x40);
	}
	/*
	 * Adding 0x7fff (plus the kept lowest bit, for ties to even) carries
	 * into the upper half exactly when the lower half rounds up; a carry
	 * out of the largest finite value gives infinity, as it should.
	 */
	bits += 0x7fff + ((bits >> 16) & 1);
	return (uint16_t)(bits >> 16);
}

void view_swap(const struct ckpt_dtype *dt, unsigned char *p, uint64_t n)
{
	unsigned part = dt->size, nparts = 1;

	if (view_kind_of(dt) == VIEW_COMPLEX) {
		part = dt->size / 2;
		nparts = 2;
	}
	if (part < 2)
		return;
	for (uint64_t i = 0; i < n * nparts; i++, p += part)
		for (unsigned a = 0, b = part - 1; a < b; a++, b--) {
			unsigned char t = p[a];

			p[a] = p[b];
			p[b] = t;
		}
}
