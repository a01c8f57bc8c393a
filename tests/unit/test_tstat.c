/*
 * test_tstat.c - per-tensor statistics (core/stats) without torch: the
 * float32 block sums give the same bits whichever instruction set this
 * CPU lets tstat_f32.c use (plain C, SSE2, AVX2), at every length and
 * byte alignment; a NaN or Inf anywhere in a block shows in its sums;
 * and tstat_feed() agrees with a two-pass long double reference on data
 * that punishes a naive sum of squares.  Agreement with numpy for every
 * dtype is tests/tools/stats_cli.sh's job.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "stats/tstat.h"
#include "stats/tstat_int.h"
#include "test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

/* Values in @mid +/- @spread; with @odd, 3 in 16 are 0, -0, subnormal. */
static float sample(float mid, float spread, bool odd)
{
	uint32_t r = odd ? next() % 16 : 15, u;
	float f;

	switch (r) {
	case 0:
		return 0.0f;
	case 1:
		return -0.0f;
	case 2:
		u = next() & 0x807fffffu;	/* a subnormal */
		memcpy(&f, &u, 4);
		return f;
	default:
		return mid + spread * ((float)(next() % 2000001) / 1e6f - 1);
	}
}

static bool same(const struct tstat_f32 *a, const struct tstat_f32 *b)
{
	return !memcmp(&a->s1, &b->s1, sizeof(a->s1)) &&
	       !memcmp(&a->s2, &b->s2, sizeof(a->s2)) &&
	       !memcmp(&a->mn, &b->mn, sizeof(a->mn)) &&
	       !memcmp(&a->mx, &b->mx, sizeof(a->mx)) && a->zeros == b->zeros;
}

Test(tstat_f32, same_bits_on_every_isa)
{
	unsigned char *buf = calloc(1, 4 * TSTAT_BLOCK + 8);
	int isas = 0;

	cr_assert(buf);
	for (int isa = TSTAT_ISA_C; isa <= TSTAT_ISA_AVX2; isa++) {
		struct tstat_f32 want, got;

		if (!tstat_f32_run(isa, buf, 1, 0, &got))
			continue;	/* not on this CPU or build */
		isas++;
		for (size_t n = 1; n <= TSTAT_BLOCK; n += n < 40 ? 1 : 61) {
			size_t off = n % 5;	/* any byte alignment */
			float f;
			double k;

			for (size_t i = 0; i < n; i++) {
				f = sample(n % 3 ? 0.5f : -7e5f, 3.0f, true);
				memcpy(buf + off + 4 * i, &f, 4);
			}
			memcpy(&f, buf + off, 4);
			k = f;
			tstat_f32_run(TSTAT_ISA_C, buf + off, n, k, &want);
			tstat_f32_run(isa, buf + off, n, k, &got);
			cr_assert(same(&want, &got), "isa %d, n %zu: s1 %a/%a "
				  "s2 %a/%a zeros %llu/%llu", isa, n, want.s1,
				  got.s1, want.s2, got.s2,
				  (unsigned long long)want.zeros,
				  (unsigned long long)got.zeros);
		}
	}
	cr_assert_geq(isas, 1);
	cr_assert(tstat_f32_run(tstat_f32_isa(), buf, 1, 0, &(struct
		  tstat_f32){ 0 }), "the chosen isa runs");
	free(buf);
	assert_no_leaks();
}

Test(tstat_f32, nonfinite_shows_in_the_sums)
{
	static const float bad[] = { NAN, -NAN, INFINITY, -INFINITY };
	float v[37] = { 0 };

	for (int isa = TSTAT_ISA_C; isa <= TSTAT_ISA_AVX2; isa++) {
		struct tstat_f32 o;

		if (!tstat_f32_run(isa, (unsigned char *)v, 1, 0, &o))
			continue;
		for (size_t b = 0; b < 4; b++)
			for (size_t at = 0; at < 37; at++) {
				for (size_t i = 0; i < 37; i++)
					v[i] = 3.5f + (float)i;
				v[at] = bad[b];
				tstat_f32_run(isa, (unsigned char *)v, 37, 3.5,
					      &o);
				cr_assert(!isfinite(o.s1) || !isfinite(o.s2),
					  "isa %d: %g at %zu", isa, bad[b], at);
			}
	}
}

/*
 * 3 blocks and a bit of 1e4 +/- 0.01, the first element of each block
 * 1e4 + 0.5 (so the shift K is off the mean by 50 spreads), NaN and Inf
 * planted: mean, std and L2 against a two-pass long double computation,
 * counts exact.  A plain sum of squares would be off by about 1e-5 here
 * (sum x^2 ~ 3e11 against m2 ~ 1).
 */
Test(tstat, float32_matches_two_pass_reference)
{
	const struct ckpt_dtype *dt = ckpt_dtype_by_name("float32");
	size_t n = 3 * TSTAT_BLOCK + 77, fin = 0;
	float *v = malloc(n * sizeof(*v)), mn = INFINITY, mx = -INFINITY;
	long double sum = 0, m2 = 0, sq = 0, mean, sd;
	struct tstat *s = malloc(sizeof(*s));

	cr_assert(v && s && dt);
	for (size_t i = 0; i < n; i++)
		v[i] = i % TSTAT_BLOCK ? sample(1e4f, 0.01f, false) :
		       1e4f + 0.5f;
	v[5] = NAN;
	v[TSTAT_BLOCK + 3] = INFINITY;
	v[2 * TSTAT_BLOCK + 9] = -INFINITY;
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i])) {
			sum += v[i];
			sq += (long double)v[i] * v[i];
			mn = fminf(mn, v[i]);
			mx = fmaxf(mx, v[i]);
			fin++;
		}
	mean = sum / fin;
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i]))
			m2 += (v[i] - mean) * (v[i] - mean);
	sd = sqrtl(m2 / fin);
	tstat_init(s, dt, false);
	tstat_feed(s, v, 1000);		/* pieces that cut blocks */
	tstat_feed(s, v + 1000, n - 1000);
	cr_assert_eq(s->n, n);
	cr_assert_eq(s->finite, fin);
	cr_assert_eq(s->nan, 1);
	cr_assert_eq(s->pinf, 1);
	cr_assert_eq(s->ninf, 1);
	cr_assert_eq(s->zero, 0);
	cr_assert_eq(s->min, mn);
	cr_assert_eq(s->max, mx);
	cr_assert_float_eq(s->mean, (double)mean, 1e-12 * fabs((double)mean));
	cr_assert_float_eq(tstat_std(s), (double)sd, 1e-10 * (double)sd,
			   "std %.17g, want %.17g", tstat_std(s), (double)sd);
	cr_assert_float_eq(tstat_l2(s), (double)sqrtl(sq),
			   1e-12 * (double)sqrtl(sq));
	free(v);
	free(s);
	assert_no_leaks();
}
