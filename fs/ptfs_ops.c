/*
 * ptfs_ops.c - the FUSE low-level operations (libfuse 3.14) over the
 * inode table of ptfs_ino.c.  Reads of contiguous tensors, storages and
 * records are replied with fd-backed buffers, so libfuse splices the
 * checkpoint's pages straight to the kernel; strided views are gathered by
 * the core.  Files keep the kernel page cache (keep_cache, no direct_io),
 * so mmap works and a second read costs no request at all.
 */
#include "ptfs.h"

#include "diag/diag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct ptfs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The one place errors leave: positive errno, corrupt input as EIO. */
static void reply_err(fuse_req_t req, int rc, const struct diag *d)
{
	char line[512];

	if (d && d->err)
		fuse_log(FUSE_LOG_ERR, "ptfs: %s\n",
			 diag_line(d, line, sizeof(line)));
	rc = rc < 0 ? -rc : rc;
	fuse_reply_err(req, rc == EILSEQ ? EIO : rc);
}

static void fill_entry(const struct ptfs *fs, fuse_ino_t ino,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = fs->timeout;
	e->entry_timeout = fs->timeout;
	if (ino)
		ptfs_stat(fs, ino, &e->attr);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ptfs *fs = userdata;

	fs->no_open = conn->capable & FUSE_CAP_NO_OPEN_SUPPORT;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (conn->capable & FUSE_CAP_SPLICE_MOVE)
		conn->want |= FUSE_CAP_SPLICE_MOVE;
	/*
	 * Requests of 252 pages (1008 KiB; max_write also sets the kernel's
	 * max_pages).  Not 256: libfuse 3.14 splices a reply only through a
	 * pipe of data + 16-byte header + 3 pages, which must fit
	 * pipe-max-size (1 MiB; F_SETPIPE_SZ beyond it is refused here even as
	 * root).  A bigger reply falls back to malloc + pread + writev, at
	 * half the throughput.
	 */
	conn->max_write = PTFS_REQUEST;
	conn->max_readahead = PTFS_REQUEST;
	conn->time_gran = 1;
	/* nothing under the mount ever changes behind the kernel's back */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ptfs *fs = fs_of(req);
	struct fuse_entry_param e;

	/* ino 0 with a timeout: the kernel caches the miss too */
	fill_entry(fs, ptfs_lookup(fs, parent, name), &e);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	struct stat st;
	int rc = ptfs_stat(fs, ino, &st);

	(void)fi;
	if (rc)
		reply_err(req, rc, NULL);
	else
		fuse_reply_attr(req, &st, fs->timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ptfs_ino i;
	char *to;

	if (ptfs_ino_get(fs_of(req), ino, &i) || i.kind != PTFS_NODE ||
	    i.node->kind != CKPT_N_LINK)
		return reply_err(req, EINVAL, NULL);
	to = ptfs_link_target(i.node);
	if (!to)
		return reply_err(req, ENOMEM, NULL);
	fuse_reply_readlink(req, to);
	free(to);
}

static bool is_dir(const struct ptfs *fs, fuse_ino_t ino)
{
	struct stat st;

	return !ptfs_stat(fs, ino, &st) && S_ISDIR(st.st_mode);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	if (!is_dir(fs_of(req), ino))
		return reply_err(req, ENOTDIR, NULL);
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, bool plus)
{
	struct ptfs *fs = fs_of(req);
	char *buf = malloc(size);
	size_t len = 0;

	if (!buf)
		return reply_err(req, ENOMEM, NULL);
	for (uint64_t i = off; ; i++) {
		struct fuse_entry_param e;
		const char *name;
		fuse_ino_t child;
		size_t n;

		if (i < 2) {
			name = i ? ".." : ".";
			child = ino;
		} else if (!ptfs_dirent(fs, ino, i - 2, &name, &child)) {
			break;
		}
		fill_entry(fs, child, &e);
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

/*
 * Zero-message opens: ENOSYS to a read-only open tells the kernel (with
 * FUSE_CAP_NO_OPEN_SUPPORT) to stop sending OPEN and RELEASE for files and
 * to keep their page cache, which saves two round trips per open.  The
 * mount is read-only, so the kernel refuses writable opens before us.
 */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	struct stat st;

	if (ptfs_stat(fs, ino, &st))
		return reply_err(req, ENOENT, NULL);
	if (S_ISDIR(st.st_mode))
		return reply_err(req, EISDIR, NULL);
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return reply_err(req, EROFS, NULL);
	if (fs->no_open)
		return reply_err(req, ENOSYS, NULL);
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* Reply @size bytes of the checkpoint file at @pos, spliced. */
static void reply_fd(fuse_req_t req, const struct ptfs *fs, uint64_t pos,
		     size_t size)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
	bv.buf[0].fd = fs->c->fd;
	bv.buf[0].pos = pos;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

static size_t clip(uint64_t total, off_t off, size_t size)
{
	if ((uint64_t)off >= total)
		return 0;
	return total - off < size ? total - off : size;
}

static void read_tensor(fuse_req_t req, struct ptfs *fs,
			const struct ckpt_tensor *t, size_t size, off_t off)
{
	struct diag d;
	long long n;
	char *buf;

	diag_init(&d, fs->c->path);
	size = clip(ckpt_tensor_size(t), off, size);
	if (!size)
		return (void)fuse_reply_buf(req, NULL, 0);
	if (t->contiguous && t->storage && t->storage->rec &&
	    t->storage->rec->method == PTZ_STORED) {
		n = ckpt_storage_locate(fs->c, t->storage, &d);
		if (n)
			return reply_err(req, n, &d);
		return reply_fd(req, fs, t->storage->data_off +
				t->offset * t->dtype->size + off, size);
	}
	buf = malloc(size);
	if (!buf)
		return reply_err(req, ENOMEM, NULL);
	n = ckpt_tensor_read(fs->c, t, buf, size, off, &d);
	if (n < 0)
		reply_err(req, n, &d);
	else
		fuse_reply_buf(req, buf, n);
	free(buf);
}

static void read_text(fuse_req_t req, const struct ckpt_node *n, size_t size,
		      off_t off)
{
	uint64_t total = ptfs_text_size(n);

	size = clip(total, off, size);
	if (!size)
		return (void)fuse_reply_buf(req, NULL, 0);
	if ((uint64_t)off + size <= n->textlen)
		return (void)fuse_reply_buf(req, n->text + off, size);
	{
		char *buf = malloc(size);

		if (!buf)
			return reply_err(req, ENOMEM, NULL);
		memcpy(buf, n->text + off, size - 1);
		buf[size - 1] = '\n';	/* the newline after the text */
		fuse_reply_buf(req, buf, size);
		free(buf);
	}
}

static void read_record(fuse_req_t req, struct ptfs *fs,
			const struct ptfs_rec *r, size_t size, off_t off)
{
	struct diag d;
	unsigned char *data;
	size_t len;
	int rc;

	diag_init(&d, fs->c->path);
	size = clip(r->size, off, size);
	if (!size)
		return (void)fuse_reply_buf(req, NULL, 0);
	if (!r->e)
		return reply_fd(req, fs, r->off + off, size);
	rc = ckpt_record_locate(fs->c, r->e, &d);
	if (rc)
		return reply_err(req, rc, &d);
	if (r->e->method == PTZ_STORED)
		return reply_fd(req, fs, r->e->data_off + off, size);
	rc = ptz_entry_read(&fs->c->zip, r->e, 1 << 26, &data, &len, &d);
	if (rc)
		return reply_err(req, rc, &d);
	fuse_reply_buf(req, (char *)data + off, clip(len, off, size));
	free(data);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	struct ptfs_ino i;
	struct diag d;
	int rc;

	(void)fi;
	if (ptfs_ino_get(fs, ino, &i))
		return reply_err(req, ENOENT, NULL);
	switch (i.kind) {
	case PTFS_ROOT:
	case PTFS_NODE:
		if (i.node->kind == CKPT_N_TENSOR)
			return read_tensor(req, fs, i.node->tensor, size, off);
		if (i.node->kind == CKPT_N_VALUE || i.node->kind == CKPT_N_OPAQUE)
			return read_text(req, i.node, size, off);
		return reply_err(req, EISDIR, NULL);
	case PTFS_STORAGE:
		diag_init(&d, fs->c->path);
		size = clip(i.storage->nbytes, off, size);
		if (!size)
			return (void)fuse_reply_buf(req, NULL, 0);
		if (i.storage->rec && i.storage->rec->method != PTZ_STORED)
			return reply_err(req, ENOTSUP, NULL);
		rc = ckpt_storage_locate(fs->c, i.storage, &d);
		if (rc)
			return reply_err(req, rc, &d);
		return reply_fd(req, fs, i.storage->data_off + off, size);
	case PTFS_RECORD:
		return read_record(req, fs, &fs->recs[i.index], size, off);
	default:
		return reply_err(req, EISDIR, NULL);
	}
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	char buf[8192];
	long len;

	/*
	 * Only user.* exists.  EOPNOTSUPP (not ENODATA) for the rest makes
	 * ls -l stop asking every file for security.selinux and ACLs: that
	 * was two round trips per file and 4x fuse-zip's time for ls -lR.
	 */
	if (strncmp(name, "user.", 5))
		return reply_err(req, EOPNOTSUPP, NULL);
	len = ptfs_xattrs(fs_of(req), ino, buf, sizeof(buf));
	if (len < 0)
		return reply_err(req, len, NULL);
	for (long p = 0; p < len;) {
		const char *k = buf + p, *v = k + strlen(k) + 1;
		size_t vlen = strlen(v);

		p = v + vlen + 1 - buf;
		if (strcmp(k, name))
			continue;
		if (!size)
			return (void)fuse_reply_xattr(req, vlen);
		if (size < vlen)
			return reply_err(req, ERANGE, NULL);
		return (void)fuse_reply_buf(req, v, vlen);
	}
	reply_err(req, ENODATA, NULL);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char buf[8192], names[4096];
	long len = ptfs_xattrs(fs_of(req), ino, buf, sizeof(buf));
	size_t n = 0;

	if (len < 0)
		return reply_err(req, len, NULL);
	for (long p = 0; p < len;) {
		const char *k = buf + p;
		size_t klen = strlen(k) + 1;

		memcpy(names + n, k, klen);
		n += klen;
		p += klen + strlen(buf + p + klen) + 1;
	}
	if (!size)
		return (void)fuse_reply_xattr(req, n);
	if (size < n)
		return reply_err(req, ERANGE, NULL);
	fuse_reply_buf(req, names, n);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ptfs *fs = fs_of(req);
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_blocks = (fs->st.st_size + 4095) / 4096;
	sv.f_files = fs->plumb + 2 + fs->c->nstorages + fs->nrecs;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

const struct fuse_lowlevel_ops ptfs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.open = op_open,
	.read = op_read,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.statfs = op_statfs,
};
