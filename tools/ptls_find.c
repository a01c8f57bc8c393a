/*
 * ptls_find.c - what ptls needs to find in the model: whether a container
 * is a long list of python scalars to show on one line, and what a subtree
 * counts (the node a path names: ckpt_node_by_path(); which key holds an unsafe
 * global: globals.c).
 */
#include "ckpt/ckpt.h"
#include "ckpt_fmt.h"
#include "cli.h"
#include "ptls.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ls_collapsed(const struct ckpt_node *n, const struct opts *o)
{
	if (o->expand || !ckpt_node_is_dir(n) ||
	    n->dir->nkids <= LS_COLLAPSE_OVER)
		return false;
	for (uint32_t i = 0; i < n->dir->nkids; i++)
		if (!n->dir->kids[i] || ckpt_is_row(n->dir->kids[i]) ||
		    n->dir->kids[i]->kind != CKPT_N_VALUE)
			return false;	/* (a row is a tensor) */
	return true;
}

void ls_collapsed_text(const struct ckpt_node *n, char *buf, size_t size)
{
	const char *type = n->dir->kids[0]->type;
	size_t o = 0;
	bool same = true;

	for (uint32_t i = 1; i < n->dir->nkids && same; i++)
		same = !strcmp(n->dir->kids[i]->type, type);
	o += (size_t)snprintf(buf, size, "%u %s: ", n->dir->nkids,
			      same ? type : "values");
	for (uint32_t i = 0; i < n->dir->nkids && o + 1 < size; i++) {
		const struct ckpt_node *k = n->dir->kids[i];

		if (o + k->textlen + 8 > 72 || o + k->textlen + 8 > size) {
			snprintf(buf + o, size - o, "...");
			return;
		}
		o += (size_t)snprintf(buf + o, size - o, "%s%.*s",
				      i ? ", " : "", (int)k->textlen, k->text);
	}
}

/* One tensor's bytes of a storage other tensors view too. */
struct span {
	const struct ckpt_storage *s;
	uint64_t lo, hi;	/* bytes of the storage it reaches */
	uint64_t nbytes;
};

struct walk {
	struct ls_sum *sum;
	struct span *v;
	size_t n, cap;
	bool nomem;
};

static void walk(const struct ckpt *c, const struct ckpt_node *n,
		 struct walk *w, int depth)
{
	struct ckpt_rowview v;

	if (!n || depth >= CKPT_MAX_DEPTH)
		return;
	if (n->kind == CKPT_N_TENSOR) {
		const struct ckpt_tensor *t = n->tensor;
		uint64_t nb = ckpt_tensor_nbytes(t), isz = t->dtype->size;
		uint64_t ext = t->numel ? 1 : 0;

		w->sum->tensors++;
		/* a row's storage is its own (ckpt_node.h): no copy kept */
		if (!t->storage || t->storage->ntensors <= 1) {
			w->sum->bytes += nb;
			w->sum->storages += !!t->storage;
			return;
		}
		if (w->n == w->cap) {
			size_t cap = w->cap ? 2 * w->cap : 64;
			struct span *p = realloc(w->v, cap * sizeof(*p));

			if (!p) {
				w->nomem = true;
				w->sum->bytes += nb;
				return;
			}
			w->v = p;
			w->cap = cap;
		}
		for (int i = 0; ext && i < t->ndim; i++)
			ext += (uint64_t)(t->shape[i] - 1) *
			       (uint64_t)ckpt_tensor_stride(t)[i];
		w->v[w->n++] = (struct span){ t->storage, t->offset * isz,
					      (t->offset + ext) * isz, nb };
		return;
	}
	for (uint32_t i = 0; ckpt_node_is_dir(n) && i < n->dir->nkids; i++)
		walk(c, ckpt_kid(c, n, i, &v), w, depth + 1);
}

static int span_cmp(const void *pa, const void *pb)
{
	const struct span *a = pa, *b = pb;

	if (a->s != b->s)
		return a->s->index != b->s->index ?
		       (a->s->index < b->s->index ? -1 : 1) :
		       ((uintptr_t)a->s < (uintptr_t)b->s ? -1 : 1);
	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/*
 * The tensors viewing one storage, sorted by start: the bytes of the
 * union of their spans, but never more than their own bytes (a strided
 * view reaches more than it holds), so that a tied weight counts once.
 */
static void storage_bytes(const struct span *v, size_t n, struct ls_sum *s)
{
	uint64_t own = 0, uni = 0, lo = v[0].lo, hi = v[0].hi;

	for (size_t i = 0; i < n; i++) {
		own += v[i].nbytes;
		if (v[i].lo > hi) {
			uni += hi - lo;
			lo = v[i].lo;
		}
		if (v[i].lo > hi || v[i].hi > hi)
			hi = v[i].hi;
	}
	uni += hi - lo;
	if (uni > own)
		uni = own;
	s->bytes += uni;
	s->tied += own - uni;
	s->storages++;
	if (n < v[0].s->ntensors)
		s->shared += uni;
}

void ls_sum(const struct ckpt *c, const struct ckpt_node *n,
	    struct ls_sum *sum)
{
	struct walk w = { .sum = sum };

	*sum = (struct ls_sum){ 0 };
	walk(c, n, &w, 0);
	if (w.n)
		qsort(w.v, w.n, sizeof(*w.v), span_cmp);
	for (size_t i = 0, j; i < w.n; i = j) {
		for (j = i + 1; j < w.n && w.v[j].s == w.v[i].s; j++)
			;
		storage_bytes(w.v + i, j - i, sum);
	}
	free(w.v);
}

const char *ls_sum_text(const struct ls_sum *s, bool human, char *buf,
			size_t size)
{
	char h[24];
	size_t k;

	if (human)
		k = (size_t)snprintf(buf, size, "%s", cli_size(s->bytes, h,
								sizeof(h)));
	else
		k = (size_t)snprintf(buf, size, "%" PRIu64 " B", s->bytes);
	if (s->tied && k < size)
		k += (size_t)snprintf(buf + k, size - k, "; %s tied, counted "
				      "once", human ? cli_size(s->tied, h,
							       sizeof(h)) :
				      (snprintf(h, sizeof(h), "%" PRIu64 " B",
						s->tied), h));
	if (s->shared && k < size)
		snprintf(buf + k, size - k, "; %s shared with tensors "
			 "elsewhere", human ? cli_size(s->shared, h,
						      sizeof(h)) :
			 (snprintf(h, sizeof(h), "%" PRIu64 " B", s->shared),
			  h));
	return buf;
}
