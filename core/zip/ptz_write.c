/*
 * ptz_write.c - write stored records in the zip layout of torch.save's
 * miniz writer, byte for byte (torch-format.md sections 2.3-2.6, and the
 * steps of section 9 that ../shared/reference/layout_check.py implements):
 * zeroed local headers followed by data descriptors, "FB" alignment
 * padding in every local header, ZIP64 extras once a size or an offset
 * reaches 0xffffffff, and the ZIP64 end record, locator and classic end
 * record always.  APPNOTE 6.3.x sections 4.3.7-4.3.16 name the fields.
 * How the bytes get into the file (pwrite, copy_file_range, or not at all
 * where a base has them) is ptz_copy.c's business.
 */

#define PTZ_BUILD 1
#include "zip/ptz_write_int.h"
#include "zip/ptz_int.h"

#include <errno.h>
#include <inttypes.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>

#include "util/seqout.h"
#include "diag/diag.h"

#define EXTRA_FB	0x4246u		/* "FB": torch's alignment padding */
#define FB_FILL		'Z'

static unsigned char *put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	return p + 2;
}

static unsigned char *put32(unsigned char *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	return put16(p + 2, (uint16_t)(v >> 16));
}

static unsigned char *put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	return put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t clamp32(uint64_t v)
{
	return v >= PTZ_MAX32 ? PTZ_MAX32 : (uint32_t)v;
}

/*
 * Local file header, as torch writes it:
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    4 | signature 0x04034b50 ("PK\3\4")
 *      4 |    2 | version needed: 0 (even with ZIP64 extras)
 *      6 |    2 | flags: 0x0808 (descriptor, UTF-8); 0x0800 if empty
 *      8 |    2 | method: 0 (stored)
 *     10 |    4 | time and date: 0
 *     14 |   12 | CRC-32, compressed and uncompressed size: 0
 *     26 |    2 | name length n
 *     28 |    2 | extra length m = z + 4 + pad
 *     30 |    n | name
 *   30+n |    z | ZIP64 extra (only if size or offset >= 0xffffffff):
 *        |      |   id 0x0001, u16 length, then size and 0 (u64 each)
 *        |      |   if the size is large, this header's offset (u64)
 *        |      |   if the offset is large (non-standard, as torch)
 * 30+n+z |    4 | "FB" (id 0x4246), u16 pad
 *        |  pad | 'Z' bytes, so that the data starts at a multiple
 *        |      | of the alignment (pad field present even if 0)
 * 30+n+m |      | data, then a descriptor if not empty
 */
static uint16_t zip64_local_len(uint64_t cursor, uint64_t size)
{
	if (!ptz_rec_zip64(cursor, size))
		return 0;
	return 4 + (size >= PTZ_MAX32 ? 16 : 0) +
	       (cursor >= PTZ_MAX32 ? 8 : 0);
}

static uint16_t fb_pad(uint16_t name_len, uint64_t cursor, uint64_t size,
		       uint32_t align)
{
	uint64_t start = cursor + PTZ_LOCAL_LEN + name_len +
			 zip64_local_len(cursor, size) + 4;

	return (uint16_t)((align - start % align) % align);
}

size_t ptz_local_len(uint16_t name_len, uint64_t cursor, uint64_t size,
		     uint32_t align)
{
	return PTZ_LOCAL_LEN + (size_t)name_len +
	       zip64_local_len(cursor, size) + 4 +
	       fb_pad(name_len, cursor, size, align);
}

size_t ptz_local_encode(unsigned char *out, const char *name,
			uint16_t name_len, uint64_t cursor, uint64_t size,
			uint32_t align)
{
	uint16_t z64 = zip64_local_len(cursor, size);
	uint16_t pad = fb_pad(name_len, cursor, size, align);
	unsigned char *p = out;

	p = put32(p, PTZ_SIG_LOCAL);
	p = put16(p, 0);
	p = put16(p, PTZ_FLAG_UTF8 | (size ? PTZ_FLAG_DESC : 0));
	memset(p, 0, 18);	/* method, time, date, CRC, sizes */
	p += 18;
	p = put16(p, name_len);
	p = put16(p, (uint16_t)(z64 + 4 + pad));
	memcpy(p, name, name_len);
	p += name_len;
	if (z64) {
		p = put16(p, PTZ_EXTRA_ZIP64);
		p = put16(p, (uint16_t)(z64 - 4));
		if (size >= PTZ_MAX32) {
			p = put64(p, size);
			p = put64(p, 0);
		}
		if (cursor >= PTZ_MAX32)
			p = put64(p, cursor);
	}
	p = put16(p, EXTRA_FB);
	p = put16(p, pad);
	memset(p, FB_FILL, pad);
	return (size_t)(p + pad - out);
}

/*
 * Data descriptor (after the data of every non-empty record):
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    4 | signature 0x08074b50 ("PK\7\10")
 *      4 |    4 | CRC-32
 *      8 |  4/8 | compressed size   (u64 when the record has a ZIP64
 *   12/16|  4/8 | uncompressed size  extra, even for a small size)
 */
size_t ptz_desc_encode(unsigned char *out, const struct ptz_wentry *e)
{
	unsigned char *p = out;

	p = put32(p, PTZ_SIG_DESC);
	p = put32(p, e->crc32);
	if (ptz_rec_zip64(e->header_off, e->size)) {
		p = put64(p, e->size);
		p = put64(p, e->size);
	} else {
		p = put32(p, (uint32_t)e->size);
		p = put32(p, (uint32_t)e->size);
	}
	return (size_t)(p - out);
}

/*
 * Central directory entry:
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    4 | signature 0x02014b50 ("PK\1\2")
 *      4 |    2 | version made by: 0
 *      6 |    2 | version needed: 0
 *      8 |    2 | flags: as in the local header
 *     10 |    2 | method: 0
 *     12 |    4 | time and date: 0
 *     16 |    4 | CRC-32
 *     20 |    4 | compressed size (0xffffffff if >= that)
 *     24 |    4 | uncompressed size (likewise)
 *     28 |    2 | name length n
 *     30 |    2 | extra length: 0 or the ZIP64 extra's
 *     32 |    8 | comment length, disk, internal attributes: 0
 *     38 |    4 | external attributes: 0
 *     42 |    4 | local header offset (0xffffffff if >= that)
 *     46 |    n | name
 *   46+n |      | ZIP64 extra (id 0x0001): size twice (u64) if clamped,
 *        |      | then the offset (u64) if clamped; no "FB" here
 */
static uint16_t zip64_cdir_len(const struct ptz_wentry *e)
{
	if (!ptz_rec_zip64(e->header_off, e->size))
		return 0;
	return 4 + (e->size >= PTZ_MAX32 ? 16 : 0) +
	       (e->header_off >= PTZ_MAX32 ? 8 : 0);
}

size_t ptz_cdir_len(const struct ptz_wentry *e)
{
	return PTZ_CDIR_LEN + (size_t)e->name_len + zip64_cdir_len(e);
}

size_t ptz_cdir_encode(unsigned char *out, const struct ptz_wentry *e,
		       const char *name)
{
	uint16_t z64 = zip64_cdir_len(e);
	unsigned char *p = out;

	p = put32(p, PTZ_SIG_CDIR);
	p = put32(p, 0);	/* made by, needed */
	p = put16(p, PTZ_FLAG_UTF8 | (e->size ? PTZ_FLAG_DESC : 0));
	p = put16(p, PTZ_STORED);
	p = put32(p, 0);	/* time, date */
	p = put32(p, e->crc32);
	p = put32(p, clamp32(e->size));
	p = put32(p, clamp32(e->size));
	p = put16(p, e->name_len);
	p = put16(p, z64);
	memset(p, 0, 10);	/* comment, disk, attributes */
	p += 10;
	p = put32(p, clamp32(e->header_off));
	memcpy(p, name, e->name_len);
	p += e->name_len;
	if (z64) {
		p = put16(p, PTZ_EXTRA_ZIP64);
		p = put16(p, (uint16_t)(z64 - 4));
		if (e->size >= PTZ_MAX32) {
			p = put64(p, e->size);
			p = put64(p, e->size);
		}
		if (e->header_off >= PTZ_MAX32)
			p = put64(p, e->header_off);
	}
	return (size_t)(p - out);
}

/*
 * End records, always all three:
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    4 | ZIP64 end record: signature 0x06064b50 ("PK\6\6")
 *      4 |    8 |   size of the rest of the record: 44
 *     12 |    4 |   made by 0x031e, needed 0x002d
 *     16 |    8 |   this disk, central directory disk: 0
 *     24 |   16 |   entries on this disk, total entries (u64)
 *     40 |    8 |   central directory size
 *     48 |    8 |   central directory offset
 *     56 |    4 | ZIP64 locator: signature 0x07064b50 ("PK\6\7")
 *     60 |    4 |   disk of the ZIP64 end record: 0
 *     64 |    8 |   offset of the ZIP64 end record
 *     72 |    4 |   total disks: 1
 *     76 |    4 | end record: signature 0x06054b50 ("PK\5\6")
 *     80 |    4 |   this disk, central directory disk: 0
 *     84 |    4 |   entries here and total, min(n, 0xffff) twice
 *     88 |    4 |   central directory size, clamped to 0xffffffff
 *     92 |    4 |   central directory offset, clamped likewise
 *     96 |    2 |   comment length: 0
 */
size_t ptz_end_encode(unsigned char *out, uint64_t n, uint64_t cd_off,
		      uint64_t cd_size)
{
	uint16_t n16 = n >= 0xffff ? 0xffff : (uint16_t)n;
	unsigned char *p = out;

	p = put32(p, PTZ_SIG_EOCD64);
	p = put64(p, PTZ_EOCD64_LEN - 12);
	p = put16(p, 0x031e);
	p = put16(p, 0x002d);
	p = put64(p, 0);
	p = put64(p, n);
	p = put64(p, n);
	p = put64(p, cd_size);
	p = put64(p, cd_off);
	p = put32(p, PTZ_SIG_LOC64);
	p = put32(p, 0);
	p = put64(p, cd_off + cd_size);
	p = put32(p, 1);
	p = put32(p, PTZ_SIG_EOCD);
	p = put32(p, 0);
	p = put16(p, n16);
	p = put16(p, n16);
	p = put32(p, clamp32(cd_size));
	p = put32(p, clamp32(cd_off));
	p = put16(p, 0);
	return (size_t)(p - out);
}

static int flush(struct ptz_writer *w, struct diag *d)
{
	int rc;

	if (!w->buf_len)
		return 0;
	rc = w->has_base ? ptz_base_emit(w, w->buf, w->buf_len,
					 w->cursor - w->buf_len, d) :
	     ptz_out_write(w, w->buf, w->buf_len, w->cursor - w->buf_len, d);
	w->buf_len = 0;
	return rc;
}

/* Room for @n (<= PTZ_WBUF) more bytes at the end of the staging buffer. */
static unsigned char *reserve(struct ptz_writer *w, size_t n, int *rc,
			      struct diag *d)
{
	*rc = 0;
	if (PTZ_WBUF - w->buf_len < n) {
		*rc = flush(w, d);
		if (*rc < 0)
			return NULL;
	}
	return w->buf + w->buf_len;
}

static void commit(struct ptz_writer *w, size_t n)
{
	w->buf_len += n;
	w->cursor += n;
}

/* Write the data of @src at the cursor and advance it. */
static int put_data(struct ptz_writer *w, const struct ptz_source *src,
		    struct ptz_wentry *e, struct diag *d)
{
	int rc;

	if (src->buf) {
		if (!src->has_crc)
			e->crc32 = libdeflate_crc32(0, src->buf,
						    (size_t)src->len);
		if (src->len <= PTZ_WBUF - w->buf_len) {
			memcpy(w->buf + w->buf_len, src->buf, (size_t)src->len);
			commit(w, (size_t)src->len);
			return 0;
		}
		rc = flush(w, d);
		if (rc == 0)
			rc = w->has_base ?
			     ptz_base_emit(w, src->buf, (size_t)src->len,
					   w->cursor, d) :
			     ptz_out_write(w, src->buf, (size_t)src->len,
					   w->cursor, d);
	} else {
		rc = flush(w, d);
		if (rc == 0 && w->has_base)
			rc = ptz_base_data(w, src, e, d);
		else if (rc == 0)
			rc = 1;
		if (rc == 1) {
			rc = ptz_copy_data(w, src, e, d);
			w->run = w->cursor + src->len;	/* written */
		}
	}
	if (rc == 0)
		w->cursor += src->len;
	return rc;
}

int ptz_writer_init(struct ptz_writer *w, int fd, uint32_t align,
		    struct diag *d)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->base_fd = -1;
	w->align = align ? align : PTZ_ALIGN_DEFAULT;
	if (w->align > PTZ_ALIGN_MAX || (w->align & (w->align - 1)))
		return w->err = diag_errno(d, -EINVAL, "alignment %" PRIu32 " is not a power of two up to %u",
					   align, PTZ_ALIGN_MAX);
	w->buf = malloc(PTZ_WBUF);
	if (!w->buf)
		return w->err = diag_nomem(d);
	return 0;
}

/* Note a new record: grow the entry array and copy its name. */
static struct ptz_wentry *new_entry(struct ptz_writer *w, const char *name,
				    size_t len)
{
	struct ptz_wentry *e;

	if (w->nents == w->ents_cap) {
		uint32_t cap = w->ents_cap ? w->ents_cap * 2 : 64;

		e = realloc(w->ents, cap * sizeof(*e));
		if (!e)
			return NULL;
		w->ents = e;
		w->ents_cap = cap;
	}
	if (w->names_cap - w->names_len < len + 1) {
		size_t cap = w->names_cap ? w->names_cap : 4096;
		char *p;

		while (cap - w->names_len < len + 1)
			cap *= 2;
		p = realloc(w->names, cap);
		if (!p)
			return NULL;
		w->names = p;
		w->names_cap = cap;
	}
	e = &w->ents[w->nents];
	e->name_off = w->names_len;
	e->name_len = (uint16_t)len;
	memcpy(w->names + w->names_len, name, len + 1);
	w->names_len += len + 1;
	return e;
}

int ptz_writer_add(struct ptz_writer *w, const char *name,
		   const struct ptz_source *src, struct diag *d)
{
	size_t len = strlen(name);
	struct ptz_wentry *e;
	unsigned char *p;
	int rc;

	if (w->err)
		return diag_errno(d, w->err, "archive writer failed earlier");
	if (!w->buf || w->finished)
		return diag_errno(d, -EINVAL, "record '%s' added after the end records",
				  name);
	if (!len || len > UINT16_MAX)
		return diag_errno(d, -ENAMETOOLONG, "record name of %zu bytes (1 to 65535 allowed)",
				  len);
	if (w->nents >= PTZ_MAX_ENTRIES)
		return diag_errno(d, -E2BIG, "more than %u records", PTZ_MAX_ENTRIES);
	/* Keep every offset and size far from wrapping around. */
	if (src->len > (UINT64_MAX >> 2) - w->cursor)
		return diag_errno(d, -EFBIG, "record '%s' of %" PRIu64 " bytes makes the archive too large",
				  name, src->len);
	e = new_entry(w, name, len);
	if (!e)
		return w->err = diag_nomem(d);
	e->header_off = w->cursor;
	e->size = src->len;
	e->crc32 = src->crc32;
	p = reserve(w, ptz_local_len((uint16_t)len, w->cursor, src->len,
				     w->align), &rc, d);
	if (!p)
		return w->err = rc;
	commit(w, ptz_local_encode(p, name, (uint16_t)len, w->cursor,
				   src->len, w->align));
	rc = put_data(w, src, e, d);
	if (rc < 0)
		return w->err = rc;
	if (e->size) {
		p = reserve(w, PTZ_DESC_MAX, &rc, d);
		if (!p)
			return w->err = rc;
		commit(w, ptz_desc_encode(p, e));
	}
	w->nents++;
	return 0;
}

int ptz_writer_finish(struct ptz_writer *w, struct diag *d)
{
	uint64_t cd_off = w->cursor;
	unsigned char *p;
	int rc, rc2;

	if (w->err)
		return diag_errno(d, w->err, "archive writer failed earlier");
	if (!w->buf || w->finished)
		return diag_errno(d, -EINVAL, "writer not started or already finished");
	for (uint32_t i = 0; i < w->nents; i++) {
		const struct ptz_wentry *e = &w->ents[i];

		p = reserve(w, ptz_cdir_len(e), &rc, d);
		if (!p)
			return w->err = rc;
		commit(w, ptz_cdir_encode(p, e, w->names + e->name_off));
	}
	p = reserve(w, PTZ_END_LEN, &rc, d);
	if (!p)
		return w->err = rc;
	commit(w, ptz_end_encode(p, w->nents, cd_off, w->cursor - cd_off));
	rc = flush(w, d);
	if (rc == 0 && w->has_base)
		rc = ptz_base_end(w, d);
	rc2 = seqout_close(w->out);
	w->out = NULL;
	if (rc == 0 && rc2)
		rc = diag_errno(d, rc2, "cannot write the archive: %s",
				strerror(-rc2));
	if (rc < 0)
		return w->err = rc;
	w->finished = true;
	return 0;
}

void ptz_writer_release(struct ptz_writer *w)
{
	seqout_close(w->out);	/* a failed write's: its error is said */
	free(w->buf);
	free(w->cmp);
	free(w->xbuf);
	free(w->ents);
	free(w->names);
	memset(w, 0, sizeof(*w));
}
