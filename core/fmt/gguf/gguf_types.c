/*
 * gguf_types.c - the table of ggml tensor types (gguf-py constants.py:
 * GGMLQuantizationType and GGML_QUANT_SIZES), lookups by id and name, and
 * the codecs of the plain types, whose blocks are one element:
 *
 *   type  id  bytes  element (little-endian)     dequant / quant
 *   F32    0  4      IEEE binary32               copy / copy
 *   F16    1  2      IEEE binary16               numpy astype, both ways
 *   I8    24  1      int8                        astype(float32) / -
 *   I16   25  2      int16                       astype(float32) / -
 *   I32   26  4      int32                       astype(float32) / -
 *   I64   27  8      int64                       astype(float32) / -
 *   F64   28  8      IEEE binary64               astype(float32) / -
 *   BF16  30  2      top half of a binary32      << 16 / gguf-py BF16
 *
 * gguf.quants.dequantize has no I8..I64 or F64 (NotImplementedError);
 * numpy's astype(np.float32), the nearest float, is what is matched.
 */
#include "fmt/gguf/gguf_types.h"
#include "fmt/gguf/gguf_codec_int.h"

#include <stdbool.h>
#include <stddef.h>
#include <strings.h>

static void f32_dequant(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		dst[i] = f32_of(le32(src + 4 * i));
}

static void f32_quant(const float *src, unsigned char *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		ord_store(dst + 4 * i, 4, false, f32_bits(src[i]));
}

static void f16_dequant(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		dst[i] = gguf_f16_at(src + 2 * i);
}

static void f16_quant_c(const float *src, unsigned char *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		ord_store(dst + 2 * i, 2, false, gguf_f32_to_f16(src[i]));
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

/*
 * The same, 8 values at a time by the CPU's F16C conversion where it has
 * one: round to nearest even with subnormals, as numpy's astype(float16)
 * and gguf_f32_to_f16() round, so the bits are the same, but for a NaN,
 * whose quiet bit the instruction sets and numpy keeps as it is: a group
 * of 8 holding a NaN goes the scalar way.  (On a little-endian x86 the
 * stored half is the file's.)
 */
__attribute__((target("avx,f16c")))
static void f16_quant_f16c(const float *src, unsigned char *dst, uint64_t n)
{
	uint64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps(src + i);
		__m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);	/* x != x */

		if (_mm256_movemask_ps(nan)) {
			f16_quant_c(src + i, dst + 2 * i, 8);
			continue;
		}
		_mm_storeu_si128((__m128i *)(void *)(dst + 2 * i),
				 _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT |
						 _MM_FROUND_NO_EXC));
	}
	f16_quant_c(src + i, dst + 2 * i, n - i);
}

static void f16_quant(const float *src, unsigned char *dst, uint64_t n)
{
	static int f16c = -1;	/* every thread finds the same answer */
	int yes = __atomic_load_n(&f16c, __ATOMIC_RELAXED);

	if (yes < 0) {
		unsigned a, b, c, d;

		/* CPUID.1:ECX.F16C (clang 14 has no "f16c" to ask by name);
		   "avx" also asks whether the OS saves the registers */
		yes = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) &&
		      __builtin_cpu_supports("avx");
		__atomic_store_n(&f16c, yes, __ATOMIC_RELAXED);
	}
	if (yes)
		f16_quant_f16c(src, dst, n);
	else
		f16_quant_c(src, dst, n);
}
#else
static void f16_quant(const float *src, unsigned char *dst, uint64_t n)
{
	f16_quant_c(src, dst, n);
}
#endif

static void bf16_dequant(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		dst[i] = view_bf16_to_f32(le16(src + 2 * i));
}

/*
 * gguf-py's BF16.quantize_blocks (ggml_compute_fp32_to_bf16): a NaN keeps
 * its top half with the quiet bit forced on, where view_f32_to_bf16()
 * (torch's rule) keeps a top half whose payload is already non-zero;
 * anything else rounds to nearest even in both.
 */
static void bf16_quant(const float *src, unsigned char *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint32_t u = f32_bits(src[i]);
		uint16_t h = (u & 0x7fffffff) > 0x7f800000
				     ? (uint16_t)(u >> 16 | 0x40)
				     : view_f32_to_bf16(src[i]);

		ord_store(dst + 2 * i, 2, false, h);
	}
}

static void f64_dequant(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		dst[i] = (float)f64_of(le64(src + 8 * i));
}

/* The two's complement value of the low @bits bits of @v, without
 * implementation-defined conversions to a narrower signed type. */
static int64_t sext(uint64_t v, unsigned bits)
{
	if (bits < 64 && v >> (bits - 1))
		v |= ~UINT64_C(0) << bits;
	return v > INT64_MAX ? -(int64_t)~v - 1 : (int64_t)v;
}

static void i8_dequant(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		dst[i] = (float)gguf_s8(src[i]);
}

static void i16_dequant(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		dst[i] = (float)sext(le16(src + 2 * i), 16);
}

static void i32_dequant(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		dst[i] = (float)sext(le32(src + 4 * i), 32);
}

/* int64 -> float rounds once, to nearest even, as numpy's C cast does */
static void i64_dequant(const unsigned char *src, float *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		dst[i] = (float)sext(le64(src + 8 * i), 64);
}

#define PLAIN(i, n, b, t, dq, q) \
	[i] = { .id = i, .name = n, .block = 1, .bytes = b, .torch = t, \
		.dequant = dq, .quant = q }
#define BLOCK(i, n, bl, b, dq) \
	[i] = { .id = i, .name = n, .block = bl, .bytes = b, .dequant = dq }

/* Indexed by id; a hole (name NULL) is an unknown id. */
static const struct gguf_type types[] = {
	PLAIN(0, "F32", 4, "float32", f32_dequant, f32_quant),
	PLAIN(1, "F16", 2, "float16", f16_dequant, f16_quant),
	BLOCK(2, "Q4_0", 32, 18, gguf_dequant_q4_0),
	BLOCK(3, "Q4_1", 32, 20, gguf_dequant_q4_1),
	/* 4, 5: Q4_2 and Q4_3, removed from ggml */
	BLOCK(6, "Q5_0", 32, 22, gguf_dequant_q5_0),
	BLOCK(7, "Q5_1", 32, 24, gguf_dequant_q5_1),
	[8] = { .id = 8, .name = "Q8_0", .block = 32, .bytes = 34,
		.dequant = gguf_dequant_q8_0, .quant = gguf_quant_q8_0 },
	BLOCK(9, "Q8_1", 32, 36, NULL),
	BLOCK(10, "Q2_K", 256, 84, gguf_dequant_q2_k),
	BLOCK(11, "Q3_K", 256, 110, gguf_dequant_q3_k),
	BLOCK(12, "Q4_K", 256, 144, gguf_dequant_q4_k),
	BLOCK(13, "Q5_K", 256, 176, gguf_dequant_q5_k),
	BLOCK(14, "Q6_K", 256, 210, gguf_dequant_q6_k),
	BLOCK(15, "Q8_K", 256, 292, gguf_dequant_q8_k),
	BLOCK(16, "IQ2_XXS", 256, 66, NULL),
	BLOCK(17, "IQ2_XS", 256, 74, NULL),
	BLOCK(18, "IQ3_XXS", 256, 98, NULL),
	BLOCK(19, "IQ1_S", 256, 50, NULL),
	BLOCK(20, "IQ4_NL", 32, 18, NULL),
	BLOCK(21, "IQ3_S", 256, 110, NULL),
	BLOCK(22, "IQ2_S", 256, 82, NULL),
	BLOCK(23, "IQ4_XS", 256, 136, NULL),
	PLAIN(24, "I8", 1, "int8", i8_dequant, NULL),
	PLAIN(25, "I16", 2, "int16", i16_dequant, NULL),
	PLAIN(26, "I32", 4, "int32", i32_dequant, NULL),
	PLAIN(27, "I64", 8, "int64", i64_dequant, NULL),
	PLAIN(28, "F64", 8, "float64", f64_dequant, NULL),
	BLOCK(29, "IQ1_M", 256, 56, NULL),
	PLAIN(30, "BF16", 2, "bfloat16", bf16_dequant, bf16_quant),
	/* 31..33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8, removed from gguf files */
	BLOCK(34, "TQ1_0", 256, 54, NULL),
	BLOCK(35, "TQ2_0", 256, 66, NULL),
	/* 36..38: IQ4_NL_4_4, _4_8, _8_8, removed likewise */
	BLOCK(39, "MXFP4", 32, 17, NULL),
	BLOCK(40, "NVFP4", 64, 36, NULL),
	BLOCK(41, "Q1_0", 128, 18, NULL),
	BLOCK(42, "Q2_0", 64, 18, NULL),
};

#define NTYPES (sizeof(types) / sizeof(types[0]))

const struct gguf_type *gguf_type_by_id(uint32_t id)
{
	if (id >= NTYPES || !types[id].name)
		return NULL;
	return &types[id];
}

const struct gguf_type *gguf_type_by_name(const char *name)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].name && !strcasecmp(types[i].name, name))
			return &types[i];
	return NULL;
}

const struct gguf_type *gguf_type_by_torch(const char *dtype)
{
	const struct gguf_type *t;

	for (unsigned k = 0; (t = gguf_type_at(k)); k++)
		if (t->torch && !strcmp(t->torch, dtype))
			return t;
	return NULL;
}

const struct gguf_type *gguf_type_at(unsigned k)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].name && !k--)
			return &types[i];
	return NULL;
}

void gguf_swap(const struct gguf_type *t, unsigned char *p, uint64_t nblocks)
{
	unsigned size = t->bytes;

	if (t->block != 1 || size < 2)
		return;
	for (uint64_t i = 0; i < nblocks; i++, p += size)
		for (unsigned a = 0, b = size - 1; a < b; a++, b--) {
			unsigned char c = p[a];

			p[a] = p[b];
			p[b] = c;
		}
}
