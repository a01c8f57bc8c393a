/*
 * ptfs_read.c - FUSE read requests.  Reads of contiguous tensors, storages
 * and records are replied with fd-backed buffers, so libfuse splices the
 * checkpoint's pages straight to the kernel; strided views are gathered by
 * the core.  Files keep the kernel page cache (keep_cache, no direct_io),
 * so mmap works and a second read costs no request at all.
 */
#include "ptfs.h"

#include "ckpt/ckpt_ident.h"

#include "diag/diag.h"
#include "view/view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Reply @size bytes of file @fd at @pos, spliced. */
static void reply_fd(fuse_req_t req, int fd, uint64_t pos, size_t size)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
	bv.buf[0].fd = fd;
	bv.buf[0].pos = pos;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

static size_t clip(uint64_t total, off_t off, size_t size)
{
	if ((uint64_t)off >= total)
		return 0;
	return total - off < size ? total - off : size;
}

/* Anything the overlay serves: staged, new or edited files. */
static void read_ovl(fuse_req_t req, struct ptfs *fs, struct ckpt_node *n,
		     size_t size, off_t off)
{
	struct diag d;
	long long got;
	char *buf;

	size = clip(ovl_size(fs->ovl, n), off, size);
	if (!size)
		return (void)fuse_reply_buf(req, NULL, 0);
	buf = malloc(size);
	if (!buf)
		return ptfs_reply_err(req, -ENOMEM, NULL);
	diag_init(&d, fs->c->path);
	got = ovl_read(fs->ovl, n, buf, size, off, &d);
	if (got < 0)
		ptfs_reply_err(req, got, &d);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
}

static void read_tensor(fuse_req_t req, struct ptfs *fs,
			const struct ckpt_tensor *t, size_t size, off_t off)
{
	struct diag d;
	uint64_t base;
	long long n;
	char *buf;
	int fd;

	diag_init(&d, fs->c->path);
	size = clip(ckpt_tensor_size(t), off, size);
	if (!size)
		return (void)fuse_reply_buf(req, NULL, 0);
	if (t->contiguous && t->storage) {
		n = ckpt_storage_data(fs->c, t->storage, &fd, &base, &d);
		if (n)
			return ptfs_reply_err(req, n, &d);
		return reply_fd(req, fd, base + t->offset * t->dtype->size +
				off, size);
	}
	buf = malloc(size);
	if (!buf)
		return ptfs_reply_err(req, -ENOMEM, NULL);
	n = ckpt_tensor_read(fs->c, t, buf, size, off, &d);
	if (n < 0)
		ptfs_reply_err(req, n, &d);
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
			return ptfs_reply_err(req, -ENOMEM, NULL);
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
		return reply_fd(req, fs->c->fd, r->off + off, size);
	rc = ckpt_record_locate(fs->c, r->e, &d);
	if (rc)
		return ptfs_reply_err(req, rc, &d);
	if (r->e->method == PTZ_STORED)
		return reply_fd(req, fs->c->fd, r->e->data_off + off, size);
	rc = ptz_entry_read(&fs->c->zip, r->e, 1 << 26, &data, &len, &d);
	if (rc)
		return ptfs_reply_err(req, rc, &d);
	fuse_reply_buf(req, (char *)data + off, clip(len, off, size));
	free(data);
}

static void read_storage(fuse_req_t req, struct ptfs *fs,
			 struct ckpt_storage *s, size_t size, off_t off)
{
	struct diag d;
	uint64_t base;
	int fd, rc;

	diag_init(&d, fs->c->path);
	size = clip(s->nbytes, off, size);
	if (!size)
		return (void)fuse_reply_buf(req, NULL, 0);
	rc = ckpt_storage_data(fs->c, s, &fd, &base, &d);
	if (rc)
		return ptfs_reply_err(req, rc, &d);
	reply_fd(req, fd, base + off, size);
}

/*
 * KEY.npy: the header from memory, the data part exactly as KEY's own
 * reads (spliced from the checkpoint when it can be).  KEY.txt: the
 * chunks the request covers, formatted now (ptfs_view.c).  A view being
 * written: what was written so far.
 */
static void read_view(fuse_req_t req, struct ptfs *fs, struct ckpt_node *n,
		      int view, size_t size, off_t off)
{
	unsigned char h[VIEW_NPY_HEADER_MAX];
	struct diag d;
	uint64_t hl, total;
	long long got;
	char *buf;

	diag_init(&d, fs->c->path);
	if (view == CKPT_V_TXT && !n->vstage) {
		buf = malloc(size ? size : 1);
		if (!buf)
			return ptfs_reply_err(req, -ENOMEM, NULL);
		got = ptfs_text_read(fs, n, buf, size, off, &d);
		if (got < 0)
			ptfs_reply_err(req, got, &d);
		else
			fuse_reply_buf(req, buf, got);
		free(buf);
		return;
	}
	if (view == CKPT_V_NPY && !n->vstage && !n->pending &&
	    (uint64_t)off >= (hl = ovl_npy_header(fs->ovl, n, h)) &&
	    !n->stage && !n->tensor->fresh)
		return read_tensor(req, fs, n->tensor, size, off - hl);
	total = view == CKPT_V_NPY ? ovl_npy_size(fs->ovl, n) :
		n->vstage->len;
	size = clip(total, off, size);
	if (!size)
		return (void)fuse_reply_buf(req, NULL, 0);
	buf = malloc(size);
	if (!buf)
		return ptfs_reply_err(req, -ENOMEM, NULL);
	if (view == CKPT_V_NPY)
		got = ovl_npy_read(fs->ovl, n, buf, size, off, &d);
	else
		got = pread(n->vstage->scratch->fd, buf, size, off) < 0 ?
		      diag_errno(&d, -errno, "read: %s", strerror(errno)) :
		      (long long)size;
	if (got < 0)
		ptfs_reply_err(req, got, &d);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
}

/* Do the bytes of @i come from the checkpoint file (or were made from
 * it: inflated copies, rendered text)?  Staged ones come from the
 * overlay, values from memory. */
static bool from_checkpoint(const struct ptfs_ino *i)
{
	switch (i->kind) {
	case PTFS_ROOT:
	case PTFS_NODE:
		return i->node->kind == CKPT_N_TENSOR && !i->node->stage &&
		       !i->node->tensor->fresh;
	case PTFS_STORAGE:
	case PTFS_RECORD:
	case PTFS_VIEW:
		return true;
	default:
		return false;
	}
}

int ptfs_fresh(struct ptfs *fs, struct diag *d)
{
	int rc = ckpt_ident_check(fs->c->fd, &fs->ident, d);

	/* logged once: the first failing read names the file and why */
	if (rc && __atomic_exchange_n(&fs->stale_logged, true,
				      __ATOMIC_RELAXED))
		diag_init(d, fs->c->path);
	return rc;
}

void ptfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ptfs *fs = ptfs_fs(req);
	struct ckpt_node *n;
	struct ptfs_ino i;
	struct diag d;
	int rc;

	/* .ptfs/progress is read while write-back holds the lock (its
	   inode number depends on nothing an edit changes) */
	if (ino == ptfs_ctl_ino(fs, PTFS_CTL_PROGRESS) && fs->ovl &&
	    !fs->readonly)
		return ptfs_ctl_read(req, fs, PTFS_CTL_PROGRESS, size, off, fi);
	ptfs_rdlock(fs);
	if (ptfs_ino_get(fs, ino, &i)) {
		ptfs_reply_err(req, -ENOENT, NULL);
		goto out;
	}
	/*
	 * A checkpoint rewritten in place (torch.save, cp to the same path)
	 * has other bytes at the offsets we know: fail rather than show them.
	 * One fstat per request; a change between it and the splice below is
	 * not caught (the kernel reads the fd after we reply).
	 */
	diag_init(&d, fs->c->path);
	if (from_checkpoint(&i) && (rc = ptfs_fresh(fs, &d))) {
		ptfs_reply_err(req, rc, &d);
		goto out;
	}
	switch (i.kind) {
	case PTFS_ROOT:
	case PTFS_NODE:
		n = i.node;
		if (n->stage || (n->kind == CKPT_N_TENSOR && n->tensor->fresh))
			read_ovl(req, fs, n, size, off);
		else if (n->kind == CKPT_N_TENSOR)
			read_tensor(req, fs, n->tensor, size, off);
		else if (n->kind == CKPT_N_VALUE || n->kind == CKPT_N_OPAQUE)
			read_text(req, n, size, off);
		else
			ptfs_reply_err(req, -EISDIR, NULL);
		break;
	case PTFS_STORAGE:
		read_storage(req, fs, i.storage, size, off);
		break;
	case PTFS_RECORD:
		read_record(req, fs, &fs->recs[i.index], size, off);
		break;
	case PTFS_VIEW:
		read_view(req, fs, i.node, i.view, size, off);
		break;
	case PTFS_CTL:
		ptfs_ctl_read(req, fs, i.ctl, size, off, fi);
		break;
	default:
		ptfs_reply_err(req, -EISDIR, NULL);
	}
out:
	ptfs_unlock(fs);
}
