/*
 * gguf_quant.c - ggml's legacy 32-element blocks (ggml-common.h, QK4_0 =
 * QK5_0 = QK8_0 = 32), dequantized as gguf-py's quants.py does it, and
 * Q8_0 quantized bit for bit as its Q8_0.quantize_blocks does.  A block of
 * type q holds elements 32*b .. 32*b+31 of the row:
 *
 *   block_q4_0 (18)      block_q4_1 (20)      block_q8_0 (34)
 *   OFF SIZE FIELD       OFF SIZE FIELD       OFF SIZE FIELD
 *   0   2    f16 d       0   2    f16 d       0   2    f16 d
 *   2   16   u8 qs       2   2    f16 m       2   32   int8 qs
 *                        4   16   u8 qs
 *   block_q5_0 (22)      block_q5_1 (24)
 *   0   2    f16 d       0   2    f16 d
 *   2   4    u32 qh      2   2    f16 m
 *   6   16   u8 qs       4   4    u32 qh
 *                        8   16   u8 qs
 *
 * Element j < 16 is qs[j]'s low nibble, element j + 16 its high one; Q5
 * adds bit j of qh (little-endian) as the fifth bit.  Values: Q4_0
 * d * (q - 8), Q5_0 d * (q - 16), Q4_1 and Q5_1 d * q + m, Q8_0 q * d,
 * in float32 as numpy computes them; ggml-quants.c's dequantize_row_*
 * compute the same expressions.  An f16 d times a 5-bit q is exact in
 * float32, so only the + m rounds, and a fused multiply-add (which ggml
 * built with FMA may use) gives the same bits.
 */
#include "fmt/gguf/gguf_codec_int.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

/* The element values of a 4- or 5-bit block into q[32]: nibbles of the
 * 16 bytes at @qs, plus bit j of @qh as bit 4 of element j. */
static void nibbles(const unsigned char *qs, uint32_t qh, int q[32])
{
	for (int j = 0; j < 16; j++) {
		q[j] = (qs[j] & 0xf) | (int)(qh >> j & 1) << 4;
		q[j + 16] = (qs[j] >> 4) | (int)(qh >> (j + 16) & 1) << 4;
	}
}

/*
 * @n blocks of 4 or 5 bits at @src: each the f16 d at 0, an f16 m at 2
 * when @has_m, a u32 qh next when @has_qh, then qs.  Without m the value
 * is d * (q - @zero); with m, d * q + m.
 */
static void dequant_nibbles(const unsigned char *src, float *dst, uint64_t n,
			    bool has_m, bool has_qh, int zero)
{
	size_t size = 18 + 2 * has_m + 4 * has_qh;

	for (uint64_t i = 0; i < n; i++, src += size, dst += 32) {
		const unsigned char *p = src + 2;
		float d = gguf_f16_at(src), m = 0, t;
		uint32_t qh = 0;
		int q[32];

		if (has_m) {
			m = gguf_f16_at(p);
			p += 2;
		}
		if (has_qh) {
			qh = le32(p);
			p += 4;
		}
		nibbles(p, qh, q);
		for (int j = 0; j < 32; j++) {
			if (has_m) {
				t = d * (float)q[j];
				dst[j] = t + m;
			} else {
				dst[j] = d * (float)(q[j] - zero);
			}
		}
	}
}

void gguf_dequant_q4_0(const unsigned char *src, float *dst, uint64_t n)
{
	dequant_nibbles(src, dst, n, false, false, 8);
}

void gguf_dequant_q4_1(const unsigned char *src, float *dst, uint64_t n)
{
	dequant_nibbles(src, dst, n, true, false, 0);
}

void gguf_dequant_q5_0(const unsigned char *src, float *dst, uint64_t n)
{
	dequant_nibbles(src, dst, n, false, true, 16);
}

void gguf_dequant_q5_1(const unsigned char *src, float *dst, uint64_t n)
{
	dequant_nibbles(src, dst, n, true, true, 0);
}

void gguf_dequant_q8_0(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++, src += 34, dst += 32) {
		float d = gguf_f16_at(src);

		for (int j = 0; j < 32; j++)
			dst[j] = (float)gguf_s8(src[2 + j]) * d;
	}
}

/* quants.py's np_roundf, op for op: half away from zero; NaN stays NaN
 * (and so does inf: inf - floor(inf) is NaN). */
static float np_roundf(float n)
{
	float a = fabsf(n), fl = floorf(a), b = fl + floorf(2 * (a - fl));
	float sign = n > 0 ? 1.0f : n < 0 ? -1.0f : n == 0 ? 0.0f : n;

	return sign * b;
}

/*
 * Q8_0.quantize_blocks: d = max|x| / 127, id = 1/d (0 when d is 0: a zero
 * block, or one so small that d underflows), q = np_roundf(x * id) as
 * int8, d stored as numpy's float16.  Non-finite inputs follow numpy
 * too: a NaN makes max|x| (and d) the default NaN, an inf makes d inf and
 * id 0, and when d is subnormal 1/d is inf.  Either way x * id may be NaN
 * (0 * inf, inf * 0), which numpy's astype(np.int8) turns into 0 (x86-64
 * and arm64 alike); it is the only non-finite value np_roundf hands over.
 */
void gguf_quant_q8_0(const float *src, unsigned char *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		const float *x = src + 32 * i;
		unsigned char *b = dst + 34 * i;
		float amax = 0, d, id, q;

		for (int j = 0; j < 32; j++) {
			float a = fabsf(x[j]);

			/*
			 * numpy's max over 32 elements (its SIMD reduction)
			 * returns the default NaN 0x7fc00000 whatever NaN it
			 * met (over 16 or fewer: that NaN itself)
			 */
			if (isnan(a)) {
				amax = f32_of(0x7fc00000);
				break;
			}
			if (a > amax)
				amax = a;
		}
		d = amax / 127;
		id = d == 0 ? 0 : 1 / d;
		for (int j = 0; j < 32; j++) {
			q = np_roundf(x[j] * id);
			b[2 + j] = isnan(q) ? 0 : (unsigned char)(int)q;
		}
		ord_store(b, 2, false, gguf_f32_to_f16(d));
	}
}
