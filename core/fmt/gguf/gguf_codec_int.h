/*
 * gguf_codec_int.h - what the codec files of core/fmt/gguf share: the
 * block codecs the type table points at, the f16 scale helpers, and the
 * floating-point rules the codecs depend on to match gguf-py's numpy
 * float32 arithmetic bit for bit: no fast-math, float evaluated as float,
 * and no a*b+c fused into one rounding as numpy never fuses.  (Today's
 * products are exact, so a fused one would give the same bits; the rule
 * is for code to come.)  CMakeLists.txt compiles these files with
 * -ffp-contract=off, as GCC ignores the STDC pragma.
 */
#ifndef PT_FMT_GGUF_GGUF_CODEC_INT_H
#define PT_FMT_GGUF_GGUF_CODEC_INT_H

#ifndef PT_INTERNAL
#error "gguf_codec_int.h is internal to core/fmt/gguf (define PT_INTERNAL)"
#endif

#include <float.h>
#include <stdint.h>

#include "util/le.h"
#include "view/view.h"

#if defined(__FAST_MATH__)
#error "the GGUF codecs must not be built with -ffast-math"
#endif
/* 0, or 16 (GNU C: _Float16 evaluated as float) keep float in float */
#if FLT_EVAL_METHOD < 0 || FLT_EVAL_METHOD == 1 || FLT_EVAL_METHOD == 2
#error "the GGUF codecs need float arithmetic done in float"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* The little-endian f16 at @p, widened as numpy's astype(float32) does
 * (exactly; a NaN keeps its payload and is not quieted). */
static inline float gguf_f16_at(const unsigned char *p)
{
	return view_f16_to_f32(le16(p));
}

/*
 * @f as numpy's astype(float16) rounds it (npy_floatbits_to_halfbits):
 * nearest, ties to even, like view_f32_to_f16(), except a NaN whose top
 * ten payload bits are zero: numpy makes it sign|0x7c01, view_num.c (as
 * torch) sign|0x7e00.
 */
static inline uint16_t gguf_f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7f800000) == 0x7f800000 && (u & 0x7fffff) &&
	    !(u & 0x7fe000))
		return (uint16_t)((u >> 16 & 0x8000) | 0x7c01);
	return view_f32_to_f16(f);
}

/* The int8 of byte @b (no implementation-defined narrowing). */
static inline int gguf_s8(unsigned char b)
{
	return b < 0x80 ? b : b - 256;
}

/* ---- gguf_quant.c ---- */
void gguf_dequant_q4_0(const unsigned char *src, float *dst, uint64_t n);
void gguf_dequant_q4_1(const unsigned char *src, float *dst, uint64_t n);
void gguf_dequant_q5_0(const unsigned char *src, float *dst, uint64_t n);
void gguf_dequant_q5_1(const unsigned char *src, float *dst, uint64_t n);
void gguf_dequant_q8_0(const unsigned char *src, float *dst, uint64_t n);
void gguf_quant_q8_0(const float *src, unsigned char *dst, uint64_t n);

/* ---- gguf_kquant.c ---- */
void gguf_dequant_q2_k(const unsigned char *src, float *dst, uint64_t n);
void gguf_dequant_q3_k(const unsigned char *src, float *dst, uint64_t n);
void gguf_dequant_q4_k(const unsigned char *src, float *dst, uint64_t n);
void gguf_dequant_q5_k(const unsigned char *src, float *dst, uint64_t n);
void gguf_dequant_q6_k(const unsigned char *src, float *dst, uint64_t n);
void gguf_dequant_q8_k(const unsigned char *src, float *dst, uint64_t n);

#endif
