/*
 * src_shadow.c - remote folders as the source layer's directories
 * (src_remote.h): a shadow is a private folder in $TMPDIR of empty,
 * sparse files named and sized as the folder's objects, for the formats'
 * bids (fstatat) and scans (readdir).  Filled from an S3 listing, or over
 * plain HTTP, which lists nothing, by probing the marks the formats bid
 * by.  Counted by the sources rooted at it and removed with the last, or
 * when the process that made it exits.  And srcr_open(): is a URL an
 * object or a folder.
 */
#define _GNU_SOURCE	/* asprintf */
#include "src_remote.h"

#include "diag/diag.h"
#include "remote/remote.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct shadow {
	char *url, *path;	/* NULL: removed */
	pid_t pid;		/* the process that made it removes it */
	unsigned refs;		/* the sources rooted at it */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct shadow *shadows;
static size_t nshadows;

/* A placeholder @name (a path beneath @dir, folders made) of @size. */
static int place(const char *dir, const char *name, uint64_t size)
{
	char *p = malloc(strlen(dir) + strlen(name) + 2);
	int fd, rc = 0;

	if (!p)
		return -ENOMEM;
	sprintf(p, "%s/%s", dir, name);
	for (char *s = p + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(p, 0700) && errno != EEXIST)
			rc = -errno;
		*s = '/';
	}
	fd = rc ? -1 : open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
	if (!rc && (fd < 0 || ftruncate(fd, (off_t)size)))
		rc = -errno;
	if (fd >= 0)
		close(fd);
	free(p);
	return rc;
}

struct lister {
	const char *dir, *url;
	unsigned n;
};

static int listed(void *arg, const struct rmt_entry *e)
{
	struct lister *l = arg;
	int rc;

	/* S3 keys may hold what a member's name may not: no members */
	if (src_bad_name(e->name, strlen(e->name)))
		return 0;
	if (++l->n > 100000)
		return -E2BIG;
	rc = place(l->dir, e->name, e->size);
	if (rc == -EEXIST)
		return 0;
	return rc ? rc : srcr_know(l->url, e);
}

/* Is object @url/@name there?  1 (a placeholder made in @dir), 0, or
 * -errno with @d set. */
static int probe_one(const char *url, const char *dir, const char *name,
		     struct diag *d)
{
	char *u = srcr_join(url, name, strlen(name));
	struct stat st;
	int fd;

	if (!u)
		return diag_nomem(d);
	fd = srcr_open_object(u, &st, 1, d);
	free(u);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	close(fd);
	if (place(dir, name, (uint64_t)st.st_size))
		return diag_errno(d, -EIO, "%s: cannot note %s", dir, name);
	return 1;
}

/* Over plain HTTP, which lists nothing: the marks the formats bid by,
 * probed in turn, and the first found kept: a DCP's .metadata, a Hugging
 * Face index, else a run of __N.metadata (what ranks write apart).  Each
 * absent one costs a request: naming the index costs none. */
static int probe(const char *url, const char *dir, struct diag *d)
{
	static const char *const index[] = {
		"model.safetensors.index.json", "pytorch_model.bin.index.json",
		NULL
	};
	char name[32];
	unsigned r;
	int rc = probe_one(url, dir, ".metadata", d);

	if (rc)
		return rc < 0 ? rc : 0;
	for (size_t i = 0; index[i]; i++)
		if ((rc = probe_one(url, dir, index[i], d)))
			return rc < 0 ? rc : 0;
	for (r = 0; r < 4096; r++) {
		snprintf(name, sizeof(name), "__%u.metadata", r);
		rc = probe_one(url, dir, name, d);
		if (rc <= 0)
			break;
	}
	return rc < 0 ? rc : 0;
}

static void remove_dir(const char *path);

static void unshadow_all(void)
{
	for (size_t i = 0; i < nshadows; i++)
		if (shadows[i].path && shadows[i].pid == getpid())
			remove_dir(shadows[i].path);
}

/* A new shadow of folder @url (no trailing '/'): listed over S3, probed
 * over HTTP when @probing.  Its path, or NULL with @d set. */
static const char *make_shadow(const char *url, bool probing,
			       struct diag *d)
{
	static bool hooked;
	const char *tmp = getenv("TMPDIR");
	struct lister l = { NULL, url, 0 };
	struct shadow *v;
	char *path, *real;
	int rc;

	if (asprintf(&path, "%s/ptfs-remote.XXXXXX", tmp && *tmp ? tmp :
		     "/tmp") < 0)
		return diag_nomem(d), NULL;
	if (!mkdtemp(path)) {
		diag_errno(d, -errno, "%s: cannot make a folder for its "
			   "listing: %s", path, strerror(errno));
		free(path);
		return NULL;
	}
	l.dir = path;
	real = srcr_join(url, "", 0);
	rc = real ? 0 : diag_nomem(d);
	if (!rc) {
		char *r = srcr_real(real);

		free(real);
		real = r;
		rc = r ? rmt_list(r, listed, &l, d) : diag_nomem(d);
	}
	free(real);
	if (rc == -ENOTSUP && !diag_failed(d))
		rc = probing ? probe(url, path, d) : 0;
	pthread_mutex_lock(&lock);
	v = rc ? NULL : srcr_grow(shadows, nshadows, sizeof(*v));
	if (v) {
		shadows = v;
		v[nshadows] = (struct shadow){ strdup(url), path, getpid(),
					       0 };
		if (v[nshadows].url)
			nshadows++;
		if (!hooked)
			hooked = !atexit(unshadow_all);
	}
	pthread_mutex_unlock(&lock);
	if (!v) {
		if (!rc)
			diag_nomem(d);
		remove_dir(path);
		free(path);
		return NULL;
	}
	return path;
}

/* The shadow of @url made before, or NULL; @ref: one more source has
 * it. */
static const char *find_shadow(const char *url, bool ref)
{
	const char *path = NULL;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nshadows && !path; i++)
		if (shadows[i].path && !strcmp(shadows[i].url, url)) {
			path = shadows[i].path;
			shadows[i].refs += ref;
		}
	pthread_mutex_unlock(&lock);
	return path;
}

const char *srcr_shadow(const char *url, struct diag *d)
{
	const char *path = find_shadow(url, true);

	if (path || !make_shadow(url, false, d))
		return path;
	return find_shadow(url, true);
}

static int rm_tree(int dfd)
{
	DIR *dir = fdopendir(dfd);
	struct dirent *de;

	if (!dir)
		return close(dfd), -errno;
	while ((de = readdir(dir))) {
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!unlinkat(dirfd(dir), de->d_name, 0))
			continue;
		sub = openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY |
			     O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			rm_tree(sub);
		unlinkat(dirfd(dir), de->d_name, AT_REMOVEDIR);
	}
	closedir(dir);
	return 0;
}

static void remove_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0)
		rm_tree(fd);
	rmdir(path);
}

void srcr_unshadow(const char *path)
{
	char *gone = NULL;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nshadows; i++)
		if (shadows[i].path == path && !--shadows[i].refs) {
			gone = shadows[i].path;
			shadows[i].path = NULL;
			free(shadows[i].url);
			shadows[i].url = NULL;
		}
	pthread_mutex_unlock(&lock);
	if (gone)
		remove_dir(gone);
	free(gone);
}

/* @q's failure into @d, which names @url (the user's path) already. */
static int said(struct diag *d, struct diag *q, const char *url)
{
	srcr_unname(q->msg, url);
	return diag_set(d, q->err, q->off, "%s", q->msg);
}

/* Does the folder @fd hold nothing?  (It stays open, and where it was:
 * a dup would share, and move, its position.) */
static bool empty(int fd)
{
	int k = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = k >= 0 ? fdopendir(k) : NULL;
	struct dirent *de;
	bool none = true;

	while (dir && (de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			none = false;
	if (dir)
		closedir(dir);
	else if (k >= 0)
		close(k);
	return none;
}

/* @url without its trailing '/'s (malloc'd). */
static char *folder_url(const char *url)
{
	size_t n = strlen(url);

	while (n && url[n - 1] == '/')
		n--;
	return strndup(url, n);
}

int srcr_open(const char *url, struct stat *st, struct diag *d)
{
	size_t n = strlen(url);
	const char *path;
	char *f;
	int fd;

	if (n && url[n - 1] != '/') {
		/* s3://bucket/run7 names a folder as well as an object */
		bool s3 = !strncmp(url, "s3://", 5);
		struct diag q;

		diag_init(&q, NULL);
		fd = srcr_open_object(url, st, s3, &q);
		if (fd >= 0)
			return fd;
		if (fd != -ENOENT || !s3)
			return said(d, &q, url);
	}
	f = folder_url(url);
	if (!f)
		return diag_nomem(d);
	path = find_shadow(f, false);
	if (!path) {
		struct diag q;

		diag_init(&q, NULL);
		path = make_shadow(f, true, &q);
		if (!path) {
			free(f);
			return said(d, &q, url);
		}
	}
	free(f);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, st)) {
		int rc = -errno;

		if (fd >= 0)
			close(fd);
		return diag_errno(d, rc, "%s: %s", path, strerror(-rc));
	}
	if (empty(fd)) {
		bool s3 = !strncmp(url, "s3://", 5);

		close(fd);
		return diag_set(d, -ENOENT, DIAG_NO_OFFSET, "%s", s3 ?
				"HTTP 404 Not Found: no object, and no object "
				"under that prefix" : "a folder over plain "
				"HTTP is not listed, and none of .metadata, "
				"model.safetensors.index.json, "
				"pytorch_model.bin.index.json, __0.metadata is "
				"in it: name the checkpoint's file or index");
	}
	return fd;
}

