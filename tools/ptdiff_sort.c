/*
 * ptdiff_sort.c - ptdiff --sort: the items of a report held back until
 * every pair is compared, then ordered by the magnitude of their value
 * differences (max abs, max rel, rel L2 or the number of elements that
 * differ), largest first.  A held item is a copy with room for its own
 * attributes only, so that 100,000 differing tensors take a few MB.
 */
#include "ptdiff.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = { NULL, "abs", "rel", "l2", "count" };

int pd_sort_parse(const char *s)
{
	for (int i = PD_SORT_ABS; i <= PD_SORT_COUNT; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

const char *pd_sort_name(int sort)
{
	return sort > PD_SORT_NONE && sort <= PD_SORT_COUNT ? names[sort] :
	       NULL;
}

int pd_hold(struct pd_held *h, const struct pd_item *it)
{
	size_t size = offsetof(struct pd_item, attrs) +
		      (size_t)it->nattrs * sizeof(it->attrs[0]);
	struct pd_item *c;

	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 64;
		struct pd_item **v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	c = malloc(size);
	if (!c)
		return -ENOMEM;
	memcpy(c, it, size);
	c->path = strdup(it->path);
	if (!c->path) {
		free(c);
		return -ENOMEM;
	}
	h->v[h->n++] = c;
	return 0;
}

/* The figure @it is sorted by, or NAN when it has none. */
static double figure(const struct pd_item *it, int sort)
{
	const struct pd_elems *e = &it->el;

	if (!it->values || !it->compared)
		return NAN;
	switch (sort) {
	case PD_SORT_ABS:
		return e->raw ? NAN : e->max_abs;
	case PD_SORT_REL:
		return e->raw ? NAN : e->max_rel;
	case PD_SORT_L2:
		return e->has_rel_l2 ? e->rel_l2 : NAN;
	default:
		return (double)e->differ;
	}
}

static int sort_key;	/* qsort() has no context argument */

static int cmp(const void *pa, const void *pb)
{
	const struct pd_item *a = *(struct pd_item *const *)pa;
	const struct pd_item *b = *(struct pd_item *const *)pb;
	double fa, fb;

	if ((a->status == ST_EQUAL) != (b->status == ST_EQUAL))
		return a->status == ST_EQUAL ? 1 : -1;
	fa = figure(a, sort_key);
	fb = figure(b, sort_key);
	if (isnan(fa) != isnan(fb))
		return isnan(fa) ? 1 : -1;
	if (!isnan(fa) && fa != fb)
		return fa > fb ? -1 : 1;	/* inf first */
	return a->order < b->order ? -1 : a->order > b->order;
}

void pd_held_sort(struct pd_held *h, int sort)
{
	sort_key = sort;
	if (h->n)
		qsort(h->v, h->n, sizeof(*h->v), cmp);
}

void pd_held_release(struct pd_held *h)
{
	for (size_t i = 0; i < h->n; i++) {
		free(h->v[i]->path);
		free(h->v[i]);
	}
	free(h->v);
	*h = (struct pd_held){ 0 };
}
