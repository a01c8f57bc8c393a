/*
 * tstat.h - streaming statistics of one tensor's elements, in memory
 * independent of its size: feed the row-major bytes in pieces of any
 * whole number of elements, read min, max, mean, std, L2 norm and the
 * counts of NaN, +Inf, -Inf and zeros at the end.  Pure computation over
 * bytes (no I/O); the tools stream ckpt_tensor_read() through it.
 *
 * What each dtype means (docs/user-guide.md says the same):
 *   float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2,
 *   float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu: min, max, mean,
 *   std (population, numpy's np.std) and L2 over the finite elements;
 *   NaN and +/-Inf counted apart; zeros include -0.
 *   ints, uints, bool: the values as numbers (bool: 0 or 1), min and max
 *   exact (int64 too); nothing is ever NaN or Inf.
 *   complex32/64/128: min, max, mean, std of the modulus |z|, L2 the norm
 *   sqrt(sum |z|^2); NaN if either part is, "+Inf" counts elements with an
 *   infinite part (complex infinities have no sign: -Inf stays 0); zero
 *   when both parts are.
 *   Quantized, bits*, float4 and sub-byte dtypes: not computed
 *   (tstat_supported() is false).
 */
#ifndef PT_STATS_TSTAT_H
#define PT_STATS_TSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ckpt_dtype;

enum tstat_kind { TSTAT_NONE, TSTAT_FLOAT, TSTAT_INT, TSTAT_UINT,
		  TSTAT_BOOL, TSTAT_COMPLEX };

#define TSTAT_BLOCK	1024	/* elements decoded at once */

struct tstat {
	int kind;		/* enum tstat_kind */
	int fmt;		/* internal: the element decoder */
	int isa;		/* internal: who sums float32 blocks */
	uint8_t size;		/* bytes per element */
	bool big;		/* elements are big-endian */
	uint64_t n;		/* elements fed */
	uint64_t nan, pinf, ninf, zero;
	uint64_t finite;	/* elements in min..l2 */
	double min, max;	/* of the finite elements (|z| for complex) */
	int64_t imin, imax;	/* INT: exact */
	uint64_t umin, umax;	/* UINT, BOOL: exact */
	double mean, m2;	/* Chan's running mean and sum of squares
				   of differences, combined per block */
	double sumsq;		/* for the L2 norm */
	double blk[TSTAT_BLOCK];
};

/* Can tstat_feed() compute statistics for @dt? */
bool tstat_supported(const struct ckpt_dtype *dt);

/* Start over for elements of @dt (big-endian when @big). */
void tstat_init(struct tstat *s, const struct ckpt_dtype *dt, bool big);

/* Add @n elements at @p (n * dt->size bytes).  Unsupported: only n. */
void tstat_feed(struct tstat *s, const void *p, size_t n);

/* The results: std and L2 from the running sums (NaN when no element
 * was finite). */
double tstat_std(const struct tstat *s);
double tstat_l2(const struct tstat *s);

/* Decode one float8 byte of @dt ("float8_e4m3fn", ...) to a double;
 * exposed for tests. */
double tstat_fp8(const struct ckpt_dtype *dt, uint8_t b);

#endif
