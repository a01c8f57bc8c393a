/*
 * ckpt_fsave.c - the commit of a write-back into a checkpoint of many
 * files: new data files under new names, the commit file (an index,
 * .metadata) renamed over the old one, the old files removed after; or,
 * for a set whose files keep their names (a rank set), temporaries
 * renamed over them once the journal holds the plan.  The steps, and
 * what a crash at each leaves, are in ckpt_fsave.h; docs/design.md
 * ("Writing a sharded folder back", "Per-rank shard sets") says why.
 */
#define _GNU_SOURCE 1	/* asprintf, realpath */
#include "ckpt_fsave.h"
#include "source/source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/io.h"

#define GEN_MAX	1000	/* names tried for one new file */

char *ckpt_gen_name(const char *name, unsigned g)
{
	const char *part = strrchr(name, '/'), *ext, *stem_end;
	size_t n = strlen(name);
	char *out;

	part = part ? part + 1 : name;
	ext = strrchr(part, '.');
	if (!ext || ext == part)
		ext = name + n;
	stem_end = ext;
	/* ".gN", N a number without leading zeros */
	for (const char *p = ext - 1; p > part; p--) {
		if (*p >= '0' && *p <= '9')
			continue;
		if (*p == 'g' && p[-1] == '.' && p + 1 < ext && p[1] != '0' &&
		    p - 1 > part)
			stem_end = p - 1;
		break;
	}
	out = malloc(n + 16);
	if (!out)
		return NULL;
	if (g)
		sprintf(out, "%.*s.g%u%s", (int)(stem_end - name), name, g,
			ext);
	else
		sprintf(out, "%.*s%s", (int)(stem_end - name), name, ext);
	return out;
}

/* The absolute name of @name in the directory, as the journal keeps it. */
static char *abs_name(int dfd, const char *name)
{
	char link[64], *dir, *out = NULL;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", dfd);
	dir = realpath(link, NULL);
	if (dir && asprintf(&out, "%s/%s", dir, name) < 0)
		out = NULL;
	free(dir);
	return out;
}

/* What fsave_init() and fsave_init_swap() share. */
static int begin(struct fsave *w, struct ckpt *c,
		 const struct ckpt_write_opts *o, uint32_t max, struct diag *d)
{
	*w = (struct fsave){ .c = c, .o = o, .d = d };
	w->dfd = ckpt_many_dir(c, &w->dir, &w->commit);
	if (w->dfd < 0)
		return diag_errno(d, -EINVAL, "not a checkpoint of many files");
	w->f = calloc(max + 1u, sizeof(*w->f));
	return w->f ? 0 : diag_nomem(d);
}

int fsave_init_swap(struct fsave *w, struct ckpt *c,
		    const struct ckpt_write_opts *o, uint32_t max,
		    struct diag *d)
{
	int rc = begin(w, c, o, max, d);

	w->swap = true;
	return rc ? rc : o->check ? o->check(o->check_arg, CKPT_SAVE_START,
					     NULL, NULL, d) : 0;
}

int fsave_init(struct fsave *w, struct ckpt *c, const struct ckpt_write_opts *o,
	       uint32_t max, struct diag *d)
{
	int rc = begin(w, c, o, max, d);

	if (rc)
		return rc;
	if (asprintf(&w->tmp, ".%s" CKPT_TMP_SUFFIX "%s", w->commit,
		     o->tmp_tag ? o->tmp_tag : "0") < 0) {
		w->tmp = NULL;
		return diag_nomem(d);
	}
	w->tmp_abs = abs_name(w->dfd, w->tmp);
	if (!w->tmp_abs)
		return diag_errno(d, -errno, "%s: %s", w->dir, strerror(errno));
	return o->check ? o->check(o->check_arg, CKPT_SAVE_START, w->tmp_abs,
				   NULL, d) : 0;
}

/* The last component of @name (a member's, beneath the root). */
static const char *leaf(const char *name)
{
	const char *slash = strrchr(name, '/');

	return slash ? slash + 1 : name;
}

/* Candidate @g for the temporary of @name, beside it (malloc'd, or NULL):
 * ".LEAF.ptfs-new.TAG", then ".LEAF.ptfs-new.TAG.G". */
static char *tmp_name(const struct fsave *w, const char *name, unsigned g)
{
	const char *l = leaf(name);
	const char *tag = w->o->tmp_tag ? w->o->tmp_tag : "0";
	char *out;
	int n = g ? asprintf(&out, "%.*s.%s" CKPT_TMP_SUFFIX "%s.%u",
			     (int)(l - name), name, l, tag, g) :
		asprintf(&out, "%.*s.%s" CKPT_TMP_SUFFIX "%s", (int)(l - name),
			 name, l, tag);

	return n < 0 ? NULL : out;
}

int fsave_new(struct fsave *w, uint32_t src, uint32_t member)
{
	struct fsave_file *f = &w->f[w->nf];
	const struct src_member *old = src_at(w->c->src, member);
	int fd = -1, rc;

	/* beside it, in the directory the source opened beneath the root
	   (never through a symlink, never by a path) */
	for (unsigned g = 0; g < GEN_MAX && fd < 0; g++) {
		char *cand = w->swap ? tmp_name(w, old->name, g) :
			     ckpt_gen_name(old->name, g);

		if (!cand)
			return diag_nomem(w->d);
		if (!strcmp(cand, old->name) || !strcmp(cand, w->commit)) {
			free(cand);
			continue;
		}
		fd = openat(old->dfd, leaf(cand), O_RDWR | O_CREAT | O_EXCL |
			    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST) {
			rc = diag_errno(w->d, -errno, "%s: cannot make %s "
					"beside it: %s", old->path, cand,
					strerror(errno));
			free(cand);
			return rc;
		}
		if (fd >= 0)
			f->name = cand;
		else
			free(cand);
	}
	if (fd < 0)
		return diag_errno(w->d, -EEXIST, "%s: no free name for its new "
				  "version (%u tried)", old->path, GEN_MAX);
	f->src = src;
	f->member = member;
	if (fstat(fd, &f->st)) {
		/* made O_EXCL just now: ours, whatever is known of it */
		rc = diag_errno(w->d, -errno, "%s: %s", f->name,
				strerror(errno));
		(void)unlinkat(old->dfd, leaf(f->name), 0);
		free(f->name);
		f->name = NULL;
		close(fd);
		return rc;
	}
	w->nf++;	/* removed on failure from here on */
	rc = 0;
	if (w->o->check)
		rc = w->o->check(w->o->check_arg, CKPT_SAVE_NEW, f->name,
				 &f->st, w->d);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

void fsave_drop(struct fsave *w, uint32_t src, uint32_t member)
{
	w->f[w->nf++] = (struct fsave_file){ .src = src, .member = member };
}

int fsave_finish(struct fsave *w, int fd, const char *name,
		 const struct stat *like, struct stat *st)
{
	if ((!geteuid() && fchown(fd, like->st_uid, like->st_gid)) ||
	    fchmod(fd, like->st_mode & 07777) || fsync(fd) || fstat(fd, st))
		return diag_errno(w->d, -errno, "%s: %s", name,
				  strerror(errno));
	w->bytes += st->st_size;
	return 0;
}

const char *fsave_renamed(const struct fsave *w, const char *name, size_t len)
{
	for (uint32_t k = 0; k < w->nf; k++)
		if (w->f[k].name && strlen(fsave_old(w, &w->f[k])->name) ==
		    len && !memcmp(fsave_old(w, &w->f[k])->name, name, len))
			return w->f[k].name;
	return NULL;
}

int fsave_commit_file(struct fsave *w, const void *p, size_t len,
		      struct stat *st)
{
	struct stat like;
	int fd, rc;

	/* ours if it is there: the journal named it for a write-back that
	   did not finish */
	(void)unlinkat(w->dfd, w->tmp, 0);
	fd = openat(w->dfd, w->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
	if (fd < 0)
		return diag_errno(w->d, -errno, "cannot create %s in %s: %s",
				  w->tmp, w->dir, strerror(errno));
	rc = fstat(w->c->fd, &like) ? diag_errno(w->d, -errno, "%s",
						 strerror(errno)) : 0;
	if (!rc && (rc = io_pwrite_full(fd, p, len, 0)))
		rc = diag_errno(w->d, rc, "%s: %s", w->tmp, strerror(-rc));
	if (!rc)
		rc = fsave_finish(w, fd, w->tmp, &like, st);
	close(fd);
	return rc;
}

int fsave_commit(struct fsave *w, const struct stat *ist)
{
	int rc = 0;

	for (uint32_t k = 0; k < w->nf && !rc; k++) {
		const struct src_member *m = fsave_old(w, &w->f[k]);
		struct stat st;

		if (fstat(m->fd, &st))
			return diag_errno(w->d, -errno, "%s: %s", m->path,
					  strerror(errno));
		if (w->o->check)
			rc = w->o->check(w->o->check_arg, CKPT_SAVE_RETIRE,
					 m->name, &st, w->d);
	}
	if (!rc && w->o->check)
		rc = w->o->check(w->o->check_arg, CKPT_SAVE_RENAME, w->tmp_abs,
				 ist, w->d);
	if (rc)
		return rc;
	if (renameat(w->dfd, w->tmp, w->dfd, w->commit))
		return diag_errno(w->d, -errno, "%s/%s: cannot replace it: %s",
				  w->dir, w->commit, strerror(errno));
	w->committed = true;
	if (fsync(w->dfd))
		return diag_errno(w->d, -errno, "%s: fsync: %s", w->dir,
				  strerror(errno));
	for (uint32_t k = 0; k < w->nf; k++) {
		const struct src_member *m = fsave_old(w, &w->f[k]);
		struct diag ds;

		/* another program's file by now is left alone; a link (the
		   hub's cache) goes itself, its target stays */
		diag_init(&ds, NULL);
		if (!src_same(w->c->src, w->f[k].member, &ds))
			(void)unlinkat(m->dfd, m->leaf, 0);
	}
	for (uint32_t k = 0; k < w->nf; k++) {
		const struct src_member *m = fsave_old(w, &w->f[k]);

		if (m->dfd != w->dfd && fsync(m->dfd))
			return diag_errno(w->d, -errno, "%s: fsync of its "
					  "folder: %s", m->path, strerror(errno));
	}
	if (fsync(w->dfd))
		return diag_errno(w->d, -errno, "%s: fsync: %s", w->dir,
				  strerror(errno));
	return 0;
}

int fsave_swap(struct fsave *w)
{
	char *plan = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&plan, &len);
	int rc = f ? 0 : diag_nomem(w->d), err = 0;

	for (uint32_t k = 0; k < w->nf && !rc; k++) {
		const struct src_member *m = fsave_old(w, &w->f[k]);
		struct stat st;

		if (fstat(m->fd, &st))
			rc = diag_errno(w->d, -errno, "%s: %s", m->path,
					strerror(errno));
		else
			fprintf(f, "%llu %llu %llu %llu %zu %zu %s%s\n",
				(unsigned long long)w->f[k].st.st_dev,
				(unsigned long long)w->f[k].st.st_ino,
				(unsigned long long)st.st_dev,
				(unsigned long long)st.st_ino,
				strlen(w->f[k].name), strlen(m->name),
				w->f[k].name, m->name);
	}
	if (f && fclose(f) && !rc)
		rc = diag_nomem(w->d);
	/* the commit point: from here on the next mount finishes it */
	if (!rc && w->o->check)
		rc = w->o->check(w->o->check_arg, CKPT_SAVE_SWAP, plan, NULL,
				 w->d);
	free(plan);
	if (rc)
		return rc;
	w->committed = true;
	for (uint32_t k = 0; k < w->nf; k++) {
		const struct src_member *m = fsave_old(w, &w->f[k]);

		/* each one tried: what fails is left for the next mount */
		if (renameat(m->dfd, leaf(w->f[k].name), m->dfd, m->leaf) &&
		    !err)
			err = diag_errno(w->d, -errno, "%s: cannot rename %s "
					 "over it: %s; the write-back is "
					 "committed, and the next mount "
					 "finishes it", m->path,
					 w->f[k].name, strerror(errno));
	}
	for (uint32_t k = 0; k < w->nf && !err; k++) {
		const struct src_member *m = fsave_old(w, &w->f[k]);

		if ((!k || m->dfd != fsave_old(w, &w->f[k - 1])->dfd) &&
		    fsync(m->dfd))
			err = diag_errno(w->d, -errno, "%s: fsync of its "
					 "folder: %s", m->path,
					 strerror(errno));
	}
	return err;
}

void fsave_end(struct fsave *w, int rc)
{
	for (uint32_t k = 0; rc && !w->committed && k < w->nf; k++) {
		struct stat st;

		int dfd = w->f[k].name ? fsave_old(w, &w->f[k])->dfd : -1;

		if (dfd >= 0 &&
		    !fstatat(dfd, leaf(w->f[k].name), &st,
			     AT_SYMLINK_NOFOLLOW) &&
		    st.st_dev == w->f[k].st.st_dev &&
		    st.st_ino == w->f[k].st.st_ino)
			(void)unlinkat(dfd, leaf(w->f[k].name), 0);
	}
	if (rc && !w->committed && w->tmp && w->dfd >= 0)
		(void)unlinkat(w->dfd, w->tmp, 0);
	for (uint32_t k = 0; w->f && k < w->nf; k++)
		free(w->f[k].name);
	free(w->f);
	free(w->tmp);
	free(w->tmp_abs);
	w->f = NULL;
	w->tmp = w->tmp_abs = NULL;
}
