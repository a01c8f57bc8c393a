/*
 * io.c - whole reads and writes, directory fsync and names beside a file
 * (see io.h).
 */
#include "util/io.h"
#include "diag/diag.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int io_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  off + done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		done += n;
	}
	return 0;
}

/* Linux moves at most about 2 GiB a call: ask for 1 at most */
#define PREAD_CHUNK	(1u << 30)

int io_pread_diag(int fd, void *buf, size_t len, uint64_t off,
		  const char *what, struct diag *d)
{
	size_t done = 0;

	while (done < len) {
		size_t want = len - done < PREAD_CHUNK ? len - done :
			      PREAD_CHUNK;
		ssize_t n = pread(fd, (char *)buf + done, want, off + done);
		int err = errno;

		if (n < 0 && err == EINTR)
			continue;
		if (n < 0)
			return diag_errno(d, -err, "cannot read %zu bytes at "
					  "offset 0x%llx: %s", want,
					  (unsigned long long)(off + done),
					  strerror(err));
		if (n == 0)
			return diag_corrupt(d, off + done, "file ends inside "
					    "%s, %zu bytes short (was it "
					    "truncated?)", what ? what :
					    "the data", len - done);
		done += (size_t)n;
	}
	return 0;
}

int io_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
				   off + done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += n;
	}
	return 0;
}

int io_fsync_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 :
				    (size_t)(slash - path)) : strdup(".");
	int fd, rc = 0;

	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		rc = -errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

char *io_beside(const char *path, const char *suffix)
{
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
	size_t len = strlen(path) + strlen(suffix) + 2;
	char *s = malloc(len);

	if (s)
		snprintf(s, len, "%.*s.%s%s", (int)dlen, path,
			 slash ? slash + 1 : path, suffix);
	return s;
}
