/*
 * ckpt_fmt_ranks.c - the descriptor of a per-rank set: the files
 * PREFIX_world_size_N_rank_R.pt that each rank of an FSDP2 job wrote with
 * torch.save(model.state_dict()), read as the one state dict
 * full_tensor() of each DTensor would give (ckpt_ranks.h).
 *
 *   bid        a folder holding a *_world_size_N_rank_0.pt, or the
 *              pattern DIR/PREFIX_world_size_N_rank_*.pt as a path
 *   reads      a DTensor's bytes from its ranks' pieces in place, with
 *              the DCP reader's chunk table (c->dcp, ckpt_dcp_read.c)
 *   parts      the rank files: each one's unsafe globals are listed
 *              with its name and offsets (ptls --check, ptverify)
 *   findings   what a rank holds otherwise than rank 0 (ptverify)
 *   write-back into its own rank files, which keep their names: each
 *              file holding a changed piece, a replica of one or a copy
 *              of a changed plain tensor written anew beside it, then
 *              renamed over it, the journal the commit point
 *              (ckpt_ranks_wb.c); read-only when a tensor's record is
 *              compressed.  ptrepack writes it as one file, a
 *              safetensors file, an HF folder or a DCP directory
 *
 * So it takes same-size edits of a tensor's bytes (through its file or
 * its .npy view, in place or a whole .npy of the same dtype and shape)
 * and nothing else: every rank's pickle names the keys and holds the
 * values, and is written back as it is.  Refused when made, with one
 * line (EPERM): a key renamed, removed or added, a new directory, an
 * attribute, a value, the .txt view, a .npy of another shape, and a plain
 * tensor some rank holds no copy of alike (each rank's copy is written).
 */
#include "ckpt_ranks.h"
#include "ckpt/ckpt_format.h"
#include "fmt/dcp/ckpt_dcp.h"
#include "fmt/dcp/ckpt_dcpapi.h"
#include "zip/ptz_verify.h"

#include "source/source.h"

#include <stdio.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the pattern a user gives for one set of a folder */
static bool bid_name(const char *base)
{
	size_t pl;
	uint32_t n, r;

	return ckpt_ranks_name(base, &pl, &n, &r) && r == UINT32_MAX;
}

static bool bid_dir(int dirfd)
{
	/* its own open file: a dup would share (and move) the offset the
	   next bidder's listing starts from */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	bool found = false;
	size_t pl;
	uint32_t n, r;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while (!found && (de = readdir(dir)))
		found = ckpt_ranks_name(de->d_name, &pl, &n, &r) && r == 0;
	closedir(dir);
	return found;
}

static uint32_t nfindings(const struct ckpt *c)
{
	return c->ranks->nfindings + (c->ranks->nmore > 0);
}

static const char *finding(const struct ckpt *c, uint32_t i, uint64_t *off,
			   char *buf, size_t size)
{
	const struct ckpt_ranks *rk = c->ranks;

	*off = DIAG_NO_OFFSET;
	if (i < rk->nfindings)
		return rk->findings[i];
	snprintf(buf, size, "%u more disagreements between the ranks",
		 rk->nmore);
	return buf;
}

/* its parts are the rank files: each one's globals are its own to show
 * (ptls --check, ptverify), named by that file with its offsets */
static uint32_t nparts(const struct ckpt *c)
{
	return c->ranks->n;
}

static void part(const struct ckpt *c, uint32_t k, struct ckpt_part *p)
{
	struct ckpt *r = c->ranks->parts[k];

	*p = (struct ckpt_part){ c->ranks->names[k], r,
				 r->root && r->root->dir ?
				 r->root->dir->nkids : 0 };
}

/* user.ranks: each piece, its box and where it lies */
static void tensor_attrs(const struct ckpt *c, const struct ckpt_tensor *t,
			 ckpt_attr_fn fn, void *arg)
{
	ckpt_dcp_chunks_attr(c, t, "user.ranks", fn, arg);
}

/* One rank file's zip checks (core/zip/ptz_verify.c), named by it. */
struct rank_check {
	ckpt_problem_fn fn;
	void *arg;
	const struct ckpt *part;
	uint64_t *checked;
	uint32_t n;
};

static void zip_problem(void *arg, const char *check, uint64_t off,
			const char *msg)
{
	struct rank_check *rc = arg;
	const char *base = strrchr(rc->part->path, '/');
	char line[1024];

	snprintf(line, sizeof(line), "%s: %s", base ? base + 1 :
		 rc->part->path, msg);
	rc->n++;
	rc->fn(rc->arg, check, rc->part->path, off, line);
}

static void zip_step(void *arg, uint64_t n)
{
	*((struct rank_check *)arg)->checked += n;
}

/* what the ranks disagree on, then each rank file's records, CRC-32s and
 * layout, as ptverify checks a single file */
static uint32_t verify(struct ckpt *c, bool no_crc, uint64_t *checked,
		       ckpt_problem_fn fn, void *arg)
{
	const struct ckpt_ranks *rk = c->ranks;
	uint32_t n = 0;
	char buf[128];

	for (uint32_t i = 0; i < nfindings(c); i++, n++) {
		uint64_t off;

		fn(arg, "ranks", rk->parts[0]->path, DIAG_NO_OFFSET,
		   finding(c, i, &off, buf, sizeof(buf)));
	}
	for (uint32_t r = 0; r < rk->n; r++) {
		struct ckpt *p = rk->parts[r];
		struct ptz_use *u = malloc((p->nstorages + 1) * sizeof(*u));
		struct rank_check rc = { fn, arg, p, checked, 0 };
		struct ptz_verify zv = {
			.z = &p->zip, .no_crc = no_crc,
			.big_endian = p->byteorder &&
				      !strcmp(p->byteorder, "big"),
			.uses = u, .nuses = u ? p->nstorages : 0,
			.problem = zip_problem, .step = zip_step, .arg = &rc,
		};

		for (uint32_t i = 0; u && i < p->nstorages; i++)
			u[i] = (struct ptz_use){ p->storages[i]->rec,
				p->storages[i]->key, p->storages[i]->nbytes,
				p->storages[i]->pkl_off };
		ptz_verify_records(&zv);
		ptz_verify_archive(&zv);
		free(u);
		n += rc.n;
	}
	return n;
}

/* A storage's bytes: its pieces' rank files.  A value: rank 0's. */
static int members(const struct ckpt *c, const struct ckpt_storage *s,
		   const struct ckpt_node *n, ckpt_member_fn fn, void *arg)
{
	const struct ckpt_dcp *p = c->dcp;
	uint32_t b = 0, e = 0;
	int rc = 0;

	(void)n;
	if (!s)
		return fn(c, 0, arg);
	if (p->first && s->index < c->nstorages) {
		b = p->first[s->index];
		e = p->first[s->index + 1];
	}
	for (uint32_t k = b; k < e && !rc; k++)
		rc = fn(c, p->files[p->items[p->chunks[k].item].file].member,
			arg);
	return rc;
}

/* a compressed record cannot be patched where it lies */
static const char *readonly_why(const struct ckpt *c)
{
	return rk_packed(c) ? "per-rank shard sets with a compressed record" :
	       NULL;
}

static int many_dir(const struct ckpt *c, const char **dir,
		    const char **commit)
{
	/* no file commits it (the journal does): rank 0's names the set */
	*dir = c->ranks->dir;
	*commit = c->ranks->names[0];
	return c->dcp->dirfd;
}

static bool many_file(const struct ckpt *c, uint32_t i, const char **name,
		      int *fd)
{
	if (i >= c->ranks->n)
		return false;
	*name = c->ranks->names[i];
	*fd = src_at(c->src, c->ranks->member[i])->fd;
	return true;
}

static int save(struct ckpt *c, const char *target,
		const struct ckpt_write_opts *o, const struct stat *like,
		struct diag *d)
{
	(void)target;
	(void)like;
	return ckpt_ranks_wb(c, o, d);
}

/* ---- the edits it takes ---- */

static int shape(const struct ckpt *c, const char *what, struct diag *d)
{
	(void)c;
	return diag_errno(d, -EPERM, "%s: a per-rank shard set takes tensor "
			  "bytes only (the file or its .npy); attributes, "
			  "values and .txt views are in every rank's pickle, "
			  "written back as it is", what);
}

static int dir(const struct ckpt *c, const struct ckpt_node *n,
	       struct diag *d)
{
	(void)c;
	return diag_errno(d, -EPERM, "%s%sa per-rank shard set keeps its keys "
			  "(every rank's pickle names them, and is written "
			  "back as it is); ptrepack writes it as one file that "
			  "takes any edit", n->name, n->name[0] ? ": " : "");
}

static int add(const struct ckpt *c, const char *name, struct diag *d)
{
	(void)c;
	return diag_errno(d, -EPERM, "%s: a per-rank shard set takes no new "
			  "keys (every rank's pickle names them); ptrepack "
			  "writes it as one file that takes any edit", name);
}

/* a piece's bytes go to its rank and each replica; a plain tensor's to
 * every rank's own copy, which must be there alike */
static int data(const struct ckpt *c, const struct ckpt_storage *s,
		struct diag *d)
{
	struct rk_copy cp;
	int rc = 0;

	if (ckpt_pieced_tensor(c, s))
		return 0;
	for (uint32_t r = 0; r < c->ranks->n && !rc; r++)
		rc = rk_twin(c, s, r, &cp, d);
	return rc;
}

static int npy(const struct ckpt *c, const char *what, bool reshape,
	       struct diag *d)
{
	(void)c;
	if (!reshape)
		return 0;
	return diag_errno(d, -EPERM, "%s.npy: another shape would be a new "
			  "tensor, and a per-rank shard set keeps each "
			  "tensor's shape (its pieces are slabs of it); write "
			  "a .npy of the tensor's shape, or ptrepack the set",
			  what);
}

static const struct ckpt_rules rules = {
	.shape = shape, .dir = dir, .add = add, .data = data, .npy = npy,
};

const struct ckpt_fmt ckpt_fmt_ranks = {
	.id = CKPT_RANKS, .name = "ranks", .files = "per-rank shard sets",
	.one = "a per-rank shard set", .caps = CKPT_CAP_WRITE | CKPT_CAP_MANY,
	.commit = "journal", .converted = ", from per-rank shards",
	.findings_are = "the ranks disagree",
	.bid_name = bid_name, .bid_dir = bid_dir, .open = ckpt_ranks_open,
	.rules = &rules,
	.nparts = nparts, .part = part, .nfindings = nfindings, .finding = finding,
	.tensor_attrs = tensor_attrs, .verify = verify,
	.storage_data = ckpt_dcp_storage_data, .pieced = dcp_pieced,
	.pieced_tensor = dcp_tensor, .pieced_where = dcp_where,
	.pieced_read = ckpt_dcp_read, .close = ckpt_ranks_close,
	.members = members, .many_dir = many_dir, .many_file = many_file,
	.readonly_why = readonly_why, .save = save,
};
