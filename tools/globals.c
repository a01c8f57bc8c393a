/*
 * globals.c - the unsafe globals of a checkpoint in the words every tool
 * uses (ptls lists them, ptverify reports them): what the global is, what
 * torch.load would do with it, and the key path that holds it (the
 * deepest node whose pickle value refers to the GLOBAL opcode at its
 * offset).  One sentence, made here only.
 */
#include "globals.h"

#include "ckpt/ckpt.h"
#include "pickle/pkl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Values already visited in this search (a DAG: memo links). */
struct seen {
	uint32_t *gen;		/* per value id: the search that saw it */
	uint32_t n, cur;
};

/* Does @v refer to the GLOBAL at @off? */
static bool refers(const struct pkl_value *v, uint64_t off, struct seen *s,
		   int depth)
{
	const struct pkl_call_ext *x;

	if (!v || depth > 512)
		return false;
	if (v->id < s->n) {
		if (s->gen[v->id] == s->cur)
			return false;
		s->gen[v->id] = s->cur;
	}
	switch (v->kind) {
	case PKL_GLOBAL:
		return v->off == off;
	case PKL_FOLDED: {	/* its arguments, as parsed (pkl_fold.c) */
		struct pkl_fold_view fv;

		return refers(v->u.fold.func, off, s, depth + 1) ||
		       refers(pkl_call_args(pkl_unfolded(v, &fv)), off, s,
			      depth + 1);
	}
	case PKL_TUPLE: case PKL_LIST: case PKL_DICT: case PKL_SET:
	case PKL_FROZENSET:
		for (size_t i = 0; i < v->u.items.n; i++)
			if (refers(v->u.items.v[i], off, s, depth + 1))
				return true;
		return false;
	case PKL_CALL: case PKL_PERSID:
		x = pkl_call_x(v);
		if (refers(v->u.call.func, off, s, depth + 1) ||
		    refers(pkl_call_args(v), off, s, depth + 1))
			return true;
		if (!x)
			return false;
		if (refers(x->kwargs, off, s, depth + 1) ||
		    refers(x->state, off, s, depth + 1))
			return true;
		for (size_t i = 0; i < x->nlist; i++)
			if (refers(x->list[i], off, s, depth + 1))
				return true;
		for (size_t i = 0; i < x->ndict; i++)
			if (refers(x->dict[i], off, s, depth + 1))
				return true;
		return false;
	default:
		return false;
	}
}

static bool node_refers(const struct ckpt_node *n, uint64_t off,
			struct seen *s)
{
	s->cur++;
	return refers(n->val, off, s, 0);
}

static const struct ckpt_node *holder(const struct ckpt *c, uint64_t off)
{
	const struct ckpt_node *n = c->root, *best = NULL;
	struct seen s = { calloc(c->doc->nnodes + 1u, sizeof(*s.gen)),
			  c->doc->nnodes, 0 };

	if (!s.gen)
		return NULL;
	for (int depth = 0; n && depth < CKPT_MAX_DEPTH; depth++) {
		const struct ckpt_node *next = NULL;

		if (!node_refers(n, off, &s))
			break;
		best = n;
		/* a row's globals (its rebuild function, storage class and
		   OrderedDict) are all allowed: it holds no unsafe one */
		for (uint32_t i = 0; ckpt_node_is_dir(n) && i < n->dir->nkids &&
				     !next; i++)
			if (n->dir->kids[i] && !ckpt_is_row(n->dir->kids[i]) &&
			    node_refers(n->dir->kids[i], off, &s))
				next = n->dir->kids[i];
		n = next;
	}
	free(s.gen);
	return best;
}

const struct ckpt_node *fmt_global_holder(const struct ckpt *c, uint32_t i)
{
	const struct ckpt_global *g = i < c->nglobals ? &c->globals[i] : NULL;

	/* the model's pickle only, and only once it was made */
	if (!g || !c->root || !c->doc ||
	    strcmp(g->pickle, c->pkl_label ? c->pkl_label : "data.pkl"))
		return NULL;
	return holder(c, g->off);
}

void fmt_global_text(const struct ckpt *c, uint32_t i, const char *where,
		     char *buf, size_t size)
{
	const struct ckpt_global *g = &c->globals[i];
	const struct ckpt_node *h = g->kind == CKPT_U_GLOBAL ||
				    g->kind == CKPT_U_CALL ?
				    fmt_global_holder(c, i) : NULL;
	char *p = h ? ckpt_node_path(h) : NULL;
	int n;

	switch (g->kind) {
	case CKPT_U_GLOBAL:
		n = snprintf(buf, size, "unsafe global %s.%s in %s%s: a plain "
			     "torch.load would import it, and weights_only="
			     "True refuses the file", g->module, g->name,
			     g->pickle, where);
		break;
	case CKPT_U_COMPUTED:
		n = snprintf(buf, size, "unsafe global name computed at load "
			     "time in %s%s: %s", g->pickle, where, g->why);
		break;
	case CKPT_U_ARCHIVE:
		n = snprintf(buf, size, "unsafe archive%s: %s", where, g->why);
		break;
	default:
		n = snprintf(buf, size, "unsafe %s in %s%s: %s",
			     g->kind == CKPT_U_CALL ? "call" :
			     g->kind == CKPT_U_PERSID ? "persistent id" :
			     "opcode", g->pickle, where, g->why);
		break;
	}
	if (p && n >= 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, "; held by %s",
			 p[0] ? p : ". (the root)");
	free(p);
}
