/*
 * ptdiff_tensor.c - ptdiff's comparison of two tensors at one path: dtype,
 * shape, layout, attributes (device, flags, subclass, the quantizer with
 * its per-channel parameters), storage sharing, then the elements (one
 * dtype: ptdiff_cmp.c; two real dtypes: ptdiff_xdt.c).  The rules are in
 * docs/ptdiff.1.
 */
#include "ptdiff.h"

#include "ckpt_fmt.h"
#include "diag/diag.h"
#include "view/view.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool pd_str_differ(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a && strcmp(a, b));
}

void pd_add_attr(struct pd_item *it, const char *name, const char *a,
		     const char *b)
{
	struct pd_attr *t = &it->attrs[it->nattrs++];

	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->a, sizeof(t->a), "%s", a ? a : "None");
	snprintf(t->b, sizeof(t->b), "%s", b ? b : "None");
}

static void add_bool(struct pd_item *it, const char *name, bool a, bool b)
{
	if (a != b) {
		pd_add_attr(it, name, a ? "True" : "False", b ? "True" : "False");
		it->attrs[it->nattrs - 1].boolean = true;
	}
}

static const char *form(const struct ckpt_tensor *t)
{
	return t->kind == CKPT_T_QUANTIZED ? "quantized" :
	       t->kind == CKPT_T_META ? "meta" :
	       t->kind == CKPT_T_INLINE ? "numpy" :
	       t->kind == CKPT_T_STORAGE ? "storage" : "strided";
}

/* Element @i of @t as text ("0.25", "-3"): a quantizer parameter. */
static int elem_text(struct ckpt *c, bool big, const struct ckpt_tensor *t,
		     uint64_t i, char *buf, size_t size, struct diag *d)
{
	unsigned char e[16];
	struct view_num v;
	long long got;

	got = ckpt_tensor_read(c, t, e, t->dtype->size, i * t->dtype->size, d);
	if (got < 0)
		return (int)got;
	view_get(t->dtype, big, e, &v);
	if (view_kind_of(t->dtype) == VIEW_FLOAT)
		ckpt_float_repr(v.re, buf, size);
	else if (view_kind_of(t->dtype) == VIEW_INT)
		snprintf(buf, size, "%" PRId64, v.i);
	else
		snprintf(buf, size, "%" PRIu64, v.u);
	return 0;
}

/*
 * Per-channel scales or zero points (@what): their dtypes or lengths if
 * those differ, else the first element that differs ("scales[3]").
 */
static int qparams(struct pd_ctx *x, struct pd_item *it, const char *what,
		   const struct ckpt_tensor *a, const struct ckpt_tensor *b)
{
	char name[40], sa[40], sb[40];
	struct pd_elems el;
	int rc;

	if (strcmp(a->dtype->name, b->dtype->name)) {
		snprintf(name, sizeof(name), "%s.dtype", what);
		pd_add_attr(it, name, a->dtype->name, b->dtype->name);
		return 0;
	}
	if (a->numel != b->numel) {
		snprintf(name, sizeof(name), "%s.numel", what);
		snprintf(sa, sizeof(sa), "%" PRIu64, a->numel);
		snprintf(sb, sizeof(sb), "%" PRIu64, b->numel);
		pd_add_attr(it, name, sa, sb);
		return 0;
	}
	rc = pd_compare_elems(x, a, b, &el);
	if (rc || !el.differ)
		return rc;
	rc = elem_text(x->a, x->big_a, a, el.first, sa, sizeof(sa), x->da);
	if (!rc)
		rc = elem_text(x->b, x->big_b, b, el.first, sb, sizeof(sb),
			       x->db);
	snprintf(name, sizeof(name), "%s[%" PRIu64 "]", what, el.first);
	if (!rc)
		pd_add_attr(it, name, sa, sb);
	return rc;
}

/* The differences besides dtype, shape, layout and values. */
static int tensor_attrs(struct pd_ctx *x, struct pd_item *it,
			const struct ckpt_tensor *a,
			const struct ckpt_tensor *b)
{
	const char *da = ckpt_tensor_device(a), *db = ckpt_tensor_device(b);
	char sa[40], sb[40];
	int rc;

	if (a->kind != b->kind)
		pd_add_attr(it, "kind", form(a), form(b));
	if (pd_str_differ(da, db))
		pd_add_attr(it, "device", da, db);
	add_bool(it, "requires_grad", a->requires_grad, b->requires_grad);
	add_bool(it, "parameter", a->parameter, b->parameter);
	add_bool(it, "conj", a->conj, b->conj);
	add_bool(it, "neg", a->neg, b->neg);
	if (pd_str_differ(a->x->cls, b->x->cls))
		pd_add_attr(it, "class", a->x->cls, b->x->cls);
	if (a->kind != CKPT_T_QUANTIZED || b->kind != CKPT_T_QUANTIZED)
		return 0;
	if (pd_str_differ(a->x->qscheme, b->x->qscheme))
		pd_add_attr(it, "qscheme", a->x->qscheme, b->x->qscheme);
	if (!a->x->qscales != !b->x->qscales)
		return 0;	/* the schemes differ: nothing more to say */
	if (!a->x->qscales) {
		if (a->x->scale != b->x->scale)
			pd_add_attr(it, "scale",
				 ckpt_float_repr(a->x->scale, sa, sizeof(sa)),
				 ckpt_float_repr(b->x->scale, sb, sizeof(sb)));
		if (a->x->zero_point != b->x->zero_point) {
			snprintf(sa, sizeof(sa), "%" PRId64, a->x->zero_point);
			snprintf(sb, sizeof(sb), "%" PRId64, b->x->zero_point);
			pd_add_attr(it, "zero_point", sa, sb);
		}
		return 0;
	}
	if (a->x->axis != b->x->axis) {
		snprintf(sa, sizeof(sa), "%" PRId64, a->x->axis);
		snprintf(sb, sizeof(sb), "%" PRId64, b->x->axis);
		pd_add_attr(it, "axis", sa, sb);
	}
	rc = qparams(x, it, "scales", a->x->qscales, b->x->qscales);
	return rc ? rc : qparams(x, it, "zero_points", a->x->qzeros,
				 b->x->qzeros);
}

/* Strides matter only along dimensions longer than 1. */
static bool strides_differ(const struct ckpt_tensor *a,
			   const struct ckpt_tensor *b)
{
	if (!a->numel)
		return false;
	for (int i = 0; i < a->ndim; i++)
		if (a->shape[i] > 1 &&
		    ckpt_tensor_stride(a)[i] != ckpt_tensor_stride(b)[i])
			return true;
	return false;
}

/* Ties: the earlier path sharing the storage differs between A and B. */
static int tie_attr(struct pd_item *it)
{
	char *pa, *pb;

	if (!it->tie_diff)
		return 0;
	pa = it->tie_a ? ckpt_node_path(it->tie_a) : NULL;
	pb = it->tie_b ? ckpt_node_path(it->tie_b) : NULL;
	if ((it->tie_a && !pa) || (it->tie_b && !pb)) {
		free(pa);
		free(pb);
		return -ENOMEM;
	}
	pd_add_attr(it, "shares_storage_with", pa, pb);
	free(pa);
	free(pb);
	return 0;
}

/*
 * Do the values differ?  Element by element (atol, rtol), or with
 * --rel-l2 by the relative L2 error, where a NaN that decides and an
 * infinity against a number still differ (the L2 sum leaves them out).
 */
static bool values_differ(const struct pd_opts *o, const struct pd_elems *e)
{
	if (o->rel_l2 < 0 || !e->has_rel_l2)
		return e->differ != 0;
	return e->nan || isinf(e->max_abs) || !(e->rel_l2 <= o->rel_l2);
}

/*
 * A coded tensor on either side (a GGUF Q8_0 tensor against the float32
 * one it was made from): their values are compared, float32 decoded, as
 * across dtypes; the codings differ as an attribute ("coding": a dtype
 * difference, which --ignore-dtype ignores).
 */
static int compare_coded(struct pd_ctx *x, struct pd_item *it)
{
	const struct ckpt_tensor *a = it->a->tensor, *b = it->b->tensor;
	const int64_t *sa, *sb;
	struct ckpt_coded ka, kb;
	int na, nb;
	bool ca = pd_coded_shape(x->a, a, &na, &sa, &ka);
	bool cb = pd_coded_shape(x->b, b, &nb, &sb, &kb);
	char da[96], db[96];	/* an attribute's room: pd_attr */
	int rc = 0;

	if (!x->o->ignore_dtype &&
	    pd_str_differ(ca ? ka.name : a->dtype->name,
			  cb ? kb.name : b->dtype->name))
		pd_add_attr(it, "coding", ca ? ka.name : a->dtype->name,
			    cb ? kb.name : b->dtype->name);
	if (na != nb || memcmp(sa, sb, (size_t)na * sizeof(*sa))) {
		fmt_dims(da, sizeof(da), sa, na);
		fmt_dims(db, sizeof(db), sb, nb);
		pd_add_attr(it, "values_shape", da, db);
		return 0;
	}
	if ((ca || pd_cross_comparable(a, a)) &&
	    (cb || pd_cross_comparable(b, b))) {
		rc = pd_compare_cross(x, a, b, &it->el);
		it->compared = !rc;
		it->values = !rc && values_differ(x->o, &it->el);
	}
	return rc;
}

int pd_compare_tensors(struct pd_ctx *x, struct pd_item *it)
{
	const struct ckpt_tensor *a = it->a->tensor, *b = it->b->tensor;
	struct ckpt_coded k;
	int rc;

	x->path = it->path;
	if (ckpt_coded(x->a, a, &k) || ckpt_coded(x->b, b, &k))
		return compare_coded(x, it);
	it->dtype = strcmp(a->dtype->name, b->dtype->name) != 0;
	it->shape = a->ndim != b->ndim ||
		    memcmp(a->shape, b->shape, a->ndim * sizeof(*a->shape));
	rc = tensor_attrs(x, it, a, b);
	/* storage sharing is layout too: a view against its copy */
	if (!rc && !x->o->ignore_layout && tie_attr(it))
		rc = diag_nomem(x->da);
	if (!rc && it->dtype && !it->shape && a->kind != CKPT_T_META &&
	    b->kind != CKPT_T_META && pd_cross_comparable(a, b)) {
		/* values across dtypes: did the conversion stay close? */
		rc = pd_compare_cross(x, a, b, &it->el);
		it->compared = !rc;
		it->values = !rc && values_differ(x->o, &it->el);
		if (x->o->ignore_dtype)
			it->dtype = false;
		return rc;
	}
	if (rc || it->dtype || it->shape)
		return rc;
	it->stride_diff = strides_differ(a, b);
	it->offset_diff = a->offset != b->offset;
	it->layout = (it->stride_diff || it->offset_diff) &&
		     !x->o->ignore_layout;
	if (a->kind == CKPT_T_META || b->kind == CKPT_T_META)
		return 0;
	/* --rel-l2 wants the L2 sums: the cross-dtype loop has them */
	if (x->o->rel_l2 >= 0 && pd_cross_comparable(a, b))
		rc = pd_compare_cross(x, a, b, &it->el);
	else
		rc = pd_compare_elems(x, a, b, &it->el);
	it->compared = !rc;
	it->values = !rc && values_differ(x->o, &it->el);
	return rc;
}
