/*
 * gguf_write.h - what the GGUF writer's two files share: the key/values
 * and the tensor type of the file to write, decided from the writer's
 * options and the checkpoint (gguf_wopt.c) before gguf_write.c lays out
 * and streams the file.  Internal to core/fmt/gguf.
 */
#ifndef PT_FMT_GGUF_GGUF_WRITE_H
#define PT_FMT_GGUF_GGUF_WRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"

struct ckpt_write_opts;

/* One key/value of the file written. */
struct gw_kv {
	const char *key;	/* NUL-terminated: the source's (its arena)
				   or own_key */
	uint32_t klen;
	uint8_t type;		/* enum gguf_vtype */
	uint8_t atype;		/* GGUF_ARRAY: its elements' type */
	uint64_t count;		/* GGUF_ARRAY: its elements */
	/* the value's bytes (after its type; an array's after its element
	   type and count), in the file's byte order: copied from the
	   source GGUF at src->val, or made from an option into val */
	const struct gguf_kv *src;
	unsigned char *val;	/* malloc'd, when src is NULL */
	uint64_t len;
	char *own_key;		/* an option's key (malloc'd), or NULL */
};

/* The file before its tensors. */
struct gw_head {
	struct gw_kv *kv;	/* in the file's order */
	uint32_t n, cap;
	bool big;		/* big-endian: the source GGUF's order */
	uint32_t align;		/* general.alignment, or 32 */
	/* type=: what floating tensors become (F32, F16, BF16, Q8_0), or
	   NULL: each keeps its type */
	const struct gguf_type *to;
};

/*
 * The key/values of @c written as GGUF with @o's options (o->fmt_args),
 * and the type asked, into @h (zeroed by the caller; release it either
 * way).  0, or -EINVAL with @d set for a bad option, -ENOTSUP for no
 * architecture to name, -errno.
 */
int gguf_whead(struct ckpt *c, const struct ckpt_write_opts *o,
	       struct gw_head *h, struct diag *d);

/* Append u32 key @key = @v unless @h has it (general.quantization_version
 * of converted tensors).  0 or -ENOMEM with @d set. */
int gguf_whead_u32(struct gw_head *h, const char *key, uint32_t v,
		   struct diag *d);

void gguf_whead_release(struct gw_head *h);

#endif
