/*
 * pkl_memo.c - the unpickler's memo (BINPUT/LONG_BINPUT/PUT/MEMOIZE store,
 * BINGET/LONG_BINGET/GET fetch), keyed by a 32-bit index.  Python numbers
 * memo entries 0, 1, 2 ..., so a dense array serves the real case at array
 * speed; any other key goes to a seeded open-addressing table, so neither a
 * hostile 0xffffffff nor crafted colliding keys cost more than O(entries).
 */
#ifndef PT_INTERNAL
#define PT_INTERNAL 1
#endif
#include "pkl_int.h"
#include "util/heap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Keys below 2 * count + DENSE_SLACK may go to the dense array. */
#define DENSE_SLACK	1024u

static uint32_t mix(uint32_t k, uint32_t seed)
{
	k ^= seed;
	k ^= k >> 16;
	k *= 0x85ebca6bu;
	k ^= k >> 13;
	k *= 0xc2b2ae35u;
	k ^= k >> 16;
	return k;
}

static uint32_t slot(const struct pkl_memo *m, uint32_t key)
{
	uint32_t i = mix(key, m->seed) & (m->hcap - 1);

	while (m->vals[i] && m->keys[i] != key)
		i = (i + 1) & (m->hcap - 1);
	return i;
}

struct pkl_value *pkl_memo_get(const struct pkl_memo *m, uint32_t key)
{
	uint32_t i;

	if (key < m->dcap)
		return m->dense[key];
	if (!m->hcount)
		return NULL;
	i = slot(m, key);
	return m->vals[i];
}

/* Rebuild the table with @hcap slots, moving keys below dcap to dense. */
static int rehash(struct pkl_memo *m, uint32_t hcap)
{
	uint32_t *okeys = m->keys, ocap = m->hcap;
	struct pkl_value **ovals = m->vals;
	uint32_t *keys = malloc((size_t)hcap * sizeof(*keys));
	struct pkl_value **vals = calloc(hcap, sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	if (!m->seed)
		/* The heap address varies per run (ASLR): a cheap seed. */
		m->seed = mix((uint32_t)(uintptr_t)vals ^
			      (uint32_t)((uintptr_t)vals >> 16), 0x9e3779b9u) |
			  1;
	m->keys = keys;
	m->vals = vals;
	m->hcap = hcap;
	m->hcount = 0;
	for (uint32_t j = 0; j < ocap; j++) {
		uint32_t i;

		if (!ovals[j])
			continue;
		if (okeys[j] < m->dcap) {
			m->dense[okeys[j]] = ovals[j];
			continue;
		}
		i = slot(m, okeys[j]);
		m->keys[i] = okeys[j];
		m->vals[i] = ovals[j];
		m->hcount++;
	}
	free(okeys);
	free(ovals);
	return 0;
}

/*
 * Make the dense array cover @key if it can stay within a small multiple of
 * the entry count; otherwise leave @key to the table.  Returns 0 or -ENOMEM.
 */
static int dense_cover(struct pkl_memo *m, uint32_t key)
{
	uint64_t limit = 2 * (uint64_t)m->count + DENSE_SLACK;
	uint64_t ncap = m->dcap ? m->dcap : 64;
	struct pkl_value **nd;

	if (key >= limit)
		return 0;
	while (ncap <= key)
		ncap *= 2;
	if (ncap > limit)
		ncap = limit;
	nd = realloc(m->dense, ncap * sizeof(*nd));
	if (!nd)
		return -ENOMEM;
	/* one call for the new pages instead of a fault each (heap.h) */
	util_populate(nd + m->dcap, (ncap - m->dcap) * sizeof(*nd));
	memset(nd + m->dcap, 0, (ncap - m->dcap) * sizeof(*nd));
	m->dense = nd;
	m->dcap = (uint32_t)ncap;
	if (m->hcount)
		return rehash(m, m->hcap);
	return 0;
}

int pkl_memo_cover(struct pkl_memo *m, uint32_t key)
{
	return key < m->dcap ? 0 : dense_cover(m, key);
}

int pkl_memo_put(struct pkl_memo *m, uint32_t key, struct pkl_value *v)
{
	uint32_t i;
	int rc;

	if (key >= m->dcap) {
		rc = dense_cover(m, key);
		if (rc < 0)
			return rc;
	}
	if (key < m->dcap) {
		if (!m->dense[key]) {
			if (m->count >= (m->limit ? m->limit : PKL_MAX_MEMO))
				return -E2BIG;
			m->count++;
		}
		m->dense[key] = v;
		return 0;
	}
	if (m->hcount) {
		i = slot(m, key);
		if (m->vals[i]) {
			m->vals[i] = v;
			return 0;
		}
	}
	if (m->count >= (m->limit ? m->limit : PKL_MAX_MEMO))
		return -E2BIG;
	/* Keep the load at most 1/2 so probes stay short. */
	if (2 * (uint64_t)(m->hcount + 1) > m->hcap) {
		rc = rehash(m, m->hcap ? m->hcap * 2 : 16);
		if (rc < 0)
			return rc;
	}
	i = slot(m, key);
	m->keys[i] = key;
	m->vals[i] = v;
	m->hcount++;
	m->count++;
	return 0;
}

void pkl_memo_release(struct pkl_memo *m)
{
	free(m->dense);
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}
