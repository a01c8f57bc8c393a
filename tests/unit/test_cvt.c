/*
 * test_cvt.c - dtype conversion (core/cvt) without torch: every 16- and
 * 8-bit pattern widened and narrowed back, ties to even at every midpoint
 * of adjacent values, each type's overflow and NaN rule, byte order; then
 * sample.pt converted through the model, written, read back and compared
 * element by element, and ptrepack's refusals at the core.  Bit-for-bit
 * agreement with torch itself is tests/tools/ptrepack_dtype.sh's job.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "cvt/cvt.h"
#include "diag/diag.h"
#include "test_util.h"
#include "view/view.h"

#define SAMPLE PT_TEST_DATA "/sample.pt"

static const char *const floats[] = {
	"float64", "float32", "float16", "bfloat16", "float8_e4m3fn",
	"float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
};

static const struct ckpt_dtype *dt(const char *name)
{
	const struct ckpt_dtype *t = ckpt_dtype_by_name(name);

	cr_assert(t && cvt_supported(t), "%s", name);
	return t;
}

static float to_f32(const char *from, uint32_t bits)
{
	unsigned char in[2] = { bits & 0xff, bits >> 8 };
	float f;

	cvt_elems(dt(from), dt("float32"), false, CVT_TORCH2, in, &f, 1);
	return f;
}

static uint32_t from_f32(const char *to, float f)
{
	unsigned char out[2] = { 0, 0 };

	cvt_elems(dt("float32"), dt(to), false, CVT_TORCH2, &f, out, 1);
	return out[0] | (uint32_t)out[1] << 8;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

Test(cvt_elems, supports_the_eight_float_types_only)
{
	for (size_t i = 0; i < sizeof(floats) / sizeof(*floats); i++)
		cr_assert(cvt_supported(ckpt_dtype_by_name(floats[i])));
	cr_assert_not(cvt_supported(ckpt_dtype_by_name("int8")));
	cr_assert_not(cvt_supported(ckpt_dtype_by_name("complex64")));
	cr_assert_not(cvt_supported(ckpt_dtype_by_name("float8_e8m0fnu")));
	cr_assert_not(cvt_supported(NULL));
}

/* Widening is exact, so narrowing it back must give every pattern back;
   a NaN comes back as the type's one NaN (of its sign where it has one). */
Test(cvt_elems, every_narrow_pattern_survives_a_round_trip)
{
	const char *narrow[] = { "float16", "bfloat16", "float8_e4m3fn",
				 "float8_e5m2", "float8_e4m3fnuz",
				 "float8_e5m2fnuz" };

	for (size_t k = 0; k < 6; k++) {
		const struct ckpt_dtype *t = dt(narrow[k]);
		uint32_t n = t->size == 2 ? 65536 : 256;

		for (uint32_t x = 0; x < n; x++) {
			float f = to_f32(narrow[k], x);
			uint32_t back = from_f32(narrow[k], f), want = x;
			double wide;
			unsigned char b2[2] = { 0, 0 };

			if (isnan(f)) {
				if (t->size == 2)
					want = k == 0 ? (x & 0x8000) | 0x7e00
						      : 0x7fc0;
				else if (k >= 4)
					want = 0x80;
				else
					want = (x & 0x80) | 0x7f;
			}
			cr_assert_eq(back, want, "%s 0x%x -> %a -> 0x%x",
				     narrow[k], x, f, back);
			/* and through float64, which rounds to float first */
			cvt_elems(dt("float32"), dt("float64"), false,
				  CVT_TORCH2, &f, &wide, 1);
			cvt_elems(dt("float64"), t, false, CVT_TORCH2, &wide,
				  b2, 1);
			cr_assert_eq(b2[0] | (uint32_t)b2[1] << 8, want,
				     "%s 0x%x via float64", narrow[k], x);
		}
	}
	assert_no_leaks();
}

/*
 * Between two adjacent finite values of a narrow type, the float32 just
 * below the midpoint rounds down, just above rounds up, and the midpoint
 * itself to the one whose last bit is 0.  The values come from the type
 * itself (widened), not from a table.
 */
Test(cvt_elems, midpoints_round_to_even)
{
	const char *narrow[] = { "float16", "bfloat16", "float8_e4m3fn",
				 "float8_e5m2", "float8_e4m3fnuz",
				 "float8_e5m2fnuz" };

	for (size_t k = 0; k < 6; k++) {
		uint32_t n = dt(narrow[k])->size == 2 ? 0x8000 : 0x80;

		for (uint32_t x = 0; x + 1 < n; x++) {
			float lo = to_f32(narrow[k], x);
			float hi = to_f32(narrow[k], x + 1);
			double mid = ((double)lo + hi) / 2;
			float m = (float)mid;
			uint32_t even = (x & 1) ? x + 1 : x;

			if (isnan(hi) || isinf(hi) || (double)m != mid)
				continue;	/* past the top; or not exact */
			cr_assert_eq(from_f32(narrow[k], m), even,
				     "%s midpoint of 0x%x", narrow[k], x);
			cr_assert_eq(from_f32(narrow[k], nextafterf(m, 0)), x,
				     "%s below the midpoint of 0x%x",
				     narrow[k], x);
			m = nextafterf(m, INFINITY);
			cr_assert_eq(from_f32(narrow[k], m), x + 1,
				     "%s above the midpoint of 0x%x",
				     narrow[k], x);
		}
	}
}

/* Each type's top: the largest finite value, its tie, infinity, -0. */
Test(cvt_elems, overflow_infinity_and_negative_zero_per_type)
{
	/* float16: 65504 max, 65520 ties away to infinity */
	cr_assert_eq(from_f32("float16", 65504.0f), 0x7bff);
	cr_assert_eq(from_f32("float16", 65519.99f), 0x7bff);
	cr_assert_eq(from_f32("float16", 65520.0f), 0x7c00);
	cr_assert_eq(from_f32("float16", -INFINITY), 0xfc00);
	/* e4m3fn has no infinity: torch 2.x saturates to +-448 */
	cr_assert_eq(from_f32("float8_e4m3fn", 448.0f), 0x7e);
	cr_assert_eq(from_f32("float8_e4m3fn", 464.0f), 0x7e);
	cr_assert_eq(from_f32("float8_e4m3fn", 1e30f), 0x7e);
	cr_assert_eq(from_f32("float8_e4m3fn", -INFINITY), 0xfe);
	cr_assert_eq(from_f32("float8_e4m3fn", -NAN), 0xff);
	cr_assert_eq(from_f32("float8_e4m3fn", -0.0f), 0x80);
	/* e5m2 is IEEE-like: 57344 max, 61440 ties to infinity */
	cr_assert_eq(from_f32("float8_e5m2", 57344.0f), 0x7b);
	cr_assert_eq(from_f32("float8_e5m2", 61440.0f), 0x7c);
	cr_assert_eq(from_f32("float8_e5m2", NAN), 0x7f);
	/* fnuz: one NaN 0x80 for overflow, infinity and NaN; no -0 */
	cr_assert_eq(from_f32("float8_e4m3fnuz", 240.0f), 0x7f);
	cr_assert_eq(from_f32("float8_e4m3fnuz", 248.0f), 0x80);
	cr_assert_eq(from_f32("float8_e4m3fnuz", -INFINITY), 0x80);
	cr_assert_eq(from_f32("float8_e4m3fnuz", -0.0f), 0x00);
	cr_assert_eq(from_f32("float8_e4m3fnuz", -1e-30f), 0x00);
	cr_assert_eq(from_f32("float8_e5m2fnuz", 57344.0f), 0x7f);
	cr_assert_eq(from_f32("float8_e5m2fnuz", 61440.0f), 0x80);
	cr_assert_eq(from_f32("float8_e5m2fnuz", -0.0f), 0x00);
	/* a fnuz NaN widens to torch's signalling 0x7f800001 */
	cr_assert_eq(f32_bits(to_f32("float8_e4m3fnuz", 0x80)), 0x7f800001);
}

/* torch 1.13 differs in one place: float32/float64 NaN to bfloat16. */
Test(cvt_elems, torch1_flavour_changes_only_bfloat16_nan_from_wide_types)
{
	float in[4] = { NAN, -NAN, 1.5f, -INFINITY };
	uint16_t a[4], b[4];
	uint16_t h = 0x7e01, ha, hb;

	cvt_elems(dt("float32"), dt("bfloat16"), false, CVT_TORCH2, in, a, 4);
	cvt_elems(dt("float32"), dt("bfloat16"), false, CVT_TORCH1, in, b, 4);
	cr_assert_eq(a[0], 0x7fc0);
	cr_assert_eq(a[1], 0x7fc0);
	cr_assert_eq(b[0], 0xffff);
	cr_assert_eq(b[1], 0xffff);
	cr_assert_eq(a[2], b[2]);
	cr_assert_eq(a[3], b[3]);
	cvt_elems(dt("float16"), dt("bfloat16"), false, CVT_TORCH1, &h, &hb,
		  1);
	cvt_elems(dt("float16"), dt("bfloat16"), false, CVT_TORCH2, &h, &ha,
		  1);
	cr_assert_eq(ha, hb);
}

/*
 * The float32 -> bfloat16 fast path (vectors, then a tail) against the
 * general loop, which big-endian storages take: 2^24 + 3 patterns spread
 * over all of float32 (every high half, low halves varied: ties, NaNs,
 * infinities, the largest finite values), at an odd address.
 */
Test(cvt_elems, bfloat16_fast_path_is_the_general_loop)
{
	size_t n = (1u << 24) + 3;
	unsigned char *le = malloc(4 * n + 1), *be = malloc(4 * n);
	unsigned char *a = malloc(2 * n + 1), *b = malloc(2 * n);

	cr_assert(le && be && a && b);
	for (size_t i = 0; i < n; i++) {
		uint32_t lo[] = { 0, 0x8000, 0x7fff, 0x8001, 0xffff, 1 };
		uint32_t f = (uint32_t)(i >> 3 << 16 | i << 8) ^
			     lo[i % 6] ^ (uint32_t)(i >> 24);

		for (int k = 0; k < 4; k++) {
			le[1 + 4 * i + k] = (unsigned char)(f >> 8 * k);
			be[4 * i + 3 - k] = (unsigned char)(f >> 8 * k);
		}
	}
	for (int fl = 0; fl < 2; fl++) {
		enum cvt_flavour f = fl ? CVT_TORCH1 : CVT_TORCH2;

		cvt_elems(dt("float32"), dt("bfloat16"), false, f, le + 1,
			  a + 1, n);
		cvt_elems(dt("float32"), dt("bfloat16"), true, f, be, b, n);
		for (size_t i = 0; i < n; i++)
			cr_assert(a[1 + 2 * i] == b[2 * i + 1] &&
				  a[2 + 2 * i] == b[2 * i], "element %zu",
				  i);
	}
	free(le);
	free(be);
	free(a);
	free(b);
}

/* Big-endian storages convert to the same values, big-endian. */
Test(cvt_elems, big_endian_is_little_endian_swapped)
{
	for (size_t i = 0; i < 8; i++)
		for (size_t j = 0; j < 8; j++) {
			const struct ckpt_dtype *a = dt(floats[i]);
			const struct ckpt_dtype *b = dt(floats[j]);
			unsigned char in[64 * 8], sw[64 * 8], o1[64 * 8],
				o2[64 * 8];

			srand((unsigned)(i * 8 + j));
			for (size_t k = 0; k < sizeof(in); k++)
				in[k] = (unsigned char)rand();
			memcpy(sw, in, sizeof(in));
			view_swap(a, sw, 64);
			cvt_elems(a, b, false, CVT_TORCH2, in, o1, 64);
			cvt_elems(a, b, true, CVT_TORCH2, sw, o2, 64);
			view_swap(b, o2, 64);
			cr_assert_arr_eq(o1, o2, 64 * b->size, "%s -> %s",
					 a->name, b->name);
		}
}

/* ---- checkpoints ---- */

static struct ckpt *open_sample(void)
{
	struct ckpt *c;
	struct diag d;

	diag_init(&d, SAMPLE);
	cr_assert_eq(ckpt_open(SAMPLE, &c, &d), 0, "%s", d.msg);
	return c;
}

/* Every tensor of @a converted to @to must be @b's, element for element. */
static void same_values(struct ckpt *a, struct ckpt *b,
			const struct ckpt_dtype *to)
{
	struct diag d;

	diag_init(&d, "x");
	cr_assert_eq(a->ntensors, b->ntensors);
	for (uint32_t i = 0; i < a->ntensors; i++) {
		struct ckpt_tensor *x = a->tensors[i], *y = b->tensors[i];
		unsigned char bx[4096], by[4096], want[4096];

		cr_assert_eq(y->dtype, to, "tensor %u is %s", i,
			     y->dtype->name);
		cr_assert_eq(x->numel, y->numel);
		cr_assert_eq(x->offset, y->offset);
		cr_assert_leq(ckpt_tensor_nbytes(x), sizeof(bx));
		cr_assert_eq(ckpt_tensor_read(a, x, bx, ckpt_tensor_nbytes(x),
					      0, &d),
			     (long long)ckpt_tensor_nbytes(x));
		cr_assert_eq(ckpt_tensor_read(b, y, by, ckpt_tensor_nbytes(y),
					      0, &d),
			     (long long)ckpt_tensor_nbytes(y));
		cvt_elems(x->dtype, to, false, CVT_TORCH2, bx, want, x->numel);
		cr_assert_arr_eq(by, want, ckpt_tensor_nbytes(y), "tensor %u",
				 i);
	}
}

static char out_path[64];

/* Convert sample.pt to @to, write it, open what was written. */
static struct ckpt *convert(struct ckpt *c, const char *to, const char *glob,
			    struct cvt_stats *st)
{
	const struct ckpt_dtype **plan;
	struct cvt_conv *conv;
	struct ckpt *o;
	struct diag d;
	int fd;

	diag_init(&d, SAMPLE);
	strcpy(out_path, "/tmp/ptfs-cvt-XXXXXX");
	fd = mkstemp(out_path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(cvt_select(c, dt(to), glob, &plan, &d), 0, "%s", d.msg);
	cr_assert_eq(cvt_ckpt(c, dt(to), plan, CVT_TORCH2, &conv, st, &d), 0,
		     "%s", d.msg);
	free(plan);
	cr_assert_eq(ckpt_write(c, fd, NULL, &d), 0, "%s", d.msg);
	close(fd);
	cvt_conv_free(conv);
	diag_init(&d, out_path);
	cr_assert_eq(ckpt_open(out_path, &o, &d), 0, "%s", d.msg);
	unlink(out_path);
	return o;
}

Test(cvt_ckpt, sample_to_bfloat16_keeps_ties_and_values)
{
	struct ckpt *a = open_sample(), *c = open_sample(), *b;
	struct cvt_stats st;

	b = convert(c, "bfloat16", NULL, &st);
	cr_assert_eq(st.storages, 20);
	cr_assert_eq(st.tensors, 21);
	cr_assert_eq(st.bytes_out * 2, st.bytes_in);
	same_values(a, b, dt("bfloat16"));
	cr_assert_eq(b->nstorages, a->nstorages);
	/* embed.weight and head.weight still share one storage */
	cr_assert_eq(b->tensors[0]->storage, b->tensors[5]->storage);
	cr_assert_eq(b->tensors[0]->storage->dtype, dt("bfloat16"));
	ckpt_close(a);
	ckpt_close(b);
	ckpt_close(c);
	assert_no_leaks();
}

/* float8 storages are written untyped, with _rebuild_tensor_v3, and
   come back: sample -> e5m2 -> float32 equals converting twice. */
Test(cvt_ckpt, float8_and_back_through_rebuild_tensor_v3)
{
	struct ckpt *a = open_sample(), *c = open_sample(), *b, *e;
	struct cvt_stats st;

	b = convert(c, "float8_e5m2", NULL, &st);
	same_values(a, b, dt("float8_e5m2"));
	cr_assert(b->storages[0]->untyped);
	e = convert(b, "float32", NULL, &st);
	cr_assert_eq(st.tensors, 21);
	cr_assert_eq(e->storages[0]->dtype, dt("float32"));
	cr_assert_not(e->storages[0]->untyped);
	ckpt_close(b);
	b = open_sample();
	ckpt_close(c);
	c = convert(b, "float8_e5m2", NULL, &st);
	same_values(c, e, dt("float32"));
	ckpt_close(a);
	ckpt_close(b);
	ckpt_close(c);
	ckpt_close(e);
	assert_no_leaks();
}

Test(cvt_ckpt, only_converts_what_the_glob_matches)
{
	struct ckpt *c = open_sample(), *b;
	struct cvt_stats st;

	b = convert(c, "float16", "optimizer/*/exp_avg_sq", &st);
	cr_assert_eq(st.tensors, 5);
	for (uint32_t i = 0; i < b->ntensors; i++) {
		const struct ckpt_tensor *t = b->tensors[i];
		bool sq = ckpt_tensor_nbytes(t) && i >= 6 && (i - 6) % 3 == 2;

		cr_assert_eq(t->dtype, dt(sq ? "float16" : "float32"),
			     "tensor %u", i);
	}
	ckpt_close(b);
	ckpt_close(c);
	assert_no_leaks();
}

Test(cvt_ckpt, refuses_a_glob_that_unties)
{
	struct ckpt *c = open_sample();
	const struct ckpt_dtype **plan = NULL;
	struct diag d;

	diag_init(&d, SAMPLE);
	cr_assert_eq(cvt_select(c, dt("bfloat16"), "model/head.*", &plan, &d),
		     -EINVAL);
	cr_assert_null(plan);
	cr_assert(strstr(d.msg, "model/embed.weight shares storage '0' with "
			 "model/head.weight"), "%s", d.msg);
	ckpt_close(c);
	assert_no_leaks();
}

/* The same dtype: nothing to convert, data.pkl kept. */
Test(cvt_ckpt, nothing_to_convert_is_no_change)
{
	struct ckpt *c = open_sample();
	const struct ckpt_dtype **plan;
	struct cvt_conv *conv = (struct cvt_conv *)1;
	struct diag d;

	diag_init(&d, SAMPLE);
	cr_assert_eq(cvt_select(c, dt("float32"), NULL, &plan, &d), 0);
	for (uint32_t k = 0; k < c->nstorages; k++)
		cr_assert_null(plan[k]);
	cr_assert_eq(cvt_ckpt(c, dt("float32"), plan, CVT_TORCH2, &conv, NULL,
			      &d), 0);
	cr_assert_null(conv);
	cr_assert_not(ckpt_changed(c));
	free(plan);
	ckpt_close(c);
	assert_no_leaks();
}

/*
 * The converted bytes lie nowhere but are made as they are read: the
 * storages have no file (a read that bypasses c->made fails), and a read
 * at an odd offset of a view gives what converting the old bytes gives.
 */
Test(cvt_ckpt, converts_as_it_is_read)
{
	struct ckpt *a = open_sample(), *c = open_sample();
	const struct ckpt_dtype **plan;
	struct cvt_conv *conv;
	unsigned char old[64], want[32], got[32];
	struct diag d;

	diag_init(&d, SAMPLE);
	cr_assert_eq(cvt_select(c, dt("bfloat16"), NULL, &plan, &d), 0);
	cr_assert_eq(cvt_ckpt(c, dt("bfloat16"), plan, CVT_TORCH2, &conv,
			      NULL, &d), 0, "%s", d.msg);
	free(plan);
	cr_assert_eq(c->tensors[1]->storage->fd, -1);
	cr_assert_geq(ckpt_tensor_nbytes(a->tensors[1]), 2 * sizeof(old));
	cr_assert_eq(ckpt_tensor_read(a, a->tensors[1], old, sizeof(old), 0,
				      &d), (long long)sizeof(old));
	cvt_elems(dt("float32"), dt("bfloat16"), false, CVT_TORCH2, old, want,
		  sizeof(old) / 4);
	cr_assert_eq(ckpt_tensor_read(c, c->tensors[1], got, 21, 3, &d), 21,
		     "%s", d.msg);
	cr_assert_arr_eq(got, want + 3, 21);
	cvt_conv_free(conv);
	ckpt_close(a);
	ckpt_close(c);
	assert_no_leaks();
}
