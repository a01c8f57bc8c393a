/*
 * ptz_crc.c - a record's CRC-32: recomputed from its data (ptverify,
 * ptdump --records), and written anew where the archive keeps it once the
 * bytes of a stored record were patched in place (a DCP item rewritten by
 * ckpt_dcp_wb.c: nothing else in the archive moves).  Stored records are
 * read in 4 MiB preads through libdeflate's CRC-32, so checking a 100 GB
 * checkpoint needs 4 MiB of memory; deflated ones (small TorchScript code
 * records in practice) are inflated by the reader.
 *
 * The CRC-32 of record @e is kept in three places (APPNOTE 4.3.7, 4.3.9,
 * 4.3.12):
 *
 *   where                          OFFSET of the CRC-32 field
 *   local header                   header_off + 14 (torch writes 0 there,
 *                                  with flag bit 3: then left as it is)
 *   data descriptor (flag bit 3)   +4 after "PK\7\8", +0 without it
 *   central directory entry        +16
 */
#define PTZ_BUILD 1
#include "zip/ptz_int.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag/diag.h"
#include "util/io.h"
#include "util/le.h"

#define CHUNK		(4u << 20)
#define SIG_DESC	0x08074b50u	/* "PK\7\8" */
#define LH_CRC		14
#define CD_CRC		16
#define CD_NAME_LEN	28	/* then extra and comment lengths */
#define FLAG_DESC	0x0008u	/* bit 3: a descriptor follows */

int ptz_entry_crc32(const struct ptz_reader *z, struct ptz_entry *e,
		    uint32_t *crc, void (*step)(void *arg, uint64_t n),
		    void *arg, struct diag *d)
{
	unsigned char *buf;
	uint64_t done = 0;
	uint32_t c = 0;
	size_t len;
	int rc;

	rc = ptz_entry_locate(z, e, d);
	if (rc)
		return rc;
	if (e->method != PTZ_STORED) {
		if (e->usize > PTZ_MAX_CRC_INFLATE)
			return -EFBIG;
		rc = ptz_entry_read(z, e, PTZ_MAX_CRC_INFLATE, &buf, &len, d);
		if (rc)
			return rc;
		*crc = libdeflate_crc32(0, buf, len);
		if (step)
			step(arg, e->csize);
		free(buf);
		return 0;
	}
	buf = malloc(CHUNK);
	if (!buf)
		return diag_nomem(d);
	while (done < e->usize) {
		size_t want = e->usize - done < CHUNK ? e->usize - done : CHUNK;
		ssize_t got = io_pread(z->fd, buf, want, z->base +
				       e->data_off + done);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = diag_errno(d, -errno, "read failed at offset "
					"0x%llx: %s", (unsigned long long)
					(e->data_off + done), strerror(errno));
			break;
		}
		if (got == 0) {
			rc = diag_corrupt(d, e->data_off + done, "record '%s' "
					  "ends early: the file is shorter "
					  "than its index says", e->name);
			break;
		}
		c = libdeflate_crc32(c, buf, (size_t)got);
		done += (uint64_t)got;
		if (step)
			step(arg, (uint64_t)got);
	}
	free(buf);
	if (!rc)
		*crc = c;
	return rc;
}

static int put32(int fd, uint64_t off, uint32_t v, const char *name,
		 struct diag *d)
{
	unsigned char b[4] = { v, v >> 8, v >> 16, v >> 24 };
	int rc = io_pwrite_full(fd, b, 4, off);

	return rc ? diag_errno(d, rc, "%s: %s", name, strerror(-rc)) : 0;
}

int ptz_entry_put_crc(const struct ptz_reader *z, const struct ptz_entry *e,
		      int fd, uint32_t crc, const char *name, struct diag *d)
{
	uint64_t pos, base = z->base;
	uint32_t idx = ptz_cd_index(z, e);
	unsigned char b[4];
	int rc;

	/* the local header: 0 there with a descriptor stays 0 */
	rc = io_pread_diag(fd, b, 4, base + e->header_off + LH_CRC,
			   "zip header", d);
	if (!rc && (le32(b) || !(e->flags & FLAG_DESC)))
		rc = put32(fd, base + e->header_off + LH_CRC, crc, name, d);
	if (!rc && (e->flags & FLAG_DESC) && e->csize) {
		pos = base + e->data_off + e->csize;
		rc = io_pread_diag(fd, b, 4, pos, "zip header", d);
		if (!rc)
			rc = put32(fd, le32(b) == SIG_DESC ? pos + 4 : pos,
				   crc, name, d);
	}
	/* the central directory: entry idx, after the idx before it */
	pos = z->cdir_off;
	for (uint32_t i = 0; !rc && i <= idx; i++) {
		unsigned char h[PTZ_CDIR_LEN];

		rc = io_pread_diag(fd, h, sizeof(h), base + pos,
				   "central directory", d);
		if (!rc && le32(h) != PTZ_SIG_CDIR)
			rc = diag_corrupt(d, base + pos, "%s: not a central "
					  "directory entry", z->path);
		if (!rc && i == idx)
			rc = put32(fd, base + pos + CD_CRC, crc, name, d);
		pos += PTZ_CDIR_LEN + le16(h + CD_NAME_LEN) +
		       le16(h + CD_NAME_LEN + 2) + le16(h + CD_NAME_LEN + 4);
	}
	return rc;
}
