/*
 * zrec.c - a zip record's CRC-32 and alignment for ptdump and ptverify.
 * Stored records are read in 4 MiB preads through libdeflate's CRC-32, so
 * checking a 100 GB checkpoint needs 4 MiB of memory; deflated ones (small
 * TorchScript code records in practice) are inflated by the reader.
 */
#include "zrec.h"

#include "diag/diag.h"
#include "zip/ptz.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK	(4u << 20)

int zrec_crc32(const struct ptz_reader *z, struct ptz_entry *e,
	       uint32_t *crc, void (*step)(void *arg, uint64_t n), void *arg,
	       struct diag *d)
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
		if (e->usize > ZREC_MAX_INFLATE)
			return -EFBIG;
		rc = ptz_entry_read(z, e, ZREC_MAX_INFLATE, &buf, &len, d);
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
		ssize_t got = pread(z->fd, buf, want, (off_t)(e->data_off + done));

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

uint64_t zrec_align(uint64_t off)
{
	return off ? off & -off : UINT64_C(1) << 63;
}
