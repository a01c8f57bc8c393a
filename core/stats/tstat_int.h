/*
 * tstat_int.h - internals of core/stats shared with the tests: the
 * float32 block sums (tstat_f32.c) and which instruction set computes
 * them.  Not a public interface.
 */
#ifndef PT_STATS_TSTAT_INT_H
#define PT_STATS_TSTAT_INT_H

#ifndef PT_INTERNAL
#error "tstat_int.h is internal to core/stats and its tests"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TSTAT_LANES	8	/* independent sums per block */

enum tstat_isa { TSTAT_ISA_C, TSTAT_ISA_SSE2, TSTAT_ISA_AVX2 };

/* One block's figures: sums of (x - k) and (x - k)^2, min, max, zeros. */
struct tstat_f32 {
	double s1, s2;
	float mn, mx;
	uint64_t zeros;
};

/*
 * Sum @n >= 1 little-endian float32 at @p, shifted by @k, into *@o with
 * instruction set @isa; false when this CPU or build lacks it.  Every
 * set gives the same bits.  Non-finite elements make s1 or s2 non-finite.
 */
bool tstat_f32_run(int isa, const unsigned char *p, size_t n, double k,
		   struct tstat_f32 *o);

/* The fastest set this CPU has (what tstat_feed() uses). */
int tstat_f32_isa(void);

#endif
