/*
 * ptz.h - the zip index of a checkpoint: a small, bounds-checked reader for
 * the ZIP64 archives torch.save writes and for what other zip tools write
 * (APPNOTE 6.3.x subset: stored and deflated entries, classic and ZIP64 end
 * records, ZIP64 extra fields, data descriptors, archive comments).
 *
 * Opening reads only the end records and the central directory.  The data
 * offset of a record needs its local header; ptz_entry_locate() reads that
 * lazily, so listing 100k records costs no I/O per record.
 */
#ifndef PT_ZIP_PTZ_H
#define PT_ZIP_PTZ_H

#include <stddef.h>
#include <stdint.h>

struct diag;

/* Hard limits on what an archive may claim. */
#define PTZ_MAX_ENTRIES	(1u << 24)	/* 16M records */
#define PTZ_MAX_CDIR	(1ull << 31)	/* central directory bytes */

enum ptz_method {
	PTZ_STORED = 0,
	PTZ_DEFLATED = 8,
};

#define PTZ_LOCAL_LEN	30u	/* fixed part of a local file header */

/*
 * One a storage, so ordered to leave no padding and kept to what readers
 * use: 56 bytes (it was 72).  Its position in the central directory is
 * its index in ptz_reader.entries (ptz_cd_index()).
 */
struct ptz_entry {
	char *name;		/* full name, NUL-terminated, owned by reader */
	uint64_t csize;		/* compressed size */
	uint64_t usize;		/* uncompressed size */
	uint64_t header_off;	/* offset of the local file header */
	uint64_t data_off;	/* offset of the data; 0 until located */
	uint32_t crc32;		/* from the central directory */
	uint32_t slack;		/* bytes between the record's least size
				   (local header and data) and the next
				   record or the central directory: room for
				   the local name (miniz reads by its length,
				   which may not be the central directory's),
				   extra field and a descriptor; UINT32_MAX:
				   at least that (ptz_limit()) */
	uint16_t name_len;
	uint16_t method;	/* PTZ_STORED or PTZ_DEFLATED */
	uint16_t flags;		/* general purpose bit flag */
};

/*
 * The end of the space record @e may use: the next local header or the
 * central directory.  Exact unless the slack was clamped, and then beyond
 * anything a record's header fields can reach (2 x 64 KiB of name and
 * extra field, 24 bytes of descriptor), so every check against it gives
 * the same answer.
 */
static inline uint64_t ptz_limit(const struct ptz_entry *e)
{
	return e->header_off + PTZ_LOCAL_LEN + e->csize + e->slack;
}

struct ptz_reader {
	int fd;			/* borrowed; not closed by the reader */
	const char *path;	/* borrowed; for diagnostics */
	uint64_t base;		/* byte 0 of the archive in fd: 0, or where an
				   archive embedded in a larger file starts
				   (a DCP item); every offset below, and in
				   the entries, counts from there */
	uint64_t file_size;	/* of the archive (from base) */
	uint64_t cdir_off;	/* start of the central directory */
	uint64_t cdir_size;
	uint64_t eocd_off;	/* offset of the classic end record */
	int zip64;		/* the ZIP64 end record was used */
	uint32_t nentries;
	struct ptz_entry *entries;	/* in central directory order */
	struct ptz_entry **by_name;	/* sorted, case-insensitive */
	uint32_t nnames;	/* entries by_name holds: nentries, but
				   opened as torch (ptz_reader_open_torch())
				   one of each name equal ignoring case */
	char *prefix;		/* the common top folder, without '/';
				   NULL when the first name has no '/' */
	size_t prefix_len;
	char *names;		/* one block holding every name */
};

/* The position of @e in @z's central directory. */
static inline uint32_t ptz_cd_index(const struct ptz_reader *z,
				    const struct ptz_entry *e)
{
	return (uint32_t)(e - z->entries);
}

/*
 * Read the end records and central directory of the zip archive in @fd
 * (@path for messages) as torch's miniz reads them.  Checks: signatures,
 * counts, every record and the central directory inside the file, records
 * not overlapping one another or the central directory, stored records
 * with csize == usize, no encryption.  An archive that torch reads
 * otherwise than other zip readers (names equal ignoring ASCII case, two
 * end records, ... : ptz_amb.c) is refused with diag_unsafe() (d->unsafe).
 * Returns 0, or -errno with @d set.  Release with ptz_reader_release().
 */
int ptz_reader_open(struct ptz_reader *z, int fd, const char *path,
		    struct diag *d);

/*
 * ptz_reader_open() for an archive embedded in @fd: the @size bytes from
 * @base (a torch.save archive inside a DCP .distcp file).  Offsets in the
 * entries count from @base (a failed read names the offset in @fd);
 * every read adds it.  An
 * archive that runs past the end of @fd is corrupt input.
 */
int ptz_reader_open_at(struct ptz_reader *z, int fd, const char *path,
		       uint64_t base, uint64_t size, struct diag *d);

/*
 * ptz_reader_open_at(), but reading the archive as torch (miniz) reads it
 * where ptz_reader_open_at() refuses it as unsafe (ptz_amb.c): the end
 * records and central directory torch takes, and of names equal ignoring
 * case only the record torch's lookup finds (ptz_find() finds that one).
 * For what torch would run of a refused file (ptls --check); the other
 * checks stay.  Returns 0, or -errno with @d set.
 */
int ptz_reader_open_torch(struct ptz_reader *z, int fd, const char *path,
			  uint64_t base, uint64_t size, struct diag *d);

/* Free what the reader holds (not @fd).  A zeroed reader is safe. */
void ptz_reader_release(struct ptz_reader *z);

/*
 * Find the record called @name exactly (full name, prefix included),
 * falling back to a case-insensitive match as torch's miniz does.
 * Returns a borrowed entry (valid until release) or NULL; it is writable
 * only so that ptz_entry_locate() can note its data offset.
 */
struct ptz_entry *ptz_find(const struct ptz_reader *z, const char *name);

/*
 * Like ptz_find() for "<prefix>/<rel>", the way torch names its records
 * ("data.pkl", "data/0", "version").
 */
struct ptz_entry *ptz_find_rel(const struct ptz_reader *z, const char *rel);

/*
 * Read the local header of @e, check it (signature, name length inside the
 * record's space, data + csize not past e->limit) and set e->data_off.
 * Idempotent.  Returns 0 or -errno with @d set.
 */
int ptz_entry_locate(const struct ptz_reader *z, struct ptz_entry *e,
		     struct diag *d);

/*
 * Read exactly @len bytes at @off of the archive (from z->base in z->fd):
 * io_pread_diag(), so a short file is corruption at the offset where its
 * bytes ran out.  Returns 0 or -errno with @d set.
 */
int ptz_pread(const struct ptz_reader *z, void *buf, size_t len, uint64_t off,
	      struct diag *d);

/*
 * ptz_entry_locate(), and refuse a record larger than @max bytes (or,
 * deflated, with more compressed bytes than @max could need).  0 or
 * -errno with @d set.
 */
int ptz_entry_fits(const struct ptz_reader *z, struct ptz_entry *e,
		   uint64_t max, struct diag *d);

/*
 * Read the whole record @e into a malloc'd buffer (inflating a deflated
 * one), NUL-terminated for convenience; *@len gets its size.  Refuses
 * records larger than @max bytes.  Caller owns *@out (free()).
 */
int ptz_entry_read(const struct ptz_reader *z, struct ptz_entry *e,
		   uint64_t max, unsigned char **out, size_t *len,
		   struct diag *d);

/*
 * Inflate deflated record @e into @fd from offset 0, streaming (ptz_inflate.c:
 * a few MiB of memory whatever its size), and check that it gives exactly
 * e->usize bytes with the central directory's CRC-32, which *@crc32 gets.
 * Returns 0 or -errno with @d set (then @fd holds part of the data).
 */
int ptz_entry_inflate(const struct ptz_reader *z, struct ptz_entry *e,
		      int fd, uint32_t *crc32, struct diag *d);

/* Deflated records larger than this are not inflated to check them. */
#define PTZ_MAX_CRC_INFLATE	(UINT64_C(1) << 30)

/*
 * The CRC-32 of @e's uncompressed data (located first) into *@crc, a
 * stored record streamed in 4 MiB preads (ptz_crc.c).  @step, if given,
 * is called with each chunk's size as it is read.  Returns 0, -EFBIG for a
 * deflated record over PTZ_MAX_CRC_INFLATE, or -errno with @d set.
 */
int ptz_entry_crc32(const struct ptz_reader *z, struct ptz_entry *e,
		    uint32_t *crc, void (*step)(void *arg, uint64_t n),
		    void *arg, struct diag *d);

/*
 * Write @crc as the CRC-32 of located record @e into @fd, a copy of z's
 * file (the archive at the same z->base) whose bytes of @e were rewritten
 * in place: into its local header (unless 0 there with a data
 * descriptor), its data descriptor and its central directory entry.
 * @name names @fd in messages.  Returns 0 or -errno with @d set.
 */
int ptz_entry_put_crc(const struct ptz_reader *z, const struct ptz_entry *e,
		      int fd, uint32_t crc, const char *name, struct diag *d);

/* The largest power of two dividing @off (@off 0: 2^63): how a record's
 * data is aligned. */
static inline uint64_t ptz_align(uint64_t off)
{
	return off ? off & -off : UINT64_C(1) << 63;
}

#endif
