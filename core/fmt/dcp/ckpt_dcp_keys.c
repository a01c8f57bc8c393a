/*
 * ckpt_dcp_keys.c - the entries of state_dict_metadata, made the leaves
 * of the tree: a TensorStorageMetadata becomes one storage of its global
 * shape and dtype with its chunks (the union over the ranks' metadata
 * files when there are several), a BytesStorageMetadata its item's
 * torch.save pickle, built as a single file's would be; then
 * ckpt_dcp_nest() places them where planner_data says.
 */
#include "ckpt_dcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_PKL_MAX	(UINT64_C(1) << 26)	/* a value's data.pkl */

/* Where a key occurs: metadata file r's entry v (a list per key). */
struct occ {
	uint32_t r, next;		/* next: index + 1, 0: none */
	const struct pkl_value *v;
};

/* A value's item: its torch.save archive's pickle, built as a tree. */
static int value(struct dcp_open *o, uint32_t r, const char *fqn,
		 uint64_t at, struct ckpt_node **out)
{
	struct ckpt *c = o->c;
	struct ckpt_dcp *p = o->p;
	uint32_t k = dcp_tab_get(&o->items[r], fqn, strlen(fqn), NULL, 0);
	struct ptz_reader z = { 0 };
	struct pkl_doc *doc = NULL;
	struct ptz_entry *e;
	struct dcp_item *it;
	struct dcp_file *f;
	unsigned char *buf = NULL;
	char what[440];
	uint32_t s0 = c->nstorages;
	size_t len;
	int rc;

	if (k == UINT32_MAX)
		return diag_corrupt(o->d, at, ".metadata: value '%s' has no "
				    "item in storage_data", fqn);
	it = &p->items[k];
	it->used = true;
	f = &p->files[it->file];
	if (f->fd < 0 || it->off + it->len > f->size)
		return diag_corrupt(o->d, at, ".metadata: value '%s' is in an "
				    "item that cannot be read", fqn);
	/* the zip reader's offsets count from the item */
	rc = ptz_reader_open_at(&z, f->fd, f->path, it->off, it->len, o->d);
	e = rc ? NULL : ptz_find_rel(&z, "data.pkl");
	if (!rc && !e)
		rc = diag_corrupt(o->d, 0, "no data.pkl record in the item "
				  "of '%s'", fqn);
	if (!rc)
		rc = ptz_entry_read(&z, e, VALUE_PKL_MAX, &buf, &len, o->d);
	if (rc && o->d->off != DIAG_NO_OFFSET)
		o->d->off += it->off;
	/* DCP's planner torch.loads the item: the weights-only allowlist
	   applies, as in a file */
	snprintf(what, sizeof(what), "%.200s: data.pkl of the item of '%.200s'",
		 f->name, fqn);
	if (!rc) {
		rc = pkl_parse(buf, len, it->off + e->data_off, &doc, o->d);
		if (rc)
			ckpt_scan_failed(c, buf, len, it->off + e->data_off,
					 what, NULL, o->d);
		else if (ckpt_scan_doc(c, doc, what, NULL))
			rc = diag_nomem(o->d);
	}
	free(buf);
	if (!rc && ckpt_push((void ***)&p->docs, &p->ndocs, &p->docs_cap,
			     doc)) {
		pkl_doc_free(doc);
		rc = diag_nomem(o->d);
	}
	if (!rc) {
		char prefix[24];

		snprintf(prefix, sizeof(prefix), "v%u/", k);
		c->b->key_prefix = prefix;
		rc = diag_failed(o->d) ? o->d->err :
		     ckpt_vdoc_add(c, c->nnodes, prefix, CKPT_ZIP,
				   o->d);
		rc = rc ? rc : ckpt_build_doc(c, doc, out, o->d);
		c->b->key_prefix = NULL;
	}
	/* tensors inside a value: their storages are records of the item */
	for (uint32_t i = s0; i < c->nstorages && !rc; i++)
		rc = ckpt_dcp_value_storage(c, &z, k, c->storages[i], o->d);
	ptz_reader_release(&z);
	return dcp_in_file(o->d, f->name, rc);
}

/*
 * value(), but a lenient open notes a value it cannot read (a missing
 * file, a broken item) and leaves it out of the tree.
 */
static int leaf_value(struct dcp_open *o, uint32_t r, const char *fqn,
		      uint64_t at, struct ckpt_node **out)
{
	struct diag *d = o->d, mine;
	int rc;

	if (!o->p->lenient)
		return value(o, r, fqn, at, out);
	diag_init(&mine, d->path);
	o->d = &mine;
	rc = value(o, r, fqn, at, out);
	o->d = d;
	if (rc == -ENOMEM)
		return diag_nomem(d);
	if (rc)
		*out = NULL;
	return rc ? ckpt_dcp_problem(o->c, d, "item", NULL, mine.off, rc,
				     "%s", mine.msg) : 0;
}

/* Chunk @i of @v's list: its offsets and sizes; 0 or -EILSEQ. */
static int chunk_of(struct dcp_open *o, const char *fqn,
		    const struct pkl_value *ch, size_t i, int nd,
		    int64_t *off, int64_t *sz)
{
	const struct pkl_value *cv = pkl_item(ch, i), *cs = dcp_state(cv);
	int n1, n2;

	if (!dcp_is_obj(cv, DCP_M_META, NULL, "ChunkStorageMetadata") ||
	    !dcp_dims(dcp_field(cs, "offsets"), off, &n1) ||
	    !dcp_dims(dcp_field(cs, "sizes"), sz, &n2) ||
	    n1 != nd || n2 != nd)
		return diag_corrupt(o->d, cv ? cv->off : ch->off, ".metadata: "
				    "tensor '%s': chunk %zu is not a "
				    "ChunkStorageMetadata of %d dimensions",
				    fqn, i, nd);
	return 0;
}

/*
 * The shared chunk objects (pkl_shared(): reached by a memo reference) of
 * one list met so far.  A reference is 2 bytes of the file and a chunk
 * some 90 bytes of state, so a chunk listed twice is refused when it is
 * met, not after a list of ten million of them was made chunks.  torch
 * writes every chunk object once: then nothing is added.
 */
struct seen {
	const void **v;
	uint32_t cap, n;
};

static uint32_t seen_slot(const struct seen *s, const void *x)
{
	uint64_t h = (uint64_t)(uintptr_t)x * UINT64_C(0x9e3779b97f4a7c15);
	uint32_t i = (uint32_t)(h >> 32) & (s->cap - 1);

	while (s->v[i] && s->v[i] != x)
		i = (i + 1) & (s->cap - 1);
	return i;
}

/* Add @x: 1 if it was there already, 0, or -ENOMEM. */
static int seen_add(struct seen *s, const void *x)
{
	uint32_t i;

	if (2 * (s->n + 1) > s->cap) {
		struct seen b = { .cap = s->cap ? 2 * s->cap : 64, .n = s->n };

		b.v = calloc(b.cap, sizeof(*b.v));
		if (!b.v)
			return -ENOMEM;
		for (uint32_t k = 0; k < s->cap; k++)
			if (s->v[k])
				b.v[seen_slot(&b, s->v[k])] = s->v[k];
		free(s->v);
		*s = b;
	}
	i = seen_slot(s, x);
	if (s->v[i])
		return 1;
	s->v[i] = x;
	s->n++;
	return 0;
}

/* Chunk @i of @fqn at @off is one it listed before. */
static int twice(struct dcp_open *o, const char *fqn,
		 const struct pkl_value *cv, size_t i, const int64_t *off,
		 int nd)
{
	char x[256];

	return diag_corrupt(o->d, cv->off, ".metadata: tensor '%s': chunk "
			    "%zu at %s is listed twice", fqn, i,
			    dcp_tuple(x, sizeof(x), off, nd));
}

/* Is the box (@off, @sz) one of storage @first.. 's chunks already? */
static bool have_chunk(const struct ckpt_dcp *p, uint32_t first, int nd,
		       const int64_t *off, const int64_t *sz)
{
	size_t n = nd * sizeof(*off);

	for (uint32_t i = first; i < p->nchunks; i++)
		if (!memcmp(p->chunks[i].offsets, off, n) &&
		    !memcmp(p->chunks[i].sizes, sz, n))
			return true;
	return false;
}

/* TensorStorageMetadata @v of @fqn: its dtype and global shape into @t. */
static int tensor_head(struct dcp_open *o, const char *fqn,
		       const struct pkl_value *v, struct ckpt_tensor *t)
{
	const struct pkl_value *st = dcp_state(v), *pr, *pst, *dt;
	int nd;

	pr = dcp_field(st, "properties");
	pst = dcp_state(pr);
	if (!dcp_is_obj(pr, DCP_M_META, DCP_M_OLD, "TensorProperties") || !pst)
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s' has "
				    "no TensorProperties", fqn);
	dt = pst->kind == PKL_TUPLE ? pkl_item(pst, 0) :
	     dcp_field(pst, "dtype");
	if (!dt || dt->kind != PKL_GLOBAL ||
	    strcmp(dt->u.global.module, "torch") ||
	    !(t->dtype = ckpt_dtype_by_name(dt->u.global.name)))
		return diag_unsupported(o->d, pst->off, ".metadata: tensor "
					"'%s' has an unknown dtype", fqn);
	if (!dcp_dims(dcp_field(st, "size"), t->shape, &nd))
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s' has "
				    "no valid size", fqn);
	t->ndim = (uint8_t)nd;
	if (!dcp_field(st, "chunks") ||
	    dcp_field(st, "chunks")->kind != PKL_LIST)
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s' has "
				    "no list of chunks", fqn);
	return 0;
}

/*
 * The tensor @fqn of its occurrences @oc (@first: the first's index + 1):
 * its storage, tensor and chunks.  A chunk that several ranks saved (a
 * replicated tensor, without collectives) is kept once.
 */
static int tensor(struct dcp_open *o, const char *fqn, const struct occ *oc,
		  uint32_t first, struct ckpt_tensor **out)
{
	struct ckpt *c = o->c;
	struct ckpt_dcp *p = o->p;
	const struct pkl_value *v = oc[first - 1].v;
	int64_t shape[CKPT_MAX_DIMS];
	struct ckpt_tensor h = { .shape = shape }, *t;
	struct seen seen = { 0 };
	uint32_t c0 = p->nchunks;
	struct ckpt_storage *s;
	char key[16];
	int nd, rc;

	rc = tensor_head(o, fqn, v, &h);
	if (rc)
		return rc;
	nd = h.ndim;
	snprintf(key, sizeof(key), "%u", c->nstorages);
	t = ckpt_tensor_new(c->b, nd);
	if (!t)
		return diag_nomem(o->d);
	memcpy(t->shape, shape, nd * sizeof(*shape));
	t->kind = CKPT_T_STRIDED;
	t->dtype = h.dtype;
	t->pkl_off = v->off;
	if (!ckpt_tensor_c_strides(t))
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s': "
				    "strides overflow", fqn);
	rc = ckpt_tensor_check(c, t, o->d);	/* numel, nbytes */
	if (!rc)
		rc = ckpt_storage_add(c->b, key, t->dtype, "cpu", t->numel,
				      v->off, &s);
	if (rc)
		return rc;
	t->storage = s;
	s->ntensors++;
	for (uint32_t j = first; j && !rc; j = oc[j - 1].next) {
		const struct pkl_value *w = oc[j - 1].v, *ch;
		uint32_t r = oc[j - 1].r;

		/* another rank's view of the same tensor */
		if (w != v) {
			int64_t s2[CKPT_MAX_DIMS];
			struct ckpt_tensor h2 = { .shape = s2 };

			rc = tensor_head(o, fqn, w, &h2);
			if (!rc && (h2.dtype != t->dtype || h2.ndim != nd ||
				    memcmp(s2, shape, nd * sizeof(*s2))))
				rc = diag_corrupt(o->d, w->off, ".metadata: "
						  "tensor '%s' has another "
						  "dtype or size in rank %u's "
						  "metadata", fqn, r);
			if (rc)
				break;
		}
		ch = dcp_field(dcp_state(w), "chunks");
		seen.n = 0;
		if (seen.v)
			memset(seen.v, 0, seen.cap * sizeof(*seen.v));
		for (size_t i = 0; i < pkl_len(ch) && !rc; i++) {
			const struct pkl_value *cv = pkl_item(ch, i);
			int64_t off[CKPT_MAX_DIMS], sz[CKPT_MAX_DIMS];
			uint32_t k;

			rc = chunk_of(o, fqn, ch, i, nd, off, sz);
			if (rc)
				break;
			rc = pkl_shared(cv) ? seen_add(&seen, cv) : 0;
			if (rc)
				rc = rc < 0 ? diag_nomem(o->d) :
				     twice(o, fqn, cv, i, off, nd);
			if (rc)
				break;
			k = dcp_tab_get(&o->items[r], fqn, strlen(fqn), off,
					nd);
			/* the same offsets again: one item for two chunks */
			if (k != UINT32_MAX && p->items[k].used) {
				rc = twice(o, fqn, cv, i, off, nd);
				break;
			}
			if (k != UINT32_MAX)
				p->items[k].used = true;
			if (j != first && have_chunk(p, c0, nd, off, sz))
				continue;	/* replicated: kept once */
			rc = ckpt_dcp_chunk_add(c, nd, off, sz, k,
						pkl_item(ch, i)->off, o->d);
		}
	}
	free(seen.v);
	if (!rc)
		rc = ckpt_dcp_storage_done(c, fqn, t, o->d);
	*out = t;
	return rc;
}

/* planner_data of every file: fqn -> the path tuple (the first one). */
static int paths(struct dcp_open *o)
{
	for (uint32_t r = 0; r < o->n; r++) {
		const struct pkl_value *pd = o->planner[r];

		if (!pd || pd->kind != PKL_DICT)
			continue;	/* a custom planner: keys stay flat */
		for (size_t i = 0; i < pkl_len(pd); i++) {
			const struct pkl_value *k = pd->u.items.v[2 * i];
			const struct pkl_value *v = pd->u.items.v[2 * i + 1];
			int rc;

			if (!as_str(k) || !v || (v->kind != PKL_TUPLE &&
						 v->kind != PKL_LIST) ||
			    !pkl_len(v))
				continue;
			if (o->npath == o->pathcap) {
				uint32_t cap = o->pathcap ? 2 * o->pathcap : 64;
				const struct pkl_value **pv;

				pv = realloc(o->pathv, cap * sizeof(*pv));
				if (!pv)
					return diag_nomem(o->d);
				o->pathv = pv;
				o->pathcap = cap;
			}
			rc = dcp_tab_put(&o->paths, k->u.s.p, k->u.s.n, NULL,
					 0, o->npath);
			if (rc < 0)
				return diag_nomem(o->d);
			if (!rc)	/* the first file's path wins */
				o->pathv[o->npath++] = v;
		}
	}
	return 0;
}

/* The path of @fqn: planner_data's tuple, else NULL (fqn,). */
static const struct pkl_value *path_of(struct dcp_open *o,
				       const struct pkl_value *key)
{
	uint32_t i = dcp_tab_get(&o->paths, key->u.s.p, key->u.s.n, NULL, 0);

	return i == UINT32_MAX ? NULL : o->pathv[i];
}

/* One key with its occurrences: a tensor or a value, made a leaf. */
static int leaf(struct dcp_open *o, struct dcp_leaf *lv, const struct occ *oc,
		uint32_t first)
{
	struct ckpt *c = o->c;
	const struct pkl_value *v = oc[first - 1].v;
	const char *fqn = lv->key->u.s.p;
	struct ckpt_tensor *t = NULL;
	int rc;

	lv->path = path_of(o, lv->key);
	if (dcp_is_obj(v, DCP_M_META, NULL, "TensorStorageMetadata")) {
		rc = tensor(o, fqn, oc, first, &t);
		if (rc)
			return rc;
		lv->node = ckpt_node_synth(c->b, CKPT_N_TENSOR, "Tensor");
		if (!lv->node)
			return diag_nomem(o->d);
		lv->node->tensor = t;
		t->shown = true;
		c->nshown++;
		return 0;
	}
	if (!dcp_is_obj(v, DCP_M_META, NULL, "BytesStorageMetadata"))
		return diag_corrupt(o->d, v ? v->off : lv->key->off,
				    ".metadata: '%s' is neither "
				    "TensorStorageMetadata nor "
				    "BytesStorageMetadata", fqn);
	/* every rank's copy of a value is used; the first one is shown */
	for (uint32_t j = oc[first - 1].next; j; j = oc[j - 1].next) {
		uint32_t k = dcp_tab_get(&o->items[oc[j - 1].r], fqn,
					 strlen(fqn), NULL, 0);

		if (k != UINT32_MAX)
			o->p->items[k].used = true;
	}
	return leaf_value(o, oc[first - 1].r, fqn, v->off, &lv->node);
}

/*
 * Every key of every state_dict_metadata, in first-seen order, gathered
 * (a key several ranks saved is one leaf), made leaves, then nested.
 */
int ckpt_dcp_leaves(struct dcp_open *o)
{
	struct dcp_tab seen = { 0 };
	struct dcp_leaf *lv = NULL;
	struct occ *oc = NULL;
	uint32_t *first = NULL, *last = NULL, n = 0, nocc = 0, total = 0;
	int rc = paths(o);

	for (uint32_t r = 0; r < o->n; r++)
		total += (uint32_t)pkl_len(o->sdm[r]);
	lv = calloc(total + 1, sizeof(*lv));
	oc = calloc(total + 1, sizeof(*oc));
	first = calloc(total + 1, sizeof(*first));
	last = calloc(total + 1, sizeof(*last));
	if (!rc && (!lv || !oc || !first || !last))
		rc = diag_nomem(o->d);
	for (uint32_t r = 0; r < o->n && !rc; r++) {
		const struct pkl_value *sdm = o->sdm[r];

		for (size_t i = 0; i < pkl_len(sdm) && !rc; i++) {
			const struct pkl_value *k = sdm->u.items.v[2 * i];
			uint32_t at;

			if (!as_str(k)) {
				rc = diag_corrupt(o->d, k->off, ".metadata: a "
						  "key of state_dict_metadata "
						  "is not a str");
				break;
			}
			oc[nocc] = (struct occ){ r, 0,
						 sdm->u.items.v[2 * i + 1] };
			at = dcp_tab_get(&seen, k->u.s.p, k->u.s.n, NULL, 0);
			if (at == UINT32_MAX) {
				if (dcp_tab_put(&seen, k->u.s.p, k->u.s.n,
						NULL, 0, n) < 0) {
					rc = diag_nomem(o->d);
					break;
				}
				lv[n].key = k;
				first[n] = last[n] = nocc + 1;
				n++;
			} else if (oc[last[at] - 1].r == r) {
				/* pickle.load keeps the last: which one? */
				rc = diag_corrupt(o->d, k->off, ".metadata: "
						  "state_dict_metadata lists "
						  "key '%s' twice", k->u.s.p);
				break;
			} else {
				oc[last[at] - 1].next = nocc + 1;
				last[at] = nocc + 1;
			}
			nocc++;
		}
	}
	o->p->keys = n ? arena_alloc(&o->c->arena, n * sizeof(*o->p->keys)) :
		     NULL;
	if (!rc && n && !o->p->keys)
		rc = diag_nomem(o->d);
	for (uint32_t i = 0; i < n && !rc; i++) {
		struct dcp_key *k = &o->p->keys[i];

		k->node0 = o->c->nnodes;
		rc = leaf(o, &lv[i], oc, first[i]);
		k->key = lv[i].key;
		k->meta = oc[first[i] - 1].v;
		k->node = lv[i].node;
		k->nnodes = o->c->nnodes - k->node0;
		o->p->nkeys = i + 1;
	}
	if (!rc)
		rc = ckpt_dcp_nest(o->c, lv, n, o->d);
	free(seen.v);
	free(lv);
	free(oc);
	free(first);
	free(last);
	return rc;
}

const struct dcp_key *ckpt_dcp_key_of(const struct ckpt *c,
				      const struct ckpt_node *n)
{
	const struct ckpt_dcp *p = c->dcp;
	uint32_t lo = 0, hi = p ? p->nkeys : 0;

	while (hi > lo) {	/* the last key with node0 <= n->id */
		uint32_t mid = lo + (hi - lo) / 2;

		if (p->keys[mid].node0 <= n->id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || n->id - p->keys[lo - 1].node0 >= p->keys[lo - 1].nnodes ||
	    !p->keys[lo - 1].node)
		return NULL;
	return &p->keys[lo - 1];
}

bool ckpt_dcp_in_value(const struct ckpt *c, const struct ckpt_node *n)
{
	const struct dcp_key *k = ckpt_dcp_key_of(c, n);

	return k && k->node->kind != CKPT_N_TENSOR;
}
