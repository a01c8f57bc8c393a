/*
 * source.h - the one door: every file of a checkpoint is opened here.
 *
 * A checkpoint of many files (a Hugging Face folder, a DCP directory) is a
 * tree of names its index or .metadata chose, and names lie: a shard may be
 * a symlink out of the folder, a fifo, a directory, or the same file under
 * two names.  A source is the checkpoint's root directory and the members
 * opened beneath it.  For each member it guarantees, once, for every format:
 *
 *   name        relative, no "..", no empty or "." component, no NUL
 *   directories each component opened with O_NOFOLLOW: a symlinked
 *               directory is refused, so nothing resolves outside the root
 *   last name   may be a symlink (the Hugging Face cache's snapshot files
 *               point into ../../blobs/): read through, never written
 *               through (write-back renames or unlinks the link itself)
 *   kind        a regular file, checked by fstatat before any open and by
 *               fstat after an O_NONBLOCK one: a fifo never blocks
 *   identity    device, inode, size, mtime, ctime pinned at open:
 *               src_fresh() on every read, src_same() before write-back
 *   aliases     two names of one file (device and inode) are known:
 *               src_alias() says which earlier member it is
 *   access      the owner and mode of the file read (a link's target), for
 *               the mount to show exactly what the OS would
 *
 * A format never calls open(2) on a member by itself.
 *
 * A path may be a URL (http://, https://, s3://): the object or folder
 * behind it is opened instead, read-only, through core/remote
 * (src_remote.h says how), with the same guarantees.
 */
#ifndef PT_SOURCE_SOURCE_H
#define PT_SOURCE_SOURCE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "source/ident.h"

struct diag;

/* One file of a checkpoint. */
struct src_member {
	const char *name;	/* beneath the root, as the format names it */
	const char *leaf;	/* its last component (in name) */
	const char *path;	/* root/name: what messages name */
	int fd;			/* O_RDONLY, owned */
	int dfd;		/* its directory, owned by the source */
	uint32_t alias;		/* the first member that is this file (itself
				   when none is) */
	uint32_t uid, gid, mode;	/* of the file read (mode: 07777 bits) */
	uint64_t size;
	struct src_ident id;	/* pinned at open */
};

struct src;

/*
 * A source rooted at the directory @root (a path, copied; it may itself
 * be reached through a symlink: the user named it), or at @fd when that is
 * >= 0 (an O_DIRECTORY fd on it, which the source then owns).  0 or
 * -errno with @d set.
 */
int src_new(const char *root, int fd, struct src **out, struct diag *d);

/* The root, open (O_DIRECTORY), owned by the source. */
int src_root_fd(const struct src *s);
const char *src_root(const struct src *s);

#define SRC_OPTIONAL	1u	/* an absent member is -ENOENT, @d untouched */
#define SRC_QUIET	2u	/* any failure: -errno, @d untouched */

/*
 * Open member @name (its length @len: it may come from an index and hold
 * anything), beneath the root, as described at the top.  @at is the byte
 * of the file naming it, for messages (or DIAG_NO_OFFSET).  Returns its
 * index (>= 0), or -errno with @d set: "shard-like 'sub/x.pt': 'sub' is a
 * symbolic link ...", "... is a fifo, not a regular file".
 */
int src_add(struct src *s, const char *name, size_t len, uint64_t at,
	    unsigned flags, struct diag *d);

uint32_t src_count(const struct src *s);
const struct src_member *src_at(const struct src *s, uint32_t i);

/* Is member @i another name of an earlier member?  Returns that member's
 * index, or @i itself. */
uint32_t src_alias(const struct src *s, uint32_t i);

/* Is member @i's file still the one opened, unchanged (one fstat)?  0, or
 * -ESTALE with @d set ("changed under the mount: ..."). */
int src_fresh(const struct src *s, uint32_t i, struct diag *d);

/* Does member @i's name still lead (beneath the root, through no symlinked
 * directory) to the file opened (its device and inode: a link, to the
 * same target)?  0, or -ESTALE with @d set.  Write-back removes an old
 * member only then. */
int src_same(const struct src *s, uint32_t i, struct diag *d);

/*
 * The directory @name (a member's name, or a new file's beside it) lies in,
 * opened as src_add() opens a member's: the fd the source owns and *@leaf
 * the last component.  For write-back: create, rename and unlink there
 * only.  -errno with @d set.
 */
int src_dir_of(struct src *s, const char *name, const char **leaf,
	       struct diag *d);

void src_free(struct src *s);

/* Who may read a file of the mount: an owner, a group and mode bits. */
struct src_access {
	uint32_t uid, gid, mode;
};

/* @a narrowed to what member @m allows too: never more than either (a
 * member of another owner or group leaves only the bits "other" has). */
void src_access_narrow(struct src_access *a, const struct src_member *m);

/*
 * Open the file or directory a user named (@path: symlinks followed, it is
 * the user's own choice) without blocking: a fifo, device or socket is
 * refused with one line before any open that could wait.  Returns the fd
 * (O_RDONLY) with *@st filled, or -errno with @d set.
 */
int src_open_path(const char *path, struct stat *st, struct diag *d);

/* Is @path a URL (a remote object or folder)? */
bool src_is_url(const char *path);

/* @path as messages show it: a URL with its user and password hidden
 * (what is shown still opens it), anything else as it is; into @out,
 * which is returned. */
const char *src_shown(const char *path, char *out, size_t size);

/* Each URL among @argv[1..@argc) replaced by its shown form (in place
 * where it fits, so ps shows it hidden too): call first in main(), and
 * no message, log or JSON output ever holds a URL's password. */
void src_hide_urls(int argc, char **argv);

#endif
