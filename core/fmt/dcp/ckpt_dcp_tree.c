/*
 * ckpt_dcp_tree.c - the nested state dict of a DCP directory.  DCP saves a
 * flat dict (keys joined by '.'); planner_data keeps each key's path, as
 * torch's _traverse.py made it: str keys of dicts (str(k) of any key) and
 * int positions in lists and tuples.  The tree is rebuilt the way torch's
 * set_element() does it: an int step makes its parent a list, a str step
 * a dict.  A list whose positions are not exactly 0..n-1 (torch would pad
 * it with None) is shown as a dict with int keys.  A key without a path
 * (a custom planner) stays flat in the root.
 */
#include "ckpt_dcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* (parent, key) -> child, for the containers the paths pass through */
struct slot {
	uint32_t h, parent;	/* parent: node id + 1; 0: empty */
	const struct pkl_value *key;
	struct ckpt_node *node;
};

struct edge {
	struct ckpt_node *parent, *kid;
	uint32_t seq;
};

struct nest {
	struct ckpt *c;
	struct diag *d;
	struct slot *v;
	uint32_t cap, n;
	struct edge *e;
	uint32_t ne, ecap;
};

static uint32_t key_hash(uint32_t parent, const struct pkl_value *k)
{
	uint32_t h = 2166136261u ^ parent;

	if (k->kind == PKL_INT) {
		h = (h ^ (uint32_t)k->u.i ^ 0x9e3779b9u) * 16777619u;
	} else {
		for (size_t i = 0; i < k->u.s.n; i++)
			h = (h ^ (unsigned char)k->u.s.p[i]) * 16777619u;
	}
	h ^= h >> 16;
	return h * 0x85ebca6bu;
}

static bool key_eq(const struct pkl_value *a, const struct pkl_value *b)
{
	if ((a->kind == PKL_INT) != (b->kind == PKL_INT))
		return false;
	if (a->kind == PKL_INT)
		return a->u.i == b->u.i;
	return a->u.s.n == b->u.s.n && !memcmp(a->u.s.p, b->u.s.p, a->u.s.n);
}

static struct slot *find(struct nest *t, uint32_t parent,
			 const struct pkl_value *k)
{
	uint32_t h = key_hash(parent, k);

	for (uint32_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct slot *s = &t->v[i];

		if (!s->parent || (s->h == h && s->parent == parent &&
				   key_eq(s->key, k)))
			return s;
	}
}

static int grow(struct nest *t)
{
	struct nest bigger = { .cap = t->cap ? 2 * t->cap : 256 };

	bigger.v = calloc(bigger.cap, sizeof(*bigger.v));
	if (!bigger.v)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->v[i].parent)
			*find(&bigger, t->v[i].parent, t->v[i].key) = t->v[i];
	free(t->v);
	t->v = bigger.v;
	t->cap = bigger.cap;
	return 0;
}

/* @kid under @parent as @key, remembered for later lookups. */
static int link(struct nest *t, struct ckpt_node *parent,
		const struct pkl_value *key, struct ckpt_node *kid)
{
	struct slot *s;

	if (2 * (t->n + 1) > t->cap && grow(t))
		return diag_nomem(t->d);
	s = find(t, parent->id + 1, key);
	*s = (struct slot){ key_hash(parent->id + 1, key), parent->id + 1, key,
			    kid };
	t->n++;
	if (t->ne == t->ecap) {
		uint32_t cap = t->ecap ? 2 * t->ecap : 256;
		struct edge *e = realloc(t->e, cap * sizeof(*e));

		if (!e)
			return diag_nomem(t->d);
		t->e = e;
		t->ecap = cap;
	}
	t->e[t->ne] = (struct edge){ parent, kid, t->ne };
	t->ne++;
	kid->key = key;
	return 0;
}

/* Put leaf @lv at the end of its path, making the containers on the way. */
static int place(struct nest *t, const struct dcp_leaf *lv)
{
	const struct pkl_value *path = lv->path;
	size_t n = path ? pkl_len(path) : 1;
	struct ckpt_node *dir = t->c->root;
	const char *fqn = lv->key->u.s.p;

	if (n > DCP_MAX_PATH)
		return diag_corrupt(t->d, path->off, ".metadata: the "
				    "planner_data path of '%s' is %zu steps "
				    "deep (at most %d)", fqn, n, DCP_MAX_PATH);
	for (size_t j = 0; j < n; j++) {
		const struct pkl_value *k = path ? pkl_item(path, j) : lv->key;
		struct slot *s;
		struct ckpt_node *sub;

		if (!k || (k->kind != PKL_INT && !as_str(k)) ||
		    (k->kind == PKL_INT && k->u.i < 0))
			return diag_corrupt(t->d, path->off, ".metadata: the "
					    "planner_data path of '%s' is not "
					    "made of str keys and list "
					    "positions", fqn);
		if (!j && k->kind == PKL_INT)
			return diag_corrupt(t->d, path->off, ".metadata: the "
					    "planner_data path of '%s' starts "
					    "with a list position", fqn);
		s = t->cap ? find(t, dir->id + 1, k) : NULL;
		if (j == n - 1) {
			if (s && s->parent)
				return diag_corrupt(t->d, k->off, ".metadata: "
						    "'%s' is saved twice, or "
						    "inside another value",
						    fqn);
			return link(t, dir, k, lv->node);
		}
		if (s && s->parent) {
			sub = s->node;
			/* only the containers made here take children */
			if (sub->val || sub->kind != CKPT_N_DIR)
				return diag_corrupt(t->d, path->off,
						    ".metadata: '%s' lies "
						    "inside another saved "
						    "value", fqn);
		} else {
			sub = ckpt_node_synth(t->c->b, CKPT_N_DIR, "dict");
			if (!sub)
				return diag_nomem(t->d);
			if (link(t, dir, k, sub))
				return t->d->err;
		}
		dir = sub;
	}
	return 0;
}

static int by_parent(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	if (x->parent->id != y->parent->id)
		return x->parent->id < y->parent->id ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static int by_index(const void *a, const void *b)
{
	const struct ckpt_node *x = *(struct ckpt_node *const *)a;
	const struct ckpt_node *y = *(struct ckpt_node *const *)b;

	return (x->key->u.i > y->key->u.i) - (x->key->u.i < y->key->u.i);
}

/* Fill @dir with its @n children (edges in save order). */
static int fill(struct nest *t, struct ckpt_node *dir, struct edge *e,
		uint32_t n)
{
	struct ckpt_node **kids = malloc((n + 1) * sizeof(*kids));
	bool ints = true, list;
	int rc = 0;

	if (!kids)
		return diag_nomem(t->d);
	for (uint32_t i = 0; i < n; i++) {
		kids[i] = e[i].kid;
		ints = ints && kids[i]->key->kind == PKL_INT;
	}
	list = ints && dir != t->c->root;
	if (list) {
		qsort(kids, n, sizeof(*kids), by_index);
		for (uint32_t i = 0; i < n && list; i++)
			list = kids[i]->key->u.i == (int64_t)i;
		if (!list)	/* back to save order */
			for (uint32_t i = 0; i < n; i++)
				kids[i] = e[i].kid;
	}
	if (list) {
		dir->kind = CKPT_N_SEQ;
		dir->type = "list";
	}
	for (uint32_t i = 0; i < n && !rc; i++) {
		kids[i]->step = list ? CKPT_S_INDEX : CKPT_S_KEY;
		kids[i]->name = ckpt_key_name(t->c, kids[i]->key);
		if (!kids[i]->name)
			rc = diag_nomem(t->d);
	}
	if (!rc)
		rc = ckpt_dir_fill(t->c->b, dir, kids, n);
	free(kids);
	return rc;
}

int ckpt_dcp_nest(struct ckpt *c, struct dcp_leaf *lv, uint32_t n,
		  struct diag *d)
{
	struct nest t = { .c = c, .d = d };
	int rc = 0;

	c->root = ckpt_node_synth(c->b, CKPT_N_DIR, "dict");
	if (!c->root || !(c->root->name = arena_strndup(&c->arena, "", 0)))
		return diag_nomem(d);
	for (uint32_t i = 0; i < n && !rc; i++)
		/* a lenient open leaves broken values out */
		if (lv[i].node)
			rc = place(&t, &lv[i]);
	if (!rc && t.ne)
		qsort(t.e, t.ne, sizeof(*t.e), by_parent);
	for (uint32_t i = 0, j; i < t.ne && !rc; i = j) {
		for (j = i; j < t.ne && t.e[j].parent == t.e[i].parent; j++)
			;
		rc = fill(&t, t.e[i].parent, t.e + i, j - i);
	}
	free(t.v);
	free(t.e);
	return rc;
}
