/*
 * ckpt_dcp_save.h - what the two halves of the DCP writer share:
 * ckpt_dcp_save.c flattens the state dict and writes the items,
 * ckpt_dcp_meta.c the .metadata that names them.  Internal to core/ckpt.
 */
#ifndef PT_CKPT_CKPT_DCP_SAVE_H
#define PT_CKPT_CKPT_DCP_SAVE_H

#include "ckpt/ckpt_int.h"

#define DCP_DATA_FILE	"__0_0.distcp"	/* every item, rank 0's one file */

/* One element of a key's path: fqn[off, off + len), an int if @index. */
struct dcp_elem {
	uint32_t off, len;
	bool index;
};

/* One key of the flattened state dict, and its item. */
struct dcp_leaf {
	const char *fqn;	/* arena */
	uint32_t len;
	uint32_t path, npath;	/* its elements: the path array's [path ...] */
	const struct ckpt_node *x;	/* a tensor node, or a value */
	bool tensor;
	uint64_t off, size;	/* its item in DCP_DATA_FILE */
};

/*
 * The .metadata pickle of the @n keys @v (their paths in @el): malloc'd
 * into *@pkl, *@len.  0 or -errno with @d set.
 */
int ckpt_dcp_metadata(const struct dcp_leaf *v, uint32_t n,
		      const struct dcp_elem *el, unsigned char **pkl,
		      size_t *len, struct diag *d);

#endif
