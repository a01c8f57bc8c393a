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
	struct stat base;	/* the checkpoint as opened */
	struct ovl_ident id;	/* and its identity */
	char *note;		/* one line for the user (read-only mounts
				   that ignored an overlay; resumed edits),
				   or NULL */
	uint64_t resumed;	/* journal records replayed at open */
	uint32_t nstorages0;	/* storages of the checkpoint itself */
	bool replaying;		/* applying the journal: data is there */
	bool readonly;
	bool committed;		/* written back: no more edits */
	const char *output;	/* during ovl_commit(): -o output=, or NULL */
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
};

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
 * from a .npy) converts its storage's values (ovl_retype.c) */
int ovl_setxattr(struct ovl *v, struct ckpt_node *n, const char *name,
		 const char *value, size_t len, struct diag *d);

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

#endif
