/*
 * ptfs.h - what the FUSE driver's files share: the mounted checkpoint and
 * its inode table (ptfs_ino.c), the operations (ptfs_ops.c, ptfs_read.c,
 * ptfs_edit.c, ptfs_inval.c) and main (ptfs_main.c).  Only fs/ includes
 * FUSE headers.
 */
#ifndef PT_FS_PTFS_H
#define PT_FS_PTFS_H

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 14)

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include <pthread.h>

#include "ckpt/ckpt.h"
#include "source/source.h"
#include "ovl/ovl.h"

struct diag;
struct ctl_handle;

/* Largest read request, and the readahead window (ptfs_tune.c). */
#define PTFS_REQUEST	(252u * 4096)

/* What an inode number stands for (see ptfs_ino.c for the numbering). */
enum ptfs_kind {
	PTFS_ROOT,		/* the mount's root directory */
	PTFS_NODE,		/* a node of the object tree */
	PTFS_PLUMB,		/* .ptfs/ */
	PTFS_STORAGES,		/* .ptfs/storages/ */
	PTFS_STORAGE,		/* .ptfs/storages/<key>: a raw storage */
	PTFS_RECORD,		/* .ptfs/<record>: another archive record */
	PTFS_CTL,		/* .ptfs/commit, status, ...: control files */
	PTFS_VIEW,		/* KEY.npy / KEY.txt of a tensor node */
	PTFS_FILES,		/* .ptfs/files/: a sharded folder's files */
	PTFS_FILE,		/* .ptfs/files/<name>: one of them, read-only */
	PTFS_META,		/* .ptfs/<format>/: a flat format's metadata */
	PTFS_METAV,		/* .ptfs/<format>/KEY: one entry's value */
	PTFS_AS,		/* .ptfs/as/: the model as safetensors files */
	PTFS_ASFILE,		/* .ptfs/as/<file>: one of them (computed) */
};

/* The control files under .ptfs/ of a writable mount (ptfs_ctl.c). */
enum ptfs_ctl {
	PTFS_CTL_COMMIT,	/* write: write back; read: the last result */
	PTFS_CTL_PROGRESS,	/* read: record bytes written back, and all */
	PTFS_CTL_STATUS,	/* read: what is staged (ptfs status) */
	PTFS_CTL_DISCARD,	/* write: drop every staged edit, unmount;
				   read: what was dropped */
	PTFS_CTL_REVERT,	/* write key paths, NUL-terminated or one a
				   line: make them what the checkpoint
				   holds; read: result */
	PTFS_CTL_STATUS_JSON,	/* read: status as JSON (ptfs status -j) */
	PTFS_NCTL
};

struct ptfs_ctl_file {
	const char *name;
	bool writable;
};

/* Their names and modes, in inode order (ptfs_ino.c numbers them). */
extern const struct ptfs_ctl_file ptfs_ctl_files[PTFS_NCTL];

struct ptfs_ino {
	int kind;		/* enum ptfs_kind */
	struct ckpt_node *node;		/* PTFS_NODE */
	struct ckpt_storage *storage;	/* PTFS_STORAGE */
	/* a row (ckpt.h, "Rows"): its slot, node and storage then being
	   rv's copies, to read only; ptfs_ino_real() makes it a node */
	const void *row;
	struct ckpt_rowview rv;
	struct ptz_entry *rec;		/* PTFS_RECORD (zip) */
	uint32_t index;		/* storage or record number */
	int view;		/* PTFS_VIEW: enum ckpt_view */
	int ctl;		/* PTFS_CTL: enum ptfs_ctl */
};

/* A record shown under .ptfs/ (everything but the storages). */
struct ptfs_rec {
	char *name;		/* escaped file name */
	uint64_t off, size;	/* where its bytes are (legacy: data.pkl) */
	struct ptz_entry *e;	/* zip record, or NULL */
};

/* A file of a sharded folder that is no shard (config.json ...). */
struct ptfs_file {
	const struct src_member *m;	/* the source's: its name (->leaf),
					   descriptor, size, owner and mode */
};

/* Storages whose views must leave the kernel's page cache (ptfs_ops.c). */
struct ptfs_inval {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct ckpt_storage **q;	/* changed storages, deduplicated */
	fuse_ino_t *except;	/* the writer's inode, kept cached */
	uint32_t n, cap;
	/* names whose entry the kernel must look up again (a view renamed
	   over: the kernel thinks the name is the renamed file now) */
	struct ptfs_ent { fuse_ino_t parent; char *name; } *ents;
	uint32_t nents, capents;
	/* inodes whose attributes and pages are stale (a revert) */
	fuse_ino_t *inos;
	uint32_t ninos, capinos;
	uint64_t queued, done;	/* batches asked for and finished */
	uint64_t equeued, edone;	/* the same, entries included */
	bool stop, running;
	bool wait;		/* writers wait for their invalidations */
	struct fuse_session *se;
};

/* .ptfs/as/ (ptfs_as.c), under the lock. */
struct ptfs_as {
	struct ptfs_img *img;	/* the image as of gen, or NULL: not made */
	uint64_t gen;
	uint64_t max_shard;	/* -o shards=SIZE; 0: one file */
};

struct ptfs {
	struct ckpt *c;
	struct ovl *ovl;	/* staged edits */
	const char *output;	/* -o output=FILE, or NULL */
	bool readonly;		/* -o ro, or the checkpoint is not writable */
	/*
	 * Everything that changes the model takes the lock for writing;
	 * everything that reads it, for reading.  Data is read and written
	 * with pread/pwrite, so readers run in parallel.
	 */
	pthread_rwlock_t lock;
	uint64_t gen;		/* changes (write locks) so far; atomic */
	struct ptfs_as as;
	struct ptfs_inval inval;
	/* the inode a write is going through (under the lock): its pages
	   stay cached, the other views of the storage are dropped */
	fuse_ino_t writing_ino;
	bool list_views;	/* -o views: readdir lists KEY.npy, KEY.txt */
	char commit_msg[512];	/* what .ptfs/commit reads: the last result */
	uint32_t nstor;		/* storages shown under .ptfs/storages/ */
	struct stat st;		/* the checkpoint file's, for times */
	struct src_ident ident;	/* ... and its identity (ptfs_fresh) */
	bool stale_logged;	/* a changed checkpoint was logged (atomic) */
	uid_t uid;		/* the checkpoint's owner and group, shown as */
	gid_t gid;		/* every file's (modes: ptfs_ino.c) */
	double timeout;		/* entry and attribute cache, seconds */
	const char *byteorder;	/* "little" or "big" */
	const char *root_name;	/* entry name when the root is not a dir */
	fuse_ino_t plumb;	/* ino of .ptfs/ (see ptfs_ino.c) */
	struct ptfs_rec *recs;
	uint32_t nrecs;
	/* a sharded folder's other files (ptfs_ino.c), open while mounted */
	struct ptfs_file *files;
	uint32_t nfiles;
	bool has_files;		/* .ptfs/files/ exists */
	bool has_meta;		/* .ptfs/<format>/ exists (ptfs_meta.c) */
	bool no_open;		/* the kernel can skip OPEN (see op_open) */
	/* write-back progress, bytes of record data (atomics: read without
	   the lock, which write-back holds) */
	uint64_t wb_done, wb_total;
	bool commit_failed;	/* write-back at unmount failed */
	/* what status and ptfs umount say (ptfs_ctl.c), under ctl_lock */
	pthread_mutex_t ctl_lock;
	struct ptfs_refusal *refused;	/* the last PTFS_REFUSED_MAX */
	uint64_t nrefused;	/* edits refused since the mount */
	/* the control files' open handles (ptfs_ctl.c): a release the
	   kernel had not sent when the mount went away never comes, so
	   the ones left are freed at exit */
	struct ctl_handle *handles;
	char *done_msg;		/* after write-back or discard: what was
				   done, as status shows it; else NULL */
};

/* ---- ptfs_ino.c ---- */

/* Is @ino a directory (the root, .ptfs/, its storages/, a container)? */
bool ptfs_ino_is_dir(const struct ptfs *fs, fuse_ino_t ino);

/* Set up the inode table for an open checkpoint whose fstat is in
 * fs->st (also its identity, see ptfs_fresh()).  0 or -ENOMEM. */
int ptfs_ino_init(struct ptfs *fs);
void ptfs_ino_release(struct ptfs *fs);

/*
 * ptfs_files.c: a sharded folder's other files under .ptfs/files/: open
 * them (0 or -errno), close them, the inode of the directory (@k 0) or
 * of file @k - 1, and the one called @name (0: none).
 */
int ptfs_files_init(struct ptfs *fs);

/*
 * ptfs_meta.c: a flat format's metadata entries as files under
 * .ptfs/<format>/ (the folder: ptfs_meta_ino(fs, 0); entry i: 1 + i).
 * The folder's name, its inodes, an entry's kind from k (its place
 * after the folder: 0 or -ENOENT), readdir entry i (1, 0 past the last,
 * -1 no entry there), lookup, size and read of entry i, and a writer's
 * open, write, truncate, flush (which sets the entry: 0 or -errno with
 * @d set) and release.
 */
void ptfs_meta_init(struct ptfs *fs);
fuse_ino_t ptfs_meta_ino(const struct ptfs *fs, uint64_t k);
const char *ptfs_meta_dir(const struct ptfs *fs);
int ptfs_meta_get(const struct ptfs *fs, uint64_t k, struct ptfs_ino *out);
int ptfs_meta_dirent(const struct ptfs *fs, uint64_t i, const char **name,
		     fuse_ino_t *ino);
fuse_ino_t ptfs_meta_lookup(const struct ptfs *fs, const char *name);
bool ptfs_meta_writable(const struct ptfs *fs);
uint64_t ptfs_meta_size(const struct ptfs *fs, uint32_t i);
long long ptfs_meta_read(const struct ptfs *fs, uint32_t i, char *buf,
			 size_t size, uint64_t off);
int ptfs_meta_open(struct ptfs *fs, uint32_t i, struct fuse_file_info *fi);
long long ptfs_meta_write(struct fuse_file_info *fi, const char *buf,
			  size_t size, uint64_t off);
int ptfs_meta_truncate(struct fuse_file_info *fi, uint64_t size);
int ptfs_meta_flush(struct ptfs *fs, struct fuse_file_info *fi,
		    struct diag *d);
void ptfs_meta_release(struct fuse_file_info *fi);
void ptfs_files_release(struct ptfs *fs);
fuse_ino_t ptfs_files_ino(const struct ptfs *fs, uint32_t k);
fuse_ino_t ptfs_files_lookup(const struct ptfs *fs, const char *name);

/* What @ino stands for; 0 or -ENOENT.  A row is seen through out->rv. */
int ptfs_ino_get(const struct ptfs *fs, fuse_ino_t ino, struct ptfs_ino *out);

/*
 * Make the row @ino stands for (a tensor, a view of it, its storage) a
 * node for good: whoever opens or reads it keeps what it finds (where the
 * storage's bytes start, an inflated copy, a writer's staging).  Takes
 * the write lock when there is a row; 0 or -ENOMEM with @d set.
 */
int ptfs_ino_real(struct ptfs *fs, fuse_ino_t ino, struct diag *d);

/*
 * ptfs_wrlock() for a change: every row becomes a node first, since
 * edits, write-back and the overlay keep and change what they touch
 * (and a model with rows has no change staged: ovl_open()).  The lock
 * is held either way; 0 or -ENOMEM with @d set.
 */
int ptfs_edit_lock(struct ptfs *fs, struct diag *d);

/* The inode number of a tree node. */
fuse_ino_t ptfs_ino_of(const struct ptfs *fs, const struct ckpt_node *n);

/* The inode number of view @view (CKPT_V_NPY/TXT) of tensor node @n. */
fuse_ino_t ptfs_ino_of_view(const struct ckpt_node *n, int view);

/* Attributes of @ino into @st.  0, -ENOENT, or for a text view what
 * measuring it failed with (-ESTALE, -EFBIG, -EIO). */
int ptfs_stat(struct ptfs *fs, fuse_ino_t ino, struct stat *st);

/* The same for an entry reply: a text view's size is not measured for it
 * (0 until known; the kernel asks getattr, its attributes expire at once). */
int ptfs_stat_entry(struct ptfs *fs, fuse_ino_t ino, struct stat *st);

/* Child @name of directory @parent: its inode number, or 0. */
fuse_ino_t ptfs_lookup(const struct ptfs *fs, fuse_ino_t parent,
		       const char *name);

/*
 * Entry @i of directory @dir (after "." and ".."): its name and inode.
 * Returns 1, 0 past the last entry, or -1 for a slot whose entry was
 * removed (skip it: offsets stay stable while a tool deletes what it
 * lists).  The name is borrowed, or made in @buf (PTFS_NAME_BUF bytes).
 */
#define PTFS_NAME_BUF	512

/* fi->fh of a tensor's, value's or view's file opened for writing (the
   control files' handles are pointers, ptfs_ctl.c) */
#define PTFS_FH_WRITER	UINT64_MAX
int ptfs_dirent(const struct ptfs *fs, fuse_ino_t dir, uint64_t i,
		const char **name, fuse_ino_t *ino, char *buf);

/* The inode number of storage @s's file (.ptfs/storages/KEY), or 0. */
fuse_ino_t ptfs_ino_of_storage(const struct ptfs *fs,
			       const struct ckpt_storage *s);

/* ---- ptfs_times.c ---- */

/* The mtime of node @n's file (or its views): the checkpoint's, moved
 * back by a fingerprint of its content, so that rsync sees which differ. */
void ptfs_node_mtime(const struct ptfs *fs, const struct ckpt_node *n,
		     struct timespec *t);

/* The same for .ptfs/storages/KEY. */
void ptfs_storage_mtime(const struct ptfs *fs, const struct ckpt_storage *s,
			struct timespec *t);

/* ---- ptfs_names.c: names as the kernel sees them ---- */

/* Longest shown key whose views (KEY.npy, KEY.txt) still fit NAME_MAX. */
#define PTFS_VIEW_KEY_MAX	(CKPT_NAME_MAX - 4)

/* The name child @k (a slot) in slot @slot of its directory is shown
 * under: its own, or cut to @max bytes with "%~<slot>" (@buf: @max + 1
 * bytes). */
const char *ptfs_shown_name(const struct ckpt_node *k, uint32_t slot,
			    size_t max, char *buf);

/* The child of @dir shown as @name (at most @max bytes), or NULL: its
 * slot, which may hold a row (ckpt_node_at() sees it; a change has made
 * every row a node: ptfs_edit_lock()). */
struct ckpt_node *ptfs_child(const struct ckpt_node *dir, const char *name,
			     size_t max);

/* A record or storage key escaped like a str dict key (caller frees). */
char *ptfs_escape_record(const char *s);

/*
 * The file name of storage @key (number @index) under .ptfs/storages/:
 * the key itself, or escaped like a dict key (docs/names.md) when it has
 * a '/' or '%', starts with '.' or is empty (TorchScript's "constants/0",
 * hostile keys), and cut like a long key; then made in @buf
 * (CKPT_NAME_MAX + 1 bytes).  NULL on ENOMEM.
 */
const char *ptfs_storage_name(const char *key, uint32_t index, char *buf);

/* A link node's symlink text: the relative path to its target, in shown
 * names (caller frees). */
char *ptfs_link_target(const struct ckpt_node *n);

#include "ptfs_calls.h"	/* the rest: views, ops, edits, ctl ... */

#endif
