/*
 * ckpt_memo.c - the builder's memo: pickle node id -> the tree node or
 * tensor made from it, so that a value the pickle reaches twice is built
 * once (identity, cycles).  It holds only what the build puts in it (the
 * containers and tensors it met, about one per tensor), in an open-
 * addressing table, where a dense array indexed by id cost 8 bytes for
 * every pickle node (9 per tensor in a torch.save dict) at the model's
 * peak of memory.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdlib.h>

/* Fibonacci hashing: pickle ids come in runs, which this spreads. */
static uint32_t memo_slot(const struct ckpt_memo *m, uint32_t id)
{
	uint32_t i = (uint32_t)(id * 2654435769u) & (m->cap - 1);

	while (m->ids[i] && m->ids[i] != id + 1)
		i = (i + 1) & (m->cap - 1);
	return i;
}

void *ckpt_memo_get(const struct ckpt_memo *m, uint32_t id)
{
	uint32_t i;

	if (!m->n)
		return NULL;
	i = memo_slot(m, id);
	return m->ids[i] ? m->vals[i] : NULL;
}

/* Rebuild the table with @cap slots (a power of 2 above 2 * n). */
static int memo_grow(struct ckpt_memo *m, uint32_t cap)
{
	struct ckpt_memo t = { 0 };

	t.ids = calloc(cap, sizeof(*t.ids));
	t.vals = malloc((size_t)cap * sizeof(*t.vals));
	if (!t.ids || !t.vals) {
		free(t.ids);
		free(t.vals);
		return -ENOMEM;
	}
	t.cap = cap;
	t.n = m->n;
	for (uint32_t i = 0; i < m->cap; i++) {
		uint32_t j;

		if (!m->ids[i])
			continue;
		j = memo_slot(&t, m->ids[i] - 1);
		t.ids[j] = m->ids[i];
		t.vals[j] = m->vals[i];
	}
	ckpt_memo_release(m);
	*m = t;
	return 0;
}

int ckpt_memo_put(struct ckpt_memo *m, uint32_t id, void *p)
{
	uint32_t i;

	/* ids are below PKL_MAX_NODES (2^26), so id + 1 never wraps */
	if (2 * (m->n + 1) > m->cap) {
		int rc = memo_grow(m, m->cap ? 2 * m->cap : 1024);

		if (rc)
			return rc;
	}
	i = memo_slot(m, id);
	if (!m->ids[i]) {
		m->ids[i] = id + 1;
		m->n++;
	}
	m->vals[i] = p;
	return 0;
}

void ckpt_memo_release(struct ckpt_memo *m)
{
	free(m->ids);
	free(m->vals);
	*m = (struct ckpt_memo){ 0 };
}
