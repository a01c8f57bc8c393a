/*
 * ckpt_dir.c - a directory's children: kept in slots in container order
 * (listings, readdir offsets), found by name through an open-addressing
 * index of uint32 slot positions (lookups; a key path from the root:
 * ckpt_node_by_path()), and changed by edits (a
 * removed child leaves its slot empty; a new one is appended; see
 * docs/design.md, "Editing and write-back").  Only directories own a
 * struct ckpt_dir; every other node points at the empty, read-only
 * ckpt_no_dir.  Also the root of a flat format (a dict of its tensors
 * by name: safetensors, GGUF), ckpt_flat_root().
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct ckpt_dir ckpt_no_dir;
const struct ckpt_nedit ckpt_no_edit;

int ckpt_node_parts(struct ckpt *c, struct ckpt_node *n, int kind)
{
	/* const in memory: what writes them faults (see ckpt.h) */
	n->ed = (struct ckpt_nedit *)(uintptr_t)&ckpt_no_edit;
	n->dir = (struct ckpt_dir *)(uintptr_t)&ckpt_no_dir;
	if (kind == CKPT_N_DIR || kind == CKPT_N_SEQ)
		n->dir = arena_alloc(&c->arena, sizeof(*n->dir));
	return n->dir ? 0 : -ENOMEM;
}

struct ckpt_nedit *ckpt_node_ed(struct ckpt *c, struct ckpt_node *n)
{
	struct ckpt_nedit *e;

	if (n->ed != &ckpt_no_edit)
		return n->ed;
	e = arena_alloc(&c->arena, sizeof(*e));	/* zeroed */
	if (e)
		n->ed = e;
	return e;
}

/*
 * Until a node first moves, where it was at open is where it is: its
 * parent and name (every node placed at open went through
 * ckpt_dir_index()).  A fresh node has no home, and keeps none.
 */
int ckpt_node_keep_home(struct ckpt *c, struct ckpt_node *n)
{
	struct ckpt_nedit *e;

	if (n->ed->moved || n->fresh)
		return 0;
	e = ckpt_node_ed(c, n);
	if (!e)
		return -ENOMEM;
	/* not moved yet: the implicit home, by the readers' own rule */
	e->home = ckpt_node_home(n);
	e->home_name = ckpt_node_home_name(n);
	e->moved = true;
	return 0;
}

/*
 * FNV-1a of a name, then murmur3's fmix32: FNV's low bits cluster for
 * names like "0".."99999", and the tables mask the low bits.
 */
uint32_t ckpt_name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	return h ^ (h >> 16);
}

/*
 * A slot of @d's name index: 0 (empty), or the child's position in kids[]
 * + 1 in the low SLOT_POS_BITS and the top bits of its name's hash above
 * them (4 bytes a slot where a pointer took 8: a directory of 100,000
 * tensors has 262,144 slots).  The tag settles 127 of 128 mismatches
 * without reading the child: a probe otherwise costs three cache misses
 * (kids[], the node, its name).  A position must stay below SLOT_POS_MAX:
 * CKPT_MAX_NODES keeps an open within it, ckpt_dir_insert() the edits.
 */
#define SLOT_POS_BITS	25
#define SLOT_POS_MAX	((1u << SLOT_POS_BITS) - 1)
#define SLOT_TAG	(~SLOT_POS_MAX)
_Static_assert(CKPT_MAX_NODES <= SLOT_POS_MAX + 1, "slot positions");

static inline uint32_t slot_pos(uint32_t v)
{
	return (v & SLOT_POS_MAX) - 1;
}

/* The slot for @name (its hash in *@h): its child's, or the empty one
   where it would go. */
static uint32_t *slot(const struct ckpt_dir *d, const char *name,
		      uint32_t *h)
{
	uint32_t i, v;

	*h = ckpt_name_hash(name);
	for (i = *h & d->hash_mask; (v = d->hash[i]);
	     i = (i + 1) & d->hash_mask)
		if (!((v ^ *h) & SLOT_TAG) &&
		    !strcmp(ckpt_slot_name(d->kids[slot_pos(v)]), name))
			break;
	return &d->hash[i];
}

/* Index @d's child at @pos under @name (which no child of @d has). */
static void slot_set(struct ckpt_dir *d, const char *name, uint32_t pos)
{
	uint32_t h, *s = slot(d, name, &h);

	*s = (h & SLOT_TAG) | (pos + 1);
}

struct ckpt_node *ckpt_node_child(const struct ckpt_node *dir,
				  const char *name)
{
	uint32_t h, v = dir->dir->hash ? *slot(dir->dir, name, &h) : 0;

	return v ? dir->dir->kids[slot_pos(v)] : NULL;
}

struct ckpt_node *ckpt_node_by_path(const struct ckpt *c, const char *path)
{
	struct ckpt_node *n = c->root;
	char *copy = strdup(path), *save = NULL, *part;

	if (!copy)
		return NULL;
	for (part = strtok_r(copy, "/", &save); part && n;
	     part = strtok_r(NULL, "/", &save)) {
		if (!strcmp(part, "."))
			continue;
		while (n->kind == CKPT_N_LINK && n->target)
			n = n->target;
		n = n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ ?
		    ckpt_node_child(n, part) : NULL;
	}
	free(copy);
	while (n && n->kind == CKPT_N_LINK && n->target)
		n = n->target;
	return n;
}

/*
 * Give @dir its children @kids[0..@nkids), their order and a name index.
 * Children come in container order, so when two names collide the earlier
 * sibling keeps its name and the later one gets "%#<position>" (unique:
 * see ckpt_names.c).
 */
int ckpt_dir_index(struct ckpt *c, struct ckpt_node *dir,
		   struct ckpt_node *const *kids, uint32_t nkids)
{
	struct ckpt_node **k = NULL;

	if (nkids) {
		k = arena_alloc(&c->arena, nkids * sizeof(*k));
		if (!k)
			return -ENOMEM;
		memcpy(k, kids, nkids * sizeof(*k));
	}
	return ckpt_dir_adopt(c, dir, k, nkids, nkids);
}

int ckpt_dir_adopt(struct ckpt *c, struct ckpt_node *dir,
		   struct ckpt_node **kids, uint32_t nkids, uint32_t cap)
{
	struct ckpt_dir *d = dir->dir;
	uint32_t slots = 8;

	d->nkids = d->norig = d->nlive = nkids;
	d->kids = kids;
	d->kcap = cap;
	if (!nkids)
		return 0;
	while (slots < 2 * nkids)
		slots *= 2;
	d->hash = arena_alloc(&c->arena, slots * sizeof(*d->hash));
	if (!d->hash)
		return -ENOMEM;
	d->hash_mask = slots - 1;
	for (uint32_t i = 0; i < nkids; i++) {
		struct ckpt_node *n = d->kids[i];
		uint32_t h, *s = slot(d, ckpt_slot_name(n), &h);

		if (*s) {
			size_t len = strlen(ckpt_slot_name(n)) + 16;
			char *name = arena_alloc(&c->arena, len);

			/* a row's name is its key: renamed, it is a node */
			if (!name || ckpt_row_materialize(c, n, NULL))
				return -ENOMEM;
			if (ckpt_is_row(n))
				n = c->nodes[ckpt_slot_id(n)];
			snprintf(name, len, "%s%%#%u", n->name, n->index);
			n->name = name;
			s = slot(d, name, &h);
		}
		*s = (h & SLOT_TAG) | (i + 1);
	}
	return 0;
}

/* ---- edits: children come and go (ckpt_edit.c) ---- */

/* A bigger name index for @dir, in the arena; -ENOMEM. */
static int hash_grow(struct ckpt *c, struct ckpt_node *dir)
{
	struct ckpt_dir *d = dir->dir;
	uint32_t cap = d->hash ? 2 * (d->hash_mask + 1) : 8;
	uint32_t *h = arena_alloc(&c->arena, cap * sizeof(*h));

	if (!h)
		return -ENOMEM;
	d->hash = h;	/* zeroed: empty */
	d->hash_mask = cap - 1;
	for (uint32_t i = 0; i < d->nkids; i++)
		if (d->kids[i])
			slot_set(d, ckpt_slot_name(d->kids[i]), i);
	return 0;
}

/* Take @n out of @dir's name index (backward-shift deletion). */
static void hash_del(struct ckpt_node *dir, const struct ckpt_node *n)
{
	struct ckpt_dir *d = dir->dir;
	uint32_t m = d->hash_mask, i = ckpt_name_hash(n->name) & m, j;

	while (slot_pos(d->hash[i]) != n->index)
		i = (i + 1) & m;
	for (j = i;;) {
		const struct ckpt_node *kj;
		uint32_t k;

		j = (j + 1) & m;
		if (!d->hash[j])
			break;
		kj = d->kids[slot_pos(d->hash[j])];
		k = ckpt_name_hash(ckpt_slot_name(kj)) & m;
		/* move it back unless its home slot lies in (i, j] */
		if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
			d->hash[i] = d->hash[j];
			i = j;
		}
	}
	d->hash[i] = 0;
}

int ckpt_dir_insert(struct ckpt *c, struct ckpt_node *dir,
		    struct ckpt_node *n, char *name)
{
	struct ckpt_dir *d = dir->dir;

	if (ckpt_node_keep_home(c, n))
		return -ENOMEM;
	if (d->nkids == d->kcap) {
		uint32_t cap = d->kcap ? 2 * d->kcap : 8;
		struct ckpt_node **k;

		if (d->nkids >= SLOT_POS_MAX)
			return -ENOMEM;	/* positions must fit a slot */
		if (cap > SLOT_POS_MAX)
			cap = SLOT_POS_MAX;
		k = arena_alloc(&c->arena, (size_t)cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		if (d->nkids)
			memcpy(k, d->kids, d->nkids * sizeof(*k));
		d->kids = k;
		d->kcap = cap;
	}
	if ((!d->hash || 2 * (d->nlive + 1) > d->hash_mask + 1) &&
	    hash_grow(c, dir))
		return -ENOMEM;
	n->name = name;
	n->parent = dir;
	n->index = d->nkids;
	d->kids[d->nkids++] = n;
	d->nlive++;
	slot_set(d, name, n->index);
	return 0;
}

void ckpt_dir_remove(struct ckpt_node *dir, struct ckpt_node *n)
{
	hash_del(dir, n);
	dir->dir->kids[n->index] = NULL;
	dir->dir->nlive--;
}

int ckpt_dir_restore(struct ckpt *c, struct ckpt_node *dir,
		     struct ckpt_node *n)
{
	struct ckpt_dir *d = dir->dir;

	if (2 * (d->nlive + 1) > d->hash_mask + 1 && hash_grow(c, dir))
		return -ENOMEM;
	d->kids[n->index] = n;
	d->nlive++;
	slot_set(d, n->name, n->index);
	return 0;
}

int ckpt_dir_rename(struct ckpt *c, struct ckpt_node *dir,
		    struct ckpt_node *n, char *name)
{
	if (ckpt_node_keep_home(c, n))
		return -ENOMEM;
	hash_del(dir, n);
	n->name = name;
	slot_set(dir->dir, name, n->index);
	return 0;
}

int ckpt_dir_swap(struct ckpt *c, struct ckpt_node *dir,
		  struct ckpt_node *old, struct ckpt_node *n)
{
	if (ckpt_node_keep_home(c, n))
		return -ENOMEM;
	hash_del(dir, old);
	dir->dir->kids[old->index] = n;
	n->index = old->index;
	n->parent = dir;
	n->name = old->name;
	slot_set(dir->dir, n->name, n->index);
	return 0;
}

/* (ckpt_int_build.h) */
int ckpt_flat_root(struct ckpt *c, const char *(*fn)(void *arg, uint32_t i,
						   size_t *len),
		   void *arg, uint32_t n, struct diag *d)
{
	struct ckpt_node **kids = calloc(n + 1u, sizeof(*kids));
	int rc = 0;

	c->root = ckpt_node_synth(c->b, CKPT_N_DIR, "dict");
	if (!kids || !c->root)
		rc = diag_nomem(d);
	for (uint32_t i = 0; i < n && !rc; i++) {
		size_t len;
		const char *name = fn(arg, i, &len);
		struct ckpt_node *k = ckpt_node_synth(c->b, CKPT_N_TENSOR,
						      "Tensor");

		if (!k) {
			rc = diag_nomem(d);
			break;
		}
		k->tensor = c->tensors[i];	/* one per name, in order */
		k->tensor->shown = true;
		c->nshown++;
		k->key = ckpt_str_key(c, name, len);
		k->name = k->key ? ckpt_key_name(c, k->key) : NULL;
		k->step = CKPT_S_KEY;
		if (!k->name)
			rc = diag_nomem(d);
		kids[i] = k;
	}
	if (!rc)
		rc = ckpt_dir_fill(c->b, c->root, kids, n);
	free(kids);
	return rc;
}

