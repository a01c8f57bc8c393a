/*
 * ckpt_member.c - what the member files of a checkpoint of many files
 * give the layers above: which files hold a storage's bytes (is each still
 * the file opened? who may read it?), and the folder's other files.
 *
 * The source (source/source.h) opened every member and pinned its
 * identity, owner and mode; this file maps the model onto members:
 *
 *   checkpoint   a storage's bytes come from     a node outside a storage
 *   one file     c->fd (none here: the caller's) c->fd
 *   HF folder    its shard                       its shard, else the index
 *   DCP          the data files of its chunks    every data file
 *
 * A file read from several members may be read only by whoever may read
 * each of them (src_access_narrow()), so a mount with -o allow_other shows
 * no byte the OS would not.
 */
#include "ckpt_int.h"
#include "ckpt_dcp.h"
#include "source/source.h"

#include <errno.h>

/* Call @fn for each member storage @s's bytes come from; stop at its
 * first non-zero return.  0 members: @c's own file (or not of many). */
static int each_member(const struct ckpt *c, const struct ckpt_storage *s,
		       int (*fn)(const struct ckpt *c, uint32_t m, void *arg),
		       void *arg)
{
	const struct ckpt_dcp *p = c->dcp;
	uint32_t last = UINT32_MAX;
	int rc = 0;

	if (!c->src || !s)
		return 0;
	if (c->hf) {
		const struct ckpt_shard *sh = ckpt_storage_shard(c, s);

		return sh && sh->c ? fn(c, sh->member, arg) : 0;
	}
	if (!p || !p->first || s->index >= c->nstorages)
		return 0;
	for (uint32_t k = p->first[s->index];
	     k < p->first[s->index + 1] && !rc; k++) {
		const struct dcp_chunk *ch = &p->chunks[k];
		const struct dcp_file *f;

		if (ch->item == DCP_NO_ITEM)
			continue;
		f = &p->files[p->items[ch->item].file];
		if (f->member == UINT32_MAX || f->member == last)
			continue;
		last = f->member;
		rc = fn(c, f->member, arg);
	}
	return rc;
}

static int fresh_one(const struct ckpt *c, uint32_t m, void *arg)
{
	return src_fresh(c->src, m, arg);
}

int ckpt_storage_unchanged(const struct ckpt *c, const struct ckpt_storage *s,
			   struct diag *d)
{
	return each_member(c, s, fresh_one, d);
}

static int narrow_one(const struct ckpt *c, uint32_t m, void *arg)
{
	src_access_narrow(arg, src_at(c->src, m));
	return 0;
}

/* Start from member 0 (the index, .metadata): what names everything. */
static bool access_init(const struct ckpt *c, struct src_access *a)
{
	const struct src_member *m;

	if (!c->src || !src_count(c->src))
		return false;
	m = src_at(c->src, 0);
	*a = (struct src_access){ m->uid, m->gid, m->mode };
	return true;
}

bool ckpt_storage_access(const struct ckpt *c, const struct ckpt_storage *s,
			 struct src_access *a)
{
	if (!access_init(c, a))
		return false;
	each_member(c, s, narrow_one, a);
	return true;
}

bool ckpt_node_access(const struct ckpt *c, const struct ckpt_node *n,
		      struct src_access *a)
{
	if (!access_init(c, a))
		return false;
	if (n->kind == CKPT_N_TENSOR && n->tensor)
		return ckpt_storage_access(c, n->tensor->storage, a);
	if (c->hf) {
		uint32_t k = ckpt_hf_node_shard(c, n);

		if (k != UINT32_MAX && c->hf->shards[k].c)
			narrow_one(c, c->hf->shards[k].member, a);
	} else if (c->dcp && ckpt_dcp_in_value(c, n)) {
		/* a value's item lies in some data file: the strictest (a
		   folder's names are .metadata's, and stay its) */
		for (uint32_t i = 0; i < c->dcp->nfiles; i++)
			if (c->dcp->files[i].member != UINT32_MAX)
				narrow_one(c, c->dcp->files[i].member, a);
	}
	return true;
}

bool ckpt_folder_files(const struct ckpt *c, uint32_t *n)
{
	*n = c->hf ? c->hf->nfiles : 0;
	return c->hf != NULL;
}

const struct src_member *ckpt_folder_file(const struct ckpt *c, uint32_t i)
{
	uint32_t m = c->hf && i < c->hf->nfiles ? c->hf->files[i].member :
		     UINT32_MAX;

	return m == UINT32_MAX ? NULL : src_at(c->src, m);
}

int ckpt_member_dir(const struct ckpt *c, const char *name, const char **leaf)
{
	struct diag d;

	diag_init(&d, NULL);
	return c->src ? src_dir_of(c->src, name, leaf, &d) : -ENOENT;
}
