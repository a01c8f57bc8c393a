/*
 * ckpt_newdir.c - a new output directory built under a temporary name
 * and renamed into place (ckpt_newdir.h says the steps).
 */
#define _GNU_SOURCE		/* getrandom, O_DIRECTORY */
#include "ckpt_newdir.h"
#include "ckpt_write.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/io.h"

/* OUT may be absent or an empty directory. */
static int target_ok(const char *out, const char *what, struct diag *d)
{
	struct stat st;
	struct dirent *de;
	DIR *dir;

	if (lstat(out, &st))
		return errno == ENOENT ? 0 :
		       diag_errno(d, -errno, "%s: %s", out, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return diag_errno(d, -EEXIST, "%s: exists and is not a "
				  "directory: %s is a new directory", out,
				  what);
	dir = opendir(out);
	if (!dir)
		return diag_errno(d, -errno, "%s: %s", out, strerror(errno));
	while ((de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			break;
	closedir(dir);
	return de ? diag_errno(d, -ENOTEMPTY, "%s: a directory that is not "
			       "empty: %s goes into a new or empty one", out,
			       what) : 0;
}

/* ".OUT.ptfs-new.XXXXXX" beside @out, mode 0777 & ~umask.  0 or -errno. */
static int make_tmp(const char *out, char **tmp)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[6];
	char *x;

	*tmp = io_beside(out, CKPT_TMP_SUFFIX "XXXXXX");
	if (!*tmp)
		return -ENOMEM;
	x = *tmp + strlen(*tmp) - 6;
	for (int tries = 0; tries < 100; tries++) {
		if (getrandom(r, sizeof(r), 0) != sizeof(r))
			break;
		for (int i = 0; i < 6; i++)
			x[i] = abc[r[i] % (sizeof(abc) - 1)];
		if (!mkdir(*tmp, 0777))
			return 0;
		if (errno != EEXIST)
			break;
	}
	free(*tmp);
	*tmp = NULL;
	return errno && errno != EEXIST ? -errno : -EEXIST;
}

int newdir_begin(struct newdir *nd, const char *dst, const char *what,
		 struct diag *d)
{
	size_t n;
	int rc;

	*nd = (struct newdir){ .dfd = -1 };
	nd->out = strdup(dst);
	if (!nd->out)
		return diag_nomem(d);
	n = strlen(nd->out);
	while (n > 1 && nd->out[n - 1] == '/')	/* "OUT/" names OUT */
		nd->out[--n] = 0;
	rc = target_ok(nd->out, what, d);
	if (rc)
		return rc;
	rc = make_tmp(nd->out, &nd->tmp);
	if (rc)
		return diag_errno(d, rc, "cannot make a directory beside %s: "
				  "%s", nd->out, strerror(-rc));
	nd->dfd = open(nd->tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		       O_CLOEXEC);
	if (nd->dfd < 0)
		return diag_errno(d, -errno, "%s: %s", nd->tmp,
				  strerror(errno));
	return 0;
}

int newdir_put(struct newdir *nd, const char *name, const void *p,
	       size_t len, unsigned mode, struct diag *d)
{
	int fd = openat(nd->dfd, name, O_WRONLY | O_CREAT | O_EXCL |
			O_NOFOLLOW | O_CLOEXEC, mode);
	int rc = fd < 0 ? -errno : io_pwrite_full(fd, p, len, 0);

	if (!rc && fsync(fd))
		rc = -errno;
	if (fd >= 0)
		close(fd);
	return rc ? diag_errno(d, rc, "%s: %s", name, strerror(-rc)) : 0;
}

int newdir_commit(struct newdir *nd, struct diag *d)
{
	int rc;

	if (fsync(nd->dfd))
		return diag_errno(d, -errno, "%s: %s", nd->tmp,
				  strerror(errno));
	if (rename(nd->tmp, nd->out))
		return diag_errno(d, -errno, "cannot rename the new directory "
				  "to %s: %s", nd->out, strerror(errno));
	nd->committed = true;
	rc = io_fsync_dir_of(nd->out);
	return rc ? diag_errno(d, rc, "%s: fsync of its directory: %s",
			       nd->out, strerror(-rc)) : 0;
}

void newdir_end(struct newdir *nd)
{
	if (!nd->committed && nd->dfd >= 0) {
		/* ours, made by newdir_begin(): all it holds is ours too */
		int fd = openat(nd->dfd, ".", O_RDONLY | O_DIRECTORY |
				O_CLOEXEC);
		DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *de;

		if (!dir && fd >= 0)
			close(fd);
		while (dir && (de = readdir(dir)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(nd->dfd, de->d_name, 0);
		if (dir)
			closedir(dir);
		rmdir(nd->tmp);
	}
	if (nd->dfd >= 0)
		close(nd->dfd);
	free(nd->tmp);
	free(nd->out);
	*nd = (struct newdir){ .dfd = -1 };
}
