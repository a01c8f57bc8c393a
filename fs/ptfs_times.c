/*
 * ptfs_times.c - modification times of the files in a mount.
 *
 * rsync -a (the README's way to copy between mounts) skips a file whose
 * size and mtime, in whole seconds, match.  Two checkpoints saved in the
 * same second used to show one time on every file, so rsync copied
 * nothing between them.  Each file's mtime is therefore the checkpoint's
 * moved back by a fingerprint of what the file holds: for a tensor, the
 * CRC-32 of its storage record (from the central directory: no data is
 * read) with its dtype, offset, shape and strides; for a value, its text.
 * Equal contents show equal times (rsync of identical checkpoints stays a
 * no-op); different contents differ unless 25-bit fingerprints collide.
 * Without a fingerprint (an edited or new storage, a legacy file without
 * CRCs, directories) a file shows the checkpoint's own time.
 * docs/design.md weighs the alternatives.
 */
#include "ptfs.h"

#include <string.h>

/* Times go back at most 2^25 s (about 388 days) from the checkpoint's. */
#define SPREAD_BITS	25

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	while (n--)
		h = (h ^ *s++) * 0x100000001b3ull;
	return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	return fnv(h, &v, sizeof(v));
}

/* The fingerprint of storage @s, or 0 when its record does not tell. */
static uint64_t storage_fp(const struct ckpt_storage *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	if (!s || !s->rec || s->modified || s->fresh)
		return 0;
	h = fnv_u64(h, s->rec->crc32);
	return fnv_u64(h, s->nbytes);
}

static uint64_t tensor_fp(const struct ckpt_tensor *t)
{
	uint64_t h = storage_fp(t->storage);

	if (!h || t->fresh)
		return 0;
	h = fnv(h, t->dtype->name, strlen(t->dtype->name));
	h = fnv_u64(h, t->offset);
	h = fnv_u64(h, (uint64_t)t->ndim);
	for (int i = 0; i < t->ndim; i++) {
		h = fnv_u64(h, (uint64_t)t->shape[i]);
		h = fnv_u64(h, (uint64_t)ckpt_tensor_stride(t)[i]);
	}
	return h;
}

static void move_back(const struct ptfs *fs, uint64_t fp, struct timespec *t)
{
	*t = fs->st.st_mtim;
	if (fp)
		t->tv_sec -= (time_t)(fp & ((1ull << SPREAD_BITS) - 1));
}

void ptfs_node_mtime(const struct ptfs *fs, const struct ckpt_node *n,
		     struct timespec *t)
{
	uint64_t fp = 0;

	if (ovl_staged(n))
		fp = 0;		/* edited: its bytes are the overlay's */
	else if (n->kind == CKPT_N_TENSOR && n->tensor)
		fp = tensor_fp(n->tensor);
	else if ((n->kind == CKPT_N_VALUE || n->kind == CKPT_N_OPAQUE) &&
		 n->text)
		fp = fnv(0xcbf29ce484222325ull, n->text, n->textlen);
	move_back(fs, fp, t);
}

void ptfs_storage_mtime(const struct ptfs *fs, const struct ckpt_storage *s,
			struct timespec *t)
{
	move_back(fs, storage_fp(s), t);
}
