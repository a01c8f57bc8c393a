/*
 * ptfs_ctl.c - the control files under .ptfs/ of a writable mount and what
 * they say: commit (write back), progress (how far), status (what is
 * staged, the daemon, the overlay, refused edits, what was written back),
 * discard (drop every staged edit and unmount), revert (make key paths
 * what the checkpoint holds), status.json (status for `ptfs status -j`).
 * `ptfs status`, `ptfs umount` and `ptfs revert` (ptfs_cli.c,
 * ptfs_umount.c) are their clients.
 *
 * Status (its text is ptfs_status.c's) is made when it is opened and kept
 * with that open file (fi->fh), so a reader sees one consistent text
 * however it reads it; discard and revert keep their result there.
 */
#define _GNU_SOURCE 1	/* open_memstream, asprintf */
#include "ptfs.h"

#include "source/ident.h"
#include "diag/diag.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const struct ptfs_ctl_file ptfs_ctl_files[PTFS_NCTL] = {
	[PTFS_CTL_COMMIT] = { "commit", true },
	[PTFS_CTL_PROGRESS] = { "progress", false },
	[PTFS_CTL_STATUS] = { "status", false },
	[PTFS_CTL_DISCARD] = { "discard", true },
	[PTFS_CTL_REVERT] = { "revert", true },
	[PTFS_CTL_STATUS_JSON] = { "status.json", false },
};

/* What one open of a control file keeps. */
struct ctl_handle {
	struct ctl_handle *prev, *next;	/* fs->handles, under ctl_lock */
	char *text;		/* what reads give */
	size_t len;
	bool end;		/* a discard was done through it: end the
				   session when it is closed */
};

/* ---- write-back ---- */

int ptfs_commit(struct ptfs *fs, struct diag *d)
{
	struct ovl_summary s = { 0 };
	char *done = NULL;
	struct stat st;
	size_t len;
	FILE *f;
	int rc;

	ptfs_wrlock(fs);
	/* what is about to be written, said before the tree describes the
	   new file (counts only) */
	rc = fs->ovl && !ovl_committed(fs->ovl) ?
	     ovl_summarize(fs->ovl, 0, &s, d) : 0;
	if (!rc)
		rc = fs->ovl ? ovl_commit(fs->ovl, fs->output, d) : 1;
	/* patched in place: the file the mount reads moved its times, and
	   holds what the mount shows */
	if (!rc && ovl_wstats(fs->ovl)->in_place && !fstat(fs->c->fd, &st))
		src_ident_of(&st, &fs->ident);
	if (rc < 0)
		diag_line(d, fs->commit_msg, sizeof(fs->commit_msg) - 1);
	else
		snprintf(fs->commit_msg, sizeof(fs->commit_msg) - 1, "%s",
			 rc ? "unchanged" : "ok");
	strcat(fs->commit_msg, "\n");
	f = rc >= 0 && fs->ovl ? open_memstream(&done, &len) : NULL;
	if (f && !rc) {
		fputs("written back: ", f);
		ptfs_counts_text(f, &s);
		fprintf(f, "; %llu bytes to %s%s\n",
			(unsigned long long)ovl_wstats(fs->ovl)->size,
			fs->output ? fs->output : ovl_path(fs->ovl),
			ovl_wstats(fs->ovl)->in_place ? " (in place)" : "");
	} else if (f && !fs->done_msg) {
		fputs("written back: nothing (nothing was staged)\n", f);
	}
	if (f && fclose(f))
		done = NULL;
	if (done && *done) {
		pthread_mutex_lock(&fs->ctl_lock);
		free(fs->done_msg);
		fs->done_msg = done;
		pthread_mutex_unlock(&fs->ctl_lock);
	} else {
		free(done);
	}
	ovl_summary_free(&s);
	ptfs_unlock(fs);
	return rc;
}

/* ---- discard ---- */

/*
 * Drop every staged edit, say what was dropped in @h, and end the session
 * when @h is closed (after the caller read what was dropped): the model
 * still shows the edits, and a mount that showed what is no longer
 * anywhere would mislead; unmounting (serve() in ptfs_main.c) leaves
 * nothing to see and nothing to write back.
 */
static long long discard(struct ptfs *fs, struct ctl_handle *h, size_t size)
{
	struct ovl_summary s = { 0 };
	char *done = NULL, *res = NULL;
	size_t len;
	struct diag d;
	FILE *f;
	int rc;

	diag_init(&d, fs->c->path);
	rc = ptfs_edit_lock(fs, &d);
	if (!rc && !ovl_committed(fs->ovl))
		rc = ovl_summarize(fs->ovl, 0, &s, &d);
	if (!rc)
		rc = ovl_discard(fs->ovl, &d);
	f = open_memstream(&done, &len);
	if (f && rc) {
		fprintf(f, "discard failed: %s\n", d.msg);
	} else if (f) {
		ptfs_discarded_text(f, fs->ovl, &s);
		fputc('\n', f);
	}
	if (f && fclose(f))
		done = NULL;
	res = done ? strdup(done) : NULL;
	pthread_mutex_lock(&fs->ctl_lock);
	if (!rc && done) {
		free(fs->done_msg);
		fs->done_msg = done;
		done = NULL;
	}
	if (h && res) {
		free(h->text);
		h->text = res;
		h->len = strlen(res);
		res = NULL;
	}
	if (h && !rc)
		h->end = true;
	pthread_mutex_unlock(&fs->ctl_lock);
	free(done);
	free(res);
	ovl_summary_free(&s);
	ptfs_unlock(fs);
	if (rc)
		return -ptfs_errno(rc, &d);	/* logged */
	return (long long)size;
}

/* ---- revert ---- */

/*
 * @path (@len bytes) as the mount shows it (from its root) in the model's
 * names, into *@out (malloc'd): each name that is there found as lookups
 * find it (a long key is shown cut), the rest as written (a removed key
 * is no entry to find).  A name no file name could be is refused rather
 * than skipped (skipping "dir/LONG" would revert all of dir).
 */
static int model_path(const struct ptfs *fs, const char *path, size_t len,
		      char **out, struct diag *d)
{
	const struct ckpt_node *n = fs->c->root;
	size_t cap = len + 1, k = 0;
	char *o = malloc(cap), comp[PTFS_NAME_BUF];

	if (!o)
		return diag_nomem(d);
	/* a root that is no directory is shown as one file (ptfs_ino.c) */
	if (!ckpt_node_is_dir(n) && len == strlen(fs->root_name) &&
	    !memcmp(path, fs->root_name, len)) {
		*o = 0;
		*out = o;
		return 0;
	}
	for (size_t i = 0; i < len;) {
		size_t m = 0;
		const char *name;

		while (i < len && path[i] == '/')
			i++;
		while (i + m < len && path[i + m] != '/')
			m++;
		if (m >= sizeof(comp)) {
			free(o);
			return diag_errno(d, -ENAMETOOLONG, "a name of %zu "
					  "bytes in a key path: no file name "
					  "is that long", m);
		}
		if (!m || (m == 1 && path[i] == '.')) {
			i += m;
			continue;
		}
		memcpy(comp, path + i, m);
		comp[m] = 0;
		i += m;
		n = n && ckpt_node_is_dir(n) ? ptfs_child(n, comp,
							  CKPT_NAME_MAX) : NULL;
		name = n ? n->name : comp;
		if (k + strlen(name) + 2 > cap) {
			char *nb = realloc(o, cap = k + strlen(name) + 2 + len);

			if (!nb) {
				free(o);
				return diag_nomem(d);
			}
			o = nb;
		}
		if (k)
			o[k++] = '/';
		strcpy(o + k, name);
		k += strlen(name);
	}
	o[k] = 0;
	*out = o;
	return 0;
}

/*
 * The key paths written to .ptfs/revert, into @paths (*@n of them, at
 * most 16).  Two forms: each path followed by a NUL, when the request
 * holds one (what ptfs revert sends: any key name survives, a newline in
 * it too); else one a line (echo PATH > .ptfs/revert), empty lines
 * skipped.  What is no path is refused, and nothing is reverted: in the
 * NUL form an empty path (the mount point is "."), or bytes after the
 * last NUL (a newline after it, a line that started with a NUL).
 */
static int parse_paths(const struct ptfs *fs, const char *buf, size_t size,
		       char **paths, int *n, struct diag *d)
{
	bool nul = memchr(buf, 0, size) != NULL;
	int rc = 0;

	for (size_t i = 0; i < size && !rc;) {
		const char *end = memchr(buf + i, nul ? 0 : '\n', size - i);
		size_t m = end ? (size_t)(end - (buf + i)) : size - i;

		if (nul && !end)
			rc = diag_errno(d, -EINVAL, "%zu bytes after the last "
					"NUL: end each path with a NUL (or "
					"write one a line, without NULs)",
					m);
		else if (nul && !m)
			rc = diag_errno(d, -EINVAL, "an empty path at byte "
					"%zu (the mount point is \".\")", i);
		else if (m && *n == 16)
			rc = diag_errno(d, -E2BIG, "at most 16 paths at once");
		else if (m && !(rc = model_path(fs, buf + i, m, &paths[*n], d)))
			++*n;
		i += m + 1;
	}
	if (!rc && !*n)
		rc = diag_errno(d, -EINVAL, "which key path?");
	return rc;
}

/* "reverted: PATH" (or "nothing to revert at PATH: ...") a line for
 * each of @paths, as ptfs status prints them (malloc'd, or NULL). */
static char *revert_result(const struct ptfs *fs, char *const *paths, int n,
			   int rc)
{
	char *res = NULL;
	size_t len;
	FILE *f = open_memstream(&res, &len);

	if (!f)
		return NULL;
	for (int k = 0; k < n; k++) {
		fputs(rc ? "nothing to revert at " : "reverted: ", f);
		ptfs_put_path(f, *paths[k] ? paths[k] :
			      ckpt_node_is_dir(fs->c->root) ? "." :
			      fs->root_name);
		fputs(rc ? ": it is what the checkpoint holds\n" : "\n", f);
	}
	if (fclose(f)) {
		free(res);
		return NULL;
	}
	return res;
}

/* The key paths in @buf (parse_paths()) reverted together; what was done
 * in @h, each path as status prints it. */
static long long revert(struct ptfs *fs, struct ctl_handle *h,
			const char *buf, size_t size)
{
	char *paths[16], *res = NULL;
	int n = 0, rc = 0;
	struct diag d;

	diag_init(&d, fs->c->path);
	rc = ptfs_edit_lock(fs, &d);
	if (!rc)
		rc = parse_paths(fs, buf, size, paths, &n, &d);
	if (!rc)
		rc = ovl_revert(fs->ovl, (const char *const *)paths, n, &d);
	ovl_texts_drop(fs->ovl);
	ptfs_unlock(fs);
	ptfs_inval_wait(fs);
	ptfs_inval_wait_all(fs);
	if (rc < 0 && asprintf(&res, "%s\n", d.msg) < 0)
		res = NULL;
	if (rc >= 0)
		res = revert_result(fs, paths, n, rc);
	for (int k = 0; k < n; k++)
		free(paths[k]);
	pthread_mutex_lock(&fs->ctl_lock);
	if (h && res) {
		free(h->text);
		h->text = res;
		h->len = strlen(res);
		res = NULL;
	}
	pthread_mutex_unlock(&fs->ctl_lock);
	free(res);
	return rc < 0 ? rc : (long long)size;
}

/* ---- the files ---- */

int ptfs_ctl_open(struct ptfs *fs, int k, struct fuse_file_info *fi)
{
	struct ctl_handle *h;

	fi->fh = 0;
	if (k == PTFS_CTL_COMMIT || k == PTFS_CTL_PROGRESS)
		return 0;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	if ((k == PTFS_CTL_STATUS || k == PTFS_CTL_STATUS_JSON) &&
	    !(h->text = ptfs_status_text(fs, k == PTFS_CTL_STATUS_JSON,
					 &h->len))) {
		free(h);
		return -ENOMEM;
	}
	pthread_mutex_lock(&fs->ctl_lock);
	h->next = fs->handles;
	if (h->next)
		h->next->prev = h;
	fs->handles = h;
	pthread_mutex_unlock(&fs->ctl_lock);
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

void ptfs_ctl_release(struct ptfs *fs, struct fuse_file_info *fi)
{
	struct ctl_handle *h = (struct ctl_handle *)(uintptr_t)fi->fh;

	if (!h)
		return;
	if (h->end && fs->inval.se)
		fuse_session_exit(fs->inval.se);
	pthread_mutex_lock(&fs->ctl_lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->ctl_lock);
	free(h->text);
	free(h);
	fi->fh = 0;
}

static size_t clip(size_t total, off_t off, size_t size)
{
	if ((uint64_t)off >= total)
		return 0;
	return total - off < size ? total - off : size;
}

void ptfs_ctl_read(fuse_req_t req, struct ptfs *fs, int k, size_t size,
		   off_t off, struct fuse_file_info *fi)
{
	struct ctl_handle *h = (struct ctl_handle *)(uintptr_t)fi->fh;
	char buf[64];
	size_t len;

	switch (k) {
	case PTFS_CTL_PROGRESS:
		/* "DONE TOTAL\n" bytes of record data */
		len = snprintf(buf, sizeof(buf), "%llu %llu\n",
			       (unsigned long long)__atomic_load_n(
				       &fs->wb_done, __ATOMIC_ACQUIRE),
			       (unsigned long long)__atomic_load_n(
				       &fs->wb_total, __ATOMIC_RELAXED));
		fuse_reply_buf(req, buf + clip(len, 0, off),
			       clip(len, off, size));
		return;
	case PTFS_CTL_COMMIT:
		len = strlen(fs->commit_msg);
		fuse_reply_buf(req, fs->commit_msg + clip(len, 0, off),
			       clip(len, off, size));
		return;
	default:
		if (!h)
			return (void)fuse_reply_buf(req, NULL, 0);
		pthread_mutex_lock(&fs->ctl_lock);
		fuse_reply_buf(req, h->text ? h->text + clip(h->len, 0, off) :
			       NULL, h->text ? clip(h->len, off, size) : 0);
		pthread_mutex_unlock(&fs->ctl_lock);
	}
}

long long ptfs_ctl_write(struct ptfs *fs, int k, const char *buf,
			 size_t size, struct fuse_file_info *fi)
{
	struct ctl_handle *h = (struct ctl_handle *)(uintptr_t)fi->fh;
	struct diag d;

	diag_init(&d, fs->c->path);
	switch (k) {
	case PTFS_CTL_COMMIT:
		/* any write asks for write-back; it answers when done, with
		   EIO when it failed (logged; the file reads the reason) */
		if (ptfs_commit(fs, &d) < 0)
			return -ptfs_errno(-EIO, &d);
		return (long long)size;
	case PTFS_CTL_DISCARD:
		return discard(fs, h, size);
	case PTFS_CTL_REVERT:
		return revert(fs, h, buf, size);
	default:
		return -EACCES;
	}
}

void ptfs_ctl_release_all(struct ptfs *fs)
{
	while (fs->handles) {
		struct ctl_handle *h = fs->handles;

		fs->handles = h->next;
		free(h->text);
		free(h);
	}
	if (fs->refused)
		for (uint32_t i = 0; i < PTFS_REFUSED_MAX; i++) {
			free(fs->refused[i].path);
			free(fs->refused[i].msg);
		}
	free(fs->refused);
	free(fs->done_msg);
	fs->refused = NULL;
	fs->done_msg = NULL;
}
