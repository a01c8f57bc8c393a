/*
 * ckpt_dcp_check.c - a DCP tensor's chunks against its shape, from
 * .metadata alone: every chunk inside the tensor, no two overlapping, and
 * their volumes adding up to the tensor's (with no overlap: covered
 * exactly), every chunk with its item, every item the chunk or value of
 * some key, and no two items over the same bytes of a data file.  torch's
 * save planner promises this (_validate_global_plan); a file that breaks
 * it is refused, or its findings kept for ptverify.
 */
#include "ckpt_dcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "(0, 4)" of @n values into @buf. */
const char *dcp_tuple(char *buf, size_t size, const int64_t *v, int n)
{
	size_t k = snprintf(buf, size, "(");

	for (int i = 0; i < n && k < size; i++)
		k += snprintf(buf + k, size - k, "%s%lld", i ? ", " : "",
			      (long long)v[i]);
	if (k < size)
		snprintf(buf + k, size - k, n == 1 ? ",)" : ")");
	return buf;
}

static uint64_t volume(const int64_t *sz, int nd)
{
	uint64_t v = 1;

	for (int i = 0; i < nd; i++)
		v *= (uint64_t)sz[i];
	return v;
}

static bool overlap(const struct dcp_chunk *a, const struct dcp_chunk *b,
		    int nd)
{
	for (int i = 0; i < nd; i++)
		if (a->offsets[i] >= b->offsets[i] + b->sizes[i] ||
		    b->offsets[i] >= a->offsets[i] + a->sizes[i])
			return false;
	return true;
}

struct by0 {
	int64_t off0;
	uint32_t i;
};

static int by_off0(const void *a, const void *b)
{
	const struct by0 *x = a, *y = b;

	if (x->off0 != y->off0)
		return x->off0 < y->off0 ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);	/* .metadata order */
}

/*
 * Do two of storage @k's chunks overlap?  Sorted by their offset in
 * dimension 0, a chunk is compared only with those whose start lies less
 * than the largest dimension-0 size before its own: one comparison or so
 * each for row-wise sharding.  Chunks that all share dimension 0 (column
 * sharding) are compared pairwise, within a budget for the whole open.
 */
static int overlaps(struct ckpt *c, const struct ckpt_tensor *t, uint32_t k,
		    struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	uint32_t b = p->first[k], n = p->first[k + 1] - b;
	struct by0 *v;
	int64_t maxs = 0;
	char x[256], y[256];
	bool found = false;
	int rc = 0;

	if (n < 2 || !t->numel)
		return 0;
	v = malloc(n * sizeof(*v));
	if (!v)
		return diag_nomem(d);
	for (uint32_t i = 0; i < n; i++) {
		const struct dcp_chunk *ch = &p->chunks[b + i];

		v[i].i = b + i;
		v[i].off0 = t->ndim ? ch->offsets[0] : 0;
		if (t->ndim && ch->sizes[0] > maxs)
			maxs = ch->sizes[0];
	}
	qsort(v, n, sizeof(*v), by_off0);
	for (uint32_t i = 1; i < n && !rc && !found; i++) {
		const struct dcp_chunk *a = &p->chunks[v[i].i];

		if (!volume(a->sizes, t->ndim))
			continue;
		for (uint32_t j = i; j-- > 0 && !rc;) {
			const struct dcp_chunk *o = &p->chunks[v[j].i];

			if (t->ndim && v[j].off0 + maxs <= v[i].off0)
				break;
			if (!p->budget--) {
				rc = diag_unsupported(d, a->meta_off,
						      ".metadata: tensor '%s': "
						      "too many chunks to "
						      "check for overlaps",
						      p->fqn[k]);
				break;
			}
			if (!volume(o->sizes, t->ndim) ||
			    !overlap(o, a, t->ndim))
				continue;
			/* one finding a tensor: the rest would say the same
			   of it, pair by pair */
			found = true;
			rc = ckpt_dcp_problem(c, d, "coverage", p->meta_path,
					      a->meta_off, -EILSEQ,
					      ".metadata: tensor '%s': chunks "
					      "at %s and %s overlap", p->fqn[k],
					      dcp_tuple(x, sizeof(x),
							o->offsets, t->ndim),
					      dcp_tuple(y, sizeof(y),
							a->offsets, t->ndim));
			break;
		}
	}
	free(v);
	return rc;
}

/* Chunk @ch of @t (called @fqn) lies outside it. */
static int outside(struct ckpt *c, const struct ckpt_tensor *t,
		   const struct dcp_chunk *ch, const char *fqn,
		   struct diag *d)
{
	char x[256], y[256], z[256];

	return ckpt_dcp_problem(c, d, "coverage", c->dcp->meta_path,
				ch->meta_off, -EILSEQ, ".metadata: tensor '%s' "
				"of shape %s: chunk at %s of size %s lies "
				"outside it", fqn,
				dcp_tuple(x, sizeof(x), t->shape, t->ndim),
				dcp_tuple(y, sizeof(y), ch->offsets, t->ndim),
				dcp_tuple(z, sizeof(z), ch->sizes, t->ndim));
}

/* Storage @k's chunks: inside the tensor, disjoint, covering it. */
static int check_one(struct ckpt *c, const struct ckpt_tensor *t,
		     uint32_t k, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	const char *fqn = p->fqn[k];
	uint32_t b = p->first[k], e = p->first[k + 1], lost = 0, first = 0;
	uint64_t total = 0;
	char x[256], more[48];
	int rc = 0;

	for (uint32_t i = b; i < e; i++) {
		const struct dcp_chunk *ch = &p->chunks[i];

		for (int j = 0; j < t->ndim; j++)
			if (ch->offsets[j] > t->shape[j] ||
			    ch->sizes[j] > t->shape[j] - ch->offsets[j])
				return outside(c, t, ch, fqn, d);
		if (ch->item == DCP_NO_ITEM && !lost++)
			first = i;
		total += volume(ch->sizes, t->ndim);
	}
	/* one finding a tensor, however many of its chunks lack an item */
	if (lost > 1)
		snprintf(more, sizeof(more), " (nor have %u more of its "
			 "chunks)", lost - 1);
	if (lost)
		rc = ckpt_dcp_problem(c, d, "chunk", p->meta_path,
				      p->chunks[first].meta_off, -EILSEQ,
				      ".metadata: tensor '%s': chunk at %s has "
				      "no item in storage_data%s", fqn,
				      dcp_tuple(x, sizeof(x),
						p->chunks[first].offsets,
						t->ndim), lost > 1 ? more : "");
	if (!rc)
		rc = overlaps(c, t, k, d);
	if (!rc && total < t->numel)	/* disjoint: then exactly covered */
		rc = ckpt_dcp_problem(c, d, "coverage", p->meta_path,
				      t->pkl_off, -EILSEQ, ".metadata: tensor "
				      "'%s' of shape %s: its chunks leave %llu "
				      "of its %llu elements uncovered", fqn,
				      dcp_tuple(x, sizeof(x), t->shape,
						t->ndim),
				      (unsigned long long)(t->numel - total),
				      (unsigned long long)t->numel);
	return rc;
}

struct place {
	uint64_t off;
	uint32_t file, i;
};

/* By file, then offset, then storage_data's order. */
static int by_place(const void *a, const void *b)
{
	const struct place *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* Are @p's items in place order already (each data file's in turn, as
 * one writer thread wrote them)? */
static bool in_place_order(const struct ckpt_dcp *p)
{
	for (uint32_t i = 1; i < p->nitems; i++) {
		const struct dcp_item *a = &p->items[i - 1], *b = &p->items[i];

		if (a->file > b->file || (a->file == b->file && a->off > b->off))
			return false;
	}
	return true;
}

/*
 * No two items of one data file share a byte: each is one key's chunk or
 * value, and two keys over the same bytes would be one tensor shown as two
 * (an edit of one changes the other), as two overlapping safetensors
 * tensors or zip records would.  Sorted by place (torch's storage_data
 * mostly is: no sort then), each item is compared with the one before it
 * that reaches furthest.
 */
static int items_apart(struct ckpt *c, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	const struct dcp_item *o = NULL;
	struct place *v = NULL;
	int rc = 0;

	if (p->nitems < 2)
		return 0;
	if (!in_place_order(p)) {
		v = malloc(p->nitems * sizeof(*v));
		if (!v)
			return diag_nomem(d);
		for (uint32_t i = 0; i < p->nitems; i++)
			v[i] = (struct place){ p->items[i].off,
					       p->items[i].file, i };
		qsort(v, p->nitems, sizeof(*v), by_place);
	}
	for (uint32_t i = 0; i < p->nitems && !rc; i++) {
		const struct dcp_item *it = &p->items[v ? v[i].i : i];
		const struct dcp_file *f = &p->files[it->file];

		if (!it->len || (f->fd >= 0 && (it->off > f->size ||
						it->len > f->size - it->off)))
			continue;	/* no bytes to share, or a finding */
		if (o && o->file != it->file)
			o = NULL;
		if (o && it->off < o->off + o->len)
			rc = ckpt_dcp_problem(c, d, "item", f->name, it->off,
					      -EILSEQ, "%s: item of '%s' at "
					      "bytes [%llu, %llu) overlaps %s "
					      "item of '%s' at [%llu, %llu)",
					      f->name, it->fqn,
					      (unsigned long long)it->off,
					      (unsigned long long)(it->off +
								   it->len),
					      strcmp(it->fqn, o->fqn) ? "the" :
					      "another", o->fqn,
					      (unsigned long long)o->off,
					      (unsigned long long)(o->off +
								   o->len));
		if (!o || it->off + it->len > o->off + o->len)
			o = it;		/* the one that reaches furthest */
	}
	free(v);
	return rc;
}

int ckpt_dcp_check_chunks(struct ckpt *c, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	int rc = 0;

	p->budget = DCP_CHECK_BUDGET;
	for (uint32_t i = 0; i < c->nstorages && !rc; i++)
		if (p->tens[i])		/* a tensor of .metadata */
			rc = check_one(c, p->tens[i], i, d);
	if (!rc)
		rc = items_apart(c, d);
	for (uint32_t i = 0; i < p->nitems && !rc; i++) {
		const struct dcp_item *it = &p->items[i];

		if (!it->used)
			rc = ckpt_dcp_problem(c, d, "item", p->meta_path,
					      it->meta_off, -EILSEQ,
					      ".metadata: an item of %s is "
					      "the chunk or value of no key",
					      p->files[it->file].name);
	}
	return rc;
}

