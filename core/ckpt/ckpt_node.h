/*
 * ckpt_node.h - the checkpoint model's object tree as a file system sees
 * it: dicts, lists and objects are directories, tensors and python values
 * files; what a node holds once an edit touches it; and the rows that
 * stand in for plain tensors (ckpt_row.c).  Part of ckpt.h.
 */
#ifndef PT_CKPT_CKPT_NODE_H
#define PT_CKPT_CKPT_NODE_H

#include "ckpt_types.h"

struct diag;
struct ckpt_stage;	/* the overlay's (core/ovl/ovl.h) */

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
	struct ckpt_tensor *file;	/* a new python value: the new file's
					   bytes it was made from (ckpt_value_new) */
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

#endif
