/*
 * ovl_int.h - what the overlay's files share: the journal's records
 * (ovl_journal.c), the services of ovl_store.c and what the other files
 * call across.  Call order, with no cycle: ovl_store.c and ovl_journal.c
 * at the bottom; ovl_data.c; the views; ovl.c; ovl_open.c.  Not for callers.
 */
#ifndef PT_OVL_OVL_INT_H
#define PT_OVL_OVL_INT_H

#include "ovl.h"
#include "diag/diag.h"

#include <string.h>

#define OVL_JOURNAL	"journal"
#define OVL_MAGIC	"ptfs-journal-1"
#define JR_MAXF		8		/* fields of one record */
#define JR_MAX		(16u << 20)	/* bytes of one record */

/* Journal operations (the first byte of a record's payload). */
enum {
	JR_HEAD = 'H',		/* magic, size, mtime s, mtime ns */
	JR_MKDIR = 'M',		/* dir path, name */
	JR_CREATE = 'C',	/* dir path, name, storage index */
	JR_UNLINK = 'U',	/* dir path, name (file, link or empty dir) */
	JR_RENAME = 'R',	/* dir path, name, new dir path, new name */
	JR_VALUE = 'V',		/* path, new text */
	JR_XATTR = 'X',		/* path, xattr name, value */
	JR_TENSOR = 'T',	/* dir path, name, storage index, dtype, shape,
				   flags [, dir path, name of a file it
				   consumed]: a new tensor from a .npy */
	JR_COMMIT = 'K',	/* size, mtime s, mtime ns of the new file */
};

struct jrec {
	char op;
	int nf;
	const char *f[JR_MAXF];	/* not NUL-terminated in general */
	uint32_t len[JR_MAXF];
};

/* Create the journal with its header record (the overlay dir exists). */
int jr_create(struct ovl *v, struct diag *d);

/* Append @r and fdatasync it.  0 or -errno with @d set. */
int jr_append(struct ovl *v, const struct jrec *r, struct diag *d);

/*
 * Read the whole journal of @v (v->jfd open): its records, the header
 * first, into *@recs (fields point into *@buf; free both).  A torn tail
 * (a record cut short or with a bad CRC: the crash came while it was being
 * written) ends the journal and is cut off the file.  0 or -errno.
 */
int jr_load(struct ovl *v, struct jrec **recs, size_t *nrecs,
	    unsigned char **buf, struct diag *d);

/* Add NUL-terminated @s as the next field of @r. */
static inline void jr_field(struct jrec *r, const char *s)
{
	r->f[r->nf] = s;
	r->len[r->nf++] = strlen(s);
}

/* A decimal field as a number; false if it is not one. */
bool jr_num(const struct jrec *r, int i, uint64_t *out);

/* ---- ovl_store.c: the services everything else uses ---- */

static inline bool ovl_is_dir(const struct ckpt_node *n)
{
	return n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ;
}

/* How much of @s a one-line message shows: its first line, <= 40. */
int ovl_line_len(const char *s, size_t n);

int ovl_sys_err(struct ovl *v, struct diag *d, int err, const char *what);
/* Edits allowed now?  0, or -EROFS with @d set. */
int ovl_check_writable(const struct ovl *v, struct diag *d);
/* Tell the mount that storage @s changed through anything but @except. */
void ovl_notify(struct ovl *v, struct ckpt_storage *s,
		const struct ckpt_node *except);
/* The overlay directory and journal exist (made on the first edit). */
int ovl_ensure_dir(struct ovl *v, struct diag *d);
/* openat() of data file "<i><sfx>" in the overlay directory. */
int ovl_data_open(struct ovl *v, uint32_t i, const char *sfx, int flags);
/* A storage's first write: copy it into the overlay (once). */
int ovl_copy_up(struct ovl *v, struct ckpt_storage *s, struct diag *d);
/* Copy @len bytes at @in_off of @in to @out at 0. */
int ovl_copy_range(int in, uint64_t in_off, int out, uint64_t len);
/* Replace all of @t's values by bytes of @src from @src_off, atomically. */
int ovl_replace_contents(struct ovl *v, const struct ckpt_tensor *t,
			 int src, uint64_t src_off, struct diag *d);
/* New storage @index over data file "<index>" and a tensor viewing it. */
int ovl_fresh_tensor(struct ovl *v, uint32_t index, bool create,
		     struct ckpt_tensor **out, struct diag *d);
/* The node at path @p (as ckpt_node_path() writes it), or NULL. */
struct ckpt_node *ovl_resolve(struct ovl *v, const char *p, size_t len);
/* Append journal record @op on (@dir, @name)[, (@ndir, @nname)][, @extra]. */
int ovl_journal(struct ovl *v, char op, const struct ckpt_node *dir,
		const char *name, const struct ckpt_node *ndir,
		const char *nname, const char *extra, size_t extra_len,
		struct diag *d);
/* Can entries be added to or removed from directory @dir?  0 or -errno. */
int ovl_dir_editable(struct ovl *v, const struct ckpt_node *dir,
		     struct diag *d);
/* Check @name as a key name of @dir and arena-copy it into *@out. */
int ovl_key_name(struct ovl *v, const struct ckpt_node *dir,
		 const char *name, char **out, struct diag *d);
/* A node's name for messages ("the root" for the root). */
const char *ovl_label(const struct ckpt_node *n);
/* "2,3" into @shape: the number of dims, or -1. */
int ovl_parse_shape(const char *s, size_t n, int64_t *shape);
/* Free a stage (NULL is fine) and clear the pointer. */
void ovl_stage_free(struct ckpt_stage **pst);

/* ---- ovl.c: the operations ---- */

/* A new file @nm in @dir over new storage @index's data file. */
int ovl_create_at(struct ovl *v, struct ckpt_node *dir, char *nm,
		  uint32_t index, struct ckpt_node **out, struct diag *d);

/* ---- the views: ovl_view.c (reading, staging), ovl_view_apply.c ---- */

/* Is the checkpoint big-endian? */
bool ovl_view_big(const struct ovl *v);
/* Elements tensor node @n's file holds now. */
uint64_t ovl_view_numel(const struct ovl *v, const struct ckpt_node *n);
/* An unlinked scratch file in the overlay directory: fd or -errno. */
int ovl_scratch_file(struct ovl *v, struct diag *d);
/* Apply the view @n was being written through (close()). */
int ovl_vstage_apply(struct ovl *v, struct ckpt_node *n, struct diag *d);

/* Is renaming @s to @nname in @ndir a write of a view (see ovl.h)? */
bool ovl_view_target(const struct ckpt_node *s, const struct ckpt_node *ndir,
		     const char *nname);
int ovl_view_rename(struct ovl *v, struct ckpt_node *s,
		    struct ckpt_node *ndir, const char *nname, struct diag *d);
int ovl_replay_tensor(struct ovl *v, const struct jrec *r, struct diag *d);

#endif
