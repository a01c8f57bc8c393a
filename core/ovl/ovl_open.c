/*
 * ovl_open.c - taking an overlay (lock, checks, replay of the journal:
 * each edit record through ovl_replay.c) and giving it back (write-back,
 * clean-up).  Nothing below calls it.
 */
#define _GNU_SOURCE 1
#include "ovl_int.h"
#include "util/io.h"
#include "util/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

bool ovl_changed(const struct ovl *v)
{
	const struct ckpt *c = v->c;

	for (uint32_t i = 0; i < v->nstorages0; i++)
		if (!ckpt_is_row(c->storages[i]) && c->storages[i]->modified)
			return true;	/* (a row is never written) */
	return ckpt_changed(c);
}

/* One line for the user (the first one wins), printf-style. */
__attribute__((format(printf, 2, 3)))
static void note(struct ovl *v, const char *fmt, ...)
{
	va_list ap;

	if (v->note)
		return;
	va_start(ap, fmt);
	if (vasprintf(&v->note, fmt, ap) < 0)
		v->note = NULL;
	va_end(ap);
}

/* Close the overlay's fds: it is not used (read-only mounts, discard). */
static void drop_dir(struct ovl *v)
{
	if (v->jfd >= 0)
		close(v->jfd);
	if (v->dfd >= 0)
		close(v->dfd);
	v->jfd = v->dfd = -1;
	if (v->named)
		memset(v->named, 0, v->nnamed);
}

/*
 * What a read-only mount does with an overlay it cannot or must not use:
 * mount the checkpoint as it is on disk and say so in one line (it never
 * changes the overlay, and never trusts one that is not the caller's).
 */
static int ro_ignore(struct ovl *v, struct diag *d)
{
	char line[512];

	note(v, "%s: staged edits not shown (%s); this read-only mount shows "
	     "the checkpoint as it is on disk", v->dir,
	     diag_line(d, line, sizeof(line)));
	diag_init(d, d->path);
	drop_dir(v);
	return 0;
}

/* Storages copied up earlier: the named data files of original storages. */
static int attach_copies(struct ovl *v, struct diag *d)
{
	struct ckpt *c = v->c;

	for (uint32_t i = 0; i < v->nstorages0 && i < v->nnamed; i++) {
		struct ckpt_storage *s = c->storages[i];
		struct stat st;
		char name[64];
		int fd;

		if (!v->named[i])
			continue;
		ovl_data_name(v, i, "", name, sizeof(name));
		if (ovl_reverted(v, i)) {
			/* a revert after its last copy-up: the file is the
			   bytes it dropped (the crash came before it went) */
			if (!v->readonly)
				(void)unlinkat(v->dfd, name, 0);
			continue;
		}
		fd = openat(v->dfd, name, (v->readonly ? O_RDONLY : O_RDWR) |
			    O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;	/* its copy-up never finished */
		if (fd < 0 || fstat(fd, &st))
			return ovl_sys_err(v, d, -errno,
					   "cannot open staged data");
		if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != s->nbytes) {
			close(fd);
			return diag_corrupt(d, DIAG_NO_OFFSET, "%s/%s has %llu "
					    "bytes, storage %s needs %llu",
					    v->dir, name,
					    (unsigned long long)st.st_size,
					    s->key,
					    (unsigned long long)s->nbytes);
		}
		if (ovl_copied(v, s))
			close(s->fd);
		s->fd = fd;
		s->data_off = 0;
		s->modified = true;
	}
	return 0;
}

/* Leftovers of a killed copy-up or write-back, all named in the journal. */
static void remove_leftovers(struct ovl *v)
{
	for (uint32_t i = 0; i < v->nnamed; i++)
		ovl_data_unlink(v, i, true);
	for (size_t i = 0; i < v->ntemps; i++)
		ovl_temp_remove(v->temps[i]);
}

/*
 * Read the journal by streaming: the header decides whether its edits are
 * this checkpoint's (replayed one record at a time) or not (then only the
 * manifest and the last JR_COMMIT are kept).
 */
static int load(struct ovl *v, bool discard, struct diag *d)
{
	struct jr_reader rd;
	struct jrec r;
	struct stat st;
	struct ovl_ident hid;
	bool mine = false, ours, matched = false;
	int rc;

	/* with no journal (nothing staged yet) the default directory is
	   ptfs's: an empty one is left when a kill came between the
	   journal's unlink and the rmdir, and this mount's end removes it
	   (ovl_forget()), as that one would have */
	v->dir_ours = v->default_dir;
	v->jfd = openat(v->dfd, OVL_JOURNAL, (v->readonly ? O_RDONLY : O_RDWR) |
			O_NOFOLLOW | O_CLOEXEC);
	if (v->jfd < 0 && errno == ENOENT)
		return 0;
	if (v->jfd < 0)
		return diag_errno(d, -errno, "%s: %s", v->jpath,
				  strerror(errno));
	if (fstat(v->jfd, &st))
		return diag_errno(d, -errno, "%s: %s", v->jpath,
				  strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return diag_errno(d, -EPERM, "%s: not a regular file of yours; "
				  "ptfs will not read it", v->jpath);
	jr_reader_init(&rd, v->jfd, st.st_size);
	rc = jr_next(&rd, &r, v->jpath, d);
	if (rc == 0) {
		/* made, then the crash came before its header was on disk:
		   nothing was staged after it */
		jr_reader_release(&rd);
		close(v->jfd);
		v->jfd = -1;
		if (!v->readonly)
			(void)unlinkat(v->dfd, OVL_JOURNAL, 0);
		return 0;
	}
	if (rc < 0)
		goto out;
	if (!jr_head_parse(&r, &hid, v->jid, &ours)) {
		rc = diag_corrupt(d, DIAG_NO_OFFSET, "%s: not a ptfs journal "
				  "(or one of another version); ptfs will not "
				  "use or remove it: move it away, or choose "
				  "another overlay with -o overlay=DIR",
				  v->jpath);
		goto out;
	}
	v->dir_ours = ours || v->default_dir;
	mine = !discard && ovl_ident_same(&hid, &v->id);
	/* a write-back in place may have stopped half way: its checkpoint
	   changed in times and CRCs only, and only it may be finished */
	if ((discard || !ovl_ident_same(&hid, &v->id)) &&
	    (rc = ovl_inplace_scan(v, d)) != 0) {
		if (rc < 0)
			goto out;
		if (hid.dev != v->id.dev || hid.ino != v->id.ino ||
		    hid.size != v->id.size) {
			rc = discard ? 0 : diag_errno(d, -ESTALE, "an in-place "
				"write-back into it did not finish, and it is "
				"another file now (its inode or size changed): "
				"nothing written; the edits are kept in %s "
				"(-o discard drops them)", v->dir);
			if (rc)
				goto out;
		} else {
			mine = true;	/* -o discard cannot undo it */
		}
	}
	v->replaying = mine;
	while ((rc = jr_next(&rd, &r, v->jpath, d)) > 0) {
		uint64_t i;

		rc = 0;
		if (r.op == JR_DATA) {
			/* a second field (a dtype): converted copies */
			if ((r.nf != 1 && r.nf != 2) || !jr_num(&r, 0, &i) ||
			    i >= UINT32_MAX)
				rc = diag_corrupt(d, DIAG_NO_OFFSET,
						  "%s: offset 0x%llx: bad data "
						  "record", v->jpath,
						  (unsigned long long)r.off);
			else if (r.nf == 2 ? ovl_name_mark_cvt(v, (uint32_t)i) :
				 ovl_name_mark(v, (uint32_t)i))
				rc = diag_nomem(d);
			else
				ovl_revert_named(v, (uint32_t)i);
		} else if (r.op == JR_TEMP) {
			if (r.nf != 1 || !r.len[0] || r.len[0] >= PATH_MAX ||
			    r.f[0][0] != '/' || memchr(r.f[0], 0, r.len[0]))
				rc = diag_corrupt(d, DIAG_NO_OFFSET,
						  "%s: offset 0x%llx: bad "
						  "temporary record", v->jpath,
						  (unsigned long long)r.off);
			else if (ovl_temp_add(v, r.f[0], r.len[0]))
				rc = diag_nomem(d);
		} else if (r.op == JR_NEWFILE || r.op == JR_RETIRE) {
			rc = ovl_many_note(v, &r, d);
		} else if (r.op == JR_SWAP) {
			rc = ovl_swap_note(v, &r, d);
		} else if (r.op == JR_COMMIT) {
			matched = ovl_commit_is(&r, &v->id);
			v->inplace_done = v->inplace_pending;
			v->inplace_pending = false;
		} else if (r.op == JR_INPLACE) {
			ckpt_plan_release(&v->plan);
			rc = ovl_inplace_parse(v, &r, &v->plan, v->plan_id, d);
			v->inplace_pending = !rc;
		} else if (r.op == JR_HEAD) {
			rc = diag_corrupt(d, DIAG_NO_OFFSET,
					  "%s: offset 0x%llx: a second header",
					  v->jpath, (unsigned long long)r.off);
		} else if (mine) {
			rc = ovl_replay_one(v, &r, d);
			v->resumed++;
		}
		if (rc)
			break;
	}
	v->replaying = false;
	if (rc < 0)
		goto out;
	rc = 0;
	v->jend = rd.pos;
	v->jseq = rd.seq;
	/* a torn tail is cut only by a writable mount, and only here */
	if (rd.torn && !v->readonly && ftruncate(v->jfd, rd.pos)) {
		rc = diag_errno(d, -errno, "%s: cannot cut off a torn record: "
				"%s", v->jpath, strerror(errno));
		goto out;
	}
	/* a rank set's write-back committed, its renames not all done:
	   finished whatever the edits' header says (some files are new),
	   and then the edits are in the files */
	if (v->nswaps && (rc = ovl_swap_finish(v, d)) <= 0)
		goto out;
	rc = 0;
	/* a folder's write-back killed: new files, or (committed) old */
	ovl_many_tidy(v, matched);
	if (mine && !(v->inplace_done && matched && !v->readonly))
		goto out;
	v->inplace_pending = false;	/* not this file's (or dropped) */
	v->resumed = 0;		/* replayed only to be forgotten: done */
	if (v->readonly) {
		rc = diag_errno(d, -ESTALE, "it holds edits for another "
				"version of %s", v->path);
	} else if (discard || matched) {
		/* dropped on request, or written back before a crash */
		rc = ovl_forget(v, d);
	} else {
		rc = diag_errno(d, -ESTALE, "%s holds edits for another "
				"version of this file (it was replaced, "
				"rewritten or touched since they were staged); "
				"mount with -o discard to drop them", v->dir);
	}
out:
	v->replaying = false;
	jr_reader_release(&rd);
	return rc;
}

/*
 * The absolute path of @path: realpath(), or for a name that is no file
 * (a pattern that opened its folder's set: DIR/model_world_size_4_rank_
 * *.pt) its folder's real path and the name.  malloc'd, NULL: errno.
 */
static char *abs_path(const char *path)
{
	char *real = realpath(path, NULL);

	return real || errno != ENOENT ? real : util_abs_path(path);
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
	pthread_mutex_init(&v->texts.lock, NULL);
	v->dfd = v->jfd = -1;
	v->readonly = o->readonly;
	v->inplace = o->inplace;
	v->nstorages0 = c->nstorages;
	v->nnodes0 = c->nnodes;
	/* a remote checkpoint: its URL as shown, and no overlay folder */
	v->path = c->remote ? strdup(c->path) : abs_path(path);
	if (c->remote)
		v->readonly = true;
	if (!v->path || fstat(c->fd, &v->base)) {
		rc = diag_errno(d, -errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	rc = ovl_ident_ckpt(c, NULL, &v->id);
	if (rc) {
		rc = diag_errno(d, rc, "%s: %s", path, strerror(-rc));
		goto fail;
	}
	v->default_dir = !o->dir;
	v->dir = c->remote ? strdup("none (a remote checkpoint mounts "
				    "read-only)") :
		 o->dir ? strdup(o->dir) : io_beside(v->path, ".ptfs");
	if (!v->dir || asprintf(&v->jpath, "%s/%s", v->dir, OVL_JOURNAL) < 0) {
		v->jpath = NULL;
		rc = diag_nomem(d);
		goto fail;
	}
	if (!v->readonly && flock(c->fd, LOCK_EX | LOCK_NB)) {
		rc = diag_errno(d, errno == EWOULDBLOCK ? -EBUSY : -errno,
				"%s is mounted writable by another ptfs",
				v->path);
		goto fail;
	}
	if (v->readonly && o->discard) {
		rc = diag_errno(d, -EINVAL, "-o discard needs a writable "
				"mount: a read-only one never changes the "
				"overlay");
		goto fail;
	}
	rc = c->remote ? 0 : ovl_dir_open(v->dir, false, NULL, &v->dfd, d);
	/* what an earlier mount staged is replayed onto nodes: a model with
	   rows has nothing staged (ckpt.h, "Rows") */
	if (!rc && v->dfd >= 0)
		rc = ckpt_materialize(c, d);
	if (!rc && v->dfd >= 0 && !v->readonly)
		rc = ovl_dir_lock(v, d);
	if (!rc && v->dfd >= 0)
		rc = load(v, o->discard, d);
	ovl_pristine_drop(v);	/* read again for replayed reverts */
	if (!rc && v->dfd >= 0)
		rc = attach_copies(v, d);
	if (rc && v->readonly && (rc == -EPERM || rc == -EACCES ||
				  rc == -ESTALE)) {
		/* undo what a replay did: open the checkpoint afresh */
		if (v->resumed) {
			note(v, "%s: cannot use it", v->dir);
			goto fail;
		}
		rc = ro_ignore(v, d);
	}
	if (rc)
		goto fail;
	if (v->dfd >= 0 && !v->readonly)
		remove_leftovers(v);
	if (v->inplace_pending) {
		rc = ovl_inplace_recover(v, d);
		if (rc)
			goto fail;
		note(v, "%s: finished an in-place write-back that had been "
		     "interrupted; the edits are in it now", v->path);
	}
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
	ovl_texts_free(v);
	for (uint32_t i = 0; i < v->c->nstorages; i++) {
		struct ckpt_storage *s = v->c->storages[i];

		if (ckpt_is_row(s))
			continue;	/* never copied, never written */
		if (ovl_copied(v, s))
			close(s->fd);
		s->fd = ckpt_storage_home(v->c, s);
		ckpt_dirty_drop(s);
	}
	for (uint32_t i = 0; i < v->c->nnodes; i++) {
		if (ckpt_is_row(v->c->nodes[i]))
			continue;
		ovl_stage_free(&v->c->nodes[i]->ed->stage);
		ovl_stage_free(&v->c->nodes[i]->ed->vstage);
	}
	if (v->jfd >= 0)
		close(v->jfd);
	if (v->dfd >= 0)
		close(v->dfd);
	for (size_t i = 0; i < v->ntemps; i++)
		free(v->temps[i]);
	free(v->temps);
	ovl_many_forget(v);
	free(v->named);
	free(v->reverted);
	ckpt_plan_release(&v->plan);
	ovl_pristine_drop(v);
	free(v->note);
	free(v->path);
	free(v->dir);
	free(v->jpath);
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

/*
 * ckpt_save()'s hook: before anything is read, journal the temporary
 * file's name (the next mount removes it if the write-back is killed) and
 * check the checkpoint; just before the rename, check it again and
 * journal where the new file is going (JR_COMMIT).
 */
static int save_check(void *arg, int stage, const char *tmp,
		      const struct stat *st, struct diag *d)
{
	struct ovl *v = arg;
	bool target = !v->output;
	int rc;

	if (stage == CKPT_SAVE_NEW || stage == CKPT_SAVE_RETIRE)
		return ovl_many_record(v, stage, tmp, st, d);
	rc = ovl_still_same(v, target, d);
	if (rc)
		return rc;
	if (stage == CKPT_SAVE_START) {
		struct jrec w = { .op = JR_TEMP };

		rc = ovl_ensure_dir(v, d);
		if (rc || !tmp)	/* a rank set's: its temporaries come */
			return rc;
		jr_field(&w, tmp);
		return jr_append(v, &w, d);
	}
	if (stage == CKPT_SAVE_SWAP) {
		/* the commit point: from here the next mount finishes it */
		rc = ovl_many_record(v, stage, tmp, NULL, d);
		v->swapped = !rc;
		return rc;
	}
	return target ? ovl_commit_append(v, st, d) : 0;
}

int ovl_commit(struct ovl *v, const char *output, struct diag *d)
{
	int rc = v->committed || v->inplace_pending ? 0 :
		 ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (v->committed)
		return 1;
	if (!ovl_changed(v)) {
		/* temporary files came and went: nothing to keep either */
		if (v->dfd >= 0)
			(void)ovl_forget(v, d);
		diag_init(d, d->path);
		return 1;
	}
	rc = v->inplace_pending ? 0 : check_fresh(v, d);
	if (!rc && (v->inplace_pending || (v->inplace && !output))) {
		rc = ovl_inplace_commit(v, d);
	} else if (!rc) {
		struct ckpt_write_opts o = {
			.progress = v->progress, .progress_arg = v->arg,
			.tmp_tag = v->jid, .check = save_check,
			.check_arg = v, .stats = &v->wstats,
		};

		v->output = output;
		/* the temporary's tag is the journal's id */
		rc = ovl_ensure_dir(v, d);
		if (!rc)
			rc = ckpt_write_back(v->c, output, v->path, &o,
					     &v->base, d);
		v->output = NULL;
	}
	/* committed (JR_SWAP) but not all renamed: no more edits, and the
	   journal stays for the next mount, which finishes it */
	if (rc && v->swapped)
		v->committed = true;
	if (rc)
		return rc;
	v->committed = true;
	(void)ovl_forget(v, d);	/* best effort: the edits are written */
	diag_init(d, d->path);
	return 0;
}
