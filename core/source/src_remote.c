/*
 * src_remote.c - remote objects as the source layer's files
 * (src_remote.h): stand-in descriptors, URLs as names and as shown.
 * Folders are src_shadow.c's.
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
#include "util/sbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* the URLs opened, the authorities hidden */
struct opened {
	char *url;
	int fd;
};
struct hidden {
	char *shown, *real;	/* the authority hidden ("user:pass" as
				   "***"), and as given */
};

/* an object a listing named: opened from it, without a request */
struct known {
	char *url, *etag;
	uint64_t size;
	int64_t mtime;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct known *known;
static size_t nknown;
static struct opened *opened;
static size_t nopened;
static struct hidden *hiddens;
static size_t nhidden;

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
	h = srcr_grow(hiddens, nhidden, sizeof(*h));
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

char *srcr_real(const char *url)
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
	struct sbuf b = { 0 };
	size_t rl = strlen(root);

	sb_add(&b, root, rl);
	if (rl && root[rl - 1] != '/')
		sb_add(&b, "/", 1);
	sb_pct(&b, name, len, true);
	return sb_detach(&b, NULL);
}

void srcr_unname(char *msg, const char *url)
{
	size_t n = strlen(url), k;
	char *at;

	while (n && url[n - 1] == '/')
		n--;
	for (at = msg; n && *at && strncmp(at, url, n); at++)
		;
	if (!n || !*at)
		return;
	k = n + (at[n] == '/');
	if (!strncmp(at + k, ": ", 2))
		memmove(at, at + k + 2, strlen(at + k + 2) + 1);
}

static int obj_read(void *obj, void *buf, size_t len, uint64_t off,
		    struct diag *d)
{
	int rc = rmt_pread(obj, buf, len, off, d);

	/* a line about the checkpoint itself names it once, in front */
	if (rc && d && d->err && d->path && !strcmp(d->path, rmt_name(obj)))
		srcr_unname(d->msg, rmt_name(obj));
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
	real = srcr_real(url);
	if (!real)
		return diag_nomem(d);
	rc = 1;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nknown && rc == 1; i++)
		if (!strcmp(known[i].url, url))
			rc = rmt_open_listed(real, &(struct rmt_entry){
				.size = known[i].size, .etag = known[i].etag,
				.mtime = known[i].mtime }, &o, d);
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
	struct opened *v = srcr_grow(opened, nopened, sizeof(*v));

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

int srcr_know(const char *url, const struct rmt_entry *e)
{
	struct known *v;
	char *u = srcr_join(url, e->name, strlen(e->name));
	int rc = -ENOMEM;

	pthread_mutex_lock(&lock);
	v = u ? srcr_grow(known, nknown, sizeof(*v)) : NULL;
	if (v) {
		known = v;
		v[nknown] = (struct known){ u, strdup(e->etag), e->size,
					    e->mtime };
		if (v[nknown].etag) {
			nknown++;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&lock);
	if (rc)
		free(u);
	return rc;
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

