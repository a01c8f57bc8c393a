/*
 * ptfs_ops.c - the FUSE low-level operations (libfuse 3.14) over the
 * inode table of ptfs_ino.c.  Reads of contiguous tensors, storages and
 * records are replied with fd-backed buffers, so libfuse splices the
 * checkpoint's pages straight to the kernel; strided views are gathered by
 * the core.  Files keep the kernel page cache (keep_cache, no direct_io),
 * so mmap works and a second read costs no request at all.
 *
 * Edits go to the overlay (core/ovl) under the write lock; a write to a
 * storage drops the other views of it from the page cache, from a thread
 * of its own (a notification from inside a request can deadlock against
 * the kernel's page locks).
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

#define INVAL_WAIT_MAX	2	/* seconds a writer waits for invalidation */

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE	(1 << 0)	/* linux/fs.h, renameat2(2) */
#endif

static struct ptfs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void rdlock(struct ptfs *fs)
{
	pthread_rwlock_rdlock(&fs->lock);
}

static void wrlock(struct ptfs *fs)
{
	pthread_rwlock_wrlock(&fs->lock);
}

static void unlock(struct ptfs *fs)
{
	pthread_rwlock_unlock(&fs->lock);
}

/* The one place errors leave: positive errno, corrupt input as EIO. */
static void reply_err(fuse_req_t req, int rc, const struct diag *d)
{
	char line[512];

	if (d && d->err)
		fuse_log(FUSE_LOG_ERR, "ptfs: %s\n",
			 diag_line(d, line, sizeof(line)));
	rc = rc < 0 ? -rc : rc;
	if (req)
		fuse_reply_err(req, rc == EILSEQ ? EIO : rc);
}

/* Text views are re-rendered after every edit: the kernel must ask for
 * their size each time rather than cache it. */
static double attr_timeout(const struct ptfs *fs, fuse_ino_t ino)
{
	struct ptfs_ino i;

	if (!ptfs_ino_get(fs, ino, &i) && i.kind == PTFS_VIEW &&
	    i.view == CKPT_V_TXT)
		return 0;
	return fs->timeout;
}

static void fill_entry(struct ptfs *fs, fuse_ino_t ino,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = ino ? attr_timeout(fs, ino) : fs->timeout;
	e->entry_timeout = fs->timeout;
	if (ino)
		ptfs_stat(fs, ino, &e->attr);
}

/* ---- invalidation of views whose storage changed ---- */

static void *inval_main(void *arg)
{
	struct ptfs *fs = arg;
	struct ptfs_inval *iv = &fs->inval;

	pthread_mutex_lock(&iv->lock);
	for (;;) {
		struct ckpt_storage **q;
		struct ptfs_ent *ents;
		fuse_ino_t *except, *inos = NULL, ino[3];
		uint32_t n, nents, ninos = 0;
		uint64_t batch;

		while (!iv->n && !iv->nents && !iv->stop)
			pthread_cond_wait(&iv->cond, &iv->lock);
		if (iv->stop)
			break;
		batch = iv->queued;
		q = iv->q;
		except = iv->except;
		n = iv->n;
		ents = iv->ents;
		nents = iv->nents;
		iv->q = NULL;
		iv->except = NULL;
		iv->ents = NULL;
		iv->n = iv->cap = iv->nents = iv->capents = 0;
		pthread_mutex_unlock(&iv->lock);
		/* one pass over the nodes for the whole batch: each tensor
		   file on a changed storage, and its .npy and .txt views */
		rdlock(fs);
		inos = malloc((3 * (size_t)fs->c->nnodes + n) * sizeof(*inos));
		for (uint32_t i = 0; inos && i < fs->c->nnodes; i++) {
			const struct ckpt_node *nd = fs->c->nodes[i];

			if (nd->kind != CKPT_N_TENSOR || !nd->tensor ||
			    !nd->tensor->storage)
				continue;
			ino[0] = ptfs_ino_of(fs, nd);
			ino[1] = ptfs_ino_of_view(nd, CKPT_V_NPY);
			ino[2] = ptfs_ino_of_view(nd, CKPT_V_TXT);
			for (uint32_t k = 0; k < n; k++)
				if (nd->tensor->storage == q[k]) {
					for (int j = 0; j < 3; j++)
						if (ino[j] != except[k])
							inos[ninos++] = ino[j];
					break;
				}
		}
		for (uint32_t k = 0; inos && k < n; k++) {
			ino[0] = ptfs_ino_of_storage(fs, q[k]);
			if (ino[0] && ino[0] != except[k])
				inos[ninos++] = ino[0];
		}
		unlock(fs);
		for (uint32_t i = 0; i < ninos; i++)
			fuse_lowlevel_notify_inval_inode(iv->se, inos[i], 0, 0);
		free(inos);
		free(q);
		free(except);
		pthread_mutex_lock(&iv->lock);
		iv->done = batch;
		pthread_cond_broadcast(&iv->cond);
		pthread_mutex_unlock(&iv->lock);
		/*
		 * Entries last, after the writers were let go: the rename
		 * that queued one holds the directory's lock until it is
		 * answered, and this waits for that lock.
		 */
		for (uint32_t i = 0; i < nents; i++) {
			fuse_lowlevel_notify_inval_entry(iv->se, ents[i].parent,
							 ents[i].name,
							 strlen(ents[i].name));
			free(ents[i].name);
		}
		free(ents);
		pthread_mutex_lock(&iv->lock);
	}
	pthread_mutex_unlock(&iv->lock);
	return NULL;
}

/* ovl's hook: storage @s changed through anything but @except. */
static void storage_changed(void *arg, struct ckpt_storage *s,
			    const struct ckpt_node *except)
{
	struct ptfs *fs = arg;
	struct ptfs_inval *iv = &fs->inval;
	fuse_ino_t ex;

	if (!iv->running)
		return;
	/*
	 * The writer's own inode stays cached: its pages are current, and
	 * the kernel holds them locked until this write is answered, so
	 * dropping them now would wait for ourselves.
	 */
	ex = fs->writing_ino ? fs->writing_ino :
	     except ? ptfs_ino_of(fs, except) : 0;
	pthread_mutex_lock(&iv->lock);
	for (uint32_t k = 0; k < iv->n; k++)
		if (iv->q[k] == s) {
			if (iv->except[k] != ex)
				iv->except[k] = 0;
			goto out;
		}
	if (iv->n == iv->cap) {
		uint32_t cap = iv->cap ? 2 * iv->cap : 16;
		struct ckpt_storage **q = realloc(iv->q, cap * sizeof(*q));
		fuse_ino_t *e;

		if (q)
			iv->q = q;
		e = q ? realloc(iv->except, cap * sizeof(*e)) : NULL;
		if (!e)
			goto out;	/* cache may stay stale: logged below */
		iv->except = e;
		iv->cap = cap;
	}
	iv->q[iv->n] = s;
	iv->except[iv->n++] = ex;
out:
	iv->queued++;
	pthread_cond_broadcast(&iv->cond);
	pthread_mutex_unlock(&iv->lock);
}

/* After a temporary file was renamed onto a view: the kernel takes the
 * name for that file now; make it look the name up again. */
static void inval_entry(struct ptfs *fs, fuse_ino_t parent, const char *name)
{
	struct ptfs_inval *iv = &fs->inval;
	struct ptfs_ent *e;

	if (!iv->running)
		return;
	pthread_mutex_lock(&iv->lock);
	if (iv->nents == iv->capents) {
		uint32_t cap = iv->capents ? 2 * iv->capents : 4;

		e = realloc(iv->ents, cap * sizeof(*e));
		if (!e)
			goto out;	/* the old entry lives out its timeout */
		iv->ents = e;
		iv->capents = cap;
	}
	e = &iv->ents[iv->nents];
	e->parent = parent;
	e->name = strdup(name);
	if (e->name)
		iv->nents++;
	pthread_cond_broadcast(&iv->cond);
out:
	pthread_mutex_unlock(&iv->lock);
}

/*
 * Called by a request that changed storages, after it dropped the lock
 * and before it replies: wait until the other views are out of the page
 * cache, so that they show the change as soon as the write returns.  The
 * notifications run on their own thread, because the kernel may need
 * another of our threads to answer a read of such a view while it drops
 * it (so with -s, one thread, nobody waits: the views catch up shortly).
 */
static void inval_wait(struct ptfs *fs)
{
	struct ptfs_inval *iv = &fs->inval;
	struct timespec until;
	uint64_t target;

	if (!iv->running || !iv->wait)
		return;
	/* bounded: should the kernel need something we did not foresee,
	   the reply comes late rather than never */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += INVAL_WAIT_MAX;
	pthread_mutex_lock(&iv->lock);
	target = iv->queued;
	while (iv->done < target && !iv->stop &&
	       pthread_cond_timedwait(&iv->cond, &iv->lock, &until) !=
	       ETIMEDOUT)
		;
	pthread_mutex_unlock(&iv->lock);
}

/* ovl's hook: write-back wrote @done of @total record bytes. */
static void wb_progress(void *arg, uint64_t done, uint64_t total)
{
	struct ptfs *fs = arg;

	__atomic_store_n(&fs->wb_total, total, __ATOMIC_RELAXED);
	__atomic_store_n(&fs->wb_done, done, __ATOMIC_RELEASE);
}

void ptfs_inval_start(struct ptfs *fs, struct fuse_session *se,
		      bool multithreaded)
{
	struct ptfs_inval *iv = &fs->inval;

	iv->wait = multithreaded;
	pthread_mutex_init(&iv->lock, NULL);
	pthread_cond_init(&iv->cond, NULL);
	iv->se = se;
	if (fs->ovl) {
		fs->ovl->changed = storage_changed;
		fs->ovl->progress = wb_progress;
		fs->ovl->arg = fs;
	}
	iv->running = !pthread_create(&iv->thread, NULL, inval_main, fs);
}

void ptfs_inval_stop(struct ptfs *fs)
{
	struct ptfs_inval *iv = &fs->inval;

	if (iv->running) {
		pthread_mutex_lock(&iv->lock);
		iv->stop = true;
		pthread_cond_broadcast(&iv->cond);
		pthread_mutex_unlock(&iv->lock);
		pthread_join(iv->thread, NULL);
		iv->running = false;
	}
	if (fs->ovl)
		fs->ovl->changed = NULL;
	free(iv->q);
	free(iv->except);
	for (uint32_t i = 0; i < iv->nents; i++)
		free(iv->ents[i].name);
	free(iv->ents);
	iv->q = NULL;
	iv->except = NULL;
	iv->ents = NULL;
	pthread_mutex_destroy(&iv->lock);
	pthread_cond_destroy(&iv->cond);
}

/* ---- write-back ---- */

int ptfs_commit(struct ptfs *fs, struct diag *d)
{
	int rc;

	wrlock(fs);
	rc = fs->ovl ? ovl_commit(fs->ovl, fs->output, d) : 1;
	if (rc < 0)
		diag_line(d, fs->commit_msg, sizeof(fs->commit_msg) - 1);
	else
		snprintf(fs->commit_msg, sizeof(fs->commit_msg) - 1, "%s",
			 rc ? "unchanged" : "ok");
	strcat(fs->commit_msg, "\n");
	unlock(fs);
	return rc;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ptfs *fs = userdata;

	/* skipping OPEN only pays off where nothing is opened for writing */
	fs->no_open = fs->readonly &&
		      (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
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

	if (!fs->ovl || fs->readonly || fs->ovl->committed)
		return;
	diag_init(&d, fs->c->path);
	if (ptfs_commit(fs, &d) < 0) {
		fuse_log(FUSE_LOG_ERR, "ptfs: write-back failed, the edits stay "
			 "staged in %s: %s\n", fs->ovl->dir,
			 diag_line(&d, line, sizeof(line)));
		fs->commit_failed = true;
	}
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ptfs *fs = fs_of(req);
	struct fuse_entry_param e;

	rdlock(fs);
	/* ino 0 with a timeout: the kernel caches the miss too */
	fill_entry(fs, ptfs_lookup(fs, parent, name), &e);
	unlock(fs);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	struct stat st;
	double tmo;
	int rc;

	(void)fi;
	rdlock(fs);
	rc = ptfs_stat(fs, ino, &st);
	/* under the lock: an edit may grow (move) the node table */
	tmo = attr_timeout(fs, ino);
	unlock(fs);
	if (rc)
		reply_err(req, rc, NULL);
	else
		fuse_reply_attr(req, &st, tmo);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ptfs *fs = fs_of(req);
	struct ptfs_ino i;
	char *to = NULL;
	int rc;

	rdlock(fs);
	rc = ptfs_ino_get(fs, ino, &i) || i.kind != PTFS_NODE ||
	     i.node->kind != CKPT_N_LINK ? EINVAL : 0;
	if (!rc && !(to = ptfs_link_target(i.node)))
		rc = ENOMEM;
	unlock(fs);
	if (rc)
		return reply_err(req, rc, NULL);
	fuse_reply_readlink(req, to);
	free(to);
}

static bool is_dir(struct ptfs *fs, fuse_ino_t ino)
{
	struct stat st;

	return !ptfs_stat(fs, ino, &st) && S_ISDIR(st.st_mode);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	bool dir;

	rdlock(fs);
	dir = is_dir(fs, ino);
	unlock(fs);
	if (!dir)
		return reply_err(req, ENOTDIR, NULL);
	/* listings change with edits: cache them only when nothing can */
	fi->cache_readdir = fs->readonly;
	fi->keep_cache = fs->readonly;
	fuse_reply_open(req, fi);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, bool plus)
{
	struct ptfs *fs = fs_of(req);
	char *buf = malloc(size), made[PTFS_NAME_BUF];
	size_t len = 0;

	if (!buf)
		return reply_err(req, ENOMEM, NULL);
	rdlock(fs);
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
	unlock(fs);
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
	if (fs->readonly || (fs->ovl && fs->ovl->committed))
		return EROFS;
	switch (i->kind) {
	case PTFS_NODE:
		if (i->node->kind == CKPT_N_TENSOR)
			return 0;
		if (i->node->kind == CKPT_N_VALUE &&
		    ckpt_value_editable(i->node))
			return 0;
		return EACCES;
	case PTFS_ROOT:
		return EISDIR;
	case PTFS_STORAGE:
	case PTFS_CTL:
	case PTFS_VIEW:
		return 0;
	default:
		return EPERM;	/* .ptfs/ records: the archive's plumbing */
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
	struct ptfs *fs = fs_of(req);
	struct ptfs_ino i;
	struct stat st;
	struct diag d;
	int rc;

	wrlock(fs);
	rc = ptfs_stat(fs, ino, &st) || ptfs_ino_get(fs, ino, &i) ? ENOENT :
	     S_ISDIR(st.st_mode) ? EISDIR : 0;
	if (!rc && (fi->flags & O_ACCMODE) != O_RDONLY)
		rc = write_errno(fs, &i);
	diag_init(&d, fs->c->path);
	if (!rc && (fi->flags & O_TRUNC) && i.kind == PTFS_NODE)
		rc = ovl_truncate(fs->ovl, i.node, 0, &d);
	if (!rc && (fi->flags & O_TRUNC) && i.kind == PTFS_VIEW)
		rc = ovl_view_truncate(fs->ovl, i.node, i.view, 0, &d);
	if (!rc && (fi->flags & O_TRUNC))
		ptfs_texts_drop(fs);
	unlock(fs);
	if (rc)
		return reply_err(req, rc, &d);
	/* a text view too large to render (EFBIG) fails here, where cat
	   sees it, rather than reading as an empty file */
	if (i.kind == PTFS_VIEW && i.view == CKPT_V_TXT &&
	    (fi->flags & O_ACCMODE) == O_RDONLY) {
		uint64_t size;
		int fd;

		rdlock(fs);
		rc = i.node->vstage ? 0 :
		     ptfs_text_get(fs, i.node, &fd, &size, &d);
		unlock(fs);
		if (rc)
			return reply_err(req, rc, &d);
	}
	if (fs->no_open)
		return reply_err(req, ENOSYS, NULL);
	/* the control files and files being rewritten change under us; a
	   text view is rendered anew after every edit */
	fi->keep_cache = i.kind != PTFS_CTL && i.kind != PTFS_PROGRESS &&
			 !(i.kind == PTFS_VIEW && i.view == CKPT_V_TXT);
	fi->direct_io = i.kind == PTFS_CTL || i.kind == PTFS_PROGRESS;
	fuse_reply_open(req, fi);
}
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
		return reply_err(req, ENOMEM, NULL);
	diag_init(&d, fs->c->path);
	got = ovl_read(fs->ovl, n, buf, size, off, &d);
	if (got < 0)
		reply_err(req, got, &d);
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
			return reply_err(req, n, &d);
		return reply_fd(req, fd, base + t->offset * t->dtype->size +
				off, size);
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
		return reply_fd(req, fs->c->fd, r->off + off, size);
	rc = ckpt_record_locate(fs->c, r->e, &d);
	if (rc)
		return reply_err(req, rc, &d);
	if (r->e->method == PTZ_STORED)
		return reply_fd(req, fs->c->fd, r->e->data_off + off, size);
	rc = ptz_entry_read(&fs->c->zip, r->e, 1 << 26, &data, &len, &d);
	if (rc)
		return reply_err(req, rc, &d);
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
		return reply_err(req, rc, &d);
	reply_fd(req, fd, base + off, size);
}

/*
 * KEY.npy: the header from memory, the data part exactly as KEY's own
 * reads (spliced from the checkpoint when it can be).  KEY.txt: spliced
 * from its rendering.  A view being written: what was written so far.
 */
static void read_view(fuse_req_t req, struct ptfs *fs, struct ckpt_node *n,
		      int view, size_t size, off_t off)
{
	unsigned char h[VIEW_NPY_HEADER_MAX];
	struct diag d;
	uint64_t hl, total;
	long long got;
	char *buf;
	int fd;

	diag_init(&d, fs->c->path);
	if (view == CKPT_V_TXT && !n->vstage) {
		got = ptfs_text_get(fs, n, &fd, &total, &d);
		if (got)
			return reply_err(req, got, &d);
		size = clip(total, off, size);
		if (!size)
			return (void)fuse_reply_buf(req, NULL, 0);
		return reply_fd(req, fd, off, size);
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
		return reply_err(req, ENOMEM, NULL);
	if (view == CKPT_V_NPY)
		got = ovl_npy_read(fs->ovl, n, buf, size, off, &d);
	else
		got = pread(n->vstage->scratch->fd, buf, size, off) < 0 ?
		      diag_errno(&d, -errno, "read: %s", strerror(errno)) :
		      (long long)size;
	if (got < 0)
		reply_err(req, got, &d);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	struct ckpt_node *n;
	struct ptfs_ino i;

	(void)fi;
	/* .ptfs/progress: "DONE TOTAL\n" bytes, read while write-back holds
	   the lock (its inode number depends on nothing an edit changes) */
	if (ino == fs->plumb + 3 + fs->nstor + fs->nrecs) {
		char buf[64];
		int len = snprintf(buf, sizeof(buf), "%llu %llu\n",
				   (unsigned long long)__atomic_load_n(
					   &fs->wb_done, __ATOMIC_ACQUIRE),
				   (unsigned long long)__atomic_load_n(
					   &fs->wb_total, __ATOMIC_RELAXED));

		return (void)fuse_reply_buf(req, buf + clip(len, 0, off),
					    clip(len, off, size));
	}
	rdlock(fs);
	if (ptfs_ino_get(fs, ino, &i)) {
		reply_err(req, ENOENT, NULL);
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
			reply_err(req, EISDIR, NULL);
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
	case PTFS_CTL: {
		size_t len = strlen(fs->commit_msg);

		fuse_reply_buf(req, fs->commit_msg + clip(len, 0, off),
			       clip(len, off, size));
		break;
	}
	default:
		reply_err(req, EISDIR, NULL);
	}
out:
	unlock(fs);
}

/* ---- edits ---- */

/* The directory node behind inode @ino, or NULL. */
static struct ckpt_node *dir_node(const struct ptfs *fs, fuse_ino_t ino)
{
	struct ptfs_ino i;

	if (ptfs_ino_get(fs, ino, &i) ||
	    (i.kind != PTFS_NODE && i.kind != PTFS_ROOT))
		return NULL;
	return i.node->kind == CKPT_N_DIR || i.node->kind == CKPT_N_SEQ ?
	       i.node : NULL;
}

/* Can the tree be edited here?  errno, or 0. */
static int edit_errno(const struct ptfs *fs, fuse_ino_t parent)
{
	if (fs->readonly || !fs->ovl || fs->ovl->committed)
		return EROFS;
	return dir_node(fs, parent) ? 0 : EPERM;
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
	return !ckpt_node_child(dir, key);
}

/* Is @name a view of a tensor in @dir rather than an entry of its own? */
static bool is_view_name(const struct ckpt_node *dir, const char *name)
{
	char key[256];
	size_t kl;
	const struct ckpt_node *k;

	if (!dir || ckpt_node_child(dir, name) ||
	    !ovl_view_name(name, &kl) || kl > 255)
		return false;
	memcpy(key, name, kl);
	key[kl] = 0;
	k = ckpt_node_child(dir, key);
	return k && k->kind == CKPT_N_TENSOR && ovl_view_ok(k);
}

/* A new file (@fi: create, else mknod) or directory (@dir) @name. */
static void make_common(fuse_req_t req, fuse_ino_t parent, const char *name,
			bool dir, struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct ckpt_node *n = NULL;
	char key[256];
	struct diag d;
	int rc;

	diag_init(&d, fs->c->path);
	wrlock(fs);
	rc = edit_errno(fs, parent);
	if (!rc && fi && new_npy(dir_node(fs, parent), name, key)) {
		/* cp x.npy m/KEY.npy: tensor KEY, made at close() */
		rc = ovl_view_create(fs->ovl, dir_node(fs, parent), key, &n,
				     &d);
		if (!rc)
			fill_entry(fs, ptfs_ino_of_view(n, CKPT_V_NPY), &e);
		unlock(fs);
		goto reply;
	}
	if (!rc)
		rc = dir ? ovl_mkdir(fs->ovl, dir_node(fs, parent), name, &n,
				     &d) :
		     ovl_create(fs->ovl, dir_node(fs, parent), name, &n, &d);
	if (!rc)
		fill_entry(fs, ptfs_ino_of(fs, n), &e);
	unlock(fs);
reply:
	if (rc)
		return reply_err(req, rc, &d);
	if (!fi)
		return (void)fuse_reply_entry(req, &e);
	fi->keep_cache = 0;
	fuse_reply_create(req, &e, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	(void)mode;
	make_common(req, parent, name, false, fi);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	(void)rdev;
	if (!S_ISREG(mode))
		return reply_err(req, EPERM, NULL);
	make_common(req, parent, name, false, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	(void)mode;
	make_common(req, parent, name, true, NULL);
}

static void remove_common(fuse_req_t req, fuse_ino_t parent,
			  const char *name, bool dir)
{
	struct ptfs *fs = fs_of(req);
	struct ckpt_node *gone = NULL;
	struct diag d;
	int rc;

	if (parent == FUSE_ROOT_ID && !strcmp(name, ".ptfs"))
		return reply_err(req, EPERM, NULL);
	diag_init(&d, fs->c->path);
	wrlock(fs);
	rc = edit_errno(fs, parent);
	if (!rc && is_view_name(dir_node(fs, parent), name))
		rc = diag_errno(&d, -EPERM, "%s is a view: remove the tensor "
				"itself", name);
	if (!rc && dir)
		gone = ckpt_node_child(dir_node(fs, parent), name);
	if (!rc)
		rc = dir ? ovl_rmdir(fs->ovl, dir_node(fs, parent), name, &d) :
		     ovl_unlink(fs->ovl, dir_node(fs, parent), name, &d);
	/* a shared directory lives on where a link to it was (the symlink
	   the kernel has cached under that name is a directory now) */
	if (!rc && gone && !gone->dead && gone->parent)
		inval_entry(fs, ptfs_ino_of(fs, gone->parent), gone->name);
	ptfs_texts_drop(fs);
	unlock(fs);
	inval_wait(fs);
	reply_err(req, rc, &d);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_common(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_common(req, parent, name, true);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct ptfs *fs = fs_of(req);
	struct diag d;
	bool onto_view;
	int rc;

	if (flags & ~RENAME_NOREPLACE)
		return reply_err(req, EINVAL, NULL);
	if (parent == FUSE_ROOT_ID && !strcmp(name, ".ptfs"))
		return reply_err(req, EPERM, NULL);
	diag_init(&d, fs->c->path);
	wrlock(fs);
	rc = edit_errno(fs, parent);
	if (!rc)
		rc = edit_errno(fs, newparent);
	if (!rc && is_view_name(dir_node(fs, parent), name))
		rc = diag_errno(&d, -EPERM, "%s is a view: rename the tensor "
				"itself", name);
	if (!rc)
		rc = ovl_rename(fs->ovl, dir_node(fs, parent), name,
				dir_node(fs, newparent), newname,
				flags & RENAME_NOREPLACE, &d);
	/* onto a view (ovl_view.c): the file's bytes became the view's,
	   and the name is still no entry of its own */
	onto_view = !rc && !ckpt_node_child(dir_node(fs, newparent), newname);
	ptfs_texts_drop(fs);
	unlock(fs);
	if (!rc && onto_view)
		inval_entry(fs, newparent, newname);
	inval_wait(fs);
	reply_err(req, rc, &d);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	struct ptfs_ino i;
	struct diag d;
	long long n;

	(void)fi;
	diag_init(&d, fs->c->path);
	if (size && (fs->readonly || !fs->ovl))
		return reply_err(req, EROFS, NULL);
	wrlock(fs);
	if (ptfs_ino_get(fs, ino, &i)) {
		n = -ENOENT;
	} else if (i.kind == PTFS_CTL) {
		unlock(fs);
		/* any write asks for write-back; it answers when done */
		n = ptfs_commit(fs, &d);
		if (n < 0)
			return reply_err(req, EIO, &d);
		return (void)fuse_reply_write(req, size);
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
		ptfs_texts_drop(fs);
	}
	unlock(fs);
	inval_wait(fs);
	if (n < 0)
		return reply_err(req, n, &d);
	fuse_reply_write(req, n);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	struct ptfs_ino i;
	struct stat st;
	struct diag d;
	double tmo;
	int rc = 0;

	(void)fi;
	diag_init(&d, fs->c->path);
	/*
	 * Modes, owners and times are the mount's and the checkpoint's.  A
	 * chmod is accepted and changes nothing, as on file systems without
	 * modes: rsync -a and cp -p set modes on what they write and stop at
	 * an error.  Giving a file away to someone else is refused.
	 */
	if (((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != fs->uid) ||
	    ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != fs->gid))
		return reply_err(req, EPERM, NULL);
	if ((to_set & FUSE_SET_ATTR_MODE) && fs->readonly)
		return reply_err(req, EROFS, NULL);
	wrlock(fs);
	if (ptfs_ino_get(fs, ino, &i))
		rc = -ENOENT;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && (fs->readonly || !fs->ovl))
		rc = -EROFS;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && i.kind == PTFS_NODE)
		rc = ovl_truncate(fs->ovl, i.node, attr->st_size, &d);
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
	if (to_set & FUSE_SET_ATTR_SIZE)
		ptfs_texts_drop(fs);
	if (!rc)
		rc = ptfs_stat(fs, ino, &st);
	tmo = attr_timeout(fs, ino);
	unlock(fs);
	if (rc)
		return reply_err(req, rc, &d);
	fuse_reply_attr(req, &st, tmo);
}

/* close() (@flush: may apply a replacement) or fsync(): make data durable */
static void sync_common(fuse_req_t req, fuse_ino_t ino, bool flush)
{
	struct ptfs *fs = fs_of(req);
	struct ptfs_ino i;
	struct diag d;
	int rc = 0;

	if (!fs->ovl || fs->readonly)
		return reply_err(req, 0, NULL);
	diag_init(&d, fs->c->path);
	if (flush)
		wrlock(fs);
	else
		rdlock(fs);
	if (ptfs_ino_get(fs, ino, &i))
		rc = 0;
	else if (i.kind == PTFS_NODE)
		rc = flush ? ovl_flush(fs->ovl, i.node, &d) :
		     ovl_fsync(fs->ovl, i.node, &d);
	else if (i.kind == PTFS_VIEW && flush)
		rc = ovl_view_flush(fs->ovl, i.node, &d);
	else if (i.kind == PTFS_VIEW && !i.node->vstage && !i.node->pending)
		rc = ovl_fsync(fs->ovl, i.node, &d);
	else if (i.kind == PTFS_STORAGE)
		rc = ovl_fsync_storage(fs->ovl, i.storage, &d);
	if (flush)
		ptfs_texts_drop(fs);
	unlock(fs);
	if (flush)
		inval_wait(fs);
	reply_err(req, rc, &d);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	(void)fi;
	sync_common(req, ino, true);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ptfs *fs = fs_of(req);
	struct ptfs_ino i;
	struct diag d;

	(void)fi;
	if (fs->ovl && !fs->readonly) {
		diag_init(&d, fs->c->path);
		wrlock(fs);
		if (!ptfs_ino_get(fs, ino, &i) &&
		    ((i.kind == PTFS_NODE && ovl_release(fs->ovl, i.node, &d)) ||
		     (i.kind == PTFS_VIEW &&
		      ovl_view_release(fs->ovl, i.node, &d))))
			reply_err(NULL, 0, &d);	/* nobody to tell: log */
		ptfs_texts_drop(fs);
		unlock(fs);
	}
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	sync_common(req, ino, false);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct ptfs *fs = fs_of(req);
	char buf[8192];
	long len;

	/*
	 * Only user.* exists.  EOPNOTSUPP (not ENODATA) for the rest makes
	 * ls -l stop asking every file for security.selinux and ACLs: that
	 * was two round trips per file and 4x fuse-zip's time for ls -lR.
	 */
	if (strncmp(name, "user.", 5))
		return reply_err(req, EOPNOTSUPP, NULL);
	rdlock(fs);
	len = ptfs_xattrs(fs, ino, buf, sizeof(buf));
	unlock(fs);
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

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct ptfs *fs = fs_of(req);
	struct ptfs_ino i;
	struct diag d;
	int rc;

	(void)flags;
	if (strncmp(name, "user.", 5))
		return reply_err(req, EOPNOTSUPP, NULL);
	if (fs->readonly || !fs->ovl)
		return reply_err(req, EROFS, NULL);
	diag_init(&d, fs->c->path);
	wrlock(fs);
	rc = ptfs_ino_get(fs, ino, &i) ? -ENOENT :
	     i.kind != PTFS_NODE ? -EPERM :
	     ovl_setxattr(fs->ovl, i.node, name, value, size, &d);
	unlock(fs);
	reply_err(req, rc, &d);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino;
	reply_err(req, strncmp(name, "user.", 5) ? EOPNOTSUPP : EPERM, NULL);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ptfs *fs = fs_of(req);
	char buf[8192], names[4096];
	long len;
	size_t n = 0;

	rdlock(fs);
	len = ptfs_xattrs(fs, ino, buf, sizeof(buf));
	unlock(fs);
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
	reply_err(req, EPERM, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	(void)link;
	(void)parent;
	(void)name;
	reply_err(req, EPERM, NULL);
}

const struct fuse_lowlevel_ops ptfs_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.create = op_create,
	.getxattr = op_getxattr,
	.setxattr = op_setxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.statfs = op_statfs,
};
