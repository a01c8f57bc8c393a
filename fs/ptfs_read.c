/*
 * ptfs_read.c - FUSE read requests.  Reads of contiguous tensors, storages
 * and records are replied with fd-backed buffers, so libfuse splices the
 * checkpoint's pages straight to the kernel; strided views are gathered by
 * the core.  Files keep the kernel page cache (keep_cache, no direct_io),
 * so mmap works and a second read costs no request at all.
 */
#include "ptfs.h"

#include "source/ident.h"

#include "diag/diag.h"
#include "util/io.h"
#include "view/view.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_key_t reply_key;
static pthread_once_t reply_once = PTHREAD_ONCE_INIT;

static void reply_key_make(void)
{
	(void)pthread_key_create(&reply_key, free);
}

/*
 * A buffer of PTFS_REQUEST bytes this thread keeps (freed when it ends):
 * a malloc per read of that size is a fresh mapping, its pages faulted
 * in and cleared each time (17% of a remote mount's CPU).  NULL on ENOMEM.
 */
static char *reply_buf(void)
{
	char *b;

	pthread_once(&reply_once, reply_key_make);
	b = pthread_getspecific(reply_key);
	if (!b && (b = malloc(PTFS_REQUEST)) &&
	    pthread_setspecific(reply_key, b)) {
		free(b);
		b = NULL;
	}
	return b;
}

/* Reply @size bytes of file @fd at @pos, spliced (a remote object's
 * stand-in, which the kernel cannot read, through a buffer). */
static void reply_fd(fuse_req_t req, int fd, uint64_t pos, size_t size)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

	if (io_backed(fd)) {
		bool mine = size > PTFS_REQUEST;
		char *buf = mine ? malloc(size) : reply_buf();
		struct diag d;
		int rc;

		if (!buf)
			return ptfs_reply_err(req, -ENOMEM, NULL);
		diag_init(&d, NULL);
		rc = io_pread_diag(fd, buf, size, pos, NULL, &d);
		if (rc)
			ptfs_reply_err(req, rc, &d);
		else
			fuse_reply_buf(req, buf, size);
		if (mine)
			free(buf);
		return;
	}

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

/*
 * A tensor's or value's file, or its .npy view: where the bytes are is
 * the overlay's to say (ovl_locate); bytes lying as they are in a file
 * are spliced, the rest copied by the core's readers.  A short reply
 * means end of file to the kernel, so only a whole request is spliced.
 */
static void read_file(fuse_req_t req, struct ptfs *fs, struct ckpt_node *n,
		      int view, size_t size, off_t off)
{
	struct ovl_loc loc;
	struct diag d;
	long long got;
	char *buf;

	diag_init(&d, fs->c->path);
	got = ovl_locate(fs->ovl, n, view, off, &loc, &d);
	if (got)
		return ptfs_reply_err(req, got, &d);
	size = clip(loc.size, off, size);
	if (!size)
		return (void)fuse_reply_buf(req, NULL, 0);
	if (loc.fd >= 0 && loc.len >= size)
		return reply_fd(req, loc.fd, loc.pos, size);
	buf = malloc(size);
	if (!buf)
		return ptfs_reply_err(req, -ENOMEM, NULL);
	got = view ? ovl_npy_read(fs->ovl, n, buf, size, off, &d) :
	      ovl_read(fs->ovl, n, buf, size, off, &d);
	if (got < 0)
		ptfs_reply_err(req, got, &d);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
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

/* A storage of a DCP tensor in chunks: it is that tensor's bytes. */
static void read_pieced(fuse_req_t req, struct ptfs *fs,
			const struct ckpt_storage *s, size_t size, off_t off,
			struct diag *d)
{
	const struct ckpt_tensor *t = ckpt_pieced_tensor(fs->c, s);
	char *buf = malloc(size);
	long long got;

	if (!buf || !t) {
		free(buf);
		return ptfs_reply_err(req, -ENOMEM, NULL);
	}
	got = ckpt_tensor_read(fs->c, t, buf, size, off, d);
	if (got < 0)
		ptfs_reply_err(req, got, d);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
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
	if (ckpt_storage_pieced(fs->c, s))	/* a DCP tensor's chunks */
		return read_pieced(req, fs, s, size, off, &d);
	rc = ckpt_storage_data(fs->c, s, &fd, &base, &d);
	if (rc)
		return ptfs_reply_err(req, rc, &d);
	reply_fd(req, fd, base + off, size);
}

/*
 * KEY.txt: the chunks the request covers, formatted now (ovl_text.c),
 * unless a new text is being written; everything else as read_file().
 */
static void read_view(fuse_req_t req, struct ptfs *fs, struct ckpt_node *n,
		      int view, size_t size, off_t off)
{
	struct ovl_loc loc;
	struct diag d;
	long long got;
	char *buf;

	diag_init(&d, fs->c->path);
	if (view == CKPT_V_TXT &&
	    !ovl_locate(fs->ovl, n, view, off, &loc, &d) && loc.fd < 0) {
		buf = malloc(size ? size : 1);
		if (!buf)
			return ptfs_reply_err(req, -ENOMEM, NULL);
		got = ovl_text_read(fs->ovl, n, buf, size, off, &d);
		if (got < 0)
			ptfs_reply_err(req, got, &d);
		else
			fuse_reply_buf(req, buf, got);
		free(buf);
		return;
	}
	read_file(req, fs, n, view, size, off);
}

/* Do the bytes of @i come from the checkpoint file (or were made from
 * it: inflated copies, rendered text)?  Staged ones come from the
 * overlay, values from memory. */
static bool from_checkpoint(const struct ptfs_ino *i)
{
	switch (i->kind) {
	case PTFS_ROOT:
	case PTFS_NODE:
		return i->node->kind == CKPT_N_TENSOR && !ovl_staged(i->node) &&
		       !i->node->tensor->fresh;
	case PTFS_STORAGE:
	case PTFS_RECORD:
	case PTFS_VIEW:
	case PTFS_ASFILE:	/* .ptfs/as/: made of the storages */
		return true;
	default:
		return false;
	}
}

int ptfs_fresh(struct ptfs *fs, struct diag *d)
{
	int rc = src_ident_check(fs->c->fd, &fs->ident, d);

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
	diag_init(&d, fs->c->path);
	if ((rc = ptfs_as_ready(fs, ino, &d)))
		return ptfs_reply_err(req, rc, &d);
	ptfs_rdlock(fs);
	if (ptfs_ino_get(fs, ino, &i)) {
		ptfs_reply_err(req, -ENOENT, NULL);
		goto out;
	}
	if (i.row) {
		/* the first read of a row (a mount that never opens) */
		ptfs_unlock(fs);
		rc = ptfs_ino_real(fs, ino, &d);
		ptfs_rdlock(fs);
		if (rc || ptfs_ino_get(fs, ino, &i) || i.row) {
			ptfs_reply_err(req, rc ? rc : -ENOENT, &d);
			goto out;
		}
	}
	/*
	 * A checkpoint rewritten in place (torch.save, cp to the same path)
	 * has other bytes at the offsets we know: fail rather than show them.
	 * One fstat per request; a change between it and the splice below is
	 * not caught (the kernel reads the fd after we reply).
	 */
	if (from_checkpoint(&i) && ((rc = ptfs_fresh(fs, &d)) ||
	    (rc = ckpt_storage_unchanged(fs->c, i.kind == PTFS_STORAGE ?
					 i.storage : i.node && i.node->tensor ?
					 i.node->tensor->storage : NULL,
					 &d)))) {
		ptfs_reply_err(req, rc, &d);
		goto out;
	}
	switch (i.kind) {
	case PTFS_ROOT:
	case PTFS_NODE:
		n = i.node;
		if (n->kind == CKPT_N_TENSOR || n->kind == CKPT_N_VALUE ||
		    n->kind == CKPT_N_OPAQUE)
			read_file(req, fs, n, 0, size, off);
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
	case PTFS_ASFILE:
		ptfs_as_read(req, fs, i.index, size, off, fi);
		break;
	case PTFS_METAV: {
		char *b = malloc(size ? size : 1);
		long long got = b ? ptfs_meta_read(fs, i.index, b, size,
						   (uint64_t)off) : -ENOMEM;

		if (got < 0)
			ptfs_reply_err(req, got, NULL);
		else
			fuse_reply_buf(req, b, (size_t)got);
		free(b);
		break;
	}
	case PTFS_FILE:
		size = clip(fs->files[i.index].m->size, off, size);
		if (size)
			reply_fd(req, fs->files[i.index].m->fd, off, size);
		else
			fuse_reply_buf(req, NULL, 0);
		break;
	default:
		ptfs_reply_err(req, -EISDIR, NULL);
	}
out:
	ptfs_unlock(fs);
}
