/*
 * ovl_open.c - taking an overlay (lock, checks, replay of the journal)
 * and giving it back (write-back, clean-up).  It calls the operations of
 * ovl.c to replay; nothing below calls it.
 */
#define _GNU_SOURCE 1
#include "ovl_int.h"
#include "util/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

bool ovl_changed(const struct ovl *v)
{
	const struct ckpt *c = v->c;

	for (uint32_t i = 0; i < v->nstorages0; i++)
		if (c->storages[i]->modified)
			return true;
	return ckpt_changed(c);
}

static char *field_str(const struct jrec *r, int i)
{
	return i < r->nf ? strndup(r->f[i], r->len[i]) : NULL;
}

/* Apply journal record @r again (data is already in place). */
static int replay_one(struct ovl *v, const struct jrec *r, struct diag *d)
{
	struct ckpt_node *dir = r->nf ? ovl_resolve(v, r->f[0], r->len[0]) : NULL;
	struct ckpt_node *out, *ndir;
	char *name = field_str(r, 1), *nname = NULL;
	uint64_t idx;
	int rc;

	if (!dir || (!name && r->op != JR_VALUE && r->op != JR_XATTR &&
		     r->op != JR_TENSOR)) {
		free(name);
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s/%s: a record names "
				    "'%.*s', which is not there", v->dir,
				    OVL_JOURNAL, r->nf ? (int)r->len[0] : 0,
				    r->nf ? r->f[0] : "");
	}
	switch (r->op) {
	case JR_MKDIR:
		rc = ovl_mkdir(v, dir, name, &out, d);
		break;
	case JR_CREATE:
		rc = !jr_num(r, 2, &idx) ? diag_corrupt(d, DIAG_NO_OFFSET,
							"bad create record") :
		     ovl_create_at(v, dir, arena_strndup(&v->c->arena, name,
						     strlen(name)),
			       (uint32_t)idx, &out, d);
		break;
	case JR_UNLINK:
		out = ckpt_node_child(dir, name);
		rc = out && ovl_is_dir(out) ? ovl_rmdir(v, dir, name, d) :
		     ovl_unlink(v, dir, name, d);
		break;
	case JR_RENAME:
		ndir = r->nf == 4 ? ovl_resolve(v, r->f[2], r->len[2]) : NULL;
		nname = field_str(r, 3);
		rc = ndir && nname ? ovl_rename(v, dir, name, ndir, nname,
						false, d) :
		     diag_corrupt(d, DIAG_NO_OFFSET, "bad rename record");
		break;
	case JR_VALUE: {
		struct ckpt_literal lit;

		rc = r->nf != 2 || dir->kind != CKPT_N_VALUE ||
		     ckpt_value_parse(dir, r->f[1], r->len[1], &lit) ?
		     diag_corrupt(d, DIAG_NO_OFFSET, "bad value record") :
		     ckpt_value_set(v->c, dir, &lit);
		break;
	}
	case JR_TENSOR:
		rc = ovl_replay_tensor(v, r, d);
		break;
	case JR_XATTR:
		nname = field_str(r, 1);
		rc = r->nf != 3 || !nname ? diag_corrupt(d, DIAG_NO_OFFSET,
							 "bad xattr record") :
		     ovl_setxattr(v, dir, nname, r->f[2], r->len[2], d);
		break;
	default:
		rc = diag_corrupt(d, DIAG_NO_OFFSET, "%s/%s: unknown record "
				  "'%c'", v->dir, OVL_JOURNAL, r->op);
	}
	free(name);
	free(nname);
	return rc;
}

/* Remove the overlay directory and everything in it. */
static bool ours(const char *name)
{
	size_t k = strspn(name, "0123456789");

	return !strcmp(name, OVL_JOURNAL) ||
	       (k && (!name[k] || !strcmp(name + k, ".tmp")));
}

/* Remove the overlay directory and the files we keep in it. */
static int remove_overlay(struct ovl *v)
{
	int dfd = open(v->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *e;

	if (!dp) {
		if (dfd >= 0)
			close(dfd);
		return errno == ENOENT ? 0 : -errno;
	}
	while ((e = readdir(dp)))
		if (ours(e->d_name))
			unlinkat(dfd, e->d_name, 0);
	closedir(dp);
	if (rmdir(v->dir) && errno != ENOENT)
		return -errno;
	return io_fsync_dir_of(v->dir);
}

static bool same_file(const struct stat *st, uint64_t size, uint64_t sec,
		      uint64_t nsec)
{
	return (uint64_t)st->st_size == size &&
	       (uint64_t)st->st_mtim.tv_sec == sec &&
	       (uint64_t)st->st_mtim.tv_nsec == nsec;
}

static int replay(struct ovl *v, struct diag *d)
{
	struct jrec *recs;
	unsigned char *buf;
	size_t n;
	uint64_t size, sec, nsec;
	struct stat now;
	int rc;

	v->jfd = openat(v->dfd, OVL_JOURNAL, O_RDWR | O_CLOEXEC);
	if (v->jfd < 0 && errno == ENOENT)
		return 0;	/* an empty directory: nothing staged yet */
	if (v->jfd < 0)
		return ovl_sys_err(v, d, -errno, "cannot open the journal");
	rc = jr_load(v, &recs, &n, &buf, d);
	if (rc)
		return rc;
	if (!n) {
		/* a crash between creating it and its header reaching the
		   disk: nothing was staged after it (ovl_ensure_dir) */
		close(v->jfd);
		v->jfd = -1;
		goto out;
	}
	if (recs[0].op != JR_HEAD || recs[0].nf != 4 ||
	    recs[0].len[0] != strlen(OVL_MAGIC) ||
	    memcmp(recs[0].f[0], OVL_MAGIC, recs[0].len[0]) ||
	    !jr_num(&recs[0], 1, &size) || !jr_num(&recs[0], 2, &sec) ||
	    !jr_num(&recs[0], 3, &nsec)) {
		rc = diag_corrupt(d, 0, "%s/%s: not a ptfs journal", v->dir,
				  OVL_JOURNAL);
		goto out;
	}
	now = v->base;
	if (!same_file(&now, size, sec, nsec)) {
		/* written back, then the crash came before the overlay went */
		const struct jrec *k = recs[n - 1].op == JR_COMMIT ?
				       &recs[n - 1] : NULL;

		if (k && jr_num(k, 0, &size) && jr_num(k, 1, &sec) &&
		    jr_num(k, 2, &nsec) && same_file(&now, size, sec, nsec)) {
			close(v->jfd);
			v->jfd = -1;
			rc = remove_overlay(v);
			close(v->dfd);
			v->dfd = -1;
			if (rc)
				rc = ovl_sys_err(v, d, rc, "cannot remove");
			goto out;
		}
		rc = diag_errno(d, -ESTALE, "%s holds edits for another version "
				"of %s (it changed since); restore the file, "
				"or mount with -o discard to drop them",
				v->dir, v->path);
		goto out;
	}
	v->replaying = true;
	for (size_t i = 1; i < n && !rc; i++)
		if (recs[i].op != JR_COMMIT)
			rc = replay_one(v, &recs[i], d);
	v->replaying = false;
out:
	free(recs);
	free(buf);
	return rc;
}

/* Storages copied up earlier: "<i>" for i below nstorages0. */
static int attach_copies(struct ovl *v, struct diag *d)
{
	struct ckpt *c = v->c;

	for (uint32_t i = 0; i < v->nstorages0; i++) {
		struct ckpt_storage *s = c->storages[i];
		struct stat st;
		int fd = ovl_data_open(v, i, "", O_RDWR);

		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0 || fstat(fd, &st))
			return ovl_sys_err(v, d, -errno, "cannot open staged data");
		if ((uint64_t)st.st_size != s->nbytes) {
			close(fd);
			return diag_corrupt(d, DIAG_NO_OFFSET, "%s/%u has %llu "
					    "bytes, storage %s needs %llu",
					    v->dir, i,
					    (unsigned long long)st.st_size,
					    s->key,
					    (unsigned long long)s->nbytes);
		}
		s->fd = fd;
		s->data_off = 0;
		s->modified = true;
	}
	return 0;
}

/*
 * A write-back that was killed leaves its temporary file beside the
 * checkpoint (".NAME.ptfs-new.XXXXXX", see ckpt_save()); nobody else
 * makes such names, and the lock says no other ptfs is writing.
 */
static void remove_stale_temps(const struct ovl *v)
{
	const char *slash = strrchr(v->path, '/');
	char *dir = strndup(v->path, slash - v->path + 1), pre[300];
	struct dirent *e;
	DIR *dp = dir ? opendir(dir) : NULL;

	snprintf(pre, sizeof(pre), ".%s" CKPT_TMP_SUFFIX, slash + 1);
	while (dp && (e = readdir(dp)))
		if (!strncmp(e->d_name, pre, strlen(pre)) &&
		    strlen(e->d_name) == strlen(pre) + 6)
			unlinkat(dirfd(dp), e->d_name, 0);
	if (dp)
		closedir(dp);
	free(dir);
}


int ovl_open(struct ckpt *c, const char *path, const struct ovl_opts *o,
	     struct ovl **out, struct diag *d)
{
	struct ovl *v = calloc(1, sizeof(*v));
	int rc = 0;

	*out = NULL;
	if (!v)
		return diag_nomem(d);
	v->c = c;
	v->dfd = v->jfd = -1;
	v->readonly = o->readonly;
	v->nstorages0 = c->nstorages;
	v->path = realpath(path, NULL);
	if (!v->path || fstat(c->fd, &v->base)) {
		rc = diag_errno(d, -errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	v->dir = o->dir ? strdup(o->dir) : io_beside(v->path, ".ptfs");
	if (!v->dir) {
		rc = diag_nomem(d);
		goto fail;
	}
	if (!v->readonly && flock(c->fd, LOCK_EX | LOCK_NB)) {
		rc = diag_errno(d, errno == EWOULDBLOCK ? -EBUSY : -errno,
				"%s is mounted writable by another ptfs",
				v->path);
		goto fail;
	}
	v->dfd = open(v->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (v->dfd < 0 && errno != ENOENT) {
		rc = ovl_sys_err(v, d, -errno, "cannot open the overlay");
		goto fail;
	}
	if (v->dfd >= 0 && o->discard) {
		rc = remove_overlay(v);
		close(v->dfd);
		v->dfd = -1;
		if (rc) {
			rc = ovl_sys_err(v, d, rc, "cannot discard");
			goto fail;
		}
	}
	/* the journal first: it says whether the overlay is this file's */
	if (v->dfd >= 0)
		rc = replay(v, d);
	if (!rc && v->dfd >= 0)
		rc = attach_copies(v, d);
	if (!rc && !v->readonly)
		remove_stale_temps(v);
	if (rc)
		goto fail;
	*out = v;
	return 0;
fail:
	ovl_close(v);
	return rc;
}

void ovl_close(struct ovl *v)
{
	if (!v)
		return;
	for (uint32_t i = 0; i < v->c->nstorages; i++) {
		struct ckpt_storage *s = v->c->storages[i];

		if (s->fd != v->c->fd && s->fd >= 0)
			close(s->fd);
		s->fd = v->c->fd;
	}
	for (uint32_t i = 0; i < v->c->nnodes; i++) {
		ovl_stage_free(&v->c->nodes[i]->stage);
		ovl_stage_free(&v->c->nodes[i]->vstage);
	}
	if (v->jfd >= 0)
		close(v->jfd);
	if (v->dfd >= 0)
		close(v->dfd);
	free(v->path);
	free(v->dir);
	free(v);
}

/* Every new tensor must fit its dtype and shape before anything is written. */
static int check_fresh(const struct ovl *v, struct diag *d)
{
	const struct ckpt *c = v->c;

	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct ckpt_node *n = c->nodes[i];
		char *path;

		if (n->dead || n->kind != CKPT_N_TENSOR || !n->tensor->fresh ||
		    !ckpt_tensor_fresh_fits(n->tensor))
			continue;
		path = ckpt_node_path(n);
		diag_errno(d, -EINVAL, "new tensor %s: its %llu bytes do not "
			   "make a %s tensor of shape user.shape; fix them, or "
			   "remove the file", path ? path : n->name,
			   (unsigned long long)n->tensor->storage->nbytes,
			   n->tensor->dtype->name);
		free(path);
		return d->err;
	}
	return 0;
}

/* Just before the rename: journal where the new file is going. */
static int note_commit(void *arg, const struct stat *st, struct diag *d)
{
	struct ovl *v = arg;
	char size[24], sec[24], nsec[24];
	struct jrec k = { .op = JR_COMMIT, .nf = 3, .f = { size, sec, nsec } };
	int rc = ovl_ensure_dir(v, d);

	snprintf(size, sizeof(size), "%llu", (unsigned long long)st->st_size);
	snprintf(sec, sizeof(sec), "%lld", (long long)st->st_mtim.tv_sec);
	snprintf(nsec, sizeof(nsec), "%ld", (long)st->st_mtim.tv_nsec);
	for (int i = 0; i < 3; i++)
		k.len[i] = strlen(k.f[i]);
	return rc ? rc : jr_append(v, &k, d);
}

int ovl_commit(struct ovl *v, const char *output, struct diag *d)
{
	int rc = v->committed ? 0 : ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (v->committed)
		return 1;
	if (!ovl_changed(v)) {
		/* temporary files came and went: nothing to keep either */
		if (v->dfd >= 0 && !remove_overlay(v)) {
			if (v->jfd >= 0)
				close(v->jfd);
			close(v->dfd);
			v->jfd = v->dfd = -1;
		}
		return 1;
	}
	rc = check_fresh(v, d);
	if (!rc) {
		struct ckpt_write_opts o = {
			.progress = v->progress, .progress_arg = v->arg,
		};

		rc = ckpt_save(v->c, output ? output : v->path, &o, &v->base,
			       output ? NULL : note_commit, v, d);
	}
	if (rc)
		return rc;
	v->committed = true;
	if (v->jfd >= 0)
		close(v->jfd);
	v->jfd = -1;
	remove_overlay(v);	/* best effort: the edits are written */
	return 0;
}
