/*
 * ckpt_fmt_hf.c - the descriptor of a Hugging Face sharded folder (an
 * index over shard files: ckpt_hfdir.c, ckpt_hfindex.c, ckpt_shards.c;
 * written back by ckpt_hfsave.c), and the edits it takes.
 *
 *   bid        a file named *.index.json (or *.index.VARIANT.json), or
 *              any folder no other format bids for (its open says why
 *              not, when it has no index)
 *   parts      the shards, in the order transformers loads them; each a
 *              checkpoint of its own (zip, legacy or safetensors)
 *   findings   where the index and the shards disagree (ptverify)
 *   write-back the shards whose storages or top-level keys changed,
 *              anew, then the index (ckpt_hfsave.c)
 *
 * What the write-back cannot write is refused when the edit is made, with
 * one line (EPERM): an edit below the top level (a folder's keys are
 * dotted names, no directories), a directory, an attribute of a tensor
 * read from a shard, a value, a view of a tensor, and any edit of a
 * legacy (torch < 1.6) shard, which the folder write-back does not
 * rewrite.  A folder of safetensors shards takes what a safetensors file
 * takes (ckpt_st_rules).
 */
#include "ckpt/ckpt_int.h"
#include "ckpt_hf_int.h"
#include "source/source.h"
#include "ckpt/ckpt_format.h"

#include <errno.h>
#include <string.h>

extern const struct ckpt_rules ckpt_st_rules;

static bool bid_name(const char *base)
{
	return ckpt_hf_index_name(base);
}

static bool bid_dir(int dirfd)
{
	(void)dirfd;
	return true;
}

static int open_hf(struct ckpt *c, unsigned flags, struct diag *d)
{
	return ckpt_hf_open(c, flags & CKPT_OPEN_IS_DIR, d);
}

/* Is shard @sh one the folder write-back rewrites (zip, safetensors)? */
static bool rewritten(const struct ckpt_shard *sh)
{
	return !sh->c || (ckpt_can(sh->c, CKPT_CAP_WRITE) &&
			  ckpt_fmt(sh->c)->id != CKPT_LEGACY);
}

/* Are all the shards there safetensors files? */
static bool all_st(const struct ckpt *c)
{
	const struct ckpt_hf *hf = c->hf;
	uint32_t n = 0;

	for (uint32_t i = 0; i < hf->nshards; i++)
		n += hf->shards[i].c &&
		     ckpt_fmt(hf->shards[i].c) == &ckpt_fmt_safetensors;
	return n && n == hf->nshards - hf->nabsent;
}

static int shape(const struct ckpt *c, const char *what, struct diag *d)
{
	(void)c;
	return diag_errno(d, -EPERM, "%s: a sharded folder takes tensor "
			  "bytes (the file or its .npy), and keys of its top "
			  "level renamed, removed or added; attributes of its "
			  "tensors, values and .txt views are written back as "
			  "they are", what);
}

/* a .npy's data is the tensor's bytes (its shard's data rule still
   holds); another shape would be a new tensor in the key's place */
static int npy(const struct ckpt *c, const char *what, bool reshape,
	       struct diag *d)
{
	return reshape ? shape(c, what, d) : 0;
}

static int dir(const struct ckpt *c, const struct ckpt_node *n,
	       struct diag *d)
{
	const struct ckpt_hf *hf = c->hf;

	if (n != c->root)
		return shape(c, n->name, d);
	for (uint32_t i = 0; i < hf->nshards; i++)
		if (!rewritten(&hf->shards[i]))
			return diag_errno(d, -EPERM, "%s: a %s shard is not "
					  "written back in a folder, so its keys "
					  "stay as they are; convert it with "
					  "ptrepack first", hf->shards[i].path,
					  ckpt_fmt(hf->shards[i].c)->name);
	return 0;
}

static int data(const struct ckpt *c, const struct ckpt_storage *s,
		struct diag *d)
{
	const struct ckpt_shard *sh = ckpt_storage_shard(c, s);

	if (!sh || rewritten(sh))
		return 0;
	return diag_errno(d, -EPERM, "%s: a %s shard is not written back in "
			  "a folder; convert it with ptrepack first", sh->path,
			  ckpt_fmt(sh->c)->name);
}

static int mkdir_rule(const struct ckpt *c, const char *name, struct diag *d)
{
	if (all_st(c))
		return ckpt_st_rules.mkdir(c, name, d);
	return diag_errno(d, -EPERM, "%s: a sharded folder holds no "
			  "directories, only tensors (a '.' in a name is how "
			  "its keys nest)", name);
}

static int key(const struct ckpt *c, const char *k, size_t len,
	       struct diag *d)
{
	return all_st(c) ? ckpt_st_rules.key(c, k, len, d) : 0;
}

static int dtype(const struct ckpt *c, const struct ckpt_dtype *dt,
		 struct diag *d)
{
	return all_st(c) ? ckpt_st_rules.dtype(c, dt, d) : 0;
}

static int tensor(const struct ckpt *c, const struct ckpt_tensor *t,
		  const char *name, struct diag *d)
{
	return all_st(c) ? ckpt_st_rules.tensor(c, t, name, d) : 0;
}

static int xattr(const struct ckpt *c, const char *name, struct diag *d)
{
	return all_st(c) ? ckpt_st_rules.xattr(c, name, d) : 0;
}

static const struct ckpt_rules rules = {
	.shape = shape, .dir = dir, .data = data, .npy = npy,
	.mkdir = mkdir_rule,
	.key = key, .dtype = dtype, .tensor = tensor, .xattr = xattr,
};

static bool folder(const struct ckpt *c, struct ckpt_folder *f)
{
	*f = (struct ckpt_folder){ c->hf->index, c->hf->nentries,
				   c->hf->nfiles };
	return true;
}

static uint32_t nparts(const struct ckpt *c)
{
	return c->hf->nshards;
}

static void part(const struct ckpt *c, uint32_t k, struct ckpt_part *p)
{
	const struct ckpt_shard *sh = &c->hf->shards[k];

	*p = (struct ckpt_part){ sh->name, sh->c, sh->nkeys };
}

static uint32_t nfindings(const struct ckpt *c)
{
	return c->hf->nissues;
}

static const char *finding(const struct ckpt *c, uint32_t i, uint64_t *off,
			   char *buf, size_t size)
{
	*off = c->hf->issues[i].off;
	return ckpt_hf_issue_line(c, i, buf, size);
}

/* a model without some of its tensors would be used as it is */
static const char *unmountable(const struct ckpt *c, char *buf, size_t size)
{
	if (!c->hf->nabsent)
		return NULL;
	for (uint32_t i = 0; i < c->hf->nissues; i++)
		if (c->hf->issues[i].kind == CKPT_HF_ABSENT)
			return ckpt_hf_issue_line(c, i, buf, size);
	return NULL;
}

/* the shard's own (user.st_dtype of a safetensors shard), user.shard */
static void tensor_attrs(const struct ckpt *c, const struct ckpt_tensor *t,
			 ckpt_attr_fn fn, void *arg)
{
	const struct ckpt_shard *sh = ckpt_tensor_shard(c, t);

	if (!sh)
		return;
	if (sh->c)
		ckpt_tensor_attrs(sh->c, t, fn, arg);
	fn(arg, "user.shard", sh->name);
}

static int many_dir(const struct ckpt *c, const char **dir,
		    const char **commit)
{
	*dir = c->hf->dir;
	*commit = c->hf->index;
	return c->hf->dfd;
}

static bool many_file(const struct ckpt *c, uint32_t i, const char **name,
		      int *fd)
{
	if (i >= c->hf->nshards)
		return false;
	*name = c->hf->shards[i].name;
	*fd = c->hf->shards[i].c ? c->hf->shards[i].c->fd : -1;
	return true;
}

/* A storage's shard; a node's shard, else (the index's own) none. */
static int members(const struct ckpt *c, const struct ckpt_storage *s,
		   const struct ckpt_node *n, ckpt_member_fn fn, void *arg)
{
	const struct ckpt_shard *sh = s ? ckpt_storage_shard(c, s) : NULL;
	uint32_t k = n ? ckpt_hf_node_shard(c, n) : UINT32_MAX;

	if (k != UINT32_MAX)
		sh = &c->hf->shards[k];
	return sh && sh->c ? fn(c, sh->member, arg) : 0;
}

/* The other files, shown under .ptfs/files/: through the door as well (a
 * link out of the folder shows its target's owner and mode), and left out
 * when they are no regular file. */
static int open_folder_files(struct ckpt *c)
{
	struct ckpt_hf *hf = c->hf;

	for (; hf->nopened < hf->nfiles; hf->nopened++) {
		const struct ckpt_hf_file *f = &hf->files[hf->nopened];
		int k = src_add(c->src, f->name, strlen(f->name),
				DIAG_NO_OFFSET, SRC_QUIET, NULL);

		if (k == -ENOMEM)
			return k;
		hf->files[hf->nopened].member = k < 0 ? UINT32_MAX :
						    (uint32_t)k;
	}
	return (int)hf->nfiles;
}

static uint32_t folder_file(const struct ckpt *c, uint32_t i)
{
	return i < c->hf->nfiles ? c->hf->files[i].member : UINT32_MAX;
}

static void folder_entry(const struct ckpt *c, uint32_t i, const char **name,
			 uint64_t *size)
{
	if (i < c->hf->nfiles) {
		*name = c->hf->files[i].name;
		*size = c->hf->files[i].size;
	}
}

/* its shards own the nodes, tensors and storages */
static void close_hf(struct ckpt *c)
{
	if (c->hf)
		ckpt_hf_close(c);
}

static int save(struct ckpt *c, const char *target,
		const struct ckpt_write_opts *o, const struct stat *like,
		struct diag *d)
{
	(void)target;
	(void)like;
	return ckpt_hf_save(c, o, d);
}

const struct ckpt_fmt ckpt_fmt_hf = {
	.id = CKPT_HF_SHARDED, .name = "hf-sharded",
	.files = "Hugging Face sharded folders", .one = "a sharded folder",
	.caps = CKPT_CAP_WRITE | CKPT_CAP_MANY | CKPT_CAP_OFFSETS,
	.commit = "index",
	.converted = "",
	.findings_are = "the index and its shards disagree",
	.bid_name = bid_name, .bid_dir = bid_dir, .open = open_hf,
	.rules = &rules, .folder = folder, .nparts = nparts, .part = part,
	.nfindings = nfindings, .finding = finding,
	.unmountable = unmountable, .tensor_attrs = tensor_attrs,
	.owner = ckpt_hf_owner, .whole = ckpt_hf_whole, .close = close_hf,
	.many_dir = many_dir, .many_file = many_file, .members = members,
	.open_folder_files = open_folder_files, .folder_file = folder_file,
	.folder_entry = folder_entry,
	.save = save,
};
