/*
 * io.c - whole reads and writes, range copies, directory fsync and names
 * beside a file (see io.h).
 */
#define _GNU_SOURCE 1	/* copy_file_range */
#include "util/io.h"
#include "diag/diag.h"

#include <stdatomic.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

/*
 * The stand-ins: a list that only grows (a process opens a few remote
 * objects and keeps them), pushed at its head with a release store, so
 * readers walk it without a lock.  io_nbacked is 0 in every process that
 * opened none: then a read costs no fstat.
 */
struct io_stand {
	struct io_stand *next;
	dev_t dev;
	ino_t ino;
	int keep;		/* holds the inode: never reused */
	struct io_backing b;
};

static struct io_stand *_Atomic io_stands;
static _Atomic unsigned io_nbacked;

int io_back(int fd, const struct io_backing *b)
{
	struct io_stand *e = calloc(1, sizeof(*e));
	struct stat st;

	if (!e)
		return -ENOMEM;
	if (fstat(fd, &st) ||
	    (e->keep = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		int err = -errno;

		free(e);
		return err;
	}
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->b = *b;
	e->next = atomic_load(&io_stands);
	while (!atomic_compare_exchange_weak(&io_stands, &e->next, e))
		;
	atomic_fetch_add(&io_nbacked, 1);
	return 0;
}

static const struct io_backing *backing(int fd)
{
	struct stat st;

	if (!atomic_load_explicit(&io_nbacked, memory_order_acquire) ||
	    fstat(fd, &st))
		return NULL;
	for (struct io_stand *e = atomic_load(&io_stands); e; e = e->next)
		if (e->dev == st.st_dev && e->ino == st.st_ino)
			return &e->b;
	return NULL;
}

bool io_backed(int fd)
{
	return backing(fd) != NULL;
}

ssize_t io_pread(int fd, void *buf, size_t len, uint64_t off)
{
	const struct io_backing *b = backing(fd);
	int rc;

	if (!b)
		return pread(fd, buf, len, (off_t)off);
	if (off >= b->size)
		return 0;
	if (len > b->size - off)
		len = (size_t)(b->size - off);
	rc = b->pread(b->obj, buf, len, off, NULL);
	if (rc) {
		errno = -rc;
		return -1;
	}
	return (ssize_t)len;
}

int io_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	const struct io_backing *b = backing(fd);
	size_t done = 0;

	if (b)
		return b->pread(b->obj, buf, len, off, NULL);

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
	const struct io_backing *b = backing(fd);
	size_t done = 0;

	if (b) {
		int rc = b->pread(b->obj, buf, len, off, d);

		if (rc == -ENODATA)
			return diag_corrupt(d, off, "file ends inside %s (was "
					    "it truncated?)", what ? what :
					    "the data");
		if (rc == -ESTALE)	/* said by the first read that saw it */
			return rc;
		return rc && !diag_failed(d) ? diag_errno(d, rc, "cannot read "
				"%zu bytes at offset 0x%llx: %s", len,
				(unsigned long long)off, strerror(-rc)) : rc;
	}

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

#define COPY_BUF	(1u << 20)

int io_copy_range(int in, uint64_t in_off, int out, uint64_t out_off,
		  uint64_t len)
{
	loff_t io = (loff_t)in_off, oo = (loff_t)out_off;
	bool kernel = !io_backed(in);	/* a stand-in: by hand */
	char *buf;
	int rc = 0;

	while (len && kernel) {
		ssize_t n = copy_file_range(in, &io, out, &oo,
					    len < (1u << 30) ? len : (1u << 30),
					    0);

		if (n > 0) {
			len -= (uint64_t)n;
			continue;
		}
		if (n == 0)
			return -ENODATA;
		if (errno == EINTR)
			continue;
		/* the kernel cannot for these files: copy by hand */
		if (errno != EXDEV && errno != EINVAL && errno != ENOSYS &&
		    errno != EOPNOTSUPP && errno != EBADF)
			return -errno;
		break;
	}
	if (!len)
		return 0;
	buf = malloc(COPY_BUF);
	if (!buf)
		return -ENOMEM;
	while (len && !rc) {
		size_t k = len < COPY_BUF ? len : COPY_BUF;

		rc = io_pread_full(in, buf, k, (uint64_t)io);
		if (!rc)
			rc = io_pwrite_full(out, buf, k, (uint64_t)oo);
		io += (loff_t)k;
		oo += (loff_t)k;
		len -= k;
	}
	free(buf);
	return rc;
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

uint32_t io_shares_blocks(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf))
		return 0;
	switch ((unsigned long)sf.f_type) {
	case 0x58465342:	/* XFS (with reflink=1, the default) */
	case 0x9123683e:	/* btrfs */
		return sf.f_bsize > 0 && sf.f_bsize <= (1 << 20) &&
		       !(sf.f_bsize & (sf.f_bsize - 1)) ?
		       (uint32_t)sf.f_bsize : 4096;
	default:
		return 0;
	}
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
