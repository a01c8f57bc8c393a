/*
 * ckpt_int_build.h - the builder state (struct ckpt_build) and the steps
 * that turn a pickle into storages, tensors and the tree: memo, rows,
 * nodes, directories, storage registration (ckpt_build.c, ckpt_tree.c,
 * ckpt_dir.c, ckpt_storage.c, ckpt_row.c, ckpt_tensor.c).  Internal to
 * core/ckpt: part of ckpt_int.h, which includes it.
 */
#ifndef PT_CKPT_CKPT_INT_BUILD_H
#define PT_CKPT_CKPT_INT_BUILD_H

#include "ckpt.h"
#include "diag/diag.h"
#include "pickle/pkl.h"

/* ckpt_memo.c: pickle node id -> what the build made of it */
struct ckpt_memo {
	uint32_t *ids;		/* id + 1, 0: empty slot */
	void **vals;
	uint32_t cap, n;	/* cap: a power of 2, or 0 */
};

/* What @id was made into, or NULL. */
void *ckpt_memo_get(const struct ckpt_memo *m, uint32_t id);
/* Remember @p for @id (replacing any earlier).  0 or -ENOMEM. */
int ckpt_memo_put(struct ckpt_memo *m, uint32_t id, void *p);
/* Free the table; a zeroed memo is fine and stays usable. */
void ckpt_memo_release(struct ckpt_memo *m);

struct ckpt_build {
	struct ckpt *c;
	struct diag *d;
	/* storage key -> storage, for keys not at their home (the index
	   of c->storages they name, ckpt_storage.c) */
	struct ckpt_storage **stab;	/* open addressing, power of 2 */
	uint32_t scap, nhashed;
	uint32_t storages_cap, tensors_cap, nodes_cap;
	/* pickle node id -> the tensor or node made from it */
	struct ckpt_memo memo;
	/* legacy view storages: extra element offset of a persistent id */
	uint64_t view_off;
	/* the shape and stride of the folded call being built (pkl_fold.c):
	   its tensor points at them in the document instead of a copy
	   (16 bytes a dimension); taken by the next ckpt_tensor_new() */
	int64_t *dims;
	/*
	 * TorchScript (ckpt_script.c): objects whose state is not a dict
	 * show that state, torch.jit._pickle helpers are transparent, and
	 * GLOBALs are not weights-only concerns (nothing is imported).
	 */
	bool script;
	/* prefix of the storage keys of the pickle being built ("constants/"
	   for TorchScript's constants.pkl), or NULL */
	const char *key_prefix;
	/* tar-era files (ckpt_tar.c): the tensor a persistent id names;
	   0 or -errno with b->d set */
	int (*persid)(struct ckpt_build *b, const struct pkl_value *pid,
		      struct ckpt_tensor **out);
	void *persid_arg;
	/* a format's own tensors (a rank set's DTensors, ckpt_ranks.c):
	   1 with *@out the tensor value @v is, 0 when it is not one (built
	   as usual), -errno with b->d set */
	int (*subclass)(struct ckpt_build *b, const struct pkl_value *v,
			struct ckpt_tensor **out);
	void *subclass_arg;
	/* the LINK nodes by target id, made on the first ckpt_node_drop()
	   of a container (arena) */
	struct ckpt_node **links;
	uint32_t nlinks;
	bool links_made;
};

/* Small accessors over pickle values: item @i of a tuple, a str, an int. */
static inline const struct pkl_value *arg(const struct pkl_value *t, size_t i)
{
	return t && t->kind == PKL_TUPLE ? pkl_item(t, i) : NULL;
}

static inline const char *as_str(const struct pkl_value *v)
{
	if (v && (v->kind == PKL_STR || v->kind == PKL_STRING))
		return v->u.s.p;
	return NULL;
}

static inline bool as_int(const struct pkl_value *v, int64_t *out)
{
	if (!v || (v->kind != PKL_INT && v->kind != PKL_BOOL))
		return false;
	*out = v->u.i;
	return true;
}

/* ckpt_row.c: a plain tensor kept as a row (layout there) */
struct ckpt_row {
	struct pkl_value *const *item;	/* key, value */
	uint32_t rec;		/* its storage's record: c->zip.entries
				   index + 1, 0 none (yet) */
	uint32_t id, parent, index, tindex;
	uint8_t step, dtype;
};
/* The row a tagged slot points at. */
struct ckpt_row *ckpt_row_of(const void *p);
/* Its storage's key. */
const char *ckpt_row_key(const struct ckpt_row *r);
/*
 * Dict item @item (key, value: two pointers in the document, which the
 * row keeps), child @index of @dir: if it is a plain tensor and c->rows
 * is set, add it as a row (*@np the tagged row): 1.  0: it is not (or
 * fails a check, which the build then reports): build it.  -ENOMEM with
 * b->d set.
 */
int ckpt_row_add(struct ckpt_build *b, const struct ckpt_node *dir,
		 uint32_t index, struct pkl_value *const *item,
		 struct ckpt_node **np);
/* Make the storage of row slot *@out for good (a second tensor views
 * it); *@out becomes the storage.  0 or -ENOMEM. */
int ckpt_row_storage(struct ckpt *c, struct ckpt_storage **out);

/* ckpt_build.c: turn c->doc into storages, tensors and the tree. */
int ckpt_build_model(struct ckpt *c, struct diag *d);

/* ckpt_tensor.c: check a tensor against its storage, set numel etc. */
int ckpt_tensor_check(struct ckpt *c, struct ckpt_tensor *t, struct diag *d);
/* Row-major (C order) strides for @t's shape, a size of 0 (or less)
 * counting as 1 as in torch's contiguous strides; false if they overflow
 * int64. */
bool ckpt_tensor_c_strides(struct ckpt_tensor *t);

/* ckpt_tree.c: make c->b (ckpt_build_model() does when it is not there). */
int ckpt_build_begin(struct ckpt *c, struct diag *d);

/*
 * ckpt_tree.c: build the root of @doc, a second pickle of the same
 * checkpoint (TorchScript's constants.pkl), as a node in no directory yet;
 * its storage keys get b->key_prefix.  0 or -errno with @d set.
 */
int ckpt_build_doc(struct ckpt *c, const struct pkl_doc *doc,
		   struct ckpt_node **out, struct diag *d);

/* ckpt_tree.c: a node that no pickle value made (a directory the format
   implies); NULL on ENOMEM. */
struct ckpt_node *ckpt_node_synth(struct ckpt_build *b, int kind,
				  const char *type);

/* ckpt_dir.c: give new node @n of @kind its children's table (a
 * directory) or &ckpt_no_dir, and &ckpt_no_edit; -ENOMEM. */
int ckpt_node_parts(struct ckpt *c, struct ckpt_node *n, int kind);

/* ckpt_dir.c: give directory @dir (none yet) the children @kids[0..@nkids),
 * their names made unique and an index of them; -ENOMEM. */
int ckpt_dir_index(struct ckpt *c, struct ckpt_node *dir,
		   struct ckpt_node *const *kids, uint32_t nkids);
/* The same with @kids in c's arena, room for @cap: the directory keeps
 * that array, with no copy (the build's largest directory is finished
 * last, when the open's memory peaks). */
int ckpt_dir_adopt(struct ckpt *c, struct ckpt_node *dir,
		   struct ckpt_node **kids, uint32_t nkids, uint32_t cap);

/*
 * ckpt_tree.c: append @add[0..@n) to directory @dir (which may have
 * children already) and index them; each must have its name and step set.
 * 0 or -ENOMEM with b->d set.
 */
int ckpt_dir_fill(struct ckpt_build *b, struct ckpt_node *dir,
		  struct ckpt_node *const *add, uint32_t n);

/*
 * ckpt_dir.c: the root of a flat format (safetensors, GGUF): a dict of
 * c->tensors[0..@n) in order, tensor i under the name @fn gives for i
 * (@len bytes, UTF-8, unescaped), each shown once.  0 or -errno with @d
 * set.
 */
int ckpt_flat_root(struct ckpt *c, const char *(*fn)(void *arg, uint32_t i,
						   size_t *len),
		   void *arg, uint32_t n, struct diag *d);

/* ckpt_build.c: @t's own ckpt_tensor_ext, to write: a copy of the one it
 * shared (ckpt_no_ext, or a Parameter's inner tensor's); NULL on ENOMEM. */
struct ckpt_tensor_ext *ckpt_tensor_ext_own(struct ckpt *c,
					    struct ckpt_tensor *t);

/* ckpt_build.c: a new tensor of @ndim dimensions in c->tensors. */
struct ckpt_tensor *ckpt_tensor_new(struct ckpt_build *b, int ndim);

/*
 * ckpt_storage.c: register storage @key (copied) of @numel elements of @dt
 * at @loc (copied); @off is where it is defined, for messages.  A key
 * seen before is corrupt input.  0 or -errno with b->d set.
 */
int ckpt_storage_add(struct ckpt_build *b, const char *key,
		     const struct ckpt_dtype *dt, const char *loc,
		     uint64_t numel, uint64_t off, struct ckpt_storage **out);

/* ckpt_storage.c: 0 if record @e holds @s's bytes exactly, else the
   one-line error. */
/* Storage key @key as the index of its home (ckpt_storage.c), or -1. */
long ckpt_storage_dense(const char *key);
int ckpt_storage_fits(const struct ckpt_storage *s,
		      const struct ptz_entry *e, struct diag *d);

/*
 * ckpt_storage.c: storage of a persistent id (registered on first use),
 * and in *@dt the element type this reference gives it: the storage's
 * own, except for an empty storage, which torch lets every reference
 * view with its own dtype (nothing can disagree in 0 bytes).
 */
int ckpt_storage_ref(struct ckpt_build *b, const struct pkl_value *pid,
		     const struct ckpt_dtype **dt,
		     struct ckpt_storage **out, uint64_t *view_off);

/* ckpt_build.c: the storage called @key, or NULL. */
struct ckpt_storage *ckpt_storage_find(struct ckpt_build *b, const char *key);

/*
 * ckpt_build.c: the class GLOBAL of a legacy ('module', cls, file, source)
 * persistent id (torch-format.md 7: how torch < 1.6 pickled the class of
 * an nn.Module), NULL when @v is not one.
 */
const struct pkl_value *ckpt_module_class(const struct pkl_value *v);

/*
 * ckpt_build.c: the state of a tensor subclass with no data of its own,
 * _rebuild_from_type_v2(f, cls, args, state) with f
 * _rebuild_wrapper_subclass (torch 2.x) or _rebuild_meta_tensor_no_storage
 * (torch 1.13's wrappers are subclasses of a meta tensor): its python
 * attributes, which hold its real tensors, in any form the class's
 * __getstate__ gave.  NULL when @v is not one, or its state holds nothing
 * (then it is a tensor without data, shown as a file).
 */
const struct pkl_value *ckpt_wrapper_state(const struct pkl_value *v);

/*
 * ckpt_build.c: is @st the (dict, slots) state of a class with __slots__,
 * a pair whose halves are each a dict or None?
 */
bool ckpt_state_is_slots(const struct pkl_value *st);

/* ckpt_build.c: is @v a tensor (rebuild call or persistent id)? */
bool ckpt_is_tensor_value(const struct pkl_value *v);

/* ckpt_build.c: the tensor @v makes (memoized by pickle node). */
int ckpt_tensor_value(struct ckpt_build *b, const struct pkl_value *v,
		      struct ckpt_tensor **out);

/*
 * ckpt_tree.c: the bytes protocol 2 pickles as calls (_codecs.encode(str,
 * 'latin1'), bytes(), bytearray(...)), malloc'd; NULL when @v is not one.
 */
char *ckpt_bytes_of(const struct pkl_value *v, size_t *len);

/* ckpt_dir.c: hash of a name or key for the open-addressing tables. */
uint32_t ckpt_name_hash(const char *s);

/* Append to a growable pointer array; -ENOMEM on failure. */
int ckpt_push(void ***arr, uint32_t *n, uint32_t *cap, void *p);

#endif
