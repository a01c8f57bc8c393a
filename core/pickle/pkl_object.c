/*
 * pkl_object.c - the pickle opcodes that shape the value graph: containers
 * from marks and from the stack top, in-place APPEND(S)/SETITEM(S)/ADDITEMS
 * (so every memo reference sees the items), globals kept symbolic, and
 * calls (REDUCE, NEWOBJ, NEWOBJ_EX, OBJ, INST, BUILD, persistent ids) kept
 * as PKL_CALL/PKL_PERSID nodes: nothing is imported or run.
 */
#ifndef PT_INTERNAL
#define PT_INTERNAL 1
#endif
#include "pkl_int.h"

#include "diag/diag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * Set a fresh container's items to a copy of @src[0..@k).  Tuples and
 * frozensets never change, so theirs live in the document's arena (cap 0:
 * not owned); lists, dicts and sets may grow and get a malloc'd array.
 */
static int fill(struct pkl_parser *p, struct pkl_value *v,
		struct pkl_value *const *src, size_t k)
{
	bool fixed = v->kind == PKL_TUPLE || v->kind == PKL_FROZENSET;

	if (!k)
		return 0;
	v->u.items.v = fixed ? pkl_array_new(p->doc, k)
			     : malloc(k * sizeof(*src));
	if (!v->u.items.v)
		return diag_nomem(p->d);
	memcpy(v->u.items.v, src, k * sizeof(*src));
	v->u.items.n = (uint32_t)k;	/* <= PKL_MAX_STACK */
	v->u.items.cap = fixed ? 0 : (uint32_t)k;
	return 0;
}

/* Append @src[0..@k) to a growable array. */
static int extend(struct pkl_parser *p, struct pkl_value ***arr,
		  uint32_t *n, uint32_t *cap, struct pkl_value *const *src,
		  size_t k)
{
	size_t c = *cap;

	if (!k)
		return 0;
	if (k > PKL_MAX_ITEMS - *n)
		return diag_corrupt(p->d, p->off, "%s grows a container "
				    "past PKL_MAX_ITEMS (%u)", p->name,
				    PKL_MAX_ITEMS);
	if (pkl_vec_grow(arr, &c, *n + k) < 0)
		return diag_nomem(p->d);
	*cap = c < UINT32_MAX ? (uint32_t)c : UINT32_MAX;
	memcpy(*arr + *n, src, k * sizeof(*src));
	*n += (uint32_t)k;
	return 0;
}

/* A folded call is given items or state: parse again without folding. */
static int refold(struct pkl_parser *p)
{
	p->refold = true;
	return -EAGAIN;
}

static bool good_name(const unsigned char *s, size_t n)
{
	return !memchr(s, 0, n) && pkl_utf8_valid(s, n);
}

/* A GLOBAL node for module @m, name @nm (copied). */
static struct pkl_value *mk_global(struct pkl_parser *p, const unsigned char *m,
				   size_t nm, const unsigned char *s, size_t n)
{
	struct pkl_value *v;

	if (!good_name(m, nm) || !good_name(s, n)) {
		p->rc = diag_corrupt(p->d, p->off,
				     "%s module or name is not NUL-free UTF-8",
				     p->name);
		return NULL;
	}
	v = pkl_mk(p, PKL_GLOBAL);
	if (!v)
		return NULL;
	v->u.global.module = pkl_dup0(p, m, nm);
	v->u.global.name = pkl_dup0(p, s, n);
	if (!v->u.global.module || !v->u.global.name) {
		p->rc = diag_nomem(p->d);
		return NULL;
	}
	return v;
}

int pkl_op_global(struct pkl_parser *p)
{
	const unsigned char *m, *s;
	size_t nm, n;
	struct pkl_value *v;
	int rc = pkl_line2(p, &m, &nm, &s, &n);

	if (rc < 0)
		return rc;
	v = mk_global(p, m, nm, s, n);
	if (!v)
		return p->rc;
	return pkl_push(p, v);
}

const char pkl_note_computed[] = "global name computed at load time";

/* A STACK_GLOBAL operand torch.load takes as a str: a unicode string,
 * or a protocol 0-2 string, which torch's encoding ('utf-8') decodes. */
static bool is_name(const struct pkl_value *v)
{
	return pkl_loads_as_str(v);
}

/* PKL_SCAN: a STACK_GLOBAL of other values: a global whose name torch
 * knows only once it has run what made them. */
static struct pkl_value *computed_global(struct pkl_parser *p,
					 const struct pkl_value *m,
					 const struct pkl_value *s)
{
	bool lm = is_name(m) && good_name((const unsigned char *)m->u.s.p,
					  m->u.s.n);
	bool ls = is_name(s) && good_name((const unsigned char *)s->u.s.p,
					  s->u.s.n);
	struct pkl_value *v;

	v = mk_global(p, lm ? (const unsigned char *)m->u.s.p :
			  (const unsigned char *)"?", lm ? m->u.s.n : 1,
		      ls ? (const unsigned char *)s->u.s.p :
			  (const unsigned char *)"?", ls ? s->u.s.n : 1);
	if (v)
		v->how = PKL_G_COMPUTED;
	/* the value that computes it: the module's unless that is literal */
	if (v && pkl_note(p, pkl_note_computed, lm ? s : m) < 0)
		return NULL;
	return v;
}

int pkl_op_stack_global(struct pkl_parser *p)
{
	struct pkl_value *m, *s, *v;
	int rc = pkl_want(p, 2);

	if (rc < 0)
		return rc;
	m = PKL_TOP(p, 1);
	s = PKL_TOP(p, 0);
	if (is_name(m) && is_name(s))
		v = mk_global(p, (const unsigned char *)m->u.s.p, m->u.s.n,
			      (const unsigned char *)s->u.s.p, s->u.s.n);
	else if (p->scan)
		v = computed_global(p, m, s);
	else
		return diag_corrupt(p->d, p->off, "STACK_GLOBAL needs two "
				    "str, not %s and %s (a name computed at "
				    "load time)", pkl_kind_name(m->kind),
				    pkl_kind_name(s->kind));
	if (!v)
		return p->rc;
	p->n -= 2;
	return pkl_push(p, v);
}

/* The values since the last MARK become a new container of @kind. */
int pkl_op_collect(struct pkl_parser *p, int kind)
{
	struct pkl_value *v;
	size_t base = 0, k;
	int rc = pkl_pop_mark(p, &base);

	if (rc < 0)
		return rc;
	k = p->n - base;
	if (kind == PKL_DICT && k % 2)
		return diag_corrupt(p->d, p->off, "DICT with an odd number "
				    "(%zu) of items", k);
	v = pkl_mk(p, kind);
	if (!v)
		return p->rc;
	rc = fill(p, v, p->stack + base, k);
	if (rc < 0)
		return rc;
	p->n = base;
	return pkl_push(p, v);
}

/* TUPLE1/2/3: the top @k values become a tuple. */
int pkl_op_tuple_n(struct pkl_parser *p, size_t k)
{
	struct pkl_value *v;
	int rc = pkl_want(p, k);

	if (rc < 0)
		return rc;
	v = pkl_mk(p, PKL_TUPLE);
	if (!v)
		return p->rc;
	rc = fill(p, v, p->stack + p->n - k, k);
	if (rc < 0)
		return rc;
	p->n -= k;
	return pkl_push(p, v);
}

/*
 * APPEND(S)/ADDITEMS/SETITEM(S): add @src[0..@k) to @t in place, so that
 * every reference to @t (memo, other containers) sees the items.
 */
static int add_to(struct pkl_parser *p, struct pkl_value *t, bool pairs,
		  struct pkl_value *const *src, size_t k)
{
	bool sets = p->op == OP_ADDITEMS;

	if (t->kind == PKL_FOLDED)
		return refold(p);
	if (t->kind == PKL_CALL && pkl_call_own(t) < 0)
		return diag_nomem(p->d);
	if (t->kind == PKL_CALL && pairs)
		return extend(p, &t->u.call.ax.x->dict, &t->u.call.ax.x->ndict,
			      &t->u.call.ax.x->capdict, src, k);
	if (t->kind == PKL_CALL)
		return extend(p, &t->u.call.ax.x->list, &t->u.call.ax.x->nlist,
			      &t->u.call.ax.x->caplist, src, k);
	if ((pairs && t->kind == PKL_DICT) ||
	    (!pairs && !sets && t->kind == PKL_LIST) ||
	    (sets && t->kind == PKL_SET))
		return extend(p, &t->u.items.v, &t->u.items.n,
			      &t->u.items.cap, src, k);
	return diag_corrupt(p->d, p->off, "%s on a %s", p->name,
			    pkl_kind_name(t->kind));
}

/* APPEND (@k 1) and SETITEM (@k 2): the top values go into the one below. */
int pkl_op_add_top(struct pkl_parser *p, size_t k)
{
	int rc = pkl_want(p, k + 1);

	if (rc < 0)
		return rc;
	rc = add_to(p, PKL_TOP(p, k), k == 2, p->stack + p->n - k, k);
	if (rc < 0)
		return rc;
	p->n -= k;
	return 0;
}

/* APPENDS, SETITEMS, ADDITEMS: the values since the MARK go in. */
int pkl_op_add_marked(struct pkl_parser *p, bool pairs)
{
	size_t base = 0, k;
	int rc = pkl_pop_mark(p, &base);

	if (rc < 0)
		return rc;
	k = p->n - base;
	if (base == pkl_frame_base(p))
		return diag_corrupt(p->d, p->off, "stack underflow in %s",
				    p->name);
	if (pairs && k % 2)
		return diag_corrupt(p->d, p->off,
				    "%s with an odd number (%zu) of items",
				    p->name, k);
	rc = add_to(p, p->stack[base - 1], pairs, p->stack + base, k);
	p->n = base;
	return rc;
}

static struct pkl_value *mk_call(struct pkl_parser *p, int how,
				 struct pkl_value *func,
				 struct pkl_value *args,
				 struct pkl_value *kwargs)
{
	struct pkl_value *v;

	if (args->kind != PKL_TUPLE) {
		p->rc = diag_corrupt(p->d, p->off,
				     "%s arguments are a %s, not a tuple",
				     p->name, pkl_kind_name(args->kind));
		return NULL;
	}
	v = pkl_mk(p, PKL_CALL);
	if (!v)
		return NULL;
	v->how = (uint8_t)how;
	v->u.call.func = func;
	pkl_call_set_args(v, args);
	if (kwargs) {
		if (pkl_call_own(v) < 0) {
			p->rc = diag_nomem(p->d);
			return NULL;
		}
		v->u.call.ax.x->kwargs = kwargs;
	}
	return v;
}

/* REDUCE, NEWOBJ (@k 2: func args) and NEWOBJ_EX (@k 3: + kwargs). */
int pkl_op_call(struct pkl_parser *p, int how, size_t k)
{
	struct pkl_value *v;
	int rc = pkl_want(p, k);

	if (rc < 0)
		return rc;
	v = mk_call(p, how, PKL_TOP(p, k - 1), PKL_TOP(p, k - 2),
		    k == 3 ? PKL_TOP(p, 0) : NULL);
	if (!v)
		return p->rc;
	p->n -= k;
	rc = pkl_push(p, v);
	if (!rc && p->fold && how == PKL_REDUCE)
		rc = pkl_fold_try(p, v);
	return rc;
}

/* OBJ: class and arguments since the MARK; INST: class from two lines. */
int pkl_op_obj(struct pkl_parser *p, bool inst)
{
	const unsigned char *m = NULL, *s = NULL;
	struct pkl_value *cls, *args, *v;
	size_t base = 0, nm = 0, n = 0, first;
	int rc = 0;

	if (inst)
		rc = pkl_line2(p, &m, &nm, &s, &n);
	if (!rc)
		rc = pkl_pop_mark(p, &base);
	if (rc < 0)
		return rc;
	first = inst ? base : base + 1;
	if (first > p->n)
		return diag_corrupt(p->d, p->off, "OBJ without a class");
	cls = inst ? mk_global(p, m, nm, s, n) : p->stack[base];
	args = cls ? pkl_mk(p, PKL_TUPLE) : NULL;
	if (!args)
		return p->rc;
	rc = fill(p, args, p->stack + first, p->n - first);
	if (rc < 0)
		return rc;
	v = mk_call(p, PKL_OBJ, cls, args, NULL);
	if (!v)
		return p->rc;
	p->n = base;
	return pkl_push(p, v);
}

int pkl_op_build(struct pkl_parser *p)
{
	struct pkl_value *t;
	int rc = pkl_want(p, 2);

	if (rc < 0)
		return rc;
	t = PKL_TOP(p, 1);
	if (t->kind == PKL_FOLDED)
		return refold(p);
	if (t->kind != PKL_CALL && p->scan) {
		/* torch.load would set the attributes of @t itself */
		rc = pkl_note(p, "BUILD on a value that is no object made "
			      "here: it sets that value's attributes", t);
		p->n--;
		return rc;
	}
	if (t->kind != PKL_CALL)
		return diag_corrupt(p->d, p->off, "BUILD on a %s",
				    pkl_kind_name(t->kind));
	if (pkl_call_own(t) < 0)
		return diag_nomem(p->d);
	t->u.call.ax.x->state = PKL_TOP(p, 0);
	p->n--;
	return 0;
}

/* BINPERSID (id on the stack) and PERSID (id as an ASCII line). */
int pkl_op_persid(struct pkl_parser *p, bool text)
{
	struct pkl_value *id, *v;
	const unsigned char *s;
	size_t n;
	int rc = text ? pkl_line(p, &s, &n) : pkl_want(p, 1);

	if (rc < 0)
		return rc;
	if (text) {
		for (size_t k = 0; k < n; k++)
			if (s[k] >= 0x80)
				return diag_corrupt(p->d, p->off,
						    "PERSID id is not ASCII");
		rc = pkl_push_copy(p, PKL_STR, s, n);
		if (rc < 0)
			return rc;
	}
	id = PKL_TOP(p, 0);
	v = pkl_mk(p, PKL_PERSID);
	if (!v)
		return p->rc;
	pkl_call_set_args(v, id);
	PKL_TOP(p, 0) = v;
	return 0;
}
