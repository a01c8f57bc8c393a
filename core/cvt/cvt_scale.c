/*
 * cvt_scale.c - the pairs of scaled float8 weights that ptrepack
 * --dequant widens (cvt_dequant.c), and what both directions share: the
 * walk over the tree that picks tensors (cvt_scale_collect()), the check
 * that a weight's storage can be converted whole, one-line refusals.
 * Two layouts, found by name beside each other:
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
 * allowing any B would let nearly any shape "fit".  Everything about a
 * pair is checked here, before anything changes.
 */
#include "cvt/cvt_int.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cvt/cvt.h"
#include "diag/diag.h"

#define BLOCK_MAX	(UINT64_C(1) << 32)	/* blocks tried: 1, 2, 4 ... */

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
static int fit_blocks(struct cvt_pair *p, const struct ckpt_tensor *w,
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
static int fit_scalar(struct cvt_pair *p, const struct ckpt_tensor *w,
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

int cvt_scale_pair(const struct ckpt *c, struct ckpt_node *s,
		   const void *arg, void *item, struct diag *d)
{
	const struct cvt_scale_opt *o = arg;
	struct cvt_pair *p = item;
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
