/*
 * cvt.h - dtype conversion of tensor data as torch's .to() does it, bit
 * for bit, between the floating dtypes: float64, float32, float16,
 * bfloat16 and torch 2.x's float8_e4m3fn, float8_e5m2, float8_e4m3fnuz
 * and float8_e5m2fnuz (docs/user-guide.md, "Converting dtypes").
 *
 *   cvt.c         elements: one run of elements from one dtype to another
 *   cvt_ckpt.c    checkpoints: storages re-typed in the model, so that the
 *                 writer emits new records and a new data.pkl
 *   cvt_stream.c  their new bytes made as the writer reads them
 *   cvt_coded.c   coded tensors (a GGUF Q8_0 tensor) decoded into a dtype
 *
 * torch converts every pair through float32 (c10's Half, BFloat16 and
 * Float8 types are built from a float; a double is first rounded to
 * float, so float64 -> float16 rounds twice, as here).  Each narrowing
 * rounds to nearest, ties to even; what differs per type is overflow and
 * NaN, see cvt.c.
 */
#ifndef PT_CVT_CVT_H
#define PT_CVT_CVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"

struct diag;
struct cvt_conv;

/* Which torch's NaN patterns to produce: they differ in one place. */
enum cvt_flavour {
	CVT_TORCH2 = 0,	/* torch 2.x: NaN -> bfloat16 is 0x7fc0 */
	CVT_TORCH1,	/* torch 1.13: float32/float64 NaN -> bfloat16 is
			   0xffff (its vectorised copy kernel) */
};

/* Can @dt's elements be converted (one of the eight types above)? */
bool cvt_supported(const struct ckpt_dtype *dt);

/* The @k-th of those eight (from 0), or NULL past the last. */
const struct ckpt_dtype *cvt_dtype(unsigned k);

/*
 * Convert @n elements of @from at @src into @to at @dst (the buffers must
 * not overlap), little-endian, or big-endian on both sides when @big.
 * Both dtypes must be cvt_supported(); equal dtypes copy.
 */
void cvt_elems(const struct ckpt_dtype *from, const struct ckpt_dtype *to,
	       bool big, enum cvt_flavour fl, const void *src, void *dst,
	       size_t n);

/* ---- checkpoints (cvt_ckpt.c) ---- */

/* What a conversion did. */
struct cvt_stats {
	uint32_t tensors;	/* tensors now of the new dtype */
	uint32_t storages;	/* storages converted */
	uint64_t bytes_in;	/* their bytes before */
	uint64_t bytes_out;	/* and after */
};

/*
 * The one dtype storage @s's tensors view it as, when it can be converted
 * as a whole: every tensor over it a plain strided one (a Parameter's
 * too) of one cvt_supported() dtype.  NULL otherwise, with *@why saying
 * why in a few words when some tensor over it is floating (NULL when none
 * is: nothing to convert).
 */
const struct ckpt_dtype *cvt_storage_dtype(const struct ckpt *c,
					   const struct ckpt_storage *s,
					   const char **why);

/*
 * The same for a conversion of @s to @to in particular, as the mount does
 * it (user.dtype): also refused when the rebuild call cannot change as
 * @to needs (cvt_select()'s rules: float8 for a tensor that requires
 * grad, in a legacy file, or with python attributes).  The dtype @s is
 * converted from, or NULL with *@why saying why not.
 */
const struct ckpt_dtype *cvt_storage_plan(const struct ckpt *c,
					  const struct ckpt_storage *s,
					  const struct ckpt_dtype *to,
					  const char **why);

/*
 * Write storage @s's bytes, elements of @from, converted to @to into @fd
 * at @off, streamed through a bounded buffer; nothing else changes.  The
 * checkpoint's byte order is kept.  An edit of user.dtype through the
 * mount calls this with an overlay file as @fd, then cvt_storage_retype()
 * (core/ovl/ovl_retype.c, docs/editing.md).  0 or -errno with @d set.
 */
int cvt_storage_write(struct ckpt *c, struct ckpt_storage *s,
		      const struct ckpt_dtype *from,
		      const struct ckpt_dtype *to, enum cvt_flavour fl, int fd,
		      uint64_t off, struct diag *d);

/*
 * Make storage @s, whose converted bytes are now at @off of @fd (the
 * caller keeps @fd open until the checkpoint is written or closed), of
 * dtype @to, and every tensor viewing it (elements of @from so far):
 * offsets and strides, counted in elements, stay as they are.  The next
 * ckpt_write() writes a new data.pkl, with the storage class and rebuild
 * call torch.save writes for @to (_rebuild_tensor_v3 for float8).
 * Returns the number of tensors re-typed.
 */
uint32_t cvt_storage_retype(struct ckpt *c, struct ckpt_storage *s,
			    const struct ckpt_dtype *from,
			    const struct ckpt_dtype *to, int fd, uint64_t off);

/*
 * Plan what cvt_ckpt() converts to @to: the storages whose tensors have
 * one floating dtype other than @to (cvt_storage_dtype()) and, with @glob
 * (an fnmatch(3) pattern, '*' matching '/' too), one of whose tensors has
 * a path ("a/b", as ptls prints it) that matches.  Refused with -EINVAL
 * and @d naming the tensor: a floating tensor that would be converted but
 * cannot be, and a storage also reached through a path the glob does not
 * match (converting it would change that tensor too; leaving it would
 * untie the two).  *@plan gets c->nstorages entries, malloc'd (caller
 * frees): the dtype storage k is converted from, or NULL.  0 or -errno
 * with @d set.
 */
int cvt_select(struct ckpt *c, const struct ckpt_dtype *to, const char *glob,
	       const struct ckpt_dtype ***plan, struct diag *d);

/*
 * Convert the storages of @plan to @to (cvt_stream.c): each is re-typed
 * with its tensors now, with no bytes anywhere, and its new bytes are
 * made as they are read (c->made): by ckpt_write() and every other
 * writer, which stream them.  *@conv holds what that needs (NULL when
 * nothing was converted): free it with cvt_conv_free() after the write
 * and before ckpt_close().  @st, if not NULL, is filled in.  0 or -errno
 * with @d set; after a failure @c must not be written.
 */
int cvt_ckpt(struct ckpt *c, const struct ckpt_dtype *to,
	     const struct ckpt_dtype *const *plan, enum cvt_flavour fl,
	     struct cvt_conv **conv, struct cvt_stats *st, struct diag *d);

/* Free @v (NULL: nothing); @c's converted storages can no longer be read. */
void cvt_conv_free(struct cvt_conv *v);

/* Storage @s is now @n elements of @to at @off of @fd (converted there):
 * the storage half of a re-type, its tensors the caller's. */
void cvt_storage_set(struct ckpt_storage *s, uint64_t n,
		     const struct ckpt_dtype *to, int fd, uint64_t off);

/*
 * A new temporary file beside @near (the output path; a trailing '/' is
 * a directory's, which gets it beside itself), unlinked at once, so that
 * converted bytes lie on the output's file system: its descriptor (the
 * caller closes it), or -errno with @d set.
 */
int cvt_tmpfile(const char *near, struct diag *d);

/* ---- coded tensors (cvt_coded.c) ---- */

/*
 * Decode every coded tensor of @c (ckpt_coded(): a GGUF block type) into
 * @to (cvt_supported(), floating): its values, float32, converted as
 * .to(@to) converts float32, written into a temporary file beside @near
 * (*@tmpfd; -1 when there was none), its storage re-typed to them and
 * the tensor of @to with the values' shape, C strides.  What a writer of
 * another format then writes is the values.  @st counts them (tensors,
 * bytes in and out).  0 or -errno with @d set; after a failure @c must
 * not be written.
 */
int cvt_decode(struct ckpt *c, const struct ckpt_dtype *to,
	       enum cvt_flavour fl, const char *near, int *tmpfd,
	       struct cvt_stats *st, struct diag *d);

#endif
