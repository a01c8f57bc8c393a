/*
 * ckpt_save.c - write a checkpoint back safely: into a temporary file
 * beside the target (named in the overlay's journal first, when it asks),
 * fsync'd, checked, renamed over the target, the directory fsync'd.  The
 * temporary starts as a clone of the checkpoint when the file system can
 * (ckpt_write_into()).  The protocol is docs/editing.md's "Safety".
 */
#define _XOPEN_SOURCE 700	/* realpath */
#include "ckpt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/io.h"
#include "util/tmpreg.h"

/*
 * Where ckpt_save() writes: @target, or the file a symbolic link @target
 * points to; never a device, fifo, socket or directory.  *@out malloc'd.
 */
static int save_target(const char *target, char **out, struct diag *d)
{
	struct stat st;
	char *real;

	*out = NULL;
	if (lstat(target, &st)) {
		if (errno != ENOENT)
			return diag_errno(d, -errno, "%s: %s", target,
					  strerror(errno));
		*out = strdup(target);
		return *out ? 0 : diag_nomem(d);
	}
	if (S_ISLNK(st.st_mode)) {
		real = realpath(target, NULL);
		if (!real)
			return diag_errno(d, -errno, "%s: a symbolic link that "
					  "cannot be followed (%s); refusing "
					  "to replace it", target,
					  strerror(errno));
		if (stat(real, &st) ? errno != ENOENT : !S_ISREG(st.st_mode)) {
			free(real);
			return diag_errno(d, -EINVAL, "%s: links to something "
					  "that is not a regular file; "
					  "refusing to replace it", target);
		}
		*out = real;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return diag_errno(d, -EINVAL, "%s: not a regular file (a "
				  "device, fifo, socket or directory); "
				  "refusing to replace it", target);
	*out = strdup(target);
	return *out ? 0 : diag_nomem(d);
}

/* The temporary file beside @target: tagged (O_EXCL) or mkstemp(). */
static int save_tmp(const char *target, const char *tag, char **tmp)
{
	char sfx[64];
	int fd;

	snprintf(sfx, sizeof(sfx), CKPT_TMP_SUFFIX "%s", tag ? tag : "XXXXXX");
	*tmp = io_beside(target, sfx);
	if (!*tmp)
		return -ENOMEM;
	if (!tag)
		fd = mkstemp(*tmp);
	else
		fd = open(*tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
			  O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

int ckpt_save(struct ckpt *c, const char *target,
	      const struct ckpt_write_opts *o, const struct stat *like,
	      int (*before)(void *arg, const struct stat *st, struct diag *d),
	      void *arg, struct diag *d)
{
	/* ".NAME.ptfs-new.XXXXXX" beside the target: same file system, so
	   rename works; with a tag, the overlay journals the name first and
	   the next mount removes what a killed write-back left */
	char *real, *tmp = NULL;
	struct stat st;
	int fd, rc = save_target(target, &real, d);

	if (rc)
		return rc;
	if (o->tmp_tag && o->check) {
		char sfx[64], *name;

		/* the name is known before the file exists: journal it */
		snprintf(sfx, sizeof(sfx), CKPT_TMP_SUFFIX "%s", o->tmp_tag);
		name = io_beside(real, sfx);
		rc = name ? o->check(o->check_arg, CKPT_SAVE_START, name, NULL,
				     d) : diag_nomem(d);
		free(name);
		if (rc)
			goto out_free;
	}
	fd = save_tmp(real, o->tmp_tag, &tmp);
	if (fd == -EEXIST && o->tmp_tag) {
		/* ours: the same journal named it for a write-back that did
		   not finish (the overlay removes such files at mount) */
		(void)unlink(tmp);
		free(tmp);
		fd = save_tmp(real, o->tmp_tag, &tmp);
	}
	if (fd < 0) {
		rc = fd == -ENOMEM ? diag_nomem(d) :
		     diag_errno(d, fd, "cannot create a temporary file beside "
				"%s: %s", strcmp(target, c->path) ? target :
				"it", strerror(-fd));
		goto out_free;
	}
	tmpreg_add(tmp);	/* a signal removes it (ptrepack's ^C) */
	rc = ckpt_write_into(c, fd, o, true, d);
	if (!rc && ((like && !geteuid() &&
		     fchown(fd, like->st_uid, like->st_gid)) ||
		    fchmod(fd, like ? like->st_mode & 07777 : 0644)))
		rc = diag_errno(d, -errno, "%s: %s", tmp, strerror(errno));
	if (!rc && (fsync(fd) || fstat(fd, &st)))
		rc = diag_errno(d, -errno, "%s: %s", tmp, strerror(errno));
	if (!rc && o->check)
		rc = o->check(o->check_arg, CKPT_SAVE_RENAME, tmp, &st, d);
	if (!rc && before)
		rc = before(arg, &st, d);
	if (!rc && rename(tmp, real))
		rc = diag_errno(d, -errno, "%s: cannot replace it: %s", real,
				strerror(errno));
	if (!rc && (rc = io_fsync_dir_of(real)))
		rc = diag_errno(d, rc, "%s: fsync of its directory: %s",
				real, strerror(-rc));
	close(fd);
	if (rc)
		unlink(tmp);
	tmpreg_del(tmp);
out_free:
	free(tmp);
	free(real);
	return rc;
}
