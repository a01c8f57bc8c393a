/*
 * ckpt_build.c - interpret the pickle graph as a checkpoint: known torch
 * rebuild calls become tensors (torch-format.md 4.3), persistent ids become
 * storages (4.2), dicts/lists/objects become directories, everything else
 * stays visible as an opaque entry.  Nothing is imported or called.
 *
 * A container reached a second time (memo sharing, or a cycle) is shown
 * once and linked from the other places; a tensor reached twice (tied
 * weights) is one ckpt_tensor shown under both names.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_push(void ***arr, uint32_t *n, uint32_t *cap, void *p)
{
	if (*n == *cap) {
		uint32_t ncap = *cap ? *cap * 2 : 16;
		void **a = realloc(*arr, (size_t)ncap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		*arr = a;
		*cap = ncap;
	}
	(*arr)[(*n)++] = p;
	return 0;
}

static bool is_func(const struct pkl_value *v, const char *module,
		    const char *name)
{
	return v && v->kind == PKL_CALL &&
	       pkl_is_global(v->u.call.func, module, name);
}

/* A tuple of ints, or torch.Size((...)); NULL if neither. */
static const struct pkl_value *int_seq(const struct pkl_value *v)
{
	if (is_func(v, "torch", "Size"))
		v = arg(pkl_call_args(v), 0);
	if (v && (v->kind == PKL_TUPLE || v->kind == PKL_LIST))
		return v;
	return NULL;
}

/* ---- tensors ---- */

enum rebuild {
	R_NONE, R_V1, R_V2, R_V3, R_QTENSOR, R_PARAM, R_PARAM_STATE,
	R_FROM_TYPE, R_META, R_DEV_CPU, R_PARAM_CLASS, R_DEV_NUMPY, R_WRAPPER,
	R_NJT,
};

static enum rebuild rebuild_kind(const struct pkl_value *f)
{
	static const struct {
		const char *name;
		enum rebuild r;
	} utils[] = {
		{ "_rebuild_tensor", R_V1 },
		{ "_rebuild_tensor_v2", R_V2 },
		{ "_rebuild_tensor_v3", R_V3 },
		{ "_rebuild_qtensor", R_QTENSOR },
		{ "_rebuild_parameter", R_PARAM },
		{ "_rebuild_parameter_with_state", R_PARAM_STATE },
		{ "_rebuild_meta_tensor_no_storage", R_META },
		{ "_rebuild_device_tensor_from_cpu_tensor", R_DEV_CPU },
		{ "_rebuild_device_tensor_from_numpy", R_DEV_NUMPY },
		{ "_rebuild_wrapper_subclass", R_WRAPPER },
	};

	if (!f || f->kind != PKL_GLOBAL)
		return R_NONE;
	if (!strcmp(f->u.global.module, "torch._utils"))
		for (size_t i = 0; i < sizeof(utils) / sizeof(utils[0]); i++)
			if (!strcmp(f->u.global.name, utils[i].name))
				return utils[i].r;
	if (pkl_is_global(f, "torch._tensor", "_rebuild_from_type_v2"))
		return R_FROM_TYPE;
	if (pkl_is_global(f, "torch.nn.parameter", "Parameter"))
		return R_PARAM_CLASS;
	if (pkl_is_global(f, "torch.nested._internal.nested_tensor",
			  "_rebuild_njt"))
		return R_NJT;
	return R_NONE;
}

struct ckpt_tensor *ckpt_tensor_new(struct ckpt_build *b, int ndim)
{
	int64_t *dims = b->dims;
	struct ckpt_tensor *t = arena_alloc(&b->c->arena, sizeof(*t) +
					    (dims ? 0 : 2 * (size_t)ndim *
					     sizeof(int64_t)));

	b->dims = NULL;
	if (!t || ckpt_push((void ***)&b->c->tensors, &b->c->ntensors,
			    &b->tensors_cap, t))
		return NULL;
	t->shape = dims ? dims : (int64_t *)(t + 1);
	t->ndim = ndim;
	t->x = &ckpt_no_ext;
	t->index = b->c->ntensors - 1;
	return t;
}

/* A new tensor with the same view as @src (for Parameter and friends). */
static struct ckpt_tensor *tensor_copy(struct ckpt_build *b,
				       const struct ckpt_tensor *src)
{
	struct ckpt_tensor *t = ckpt_tensor_new(b, src->ndim);
	int64_t *shape;

	if (!t)
		return NULL;
	shape = t->shape;
	memcpy(shape, src->shape, 2 * (size_t)src->ndim * sizeof(int64_t));
	*t = *src;
	t->x_own = false;	/* shares @src's until it writes its own */
	t->shape = shape;
	t->index = b->c->ntensors - 1;
	return t;
}

static int tensor_of(struct ckpt_build *b, const struct pkl_value *v,
		     struct ckpt_tensor **out);

/* shape and stride from two int tuples (stride may be NULL: row-major) */
static int set_view(struct ckpt_build *b, const struct pkl_value *size,
		    const struct pkl_value *stride, uint64_t off,
		    struct ckpt_tensor **out)
{
	const struct pkl_value *sz = int_seq(size), *st = int_seq(stride);
	struct ckpt_tensor *t;
	bool shared;
	size_t n;

	if (!sz || (stride && !st))
		return diag_corrupt(b->d, off, "tensor size or stride is not "
				    "a tuple of ints");
	n = pkl_len(sz);
	if (n > CKPT_MAX_DIMS)
		return diag_corrupt(b->d, off, "tensor has %zu dimensions", n);
	if (st && pkl_len(st) != n)
		return diag_corrupt(b->d, off, "tensor has %zu sizes but %zu "
				    "strides", n, pkl_len(st));
	shared = b->dims != NULL;	/* then already set: the view is made
					   of the same record */
	t = ckpt_tensor_new(b, (int)n);
	if (!t)
		return diag_nomem(b->d);
	for (size_t i = 0; i < n && !shared; i++) {
		if (!as_int(pkl_item(sz, i), &t->shape[i]) ||
		    (st && !as_int(pkl_item(st, i), &ckpt_tensor_stride(t)[i])))
			return diag_corrupt(b->d, off, "tensor size or stride "
					    "is not a tuple of ints");
	}
	if (!st && !ckpt_tensor_c_strides(t))
		return diag_corrupt(b->d, off, "tensor size overflows");
	t->pkl_off = off;
	*out = t;
	return 0;
}

/* (persistent id, offset, size, stride): the strided part every kind has */
static int strided(struct ckpt_build *b, const struct pkl_value *args,
		   uint64_t off, struct ckpt_tensor **out)
{
	const struct pkl_value *pid = arg(args, 0);
	const struct ckpt_dtype *dt;
	struct ckpt_storage *s;
	struct ckpt_tensor *t;
	uint64_t voff;
	int64_t soff;
	int rc;

	if (!pid || pid->kind != PKL_PERSID)
		return diag_corrupt(b->d, off, "tensor without a storage "
				    "persistent id");
	rc = ckpt_storage_ref(b, pid, &dt, &s, &voff);
	if (rc)
		return rc;
	if (!as_int(arg(args, 1), &soff) || soff < 0)
		return diag_corrupt(b->d, off, "bad tensor storage offset");
	rc = set_view(b, arg(args, 2), arg(args, 3), off, &t);
	if (rc)
		return rc;
	t->kind = CKPT_T_STRIDED;
	t->storage = s;
	t->dtype = dt;
	t->offset = (uint64_t)soff + voff;
	s->ntensors++;
	*out = t;
	return 0;
}

static const struct ckpt_dtype *dtype_global(const struct pkl_value *g)
{
	if (!g || g->kind != PKL_GLOBAL || strcmp(g->u.global.module, "torch"))
		return NULL;
	return ckpt_dtype_by_name(g->u.global.name);
}

/* {'conj': True, 'neg': True} of _rebuild_tensor_v2/v3 (2.x) */
static void tensor_metadata(struct ckpt_tensor *t, const struct pkl_value *m)
{
	if (!m || m->kind != PKL_DICT)
		return;
	for (size_t i = 0; i + 1 < m->u.items.n; i += 2) {
		const char *k = as_str(m->u.items.v[i]);
		int64_t on;

		if (!k || !as_int(m->u.items.v[i + 1], &on))
			continue;
		if (!strcmp(k, "conj"))
			t->conj = on;
		else if (!strcmp(k, "neg"))
			t->neg = on;
	}
}

struct ckpt_tensor_ext *ckpt_tensor_ext_own(struct ckpt *c,
					    struct ckpt_tensor *t)
{
	struct ckpt_tensor_ext *x;

	if (t->x_own)	/* made here: the const is the readers' */
		return (struct ckpt_tensor_ext *)(uintptr_t)t->x;
	x = arena_alloc(&c->arena, sizeof(*x));
	if (!x)
		return NULL;
	*x = *t->x;
	t->x = x;
	t->x_own = true;
	return x;
}

static int qparams(struct ckpt_build *b, struct ckpt_tensor *t,
		   const struct pkl_value *q, uint64_t off)
{
	const struct pkl_value *scheme = arg(q, 0), *sc = arg(q, 1);
	struct ckpt_tensor_ext *qp;
	int rc;

	if (!scheme || scheme->kind != PKL_GLOBAL)
		return diag_corrupt(b->d, off, "bad quantizer parameters");
	qp = ckpt_tensor_ext_own(b->c, t);
	if (!qp)
		return diag_nomem(b->d);
	qp->qscheme = scheme->u.global.name;
	if (strstr(qp->qscheme, "per_tensor")) {
		if (sc && sc->kind == PKL_FLOAT)
			qp->scale = sc->u.f;
		else if (sc && sc->kind == PKL_INT)
			qp->scale = (double)sc->u.i;
		else
			return diag_corrupt(b->d, off, "bad quantizer scale");
		if (!as_int(arg(q, 2), &qp->zero_point))
			return diag_corrupt(b->d, off, "bad quantizer zero point");
		return 0;
	}
	rc = tensor_of(b, sc, &qp->qscales);
	if (!rc)
		rc = tensor_of(b, arg(q, 2), &qp->qzeros);
	if (!rc && !as_int(arg(q, 3), &qp->axis))
		rc = diag_corrupt(b->d, off, "bad quantizer axis");
	return rc;
}

bool ckpt_state_is_slots(const struct pkl_value *st)
{
	if (!st || st->kind != PKL_TUPLE || pkl_len(st) != 2)
		return false;
	for (size_t i = 0; i < 2; i++) {
		const struct pkl_value *s = pkl_item(st, i);

		if (s->kind != PKL_DICT && s->kind != PKL_NONE)
			return false;
	}
	return true;
}

/* Does state @st hold nothing: None, {}, or a (dict, slots) of those? */
static bool state_empty(const struct pkl_value *st)
{
	if (!st || st->kind == PKL_NONE)
		return true;
	if (st->kind == PKL_DICT)
		return !pkl_len(st);
	return ckpt_state_is_slots(st) && state_empty(pkl_item(st, 0)) &&
	       state_empty(pkl_item(st, 1));
}

/* A tensor's python attributes: the dict of a state, which may come as
 * (dict, slots); NULL when there are none. */
static const struct pkl_value *state_of(const struct pkl_value *s)
{
	if (s && s->kind == PKL_TUPLE)
		s = pkl_item(s, 0);
	if (!s || (s->kind == PKL_DICT ? !pkl_len(s) :
		   s->kind != PKL_CALL || !pkl_call_x(s)->ndict))
		return NULL;
	return s;
}

/* "module.Name" of a class global (arena); its name alone on ENOMEM. */
static const char *class_name(struct ckpt_build *b, const struct pkl_value *g)
{
	size_t m = strlen(g->u.global.module), n = strlen(g->u.global.name);
	char *s = arena_alloc(&b->c->arena, m + n + 2);

	if (!s)
		return g->u.global.name;
	memcpy(s, g->u.global.module, m);
	s[m] = '.';
	memcpy(s + m + 1, g->u.global.name, n + 1);
	return s;
}

/* Give @t subclass name @cls and python state @state (pass t->x's own to
 * keep one); its ckpt_tensor_ext is made only if either changes. */
static int set_ext(struct ckpt_build *b, struct ckpt_tensor *t,
		   const char *cls, const struct pkl_value *state)
{
	struct ckpt_tensor_ext *x;

	if (cls == t->x->cls && state == t->x->state)
		return 0;
	x = ckpt_tensor_ext_own(b->c, t);
	if (!x)
		return diag_nomem(b->d);
	x->cls = cls;
	x->state = state;
	return 0;
}

/*
 * _rebuild_device_tensor_from_numpy(ndarray, dtype, device, requires_grad)
 * (torch 1.13, devices without storages: XLA, ORT, HPU).  The array is
 * numpy's own pickle: _reconstruct(ndarray, (0,), b'b') + BUILD with
 * (version, shape, dtype, is_fortran, raw bytes); the data live in the
 * pickle itself, so the tensor keeps a copy (CKPT_T_INLINE).
 */
static int numpy_tensor(struct ckpt_build *b, const struct pkl_value *args,
			uint64_t off, struct ckpt_tensor **out)
{
	const struct pkl_value *nd = arg(args, 0), *st, *dt, *raw;
	const struct pkl_value *dst;
	const char *descr, *order, *digits;	/* numpy's "f4" and '<' */
	const char *data = NULL;
	char *tmp;
	struct ckpt_tensor *t;
	struct ckpt_tensor_ext *x;
	int64_t fortran = 0, flag = 0;
	size_t len = 0;
	int rc;

	st = nd && nd->kind == PKL_CALL ? pkl_call_x(nd)->state : NULL;
	dt = arg(st, 2);
	raw = arg(st, 4);
	if (!st || pkl_len(st) != 5 || !dt || dt->kind != PKL_CALL ||
	    !as_int(arg(st, 3), &fortran))
		return diag_corrupt(b->d, off, "malformed numpy array");
	descr = as_str(arg(pkl_call_args(dt), 0));
	dst = pkl_call_x(dt)->state;
	order = as_str(arg(dst, 1));
	rc = set_view(b, arg(st, 1), NULL, off, &t);
	if (rc)
		return rc;
	t->kind = CKPT_T_INLINE;
	t->dtype = dtype_global(arg(args, 1));
	as_int(arg(args, 3), &flag);
	t->requires_grad = flag;
	if (!t->dtype || !descr || !order)
		return diag_unsupported(b->d, off, "numpy array of an unknown "
					"dtype");
	/* descr "f4", "<i8": its digits are the item size numpy stored */
	digits = descr;
	while (*digits && (*digits < '0' || *digits > '9'))
		digits++;
	if (strtol(digits, NULL, 10) != t->dtype->size || fortran ||
	    order[0] == '>')
		return diag_unsupported(b->d, off, "numpy array '%s' (%s, "
					"%s order) for a %s tensor: not "
					"supported", descr, order,
					fortran ? "Fortran" : "C",
					t->dtype->name);
	rc = ckpt_tensor_check(b->c, t, b->d);
	if (rc)
		return rc;
	/* in the document or the arena, which live as long as the model: a
	   Parameter of this tensor shares them, and nobody frees them */
	if (raw && (raw->kind == PKL_BYTES || raw->kind == PKL_STRING)) {
		data = raw->u.s.p;
		len = raw->u.s.n;
	} else if (raw && (tmp = ckpt_bytes_of(raw, &len))) {
		data = arena_strndup(&b->c->arena, tmp, len);
		free(tmp);
		if (!data)
			return diag_nomem(b->d);
	}
	if (!data)
		return diag_corrupt(b->d, off, "numpy array without its data");
	if (len != ckpt_tensor_nbytes(t))
		return diag_corrupt(b->d, off, "numpy array holds %zu bytes, "
				    "its shape needs %llu", len,
				    (unsigned long long)ckpt_tensor_nbytes(t));
	x = ckpt_tensor_ext_own(b->c, t);
	if (!x)
		return diag_nomem(b->d);
	x->inline_data = (const unsigned char *)data;
	x->device = as_str(arg(args, 2));
	*out = t;
	return 0;
}

/* torch.device('cuda', 0) as "cuda:0" (arena); NULL if @v is not one. */
static const char *device_text(struct ckpt_build *b, const struct pkl_value *v)
{
	const char *type;
	int64_t idx;
	char buf[48];

	if (!is_func(v, "torch", "device") ||
	    !(type = as_str(arg(pkl_call_args(v), 0))))
		return NULL;
	if (!as_int(arg(pkl_call_args(v), 1), &idx))
		return type;
	snprintf(buf, sizeof(buf), "%.24s:%lld", type, (long long)idx);
	return arena_strndup(&b->c->arena, buf, strlen(buf));
}

/*
 * _rebuild_wrapper_subclass(cls, dtype, size, stride, storage_offset,
 * layout, device, requires_grad) (torch 2.x: TwoTensor, DTensor, torchao's
 * quantized tensors, jagged nested tensors): a tensor with no data of its
 * own, whose real tensors are attributes in the state that
 * _rebuild_from_type_v2 sets on it.  Modelled as a meta tensor (nothing to
 * read) with the device it was saved on.
 */
static int wrapper_tensor(struct ckpt_build *b, const struct pkl_value *args,
			  uint64_t off, struct ckpt_tensor **out)
{
	const struct pkl_value *cls = arg(args, 0);
	struct ckpt_tensor_ext *x;
	struct ckpt_tensor *t;
	int64_t soff = 0, flag = 0;
	const char *dev;
	int rc;

	rc = set_view(b, arg(args, 2), arg(args, 3), off, &t);
	if (rc)
		return rc;
	t->kind = CKPT_T_META;
	t->dtype = dtype_global(arg(args, 1));
	if (!t->dtype)
		return diag_unsupported(b->d, off, "unknown tensor dtype");
	if (!as_int(arg(args, 4), &soff) || soff < 0)
		return diag_corrupt(b->d, off, "bad tensor storage offset");
	t->offset = (uint64_t)soff;
	dev = device_text(b, arg(args, 6));
	if (!(x = ckpt_tensor_ext_own(b->c, t)))
		return diag_nomem(b->d);
	x->device = dev ? dev : "cpu";
	as_int(arg(args, 7), &flag);
	t->requires_grad = flag;
	if (cls && cls->kind == PKL_GLOBAL &&
	    (rc = set_ext(b, t, class_name(b, cls), t->x->state)))
		return rc;
	*out = t;
	return 0;
}

/* The value of key @k in dict @d, or NULL. */
static const struct pkl_value *dict_get(const struct pkl_value *d,
					const char *k)
{
	if (!d || d->kind != PKL_DICT)
		return NULL;
	for (size_t i = 0; i + 1 < d->u.items.n; i += 2) {
		const char *s = as_str(d->u.items.v[i]);

		if (s && !strcmp(s, k))
			return d->u.items.v[i + 1];
	}
	return NULL;
}

/*
 * _rebuild_njt({values, offsets, lengths, _ragged_idx, _metadata_cache,
 * requires_grad}) (torch.nested._internal.nested_tensor, 2.x): a jagged
 * nested tensor, whose __reduce_ex__ hands it to _rebuild_from_type_v2
 * with its state (_values, _offsets, _lengths, _ragged_idx, ...: the
 * same tensors again).  Its ragged outer shape has no integer size, so
 * it is modelled as a meta tensor of its packed values' dtype, shape and
 * device, and shown as the directory of that state (ckpt_wrapper_state()):
 * _values and _offsets are its tensors, the rest its attributes.
 */
static int njt_tensor(struct ckpt_build *b, const struct pkl_value *args,
		      uint64_t off, struct ckpt_tensor **out)
{
	const struct pkl_value *kw = arg(args, 0);
	const struct pkl_value *vals = dict_get(kw, "values");
	const struct pkl_value *offs = dict_get(kw, "offsets");
	struct ckpt_tensor *v, *o, *t;
	struct ckpt_tensor_ext *x;
	int64_t flag = 0;
	int rc;

	if (!vals || !offs)
		return diag_corrupt(b->d, off, "jagged nested tensor without "
				    "its values or offsets");
	rc = tensor_of(b, vals, &v);
	if (!rc)
		rc = tensor_of(b, offs, &o);
	if (rc)
		return rc;
	t = ckpt_tensor_new(b, v->ndim);
	if (!t)
		return diag_nomem(b->d);
	memcpy(t->shape, v->shape, 2 * (size_t)v->ndim * sizeof(int64_t));
	t->kind = CKPT_T_META;
	t->dtype = v->dtype;
	t->pkl_off = off;
	if (!(x = ckpt_tensor_ext_own(b->c, t)))
		return diag_nomem(b->d);
	x->device = ckpt_tensor_device(v) ? ckpt_tensor_device(v) : "cpu";
	as_int(dict_get(kw, "requires_grad"), &flag);
	t->requires_grad = flag;
	*out = t;
	return 0;
}

static int rebuild(struct ckpt_build *b, enum rebuild r,
		   const struct pkl_value *args, uint64_t off,
		   struct ckpt_tensor **out)
{
	struct ckpt_tensor *t = NULL, *inner;
	int64_t flag = 0;
	int rc = 0;

	switch (r) {
	case R_V1:
	case R_V2:
	case R_V3:
	case R_QTENSOR:
		rc = strided(b, args, off, &t);
		if (rc)
			return rc;
		if (r == R_V2 || r == R_V3)
			rc = !as_int(arg(args, 4), &flag);
		t->requires_grad = flag;
		if (r == R_V2)
			tensor_metadata(t, arg(args, 6));
		if (r == R_V3) {
			tensor_metadata(t, arg(args, 7));
			t->dtype = dtype_global(arg(args, 6));
			if (!t->dtype)
				return diag_unsupported(b->d, off, "unknown "
							"tensor dtype");
		}
		if (r == R_QTENSOR && arg(args, 4) &&
		    arg(args, 4)->kind == PKL_FLOAT) {
			/* torch 1.3: (..., scale, zero_point, requires_grad,
			   hooks), always per tensor affine */
			struct ckpt_tensor_ext *qp =
				ckpt_tensor_ext_own(b->c, t);

			if (!qp)
				return diag_nomem(b->d);
			t->kind = CKPT_T_QUANTIZED;
			qp->qscheme = "per_tensor_affine";
			qp->scale = arg(args, 4)->u.f;
			rc = !as_int(arg(args, 5), &qp->zero_point) ||
			     !as_int(arg(args, 6), &flag);
			t->requires_grad = flag;
		} else if (r == R_QTENSOR) {
			t->kind = CKPT_T_QUANTIZED;
			rc = !as_int(arg(args, 5), &flag);
			t->requires_grad = flag;
			if (!rc)
				rc = qparams(b, t, arg(args, 4), off);
			if (rc < 0)
				return rc;
		}
		if (rc)
			return diag_corrupt(b->d, off, "bad requires_grad");
		break;
	case R_META:
		rc = set_view(b, arg(args, 1), arg(args, 2), off, &t);
		if (rc)
			return rc;
		t->kind = CKPT_T_META;
		t->dtype = dtype_global(arg(args, 0));
		if (!t->dtype)
			return diag_unsupported(b->d, off, "unknown tensor dtype");
		as_int(arg(args, 3), &flag);
		t->requires_grad = flag;
		break;
	case R_PARAM:
	case R_PARAM_STATE:
	case R_PARAM_CLASS:
	case R_DEV_CPU:
		rc = tensor_of(b, arg(args, 0), &inner);
		if (rc)
			return rc;
		t = tensor_copy(b, inner);
		if (!t)
			return diag_nomem(b->d);
		t->pkl_off = off;
		if (r == R_DEV_CPU) {
			const char *dev = as_str(arg(args, 2));
			struct ckpt_tensor_ext *x;

			if (dev && !(x = ckpt_tensor_ext_own(b->c, t)))
				return diag_nomem(b->d);
			if (dev)
				x->device = dev;
			as_int(arg(args, 3), &flag);
		} else {
			t->parameter = true;
			flag = 1;
			as_int(arg(args, 1), &flag);
		}
		if (r == R_PARAM_STATE &&
		    (rc = set_ext(b, t, t->x->cls, state_of(arg(args, 3)))))
			return rc;
		t->requires_grad = flag;
		if (t->storage)
			t->storage->ntensors++;
		*out = t;	/* the inner tensor was checked already */
		return 0;
	case R_FROM_TYPE: {
		const struct pkl_value *f = arg(args, 0), *cls = arg(args, 1);
		enum rebuild ir = rebuild_kind(f);
		const char *name;

		if (ir == R_NONE || ir == R_FROM_TYPE)
			return diag_unsupported(b->d, off, "unknown tensor "
						"rebuild function");
		rc = rebuild(b, ir, arg(args, 2), off, &t);
		if (rc)
			return rc;
		name = t->x->cls;
		if (pkl_is_global(cls, "torch.nn.parameter", "Parameter"))
			t->parameter = true;
		else if (cls && cls->kind == PKL_GLOBAL &&
			 !pkl_is_global(cls, "torch", "Tensor"))
			name = class_name(b, cls);
		rc = set_ext(b, t, name, state_of(arg(args, 3)));
		if (rc)
			return rc;
		*out = t;
		return 0;
	}
	case R_DEV_NUMPY:
		return numpy_tensor(b, args, off, out);	/* checked there */
	case R_WRAPPER:
		rc = wrapper_tensor(b, args, off, &t);
		if (rc)
			return rc;
		break;
	case R_NJT:
		rc = njt_tensor(b, args, off, &t);
		if (rc)
			return rc;
		break;
	case R_NONE:
		return diag_unsupported(b->d, off, "not a tensor");
	}
	rc = ckpt_tensor_check(b->c, t, b->d);
	if (rc)
		return rc;
	*out = t;
	return 0;
}

/* The tensor a rebuild call (or persistent id) makes; shared via memo. */
static int tensor_of(struct ckpt_build *b, const struct pkl_value *v,
		     struct ckpt_tensor **out)
{
	enum rebuild r;
	int rc;

	if (!v)
		return diag_corrupt(b->d, DIAG_NO_OFFSET, "missing tensor");
	if ((*out = ckpt_memo_get(&b->memo, v->id)))
		return 0;
	if (v->kind == PKL_PERSID && b->persid) {
		rc = b->persid(b, v, out);	/* tar era: its own key space */
		if (rc)
			return rc;
		goto out_memo;
	}
	if (v->kind == PKL_PERSID) {
		/* a storage saved on its own: its bytes as a 1-d tensor */
		const struct ckpt_dtype *dt;
		struct ckpt_storage *s;
		struct ckpt_tensor *t;
		uint64_t voff;

		rc = ckpt_storage_ref(b, v, &dt, &s, &voff);
		if (rc)
			return rc;
		t = ckpt_tensor_new(b, 1);
		if (!t)
			return diag_nomem(b->d);
		t->kind = CKPT_T_STORAGE;
		t->storage = s;
		t->dtype = dt;
		t->offset = voff;
		t->shape[0] = s->numel - voff;
		ckpt_tensor_stride(t)[0] = 1;
		t->pkl_off = v->off;
		s->ntensors++;
		rc = ckpt_tensor_check(b->c, t, b->d);
		if (rc)
			return rc;
		*out = t;
		goto out_memo;
	}
	if (v->kind == PKL_FOLDED) {	/* _rebuild_tensor_v2: pkl_fold.c */
		struct pkl_fold_view fv;

		/* the tensor's shape: never written (ckpt.h) */
		b->dims = v->u.fold.rec->dims;
		rc = rebuild(b, R_V2, pkl_call_args(pkl_unfolded(v, &fv)),
			     v->off, out);
		b->dims = NULL;
		if (rc || !pkl_shared(v))
			return rc;	/* met once: nothing to remember */
		goto out_memo;
	}
	r = v->kind == PKL_CALL ? rebuild_kind(v->u.call.func) : R_NONE;
	if (r == R_NONE)
		return diag_corrupt(b->d, v->off, "expected a tensor, found %s",
				    pkl_kind_name(v->kind));
	rc = rebuild(b, r, pkl_call_args(v), v->off, out);
	if (rc)
		return rc;
out_memo:
	return ckpt_memo_put(&b->memo, v->id, *out) ? diag_nomem(b->d) : 0;
}

const struct pkl_value *ckpt_module_class(const struct pkl_value *v)
{
	const struct pkl_value *t, *cls;
	const char *tag;

	if (!v || v->kind != PKL_PERSID)
		return NULL;
	t = pkl_call_args(v);
	tag = as_str(arg(t, 0));
	cls = arg(t, 1);
	if (!tag || strcmp(tag, "module") || !cls || cls->kind != PKL_GLOBAL)
		return NULL;
	return cls;
}

const struct pkl_value *ckpt_wrapper_state(const struct pkl_value *v)
{
	const struct pkl_value *a, *st;
	enum rebuild r;

	if (!is_func(v, "torch._tensor", "_rebuild_from_type_v2"))
		return NULL;
	a = pkl_call_args(v);
	r = rebuild_kind(arg(a, 0));
	if (r != R_WRAPPER && r != R_META && r != R_NJT)
		return NULL;
	st = arg(a, 3);
	/* a wrapper's state dict is shown even when empty, as it was */
	if ((r == R_WRAPPER || r == R_NJT) && st && st->kind == PKL_DICT)
		return st;
	return state_empty(st) ? NULL : st;
}

bool ckpt_dir_parts_fixed(const struct ckpt_node *dir)
{
	const struct pkl_value *st;

	if (!dir->tensor || !dir->val || !(st = ckpt_wrapper_state(dir->val)))
		return false;
	return st->kind != PKL_DICT && !ckpt_state_is_slots(st);
}

bool ckpt_is_tensor_value(const struct pkl_value *v)
{
	const char *tag;

	/* ('module', class, file, source): the class of a pickled module
	   (torch-format.md 7), which torch.load returns as it is */
	if (v->kind == PKL_PERSID)
		return !(tag = as_str(arg(pkl_call_args(v), 0))) ||
		       strcmp(tag, "module");
	return v->kind == PKL_FOLDED || (v->kind == PKL_CALL &&
					 rebuild_kind(v->u.call.func) != R_NONE);
}

int ckpt_tensor_value(struct ckpt_build *b, const struct pkl_value *v,
		      struct ckpt_tensor **out)
{
	return tensor_of(b, v, out);
}
