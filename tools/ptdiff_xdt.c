/*
 * ptdiff_xdt.c - values of two tensors of one shape but different dtypes
 * (a float32 model against its bfloat16 conversion), and the relative L2
 * error ||a - b|| / ||b|| of the pair.  Both are streamed in chunks of
 * XCHUNK elements, each element decoded to a double (view_get(), float8
 * with core/stats' decoder), compared as numpy.isclose() does with
 * --atol/--rtol.  Complex, quantized and raw dtypes are not compared
 * across dtypes (the dtype difference is reported alone).
 */
#include "ptdiff.h"

#include "diag/diag.h"
#include "stats/tstat.h"
#include "view/view.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define XCHUNK	(PD_CHUNK / 16)	/* elements: 16 B each fit a buffer */

static bool real_kind(const struct ckpt_dtype *dt)
{
	enum view_kind k = view_kind_of(dt);

	if (!strncmp(dt->name, "float8_", 7))
		return tstat_supported(dt);
	return dt->cls != CKPT_DT_QUANT &&
	       (k == VIEW_FLOAT || k == VIEW_INT || k == VIEW_UINT ||
		k == VIEW_BOOL);
}

bool pd_cross_comparable(const struct ckpt_tensor *a,
			 const struct ckpt_tensor *b)
{
	return real_kind(a->dtype) && real_kind(b->dtype);
}

static double value(const struct ckpt_dtype *dt, bool big,
		    const unsigned char *p)
{
	struct view_num v;

	if (!strncmp(dt->name, "float8_", 7))
		return tstat_fp8(dt, p[0]);
	view_get(dt, big, p, &v);
	switch (view_kind_of(dt)) {
	case VIEW_FLOAT:
		return v.re;
	case VIEW_INT:
		return (double)v.i;
	default:
		return (double)v.u;
	}
}

int pd_compare_cross(struct pd_ctx *x, const struct ckpt_tensor *ta,
		     const struct ckpt_tensor *tb, struct pd_elems *out)
{
	struct pd_elems r = { .numel = ta->numel };
	size_t sa = ta->dtype->size, sb = tb->dtype->size;
	double d2 = 0, b2 = 0;

	for (uint64_t i = 0; i < ta->numel;) {
		uint64_t k = ta->numel - i < XCHUNK ? ta->numel - i : XCHUNK;
		long long got;

		got = ckpt_tensor_read(x->a, ta, x->buf_a, k * sa, i * sa,
				       x->da);
		if (got >= 0 && (uint64_t)got != k * sa)
			got = diag_set(x->da, -EIO, DIAG_NO_OFFSET,
				       "tensor data ends early");
		if (got < 0)
			return (int)got;
		got = ckpt_tensor_read(x->b, tb, x->buf_b, k * sb, i * sb,
				       x->db);
		if (got >= 0 && (uint64_t)got != k * sb)
			got = diag_set(x->db, -EIO, DIAG_NO_OFFSET,
				       "tensor data ends early");
		if (got < 0)
			return (int)got;
		for (uint64_t j = 0; j < k; j++) {
			double a = value(ta->dtype, x->big_a,
					 x->buf_a + j * sa);
			double b = value(tb->dtype, x->big_b,
					 x->buf_b + j * sb);
			double d = fabs(a - b);
			bool nan = isnan(a) || isnan(b);

			if (nan && isnan(a) && isnan(b) && !x->o->nan_differ)
				continue;
			if (!nan && isfinite(d)) {
				d2 += d * d;
				b2 += b * b;
			}
			if (!nan && a == b)
				continue;
			if (!nan && isfinite(d) &&
			    d <= x->o->atol + x->o->rtol * fabs(b))
				goto close;
			if (!r.differ++)
				r.first = i + j;
			if (nan) {
				r.nan++;
				continue;
			}
close:
			if (!isfinite(d))
				d = INFINITY;
			if (d > r.max_abs)
				r.max_abs = d;
			if (b != 0 && d / fabs(b) > r.max_rel)
				r.max_rel = d / fabs(b);
			else if (b == 0 && d > 0)
				r.max_rel = INFINITY;
		}
		i += k;
		x->done += k * sa;
		if (x->tick)
			x->tick(x);
	}
	r.rel_l2 = b2 > 0 ? sqrt(d2 / b2) : d2 > 0 ? INFINITY : 0;
	r.has_rel_l2 = true;
	*out = r;
	return 0;
}
