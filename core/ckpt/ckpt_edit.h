/*
 * ckpt_edit.h - edits of the checkpoint model, the in-memory half (the
 * overlay, core/ovl, keeps them on disk): fresh nodes, storages and
 * tensors, directory children, python literals and value files.  Part of
 * ckpt.h.
 */
#ifndef PT_CKPT_CKPT_EDIT_H
#define PT_CKPT_CKPT_EDIT_H

#include "ckpt_model.h"

/* ---- edits (ckpt_edit.c, ckpt_tree.c): the in-memory half ---- */

/* A new node (no pickle value), appended to c->nodes; NULL on ENOMEM. */
struct ckpt_node *ckpt_node_fresh(struct ckpt *c, int kind, const char *type);

/*
 * ckpt_meta.c: metadata entry @key (@klen bytes) set to @val (@vlen),
 * added (last) when there is none, or removed; the format's meta rule
 * checks the text first (without one, -EPERM: its metadata is kept as
 * it is).  0 or -errno with @d set; nothing changes on an error.
 */
int ckpt_meta_set(struct ckpt *c, const char *key, size_t klen,
		  const char *val, size_t vlen, struct diag *d);
int ckpt_meta_remove(struct ckpt *c, const char *key, size_t klen,
		     struct diag *d);
/* Does entry @m differ from the file's (set, added, or removed)? */
bool ckpt_meta_changed(const struct ckpt_meta *m);

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

/*
 * Parse a python scalar literal of @len bytes: True, False, None, an int
 * of 64 bits, a float (inf and nan too); blanks around it and one newline
 * ignored.  -EINVAL if it is none, -ERANGE for an int past 64 bits.
 */
int ckpt_literal_parse(const char *text, size_t len, struct ckpt_literal *out);

/*
 * Lists of scalars (ckpt_scalars.c): a list or tuple of more than
 * CKPT_SCALARS_OVER items, all int, float, bool or None, is one value
 * file of type "list" or "tuple" in a model opened with CKPT_OPEN_LISTS.
 */
#define CKPT_SCALARS_OVER	16

/* Is @v such a list or tuple (whatever the open's flags)? */
bool ckpt_scalar_list(const struct pkl_value *v);

/* Its text, repr()'s: caller owns; NULL on ENOMEM. */
char *ckpt_scalar_list_text(const struct pkl_value *v, size_t *len);

/* The items of a list's new text. */
struct ckpt_scalars {
	struct ckpt_literal *v;	/* caller owns: free() */
	size_t n;
	bool tuple;		/* written as (...), else [...] */
	size_t bad, badlen;	/* on -EINVAL: where the text is wrong */
};

/* Does @text start (after blanks) with [ or (: meant as a list? */
bool ckpt_scalars_bracketed(const char *text, size_t len);

/* Parse "[1, 2.5, None]" or "(1,)" into @out: 0, -EINVAL (@out->bad
 * says where), -ERANGE (an int past 64 bits) or -ENOMEM. */
int ckpt_scalars_parse(const char *text, size_t len, struct ckpt_scalars *out);

/* repr() of @s: caller owns; NULL on ENOMEM. */
char *ckpt_scalars_text(const struct ckpt_scalars *s, size_t *len);

/* Can @n's file be rewritten (a python int/float/bool/None/str/bytes, a
 * list of scalars)? */
bool ckpt_value_editable(const struct ckpt_node *n);

/*
 * Parse the new content of value file @n: str and bytes take the text as
 * it is (str without one trailing newline); the others a python literal
 * (True, False, None, an int, a float).  -EINVAL if it is none.
 */
int ckpt_value_parse(const struct ckpt_node *n, const char *text,
		     size_t len, struct ckpt_literal *out);

/* What @n's new text must be, for messages: "a python literal", "a list
 * of python scalars ...". */
const char *ckpt_value_wants(const struct ckpt_node *n);

/* Give value node @n the new value @lit.  0 or -ENOMEM. */
int ckpt_value_set(struct ckpt *c, struct ckpt_node *n,
		   const struct ckpt_literal *lit);

/*
 * New python values, made from the text of a new file (docs/editing.md):
 * does a new file in @dir become one?  When @dir holds no tensor (a dict
 * of python values, a checkpoint's root beside model/ and optimizer/, a
 * new dict; new files of plain bytes do not count).
 */
bool ckpt_dir_takes_values(const struct ckpt_node *dir);

/* Is @t a new file's tensor of plain bytes: 1-d uint8, no user.dtype or
 * user.shape, not made from a .npy? */
bool ckpt_tensor_untyped(const struct ckpt_tensor *t);

/*
 * Parse the text of a new file as a new python value: True, False, None,
 * an int, a float; a quoted str ('x', "x", python's simple escapes) as
 * that str, unquoted into @buf (@len bytes at least); any other text
 * (UTF-8, no control character but tab and newlines) as a str of it,
 * without one trailing newline.  -EINVAL for bytes that are not text, or
 * none: they stay a tensor's bytes; -ERANGE for an int past 64 bits.
 */
int ckpt_value_parse_new(const char *text, size_t len, char *buf,
			 struct ckpt_literal *out);

/* New file @n (a tensor of plain bytes) becomes the python value @lit;
 * its tensor stays in n->ed->file (a rename over a value reads its bytes
 * there).  0 or -ENOMEM (then @n is as it was). */
int ckpt_value_new(struct ckpt *c, struct ckpt_node *n,
		   const struct ckpt_literal *lit);

#endif
