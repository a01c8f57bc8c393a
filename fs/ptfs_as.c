/*
 * ptfs_as.c - .ptfs/as/: the mounted checkpoint as safetensors files that
 * loaders read (from_pretrained, safe_open, vLLM), computed by the core
 * (ckpt_image.h) and never stored, beside the folder's other files
 * (config.json, the tokenizer's) so that from_pretrained("m/.ptfs/as")
 * finds a whole model.
 *
 *   A = 2^43            .ptfs/as/
 *   A + 1 + k           file k of the image (model.safetensors, or the
 *                       shards of -o shards=SIZE and their index; README)
 *   A + 1 + 2^20 + j    the folder's other file j (fs->files[j]), unless
 *                       the image owns its name (ckpt_image_owns(): its
 *                       own files, any index)
 *
 * The image follows the model: every change takes the write lock, which
 * counts it (fs->gen, ptfs_wrlock()), and the next request for a file
 * here makes the image again (ptfs_as_ready(), before the request takes
 * its own lock).  An image that comes out the same (same headers, same
 * tensors) is kept.  An open file holds the image it opened (a
 * reference): when a change made another, reads through it fail with
 * ESTALE rather than mix two layouts; opened again, it reads the new.  A
 * change since the last open drops the kernel's cached pages at the next
 * (no keep_cache), so bytes written into a tensor show.  A read-only mount
 * never changes, and is read without opens (FUSE_CAP_NO_OPEN_SUPPORT).
 *
 * Reads: a tensor's bytes lying in a file are spliced from it, pieces of
 * up to PIECES_MAX tensors in one reply; the header is memory; strided
 * views are made by the core.
 */
#include "ptfs.h"

#include "diag/diag.h"
#include "source/ident.h"
#include "util/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#define AS_INO		((fuse_ino_t)1 << 43)
#define AS_SIDE		((fuse_ino_t)1 << 20)	/* files of the image, at most */
#define PIECES_MAX	64

struct ptfs_img {
	struct ckpt_image *im;
	uint32_t refs;		/* the mount's, and each open file's (atomic) */
	struct src_access acc;	/* who may read every storage */
	bool have_acc;
	uint64_t open_gen[];	/* by file: fs->gen at its last open */
};

static void img_put(struct ptfs_img *g)
{
	if (g && __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		ckpt_image_free(g->im);
		free(g);
	}
}

void ptfs_as_release_all(struct ptfs *fs)
{
	img_put(fs->as.img);
	fs->as.img = NULL;
}

bool ptfs_as_ino(fuse_ino_t ino)
{
	return ino >= AS_INO && ino < AS_INO + 2 * AS_SIDE;
}

fuse_ino_t ptfs_as_dir_ino(void)
{
	return AS_INO;
}

static bool fresh(const struct ptfs *fs)
{
	return fs->as.img && fs->as.gen == __atomic_load_n(&fs->gen,
							   __ATOMIC_ACQUIRE);
}

/* The image again, under the write lock (taken without counting it as a
 * change).  0 or -errno with @d set. */
static int remake(struct ptfs *fs, struct diag *d)
{
	struct ptfs_img *g = NULL, *old = fs->as.img;
	struct ckpt_image *im;
	uint32_t n;
	int rc;

	if (fresh(fs))
		return 0;
	/* the flat map walks nodes: rows become nodes first */
	if ((rc = ckpt_materialize(fs->c, d)) ||
	    (rc = ckpt_image_make(fs->c, fs->as.max_shard, &im, d)))
		return rc;
	if (old && ckpt_image_same(old->im, im)) {
		ckpt_image_free(im);
		fs->as.gen = fs->gen;
		return 0;
	}
	n = ckpt_image_nfiles(im);
	g = calloc(1, sizeof(*g) + n * sizeof(*g->open_gen));
	if (!g) {
		ckpt_image_free(im);
		return diag_nomem(d);
	}
	g->im = im;
	g->refs = 1;
	g->have_acc = ckpt_all_access(fs->c, &g->acc);
	for (uint32_t k = 0; k < n; k++)
		g->open_gen[k] = UINT64_MAX;	/* never opened */
	fs->as.img = g;
	fs->as.gen = fs->gen;
	img_put(old);
	return 0;
}

int ptfs_as_ready(struct ptfs *fs, fuse_ino_t ino, struct diag *d)
{
	int rc;

	if (!ptfs_as_ino(ino))
		return 0;
	ptfs_rdlock(fs);
	rc = fresh(fs);
	ptfs_unlock(fs);
	if (rc)
		return 0;
	ptfs_wrlock_keep(fs);
	rc = remake(fs, d);
	ptfs_unlock(fs);
	return rc;
}

/* Is side file @j left out (a file of the image's name, an index)? */
static bool hidden(const struct ptfs *fs, uint32_t j)
{
	return ckpt_image_owns(fs->as.img->im, fs->files[j].m->leaf);
}

int ptfs_as_get(const struct ptfs *fs, fuse_ino_t ino, struct ptfs_ino *out)
{
	fuse_ino_t k = ino - AS_INO;

	if (!k) {
		out->kind = PTFS_AS;	/* made or not */
		return 0;
	}
	if (!fs->as.img)
		return -ENOENT;
	k--;
	if (k < AS_SIDE) {
		if (k >= ckpt_image_nfiles(fs->as.img->im))
			return -ENOENT;
		out->kind = PTFS_ASFILE;
		out->index = (uint32_t)k;
		return 0;
	}
	k -= AS_SIDE;
	if (k >= fs->nfiles || hidden(fs, (uint32_t)k))
		return -ENOENT;
	out->kind = PTFS_FILE;
	out->index = (uint32_t)k;
	return 0;
}

fuse_ino_t ptfs_as_lookup(const struct ptfs *fs, const char *name)
{
	const struct ckpt_image *im;

	if (!fs->as.img)
		return 0;
	im = fs->as.img->im;
	for (uint32_t k = 0; k < ckpt_image_nfiles(im); k++)
		if (!strcmp(ckpt_image_name(im, k), name))
			return AS_INO + 1 + k;
	for (uint32_t j = 0; j < fs->nfiles; j++)
		if (!strcmp(fs->files[j].m->leaf, name) && !hidden(fs, j))
			return AS_INO + 1 + AS_SIDE + j;
	return 0;
}

int ptfs_as_dirent(const struct ptfs *fs, uint64_t i, const char **name,
		   fuse_ino_t *ino)
{
	uint32_t n;

	if (!fs->as.img)
		return 0;
	n = ckpt_image_nfiles(fs->as.img->im);
	if (i < n) {
		*name = ckpt_image_name(fs->as.img->im, (uint32_t)i);
		*ino = AS_INO + 1 + i;
		return 1;
	}
	i -= n;
	if (i >= fs->nfiles)
		return 0;
	if (hidden(fs, (uint32_t)i))
		return -1;
	*name = fs->files[i].m->leaf;
	*ino = AS_INO + 1 + AS_SIDE + i;
	return 1;
}

uint64_t ptfs_as_size(const struct ptfs *fs, uint32_t k,
		      const struct src_access **acc)
{
	*acc = fs->as.img->have_acc ? &fs->as.img->acc : NULL;
	return ckpt_image_size(fs->as.img->im, k);
}

int ptfs_as_open(struct ptfs *fs, uint32_t k, struct fuse_file_info *fi)
{
	struct ptfs_img *g = fs->as.img;
	uint64_t gen = __atomic_load_n(&fs->gen, __ATOMIC_ACQUIRE);

	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EACCES;
	/* the kernel's pages are this image's as they were at the last
	   open, if nothing changed since */
	fi->keep_cache = g->open_gen[k] == gen;
	g->open_gen[k] = gen;
	__atomic_add_fetch(&g->refs, 1, __ATOMIC_ACQ_REL);
	fi->fh = (uint64_t)(uintptr_t)g;
	return 0;
}

bool ptfs_as_release(struct ptfs *fs, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	(void)fs;
	if (!ptfs_as_ino(ino) || ino <= AS_INO || ino >= AS_INO + 1 + AS_SIDE)
		return false;
	img_put((struct ptfs_img *)(uintptr_t)fi->fh);
	return true;
}

/* Reply @size bytes of @g's file @k at @off: spliced from the files the
 * pieces lie in when they all do (and are few), else copied.  Every
 * piece's files are checked unchanged first. */
static void reply_pieces(fuse_req_t req, struct ptfs *fs,
			 const struct ptfs_img *g, uint32_t k, size_t size,
			 off_t off, struct diag *d)
{
	struct fuse_bufvec *bv;
	struct ckpt_image_seg s[PIECES_MAX], one;
	uint64_t at = (uint64_t)off, end = at + size;
	uint32_t n = 0;
	bool splice = true;
	char *buf;
	long long got;
	int rc = 0;

	while (at < end) {
		struct ckpt_image_seg *p = n < PIECES_MAX ? &s[n] : &one;

		rc = ckpt_image_at(fs->c, g->im, k, at, end - at, p, d);
		if (rc <= 0)
			break;
		if (p->t && (rc = ckpt_storage_unchanged(fs->c,
							 p->t->storage, d)))
			break;
		splice = splice && p != &one && (p->from == CKPT_IMG_MEM ||
			 (p->from == CKPT_IMG_FD && !io_backed(p->fd)));
		at += p->len;
		n++;
	}
	if (rc < 0)
		return ptfs_reply_err(req, rc, d);
	/* buf[] past its declared one: on the heap, where the compiler
	   cannot assume there is only one */
	if (splice && at == end &&
	    (bv = calloc(1, sizeof(*bv) + n * sizeof(bv->buf[0])))) {
		bv->count = n;
		for (uint32_t i = 0; i < n; i++) {
			struct fuse_buf *b = bv->buf + i;

			b->size = s[i].len;
			if (s[i].from == CKPT_IMG_MEM) {
				b->mem = (void *)(uintptr_t)s[i].p;
				continue;
			}
			b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK |
				   FUSE_BUF_FD_RETRY;
			b->fd = s[i].fd;
			b->pos = (off_t)s[i].pos;
		}
		fuse_reply_data(req, bv, FUSE_BUF_SPLICE_MOVE);
		free(bv);
		return;
	}
	/* a strided view, a remote stand-in, many small tensors: copied */
	buf = malloc(size ? size : 1);
	if (!buf)
		return ptfs_reply_err(req, -ENOMEM, NULL);
	got = ckpt_image_read(fs->c, g->im, k, buf, size, (uint64_t)off, d);
	if (got < 0)
		ptfs_reply_err(req, got, d);
	else
		fuse_reply_buf(req, buf, (size_t)got);
	free(buf);
}

void ptfs_as_read(fuse_req_t req, struct ptfs *fs, uint32_t k, size_t size,
		  off_t off, struct fuse_file_info *fi)
{
	const struct ptfs_img *g = fs->as.img;
	struct diag d;
	uint64_t len;

	diag_init(&d, fs->c->path);
	/* an open file reads the image it opened, or nothing */
	if (fi && fi->fh && (const struct ptfs_img *)(uintptr_t)fi->fh != g)
		return ptfs_reply_err(req, -ESTALE, NULL);
	len = ckpt_image_size(g->im, k);
	if ((uint64_t)off >= len)
		return (void)fuse_reply_buf(req, NULL, 0);
	if (len - (uint64_t)off < size)
		size = (size_t)(len - (uint64_t)off);
	/* the checkpoint's identity was checked (ptfs_op_read()), each
	   piece's files are, as the pieces are found */
	reply_pieces(req, fs, g, k, size, off, &d);
}
