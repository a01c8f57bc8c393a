/*
 * ovl_revert.h - what the two halves of `ptfs revert` share: the plan
 * (ovl_undo.c finds the paths in both models, maps who stands for whom,
 * checks, journals) and the moves (ovl_revert.c puts the checkpoint's
 * nodes back).  Not for callers: ovl.h has ovl_revert().
 */
#ifndef PT_OVL_OVL_REVERT_H
#define PT_OVL_OVL_REVERT_H

#include "ovl_int.h"

/* One path being reverted. */
struct rv_tgt {
	const char *path;	/* as asked ("" the root) */
	struct ckpt_node *dir;	/* its parent in the mount (NULL: root) */
	char *name;		/* its last name (NULL: root) */
	const struct ckpt_node *o;	/* the checkpoint's node there */
	struct ckpt_node *x;	/* the mount's node there */
};

struct rv {
	struct ovl *v;
	struct ckpt *c;		/* the mount's model */
	const struct ckpt *p;	/* the checkpoint's, pristine */
	struct diag *d;
	struct rv_tgt *t;
	int nt;
	uint8_t *live;		/* by node id, before anything moved */
	uint8_t *osub;		/* by pristine node id: under a path in the
				   checkpoint */
	uint8_t *keep;		/* by node id: in the paths afterwards (the
				   nodes osub's come back as) */
	uint8_t *under;		/* by node id: under a path now */
	uint8_t *stor;		/* by storage index: viewed under a path in
				   the checkpoint */
	struct ckpt_node **xfer;	/* by pristine id: the new file that
					   took that node's place */
	struct ckpt_node **links;	/* the checkpoint's link nodes */
	uint32_t nlinks;
};


/* Is @n in the tree now (not dead, in its parent's slot up to the root)? */
bool rv_live(const struct rv *R, const struct ckpt_node *n);

/* The live node that holds the checkpoint's node @pid now, or NULL. */
struct ckpt_node *rv_carrier(const struct rv *R, uint32_t pid);

/* Is storage @s staged (an overlay copy, a new dtype, a data file)? */
bool rv_staged(const struct ovl *v, const struct ckpt_storage *s);

/* Does tensor @t view storage @i (itself, or through a quantizer)? */
bool rv_views(const struct ckpt_tensor *t, uint32_t i);

/* Make every target what the checkpoint holds, then the storages marked
 * in R->stor.  Call after the checks and the journal record. */
int rv_apply(const struct rv *R);

#endif
