/*
 * ckpt_tree.c - the object tree a file system shows: dicts, lists, tuples,
 * sets and objects with state become directories, tensors and python
 * scalars become files, anything else an opaque file holding its repr().
 * Names follow ckpt_names.c; a directory's children, in container order,
 * and their name index are ckpt_dir.c's.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A directory's children while it is built: a malloc'd array that grows,
 * or, when the container says how many it has (kids_reserve()), an array
 * in the arena that the directory then keeps as it is.
 */
struct kids {
	struct ckpt_node **v;
	uint32_t n, cap;
	bool arena;		/* v is in the arena (room for cap) */
};

/*
 * Room for @n children in the arena, where the directory will keep them:
 * a state dict's 100,000 tensors need no malloc'd array beside the
 * arena's at the end of the build, when the open's memory peaks.  Only
 * a start; a child past @n moves them all to the heap (kid_push()).
 */
static void kids_reserve(struct ckpt_build *b, struct kids *k, size_t n)
{
	struct ckpt_node **v;

	if (k->v || n < 64 || n > CKPT_MAX_NODES)
		return;
	v = arena_alloc(&b->c->arena, n * sizeof(*v));
	if (v) {
		k->v = v;
		k->cap = (uint32_t)n;
		k->arena = true;
	}
}

static int kid_push(struct kids *k, struct ckpt_node *n)
{
	if (k->arena && k->n == k->cap) {
		struct ckpt_node **v = malloc(2 * (size_t)k->cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		memcpy(v, k->v, k->n * sizeof(*v));
		k->v = v;
		k->cap *= 2;
		k->arena = false;
	}
	if (k->arena) {
		k->v[k->n++] = n;
		return 0;
	}
	return ckpt_push((void ***)&k->v, &k->n, &k->cap, n);
}

static void kids_release(struct kids *k)
{
	if (!k->arena)
		free(k->v);
}

static int build(struct ckpt_build *b, struct ckpt_node *parent,
		 const struct pkl_value *v, int depth, struct ckpt_node **out);

static struct ckpt_node *node_new(struct ckpt_build *b, int kind,
				  const struct pkl_value *v, const char *type)
{
	struct ckpt *c = b->c;
	struct ckpt_node *n;

	if (c->nnodes >= CKPT_MAX_NODES)
		return NULL;
	n = arena_alloc(&c->arena, sizeof(*n));
	if (!n || ckpt_node_parts(c, n, kind) ||
	    ckpt_push((void ***)&c->nodes, &c->nnodes, &b->nodes_cap, n))
		return NULL;
	n->kind = kind;
	n->val = v;
	n->type = type;
	n->id = c->nnodes - 1;
	return n;
}

/* Give @dir its children @k and their name index (ckpt_dir_index()). */
static int finish_dir(struct ckpt_build *b, struct ckpt_node *dir,
		      struct kids *k)
{
	int rc = k->arena ? ckpt_dir_adopt(b->c, dir, k->v, k->n, k->cap) :
			    ckpt_dir_index(b->c, dir, k->v, k->n);

	return rc ? diag_nomem(b->d) : 0;
}

/*
 * The file name of @key: a plain str key is its own bytes in the pickle
 * document, which lives as long as the model (16 bytes a tensor saved);
 * any other, escaped, in the arena.
 */
static char *name_of(struct ckpt_build *b, const struct pkl_value *key)
{
	char *name, *tmp;

	if (ckpt_name_is_key(key))
		return key->u.s.p;
	tmp = ckpt_name_escape(key);
	if (!tmp)
		return NULL;
	name = arena_strndup(&b->c->arena, tmp, strlen(tmp));
	free(tmp);
	return name;
}

/*
 * Build @v as a child of @dir reached by @step (@key or its position);
 * @item: where the key and @v sit side by side in the document, if they
 * do (a dict item, which may become a row: ckpt_row.c), else NULL.
 */
static int add_kid(struct ckpt_build *b, struct ckpt_node *dir,
		   struct kids *k, int step, const struct pkl_value *key,
		   const char *part, const struct pkl_value *v,
		   struct pkl_value *const *item, int depth)
{
	struct ckpt_node *n = NULL;
	char buf[16];
	int rc;

	rc = item ? ckpt_row_add(b, dir, k->n, item, &n) : 0;
	if (rc)
		return rc < 0 ? rc : kid_push(k, n) ? diag_nomem(b->d) : 0;
	rc = build(b, dir, v, depth + 1, &n);
	if (rc)
		return rc;
	n->step = step;
	n->key = key;
	n->index = k->n;
	n->name = key ? name_of(b, key) : arena_strndup(&b->c->arena,
			part ? part : buf, part ? strlen(part) :
			(size_t)snprintf(buf, sizeof(buf), "%u", k->n));
	if (!n->name || kid_push(k, n))
		return diag_nomem(b->d);
	return 0;
}

static int add_items(struct ckpt_build *b, struct ckpt_node *dir,
		     struct kids *k, int step, struct pkl_value *const *it,
		     size_t n, bool pairs, int depth)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i += pairs ? 2 : 1) {
		if (pairs && i + 1 >= n)
			break;
		rc = add_kid(b, dir, k, step, pairs ? it[i] : NULL, NULL,
			     pairs ? it[i + 1] : it[i],
			     pairs && step == CKPT_S_KEY ? &it[i] : NULL,
			     depth);
	}
	return rc;
}

/* Start a directory for container @v, or a link if it was shown before. */
static int container(struct ckpt_build *b, const struct pkl_value *v,
		     int kind, const char *type, struct ckpt_node **out)
{
	struct ckpt_node *n, *seen = ckpt_memo_get(&b->memo, v->id);

	/* an empty container cannot blow up or loop: show it everywhere */
	if ((v->kind != PKL_CALL && !pkl_len(v)) ||
	    (v->kind == PKL_CALL && !pkl_call_x(v)->ndict &&
	     !pkl_call_x(v)->nlist && !pkl_call_x(v)->state && !pkl_len(
		     pkl_item(pkl_call_args(v), 0))))
		seen = NULL;

	n = node_new(b, seen ? CKPT_N_LINK : kind, v, type);
	if (!n)
		return diag_nomem(b->d);
	n->target = seen;
	if (!seen && ckpt_memo_put(&b->memo, v->id, n))
		return diag_nomem(b->d);
	*out = n;
	return 0;
}

static int value_node(struct ckpt_build *b, const struct pkl_value *v,
		      int kind, const char *type, char *text, size_t len,
		      struct ckpt_node **out)
{
	struct ckpt_node *n;

	if (!text)
		return diag_nomem(b->d);
	n = node_new(b, kind, v, type);
	if (!n) {
		free(text);
		return diag_nomem(b->d);
	}
	n->text = text;
	n->textlen = len;
	*out = n;
	return 0;
}

static int opaque(struct ckpt_build *b, const struct pkl_value *v,
		  struct ckpt_node **out)
{
	size_t len = 0;
	char *text = ckpt_repr(v, 4096, &len);

	return value_node(b, v, CKPT_N_OPAQUE, "object", text, len, out);
}

/* bytes from _codecs.encode(str, 'latin1'): the str's code points < 256 */
static char *latin1(const struct pkl_value *s, size_t *len)
{
	const unsigned char *p = (const unsigned char *)s->u.s.p;
	char *out = malloc(s->u.s.n + 1);
	size_t n = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i < s->u.s.n; i++, n++) {
		if (p[i] < 0x80) {
			out[n] = p[i];
		} else if ((p[i] & 0xfe) == 0xc2 && i + 1 < s->u.s.n) {
			out[n] = (char)((p[i] & 0x1f) << 6 | (p[i + 1] & 0x3f));
			i++;
		} else {
			free(out);
			return NULL;
		}
	}
	out[n] = 0;
	*len = n;
	return out;
}

static const char *global_name(const struct pkl_value *f)
{
	if (!f || f->kind != PKL_GLOBAL)
		return NULL;
	if (!strcmp(f->u.global.module, "builtins") ||
	    !strcmp(f->u.global.module, "__builtin__") ||
	    !strcmp(f->u.global.module, "collections") ||
	    !strcmp(f->u.global.module, "_codecs") ||
	    !strcmp(f->u.global.module, "torch") ||
	    !strcmp(f->u.global.module, "torch.serialization") ||
	    !strcmp(f->u.global.module, "torch._utils"))
		return f->u.global.name;
	return NULL;
}

/* See ckpt_int.h. */
char *ckpt_bytes_of(const struct pkl_value *v, size_t *len)
{
	const struct pkl_value *a0 = pkl_item(pkl_call_args(v), 0);
	const char *g = global_name(v->u.call.func);
	char *p;

	if (!g || (strcmp(g, "encode") && strcmp(g, "bytes") &&
		   strcmp(g, "bytearray")))
		return NULL;
	if (!a0 && strcmp(g, "encode")) {
		*len = 0;
		return strdup("");
	}
	if (a0 && a0->kind == PKL_STR && !strcmp(g, "encode"))
		return latin1(a0, len);
	if (a0 && a0->kind == PKL_BYTES) {
		p = malloc(a0->u.s.n + 1);
		if (p) {
			memcpy(p, a0->u.s.p, a0->u.s.n + 1);
			*len = a0->u.s.n;
		}
		return p;
	}
	if (a0 && a0->kind == PKL_CALL && strcmp(g, "encode"))
		return ckpt_bytes_of(a0, len);
	return NULL;
}

static int sparse(struct ckpt_build *b, const struct pkl_value *v,
		  int depth, struct ckpt_node **out)
{
	static const char *const coo[] = { "indices", "values", "size" };
	static const char *const csr[] = { "crow_indices", "col_indices",
					   "values", "size" };
	static const char *const csc[] = { "ccol_indices", "row_indices",
					   "values", "size" };
	const struct pkl_value *args = pkl_call_args(v);
	const struct pkl_value *layout = pkl_item(args, 0);
	const struct pkl_value *data = pkl_item(args, 1);
	const char *const *parts = coo, *type = "sparse_coo";
	size_t nparts = 3;
	struct kids k = { 0 };
	int rc;

	if (layout && layout->kind == PKL_CALL)
		layout = pkl_item(pkl_call_args(layout), 0);
	if (layout && layout->kind == PKL_STR &&
	    strcmp(layout->u.s.p, "torch.sparse_coo")) {
		bool by_col = strstr(layout->u.s.p, "sc");

		parts = by_col ? csc : csr;
		nparts = 4;
		type = layout->u.s.p + (strncmp(layout->u.s.p, "torch.", 6)
					? 0 : 6);
	} else if (pkl_is_global(v->u.call.func, "torch._utils",
				 "_rebuild_sparse_csr_tensor")) {
		parts = csr;
		nparts = 4;
		type = "sparse_csr";
	}
	if (!data || data->kind != PKL_TUPLE || pkl_len(data) < nparts)
		return opaque(b, v, out);
	rc = container(b, v, CKPT_N_DIR, type, out);
	if (rc || (*out)->kind == CKPT_N_LINK)
		return rc;
	for (size_t i = 0; i < nparts && !rc; i++)
		rc = add_kid(b, *out, &k, CKPT_S_PART, NULL, parts[i],
			     pkl_item(data, i), NULL, depth);
	if (!rc)
		rc = finish_dir(b, *out, &k);
	kids_release(&k);
	return rc;
}

/*
 * The children of a state: a dict's items and, when @slots, both halves of
 * a (dict, slots) pair as attributes; what a __getstate__ gave otherwise:
 * the items of a tuple by position, anything else as one entry "state".
 */
static int add_state(struct ckpt_build *b, struct ckpt_node *dir,
		     struct kids *k, const struct pkl_value *st, bool slots,
		     int depth)
{
	int rc = 0;

	if (st->kind == PKL_DICT)
		return add_items(b, dir, k, CKPT_S_ATTR, st->u.items.v,
				 st->u.items.n, true, depth);
	if (slots && ckpt_state_is_slots(st)) {
		for (size_t i = 0; i < 2 && !rc; i++) {
			const struct pkl_value *s = pkl_item(st, i);

			if (s->kind == PKL_DICT)
				rc = add_items(b, dir, k, CKPT_S_ATTR,
					       s->u.items.v, s->u.items.n,
					       true, depth);
		}
		return rc;
	}
	if (st->kind == PKL_TUPLE)
		return add_items(b, dir, k, CKPT_S_INDEX, st->u.items.v,
				 st->u.items.n, false, depth);
	return add_kid(b, dir, k, CKPT_S_PART, NULL, "state", st, NULL,
		       depth);
}

/*
 * TorchScript: an object whose state is not a dict (a custom class such as
 * LinearPackedParamsBase, a module with __getstate__) is a directory of
 * what __getstate__ gave (add_state(), no slots in TorchScript).
 */
static int script_state(struct ckpt_build *b, const struct pkl_value *v,
			const char *type, int depth, struct ckpt_node **out)
{
	struct kids k = { 0 };
	int rc = container(b, v, CKPT_N_DIR, type, out);

	if (rc || (*out)->kind == CKPT_N_LINK)
		return rc;
	rc = add_state(b, *out, &k, pkl_call_x(v)->state, false, depth);
	if (!rc)
		rc = finish_dir(b, *out, &k);
	kids_release(&k);
	return rc;
}

/* An object with a state dict, dict items or list items: a directory. */
static int object(struct ckpt_build *b, const struct pkl_value *v,
		  const char *type, int depth, struct ckpt_node **out)
{
	const struct pkl_value *st = pkl_call_x(v)->state;
	struct kids k = { 0 };
	int rc = 0;

	if (b->script && st && st->kind != PKL_DICT)
		return script_state(b, v, type, depth, out);
	if (st && st->kind != PKL_DICT && !ckpt_state_is_slots(st))
		return opaque(b, v, out);
	if (!st && !pkl_call_x(v)->ndict && !pkl_call_x(v)->nlist)
		return opaque(b, v, out);
	rc = container(b, v, CKPT_N_DIR, type, out);
	if (rc || (*out)->kind == CKPT_N_LINK)
		return rc;
	kids_reserve(b, &k, (st && st->kind == PKL_DICT ? pkl_len(st) : 0) +
		     pkl_call_x(v)->ndict / 2 + pkl_call_x(v)->nlist);
	if (st)
		rc = add_state(b, *out, &k, st, true, depth);
	if (!rc)
		rc = add_items(b, *out, &k, CKPT_S_KEY, pkl_call_x(v)->dict,
			       pkl_call_x(v)->ndict, true, depth);
	if (!rc)
		rc = add_items(b, *out, &k, CKPT_S_INDEX, pkl_call_x(v)->list,
			       pkl_call_x(v)->nlist, false, depth);
	if (!rc)
		rc = finish_dir(b, *out, &k);
	kids_release(&k);
	return rc;
}

static int seq(struct ckpt_build *b, const struct pkl_value *v,
	       const struct pkl_value *items, int kind, const char *type,
	       int depth, struct ckpt_node **out)
{
	struct kids k = { 0 };
	int rc = container(b, v, kind, type, out);

	if (rc || (*out)->kind == CKPT_N_LINK)
		return rc;
	kids_reserve(b, &k, kind == CKPT_N_DIR ? items->u.items.n / 2 :
		     items->u.items.n);
	rc = add_items(b, *out, &k, kind == CKPT_N_DIR ? CKPT_S_KEY :
		       CKPT_S_INDEX, items->u.items.v, items->u.items.n,
		       kind == CKPT_N_DIR, depth);
	if (!rc)
		rc = finish_dir(b, *out, &k);
	kids_release(&k);
	return rc;
}

/* dict subclasses: OrderedDict, defaultdict, Counter, dict(...) */
static int dict_call(struct ckpt_build *b, const struct pkl_value *v,
		     const char *type, int depth, struct ckpt_node **out)
{
	const struct pkl_value *a0 = pkl_item(pkl_call_args(v), 0);
	struct kids k = { 0 };
	int rc = container(b, v, CKPT_N_DIR, type, out);

	if (rc || (*out)->kind == CKPT_N_LINK)
		return rc;
	kids_reserve(b, &k, pkl_len(a0) + pkl_call_x(v)->ndict / 2);
	/* OrderedDict([(k, v), ...]) from protocol 0/1 pickles */
	if (a0 && a0->kind == PKL_LIST && strcmp(type, "defaultdict"))
		for (size_t i = 0; i < pkl_len(a0) && !rc; i++) {
			const struct pkl_value *p = pkl_item(a0, i);

			if (p && (p->kind == PKL_TUPLE || p->kind == PKL_LIST) &&
			    pkl_len(p) == 2)
				rc = add_kid(b, *out, &k, CKPT_S_KEY,
					     pkl_item(p, 0), NULL,
					     pkl_item(p, 1), p->u.items.v,
					     depth);
		}
	if (a0 && a0->kind == PKL_DICT && !rc)
		rc = add_items(b, *out, &k, CKPT_S_KEY, a0->u.items.v,
			       a0->u.items.n, true, depth);
	if (!rc)
		rc = add_items(b, *out, &k, CKPT_S_KEY, pkl_call_x(v)->dict,
			       pkl_call_x(v)->ndict, true, depth);
	if (!rc)
		rc = finish_dir(b, *out, &k);
	kids_release(&k);
	return rc;
}

static int call(struct ckpt_build *b, const struct pkl_value *v, int depth,
		struct ckpt_node **out)
{
	const struct pkl_value *f = v->u.call.func, *a0;
	const char *g = global_name(f);
	char *text;
	size_t len;

	a0 = pkl_item(pkl_call_args(v), 0);
	/* TorchScript's typed containers: build_intlist([1, 2]) is [1, 2] */
	if (b->script && a0 && f && f->kind == PKL_GLOBAL &&
	    !strcmp(f->u.global.module, "torch.jit._pickle") &&
	    (!strncmp(f->u.global.name, "build_", 6) ?
	     strcmp(f->u.global.name, "build_tensor_from_id") :
	     !strcmp(f->u.global.name, "restore_type_tag")))
		return build(b, NULL, a0, depth, out);
	if (!g)
		goto generic;
	if (!strcmp(g, "_rebuild_sparse_tensor") ||
	    !strcmp(g, "_rebuild_sparse_csr_tensor"))
		return sparse(b, v, depth, out);
	if (!strcmp(g, "OrderedDict") || !strcmp(g, "defaultdict") ||
	    !strcmp(g, "Counter") || !strcmp(g, "dict"))
		return dict_call(b, v, g, depth, out);
	if ((!strcmp(g, "Size") || !strcmp(g, "set") ||
	     !strcmp(g, "frozenset")) && a0 &&
	    (a0->kind == PKL_TUPLE || a0->kind == PKL_LIST))
		return seq(b, v, a0, CKPT_N_SEQ, strcmp(g, "Size") ? g :
			   "torch.Size", depth, out);
	if (!strcmp(g, "encode") || !strcmp(g, "bytes") ||
	    !strcmp(g, "bytearray")) {
		text = ckpt_bytes_of(v, &len);
		if (text)
			return value_node(b, v, CKPT_N_VALUE, "bytes", text,
					  len, out);
	}
	if ((!strcmp(g, "device") || !strcmp(g, "_get_layout")) && a0 &&
	    a0->kind == PKL_STR) {
		const struct pkl_value *idx = pkl_item(pkl_call_args(v), 1);

		len = a0->u.s.n + 24;
		text = malloc(len);
		if (text && idx && idx->kind == PKL_INT)
			snprintf(text, len, "%s:%lld", a0->u.s.p,
				 (long long)idx->u.i);
		else if (text)
			snprintf(text, len, "%s", a0->u.s.p);
		return value_node(b, v, CKPT_N_VALUE, g[0] == 'd' ?
				  "torch.device" : "torch.layout", text,
				  text ? strlen(text) : 0, out);
	}
generic:
	/* a legacy whole-module pickle: NEWOBJ of ('module', cls, ...) */
	if (ckpt_module_class(f))
		f = ckpt_module_class(f);
	if (f && f->kind == PKL_GLOBAL)
		return object(b, v, f->u.global.name, depth, out);
	return opaque(b, v, out);
}

/*
 * A wrapper subclass (TwoTensor, DTensor, torch 1.13's subclasses of a
 * meta tensor): a directory of its state (add_state()), the inner tensors
 * among them, that carries the outer tensor's metadata (node->tensor, no
 * data of its own) for the xattrs.
 */
static int wrapper(struct ckpt_build *b, const struct pkl_value *v,
		   const struct pkl_value *st, int depth,
		   struct ckpt_node **out)
{
	struct ckpt_tensor *t;
	struct kids k = { 0 };
	int rc = ckpt_tensor_value(b, v, &t);

	if (rc)
		return rc;
	rc = container(b, v, CKPT_N_DIR, t->x->cls ? t->x->cls : "Tensor", out);
	if (rc || (*out)->kind == CKPT_N_LINK)
		return rc;
	(*out)->tensor = t;
	if (t->x->state) {	/* the attributes are the children here */
		struct ckpt_tensor_ext *x = ckpt_tensor_ext_own(b->c, t);

		if (!x)
			return diag_nomem(b->d);
		x->state = NULL;
	}
	if (!t->shown) {
		t->shown = true;
		b->c->nshown++;
	}
	rc = add_state(b, *out, &k, st, true, depth);
	if (!rc)
		rc = finish_dir(b, *out, &k);
	kids_release(&k);
	return rc;
}

/* The node of tensor @t, made from @v (NULL: from no pickle value). */
static int tensor_node(struct ckpt_build *b, const struct pkl_value *v,
		       struct ckpt_tensor *t, struct ckpt_node **out)
{
	struct ckpt_node *n = node_new(b, CKPT_N_TENSOR, v, t->parameter ?
				       "Parameter" : "Tensor");

	if (!n)
		return diag_nomem(b->d);
	n->tensor = t;
	if (!t->shown) {
		t->shown = true;
		b->c->nshown++;
	}
	*out = n;
	return 0;
}

static int build(struct ckpt_build *b, struct ckpt_node *parent,
		 const struct pkl_value *v, int depth, struct ckpt_node **out)
{
	struct ckpt_tensor *t;
	const char *type;
	char *text;
	size_t len = 0;
	int rc;

	if (depth > CKPT_MAX_DEPTH)
		return diag_corrupt(b->d, v->off, "objects nested deeper than "
				    "%d levels", CKPT_MAX_DEPTH);
	if (b->subclass && (rc = b->subclass(b, v, &t)) != 0) {
		/* no pickle value of its own: written from the model */
		rc = rc < 0 ? rc : tensor_node(b, NULL, t, out);
		if (rc)
			return rc;
		goto done;
	}
	if (ckpt_wrapper_state(v)) {
		rc = wrapper(b, v, ckpt_wrapper_state(v), depth, out);
		if (rc)
			return rc;
		goto done;
	}
	if (ckpt_is_tensor_value(v)) {
		rc = ckpt_tensor_value(b, v, &t);
		rc = rc ? rc : tensor_node(b, v, t, out);
		if (rc)
			return rc;
		goto done;
	}
	switch (v->kind) {
	case PKL_NONE: type = "NoneType"; goto scalar;
	case PKL_BOOL: type = "bool"; goto scalar;
	case PKL_INT: case PKL_BIGINT: type = "int"; goto scalar;
	case PKL_FLOAT: type = "float"; goto scalar;
	case PKL_STR: type = "str"; goto scalar;
	case PKL_STRING: type = "str"; goto scalar;
	case PKL_BYTES: type = "bytes";
scalar:
		text = ckpt_value_text(v, &len);
		rc = value_node(b, v, CKPT_N_VALUE, type, text, len, out);
		break;
	case PKL_GLOBAL:
		text = ckpt_repr(v, 4096, &len);
		rc = value_node(b, v, CKPT_N_VALUE, "global", text, len, out);
		break;
	case PKL_TUPLE:
	case PKL_LIST:
		type = v->kind == PKL_LIST ? "list" : "tuple";
		if (b->c->lists && ckpt_scalar_list(v)) {
			/* one file: ckpt_scalars.c */
			text = ckpt_scalar_list_text(v, &len);
			rc = value_node(b, v, CKPT_N_VALUE, type, text, len,
					out);
			break;
		}
		rc = seq(b, v, v, CKPT_N_SEQ, type, depth, out);
		break;
	case PKL_SET:
	case PKL_FROZENSET:
		rc = seq(b, v, v, CKPT_N_SEQ, "set", depth, out);
		break;
	case PKL_DICT:
		rc = seq(b, v, v, CKPT_N_DIR, "dict", depth, out);
		break;
	case PKL_CALL:
		rc = call(b, v, depth, out);
		break;
	default:
		rc = opaque(b, v, out);
		break;
	}
	if (rc)
		return rc;
done:
	(*out)->parent = parent;
	return 0;
}

int ckpt_build_begin(struct ckpt *c, struct diag *d)
{
	struct ckpt_build *b = c->b;

	if (b)
		return 0;
	b = calloc(1, sizeof(*b));
	if (!b)
		return diag_nomem(d);
	c->b = b;
	b->c = c;
	b->d = d;
	b->script = c->format == CKPT_TORCHSCRIPT;
	b->scap = 64;
	b->stab = calloc(b->scap, sizeof(*b->stab));
	if (!b->stab)
		return diag_nomem(d);
	return 0;
}

int ckpt_build_doc(struct ckpt *c, const struct pkl_doc *doc,
		   struct ckpt_node **out, struct diag *d)
{
	struct ckpt_build *b = c->b;
	struct ckpt_memo memo = b->memo;
	int rc;

	/* the memo is keyed by node ids, which each document numbers anew */
	b->memo = (struct ckpt_memo){ 0 };
	b->d = d;
	rc = build(b, NULL, doc->root, 1, out);
	ckpt_memo_release(&b->memo);
	b->memo = memo;
	return rc;
}

struct ckpt_node *ckpt_node_synth(struct ckpt_build *b, int kind,
				  const char *type)
{
	return node_new(b, kind, NULL, type);
}

int ckpt_dir_fill(struct ckpt_build *b, struct ckpt_node *dir,
		  struct ckpt_node *const *add, uint32_t n)
{
	const struct ckpt_dir *d = dir->dir;
	struct kids k = { 0 };
	int rc = 0;

	kids_reserve(b, &k, (size_t)d->nkids + n);
	for (uint32_t i = 0; i < d->nkids + n && !rc; i++) {
		struct ckpt_node *kid = i < d->nkids ? d->kids[i] :
					add[i - d->nkids];

		kid->index = i;
		kid->parent = dir;
		rc = kid_push(&k, kid);
	}
	rc = rc ? diag_nomem(b->d) : finish_dir(b, dir, &k);
	kids_release(&k);
	return rc;
}

int ckpt_build_model(struct ckpt *c, struct diag *d)
{
	struct ckpt_build *b;
	int rc = ckpt_build_begin(c, d);

	if (rc)
		return rc;
	b = c->b;
	b->d = d;
	/* what torch.load runs, first: the model may refuse the pickle */
	if (ckpt_scan_doc(c, c->doc, c->pkl_label ? c->pkl_label :
			  "data.pkl", b->script ? ckpt_global_any : NULL))
		return diag_nomem(d);
	rc = build(b, NULL, c->doc->root, 0, &c->root);
	if (rc)
		return rc;
	c->root->name = arena_strndup(&c->arena, "", 0);
	if (!c->root->name)
		return diag_nomem(d);
	return 0;
}
