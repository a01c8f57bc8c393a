/*
 * ckpt_types.h - the checkpoint model's leaves: dtypes, storages (one per
 * storage record) and tensors (views into a storage: dtype, offset,
 * shape, stride in elements).  Part of ckpt.h, which includes it.
 */
#ifndef PT_CKPT_CKPT_TYPES_H
#define PT_CKPT_CKPT_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pkl_value;

#define CKPT_MAX_DIMS	64	/* torch's own limit is 64 too */
#define CKPT_MAX_DEPTH	256	/* nesting of the object tree */
#define CKPT_MAX_NODES	(1u << 25)

/* ---- dtypes (ckpt_dtype.c) ---- */

enum ckpt_dtype_class {
	CKPT_DT_FLOAT, CKPT_DT_INT, CKPT_DT_UINT, CKPT_DT_BOOL,
	CKPT_DT_COMPLEX, CKPT_DT_QUANT, CKPT_DT_BITS,
};

struct ckpt_dtype {
	const char *name;	/* torch's name: "float32", "bfloat16" */
	const char *storage;	/* legacy storage class or NULL: "FloatStorage" */
	uint8_t size;		/* bytes per element */
	uint8_t cls;		/* enum ckpt_dtype_class */
	const char *npy;	/* numpy descr without byte order ("f4") or NULL */
	const char *st;		/* safetensors name ("F32") or NULL */
	/* values per element along the last dimension in a safetensors
	   header: float4_e2m1fn_x2 is F4 with the last size doubled */
	uint8_t pack;
	/* a safetensors sub-byte dtype torch has no dtype for (F6_E2M3, or
	   F4 whose last size is odd): bits per value.  Its tensors are their
	   bytes (1-d, name = st) and keep the header's shape in x->st_shape;
	   ckpt_dtype_by_name() and ckpt_dtype_by_st() never give one */
	uint8_t bits;
};

/* Look up by torch name ("float32"); NULL if unknown. */
const struct ckpt_dtype *ckpt_dtype_by_name(const char *name);
/* Look up by storage class name ("FloatStorage"); NULL if unknown. */
const struct ckpt_dtype *ckpt_dtype_by_storage(const char *cls);
/* Look up by safetensors name ("F32", "BF16"); NULL if unknown. */
const struct ckpt_dtype *ckpt_dtype_by_st(const char *name);
/* The bytes-only dtype of safetensors sub-byte dtype @name ("F4",
 * "F6_E2M3", "F6_E3M2"); NULL if none. */
const struct ckpt_dtype *ckpt_dtype_st_bytes(const char *name);
/* The raw byte type UntypedStorage uses. */
const struct ckpt_dtype *ckpt_dtype_bytes(void);
/* @dt's position in the table of dtypes with a storage class, and back */
unsigned ckpt_dtype_index(const struct ckpt_dtype *dt);
const struct ckpt_dtype *ckpt_dtype_at(unsigned i);

/* ---- storages and tensors ---- */

/*
 * One of these, a ckpt_tensor and a ckpt_node per tensor of a state_dict:
 * the fields are ordered so that no padding is left (docs/design.md,
 * "Memory per tensor").
 */
struct ckpt_storage {
	const char *key;	/* "0", "1", ... (legacy: pointer digits) */
	const struct ckpt_dtype *dtype;	/* element type of the storage */
	const char *location;	/* "cpu", "cuda:0", "mps", ... */
	uint64_t numel;		/* in storage elements */
	uint64_t nbytes;	/* numel * dtype->size */
	struct ptz_entry *rec;	/* zip record; NULL for legacy files */
	uint64_t data_off;	/* absolute offset of byte 0 (after locate) */
	uint64_t pkl_off;	/* file offset of its first persistent id */
	uint32_t index;		/* position in ckpt->storages */
	uint32_t ntensors;	/* tensors viewing it */
	bool untyped;		/* UntypedStorage: numel counts bytes */
	/* edits (ckpt_edit.c, ovl.c) */
	bool modified;		/* bytes may differ from the record's */
	bool fresh;		/* made by an edit: no record, no key yet */
	/* a deflated record's bytes, inflated on first use (ckpt_inflate.c) */
	bool zdone;		/* zfd and zcrc are set (atomic, release) */
	int zfd;		/* an unlinked temporary file, once zdone */
	uint32_t zcrc;		/* CRC-32 of the inflated bytes */
	int fd;			/* where the bytes are now: the checkpoint,
				   or an overlay file (then data_off is 0) */
	/* converted to another dtype (core/cvt): the tensors' new dtype;
	   data.pkl must then be written anew (ckpt_retype.c) */
	const struct ckpt_dtype *retyped;
	/* a staged storage: the chunks written since its copy-up, so that
	   write-back compares those only (ckpt_patch.c); NULL: unknown.
	   Every write into the data file in place must mark what it writes
	   (ckpt_dirty_mark()); a file put in its place is not trusted */
	struct ckpt_dirty *dirty;
};

enum ckpt_tensor_kind {
	CKPT_T_STRIDED,		/* plain tensor over a storage */
	CKPT_T_QUANTIZED,	/* _rebuild_qtensor: integer representation */
	CKPT_T_META,		/* no data at all */
	CKPT_T_STORAGE,		/* a storage saved directly (1-d, whole) */
	CKPT_T_INLINE,		/* data inside the pickle (numpy path) */
};

/*
 * What few tensors carry: a subclass, its python state, data inside the
 * pickle, a quantizer.  A tensor with any of it points at its own (arena);
 * the others at ckpt_no_ext, all zero and read-only, so readers need no
 * check.  A Parameter shares its inner tensor's until the build writes
 * its own (ckpt_tensor_ext_own()).  Four fields in every tensor were 24
 * bytes a tensor of a state_dict for nothing.
 */
struct ckpt_tensor_ext {
	const char *cls;	/* tensor subclass "module.Name" or NULL */
	/* where the tensor lives, when its storage's location does not say
	   (no storage, or a device tensor made from a CPU one): see
	   ckpt_tensor_device() */
	const char *device;
	/* python attributes of a subclass or Parameter (2.x state): a dict
	   or OrderedDict value, or NULL */
	const struct pkl_value *state;
	/* CKPT_T_INLINE: in the pickle document or the arena, never freed
	   on its own (a Parameter of the tensor shares it) */
	const unsigned char *inline_data;
	/* quantized (CKPT_T_QUANTIZED) */
	const char *qscheme;	/* "per_tensor_affine", ... or NULL */
	double scale;
	int64_t zero_point;
	int64_t axis;
	struct ckpt_tensor *qscales, *qzeros;	/* per-channel, else NULL */
	/* a bytes-only safetensors tensor (dtype->bits): the header's
	   shape, st_ndim sizes (arena) */
	const int64_t *st_shape;
	int st_ndim;
};

extern const struct ckpt_tensor_ext ckpt_no_ext;

struct ckpt_tensor {
	uint8_t kind;		/* enum ckpt_tensor_kind */
	bool requires_grad;
	bool parameter;		/* nn.Parameter */
	bool conj, neg;		/* 2.x metadata bits */
	bool contiguous;	/* row-major dense over [offset, offset+numel) */
	bool shown;		/* some tree node shows it */
	/* edits: a tensor made from a new file (ckpt_edit.c) */
	bool fresh;
	bool shape_set;		/* user.shape given; else 1-d over the bytes */
	bool fixed;		/* made from a .npy: its size is fixed like an
				   original tensor's, not a growing file's */
	bool x_own;		/* x is this tensor's (may be written) */
	uint8_t ndim;		/* <= CKPT_MAX_DIMS */
	uint32_t index;		/* position in ckpt->tensors */
	const struct ckpt_dtype *dtype;
	struct ckpt_storage *storage;	/* NULL for META and INLINE */
	uint64_t offset;	/* storage offset, in elements of dtype */
	/* ndim sizes, then ndim strides (in elements): ckpt_tensor_stride().
	   An original tensor's are never written (those of a folded call
	   are its record's in the pickle document), only a fresh one's
	   (ckpt_edit.c, ovl), which has room for CKPT_MAX_DIMS of each */
	int64_t *shape;
	uint64_t numel;		/* elements (bytes: ckpt_tensor_nbytes()) */
	/* subclass, state, inline data, quantizer: never NULL, see above */
	const struct ckpt_tensor_ext *x;
	uint64_t pkl_off;	/* file offset of its rebuild call */
};
_Static_assert(CKPT_MAX_DIMS <= UINT8_MAX, "ckpt_tensor.ndim is a uint8_t");

/* numel x the dtype's size: a tensor file's size (overflow checked at
 * open and on every edit that sets numel or dtype). */
static inline uint64_t ckpt_tensor_nbytes(const struct ckpt_tensor *t)
{
	return t->numel * t->dtype->size;
}

/* @t's strides, in elements: ndim of them, right after its sizes. */
static inline int64_t *ckpt_tensor_stride(const struct ckpt_tensor *t)
{
	return t->shape + t->ndim;
}

/* Where @t lives ("cpu", "cuda:0", "meta", ...; NULL: not said): its own
 * device if it has one, else its storage's location. */
static inline const char *ckpt_tensor_device(const struct ckpt_tensor *t)
{
	if (t->x->device)
		return t->x->device;
	if (t->storage)
		return t->storage->location;
	return t->kind == CKPT_T_META ? "meta" : NULL;
}

#endif
