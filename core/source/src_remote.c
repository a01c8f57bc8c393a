/*
 * src_remote.c - remote objects and folders as the source layer's files
 * (src_remote.h): stand-in descriptors, shadow folders, URLs as names.
 *
 * A stand-in is a memfd of the object's size (sparse: no memory), mode
 * 0444 and mtime Last-Modified, reopened O_PATH: fstat, dup and identity
 * work, a read(2) or mmap of it fails with EBADF, and io_back() sends
 * io_pread*() of it to rmt_pread().  Remote objects stay open until the
 * process ends (a tool or a mount opens each once); the table below makes
 * a second open of a URL (a probed .metadata, then its src_add) free.
 */
#define _GNU_SOURCE	/* memfd_create, O_PATH */
#include "src_remote.h"

#include "diag/diag.h"
#include "remote/remote.h"
#include "util/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* the URLs opened, the shadows made, the authorities hidden */
struct opened {
	char *url;
	int fd;
};
struct shadow {
	char *url, *path;	/* NULL: removed */
	pid_t pid;		/* the process that made it removes it */
	unsigned refs;		/* the sources rooted at it */
};
struct hidden {
	char *shown, *real;	/* the authority hidden ("user:pass" as
				   "***"), and as given */
};

/* an object a listing named: opened from it, without a request */
struct known {
	char *url, *etag, *name;
	uint64_t size;
	int64_t mtime;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct known *known;
static size_t nknown;
static struct opened *opened;
static size_t nopened;
static struct shadow *shadows;
static size_t nshadows;
static struct hidden *hiddens;
static size_t nhidden;

static void *grow(void *v, size_t n, size_t each)
{
	return (n & (n - 1)) ? v : realloc(v, (n ? 2 * n : 4) * each);
}

/* The end of @url's authority ("scheme://auth"), or NULL. */
static const char *auth_end(const char *url)
{
	const char *p = strstr(url, "://");

	return p ? p + 3 + strcspn(p + 3, "/?#") : NULL;
}

const char *srcr_shown(const char *url, char *out, size_t size)
{
	const char *ue = auth_end(url), *oe;
	struct hidden *h;

	rmt_redact(url, out, size);
	oe = auth_end(out);
	if (!ue || !oe || !strcmp(out, url))
		return out;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nhidden; i++)
		if (strlen(hiddens[i].shown) == (size_t)(oe - out) &&
		    !memcmp(hiddens[i].shown, out, oe - out))
			goto out;
	h = grow(hiddens, nhidden, sizeof(*h));
	if (h) {
		hiddens = h;
		h[nhidden].shown = strndup(out, oe - out);
		h[nhidden].real = strndup(url, ue - url);
		if (h[nhidden].shown && h[nhidden].real)
			nhidden++;
	}
out:
	pthread_mutex_unlock(&lock);
	return out;
}

/* @url with a hidden authority put back (malloc'd), or NULL. */
static char *real_url(const char *url)
{
	const char *e = auth_end(url);
	char *r = NULL;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; e && i < nhidden; i++) {
		size_t n = strlen(hiddens[i].shown);

		if (n == (size_t)(e - url) && !memcmp(url, hiddens[i].shown, n)) {
			r = malloc(strlen(hiddens[i].real) + strlen(e) + 1);
			if (r)
				sprintf(r, "%s%s", hiddens[i].real, e);
			pthread_mutex_unlock(&lock);
			return r;
		}
	}
	pthread_mutex_unlock(&lock);
	return strdup(url);
}

char *srcr_join(const char *root, const char *name, size_t len)
{
	size_t rl = strlen(root);
	char *u = malloc(rl + 1 + 3 * len + 1), *q;

	if (!u)
		return NULL;
	memcpy(u, root, rl);
	q = u + rl;
	if (rl && root[rl - 1] != '/')
		*q++ = '/';
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)name[i];

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~/", ch))
			*q++ = (char)ch;
		else
			q += sprintf(q, "%%%02X", ch);
	}
	*q = 0;
	return u;
}

static int obj_read(void *obj, void *buf, size_t len, uint64_t off,
		    struct diag *d)
{
	const char *name = rmt_name(obj);
	char *at;
	int rc = rmt_pread(obj, buf, len, off, d);
	size_t n = strlen(name);

	/* a line about the checkpoint itself names it once, in front */
	if (rc && d && d->err && d->path && !strcmp(d->path, name) &&
	    (at = strstr(d->msg, name)) && !strncmp(at + n, ": ", 2))
		memmove(at, at + n + 2, strlen(at + n + 2) + 1);
	return rc;
}

/* The stand-in of open object @o (which it takes): fd or -errno. */
static int stand_in(struct rmt_obj *o, struct diag *d)
{
	struct timespec t[2] = { { rmt_mtime(o), 0 }, { rmt_mtime(o), 0 } };
	int mfd = memfd_create("ptfs-remote", MFD_CLOEXEC), fd, rc;
	char p[64];

	if (mfd < 0 || ftruncate(mfd, (off_t)rmt_size(o)) ||
	    fchmod(mfd, 0444) || futimens(mfd, t)) {
		rc = diag_errno(d, -errno, "%s: cannot make its stand-in: %s",
				rmt_name(o), strerror(errno));
		goto fail;
	}
	snprintf(p, sizeof(p), "/proc/self/fd/%d", mfd);
	fd = open(p, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		rc = diag_errno(d, -errno, "%s: cannot reopen its stand-in "
				"(is /proc mounted?): %s", rmt_name(o),
				strerror(errno));
		goto fail;
	}
	close(mfd);
	rc = io_back(fd, &(struct io_backing){ obj_read, o, rmt_size(o) });
	if (rc) {
		close(fd);
		rmt_close(o);
		return diag_errno(d, rc, "%s: %s", rmt_name(o), strerror(-rc));
	}
	return fd;
fail:
	if (mfd >= 0)
		close(mfd);
	rmt_close(o);
	return rc;
}

/* The stand-in of object @url, opened now or before: fd (caller owns),
 * or -errno with @d set (-ENOENT: none there). */
static int open_object(const char *url, struct diag *d)
{
	struct rmt_obj *o;
	char *real;
	int fd = -1, rc;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nopened && fd < 0; i++)
		if (!strcmp(opened[i].url, url))
			fd = fcntl(opened[i].fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&lock);
	if (fd >= 0)
		return fd;
	real = real_url(url);
	if (!real)
		return diag_nomem(d);
	rc = 1;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nknown && rc == 1; i++)
		if (!strcmp(known[i].url, url))
			rc = rmt_open_listed(real, &(struct rmt_entry){
				known[i].name, known[i].size, known[i].etag,
				known[i].mtime }, &o, d);
	pthread_mutex_unlock(&lock);
	if (rc == 1)
		rc = rmt_open(real, &o, d);
	free(real);
	if (rc)
		return rc;
	fd = stand_in(o, d);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&lock);
	struct opened *v = grow(opened, nopened, sizeof(*v));

	if (v) {
		opened = v;
		v[nopened].url = strdup(url);
		v[nopened].fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (v[nopened].url && v[nopened].fd >= 0)
			nopened++;
	}
	pthread_mutex_unlock(&lock);
	return fd;
}

/* ---- shadows ---- */

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

/* Note object @e of folder @url: open_object() needs no request. */
static int know(const char *url, const struct rmt_entry *e)
{
	struct known *v;
	char *u = srcr_join(url, e->name, strlen(e->name));
	int rc = -ENOMEM;

	pthread_mutex_lock(&lock);
	v = u ? grow(known, nknown, sizeof(*v)) : NULL;
	if (v) {
		known = v;
		v[nknown] = (struct known){ u, strdup(e->etag),
					    strdup(e->name), e->size,
					    e->mtime };
		if (v[nknown].etag && v[nknown].name) {
			nknown++;
			rc = 0;
		} else {
			free(v[nknown].etag);
			free(v[nknown].name);
		}
	}
	pthread_mutex_unlock(&lock);
	if (rc)
		free(u);
	return rc;
}

static int listed(void *arg, const struct rmt_entry *e)
{
	struct lister *l = arg;
	const char *name = e->name;
	uint64_t size = e->size;
	size_t len = strlen(name);
	int rc;

	/* S3 keys may hold what a path may not: those are no members */
	if (!len || name[len - 1] == '/' || *name == '/' ||
	    strstr(name, "//") || !strcmp(name, ".") || !strcmp(name, "..") ||
	    !strncmp(name, "./", 2) || !strncmp(name, "../", 3) ||
	    strstr(name, "/./") || strstr(name, "/../"))
		return 0;
	if (++l->n > 100000)
		return -E2BIG;
	rc = place(l->dir, name, size);
	if (rc == -EEXIST)
		return 0;
	return rc ? rc : know(l->url, e);
}

/* Is object @url/@name there?  1 (a placeholder made in @dir), 0, or
 * -errno with @d set. */
static int probe_one(const char *url, const char *dir, const char *name,
		     struct diag *d)
{
	char *u = srcr_join(url, name, strlen(name));
	struct stat st;
	struct diag q;
	int fd;

	if (!u)
		return diag_nomem(d);
	diag_init(&q, NULL);
	fd = open_object(u, &q);
	free(u);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return diag_set(d, q.err, q.off, "%s", q.msg);
	if (fstat(fd, &st) || place(dir, name, (uint64_t)st.st_size)) {
		close(fd);
		return diag_errno(d, -EIO, "%s: cannot note %s", dir, name);
	}
	close(fd);
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
		char *r = real_url(real);

		free(real);
		real = r;
		rc = r ? rmt_list(r, listed, &l, d) : diag_nomem(d);
	}
	free(real);
	if (rc == -ENOTSUP && !diag_failed(d))
		rc = probing ? probe(url, path, d) : 0;
	pthread_mutex_lock(&lock);
	v = rc ? NULL : grow(shadows, nshadows, sizeof(*v));
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

/* @q's failure into @d, which names @url (the user's path) already:
 * a line that begins with it, or with it and a '/', is said without. */
static int said(struct diag *d, const struct diag *q, const char *url)
{
	size_t n = strlen(url);
	const char *m = q->msg;

	while (n && url[n - 1] == '/')
		n--;
	if (!strncmp(m, url, n)) {
		size_t k = n + (m[n] == '/');

		if (!strncmp(m + k, ": ", 2))
			m += k + 2;
	}
	return diag_set(d, q->err, q->off, "%s", m);
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
		if (fd >= 0 || (fd == -ENOENT && s3)) {
			if (fd >= 0)
				return fd;
		} else {
			return said(d, &q, url);
		}
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

int srcr_open_object(const char *url, struct stat *st, unsigned quiet,
		     struct diag *d)
{
	struct diag q;
	int fd;

	diag_init(&q, NULL);
	fd = open_object(url, &q);
	if (fd == -ENOENT && quiet)
		return fd;
	if (fd < 0)
		return diag_set(d, q.err, q.off, "%s", q.msg);
	if (fstat(fd, st)) {
		int rc = -errno;

		close(fd);
		return diag_errno(d, rc, "%s", strerror(-rc));
	}
	return fd;
}
