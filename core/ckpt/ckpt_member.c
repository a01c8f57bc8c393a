/*
 * ckpt_member.c - what the member files of a checkpoint of many files
 * give the layers above: which files hold a storage's bytes (is each still
 * the file opened? who may read it?), and the folder's other files (an HF
 * folder's, a DCP directory's: config.json, tokenizer files).
 *
 * The source (source/source.h) opened every member and pinned its
 * identity, owner and mode; this file maps the model onto members:
 *
 *   checkpoint   a storage's bytes come from     a node outside a storage
 *   one file     c->fd (none here: the caller's) c->fd
 *   HF folder    its shard                       its shard, else the index
 *   DCP          the data files of its chunks    a value: every data file
 *
 * (each format's members hook, ckpt_fmt_hf.c and ckpt_fmt_dcp.c).
 *
 * A file read from several members may be read only by whoever may read
 * each of them (src_access_narrow()), so a mount with -o allow_other shows
 * no byte the OS would not.
 */
#include "ckpt_int.h"
#include "ckpt_format.h"
#include "source/source.h"

#include <errno.h>

/* Call @fn for each member storage @s (or node @n) is read from. */
static int each_member(const struct ckpt *c, const struct ckpt_storage *s,
		       const struct ckpt_node *n, ckpt_member_fn fn, void *arg)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return c->src && m->members ? m->members(c, s, n, fn, arg) : 0;
}

static int fresh_one(const struct ckpt *c, uint32_t m, void *arg)
{
	return src_fresh(c->src, m, arg);
}

int ckpt_storage_unchanged(const struct ckpt *c, const struct ckpt_storage *s,
			   struct diag *d)
{
	return s ? each_member(c, s, NULL, fresh_one, d) : 0;
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
	if (s)
		each_member(c, s, NULL, narrow_one, a);
	return true;
}

bool ckpt_node_access(const struct ckpt *c, const struct ckpt_node *n,
		      struct src_access *a)
{
	if (n->kind == CKPT_N_TENSOR && n->tensor)
		return ckpt_storage_access(c, n->tensor->storage, a);
	if (!access_init(c, a))
		return false;
	each_member(c, NULL, n, narrow_one, a);
	return true;
}

bool ckpt_all_access(const struct ckpt *c, struct src_access *a)
{
	if (!access_init(c, a))
		return false;
	for (uint32_t i = 0; i < c->nstorages; i++)
		each_member(c, c->storages[i], NULL, narrow_one, a);
	return true;
}

int ckpt_folder_files(struct ckpt *c, uint32_t *n)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);
	int rc;

	*n = 0;
	if (!m->open_folder_files)
		return 0;
	rc = m->open_folder_files(c);
	if (rc < 0)
		return rc;
	*n = (uint32_t)rc;
	return 1;
}

const struct src_member *ckpt_folder_file(const struct ckpt *c, uint32_t i)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);
	uint32_t k = m->folder_file ? m->folder_file(c, i) : UINT32_MAX;

	return k == UINT32_MAX ? NULL : src_at(c->src, k);
}

int ckpt_many_dir(const struct ckpt *c, const char **dir,
		  const char **commit)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->many_dir ? m->many_dir(c, dir, commit) : -1;
}

bool ckpt_many_file(const struct ckpt *c, uint32_t i, const char **name,
		    int *fd)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->many_file && m->many_file(c, i, name, fd);
}

const char *ckpt_readonly_why(const struct ckpt *c)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	if (c->remote)
		return "remote checkpoints";
	if (!(m->caps & CKPT_CAP_WRITE))
		return m->files;
	return m->readonly_why ? m->readonly_why(c) : NULL;
}

int ckpt_member_dir(const struct ckpt *c, const char *name, const char **leaf)
{
	struct diag d;

	diag_init(&d, NULL);
	return c->src ? src_dir_of(c->src, name, leaf, &d) : -ENOENT;
}
