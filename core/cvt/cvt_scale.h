/*
 * cvt_scale.h - scaled float8 weights, both ways, through the model
 * (ptrepack --dequant and --quant; docs/user-guide.md, "Scaled float8").
 *
 *   cvt_scale.c   the pairs (X.weight beside X.weight_scale_inv or
 *                 X.weight_scale) and their checks; what both ways share
 *   cvt_dequant.c dequantization, made as the writer reads
 *   cvt_quant.c   block quantization as DeepSeek-V3's weight_quant does it
 *   cvt_hfcfg.c   config.json without its quantization_config
 *
 * Storages are re-typed as --dtype re-types them (cvt_storage_retype()),
 * so the writers need nothing new.  A dequantized weight has no bytes
 * anywhere: they are made as the writer reads them (c->made, the seam DCP
 * tensors in chunks already use), since bfloat16 doubles them and a
 * temporary copy would double the writes again.  A quantized weight and
 * its new scales go into one temporary file beside the output, as
 * cvt_ckpt.c does.  Scale tensors leave the tree as a mount's rm takes a
 * file out (ckpt_node_drop()), or come in as a mount's new file does.
 * Memory: CHUNK elements (dequant), a block row of a weight (quant).
 */
#ifndef PT_CVT_CVT_SCALE_H
#define PT_CVT_CVT_SCALE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"

struct diag;
struct sbuf;
struct cvt_made;

/* Hears of each weight converted: @path its key path ("a/b.weight"),
 * @what one line without it. */
typedef void (*cvt_scale_say_fn)(void *arg, const char *path,
				 const char *what);

struct cvt_scale_opt {
	const struct ckpt_dtype *to;	/* dequant: bfloat16, float16 or
					   float32 */
	uint32_t block;			/* quant: N of NxN blocks */
	const char *glob;		/* --only: fnmatch(3) over key paths,
					   '*' matching '/' too; NULL: all */
	const char *near;		/* the temporary file goes beside it */
	cvt_scale_say_fn say;		/* may be NULL */
	void *say_arg;
};

/* What a conversion did. */
struct cvt_scale_stats {
	uint32_t weights;	/* weights converted */
	uint32_t scales;	/* scale tensors (and input_scales) dropped or
				   added */
	uint64_t bytes_in;	/* the weights' bytes before */
	uint64_t bytes_out;	/* and after */
};

/*
 * Dequantize every scaled float8 weight of @c (or those whose path
 * o->glob matches) to o->to: X.weight (float8) and X.weight_scale_inv
 * (float32, one value per block; the block size is inferred from the two
 * shapes) or X.weight_scale (float32: one value, or one per row) become
 * X.weight = w.float() * scale, rounded to o->to as .to() rounds; the
 * scales and X.input_scale leave the tree.  Everything is checked before
 * anything changes: a scale without its weight, of another dtype or of
 * a shape that does not fit, a weight that is not float8, is -EINVAL
 * with @d naming the tensor.  *@made gets what makes the new weights'
 * bytes while @c is written (c->made points into it): the caller frees
 * it with cvt_made_free() after writing, before ckpt_close(); NULL when
 * nothing was converted.  0 or -errno with @d set (then @c is as it was).
 */
int cvt_dequant(struct ckpt *c, const struct cvt_scale_opt *o,
		struct cvt_made **made, struct cvt_scale_stats *st,
		struct diag *d);

/* The dtype --dequant (and ptfs -o dequant=) name: bf16 or bfloat16,
 * fp16 or float16, fp32 or float32; NULL for any other. */
const struct ckpt_dtype *cvt_dequant_dtype(const char *name);

/* Free what cvt_dequant() made, and clear c->made.  NULL is fine. */
void cvt_made_free(struct cvt_made *m);

/*
 * Quantize to float8_e4m3fn in o->block x o->block blocks, as
 * DeepSeek-V3's weight_quant does (cvt_quant.c says exactly how): the 2-d
 * floating weights named *.weight other than embeddings, norms, lm_head
 * and a MoE router's gate, or with o->glob the 2-d floating tensors it
 * matches; each gets X.weight_scale_inv (float32, ceil(rows/N) x
 * ceil(cols/N)) beside it.  Refusals as cvt_dequant().  *@tmpfd gets the
 * temporary file (caller closes it after writing; -1 when nothing was
 * converted).  0 or -errno with @d set; after a failure past the checks
 * @c must not be written.
 */
int cvt_quant(struct ckpt *c, const struct cvt_scale_opt *o, int *tmpfd,
	      struct cvt_scale_stats *st, struct diag *d);

/* ---- shared by both ways ---- */

/*
 * May storage @s be converted as one weight @t (@to its new dtype):
 * every tensor over it a plain row-major view of all of it, of @t's
 * shape, that cvt_storage_plan() takes?  NULL, or why not.
 */
const char *cvt_scale_whole(const struct ckpt *c,
			    const struct ckpt_tensor *t,
			    const struct ckpt_dtype *to);

/*
 * Does node @n make an item (@item, of the caller's type, whose first
 * member is the weight's node: struct ckpt_node *)?  0 yes, 1 no, else
 * -errno with @d set.
 */
typedef int (*cvt_scale_pick_fn)(const struct ckpt *c, struct ckpt_node *n,
				 const void *arg, void *item, struct diag *d);

/*
 * @fn on every live tensor node of @c: the items it makes, @size bytes
 * each, into *@out (malloc'd; the caller frees), *@n of them.  Two items
 * over one storage are -EINVAL (converting one would change the other),
 * and a big-endian checkpoint -ENOTSUP (scales are little-endian here).
 * 0 or -errno with @d set.
 */
int cvt_scale_collect(const struct ckpt *c, cvt_scale_pick_fn fn,
		      const void *arg, size_t size, void **out, uint32_t *n,
		      struct diag *d);

/* -EINVAL: "@n (its path): @fmt...", one line. */
int cvt_scale_refuse(struct diag *d, const struct ckpt_node *n,
		     const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "(300, 200)" for @t's shape into @buf. */
const char *cvt_scale_shape(const struct ckpt_tensor *t, char *buf,
			    size_t size);

/* ---- config.json (cvt_hfcfg.c) ---- */

/*
 * ckpt_write_opts.rewrite for a Hugging Face folder output after
 * cvt_dequant(): config.json (@name, @size bytes at @fd) without its
 * top-level "quantization_config" member, every other byte kept, into
 * @out: 1; 0 for any other file or one without that member (copied as
 * it is).  @arg: a bool set true when it removed one.  -errno with @d
 * set (config.json is not a JSON object, or cannot be read).
 */
int cvt_hfcfg_rewrite(void *arg, const char *name, int fd, uint64_t size,
		      struct sbuf *out, struct diag *d);

#endif
