/*
 * ptfs_calls.h - what the FUSE driver's files call across besides the inode
 * table: the text views, xattrs, the operations table and its reply path,
 * reads and their tuning, edits, which mount a path is in, the CLI, the
 * control files under .ptfs/, status and invalidation.  Part of ptfs.h,
 * which includes it.
 */
#ifndef PT_FS_PTFS_CALLS_H
#define PT_FS_PTFS_CALLS_H

#include "ptfs.h"


/* ---- ptfs_xattr.c ---- */

/* Longest attribute name the kernel passes (XATTR_NAME_MAX). */
#define PTFS_XATTR_NAME_MAX	255

/* Called with each attribute's name and value (borrowed: valid during the
 * call); non-zero stops the walk and is returned. */
typedef int ptfs_xattr_fn(const char *name, const char *value, void *arg);

/*
 * Walk the extended attributes of @ino, in a fixed order, one at a time:
 * their number and sizes come from the file and bound no buffer.  Returns
 * 0, what @fn returned, or -ENOENT.
 */
int ptfs_xattr_each(const struct ptfs *fs, fuse_ino_t ino, ptfs_xattr_fn *fn,
		    void *arg);

/* ---- ptfs_tune.c: settings for many readers at once ---- */

/* What op_init asks of the kernel for reads: request size, splice, the
 * background queue. */
void ptfs_tune_conn(struct fuse_conn_info *conn);
/* Once mounted, before the loop: the mount's readahead (root only) and
 * the checkpoint descriptors' (best effort; nothing fails). */
void ptfs_tune_mount(const struct ptfs *fs, const char *mountpoint);

/* ---- ptfs_ops.c: the operations table and the shared reply path ---- */

extern const struct fuse_lowlevel_ops ptfs_ops;

static inline struct ptfs *ptfs_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline void ptfs_rdlock(struct ptfs *fs)
{
	pthread_rwlock_rdlock(&fs->lock);
}

/* For a change: counted (fs->gen), so what is computed from the model
 * (.ptfs/as/) is computed again. */
static inline void ptfs_wrlock(struct ptfs *fs)
{
	pthread_rwlock_wrlock(&fs->lock);
	__atomic_add_fetch(&fs->gen, 1, __ATOMIC_RELEASE);
}

/* For what changes no byte a reader sees (an open, a row made a node). */
static inline void ptfs_wrlock_keep(struct ptfs *fs)
{
	pthread_rwlock_wrlock(&fs->lock);
}

static inline void ptfs_unlock(struct ptfs *fs)
{
	pthread_rwlock_unlock(&fs->lock);
}

/*
 * fs/ keeps one sign convention: every function returns 0 or -errno, and
 * only the reply turns it positive.  ptfs_errno() does that for -errno @rc
 * (never positive), maps -EILSEQ (corrupt input) to EIO and logs @d's
 * diagnostic once.  ptfs_reply_err() replies it (0 replies success) to
 * @req; with @req NULL it only logs.
 */
int ptfs_errno(int rc, const struct diag *d);
void ptfs_reply_err(fuse_req_t req, int rc, const struct diag *d);

/* The attribute timeout of @ino (0 for text views). */
double ptfs_attr_timeout(const struct ptfs *fs, fuse_ino_t ino);

/* An entry reply for @ino (0: a negative entry, cached too). */
void ptfs_fill_entry(struct ptfs *fs, fuse_ino_t ino,
		     struct fuse_entry_param *e);

/* ---- ptfs_read.c ---- */

void ptfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi);

/*
 * Is the checkpoint still the file that was mounted (src_ident_check())?
 * 0, or -ESTALE with @d set the first time only (so it is logged once).
 */
int ptfs_fresh(struct ptfs *fs, struct diag *d);

/* ---- ptfs_edit.c ---- */

void ptfs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode, struct fuse_file_info *fi);
void ptfs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode, dev_t rdev);
void ptfs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode);
void ptfs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void ptfs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ptfs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname,
		    unsigned int flags);
void ptfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		   size_t size, off_t off, struct fuse_file_info *fi);
void ptfs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		     int to_set, struct fuse_file_info *fi);
void ptfs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ptfs_op_release(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi);
void ptfs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		   struct fuse_file_info *fi);
void ptfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		      const char *value, size_t size, int flags);
void ptfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* ---- ptfs_mnt.c: which ptfs mount a path is in; mount points ---- */

struct ptfs_mnt {
	char *root;		/* its mount point */
	char *source;		/* the checkpoint (fsname) */
	char *rest;		/* the path asked about, inside it ("" for
				   the mount point itself) */
};

/* The mount @arg is in, when that is a ptfs mount: 0, 1 when it is not
 * (or no mount is listed), -errno. */
int ptfs_find_mount(const char *arg, struct ptfs_mnt *m);
void ptfs_mnt_free(struct ptfs_mnt *m);

/* May @mountpoint become a ptfs mount?  Not when it is a ptfs mount
 * already, or (unless @nonempty) another mount or a directory with
 * something in it; and it must be a directory.  0, or 1 with one line
 * said. */
int ptfs_mountpoint_check(const char *mountpoint, bool nonempty);

/* Keep what libfuse logs (@keep), or print it as libfuse does again. */
void ptfs_mount_log(bool keep);
/* The mount worked: print what libfuse said meanwhile, if anything. */
void ptfs_mount_said(void);
/* The mount failed: one line, why and what to do (/dev/fuse, a
 * container's options), with what libfuse said. */
void ptfs_mount_failed(const char *mountpoint);

/* "the daemon is gone" for @arg in mount @m, with what to run (to drop
 * the staged edits, when @discard). */
void ptfs_daemon_gone(const char *arg, const struct ptfs_mnt *m,
		      bool discard);

/* Control file @name of mount @m: open(2)'s result. */
int ptfs_open_ctl(const struct ptfs_mnt *m, const char *name, int flags);

/* All of @fd from offset 0 (malloc'd, NUL-terminated), or NULL. */
char *ptfs_read_all(int fd);

/* ---- ptfs_cli.c ---- */

/* ptfs umount|status ...: run it and return the exit status; -1 when
 * @argv is no such command (then it is a mount). */
int ptfs_cli_main(int argc, char **argv);

/* ---- ptfs_umount.c ---- */

/* ptfs umount [-q] [-v] [--discard] @mnt (options parsed): the exit
 * status. */
int ptfs_umount(const char *mnt, bool quiet, bool verbose, bool discard);

/* ---- ptfs_ctl.c: the control files under .ptfs/ ---- */

/* How many refused edits status keeps (the last ones, ptfs_status.c). */
#define PTFS_REFUSED_MAX	16

/* An edit the daemon refused: where, and why. */
struct ptfs_refusal {
	char *path;		/* key path (of the directory and name) */
	int err;		/* the errno the caller got */
	char *msg;		/* the reason, as logged */
};

/* The inode number of control file @k. */
fuse_ino_t ptfs_ctl_ino(const struct ptfs *fs, int k);

/* Write back now; 0 written, 1 nothing to write, or -errno with @d set.
 * The result is what .ptfs/commit reads next, and status says what was
 * written. */
int ptfs_commit(struct ptfs *fs, struct diag *d);

/* open() of control file @k: per-open state in fi->fh (status: its
 * text, made now).  0 or -errno. */
int ptfs_ctl_open(struct ptfs *fs, int k, struct fuse_file_info *fi);
/* release(): free it (after a discard: end the session, unmount). */
void ptfs_ctl_release(struct ptfs *fs, struct fuse_file_info *fi);
/* read() of control file @k. */
void ptfs_ctl_read(fuse_req_t req, struct ptfs *fs, int k, size_t size,
		   off_t off, struct fuse_file_info *fi);
/* write() to control file @k: the request it makes, done when it
 * returns; bytes taken or -errno (the reason is what the file reads). */
long long ptfs_ctl_write(struct ptfs *fs, int k, const char *buf,
			 size_t size, struct fuse_file_info *fi);

/*
 * Remember that an edit of @dir/@name (@name NULL: of @dir itself) was
 * refused with @rc and @d's reason, for status and ptfs umount.  Nothing
 * when @rc is 0 or @d has no reason.  Call with the fs lock held.
 */
void ptfs_refused(struct ptfs *fs, const struct ckpt_node *dir,
		  const char *name, int rc, const struct diag *d);
/* The same for the file @i stands for (a node, a view, a storage). */
void ptfs_refused_ino(struct ptfs *fs, const struct ptfs_ino *i, int rc,
		      const struct diag *d);

/* Free what ptfs_ctl.c keeps, and the handles whose release never came. */
void ptfs_ctl_release_all(struct ptfs *fs);

/* ---- ptfs_status.c: what status says ---- */

/* The whole of .ptfs/status, or of .ptfs/status.json when @json
 * (malloc'd; NULL: no memory); takes the lock for reading. */
char *ptfs_status_text(struct ptfs *fs, bool json, size_t *len);

/* @s as status prints a key path: as it is, or in double quotes with C's
 * escapes when it holds a control character, '"' or '\\' ("a\nb"). */
void ptfs_put_path(FILE *f, const char *s);

/* "2 tensors changed, 1 key renamed, ..." of @s into @f. */
void ptfs_counts_text(FILE *f, const struct ovl_summary *s);

/* Is nothing staged according to @s? */
bool ptfs_nothing_staged(const struct ovl_summary *s);

/* "discarded: COUNTS; DIR removed, FILE untouched" (no newline) of @s,
 * what overlay @v held: ptfs umount --discard's line and -o discard's. */
void ptfs_discarded_text(FILE *f, const struct ovl *v,
			 const struct ovl_summary *s);

/* ---- ptfs_staged.c: what a mount says of an earlier mount's edits ---- */

/* -o discard: the line that says what it drops from the overlay @oo of
 * @ckpt, by a read-only look before (malloc'd), or NULL (nothing to
 * say: the look failed, and the mount says why). */
char *ptfs_discard_look(const char *ckpt, const struct ovl_opts *oo);

/* Just mounted: the edits an earlier mount staged, resumed (writable) or
 * shown (read-only), on stderr; nothing when there are none. */
void ptfs_say_staged(struct ptfs *fs);

/* ---- ptfs_as.c: .ptfs/as/, the model as safetensors files ---- */

/* Is @ino one of .ptfs/as/ (the folder or a file in it)?  Its folder's. */
bool ptfs_as_ino(fuse_ino_t ino);
fuse_ino_t ptfs_as_dir_ino(void);
/* Before a request for @ino takes the lock: when @ino is of .ptfs/as/
 * and the model changed, make its image again.  0 or -errno with @d. */
int ptfs_as_ready(struct ptfs *fs, fuse_ino_t ino, struct diag *d);
/* ptfs_ino_get(), ptfs_lookup() in .ptfs/as/, and its readdir entry @i
 * (1, 0 past the last, -1 none there), under the lock. */
int ptfs_as_get(const struct ptfs *fs, fuse_ino_t ino, struct ptfs_ino *out);
fuse_ino_t ptfs_as_lookup(const struct ptfs *fs, const char *name);
int ptfs_as_dirent(const struct ptfs *fs, uint64_t i, const char **name,
		   fuse_ino_t *ino);
/* File @k's size, and in *@acc who may read it (NULL: anyone the
 * checkpoint's mode lets). */
uint64_t ptfs_as_size(const struct ptfs *fs, uint32_t k,
		      const struct src_access **acc);
/* Open file @k (under the write lock, read-only): 0 or -EACCES. */
int ptfs_as_open(struct ptfs *fs, uint32_t k, struct fuse_file_info *fi);
/* The release of an open file of .ptfs/as/: true when @ino was one. */
bool ptfs_as_release(struct ptfs *fs, fuse_ino_t ino,
		     struct fuse_file_info *fi);
/* A read of file @k (under the read lock). */
void ptfs_as_read(fuse_req_t req, struct ptfs *fs, uint32_t k, size_t size,
		  off_t off, struct fuse_file_info *fi);
/* At exit. */
void ptfs_as_release_all(struct ptfs *fs);

/* ---- ptfs_inval.c ---- */

/* Start / stop the thread that drops stale views from the page cache. */
void ptfs_inval_start(struct ptfs *fs, struct fuse_session *se,
		      bool multithreaded);
void ptfs_inval_stop(struct ptfs *fs);

/* After a request changed storages, with the lock dropped and before it
 * replies: wait (bounded) until the other views left the page cache. */
void ptfs_inval_wait(struct ptfs *fs);

/* Make the kernel look up @name in @parent again (a file was renamed
 * onto a view, which is still no entry of its own). */
void ptfs_inval_entry(struct ptfs *fs, fuse_ino_t parent, const char *name);

/* Make the kernel drop what it caches of @ino (attributes, pages). */
void ptfs_inval_inode(struct ptfs *fs, fuse_ino_t ino);

/* ptfs_inval_wait(), and until the entries queued so far were dropped
 * too: for a request that holds no directory lock (a revert). */
void ptfs_inval_wait_all(struct ptfs *fs);

#endif
