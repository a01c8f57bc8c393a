/*
 * gguf_kquant.c - ggml's K-quants, super-blocks of QK_K = 256 elements
 * with 6- or 8-bit sub-block scales (ggml-common.h block_q*_K),
 * dequantized as gguf-py's quants.py does it; Q8_K (gguf-py has none) as
 * ggml-quants.c's dequantize_row_q8_K does.  Element e of a super-block:
 *
 *   block_q2_K (84)            block_q3_K (110)
 *   OFF SIZE FIELD             OFF SIZE FIELD
 *   0   16   u8 scales[16]     0   32   u8 hmask[32]
 *   16  64   u8 qs[64]         32  64   u8 qs[64]
 *   80  2    f16 d             96  12   u8 scales[12] (6-bit, packed)
 *   82  2    f16 dmin          108 2    f16 d
 *
 *   block_q4_K (144)           block_q5_K (176)
 *   0   2    f16 d             0   2    f16 d
 *   2   2    f16 dmin          2   2    f16 dmin
 *   4   12   u8 scales[12]     4   12   u8 scales[12]
 *   16  128  u8 qs[128]        16  32   u8 qh[32]
 *                              48  128  u8 qs[128]
 *   block_q6_K (210)           block_q8_K (292)
 *   0   128  u8 ql[128]        0   4    f32 d
 *   128 64   u8 qh[64]         4   256  int8 qs[256]
 *   192 16   int8 scales[16]   260 32   int16 bsums[16] (unused here)
 *   208 2    f16 d
 *
 * With a = e / 128, r = e % 128, l = e % 32, s = r / 32 (in Q2/Q3/Q6),
 * c = e / 64 and h = e % 64 / 32 (in Q4/Q5), the element bits are:
 *
 *   Q2_K  q = qs[32a+l] >> 2s & 3           y = d*(sc&15)*q - dmin*(sc>>4)
 *   Q3_K  q = (qs[32a+l] >> 2s & 3) - (hmask[l] >> e/32 & 1 ? 0 : 4)
 *                                           y = d*(sc-32)*q
 *   Q4_K  q = qs[32c+l] >> 4h & 15          y = d*sc*q - dmin*m
 *   Q5_K  q = as Q4_K | (qh[l] >> e/32 & 1) << 4
 *   Q6_K  q = (ql[64a+r%64] >> 4(r/64) & 15 | (qh[32a+l] >> 2s & 3) << 4)
 *             - 32                          y = d*sc*q
 *   Q8_K  q = qs[e]                         y = d*q
 *
 * sc (and m) is that of sub-block e/16 (Q2, Q3, Q6) or e/32 (Q4, Q5),
 * computed in float32 in numpy's order, (d*sc)*q - dmin*m, as
 * ggml-quants.c's dequantize_row_q*_K also do.  An f16 times a 6-bit
 * scale times a 6-bit q is exact in float32, so only the subtraction
 * rounds (an FMA would give the same bits); Q8_K's f32 d * q rounds once.
 */
#include "fmt/gguf/gguf_codec_int.h"

/* The 16 Q3_K scales, (low 4 bits | 2 high bits << 4) - 32:
 *   scales[0..7]: low nibble -> scale 0..7, high nibble -> scale 8..15
 *   scales[8+k]: bits 2j..2j+1 are the high bits of scale 4j+k */
static void q3_scales(const unsigned char *s, int sc[16])
{
	for (int i = 0; i < 16; i++) {
		int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
		int hi = s[8 + i % 4] >> (2 * (i / 4)) & 3;

		sc[i] = (lo | hi << 4) - 32;
	}
}

/* get_scale_min_k4: the 6-bit scale and min of Q4_K/Q5_K sub-block j:
 *   j < 4: scales[j] & 63 and scales[j+4] & 63
 *   j >= 4: low 4 bits from scales[j+4] (scale: low nibble, min: high),
 *           high 2 bits from the top of scales[j-4] and scales[j] */
static void k4_scale_min(const unsigned char *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
		*m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
	}
}

/* y = dl * q - ml, the product (exact here) first: numpy's order */
static float mul_sub(float dl, float q, float ml)
{
	float t = dl * q;

	return t - ml;
}

void gguf_dequant_q2_k(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++, src += 84, dst += 256) {
		float d = gguf_f16_at(src + 80), dmin = gguf_f16_at(src + 82);
		float dl[16], ml[16];

		for (int j = 0; j < 16; j++) {
			dl[j] = d * (float)(src[j] & 15);
			ml[j] = dmin * (float)(src[j] >> 4);
		}
		for (int e = 0; e < 256; e++) {
			int a = e / 128, s = e % 128 / 32, l = e % 32;
			int q = src[16 + 32 * a + l] >> 2 * s & 3;

			dst[e] = mul_sub(dl[e / 16], (float)q, ml[e / 16]);
		}
	}
}

void gguf_dequant_q3_k(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++, src += 110, dst += 256) {
		float d = gguf_f16_at(src + 108), dl[16];
		int sc[16];

		q3_scales(src + 96, sc);
		for (int j = 0; j < 16; j++)
			dl[j] = d * (float)sc[j];
		for (int e = 0; e < 256; e++) {
			int a = e / 128, s = e % 128 / 32, l = e % 32;
			int q = src[32 + 32 * a + l] >> 2 * s & 3;

			/* the offset is 4 when the hmask bit is clear */
			if (!(src[l] >> e / 32 & 1))
				q -= 4;
			dst[e] = dl[e / 16] * (float)q;
		}
	}
}

/*
 * Q4_K and Q5_K share everything but Q5_K's fifth bit: d, dmin and the
 * packed scales at 0, 2 and 4, then (@qh non-NULL) qh[32] and qs[128].
 */
static void dequant_k45(const unsigned char *b, const unsigned char *qh,
			const unsigned char *qs, float *y)
{
	float d = gguf_f16_at(b), dmin = gguf_f16_at(b + 2), dl[8], ml[8];

	for (int j = 0; j < 8; j++) {
		int sc, m;

		k4_scale_min(b + 4, j, &sc, &m);
		dl[j] = d * (float)sc;
		ml[j] = dmin * (float)m;
	}
	for (int e = 0; e < 256; e++) {
		int c = e / 64, h = e % 64 / 32, l = e % 32;
		int q = qs[32 * c + l] >> 4 * h & 15;

		if (qh)
			q |= (qh[l] >> e / 32 & 1) << 4;
		y[e] = mul_sub(dl[e / 32], (float)q, ml[e / 32]);
	}
}

void gguf_dequant_q4_k(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++, src += 144, dst += 256)
		dequant_k45(src, NULL, src + 16, dst);
}

void gguf_dequant_q5_k(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++, src += 176, dst += 256)
		dequant_k45(src, src + 16, src + 48, dst);
}

void gguf_dequant_q6_k(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++, src += 210, dst += 256) {
		float d = gguf_f16_at(src + 208), dl[16];

		for (int j = 0; j < 16; j++)
			dl[j] = d * (float)gguf_s8(src[192 + j]);
		for (int e = 0; e < 256; e++) {
			int a = e / 128, r = e % 128, l = e % 32;
			int lo = src[64 * a + r % 64] >> 4 * (r / 64) & 15;
			int hi = src[128 + 32 * a + l] >> 2 * (r / 32) & 3;

			dst[e] = dl[e / 16] * (float)((lo | hi << 4) - 32);
		}
	}
}

void gguf_dequant_q8_k(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++, src += 292, dst += 256) {
		float d = f32_of(le32(src));

		for (int e = 0; e < 256; e++)
			dst[e] = d * (float)gguf_s8(src[4 + e]);
	}
}
