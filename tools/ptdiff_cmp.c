/*
 * ptdiff_cmp.c - element-wise comparison of two tensors of one dtype and
 * shape, for ptdiff.  Both are streamed in PD_CHUNK pieces through
 * ckpt_tensor_read() (strided views arrive gathered, row-major).  4 KiB
 * blocks whose bytes match are skipped undecoded; the rest is decoded in
 * each file's byte order (view_get(), or a loop of its own for the four
 * common float formats) and compared the way numpy.isclose() does:
 * |a - b| <= atol + rtol * |b|.  docs/ptdiff.1 has the rules for NaN,
 * inf, ints, complex and raw dtypes.
 */
#include "ptdiff.h"

#include "diag/diag.h"
#include "view/view.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define BLOCK	4096u	/* bytes skipped at once when they match */

/*
 * The float dtypes that fill real checkpoints get loops of their own,
 * decoded here (float16/bfloat16 with view's converters): view_get()
 * looks the dtype up by name for every element, which made two files of
 * all-different float32s compare at 0.46 GB/s.
 */
enum fast { FAST_NONE, FAST_F16, FAST_BF16, FAST_F32, FAST_F64 };

/* One comparison: the dtype's rules and where the figures go. */
struct cmp {
	const struct pd_opts *o;
	const struct ckpt_dtype *dt;
	enum view_kind kind;
	enum fast fast;
	bool big_a, big_b;
	bool bytes_decide;	/* equal bytes are equal values */
	bool nan_scan;		/* --nan-differ: equal bytes may be a NaN */
	struct pd_elems *r;
};

static inline void differ(struct cmp *k, uint64_t idx, bool nan)
{
	if (!k->r->differ++)
		k->r->first = idx;
	if (nan)
		k->r->nan++;
}

/*
 * @a != @b, neither NaN: @d = |a - b|, @mb = |b|, @inf when either is
 * infinite (then they differ whatever the tolerance, as in numpy).
 */
static inline void unequal(struct cmp *k, uint64_t idx, double d,
			   double mb, bool inf)
{
	double rel;

	if (inf)
		d = INFINITY;
	rel = isinf(d) || mb == 0 ? INFINITY : d / mb;
	if (d > k->r->max_abs)
		k->r->max_abs = d;
	if (rel > k->r->max_rel)
		k->r->max_rel = rel;
	/* not atol + rtol * mb with mb = inf: 0 * inf is NaN */
	if (inf || d > k->o->atol + k->o->rtol * mb)
		differ(k, idx, false);
}

/* A NaN decides: equal only if both are NaN and --nan-differ is off. */
static inline void nan_pair(struct cmp *k, uint64_t idx, bool na, bool nb)
{
	if (k->o->nan_differ || !na || !nb)
		differ(k, idx, true);
}

static inline void cmp_real(struct cmp *k, uint64_t idx, double a, double b)
{
	if (isnan(a) || isnan(b)) {
		nan_pair(k, idx, isnan(a), isnan(b));
		return;
	}
	if (a == b)	/* -0.0 == 0.0, inf == inf */
		return;
	unequal(k, idx, fabs(a - b), fabs(b), isinf(a) || isinf(b));
}

static void cmp_complex(struct cmp *k, uint64_t idx,
			const struct view_num *a, const struct view_num *b)
{
	bool na = isnan(a->re) || isnan(a->im);
	bool nb = isnan(b->re) || isnan(b->im);

	if (na || nb) {
		nan_pair(k, idx, na, nb);
		return;
	}
	if (a->re == b->re && a->im == b->im)
		return;
	unequal(k, idx, hypot(a->re - b->re, a->im - b->im),
		hypot(b->re, b->im), isinf(a->re) || isinf(a->im) ||
		isinf(b->re) || isinf(b->im));
}

/* Ints: equal means equal as integers; only the figures are doubles. */
static void cmp_int(struct cmp *k, uint64_t idx, int64_t a, int64_t b)
{
	uint64_t d;

	if (a == b)
		return;
	d = a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
	unequal(k, idx, (double)d, b < 0 ? -(double)b : (double)b, false);
}

static void cmp_uint(struct cmp *k, uint64_t idx, uint64_t a, uint64_t b)
{
	if (a == b)
		return;
	unequal(k, idx, (double)(a > b ? a - b : b - a), (double)b, false);
}

static inline bool same_bytes(const unsigned char *a, const unsigned char *b,
			      size_t n)
{
	uint16_t h1, h2;
	uint32_t w1, w2;
	uint64_t q1, q2;

	switch (n) {
	case 1:
		return *a == *b;
	case 2:
		memcpy(&h1, a, 2), memcpy(&h2, b, 2);
		return h1 == h2;
	case 4:
		memcpy(&w1, a, 4), memcpy(&w2, b, 4);
		return w1 == w2;
	case 8:
		memcpy(&q1, a, 8), memcpy(&q2, b, 8);
		return q1 == q2;
	default:
		return !memcmp(a, b, n);
	}
}

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* A float of format @f at @p in the given byte order, widened to double. */
static ALWAYS_INLINE double get_float(enum fast f, bool big,
				      const unsigned char *p)
{
	uint32_t w;
	uint64_t q;
	float x;
	double d;

	switch (f) {
	case FAST_F16:
	case FAST_BF16:
		w = big ? (uint32_t)p[0] << 8 | p[1] :
			  (uint32_t)p[1] << 8 | p[0];
		return f == FAST_F16 ? view_f16_to_f32((uint16_t)w) :
		       view_bf16_to_f32((uint16_t)w);
	case FAST_F32:
		w = big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
			  (uint32_t)p[2] << 8 | p[3] :
			  (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
			  (uint32_t)p[1] << 8 | p[0];
		memcpy(&x, &w, 4);
		return x;
	default:
		q = 0;
		for (int i = 0; i < 8; i++)
			q |= (uint64_t)p[i] << (8 * (big ? 7 - i : i));
		memcpy(&d, &q, 8);
		return d;
	}
}

static enum fast fast_of(const struct ckpt_dtype *dt)
{
	return !strcmp(dt->name, "float32") ? FAST_F32 :
	       !strcmp(dt->name, "float64") ? FAST_F64 :
	       !strcmp(dt->name, "float16") ? FAST_F16 :
	       !strcmp(dt->name, "bfloat16") ? FAST_BF16 : FAST_NONE;
}

/*
 * cmp_elems() for floats of format @f (a constant at each call, so that
 * each format gets its own loop without a per-element switch).
 */
static ALWAYS_INLINE void cmp_floats(struct cmp *k, enum fast f,
				     const unsigned char *pa,
				     const unsigned char *pb, size_t n,
				     uint64_t idx)
{
	size_t sz = f == FAST_F32 ? 4 : f == FAST_F64 ? 8 : 2;

	for (size_t i = 0; i < n; i++, pa += sz, pb += sz) {
		if (k->bytes_decide && same_bytes(pa, pb, sz)) {
			if (k->nan_scan && isnan(get_float(f, k->big_a, pa)))
				differ(k, idx + i, true);
			continue;
		}
		cmp_real(k, idx + i, get_float(f, k->big_a, pa),
			 get_float(f, k->big_b, pb));
	}
}

static bool is_nan(enum view_kind kind, const struct view_num *v)
{
	return kind == VIEW_FLOAT ? isnan(v->re) :
	       kind == VIEW_COMPLEX ? isnan(v->re) || isnan(v->im) : false;
}

/* Compare @n elements at @pa / @pb, the first being element @idx. */
static void cmp_elems(struct cmp *k, const unsigned char *pa,
		      const unsigned char *pb, size_t n, uint64_t idx)
{
	size_t sz = k->dt->size;
	struct view_num va, vb;

	switch (k->fast) {
	case FAST_F16:
		cmp_floats(k, FAST_F16, pa, pb, n, idx);
		return;
	case FAST_BF16:
		cmp_floats(k, FAST_BF16, pa, pb, n, idx);
		return;
	case FAST_F32:
		cmp_floats(k, FAST_F32, pa, pb, n, idx);
		return;
	case FAST_F64:
		cmp_floats(k, FAST_F64, pa, pb, n, idx);
		return;
	default:
		break;
	}
	for (size_t i = 0; i < n; i++, pa += sz, pb += sz) {
		bool same = same_bytes(pa, pb, sz);

		if (k->kind == VIEW_RAW) {
			if (!same)
				differ(k, idx + i, false);
			continue;
		}
		if (same && k->bytes_decide) {
			if (!k->nan_scan)
				continue;
			view_get(k->dt, k->big_a, pa, &va);
			if (is_nan(k->kind, &va))
				differ(k, idx + i, true);
			continue;
		}
		view_get(k->dt, k->big_a, pa, &va);
		view_get(k->dt, k->big_b, pb, &vb);
		switch (k->kind) {
		case VIEW_FLOAT:
			cmp_real(k, idx + i, va.re, vb.re);
			break;
		case VIEW_COMPLEX:
			cmp_complex(k, idx + i, &va, &vb);
			break;
		case VIEW_INT:
			cmp_int(k, idx + i, va.i, vb.i);
			break;
		default:	/* UINT, BOOL */
			cmp_uint(k, idx + i, va.u, vb.u);
			break;
		}
	}
}

/* One chunk of @len bytes (whole elements), element @idx first. */
static void cmp_chunk(struct cmp *k, const unsigned char *a,
		      const unsigned char *b, size_t len, uint64_t idx)
{
	size_t sz = k->dt->size, block = BLOCK / sz * sz;

	for (size_t off = 0; off < len; off += block) {
		size_t n = len - off < block ? len - off : block;

		if (k->bytes_decide && !k->nan_scan &&
		    !memcmp(a + off, b + off, n))
			continue;
		cmp_elems(k, a + off, b + off, n / sz, idx + off / sz);
	}
}

int pd_compare_elems(struct pd_ctx *x, const struct ckpt_tensor *ta,
		     const struct ckpt_tensor *tb, struct pd_elems *out)
{
	struct pd_elems r = { .numel = ta->numel };
	struct cmp k = {
		.o = x->o, .dt = ta->dtype, .kind = view_kind_of(ta->dtype),
		.fast = fast_of(ta->dtype),
		.big_a = x->big_a, .big_b = x->big_b, .r = &r,
	};
	uint64_t size = ckpt_tensor_size(ta), sz = ta->dtype->size;
	uint64_t step = PD_CHUNK / sz * sz, n;

	/* bytes compare as values only in one byte order (raw: always) */
	k.bytes_decide = k.big_a == k.big_b || sz == 1 || k.kind == VIEW_RAW;
	k.nan_scan = x->o->nan_differ &&
		     (k.kind == VIEW_FLOAT || k.kind == VIEW_COMPLEX);
	r.raw = k.kind == VIEW_RAW;
	if (ckpt_tensor_size(tb) != size)	/* the caller checked shapes */
		return diag_set(x->db, -EINVAL, DIAG_NO_OFFSET,
				"tensor sizes differ");
	for (uint64_t pos = 0; pos < size; pos += n) {
		long long got;

		n = size - pos < step ? size - pos : step;
		got = ckpt_tensor_read(x->a, ta, x->buf_a, n, pos, x->da);
		if (got < 0)
			return (int)got;
		got = ckpt_tensor_read(x->b, tb, x->buf_b, n, pos, x->db);
		if (got < 0)
			return (int)got;
		cmp_chunk(&k, x->buf_a, x->buf_b, n, pos / sz);
		x->done += n;
		if (x->tick)
			x->tick(x);
		if (x->o->quiet && r.differ) {
			r.partial = true;
			break;
		}
	}
	*out = r;
	return 0;
}
