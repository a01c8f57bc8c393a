/*
 * ckpt_dcp_split.c - which items a DCP directory holds and which rank's
 * file holds each: for one rank, one item per key in __0_0.distcp; for M
 * ranks, what dcp.save() writes when M gloo ranks each hold every tensor
 * of 1+ dims as distribute_tensor(t, mesh, [Shard(0)]) and the rest as it
 * is, with DefaultSavePlanner and FileSystemWriter (torch 2.14:
 * placement_types.py Shard.local_shard_size_and_offset, planner_helpers.py,
 * _dedup_save_plans.py, default_planner.py, filesystem.py; checked against
 * real saves by tests/fs/formats/dcp_reshard.sh):
 *
 *   KEY               ITS CHUNKS (offsets; sizes)         IN THE FILE OF
 *   a tensor of n     rank r < k: (r*c, 0..; min(c, n-r*c), ..)  rank r
 *   rows, c = ceil(   the ranks k..M-1 hold (n, 0..; 0, ..) each:  the rank
 *   n/M) of them, k   one MetadataIndex, so ONE chunk is kept      dedup picks
 *   = ceil(n/c) ranks (k = M: none; n = 0: c = k = 0, one chunk)
 *   a 0-dim tensor    one, (;) -- it cannot be Shard(0)   the rank dedup
 *   a python value    one BytesStorageMetadata item       picks
 *
 * dedup_save_plans() keeps an item several ranks hold on the one with the
 * fewest bytes planned so far, taking the items in the order of the plans
 * (rank 0's keys, then those of rank 1 not seen yet, ...); each kept item
 * adds its key's WHOLE tensor's bytes to its rank (tensor_storage_size()
 * is of the global size), or 1 for a value or no bytes.  A tie goes to
 * the rank min() meets first in the python set of candidates: see pick().
 * So values and 0-dim tensors spread over the ranks, rank 0 taking the
 * ones before its first tensor.  Each rank's file, even one left empty,
 * holds its values first, then its tensors, in key order (one writer
 * thread: one bucket); the .metadata lists a key's chunks rank by rank.
 */
#include "ckpt_dcp_save.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* items a plan may hold: the .metadata names each in ~300 bytes */
#define ITEMS_MAX	CKPT_MAX_NODES

static bool sharded(const struct dcp_leaf *l)
{
	return l->tensor && l->x->tensor->ndim > 0;
}

/* tensor_storage_size() or 1: what an item adds to its rank's plan */
static uint64_t weight(const struct dcp_leaf *l)
{
	uint64_t b = l->tensor ? ckpt_tensor_nbytes(l->x->tensor) : 0;

	return b ? b : 1;
}

/* Shard(0) of @n rows over @m ranks: *@c rows a chunk, *@k ranks with any */
static void cut(int64_t n, uint32_t m, int64_t *c, uint32_t *k)
{
	*c = n / m + (n % m != 0);
	*k = n ? (uint32_t)(n / *c + (n % *c != 0)) : 0;
}

/*
 * The rank of [@lo, @m) with the fewest bytes @planned, as min() finds it
 * in the python set {lo, ..., m - 1} (added in that order).  A set of
 * ints iterates by slot, v & (S - 1), S the size of its table (CPython
 * 3.14 setobject.c: 8, grown when 5 * fill >= 3 * (S - 1) to the least
 * power of two over 4 * fill, 2 * fill past 50000): {6, 7, 8, 9} meets 8
 * first.  A contiguous run of ints never collides, so no probing.
 */
static uint32_t pick(const uint64_t *planned, uint32_t lo, uint32_t m)
{
	uint64_t s = 8;
	uint32_t best = lo;

	for (uint64_t fill = 1; fill <= m - lo; fill++)
		if (5 * fill >= 3 * (s - 1))
			for (s = 8; s <= (fill > 50000 ? 2 : 4) * fill; s <<= 1)
				;
	for (uint32_t r = lo + 1; r < m; r++)
		if (planned[r] < planned[best] ||
		    (planned[r] == planned[best] &&
		     (r & (s - 1)) < (best & (s - 1))))
			best = r;
	return best;
}

/* Ranks with rows of @l (k above): all its items but an empty last one. */
static uint32_t holders(const struct dcp_leaf *l, const struct dcp_plan *p)
{
	return l->nitem - (p->it[l->item + l->nitem - 1].rows == 0);
}

/*
 * dedup_save_plans(): the ranks of the items more than one rank holds.
 * Pass P takes rank P's plan: its keys in order, each item it is the
 * first to hold.  After the pass of the last such item nothing changes.
 */
static void place(const struct dcp_leaf *v, uint32_t n, struct dcp_plan *p,
		  uint64_t *planned, uint32_t passes)
{
	for (uint32_t pass = 0; pass < passes; pass++)
		for (uint32_t i = 0; i < n; i++) {
			const struct dcp_leaf *l = &v[i];
			uint32_t k = sharded(l) ? holders(l, p) : 0;
			uint64_t w = weight(l);
			struct dcp_item *x;

			if (sharded(l) ? pass > k || pass == l->nitem : pass)
				continue;
			x = &p->it[l->item + pass];
			if (pass == k)	/* held by ranks k.., every one if 0 */
				x->rank = pick(planned, k, p->ranks);
			planned[x->rank] = planned[x->rank] > UINT64_MAX - w ?
					   UINT64_MAX : planned[x->rank] + w;
		}
}

/*
 * @out: the @cnt indices 0.. in @nb buckets, @bucket(i) each, stably
 * (key order within a bucket).  -ENOMEM.
 */
static int bucket_sort(uint32_t *out, uint32_t cnt, uint32_t nb,
		       uint32_t (*bucket)(const struct dcp_plan *,
					  const struct dcp_leaf *, uint32_t),
		       const struct dcp_plan *p, const struct dcp_leaf *v)
{
	uint32_t *at = calloc((size_t)nb + 1, sizeof(*at));

	if (!at)
		return -ENOMEM;
	for (uint32_t i = 0; i < cnt; i++)
		at[bucket(p, v, i) + 1]++;
	for (uint32_t b = 0; b < nb; b++)
		at[b + 1] += at[b];
	for (uint32_t i = 0; i < cnt; i++)
		out[at[bucket(p, v, i)]++] = i;
	free(at);
	return 0;
}

/* written: rank by rank, values before tensors (filesystem.py's order) */
static uint32_t write_bucket(const struct dcp_plan *p,
			     const struct dcp_leaf *v, uint32_t i)
{
	return 2 * p->it[i].rank + v[p->it[i].leaf].tensor;
}

/* state_dict_metadata: a key when the first rank holding it comes */
static uint32_t key_bucket(const struct dcp_plan *p, const struct dcp_leaf *v,
			   uint32_t i)
{
	return p->it[v[i].item].rank;
}

int ckpt_dcp_split(struct dcp_leaf *v, uint32_t n, uint32_t ranks,
		   struct dcp_plan *p, struct diag *d)
{
	uint32_t m = ranks > 1 ? ranks : 1, passes = 1, at = 0;
	uint64_t nit = 0, *planned = NULL;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	p->ranks = m;
	for (uint32_t i = 0; i < n; i++) {
		int64_t c;
		uint32_t k;

		if (!sharded(&v[i])) {
			nit++;
			continue;
		}
		cut(v[i].x->tensor->shape[0], m, &c, &k);
		nit += k + (k < m);
		if (k < m && k + 1 > passes)
			passes = k + 1;
	}
	if (nit > ITEMS_MAX)
		return diag_unsupported(d, DIAG_NO_OFFSET, "%" PRIu32 " keys "
					"over %" PRIu32 " ranks make %" PRIu64
					" chunks, more than %u", n, m, nit,
					(unsigned)ITEMS_MAX);
	p->nit = (uint32_t)nit;
	p->it = calloc(nit ? nit : 1, sizeof(*p->it));
	p->wr = calloc(nit ? nit : 1, sizeof(*p->wr));
	p->keys = m > 1 ? calloc(n ? n : 1, sizeof(*p->keys)) : NULL;
	planned = calloc(m, sizeof(*planned));
	if (!p->it || !p->wr || (m > 1 && !p->keys) || !planned) {
		rc = diag_nomem(d);
		goto out_free;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct dcp_leaf *l = &v[i];
		int64_t rows = sharded(l) ? l->x->tensor->shape[0] : 0, c;
		uint32_t k = 0;

		l->item = at;
		if (sharded(l))
			cut(rows, m, &c, &k);
		for (uint32_t r = 0; r < k; r++)
			p->it[at++] = (struct dcp_item){ .leaf = i, .rank = r,
				.row = r * c,
				.rows = rows - r * c < c ? rows - r * c : c };
		if (!sharded(l) || k < m)	/* placed by dedup */
			p->it[at++] = (struct dcp_item){ .leaf = i,
							 .row = rows };
		l->nitem = at - l->item;
	}
	place(v, n, p, planned, passes);
	rc = bucket_sort(p->wr, p->nit, 2 * m, write_bucket, p, v);
	if (!rc && m > 1)
		rc = bucket_sort(p->keys, n, m, key_bucket, p, v);
	if (rc)
		rc = diag_nomem(d);
out_free:
	free(planned);
	if (rc)
		ckpt_dcp_plan_release(p);
	return rc;
}

void ckpt_dcp_plan_release(struct dcp_plan *p)
{
	free(p->it);
	free(p->wr);
	free(p->keys);
	memset(p, 0, sizeof(*p));
}
