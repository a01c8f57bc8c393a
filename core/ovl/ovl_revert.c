/*
 * ovl_revert.c - the moves of `ptfs revert PATH...`: making key paths
 * exactly what the checkpoint on disk holds there, keeping every other
 * staged edit (docs/editing.md, "Undo").  ovl_undo.c plans and checks
 * (ovl_revert.h); this file changes the model, after the journal record.
 *
 * The mount keeps every node of the checkpoint for its whole life, and a
 * pristine open of the same file numbers nodes, tensors and storages the
 * same way, so reverting is putting the checkpoint's own nodes back:
 *
 *   - a PATH the checkpoint does not have (a new key, or a key moved
 *     there) is removed, child by child as rm -r would;
 *   - a PATH it has gets its own node back: from where it was moved to
 *     (a rename is undone; a removed link it stood in for returns), from
 *     the dead (a removal is undone), or instead of the new file that
 *     took its place (cp, rsync); in its own slot when that is free, so
 *     the dict's order is the checkpoint's; then its children the same
 *     way, its value's text, its tensor, and its storages' bytes (the
 *     overlay copy goes).
 *
 * Replay runs the same moves over the same tree.  A storage's data file
 * cannot go atomically with the journal record, so replay only marks the
 * storages a revert covered (ovl_revert_mark()) and attach_copies() drops
 * their files unless a JR_DATA record after the revert named them again:
 * a copy-up after a revert journals JR_DATA anew, because the revert
 * forgets the name.
 */
#define _GNU_SOURCE 1
#include "ovl_revert.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the model as it is: who stands for whom ---- */

bool rv_live(const struct rv *R, const struct ckpt_node *n)
{
	for (int depth = 0; n && depth <= CKPT_MAX_DEPTH + 8; depth++) {
		if (n == R->c->root)
			return true;
		if (n->dead || !n->parent ||
		    n->index >= n->parent->dir->nkids ||
		    n->parent->dir->kids[n->index] != n)
			return false;
		n = n->parent;
	}
	return false;
}

struct ckpt_node *rv_carrier(const struct rv *R, uint32_t pid)
{
	struct ckpt_node *x0 = R->c->nodes[pid], *s = R->xfer[pid];

	if (rv_live(R, x0))
		return x0;
	return s && rv_live(R, s) ? s : NULL;
}

/* A removed link whose target stands in its slot (ckpt_node_drop()). */
static struct ckpt_node *standin_of(const struct rv *R,
				    const struct ckpt_node *y)
{
	for (uint32_t i = 0; i < R->nlinks; i++) {
		struct ckpt_node *l = R->links[i];

		if (l->dead && l->target == y && l->parent == y->parent &&
		    l->index == y->index)
			return l;
	}
	return NULL;
}

static void touched(const struct rv *R, const struct ckpt_node *dir,
		    const char *name, const struct ckpt_node *n)
{
	if (R->v->touched && !R->v->replaying)
		R->v->touched(R->v->arg, dir, name, n);
}

/* The static type name @type is (value and tensor types can change). */
static const char *type_of(const char *type, const char *now)
{
	static const char *const known[] = {
		"int", "float", "bool", "NoneType", "str", "bytes",
		"Tensor", "Parameter",
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++)
		if (!strcmp(type, known[i]))
			return known[i];
	return now;
}

/* ---- changing the tree ---- */

/* rm -r @x from @dir: its subtree removed child by child, as rm -r does,
 * so that a shared container lives on in a link's slot as it would. */
static void remove_tree(const struct rv *R, struct ckpt_node *dir,
			struct ckpt_node *x, int depth)
{
	struct ckpt_node *now;

	if (ckpt_node_is_dir(x) && depth <= CKPT_MAX_DEPTH + 8)
		for (uint32_t i = 0; i < x->dir->nkids; i++)
			if (x->dir->kids[i])
				remove_tree(R, x, x->dir->kids[i], depth + 1);
	touched(R, dir, x->name, NULL);
	now = ckpt_node_drop(R->c, dir, x);
	if (now)
		touched(R, now->parent, now->name, NULL);
}

/* Take live @y out of its slot to move it; a removed link it stood in
 * for gets the slot back. */
static int detach(const struct rv *R, struct ckpt_node *y)
{
	struct ckpt_node *p = y->parent, *l = standin_of(R, y);

	touched(R, p, y->name, NULL);
	ckpt_dir_remove(p, y);
	if (!l)
		return 0;
	if (ckpt_dir_restore(R->c, p, l))
		return diag_nomem(R->d);
	l->dead = false;
	return 0;
}

/* Put the checkpoint's node @x0 (pristine @o) into @dir under its name:
 * in its own slot when @dir is its home and the slot is free. */
static int place(const struct rv *R, struct ckpt_node *dir,
		 struct ckpt_node *x0, const struct ckpt_node *o)
{
	int rc;

	struct ckpt_node *home = ckpt_node_home(x0);
	char *home_name = ckpt_node_home_name(x0);

	x0->dead = false;
	if (dir == home && o->index < dir->dir->nkids &&
	    !dir->dir->kids[o->index]) {
		/* back where it was at open (where it still is, unless it
		   moved: then its edit state keeps that) */
		x0->parent = dir;
		x0->index = o->index;
		x0->name = home_name;
		rc = ckpt_dir_restore(R->c, dir, x0);
	} else {
		rc = ckpt_dir_insert(R->c, dir, x0, home_name);
	}
	x0->step = dir == home ? o->step : ckpt_dir_step(dir);
	touched(R, dir, x0->name, NULL);
	return rc ? diag_nomem(R->d) : 0;
}

static int put(const struct rv *R, struct ckpt_node *dir, const char *name,
	       const struct ckpt_node *o, int depth);

/* @x0 is in place: make what it holds the checkpoint's (@o's). */
static int restore(const struct rv *R, struct ckpt_node *x0,
		   const struct ckpt_node *o, int depth)
{
	struct ckpt_tensor *t;
	char *text;
	int rc = 0;

	switch (o->kind) {
	case CKPT_N_VALUE:
	case CKPT_N_OPAQUE:
		if (!x0->edited && x0->text && x0->textlen == o->textlen &&
		    !memcmp(x0->text, o->text, o->textlen))
			return 0;
		text = malloc(o->textlen + 1);
		if (!text)
			return diag_nomem(R->d);
		memcpy(text, o->text, o->textlen);
		text[o->textlen] = 0;
		free(x0->text);
		x0->text = text;
		x0->textlen = o->textlen;
		x0->type = type_of(o->type, x0->type);
		x0->edited = false;
		touched(R, NULL, NULL, x0);
		return 0;
	case CKPT_N_TENSOR:
		t = R->c->tensors[o->tensor->index];
		if (x0->tensor == t && !x0->edited)
			return 0;
		x0->tensor = t;
		x0->type = type_of(o->type, x0->type);
		x0->edited = false;
		touched(R, NULL, NULL, x0);
		return 0;
	case CKPT_N_DIR:
	case CKPT_N_SEQ:
		/* names the checkpoint has not here go first, so that the
		   slots they took are free for the names that come back */
		for (uint32_t i = 0; i < x0->dir->nkids; i++)
			if (x0->dir->kids[i] &&
			    !ckpt_node_child(o, x0->dir->kids[i]->name))
				remove_tree(R, x0, x0->dir->kids[i], depth + 1);
		for (uint32_t i = 0; i < o->dir->nkids && !rc; i++)
			rc = put(R, x0, o->dir->kids[i]->name, o->dir->kids[i],
				 depth + 1);
		return rc;
	default:
		return 0;	/* a link: where it points never changes */
	}
}

/* Make @dir/@name hold the checkpoint's node @o, or nothing (@o NULL). */
static int put(const struct rv *R, struct ckpt_node *dir, const char *name,
	       const struct ckpt_node *o, int depth)
{
	struct ckpt_node *x = ckpt_node_child(dir, name), *y, *x0;
	int rc;

	if (depth > CKPT_MAX_DEPTH + 8)
		return diag_corrupt(R->d, DIAG_NO_OFFSET, "too deep");
	y = o ? rv_carrier(R, o->id) : NULL;
	if (x && x != y)
		remove_tree(R, dir, x, depth);
	if (!o)
		return 0;
	x0 = R->c->nodes[o->id];
	if (y != x0 || y->parent != dir || strcmp(y->name, name)) {
		if (y && (rc = detach(R, y)))
			return rc;
		/* the new file that took its place */
		if (y && y != x0)
			y->dead = true;
		if ((rc = place(R, dir, x0, o)))
			return rc;
	}
	return restore(R, x0, o, depth);
}

/* ---- the storages ---- */

bool rv_staged(const struct ovl *v, const struct ckpt_storage *s)
{
	return s->modified || s->retyped || ovl_named(v, s->index);
}

/*
 * Storage @i's bytes (and dtype) are the checkpoint's again: its overlay
 * copy is closed and its data file removed (replaying: it is left to
 * attach_copies(), which knows whether a later copy-up made it again).
 */
static void revert_storage(const struct rv *R, uint32_t i)
{
	struct ovl *v = R->v;
	struct ckpt_storage *s = R->c->storages[i];
	const struct ckpt_storage *ps = R->p->storages[i];

	if (v->replaying) {
		ovl_revert_mark(v, i);
		return;
	}
	if (!rv_staged(v, s))
		return;
	if (ovl_copied(v, s))
		close(s->fd);
	s->fd = ckpt_storage_home(R->c, s);
	s->data_off = s->rec ? 0 : ps->data_off;	/* located again */
	s->modified = false;
	if (s->retyped) {
		/* converted to another dtype (core/cvt): its tensors too */
		s->retyped = NULL;
		s->dtype = ps->dtype;
		s->untyped = ps->untyped;
		s->numel = ps->numel;
		s->nbytes = ps->nbytes;
		for (uint32_t k = 0; k < R->c->ntensors && k < R->p->ntensors;
		     k++) {
			struct ckpt_tensor *t = R->c->tensors[k];
			const struct ckpt_tensor *pt = R->p->tensors[k];

			if (t->storage != s || t->ndim != pt->ndim)
				continue;
			t->dtype = pt->dtype;
			t->offset = pt->offset;
			/* the sizes, then the strides */
			memcpy(t->shape, pt->shape,
			       2 * (size_t)pt->ndim * sizeof(*t->shape));
			t->numel = pt->numel;
			t->contiguous = pt->contiguous;
		}
	}
	/* the journal says this storage is the checkpoint's now: its file
	   goes, and its name with it, so that a later copy-up names it
	   again (JR_DATA) after the JR_REVERT */
	/* every name the manifest gave it: the plain copy and a converted
	   one ("<jid>.<i>.<dtype>", which s->retyped no longer tells) */
	if (v->dfd >= 0)
		ovl_data_unlink(v, i, false);
	if (i < v->nnamed)
		v->named[i] = 0;
	ovl_notify(v, s, NULL);
}

bool rv_views(const struct ckpt_tensor *t, uint32_t i)
{
	return t && ((t->storage && t->storage->index == i) ||
		     rv_views(t->x->qscales, i) || rv_views(t->x->qzeros, i));
}

int rv_apply(const struct rv *R)
{
	int rc = 0;

	for (int k = 0; k < R->nt && !rc; k++) {
		const struct rv_tgt *t = &R->t[k];

		rc = t->dir ? put(R, t->dir, t->name, t->o, 0) :
		     restore(R, R->c->root, t->o, 0);
	}
	for (uint32_t i = 0; i < R->v->nstorages0 && !rc; i++)
		if (R->stor[i])
			revert_storage(R, i);
	return rc;
}

