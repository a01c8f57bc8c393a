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
 *      archive, so nothing else moves):
 *
 *        where                          CRC-32 field
 *        local header (item + hdr)      +14 (torch writes 0 there, with
 *                                       flag bit 3: then left as it is)
 *        data descriptor (flag bit 3)   +4 after "PK\7\8", +0 without it
 *        central directory entry        +16
 *
 *   2  .metadata written anew (ckpt_dcp_remeta.c): the keys as the tree
 *      now names them, the items of removed keys dropped (their bytes
 *      stay in their files, unnamed, as torch leaves them), the new
 *      files' names; renamed over the old one after the new files.
 *
 * A chunk counts as changed when its bytes differ from the old item's
 * (compared run by run), so a tensor edited and edited back, or the
 * chunks an edit did not reach, leave their files as they are.  Only
 * same-size edits of tensors reach here: the overlay refuses the rest
 * when it is made (ovl_dcp.c).
 */
#include "ckpt_dcp.h"
#include "ckpt/ckpt_fsave.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/io.h"

#define BUF	(1u << 20)

struct wb {
	struct ckpt *c;
	struct ckpt_dcp *p;
	struct diag *d;
	struct fsave fs;
	uint8_t *fmark;		/* by file: a chunk of it changed */
	uint8_t *cmark;		/* by chunk: its bytes changed */
	unsigned char *a, *b;	/* BUF each */
	/* the run walker's current job */
	const struct ckpt_storage *s;
	const struct dcp_chunk *ch;
	int out;		/* the new file (write) */
	uint64_t written;
};

typedef int (*run_fn)(struct wb *w, uint64_t g, uint64_t l, uint64_t n);

/*
 * Chunk @ch of tensor @t, run by run in the chunk's (row-major) order:
 * @fn gets each run's byte offset in the global tensor @g, in the chunk
 * @l, and its length.  A run spans the dimensions the box holds whole and
 * the last one it does not.  Stops at @fn's first non-zero return.
 */
static int runs(struct wb *w, const struct ckpt_tensor *t, run_fn fn)
{
	const struct dcp_chunk *ch = w->ch;
	int nd = t->ndim, k = nd - 1;
	uint64_t isz = t->dtype->size, stride[CKPT_MAX_DIMS], run = 1, l = 0;
	int64_t idx[CKPT_MAX_DIMS] = { 0 };
	int rc = 0;

	for (int i = nd - 1; i >= 0; i--) {
		stride[i] = i == nd - 1 ? 1 : stride[i + 1] *
			    (uint64_t)t->shape[i + 1];
		if (ch->sizes[i] == 0)
			return 0;
	}
	while (k >= 0 && ch->sizes[k] == t->shape[k]) {
		run *= (uint64_t)t->shape[k];
		k--;
	}
	if (k >= 0)
		run *= (uint64_t)ch->sizes[k];
	for (;;) {
		uint64_t g = 0;
		int i;

		for (i = 0; i < nd; i++)
			g += (uint64_t)(ch->offsets[i] + (i < k ? idx[i] : 0)) *
			     stride[i];
		rc = fn(w, g * isz, l * isz, run * isz);
		if (rc)
			return rc;
		l += run;
		for (i = k - 1; i >= 0 && ++idx[i] == ch->sizes[i]; i--)
			idx[i] = 0;
		if (i < 0)
			return 0;
	}
}

static const struct dcp_file *file_of(const struct wb *w,
				      const struct dcp_chunk *ch)
{
	return &w->p->files[w->p->items[ch->item].file];
}

/* Compare a run's new bytes with the chunk's: 1 when they differ. */
static int differ(struct wb *w, uint64_t g, uint64_t l, uint64_t n)
{
	int old = file_of(w, w->ch)->fd;

	for (uint64_t at = 0; at < n; at += BUF) {
		size_t m = n - at < BUF ? n - at : BUF;
		int rc = io_pread_diag(w->s->fd, w->a, m, w->s->data_off + g +
				       at, "staged tensor data", w->d);

		if (!rc)
			rc = io_pread_diag(old, w->b, m, w->ch->data + l + at,
					   "tensor data", w->d);
		if (rc)
			return rc;
		if (memcmp(w->a, w->b, m))
			return 1;
	}
	return 0;
}

/* A run's new bytes into the new file. */
static int put(struct wb *w, uint64_t g, uint64_t l, uint64_t n)
{
	for (uint64_t at = 0; at < n; at += BUF) {
		size_t m = n - at < BUF ? n - at : BUF;
		int rc = io_pread_diag(w->s->fd, w->a, m, w->s->data_off + g +
				       at, "staged tensor data", w->d);

		if (!rc && (rc = io_pwrite_full(w->out, w->a, m,
						w->ch->data + l + at)))
			rc = diag_errno(w->d, rc, "%s: %s",
					w->fs.f[w->fs.nf - 1].name,
					strerror(-rc));
		if (rc)
			return rc;
		w->written += m;
	}
	return 0;
}

/* Mark the chunks whose bytes an edit changed, and their files. */
static int plan(struct wb *w)
{
	struct ckpt *c = w->c;
	int rc = 0;

	for (uint32_t i = 0; i < c->nstorages && !rc; i++) {
		const struct ckpt_storage *s = c->storages[i];
		const struct ckpt_tensor *t = w->p->tens[i];

		if (s->fd == c->fd || s->fd < 0)
			continue;	/* not staged */
		if (!t || s->retyped || s->nbytes != ckpt_tensor_nbytes(t))
			return diag_unsupported(w->d, DIAG_NO_OFFSET, "storage "
						"%s: only same-size edits of a "
						"DCP tensor are written back",
						s->key);
		w->s = s;
		for (uint32_t k = w->p->first[i]; k < w->p->first[i + 1] &&
		     !rc; k++) {
			w->ch = &w->p->chunks[k];
			rc = ckpt_dcp_resolve(c, k, w->d);
			if (!rc)
				rc = runs(w, t, differ);
			if (rc == 1) {
				w->cmark[k] = 1;
				w->fmark[w->p->items[w->ch->item].file] = 1;
				rc = 0;
			}
		}
	}
	return rc;
}

/* The CRC-32 of chunk @ch's item record, now in the new file @fd, into
 * the three places its zip keeps it (the table above; ptz_crc.c). */
static int patch_crc(struct wb *w, int fd, const struct dcp_chunk *ch)
{
	const struct dcp_item *it = &w->p->items[ch->item];
	const struct dcp_file *f = &w->p->files[it->file];
	const struct ckpt_tensor *t;
	struct ptz_entry *e;
	struct ckpt *ic;
	uint32_t crc = 0;
	uint64_t pos, base = it->off;
	int rc = ckpt_open_embedded(f->fd, f->path, it->off, it->len, &ic,
				    w->d);

	if (rc)
		return rc;
	t = ic->root && ic->root->kind == CKPT_N_TENSOR ? ic->root->tensor :
	    NULL;
	e = t && t->storage ? t->storage->rec : NULL;
	rc = e ? ptz_entry_locate(&ic->zip, e, w->d) :
	     diag_corrupt(w->d, it->off, "%s: an item without its record",
			  f->path);
	for (pos = 0; !rc && pos < e->csize; pos += BUF) {
		size_t m = e->csize - pos < BUF ? e->csize - pos : BUF;

		rc = io_pread_diag(fd, w->a, m, base + e->data_off + pos,
				   "tensor data", w->d);
		crc = rc ? crc : libdeflate_crc32(crc, w->a, m);
	}
	if (!rc)
		rc = ptz_entry_put_crc(&ic->zip, e, fd, crc,
				       w->fs.f[w->fs.nf - 1].name, w->d);
	ckpt_close(ic);
	return rc;
}

/* Step 1 for data file @i: a clone, the changed chunks patched. */
static int write_file(struct wb *w, uint32_t i)
{
	struct ckpt *c = w->c;
	const struct dcp_file *f = &w->p->files[i];
	struct fsave_file *nf;
	struct stat like;
	int fd, rc;

	if (fstat(f->fd, &like))
		return diag_errno(w->d, -errno, "%s: %s", f->path,
				  strerror(errno));
	fd = fsave_new(&w->fs, i, f->member);
	if (fd < 0)
		return fd;
	nf = &w->fs.f[w->fs.nf - 1];
	rc = ckpt_clone_file(fd, f->fd);
	if (rc < 0)	/* a real failure (ENOSPC, EIO), not "no reflinks" */
		rc = diag_errno(w->d, rc, "%s: cannot clone it into %s: %s",
				f->path, nf->name, strerror(-rc));
	else if (rc == 1 &&
		 (rc = io_copy_range(f->fd, 0, fd, 0, like.st_size)))
		rc = diag_errno(w->d, rc, "%s: cannot copy it into %s: %s",
				f->path, nf->name, strerror(-rc));
	w->out = fd;
	for (uint32_t s = 0; s < c->nstorages && !rc; s++) {
		w->s = c->storages[s];
		for (uint32_t k = w->p->first[s]; k < w->p->first[s + 1] &&
		     !rc; k++) {
			w->ch = &w->p->chunks[k];
			if (!w->cmark[k] || w->p->items[w->ch->item].file != i)
				continue;
			rc = runs(w, w->p->tens[s], put);
			if (!rc)
				rc = patch_crc(w, fd, w->ch);
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
	struct wb w = { .c = c, .p = c->dcp, .d = d, .fs.dfd = -1 };
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
	w.fmark = calloc(w.p->nfiles + 1u, 1);
	w.cmark = calloc(w.p->nchunks + 1u, 1);
	w.a = malloc(BUF);
	w.b = malloc(BUF);
	rc = w.fmark && w.cmark && w.a && w.b ? plan(&w) : diag_nomem(d);
	for (uint32_t i = 0; i < w.p->nfiles; i++)
		n += w.fmark[i];
	if (!rc && !n && !ckpt_changed(c))
		goto out;	/* nothing edited after all */
	if (!rc)
		rc = fsave_init(&w.fs, c, o, w.p->nfiles, d);
	for (uint32_t i = 0; i < w.p->nfiles && !rc; i++)
		if (w.fmark[i])
			rc = write_file(&w, i);
	if (!rc)
		rc = ckpt_dcp_remeta(c, &w.fs, &meta, &len, d);
	if (!rc)
		rc = fsave_commit_file(&w.fs, meta, len, &st);
	if (!rc)
		rc = fsave_commit(&w.fs, &st);
	if (o->stats) {
		o->stats->size = w.fs.bytes;
		o->stats->written = w.written + len;
		o->stats->repickled = true;
	}
out:
	fsave_end(&w.fs, rc);
	free(meta);
	free(w.fmark);
	free(w.cmark);
	free(w.a);
	free(w.b);
	return rc;
}
