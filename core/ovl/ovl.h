/*
 * ovl.h - the overlay: edits to a checkpoint, staged on disk until they
 * are written back (docs/editing.md for what users see, docs/design.md
 * for why it is built this way).
 *
 * The overlay is a directory, by default ".NAME.ptfs" beside checkpoint
 * NAME, made by ptfs (mode 0700) on the first edit and used only when it
 * is a real directory of the effective user that nobody else can write:
 *
 *   ptfs.journal       structural edits, append-only, each record with a
 *                      sequence number and CRC, fdatasync'd before the
 *                      edit returns (ovl_journal.c); its header binds
 *                      everything to one checkpoint identity and to one
 *                      random journal id
 *   <jid>.<i>          the bytes of storage i: a copy of an original
 *                      storage made on its first write, or a new file's;
 *                      named in the journal (a JR_DATA record) before it
 *                      is created
 *
 * Nothing else in the directory is read or removed: clean-up goes by the
 * journal's records (a manifest), never by pattern (docs/design.md).
 * Opening replays the journal over the freshly opened checkpoint, so the
 * model shows the staged edits again after a crash.  Nothing here is
 * thread-safe: the caller serializes every call that changes anything
 * (the FUSE driver takes its write lock) against everything else.
 */
#ifndef PT_OVL_OVL_H
#define PT_OVL_OVL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"

struct diag;

#define OVL_JID_LEN	16		/* hex digits of a journal id */
#define OVL_MAX_VALUE	(1u << 20)	/* a python value file's new text */
#define OVL_MAX_KEY	(1u << 16)	/* an escaped key's name (user.key) */

/* The files a tensor node is seen through (docs/views.md). */
enum ckpt_view {
	CKPT_V_RAW,		/* KEY: the bytes of t.contiguous() */
	CKPT_V_NPY,		/* KEY.npy: a NumPy .npy file */
	CKPT_V_TXT,		/* KEY.txt: the values as text */
};


/*
 * Which checkpoint an overlay belongs to: the file as it was opened, and
 * a fingerprint of its central directory (0 for formats without one).
 */
struct ovl_ident {
	uint64_t dev, ino, size;
	int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
	uint32_t cdir_crc;
};

struct ovl_opts {
	const char *dir;	/* overlay directory (absolute), NULL for the
				   default */
	bool discard;		/* drop what an earlier session staged */
	bool readonly;		/* no edits; no lock */
	bool inplace;		/* write back into the checkpoint itself
				   (ovl_inplace.c), or refuse */
};

/* An overlay: opaque outside core/ovl (ovl_int.h); asked through the
 * functions below. */
struct ovl;

/* What the layers above are told while the overlay works: after storage
 * @s changed through anything but @except (changed); one line about an
 * edit that worked but changed more than the caller may expect (notice:
 * a .npy that replaced a tensor by one of another shape, the names a
 * cast converted too); as write-back writes, record data bytes done of
 * total (progress); by ovl_revert() of each name @name in @dir that now
 * stands for something else (or nothing), and of each node @n whose
 * contents changed, the other arguments NULL (touched).  Any may be
 * NULL. */
struct ovl_hooks {
	void (*changed)(void *arg, struct ckpt_storage *s,
			const struct ckpt_node *except);
	void (*notice)(void *arg, const char *line);
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void (*touched)(void *arg, const struct ckpt_node *dir,
			const char *name, const struct ckpt_node *n);
	void *arg;
};

/* Set (@h) or clear (NULL) the hooks. */
void ovl_set_hooks(struct ovl *v, const struct ovl_hooks *h);

/* The checkpoint (absolute path) and the overlay directory. */
const char *ovl_path(const struct ovl *v);
const char *ovl_dir(const struct ovl *v);
/* One line for the user from the open (read-only mounts that ignored an
 * overlay; an in-place write-back finished), or NULL.  Resumed edits
 * are the caller's to say (ovl_summarize(): they are counted there). */
const char *ovl_note(const struct ovl *v);
/* Written back or discarded: no more edits. */
bool ovl_committed(const struct ovl *v);
/* What ovl_commit() wrote. */
const struct ckpt_write_stats *ovl_wstats(const struct ovl *v);
/* Did ovl_open() finish an interrupted write-back (one in place, or a
 * rank set's renames) and forget the overlay?  Then the checkpoint holds
 * the edits: open it again. */
bool ovl_finished(const struct ovl *v);

/* Is tensor or value node @n being rewritten (a scratch file or text,
 * until close)?  Is a view of it, and then which (*@view, enum ckpt_view)
 * and how many bytes so far (*@len)? */
bool ovl_staged(const struct ckpt_node *n);
bool ovl_view_staged(const struct ckpt_node *n, uint8_t *view,
		     uint64_t *len);


/*
 * Take the checkpoint @c (opened from @path) and the overlay that belongs
 * to it: lock the checkpoint (one writable mount at a time), refuse an
 * overlay staged for another version of the file, finish or forget an
 * interrupted write-back, replay the journal.  0 or -errno with @d set.
 */
int ovl_open(struct ckpt *c, const char *path, const struct ovl_opts *o,
	     struct ovl **out, struct diag *d);

/* Close fds and free; the overlay stays on disk.  NULL is fine. */
void ovl_close(struct ovl *v);

/* Is anything staged that write-back would write? */
bool ovl_changed(const struct ovl *v);

/* ---- ovl_text.c: the text views, rendered on demand ---- */

/*
 * Read @size bytes of tensor node @n's text view at @off into @buf,
 * formatting only the chunks they cover.  Bytes read (0 at the end) or
 * -errno with @d set (-EFBIG: too many elements for a text view).  Safe
 * from many threads; not beside an edit.
 */
long long ovl_text_read(struct ovl *v, struct ckpt_node *n, char *buf,
			 size_t size, uint64_t off, struct diag *d);

/* The whole text's size: each element's text measured, not formatted
 * (view_text_measure(), a big view in several threads), once; 8 bytes
 * kept per 4096 elements. */
int ovl_text_measure(struct ovl *v, struct ckpt_node *n, uint64_t *size,
		      struct diag *d);

/* Its size if a measure or a read to the end already learnt it. */
bool ovl_text_known(struct ovl *v, const struct ckpt_node *n,
		     uint64_t *size);

/* Elements the text views have formatted so far, every view counted:
 * what the tests check a read's work by. */
uint64_t ovl_text_formatted(struct ovl *v);

/* Can @n have a text view at all?  0, or -EFBIG with @d set. */
int ovl_text_check(struct ovl *v, struct ckpt_node *n, struct diag *d);

/* Forget what every text view learnt (an edit may have changed any):
 * with no read running. */
void ovl_texts_drop(struct ovl *v);

/* Forget what the text views of tensors on storage @s learnt (an
 * in-place write into it): with no read running. */
void ovl_texts_drop_storage(struct ovl *v, const struct ckpt_storage *s);

/* Size of view @view of @n; a text view's is measured when @measure,
 * else it is 0 until known (lookups: the kernel asks getattr for it). */
uint64_t ovl_view_size(struct ovl *v, struct ckpt_node *n, int view,
		       bool measure);

/* ---- structure: @dir is a directory node, @name an escaped file name */
int ovl_mkdir(struct ovl *v, struct ckpt_node *dir, const char *name,
	      struct ckpt_node **out, struct diag *d);
int ovl_create(struct ovl *v, struct ckpt_node *dir, const char *name,
	       struct ckpt_node **out, struct diag *d);
int ovl_unlink(struct ovl *v, struct ckpt_node *dir, const char *name,
	       struct diag *d);
int ovl_rmdir(struct ovl *v, struct ckpt_node *dir, const char *name,
	      struct diag *d);
/* @noreplace: RENAME_NOREPLACE */
int ovl_rename(struct ovl *v, struct ckpt_node *dir, const char *name,
	       struct ckpt_node *ndir, const char *nname, bool noreplace,
	       struct diag *d);
/* user.dtype, user.shape, user.requires_grad, user.parameter of a new
 * file; user.dtype of a tensor with values (the checkpoint's, or one made
 * from a .npy) converts its storage's values (ovl_retype.c); user.meta.KEY
 * of the root sets metadata entry KEY (ckpt_meta_set()), which
 * ovl_removexattr() removes */
int ovl_setxattr(struct ovl *v, struct ckpt_node *n, const char *name,
		 const char *value, size_t len, struct diag *d);
int ovl_removexattr(struct ovl *v, struct ckpt_node *n, const char *name,
		    struct diag *d);

/* ---- data of a tensor or value file */
uint64_t ovl_size(const struct ovl *v, const struct ckpt_node *n);
long long ovl_read(struct ovl *v, struct ckpt_node *n, void *buf,
		   uint64_t len, uint64_t off, struct diag *d);
long long ovl_write(struct ovl *v, struct ckpt_node *n, const void *buf,
		    uint64_t len, uint64_t off, struct diag *d);
int ovl_truncate(struct ovl *v, struct ckpt_node *n, uint64_t size,
		 struct diag *d);
/* close(): a replacement being written is checked and applied (once it
 * was written to); data made durable.  release (the last close): any
 * replacement still pending is applied.  fsync(): data made durable. */
int ovl_flush(struct ovl *v, struct ckpt_node *n, struct diag *d);
int ovl_release(struct ovl *v, struct ckpt_node *n, struct diag *d);
int ovl_fsync(struct ovl *v, struct ckpt_node *n, struct diag *d);

/*
 * Where a read of @n's file from offset @off finds its bytes: the one
 * place that knows (staged rewrites, new tensors, staged storages,
 * inflated copies, the checkpoint itself, views being written).  @view is
 * 0 for the file itself, CKPT_V_NPY or CKPT_V_TXT for a view.
 *   loc->fd >= 0: the bytes are @loc->len bytes of that file (borrowed)
 *                 from @loc->pos on, as they are: splice or pread them;
 *   loc->fd < 0:  they must be made: ovl_read() / ovl_npy_read() copy
 *                 them (gathered strided views, values, .npy headers), a
 *                 text view is formatted by its reader.
 * @loc->size is the file's size.  0 or -errno with @d set.  Callers hold
 * the read lock; the fd stays valid until the next change.
 */
struct ovl_loc {
	int fd;
	uint64_t pos, len;
	uint64_t size;
};
int ovl_locate(struct ovl *v, struct ckpt_node *n, int view, uint64_t off,
	       struct ovl_loc *loc, struct diag *d);

/* ---- raw storages (.ptfs/storages/KEY): in place only */
long long ovl_write_storage(struct ovl *v, struct ckpt_storage *s,
			    const void *buf, uint64_t len, uint64_t off,
			    struct diag *d);
int ovl_fsync_storage(struct ovl *v, struct ckpt_storage *s, struct diag *d);

/* ---- the .npy and .txt views of a tensor (ovl_view.c, docs/views.md) */

/* Does tensor node @n have views (it has values: not a meta tensor)? */
bool ovl_view_ok(const struct ckpt_node *n);

/* Is @name "KEY.npy" / "KEY.txt"?  The view, and KEY's length; else 0. */
int ovl_view_name(const char *name, size_t *keylen);

/* The .npy header of @n's tensor into @buf (VIEW_NPY_HEADER_MAX bytes);
 * its length. */
size_t ovl_npy_header(const struct ovl *v, const struct ckpt_node *n,
		      unsigned char *buf);

/* Size of @n's .npy view (or of the one being written). */
uint64_t ovl_npy_size(const struct ovl *v, const struct ckpt_node *n);

/* Read the .npy view (header, then the tensor's bytes). */
long long ovl_npy_read(struct ovl *v, struct ckpt_node *n, void *buf,
		       uint64_t len, uint64_t off, struct diag *d);

/* Render @n's text view into @fd from offset 0; *@size its length. */
int ovl_text_render(struct ovl *v, struct ckpt_node *n, int fd,
		    uint64_t *size, struct diag *d);

/*
 * Write to view @view of @n.  .npy: bytes past the header are written
 * into the tensor in place; the header can only be rewritten as it is.
 * .txt: the first write starts a copy of the text, applied at close().
 * After a truncate (open with O_TRUNC, cp, np.save) the whole new file
 * is staged and applied at close(): a .npy of the same dtype and shape
 * (or a .txt with the right count of numbers) replaces the values; a .npy
 * of the same dtype and another shape replaces the tensor by a new one
 * (told, v->notice); a .npy of another dtype is refused with -EINVAL and
 * changes nothing (a change of dtype is a cast: user.dtype), except over
 * a new file that is still plain bytes.
 */
long long ovl_view_write(struct ovl *v, struct ckpt_node *n, int view,
			 const void *buf, uint64_t len, uint64_t off,
			 struct diag *d);
int ovl_view_truncate(struct ovl *v, struct ckpt_node *n, int view,
		      uint64_t size, struct diag *d);
/* close() / the last close(): apply a view being written (see ovl_flush) */
int ovl_view_flush(struct ovl *v, struct ckpt_node *n, struct diag *d);
int ovl_view_release(struct ovl *v, struct ckpt_node *n, struct diag *d);

/*
 * create("KEY.npy") where @dir has no KEY: a pending node whose .npy view
 * takes the new file; at close() it becomes tensor KEY (@key: the
 * escaped name without ".npy").
 */
int ovl_view_create(struct ovl *v, struct ckpt_node *dir, const char *key,
		    struct ckpt_node **out, struct diag *d);

/*
 * Write back: the new archive goes to a temporary file beside @output
 * (NULL: the checkpoint itself), is fsync'd, renamed over it, and the
 * directory fsync'd; then the overlay is removed and no more edits are
 * taken.  Returns 0 when written, 1 when there was nothing to write, or
 * -errno with @d set (then the original and the overlay are as they were).
 */
int ovl_commit(struct ovl *v, const char *output, struct diag *d);

/*
 * Drop every staged edit: remove the overlay by its manifest, exactly as
 * a successful write-back does (the data files and temporaries the
 * journal names, the journal, the directory if ptfs made it and it is
 * empty); the checkpoint is not touched.  Then no more edits are taken,
 * and nothing is written back (ovl_commit() has nothing to write).  What
 * the model shows is not undone: unmount.  0 or -errno with @d set.
 */
int ovl_discard(struct ovl *v, struct diag *d);

/*
 * Make each of the key paths @paths (@n of them, at most 16; names as
 * ckpt_node_path() writes them, "" the root) exactly what the checkpoint
 * on disk holds there, keeping every other staged edit: a key the
 * checkpoint does not have is removed, a removed or renamed one comes
 * back, values, tensors and storages are the checkpoint's again (the
 * overlay's copies go).  The paths are reverted together: a staged
 * storage they share with a tensor outside all of them is refused
 * (reverting would change that tensor too), as are files being written.
 * Journaled (JR_REVERT), so a crash after it returns gives the same.
 * Returns 0, 1 when nothing was staged there, or -errno with @d set and
 * nothing changed.
 */
int ovl_revert(struct ovl *v, const char *const *paths, int n,
	       struct diag *d);

/* ---- what is staged (ovl_summary.c) ---- */

enum ovl_change_kind {
	OVL_C_DATA,		/* a tensor's values: its storage staged, or
				   the tensor replaced by one of another dtype
				   or shape */
	OVL_C_RENAME,		/* a key renamed or moved: from -> path */
	OVL_C_REMOVE,		/* a key of the checkpoint removed (path: where
				   it was at open) */
	OVL_C_NEW,		/* a new key (the top of a new subtree) */
	OVL_C_VALUE,		/* a python value edited: from -> to */
	OVL_C_META,		/* a metadata entry set or added (path: its
				   key, to: its text) or removed (to NULL) */
	OVL_C_NKINDS
};

struct ovl_change {
	uint8_t kind;		/* enum ovl_change_kind */
	bool dir;		/* a dict, list or object */
	char *path;		/* key path now (removed: at open) */
	char *from;		/* RENAME: the path at open; VALUE: the text */
	char *to;		/* VALUE: the new text (both cut to a line) */
};

struct ovl_summary {
	uint64_t count[OVL_C_NKINDS];	/* all of them, listed or not */
	uint32_t storages;	/* storages of the checkpoint that are staged */
	uint32_t files;		/* data files in the overlay */
	uint64_t file_bytes;	/* their bytes */
	uint64_t journal_bytes;	/* the journal's */
	bool journal;		/* there is one (an edit was made) */
	uint64_t resumed;	/* journal records an earlier mount staged */
	bool changed;		/* write-back would write (ovl_changed()) */
	struct ovl_change *items;	/* at most max of each kind, in the
					   order of the tree */
	size_t nitems;
};

/*
 * What is staged, from the live tree compared with what it was at open
 * (every node of the checkpoint is kept, with its place at open) and
 * from the overlay's files: counts of each kind of change, and the key
 * paths of at most @max changes of each kind.  A renamed directory is one
 * rename, a removed subtree one removal, a new subtree one new key.
 * 0 or -ENOMEM with @d set; free with ovl_summary_free() either way.
 */
int ovl_summarize(const struct ovl *v, size_t max, struct ovl_summary *s,
		  struct diag *d);
void ovl_summary_free(struct ovl_summary *s);

#endif
