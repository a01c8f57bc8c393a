/*
 * ckpt_dcp_wbrun.c - the pieces a write-back into files that hold
 * tensors in chunks is made of (ckpt_dcp_wb.h): a DCP directory's
 * (ckpt_dcp_wb.c) and a per-rank set's (ckpt_ranks_wb.c) use them alike.
 *
 * A chunk is an N-d box of its tensor whose elements lie row-major in one
 * stored record; the staged storage holds the whole tensor row-major.  So
 * a chunk is a list of runs: each spans the dimensions the box holds
 * whole and the last one it does not, contiguous in the chunk and in the
 * staged file alike.  A chunk counts as changed when one of its runs'
 * staged bytes differs from what its file holds (a tensor edited and
 * edited back changes nothing).  A record's CRC-32 lies in three places
 * (ptz_crc.c):
 *
 *   where                          CRC-32 field
 *   local header                   +14 (torch writes 0 there, with flag
 *                                  bit 3: then left as it is)
 *   data descriptor (flag bit 3)   +4 after "PK\7\8", +0 without it
 *   central directory entry        +16
 */
#include "ckpt_dcp_wb.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>

#include "util/io.h"

typedef int (*run_fn)(struct dcp_wb *w, uint64_t g, uint64_t l, uint64_t n);

int dcp_wb_begin(struct dcp_wb *w, struct ckpt *c, bool plain, struct diag *d)
{
	*w = (struct dcp_wb){ .c = c, .p = c->dcp, .d = d, .plain = plain,
			      .out = -1 };
	w->fmark = calloc(w->p->nfiles + 1u, 1);
	w->cmark = calloc(w->p->nchunks + 1u, 1);
	w->a = malloc(DCP_WB_BUF);
	w->b = malloc(DCP_WB_BUF);
	return w->fmark && w->cmark && w->a && w->b ? 0 : diag_nomem(d);
}

void dcp_wb_end(struct dcp_wb *w)
{
	free(w->fmark);
	free(w->cmark);
	free(w->a);
	free(w->b);
	w->fmark = w->cmark = NULL;
	w->a = w->b = NULL;
}

const struct ckpt_tensor *dcp_wb_tensor(struct dcp_wb *w, uint32_t i)
{
	const struct ckpt_storage *s = w->c->storages[i];

	if (w->p->tens[i] || !w->plain)
		return w->p->tens[i];
	/* one 1-d chunk of all its elements: one run */
	w->one = (struct ckpt_tensor){ .kind = CKPT_T_STRIDED,
		.contiguous = true, .ndim = 1, .dtype = s->dtype,
		.shape = w->one_shape, .numel = s->numel };
	w->one_shape[0] = (int64_t)s->numel;
	w->one_shape[1] = 1;
	return &w->one;
}

/*
 * Chunk w->ch of tensor @t, run by run in the chunk's (row-major) order:
 * @fn gets each run's byte offset in the global tensor @g, in the chunk
 * @l, and its length.  Stops at @fn's first non-zero return.
 */
static int runs(struct dcp_wb *w, const struct ckpt_tensor *t, run_fn fn)
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

/* Compare a run's staged bytes with the chunk's: 1 when they differ. */
static int differ(struct dcp_wb *w, uint64_t g, uint64_t l, uint64_t n)
{
	int old = w->p->files[w->p->items[w->ch->item].file].fd;

	for (uint64_t at = 0; at < n; at += DCP_WB_BUF) {
		size_t m = n - at < DCP_WB_BUF ? n - at : DCP_WB_BUF;
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

/* A run's staged bytes into the file written. */
static int put(struct dcp_wb *w, uint64_t g, uint64_t l, uint64_t n)
{
	for (uint64_t at = 0; at < n; at += DCP_WB_BUF) {
		size_t m = n - at < DCP_WB_BUF ? n - at : DCP_WB_BUF;
		int rc = io_pread_diag(w->s->fd, w->a, m, w->s->data_off + g +
				       at, "staged tensor data", w->d);

		if (!rc && (rc = io_pwrite_full(w->out, w->a, m,
						w->at + l + at)))
			rc = diag_errno(w->d, rc, "%s: %s", w->out_name,
					strerror(-rc));
		if (rc)
			return rc;
		w->written += m;
	}
	return 0;
}

int dcp_wb_plan(struct dcp_wb *w)
{
	struct ckpt *c = w->c;
	int rc = 0;

	for (uint32_t i = 0; i < c->nstorages && !rc; i++) {
		const struct ckpt_storage *s = c->storages[i];
		const struct ckpt_tensor *t;

		if (s->fd == c->fd || s->fd < 0)
			continue;	/* not staged */
		t = dcp_wb_tensor(w, i);
		if (!t || s->retyped || s->nbytes != ckpt_tensor_nbytes(t))
			return diag_unsupported(w->d, DIAG_NO_OFFSET, "storage "
						"%s: only same-size edits of a "
						"tensor in chunks are written "
						"back", s->key);
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

int dcp_wb_clone(struct dcp_wb *w, int out, int from, uint64_t size,
		 const char *from_path, const char *out_name)
{
	int rc = ckpt_clone_file(out, from);

	if (rc < 0)	/* a real failure (ENOSPC, EIO), not "no reflinks" */
		return diag_errno(w->d, rc, "%s: cannot clone it into %s: %s",
				  from_path, out_name, strerror(-rc));
	if (rc == 1 && (rc = io_copy_range(from, 0, out, 0, size)))
		return diag_errno(w->d, rc, "%s: cannot copy it into %s: %s",
				  from_path, out_name, strerror(-rc));
	return 0;
}

int dcp_wb_put(struct dcp_wb *w, uint32_t i, uint32_t k, int out,
	       uint64_t at, const char *name)
{
	const struct ckpt_tensor *t = dcp_wb_tensor(w, i);

	w->s = w->c->storages[i];
	w->ch = &w->p->chunks[k];
	w->out = out;
	w->at = at;
	w->out_name = name;
	return runs(w, t, put);
}

int dcp_wb_crc(struct dcp_wb *w, const struct ptz_reader *z,
	       struct ptz_entry *e, int fd, const char *name)
{
	uint32_t crc = 0;
	int rc = ptz_entry_locate(z, e, w->d);

	for (uint64_t pos = 0; !rc && pos < e->csize; pos += DCP_WB_BUF) {
		size_t m = e->csize - pos < DCP_WB_BUF ? e->csize - pos :
			   DCP_WB_BUF;

		rc = io_pread_diag(fd, w->a, m, z->base + e->data_off + pos,
				   "tensor data", w->d);
		crc = rc ? crc : libdeflate_crc32(crc, w->a, m);
	}
	return rc ? rc : ptz_entry_put_crc(z, e, fd, crc, name, w->d);
}
