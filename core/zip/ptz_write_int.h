/*
 * ptz_write_int.h - the record encoders behind ptz_writer, exposed so that
 * tests can check the ZIP64 forms at offsets and sizes of 4 GiB and more
 * without writing that much.  Each writes into a caller's buffer and
 * returns the number of bytes written.
 *
 * Internal: core/zip defines PTZ_BUILD, tests define PT_INTERNAL.
 */
#ifndef PT_ZIP_PTZ_WRITE_INT_H
#define PT_ZIP_PTZ_WRITE_INT_H

#if !defined(PT_INTERNAL) && !defined(PTZ_BUILD)
#error "ptz_write_int.h is internal to core/zip and its tests"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zip/ptz_write.h"

#define PTZ_SIG_DESC	0x08074b50u	/* "PK\7\10" data descriptor */
#define PTZ_MAX32	0xffffffffu	/* from here on a field needs ZIP64 */

#define PTZ_FLAG_DESC	0x0008u	/* bit 3: CRC and sizes in a descriptor */
#define PTZ_FLAG_UTF8	0x0800u	/* bit 11: the name is UTF-8 */

#define PTZ_DESC_MAX	24u	/* a data descriptor with u64 sizes */
#define PTZ_END_LEN	98u	/* ZIP64 end record, locator, classic EOCD */

/* A record needs ZIP64 extras (and a 24-byte descriptor). */
static inline bool ptz_rec_zip64(uint64_t header_off, uint64_t size)
{
	return size >= PTZ_MAX32 || header_off >= PTZ_MAX32;
}

/* Bytes of the local header (name and extras) for a record at @cursor. */
size_t ptz_local_len(uint16_t name_len, uint64_t cursor, uint64_t size,
		     uint32_t align);

/*
 * Encode the local header of the record @name at @cursor holding @size
 * bytes, padded so that its data starts at a multiple of @align.  @out
 * must have room for ptz_local_len() bytes.
 */
size_t ptz_local_encode(unsigned char *out, const char *name,
			uint16_t name_len, uint64_t cursor, uint64_t size,
			uint32_t align);

/* The data descriptor after a non-empty record (16 or 24 bytes). */
size_t ptz_desc_encode(unsigned char *out, const struct ptz_wentry *e);

/* Bytes of the central directory entry of @e. */
size_t ptz_cdir_len(const struct ptz_wentry *e);

/* Encode the central directory entry of @e, named @name. */
size_t ptz_cdir_encode(unsigned char *out, const struct ptz_wentry *e,
		       const char *name);

/*
 * The ZIP64 end record, its locator and the classic end record
 * (PTZ_END_LEN bytes) for @n entries in a central directory of @cd_size
 * bytes at @cd_off.
 */
size_t ptz_end_encode(unsigned char *out, uint64_t n, uint64_t cd_off,
		      uint64_t cd_size);

/* ---- ptz_copy.c: moving the bytes (the writer's own calls) ---- */

#define PTZ_WBUF	(1u << 20)	/* staging, copy and compare buffers */

/* Write all of @p at @off of the output, retrying short writes. */
int ptz_out_write(struct ptz_writer *w, const void *p, size_t n,
		  uint64_t off, struct diag *d);

/*
 * Copy the data of fd source @src to the cursor (the staging buffer is
 * empty) and fill in e->crc32 unless @src brought it.
 */
int ptz_copy_data(struct ptz_writer *w, const struct ptz_source *src,
		  struct ptz_wentry *e, struct diag *d);

/*
 * Against a base: write @n bytes @p at @at, the end of what is written or
 * pending, where they differ from the base's.
 */
int ptz_base_emit(struct ptz_writer *w, const unsigned char *p, size_t n,
		  uint64_t at, struct diag *d);

/*
 * Against a base: the data of fd source @src at the cursor (the staging
 * buffer is empty): 0 when done (e->crc32 set unless @src brought it), 1
 * when it is to be copied as without a base (what was pending is copied
 * by then), or -errno.
 */
int ptz_base_data(struct ptz_writer *w, const struct ptz_source *src,
		  struct ptz_wentry *e, struct diag *d);

/* Against a base: copy what is pending and cut the file to the cursor. */
int ptz_base_end(struct ptz_writer *w, struct diag *d);

#endif
