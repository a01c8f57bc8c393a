/*
 * ckpt_storage.c - storages from persistent ids (torch-format.md 4.2 and,
 * for the legacy 6-tuple, 7): ('storage', <class>, key, location, numel
 * [, view]).  Each key is one storage, whatever number of tensors view it;
 * its dtype and numel must agree at every reference.  torch's keys
 * "0".."N-1" are found by position (at_home()), any other hashed.  A
 * second pickle of one archive (TorchScript's constants.pkl) prefixes its
 * keys (b->key_prefix); formats without persistent-id tuples (tar era,
 * model.json) add their storages directly (ckpt_storage_add).  A model of
 * several pickles (a sharded folder, a DCP directory) also records which
 * nodes each pickle built and how its keys were prefixed
 * (ckpt_vdoc_add()).
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* @key as a number if it is canonical decimal below 2^31 ("0", "17"). */
static long dense_index(const char *key)
{
	long k = 0;
	int n = 0;

	if (key[0] == '0')
		return key[1] ? -1 : 0;
	for (; key[n] >= '0' && key[n] <= '9' && n < 10; n++)
		k = k * 10 + (key[n] - '0');
	return n && !key[n] && k < (1L << 31) ? k : -1;
}

static struct ckpt_storage **hash_slot(struct ckpt_build *b, const char *key)
{
	uint32_t i = ckpt_name_hash(key) & (b->scap - 1);

	while (b->stab[i] && strcmp(b->stab[i]->key, key))
		i = (i + 1) & (b->scap - 1);
	return &b->stab[i];
}

/*
 * The storage keyed @key that sits at its home: torch numbers storages
 * "0", "1", ... in the order the pickle first names them, which is the
 * order they are made in, so storage k is c->storages[k] and needs no
 * table at all (a dense array here cost 8 to 16 bytes a tensor at the
 * open's peak).  A storage is at home when its key is the canonical
 * decimal of its index when it is made; indexes never change after.
 */
static struct ckpt_storage *at_home(struct ckpt_build *b, const char *key)
{
	long k = dense_index(key);
	struct ckpt_storage *s;
	const char *sk;

	if (k < 0 || (uint64_t)k >= b->c->nstorages)
		return NULL;
	s = b->c->storages[k];
	sk = ckpt_is_row(s) ? ckpt_row_key(ckpt_row_of(s)) : s->key;
	return sk && !strcmp(sk, key) ? s : NULL;
}

long ckpt_storage_dense(const char *key)
{
	return dense_index(key);
}

struct ckpt_storage *ckpt_storage_find(struct ckpt_build *b, const char *key)
{
	struct ckpt_storage *s = at_home(b, key);

	return s ? s : *hash_slot(b, key);
}

static int storage_grow(struct ckpt_build *b)
{
	struct ckpt_storage **old = b->stab;
	uint32_t ocap = b->scap;

	b->scap = ocap ? ocap * 2 : 64;
	b->stab = calloc(b->scap, sizeof(*b->stab));
	if (!b->stab) {
		b->stab = old;
		b->scap = ocap;
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < ocap; i++)
		if (old[i])
			*hash_slot(b, old[i]->key) = old[i];
	free(old);
	return 0;
}

/*
 * Index @s, not yet found by its key, and already in c->storages: nothing
 * to do at its home (at_home()), else into the hash table.
 */
static int index_storage(struct ckpt_build *b, struct ckpt_storage *s)
{
	if (dense_index(s->key) == (long)s->index)
		return 0;
	if ((b->nhashed + 1) * 2 > b->scap && storage_grow(b))
		return -ENOMEM;
	*hash_slot(b, s->key) = s;
	b->nhashed++;
	return 0;
}

/* A new storage for @key, which no storage has yet. */
static int storage_new(struct ckpt_build *b, const char *key,
		       const struct ckpt_dtype *dt, bool untyped,
		       const char *loc, uint64_t numel, uint64_t off,
		       struct ckpt_storage **out)
{
	struct ckpt *c = b->c;
	struct ckpt_storage *s;
	uint64_t nbytes;

	if (__builtin_mul_overflow(numel, (uint64_t)dt->size, &nbytes) ||
	    nbytes > (UINT64_C(1) << 62))
		return diag_corrupt(b->d, off, "storage '%s' claims %llu "
				    "elements", key, (unsigned long long)numel);
	s = arena_alloc(&c->arena, sizeof(*s));
	if (!s || ckpt_push((void ***)&c->storages, &c->nstorages,
			    &b->storages_cap, s))
		return diag_nomem(b->d);
	s->key = key;		/* borrowed from the pickle, or the arena */
	s->location = loc;
	s->dtype = dt;
	s->untyped = untyped;
	s->numel = numel;
	s->nbytes = nbytes;
	s->index = c->nstorages - 1;
	s->pkl_off = off;
	s->fd = c->fd;
	if (index_storage(b, s))
		return diag_nomem(b->d);
	*out = s;
	return 0;
}

int ckpt_storage_ref(struct ckpt_build *b, const struct pkl_value *pid,
		     const struct ckpt_dtype **dtp,
		     struct ckpt_storage **out, uint64_t *view_off)
{
	const struct pkl_value *t = pkl_call_args(pid), *cls, *view;
	const struct ckpt_dtype *dt;
	const char *tag, *key, *loc;
	char keybuf[32];
	int64_t numel, key_int;
	bool untyped = false;
	struct ckpt_storage *s;
	uint64_t off = pid->off;
	int rc;

	tag = as_str(arg(t, 0));
	if (!tag || strcmp(tag, "storage"))
		return diag_corrupt(b->d, off, "persistent id is not a "
				    "('storage', ...) tuple");
	if (pkl_len(t) != 5 && pkl_len(t) != 6)
		return diag_corrupt(b->d, off, "storage persistent id has %zu "
				    "items, expected 5 or 6", pkl_len(t));
	cls = arg(t, 1);
	key = as_str(arg(t, 2));
	if (!key && as_int(arg(t, 2), &key_int)) {
		snprintf(keybuf, sizeof(keybuf), "%lld", (long long)key_int);
		key = arena_strndup(&b->c->arena, keybuf, strlen(keybuf));
		if (!key)
			return diag_nomem(b->d);
	}
	if (key && b->key_prefix) {
		size_t np = strlen(b->key_prefix), nk = strlen(key);
		char *k = arena_alloc(&b->c->arena, np + nk + 1);

		if (!k)
			return diag_nomem(b->d);
		memcpy(k, b->key_prefix, np);
		memcpy(k + np, key, nk + 1);
		key = k;
	}
	loc = as_str(arg(t, 3));
	if (!cls || cls->kind != PKL_GLOBAL || !key || !loc ||
	    !as_int(arg(t, 4), &numel) || numel < 0)
		return diag_corrupt(b->d, off, "malformed storage persistent id");
	if (!strcmp(cls->u.global.name, "UntypedStorage")) {
		dt = ckpt_dtype_bytes();
		untyped = true;
	} else if (!(dt = ckpt_dtype_by_storage(cls->u.global.name))) {
		return diag_unsupported(b->d, off, "unknown storage class %s.%s",
					cls->u.global.module,
					cls->u.global.name);
	}
	s = ckpt_storage_find(b, key);
	if (s && ckpt_is_row(s) && ckpt_row_storage(b->c, &s))
		return diag_nomem(b->d);	/* a second view of a row's */
	if (s) {
		/*
		 * torch checks dtypes only for storages with data
		 * (data_ptr() != 0): an empty one may be viewed as
		 * float32 by one tensor and int64 by another, and its
		 * references keep their own classes at write-back.
		 */
		if ((s->dtype != dt || s->untyped != untyped) &&
		    (s->numel || numel))
			return diag_corrupt(b->d, off, "storage '%s' used as "
					    "%s and as %s", key, s->dtype->name,
					    dt->name);
		if (s->numel != (uint64_t)numel)
			return diag_corrupt(b->d, off, "storage '%s' given "
					    "%llu and %lld elements", key,
					    (unsigned long long)s->numel,
					    (long long)numel);
	} else {
		rc = storage_new(b, key, dt, untyped, loc, numel, off, &s);
		if (rc)
			return rc;
	}
	*view_off = 0;
	view = arg(t, 5);
	if (view && view->kind != PKL_NONE) {
		/* legacy: (view_key, offset, size) inside the root storage */
		int64_t voff, vsize;

		if (!as_int(arg(view, 1), &voff) ||
		    !as_int(arg(view, 2), &vsize) || voff < 0 || vsize < 0 ||
		    (uint64_t)voff > s->numel ||
		    (uint64_t)vsize > s->numel - (uint64_t)voff)
			return diag_corrupt(b->d, off, "storage view outside "
					    "storage '%s'", key);
		*view_off = voff;
	}
	*dtp = dt;
	*out = s;
	return 0;
}


int ckpt_storage_add(struct ckpt_build *b, const char *key,
		     const struct ckpt_dtype *dt, const char *loc,
		     uint64_t numel, uint64_t off, struct ckpt_storage **out)
{
	char *k = arena_strndup(&b->c->arena, key, strlen(key));
	char *l = arena_strndup(&b->c->arena, loc, strlen(loc));

	if (!k || !l)
		return diag_nomem(b->d);
	if (ckpt_storage_find(b, k))
		return diag_corrupt(b->d, off, "storage '%s' defined twice", k);
	return storage_new(b, k, dt, false, l, numel, off, out);
}

int ckpt_storage_file(struct ckpt_build *b, struct ckpt_storage *s)
{
	return index_storage(b, s);
}

int ckpt_vdoc_add(struct ckpt *c, uint32_t node0, const char *prefix,
		  int format, struct diag *d)
{
	char *p = arena_strndup(&c->arena, prefix, strlen(prefix));

	if (c->nvdocs == c->vdocs_cap) {
		uint32_t cap = c->vdocs_cap ? 2 * c->vdocs_cap : 16;
		struct ckpt_vdoc *v = realloc(c->vdocs, cap * sizeof(*v));

		if (!v)
			return diag_nomem(d);
		c->vdocs = v;
		c->vdocs_cap = cap;
	}
	if (!p)
		return diag_nomem(d);
	c->vdocs[c->nvdocs++] = (struct ckpt_vdoc){ node0, p,
						     (uint8_t)format };
	return 0;
}

const struct ckpt_vdoc *ckpt_node_vdoc(const struct ckpt *c,
				       const struct ckpt_node *n)
{
	uint32_t lo = 0, hi = c->nvdocs;

	/* the last one whose node0 <= n->id */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (c->vdocs[mid].node0 <= n->id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &c->vdocs[lo - 1] : NULL;
}

int ckpt_storage_fits(const struct ckpt_storage *s,
		      const struct ptz_entry *e, struct diag *d)
{
	if (e->usize == s->nbytes)
		return 0;
	return diag_corrupt(d, e->header_off, "record %s has %llu bytes, but "
			    "storage '%s' is %llu x %s = %llu bytes", e->name,
			    (unsigned long long)e->usize, s->key,
			    (unsigned long long)s->numel, s->dtype->name,
			    (unsigned long long)s->nbytes);
}
