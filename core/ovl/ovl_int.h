/*
 * ovl_int.h - what the overlay's files share: the journal's records
 * (ovl_journal.c), the services of ovl_store.c and what the other files
 * call across.  Call order: ovl_journal.c, ovl_ident.c and ovl_hf.c at
 * the bottom, ovl_store.c, ovl_data.c, the views, ovl.c, ovl_summary.c,
 * ovl_revert.c, ovl_undo.c, ovl_inplace.c, ovl_open.c; no file calls one
 * above it.  NEEDSWORK: ovl_view.c and ovl_view_apply.c still call
 * each other (scratch files, numel, byte order one way, applying a view
 * the other).  Not for callers.
 */
#ifndef PT_OVL_OVL_INT_H
#define PT_OVL_OVL_INT_H

#include "ovl.h"
#include "ovl_journal.h"

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

/* Where the chunks of one text view start in its text (ovl_text.c). */
struct ovl_text {
	uint64_t *marks;	/* mark[j]: offset of chunk j; NULL: none yet */
	uint64_t nmarks;	/* marks learnt so far */
	uint64_t cap;		/* marks allocated */
	uint64_t nchunks;	/* chunks in all (marks then: nchunks + 1) */
	uint64_t numel;		/* the elements the text shows */
};

/* What the text views learnt, by node id. */
struct ovl_texts {
	pthread_mutex_t lock;
	struct ovl_text *v;
	uint32_t n;		/* slots */
	uint32_t ncached;	/* slots holding marks */
	uint64_t formatted;	/* elements formatted, ever (tests) */
	unsigned char *in;	/* one chunk's elements */
	char *out;		/* one chunk's text: the last formatted */
	size_t out_len;
	uint64_t out_chunk;	/* which chunk of which node it is */
	uint32_t out_node;
	bool out_valid;
};

struct ovl {
	struct ckpt *c;
	char *path;		/* the checkpoint, absolute */
	char *dir;		/* the overlay directory */
	char *jpath;		/* its journal, for messages */
	int dfd;		/* its fd (O_NOFOLLOW, checked), -1 until the
				   first edit or when there is none */
	int jfd;		/* the journal's, -1 likewise */
	uint64_t jend;		/* end of the last good journal record */
	uint64_t jseq;		/* sequence number of the next record */
	char jid[OVL_JID_LEN + 1];	/* this journal's random id, hex */
	bool dir_ours;		/* ptfs made it: rmdir it when empty */
	bool default_dir;	/* .NAME.ptfs, not -o overlay= */
	uint8_t *named;		/* storage indexes with a JR_DATA record */
	uint32_t nnamed;
	char **temps;		/* JR_TEMP paths read at open */
	size_t ntemps;
	struct ovl_mfile *mfiles;	/* JR_NEWFILE, JR_RETIRE read at
					   open (ovl_many.c) */
	uint32_t nmfiles;
	struct ovl_swap *swaps;	/* the last JR_SWAP read at open */
	uint32_t nswaps;
	bool swapped;		/* this mount's write-back journaled its
				   JR_SWAP: committed, whatever follows */
	bool swap_finished;	/* ovl_open() finished the renames of one
				   and forgot the overlay: open again */
	struct stat base;	/* the checkpoint as opened */
	struct ovl_ident id;	/* and its identity */
	char *note;		/* one line for the user (read-only mounts
				   that ignored an overlay, an in-place
				   write-back finished), or NULL */
	uint64_t resumed;	/* journal records replayed at open */
	uint32_t nstorages0;	/* storages of the checkpoint itself */
	uint32_t nnodes0;	/* nodes of the checkpoint itself */
	bool replaying;		/* applying the journal: data is there */
	bool readonly;
	bool committed;		/* written back or discarded: no more edits */
	bool discarded;		/* ovl_discard() dropped every staged edit */
	const char *output;	/* during ovl_commit(): -o output=, or NULL */
	struct ckpt_write_stats wstats;	/* what ovl_commit() wrote */
	/* in-place write-back (ovl_inplace.c) */
	bool inplace;		/* -o inplace: ovl_commit() patches */
	bool inplace_pending;	/* a JR_INPLACE without its JR_COMMIT: the
				   checkpoint may be half patched; no edits,
				   ovl_commit() and the next mount redo it */
	bool inplace_done;	/* read at open: a JR_COMMIT followed it */
	bool inplace_finished;	/* ovl_open() finished an interrupted one
				   and forgot the overlay: open again */
	uint64_t plan_id[3];	/* dev, ino, size it was planned for */
	struct ckpt_plan plan;
	/* told after storage @s changed through anything but @except */
	void (*changed)(void *arg, struct ckpt_storage *s,
			const struct ckpt_node *except);
	void *arg;
	/* told one line about an edit that worked but changed more than
	   the caller may expect (a .npy that replaced a tensor by one of
	   another shape, the names a cast converted too) */
	void (*notice)(void *arg, const char *line);
	/* told as write-back writes: record data bytes done of total */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	/* told by ovl_revert() of each name @name in @dir that now stands
	   for something else (or nothing), and of each node @n whose
	   contents changed (the other arguments NULL) */
	void (*touched)(void *arg, const struct ckpt_node *dir,
			const char *name, const struct ckpt_node *n);
	/* ovl_undo.c: the checkpoint read again (reverts), and the
	   storages replayed reverts covered (attach_copies()) */
	struct ckpt *pristine;
	char *pristine_path;
	uint8_t *reverted;
	uint32_t nreverted;
	struct ovl_texts texts;	/* the text views (ovl_text.c) */
};

#include "diag/diag.h"

#include <string.h>

#define OVL_FD_RESERVE	64		/* descriptors kept free for
					   write-back (ovl_data_open) */

/* ovl_locate() for the file itself (ovl_data.c; views: ovl_view.c). */
int ovl_data_locate(struct ovl *v, struct ckpt_node *n, uint64_t off,
		    struct ovl_loc *loc, struct diag *d);

/* Is s->fd a file of the overlay's (a copy, or a new tensor's data), not
 * the checkpoint's own file (its shard's, in a sharded folder)? */
static inline bool ovl_copied(const struct ovl *v,
			      const struct ckpt_storage *s)
{
	return s->fd >= 0 && s->fd != ckpt_storage_home(v->c, s);
}

/* ---- ovl_ident.c: identity, the directory, the header, the manifest */

/* @fd's identity; the CRC-32 of its bytes [@cdir_off, +@cdir_size). */
int ovl_ident_of(int fd, uint64_t cdir_off, uint64_t cdir_size,
		 struct ovl_ident *id);
/* Checkpoint @c's identity (ovl_ident_of() of its file, a zip's central
 * directory, a sharded folder's shards): through its descriptors, or with
 * @path, of what is at the path now. */
int ovl_ident_ckpt(const struct ckpt *c, const char *path,
		   struct ovl_ident *id);
bool ovl_ident_same(const struct ovl_ident *a, const struct ovl_ident *b);
/*
 * Is the checkpoint still what was mounted?  The fd the mount reads must
 * hold the same bytes; with @target, the file at the path must be that
 * same file, unchanged.  0, or -ESTALE (or why it cannot tell) with @d
 * saying that nothing was written.
 */
int ovl_still_same(struct ovl *v, bool target, struct diag *d);
/* -ESTALE with @d saying that the checkpoint changed since it was mounted
 * and the edits are kept: the one message for it (ovl_still_same(), and
 * an in-place patch whose file was renamed over meanwhile). */
int ovl_changed_err(const struct ovl *v, struct diag *d);
/* Is the file written back (JR_COMMIT @k) the checkpoint we opened? */
bool ovl_commit_is(const struct jrec *k, const struct ovl_ident *id);
/* Journal JR_COMMIT for the written file @st (fdatasync'd). */
int ovl_commit_append(struct ovl *v, const struct stat *st, struct diag *d);
/* Is directory @dfd (@dir) the user's own and closed to others? */
int ovl_dir_check(int dfd, const char *dir, struct diag *d);
/*
 * Open overlay directory @dir without following a link, and check it
 * (@create: mkdir it 0700 first, *@made says whether this did).  *@out is
 * the fd, or -1 when it does not exist and !@create.  0 or -errno.
 */
int ovl_dir_open(const char *dir, bool create, bool *made, int *out,
		 struct diag *d);
/* One writable mount per overlay: flock() its directory, or -EBUSY. */
int ovl_dir_lock(const struct ovl *v, struct diag *d);
/* False once the overlay directory was removed under the mount. */
bool ovl_dir_alive(const struct ovl *v);
/* Header record @r into @id, @jid (OVL_JID_LEN + 1 bytes), @ours. */
bool jr_head_parse(const struct jrec *r, struct ovl_ident *id, char *jid,
		   bool *ours);
/*
 * Data file "<jid>.<i><sfx>" of storage @i, or "<jid>.<i>.<dtype><sfx>"
 * once the storage was converted to that dtype (its retyped): the copy
 * that holds its bytes now.  The _as form names the copy for dtype @dt
 * (NULL: the plain one).
 */
void ovl_data_name(const struct ovl *v, uint32_t i, const char *sfx,
		   char *buf, size_t size);
void ovl_data_name_as(const struct ovl *v, uint32_t i,
		      const struct ckpt_dtype *dt, const char *sfx, char *buf,
		      size_t size);
/* Has storage @i a JR_DATA record?  Mark that it has; _cvt: one with a
 * dtype (converted copies). */
bool ovl_named(const struct ovl *v, uint32_t i);
bool ovl_named_cvt(const struct ovl *v, uint32_t i);
int ovl_name_mark(struct ovl *v, uint32_t i);
int ovl_name_mark_cvt(struct ovl *v, uint32_t i);
/* Remove storage @i's data files the journal names (@tmp_only: only the
 * temporaries a killed copy left). */
void ovl_data_unlink(struct ovl *v, uint32_t i, bool tmp_only);
/* Remember JR_TEMP path @p; remove such a file if still ours. */
int ovl_temp_add(struct ovl *v, const char *p, size_t len);
void ovl_temp_remove(const char *path);
/*
 * Remove what the journal names (data files, their temporaries, write-back
 * temporaries), then the journal, then the directory if ptfs made it and
 * it is empty.  Closes the directory.  0 or -errno with @d set.
 */
int ovl_forget(struct ovl *v, struct diag *d);

/* A decimal field as a number; false if it is not one. */
bool jr_num(const struct jrec *r, int i, uint64_t *out);

/* ---- ovl_store.c: the services everything else uses ---- */

/* How much of @s a one-line message shows: its first line, <= 40. */
int ovl_line_len(const char *s, size_t n);

int ovl_sys_err(struct ovl *v, struct diag *d, int err, const char *what);
/* The paths of the live tensor names over storage @s but @except, at
 * most @max of them and "and N more" ("a/b, c"), malloc'd; NULL when
 * there are none (or no memory). */
char *ovl_names_over(const struct ovl *v, const struct ckpt_storage *s,
		     const struct ckpt_node *except, unsigned max);
/* Tell the mount one line about an edit that worked but changed more
 * than its caller may expect (v->notice); not while replaying. */
void ovl_tell(struct ovl *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Edits allowed now?  0, or -EROFS with @d set. */
int ovl_check_writable(const struct ovl *v, struct diag *d);
/* Tell the mount that storage @s changed through anything but @except. */
void ovl_notify(struct ovl *v, struct ckpt_storage *s,
		const struct ckpt_node *except);
/* The overlay directory and journal exist (made on the first edit). */
int ovl_ensure_dir(struct ovl *v, struct diag *d);
/*
 * openat() of data file "<jid>.<i><sfx>"; with O_CREAT, the journal names
 * it first (JR_DATA).  The fd, or -errno with @d set.
 */
int ovl_data_open(struct ovl *v, uint32_t i, const char *sfx, int flags,
		  struct diag *d);
/* fsync @fd (data file "<jid>.<i>.tmp", complete) and rename it to
 * "<jid>.<i>", then fsync the directory.  0 or -errno with @d set. */
int ovl_data_finish(struct ovl *v, uint32_t i, int fd, struct diag *d);
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
/* The same in any model @c (revert resolves in the checkpoint as on disk). */
struct ckpt_node *ovl_resolve_in(const struct ckpt *c, const char *p,
				 size_t len);
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
/* A node's name for messages ("the root" for the root; a long one cut
 * to 64 bytes as names.md cuts names, valid until the thread's fourth
 * next call). */
const char *ovl_label(const struct ckpt_node *n);
/* "2,3" into @shape: the number of dims, or -1. */
int ovl_parse_shape(const char *s, size_t n, int64_t *shape);
/* Free a stage (NULL is fine) and clear the pointer. */
void ovl_stage_free(struct ckpt_stage **pst);

/* ---- ovl.c: the operations ---- */

/* A new file @nm in @dir over new storage @index's data file. */
int ovl_create_at(struct ovl *v, struct ckpt_node *dir, char *nm,
		  uint32_t index, struct ckpt_node **out, struct diag *d);

/*
 * New file @n becomes the python value its @len bytes of @text are
 * (ckpt_value_parse_new()) when it is a tensor of plain bytes in a
 * directory that takes values (ckpt_dir_takes_values(), CKPT_CAP_VALUES):
 * journaled as a JR_VALUE of @text (not when replaying one).  0 when it
 * did, 1 when it stays a tensor, or -errno with @d set (ovl_data.c).
 */
int ovl_value_of_text(struct ovl *v, struct ckpt_node *n, const char *text,
		      size_t len, struct diag *d);

/* ---- ovl_summary.c: the live tree against its places at open ---- */

/* live[id] is 1 for every node in the tree now (reachable from the root
 * through directories' slots).  0 or -ENOMEM; free *@out. */
int ovl_live_map(const struct ckpt *c, uint8_t **out);
/* @n's key path at open, from its home places (malloc'd; NULL: ENOMEM). */
char *ovl_home_path(const struct ckpt_node *n);
/* Is @l a removed link whose target lives on in its slot (see
 * ckpt_node_drop())? */
bool ovl_standin(const struct ckpt_node *l, const uint8_t *live);

/* ---- ovl_undo.c: reverts ---- */

/* Replay JR_REVERT record @r (the checkpoint is read again once for all
 * of the journal's; ovl_pristine_drop() when done). */
int ovl_revert_replay(struct ovl *v, const struct jrec *r, struct diag *d);
void ovl_pristine_drop(struct ovl *v);
/* Storage @i: a replayed revert covered it (its data file, if any, is
 * void), until a JR_DATA record names it again. */
void ovl_revert_mark(struct ovl *v, uint32_t i);
bool ovl_reverted(const struct ovl *v, uint32_t i);
void ovl_revert_named(struct ovl *v, uint32_t i);

/* ---- the views: ovl_view.c (reading, staging), ovl_view_apply.c ---- */

/* Is the checkpoint big-endian? */
bool ovl_view_big(const struct ovl *v);
/*
 * What tensor node @n's views show (ovl_view.c): elements of @dt in byte
 * order @big, @ndim sizes @shape (a new file's: flat), @numel of them;
 * for a coded tensor (ckpt_coded()) its values, float32 in host order.
 * @shape may point into the struct: keep it while it is used.
 */
struct ovl_vsrc {
	const struct ckpt_dtype *dt;
	bool big, coded;
	int ndim;
	const int64_t *shape;
	uint64_t numel;
	int64_t flat;
	struct ckpt_coded k;
};
void ovl_view_src(const struct ovl *v, const struct ckpt_node *n,
		  struct ovl_vsrc *s);
/* Elements [@first, @first + @cnt) of what @s shows into @buf (decoded
 * for a coded tensor): 0 or -errno (-EIO on a short read). */
int ovl_view_elems(struct ovl *v, struct ckpt_node *n,
		   const struct ovl_vsrc *s, void *buf, uint64_t first,
		   uint64_t cnt, struct diag *d);
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

/* ---- ovl_inplace.c: write-back into the checkpoint itself ---- */

/* Record @r (JR_INPLACE) into @p and the checkpoint's @id (dev, ino,
 * size): 0, or -EILSEQ with @d set. */
int ovl_inplace_parse(const struct ovl *v, const struct jrec *r,
		      struct ckpt_plan *p, uint64_t id[3], struct diag *d);
/* Does the journal end with an unfinished JR_INPLACE (none of its
 * JR_COMMIT after it)?  1, 0 or -errno with @d set. */
int ovl_inplace_scan(struct ovl *v, struct diag *d);
/* Patch the checkpoint (-o inplace) instead of writing a new file. */
int ovl_inplace_commit(struct ovl *v, struct diag *d);
/* Begin it: the checks, the plan and its JR_INPLACE record; then finish:
 * the patch, fdatasync and JR_COMMIT.  Split for the tests, which stop
 * between the two. */
int ovl_inplace_begin(struct ovl *v, struct diag *d);
int ovl_inplace_finish(struct ovl *v, struct diag *d);
/* At open: finish the unfinished one the journal holds, then forget the
 * overlay (v->inplace_finished), or refuse with @d set. */
int ovl_inplace_recover(struct ovl *v, struct diag *d);

/* ovl_text.c: free what the text views learnt (ovl_close()). */
void ovl_texts_free(struct ovl *v);

/* ---- ovl_retype.c: user.dtype of a tensor with values: a cast ---- */

/* Convert @n's storage (and every tensor viewing it) to dtype @value. */
int ovl_retype(struct ovl *v, struct ckpt_node *n, const char *value,
	       size_t len, struct diag *d);
int ovl_replay_retype(struct ovl *v, const struct jrec *r, struct diag *d);

/* ---- ovl_many.c: checkpoints of many files (sharded folders, DCP) ---- */

/* A file a write-back into many files made or replaces (journaled). */
struct ovl_mfile {
	char *name;		/* in the directory */
	uint64_t dev, ino;
	bool retire;		/* JR_RETIRE: an old data file */
};

/* A rename of a JR_SWAP: temporary @temp over file @final, names in the
 * folder, with the temporary's and the old file's (dev, ino). */
struct ovl_swap {
	char *temp, *final;
	uint64_t tdev, tino, odev, oino;
};

/* The write-back's CKPT_SAVE_NEW, CKPT_SAVE_RETIRE (@name, @st) or
 * CKPT_SAVE_SWAP (@name the plan, @st NULL): the record. */
int ovl_many_record(struct ovl *v, int stage, const char *name,
		    const struct stat *st, struct diag *d);
/* Reading the journal: remember JR_SWAP @r (the last one counts). */
int ovl_swap_note(struct ovl *v, const struct jrec *r, struct diag *d);
/*
 * At open, a JR_SWAP read: the write-back committed.  Rename each
 * temporary still there (its journaled dev, ino) over its file, which
 * must be the old one or already the new one (else nothing is renamed:
 * -ESTALE), fsync the folder, remove what the journal names and forget
 * the overlay (v->swap_finished, a note for the user): 0.  A read-only
 * mount refuses (-EROFS): it would show a mix of old and new files.  1:
 * the set is whole as it is (every file old and no temporary left, the
 * record outliving a write-back that undid itself; or, read-only, every
 * file new), the record forgotten: go on as without it.  Else -errno
 * with @d set.
 */
int ovl_swap_finish(struct ovl *v, struct diag *d);
/* Reading the journal: remember JR_NEWFILE / JR_RETIRE @r. */
int ovl_many_note(struct ovl *v, const struct jrec *r, struct diag *d);
/*
 * Remove what a killed write-back left: new files the commit file does
 * not name; with @committed (its JR_COMMIT matched) the files it
 * replaced.  Each only if it is still the file journaled (dev, ino) and
 * the checkpoint as opened does not use it.  Forgets them.
 */
void ovl_many_tidy(struct ovl *v, bool committed);
/* Forget them, removing nothing. */
void ovl_many_forget(struct ovl *v);

/* ovl_replay.c: apply edit record @r again (its data is already in
 * place).  0 or -errno with @d set (a record that names what is not
 * there is corrupt). */
int ovl_replay_one(struct ovl *v, const struct jrec *r, struct diag *d);

#endif
