/*
 * ptdiff_xdt.c - values of two tensors of one shape but different dtypes
 * (a float32 model against its bfloat16 conversion), and the relative L2
 * error ||a - b|| / ||b|| of the pair.  Both are streamed in chunks of
 * XCHUNK elements, each element decoded to a double (view_get(), float8
 * with core/stats' decoder), compared as numpy.isclose() does with
 * --atol/--rtol.  Complex, quantized and raw dtypes are not compared
 * across dtypes (the dtype difference is reported alone).  A coded
 * tensor (ckpt_coded(): a GGUF Q8_0 tensor) is its values, float32,
 * decoded from its bytes.
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

/* One side of the comparison: a tensor's elements, or a coded one's
 * values. */
struct side {
	struct ckpt *c;
	const struct ckpt_tensor *t;
	const struct ckpt_dtype *dt;
	bool big, coded;
	struct ckpt_coded k;
	unsigned char *buf;
	struct diag *d;
};

static void side_init(struct side *s, struct ckpt *c,
		      const struct ckpt_tensor *t, bool big,
		      unsigned char *buf, struct diag *d)
{
	*s = (struct side){ .c = c, .t = t, .dt = t->dtype, .big = big,
			    .buf = buf, .d = d };
	if ((s->coded = ckpt_coded(c, t, &s->k))) {
		s->dt = ckpt_dtype_by_name("float32");
		s->big = false;
	}
}

/* Elements [@i, @i + @k) of @s into s->buf: 0 or -errno. */
static int side_read(struct side *s, uint64_t i, uint64_t k)
{
	size_t size = s->dt->size;
	long long got;

	if (s->coded)
		return ckpt_tensor_coded_values(s->c, s->t, &s->k,
						(float *)s->buf, i, k, s->d);
	got = ckpt_tensor_read(s->c, s->t, s->buf, k * size, i * size, s->d);
	if (got >= 0 && (uint64_t)got != k * size)
		got = diag_set(s->d, -EIO, DIAG_NO_OFFSET, "tensor data ends "
			       "early");
	return got < 0 ? (int)got : 0;
}

bool pd_coded_shape(struct ckpt *c, const struct ckpt_tensor *t, int *ndim,
		    const int64_t **shape, struct ckpt_coded *k)
{
	if (!ckpt_coded(c, t, k)) {
		*ndim = t->ndim;
		*shape = t->shape;
		return false;
	}
	*ndim = k->ndim;
	*shape = k->shape;
	return true;
}

int pd_compare_cross(struct pd_ctx *x, const struct ckpt_tensor *ta,
		     const struct ckpt_tensor *tb, struct pd_elems *out)
{
	struct side sa, sb;
	struct pd_elems r;
	double d2 = 0, b2 = 0;
	uint64_t numel;

	side_init(&sa, x->a, ta, x->big_a, x->buf_a, x->da);
	side_init(&sb, x->b, tb, x->big_b, x->buf_b, x->db);
	numel = sa.coded ? sa.k.numel : ta->numel;
	r = (struct pd_elems){ .numel = numel };
	for (uint64_t i = 0; i < numel;) {
		uint64_t k = numel - i < XCHUNK ? numel - i : XCHUNK;
		int rc = side_read(&sa, i, k);

		if (rc || (rc = side_read(&sb, i, k)))
			return rc;
		for (uint64_t j = 0; j < k; j++) {
			double a = value(sa.dt, sa.big,
					 sa.buf + j * sa.dt->size);
			double b = value(sb.dt, sb.big,
					 sb.buf + j * sb.dt->size);
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
		x->done += k * ta->dtype->size;
		if (x->tick)
			x->tick(x);
	}
	r.rel_l2 = b2 > 0 ? sqrt(d2 / b2) : d2 > 0 ? INFINITY : 0;
	r.has_rel_l2 = true;
	*out = r;
	return 0;
}
