/*
 * ckpt_ranks_dt.c - where a rank's pieces of a sharded tensor lie in the
 * global tensor, from its own pickle.  Two kinds, both pickled as wrapper
 * subclasses (_rebuild_wrapper_subclass: the global size, stride and
 * dtype) with a state of their own:
 *
 *   DTensor (FSDP2, torch.distributed.tensor)     state: a dict
 *     _local_tensor                  the one piece, a plain tensor
 *     _spec/placements, _spec/mesh   where it lies (below)
 *   ShardedTensor (FSDP1 SHARDED_STATE_DICT,      state: a 5-tuple
 *   torch.distributed._shard.sharded_tensor)
 *     0                              the rank's local shards: a list of
 *                                    Shard, each
 *       tensor                       the piece, a plain tensor
 *       metadata/shard_offsets       its box in the global tensor
 *       metadata/shard_sizes
 *       metadata/placement/_rank     the rank holding it: this one
 *     1                              ShardedTensorMetadata (every rank's
 *                                    boxes; the coverage check below the
 *                                    caller makes is what counts)
 *     2..4                           process group, sharding spec, rrefs
 *
 * A ShardedTensor's box is given; a DTensor's is computed from the
 * placements, the mesh's sizes and the rank's coordinate in it, as
 * DTensor computes them (compute_local_shape_and_global_offset, mesh
 * dimensions in order):
 *
 *   Shard(d) on mesh dim i of size k, coordinate c, current extent L:
 *     full  = ceil(L / k)
 *     start = min(c * full, L)         added to the piece's offset in d
 *     L     = min(L, start + full) - start
 *   Replicate() on mesh dim i: nothing (the piece is a replica)
 *
 * so torch.chunk's uneven splits (the last ranks short or empty) and 2-D
 * meshes (Shard on both, or Shard then Replicate) come out as torch has
 * them.  Partial() (a pending sum) and _StridedShard (FSDP over tensor
 * parallelism, its pieces interleaved) are refused: reading them needs
 * arithmetic, or a layout this reader does not model.  The piece found
 * must be the _local_tensor's shape, dtype and contiguous: so a file that
 * lies about its placements is refused rather than read wrong.
 */
#include "ckpt_ranks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RK_MESH_DIMS	8	/* mesh dimensions read */

static const struct ckpt_node *kid(const struct ckpt_node *dir,
				   const char *name)
{
	const struct ckpt_node *n = dir ? ckpt_node_child(dir, name) : NULL;

	return n && n->kind == CKPT_N_LINK ? n->target : n;
}

/* An int value node's value. */
static bool int_of(const struct ckpt_node *n, int64_t *out)
{
	char *end;

	if (!n || n->kind != CKPT_N_VALUE || !n->type ||
	    strcmp(n->type, "int") || !n->text || !n->textlen)
		return false;
	*out = strtoll(n->text, &end, 10);
	return end == n->text + n->textlen;
}

/* The ints of a sequence node (at most @max) into @v, their count or -1. */
static int ints_of(const struct ckpt_node *seq, int64_t *v, int max)
{
	if (!seq || seq->kind != CKPT_N_SEQ || seq->dir->nkids > (uint32_t)max)
		return -1;
	for (uint32_t i = 0; i < seq->dir->nkids; i++)
		if (!int_of(seq->dir->kids[i], &v[i]))
			return -1;
	return (int)seq->dir->nkids;
}

/* Is wrapper node @n's class @cls (a dotted name's last part)? */
static bool is_class(const struct ckpt_node *n, const char *cls)
{
	const char *t = n ? n->type : NULL;
	size_t k = t ? strlen(t) : 0, m = strlen(cls);

	return n && n->kind == CKPT_N_DIR && n->tensor && k >= m &&
	       !strcmp(t + k - m, cls) && (k == m || t[k - m - 1] == '.');
}

static bool is_st(const struct ckpt_node *n)
{
	return is_class(n, "ShardedTensor");
}

bool rk_is_sharded(const struct ckpt_node *n)
{
	return is_class(n, "DTensor") || is_st(n);
}

uint32_t rk_npieces(const struct ckpt_node *n)
{
	const struct ckpt_node *shards = is_st(n) ? kid(n, "0") : NULL;

	if (!is_st(n))
		return 1;
	return shards && shards->kind == CKPT_N_SEQ ? shards->dir->nkids : 0;
}

/* The piece must be a plain tensor of the box, dtype and contiguous. */
static int piece_ok(const struct ckpt_tensor *lt, const struct ckpt_tensor *g,
		    const struct rk_piece *p, const char *name,
		    const char *key, const char *what, struct diag *d)
{
	if (lt->dtype != g->dtype || lt->ndim != g->ndim ||
	    memcmp(lt->shape, p->size, g->ndim * sizeof(*p->size)))
		return diag_corrupt(d, lt->pkl_off, "%s: '%s': its %s is not "
				    "the piece its placement gives this rank",
				    name, key, what);
	if (lt->numel && (!lt->contiguous || lt->kind != CKPT_T_STRIDED))
		return diag_unsupported(d, lt->pkl_off, "%s: '%s': its %s is a "
					"view, not contiguous", name, key,
					what);
	return 0;
}

/* Local shard @i of ShardedTensor @st on rank @r. */
static int st_piece(const struct ckpt_node *st, const struct ckpt_tensor *g,
		    uint32_t r, uint32_t i, const char *name, const char *key,
		    struct rk_piece *p, struct diag *d)
{
	const struct ckpt_node *sh = kid(st, "0"), *md, *t;
	int64_t rank = -1;
	uint64_t at = st->val ? st->val->off : DIAG_NO_OFFSET;
	char ix[16];

	snprintf(ix, sizeof(ix), "%u", i);
	sh = kid(sh, ix);
	md = kid(sh, "metadata");
	t = kid(sh, "tensor");
	memset(p, 0, sizeof(*p));
	if (!t || t->kind != CKPT_N_TENSOR ||
	    ints_of(kid(md, "shard_offsets"), p->off, CKPT_MAX_DIMS) !=
	    g->ndim ||
	    ints_of(kid(md, "shard_sizes"), p->size, CKPT_MAX_DIMS) !=
	    g->ndim || !int_of(kid(kid(md, "placement"), "_rank"), &rank))
		return diag_corrupt(d, at, "%s: ShardedTensor '%s': local "
				    "shard %u has no tensor, box of %d "
				    "dimensions or placement", name, key, i,
				    g->ndim);
	if (rank != (int64_t)r)
		return diag_corrupt(d, at, "%s: ShardedTensor '%s': local "
				    "shard %u is placed on rank %lld, not this "
				    "file's rank %u", name, key, i,
				    (long long)rank, r);
	for (int k = 0; k < g->ndim; k++)
		if (p->off[k] < 0 || p->size[k] < 0 ||
		    p->off[k] > g->shape[k] - p->size[k])
			return diag_corrupt(d, at, "%s: ShardedTensor '%s': "
					    "local shard %u lies outside its "
					    "global shape", name, key, i);
	p->local = t->tensor;
	return piece_ok(t->tensor, g, p, name, key, "local shard", d);
}

/* Mesh dimension sizes (from _layout/axes/i/shape, each a product). */
static int mesh_sizes(const struct ckpt_node *mesh, int64_t *sz)
{
	const struct ckpt_node *axes = kid(kid(mesh, "_layout"), "axes");
	int64_t v[CKPT_MAX_DIMS];

	if (!axes || axes->kind != CKPT_N_SEQ ||
	    axes->dir->nkids > RK_MESH_DIMS)
		return -1;
	for (uint32_t i = 0; i < axes->dir->nkids; i++) {
		const struct ckpt_node *ax = axes->dir->kids[i];
		int m;

		ax = ax->kind == CKPT_N_LINK ? ax->target : ax;
		m = ints_of(kid(ax, "shape"), v, CKPT_MAX_DIMS);
		if (m < 0)
			return -1;
		sz[i] = 1;
		for (int j = 0; j < m; j++)
			sz[i] *= v[j] > 0 ? v[j] : 0;
	}
	return (int)axes->dir->nkids;
}

int rk_piece_of(const struct ckpt_node *dt, const struct ckpt_tensor *g,
		uint32_t r, uint32_t idx, const char *name, const char *key,
		struct rk_piece *p, struct diag *d)
{
	const struct ckpt_node *spec = kid(dt, "_spec"), *pl, *mesh, *loc;
	int64_t sizes[RK_MESH_DIMS], coord[RK_MESH_DIMS];
	const struct ckpt_tensor *o = dt->tensor;
	int nm, nc;

	if (o->dtype != g->dtype || o->ndim != g->ndim ||
	    memcmp(o->shape, g->shape, g->ndim * sizeof(*g->shape)))
		return diag_corrupt(d, dt->val ? dt->val->off : DIAG_NO_OFFSET,
				    "%s: '%s' has another dtype or global "
				    "shape than rank 0's: ranks of two "
				    "different runs?", name, key);
	if (is_st(dt))
		return st_piece(dt, g, r, idx, name, key, p, d);

	pl = kid(spec, "placements");
	mesh = kid(spec, "mesh");
	loc = kid(dt, "_local_tensor");
	if (!pl || pl->kind != CKPT_N_SEQ || !mesh || !loc ||
	    loc->kind != CKPT_N_TENSOR)
		return diag_corrupt(d, dt->val ? dt->val->off : DIAG_NO_OFFSET,
				    "%s: DTensor '%s' has no _local_tensor, "
				    "placements or mesh", name, key);
	nm = mesh_sizes(mesh, sizes);
	nc = ints_of(kid(mesh, "_coordinate_on_dim"), coord, RK_MESH_DIMS);
	if (nm < 0 || nc != nm || pl->dir->nkids != (uint32_t)nm)
		return diag_corrupt(d, mesh->val ? mesh->val->off :
				    DIAG_NO_OFFSET, "%s: DTensor '%s': its "
				    "mesh gives no size and coordinate for "
				    "each of its %u placements (is the rank "
				    "outside the mesh?)", name, key,
				    pl->dir->nkids);
	memset(p, 0, sizeof(*p));
	memcpy(p->size, g->shape, g->ndim * sizeof(*g->shape));
	for (int i = 0; i < nm; i++) {
		const struct ckpt_node *pi = kid(pl, pl->dir->kids[i]->name);
		const char *ty = pi && pi->type ? pi->type : "?";
		int64_t dim, full, start;

		if (!strcmp(ty, "Replicate")) {
			p->replica = true;
			continue;
		}
		if (strcmp(ty, "Shard") || !int_of(kid(pi, "dim"), &dim) ||
		    dim < 0 || dim >= g->ndim)
			return diag_unsupported(d, pi && pi->val ? pi->val->off :
						DIAG_NO_OFFSET, "%s: DTensor "
						"'%s' is placed %s on mesh "
						"dimension %d: only Shard(d) "
						"and Replicate() are read",
						name, key, ty, i);
		if (sizes[i] < 1 || coord[i] < 0 || coord[i] >= sizes[i])
			return diag_corrupt(d, mesh->val ? mesh->val->off :
					    DIAG_NO_OFFSET, "%s: DTensor '%s': "
					    "coordinate %lld outside mesh "
					    "dimension %d of size %lld", name,
					    key, (long long)coord[i], i,
					    (long long)sizes[i]);
		full = (p->size[dim] + sizes[i] - 1) / sizes[i];
		start = coord[i] * full < p->size[dim] ? coord[i] * full :
			p->size[dim];
		p->off[dim] += start;
		p->size[dim] = (p->size[dim] < start + full ? p->size[dim] :
				start + full) - start;
	}
	p->local = loc->tensor;
	return piece_ok(loc->tensor, g, p, name, key, "_local_tensor", d);
}
