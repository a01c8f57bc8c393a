/*
 * ovl_dcp.c - what a mounted DCP directory takes (rules for ovl_many.c).
 * Its write-back (core/ckpt/ckpt_dcp_wb.c) writes anew the .distcp files
 * whose chunks changed, with the same items in the same places, and
 * .metadata with the keys where the tree has them: same-size edits of a
 * tensor's bytes, and keys renamed, moved or removed.  Everything else
 * is refused when it is made, with one line (EPERM): a new key (a tensor
 * needs a new item in some data file), an attribute (a dtype or shape is
 * every chunk's), a value or anything inside one (its item is a pickle
 * written as it was), a view, and a list's entries (positions: one
 * removed would move the others' paths).
 */
#include "ovl_int.h"

#include <errno.h>

int ovl_dcp_shape(struct ovl *v, const char *what, struct diag *d)
{
	(void)v;
	return diag_errno(d, -EPERM, "%s: a DCP directory takes tensor "
			  "bytes, and keys renamed or removed; attributes, "
			  "values and views are written back as they are",
			  what);
}

int ovl_dcp_dir(struct ovl *v, const struct ckpt_node *dir, struct diag *d)
{
	if (ckpt_dcp_in_value(v->c, dir))
		return diag_errno(d, -EPERM, "%s: inside a value of a DCP "
				  "directory, which is written back as it is",
				  dir->name);
	if (dir->kind == CKPT_N_SEQ)
		return diag_errno(d, -EPERM, "%s: a list in a DCP directory "
				  "keeps its entries: one renamed or removed "
				  "would move the others", dir->name);
	return 0;
}

int ovl_dcp_add(struct ovl *v, const char *name, struct diag *d)
{
	(void)v;
	return diag_errno(d, -EPERM, "%s: a DCP directory takes no new keys "
			  "(a new tensor needs an item in a data file); "
			  "ptrepack writes the directory anew", name);
}

int ovl_dcp_data(struct ovl *v, const struct ckpt_storage *s,
		 struct diag *d)
{
	if (ckpt_dcp_tensor(v->c, s))
		return 0;
	return diag_errno(d, -EPERM, "storage %s: a tensor inside a value of "
			  "a DCP directory is written back as it is", s->key);
}
