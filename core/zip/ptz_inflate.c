/*
 * ptz_inflate.c - inflate a deflated record (method 8, raw deflate as in
 * RFC 1951; APPNOTE 4.4.5) into a file, streaming.  ptz_entry_read() is
 * one libdeflate call over the whole record, which suits data.pkl and the
 * small records; a storage can be gigabytes, so this one works through
 * two fixed buffers with zlib's streaming inflate and never holds more
 * than INFLATE_CHUNK of input and of output.
 */
#define PTZ_BUILD 1
#include "zip/ptz_int.h"

#include <errno.h>
#include <inttypes.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "diag/diag.h"
#include "util/io.h"

#define INFLATE_CHUNK	(1u << 20)

/* Write @n bytes of @buf at @off of @fd and fold them into *@crc. */
static int put_out(const struct ptz_entry *e, int fd, const unsigned char *buf,
		   size_t n, uint64_t off, uint32_t *crc, struct diag *d)
{
	int rc = io_pwrite_full(fd, buf, n, off);

	if (rc)
		return diag_errno(d, rc, "cannot write the inflated record "
				  "'%s': %s", e->name, strerror(-rc));
	*crc = libdeflate_crc32(*crc, buf, n);
	return 0;
}

int ptz_entry_inflate(const struct ptz_reader *z, struct ptz_entry *e,
		      int fd, uint32_t *crc32, struct diag *d)
{
	unsigned char *in, *out;
	uint64_t in_done = 0, out_done = 0;
	uint32_t crc = 0;
	z_stream zs;
	int rc, zr = Z_OK;

	if (e->method != PTZ_DEFLATED)
		return diag_unsupported(d, e->header_off, "record '%s' is not "
					"deflated", e->name);
	rc = ptz_entry_locate(z, e, d);
	if (rc < 0)
		return rc;
	in = malloc(INFLATE_CHUNK);
	out = malloc(INFLATE_CHUNK);
	memset(&zs, 0, sizeof(zs));
	if (!in || !out || inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
		free(in);
		free(out);
		return diag_nomem(d);
	}
	while (zr != Z_STREAM_END) {
		if (zs.avail_in == 0) {
			uint64_t left = e->csize - in_done;
			size_t n = left < INFLATE_CHUNK ? (size_t)left :
				   INFLATE_CHUNK;

			if (n == 0) {
				rc = diag_corrupt(d, e->data_off + in_done,
						  "record '%s': deflate stream "
						  "cut short after %" PRIu64
						  " of %" PRIu64 " bytes",
						  e->name, out_done, e->usize);
				break;
			}
			rc = ptz_pread(z, in, n, e->data_off + in_done, d);
			if (rc < 0)
				break;
			zs.next_in = in;
			zs.avail_in = (uInt)n;
			in_done += n;
		}
		zs.next_out = out;
		zs.avail_out = INFLATE_CHUNK;
		zr = inflate(&zs, Z_NO_FLUSH);
		if (zr == Z_MEM_ERROR) {
			rc = diag_nomem(d);
			break;
		}
		if (zr != Z_OK && zr != Z_STREAM_END) {
			/* Z_DATA_ERROR; Z_BUF_ERROR cannot happen: both
			   buffers had room */
			rc = diag_corrupt(d, e->data_off + in_done - zs.avail_in,
					  "record '%s' is not a valid deflate "
					  "stream (%s)", e->name,
					  zs.msg ? zs.msg : "no detail");
			break;
		}
		if (INFLATE_CHUNK - zs.avail_out > e->usize - out_done) {
			rc = diag_corrupt(d, e->data_off, "record '%s' inflates "
					  "to more than its size %" PRIu64,
					  e->name, e->usize);
			break;
		}
		rc = put_out(e, fd, out, INFLATE_CHUNK - zs.avail_out,
			     out_done, &crc, d);
		if (rc < 0)
			break;
		out_done += INFLATE_CHUNK - zs.avail_out;
	}
	inflateEnd(&zs);
	free(in);
	free(out);
	if (rc < 0)
		return rc;
	if (out_done != e->usize)
		return diag_corrupt(d, e->data_off, "record '%s' inflates to %"
				    PRIu64 " bytes, not its size %" PRIu64,
				    e->name, out_done, e->usize);
	if (crc != e->crc32)
		return diag_corrupt(d, e->data_off, "record '%s': CRC-32 of "
				    "the inflated data is 0x%08" PRIx32 ", the "
				    "central directory says 0x%08" PRIx32,
				    e->name, crc, e->crc32);
	*crc32 = crc;
	return 0;
}
