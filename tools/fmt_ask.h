/*
 * fmt_ask.h - what the tools ask of a checkpoint's format that the
 * descriptor (core/ckpt/ckpt_format.h) does not answer yet.  Everything
 * else they ask through ckpt_fmt(c), ckpt_can(), ckpt_folder(),
 * ckpt_part_at(), ckpt_finding(), ckpt_verify() and the rest, and never
 * test which format they have; each question here is one the descriptor
 * should answer, and until it does it is answered in one place.
 *
 * TODO(lead): descriptor.  Every function below.
 */
#ifndef PT_TOOLS_FMT_ASK_H
#define PT_TOOLS_FMT_ASK_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt/ckpt.h"

/*
 * Is @c a file of one JSON header and tensors (c->hdr_len bytes of header
 * at 8, its __metadata__ in c->meta, storage k tensor k of the root),
 * which ptrepack writes back as such by default?  (A descriptor field:
 * the header's shape, and the output format it is written as.)
 */
static inline bool fmt_is_st(const struct ckpt *c)
{
	return ckpt_fmt(c) == &ckpt_fmt_safetensors;
}

/*
 * Does storage @s's data_off count in a file of @c a reader can check (a
 * zip record's, a legacy block's, a safetensors tensor's, a shard's)?  A
 * DCP chunk's and a tar-era member's are not shown.
 */
static inline bool fmt_data_off_shown(const struct ckpt *c,
				      const struct ckpt_storage *s)
{
	struct ckpt_folder f;

	return s->rec || ckpt_fmt(c) == &ckpt_fmt_legacy || fmt_is_st(c) ||
	       ckpt_folder(c, &f);
}

/* Is @c converted when ptrepack writes it as a torch zip (ptrepack
 * --json's "converted": any format but the zip itself)? */
static inline bool fmt_zip_converted(const struct ckpt *c)
{
	return ckpt_fmt(c) != &ckpt_fmt_zip;
}

/* The byte of a folder's index that finding @i is about, or
 * DIAG_NO_OFFSET (ckpt_finding() gives its line only). */
static inline uint64_t fmt_finding_off(const struct ckpt *folder, uint32_t i)
{
	return folder->hf->issues[i].off;
}

/* A folder's other file @i < ckpt_folder()'s nfiles: its name and size,
 * shown by the mount or not (ckpt_folder_file() has those it shows). */
static inline void fmt_folder_file(const struct ckpt *folder, uint32_t i,
				   const char **name, uint64_t *size)
{
	*name = folder->hf->files[i].name;
	*size = folder->hf->files[i].size;
}

#endif
