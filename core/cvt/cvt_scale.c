/*
 * cvt_scale.c - scaled float8 weights back to a wider dtype (ptrepack
 * --dequant), bit for bit what torch gives for
 *
 *   (w.float() * scale_expanded).to(dtype)
 *
 * where scale_expanded repeats each scale over its block.  Two layouts:
 *
 *   X.weight_scale_inv  DeepSeek-V3: float32 (ceil(rows/B), ceil(cols/B)),
 *                       one value per B x B block, edge blocks partial
 *   X.weight_scale      compressed-tensors / vLLM: float32, one value
 *                       (shape (), (1,), (1, 1)) or one per row ((rows,
 *                       1) or (rows,)); X.input_scale is dropped with it
 *
 * The block size is written down nowhere but config.json, so it is
 * inferred from the two shapes: square blocks of a power of two B with
 * ceil(n / B) the scale's size in both dimensions, 128 (DeepSeek's) when
 * it fits, else the smallest that does (any B fits when a dimension is
 * one block: then the choice changes nothing).  Other sizes are refused:
 * allowing any B would let nearly any shape "fit".  The product is
 * float32 (the float8 value widened exactly, as .float() does), then
 * rounded by cvt_elems(), so infinities and NaN come out as torch's: one
 * float32 multiply per element on the same hardware.  One thing torch
 * does not pin down: when weight and scale are both NaN, x86 gives the
 * first operand's NaN, and torch 2.14's CPU kernel gives the weight's or
 * the scale's by the element's lane in its 16-wide loop (the compiler's
 * choice of operand order per lane); we give the weight's, as its scalar
 * path does.  It shows only in float16 (the sign) and float32 (the
 * payload): every NaN is 0x7fc0 in bfloat16.
 */
#include "cvt/cvt_scale.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cvt/cvt.h"
#include "diag/diag.h"
#include "util/io.h"

#define CHUNK		(UINT64_C(1) << 20)	/* elements per read */
#define BLOCK_MAX	(UINT64_C(1) << 32)	/* blocks tried: 1, 2, 4 ... */

/* One weight and its scale, as dequantization sees them. */
struct pair {
	struct ckpt_node *w;	/* first: cvt_scale_collect() */
	struct ckpt_node *s, *in;	/* scale, input_scale */
	const struct ckpt_dtype *from;	/* the weight's float8 */
	uint64_t rows, cols;	/* the weight as rows x cols */
	uint64_t bm, bn;	/* one scale per bm x bn block */
	uint64_t sr, sc;	/* the scales as sr x sc */
};

int cvt_scale_refuse(struct diag *d, const struct ckpt_node *n,
		     const char *fmt, ...)
{
	char *path = ckpt_node_path(n), msg[200];
	va_list ap;
	int rc;

	if (!path)
		return diag_nomem(d);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rc = diag_set(d, -EINVAL, DIAG_NO_OFFSET, "%s: %s", path, msg);
	free(path);
	return rc;
}

const char *cvt_scale_shape(const struct ckpt_tensor *t, char *buf,
			    size_t size)
{
	size_t n = (size_t)snprintf(buf, size, "(");

	for (int i = 0; i < t->ndim && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%lld",
				      i ? ", " : "", (long long)t->shape[i]);
	if (n < size)
		snprintf(buf + n, size - n, t->ndim == 1 ? ",)" : ")");
	return buf;
}

const char *cvt_scale_whole(const struct ckpt *c,
			    const struct ckpt_tensor *t,
			    const struct ckpt_dtype *to)
{
	const struct ckpt_storage *s = t->storage;
	const char *why = NULL;

	if (t->kind != CKPT_T_STRIDED || !s)
		return "not a plain tensor";
	if (!cvt_storage_plan(c, s, to, &why))
		return why;
	for (uint32_t i = 0; i < c->ntensors; i++) {
		const struct ckpt_tensor *u = c->tensors[i];

		if (u->storage != s)
			continue;
		if (!u->contiguous || u->offset || u->ndim != t->ndim ||
		    u->numel * u->dtype->size != s->nbytes ||
		    memcmp(u->shape, t->shape, t->ndim * sizeof(*t->shape)))
			return "its storage holds other tensors or a view "
			       "(ptrepack --clone it first)";
	}
	return NULL;
}

/* Is @name "weight" or "X.weight" cut at @len? */
static bool weight_name(const char *name, size_t len)
{
	return (len == 6 || (len > 6 && name[len - 7] == '.')) &&
	       !strncmp(name + len - 6, "weight", 6);
}

/* The sibling of @n named @base[0, @len) + @tail, or NULL. */
static struct ckpt_node *sibling(const struct ckpt_node *n, const char *base,
				 size_t len, const char *tail)
{
	char name[CKPT_NAME_MAX + 32];

	if (len + strlen(tail) >= sizeof(name))
		return NULL;
	memcpy(name, base, len);
	strcpy(name + len, tail);
	return ckpt_node_child(n->parent, name);
}

/* Is ceil(@n / @b) == @k? */
static bool fits(uint64_t n, uint64_t b, uint64_t k)
{
	return n / b + (n % b != 0) == k;
}

/* X.weight_scale_inv: (ceil(rows/B), ceil(cols/B)), B inferred. */
static int fit_blocks(struct pair *p, const struct ckpt_tensor *w,
		      const struct ckpt_tensor *s, struct diag *d)
{
	char a[64], b[64];

	if (w->ndim != 2 || s->ndim != 2)
		return cvt_scale_refuse(d, p->s, "block scales %s for weight "
					"%s: both must be 2-d",
					cvt_scale_shape(s, a, sizeof(a)),
					cvt_scale_shape(w, b, sizeof(b)));
	p->rows = (uint64_t)w->shape[0];
	p->cols = (uint64_t)w->shape[1];
	p->sr = (uint64_t)s->shape[0];
	p->sc = (uint64_t)s->shape[1];
	p->bm = 128;
	for (uint64_t k = 1; k <= BLOCK_MAX &&
	     !(fits(p->rows, p->bm, p->sr) && fits(p->cols, p->bm, p->sc));
	     k <<= 1)
		p->bm = k;
	if (!fits(p->rows, p->bm, p->sr) || !fits(p->cols, p->bm, p->sc))
		return cvt_scale_refuse(d, p->s, "shape %s does not fit weight "
					"%s: no block size B (a power of two) "
					"gives (ceil(%llu/B), ceil(%llu/B))",
					cvt_scale_shape(s, a, sizeof(a)),
					cvt_scale_shape(w, b, sizeof(b)),
					(unsigned long long)p->rows,
					(unsigned long long)p->cols);
	p->bn = p->bm;
	return 0;
}

/* X.weight_scale: one value, or one per row. */
static int fit_scalar(struct pair *p, const struct ckpt_tensor *w,
		      const struct ckpt_tensor *s, struct diag *d)
{
	char a[64], b[64];

	p->rows = w->ndim ? (uint64_t)w->shape[0] : 1;
	p->cols = p->rows ? w->numel / p->rows : 0;
	p->sc = 1;
	if (s->numel == 1 && s->ndim <= 2) {
		p->sr = 1;
		p->bm = p->rows ? p->rows : 1;	/* per tensor */
	} else if (p->rows > 1 && s->numel == p->rows &&
		   (s->ndim == 1 || (s->ndim == 2 && s->shape[1] == 1))) {
		p->sr = p->rows;
		p->bm = 1;	/* per row (output channel) */
	} else {
		return cvt_scale_refuse(d, p->s, "shape %s does not fit weight "
					"%s: one value, or (%llu, 1), expected",
					cvt_scale_shape(s, a, sizeof(a)),
					cvt_scale_shape(w, b, sizeof(b)),
					(unsigned long long)p->rows);
	}
	p->bn = p->cols ? p->cols : 1;
	return 0;
}

/* Does --only match @n's path (or is there no --only)?  -ENOMEM. */
static int selected(const struct ckpt_node *n, const char *glob)
{
	char *path;
	int m;

	if (!glob)
		return 1;
	path = ckpt_node_path(n);
	if (!path)
		return -ENOMEM;
	m = !fnmatch(glob, path, 0);
	free(path);
	return m;
}

/*
 * Scale node @s (a tensor named BASE_scale_inv or BASE_scale, BASE being
 * "weight" or "X.weight") as a pair into @p: 0; 1 when @s is no scale
 * name or --only does not match its weight; -EINVAL when it is one but
 * something does not fit.  A cvt_scale_pick_fn.
 */
static int find_pair(const struct ckpt *c, struct ckpt_node *s,
		     const void *arg, void *item, struct diag *d)
{
	const struct cvt_scale_opt *o = arg;
	struct pair *p = item;
	size_t n = strlen(s->name), len;
	const struct ckpt_tensor *w, *t = s->tensor;
	bool inv = n > 10 && !strcmp(s->name + n - 10, "_scale_inv");
	const char *why;
	int rc;

	len = n - (inv ? 10 : 6);
	if (!inv && (n <= 6 || strcmp(s->name + n - 6, "_scale")))
		return 1;
	if (!weight_name(s->name, len))
		return 1;
	memset(p, 0, sizeof(*p));
	p->s = s;
	p->w = sibling(s, s->name, len, "");
	rc = selected(p->w ? p->w : s, o->glob);
	if (rc <= 0)
		return rc ? diag_nomem(d) : 1;
	if (!p->w || p->w->kind != CKPT_N_TENSOR || !p->w->tensor)
		return cvt_scale_refuse(d, s, "a scale with no tensor %.*s "
					"beside it", (int)len, s->name);
	if (sibling(s, s->name, len, inv ? "_scale" : "_scale_inv"))
		return cvt_scale_refuse(d, p->w, "has both a weight_scale and "
					"a weight_scale_inv");
	w = p->w->tensor;
	if (t->kind != CKPT_T_STRIDED ||
	    t->dtype != ckpt_dtype_by_name("float32"))
		return cvt_scale_refuse(d, s, "the scale of %.*s is %s, not "
					"float32", (int)len, s->name,
					t->kind == CKPT_T_STRIDED ?
					t->dtype->name : "not a plain tensor");
	if (w->dtype->cls != CKPT_DT_FLOAT || w->dtype->size != 1 ||
	    !cvt_supported(w->dtype))
		return cvt_scale_refuse(d, p->w, "is %s, not float8: nothing "
					"to dequantize with %s", w->dtype->name,
					s->name);
	p->from = w->dtype;
	rc = inv ? fit_blocks(p, w, t, d) : fit_scalar(p, w, t, d);
	if (rc)
		return rc;
	why = cvt_scale_whole(c, w, o->to);
	if (why)
		return cvt_scale_refuse(d, p->w, "cannot dequantize it: %s",
					why);
	/* "weight" -> "input_scale", "X.weight" -> "X.input_scale" */
	p->in = sibling(s, s->name, len - 6, "input_scale");
	return 0;
}

int cvt_scale_collect(const struct ckpt *c, cvt_scale_pick_fn fn,
		      const void *arg, size_t size, void **out, uint32_t *n,
		      struct diag *d)
{
	unsigned char *v = NULL, *item;
	uint32_t k = 0, cap = 0;
	int rc;

	if (c->byteorder && !strcmp(c->byteorder, "big"))
		return diag_unsupported(d, DIAG_NO_OFFSET, "a big-endian "
					"checkpoint: scales are read and "
					"written little-endian only");
	item = malloc(size);
	rc = item ? 0 : diag_nomem(d);

	for (uint32_t i = 0; i < c->nnodes && !rc; i++) {
		struct ckpt_node *t = c->nodes[i], *w;

		if (t->kind != CKPT_N_TENSOR || t->dead || !t->tensor ||
		    !t->parent)
			continue;
		rc = fn(c, t, arg, item, d);
		if (rc == 1) {
			rc = 0;		/* not one, or not selected */
			continue;
		}
		if (!rc && k == cap) {
			uint32_t more = cap ? 2 * cap : 16;
			unsigned char *g = realloc(v, more * size);

			if (g) {
				v = g;
				cap = more;
			} else {
				rc = diag_nomem(d);
			}
		}
		memcpy(&w, item, sizeof(w));
		for (uint32_t j = 0; j < k && !rc; j++) {
			struct ckpt_node *u;

			memcpy(&u, v + j * size, sizeof(u));
			if (u->tensor->storage == w->tensor->storage)
				rc = cvt_scale_refuse(d, w, "shares its "
						      "storage with %s: "
						      "convert one of them "
						      "(--only)", u->name);
		}
		if (!rc)
			memcpy(v + k++ * size, item, size);
	}
	free(item);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n = k;
	return 0;
}

/*
 * The weights made when read (ckpt_made, ckpt_model.h): each dequantized
 * weight's storage is re-typed in place with no bytes anywhere, and the
 * writer's reads of it come here; its float8 bytes are read through a
 * copy of the storage and tensor as they were (any format's own reads,
 * a shard's, a DCP tensor's chunks), CHUNK elements at a time.
 */
struct cvt_made {
	struct ckpt_made hooks;	/* c->made */
	struct ckpt *c;
	const struct ckpt_dtype *to;
	struct pair *v;		/* the pairs */
	struct ckpt_storage *raw_s;	/* their weights' storages as they */
	struct ckpt_tensor *raw_t;	/* were, and tensors over those */
	uint32_t n, nst;
	uint32_t *by;		/* by storage index: pair + 1, or 0 */
	uint32_t cur;		/* the pair whose scales sc holds, + 1 */
	uint64_t row;		/* the block row tab is for, + 1 */
	const struct ckpt_dtype *lut_of;
	float lut[256], x[256];
	float *sc;
	unsigned char *tab;	/* per block of the row: 256 results */
	uint8_t *in, *out;
};

static const struct ckpt_tensor *made_tensor(void *arg,
					     const struct ckpt_storage *s)
{
	struct cvt_made *m = arg;
	uint32_t k = s->index < m->nst ? m->by[s->index] : 0;

	return k && m->v[k - 1].w->tensor->storage == s ?
	       m->v[k - 1].w->tensor : NULL;
}

/* Pair @k's scales in m->sc and its float8's widening in m->lut. */
static int made_load(struct cvt_made *m, uint32_t k, struct diag *d)
{
	const struct ckpt_dtype *f32 = ckpt_dtype_by_name("float32");
	const struct pair *p = &m->v[k];
	const struct ckpt_tensor *s = p->s->tensor;
	uint64_t len = s->numel * sizeof(float);
	uint8_t codes[256];
	long long got;
	float *sc;
	unsigned char *tab;

	if (m->cur == k + 1)
		return 0;
	sc = realloc(m->sc, len + 1);
	if (sc)
		m->sc = sc;
	tab = sc ? realloc(m->tab, p->sc * 256 * m->to->size) : NULL;
	if (!tab)
		return diag_nomem(d);
	m->tab = tab;
	m->row = 0;
	got = ckpt_tensor_read(m->c, s, sc, len, 0, d);
	if (got >= 0 && (uint64_t)got != len)
		got = diag_corrupt(d, DIAG_NO_OFFSET, "%s ends early",
				   p->s->name);
	if (got < 0)
		return (int)got;
	if (m->lut_of != p->from) {
		for (unsigned i = 0; i < 256; i++)
			codes[i] = (uint8_t)i;
		cvt_elems(p->from, f32, false, CVT_TORCH2, codes, m->lut, 256);
		m->lut_of = p->from;
	}
	m->cur = k + 1;
	return 0;
}

/*
 * Block row @br of pair @p: for each of its blocks the 256 float8 codes
 * times the block's scale, in float32, rounded to m->to.  A block's
 * elements are then a lookup each, bit for bit what the multiply and
 * cvt_elems() give one by one (each code meets the same scale).
 */
static void made_tables(struct cvt_made *m, const struct pair *p,
			uint64_t br)
{
	const struct ckpt_dtype *f32 = ckpt_dtype_by_name("float32");
	size_t one = 256 * m->to->size;

	for (uint64_t j = 0; j < p->sc; j++) {
		float s = m->sc[br * p->sc + j];

		for (unsigned i = 0; i < 256; i++)
			m->x[i] = m->lut[i] * s;
		cvt_elems(f32, m->to, false, CVT_TORCH2, m->x, m->tab + j * one,
			  256);
	}
	m->row = br + 1;
}

/* Elements [@e0, @e0 + @n) of @p's weight (@w, float8 codes), scaled and
 * rounded, into @out. */
static void made_run(struct cvt_made *m, const struct pair *p,
		     const uint8_t *w, uint64_t e0, uint64_t n, void *out)
{
	uint64_t r = e0 / p->cols, col = e0 % p->cols;
	unsigned char *o = out;

	while (n) {
		uint64_t end = p->cols - col < n ? p->cols : col + n;

		if (m->row != r / p->bm + 1)
			made_tables(m, p, r / p->bm);
		n -= end - col;
		while (col < end) {
			uint64_t b = col / p->bn, stop = (b + 1) * p->bn;
			const unsigned char *t = m->tab + b * 256 * m->to->size;

			if (stop > end)
				stop = end;
			/* memcpy: @out need not be aligned; each is one move */
			if (m->to->size == 2)
				for (; col < stop; col++, o += 2)
					memcpy(o, t + 2 * *w++, 2);
			else
				for (; col < stop; col++, o += 4)
					memcpy(o, t + 4 * *w++, 4);
		}
		r++;
		col = 0;
	}
}

static long long made_read(void *arg, const struct ckpt_tensor *t, void *buf,
			   uint64_t len, uint64_t pos, struct diag *d)
{
	struct cvt_made *m = arg;
	uint32_t k = m->by[t->storage->index] - 1;
	const struct pair *p = &m->v[k];
	uint64_t osz = m->to->size, numel = p->rows * p->cols, done = 0;
	int rc = made_load(m, k, d);

	if (rc)
		return rc;
	if (pos >= numel * osz)
		return 0;
	if (len > numel * osz - pos)
		len = numel * osz - pos;
	while (done < len) {
		uint64_t e0 = (pos + done) / osz, skip = (pos + done) % osz;
		uint64_t ne = (skip + len - done + osz - 1) / osz, n;
		long long got;

		ne = ne < CHUNK ? ne : CHUNK;
		got = ckpt_tensor_read(m->c, &m->raw_t[k], m->in, ne, e0, d);
		if (got >= 0 && (uint64_t)got != ne)
			got = diag_corrupt(d, DIAG_NO_OFFSET, "%s ends early",
					   p->w->name);
		if (got < 0)
			return got;
		n = ne * osz - skip < len - done ? ne * osz - skip : len - done;
		if (!skip && n == ne * osz) {	/* whole elements: in place */
			made_run(m, p, m->in, e0, ne, (char *)buf + done);
		} else {
			made_run(m, p, m->in, e0, ne, m->out);
			memcpy((unsigned char *)buf + done, m->out + skip, n);
		}
		done += n;
	}
	return (long long)len;
}

void cvt_made_free(struct cvt_made *m)
{
	if (!m)
		return;
	if (m->c->made == &m->hooks)
		m->c->made = NULL;
	for (uint32_t i = 0; i < m->n; i++)
		ckpt_storage_uninflate(&m->raw_s[i]);
	free(m->v);
	free(m->raw_s);
	free(m->raw_t);
	free(m->by);
	free(m->sc);
	free(m->tab);
	free(m->in);
	free(m->out);
	free(m);
}

/* What -v says of @p. */

static void tell(const struct cvt_scale_opt *o, const struct pair *p)
{
	char what[400], a[64], b[64];
	char *path;

	if (!o->say || !(path = ckpt_node_path(p->w)))
		return;
	if (p->sr == 1 && p->sc == 1)
		snprintf(b, sizeof(b), "one scale");
	else if (p->bm == 1 && p->bn == p->cols)
		snprintf(b, sizeof(b), "a scale per row");
	else
		snprintf(b, sizeof(b), "a scale per %llux%llu block",
			 (unsigned long long)p->bm, (unsigned long long)p->bn);
	snprintf(what, sizeof(what), "%s %s x %s (%s) -> %s; %s%s%s dropped",
		 p->from->name, cvt_scale_shape(p->w->tensor, a, sizeof(a)),
		 p->s->name, b, o->to->name, p->s->name, p->in ? " and " : "",
		 p->in ? p->in->name : "");
	o->say(o->say_arg, path, what);
	free(path);
}

/* The pairs as made-when-read weights of @c: *@out. */
static int made_new(struct ckpt *c, const struct ckpt_dtype *to,
		    struct pair *v, uint32_t n, struct cvt_made **out,
		    struct diag *d)
{
	struct cvt_made *m = calloc(1, sizeof(*m));

	if (m) {
		m->v = v;
		m->n = n;
		m->nst = c->nstorages;
		m->raw_s = calloc(n + 1, sizeof(*m->raw_s));
		m->raw_t = calloc(n + 1, sizeof(*m->raw_t));
		m->by = calloc(m->nst + 1, sizeof(*m->by));
		m->in = malloc(CHUNK);
		m->out = malloc(CHUNK * to->size);
	}
	if (!m || !m->raw_s || !m->raw_t || !m->by || !m->in || !m->out) {
		if (m)
			cvt_made_free(m);
		else
			free(v);
		return diag_nomem(d);
	}
	m->c = c;
	m->to = to;
	m->hooks = (struct ckpt_made){ made_tensor, made_read, m };
	for (uint32_t i = 0; i < n; i++) {
		struct ckpt_tensor *w = v[i].w->tensor;

		/* the record as it was; an inflated copy is made again for
		   it (the re-type below drops the storage's) */
		m->raw_s[i] = *w->storage;
		m->raw_s[i].zdone = false;
		m->raw_t[i] = *w;
		m->raw_t[i].storage = &m->raw_s[i];
		m->by[w->storage->index] = i + 1;
	}
	*out = m;
	return 0;
}

int cvt_dequant(struct ckpt *c, const struct cvt_scale_opt *o,
		struct cvt_made **made, struct cvt_scale_stats *st,
		struct diag *d)
{
	struct cvt_made *m = NULL;
	struct pair *v = NULL;
	uint32_t n = 0;
	int rc;

	*made = NULL;
	memset(st, 0, sizeof(*st));
	rc = cvt_scale_collect(c, find_pair, o, sizeof(*v), (void **)&v, &n,
			       d);
	if (rc || !n) {
		free(v);
		return rc;
	}
	rc = made_new(c, o->to, v, n, &m, d);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		struct ckpt_storage *s = v[i].w->tensor->storage;

		tell(o, &v[i]);
		st->weights++;
		st->bytes_in += s->nbytes;
		/* no bytes anywhere: fd -1 fails any read that bypasses
		   c->made */
		cvt_storage_retype(c, s, v[i].from, o->to, -1, 0);
		st->bytes_out += s->nbytes;
		ckpt_node_drop(c, v[i].s->parent, v[i].s);
		st->scales++;
		if (v[i].in && !v[i].in->dead) {
			ckpt_node_drop(c, v[i].in->parent, v[i].in);
			st->scales++;
		}
	}
	c->made = &m->hooks;
	*made = m;
	return 0;
}
