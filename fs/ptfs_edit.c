/*
 * ptfs_edit.c - the FUSE requests that change the tree or its bytes:
 * create, mkdir, unlink, rename, write, truncate, close/fsync and
 * setxattr (writes to the control files go to ptfs_ctl.c).  Edits go to
 * the overlay (core/ovl) under the write lock, then wait for the views
 * they changed to leave the page cache (ptfs_inval.c) before they answer.
 * An edit refused with a reason is remembered for status (ptfs_refused()).
 */
#include "ptfs.h"

#include "diag/diag.h"
#include "view/view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE	(1 << 0)	/* linux/fs.h, renameat2(2) */
#endif

/* ---- edits ---- */

/* The directory node behind inode @ino, or NULL. */
static struct ckpt_node *dir_node(const struct ptfs *fs, fuse_ino_t ino)
{
	struct ptfs_ino i;

	if (ptfs_ino_get(fs, ino, &i) ||
	    (i.kind != PTFS_NODE && i.kind != PTFS_ROOT))
		return NULL;
	return ckpt_node_is_dir(i.node) ? i.node : NULL;
}

/* Can the tree be edited here?  -errno, or 0.  The mount root of a
 * checkpoint that is one tensor, value or object holds that one entry, and
 * no key to add, rename or remove: said in @d, for the refusal log. */
static int edit_errno(const struct ptfs *fs, fuse_ino_t parent,
		      struct diag *d)
{
	if (fs->readonly || !fs->ovl || ovl_committed(fs->ovl))
		return -EROFS;
	if (dir_node(fs, parent))
		return 0;
	if (parent == FUSE_ROOT_ID)
		return diag_errno(d, -EPERM, "the checkpoint is one %s, not "
				  "a dict: it has no keys to add, rename or "
				  "remove", fs->root_name);
	return -EPERM;
}

/* Is @name "KEY.npy" with no KEY in @dir (a new tensor from a .npy)?
 * KEY into @key (256 bytes). */
static bool new_npy(const struct ckpt_node *dir, const char *name, char *key)
{
	size_t kl;

	if (!dir || ovl_view_name(name, &kl) != CKPT_V_NPY || kl > 255)
		return false;
	memcpy(key, name, kl);
	key[kl] = 0;
	return !ptfs_child(dir, key, PTFS_VIEW_KEY_MAX);
}

/* The model's name of the entry of @dir the kernel calls @name: a key
 * over NAME_MAX is shown cut (ptfs_names.c).  @name when none is. */
static const char *real_name(const struct ckpt_node *dir, const char *name)
{
	const struct ckpt_node *k = dir ? ptfs_child(dir, name,
						    CKPT_NAME_MAX) : NULL;

	return k ? k->name : name;
}

/*
 * The model's name for a rename's target @name in @dir: real_name(), or
 * for a view of a key shown cut ("xxx%~3.npy", rsync -a into a mount with
 * -o views) the view of the whole key, made in *@buf (caller frees).
 * NULL on ENOMEM.
 */
static const char *real_target(const struct ckpt_node *dir, const char *name,
			       char **buf)
{
	const struct ckpt_node *k;
	char key[CKPT_NAME_MAX + 1];
	size_t kl;

	*buf = NULL;
	if (!dir || ptfs_child(dir, name, CKPT_NAME_MAX) ||
	    ovl_view_name(name, &kl) == CKPT_V_RAW || kl > PTFS_VIEW_KEY_MAX)
		return real_name(dir, name);
	memcpy(key, name, kl);
	key[kl] = 0;
	k = ptfs_child(dir, key, PTFS_VIEW_KEY_MAX);
	if (!k || !strcmp(k->name, key))
		return name;
	*buf = malloc(strlen(k->name) + 5);
	if (*buf)
		sprintf(*buf, "%s%s", k->name, name + kl);
	return *buf;
}

/* Is @name a view of a tensor in @dir rather than an entry of its own? */
static bool is_view_name(const struct ckpt_node *dir, const char *name)
{
	char key[256];
	size_t kl;
	const struct ckpt_node *k;

	if (!dir || ptfs_child(dir, name, CKPT_NAME_MAX) ||
	    !ovl_view_name(name, &kl) || kl > 255)
		return false;
	memcpy(key, name, kl);
	key[kl] = 0;
	k = ptfs_child(dir, key, PTFS_VIEW_KEY_MAX);
	return k && k->kind == CKPT_N_TENSOR && ovl_view_ok(k);
}

/* A new file (@fi: create, else mknod) or directory (@dir) @name. */
static void make_common(fuse_req_t req, fuse_ino_t parent, const char *name,
			bool dir, struct fuse_file_info *fi)
{
	struct ptfs *fs = ptfs_fs(req);
	struct fuse_entry_param e;
	struct ckpt_node *n = NULL;
	char key[256];
	struct diag d;
	int rc;

	diag_init(&d, fs->c->path);
	rc = ptfs_edit_lock(fs, &d);
	if (!rc)
		rc = edit_errno(fs, parent, &d);
	if (!rc && fi && new_npy(dir_node(fs, parent), name, key)) {
		/* cp x.npy m/KEY.npy: tensor KEY, made at close() */
		rc = ovl_view_create(fs->ovl, dir_node(fs, parent), key, &n,
				     &d);
		if (!rc)
			ptfs_fill_entry(fs, ptfs_ino_of_view(n, CKPT_V_NPY),
					&e);
		goto opened;
	}
	if (!rc)
		rc = dir ? ovl_mkdir(fs->ovl, dir_node(fs, parent), name, &n,
				     &d) :
		     ovl_create(fs->ovl, dir_node(fs, parent), name, &n, &d);
	if (!rc)
		ptfs_fill_entry(fs, ptfs_ino_of(fs, n), &e);
opened:
	/* create() opens it for writing: a writer, as in op_open */
	if (!rc && fi && !ckpt_node_ed(fs->c, n))
		rc = diag_nomem(&d);
	if (!rc && fi) {
		n->ed->wopen++;
		fi->fh = PTFS_FH_WRITER;
	}
	ptfs_refused(fs, dir_node(fs, parent), name, rc, &d);
	ptfs_unlock(fs);
	if (rc)
		return ptfs_reply_err(req, rc, &d);
	if (!fi)
		return (void)fuse_reply_entry(req, &e);
	fi->keep_cache = 0;
	fuse_reply_create(req, &e, fi);
}

void ptfs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	(void)mode;
	make_common(req, parent, name, false, fi);
}

void ptfs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	(void)rdev;
	if (!S_ISREG(mode))
		return ptfs_reply_err(req, -EPERM, NULL);
	make_common(req, parent, name, false, NULL);
}

void ptfs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	(void)mode;
	make_common(req, parent, name, true, NULL);
}

static void remove_common(fuse_req_t req, fuse_ino_t parent,
			  const char *name, bool dir)
{
	struct ptfs *fs = ptfs_fs(req);
	struct ckpt_node *gone = NULL;
	struct diag d;
	int rc;

	if (parent == FUSE_ROOT_ID && !strcmp(name, ".ptfs"))
		return ptfs_reply_err(req, -EPERM, NULL);
	diag_init(&d, fs->c->path);
	rc = ptfs_edit_lock(fs, &d);
	if (!rc)
		rc = edit_errno(fs, parent, &d);
	if (!rc && is_view_name(dir_node(fs, parent), name))
		rc = diag_errno(&d, -EPERM, "%s is a view: remove the tensor "
				"itself", name);
	if (!rc) {
		struct ckpt_node *dn = dir_node(fs, parent);

		name = real_name(dn, name);
		if (dir)
			gone = ckpt_node_child(dn, name);
		rc = dir ? ovl_rmdir(fs->ovl, dn, name, &d) :
		     ovl_unlink(fs->ovl, dn, name, &d);
	}
	/* a shared directory lives on where a link to it was (the symlink
	   the kernel has cached under that name is a directory now) */
	if (!rc && gone && !gone->dead && gone->parent)
		ptfs_inval_entry(fs, ptfs_ino_of(fs, gone->parent), gone->name);
	ptfs_refused(fs, dir_node(fs, parent), name, rc, &d);
	ovl_texts_drop(fs->ovl);
	ptfs_unlock(fs);
	ptfs_inval_wait(fs);
	ptfs_reply_err(req, rc, &d);
}

void ptfs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_common(req, parent, name, false);
}

void ptfs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_common(req, parent, name, true);
}

void ptfs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct ptfs *fs = ptfs_fs(req);
	const char *to;
	char *buf = NULL;
	struct diag d;
	bool onto_view;
	int rc;

	if (flags & ~RENAME_NOREPLACE)
		return ptfs_reply_err(req, -EINVAL, NULL);
	if (parent == FUSE_ROOT_ID && !strcmp(name, ".ptfs"))
		return ptfs_reply_err(req, -EPERM, NULL);
	diag_init(&d, fs->c->path);
	rc = ptfs_edit_lock(fs, &d);
	if (!rc)
		rc = edit_errno(fs, parent, &d);
	if (!rc)
		rc = edit_errno(fs, newparent, &d);
	if (!rc && is_view_name(dir_node(fs, parent), name))
		rc = diag_errno(&d, -EPERM, "%s is a view: rename the tensor "
				"itself", name);
	/* onto a cut name: the whole key it shows (docs/names.md) */
	to = rc ? NULL : real_target(dir_node(fs, newparent), newname, &buf);
	if (!rc && !to)
		rc = diag_nomem(&d);
	if (!rc)
		rc = ovl_rename(fs->ovl, dir_node(fs, parent),
				real_name(dir_node(fs, parent), name),
				dir_node(fs, newparent), to,
				flags & RENAME_NOREPLACE, &d);
	free(buf);
	/* onto a view (ovl_view.c): the file's bytes became the view's,
	   and the name is still no entry of its own */
	onto_view = !rc && !ptfs_child(dir_node(fs, newparent), newname,
					CKPT_NAME_MAX);
	ptfs_refused(fs, dir_node(fs, parent), name, rc, &d);
	ovl_texts_drop(fs->ovl);
	ptfs_unlock(fs);
	if (!rc && onto_view)
		ptfs_inval_entry(fs, newparent, newname);
	ptfs_inval_wait(fs);
	ptfs_reply_err(req, rc, &d);
}

void ptfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ptfs *fs = ptfs_fs(req);
	struct ptfs_ino i;
	struct diag d;
	long long n;

	diag_init(&d, fs->c->path);
	if (size && (fs->readonly || !fs->ovl))
		return ptfs_reply_err(req, -EROFS, NULL);
	if ((n = ptfs_edit_lock(fs, &d))) {
		;
	} else if (ptfs_ino_get(fs, ino, &i)) {
		n = -ENOENT;
	} else if (i.kind == PTFS_METAV) {
		n = ptfs_meta_write(fi, buf, size, (uint64_t)off);
	} else if (i.kind == PTFS_CTL) {
		ptfs_unlock(fs);
		/* a request; it answers when done (the reason of a failure
		   is what the file reads, and logged) */
		n = ptfs_ctl_write(fs, i.ctl, buf, size, fi);
		if (n < 0)
			return ptfs_reply_err(req, n, NULL);
		return (void)fuse_reply_write(req, n);
	} else {
		/* the writer's own pages stay cached (see storage_changed) */
		fs->writing_ino = ino;
		if (i.kind == PTFS_STORAGE)
			n = ovl_write_storage(fs->ovl, i.storage, buf, size,
					      off, &d);
		else if (i.kind == PTFS_NODE)
			n = ovl_write(fs->ovl, i.node, buf, size, off, &d);
		else if (i.kind == PTFS_VIEW)
			n = ovl_view_write(fs->ovl, i.node, i.view, buf, size,
					   off, &d);
		else
			n = -EACCES;
		fs->writing_ino = 0;
		ptfs_refused_ino(fs, &i, (int)(n < 0 ? n : 0), &d);
		/* in place: only the views of that storage changed */
		if (i.kind == PTFS_STORAGE)
			ovl_texts_drop_storage(fs->ovl, i.storage);
		else if (i.node && i.node->kind == CKPT_N_TENSOR &&
			 i.node->tensor && i.node->tensor->storage)
			ovl_texts_drop_storage(fs->ovl, i.node->tensor->storage);
		else
			ovl_texts_drop(fs->ovl);
	}
	ptfs_unlock(fs);
	ptfs_inval_wait(fs);
	if (n < 0)
		return ptfs_reply_err(req, n, &d);
	fuse_reply_write(req, n);
}

/* The last close of @i's file: what is still staged (a node's
 * replacement, a view's .npy or .txt) is applied or refused. */
static int release_staged(struct ptfs *fs, const struct ptfs_ino *i,
			  struct diag *d)
{
	return i->kind == PTFS_NODE ? ovl_release(fs->ovl, i->node, d) :
	       i->kind == PTFS_VIEW ? ovl_view_release(fs->ovl, i->node, d) :
	       0;
}

void ptfs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct ptfs *fs = ptfs_fs(req);
	struct ptfs_ino i;
	struct stat st;
	struct diag d;
	double tmo;
	int rc = 0;

	diag_init(&d, fs->c->path);
	/*
	 * Modes, owners and times are the mount's and the checkpoint's.  A
	 * chmod is accepted and changes nothing, as on file systems without
	 * modes: rsync -a and cp -p set modes on what they write and stop at
	 * an error.  Giving a file away to someone else is refused.
	 */
	if (((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != fs->uid) ||
	    ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != fs->gid))
		return ptfs_reply_err(req, -EPERM, NULL);
	if ((to_set & FUSE_SET_ATTR_MODE) && fs->readonly)
		return ptfs_reply_err(req, -EROFS, NULL);
	if ((rc = ptfs_edit_lock(fs, &d))) {
		ptfs_unlock(fs);
		return ptfs_reply_err(req, rc, &d);
	}
	if (ptfs_ino_get(fs, ino, &i))
		rc = -ENOENT;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && (fs->readonly || !fs->ovl))
		rc = -EROFS;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && i.kind == PTFS_NODE)
		rc = ovl_truncate(fs->ovl, i.node, attr->st_size, &d);
	else if ((to_set & FUSE_SET_ATTR_SIZE) && i.kind == PTFS_METAV)
		rc = ptfs_meta_truncate(fi, (uint64_t)attr->st_size);
	else if ((to_set & FUSE_SET_ATTR_SIZE) && i.kind == PTFS_VIEW)
		rc = ovl_view_truncate(fs->ovl, i.node, i.view, attr->st_size,
				       &d);
	else if ((to_set & FUSE_SET_ATTR_SIZE) && i.kind == PTFS_STORAGE &&
		 (uint64_t)attr->st_size != i.storage->nbytes)
		rc = diag_errno(&d, -EINVAL, "storage %s: its size is fixed",
				i.storage->key);
	else if ((to_set & FUSE_SET_ATTR_SIZE) && i.kind != PTFS_STORAGE &&
		 i.kind != PTFS_CTL)
		rc = -EACCES;
	/*
	 * truncate(2) by path is an open, an ftruncate and a close: with no
	 * writer to close the file, what it staged is applied (or refused,
	 * one line) now, never left pending until the unmount drops it.
	 */
	if (!rc && (to_set & FUSE_SET_ATTR_SIZE) &&
	    (i.kind == PTFS_NODE || i.kind == PTFS_VIEW) && !i.node->ed->wopen)
		rc = release_staged(fs, &i, &d);
	if (to_set & FUSE_SET_ATTR_SIZE)
		ovl_texts_drop(fs->ovl);
	if (rc && rc != -ENOENT)
		ptfs_refused_ino(fs, &i, rc, &d);
	if (!rc)
		rc = ptfs_stat(fs, ino, &st);
	tmo = ptfs_attr_timeout(fs, ino);
	ptfs_unlock(fs);
	if (rc)
		return ptfs_reply_err(req, rc, &d);
	fuse_reply_attr(req, &st, tmo);
}

/*
 * Is something being written through @i that close() may apply (a
 * replacement, a view, a new tensor)?  Then the text views must forget
 * what they learnt; a plain close of a file only read changes nothing.
 * And if close() refuses it, the file stays as it was, but the kernel
 * cached the size the writer staged (0 after O_TRUNC, 3996 after a short
 * cp) for the whole attribute timeout: it must ask again.
 */
static bool staging(const struct ptfs_ino *i)
{
	return (i->kind == PTFS_NODE || i->kind == PTFS_VIEW) && i->node &&
	       (ovl_staged(i->node) || ovl_view_staged(i->node, NULL, NULL) ||
		i->node->pending);
}

/* close() (@flush: may apply a replacement) or fsync(): make data durable */
static void sync_common(fuse_req_t req, fuse_ino_t ino, bool flush)
{
	struct ptfs *fs = ptfs_fs(req);
	struct ptfs_ino i;
	struct diag d;
	bool drop = false;
	uint8_t kind = 0;
	int rc = 0;

	/* .ptfs/as/ is read-only: its close changes nothing (and would
	   count as a change under the write lock) */
	if (!fs->ovl || fs->readonly || ptfs_as_ino(ino))
		return ptfs_reply_err(req, 0, NULL);
	diag_init(&d, fs->c->path);
	if (flush)
		ptfs_wrlock(fs);
	else
		ptfs_rdlock(fs);
	if (ptfs_ino_get(fs, ino, &i) || i.row)
		rc = 0;		/* (a row was never written) */
	else if ((drop = staging(&i)), (kind = i.node ? i.node->kind : 0),
		 i.kind == PTFS_NODE)
		rc = flush ? ovl_flush(fs->ovl, i.node, &d) :
		     ovl_fsync(fs->ovl, i.node, &d);
	else if (i.kind == PTFS_VIEW && flush)
		rc = ovl_view_flush(fs->ovl, i.node, &d);
	else if (i.kind == PTFS_VIEW && !ovl_view_staged(i.node, NULL, NULL) &&
		 !i.node->pending)
		rc = ovl_fsync(fs->ovl, i.node, &d);
	else if (i.kind == PTFS_STORAGE)
		rc = ovl_fsync_storage(fs->ovl, i.storage, &d);
	if (rc)
		ptfs_refused_ino(fs, &i, rc, &d);
	if (rc && drop)
		ptfs_inval_inode(fs, ino);	/* (staging()) */
	/* a new file that became a python value: its size and bytes are
	   the value's text now */
	if (!rc && i.kind == PTFS_NODE && i.node && i.node->kind != kind) {
		ptfs_inval_inode(fs, ino);
		drop = true;
	}
	if (flush && drop)
		ovl_texts_drop(fs->ovl);
	ptfs_unlock(fs);
	if (flush)
		ptfs_inval_wait(fs);
	ptfs_reply_err(req, rc, &d);
}

/* Is @ino a metadata file (.ptfs/<format>/KEY)?  Its fi->fh is its
 * writer's (ptfs_meta.c). */
static bool meta_file(struct ptfs *fs, fuse_ino_t ino)
{
	struct ptfs_ino i;
	bool yes;

	ptfs_rdlock(fs);
	yes = !ptfs_ino_get(fs, ino, &i) && i.kind == PTFS_METAV;
	ptfs_unlock(fs);
	return yes;
}

void ptfs_op_flush(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	struct ptfs *fs = ptfs_fs(req);
	struct ptfs_ino i = { .kind = PTFS_METAV };
	struct diag d;
	int rc;

	/* a metadata file's writer sets its entry, one line if refused */
	if (fi->fh && fi->fh != PTFS_FH_WRITER && meta_file(fs, ino)) {
		diag_init(&d, fs->c->path);
		if ((rc = ptfs_edit_lock(fs, &d))) {
			ptfs_unlock(fs);
			return ptfs_reply_err(req, rc, &d);
		}
		rc = ptfs_meta_flush(fs, fi, &d);
		ptfs_refused_ino(fs, &i, rc, &d);
		ptfs_unlock(fs);
		ptfs_inval_inode(fs, ino);
		ptfs_inval_wait(fs);
		return ptfs_reply_err(req, rc, &d);
	}
	/*
	 * Only a writer's close() applies a replacement: a reader closing
	 * the file while cp writes it must not apply half of it.
	 */
	if (fi->fh != PTFS_FH_WRITER)
		return ptfs_reply_err(req, 0, NULL);
	sync_common(req, ino, true);
}

void ptfs_op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ptfs *fs = ptfs_fs(req);
	struct ptfs_ino i;
	struct diag d;

	/* a reader of .ptfs/as/ holds the image it opened */
	if (ptfs_as_release(fs, ino, fi))
		return (void)fuse_reply_err(req, 0);
	/* a metadata file's writer (ptfs_meta.c): set at its flush */
	if (fi->fh && fi->fh != PTFS_FH_WRITER && meta_file(fs, ino)) {
		ptfs_meta_release(fi);
		return (void)fuse_reply_err(req, 0);
	}
	/* the control files keep something per open (ptfs_ctl.c) */
	if (fi->fh != PTFS_FH_WRITER)
		ptfs_ctl_release(fs, fi);
	/*
	 * What is still staged is applied by the last writer's release
	 * only: releases come asynchronously, and an earlier writer's could
	 * arrive after the next one truncated the file (echo 8 > v; echo 9
	 * > v), applying its empty replacement.
	 */
	if (fi->fh == PTFS_FH_WRITER && fs->ovl && !fs->readonly) {
		diag_init(&d, fs->c->path);
		ptfs_wrlock(fs);
		if (!ptfs_ino_get(fs, ino, &i) && !i.row &&
		    (i.kind == PTFS_NODE || i.kind == PTFS_VIEW) &&
		    (!i.node->ed->wopen || --i.node->ed->wopen == 0)) {
			bool drop = staging(&i);
			uint8_t kind = i.node->kind;
			int rc = release_staged(fs, &i, &d);

			ptfs_refused_ino(fs, &i, rc, &d);
			if (i.node->kind != kind)
				drop = true;	/* a new python value */
			if ((rc || i.node->kind != kind) && drop)
				ptfs_inval_inode(fs, ino);
			if (rc)
				ptfs_reply_err(NULL, rc, &d);	/* just log */
			if (drop)
				ovl_texts_drop(fs->ovl);
		}
		ptfs_unlock(fs);
	}
	fuse_reply_err(req, 0);
}

void ptfs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	sync_common(req, ino, false);
}

/*
 * setfattr -n user.key: rename @n within its directory to the key whose
 * escaped name is @value (docs/names.md) -- the way to give an entry a
 * key longer than a file name may be.  Not over an existing entry (mv
 * onto its name does that).  The kernel's cached entries for the old and
 * new names (and their views) are dropped.
 */
/* The names the kernel knows @n by: its entry's (@names[0]) and its
 * views' key (@names[1]), each CKPT_NAME_MAX + 1 bytes. */
static void known_names(const struct ckpt_node *n,
			char (*names)[CKPT_NAME_MAX + 1])
{
	char buf[CKPT_NAME_MAX + 1];

	snprintf(names[0], CKPT_NAME_MAX + 1, "%s",
		 ptfs_shown_name(n, n->index, CKPT_NAME_MAX, buf));
	snprintf(names[1], CKPT_NAME_MAX + 1, "%s",
		 ptfs_shown_name(n, n->index, PTFS_VIEW_KEY_MAX, buf));
}

static int set_key(struct ptfs *fs, struct ckpt_node *n, const char *value,
		   size_t size, struct diag *d)
{
	char names[2][2][CKPT_NAME_MAX + 1], *key;
	struct ckpt_node *dir = n->parent;
	fuse_ino_t pino;
	int rc;

	if (!dir)
		return diag_errno(d, -EPERM, "user.key: the root has no key");
	if (n->dead)
		return diag_errno(d, -ENOENT, "user.key: the entry was "
				  "removed");
	if (size > OVL_MAX_KEY || memchr(value, 0, size))
		return diag_errno(d, -EINVAL, "user.key: not a key name (a NUL "
				  "byte, or over 64 KiB; docs/names.md)");
	key = strndup(value, size);
	if (!key)
		return diag_nomem(d);
	if (ckpt_node_child(dir, key)) {
		free(key);
		return diag_errno(d, -EEXIST, "user.key: another entry has that "
				  "key (mv onto its name replaces it)");
	}
	known_names(n, names[0]);
	rc = ovl_rename(fs->ovl, dir, n->name, dir, key, true, d);
	free(key);
	if (rc)
		return rc;
	known_names(n, names[1]);
	pino = ptfs_ino_of(fs, dir);
	for (int i = 0; i < 2; i++) {	/* before and after */
		char e[CKPT_NAME_MAX + 5];

		ptfs_inval_entry(fs, pino, names[i][0]);
		snprintf(e, sizeof(e), "%s.npy", names[i][1]);
		ptfs_inval_entry(fs, pino, e);
		snprintf(e, sizeof(e), "%s.txt", names[i][1]);
		ptfs_inval_entry(fs, pino, e);
	}
	return 0;
}

/*
 * setxattr (@value) and removexattr (@value NULL) of @name: user.meta.KEY
 * of the root (a metadata entry set or removed), user.key (a rename),
 * the rest the overlay's (user.dtype converts; only new files take
 * others).
 */
static void xattr_edit(fuse_req_t req, fuse_ino_t ino, const char *name,
		       const char *value, size_t size)
{
	struct ptfs *fs = ptfs_fs(req);
	bool meta = !strncmp(name, "user.meta.", 10);
	struct ptfs_ino i;
	struct diag d;
	int rc;

	if (strncmp(name, "user.", 5))
		return ptfs_reply_err(req, -EOPNOTSUPP, NULL);
	if (fs->readonly || !fs->ovl)
		return ptfs_reply_err(req, -EROFS, NULL);
	diag_init(&d, fs->c->path);
	if ((rc = ptfs_edit_lock(fs, &d))) {
		ptfs_unlock(fs);
		return ptfs_reply_err(req, rc, &d);
	}
	rc = ptfs_ino_get(fs, ino, &i) ? -ENOENT :
	     !value ? (!i.node ? -EPERM :
		       ovl_removexattr(fs->ovl, i.node, name, &d)) :
	     i.kind == PTFS_ROOT && i.node && meta ?
	     ovl_setxattr(fs->ovl, i.node, name, value, size, &d) :
	     i.kind != PTFS_NODE ? -EPERM :
	     !strcmp(name, "user.key") ? set_key(fs, i.node, value, size, &d) :
	     ovl_setxattr(fs->ovl, i.node, name, value, size, &d);
	if (rc != -ENOENT)
		ptfs_refused_ino(fs, &i, rc, &d);
	/* user.dtype may have converted a storage: every file viewing it
	   has new bytes and a new size (the overlay told ptfs_inval.c) */
	if (!rc && !strcmp(name, "user.dtype"))
		ovl_texts_drop(fs->ovl);
	ptfs_unlock(fs);
	ptfs_inval_wait(fs);
	ptfs_reply_err(req, rc, &d);
}

void ptfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	xattr_edit(req, ino, name, NULL, 0);
}

void ptfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	(void)flags;
	xattr_edit(req, ino, name, value ? value : "", size);
}
