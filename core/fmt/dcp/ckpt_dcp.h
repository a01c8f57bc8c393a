/*
 * ckpt_dcp.h - what the two halves of the DCP reader share: ckpt_dcp.c
 * turns .metadata into the model, ckpt_dcp_read.c serves a tensor's bytes
 * from the chunks it is made of.  Internal to core/ckpt.
 *
 * Every tensor of a DCP directory is one storage (its global shape,
 * row-major) and one contiguous tensor over it.  The storage's bytes are
 * not in one place: storage k has chunks dcp->first[k] .. first[k+1] - 1,
 * each an N-d box of the global tensor (ChunkStorageMetadata) whose bytes
 * lie row-major in one item of a .distcp file.  A chunk's item is a
 * complete torch.save archive; where its data/0 record's bytes start is
 * found on first use (ckpt_dcp_resolve()), so opening reads .metadata only.
 */
#ifndef PT_CKPT_CKPT_DCP_H
#define PT_CKPT_CKPT_DCP_H

#include "ckpt/ckpt_int.h"

#define DCP_NO_ITEM	UINT32_MAX
/* chunk pairs an open compares for overlaps, at most */
#define DCP_CHECK_BUDGET	(UINT64_C(1) << 27)
#define DCP_MAX_PATH	CKPT_MAX_DEPTH	/* steps of a planner path */
#define DCP_MAX_RANKS	65536u		/* __R.metadata files read */

/* One data file (a .distcp) that storage_data names. */
struct dcp_file {
	const char *name;	/* relative_path as given (arena) */
	const char *path;	/* DIR/name, for messages (arena) */
	int fd;			/* -1: could not be opened (lenient); else
				   its member's in c->src (borrowed) */
	uint32_t member;	/* in c->src, or UINT32_MAX */
	int err;		/* its open()'s -errno, or 0 */
	uint64_t size;
};

/* One storage_data entry: an item of a data file. */
struct dcp_item {
	uint32_t file;		/* in dcp->files */
	bool used;		/* a chunk or a value names it */
	const char *fqn;	/* the key storage_data gives it */
	uint64_t off, len;	/* where the item lies in its file */
	uint64_t meta_off;	/* .metadata offset of its _StorageInfo */
};

/* One ChunkStorageMetadata of a tensor (or a value's storage: 1-d). */
struct dcp_chunk {
	int64_t *offsets, *sizes;	/* ndim each (arena) */
	uint32_t item;		/* in dcp->items, or DCP_NO_ITEM */
	uint64_t meta_off;	/* .metadata offset, for messages */
	/* set once by ckpt_dcp_resolve() (release store on done) */
	bool done;
	uint32_t crc;		/* its record's CRC-32 (0: not known) */
	uint64_t data;		/* file offset of the chunk's byte 0 */
};

/* One key of state_dict_metadata (the first rank's) and what it became:
 * a write-back (ckpt_dcp_wb.c) names each anew from where it now is. */
struct dcp_key {
	const struct pkl_value *key;	/* the fqn (str) */
	const struct pkl_value *meta;	/* its ...StorageMetadata */
	struct ckpt_node *node;		/* a tensor, or a value's tree */
	uint32_t node0, nnodes;		/* the node ids it made */
};

/* A file of the directory that is not the checkpoint (config.json ...:
 * ckpt_dcp_files.c). */
struct dcp_other {
	const char *name;	/* in the directory (arena) */
	uint64_t size;		/* when listed */
	uint32_t member;	/* in c->src, or UINT32_MAX: not shown */
};

/* A finding of a lenient open (CKPT_OPEN_LENIENT), for ptverify. */
struct dcp_finding {
	const char *check;	/* "coverage", "item", "file", "chunk" */
	const char *path;	/* the file the offset is in (arena) */
	uint64_t off;
	char *msg;		/* arena */
};

struct ckpt_dcp {
	int dirfd;		/* the directory (c->src's root, borrowed) */
	const char *dir;	/* its path as given (arena) */
	const char *meta_path;	/* DIR/.metadata or DIR/__0.metadata */
	bool lenient;
	uint64_t budget;	/* chunk pairs left to compare */
	struct dcp_file *files;
	uint32_t nfiles, files_cap;
	struct dcp_item *items;
	uint32_t nitems, items_cap;
	struct dcp_chunk *chunks;
	uint32_t nchunks, chunks_cap;
	uint32_t *first;	/* by storage index, nstorages + 1 entries */
	uint32_t ntables;	/* storages first, fqn and tens cover: a later
				   one (ptrepack --quant's scales) has none */
	const char **fqn;	/* by storage index: its flattened key */
	struct ckpt_tensor **tens;	/* by storage index: the tensor of
					   .metadata over it, or NULL (a
					   storage inside a value) */
	struct pkl_doc **docs;	/* the pickles of the values' items */
	uint32_t ndocs, docs_cap;
	struct dcp_key *keys;	/* in state_dict_metadata's order, which
				   is the order of node ids too */
	uint32_t nkeys;
	struct dcp_finding *findings;
	uint32_t nfindings, findings_cap;
	struct dcp_tpls *tpls;	/* the item archives seen (ckpt_dcp_item.c) */
	struct dcp_other *others;	/* by name, listed on first ask */
	uint32_t nothers, nopened;	/* ... and opened through c->src */
	bool others_listed;
	pthread_mutex_t lock;	/* ckpt_dcp_resolve() */
};

/* The modules of the classes a .metadata pickles (ckpt_dcp.c). */
extern const char DCP_M_META[];	/* t.d.checkpoint.metadata */
extern const char DCP_M_OLD[];	/* ..._shard.sharded_tensor.metadata */
extern const char DCP_M_FS[];	/* ....checkpoint.filesystem */

/*
 * ckpt_dcp_index.c: readers of pickled dataclasses.  dcp_is_obj(): @v is
 * a NEWOBJ/REDUCE of @module.@name (or @alt.@name); dcp_state(): what
 * BUILD gave it; dcp_field(): entry @key of a str-keyed dict (a state);
 * dcp_dims(): torch.Size(...) or a tuple/list of ints >= 0, at most
 * CKPT_MAX_DIMS, into @out and *@n.
 */
bool dcp_is_obj(const struct pkl_value *v, const char *module,
		const char *alt, const char *name);
const struct pkl_value *dcp_state(const struct pkl_value *v);
const struct pkl_value *dcp_field(const struct pkl_value *v, const char *key);
bool dcp_dims(const struct pkl_value *v, int64_t *out, int *n);

/* ckpt_dcp_index.c: a hash table (str, optional int64 offsets) -> u32. */
struct dcp_ent {
	uint32_t h;
	uint32_t val;		/* + 1; 0: empty slot */
	const char *s;
	size_t n;
	const int64_t *dims;	/* NULL: no offsets (a value) */
	int nd;
};

struct dcp_tab {
	struct dcp_ent *v;
	uint32_t cap, n;
};

/* Add (@s, @dv) -> @val; 1 if the key was there already, 0, -ENOMEM. */
int dcp_tab_put(struct dcp_tab *t, const char *s, size_t n, const int64_t *dv,
		int nd, uint32_t val);
/* The value of (@s, @dv), or UINT32_MAX. */
uint32_t dcp_tab_get(const struct dcp_tab *t, const char *s, size_t n,
		     const int64_t *dv, int nd);

/*
 * ckpt_dcp_index.c: storage_data @sd into c->dcp's files and items, and
 * @items: (fqn, offsets) -> item index.  0 or -errno with @d set (a
 * lenient open notes items past their file's end and files it cannot
 * open instead).
 */
int ckpt_dcp_items(struct ckpt *c, const struct pkl_value *sd,
		   struct dcp_tab *items, struct diag *d);

/* A key of state_dict_metadata and what it became, for ckpt_dcp_nest(). */
struct dcp_leaf {
	const struct pkl_value *key;	/* the fqn (str) */
	const struct pkl_value *path;	/* planner_data's tuple, or NULL */
	struct ckpt_node *node;		/* a tensor, or a value's tree */
};

/*
 * ckpt_dcp_tree.c: c->root from @n leaves: each at its path (str keys of
 * dicts, int indices of lists), or at its fqn in the root when it has
 * none.  0 or -errno with @d set.
 */
int ckpt_dcp_nest(struct ckpt *c, struct dcp_leaf *lv, uint32_t n,
		  struct diag *d);

/*
 * ckpt_dcp_read.c: add a chunk (@nd offsets and sizes, its item @item or
 * DCP_NO_ITEM) to the storage being made; ckpt_dcp_storage_done() closes
 * that storage's list (every storage gets one, in c->storages order).
 */
int ckpt_dcp_chunk_add(struct ckpt *c, int nd, const int64_t *off,
		       const int64_t *size, uint32_t item, uint64_t meta_off,
		       struct diag *d);
int ckpt_dcp_storage_done(struct ckpt *c, const char *fqn,
			  struct ckpt_tensor *t, struct diag *d);

/*
 * ckpt_dcp_read.c: storage @s, made by a value's pickle (item @item, its
 * archive open in @z), is that archive's stored record data/<key>: one
 * chunk, resolved now.  0 or -errno with @d set.
 */
int ckpt_dcp_value_storage(struct ckpt *c, struct ptz_reader *z,
			   uint32_t item, struct ckpt_storage *s,
			   struct diag *d);

/*
 * ckpt_dcp.c: what an open reads, one .metadata or one per rank
 * (__R.metadata, a save without collectives: each holds its rank's
 * chunks, and the replicated tensors and values every rank saves).
 * Entry r of each array is metadata file r's.
 */
struct dcp_open {
	struct ckpt *c;
	struct ckpt_dcp *p;
	struct diag *d;
	uint32_t n;			/* metadata files */
	const struct pkl_value **sdm;	/* state_dict_metadata */
	const struct pkl_value **planner;	/* planner_data or NULL */
	struct dcp_tab *items;		/* (fqn, offsets) -> item */
	struct dcp_tab paths;		/* fqn -> pathv index */
	const struct pkl_value **pathv;
	uint32_t npath, pathcap;
};

/* A global being listed: where to note it (pkl_doc_each_global). */
struct dcp_walk {
	struct ckpt *c;
	struct diag *d;
};

/* ckpt_dcp_keys.c: every key of every state_dict_metadata made a leaf of
 * c->root (ckpt_dcp_nest()).  0 or -errno with o->d set. */
int ckpt_dcp_leaves(struct dcp_open *o);

/* ckpt_dcp_index.c: put "@name: " before @d's message when it does not
 * start with it (a diag names the directory); returns @rc. */
int dcp_in_file(struct diag *d, const char *name, int rc);

/* ckpt_dcp.c: a finding (lenient) or a failure (strict): 0 or -errno. */
int ckpt_dcp_problem(struct ckpt *c, struct diag *d, const char *check,
		     const char *path, uint64_t off, int err,
		     const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));

/* ckpt_dcp_keys.c: the key whose nodes hold node @n (a tensor's node,
 * a value's tree), or NULL (a directory the tree made). */
const struct dcp_key *ckpt_dcp_key_of(const struct ckpt *c,
				      const struct ckpt_node *n);

/*
 * ckpt_dcp_remeta.c: the new .metadata of a write-back (*@out, malloc'd,
 * *@len bytes): the keys named as the tree has them now, the data files
 * as @w renamed them.  0 or -errno with @d set.
 */
struct fsave;
int ckpt_dcp_remeta(struct ckpt *c, const struct fsave *w, unsigned char **out,
		    size_t *len, struct diag *d);

/* ckpt_dcp_check.c: "(0, 4)" of @n values into @buf, for messages. */
const char *dcp_tuple(char *buf, size_t size, const int64_t *v, int n);

/*
 * ckpt_dcp_check.c: check each tensor's chunks against its shape (inside
 * it, no overlap, nothing left uncovered), each chunk against its item,
 * and the items of each data file against one another (no byte in two).
 * 0 or -errno with @d set (strict), findings noted (lenient).
 */
int ckpt_dcp_check_chunks(struct ckpt *c, struct diag *d);

/*
 * ckpt_dcp_item.c: find where chunk @k's bytes start: open its item as a
 * torch.save archive in place (or read it as a zip, when an item like it
 * was opened before), check that it holds one contiguous tensor of the
 * chunk's dtype and sizes in a stored record.  Thread-safe, once per
 * chunk.  0 or -errno with @d set (naming the .distcp file).
 */
int ckpt_dcp_resolve(struct ckpt *c, uint32_t k, struct diag *d);
/* ckpt_dcp_item.c: the storage whose chunks hold chunk @k (a binary
 * search over first[]). */
uint32_t dcp_chunk_storage(const struct ckpt *c, uint32_t k);

/* ckpt_dcp_item.c: free what ckpt_dcp_resolve() kept of the items. */
void ckpt_dcp_tpls_free(struct ckpt_dcp *p);

/*
 * ckpt_dcp_read.c, the descriptor's storage reads (ckpt_format.h): is @s
 * a tensor in chunks (not staged in an overlay), the tensor over all of
 * it (its global shape, or NULL), and where its byte @pos lies (resolves
 * the chunk on first use; a byte in no chunk of a leniently opened
 * directory is -EIO).
 */
bool dcp_pieced(const struct ckpt *c, const struct ckpt_storage *s);
const struct ckpt_tensor *dcp_tensor(const struct ckpt *c,
				     const struct ckpt_storage *s);
int dcp_where(struct ckpt *c, const struct ckpt_tensor *t, uint64_t pos,
	      int *fd, uint64_t *off, uint64_t *len, struct diag *d);

/* ---- the descriptor's hooks (ckpt_fmt_dcp.c) ---- */

/*
 * ckpt_dcp.c: read a DCP directory into c: c->fd is the directory (@meta
 * NULL: its .metadata is read, or every __R.metadata) or the metadata
 * file @meta names (the basename of c->path).  0 or -errno with @d set.
 */
int ckpt_dcp_open(struct ckpt *c, const char *meta, unsigned flags,
		  struct diag *d);

/* ckpt_dcp_files.c: is @name a metadata file, ".metadata" or a rank's
 * "__R.metadata"? */
bool ckpt_dcp_meta_name(const char *name);

/*
 * ckpt_dcp_files.c, the descriptor's folder files (ckpt_format.h): the
 * directory's other regular files listed and opened through c->src on
 * the first call, how many (or -ENOMEM); file @i's member (UINT32_MAX:
 * not shown); its name and size.
 */
int ckpt_dcp_open_files(struct ckpt *c);
uint32_t ckpt_dcp_file_member(const struct ckpt *c, uint32_t i);
void ckpt_dcp_file_entry(const struct ckpt *c, uint32_t i, const char **name,
			 uint64_t *size);

/* ckpt_dcp_read.c: free what c->dcp holds (files, docs). */
void ckpt_dcp_release(struct ckpt *c);

/* ckpt_dcp_read.c: ckpt_storage_data() of a DCP storage. */
int ckpt_dcp_storage_data(struct ckpt *c, struct ckpt_storage *s, int *fd,
			  uint64_t *off, struct diag *d);

/* ckpt_dcp_read.c: ckpt_tensor_read() of a pieced DCP tensor. */
long long ckpt_dcp_read(struct ckpt *c, const struct ckpt_tensor *t,
			void *buf, uint64_t len, uint64_t pos, struct diag *d);

#endif
