/*
 * ckpt_modeljson.c - torch 1.0-1.1 TorchScript archives, which have
 * model.json (the protobuf torch.ModelDef as JSON) instead of data.pkl:
 *
 *   {"mainModule": {"name": "foo",
 *                   "parameters": [{"name", "tensorId", "isBuffer"}],
 *                   "attributes": [{"type", "name", "id"}],
 *                   "submodules": [ ...modules... ]},
 *    "tensors": [{"dims": ["2", "3"], "strides": [...], "offset": "0",
 *                 "dataType": "FLOAT", "requiresGrad": false,
 *                 "data": {"key": "tensors/0"}, "device": "cpu"}]}
 *
 * attributes.pkl is a tuple; attribute "id" indexes it, and
 * torch.jit._pickle.build_tensor_from_id(n) in it is tensors[n].  The
 * module becomes the root, as data.pkl's would; a record tensors/<n> is
 * one storage, whatever number of tensors view it.  torch 1.13 and later
 * no longer load these files, so nothing checks this against torch.
 */
#include "ckpt_int.h"
#include "util/jread.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_JSON_MAX	(UINT64_C(1) << 26)

struct mj {
	struct ckpt *c;
	struct diag *d;
	uint64_t off;			/* model.json's record, for messages */
	struct ckpt_tensor **t;		/* tensors[] */
	size_t nt;
	const struct ckpt_node *attrs;	/* attributes.pkl's tuple, or NULL */
};

/* caffe2's TensorProto.DataType names, as torch 1.0 wrote them */
static const struct ckpt_dtype *dtype_of(const char *name)
{
	static const char *const map[][2] = {
		{ "FLOAT", "float32" }, { "DOUBLE", "float64" },
		{ "FLOAT16", "float16" }, { "INT64", "int64" },
		{ "INT32", "int32" }, { "INT16", "int16" }, { "INT8", "int8" },
		{ "UINT8", "uint8" }, { "BOOL", "bool" },
	};

	for (size_t i = 0; name && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(name, map[i][0]))
			return ckpt_dtype_by_name(map[i][1]);
	return NULL;
}

/* The storage of record @rel: one per record, its dtype fixed by the
 * first tensor that views it. */
static int storage_of(struct mj *m, const char *rel,
		      const struct ckpt_dtype *dt, const char *dev,
		      struct ckpt_storage **out)
{
	struct ckpt_storage *s = ckpt_storage_find(m->c->b, rel);
	struct ptz_entry *e;
	int rc;

	if (s) {
		if (s->dtype != dt)
			return diag_corrupt(m->d, m->off, "record %s viewed as "
					    "%s and as %s", rel, s->dtype->name,
					    dt->name);
		*out = s;
		return 0;
	}
	e = ptz_find_rel(&m->c->zip, rel);
	if (!e)
		return diag_corrupt(m->d, m->off, "model.json names record "
				    "'%s', which is not there", rel);
	if (e->usize % dt->size)
		return diag_corrupt(m->d, e->header_off, "record %s of %llu "
				    "bytes holds no whole %s elements", rel,
				    (unsigned long long)e->usize, dt->name);
	rc = ckpt_storage_add(m->c->b, rel, dt, dev, e->usize / dt->size,
			      e->header_off, &s);
	if (!rc)
		s->rec = e;
	*out = s;
	return rc;
}

static int dims(struct mj *m, const struct jread *a, int64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!jread_int(a->v[i], &v[i]))
			return diag_corrupt(m->d, m->off, "model.json: a tensor "
					    "size or stride is not an int");
	return 0;
}

static int tensor(struct mj *m, const struct jread *j, size_t i)
{
	const struct jread *sz = jread_get(j, "dims"), *st = jread_get(j, "strides");
	const struct jread *rg = jread_get(j, "requiresGrad");
	const char *rel = jread_str(jread_get(jread_get(j, "data"), "key"));
	const char *dev = jread_str(jread_get(j, "device"));
	const struct ckpt_dtype *dt;
	struct ckpt_storage *s = NULL;
	struct ckpt_tensor *t;
	int64_t off = 0;
	size_t n;
	int rc;

	dt = dtype_of(jread_str(jread_get(j, "dataType")));
	if (!dt)
		return diag_unsupported(m->d, m->off, "model.json: tensor %zu "
					"of an unknown dataType", i);
	n = sz && sz->kind == JREAD_ARR ? sz->n : 0;
	if (!rel || (sz && sz->kind != JREAD_ARR) || (!st && n) ||
	    (st && (st->kind != JREAD_ARR || st->n != n)) ||
	    n > CKPT_MAX_DIMS ||
	    (jread_get(j, "offset") && !jread_int(jread_get(j, "offset"), &off))
	    || off < 0)
		return diag_corrupt(m->d, m->off, "model.json: malformed "
				    "tensor %zu", i);
	rc = storage_of(m, rel, dt, dev ? dev : "cpu", &s);
	if (rc)
		return rc;
	t = ckpt_tensor_new(m->c->b, (int)n);
	if (!t)
		return diag_nomem(m->d);
	rc = dims(m, sz, t->shape, n);
	if (!rc && n)
		rc = dims(m, st, ckpt_tensor_stride(t), n);
	if (rc)
		return rc;
	t->kind = CKPT_T_STRIDED;
	t->storage = s;
	t->dtype = dt;
	t->offset = (uint64_t)off;
	t->requires_grad = rg && rg->kind == JREAD_BOOL && rg->b;
	t->pkl_off = m->off;
	rc = ckpt_tensor_check(m->c, t, m->d);
	if (rc)
		return rc;
	s->ntensors++;
	m->t[i] = t;
	return 0;
}

static struct ckpt_node *tensor_node(struct mj *m, struct ckpt_tensor *t)
{
	struct ckpt_node *n = ckpt_node_synth(m->c->b, CKPT_N_TENSOR,
					      t->parameter ? "Parameter" :
					      "Tensor");

	if (n) {
		n->tensor = t;
		if (!t->shown) {
			t->shown = true;
			m->c->nshown++;
		}
	}
	return n;
}

/* tensors[n] for an id given as an int or a string of one */
static struct ckpt_tensor *by_id(struct mj *m, const struct jread *id)
{
	int64_t k;

	return jread_int(id, &k) && k >= 0 && (uint64_t)k < m->nt ? m->t[k]
								  : NULL;
}

/* attributes.pkl item @id: build_tensor_from_id(n) is tensors[n] */
static struct ckpt_node *attribute(struct mj *m, const struct jread *id)
{
	struct ckpt_node *n;
	const struct pkl_value *v, *a0;
	int64_t k;

	if (!m->attrs || !jread_int(id, &k) || k < 0 ||
	    (uint64_t)k >= m->attrs->dir->nkids)
		return NULL;
	n = m->attrs->dir->kids[k];
	v = n->val;
	a0 = v && v->kind == PKL_CALL ? pkl_item(pkl_call_args(v), 0) : NULL;
	if (v && v->kind == PKL_CALL && a0 && a0->kind == PKL_INT &&
	    pkl_is_global(v->u.call.func, "torch.jit._pickle",
			  "build_tensor_from_id")) {
		if (a0->u.i < 0 || (uint64_t)a0->u.i >= m->nt)
			return NULL;
		return tensor_node(m, m->t[a0->u.i]);
	}
	return n;
}

static int module(struct mj *m, const struct jread *j, int depth,
		  struct ckpt_node **out)
{
	static const char *const lists[] = {
		"parameters", "attributes", "submodules",
	};
	const char *name = jread_str(jread_get(j, "name"));
	struct ckpt_node *dir, **kids = NULL;
	uint32_t nk = 0, cap = 0;
	int rc = 0;

	if (depth > CKPT_MAX_DEPTH || !j || j->kind != JREAD_OBJ)
		return diag_corrupt(m->d, m->off, "model.json: %s",
				    j ? "modules nested too deeply" :
				    "no mainModule");
	dir = ckpt_node_synth(m->c->b, CKPT_N_DIR, name ? arena_strndup(
		&m->c->arena, name, strlen(name)) : "module");
	if (!dir || !dir->type)
		return diag_nomem(m->d);
	for (int l = 0; l < 3 && !rc; l++) {
		const struct jread *a = jread_get(j, lists[l]);

		for (size_t i = 0; a && a->kind == JREAD_ARR && i < a->n &&
		     !rc; i++) {
			const struct jread *e = a->v[i];
			const char *kn = jread_str(jread_get(e, "name"));
			struct ckpt_node *kid = NULL;
			struct ckpt_tensor *t;

			if (l == 2) {
				rc = module(m, e, depth + 1, &kid);
			} else if (l == 0 && (t = by_id(m,
					jread_get(e, "tensorId")))) {
				const struct jread *buf = jread_get(e, "isBuffer");

				t->parameter = !(buf && buf->kind == JREAD_BOOL
						 && buf->b);
				kid = tensor_node(m, t);
				if (!kid)
					rc = diag_nomem(m->d);
			} else if (l == 1) {
				kid = attribute(m, jread_get(e, "id"));
				/* an attributes.pkl item has one place */
				if (kid && kid->kind != CKPT_N_TENSOR &&
				    kid->parent != m->attrs)
					kid = NULL;
			}
			if (!rc && (!kid || !kn))
				rc = diag_corrupt(m->d, m->off, "model.json: "
						  "%s %zu of module '%s' names "
						  "nothing", lists[l], i,
						  name ? name : "?");
			if (rc)
				break;
			kid->key = ckpt_str_key(m->c, kn, strlen(kn));
			kid->name = ckpt_synth_name(m->c, kn, strlen(kn));
			kid->step = CKPT_S_ATTR;
			if (!kid->key || !kid->name ||
			    ckpt_push((void ***)&kids, &nk, &cap, kid))
				rc = diag_nomem(m->d);
		}
	}
	if (!rc)
		rc = ckpt_dir_fill(m->c->b, dir, kids, nk);
	free(kids);
	*out = dir;
	return rc;
}

int ckpt_modeljson(struct ckpt *c, struct ptz_entry *e, struct diag *d)
{
	struct mj m = { .c = c, .d = d, .off = e->header_off };
	struct ptz_entry *ap = ptz_find_rel(&c->zip, "attributes.pkl");
	const struct jread *ts;
	struct arena a = { 0 };
	struct jread *j;
	unsigned char *text;
	const char *why;
	size_t len, at;
	int rc;

	rc = ptz_entry_read(&c->zip, e, MODEL_JSON_MAX, &text, &len, d);
	if (rc)
		return rc;
	rc = jread_parse((const char *)text, len, &a, &j, &at, &why);
	free(text);
	if (rc == -EILSEQ)
		rc = diag_corrupt(d, e->header_off, "model.json, byte %zu: %s",
				  at, why);
	else if (rc)
		rc = diag_nomem(d);
	if (rc)
		goto out;
	ts = jread_get(j, "tensors");
	m.nt = ts && ts->kind == JREAD_ARR ? ts->n : 0;
	m.t = calloc(m.nt + 1, sizeof(*m.t));
	if (!m.t) {
		rc = diag_nomem(d);
		goto out;
	}
	for (size_t i = 0; i < m.nt && !rc; i++)
		rc = tensor(&m, ts->v[i], i);
	if (!rc && ap) {
		struct ckpt_node *n;

		rc = ckpt_script_pickle(c, ap, &c->doc2, d);
		if (!rc)
			rc = ckpt_build_doc(c, c->doc2, &n, d);
		if (!rc && n->kind == CKPT_N_SEQ)
			m.attrs = n;
	}
	if (!rc)
		rc = module(&m, jread_get(j, "mainModule"), 0, &c->root);
out:
	free(m.t);
	arena_release(&a);
	return rc;
}
