/*
 * ckpt_image.h - a checkpoint as safetensors files that are computed, never
 * written (core/fmt/hf/ckpt_hfimage.c): the mount's .ptfs/as/, for the
 * loaders that want one file in a format they know.  An image is the
 * header and an index; a read is served from the checkpoint's own bytes
 * (edits included), so it costs no disk and no copy.  The files are byte
 * for byte what ptrepack writes of the same model: with max_shard 0,
 * `ptrepack CKPT model.safetensors` (save_model's ties); else
 * `ptrepack --max-shard-size SIZE CKPT DIR/` (save_pretrained's cut and
 * index).  What safetensors cannot hold is left out and listed in README.
 * Part of ckpt.h.
 */
#ifndef PT_CKPT_CKPT_IMAGE_H
#define PT_CKPT_CKPT_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

struct ckpt;
struct ckpt_tensor;
struct diag;

struct ckpt_image;

/* Where a piece of an image file's bytes comes from (ckpt_image_at()). */
enum ckpt_image_from {
	CKPT_IMG_MEM,		/* bytes in memory: a header, an index */
	CKPT_IMG_FD,		/* bytes lying as they are in a file */
	CKPT_IMG_MAKE,		/* bytes ckpt_tensor_read() makes: a strided
				   view, a tensor cut in chunks */
};

struct ckpt_image_seg {
	int from;		/* enum ckpt_image_from */
	uint64_t len;		/* bytes of the piece (> 0) */
	const void *p;		/* MEM */
	int fd;			/* FD: the file, and where in it */
	uint64_t pos;
	const struct ckpt_tensor *t;	/* FD, MAKE: the tensor, and the
					   piece's place in its bytes */
	uint64_t tpos;
};

/*
 * The image of @c as it stands, one file or (@max_shard > 0) shards of at
 * most that many bytes.  Never fails for what safetensors cannot hold (it
 * is left out, and README says so): when nothing can be made at all (a
 * big-endian checkpoint, a root that is no dict), the image holds README
 * alone, saying why.  0, or -ENOMEM with @d set.
 */
int ckpt_image_make(struct ckpt *c, uint64_t max_shard,
		    struct ckpt_image **out, struct diag *d);
void ckpt_image_free(struct ckpt_image *im);

/* Its files (shards, the index, README, in that order), their names and
 * sizes. */
uint32_t ckpt_image_nfiles(const struct ckpt_image *im);
const char *ckpt_image_name(const struct ckpt_image *im, uint32_t k);
uint64_t ckpt_image_size(const struct ckpt_image *im, uint32_t k);

/* Is @name a file the image holds itself, or one it must not show beside
 * its files (any Hugging Face index: it would name other shards)?  The
 * folder's other files of such a name are left out. */
bool ckpt_image_owns(const struct ckpt_image *im, const char *name);

/* Does @b show the same files, of the same sizes and headers, as @a (an
 * image made again after an edit that moved nothing)? */
bool ckpt_image_same(const struct ckpt_image *a, const struct ckpt_image *b);

/*
 * The first piece of file @k at @off, at most @len bytes, into @seg: 1, 0
 * at or past the end, or -errno with @d set.  The tensors are @c's as they
 * were when the image was made: make it again after an edit.
 */
int ckpt_image_at(struct ckpt *c, const struct ckpt_image *im, uint32_t k,
		  uint64_t off, uint64_t len, struct ckpt_image_seg *seg,
		  struct diag *d);

/* @len bytes of file @k at @off into @buf: the bytes read (short only at
 * the end), or -errno with @d set. */
long long ckpt_image_read(struct ckpt *c, const struct ckpt_image *im,
			  uint32_t k, void *buf, uint64_t len, uint64_t off,
			  struct diag *d);

#endif
