/*
 * ckpt_dcp_save.h - what the three parts of the DCP writer share:
 * ckpt_dcp_save.c flattens the state dict and writes the items,
 * ckpt_dcp_split.c cuts them into ranks' chunks and places them,
 * ckpt_dcp_meta.c writes the .metadata that names them.  Internal to
 * core/ckpt.
 */
#ifndef PT_CKPT_CKPT_DCP_SAVE_H
#define PT_CKPT_CKPT_DCP_SAVE_H

#include <inttypes.h>

#include "ckpt/ckpt_int.h"

/* rank R's file: __R_0.distcp (FileSystemWriter's prefix, file 0) */
#define DCP_FILE_FMT	"__%" PRIu32 "_0.distcp"
#define DCP_FILE_MAX	32	/* its name's bytes, NUL included */

/* One element of a key's path: fqn[off, off + len), an int if @index. */
struct dcp_elem {
	uint32_t off, len;
	bool index;
};

/* One key of the flattened state dict. */
struct dcp_leaf {
	const char *fqn;	/* arena */
	uint32_t len;
	uint32_t path, npath;	/* its elements: the path array's [path ...] */
	const struct ckpt_node *x;	/* a tensor node, or a value */
	bool tensor;
	uint32_t item, nitem;	/* its items: the plan's it[item ...], in
				   the order of its chunks list */
};

/* One item: a value, a 0-dim tensor, or a piece of a tensor along dim 0. */
struct dcp_item {
	uint32_t leaf;		/* its key: the leaves' [leaf] */
	uint32_t rank;		/* its file */
	int64_t row, rows;	/* 1+ dims: rows [row, row + rows) */
	uint64_t off, size;	/* where it lies in its file */
};

/* Where every item goes (ckpt_dcp_split()). */
struct dcp_plan {
	uint32_t ranks;		/* files written: 1, or M > 1 */
	struct dcp_item *it;	/* every key's items, key after key */
	uint32_t nit;
	uint32_t *wr;		/* the items in the order written: by rank,
				   values first, then tensors, in key order */
	uint32_t *keys;		/* M > 1: the keys in state_dict_metadata's
				   order (by the first rank to hold each) */
};

/*
 * The items of the @n keys @v as @ranks ranks save them (0 or 1: one
 * item per key, the whole tensor), into @p; sets each leaf's item and
 * nitem.  0 or -errno with @d set.  ckpt_dcp_plan_release() frees @p.
 */
int ckpt_dcp_split(struct dcp_leaf *v, uint32_t n, uint32_t ranks,
		   struct dcp_plan *p, struct diag *d);
void ckpt_dcp_plan_release(struct dcp_plan *p);

/* The chunk index of item @i (its place in its key's chunks list). */
static inline uint32_t dcp_chunk(const struct dcp_leaf *v,
				 const struct dcp_plan *p, uint32_t i)
{
	return i - v[p->it[i].leaf].item;
}

/*
 * The .metadata pickle of the @n keys @v (their paths in @el) and the
 * items of @p, their offsets set: malloc'd into *@pkl, *@len.  0 or
 * -errno with @d set.
 */
int ckpt_dcp_metadata(const struct dcp_leaf *v, uint32_t n,
		      const struct dcp_elem *el, const struct dcp_plan *p,
		      unsigned char **pkl, size_t *len, struct diag *d);

#endif
