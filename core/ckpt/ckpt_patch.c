/*
 * ckpt_patch.c - what write-back needs to patch the original checkpoint
 * instead of copying it: the clone of the checkpoint into the temporary
 * file (FICLONE), which bytes of a staged storage were written since its
 * copy-up (a dirty map of 64 KiB chunks), and the sources that tell the
 * zip writer where their bytes already are in the original
 * (core/zip/ptz_copy.c compares and writes accordingly).
 *
 * A staged storage is a whole copy in the overlay.  Comparing all of it
 * with the original would cost reading both, whatever the edit; the map
 * narrows that to the chunks written.  It is made, all clean, right after
 * the copy-up, and ckpt_dirty_mark() sets the chunks an in-place write is
 * about to touch (ckpt_tensor_write(), the overlay's storage writes): a
 * chunk marked and then not changed costs a compare, a chunk changed and
 * not marked would lose the edit, so marking comes first and is never
 * skipped.  A map describes one file, the data file at its copy-up
 * (device and inode): bytes replaced wholesale arrive as another file
 * renamed over it (ovl_replace_contents(), a dtype conversion) and are
 * compared in full, as is every storage staged before a remount (no map).
 *
 * Marks are atomic ORs, so they need no lock; the map is read by
 * write-back, which runs with the edits stopped.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <linux/fs.h>	/* FICLONE */
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "zip/ptz_write.h"

struct ckpt_dirty {
	dev_t dev;		/* the data file it describes */
	ino_t ino;
	bool broken;		/* a mark fell outside: trust it no more */
	uint64_t nwords;
	uint64_t bits[];	/* chunk i: bit i % 64 of word i / 64 */
};

int ckpt_dirty_track(struct ckpt_storage *s)
{
	uint64_t chunks = (s->nbytes >> CKPT_DIRTY_SHIFT) + 1;
	uint64_t nwords = (chunks + 63) / 64;
	struct ckpt_dirty *m;
	struct stat st;

	ckpt_dirty_drop(s);
	if (fstat(s->fd, &st))
		return -errno;
	m = calloc(1, sizeof(*m) + nwords * sizeof(m->bits[0]));
	if (!m)
		return -ENOMEM;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->nwords = nwords;
	s->dirty = m;
	return 0;
}

void ckpt_dirty_mark(struct ckpt_storage *s, uint64_t off, uint64_t len)
{
	struct ckpt_dirty *m = s->dirty;
	uint64_t c, last;

	if (!m || !len)
		return;
	c = off >> CKPT_DIRTY_SHIFT;
	last = (off + len - 1) >> CKPT_DIRTY_SHIFT;
	for (; c <= last && c / 64 < m->nwords; c++)
		__atomic_fetch_or(&m->bits[c / 64], UINT64_C(1) << (c % 64),
				  __ATOMIC_RELAXED);
	if (c <= last)		/* past the storage: cannot happen */
		__atomic_store_n(&m->broken, true, __ATOMIC_RELAXED);
}

void ckpt_dirty_drop(struct ckpt_storage *s)
{
	free(s->dirty);
	s->dirty = NULL;
}

const uint64_t *ckpt_dirty_bits(const struct ckpt_storage *s)
{
	struct stat st;

	if (!s->dirty || s->dirty->broken || s->fd < 0 || fstat(s->fd, &st) ||
	    st.st_dev != s->dirty->dev || st.st_ino != s->dirty->ino ||
	    (uint64_t)st.st_size != s->nbytes)
		return NULL;
	return s->dirty->bits;
}

int ckpt_clone_file(int out, int from)
{
	if (!ioctl(out, FICLONE, from))
		return 0;
	switch (errno) {
	case EOPNOTSUPP:	/* no reflinks here (ext4, tmpfs) */
	case ENOTTY:		/* no remap at all */
	case ENOSYS:
	case EXDEV:		/* the temporary is on another file system */
	case EINVAL:		/* not regular files, or refused */
	case EBADF:		/* @out is O_APPEND, or not writable */
	case EPERM:		/* an immutable or append-only file */
	case ETXTBSY:		/* a swap file */
		return 1;
	default:
		return -errno;
	}
}

void ckpt_patch_source(struct ckpt *c, struct ptz_entry *e,
		       const struct ckpt_storage *s, struct ptz_source *src)
{
	struct diag quiet;

	if (!e || e->method != PTZ_STORED || e->csize != e->usize)
		return;
	if (s && (s->nbytes != e->usize || s->retyped || s->fresh))
		return;
	diag_init(&quiet, c->path);
	if (ckpt_record_locate(c, e, &quiet))
		return;		/* the copy says why, if it must */
	src->based = true;
	src->base_off = e->data_off;
	src->base_crc = e->crc32;
	src->base_crc_ok = e->crc32 || !e->usize;
	if (s && s->fd != c->fd) {
		src->dirty = ckpt_dirty_bits(s);
		src->dirty_shift = CKPT_DIRTY_SHIFT;
	}
}
