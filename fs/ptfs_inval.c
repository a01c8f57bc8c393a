/*
 * ptfs_inval.c - dropping views whose storage changed from the kernel's
 * page cache.  A write to a storage through one file must show in every
 * other view of it (tensor files, .npy/.txt views, .ptfs/storages/KEY);
 * the notifications run on a thread of their own, because a notification
 * from inside a request can deadlock against the kernel's page locks.
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

/* ---- invalidation of views whose storage changed ---- */

static void *inval_main(void *arg)
{
	struct ptfs *fs = arg;
	struct ptfs_inval *iv = &fs->inval;

	pthread_mutex_lock(&iv->lock);
	for (;;) {
		struct ckpt_storage **q;
		struct ptfs_ent *ents;
		fuse_ino_t *except, *inos = NULL, ino[3], *more;
		uint32_t n, nents, ninos = 0, nmore;
		uint64_t batch, ebatch;

		while (!iv->n && !iv->nents && !iv->ninos && !iv->stop)
			pthread_cond_wait(&iv->cond, &iv->lock);
		if (iv->stop)
			break;
		batch = iv->queued;
		ebatch = iv->equeued;
		q = iv->q;
		except = iv->except;
		n = iv->n;
		ents = iv->ents;
		nents = iv->nents;
		more = iv->inos;
		nmore = iv->ninos;
		iv->q = NULL;
		iv->except = NULL;
		iv->ents = NULL;
		iv->inos = NULL;
		iv->n = iv->cap = iv->nents = iv->capents = 0;
		iv->ninos = iv->capinos = 0;
		pthread_mutex_unlock(&iv->lock);
		/* one pass over the nodes for the whole batch: each tensor
		   file on a changed storage, and its .npy and .txt views */
		ptfs_rdlock(fs);
		inos = malloc((3 * (size_t)fs->c->nnodes + n) * sizeof(*inos));
		for (uint32_t i = 0; inos && i < fs->c->nnodes; i++) {
			const struct ckpt_node *nd = fs->c->nodes[i];

			/* (a row's bytes never change: a write makes it a
			   node) */
			if (ckpt_is_row(nd) || nd->kind != CKPT_N_TENSOR ||
			    !nd->tensor ||
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
		ptfs_unlock(fs);
		for (uint32_t i = 0; i < ninos; i++)
			fuse_lowlevel_notify_inval_inode(iv->se, inos[i], 0, 0);
		for (uint32_t i = 0; i < nmore; i++)
			fuse_lowlevel_notify_inval_inode(iv->se, more[i], 0, 0);
		free(inos);
		free(more);
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
		iv->edone = ebatch;
		pthread_cond_broadcast(&iv->cond);
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
void ptfs_inval_entry(struct ptfs *fs, fuse_ino_t parent, const char *name)
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
	iv->equeued++;
	pthread_cond_broadcast(&iv->cond);
out:
	pthread_mutex_unlock(&iv->lock);
}

void ptfs_inval_inode(struct ptfs *fs, fuse_ino_t ino)
{
	struct ptfs_inval *iv = &fs->inval;

	if (!iv->running)
		return;
	pthread_mutex_lock(&iv->lock);
	if (iv->ninos == iv->capinos) {
		uint32_t cap = iv->capinos ? 2 * iv->capinos : 16;
		fuse_ino_t *p = realloc(iv->inos, cap * sizeof(*p));

		if (!p)
			goto out;	/* it lives out its timeout */
		iv->inos = p;
		iv->capinos = cap;
	}
	iv->inos[iv->ninos++] = ino;
	iv->queued++;
	iv->equeued++;
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
void ptfs_inval_wait(struct ptfs *fs)
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

void ptfs_inval_wait_all(struct ptfs *fs)
{
	struct ptfs_inval *iv = &fs->inval;
	struct timespec until;
	uint64_t target;

	if (!iv->running || !iv->wait)
		return;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += INVAL_WAIT_MAX;
	pthread_mutex_lock(&iv->lock);
	target = iv->equeued;
	while (iv->edone < target && !iv->stop &&
	       pthread_cond_timedwait(&iv->cond, &iv->lock, &until) !=
	       ETIMEDOUT)
		;
	pthread_mutex_unlock(&iv->lock);
}

/* ovl's hook: a revert changed what @dir's @name stands for, or what
 * node @n holds. */
static void node_touched(void *arg, const struct ckpt_node *dir,
			 const char *name, const struct ckpt_node *n)
{
	struct ptfs *fs = arg;

	if (dir && name) {
		ptfs_inval_entry(fs, ptfs_ino_of(fs, dir), name);
		ptfs_inval_inode(fs, ptfs_ino_of(fs, dir));
	}
	if (n) {
		ptfs_inval_inode(fs, ptfs_ino_of(fs, n));
		if (n->kind == CKPT_N_TENSOR) {
			ptfs_inval_inode(fs, ptfs_ino_of_view(n, CKPT_V_NPY));
			ptfs_inval_inode(fs, ptfs_ino_of_view(n, CKPT_V_TXT));
		}
	}
}

/* ovl's hook: write-back wrote @done of @total record bytes. */
static void wb_progress(void *arg, uint64_t done, uint64_t total)
{
	struct ptfs *fs = arg;

	__atomic_store_n(&fs->wb_total, total, __ATOMIC_RELAXED);
	__atomic_store_n(&fs->wb_done, done, __ATOMIC_RELEASE);
}

/* ovl's hook: one line about an edit that changed more than it says
 * (docs/editing.md): logged like a refusal, syslog when daemonized. */
static void edit_notice(void *arg, const char *line)
{
	(void)arg;
	fuse_log(FUSE_LOG_NOTICE, "ptfs: %s\n", line);
}

void ptfs_inval_start(struct ptfs *fs, struct fuse_session *se,
		      bool multithreaded)
{
	struct ptfs_inval *iv = &fs->inval;

	iv->wait = multithreaded;
	pthread_mutex_init(&iv->lock, NULL);
	pthread_cond_init(&iv->cond, NULL);
	iv->se = se;
	if (fs->ovl)
		ovl_set_hooks(fs->ovl, &(struct ovl_hooks){
			.changed = storage_changed, .notice = edit_notice,
			.progress = wb_progress, .touched = node_touched,
			.arg = fs });
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
	if (fs->ovl)	/* the commit after the session still says how far */
		ovl_set_hooks(fs->ovl, &(struct ovl_hooks){
			.progress = wb_progress, .arg = fs });
	free(iv->q);
	free(iv->except);
	for (uint32_t i = 0; i < iv->nents; i++)
		free(iv->ents[i].name);
	free(iv->ents);
	free(iv->inos);
	iv->inos = NULL;
	iv->q = NULL;
	iv->except = NULL;
	iv->ents = NULL;
	pthread_mutex_destroy(&iv->lock);
	pthread_cond_destroy(&iv->cond);
}
