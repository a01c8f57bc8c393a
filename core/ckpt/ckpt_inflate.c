/*
 * ckpt_inflate.c - where a storage's bytes are, for readers that pread
 * them or splice them (docs/design.md, "Deflated records").  torch.save
 * stores every record, but tools that recompress a checkpoint (zip -9,
 * Python's zipfile with ZIP_DEFLATED) leave deflated storages behind,
 * which cannot be read at an offset.  Such a record is inflated once, on
 * first use, into an unlinked temporary file in $TMPDIR with zlib's
 * streaming inflate (ptz_entry_inflate()), and every later read is a
 * pread or splice from there, exactly like a stored record's.  The
 * daemon's memory therefore stays bounded by metadata; the disk holds
 * the inflated bytes of the deflated storages that were read.
 */
#define _GNU_SOURCE 1	/* O_TMPFILE */
#include "ckpt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An unlinked temporary file in $TMPDIR (or /tmp), or -errno. */
static int tmp_file(const struct ckpt_storage *s, struct diag *d)
{
	const char *dir = getenv("TMPDIR");
	char *path;
	int fd, err;

	if (!dir || !*dir)
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	/* file systems without O_TMPFILE: a named file, unlinked at once */
	path = malloc(strlen(dir) + sizeof("/.ptfs-inflate.XXXXXX"));
	if (!path)
		return diag_nomem(d);
	strcpy(path, dir);
	strcat(path, "/.ptfs-inflate.XXXXXX");
	fd = mkstemp(path);
	err = errno;
	if (fd >= 0)
		unlink(path);
	free(path);
	if (fd >= 0 && fcntl(fd, F_SETFD, FD_CLOEXEC) == 0)
		return fd;
	if (fd >= 0) {
		err = errno;
		close(fd);
	}
	return diag_errno(d, -err, "cannot make a temporary file in %s to "
			  "inflate record %s: %s", dir, s->rec->name,
			  strerror(err));
}

/* Inflate @s's record into a new temporary file; with c->inflate_lock. */
static int inflate_storage(struct ckpt *c, struct ckpt_storage *s,
			   struct diag *d)
{
	uint32_t crc;
	int fd, rc;

	fd = tmp_file(s, d);
	if (fd < 0)
		return fd;
	rc = ptz_entry_inflate(&c->zip, s->rec, fd, &crc, d);
	if (rc) {
		close(fd);
		return rc;
	}
	s->zfd = fd;
	s->zcrc = crc;
	__atomic_store_n(&s->zdone, true, __ATOMIC_RELEASE);
	return 0;
}

int ckpt_storage_data(struct ckpt *c, struct ckpt_storage *s, int *fd,
		      uint64_t *off, struct diag *d)
{
	int rc = 0;

	c = ckpt_storage_owner(c, s);	/* a shard of a folder */
	if (ckpt_fmt(c)->storage_data && s->fd == c->fd)	/* a .distcp */
		return ckpt_fmt(c)->storage_data(c, s, fd, off, d);
	if (s->fd != c->fd || !s->rec || s->rec->method == PTZ_STORED) {
		rc = ckpt_storage_locate(c, s, d);
		if (rc)
			return rc;
		*fd = s->fd;
		*off = s->data_off;
		return 0;
	}
	/* once inflated, zfd never changes until the storage is staged,
	   which excludes readers: an acquire load suffices */
	if (!__atomic_load_n(&s->zdone, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&c->inflate_lock);
		if (!__atomic_load_n(&s->zdone, __ATOMIC_RELAXED))
			rc = inflate_storage(c, s, d);
		pthread_mutex_unlock(&c->inflate_lock);
		if (rc)
			return rc;
	}
	*fd = s->zfd;
	*off = 0;
	return 0;
}

bool ckpt_storage_crc(const struct ckpt_storage *s, uint32_t *crc)
{
	if (!s->rec)
		return false;
	if (s->rec->method == PTZ_STORED) {
		/*
		 * torch 2.x with set_crc32_options(False) writes 0 for
		 * every CRC: unknown, so the writer computes it (a real
		 * CRC of 0 is merely computed again).
		 */
		*crc = s->rec->crc32;
		return *crc || !s->rec->usize;
	}
	if (!__atomic_load_n(&s->zdone, __ATOMIC_ACQUIRE))
		return false;
	*crc = s->zcrc;
	return true;
}

void ckpt_storage_uninflate(struct ckpt_storage *s)
{
	if (!s->zdone)
		return;
	close(s->zfd);
	s->zdone = false;
}
