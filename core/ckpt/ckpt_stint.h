/*
 * ckpt_stint.h - what the safetensors writer's two files share: the flat
 * map of names to tensors (ckpt_stflat.c) that ckpt_stwrite.c lays out.
 * Not for callers.
 */
#ifndef PT_CKPT_CKPT_STINT_H
#define PT_CKPT_CKPT_STINT_H

#include "ckpt_int.h"
#include "util/sbuf.h"

#define CKPT_ST_META	"__metadata__"

/* One name of the flat map. */
struct st_ent {
	const char *name;	/* flattened, UTF-8, NUL-terminated (arena) */
	size_t len;
	struct ckpt_node *node;	/* the node that shows it */
	struct ckpt_tensor *t;
	uint32_t kept;		/* the entry holding its tensor: itself, or
				   the first name of its tie (an alias) */
	uint32_t seq;		/* its place in the tree's (state dict's)
				   order */
	uint64_t begin, end;	/* data_offsets, once laid out */
};

struct st_flat {
	/* in */
	bool drop;		/* leave python values out, don't refuse */
	bool drop_tensors;	/* ... and tensors it cannot hold, or
				   cannot name (note() says why) */
	void (*note)(void *arg, const char *key, const char *what);
	void *note_arg;
	const uint8_t *part;	/* ckpt_write_opts.part: root slots kept */
	bool tie_first_seen;	/* a tie is kept under its first name in
				   the tree's order (transformers), not in
				   sorted order (save_model) */
	struct ckpt_node *const *roots;	/* ckpt_write_opts.roots */
	const char *const *root_keys;
	uint32_t nroots;
	const char *out;	/* another format's writer ("GGUF"): named in
				   the refusals, and the byte order, dtypes
				   and names are its to check; NULL:
				   safetensors */
	/* out: every name, sorted by name (bytes) */
	struct st_ent *e;
	uint32_t n, cap;
	uint64_t visits, budget;	/* nodes walked, and at most */
	uint32_t aliases;	/* entries that are not kept */
	uint32_t dropped;	/* values left out */
	struct arena arena;
	struct diag *d;
};

/*
 * Flatten @c's tree into @f, its "in" fields from @o (st_drop, note,
 * part, roots; tie_first_seen and out are the caller's, set first);
 * release @f either way.  0 or -errno with @d set: -ENOTSUP for what
 * safetensors (f->out) cannot hold, -EINVAL for a name it cannot have.
 */
int ckpt_st_flatten(struct ckpt *c, const struct ckpt_write_opts *o,
		    struct st_flat *f, struct diag *d);
void ckpt_st_flat_release(struct st_flat *f);

/* A safetensors file laid out, not yet written (ckpt_stwrite.c). */
struct st_layout {
	struct st_ent **order;	/* its tensors, in header order; each
				   entry's begin and end set */
	uint32_t n;
	struct sbuf hdr;	/* the header, padded (its length: the
				   8 bytes before it) */
	uint64_t base;		/* 8 + hdr.n: where the data starts */
	uint64_t total;		/* bytes of tensor data */
};

/*
 * ckpt_stwrite.c: the file ckpt_st_write_part() would write of @f's kept
 * entries with @pick[i] set (all: NULL), its __metadata__ the members
 * @meta (NULL: the checkpoint's, as ckpt_st_write() has it), into @L:
 * what a computed file (ckpt_hfimage.c) serves.  0 or -errno with @d set
 * (@L empty).  Release @L with ckpt_st_layout_release().
 */
int ckpt_st_layout(struct ckpt *c, struct st_flat *f, const uint8_t *pick,
		   const char *meta, const struct ckpt_write_opts *o,
		   struct st_layout *L, struct diag *d);
void ckpt_st_layout_release(struct st_layout *L);

/*
 * ckpt_stwrite.c: ckpt_write() of a safetensors file into @fd (with
 * @clone, an empty file of ckpt_save()'s that may start as a clone of the
 * checkpoint).  0 or -errno with @d set.
 */
int ckpt_st_write(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
		  bool clone, struct diag *d);

/*
 * ckpt_stwrite.c: of flat map @f, the kept entries i with @pick[i]
 * non-zero as one safetensors file into @fd (a new, empty file), its
 * __metadata__ the JSON members @meta ("\"format\":\"pt\""), no aliases
 * recorded: one shard of a Hugging Face folder (ckpt_hfout.c).  Adds to
 * *@st (views, written, copied; size: this file's bytes).  0 or -errno
 * with @d set.
 */
int ckpt_st_write_part(struct ckpt *c, int fd, struct st_flat *f,
		       const uint8_t *pick, const char *meta,
		       const struct ckpt_write_opts *o,
		       struct ckpt_write_stats *st, struct diag *d);

#endif
