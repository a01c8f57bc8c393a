/*
 * ckpt_stflat.c - the model as safetensors sees a state dict: a flat map
 * of names to tensors (ckpt_stwrite.c writes it).  Nested dicts, lists
 * and tuples are flattened with '.' between keys, as Hugging Face names
 * the parameters of nested modules ("model.layers.0.weight"); list items
 * are named by their index, int keys in decimal.  What safetensors cannot
 * hold is refused with one line naming the key: python values and
 * objects (or, when asked, left out and reported), quantized, meta and
 * sparse tensors, dtypes with no safetensors name (complex128, complex32,
 * qint8...), conjugate or negative bits, names that are not UTF-8, and a
 * name flattened twice, and a model whose shared containers would give
 * more than 16 names per node (a billion laughs through the memo).
 *
 * Tied weights follow safetensors.torch.save_model (torch.py,
 * _remove_duplicate_names): of the names of one storage seen through the
 * same view, the first in sorted order keeps the tensor and the others
 * become __metadata__ entries "ALIAS": "KEPT" (never over an entry the
 * metadata has already).  Other views of a storage (a slice, a
 * transpose) are written as contiguous copies of their own: save_model
 * drops them, relying on the model to tie them again, and a file has no
 * model.  A Hugging Face folder (tie_first_seen) keeps a tie under its
 * first name in the state dict's order instead, as transformers keeps the
 * tie's source (model.embed_tokens.weight before lm_head.weight).
 */
#include "ckpt_stint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle/pkl_int.h"
#include "util/sbuf.h"

/* Names a flat map may have per node of the model (shared containers
 * give each of their places its names) before it is refused. */
#define ST_SHARED_MAX	16u

int ckpt_st_name_ok(const char *key, size_t len, struct diag *d)
{
	if (!pkl_utf8_valid((const unsigned char *)key, len))
		return diag_errno(d, -EINVAL, "'%.*s': a safetensors name must "
				  "be UTF-8", (int)(len < 64 ? len : 64), key);
	if (len == strlen(CKPT_ST_META) && !memcmp(key, CKPT_ST_META, len))
		return diag_errno(d, -EINVAL, "'%s' is the header's metadata, "
				  "not a name a tensor can have", CKPT_ST_META);
	return 0;
}

int ckpt_key_text(const struct ckpt_node *k, uint32_t index,
		  struct sbuf *path, const char *what, struct diag *d)
{
	const struct pkl_value *key = k->key;
	size_t at = path->n;
	char *buf;
	long n;

	if (k->step == CKPT_S_INDEX) {
		sb_printf(path, "%u", index);
		return 0;
	}
	if (key && !ckpt_node_rekeyed(k)) {
		if (key->kind == PKL_STR || key->kind == PKL_STRING) {
			sb_add(path, key->u.s.p, key->u.s.n);
			return 0;
		}
		if (key->kind == PKL_INT) {
			sb_printf(path, "%lld", (long long)key->u.i);
			return 0;
		}
		return diag_unsupported(d, key->off, "%.*s%s: a %s key cannot "
					"be part of a %s name", (int)at,
					path->p ? path->p : "", k->name,
					pkl_kind_name(key->kind), what);
	}
	buf = malloc(strlen(k->name) + 1);
	if (!buf)
		return diag_nomem(d);
	n = ckpt_name_unescape(k->name, buf);
	if (n >= 0)
		sb_add(path, buf, (size_t)n);
	free(buf);
	return n < 0 ? diag_errno(d, -EINVAL, "name '%s' is not a valid "
				  "key", k->name) : 0;
}

/* The format written, as the refusals name it. */
static const char *fmt_of(const struct st_flat *f)
{
	return f->out ? f->out : "safetensors";
}

/* Append '.' and @k's key to @path. */
static int key_of(struct st_flat *f, const struct ckpt_node *k,
		  uint32_t index, struct sbuf *path)
{
	if (path->n)
		sb_add(path, ".", 1);
	return ckpt_key_text(k, index, path, fmt_of(f), f->d);
}

/* A python value or object at @path: left out on request, else refused. */
static int value(struct st_flat *f, const struct ckpt_node *x,
		 const char *path)
{
	const char *type = x->type ? x->type : "value";
	const char *a = type[0] && strchr("aeiouAEIOU", type[0]) ? "an" : "a";
	char what[96];

	if (!f->drop)
		return diag_unsupported(f->d, DIAG_NO_OFFSET, "%s: %s %s, not "
					"a tensor: %s files hold tensors only "
					"(ptrepack --drop-values leaves such "
					"values out)", path, a, type,
					fmt_of(f));
	f->dropped++;
	if (f->note) {
		snprintf(what, sizeof(what), "%s %s, not a tensor: left out",
			 a, type);
		f->note(f->note_arg, path, what);
	}
	return 0;
}

/* Can safetensors hold tensor @t (named @path)? */
static int holdable(struct st_flat *f, const struct ckpt_tensor *t,
		    const char *path)
{
	if (t->kind == CKPT_T_QUANTIZED)
		return diag_unsupported(f->d, t->pkl_off, "%s: a quantized "
					"tensor: %s has no quantized dtypes "
					"of torch's", path, fmt_of(f));
	if (t->kind != CKPT_T_STRIDED || !t->storage)
		return diag_unsupported(f->d, t->pkl_off, "%s: a %s tensor "
					"has no data %s can hold", path,
					t->kind == CKPT_T_META ? "meta" :
					t->kind == CKPT_T_INLINE ? "numpy" :
					"storage", fmt_of(f));
	if (!t->dtype->st && !f->out)
		return diag_unsupported(f->d, t->pkl_off, "%s: safetensors has "
					"no dtype for %s", path,
					t->dtype->name);
	if (t->dtype->pack && !t->ndim)
		return diag_unsupported(f->d, t->pkl_off, "%s: a 0-d %s tensor "
					"holds %u values, which safetensors "
					"cannot shape", path, t->dtype->name,
					t->dtype->pack);
	if (t->conj || t->neg)
		return diag_unsupported(f->d, t->pkl_off, "%s: a tensor with "
					"its conjugate or negative bit set "
					"(resolve_conj() first)", path);
	return 0;
}

static int add(struct st_flat *f, struct ckpt_node *n, struct ckpt_tensor *t,
	       const struct sbuf *path)
{
	struct diag *d = f->d, why;
	struct st_ent *e;
	int rc;

	/* drop_tensors: the reason goes to note(), not to the caller */
	diag_init(&why, NULL);
	if (f->drop_tensors)
		f->d = &why;
	rc = holdable(f, t, path->p);
	if (!rc && !f->out)
		rc = ckpt_st_name_ok(path->p, path->n, f->d);
	f->d = d;
	if (rc && f->drop_tensors && rc != -ENOMEM) {
		const char *m = why.msg;

		f->dropped++;
		if (!strncmp(m, path->p, path->n) && !strncmp(m + path->n,
							      ": ", 2))
			m += path->n + 2;	/* the key is note()'s */
		if (f->note)
			f->note(f->note_arg, path->p, m);
		return 0;
	}
	if (rc)
		return rc == -ENOMEM ? diag_nomem(d) : rc;
	if (f->n == f->cap) {
		uint32_t cap = f->cap ? 2 * f->cap : 64;

		e = realloc(f->e, cap * sizeof(*e));
		if (!e)
			return diag_nomem(f->d);
		f->e = e;
		f->cap = cap;
	}
	e = &f->e[f->n];
	memset(e, 0, sizeof(*e));
	e->name = arena_strndup(&f->arena, path->p, path->n);
	if (!e->name)
		return diag_nomem(f->d);
	e->len = path->n;
	e->node = n;
	e->t = t;
	e->seq = f->n;
	e->kept = f->n++;
	return 0;
}

/* Dicts, lists and tuples are flattened; anything else is a value. */
static bool flattened(const struct ckpt_node *x)
{
	if (x->tensor)
		return false;	/* a wrapper subclass shown as a directory */
	if (x->kind == CKPT_N_SEQ)
		return !strcmp(x->type, "list") || !strcmp(x->type, "tuple");
	return x->kind == CKPT_N_DIR && ckpt_dict_type(x->type);
}

static int walk(struct st_flat *f, const struct ckpt_node *dir,
		struct sbuf *path, int depth)
{
	uint32_t index = 0;
	int rc = 0;

	if (depth > CKPT_MAX_DEPTH)
		return diag_unsupported(f->d, DIAG_NO_OFFSET, "%s: nested "
					"deeper than %d", path->p,
					CKPT_MAX_DEPTH);
	for (uint32_t i = 0; i < dir->dir->nkids && !rc; i++) {
		struct ckpt_node *k = dir->dir->kids[i], *x;
		size_t mark = path->n;

		if (!k || k->dead || (!depth && f->part && !f->part[i]))
			continue;
		/* a container the pickle's memo shares is walked at each of
		   its places: 40 lists of two references to the one before
		   are 2^40 names (a billion laughs) */
		if (++f->visits > f->budget)
			return diag_unsupported(f->d, DIAG_NO_OFFSET, "%s: "
						"containers shared so often "
						"that their names outnumber "
						"the model's nodes %u times: "
						"not flattened", path->p,
						ST_SHARED_MAX);
		rc = key_of(f, k, index, path);
		if (k->step == CKPT_S_INDEX)
			index++;
		if (!rc && path->oom)
			rc = diag_nomem(f->d);
		if (rc)
			break;
		x = k->kind == CKPT_N_LINK ? k->target : k;
		if (k->step != CKPT_S_KEY && k->step != CKPT_S_INDEX)
			rc = value(f, k, path->p);
		else if (x->kind == CKPT_N_TENSOR)
			rc = add(f, k, x->tensor, path);
		else if (ckpt_node_is_dir(x) && flattened(x))
			rc = walk(f, x, path, depth + 1);
		else
			rc = value(f, x, path->p);
		sb_cut(path, mark);
	}
	return rc;
}

static int by_name(const void *a, const void *b)
{
	const struct st_ent *x = a, *y = b;
	int r = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);

	return r ? r : (x->len > y->len) - (x->len < y->len);
}

/* Views compared: equal when they are the same storage through the same
 * view, which torch would load as one tensor. */
static int view_cmp(const struct ckpt_tensor *s, const struct ckpt_tensor *t)
{
	if (s->storage != t->storage)
		return s->storage->index < t->storage->index ? -1 : 1;
	if (s->offset != t->offset)
		return s->offset < t->offset ? -1 : 1;
	if (s->dtype != t->dtype)
		return strcmp(s->dtype->name, t->dtype->name);
	if (s->ndim != t->ndim)
		return s->ndim - t->ndim;
	/* the sizes, then the strides (laid out after them) */
	for (int i = 0; i < 2 * s->ndim; i++)
		if (s->shape[i] != t->shape[i])
			return s->shape[i] < t->shape[i] ? -1 : 1;
	return 0;
}

static int by_view(const void *a, const void *b)
{
	const struct st_ent *x = *(const struct st_ent *const *)a;
	const struct st_ent *y = *(const struct st_ent *const *)b;
	int r = view_cmp(x->t, y->t);

	return r ? r : by_name(x, y);
}

/* ... the first seen first among equal views (tie_first_seen) */
static int by_view_seen(const void *a, const void *b)
{
	const struct st_ent *x = *(const struct st_ent *const *)a;
	const struct st_ent *y = *(const struct st_ent *const *)b;
	int r = view_cmp(x->t, y->t);

	return r ? r : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Names sorted; a name given twice refused; aliases found. */
static int ties(struct st_flat *f)
{
	struct st_ent **v;

	if (!f->n)
		return 0;	/* qsort() must not see f->e NULL */
	qsort(f->e, f->n, sizeof(*f->e), by_name);
	for (uint32_t i = 0; i < f->n; i++)
		f->e[i].kept = i;
	for (uint32_t i = 1; i < f->n; i++)
		if (!by_name(&f->e[i - 1], &f->e[i]))
			return diag_errno(f->d, -EINVAL, "%s: two keys flatten "
					  "to this name", f->e[i].name);
	v = malloc((f->n + 1) * sizeof(*v));
	if (!v)
		return diag_nomem(f->d);
	for (uint32_t i = 0; i < f->n; i++)
		v[i] = &f->e[i];
	qsort(v, f->n, sizeof(*v), f->tie_first_seen ? by_view_seen :
	      by_view);
	for (uint32_t i = 1; i < f->n; i++)
		if (!view_cmp(v[i - 1]->t, v[i]->t)) {
			/* v[i - 1] is first (by name, or seen) among its
			   equals */
			v[i]->kept = v[i - 1]->kept;
			f->aliases++;
		}
	free(v);
	return 0;
}

/*
 * The subtrees ptrepack IN OUT KEYPATH... asked for: one is flattened as
 * the root would be (it must be a dict of tensors), several as a dict of
 * them keyed by their paths ("model.fc.weight" under "model").
 */
static int walk_roots(struct st_flat *f, struct sbuf *path)
{
	int rc = 0;

	for (uint32_t i = 0; i < f->nroots && !rc; i++) {
		const struct ckpt_node *x = f->roots[i];

		sb_cut(path, 0);
		if (f->nroots > 1)
			sb_add(path, f->root_keys[i], strlen(f->root_keys[i]));
		while (x->kind == CKPT_N_LINK && x->target)
			x = x->target;
		if (ckpt_node_is_dir(x) && flattened(x))
			rc = walk(f, x, path, 1);
		else if (f->nroots == 1)
			rc = diag_unsupported(f->d, DIAG_NO_OFFSET, "%s: %s "
					      "%s, not a dict of tensors (a "
					      "%s file is one)",
					      f->root_keys[i],
					      x->type && x->type[0] &&
					      strchr("aeiou", x->type[0]) ?
					      "an" : "a", x->type ? x->type :
					      "value", fmt_of(f));
		else if (x->kind == CKPT_N_TENSOR)
			rc = add(f, f->roots[i], x->tensor, path);
		else
			rc = value(f, x, path->p);
		if (!rc && path->oom)
			rc = diag_nomem(f->d);
	}
	return rc;
}

int ckpt_st_flatten(struct ckpt *c, const struct ckpt_write_opts *o,
		    struct st_flat *f, struct diag *d)
{
	struct sbuf path = { 0 };
	int rc;

	f->drop = o->st_drop;
	f->note = o->note;
	f->note_arg = o->note_arg;
	f->part = o->part;
	f->roots = o->roots;
	f->root_keys = o->root_keys;
	f->nroots = o->nroots;
	f->d = d;
	f->visits = 0;
	f->budget = (uint64_t)ST_SHARED_MAX * c->nnodes + 65536;
	if (!f->out && c->byteorder && !strcmp(c->byteorder, "big"))
		return diag_unsupported(d, DIAG_NO_OFFSET, "a big-endian "
					"checkpoint: safetensors files are "
					"little-endian");
	if (f->nroots) {
		rc = walk_roots(f, &path);
		free(path.p);
		return rc ? rc : ties(f);
	}
	if (!ckpt_node_is_dir(c->root) || !flattened(c->root))
		return diag_unsupported(d, DIAG_NO_OFFSET, "the checkpoint is "
					"a %s, not a dict of tensors",
					c->root->type ? c->root->type :
					"value");
	rc = walk(f, c->root, &path, 0);
	free(path.p);
	return rc ? rc : ties(f);
}

void ckpt_st_flat_release(struct st_flat *f)
{
	free(f->e);
	arena_release(&f->arena);
	memset(f, 0, sizeof(*f));
}
