/*
 * ckpt_ranks_wb.c - write a mounted per-rank set's edits back into its
 * rank files (docs/design.md, "Per-rank shard sets").  The files keep
 * their names (training code loads model_world_size_N_rank_R.pt), so
 * there is no index to rename last: the commit is the plan of renames in
 * the overlay's journal (ckpt_fsave.h, fsave_init_swap()):
 *
 *   1  each rank file holding a changed chunk is written whole under
 *      ".NAME.ptfs-new.TAG" beside it: a clone of the old file, each
 *      changed run patched and each patched record's CRC-32 fixed (the
 *      runs and CRCs are DCP's write-back's, ckpt_dcp_wbrun.c: here the
 *      item is the whole rank file, the record the piece's storage)
 *   2  one journal record names every temporary -> rank file, with both
 *      (dev, ino): COMMITTED; a mount after a crash renames what is left
 *   3  each temporary renamed over its rank file, the folder fsync'd
 *
 * A chunk's bytes go to every place that holds them: the piece the chunk
 * table reads, each replica of it (Replicate() on some mesh dimension:
 * rk->copies), and for a plain tensor (no DTensor: read from rank 0, but
 * each rank saved its own, an optimizer's step) the tensor at the same
 * key in every rank (rk_twin()).  So the ranks agree afterwards.  Only
 * same-size edits of tensors reach here: the rules refuse the rest when
 * it is made (ckpt_fmt_ranks.c).
 */
#include "ckpt_ranks.h"
#include "ckpt/ckpt_fsave.h"
#include "fmt/dcp/ckpt_dcp_wb.h"
#include "source/source.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rk_copy_add(struct ckpt *c, uint32_t k, uint32_t r,
		struct ckpt_storage *s, uint64_t el, struct diag *d)
{
	struct ckpt_ranks *rk = c->ranks;
	uint64_t data;
	int fd, rc = ckpt_storage_data(rk->parts[r], s, &fd, &data, d);

	if (rc)
		return rc;
	if (rk->ncopies == rk->copies_cap) {
		uint32_t cap = rk->copies_cap ? 2 * rk->copies_cap : 64;
		struct rk_copy *v = realloc(rk->copies, cap * sizeof(*v));

		if (!v)
			return diag_nomem(d);
		rk->copies = v;
		rk->copies_cap = cap;
	}
	rk->copies[rk->ncopies++] = (struct rk_copy){ k, r, s,
		data + el * s->dtype->size };
	return 0;
}

bool rk_packed(const struct ckpt *c)
{
	const struct ckpt_ranks *rk = c->ranks;

	for (uint32_t r = 0; r < rk->n; r++)
		for (uint32_t i = 0; i < rk->parts[r]->nstorages; i++)
			if (rk->parts[r]->storages[i]->rec &&
			    rk->parts[r]->storages[i]->rec->method !=
			    PTZ_STORED)
				return true;
	return false;
}

/* Rank 0's node of a tensor over its storage @s0, or NULL. */
static const struct ckpt_node *shown_by(const struct ckpt *p0,
					const struct ckpt_storage *s0)
{
	for (uint32_t i = 0; i < p0->nnodes; i++) {
		const struct ckpt_node *n = p0->nodes[i];

		if (n && n->kind == CKPT_N_TENSOR && n->tensor &&
		    n->tensor->storage == s0)
			return n;
	}
	return NULL;
}

int rk_twin(const struct ckpt *c, const struct ckpt_storage *s, uint32_t r,
	    struct rk_copy *out, struct diag *d)
{
	const struct ckpt_ranks *rk = c->ranks;
	const struct ckpt_dcp *p = c->dcp;
	const struct rk_copy *own = NULL;
	const struct ckpt_node *n0, *nr;
	const struct ckpt_tensor *t0, *tr;
	uint32_t k = p->first[s->index];
	char key[4096];
	uint64_t data;
	int fd, rc;

	for (uint32_t i = 0; i < rk->ncopies && !own; i++)
		if (rk->copies[i].chunk == k)
			own = &rk->copies[i];
	n0 = own && !p->tens[s->index] &&
	     p->first[s->index + 1] == k + 1 ? shown_by(rk->parts[0], own->s) :
	     NULL;
	if (!n0)
		return diag_errno(d, -EPERM, "storage %s: no tensor of %s "
				  "shows it, so its copies on the other ranks "
				  "are not known; a rank set takes edits of "
				  "tensors", s->key, rk->names[0]);
	if (!r) {
		*out = *own;
		return 0;
	}
	rk_path_of(n0, key, sizeof(key));
	nr = ckpt_node_by_path(rk->parts[r], key);
	t0 = n0->tensor;
	tr = nr && nr->kind == CKPT_N_TENSOR ? nr->tensor : NULL;
	if (!tr || !tr->storage || tr->dtype != t0->dtype ||
	    tr->offset != t0->offset || tr->storage->dtype != own->s->dtype ||
	    tr->storage->nbytes != own->s->nbytes || !tr->storage->rec)
		return diag_errno(d, -EPERM, "'%s': %s holds no copy of it "
				  "like rank 0's (of its dtype and size), so an "
				  "edit of it could not be written into every "
				  "rank",
				  key, rk->names[r]);
	rc = ckpt_storage_data(rk->parts[r], tr->storage, &fd, &data, d);
	if (rc)
		return rc;
	*out = (struct rk_copy){ k, r, tr->storage, data };
	return 0;
}

struct wb {
	struct dcp_wb r;	/* the runs, the marks (ckpt_dcp_wb.h) */
	struct fsave fs;
	struct rk_copy *twins;	/* the other ranks' copies of the plain
				   tensors changed */
	uint32_t ntwins;
	uint8_t *rmark;		/* by rank: its file is written */
};

/* Every rank's copy of each changed plain tensor. */
static int twins(struct wb *w)
{
	struct ckpt *c = w->r.c;
	const struct ckpt_dcp *p = c->dcp;
	uint32_t n = c->ranks->n;
	int rc = 0;

	for (uint32_t i = 0; i < c->nstorages && !rc; i++) {
		struct rk_copy *v;

		if (p->tens[i] || p->first[i + 1] != p->first[i] + 1 ||
		    !w->r.cmark[p->first[i]])
			continue;
		v = realloc(w->twins, (w->ntwins + n) * sizeof(*v));
		if (!v)
			return diag_nomem(w->r.d);
		w->twins = v;
		for (uint32_t r = 1; r < n && !rc; r++)
			rc = rk_twin(c, c->storages[i], r,
				     &w->twins[w->ntwins++], w->r.d);
	}
	return rc;
}

/* Copy @cp's chunk into rank file @fd (@name), and its record's CRC. */
static int put_copy(struct wb *w, const struct rk_copy *cp, int fd,
		    const char *name)
{
	struct ckpt *c = w->r.c;
	int rc = dcp_wb_put(&w->r, dcp_chunk_storage(c, cp->chunk), cp->chunk,
			    fd, cp->data, name);

	return rc ? rc : dcp_wb_crc(&w->r, &c->ranks->parts[cp->rank]->zip,
				    cp->s->rec, fd, name);
}

/* Step 1 for rank @r: a clone of its file, what changed patched. */
static int write_rank(struct wb *w, uint32_t r)
{
	const struct ckpt_ranks *rk = w->r.c->ranks;
	const struct src_member *m = src_at(w->r.c->src, rk->member[r]);
	struct fsave_file *nf;
	struct stat like;
	int fd, rc;

	if (fstat(m->fd, &like))
		return diag_errno(w->r.d, -errno, "%s: %s", m->path,
				  strerror(errno));
	fd = fsave_new(&w->fs, r, rk->member[r]);
	if (fd < 0)
		return fd;
	nf = &w->fs.f[w->fs.nf - 1];
	rc = dcp_wb_clone(&w->r, fd, m->fd, like.st_size, m->path, nf->name);
	for (uint32_t i = 0; i < rk->ncopies && !rc; i++)
		if (rk->copies[i].rank == r && w->r.cmark[rk->copies[i].chunk])
			rc = put_copy(w, &rk->copies[i], fd, nf->name);
	for (uint32_t i = 0; i < w->ntwins && !rc; i++)
		if (w->twins[i].rank == r)
			rc = put_copy(w, &w->twins[i], fd, nf->name);
	if (!rc)
		rc = fsave_finish(&w->fs, fd, nf->name, &like, &nf->st);
	close(fd);
	return rc;
}

int ckpt_ranks_wb(struct ckpt *c, const struct ckpt_write_opts *o,
		  struct diag *d)
{
	struct wb w = { .fs.dfd = -1 };
	const char *why = c->ranks ? ckpt_readonly_why(c) : "this checkpoint";
	uint32_t n = 0;
	int rc;

	if (why)
		return diag_errno(d, -EROFS, "%s are not written back", why);
	if (o->stats)
		memset(o->stats, 0, sizeof(*o->stats));
	rc = dcp_wb_begin(&w.r, c, true, d);
	w.rmark = calloc(c->ranks->n, 1);
	if (!rc && !w.rmark)
		rc = diag_nomem(d);
	if (!rc)
		rc = dcp_wb_plan(&w.r);
	if (!rc)
		rc = twins(&w);
	for (uint32_t i = 0; !rc && i < c->ranks->ncopies; i++)
		if (w.r.cmark[c->ranks->copies[i].chunk])
			w.rmark[c->ranks->copies[i].rank] = 1;
	for (uint32_t i = 0; !rc && i < w.ntwins; i++)
		w.rmark[w.twins[i].rank] = 1;
	for (uint32_t r = 0; !rc && r < c->ranks->n; r++)
		n += w.rmark[r];
	if (rc || !n)
		goto out;	/* nothing changed after all */
	rc = fsave_init_swap(&w.fs, c, o, n, d);
	for (uint32_t r = 0; r < c->ranks->n && !rc; r++)
		if (w.rmark[r])
			rc = write_rank(&w, r);
	if (!rc)
		rc = fsave_swap(&w.fs);
	if (o->stats) {
		o->stats->size = w.fs.bytes;
		o->stats->written = w.r.written;
	}
out:
	fsave_end(&w.fs, rc);
	dcp_wb_end(&w.r);
	free(w.twins);
	free(w.rmark);
	return rc;
}
