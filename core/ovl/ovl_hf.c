/*
 * ovl_hf.c - a mounted sharded folder's edits and files.  Its write-back
 * (core/ckpt/ckpt_hfsave.c) writes anew the shards whose storages or
 * top-level keys changed, and the index.  What it cannot write is
 * refused when the edit is made, with one line (EPERM), instead of
 * failing the write-back or being lost in it: an edit below the top
 * level (a folder's keys are dotted names, no directories), a directory,
 * an attribute of a tensor read from a shard, a value, a view of a
 * tensor, and any edit of a legacy (torch < 1.6) shard, which the folder
 * write-back does not rewrite.  A folder of safetensors shards takes
 * what a safetensors file takes (ovl_st.c).
 */
#include "ovl_int.h"

#include <errno.h>
#include <string.h>

int ovl_hf_shape(struct ovl *v, const char *what, struct diag *d)
{
	if (!v->c->hf)
		return 0;
	return diag_errno(d, -EPERM, "%s: a sharded folder takes tensor "
			  "bytes, and keys of its top level renamed, removed "
			  "or added; attributes of its tensors, values and "
			  "views are written back as they are", what);
}

/* Is shard @sh one the folder write-back rewrites (zip, safetensors)? */
static bool rewritten(const struct ckpt_shard *sh)
{
	return !sh->c || sh->c->format == CKPT_ZIP ||
	       sh->c->format == CKPT_SAFETENSORS;
}

/* A shard not written back in a folder (a legacy one), or NULL. */
static const struct ckpt_shard *legacy_shard(const struct ckpt_hf *hf)
{
	for (uint32_t i = 0; i < hf->nshards; i++)
		if (!rewritten(&hf->shards[i]))
			return &hf->shards[i];
	return NULL;
}

int ovl_hf_dir(struct ovl *v, const struct ckpt_node *dir, struct diag *d)
{
	const struct ckpt_hf *hf = v->c->hf;
	const struct ckpt_shard *sh;

	if (!hf)
		return 0;
	if (dir != v->c->root)
		return ovl_hf_shape(v, dir->name, d);
	sh = legacy_shard(hf);
	if (sh)
		return diag_errno(d, -EPERM, "%s: a %s shard is not written "
				  "back in a folder, so its keys stay as they "
				  "are; convert it with ptrepack first",
				  sh->path, ckpt_format_name(sh->c->format));
	return 0;
}

bool ovl_hf_st(const struct ovl *v)
{
	const struct ckpt_hf *hf = v->c->hf;
	uint32_t n = 0;

	for (uint32_t i = 0; hf && i < hf->nshards; i++)
		n += hf->shards[i].c &&
		     hf->shards[i].c->format == CKPT_SAFETENSORS;
	return hf && n && n == hf->nshards - hf->nabsent;
}

int ovl_hf_data(struct ovl *v, const struct ckpt_storage *s,
		struct diag *d)
{
	const struct ckpt_hf *hf = v->c->hf;

	if (!hf)
		return 0;
	for (uint32_t i = 0; i < hf->nshards; i++) {
		const struct ckpt_shard *sh = &hf->shards[i];

		if (s->index < sh->storage0 ||
		    s->index - sh->storage0 >= sh->nstorages || rewritten(sh))
			continue;
		return diag_errno(d, -EPERM, "%s: a %s shard is not written "
				  "back in a folder; convert it with ptrepack "
				  "first", sh->path,
				  ckpt_format_name(sh->c->format));
	}
	return 0;
}
