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

#endif
