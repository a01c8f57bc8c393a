/*
 * tstat_f32.c - the hot loop of ptls --stats: one pass over a block of
 * little-endian float32 giving the sums tstat.c merges (sum and sum of
 * squares of x - k, min, max, zeros).  Eight double lanes, lane j taking
 * elements j, j + 8, ...: the additions do not wait on each other, and
 * the SSE2 and AVX2 versions add exactly what the plain C one adds, in
 * the same order, so all three give the same bits (tests/test_tstat.c).
 * NaN and Inf need no test here: they make the sums non-finite.
 */
#include "stats/tstat_int.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TSTAT_X86 1
#include <immintrin.h>
#endif

/* The lanes' sums in one fixed order, so every version ends alike. */
static void finish(const double *s1, const double *s2, const float *mn,
		   const float *mx, uint64_t zeros, struct tstat_f32 *o)
{
	o->s1 = ((s1[0] + s1[1]) + (s1[2] + s1[3])) +
		((s1[4] + s1[5]) + (s1[6] + s1[7]));
	o->s2 = ((s2[0] + s2[1]) + (s2[2] + s2[3])) +
		((s2[4] + s2[5]) + (s2[6] + s2[7]));
	o->mn = mn[0];
	o->mx = mx[0];
	for (int l = 1; l < TSTAT_LANES; l++) {
		o->mn = mn[l] < o->mn ? mn[l] : o->mn;
		o->mx = mx[l] > o->mx ? mx[l] : o->mx;
	}
	o->zeros = zeros;
}

/* Elements [i, n) into the lanes, as the vector loops would. */
static void tail(const unsigned char *p, size_t i, size_t n, double k,
		 double *s1, double *s2, float *mn, float *mx,
		 uint64_t *zeros)
{
	for (; i < n; i++) {
		int l = (int)(i % TSTAT_LANES);
		float f;
		double d;

		memcpy(&f, p + 4 * i, 4);
		d = (double)f - k;
		s1[l] += d;
		s2[l] += d * d;
		mn[l] = f < mn[l] ? f : mn[l];
		mx[l] = f > mx[l] ? f : mx[l];
		*zeros += f == 0;
	}
}

static void sums_c(const unsigned char *p, size_t n, double k,
		   struct tstat_f32 *o)
{
	double s1[TSTAT_LANES] = { 0 }, s2[TSTAT_LANES] = { 0 };
	float mn[TSTAT_LANES], mx[TSTAT_LANES], x0;
	uint64_t zeros = 0;

	memcpy(&x0, p, 4);
	for (int l = 0; l < TSTAT_LANES; l++)
		mn[l] = mx[l] = x0;
	tail(p, 0, n, k, s1, s2, mn, mx, &zeros);
	finish(s1, s2, mn, mx, zeros, o);
}

#ifdef TSTAT_X86
/* Eight lanes in four pairs; the zero test as a mask subtracted (-1). */
static void sums_sse2(const unsigned char *p, size_t n, double k,
		      struct tstat_f32 *o)
{
	double s1[TSTAT_LANES], s2[TSTAT_LANES];
	float mn[TSTAT_LANES], mx[TSTAT_LANES], x0;
	uint32_t zl[8];
	__m128d a0 = _mm_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
	__m128d q0 = a0, q1 = a0, q2 = a0, q3 = a0, vk = _mm_set1_pd(k);
	__m128 mn0, mn1, mx0, mx1, zero = _mm_setzero_ps();
	__m128i z0 = _mm_setzero_si128(), z1 = z0;
	uint64_t zeros = 0;
	size_t i;

	memcpy(&x0, p, 4);
	mn0 = mn1 = mx0 = mx1 = _mm_set1_ps(x0);
	for (i = 0; i + 8 <= n; i += 8) {
		__m128 f0, f1;
		__m128d d0, d1, d2, d3;

		memcpy(&f0, p + 4 * i, 16);
		memcpy(&f1, p + 4 * i + 16, 16);
		d0 = _mm_sub_pd(_mm_cvtps_pd(f0), vk);
		d1 = _mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(f0, f0)), vk);
		d2 = _mm_sub_pd(_mm_cvtps_pd(f1), vk);
		d3 = _mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(f1, f1)), vk);
		a0 = _mm_add_pd(a0, d0);
		a1 = _mm_add_pd(a1, d1);
		a2 = _mm_add_pd(a2, d2);
		a3 = _mm_add_pd(a3, d3);
		q0 = _mm_add_pd(q0, _mm_mul_pd(d0, d0));
		q1 = _mm_add_pd(q1, _mm_mul_pd(d1, d1));
		q2 = _mm_add_pd(q2, _mm_mul_pd(d2, d2));
		q3 = _mm_add_pd(q3, _mm_mul_pd(d3, d3));
		mn0 = _mm_min_ps(f0, mn0);
		mn1 = _mm_min_ps(f1, mn1);
		mx0 = _mm_max_ps(f0, mx0);
		mx1 = _mm_max_ps(f1, mx1);
		z0 = _mm_sub_epi32(z0, _mm_castps_si128(_mm_cmpeq_ps(f0, zero)));
		z1 = _mm_sub_epi32(z1, _mm_castps_si128(_mm_cmpeq_ps(f1, zero)));
	}
	_mm_storeu_pd(s1, a0);
	_mm_storeu_pd(s1 + 2, a1);
	_mm_storeu_pd(s1 + 4, a2);
	_mm_storeu_pd(s1 + 6, a3);
	_mm_storeu_pd(s2, q0);
	_mm_storeu_pd(s2 + 2, q1);
	_mm_storeu_pd(s2 + 4, q2);
	_mm_storeu_pd(s2 + 6, q3);
	_mm_storeu_ps(mn, mn0);
	_mm_storeu_ps(mn + 4, mn1);
	_mm_storeu_ps(mx, mx0);
	_mm_storeu_ps(mx + 4, mx1);
	_mm_storeu_si128((__m128i *)(void *)zl, z0);
	_mm_storeu_si128((__m128i *)(void *)(zl + 4), z1);
	for (int l = 0; l < 8; l++)
		zeros += zl[l];
	tail(p, i, n, k, s1, s2, mn, mx, &zeros);
	finish(s1, s2, mn, mx, zeros, o);
}

/* The same lanes, four to a register. */
__attribute__((target("avx2")))
static void sums_avx2(const unsigned char *p, size_t n, double k,
		      struct tstat_f32 *o)
{
	double s1[TSTAT_LANES], s2[TSTAT_LANES];
	float mn[TSTAT_LANES], mx[TSTAT_LANES], x0;
	uint32_t zl[8];
	__m256d a0 = _mm256_setzero_pd(), a1 = a0, q0 = a0, q1 = a0;
	__m256d vk = _mm256_set1_pd(k);
	__m256 vmn, vmx, zero = _mm256_setzero_ps();
	__m256i z = _mm256_setzero_si256();
	uint64_t zeros = 0;
	size_t i;

	memcpy(&x0, p, 4);
	vmn = vmx = _mm256_set1_ps(x0);
	for (i = 0; i + 8 <= n; i += 8) {
		__m256 f;
		__m256d d0, d1;

		memcpy(&f, p + 4 * i, 32);
		d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f)), vk);
		d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)), vk);
		a0 = _mm256_add_pd(a0, d0);
		a1 = _mm256_add_pd(a1, d1);
		q0 = _mm256_add_pd(q0, _mm256_mul_pd(d0, d0));
		q1 = _mm256_add_pd(q1, _mm256_mul_pd(d1, d1));
		vmn = _mm256_min_ps(f, vmn);
		vmx = _mm256_max_ps(f, vmx);
		z = _mm256_sub_epi32(z, _mm256_castps_si256(
			_mm256_cmp_ps(f, zero, _CMP_EQ_OQ)));
	}
	_mm256_storeu_pd(s1, a0);
	_mm256_storeu_pd(s1 + 4, a1);
	_mm256_storeu_pd(s2, q0);
	_mm256_storeu_pd(s2 + 4, q1);
	_mm256_storeu_ps(mn, vmn);
	_mm256_storeu_ps(mx, vmx);
	_mm256_storeu_si256((__m256i *)(void *)zl, z);
	for (int l = 0; l < 8; l++)
		zeros += zl[l];
	tail(p, i, n, k, s1, s2, mn, mx, &zeros);
	finish(s1, s2, mn, mx, zeros, o);
}
#endif

bool tstat_f32_run(int isa, const unsigned char *p, size_t n, double k,
		   struct tstat_f32 *o)
{
	switch (isa) {
	case TSTAT_ISA_C:
		sums_c(p, n, k, o);
		return true;
#ifdef TSTAT_X86
	case TSTAT_ISA_SSE2:
		sums_sse2(p, n, k, o);
		return true;
	case TSTAT_ISA_AVX2:
		if (!__builtin_cpu_supports("avx2"))
			return false;
		sums_avx2(p, n, k, o);
		return true;
#endif
	default:
		return false;
	}
}

int tstat_f32_isa(void)
{
#ifdef TSTAT_X86
	return __builtin_cpu_supports("avx2") ? TSTAT_ISA_AVX2 :
	       TSTAT_ISA_SSE2;
#else
	return TSTAT_ISA_C;
#endif
}
