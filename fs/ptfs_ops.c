/*
 * ptfs_ops.c - the FUSE low-level operations (libfuse 3.14) over the
 * inode table of ptfs_ino.c, and the table that names them all.  This file
 * holds the operations that only look: lookup, attributes, directories,
 * open, extended attributes; reads are in ptfs_read.c, edits in
 * ptfs_edit.c, and the page-cache invalidation they trigger in
 * ptfs_inval.c.  Errors leave through ptfs_reply_err(), in one place.
 */
#include "ptfs.h"

#include "diag/diag.h"
#include "view/view.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int ptfs_errno(int rc, const struct diag *d)
{
	char line[512];

	assert(rc <= 0);
	if (d && d->err)
		fuse_log(FUSE_LOG_ERR, "ptfs: %s\n",
			 diag_line(d, line, sizeof(line)));
	return -rc == EILSEQ ? EIO : -rc;
}

/* The one place errors leave. */
void ptfs_reply_err(fuse_req_t req, int rc, const struct diag *d)
{
	rc = ptfs_errno(rc, d);
	if (req)
		fuse_reply_err(req, rc);
}

/* Text views are re-rendered after every edit: the kernel must ask for
 * their size each time rather than cache it. */
double ptfs_attr_timeout(const struct ptfs *fs, fuse_ino_t ino)
{
	struct ptfs_ino i;

	if (!ptfs_ino_get(fs, ino, &i) && i.kind == PTFS_VIEW &&
	    i.view == CKPT_V_TXT)
		return 0;
	return fs->timeout;
}

void ptfs_fill_entry(struct ptfs *fs, fuse_ino_t ino,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = ino ? ptfs_attr_timeout(fs, ino) : fs->timeout;
	e->entry_timeout = fs->timeout;
	if (ino)
		ptfs_stat_entry(fs, ino, &e->attr);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ptfs *fs = userdata;

	/* skipping OPEN only pays off where nothing is opened for writing */
	fs->no_open = fs->readonly &&
		      (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
	ptfs_tune_conn(conn);
	conn->time_gran = 1;
	/* nothing changes behind the kernel's back: it sees every edit, and
	   views of an edited storage are invalidated explicitly */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want |= conn->capable & FUSE_CAP_ATOMIC_O_TRUNC;
}

/* fusermount3 -u: write back what nobody committed (logged on failure). */
static void op_destroy(void *userdata)
{
	struct ptfs *fs = userdata;
	struct diag d;
	char line[512];

	if (!fs->ovl || fs->readonly || ovl_committed(fs->ovl))
		return;
	diag_init(&d, fs->c->path);
	if (ptfs_commit(fs, &d) < 0) {
		fuse_log(FUSE_LOG_ERR, "ptfs: write-back failed, the edits stay "
			 "staged in %s: %s\n", ovl_dir(fs->ovl),
			 diag_line(&d, line, sizeof(line)));
		fs->commit_failed = true;
	}
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ptfs *fs = ptfs_fs(req);
	struct fuse_entry_param e;
	struct diag d;
	int rc;

	diag_init(&d, fs->c->path);
	if ((rc = ptfs_as_ready(fs, parent, &d)))
		return ptfs_reply_err(req, rc, &d);
	ptfs_rdlock(fs);
	/* ino 0 with a timeout: the kernel caches the miss too */
	ptfs_fill_entry(fs, ptfs_lookup(fs, parent, name), &e);
	ptfs_unlock(fs);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ptfs *fs = ptfs_fs(req);
	struct stat st;
	struct diag d;
	double tmo;
	int rc;

	(void)fi;
	diag_init(&d, fs->c->path);
	if ((rc = ptfs_as_ready(fs, ino, &d)))
		return ptfs_reply_err(req, rc, &d);
	ptfs_rdlock(fs);
	rc = ptfs_stat(fs, ino, &st);
	if (rc == -EAGAIN) {	/* a row's text view: make it a node */
		ptfs_unlock(fs);
		rc = ptfs_ino_real(fs, ino, &d);
		ptfs_rdlock(fs);
		if (!rc)
			rc = ptfs_stat(fs, ino, &st);
	}
	/* under the lock: an edit may grow (move) the node table */
	tmo = ptfs_attr_timeout(fs, ino);
	ptfs_unlock(fs);
	if (rc)
		ptfs_reply_err(req, rc, &d);
	else
		fuse_reply_attr(req, &st, tmo);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ptfs *fs = ptfs_fs(req);
	struct ptfs_ino i;
	char *to = NULL;
	int rc;

	ptfs_rdlock(fs);
	rc = ptfs_ino_get(fs, ino, &i) || i.kind != PTFS_NODE ||
	     i.node->kind != CKPT_N_LINK ? -EINVAL : 0;
	if (!rc && !(to = ptfs_link_target(i.node)))
		rc = -ENOMEM;
	ptfs_unlock(fs);
	if (rc)
		return ptfs_reply_err(req, rc, NULL);
	fuse_reply_readlink(req, to);
	free(to);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ptfs *fs = ptfs_fs(req);
	struct diag d;
	bool dir;
	int rc;

	diag_init(&d, fs->c->path);
	if ((rc = ptfs_as_ready(fs, ino, &d)))
		return ptfs_reply_err(req, rc, &d);
	ptfs_rdlock(fs);
	dir = ptfs_ino_is_dir(fs, ino);
	ptfs_unlock(fs);
	if (!dir)
		return ptfs_reply_err(req, -ENOTDIR, NULL);
	/* listings change with edits: cache them only when nothing can */
	fi->cache_readdir = fs->readonly;
	fi->keep_cache = fs->readonly;
	fuse_reply_open(req, fi);
}

/*
 * A reply's entries at most: the kernel asks for 1 MiB at a time, and a
 * buffer that size is a mapping of its own, filled and dropped per
 * request; with a few listings at once that was the mount's peak memory
 * (docs/design.md, "Memory per tensor").  A shorter reply only means the
 * kernel asks again from where it stopped: about 400 entries each.
 */
#define READDIR_MAX	(64u << 10)

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, bool plus)
{
	struct ptfs *fs = ptfs_fs(req);
	char *buf, made[PTFS_NAME_BUF];
	size_t len = 0;

	if (size > READDIR_MAX)
		size = READDIR_MAX;
	if (ptfs_as_ino(ino)) {
		struct diag d;
		int rc;

		diag_init(&d, fs->c->path);
		if ((rc = ptfs_as_ready(fs, ino, &d)))
			return ptfs_reply_err(req, rc, &d);
	}
	buf = malloc(size);
	if (!buf)
		return ptfs_reply_err(req, -ENOMEM, NULL);
	ptfs_rdlock(fs);
	for (uint64_t i = off; ; i++) {
		struct fuse_entry_param e;
		const char *name;
		fuse_ino_t child;
		size_t n;

		if (i < 2) {
			name = i ? ".." : ".";
			child = ino;
		} else {
			int r = ptfs_dirent(fs, ino, i - 2, &name, &child,
					    made);

			if (r < 0)
				continue;
			if (!r)
				break;
		}
		ptfs_fill_entry(fs, child, &e);
		if (plus)
			n = fuse_add_direntry_plus(req, buf + len, size - len,
						   name, &e, i + 1);
		else
			n = fuse_add_direntry(req, buf + len, size - len,
					      name, &e.attr, i + 1);
		if (n > size - len)
			break;
		len += n;
	}
	ptfs_unlock(fs);
	fuse_reply_buf(req, buf, len);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, true);
}

/* Can @i be opened for writing, and if not, why not? */
static int write_errno(const struct ptfs *fs, const struct ptfs_ino *i)
{
	if (fs->readonly || (fs->ovl && ovl_committed(fs->ovl)))
		return -EROFS;
	switch (i->kind) {
	case PTFS_NODE:
		if (i->node->kind == CKPT_N_TENSOR)
			return 0;
		if (i->node->kind == CKPT_N_VALUE &&
		    ckpt_value_editable(i->node))
			return 0;
		return -EACCES;
	case PTFS_ROOT:
		return -EISDIR;
	case PTFS_CTL:
		return ptfs_ctl_files[i->ctl].writable ? 0 : -EACCES;
	case PTFS_METAV:
		return ptfs_meta_writable(fs) ? 0 : -EPERM;
	case PTFS_STORAGE:
	case PTFS_VIEW:
		return 0;
	default:
		return -EPERM;	/* .ptfs/ records: the archive's plumbing */
	}
}

/*
 * Zero-message opens on read-only mounts: ENOSYS to an open tells the
 * kernel (with FUSE_CAP_NO_OPEN_SUPPORT) to stop sending OPEN and RELEASE
 * for files and to keep their page cache, which saves two round trips per
 * open.  Writable mounts need OPEN (and FLUSH) to see each close().
 */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ptfs *fs = ptfs_fs(req);
	struct ptfs_ino i;
	struct stat st;
	struct diag d;
	int rc;

	diag_init(&d, fs->c->path);
	if ((rc = ptfs_as_ready(fs, ino, &d)))
		return ptfs_reply_err(req, rc, &d);
	/* a reader's open changes nothing (.ptfs/as/ need not be made
	   again) */
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
		ptfs_wrlock(fs);
	else
		ptfs_wrlock_keep(fs);
	/* the mode is all it needs: a text view is not measured here */
	rc = ptfs_stat_entry(fs, ino, &st) || ptfs_ino_get(fs, ino, &i) ?
	     -ENOENT :
	     S_ISDIR(st.st_mode) ? -EISDIR : 0;
	/* what is opened is kept: a row becomes a node (ptfs_ino_real()) */
	if (!rc && i.row && !(rc = ckpt_row_materialize(fs->c, i.row, &d)) &&
	    ptfs_ino_get(fs, ino, &i))
		rc = -ENOENT;
	if (!rc && (fi->flags & O_ACCMODE) != O_RDONLY)
		rc = write_errno(fs, &i);
	/* a writer's count lives in the node's open-file state */
	if (!rc && (fi->flags & O_ACCMODE) != O_RDONLY &&
	    (i.kind == PTFS_NODE || i.kind == PTFS_VIEW) &&
	    !ckpt_node_ed(fs->c, i.node))
		rc = -ENOMEM;
	if (!rc && (fi->flags & O_TRUNC) && i.kind == PTFS_NODE)
		rc = ovl_truncate(fs->ovl, i.node, 0, &d);
	if (!rc && (fi->flags & O_TRUNC) && i.kind == PTFS_VIEW)
		rc = ovl_view_truncate(fs->ovl, i.node, i.view, 0, &d);
	if (rc && rc != -ENOENT)
		ptfs_refused_ino(fs, &i, rc, &d);	/* (echo 9 > v) */
	if (!rc && (fi->flags & O_TRUNC))
		ovl_texts_drop(fs->ovl);
	/* a writer: its close() applies what it wrote, and the last
	   writer's release what is still pending (ptfs_edit.c) */
	if (!rc && (fi->flags & O_ACCMODE) != O_RDONLY &&
	    (i.kind == PTFS_NODE || i.kind == PTFS_VIEW ||
	     i.kind == PTFS_STORAGE)) {
		if (i.kind != PTFS_STORAGE)
			i.node->ed->wopen++;
		fi->fh = PTFS_FH_WRITER;
	}
	ptfs_unlock(fs);
	if (rc)
		return ptfs_reply_err(req, rc, &d);
	/* a text view too large to render (EFBIG) fails here, where cat
	   sees it, rather than reading as an empty file */
	if (i.kind == PTFS_VIEW && i.view == CKPT_V_TXT &&
	    (fi->flags & O_ACCMODE) == O_RDONLY) {
		ptfs_rdlock(fs);
		rc = ovl_view_staged(i.node, NULL, NULL) ? 0 :
		     ovl_text_check(fs->ovl, i.node, &d);
		ptfs_unlock(fs);
		if (rc)
			return ptfs_reply_err(req, rc, &d);
	}
	if (fs->no_open)
		return ptfs_reply_err(req, -ENOSYS, NULL);
	/* the control files and files being rewritten change under us; a
	   text view is formatted anew after every edit */
	fi->keep_cache = i.kind != PTFS_CTL &&
			 !(i.kind == PTFS_VIEW && i.view == CKPT_V_TXT);
	fi->direct_io = i.kind == PTFS_CTL || i.kind == PTFS_METAV;
	fi->keep_cache = fi->keep_cache && i.kind != PTFS_METAV;
	if (i.kind == PTFS_CTL && (rc = ptfs_ctl_open(fs, i.ctl, fi)))
		return ptfs_reply_err(req, rc, NULL);
	if (i.kind == PTFS_METAV && (rc = ptfs_meta_open(fs, i.index, fi)))
		return ptfs_reply_err(req, rc, NULL);
	if (i.kind == PTFS_ASFILE) {
		ptfs_wrlock_keep(fs);
		rc = ptfs_ino_get(fs, ino, &i) || i.kind != PTFS_ASFILE ?
		     -ENOENT : ptfs_as_open(fs, i.index, fi);
		ptfs_unlock(fs);
		if (rc)
			return ptfs_reply_err(req, rc, NULL);
	}
	fuse_reply_open(req, fi);
}

/* getxattr: the one attribute asked for, found by walking them all */
struct xattr_find {
	const char *name;
	char *value;		/* a copy, once found */
	int err;
};

static int xattr_find(const char *name, const char *value, void *arg)
{
	struct xattr_find *f = arg;

	if (strcmp(name, f->name))
		return 0;
	f->value = strdup(value);
	f->err = f->value ? 0 : -ENOMEM;
	return 1;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct ptfs *fs = ptfs_fs(req);
	struct xattr_find f = { name, NULL, -ENODATA };
	size_t vlen;
	int rc;

	/*
	 * Only user.* exists.  EOPNOTSUPP (not ENODATA) for the rest makes
	 * ls -l stop asking every file for security.selinux and ACLs: that
	 * was two round trips per file and 4x fuse-zip's time for ls -lR.
	 */
	if (strncmp(name, "user.", 5))
		return ptfs_reply_err(req, -EOPNOTSUPP, NULL);
	ptfs_rdlock(fs);
	rc = ptfs_xattr_each(fs, ino, xattr_find, &f);
	ptfs_unlock(fs);
	if (rc < 0 || f.err)
		return ptfs_reply_err(req, rc < 0 ? rc : f.err, NULL);
	vlen = strlen(f.value);
	if (!size)
		fuse_reply_xattr(req, vlen);
	else if (size < vlen)
		ptfs_reply_err(req, -ERANGE, NULL);
	else
		fuse_reply_buf(req, f.value, vlen);
	free(f.value);
}

/* listxattr: the names, in a buffer that grows with them */
struct xattr_names {
	char *p;
	size_t len, cap;
};

static int xattr_name(const char *name, const char *value, void *arg)
{
	struct xattr_names *x = arg;
	size_t n = strlen(name) + 1;

	(void)value;
	if (x->len + n > x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 1024;
		char *p;

		while (cap < x->len + n)
			cap *= 2;
		p = realloc(x->p, cap);
		if (!p)
			return -ENOMEM;
		x->p = p;
		x->cap = cap;
	}
	memcpy(x->p + x->len, name, n);
	x->len += n;
	return 0;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ptfs *fs = ptfs_fs(req);
	struct xattr_names x = { NULL, 0, 0 };
	int rc;

	ptfs_rdlock(fs);
	rc = ptfs_xattr_each(fs, ino, xattr_name, &x);
	ptfs_unlock(fs);
	if (rc < 0)
		ptfs_reply_err(req, rc, NULL);
	else if (!size)
		fuse_reply_xattr(req, x.len);
	else if (size < x.len)
		ptfs_reply_err(req, -ERANGE, NULL);
	else
		fuse_reply_buf(req, x.p, x.len);
	free(x.p);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ptfs *fs = ptfs_fs(req);
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_blocks = (fs->st.st_size + 4095) / 4096;
	sv.f_files = fs->c->nnodes + 3 + fs->nstor + fs->nrecs;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	(void)ino;
	(void)newparent;
	(void)newname;
	ptfs_reply_err(req, -EPERM, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	(void)link;
	(void)parent;
	(void)name;
	ptfs_reply_err(req, -EPERM, NULL);
}

const struct fuse_lowlevel_ops ptfs_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = ptfs_op_setattr,
	.readlink = op_readlink,
	.mknod = ptfs_op_mknod,
	.mkdir = ptfs_op_mkdir,
	.unlink = ptfs_op_unlink,
	.rmdir = ptfs_op_rmdir,
	.symlink = op_symlink,
	.rename = ptfs_op_rename,
	.link = op_link,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.open = op_open,
	.read = ptfs_op_read,
	.write = ptfs_op_write,
	.flush = ptfs_op_flush,
	.release = ptfs_op_release,
	.fsync = ptfs_op_fsync,
	.create = ptfs_op_create,
	.getxattr = op_getxattr,
	.setxattr = ptfs_op_setxattr,
	.listxattr = op_listxattr,
	.removexattr = ptfs_op_removexattr,
	.statfs = op_statfs,
};
