/*
 * ovl_undo.c - giving up staged edits without writing them back.
 *
 * All of them: ovl_discard() (`ptfs umount --discard`) removes the
 * overlay by its manifest exactly as a successful write-back does, never
 * a file ptfs did not create, and never the checkpoint.  Before this, the
 * only way to drop an `rm -r` mistake was kill -9 and a new mount with -o
 * discard, which dropped the good edits too.
 *
 * Some of them: ovl_revert() (`ptfs revert PATH...`) makes key paths what
 * the checkpoint holds.  This half finds the paths in the mount and in a
 * pristine open of the checkpoint, maps who stands for whom, refuses what
 * would change anything outside the paths, and journals JR_REVERT; the
 * moves are ovl_revert.c's.  Replay comes through ovl_revert_replay().
 */
#define _GNU_SOURCE 1	/* asprintf */
#include "ovl_revert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int ovl_discard(struct ovl *v, struct diag *d)
{
	int rc = 0;

	if (v->readonly || v->committed)
		return ovl_check_writable(v, d);
	/* nothing on disk yet, or the directory was removed under the
	   mount (its path may name another directory now): nothing to
	   remove */
	if (v->dfd >= 0 && ovl_dir_alive(v))
		rc = ovl_forget(v, d);
	if (rc)
		return rc;
	v->committed = true;
	v->discarded = true;
	return 0;
}

/* ---- the checkpoint as it is on disk ---- */

void ovl_pristine_drop(struct ovl *v)
{
	ckpt_close(v->pristine);
	free(v->pristine_path);
	v->pristine = NULL;
	v->pristine_path = NULL;
}

/*
 * A second, untouched model of the mounted file (the same inode, through
 * /proc/self/fd: a file renamed over the path since is not it), kept in
 * v->pristine.  Its bytes must still be the ones mounted.
 */
static int pristine(struct ovl *v, struct diag *d)
{
	struct ovl_ident now;
	int rc;

	if (v->pristine)
		return 0;
	/* many files by the path: the index's or .metadata's name is how
	   they open */
	if (ckpt_can(v->c, CKPT_CAP_MANY) ?
	    !(v->pristine_path = strdup(v->path)) :
	    asprintf(&v->pristine_path, "/proc/self/fd/%d", v->c->fd) < 0) {
		v->pristine_path = NULL;
		return diag_nomem(d);
	}
	/* the mount's tree: a list of scalars is one value there too */
	rc = ckpt_open_with(v->pristine_path, v->c->lists ? CKPT_OPEN_LISTS : 0,
			    &v->pristine, d);
	if (rc) {
		ovl_pristine_drop(v);
		return rc;
	}
	rc = ovl_ident_ckpt(v->pristine, NULL, &now);
	/* a rename over the path changes the ctime of ours: no change */
	now.ctime_s = v->id.ctime_s;
	now.ctime_ns = v->id.ctime_ns;
	if (rc == -ENOMEM)
		rc = diag_nomem(d);
	else if (rc || !ovl_ident_same(&now, &v->id))
		rc = diag_errno(d, -ESTALE, "%s: changed since it was "
				"mounted (another program rewrote it): there "
				"is nothing to revert to", v->path);
	if (!rc && (v->pristine->nnodes < v->nnodes0 ||
		    v->pristine->nstorages != v->nstorages0))
		rc = diag_corrupt(d, DIAG_NO_OFFSET, "%s: read again, it does "
				  "not give the model it gave at mount",
				  v->path);
	if (rc)
		ovl_pristine_drop(v);
	return rc;
}

/* ---- storages a revert covered, while replaying ---- */

void ovl_revert_mark(struct ovl *v, uint32_t i)
{
	if (i >= v->nreverted) {
		uint32_t n = i + 64;
		uint8_t *nb = realloc(v->reverted, n);

		if (!nb)
			return;	/* its file stays attached: as before */
		memset(nb + v->nreverted, 0, n - v->nreverted);
		v->reverted = nb;
		v->nreverted = n;
	}
	v->reverted[i] = 1;
}

bool ovl_reverted(const struct ovl *v, uint32_t i)
{
	return i < v->nreverted && v->reverted[i];
}

void ovl_revert_named(struct ovl *v, uint32_t i)
{
	if (i < v->nreverted)
		v->reverted[i] = 0;
}

/* Storages a pristine tensor views: its own, a quantizer's. */
static void mark_tensor(const struct rv *R, const struct ckpt_tensor *t)
{
	if (!t)
		return;
	if (t->storage && t->storage->index < R->v->nstorages0)
		R->stor[t->storage->index] = 1;
	if (t->x->qscales)
		mark_tensor(R, t->x->qscales);
	if (t->x->qzeros)
		mark_tensor(R, t->x->qzeros);
}

/* ---- finding the paths, and what is where ---- */

static int find_target(struct rv *R, struct rv_tgt *t)
{
	char *copy = strdup(t->path), *slash;

	if (!copy)
		return diag_nomem(R->d);
	t->o = ovl_resolve_in(R->p, t->path, strlen(t->path));
	if (!*copy) {
		free(copy);
		t->x = R->c->root;
		return 0;
	}
	slash = strrchr(copy, '/');
	t->name = strdup(slash ? slash + 1 : copy);
	if (slash)
		*slash = 0;
	t->dir = slash ? ovl_resolve(R->v, copy, strlen(copy)) : R->c->root;
	if (!t->name || !*t->name) {
		free(copy);
		return t->name ? diag_errno(R->d, -EINVAL, "'%s' is not a key "
					    "path", t->path) :
		       diag_nomem(R->d);
	}
	if (!t->dir || !ckpt_node_is_dir(t->dir)) {
		int rc = t->dir ?
			 diag_errno(R->d, -ENOTDIR, "%s: %s is not a "
				    "directory", t->path, copy) :
			 diag_errno(R->d, -ENOENT, "%s: %s is not in the mount "
				    "(revert it first, or with it)", t->path,
				    copy);

		free(copy);
		return rc;
	}
	free(copy);
	t->x = ckpt_node_child(t->dir, t->name);
	return 0;
}

static void mark_sub(struct rv *R, const struct ckpt_node *o, int depth)
{
	R->osub[o->id] = 1;
	if (o->kind == CKPT_N_TENSOR)
		mark_tensor(R, o->tensor);
	if (ckpt_node_is_dir(o) && depth <= CKPT_MAX_DEPTH + 8)
		for (uint32_t i = 0; i < o->dir->nkids; i++)
			if (o->dir->kids[i])
				mark_sub(R, o->dir->kids[i], depth + 1);
}

static void mark_under(struct rv *R, const struct ckpt_node *x, int depth)
{
	R->under[x->id] = 1;
	if (ckpt_node_is_dir(x) && depth <= CKPT_MAX_DEPTH + 8)
		for (uint32_t i = 0; i < x->dir->nkids; i++)
			if (x->dir->kids[i])
				mark_under(R, x->dir->kids[i], depth + 1);
}

/* The maps the checks and the moves need. */
static int survey(struct rv *R)
{
	struct ckpt *c = R->c;
	const struct ckpt *p = R->p;
	uint32_t n = c->nnodes ? c->nnodes : 1;
	int rc = ovl_live_map(c, &R->live);

	R->osub = rc ? NULL : calloc(p->nnodes ? p->nnodes : 1, 1);
	R->keep = R->osub ? calloc(n, 1) : NULL;
	R->under = R->keep ? calloc(n, 1) : NULL;
	R->stor = R->under ? calloc(c->nstorages ? c->nstorages : 1, 1) : NULL;
	R->xfer = R->stor ? calloc(p->nnodes ? p->nnodes : 1,
				   sizeof(*R->xfer)) : NULL;
	R->links = R->xfer ? malloc(n * sizeof(*R->links)) : NULL;
	if (!R->links)
		return diag_nomem(R->d);
	for (uint32_t i = 0; i < c->nnodes; i++) {
		struct ckpt_node *s = c->nodes[i];
		const struct ckpt_node *o;

		if (i < R->v->nnodes0 && s->kind == CKPT_N_LINK)
			R->links[R->nlinks++] = s;
		/* a new file renamed over a key holds its place now */
		if (i < R->v->nnodes0 || s->fresh || !ckpt_node_home(s) ||
		    ckpt_node_home(s)->id >= p->nnodes)
			continue;
		o = ckpt_node_child(p->nodes[ckpt_node_home(s)->id],
				    ckpt_node_home_name(s));
		if (o && (!R->xfer[o->id] || R->live[i]))
			R->xfer[o->id] = s;
	}
	for (int k = 0; k < R->nt; k++) {
		if (R->t[k].o)
			mark_sub(R, R->t[k].o, 0);
		if (R->t[k].x)
			mark_under(R, R->t[k].x, 0);
	}
	for (uint32_t i = 0; i < p->nnodes && i < c->nnodes; i++) {
		struct ckpt_node *y = R->osub[i] ? rv_carrier(R, i) : NULL;

		if (y)
			R->keep[y->id] = 1;
	}
	return 0;
}

/* ---- the checks: nothing outside the paths may change ---- */

/* The first tensor of the checkpoint under a target that views @i. */
static const struct ckpt_node *user_of(const struct rv *R,
				       const struct ckpt_node *o, uint32_t i,
				       int depth)
{
	const struct ckpt_node *n = NULL;

	if (o->kind == CKPT_N_TENSOR &&
	    rv_views(R->c->tensors[o->tensor->index], i))
		return o;
	if (ckpt_node_is_dir(o) && depth <= CKPT_MAX_DEPTH + 8)
		for (uint32_t k = 0; k < o->dir->nkids && !n; k++)
			n = user_of(R, o->dir->kids[k], i, depth + 1);
	return n;
}

/* A staged storage the paths share with a tensor outside them. */
static int check_shared(const struct rv *R)
{
	const struct ckpt *c = R->c;

	for (uint32_t i = 0; i < R->v->nstorages0; i++) {
		const struct ckpt_storage *s = c->storages[i];

		if (!R->stor[i] || (!s->modified && !s->retyped))
			continue;
		for (uint32_t k = 0; k < c->nnodes; k++) {
			const struct ckpt_node *n = c->nodes[k], *in = NULL;
			char *out, *mine;
			int rc;

			if (!R->live[k] || R->keep[k] || R->under[k] ||
			    n->kind != CKPT_N_TENSOR || !rv_views(n->tensor, i))
				continue;
			for (int t = 0; t < R->nt && !in; t++)
				if (R->t[t].o)
					in = user_of(R, R->t[t].o, i, 0);
			out = ckpt_node_path(n);
			mine = in ? ckpt_node_path(in) : NULL;
			rc = diag_errno(R->d, -EBUSY, "%s: its storage %s is "
					"staged, and %s views it too: "
					"reverting would change %s as well; "
					"revert both in one ptfs revert, or a "
					"directory that holds both",
					mine ? mine : R->t[0].path, s->key,
					out ? out : "another key",
					out ? out : "it");
			free(out);
			free(mine);
			return rc;
		}
	}
	return 0;
}

static int check(const struct rv *R)
{
	const struct ckpt *c = R->c, *p = R->p;

	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct ckpt_node *n = c->nodes[i];
		bool in = R->under[i] || R->keep[i] ||
			  (i < p->nnodes && R->osub[i]);

		if (in && (n->ed->stage || n->ed->vstage)) {
			char *path = ckpt_node_path(n);
			int rc = diag_errno(R->d, -EBUSY, "%s is being written "
					    "(close it first)",
					    path ? path : n->name);

			free(path);
			return rc;
		}
		if (i >= p->nnodes || !R->osub[i])
			continue;
		if (n->kind != p->nodes[i]->kind ||
		    (n->kind == CKPT_N_TENSOR &&
		     p->nodes[i]->tensor->index >= c->ntensors))
			return diag_corrupt(R->d, DIAG_NO_OFFSET, "%s: read "
					    "again, it does not give the model "
					    "it gave at mount", R->v->path);
		/* a link must not point at what the revert leaves out */
		if (n->kind == CKPT_N_LINK) {
			uint32_t t = p->nodes[i]->target->id;

			if (!R->osub[t] && (!R->live[t] || R->under[t]))
				return diag_errno(R->d, -EINVAL, "%s is a link "
						  "to %s, which would not be "
						  "there: revert it too",
						  R->t[0].path,
						  p->nodes[i]->target->name);
		}
	}
	for (int k = 0; k < R->nt; k++) {
		/* a directory above the path the checkpoint has inside it */
		for (const struct ckpt_node *a = R->t[k].dir;
		     a && a != c->root; a = a->parent)
			if (a->id < p->nnodes && !a->fresh && R->osub[a->id])
				return diag_errno(R->d, -EINVAL, "%s: the "
						  "mount has %s above it, and "
						  "the checkpoint has it "
						  "inside it: revert where it "
						  "is now",
						  R->t[k].path, a->name);
	}
	return check_shared(R);
}

/* Is anything under the paths not what the checkpoint holds? */
static bool needs_work(const struct rv *R)
{
	const struct ckpt *c = R->c, *p = R->p;

	for (int k = 0; k < R->nt; k++)
		if (R->t[k].x != (R->t[k].o ? rv_carrier(R, R->t[k].o->id) :
				  NULL))
			return true;
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct ckpt_node *n = c->nodes[i], *o, *y;

		if (R->under[i] && !R->keep[i])
			return true;	/* goes */
		if (i >= p->nnodes || !R->osub[i])
			continue;
		o = p->nodes[i];
		y = rv_carrier(R, i);
		if (y != n || y->edited)
			return true;
		/* under its own parent, under its own name */
		if (o->parent && R->osub[o->parent->id] &&
		    (y->parent != c->nodes[o->parent->id] ||
		     strcmp(y->name, o->name)))
			return true;
		if (o->kind == CKPT_N_TENSOR &&
		    y->tensor != c->tensors[o->tensor->index])
			return true;
	}
	for (uint32_t i = 0; i < R->v->nstorages0; i++)
		if (R->stor[i] && rv_staged(R->v, c->storages[i]))
			return true;
	return false;
}

/* ---- reverting ---- */

static void rv_free(struct rv *R)
{
	for (int k = 0; k < R->nt; k++)
		free(R->t[k].name);
	free(R->t);
	free(R->live);
	free(R->osub);
	free(R->keep);
	free(R->under);
	free(R->stor);
	free(R->xfer);
	free(R->links);
}

/* Revert @paths (@n of them); 0 done, 1 nothing was staged there. */
static int revert(struct ovl *v, const char *const *paths, int n,
		  struct diag *d)
{
	struct rv R = { .v = v, .c = v->c, .d = d, .nt = n };
	struct jrec r = { .op = JR_REVERT };
	int rc = pristine(v, d);

	if (rc)
		return rc;
	R.p = v->pristine;
	R.t = calloc(n ? n : 1, sizeof(*R.t));
	if (!R.t)
		rc = diag_nomem(d);
	for (int k = 0; k < n && !rc; k++) {
		R.t[k].path = paths[k];
		rc = find_target(&R, &R.t[k]);
	}
	if (!rc)
		rc = survey(&R);
	if (!rc && !v->replaying) {
		rc = check(&R);
		if (!rc && !needs_work(&R))
			rc = 1;
		if (!rc)
			rc = ovl_ensure_dir(v, d);
		for (int k = 0; k < n && !rc; k++)
			jr_field(&r, paths[k]);
		if (!rc)
			rc = jr_append(v, &r, d);
	}
	if (!rc)
		rc = rv_apply(&R);
	rv_free(&R);
	return rc;
}

int ovl_revert(struct ovl *v, const char *const *paths, int n,
	       struct diag *d)
{
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (n < 1 || n > JR_MAXF)
		return diag_errno(d, -EINVAL, "revert takes 1 to %d paths at "
				  "once", JR_MAXF);
	for (int k = 0; k < n; k++)
		if (strlen(paths[k]) > JR_MAX / JR_MAXF)
			return diag_errno(d, -ENAMETOOLONG, "a path too long");
	rc = revert(v, paths, n, d);
	/* a second model of a big checkpoint is not kept for the mount */
	ovl_pristine_drop(v);
	return rc;
}

int ovl_revert_replay(struct ovl *v, const struct jrec *r, struct diag *d)
{
	char *paths[JR_MAXF] = { 0 };
	int rc = r->nf < 1 ? diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset "
					  "0x%llx: bad revert record", v->jpath,
					  (unsigned long long)r->off) : 0;

	for (int k = 0; k < r->nf && !rc; k++)
		if (!(paths[k] = strndup(r->f[k], r->len[k])))
			rc = diag_nomem(d);
	/* the same steps over the same tree: the data is not touched, and
	   the storages are only marked (attach_copies()) */
	if (!rc)
		rc = revert(v, (const char *const *)paths, r->nf, d);
	for (int k = 0; k < r->nf; k++)
		free(paths[k]);
	return rc < 0 ? rc : 0;
}
