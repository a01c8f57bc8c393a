/*
 * pkl_fold.c - torch.save's tensor rebuild calls folded while parsing
 * (PKL_FOLD), so that a state dict's graph never holds their arguments.
 *
 * Per tensor torch.save writes (torch-format.md 3.2)
 *
 *   GLOBAL torch._utils._rebuild_tensor_v2          (memoized once)
 *   ( ( 'storage' FloatStorage '0' 'cpu' 16 ) BINPERSID     tuple: BINPUT
 *     0  ( 16, ) ( 1, )  False                       size, stride: BINPUT
 *     collections.OrderedDict ( ) REDUCE BINPUT )    args tuple: BINPUT
 *   REDUCE BINPUT
 *
 * which parses into nine nodes (a dict key, the call, its argument tuple,
 * the persistent id and its tuple, the key str, size, stride, the hooks'
 * call) and 104 bytes of tuple items.  Folding keeps the call, the strs
 * and the globals, copies the rest into a struct pkl_fold (40 bytes and 16
 * a dimension; the storage class, location and hooks' global once per
 * document, in a struct pkl_fold_kind), and releases the tuples, the
 * persistent id, the hooks' call and the ints that are not shared: the
 * next tensor's nodes and item arrays reuse them, so the graph stops
 * growing by them.
 *
 * It lives in the parser because only the parser knows who else refers to
 * a node.  Folding releases a node only when every reference is accounted
 * for: pushed once (never fetched with GET, never DUP'd: pkl_value.refs)
 * and its memo entries among the newest 32 keys, which then hold
 * &pkl_gone.  A pickle that fetches one of those later (torch never does;
 * a hand-made one may) or gives a folded call state or items is parsed
 * again without folding (pkl_parse_with()).
 *
 * Readers that walk the graph see a folded call unfolded through
 * pkl_unfolded(); write-back, which needs the graph whole and numbered as
 * parsed, calls pkl_unfold().
 */
#ifndef PT_INTERNAL
#define PT_INTERNAL 1
#endif
#include "pkl_int.h"

#include "diag/diag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* the argument tuple, persistent id and its tuple, numel, offset, hooks'
   call and its (), size and stride, and their ints */
#define MAX_RELEASE	(9 + 2 * PKL_FOLD_DIMS)

struct pkl_value pkl_gone;
static char storage_tag[] = "storage";	/* never written */

struct fold {
	struct pkl_value *rel[MAX_RELEASE];	/* nodes to release */
	unsigned n;
	unsigned memo;		/* memo entries they are in */
};

/* One of the nodes the parser shares (small ints, None, bools, ()). */
static bool shared(const struct pkl_parser *p, const struct pkl_value *v)
{
	if (v->kind == PKL_INT && v->u.i >= 0 && v->u.i < 256)
		return p->shared[v->u.i] == v;
	return v == p->shared[PKL_SHARED_NONE] ||
	       v == p->shared[PKL_SHARED_TRUE] ||
	       v == p->shared[PKL_SHARED_FALSE] ||
	       v == p->shared[PKL_SHARED_TUPLE];
}

/* Note @v for release; false if something else may refer to it. */
static bool take(const struct pkl_parser *p, struct fold *f,
		 struct pkl_value *v)
{
	if (shared(p, v))
		return true;
	if ((v->refs & PKL_R_AGAIN) || (v->refs & PKL_R_MEMO) == PKL_R_MEMO ||
	    f->n == MAX_RELEASE)
		return false;
	f->rel[f->n++] = v;
	f->memo += v->refs & PKL_R_MEMO;
	return true;
}

static bool is_int(const struct pkl_value *v, bool nonneg)
{
	return v->kind == PKL_INT && (!nonneg || v->u.i >= 0);
}

/* A tuple of up to PKL_FOLD_DIMS ints, noted for release. */
static bool dims(const struct pkl_parser *p, struct fold *f,
		 const struct pkl_value *t, size_t n)
{
	if (t->kind != PKL_TUPLE || t->u.items.n != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_int(t->u.items.v[i], false) ||
		    !take(p, f, t->u.items.v[i]))
			return false;
	return true;
}

static bool is_str(const struct pkl_value *v, const char *s)
{
	return v->kind == PKL_STR && (!s || (v->u.s.n == strlen(s) &&
					     !memcmp(v->u.s.p, s, v->u.s.n)));
}

/* pkl_is_global(), remembering the node that matched in *@seen. */
static bool is_global(struct pkl_value *v, struct pkl_value **seen,
		      const char *module, const char *name)
{
	if (v && v == *seen)
		return true;
	if (!pkl_is_global(v, module, name))
		return false;
	*seen = v;
	return true;
}

/* Is @v torch.save's plain rebuild call, every part of it ours alone? */
static bool plain(struct pkl_parser *p, const struct pkl_value *v,
		  struct fold *f)
{
	struct pkl_value *a = pkl_call_args(v), *pid, *t, *h;
	struct pkl_value *const *ai, *const *ti;
	size_t nd;

	if (!is_global(v->u.call.func, &p->g_rebuild, "torch._utils",
		       "_rebuild_tensor_v2") ||
	    v->has_x || a->u.items.n != 6)
		return false;
	ai = a->u.items.v;
	pid = ai[0];
	h = ai[5];
	if (pid->kind != PKL_PERSID || pid->has_x ||
	    (t = pkl_call_args(pid))->kind != PKL_TUPLE || t->u.items.n != 5)
		return false;
	ti = t->u.items.v;
	if (!is_str(ti[0], "storage") || ti[1]->kind != PKL_GLOBAL ||
	    !is_str(ti[2], NULL) || !is_str(ti[3], NULL) ||
	    !is_int(ti[4], true) || !is_int(ai[1], true) ||
	    ai[4]->kind != PKL_BOOL || h->kind != PKL_CALL ||
	    h->how != PKL_REDUCE || h->has_x ||
	    pkl_call_args(h)->kind != PKL_TUPLE ||
	    pkl_call_args(h)->u.items.n ||
	    !is_global(h->u.call.func, &p->g_odict, "collections",
		       "OrderedDict") ||
	    ai[2]->kind != PKL_TUPLE ||
	    (nd = ai[2]->u.items.n) > PKL_FOLD_DIMS)
		return false;
	return take(p, f, a) && take(p, f, pid) && take(p, f, t) &&
	       take(p, f, ti[4]) && take(p, f, ai[1]) && take(p, f, h) &&
	       take(p, f, pkl_call_args(h)) && take(p, f, ai[2]) &&
	       take(p, f, ai[3]) && dims(p, f, ai[2], nd) &&
	       dims(p, f, ai[3], nd);
}

/*
 * Point the memo entries of the released nodes at &pkl_gone: all of them
 * among the newest keys, or nothing is changed and false returned.  The
 * nodes carry PKL_R_FOLD meanwhile, so that an entry is told in one test.
 */
static bool memo_forget(struct pkl_parser *p, const struct fold *f)
{
	struct pkl_memo *m = &p->memo;
	uint32_t k, lo, hi = p->last_put, found = 0;
	bool ok;

	if (!f->memo)
		return true;
	if (hi >= m->dcap)
		return false;
	lo = pkl_fold_window(hi);
	for (unsigned i = 0; i < f->n; i++)
		f->rel[i]->refs |= PKL_R_FOLD;
	for (k = hi + 1; k-- > lo && found < f->memo;)
		found += m->dense[k] && (m->dense[k]->refs & PKL_R_FOLD);
	ok = found == f->memo;
	for (k = hi + 1; ok && k-- > lo && found;)
		if (m->dense[k] && (m->dense[k]->refs & PKL_R_FOLD)) {
			m->dense[k] = &pkl_gone;
			found--;
		}
	for (unsigned i = 0; i < f->n; i++)
		f->rel[i]->refs &= (uint8_t)~PKL_R_FOLD;
	return ok;
}

static void release(struct pkl_doc *doc, struct pkl_value *v)
{
	size_t n = v->u.items.n;

	if (v->kind == PKL_TUPLE && n && n < sizeof(doc->free_arrays) /
					     sizeof(doc->free_arrays[0])) {
		v->u.items.v[0] = (struct pkl_value *)doc->free_arrays[n];
		doc->free_arrays[n] = v->u.items.v;
	}
	memset(v, 0, sizeof(*v));	/* PKL_NONE: nothing to free */
	v->u.call.func = doc->free_nodes;
	doc->free_nodes = v;
}

static bool same_kind(const struct pkl_fold_kind *k,
		      const struct pkl_value *cls, const struct pkl_value *loc,
		      const struct pkl_value *hooks)
{
	return k->cls == cls && k->hooks == hooks && k->loc_n == loc->u.s.n &&
	       !memcmp(k->loc, loc->u.s.p, loc->u.s.n);
}

/*
 * The kind of a call with these storage class, location and hooks: the
 * last one's, one met before (by value for the location: torch makes a
 * new str for each "cuda:0"), or a new one; NULL when there are
 * PKL_FOLD_KINDS already (the call is not folded) or no memory (*@rc).
 */
struct pkl_fold_kind *pkl_fold_kind_of(struct pkl_parser *p,
				       struct pkl_value *cls,
				       const struct pkl_value *loc,
				       struct pkl_value *hooks, int *rc)
{
	struct pkl_fold_kind *k;

	if (p->nkinds && same_kind(p->kinds[p->last_kind], cls, loc, hooks))
		return p->kinds[p->last_kind];
	for (unsigned i = 0; i < p->nkinds; i++)
		if (same_kind(p->kinds[i], cls, loc, hooks)) {
			p->last_kind = i;
			return p->kinds[i];
		}
	if (p->nkinds == PKL_FOLD_KINDS)
		return NULL;
	k = arena_alloc(&p->doc->arena, sizeof(*k));
	if (!k) {
		*rc = diag_nomem(p->d);
		return NULL;
	}
	k->cls = cls;
	k->hooks = hooks;
	k->loc = loc->u.s.p;
	k->loc_n = loc->u.s.n;
	p->last_kind = p->nkinds;
	p->kinds[p->nkinds++] = k;
	return k;
}

int pkl_fold_set(struct pkl_parser *p, struct pkl_value *v,
		 const struct pkl_fold *r)
{
	size_t n = sizeof(*r) + 2 * (size_t)r->ndim * sizeof(r->dims[0]);
	struct pkl_fold *c = arena_alloc(&p->doc->arena, n);

	if (!c)
		return diag_nomem(p->d);
	memcpy(c, r, n);
	v->kind = PKL_FOLDED;
	v->u.fold.rec = c;
	p->doc->nfolded++;
	return 0;
}

int pkl_fold_try(struct pkl_parser *p, struct pkl_value *v)
{
	struct fold f = { .n = 0 };
	struct pkl_value *const *ai, *const *ti;
	union pkl_fold_room room;
	struct pkl_fold *r = &room.f;
	size_t nd;
	int rc = 0;

	if (!plain(p, v, &f))
		return 0;
	ai = pkl_call_args(v)->u.items.v;
	ti = pkl_call_args(ai[0])->u.items.v;
	nd = ai[2]->u.items.n;
	if (v->off - ai[0]->off > UINT32_MAX ||
	    !(r->kind = pkl_fold_kind_of(p, ti[1], ti[3], ai[5]->u.call.func,
					 &rc)) ||
	    !memo_forget(p, &f))
		return rc;
	r->key = ti[2];
	r->numel = ti[4]->u.i;
	r->offset = ai[1]->u.i;
	r->pid_back = (uint32_t)(v->off - ai[0]->off);
	r->ndim = (uint8_t)nd;
	r->requires_grad = ai[4]->u.i != 0;
	for (size_t i = 0; i < nd; i++) {
		r->dims[i] = ai[2]->u.items.v[i]->u.i;
		r->dims[nd + i] = ai[3]->u.items.v[i]->u.i;
	}
	rc = pkl_fold_set(p, v, r);
	for (unsigned i = 0; !rc && i < f.n; i++)
		release(p->doc, f.rel[i]);
	return rc;
}

static struct pkl_value *vnode(struct pkl_value *n, int kind, uint64_t off)
{
	n->kind = (uint8_t)kind;
	n->id = UINT32_MAX;
	n->off = off;
	return n;
}

static void vtuple(struct pkl_value *t, uint64_t off, struct pkl_value **v,
		   size_t n)
{
	vnode(t, PKL_TUPLE, off);
	t->u.items.v = v;
	t->u.items.n = (uint32_t)n;	/* <= 2 * PKL_FOLD_DIMS */
}

static struct pkl_value *vint(struct pkl_value *n, int64_t i, uint64_t off)
{
	vnode(n, PKL_INT, off)->u.i = i;
	return n;
}

const struct pkl_value *pkl_unfolded(const struct pkl_value *v,
				     struct pkl_fold_view *fv)
{
	const struct pkl_fold *r;
	uint64_t off, pid_off;
	size_t nd;

	if (!v || v->kind != PKL_FOLDED)
		return v;
	r = v->u.fold.rec;
	off = v->off;
	pid_off = off - r->pid_back;
	nd = r->ndim;
	memset(fv, 0, sizeof(*fv));
	fv->call = *v;
	fv->call.kind = PKL_CALL;
	fv->call.how = PKL_REDUCE;
	fv->call.u.call.ax.args = &fv->args;	/* a folded call has no x */
	vnode(&fv->tag, PKL_STR, pid_off);
	fv->tag.u.s.p = storage_tag;
	fv->tag.u.s.n = 7;
	vnode(&fv->loc, PKL_STR, pid_off);
	fv->loc.u.s.p = r->kind->loc;
	fv->loc.u.s.n = r->kind->loc_n;
	fv->t[0] = &fv->tag;
	fv->t[1] = r->kind->cls;
	fv->t[2] = r->key;
	fv->t[3] = &fv->loc;
	fv->t[4] = vint(&fv->numel, r->numel, pid_off);
	vtuple(&fv->pidt, pid_off, fv->t, 5);
	vnode(&fv->pid, PKL_PERSID, pid_off);
	fv->pid.u.call.ax.args = &fv->pidt;
	for (size_t i = 0; i < 2 * nd; i++)
		fv->dims[i] = vint(&fv->ints[i], r->dims[i], off);
	vtuple(&fv->size, off, fv->dims, nd);
	vtuple(&fv->stride, off, fv->dims + nd, nd);
	vtuple(&fv->empty, off, NULL, 0);
	vnode(&fv->hooks, PKL_CALL, off);
	fv->hooks.how = PKL_REDUCE;
	fv->hooks.u.call.func = r->kind->hooks;
	fv->hooks.u.call.ax.args = &fv->empty;
	vnode(&fv->rg, PKL_BOOL, off)->u.i = r->requires_grad;
	fv->a[0] = &fv->pid;
	fv->a[1] = vint(&fv->off, r->offset, off);
	fv->a[2] = &fv->size;
	fv->a[3] = &fv->stride;
	fv->a[4] = &fv->rg;
	fv->a[5] = &fv->hooks;
	vtuple(&fv->args, off, fv->a, 6);
	return &fv->call;
}

int pkl_unfold(struct pkl_doc *doc, const unsigned char *buf, size_t len,
	       uint64_t base_off, struct diag *d)
{
	struct pkl_value **byid;
	struct pkl_doc *w;
	int rc;

	if (!doc->nfolded || doc->whole)
		return 0;
	rc = pkl_parse_with(buf, len, base_off, 0, &w, d);
	if (rc)
		return rc;
	byid = w->nnodes == doc->nnodes ?
	       calloc(w->nnodes + 1u, sizeof(*byid)) : NULL;
	if (!byid) {
		rc = w->nnodes == doc->nnodes ? diag_nomem(d) :
		     diag_set(d, -ESTALE, base_off, "the pickle is not the one "
			      "parsed before (%u values, not %u)", w->nnodes,
			      doc->nnodes);
		pkl_doc_free(w);
		return rc;
	}
	for (struct pkl_chunk *c = w->chunks; c; c = c->next)
		for (uint32_t i = 0; i < c->n; i++)
			byid[c->v[i].id] = &c->v[i];
	/* check every folded call first: a failure changes nothing */
	for (int pass = 0; pass < 2; pass++)
		for (struct pkl_chunk *c = doc->chunks; c; c = c->next)
			for (uint32_t i = 0; i < c->n; i++) {
				struct pkl_value *v = &c->v[i], *m;

				if (v->kind != PKL_FOLDED)
					continue;
				m = byid[v->id];
				if (!pass && (!m || m->kind != PKL_CALL ||
					      m->off != v->off)) {
					rc = diag_set(d, -ESTALE, v->off,
						      "the pickle is not the "
						      "one parsed before");
					free(byid);
					pkl_doc_free(w);
					return rc;
				}
				if (pass) {
					v->kind = PKL_CALL;
					v->u.call.ax.args =
						pkl_call_args(m);
				}
			}
	free(byid);
	doc->whole = w;
	doc->nfolded = 0;
	return 0;
}

const struct pkl_doc *pkl_doc_all(const struct pkl_doc *doc)
{
	return doc->whole ? doc->whole : doc;
}
