/*
 * ckpt_dcp_wb.c - write a mounted DCP directory's edits back into it
 * (docs/design.md, "Writing a DCP directory back").  As torch's own
 * writer does, .metadata is the commit point; the steps, and what a
 * crash leaves, are ckpt_fsave.h's:
 *
 *   1  each .distcp file holding a chunk whose bytes changed is written
 *      anew under a new name (__0_1.distcp -> __0_1.g1.distcp): a clone
 *      of the old file where the file system makes one (else a copy),
 *      then each changed chunk's bytes patched, and its item's CRC-32 in
 *      the three places a zip keeps it (an item is a whole torch.save
 *      archive, so nothing else moves; ckpt_dcp_wbrun.c, shared with the
 *      rank sets' write-back, has the table)
 *   2  .metadata written anew (ckpt_dcp_remeta.c): the keys as the tree
 *      now names them, the items of removed keys dropped (their bytes
 *      stay in their files, unnamed, as torch leaves them), the new
 *      files' names; renamed over the old one after the new files.
 *
 * A chunk counts as changed when its bytes differ from the old item's
 * (compared run by run, dcp_wb_plan()), so a tensor edited and edited
 * back, or the chunks an edit did not reach, leave their files as they
 * are.  Only same-size edits of tensors reach here: the rules refuse
 * the rest when it is made (ckpt_fmt_dcp.c).
 */
#include "ckpt_dcp_wb.h"
#include "ckpt/ckpt_fsave.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct wb {
	struct dcp_wb r;	/* the runs, the marks (ckpt_dcp_wb.h) */
	struct fsave fs;
};

/* The CRC-32 of chunk @ch's item record, now in the new file @fd (@name),
 * into the three places its zip keeps it (dcp_wb_crc()). */
static int patch_crc(struct wb *w, int fd, const char *name,
		     const struct dcp_chunk *ch)
{
	const struct dcp_item *it = &w->r.p->items[ch->item];
	const struct dcp_file *f = &w->r.p->files[it->file];
	const struct ckpt_tensor *t;
	struct ptz_entry *e;
	struct ckpt *ic;
	int rc = ckpt_open_embedded(f->fd, f->path, it->off, it->len, &ic,
				    w->r.d);

	if (rc)
		return rc;
	t = ic->root && ic->root->kind == CKPT_N_TENSOR ? ic->root->tensor :
	    NULL;
	e = t && t->storage ? t->storage->rec : NULL;
	rc = e ? dcp_wb_crc(&w->r, &ic->zip, e, fd, name) :
	     diag_corrupt(w->r.d, it->off, "%s: an item without its record",
			  f->path);
	ckpt_close(ic);
	return rc;
}

/* Step 1 for data file @i: a clone, the changed chunks patched. */
static int write_file(struct wb *w, uint32_t i)
{
	struct ckpt *c = w->r.c;
	const struct ckpt_dcp *p = w->r.p;
	const struct dcp_file *f = &p->files[i];
	struct fsave_file *nf;
	struct stat like;
	int fd, rc;

	if (fstat(f->fd, &like))
		return diag_errno(w->r.d, -errno, "%s: %s", f->path,
				  strerror(errno));
	fd = fsave_new(&w->fs, i, f->member);
	if (fd < 0)
		return fd;
	nf = &w->fs.f[w->fs.nf - 1];
	rc = dcp_wb_clone(&w->r, fd, f->fd, like.st_size, f->path, nf->name);
	for (uint32_t s = 0; s < c->nstorages && !rc; s++) {
		for (uint32_t k = p->first[s]; k < p->first[s + 1] && !rc;
		     k++) {
			const struct dcp_chunk *ch = &p->chunks[k];

			if (!w->r.cmark[k] || p->items[ch->item].file != i)
				continue;
			rc = dcp_wb_put(&w->r, s, k, fd, ch->data, nf->name);
			if (!rc)
				rc = patch_crc(w, fd, nf->name, ch);
		}
	}
	if (!rc)
		rc = fsave_finish(&w->fs, fd, nf->name, &like, &nf->st);
	close(fd);
	return rc;
}

int ckpt_dcp_wb(struct ckpt *c, const struct ckpt_write_opts *o,
		struct diag *d)
{
	struct wb w = { .fs.dfd = -1 };
	const char *why = c->dcp ? ckpt_readonly_why(c) : "this checkpoint";
	unsigned char *meta = NULL;
	size_t len = 0;
	uint32_t n = 0;
	struct stat st;
	int rc;

	if (why)
		return diag_errno(d, -EROFS, "%s are not written back", why);
	if (o->stats)
		memset(o->stats, 0, sizeof(*o->stats));
	rc = dcp_wb_begin(&w.r, c, false, d);
	if (!rc)
		rc = dcp_wb_plan(&w.r);
	for (uint32_t i = 0; !rc && i < w.r.p->nfiles; i++)
		n += w.r.fmark[i];
	if (!rc && !n && !ckpt_changed(c))
		goto out;	/* nothing edited after all */
	if (!rc)
		rc = fsave_init(&w.fs, c, o, w.r.p->nfiles, d);
	for (uint32_t i = 0; i < w.r.p->nfiles && !rc; i++)
		if (w.r.fmark[i])
			rc = write_file(&w, i);
	if (!rc)
		rc = ckpt_dcp_remeta(c, &w.fs, &meta, &len, d);
	if (!rc)
		rc = fsave_commit_file(&w.fs, meta, len, &st);
	if (!rc)
		rc = fsave_commit(&w.fs, &st);
	if (o->stats) {
		o->stats->size = w.fs.bytes;
		o->stats->written = w.r.written + len;
		o->stats->repickled = true;
	}
out:
	fsave_end(&w.fs, rc);
	free(meta);
	dcp_wb_end(&w.r);
	return rc;
}
