/*
 * ckpt.h - the checkpoint model: what a torch.save file holds, built from its
 * zip index (or legacy stream) and its pickle without running anything.
 *
 *   storages  one per storage record ("data/<key>"): dtype, numel, location
 *   tensors   views into a storage: dtype, offset, shape, stride (elements)
 *   nodes     the object tree as a file system sees it: dicts, lists and
 *             objects are directories, tensors and python values are files
 *
 * Every tensor is checked against its storage and every storage against its
 * record, so a consumer may read any tensor byte without further checks.
 */
#ifndef PT_CKPT_CKPT_H
#define PT_CKPT_CKPT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"
#include "zip/ptz.h"

struct ckpt_ident;
struct diag;
struct pkl_doc;
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
};

/* Look up by torch name ("float32"); NULL if unknown. */
const struct ckpt_dtype *ckpt_dtype_by_name(const char *name);
/* Look up by storage class name ("FloatStorage"); NULL if unknown. */
const struct ckpt_dtype *ckpt_dtype_by_storage(const char *cls);
/* Look up by safetensors name ("F32", "BF16"); NULL if unknown. */
const struct ckpt_dtype *ckpt_dtype_by_st(const char *name);
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

/* ---- the object tree ---- */

enum ckpt_node_kind {
	CKPT_N_DIR,		/* dict, OrderedDict, object state: named keys */
	CKPT_N_SEQ,		/* list, tuple, set: keys are indices */
	CKPT_N_TENSOR,
	CKPT_N_VALUE,		/* python scalar or str/bytes: .text */
	CKPT_N_OPAQUE,		/* something we show but do not model: .text */
	CKPT_N_LINK,		/* a container already shown elsewhere */
};

/* How a child is reached from its parent (for tools that navigate). */
enum ckpt_step {
	CKPT_S_KEY,		/* dict key: .key */
	CKPT_S_INDEX,		/* list/tuple/set position: .index */
	CKPT_S_ATTR,		/* object attribute (BUILD state): .key */
	CKPT_S_PART,		/* component of a composite (sparse): .key */
};

/*
 * A directory's children (CKPT_N_DIR, CKPT_N_SEQ), made with the node.
 * Every other node points at ckpt_no_dir: empty, so readers need no
 * check, and read-only, so a write meant for a directory faults instead of
 * reaching every leaf.  A leaf pays 8 bytes for it, not 40.
 */
struct ckpt_dir {
	struct ckpt_node **kids;	/* in container order */
	/* kids by name, open addressing: position in kids[] + 1 and a tag
	   of the name's hash, 0 empty (ckpt_dir.c) */
	uint32_t *hash;
	uint32_t nkids;
	uint32_t hash_mask;		/* slots - 1 */
	/* edits (ckpt_edit.c): kids[] may hold NULLs where a child left */
	uint32_t kcap;		/* room in kids[] */
	uint32_t norig;		/* kids at open */
	uint32_t nlive;		/* kids[] entries that are not NULL */
};
extern const struct ckpt_dir ckpt_no_dir;

struct ckpt_node {
	uint8_t kind;		/* enum ckpt_node_kind */
	uint8_t step;		/* enum ckpt_step */
	/* edits (ckpt_edit.c) */
	bool dead;		/* unlinked (may still be open) */
	bool fresh;		/* made by an edit */
	bool edited;		/* VALUE: text replaced */
	bool pending;		/* a tensor being created through NAME.npy:
				   in no directory, no tensor until close() */
	uint32_t index;		/* position in parent */
	uint32_t id;		/* position in ckpt->nodes */
	char *name;		/* escaped file name; "" for the root */
	struct ckpt_node *parent;
	struct ckpt_dir *dir;	/* children: a directory's own, else
				   &ckpt_no_dir (never NULL) */
	const struct pkl_value *key;	/* dict key / attr name, or NULL */
	const struct pkl_value *val;	/* the pickle value shown here */
	const char *type;	/* "dict", "OrderedDict", "list", "int", class */
	struct ckpt_tensor *tensor;	/* CKPT_N_TENSOR */
	struct ckpt_node *target;	/* CKPT_N_LINK */
	char *text;		/* VALUE/OPAQUE: the file's content */
	size_t textlen;
	struct ckpt_nedit *ed;	/* once written or moved: its own; else
				   &ckpt_no_edit (never NULL) */
};

/*
 * What a node holds only once an edit writes it or moves it: made then
 * (ckpt_node_ed()), in the arena, and kept for the rest of the model's
 * life.  Every other node points at ckpt_no_edit: empty, so readers need
 * no NULL check, and const in memory, so a write that forgot
 * ckpt_node_ed() faults instead of reaching every node.  (32 bytes less
 * in each node: most are never written, renamed or moved.)
 */
struct ckpt_nedit {
	/* where the node was at open, kept by ckpt_node_keep_home() before
	   its parent or name first change (ckpt_dir.c); until then they
	   are its parent and name: see ckpt_node_home() */
	bool moved;
	struct ckpt_node *home;	/* parent at open (NULL: fresh or root) */
	char *home_name;	/* name at open */
	struct ckpt_stage *stage;	/* a replacement being written */
	struct ckpt_stage *vstage;	/* a view (.npy/.txt) being written */
	uint32_t wopen;		/* open for writing through the mount
				   (fs/ counts them: the last one's
				   release applies what is still staged) */
	int verr;		/* -errno its apply at a close() failed with:
				   the later close()s of that open file (a
				   dup'd fd's came first) report it too */
};

extern const struct ckpt_nedit ckpt_no_edit;

struct ckpt;

/* @n's own edit state, made on first use; NULL: out of memory. */
struct ckpt_nedit *ckpt_node_ed(struct ckpt *c, struct ckpt_node *n);

/*
 * Remember where @n was at open before its parent or name change (the
 * edits of ckpt_dir.c call it; so does whatever else moves a node):
 * -ENOMEM, else 0 and nothing to do the next time.
 */
int ckpt_node_keep_home(struct ckpt *c, struct ckpt_node *n);

/* @n's parent at open: NULL for a fresh node (an edit made it) and the
 * root. */
static inline struct ckpt_node *ckpt_node_home(const struct ckpt_node *n)
{
	return n->ed->moved ? n->ed->home : n->fresh ? NULL : n->parent;
}

/* @n's name at open (NULL for a fresh node and the root). */
static inline char *ckpt_node_home_name(const struct ckpt_node *n)
{
	return n->ed->moved ? n->ed->home_name :
	       n->fresh || !n->parent ? NULL : n->name;
}

/* A directory of the tree: a dict or object (named keys) or a sequence.
 * NULL is none. */
static inline bool ckpt_node_is_dir(const struct ckpt_node *n)
{
	return n && (n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ);
}

/*
 * Rows (ckpt_row.c; docs/design.md, "Memory per tensor").  Opened with
 * CKPT_OPEN_ROWS, a plain tensor of a torch.save dict (its own storage,
 * a plain str key) gets no node, tensor or storage: its slots in
 * c->nodes[], its dict's kids[], c->tensors[] and c->storages[] hold a
 * tagged pointer to a 32-byte row instead, the rest staying in the
 * pickle's folded record.  Code that reads those slots sees a row through
 * the ckpt_*_at() functions below, which fill a struct ckpt_rowview on
 * the caller's stack; code that keeps or changes what it reads calls
 * ckpt_materialize() first.  Without the flag there are no rows.
 */
struct ckpt_rowview {
	struct ckpt_node node;
	struct ckpt_tensor tensor;
	struct ckpt_storage storage;
};

/* Does slot @p of c->nodes[], kids[], c->tensors[] or c->storages[] hold
 * a row?  (Its tag makes it a non-canonical address: using it faults.) */
static inline bool ckpt_is_row(const void *p)
{
	return (uintptr_t)p >> 63;
}

/* Node slot @p as a node: itself, or its row filled into @v. */
const struct ckpt_node *ckpt_node_at(const struct ckpt *c,
				     const struct ckpt_node *p,
				     struct ckpt_rowview *v);

/* Child @i of directory @dir, as ckpt_node_at(). */
static inline const struct ckpt_node *ckpt_kid(const struct ckpt *c,
					       const struct ckpt_node *dir,
					       uint32_t i,
					       struct ckpt_rowview *v)
{
	return ckpt_node_at(c, dir->dir->kids[i], v);
}

/* c->tensors[@i] and c->storages[@i], as ckpt_node_at(). */
const struct ckpt_tensor *ckpt_tensor_at(const struct ckpt *c, uint32_t i,
					 struct ckpt_rowview *v);
const struct ckpt_storage *ckpt_storage_at(const struct ckpt *c, uint32_t i,
					   struct ckpt_rowview *v);

/*
 * The dtype and bytes (ckpt_tensor_nbytes(), the storage's nbytes) of
 * c->tensors[@i] and c->storages[@i] without filling a view: a count over
 * a whole model (ptls's totals) reads a row's 32 bytes and its sizes,
 * not its names.
 */
const struct ckpt_dtype *ckpt_tensor_size_at(const struct ckpt *c,
					     uint32_t i, uint64_t *nbytes);
const struct ckpt_dtype *ckpt_storage_size_at(const struct ckpt *c,
					      uint32_t i, uint64_t *nbytes);

/* The name and id of node slot @p without filling a view. */
const char *ckpt_slot_name(const struct ckpt_node *p);
uint32_t ckpt_slot_id(const struct ckpt_node *p);

/*
 * Make the row in slot @p (of c->nodes[], kids[], c->tensors[] or
 * c->storages[]) a node, tensor and storage for good, as
 * ckpt_materialize() does for all; nothing to do for a slot without a
 * row.  0, or -ENOMEM with @d (may be NULL) set.
 */
int ckpt_row_materialize(struct ckpt *c, const void *p, struct diag *d);

/*
 * Give every row its node, tensor and storage, in the same slots, with
 * the ids and indexes they had: the model a plain open builds.  0, or
 * -ENOMEM with @d set (the rows made by then stay made).
 */
int ckpt_materialize(struct ckpt *c, struct diag *d);

/* The files a tensor node is seen through (docs/views.md). */
enum ckpt_view {
	CKPT_V_RAW,		/* KEY: the bytes of t.contiguous() */
	CKPT_V_NPY,		/* KEY.npy: a NumPy .npy file */
	CKPT_V_TXT,		/* KEY.txt: the values as text */
};

/*
 * What a file being rewritten holds until close() (ckpt_edit.c): a tensor
 * truncated by cp or open('wb') gets a scratch file, a value its new text.
 */
struct ckpt_stage {
	struct ckpt_storage *scratch;	/* tensors: bytes so far */
	char *text;		/* values: text so far */
	size_t len, cap;	/* (views: len is the scratch file's size) */
	bool written;		/* a write came since it started */
	uint8_t view;		/* enum ckpt_view of the file being written */
};

/* One __metadata__ entry of a safetensors file (may hold NULs). */
struct ckpt_meta {
	const char *key, *val;	/* NUL-terminated too */
	size_t klen, vlen;
};

/* A global the pickle imports that torch's weights-only loader refuses. */
struct ckpt_global {
	const char *module, *name;	/* borrowed from the pickle */
	uint64_t off;		/* offset of the GLOBAL opcode in data.pkl */
};

enum ckpt_format {
	CKPT_ZIP,		/* torch.save since 1.6 */
	CKPT_LEGACY,		/* pickle stream with raw storages (< 1.6) */
	CKPT_TORCHSCRIPT,	/* torch.jit.save: a zip, read-only */
	CKPT_TAR,		/* tar-era torch.save (< 0.4), read-only */
	CKPT_SAFETENSORS,	/* a .safetensors file */
	CKPT_HF_SHARDED,	/* a Hugging Face sharded folder (an index over
				   shard files), read-only for now */
	CKPT_DCP,		/* a torch.distributed.checkpoint directory,
				   read-only for now (ckpt_dcp.c) */
};

/* "zip", "legacy", "torchscript", "tar", "safetensors", "hf-sharded",
 * "dcp": what ptls calls the format. */
struct ckpt;
const char *ckpt_format_name(int format);

/* Do the first @n bytes of a file look like a safetensors file's? */
bool ckpt_safetensors_head(const unsigned char *h, size_t n);

/* Can this format be written back (zip, legacy, safetensors: ckpt_write();
 * a sharded folder: ckpt_hf_save(); a DCP directory: ckpt_dcp_wb())? */
bool ckpt_format_writable(int format);
/* Is @format a checkpoint of many files (a sharded folder, a DCP
 * directory)?  Those are written back into themselves, file by file
 * (ckpt_fsave.h); ptrepack writes them into one new .pt or .safetensors
 * (ckpt_write_into() with CKPT_OUT_ZIP or _ST). */
bool ckpt_format_many(int format);
/* Why @c mounts read-only whatever the options (one phrase, "... mount
 * read-only" follows), or NULL. */
const char *ckpt_readonly_why(const struct ckpt *c);

/*
 * A checkpoint of many files: its directory (returned: an fd the model
 * owns, or -1 for any other checkpoint), *@dir its path for messages,
 * *@commit the name in it of the file whose rename commits a write-back
 * (the index, .metadata).
 */
int ckpt_many_dir(const struct ckpt *c, const char **dir,
		  const char **commit);
/* Data file @i of a checkpoint of many files (a shard, a .distcp file):
 * its *@name in the directory and *@fd (-1: absent); false past the last. */
bool ckpt_many_file(const struct ckpt *c, uint32_t i, const char **name,
		    int *fd);

/* What files of a format are called in messages, plural: "TorchScript
 * archives", "safetensors files" ... */
const char *ckpt_format_files(int format);

struct ckpt {
	const char *path;	/* borrowed */
	int fd;			/* owned */
	uint64_t file_size;
	uint8_t format;		/* enum ckpt_format */
	struct ptz_reader zip;	/* CKPT_ZIP and CKPT_TORCHSCRIPT */
	char *byteorder;	/* "little"/"big" record, or NULL */
	int version;		/* the version record (zip) */
	struct ptz_entry *pkl_rec;	/* data.pkl */
	uint64_t pkl_off;	/* file offset of the main pickle */
	unsigned char *pkl;	/* the main pickle's bytes while opening
				   (NULL after: re-read them by offset) */
	size_t pkl_len;
	struct pkl_doc *doc;
	struct pkl_doc *doc2;	/* TorchScript: constants.pkl, or NULL */
	struct ckpt_storage **storages;
	uint32_t nstorages;
	struct ckpt_tensor **tensors;	/* all, including inner tensors of
					   Parameters and quantizer params */
	uint32_t ntensors;
	uint32_t nshown;	/* distinct tensors the tree shows */
	uint32_t nrows;		/* of them, rows (ckpt_is_row()) */
	bool rows;		/* the build may make rows */
	struct ckpt_node *root;
	struct ckpt_node **nodes;
	uint32_t nnodes;
	struct ckpt_global *globals;	/* outside the weights-only allowlist */
	uint32_t nglobals;
	/* safetensors: the header (bytes [8, 8 + hdr_len)) and its
	   __metadata__ str -> str map in header order (arena), or none */
	uint64_t hdr_len;
	uint64_t data_end;	/* file offset where the last tensor ends */
	struct ckpt_meta *meta;
	uint32_t nmeta;
	bool meta_given;	/* the header has a __metadata__, maybe {} */
	/* CKPT_HF_SHARDED: the index, the shards, the folder's other files
	   and what disagrees (ckpt_shards.c); else NULL */
	struct ckpt_hf *hf;
	/* CKPT_DCP: the data files and each tensor's chunks (ckpt_dcp.h) */
	struct ckpt_dcp *dcp;
	/* a model of several pickles (a sharded folder's shards, a DCP
	   directory's values): where each one's nodes begin (ckpt_int.h) */
	struct ckpt_vdoc *vdocs;
	uint32_t nvdocs, vdocs_cap;
	/* internal */
	pthread_mutex_t locate_lock;	/* ckpt_storage_locate() */
	pthread_mutex_t inflate_lock;	/* ckpt_storage_data() */
	struct arena arena;	/* nodes, tensors, storages, names */
	struct ckpt_build *b;
};

/*
 * Open the checkpoint at @path and build its model: a torch.save zip or
 * legacy stream, a tar-era file or a TorchScript archive (the last two
 * read-only, see ckpt_format_writable()).  Names what it is given when it
 * is not a checkpoint (Git LFS pointer, HTML page, truncated zip, empty
 * file).  On success *@out is set; caller owns it (ckpt_close()).
 * Returns 0 or -errno with @d set.
 */
int ckpt_open(const char *path, struct ckpt **out, struct diag *d);

/* ckpt_open_with() flags. */
#define CKPT_OPEN_LENIENT	1u	/* a DCP directory whose chunks or data
					   files are wrong still opens; what is
					   wrong is kept for ckpt_dcp_verify() */
#define CKPT_OPEN_WHOLE		2u	/* keep data.pkl's graph whole: no
					   folded rebuild calls (ptdump) */
#define CKPT_OPEN_ROWS		4u	/* plain tensors of a torch.save zip
					   may be rows (ckpt_is_row()) */

/* ckpt_open() with @flags (CKPT_OPEN_*). */
int ckpt_open_with(const char *path, unsigned flags, struct ckpt **out,
		   struct diag *d);

/*
 * Make c->doc whole: the tensor rebuild calls folded at the open (PKL_FOLD)
 * get their arguments back from a second parse of data.pkl, which the
 * document keeps.  For whatever walks every value or writes data.pkl anew
 * (ckpt_repickle() calls it); a sharded folder's shards alike.  Returns
 * 0 or -errno with @d set.
 */
int ckpt_whole(struct ckpt *c, struct diag *d);

/* Close and free everything.  NULL is fine. */
void ckpt_close(struct ckpt *c);

/*
 * Make sure @s->data_off is known (reads the record's local header once).
 * Safe to call from many threads.  Returns 0 or -errno with @d set.
 */
int ckpt_storage_locate(struct ckpt *c, struct ckpt_storage *s,
			struct diag *d);

/* Make sure zip record @e's data offset is known; thread-safe. */
int ckpt_record_locate(struct ckpt *c, struct ptz_entry *e, struct diag *d);

/*
 * Where storage @s's bytes can be read with pread now: *@fd (borrowed)
 * and the offset *@off of byte 0 there.  That is its overlay file when it
 * has one, else its record in the checkpoint (located on first use).  A
 * deflated record is inflated on first use into an unlinked temporary
 * file in $TMPDIR (streaming: memory stays small), kept until the storage
 * is staged or the checkpoint closed.  Thread-safe; the first caller for
 * a deflated storage does the inflating while later ones wait.  Returns
 * 0 or -errno with @d set.
 */
int ckpt_storage_data(struct ckpt *c, struct ckpt_storage *s, int *fd,
		      uint64_t *off, struct diag *d);

/*
 * The CRC-32 of the bytes ckpt_storage_data() gives for an unstaged
 * storage, when it is known without reading them (a record's, or an
 * inflated copy's): true and *@crc set, else false.
 */
bool ckpt_storage_crc(const struct ckpt_storage *s, uint32_t *crc);

/*
 * Drop the inflated copy of @s, if any (the overlay took over its bytes).
 * Not thread-safe: no reader may be using @s.
 */
void ckpt_storage_uninflate(struct ckpt_storage *s);

/* Bytes a tensor's file holds: numel * itemsize, 0 for meta tensors. */
uint64_t ckpt_tensor_size(const struct ckpt_tensor *t);

/*
 * Copy bytes [@pos, @pos + @len) of @t's row-major contents (what
 * t.contiguous() holds) into @buf, gathering strided views; @len is
 * clipped at the end.  Only pread is used: any number of threads may read
 * at once.  Returns the byte count or -errno with @d set.
 */
long long ckpt_tensor_read(struct ckpt *c, const struct ckpt_tensor *t,
			   void *buf, uint64_t len, uint64_t pos,
			   struct diag *d);

/*
 * The mirror of ckpt_tensor_read(): write @len bytes at @pos of @t's
 * row-major contents into its storage, scattering through the view.  The
 * storage must be in the overlay (fd other than the checkpoint's).  Past
 * the end is -EFBIG.  Returns the byte count or -errno with @d set.
 */
long long ckpt_tensor_write(struct ckpt *c, const struct ckpt_tensor *t,
			    const void *buf, uint64_t len, uint64_t pos,
			    struct diag *d);

/* ---- names (ckpt_names.c) ---- */

/*
 * Escape one dict key / index into a file name (caller frees).  Rules
 * (reversible; see docs/names.md): str keys as themselves with '%', '/'
 * and NUL as %25 %2F %00 and a leading '.' as %2E; the empty string as
 * "%"; ints in decimal; True/False/None as such; floats as repr; other
 * keys as "%?" + a short description.  Returns NULL on ENOMEM.
 */
char *ckpt_name_escape(const struct pkl_value *key);
/* Is str key @key its own file name, its bytes needing no escape? */
bool ckpt_name_is_key(const struct pkl_value *key);

/* Undo ckpt_name_escape() for a str key into @out (size >= strlen+1).
 * Returns the key's length, or -EINVAL if @name is not a valid escape. */
long ckpt_name_unescape(const char *name, char *out);

/* Longest file name the kernel takes (NAME_MAX). */
#define CKPT_NAME_MAX	255

/*
 * The name a file system shows for a child named @name in slot @pos of
 * its container: @name itself when it has at most @max bytes
 * (CKPT_NAME_MAX, or less to leave room for a suffix), else its first
 * bytes (cut at a character, never inside a %XX escape) followed by
 * "%~<pos>", made in @buf (@max + 1 bytes).  Unique in its container and
 * never equal to an escaped key (docs/names.md).  @max >= 32.
 */
const char *ckpt_name_short(const char *name, uint32_t pos, size_t max,
			    char *buf);

/* Path of @n from the root, names joined by '/' (caller frees). */
char *ckpt_node_path(const struct ckpt_node *n);

/* Child of @dir called @name, or NULL. */
struct ckpt_node *ckpt_node_child(const struct ckpt_node *dir,
				  const char *name);

/* Render a python scalar the way Python's repr() does (caller frees). */
char *ckpt_value_text(const struct pkl_value *v, size_t *len);

/* A short Python-like repr() of any value: "torch.device('cpu')",
 * "(1, 2)"; at most about @max bytes (caller frees). */
char *ckpt_repr(const struct pkl_value *v, size_t max, size_t *len);

/* Python's repr() of a float into @buf (>= 32 bytes). */
const char *ckpt_float_repr(double f, char *buf, size_t size);

/* ---- edits (ckpt_edit.c, ckpt_tree.c): the in-memory half ---- */

/* A new node (no pickle value), appended to c->nodes; NULL on ENOMEM. */
struct ckpt_node *ckpt_node_fresh(struct ckpt *c, int kind, const char *type);

/* A new storage: uint8, 0 bytes, on "cpu", fd -1 (the overlay sets it). */
struct ckpt_storage *ckpt_storage_fresh(struct ckpt *c);

/* A new tensor viewing all of fresh storage @s as 1-d uint8. */
struct ckpt_tensor *ckpt_tensor_fresh(struct ckpt *c, struct ckpt_storage *s);

/* Recompute a fresh tensor's view after its storage, dtype or shape
 * changed (without user.shape: 1-d over the whole storage). */
void ckpt_tensor_fresh_sync(struct ckpt_tensor *t);

/* 0 if a fresh tensor's bytes fit its dtype and shape, else -EINVAL. */
int ckpt_tensor_fresh_fits(const struct ckpt_tensor *t);

/*
 * Children of a directory: insert @n under @name (arena-owned or static;
 * must not exist yet), remove it (its slot becomes NULL), rename it in
 * place, or put @n in @old's slot under @old's name (@n must not be in a
 * directory).  Insert, rename and swap keep where @n was at open first
 * (ckpt_node_keep_home()): 0 or -ENOMEM; after a keep_home of @n, rename
 * and swap cannot fail.
 */
int ckpt_dir_insert(struct ckpt *c, struct ckpt_node *dir,
		    struct ckpt_node *n, char *name);
void ckpt_dir_remove(struct ckpt_node *dir, struct ckpt_node *n);
int ckpt_dir_rename(struct ckpt *c, struct ckpt_node *dir,
		    struct ckpt_node *n, char *name);
int ckpt_dir_swap(struct ckpt *c, struct ckpt_node *dir,
		  struct ckpt_node *old, struct ckpt_node *n);

/*
 * @n leaves @dir for good (unlink, rmdir): out of the directory, marked
 * dead.  A container that links show elsewhere too ({'a': s, 'b': s}
 * shows a/ and b -> a) lives on while a link does: the first live link
 * gives it its place, and the children that removals inside it took out
 * (an rm -r empties a directory before its rmdir; each child removed and
 * not moved elsewhere) come back, so the names that remain keep the
 * object as it was.  Returns the node that now shows @n, or NULL.
 * Allocates only once per checkpoint (the link index): NULL on ENOMEM
 * too, and then @n is simply removed.
 */
struct ckpt_node *ckpt_node_drop(struct ckpt *c, struct ckpt_node *dir,
				 struct ckpt_node *n);

/* Put @n, a child removed from @dir, back in its slot: 0 or -ENOMEM. */
int ckpt_dir_restore(struct ckpt *c, struct ckpt_node *dir,
		     struct ckpt_node *n);

/* How a new child of @dir is reached: key, attribute or index. */
int ckpt_dir_step(const struct ckpt_node *dir);

/*
 * Are @dir's children the parts of a state that a class's __getstate__
 * gave as a tuple or a single value (a wrapper subclass)?  Their values
 * can be edited, but none renamed, removed or added: the tuple has no
 * names to give them.
 */
bool ckpt_dir_parts_fixed(const struct ckpt_node *dir);

/* Is @type (a directory node's) a dict type: items, not attributes? */
bool ckpt_dict_type(const char *type);

/* What container @n holds besides its items (an OrderedDict's _metadata,
 * an object's other attributes), or NULL for nothing. */
const struct pkl_value *ckpt_node_state(const struct ckpt_node *n);

/* Is @n's key no longer the one the pickle gave it (moved, renamed, new)? */
bool ckpt_node_rekeyed(const struct ckpt_node *n);

/* Does @dir still hold exactly what data.pkl says? */
bool ckpt_dir_clean(const struct ckpt_node *dir);

/* Has any live directory changed, so that data.pkl must be rewritten? */
bool ckpt_changed(const struct ckpt *c);

/* A python value as written into a value file. */
struct ckpt_literal {
	const char *type;	/* "int", "float", "bool", "NoneType", "str",
				   "bytes" */
	const char *text;	/* str/bytes: borrowed */
	size_t len;
	int64_t i;		/* int, bool */
	double f;
};

/* Can @n's file be rewritten (a python int/float/bool/None/str/bytes)? */
bool ckpt_value_editable(const struct ckpt_node *n);

/*
 * Parse the new content of value file @n: str and bytes take the text as
 * it is (str without one trailing newline); the others a python literal
 * (True, False, None, an int, a float).  -EINVAL if it is none.
 */
int ckpt_value_parse(const struct ckpt_node *n, const char *text,
		     size_t len, struct ckpt_literal *out);

/* Give value node @n the new value @lit.  0 or -ENOMEM. */
int ckpt_value_set(struct ckpt *c, struct ckpt_node *n,
		   const struct ckpt_literal *lit);

/* ---- write-back (ckpt_write.c) ---- */

/* What a write did (ckpt_write_opts.stats). */
struct ckpt_write_stats {
	bool repickled;		/* data.pkl was written anew */
	uint32_t records;	/* records written */
	uint32_t storages;	/* storage records written */
	uint32_t dropped;	/* storage records left out: nothing uses them */
	uint32_t trimmed;	/* storages cut to what their tensors use */
	uint64_t saved;		/* storage bytes not written for those two */
	uint64_t size;		/* bytes of the archive */
	/* how (ckpt_save() clones the checkpoint into its temporary when
	   every record keeps its place, then writes what differs only) */
	bool cloned;		/* patched a clone of the checkpoint */
	bool in_place;		/* patched the checkpoint itself */
	uint64_t written;	/* bytes written with pwrite */
	uint64_t copied;	/* bytes copied by copy_file_range */
	uint32_t copy_calls;	/* copy_file_range calls */
	/* a safetensors file written (ckpt_stwrite.c) */
	uint32_t tensors;	/* tensors in its header */
	uint32_t aliases;	/* names of a tensor written once, recorded
				   in __metadata__ (tied weights) */
	uint32_t views;		/* tensors written as a contiguous copy of
				   a view (strided, or part of a storage) */
	uint32_t dropped_values;	/* non-tensors left out (st_drop) */
};

/* What ckpt_write() writes (ckpt_write_opts.to). */
enum ckpt_out {
	CKPT_OUT_SAME,		/* the checkpoint's own kind: safetensors for
				   a safetensors file, else a torch zip */
	CKPT_OUT_ZIP,		/* a torch zip archive */
	CKPT_OUT_ST,		/* a safetensors file (ckpt_stwrite.c) */
	CKPT_OUT_DCP,		/* a DCP directory (ckpt_dcp_save()) */
};

struct stat;
struct ckpt_write_opts {
	uint8_t to;		/* enum ckpt_out */
	/* safetensors output: leave out python values and objects instead
	   of refusing them; @note, if set, hears of each tensor written as
	   a contiguous copy of a view and of each value left out (@key the
	   flattened name, @what one line without the name) */
	bool st_drop;
	void (*note)(void *arg, const char *key, const char *what);
	void *note_arg;
	bool repickle;		/* write a new data.pkl even if unchanged */
	uint32_t align;		/* 0: the .storage_alignment record, or 64 */
	bool drop_unused;	/* leave out data/ records no persistent id
				   names (data.pkl kept as it is) */
	uint8_t clone_pct;	/* 1..100: a storage whose tensors use a
				   span of at most this % of it is cut to
				   that span (implies repickle); 0: never */
	/* called after each record with the bytes written so far */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	struct ckpt_write_stats *stats;	/* filled in when not NULL */
	/* one shard of a sharded folder (ckpt_hfsave.c): of the root's
	   children, only those at slots i with part[i] non-zero */
	const uint8_t *part;
	/* safetensors output: the checkpoint whose __metadata__ is kept (a
	   folder's shard); NULL: the one written */
	const struct ckpt *meta;
	/* ckpt_save(): the temporary is ".NAME.ptfs-new.<tmp_tag>" made with
	   O_EXCL (NULL: a mkstemp() name); @check runs before anything is
	   read (CKPT_SAVE_START, @st NULL) and just before the rename
	   (CKPT_SAVE_RENAME, @st the finished file's); non-zero stops the
	   write-back with nothing changed.  A sharded folder's write-back
	   (ckpt_hf_save()) also calls it for each new shard file, made
	   and empty (CKPT_SAVE_NEW, @tmp its name in the folder), and for
	   each old one to remove after the commit (CKPT_SAVE_RETIRE) */
	const char *tmp_tag;
	int (*check)(void *arg, int stage, const char *tmp,
		     const struct stat *st, struct diag *d);
	void *check_arg;
};
enum { CKPT_SAVE_START, CKPT_SAVE_RENAME, CKPT_SAVE_NEW, CKPT_SAVE_RETIRE };

/*
 * ckpt_dcp_save.c: write @c as a new DCP directory @out (absent, or an
 * empty directory), what torch_save_to_dcp() makes of it: one
 * __0_0.distcp of torch.save items and a .metadata, flattened as DCP
 * flattens a state dict.  Uses o->progress and o->note (an empty dict or
 * a dict's attributes, which DCP cannot keep, are left out and said
 * there); the other options are a torch zip's.  Built under a temporary
 * name beside @out and renamed: on failure @out is as it was.  0 or
 * -errno with @d set (one line naming the key).
 */
struct ckpt_dcp_stats {
	uint32_t keys;		/* flattened keys written */
	uint32_t tensors;	/* of which tensors */
	uint64_t size;		/* bytes of __0_0.distcp */
};
int ckpt_dcp_save(struct ckpt *c, const char *out,
		  const struct ckpt_write_opts *o, struct ckpt_dcp_stats *st,
		  struct diag *d);

/*
 * Write the checkpoint as it is now (with its edits) into @fd, from
 * offset 0: as a safetensors file when it is one or o->to asks
 * (ckpt_stwrite.c says how), else as a torch zip archive in torch's own
 * layout: data.pkl copied byte for byte when the structure is unchanged,
 * else a new protocol-2 pickle with storage keys 0..N-1 in first-use
 * order and unused storages dropped; unchanged storages copied with their
 * CRC, edited ones from the overlay with a fresh one.  A legacy (< 1.6)
 * checkpoint is converted: its pickle re-emitted with 5-tuple persistent
 * ids, under the prefix "archive"; a safetensors file the same way, as a
 * dict of its tensors in header order.  Neither fsyncs nor renames.  0 or
 * -errno.
 */
int ckpt_write(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
	       struct diag *d);

/*
 * ckpt_hfsave.c: write the staged edits of sharded folder @c back into
 * it, with the index rename as the one commit point (ckpt_fsave.h): each
 * shard touched is written anew under a new name (the first free of
 * BASE.EXT, BASE.g1.EXT, BASE.g2.EXT ..., never its own), then the index
 * naming them (with the keys' changes) renamed over the old one, then
 * the old shards removed.  @o as for ckpt_save() (tmp_tag, check, stats,
 * progress).  On failure before the commit nothing of the folder has
 * changed and every new file is removed.  0 or -errno with @d set.
 */
int ckpt_hf_save(struct ckpt *c, const struct ckpt_write_opts *o,
		 struct diag *d);

/*
 * ckpt_dcp_wb.c: the same for DCP directory @c, .metadata the commit
 * point: each .distcp file holding a chunk whose bytes changed is written
 * anew (a clone, the chunks and their items' CRC-32 patched), then
 * .metadata with the keys as the tree names them now.  Same-size tensor
 * edits, renames and removals of keys; -EROFS for a directory saved
 * without collectives.  0 or -errno with @d set.
 */
int ckpt_dcp_wb(struct ckpt *c, const struct ckpt_write_opts *o,
		struct diag *d);

/*
 * Write the checkpoint to @target safely: a symbolic link's target is
 * what gets replaced, anything but a regular file (or no file) is refused.
 * Into a temporary file beside it, fsync'd, with the mode (and, as root, the owner) of @like (or 0644),
 * then renamed over @target, then the directory fsync'd.  @before, if
 * given, runs just before the rename with the finished file's stat (the
 * overlay journals it there).  On failure @target is untouched and the
 * temporary file removed.  0 or -errno with @d set.
 */
#define CKPT_TMP_SUFFIX	".ptfs-new."	/* its temporary: .NAME.ptfs-new.XXXXXX */
int ckpt_save(struct ckpt *c, const char *target,
	      const struct ckpt_write_opts *o, const struct stat *like,
	      int (*before)(void *arg, const struct stat *st, struct diag *d),
	      void *arg, struct diag *d);

/* ---- safetensors output (ckpt_stflat.c, ckpt_stwrite.c) ---- */

/*
 * 0 if @key (@len bytes) can name a tensor of a safetensors file (UTF-8,
 * not "__metadata__"), else -EINVAL with @d saying why.
 */
int ckpt_st_name_ok(const char *key, size_t len, struct diag *d);

/* ---- in-place write-back (ckpt_inplace.c) ---- */

#define CKPT_NO_STORAGE	UINT32_MAX

/* One record an in-place write-back changes. */
struct ckpt_patch_rec {
	uint32_t entry;		/* its index in the central directory */
	uint32_t storage;	/* the staged storage its bytes come from,
				   or CKPT_NO_STORAGE (only its CRC) */
	uint32_t crc32;		/* its CRC-32 afterwards */
};

/*
 * What an in-place write-back writes, known before its first byte: enough
 * to do it again after a crash without the checkpoint's old bytes.
 */
struct ckpt_plan {
	uint64_t size;		/* of the checkpoint, which keeps it */
	uint64_t bytes;		/* bytes the patch writes (0: nothing) */
	uint32_t n;
	struct ckpt_patch_rec *rec;	/* by entry, ascending; malloc'd */
};

/*
 * Can @c's edits be patched into the checkpoint itself?  A zip archive
 * (not legacy, TorchScript or tar), the structure unchanged (data.pkl
 * byte for byte), every record stored and every one in its place at its
 * size: then a dry run of the write-back fills @p with the records that
 * change and their new CRCs (from the staged data and the checkpoint's
 * bytes as they are now, which must be the mounted ones).  0, -ENOTSUP
 * with @d saying why not, or another -errno.  Release @p either way.
 */
int ckpt_plan_inplace(struct ckpt *c, struct ckpt_plan *p, struct diag *d);

/*
 * Patch the checkpoint, open for writing as @fd (the file of c->fd), as
 * @p says, and fdatasync it.  Idempotent: the bytes come from the staged
 * data and @p, never from what the checkpoint held (a crash may have left
 * it half patched); only the spans that differ are written.  @p must name
 * exactly the staged storages of @c, with their records; else -ESTALE.
 * 0 or -errno with @d set.
 */
int ckpt_apply_inplace(struct ckpt *c, int fd, const struct ckpt_plan *p,
		       struct diag *d);

/* Free @p's records; a zeroed plan is safe. */
void ckpt_plan_release(struct ckpt_plan *p);

/* ---- write-back against the original (ckpt_patch.c) ---- */

#define CKPT_DIRTY_SHIFT	16	/* a dirty map's chunk: 64 KiB */

/*
 * Storage @s was just copied into the overlay file s->fd: start its dirty
 * map, all clean, bound to that file (device and inode).  0 or -ENOMEM
 * (then there is no map, and write-back compares the whole storage).
 */
int ckpt_dirty_track(struct ckpt_storage *s);
/* Bytes [@off, @off + @len) of @s are about to be written in place. */
void ckpt_dirty_mark(struct ckpt_storage *s, uint64_t off, uint64_t len);
/* Forget @s's map (a whole new file replaces its bytes; ckpt_close()). */
void ckpt_dirty_drop(struct ckpt_storage *s);
/*
 * @s's map as bits (bit i%64 of word i/64 set: chunk i was written) if it
 * describes the file s->fd is now, else NULL.
 */
const uint64_t *ckpt_dirty_bits(const struct ckpt_storage *s);

/* ---- Hugging Face sharded folders (ckpt_shards.c) ---- */

/* One shard file the index names, opened as a checkpoint of its own. */
struct ckpt_shard {
	const char *name;	/* as the index names it, relative to the folder */
	const char *path;	/* folder/name: what messages name */
	struct ckpt *c;		/* the shard (owned by the folder's ckpt);
				   NULL: absent (a CKPT_HF_ABSENT finding) */
	uint32_t storage0, nstorages;	/* its storages in the folder's */
	uint32_t tensor0, ntensors;	/* its tensors in the folder's */
	uint32_t node0, nnodes;	/* its nodes in the folder's (its root's
				   children and all below them) */
	uint32_t nkeys;		/* keys of it the folder's tree shows */
	uint64_t name_off;	/* index byte of its first mention */
};

/* A regular file of the folder that no index entry names as a shard. */
struct ckpt_hf_file {
	const char *name;
	uint64_t size;
};

/* What ptverify reports about an index and its shards. */
enum ckpt_hf_issue_kind {
	CKPT_HF_NOT_IN_SHARD,	/* the index names a shard that lacks the key */
	CKPT_HF_NOT_IN_INDEX,	/* a shard holds a key the index lacks */
	CKPT_HF_TWICE,		/* two shards hold the key */
	CKPT_HF_TOTAL_SIZE,	/* metadata.total_size is not the shards' */
	CKPT_HF_ABSENT,		/* a shard the index names is not there */
};

struct ckpt_hf_issue {
	uint8_t kind;		/* enum ckpt_hf_issue_kind */
	const char *key;	/* the key (arena; NUL-terminated, may hold NULs) */
	uint32_t shard;		/* the shard concerned */
	uint32_t other;		/* NOT_IN_SHARD: a shard that holds it, TWICE:
				   the second; else UINT32_MAX */
	uint64_t off;		/* index byte it is about, or DIAG_NO_OFFSET */
	uint64_t want, got;	/* TOTAL_SIZE: the index's and the shards' */
	uint64_t alt;		/* TOTAL_SIZE: by whole storages, if other */
};

struct ckpt_hf {
	const char *dir;	/* the folder (as given, or the index's) */
	const char *index;	/* the index's file name in it */
	int dfd;		/* the folder, open */
	struct ckpt_shard *shards;	/* by name, the order transformers
					   loads them in */
	uint32_t nshards;
	struct ckpt_hf_file *files;	/* by name */
	uint32_t nfiles;
	struct ckpt_hf_issue *issues;
	uint32_t nissues;
	uint32_t nabsent;	/* shards not there (c NULL) */
	uint32_t nentries;	/* weight_map entries */
	uint64_t total;		/* bytes by unique storage, the first tensor's
				   numel * itemsize (transformers' rule) */
	uint64_t total_alt;	/* ... by whole storages (huggingface_hub's) */
	struct ckpt_ident *ids;	/* each shard's file when opened */
};

/* The descriptor of the file that holds @s's own bytes: c->fd, or in a
 * sharded folder its shard's (s->fd differs when the overlay has a copy). */
int ckpt_storage_home(const struct ckpt *c, const struct ckpt_storage *s);

/* Is @path's file name that of a Hugging Face index (*.index.json, or a
 * variant *.index.VARIANT.json)? */
bool ckpt_hf_index_name(const char *path);

/* The shard @t was read from, or NULL (not a sharded folder). */
const struct ckpt_shard *ckpt_tensor_shard(const struct ckpt *c,
					   const struct ckpt_tensor *t);

/*
 * Is the shard file @s is read from still the one opened (ckpt_ident)?
 * 0 (also when @c is no sharded folder), or -ESTALE / -errno with @d set.
 */
int ckpt_shard_fresh(const struct ckpt *c, const struct ckpt_storage *s,
		     struct diag *d);

/* Issue @i of a sharded folder as one line (no newline) into @buf. */
const char *ckpt_hf_issue_line(const struct ckpt *c, uint32_t i, char *buf,
			       size_t size);
/* ---- DCP directories (ckpt_dcp.c, ckpt_dcp_read.c) ---- */

/*
 * Does storage @s gather its bytes from more than one place (a DCP
 * tensor split into chunks, not staged in an overlay)?  Then
 * ckpt_storage_data() has no answer for it; ckpt_tensor_read() and
 * ckpt_dcp_where() do.
 */
bool ckpt_storage_pieced(const struct ckpt *c, const struct ckpt_storage *s);

/* Is node @n a value of a DCP directory, or inside one (its item's
 * pickle, written back as it is)? */
bool ckpt_dcp_in_value(const struct ckpt *c, const struct ckpt_node *n);

/* The tensor of DCP storage @s (its global shape, over all of it), or
 * NULL (not a DCP tensor's storage). */
const struct ckpt_tensor *ckpt_dcp_tensor(const struct ckpt *c,
					  const struct ckpt_storage *s);

/*
 * Where byte @pos of DCP tensor @t's row-major contents lies: *@fd
 * (borrowed), *@off, and *@len bytes from there that follow in the same
 * file in order (the rest of that row of its chunk, or more).  Resolves
 * the chunk on first use.  0 or -errno with @d set (a byte in no chunk of
 * a leniently opened directory is -EIO).
 */
int ckpt_dcp_where(struct ckpt *c, const struct ckpt_tensor *t, uint64_t pos,
		   int *fd, uint64_t *off, uint64_t *len, struct diag *d);

/*
 * DCP tensor @t's chunks as text, one line each: "offsets=0,4 sizes=8,4
 * file=__1_0.distcp offset=1261 length=1577" (malloc'd, NUL-terminated,
 * *@len without the NUL); NULL for other tensors or on ENOMEM.
 */
char *ckpt_dcp_chunks_text(const struct ckpt *c, const struct ckpt_tensor *t,
			   size_t *len);

/*
 * Check a DCP directory through: what a lenient open found (holes and
 * overlaps among chunks, items past the end of their file, chunks without
 * an item, missing data files), then every chunk's item archive (opened
 * as ckpt_dcp_where() would, and its data record's CRC-32 unless
 * @no_crc).  @fn gets one call per problem (@path the file @off is in, or
 * DIAG_NO_OFFSET).  *@checked gets the bytes whose CRC-32 was computed.
 * Returns the number of problems.
 */
uint32_t ckpt_dcp_verify(struct ckpt *c, bool no_crc, uint64_t *checked,
			 void (*fn)(void *arg, const char *check,
				    const char *path, uint64_t off,
				    const char *msg),
			 void *arg);

/* ---- globals (ckpt_globals.c) ---- */

/* True if torch's weights-only loader (2.x default) allows module.name. */
bool ckpt_global_allowed(const char *module, const char *name);

#endif
