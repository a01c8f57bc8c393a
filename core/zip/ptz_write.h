/*
 * ptz_write.h - write a zip archive of stored records in exactly the layout
 * torch.save's miniz writer produces (torch-format.md sections 2.3-2.6 and 9):
 * every record's data aligned by "FB" padding, data descriptors, ZIP64
 * extras from 0xffffffff up, and the ZIP64 end records always.  Records
 * come from memory or from a byte range of another file (copy_file_range).
 *
 * The writer only appends to an fd it is given: creating, fsync'ing and
 * renaming the file are the caller's business.
 */
#ifndef PT_ZIP_PTZ_WRITE_H
#define PT_ZIP_PTZ_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;

#define PTZ_ALIGN_DEFAULT	64u	/* torch's storage_alignment */
#define PTZ_ALIGN_MAX		32768u	/* the pad and FB header fit a u16 */

/*
 * Where a record's bytes come from: @buf when it is not NULL (borrowed for
 * the duration of ptz_writer_add()), otherwise @len bytes at @off of @fd
 * (borrowed, read with pread/copy_file_range, never closed).  With
 * @has_crc, @crc32 is written as is and the data is not read through us
 * (an unchanged record keeps its CRC from the original central directory);
 * otherwise the CRC-32 is computed while copying.
 */
struct ptz_source {
	const void *buf;
	int fd;
	uint64_t off;
	uint64_t len;
	bool has_crc;
	uint32_t crc32;
};

/* One record written so far: what its central directory entry needs. */
struct ptz_wentry {
	size_t name_off;	/* into ptz_writer.names */
	uint16_t name_len;
	uint32_t crc32;
	uint64_t size;
	uint64_t header_off;	/* offset of the local header */
};

struct ptz_writer {
	int fd;			/* borrowed; written with pwrite from 0 */
	uint32_t align;
	uint64_t cursor;	/* offset of the next byte to write */
	int err;		/* first failure (-errno), sticky */
	bool finished;
	bool no_copy_range;	/* copy_file_range refused once: don't retry */
	unsigned char *buf;	/* staging buffer; buf[0] is at cursor-buf_len */
	size_t buf_len;
	struct ptz_wentry *ents;
	uint32_t nents;
	uint32_t ents_cap;
	char *names;		/* every name, NUL-terminated, one block */
	size_t names_len;
	size_t names_cap;
};

/*
 * Start writing an archive into @fd (a regular file, written from offset
 * 0 with pwrite, so its file position does not matter).  @align is the
 * data alignment: 0 for PTZ_ALIGN_DEFAULT, else a power of two up to
 * PTZ_ALIGN_MAX.  Returns 0 or -errno with @d set; release with
 * ptz_writer_release() either way.
 */
int ptz_writer_init(struct ptz_writer *w, int fd, uint32_t align,
		    struct diag *d);

/*
 * Append the record @name (full name, prefix included, 1 to 65535 bytes;
 * copied) with the data of @src.  Records appear in the order added.
 * Returns 0 or -errno with @d set; after a failure the archive is unusable
 * and every later call fails the same way.
 */
int ptz_writer_add(struct ptz_writer *w, const char *name,
		   const struct ptz_source *src, struct diag *d);

/*
 * Write the central directory and the three end records and flush.  The
 * file is then complete (but neither fsync'd nor renamed).  Returns 0 or
 * -errno with @d set.
 */
int ptz_writer_finish(struct ptz_writer *w, struct diag *d);

/* Free what the writer holds (not its fd).  A zeroed writer is safe. */
void ptz_writer_release(struct ptz_writer *w);

#endif
