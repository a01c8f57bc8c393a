/*
 * ckpt_int.h - what the checkpoint model's files share among themselves:
 * the builder state and the steps ckpt_open() runs.  Not for callers.
 */
#ifndef PT_CKPT_CKPT_INT_H
#define PT_CKPT_CKPT_INT_H

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

/* ckpt_legacy.c: read the legacy (< 1.6) stream into c. */
int ckpt_legacy_open(struct ckpt *c, struct diag *d);

/* ckpt_script.c: build a TorchScript archive's model; c->zip is open and
   its version and byteorder records read. */
int ckpt_script_open(struct ckpt *c, struct diag *d);

/* ckpt_script.c: parse pickle record @e into *@doc (offsets are file
   offsets when it is stored).  0 or -errno with @d set. */
int ckpt_script_pickle(struct ckpt *c, struct ptz_entry *e,
		       struct pkl_doc **doc, struct diag *d);

/* ckpt_script.c: @len bytes of @s as a file name (docs/names.md escapes),
   in the arena; NULL on ENOMEM. */
char *ckpt_synth_name(struct ckpt *c, const char *s, size_t len);

/* ckpt_script.c: a str key @s[0..@len) that no pickle made (arena), and
   the escaped file name of any key (arena); NULL on ENOMEM. */
const struct pkl_value *ckpt_str_key(struct ckpt *c, const char *s,
				     size_t len);
char *ckpt_key_name(struct ckpt *c, const struct pkl_value *key);

/*
 * ckpt_dcp.c: read a DCP directory into c: c->fd is the directory (@meta
 * NULL: its .metadata is read, or every __R.metadata) or the metadata
 * file @meta names (the basename of c->path).  0 or -errno with @d set.
 */
int ckpt_dcp_open(struct ckpt *c, const char *meta, unsigned flags,
		  struct diag *d);

/* ckpt_dcp_read.c: free what c->dcp holds (files, docs). */
void ckpt_dcp_release(struct ckpt *c);

/* ckpt_dcp_read.c: ckpt_storage_data() of a DCP storage. */
int ckpt_dcp_storage_data(struct ckpt *c, struct ckpt_storage *s, int *fd,
			  uint64_t *off, struct diag *d);

/* ckpt_dcp_read.c: ckpt_tensor_read() of a pieced DCP tensor. */
long long ckpt_dcp_read(struct ckpt *c, const struct ckpt_tensor *t,
			void *buf, uint64_t len, uint64_t pos, struct diag *d);

/* ckpt_open.c: a torch.save archive embedded in @fd at [@base, @base +
 * @len), opened as a checkpoint; its offsets count from @base (the model
 * is for checking, not for reading data through).  Caller owns *@out. */
int ckpt_open_embedded(int fd, const char *path, uint64_t base, uint64_t len,
		       struct ckpt **out, struct diag *d);

/* ckpt_globals.c: add global @g to c->globals (once each): 0 or -ENOMEM. */
int ckpt_global_add(struct ckpt *c, const struct pkl_value *g);

/* ckpt_safetensors.c: read a .safetensors file's header into c. */
int ckpt_safetensors_open(struct ckpt *c, struct diag *d);

/*
 * ckpt_shards.c: open the Hugging Face index of the folder c->fd (@is_dir)
 * or the index file c->path, and every shard it names, as one model.
 */
int ckpt_hf_open(struct ckpt *c, bool is_dir, struct diag *d);
/* ckpt_shards.c: close the shards and the folder (ckpt_close()). */
void ckpt_hf_close(struct ckpt *c);
/* ckpt_shards.c: 0, or -ENOTSUP with @d set when shards of @c's index
 * are absent: whatever is written of it would load but lack tensors. */
int ckpt_hf_whole(const struct ckpt *c, struct diag *d);
/* ckpt_shards.c: the shard node @n was read from (of c->hf->shards), or
 * UINT32_MAX (the root, or made by an edit). */
uint32_t ckpt_hf_node_shard(const struct ckpt *c, const struct ckpt_node *n);
/* ckpt_shards.c: the checkpoint whose file holds @s's bytes: a shard. */
struct ckpt *ckpt_hf_owner(struct ckpt *c, const struct ckpt_storage *s);

/* The checkpoint whose file and locks serve @s: @c, or its shard's. */
static inline struct ckpt *ckpt_storage_owner(struct ckpt *c,
					      const struct ckpt_storage *s)
{
	return c->hf ? ckpt_hf_owner(c, s) : c;
}

/*
 * ckpt_storage.c: a model made of several pickles (a sharded folder's
 * shards, a DCP directory's value items), each numbering its values from
 * 0 and its storage keys as it likes.  Each is recorded with the first
 * node its values built (nodes are numbered as they are made, so its
 * nodes with values are [node0, next one's node0)) and the prefix its
 * storage keys got in the model's key table ("SHARD:", "v7/").  A new
 * data.pkl keeps their memo ids and keys apart with it (ckpt_repickle.c).
 */
struct ckpt_vdoc {
	uint32_t node0;
	const char *key_prefix;	/* arena */
	uint8_t format;		/* its file's: CKPT_LEGACY's persistent
				   ids may name views, so its tensors
				   are written anew from the model */
};

/* Record a pickle of a file of @format whose values build nodes from
   @node0 on (in order). */
int ckpt_vdoc_add(struct ckpt *c, uint32_t node0, const char *prefix,
		  int format, struct diag *d);
/* The pickle @n's value came from, NULL for c->doc's (or none). */
const struct ckpt_vdoc *ckpt_node_vdoc(const struct ckpt *c,
				       const struct ckpt_node *n);
/* File @s under its key in @b's table (a shard's storage, renamed);
   0 or -ENOMEM. */
int ckpt_storage_file(struct ckpt_build *b, struct ckpt_storage *s);

/* ckpt_modeljson.c: torch 1.0's model.json record @e as c->root (c->b
   made; attributes.pkl, if any, becomes c->doc2). */
int ckpt_modeljson(struct ckpt *c, struct ptz_entry *e, struct diag *d);

/* ckpt_tar.c: read a tar-era (torch < 0.4) checkpoint into c. */
int ckpt_tar_open(struct ckpt *c, struct diag *d);

/* ckpt_ustar.c: the members of a tar-era checkpoint, by name. */
enum {
	CKPT_TAR_SYS, CKPT_TAR_PICKLE, CKPT_TAR_STORAGES, CKPT_TAR_TENSORS,
	CKPT_TAR_N,
};
extern const char *const ckpt_tar_names[CKPT_TAR_N];

struct ckpt_tar_member {
	uint64_t off, size;	/* its data, in the file */
	bool found;
};

/*
 * ckpt_ustar.c: walk the tar headers of c's file and fill @m (indexed as
 * above; the last member of a name counts, as with tarfile).  Every member
 * but sys_info must be there.  0 or -errno with @d set.
 */
int ckpt_tar_members(struct ckpt *c, struct ckpt_tar_member *m,
		     struct diag *d);

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
 * ckpt_zipdir.c: when the zip's members include checkpoints (a zip of
 * them, not one), -ENOTSUP with @d naming the file and those members;
 * else 0 (the caller reports what is wrong).
 */
int ckpt_zip_of_checkpoints(struct ckpt *c, struct diag *d);

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

/* ckpt_repickle.c: a new data.pkl, and the storages it names in order. */
struct ckpt_repickle {
	uint8_t clone_pct;	/* in: see ckpt_write_opts */
	const uint8_t *part;	/* in: see ckpt_write_opts */
	unsigned char *pkl;	/* the pickle (malloc'd) */
	size_t len;
	struct ckpt_storage **order;	/* new key k is order[k] */
	uint32_t nout;
	/* by storage index, NULL unless clone_pct: storage k is cut to
	   bytes [cut[k], cut[k] + keep[k]) when trim[k] */
	bool *trim;
	uint64_t *cut, *keep;
	uint32_t ntrimmed;
};

/*
 * Emit data.pkl from the tree into @r (set r->clone_pct first; release
 * @r either way).  Legacy 6-tuple persistent ids become 5-tuples.
 */
int ckpt_repickle(struct ckpt *c, struct ckpt_repickle *r, struct diag *d);
void ckpt_repickle_release(struct ckpt_repickle *r);

/*
 * ckpt_repickle.c: @t as torch.save writes a tensor,
 * _rebuild_tensor_v2(('storage', XStorage, '@key', 'cpu', numel), offset,
 * size, stride, requires_grad, OrderedDict()) (v3 with the dtype where
 * torch has no storage class; wrapped in _rebuild_parameter for a
 * Parameter), the key's str memoized under @key_memo (>= 1 << 32).
 */
struct pkl_emit;
int ckpt_emit_tensor(struct pkl_emit *e, const struct ckpt_tensor *t,
		     uint32_t key, uint64_t key_memo);

/*
 * ckpt_retype.c: while data.pkl is written anew, the rebuild call @v of a
 * tensor whose storage was re-typed (ckpt_storage.retyped) when the call
 * itself must change (_rebuild_tensor_v2 <-> _v3, or v3's dtype): writes
 * it and returns 1; 0 when @v is no such call; -errno with @d set.
 */
int ckpt_retype_call(struct ckpt *c, struct pkl_emit *e,
		     const struct pkl_value *v, struct diag *d);

/*
 * ckpt_write.c: a ptz_source's read() of tensor @t's row-major bytes
 * (ckpt_tensor_read(): views, DCP chunks and shards gathered), for
 * struct ckpt_tread as read_arg; a tensor that ends early is corrupt.
 */
struct ckpt_tread {
	struct ckpt *c;
	const struct ckpt_tensor *t;
};
int ckpt_tread(void *arg, void *buf, size_t n, uint64_t off, struct diag *d);

/*
 * ckpt_stflat.c: append @k's key to @path as DCP and safetensors name
 * it: a str key as it is, an int key in decimal, a sequence item by
 * @index; any other key is refused ("cannot be part of a @what name").
 */
struct sbuf;
int ckpt_key_text(const struct ckpt_node *k, uint32_t index,
		  struct sbuf *path, const char *what, struct diag *d);

/* Append to a growable pointer array; -ENOMEM on failure. */
int ckpt_push(void ***arr, uint32_t *n, uint32_t *cap, void *p);

/* ---- ckpt_patch.c: writing against the original ---- */

/*
 * ckpt_write(); with @clone (@fd is a new empty file of ckpt_save()'s),
 * the checkpoint is cloned into it first when every record keeps its
 * place, and patched (ckpt_write.c).
 */
int ckpt_write_into(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
		    bool clone, struct diag *d);

struct ptz_source;
struct ptz_writer;
/*
 * ckpt_inplace.c's pass: the records as they are (data.pkl kept) written
 * into the checkpoint itself, @fd (open for writing; with @dry nothing is
 * written), patched as ckpt_write_into() patches a clone; a record that
 * would move, or an archive of another size, fails with -EAGAIN and
 * zw->moved before anything is written.  Record i's CRC-32 is @crc[i]
 * where @has[i] (both NULL: computed).  *@zw is the writer afterwards,
 * whatever the result (its entries hold the CRCs): the caller releases it.
 */
int ckpt_write_in_place(struct ckpt *c, int fd, bool dry, const uint32_t *crc,
			const uint8_t *has, struct ptz_writer *zw,
			struct diag *d);
/*
 * Clone all of the file @from into the empty file @out (FICLONE): 0, 1
 * when the file system cannot (no reflinks, another file system, an fd
 * that does not allow it), or another -errno.
 */
int ckpt_clone_file(int out, int from);
/*
 * The block size at which the file system of @fd shares extents between
 * files (XFS, btrfs: copy_file_range clones whole blocks there), or 0.
 */
uint32_t ckpt_shares_blocks(int fd);
/*
 * Say in @src that its bytes are record @e's in the checkpoint (the
 * record itself, @s NULL) or those of storage @s's record but where the
 * overlay changed them (its dirty map), when that is so: a stored record
 * of the same size, its place known.
 */
void ckpt_patch_source(struct ckpt *c, struct ptz_entry *e,
		       const struct ckpt_storage *s, struct ptz_source *src);

#endif
