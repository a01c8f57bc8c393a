/*
 * ckpt_dcp_index.c - the parts of a DCP .metadata that say where bytes
 * are: storage_data, each MetadataIndex(fqn, offset) -> _StorageInfo(
 * relative_path, offset, length[, transform_descriptors]) made one item
 * of a data file, and the data files themselves, opened once each, by
 * name inside the directory only (no '/', no symbolic link).  Also the
 * small readers of torch's pickled dataclasses the rest of the DCP reader
 * uses, and the table that finds an item by (fqn, chunk offsets).
 */
#include "ckpt_dcp.h"
#include "source/source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the storage_data walk needs. */
struct ix {
	struct ckpt *c;
	struct ckpt_dcp *p;
	struct diag *d;
	struct dcp_tab *items;
};

/* A NEWOBJ/REDUCE of class @module.@name (either module when @alt). */
bool dcp_is_obj(const struct pkl_value *v, const char *module,
		   const char *alt, const char *name)
{
	const struct pkl_value *f;

	if (!v || v->kind != PKL_CALL)
		return false;
	f = v->u.call.func;
	return f && f->kind == PKL_GLOBAL && !strcmp(f->u.global.name, name) &&
	       (!strcmp(f->u.global.module, module) ||
		(alt && !strcmp(f->u.global.module, alt)));
}

/* Entry @key of dict @v (a dataclass's state), or NULL. */
const struct pkl_value *dcp_field(const struct pkl_value *v,
				     const char *key)
{
	if (!v || v->kind != PKL_DICT)
		return NULL;
	for (size_t i = 0; i < pkl_len(v); i++) {
		const char *k = as_str(v->u.items.v[2 * i]);

		if (k && !strcmp(k, key))
			return v->u.items.v[2 * i + 1];
	}
	return NULL;
}

const struct pkl_value *dcp_state(const struct pkl_value *v)
{
	return v && v->kind == PKL_CALL ? pkl_call_x(v)->state : NULL;
}

/* torch.Size((a, b)) or a plain tuple/list of ints >= 0 into @out. */
bool dcp_dims(const struct pkl_value *v, int64_t *out, int *n)
{
	if (v && v->kind == PKL_CALL && pkl_is_global(v->u.call.func, "torch",
						      "Size"))
		v = arg(pkl_call_args(v), 0);
	if (!v || (v->kind != PKL_TUPLE && v->kind != PKL_LIST) ||
	    pkl_len(v) > CKPT_MAX_DIMS)
		return false;
	*n = (int)pkl_len(v);
	for (int i = 0; i < *n; i++)
		if (!as_int(v->u.items.v[i], &out[i]) || out[i] < 0)
			return false;
	return true;
}

/* ---- lookups: items by (fqn, offsets), planner paths by fqn ---- */

static uint32_t hash_of(const char *s, size_t n, const int64_t *dv, int nd)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	for (int i = 0; dv && i < nd; i++)
		h = (h ^ (uint32_t)(dv[i] * 2654435761u)) * 16777619u;
	h ^= h >> 15;
	return h * 0x2c1b3c6du;
}

static struct dcp_ent *tab_slot(const struct dcp_tab *t, const char *s,
				size_t n,
			    const int64_t *dv, int nd, uint32_t h)
{
	for (uint32_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct dcp_ent *e = &t->v[i];

		if (!e->val || (e->h == h && e->n == n && !memcmp(e->s, s, n) &&
				!e->dims == !dv && (!dv || (e->nd == nd &&
				!memcmp(e->dims, dv, nd * sizeof(*dv))))))
			return e;
	}
}

/* Add (@s, @dv) -> @val; 1 if the key was there already, 0, -ENOMEM. */
int dcp_tab_put(struct dcp_tab *t, const char *s, size_t n, const int64_t *dv,
		   int nd, uint32_t val)
{
	uint32_t h = hash_of(s, n, dv, nd);
	struct dcp_ent *e;

	if (2 * (t->n + 1) > t->cap) {
		struct dcp_tab bigger = { .cap = t->cap ? 2 * t->cap : 256 };

		bigger.v = calloc(bigger.cap, sizeof(*bigger.v));
		if (!bigger.v)
			return -ENOMEM;
		for (uint32_t i = 0; i < t->cap; i++)
			if (t->v[i].val)
				*tab_slot(&bigger, t->v[i].s, t->v[i].n,
					  t->v[i].dims, t->v[i].nd,
					  t->v[i].h) = t->v[i];
		free(t->v);
		bigger.n = t->n;
		*t = bigger;
	}
	e = tab_slot(t, s, n, dv, nd, h);
	if (e->val)
		return 1;
	*e = (struct dcp_ent){ h, val + 1, s, n, dv, nd };
	t->n++;
	return 0;
}

/* The value of (@s, @dv), or UINT32_MAX. */
uint32_t dcp_tab_get(const struct dcp_tab *t, const char *s, size_t n,
			const int64_t *dv, int nd)
{
	struct dcp_ent *e;

	if (!t->cap)
		return UINT32_MAX;
	e = tab_slot(t, s, n, dv, nd, hash_of(s, n, dv, nd));
	return e->val ? e->val - 1 : UINT32_MAX;
}


static uint32_t file_of(struct ix *o, const char *name, uint64_t at)
{
	struct ckpt_dcp *p = o->p;
	const struct src_member *m;
	struct dcp_file *f;
	size_t len = strlen(name);
	struct diag ds;
	char *path;
	int k;

	for (uint32_t i = p->nfiles; i-- > 0;)	/* the last one, mostly */
		if (!strcmp(p->files[i].name, name))
			return i;
	/* a name, nothing else: no way out of the directory */
	if (!len || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, "..")) {
		diag_corrupt(o->d, at, ".metadata: relative_path '%.64s' is "
			     "not a file name in the directory", name);
		return UINT32_MAX;
	}
	if (p->nfiles == p->files_cap) {
		uint32_t cap = p->files_cap ? 2 * p->files_cap : 8;

		f = realloc(p->files, cap * sizeof(*f));
		if (!f)
			goto nomem;
		p->files = f;
		p->files_cap = cap;
	}
	f = &p->files[p->nfiles];
	memset(f, 0, sizeof(*f));
	f->name = name;
	f->fd = -1;
	f->member = UINT32_MAX;
	path = arena_alloc(&o->c->arena, strlen(p->dir) + len + 2);
	if (!path)
		goto nomem;
	sprintf(path, "%s/%s", p->dir, name);
	f->path = path;
	/* through the door: a regular file (never a blocking open), its
	   identity pinned for every read, its owner and mode kept */
	diag_init(&ds, NULL);
	k = src_add(o->c->src, name, len, at, 0, &ds);
	if (k < 0) {
		f->err = k;
		p->nfiles++;
		if (ckpt_dcp_problem(o->c, o->d, "file", name, DIAG_NO_OFFSET,
				     f->err, "%s (named by .metadata)",
				     ds.msg))
			return UINT32_MAX;
		return p->nfiles - 1;
	}
	m = src_at(o->c->src, (uint32_t)k);
	if (src_alias(o->c->src, (uint32_t)k) != (uint32_t)k) {
		diag_corrupt(o->d, at, ".metadata: data files '%s' and '%s' "
			     "are one file (a link)",
			     src_at(o->c->src, src_alias(o->c->src,
							 (uint32_t)k))->name,
			     name);
		return UINT32_MAX;
	}
	f->member = (uint32_t)k;
	f->fd = m->fd;		/* the source's */
	f->size = m->size;
	return p->nfiles++;
nomem:
	diag_nomem(o->d);
	return UINT32_MAX;
}

/* One storage_data entry: MetadataIndex -> _StorageInfo. */
static int item(struct ix *o, const struct pkl_value *k,
		const struct pkl_value *v)
{
	struct ckpt_dcp *p = o->p;
	const struct pkl_value *ks = dcp_state(k), *vs = dcp_state(v);
	const struct pkl_value *off, *td;
	const char *fqn = as_str(dcp_field(ks, "fqn")), *rel;
	int64_t io, il, dv[CKPT_MAX_DIMS];
	struct dcp_item *it;
	int64_t *keep = NULL;
	int nd = 0, rc;
	uint32_t fi;

	if (!dcp_is_obj(k, DCP_M_META, NULL, "MetadataIndex") || !fqn ||
	    !dcp_is_obj(v, DCP_M_FS, NULL, "_StorageInfo"))
		return diag_corrupt(o->d, k->off, ".metadata: storage_data "
				    "entry is not MetadataIndex -> "
				    "_StorageInfo");
	off = dcp_field(ks, "offset");
	if (off && off->kind != PKL_NONE && !dcp_dims(off, dv, &nd))
		return diag_corrupt(o->d, off->off, ".metadata: item of '%s' "
				    "has a bad offset", fqn);
	rel = as_str(dcp_field(vs, "relative_path"));
	if (!rel || !as_int(dcp_field(vs, "offset"), &io) || io < 0 ||
	    !as_int(dcp_field(vs, "length"), &il) || il < 0)
		return diag_corrupt(o->d, v->off, ".metadata: item of '%s' "
				    "lacks relative_path, offset or length",
				    fqn);
	td = dcp_field(vs, "transform_descriptors");
	if (td && td->kind != PKL_NONE && pkl_len(td)) {
		const char *t0 = as_str(pkl_item(td, 0));

		return diag_unsupported(o->d, td->off, ".metadata: item of "
					"'%s' is stored through transform "
					"'%.32s' (zstd and other DCP "
					"extensions are not supported)", fqn,
					t0 ? t0 : "?");
	}
	fi = file_of(o, rel, v->off);
	if (fi == UINT32_MAX)
		return o->d->err;
	if (off && off->kind != PKL_NONE) {
		keep = arena_alloc(&o->c->arena, (nd + 1) * sizeof(*keep));
		if (!keep)
			return diag_nomem(o->d);
		memcpy(keep, dv, nd * sizeof(*dv));
	}
	if (p->nitems == p->items_cap) {
		uint32_t cap = p->items_cap ? 2 * p->items_cap : 64;

		it = realloc(p->items, cap * sizeof(*it));
		if (!it)
			return diag_nomem(o->d);
		p->items = it;
		p->items_cap = cap;
	}
	it = &p->items[p->nitems];
	*it = (struct dcp_item){ .file = fi, .fqn = fqn, .off = io,
				 .len = il, .meta_off = v->off };
	rc = dcp_tab_put(o->items, fqn, strlen(fqn), keep, nd, p->nitems);
	if (rc < 0)
		return diag_nomem(o->d);
	if (rc)
		return diag_corrupt(o->d, k->off, ".metadata: two items for "
				    "'%s' at the same offset", fqn);
	p->nitems++;
	if (p->files[fi].fd >= 0 && (it->off > p->files[fi].size ||
				     it->len > p->files[fi].size - it->off))
		return ckpt_dcp_problem(o->c, o->d, "item", rel,
					it->off, -EILSEQ, "%s: item of '%s' "
					"(%llu bytes at %llu) runs past the "
					"end of the file (%llu bytes)", rel,
					fqn, (unsigned long long)it->len,
					(unsigned long long)it->off,
					(unsigned long long)
					p->files[fi].size);
	return 0;
}

int ckpt_dcp_items(struct ckpt *c, const struct pkl_value *sd,
		   struct dcp_tab *tab, struct diag *d)
{
	struct ix ix = { c, c->dcp, d, tab }, *o = &ix;
	int rc = 0;

	if (!sd || sd->kind != PKL_DICT)
		return diag_corrupt(o->d, sd ? sd->off : 0, ".metadata: "
				    "storage_data is not a dict (a storage "
				    "writer other than FileSystemWriter?)");
	for (size_t i = 0; i < pkl_len(sd) && !rc; i++)
		rc = item(o, sd->u.items.v[2 * i], sd->u.items.v[2 * i + 1]);
	return rc;
}

int dcp_in_file(struct diag *d, const char *name, int rc)
{
	char msg[sizeof(d->msg) + 64];

	if (rc && diag_failed(d) && strncmp(d->msg, name, strlen(name))) {
		snprintf(msg, sizeof(msg), "%.60s: %s", name, d->msg);
		memcpy(d->msg, msg, sizeof(d->msg) - 1);
		d->msg[sizeof(d->msg) - 1] = 0;
	}
	return rc;
}
