/*
 * ptz_write.h - write a zip archive of stored records in exactly the layout
 * torch.save's miniz writer produces (torch-format.md sections 2.3-2.6 and 9):
 * every record's data aligned by "FB" padding, data descriptors, ZIP64
 * extras from 0xffffffff up, and the ZIP64 end records always.  Records
 * come from memory or from a byte range of another file (copy_file_range).
 *
 * The writer only appends to an fd it is given: creating, fsync'ing and
 * renaming the file are the caller's business.  It can write against a
 * base, the archive being replaced (ptz_writer_base(), ptz_copy.c): bytes
 * equal to the base's at the same offsets are then copied in runs, one
 * copy_file_range each, or left in place when the output began as a clone
 * of the base.
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
 * (borrowed, read with pread/copy_file_range, never closed), or, with
 * @read, bytes [@off, @off + @len) as @read gives them, 1 MiB at a time
 * (a tensor gathered from pieces of several files: 0 or -errno with the
 * diag set; the CRC-32 is then always computed).  With
 * @has_crc, @crc32 is written as is and the data is not read through us
 * (an unchanged record keeps its CRC from the original central directory);
 * otherwise the CRC-32 is computed while copying.
 *
 * Against a base: with @based, the bytes are the base's @len bytes at
 * @base_off except where they were written since -- in the chunks of
 * 2^@dirty_shift bytes whose bit is set in @dirty (bit i%64 of word i/64),
 * or anywhere when @dirty is NULL -- unless the source is that very range
 * of the base (@fd is the base and @off is @base_off): then no byte
 * differs.  @base_crc is the CRC-32 of the base's bytes when
 * @base_crc_ok; a changed record's CRC is then updated from it, not
 * computed over all of its bytes.
 */
struct ptz_source {
	const void *buf;
	int fd;
	uint64_t off;
	uint64_t len;
	bool has_crc;
	uint32_t crc32;
	bool based;
	bool base_crc_ok;
	uint32_t base_crc;
	uint64_t base_off;
	const uint64_t *dirty;
	unsigned dirty_shift;
	int (*read)(void *arg, void *buf, size_t n, uint64_t off,
		    struct diag *d);
	void *read_arg;
};

/* What the writer did with its bytes (for tests and benchmarks). */
struct ptz_write_stats {
	uint64_t written;	/* bytes written with pwrite */
	uint64_t copied;	/* bytes copied by copy_file_range */
	uint32_t copy_calls;	/* copy_file_range calls that copied */
	uint64_t compared;	/* bytes of the base read to compare */
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
	uint64_t origin;	/* the archive's offset 0 is this byte of fd
				   (a DCP item inside its .distcp file); set
				   after ptz_writer_init(), never with a base */
	uint32_t align;
	uint64_t cursor;	/* offset of the next byte to write */
	int err;		/* first failure (-errno), sticky */
	bool finished;
	bool no_copy_range;	/* copy_file_range refused once: don't retry */
	uint32_t share_align;	/* the output's file system shares blocks
				   of this size (XFS, btrfs): copies are cut
				   at block boundaries for the kernel to
				   clone; 0: it does not */
	unsigned char *buf;	/* staging buffer; buf[0] is at cursor-buf_len */
	size_t buf_len;
	/* without a base, what reaches fd goes through this, in order
	   (util/seqout.h; opened at the first write, closed by finish) */
	struct seqout *out;
	struct ptz_wentry *ents;
	uint32_t nents;
	uint32_t ents_cap;
	char *names;		/* every name, NUL-terminated, one block */
	size_t names_len;
	size_t names_cap;
	/* against a base (ptz_writer_base(), ptz_copy.c) */
	bool has_base;
	bool cloned;		/* the output began as a clone of the base */
	bool moved;		/* cloned, and a based record would move: the
				   write failed with -EAGAIN, start again
				   without the clone */
	bool in_place;		/* the output is the base itself (set after
				   ptz_writer_base() with cloned): every
				   record must be a based source in its
				   place and the archive keep its size, or
				   -EAGAIN with @moved; nothing is cut */
	bool dry;		/* write nothing, count what would be
				   written (in st.written): a plan */
	int base_fd;		/* borrowed */
	uint64_t base_size;
	uint64_t run;		/* [run, cursor - buf_len) are the base's
				   bytes at the same offsets, not copied yet */
	unsigned char *cmp;	/* the base's bytes, compared with ours */
	unsigned char *xbuf;	/* copying a run where the kernel will not */
	struct ptz_write_stats st;
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
 * Write against the base archive @base_fd (borrowed; call before the first
 * record): bytes equal to the base's at the same offsets are copied from
 * it in runs, or, with @cloned (the output already holds a copy of the
 * base, such as a FICLONE), not written at all; the file is cut to the
 * archive's size at the end.  The result is byte for byte what the writer
 * writes without a base.  With @cloned, a based source whose bytes would
 * land elsewhere than its base_off makes ptz_writer_add() fail with
 * -EAGAIN and sets w->moved: the clone cannot be patched into that layout.
 * Set w->in_place (and w->dry) after this call to patch the base itself.
 * Returns 0 or -errno with @d set.
 */
int ptz_writer_base(struct ptz_writer *w, int base_fd, bool cloned,
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
