/*
 * ckpt_ranks_dt.c - where a rank's DTensor piece lies in the global
 * tensor, from its own pickle: the placements, the mesh's sizes and the
 * rank's coordinate in it, as DTensor computes them
 * (compute_local_shape_and_global_offset, mesh dimensions in order):
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

bool rk_is_dtensor(const struct ckpt_node *n)
{
	const char *t = n ? n->type : NULL;
	size_t k = t ? strlen(t) : 0;

	return n && n->kind == CKPT_N_DIR && n->tensor && k >= 7 &&
	       !strcmp(t + k - 7, "DTensor") && (k == 7 || t[k - 8] == '.');
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
		const char *name, const char *key, struct rk_piece *p,
		struct diag *d)
{
	const struct ckpt_node *spec = kid(dt, "_spec"), *pl, *mesh, *loc;
	int64_t sizes[RK_MESH_DIMS], coord[RK_MESH_DIMS];
	const struct ckpt_tensor *o = dt->tensor, *lt;
	int nm, nc;

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
	if (o->dtype != g->dtype || o->ndim != g->ndim ||
	    memcmp(o->shape, g->shape, g->ndim * sizeof(*g->shape)))
		return diag_corrupt(d, dt->val ? dt->val->off : DIAG_NO_OFFSET,
				    "%s: DTensor '%s' has another dtype or "
				    "global shape than rank 0's: ranks of "
				    "two different runs?", name, key);
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
	lt = loc->tensor;
	if (lt->dtype != g->dtype || lt->ndim != g->ndim ||
	    memcmp(lt->shape, p->size, g->ndim * sizeof(*p->size)))
		return diag_corrupt(d, lt->pkl_off, "%s: DTensor '%s': its "
				    "_local_tensor is not the piece its "
				    "placements give this rank", name, key);
	if (lt->numel && (!lt->contiguous || lt->kind != CKPT_T_STRIDED))
		return diag_unsupported(d, lt->pkl_off, "%s: DTensor '%s': "
					"its _local_tensor is a view, not "
					"contiguous", name, key);
	p->local = lt;
	return 0;
}
