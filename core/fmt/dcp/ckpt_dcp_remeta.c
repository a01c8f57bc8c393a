/*
 * ckpt_dcp_remeta.c - the .metadata a DCP write-back commits: the old
 * one's objects, with the keys named as the tree now has them and the
 * data files as the write-back named them.  Everything else is written
 * back as parsed (pkl_emit_value(): properties, chunks, sizes, offsets,
 * storage_meta, version, and what a later torch adds), in protocol 2,
 * which pickle.load reads like the protocol 4 torch writes:
 *
 *   Metadata            old class and args, NEWOBJ, a state dict with
 *                       the old fields in their order, then BUILD:
 *   state_dict_metadata {NEW FQN: the old ...StorageMetadata}, in the
 *                       old order, removed keys left out
 *   planner_data        {NEW FQN: (the path: str keys, int indices)}
 *                       for every key left (when the old one is a dict)
 *   storage_data        {MetadataIndex (fqn NEW FQN): _StorageInfo
 *                       (relative_path the new file's name, if it has
 *                       one)}, in the old order, removed keys' left out
 *   any other field     as it was
 *
 * A key's new name and path come from where its node now is in the tree
 * (torch's flatten: the path's steps joined by '.'); a key no walk from
 * the root reaches was removed.
 */
#include "ckpt_dcp.h"
#include "ckpt/ckpt_fsave.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pickle/pkl_emit.h"
#include "util/sbuf.h"

/* Where a key is now: its fqn and the steps of its path. */
struct step {
	uint32_t off, len;	/* in fqn */
	bool index;		/* an int (a list's position) */
	uint32_t i;
};

struct newkey {
	char *fqn;		/* NULL: removed */
	struct step *steps;
	uint32_t nsteps;
};

struct remeta {
	struct ckpt *c;
	const struct fsave *w;
	struct diag *d;
	struct pkl_emit *e;
	struct newkey *nk;	/* by key index */
	struct dcp_tab byfqn;	/* old fqn -> key index */
	struct dcp_tab names;	/* new fqns, each once */
	struct step stack[CKPT_MAX_DEPTH + 1];
};

static int place(struct remeta *m, uint32_t at, const struct sbuf *fqn,
		 int depth)
{
	struct newkey *k = &m->nk[at];

	if (k->fqn)
		return diag_unsupported(m->d, DIAG_NO_OFFSET, "%s: a DCP key "
					"in two places", fqn->p);
	k->fqn = strndup(fqn->p, fqn->n);
	k->steps = malloc(depth * sizeof(*k->steps));
	if (!k->fqn || !k->steps)
		return diag_nomem(m->d);
	memcpy(k->steps, m->stack, depth * sizeof(*k->steps));
	k->nsteps = depth;
	return 0;
}

/* Name every key under @dir (path @fqn, @depth steps deep). */
static int walk(struct remeta *m, const struct ckpt_node *dir,
		struct sbuf *fqn, int depth)
{
	uint32_t index = 0;
	int rc = 0;

	if (depth >= CKPT_MAX_DEPTH)
		return diag_unsupported(m->d, DIAG_NO_OFFSET, "%s: nested "
					"deeper than %d", fqn->p,
					CKPT_MAX_DEPTH);
	for (uint32_t i = 0; i < dir->dir->nkids && !rc; i++) {
		const struct ckpt_node *k = dir->dir->kids[i];
		const struct dcp_key *key;
		size_t mark = fqn->n;

		if (!k || k->dead)
			continue;
		if (depth)
			sb_add(fqn, ".", 1);
		m->stack[depth] = (struct step){ .off = (uint32_t)fqn->n,
			.index = k->step == CKPT_S_INDEX, .i = index };
		rc = ckpt_key_text(k, index, fqn, "DCP", m->d);
		index += k->step == CKPT_S_INDEX;
		if (!rc && fqn->oom)
			rc = diag_nomem(m->d);
		if (rc)
			break;
		m->stack[depth].len = (uint32_t)fqn->n - m->stack[depth].off;
		key = ckpt_dcp_key_of(m->c, k);
		if (key && key->node == k)
			rc = place(m, (uint32_t)(key - m->c->dcp->keys), fqn,
				   depth + 1);
		else if (!key && ckpt_node_is_dir(k))
			rc = walk(m, k, fqn, depth + 1);
		else
			rc = diag_unsupported(m->d, DIAG_NO_OFFSET, "%s: not a "
					      "key of the DCP directory",
					      fqn->p);
		sb_cut(fqn, mark);
	}
	return rc;
}

static int str(struct remeta *m, const char *p, size_t n)
{
	return pkl_emit_str(m->e, p, n);
}

/* The new key of old fqn @v (a str), or NULL (removed, or unknown). */
static const struct newkey *renamed(const struct remeta *m,
				    const struct pkl_value *v)
{
	uint32_t i;

	if (!v || v->kind != PKL_STR)
		return NULL;
	i = dcp_tab_get(&m->byfqn, v->u.s.p, v->u.s.n, NULL, 0);
	return i == UINT32_MAX || !m->nk[i].fqn ? NULL : &m->nk[i];
}

/* A field's replacement: 1 when written, 0 to write the old value. */
typedef int (*field_fn)(struct remeta *m, const char *name,
			const struct pkl_value *old, const void *arg);

/* Object @v again (its class and args, NEWOBJ or REDUCE), its state
 * dict's fields as @fn replaces them. */
static int object(struct remeta *m, const struct pkl_value *v, field_fn fn,
		  const void *arg)
{
	const struct pkl_value *st = dcp_state(v);
	int rc;

	if (!st || st->kind != PKL_DICT || pkl_call_x(v)->nlist ||
	    pkl_call_x(v)->ndict || pkl_call_x(v)->kwargs ||
	    (v->how != PKL_NEWOBJ && v->how != PKL_REDUCE))
		return diag_unsupported(m->d, v ? v->off : DIAG_NO_OFFSET,
					".metadata: an object ptfs cannot "
					"write again");
	rc = pkl_emit_value(m->e, v->u.call.func);
	if (!rc)
		rc = pkl_emit_value(m->e, pkl_call_args(v));
	if (!rc)
		rc = pkl_emit_op(m->e, v->how == PKL_NEWOBJ ? PKL_OP_NEWOBJ :
				 PKL_OP_REDUCE);
	if (!rc)
		rc = pkl_emit_op(m->e, PKL_OP_EMPTY_DICT);
	if (!rc)
		rc = pkl_emit_mark(m->e);
	for (size_t i = 0; i < pkl_len(st) && !rc; i++) {
		const struct pkl_value *k = st->u.items.v[2 * i];
		const struct pkl_value *x = st->u.items.v[2 * i + 1];

		rc = pkl_emit_value(m->e, k);
		if (!rc && k->kind == PKL_STR)
			rc = fn(m, k->u.s.p, x, arg);	/* 1: written */
		rc = rc == 1 ? 0 : rc ? rc : pkl_emit_value(m->e, x);
	}
	if (!rc)
		rc = pkl_emit_op(m->e, PKL_OP_SETITEMS);
	return rc ? rc : pkl_emit_op(m->e, PKL_OP_BUILD);
}

static int sdm(struct remeta *m, const struct pkl_value *old)
{
	int rc = pkl_emit_op(m->e, PKL_OP_EMPTY_DICT);

	if (!rc)
		rc = pkl_emit_mark(m->e);
	for (size_t i = 0; i < pkl_len(old) && !rc; i++) {
		const struct newkey *k = renamed(m, old->u.items.v[2 * i]);

		if (!k)
			continue;
		rc = str(m, k->fqn, strlen(k->fqn));
		if (!rc)
			rc = pkl_emit_value(m->e, old->u.items.v[2 * i + 1]);
	}
	return rc ? rc : pkl_emit_op(m->e, PKL_OP_SETITEMS);
}

static int planner(struct remeta *m, const struct pkl_value *sdm_old)
{
	int rc = pkl_emit_op(m->e, PKL_OP_EMPTY_DICT);

	if (!rc)
		rc = pkl_emit_mark(m->e);
	for (size_t i = 0; i < pkl_len(sdm_old) && !rc; i++) {
		const struct newkey *k = renamed(m, sdm_old->u.items.v[2 * i]);

		if (!k)
			continue;
		rc = str(m, k->fqn, strlen(k->fqn));
		if (!rc)
			rc = pkl_emit_mark(m->e);
		for (uint32_t j = 0; j < k->nsteps && !rc; j++)
			rc = k->steps[j].index ?
			     pkl_emit_int(m->e, k->steps[j].i) :
			     str(m, k->fqn + k->steps[j].off, k->steps[j].len);
		if (!rc)
			rc = pkl_emit_op(m->e, PKL_OP_TUPLE);
	}
	return rc ? rc : pkl_emit_op(m->e, PKL_OP_SETITEMS);
}

/* MetadataIndex: its fqn is the key's new one. */
static int index_field(struct remeta *m, const char *name,
		       const struct pkl_value *old, const void *arg)
{
	const struct newkey *k = arg;
	int rc;

	(void)old;
	if (strcmp(name, "fqn"))
		return 0;
	rc = str(m, k->fqn, strlen(k->fqn));
	return rc ? rc : 1;
}

/* _StorageInfo: relative_path is its file's new name, if it got one. */
static int info_field(struct remeta *m, const char *name,
		      const struct pkl_value *old, const void *arg)
{
	const char *to;
	int rc;

	(void)arg;
	if (strcmp(name, "relative_path") || !old || old->kind != PKL_STR)
		return 0;
	to = fsave_renamed(m->w, old->u.s.p, old->u.s.n);
	if (!to)
		return 0;
	rc = str(m, to, strlen(to));
	return rc ? rc : 1;
}

static int storage_data(struct remeta *m, const struct pkl_value *old)
{
	int rc = pkl_emit_op(m->e, PKL_OP_EMPTY_DICT);

	if (!rc)
		rc = pkl_emit_mark(m->e);
	for (size_t i = 0; i < pkl_len(old) && !rc; i++) {
		const struct pkl_value *mi = old->u.items.v[2 * i];
		const struct newkey *k = renamed(m, dcp_field(dcp_state(mi),
							      "fqn"));

		if (!k)
			continue;	/* a key removed: its items go */
		rc = object(m, mi, index_field, k);
		if (!rc)
			rc = object(m, old->u.items.v[2 * i + 1], info_field,
				    NULL);
	}
	return rc ? rc : pkl_emit_op(m->e, PKL_OP_SETITEMS);
}

/* Metadata's own fields. */
static int meta_field(struct remeta *m, const char *name,
		      const struct pkl_value *old, const void *arg)
{
	const struct pkl_value *sdm_old = arg;
	int rc;

	if (!strcmp(name, "state_dict_metadata"))
		rc = sdm(m, old);
	else if (!strcmp(name, "planner_data") && old &&
		 old->kind == PKL_DICT)
		rc = planner(m, sdm_old);
	else if (!strcmp(name, "storage_data") && old &&
		 old->kind == PKL_DICT)
		rc = storage_data(m, old);
	else
		return 0;
	return rc ? rc : 1;
}

int ckpt_dcp_remeta(struct ckpt *c, const struct fsave *w, unsigned char **out,
		    size_t *len, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	struct remeta m = { .c = c, .w = w, .d = d };
	struct sbuf fqn = { 0 };
	const struct pkl_value *root = c->doc ? c->doc->root : NULL;
	int rc;

	*out = NULL;
	m.nk = calloc(p->nkeys + 1u, sizeof(*m.nk));
	if (!m.nk)
		return diag_nomem(d);
	rc = walk(&m, c->root, &fqn, 0);
	for (uint32_t i = 0; i < p->nkeys && !rc; i++) {
		const char *k = m.nk[i].fqn;

		if (dcp_tab_put(&m.byfqn, p->keys[i].key->u.s.p,
				p->keys[i].key->u.s.n, NULL, 0, i) < 0)
			rc = diag_nomem(d);
		/* "a.b" and a/b would be one key to torch */
		else if (k && (rc = dcp_tab_put(&m.names, k, strlen(k), NULL,
						0, i)))
			rc = rc < 0 ? diag_nomem(d) : diag_unsupported(d,
				DIAG_NO_OFFSET, "%s: two keys of the tree have "
				"this DCP name; rename one", k);
	}
	if (!rc)
		rc = pkl_emit_init(&m.e, c->doc->nnodes, NULL, d);
	if (!rc)
		rc = object(&m, root, meta_field, dcp_field(dcp_state(root),
						    "state_dict_metadata"));
	if (!rc)
		rc = pkl_emit_finish(m.e, out, len);
	pkl_emit_free(m.e);
	for (uint32_t i = 0; i < p->nkeys; i++) {
		free(m.nk[i].fqn);
		free(m.nk[i].steps);
	}
	free(m.nk);
	free(m.byfqn.v);
	free(m.names.v);
	free(fqn.p);
	return rc;
}
