/*
 * ckpt_fmt_dcp.c - the descriptor of a torch.distributed.checkpoint
 * directory (ckpt_dcp*.c read it, ckpt_dcp_wb.c writes it back), and the
 * edits it takes.
 *
 *   bid        a folder holding .metadata (or __0.metadata: a save
 *              without collectives), or a file named so
 *   write-back the .distcp files whose chunks changed, anew, with the
 *              same items in the same places, and .metadata with the keys
 *              where the tree has them (ckpt_dcp_wb.c)
 *   files      the directory's other files (config.json ...), shown under
 *              .ptfs/files/ (ckpt_dcp_files.c); no index over parts
 *
 * So it takes same-size edits of a tensor's bytes (through its file or
 * its .npy view, in place or a whole .npy of the same dtype and shape),
 * and keys renamed, moved or removed.  Everything else is refused when it
 * is made, with one line (EPERM): a new key (a tensor needs a new item in
 * some data file), an attribute (a dtype or shape is every chunk's), a
 * .npy of another shape, a value or anything inside one (its item is a
 * pickle written as it was), the .txt view, and a list's entries
 * (positions: one removed would move the others').
 */
#include "ckpt/ckpt_int.h"
#include "ckpt_dcp.h"
#include "ckpt/ckpt_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Is @name a DCP metadata file: ".metadata", or a rank's "__R.metadata"? */
static bool bid_name(const char *name)
{
	return ckpt_dcp_meta_name(name);
}

/* one .metadata, or one per rank (a save without collectives) */
static bool bid_dir(int dirfd)
{
	struct stat st;

	return !fstatat(dirfd, ".metadata", &st, AT_SYMLINK_NOFOLLOW) ||
	       !fstatat(dirfd, "__0.metadata", &st, AT_SYMLINK_NOFOLLOW);
}

static int open_dcp(struct ckpt *c, unsigned flags, struct diag *d)
{
	const char *base = strrchr(c->path, '/');

	return ckpt_dcp_open(c, (flags & CKPT_OPEN_IS_DIR) ? NULL :
			     base ? base + 1 : c->path, flags, d);
}

static int shape(const struct ckpt *c, const char *what, struct diag *d)
{
	(void)c;
	return diag_errno(d, -EPERM, "%s: a DCP directory takes tensor "
			  "bytes (the file or its .npy), and keys renamed or "
			  "removed; attributes, values and .txt views are "
			  "written back as they are", what);
}

/* a .npy's data is the tensor's bytes; another shape is a new tensor */
static int npy(const struct ckpt *c, const char *what, bool reshape,
	       struct diag *d)
{
	(void)c;
	if (!reshape)
		return 0;
	return diag_errno(d, -EPERM, "%s.npy: another shape would be a new "
			  "tensor, and a DCP directory keeps each tensor's "
			  "shape (its chunks are slabs of it); write a .npy "
			  "of the tensor's shape, or ptrepack the directory",
			  what);
}

static int dir(const struct ckpt *c, const struct ckpt_node *n,
	       struct diag *d)
{
	if (ckpt_dcp_in_value(c, n))
		return diag_errno(d, -EPERM, "%s: inside a value of a DCP "
				  "directory, which is written back as it is",
				  n->name);
	if (n->kind == CKPT_N_SEQ)
		return diag_errno(d, -EPERM, "%s: a list in a DCP directory "
				  "keeps its entries: one renamed or removed "
				  "would move the others", n->name);
	return 0;
}

static int add(const struct ckpt *c, const char *name, struct diag *d)
{
	(void)c;
	return diag_errno(d, -EPERM, "%s: a DCP directory takes no new keys "
			  "(a new tensor needs an item in a data file); "
			  "ptrepack writes the directory anew", name);
}

static int data(const struct ckpt *c, const struct ckpt_storage *s,
		struct diag *d)
{
	if (ckpt_pieced_tensor(c, s))
		return 0;
	return diag_errno(d, -EPERM, "storage %s: a tensor inside a value of "
			  "a DCP directory is written back as it is", s->key);
}

static const struct ckpt_rules rules = {
	.shape = shape, .dir = dir, .add = add, .data = data, .npy = npy,
};

/* user.dcp.chunks: where each chunk of the tensor lies (an xattr value
 * is at most 64 KiB; a tensor of more chunks shows none) */
static void tensor_attrs(const struct ckpt *c, const struct ckpt_tensor *t,
			 ckpt_attr_fn fn, void *arg)
{
	ckpt_dcp_chunks_attr(c, t, "user.dcp.chunks", fn, arg);
}

static int many_dir(const struct ckpt *c, const char **dir,
		    const char **commit)
{
	const char *slash = strrchr(c->dcp->meta_path, '/');

	*dir = c->dcp->dir;
	*commit = slash ? slash + 1 : c->dcp->meta_path;
	return c->dcp->dirfd;
}

static bool many_file(const struct ckpt *c, uint32_t i, const char **name,
		      int *fd)
{
	if (i >= c->dcp->nfiles)
		return false;
	*name = c->dcp->files[i].name;
	*fd = c->dcp->files[i].fd;
	return true;
}

/* A storage's bytes: the data files of its chunks.  A value's (its item
 * lies in some data file): every data file.  A folder's names are
 * .metadata's, and stay its. */
static int members(const struct ckpt *c, const struct ckpt_storage *s,
		   const struct ckpt_node *n, ckpt_member_fn fn, void *arg)
{
	const struct ckpt_dcp *p = c->dcp;
	uint32_t last = UINT32_MAX, b = 0, e = 0;
	int rc = 0;

	if (n && ckpt_dcp_in_value(c, n)) {
		for (uint32_t i = 0; i < p->nfiles && !rc; i++)
			if (p->files[i].member != UINT32_MAX)
				rc = fn(c, p->files[i].member, arg);
		return rc;
	}
	if (s && p->first && s->index < c->nstorages) {
		b = p->first[s->index];
		e = p->first[s->index + 1];
	}
	for (uint32_t k = b; k < e && !rc; k++) {
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

static const char *readonly_why(const struct ckpt *c)
{
	if (!strcmp(c->dcp->meta_path + strlen(c->dcp->dir), "/.metadata"))
		return NULL;
	return "DCP directories saved without collectives (one "
	       "__R.metadata per rank)";
}

static int save(struct ckpt *c, const char *target,
		const struct ckpt_write_opts *o, const struct stat *like,
		struct diag *d)
{
	(void)target;
	(void)like;
	return ckpt_dcp_wb(c, o, d);
}

const struct ckpt_fmt ckpt_fmt_dcp = {
	.id = CKPT_DCP, .name = "dcp", .files = "DCP directories",
	.one = "a DCP directory", .caps = CKPT_CAP_WRITE | CKPT_CAP_MANY,
	.commit = ".metadata", .converted = "",
	.bid_name = bid_name, .bid_dir = bid_dir, .open = open_dcp,
	.rules = &rules, .tensor_attrs = tensor_attrs,
	.verify = ckpt_dcp_verify, .storage_data = ckpt_dcp_storage_data,
	.pieced = dcp_pieced, .pieced_tensor = dcp_tensor,
	.pieced_where = dcp_where, .pieced_read = ckpt_dcp_read,
	.close = ckpt_dcp_release, .many_dir = many_dir,
	.many_file = many_file, .members = members,
	.open_folder_files = ckpt_dcp_open_files,
	.folder_file = ckpt_dcp_file_member,
	.folder_entry = ckpt_dcp_file_entry,
	.readonly_why = readonly_why, .save = save,
};
