/*
 * ckpt_hfimage.c - a checkpoint as safetensors files computed, not written
 * (ckpt_image.h): the mount's .ptfs/as/.  The layout is the writers' own,
 * so the files are byte for byte what ptrepack would write:
 *
 *   one file    model.safetensors  ckpt_st_flatten() + ckpt_st_layout(),
 *                                  as `ptrepack CKPT x.safetensors`
 *   shards      model-0000K-of-0000N.safetensors, K = 1..N, and
 *               model.safetensors.index.json   the cut of ckpt_hfout.c
 *                                  (hf_cut_make()), as `ptrepack
 *                                  --max-shard-size SIZE CKPT DIR/`
 *   always      README             what the folder is, and every key left
 *                                  out with why (values, tensors
 *                                  safetensors cannot hold, ties)
 *
 * A safetensors file of the image is, by offset:
 *
 *   [0, base)          8 bytes of header length and the header: memory
 *   [base, size)       the tensors back to back in header order (each
 *                      entry's begin and end); a piece of tensor e at
 *                      byte p of its bytes lies in a file (contiguous:
 *                      its storage's at offset*itemsize + p; a DCP chunk
 *                      run: ckpt_pieced_where()) or is made by
 *                      ckpt_tensor_read() (a strided view)
 *
 * Memory: the flat map (names and pointers), the headers and the index.
 */
#include "ckpt_hfcut.h"
#include "ckpt/ckpt_image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/io.h"
#include "util/le.h"
#include "util/sbuf.h"

#define IMG_README	"README"

struct img_file {
	char name[64];
	uint64_t size;
	char *mem;		/* bytes [0, nmem): header, index, README */
	uint64_t nmem;
	struct st_ent **order;	/* a safetensors file's tensors, from nmem */
	uint32_t n;
};

struct ckpt_image {
	struct ckpt_write_opts o;
	struct st_flat f;	/* one file */
	struct hf_cut cut;	/* shards */
	struct img_file *files;
	uint32_t nfiles;
	struct sbuf left;	/* "  KEY: why\n" for each key left out */
	uint32_t nleft;
};

static void left_out(void *arg, const char *key, const char *what)
{
	struct ckpt_image *im = arg;

	sb_printf(&im->left, "  %s: %s\n", key, what);
	im->nleft++;
}

static struct img_file *add_file(struct ckpt_image *im, const char *name)
{
	struct img_file *f = realloc(im->files, (im->nfiles + 1) *
				     sizeof(*f));

	if (!f)
		return NULL;
	im->files = f;
	f += im->nfiles++;
	*f = (struct img_file){ 0 };
	snprintf(f->name, sizeof(f->name), "%s", name);
	return f;
}

/* A safetensors file of layout @L (taken over) as file @name. */
static int add_st(struct ckpt_image *im, const char *name,
		  struct st_layout *L, struct diag *d)
{
	struct img_file *f = add_file(im, name);

	if (!f || !(f->mem = malloc(L->base))) {
		ckpt_st_layout_release(L);
		return diag_nomem(d);
	}
	ord_store((unsigned char *)f->mem, 8, false, L->hdr.n);
	memcpy(f->mem + 8, L->hdr.p, L->hdr.n);
	f->nmem = L->base;
	f->size = L->base + L->total;
	f->order = L->order;
	f->n = L->n;
	free(L->hdr.p);
	*L = (struct st_layout){ 0 };
	return 0;
}

/* A file of text @b (taken over). */
static int add_text(struct ckpt_image *im, const char *name, struct sbuf *b,
		    struct diag *d)
{
	struct img_file *f = b->oom ? NULL : add_file(im, name);

	if (!f) {
		free(b->p);
		*b = (struct sbuf){ 0 };
		return diag_nomem(d);
	}
	f->mem = b->p;
	f->nmem = f->size = b->n;
	*b = (struct sbuf){ 0 };
	return 0;
}

/* Every file made so far, gone (their slots stay allocated). */
static void drop_files(struct ckpt_image *im)
{
	for (uint32_t k = 0; k < im->nfiles; k++) {
		free(im->files[k].mem);
		free(im->files[k].order);
	}
	im->nfiles = 0;
}

static int make_one(struct ckpt *c, struct ckpt_image *im, struct diag *d)
{
	struct st_layout L;
	int rc;

	im->f.drop_tensors = true;
	rc = ckpt_st_flatten(c, &im->o, &im->f, d);
	if (!rc)
		rc = ckpt_st_layout(c, &im->f, NULL, NULL, &im->o, &L, d);
	return rc ? rc : add_st(im, HF_ONE, &L, d);
}

static int make_shards(struct ckpt *c, struct ckpt_image *im,
		       struct diag *d)
{
	struct hf_cut *h = &im->cut;
	uint8_t *pick;
	struct sbuf idx = { 0 };
	char name[64];
	int rc;

	*h = (struct hf_cut){ .c = c, .o = &im->o, .d = d };
	h->f.drop_tensors = true;
	if ((rc = hf_cut_make(h)))
		return rc;
	if (!(pick = malloc(h->f.n + 1)))
		return diag_nomem(d);
	for (uint32_t k = 0; k < h->nshards && !rc; k++) {
		struct st_layout L;

		for (uint32_t i = 0; i < h->f.n; i++)
			pick[i] = h->shard[i] == k;
		rc = ckpt_st_layout(c, &h->f, pick, "\"format\":\"pt\"",
				    &im->o, &L, d);
		if (!rc)
			rc = add_st(im, hf_shard_name(h, k, name, sizeof(name)),
				    &L, d);
	}
	free(pick);
	if (!rc && h->nshards > 1 && !(rc = hf_index_text(h, &idx)))
		rc = add_text(im, HF_INDEX, &idx, d);
	free(idx.p);
	return rc;
}

/* README: what the folder is, and what it lacks (@why: nothing could be
 * made, and why). */
static int readme(struct ckpt *c, struct ckpt_image *im, const char *why,
		  struct diag *d)
{
	struct sbuf b = { 0 };

	sb_printf(&b, "This folder is %s as safetensors files, computed from "
		  "it as it stands\n(edits included) when a file here is "
		  "opened. Nothing here is stored:\nthe tensors' bytes are "
		  "read from the checkpoint's own.\n\n", c->path);
	if (why) {
		sb_printf(&b, "No safetensors file could be made of it: %s\n",
			  why);
	} else if (im->o.max_shard) {
		sb_printf(&b, "The files are what `ptrepack --max-shard-size "
			  "%llu` writes of it:\nthe shards of save_pretrained "
			  "and their index.\n", (unsigned long long)
			  im->o.max_shard);
	} else {
		sb_puts(&b, "model.safetensors is what `ptrepack CKPT "
			"model.safetensors` writes of it:\nwhat "
			"safetensors.torch.save_model writes of its state "
			"dict.\n");
	}
	if (im->nleft) {
		sb_printf(&b, "\nLeft out (%u):\n", im->nleft);
		sb_add(&b, im->left.p, im->left.n);
	}
	else if (!why)
		sb_puts(&b, "\nNothing was left out.\n");
	return add_text(im, IMG_README, &b, d);
}

int ckpt_image_make(struct ckpt *c, uint64_t max_shard,
		    struct ckpt_image **out, struct diag *d)
{
	struct ckpt_image *im = calloc(1, sizeof(*im));
	struct diag why;
	char line[512];
	int rc;

	*out = NULL;
	if (!im)
		return diag_nomem(d);
	im->o = (struct ckpt_write_opts){ .st_drop = true, .note = left_out,
					  .note_arg = im,
					  .max_shard = max_shard };
	diag_init(&why, c->path);
	rc = max_shard ? make_shards(c, im, &why) : make_one(c, im, &why);
	if (rc == -ENOMEM) {
		ckpt_image_free(im);
		return diag_nomem(d);
	}
	if (rc) {
		drop_files(im);	/* nothing to serve but the reason */
		diag_line(&why, line, sizeof(line));
	}
	rc = readme(c, im, rc ? line : NULL, d);
	if (!rc && im->left.oom)
		rc = diag_nomem(d);
	if (rc) {
		ckpt_image_free(im);
		return rc;
	}
	*out = im;
	return 0;
}

void ckpt_image_free(struct ckpt_image *im)
{
	if (!im)
		return;
	drop_files(im);
	free(im->files);
	free(im->left.p);
	ckpt_st_flat_release(&im->f);
	hf_cut_release(&im->cut);
	free(im);
}

uint32_t ckpt_image_nfiles(const struct ckpt_image *im)
{
	return im->nfiles;
}

const char *ckpt_image_name(const struct ckpt_image *im, uint32_t k)
{
	return im->files[k].name;
}

uint64_t ckpt_image_size(const struct ckpt_image *im, uint32_t k)
{
	return im->files[k].size;
}

bool ckpt_image_same(const struct ckpt_image *a, const struct ckpt_image *b)
{
	if (a->nfiles != b->nfiles)
		return false;
	for (uint32_t k = 0; k < a->nfiles; k++) {
		const struct img_file *x = &a->files[k], *y = &b->files[k];

		if (strcmp(x->name, y->name) || x->size != y->size ||
		    x->nmem != y->nmem || x->n != y->n ||
		    memcmp(x->mem, y->mem, x->nmem))
			return false;
		/* the same places: a tensor replaced by another of its
		   shape (mv over) has another storage */
		for (uint32_t i = 0; i < x->n; i++)
			if (x->order[i]->t != y->order[i]->t)
				return false;
	}
	return true;
}

bool ckpt_image_owns(const struct ckpt_image *im, const char *name)
{
	/* an index is the image's own or none: another names other shards */
	if (ckpt_hf_index_name(name))
		return true;
	for (uint32_t k = 0; k < im->nfiles; k++)
		if (!strcmp(im->files[k].name, name))
			return true;
	return false;
}

/* The tensor of file @f holding data byte @x (entries with no bytes have
 * begin == end and hold none). */
static const struct st_ent *tensor_at(const struct img_file *f, uint64_t x)
{
	uint32_t lo = 0, hi = f->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (f->order[mid]->end <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->n ? f->order[lo] : NULL;
}

int ckpt_image_at(struct ckpt *c, const struct ckpt_image *im, uint32_t k,
		  uint64_t off, uint64_t len, struct ckpt_image_seg *seg,
		  struct diag *d)
{
	const struct img_file *f = &im->files[k];
	const struct st_ent *e;
	const struct ckpt_tensor *t;
	uint64_t x, base, run;
	int fd, rc;

	if (off >= f->size || !len)
		return 0;
	*seg = (struct ckpt_image_seg){ .from = CKPT_IMG_MEM, .fd = -1 };
	if (off < f->nmem) {
		seg->p = f->mem + off;
		seg->len = f->nmem - off < len ? f->nmem - off : len;
		return 1;
	}
	x = off - f->nmem;
	e = tensor_at(f, x);
	if (!e)
		return 0;
	t = e->t;
	seg->t = t;
	seg->tpos = x - e->begin;
	seg->len = e->end - x < len ? e->end - x : len;
	seg->from = CKPT_IMG_MAKE;
	if (!t->contiguous)
		return 1;
	if (ckpt_storage_pieced(c, t->storage)) {
		rc = ckpt_pieced_where(c, t, seg->tpos, &fd, &base, &run, d);
		if (rc == -ENOTSUP)
			return 1;	/* made when read */
		if (rc)
			return rc;
		seg->len = run < seg->len ? run : seg->len;
	} else {
		rc = ckpt_storage_data(c, t->storage, &fd, &base, d);
		if (rc)
			return rc;
		base += t->offset * t->dtype->size + seg->tpos;
	}
	seg->from = CKPT_IMG_FD;
	seg->fd = fd;
	seg->pos = base;
	return 1;
}

long long ckpt_image_read(struct ckpt *c, const struct ckpt_image *im,
			  uint32_t k, void *buf, uint64_t len, uint64_t off,
			  struct diag *d)
{
	uint64_t done = 0;

	while (done < len) {
		struct ckpt_image_seg s;
		long long got;
		int rc = ckpt_image_at(c, im, k, off + done, len - done, &s,
				       d);

		if (rc <= 0) {
			if (rc < 0)
				return rc;
			break;
		}
		switch (s.from) {
		case CKPT_IMG_MEM:
			memcpy((char *)buf + done, s.p, s.len);
			break;
		case CKPT_IMG_FD:
			rc = io_pread_diag(s.fd, (char *)buf + done, s.len,
					   s.pos, "tensor data", d);
			if (rc)
				return rc;
			break;
		default:
			got = ckpt_tensor_read(c, s.t, (char *)buf + done,
					       s.len, s.tpos, d);
			if (got < 0)
				return got;
			if ((uint64_t)got != s.len)
				return diag_corrupt(d, DIAG_NO_OFFSET, "a "
						    "tensor of %s ends early",
						    im->files[k].name);
		}
		done += s.len;
	}
	return (long long)done;
}
