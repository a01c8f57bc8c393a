/*
 * source.c - open a checkpoint's member files beneath its root (source.h).
 *
 * The walk: each directory component is opened with
 * O_DIRECTORY | O_NOFOLLOW from the one before, so a symlinked directory
 * fails (ELOOP or ENOTDIR) and is named; the last component is fstatat'ed
 * (following a link: its target must be a regular file) before it is
 * opened O_NONBLOCK and fstat'ed again, so neither a fifo nor a device is
 * ever opened in a way that waits.  Directories are opened once per
 * source and kept: write-back creates, renames and unlinks in them
 * (src_dir_of()), never through a path.
 *
 * A root that is a URL is a remote folder (src_remote.c): its members
 * are stand-ins of its objects, opened by URL with the same name rules;
 * its directory is a shadow listing for the formats' bids, and nothing
 * is ever written to it (src_dir_of(): EROFS).
 */
#define _GNU_SOURCE	/* memrchr */
#include "source.h"

#include "diag/diag.h"
#include "remote/remote.h"
#include "src_remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct src_dir {
	char *name;		/* beneath the root, "" for the root */
	int fd;
};

struct src {
	char *root;		/* a URL as shown (src_remote.c) */
	const char *shadow;	/* a remote root's listing, or NULL */
	struct src_dir *dirs;	/* [0] the root */
	uint32_t ndirs;
	struct src_member *m;
	char **names;		/* each member's name block (owned) */
	uint32_t n, cap;
};

int src_new(const char *root, int fd, struct src **out, struct diag *d)
{
	struct src *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s || !(s->root = strdup(root)) ||
	    !(s->dirs = calloc(1, sizeof(*s->dirs))) ||
	    !(s->dirs[0].name = strdup(""))) {
		src_free(s);
		if (fd >= 0)
			close(fd);
		return diag_nomem(d);
	}
	s->dirs[0].fd = -1;
	s->ndirs = 1;
	if (rmt_is_url(root)) {
		char shown[4096];
		size_t n;

		srcr_shown(root, shown, sizeof(shown));
		for (n = strlen(shown); n && shown[n - 1] == '/'; n--)
			shown[n - 1] = 0;
		free(s->root);
		s->root = strdup(shown);
		s->shadow = s->root ? srcr_shadow(s->root, d) : NULL;
		if (!s->shadow) {
			if (fd >= 0)
				close(fd);
			if (!s->root)
				diag_nomem(d);
			src_free(s);
			return d->err;
		}
		if (fd < 0)
			fd = open(s->shadow, O_RDONLY | O_DIRECTORY |
				  O_CLOEXEC);
	} else if (fd < 0)
		fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int rc = diag_errno(d, -errno, "%s: %s", root, strerror(errno));

		src_free(s);
		return rc;
	}
	s->dirs[0].fd = fd;
	*out = s;
	return 0;
}

int src_root_fd(const struct src *s)
{
	return s->dirs[0].fd;
}

const char *src_root(const struct src *s)
{
	return s->root;
}

uint32_t src_count(const struct src *s)
{
	return s->n;
}

const struct src_member *src_at(const struct src *s, uint32_t i)
{
	return &s->m[i];
}

uint32_t src_alias(const struct src *s, uint32_t i)
{
	return s->m[i].alias;
}

/* What is wrong with @name as a member's name, or NULL. */
const char *src_bad_name(const char *name, size_t len)
{
	size_t i = 0;

	if (!len)
		return "is empty";
	if (memchr(name, 0, len))
		return "holds a NUL byte";
	if (name[0] == '/')
		return "is absolute: members lie beneath the folder";
	while (i < len) {
		size_t j = i;

		while (j < len && name[j] != '/')
			j++;
		if (j == i)
			return "has an empty component";
		if (j - i == 2 && !memcmp(name + i, "..", 2))
			return "has a '..' component: members lie beneath "
			       "the folder";
		if (j - i == 1 && name[i] == '.')
			return "has a '.' component";
		i = j + 1;
		if (j + 1 == len)
			return "ends in '/'";
	}
	return NULL;
}

/* The directory of @name (its first @dlen bytes, without the '/'),
 * opened component by component with O_NOFOLLOW; the source keeps it. */
static int walk(struct src *s, const char *name, size_t dlen, uint64_t at,
		unsigned flags, struct diag *d)
{
	struct src_dir *v;
	int fd = s->dirs[0].fd;
	size_t i = 0;

	if (!dlen)
		return s->dirs[0].fd;
	for (uint32_t k = 1; k < s->ndirs; k++)
		if (strlen(s->dirs[k].name) == dlen &&
		    !memcmp(s->dirs[k].name, name, dlen))
			return s->dirs[k].fd;
	while (i < dlen) {
		size_t j = i;
		char comp[256];
		struct stat st;
		int nfd;

		while (j < dlen && name[j] != '/')
			j++;
		if (j - i >= sizeof(comp)) {
			if (fd != s->dirs[0].fd)
				close(fd);
			return diag_set(d, -ENAMETOOLONG, at, "'%.*s': a name "
					"component is too long", (int)dlen,
					name);
		}
		memcpy(comp, name + i, j - i);
		comp[j - i] = 0;
		nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			     O_CLOEXEC);
		if (nfd < 0) {
			int e = errno;
			bool lnk = !fstatat(fd, comp, &st,
					    AT_SYMLINK_NOFOLLOW) &&
				   S_ISLNK(st.st_mode);

			if (fd != s->dirs[0].fd)
				close(fd);
			if (e == ENOENT && (flags & SRC_OPTIONAL))
				return -ENOENT;
			if (lnk)
				return diag_set(d, -ELOOP, at, "'%.*s': '%.*s' "
						"is a symbolic link: a member's "
						"folders must lie beneath the "
						"checkpoint's, as real folders",
						(int)dlen, name, (int)j,
						name);
			return diag_set(d, -e, at, "%.*s: %s", (int)j, name,
					strerror(e));
		}
		if (fd != s->dirs[0].fd)
			close(fd);
		fd = nfd;
		i = j + 1;
	}
	v = realloc(s->dirs, (s->ndirs + 1) * sizeof(*v));
	if (!v) {
		close(fd);
		return diag_nomem(d);
	}
	s->dirs = v;
	v[s->ndirs].name = strndup(name, dlen);
	if (!v[s->ndirs].name) {
		close(fd);
		return diag_nomem(d);
	}
	v[s->ndirs++].fd = fd;
	return fd;
}

static const char *kind_of(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a fifo" :
	       S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" :
	       "not a file";
}

/*
 * Open @name in @dfd (AT_FDCWD: a path) without blocking: its kind is
 * checked by stat before the open and by fstat after it, so neither a
 * fifo nor a device is ever opened in a way that waits.  A regular file,
 * or with @dir_ok a folder too.  The fd (O_RDONLY, blocking reads from
 * then on), or -errno of the call that failed, or -EINVAL with *@kind set
 * when it is of another kind (*@st says which).
 */
static int open_kind(int dfd, const char *name, bool dir_ok, struct stat *st,
		     bool *kind)
{
	int fd;

	*kind = false;
	if (fstatat(dfd, name, st, 0))
		return -errno;
	if (!S_ISREG(st->st_mode) && !(dir_ok && S_ISDIR(st->st_mode))) {
		*kind = true;
		return -EINVAL;
	}
	fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st)) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	if (!S_ISREG(st->st_mode) && !(dir_ok && S_ISDIR(st->st_mode))) {
		close(fd);
		*kind = true;
		return -EINVAL;
	}
	(void)fcntl(fd, F_SETFL, 0);	/* back to blocking reads */
	return fd;
}

/* Open @leaf in @dfd as a regular file without blocking: fd or -errno. */
static int open_reg(int dfd, const char *leaf, const char *shown,
		    uint64_t at, unsigned flags, struct stat *st,
		    struct diag *d)
{
	bool kind;
	int fd = open_kind(dfd, leaf, false, st, &kind);

	if (fd >= 0 || (fd == -ENOENT && (flags & SRC_OPTIONAL)))
		return fd;
	if (kind)
		return diag_set(d, -EINVAL, at, "'%s' is %s, not a regular "
				"file", shown, kind_of(st->st_mode));
	return diag_set(d, fd, at, "%s: %s", shown, strerror(-fd));
}

static int add(struct src *s, const char *name, size_t len, uint64_t at,
	       unsigned flags, struct diag *d);

/* Member @name (@len bytes) of a remote root: its object's stand-in. */
static int open_remote(struct src *s, const char *name, size_t len,
		       uint64_t at, unsigned flags, struct stat *st,
		       struct diag *d)
{
	char *url = srcr_join(s->root, name, len);
	struct diag q;
	int fd;

	if (!url)
		return diag_nomem(d);
	diag_init(&q, NULL);
	fd = srcr_open_object(url, st, flags & SRC_OPTIONAL, &q);
	free(url);
	if (fd < 0 && q.err)
		diag_set(d, q.err, at, "%s", q.msg);
	return fd;
}

int src_add(struct src *s, const char *name, size_t len, uint64_t at,
	    unsigned flags, struct diag *d)
{
	struct diag quiet;

	if (flags & SRC_QUIET) {
		diag_init(&quiet, NULL);
		d = &quiet;
	}
	return add(s, name, len, at, flags, d);
}

static int add(struct src *s, const char *name, size_t len, uint64_t at,
	       unsigned flags, struct diag *d)
{
	const char *why = src_bad_name(name, len), *slash;
	struct src_member *m;
	struct stat st;
	size_t dlen, rl;
	char *path;
	int dfd, fd;

	if (why)
		return diag_corrupt(d, at, "'%.*s' %s", (int)len, name, why);
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? 2 * s->cap : 8;

		char **v = realloc(s->names, cap * sizeof(*v));

		if (v)
			s->names = v;
		m = v ? realloc(s->m, cap * sizeof(*m)) : NULL;
		if (!m)
			return diag_nomem(d);
		s->m = m;
		s->cap = cap;
	}
	slash = memrchr(name, '/', len);
	dlen = slash ? (size_t)(slash - name) : 0;
	dfd = s->shadow ? s->dirs[0].fd : walk(s, name, dlen, at, flags, d);
	if (dfd < 0)
		return dfd;
	rl = strlen(s->root);
	path = malloc(rl + 1 + len + 1 + len + 1);
	if (!path)
		return diag_nomem(d);
	/* one block: "name\0root/name\0" */
	memcpy(path, name, len);
	path[len] = 0;
	memcpy(path + len + 1, s->root, rl);
	path[len + 1 + rl] = '/';
	memcpy(path + len + 2 + rl, name, len);
	path[2 * len + 2 + rl] = 0;
	fd = s->shadow ? open_remote(s, path, len, at, flags, &st, d) :
	     open_reg(dfd, path + (slash ? dlen + 1 : 0), path, at, flags,
		      &st, d);
	if (fd < 0) {
		free(path);
		return fd;
	}
	s->names[s->n] = path;
	m = &s->m[s->n];
	memset(m, 0, sizeof(*m));
	m->name = path;
	m->leaf = path + (slash ? dlen + 1 : 0);
	m->path = path + len + 1;
	m->fd = fd;
	m->dfd = dfd;
	m->uid = st.st_uid;
	m->gid = st.st_gid;
	m->mode = st.st_mode & 07777;
	m->size = (uint64_t)st.st_size;
	src_ident_of(&st, &m->id);
	m->alias = s->n;
	for (uint32_t k = 0; k < s->n; k++)
		if (s->m[k].id.dev == m->id.dev &&
		    s->m[k].id.ino == m->id.ino) {
			m->alias = k;
			break;
		}
	return (int)s->n++;
}

void src_access_narrow(struct src_access *a, const struct src_member *m)
{
	uint32_t o = a->mode & m->mode & 07;

	a->mode &= m->mode | ~0777u;
	if (m->uid != a->uid)
		a->mode = (a->mode & ~0700u) | o << 6;
	if (m->gid != a->gid)
		a->mode = (a->mode & ~0070u) | o << 3;
}

int src_fresh(const struct src *s, uint32_t i, struct diag *d)
{
	return src_ident_check(s->m[i].fd, &s->m[i].id, d);
}

int src_same(const struct src *s, uint32_t i, struct diag *d)
{
	const struct src_member *m = &s->m[i];
	struct stat st;

	if (s->shadow)		/* its ETag is checked by every read */
		return 0;
	if (fstatat(m->dfd, m->leaf, &st, 0))
		return diag_errno(d, errno == ENOENT ? -ESTALE : -errno,
				  "%s: %s", m->path, strerror(errno));
	if ((uint64_t)st.st_dev != m->id.dev ||
	    (uint64_t)st.st_ino != m->id.ino)
		return diag_errno(d, -ESTALE, "%s: changed since it was "
				  "mounted: another file", m->path);
	return 0;
}

int src_dir_of(struct src *s, const char *name, const char **leaf,
	       struct diag *d)
{
	size_t len = strlen(name);
	const char *why = src_bad_name(name, len), *slash;

	if (why)
		return diag_corrupt(d, DIAG_NO_OFFSET, "'%s' %s", name, why);
	if (s->shadow)
		return diag_errno(d, -EROFS, "%s: a remote checkpoint is "
				  "read-only", s->root);
	slash = strrchr(name, '/');
	*leaf = slash ? slash + 1 : name;
	return walk(s, name, slash ? (size_t)(slash - name) : 0,
		    DIAG_NO_OFFSET, 0, d);
}

void src_free(struct src *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n; i++) {
		close(s->m[i].fd);
		free(s->names[i]);
	}
	for (uint32_t k = 0; k < s->ndirs; k++) {
		if (s->dirs[k].fd >= 0)
			close(s->dirs[k].fd);
		free(s->dirs[k].name);
	}
	if (s->shadow)
		srcr_unshadow(s->shadow);
	free(s->dirs);
	free(s->names);
	free(s->m);
	free(s->root);
	free(s);
}

int src_open_path(const char *path, struct stat *st, struct diag *d)
{
	bool kind;
	int fd;

	if (rmt_is_url(path))
		return srcr_open(path, st, d);
	fd = open_kind(AT_FDCWD, path, true, st, &kind);
	if (fd >= 0)
		return fd;
	if (kind)
		return diag_errno(d, -EINVAL, "%s, not a regular file or a "
				  "folder", kind_of(st->st_mode));
	return diag_errno(d, fd, "%s", strerror(-fd));
}

bool src_is_url(const char *path)
{
	return rmt_is_url(path);
}

const char *src_shown(const char *path, char *out, size_t size)
{
	if (rmt_is_url(path))
		return srcr_shown(path, out, size);
	snprintf(out, size, "%s", path);
	return out;
}

void src_hide_urls(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char shown[4096];
		size_t n;

		if (!rmt_is_url(argv[i]))
			continue;
		srcr_shown(argv[i], shown, sizeof(shown));
		n = strlen(shown);
		if (n <= strlen(argv[i])) {	/* ps shows it hidden too */
			memcpy(argv[i], shown, n + 1);
		} else {
			char *copy = strdup(shown);	/* the process's */

			if (copy)
				argv[i] = copy;
		}
	}
}
