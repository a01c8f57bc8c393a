/*
 * ptz_eocd.c - find the central directory through the end records: the
 * classic end of central directory record (APPNOTE 4.3.16), found by a
 * backwards scan past an archive comment of up to 64 KiB, and, when a ZIP64
 * locator (4.3.15) sits right before it, the ZIP64 end record (4.3.14).
 * torch.save always writes all three; other zip tools often only the first.
 * Like torch's miniz, the ZIP64 record wins whenever the locator is present.
 */
#define PTZ_BUILD 1
#include "zip/ptz_int.h"
#include "util/io.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"
#include "util/le.h"

/*
 * End of central directory record (classic):
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    4 | signature 0x06054b50 ("PK\5\6")
 *      4 |    2 | number of this disk
 *      6 |    2 | disk where the central directory starts
 *      8 |    2 | entries on this disk (0xffff: see ZIP64)
 *     10 |    2 | total entries (0xffff: see ZIP64)
 *     12 |    4 | central directory size (0xffffffff: see ZIP64)
 *     16 |    4 | central directory offset (0xffffffff: see ZIP64)
 *     20 |    2 | comment length n
 *     22 |    n | comment
 */
#define EOCD_DISK	4
#define EOCD_CD_DISK	6
#define EOCD_N_DISK	8
#define EOCD_N_TOTAL	10
#define EOCD_CD_SIZE	12
#define EOCD_CD_OFF	16
#define EOCD_COMMENT	20

/*
 * ZIP64 end of central directory locator (right before the classic record):
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    4 | signature 0x07064b50 ("PK\6\7")
 *      4 |    4 | disk holding the ZIP64 end record
 *      8 |    8 | offset of the ZIP64 end record
 *     16 |    4 | total number of disks
 */
#define LOC64_DISK	4
#define LOC64_OFF	8
#define LOC64_NDISKS	16

/*
 * ZIP64 end of central directory record:
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    4 | signature 0x06064b50 ("PK\6\6")
 *      4 |    8 | size of the rest of the record (>= 44)
 *     12 |    2 | version made by
 *     14 |    2 | version needed
 *     16 |    4 | number of this disk
 *     20 |    4 | disk where the central directory starts
 *     24 |    8 | entries on this disk
 *     32 |    8 | total entries
 *     40 |    8 | central directory size
 *     48 |    8 | central directory offset
 *     56 |    m | extensible data (ignored)
 */
#define EOCD64_RECSIZE	4
#define EOCD64_DISK	16
#define EOCD64_CD_DISK	20
#define EOCD64_N_DISK	24
#define EOCD64_N_TOTAL	32
#define EOCD64_CD_SIZE	40
#define EOCD64_CD_OFF	48

/* What the end records say, before it is checked. */
struct ptz_end {
	uint64_t n_disk;	/* entries on this disk */
	uint64_t n_total;
	uint64_t cd_size;
	uint64_t cd_off;
	uint64_t end_off;	/* first byte of the end records */
	uint64_t rec_off;	/* the record the values come from */
};

/* True when @buf (@len bytes, the start of the file) begins with @s. */
static bool starts_with(const unsigned char *buf, size_t len, const char *s)
{
	size_t n = strlen(s);

	return len >= n && !memcmp(buf, s, n);
}

/*
 * No end record: say what the file most likely is.  @tail holds the last
 * @len bytes of the file; when that is the whole file, look at its start.
 */
static int no_eocd(const struct ptz_reader *z, const unsigned char *tail,
		   size_t len, struct diag *d)
{
	uint64_t off = z->file_size;

	if (len == z->file_size) {
		size_t i = 0;

		if (starts_with(tail, len, "version https://git-lfs"))
			return diag_corrupt(d, 0, "git lfs pointer file, not the checkpoint itself (run git lfs pull)");
		while (i < len && strchr(" \t\r\n", tail[i]))
			i++;
		if (i < len && tail[i] == '<')
			return diag_corrupt(d, 0, "html or xml text, not a zip archive (an error page saved as the download?)");
	}
	return diag_corrupt(d, off, "no end of central directory record: truncated download or not a zip archive");
}

/*
 * Scan @tail (the last @len bytes of the file) backwards for the classic
 * end record.  A candidate whose comment ends exactly at the end of the
 * file wins; failing that, the last one whose comment fits (miniz allows
 * trailing bytes).  A signature inside the comment itself thus loses to
 * the real record.  Returns the candidate's index or -1.
 */
static long find_eocd(const unsigned char *tail, size_t len)
{
	long loose = -1;

	if (len < PTZ_EOCD_LEN)
		return -1;
	for (size_t p = len - PTZ_EOCD_LEN + 1; p-- > 0;) {
		size_t room = len - p - PTZ_EOCD_LEN;
		uint16_t clen;

		if (le32(tail + p) != PTZ_SIG_EOCD)
			continue;
		clen = le16(tail + p + EOCD_COMMENT);
		if (clen == room)
			return (long)p;
		if (clen < room && loose < 0)
			loose = (long)p;
	}
	return loose;
}

/*
 * Read the ZIP64 locator at @loc_off and the ZIP64 end record it points
 * to into @end.
 */
static int read_zip64(struct ptz_reader *z, uint64_t loc_off,
		      const unsigned char *loc, struct ptz_end *end,
		      struct diag *d)
{
	unsigned char rec[PTZ_EOCD64_LEN];
	uint64_t off = le64(loc + LOC64_OFF);
	uint64_t recsize;
	uint32_t sig;
	int rc;

	if (le32(loc + LOC64_DISK) != 0 || le32(loc + LOC64_NDISKS) > 1)
		return diag_unsupported(d, loc_off, "multi-disk zip archives are not supported (zip64 locator: disk %" PRIu32 " of %" PRIu32 ")",
					le32(loc + LOC64_DISK),
					le32(loc + LOC64_NDISKS));
	/* The record must end before the locator: no wrap, no overlap. */
	if (off > loc_off || loc_off - off < PTZ_EOCD64_LEN)
		return diag_corrupt(d, loc_off + LOC64_OFF, "zip64 end record offset 0x%" PRIx64 " is not before its locator at 0x%" PRIx64,
				    off, loc_off);
	rc = ptz_pread(z, rec, sizeof(rec), off, d);
	if (rc < 0)
		return rc;
	sig = le32(rec);
	if (sig != PTZ_SIG_EOCD64)
		return diag_corrupt(d, off, "bad zip64 end of central directory signature 0x%08" PRIx32,
				    sig);
	recsize = le64(rec + EOCD64_RECSIZE);
	if (recsize < PTZ_EOCD64_LEN - 12 || recsize > loc_off - off - 12)
		return diag_corrupt(d, off + EOCD64_RECSIZE, "bad zip64 end record size %" PRIu64 " (44 to %" PRIu64 " bytes fit)",
				    recsize, loc_off - off - 12);
	if (le32(rec + EOCD64_DISK) != 0 || le32(rec + EOCD64_CD_DISK) != 0)
		return diag_unsupported(d, off + EOCD64_DISK, "multi-disk zip archives are not supported (zip64 end record: disk %" PRIu32 ", central directory on disk %" PRIu32 ")",
					le32(rec + EOCD64_DISK),
					le32(rec + EOCD64_CD_DISK));
	end->n_disk = le64(rec + EOCD64_N_DISK);
	end->n_total = le64(rec + EOCD64_N_TOTAL);
	end->cd_size = le64(rec + EOCD64_CD_SIZE);
	end->cd_off = le64(rec + EOCD64_CD_OFF);
	end->end_off = off;
	end->rec_off = off;
	z->zip64 = 1;
	return 0;
}

/* The classic record at @off (@rec) is all there is. */
static int read_classic(const unsigned char *rec, uint64_t off,
			struct ptz_end *end, struct diag *d)
{
	if (le16(rec + EOCD_DISK) != 0 || le16(rec + EOCD_CD_DISK) != 0)
		return diag_unsupported(d, off + EOCD_DISK, "multi-disk zip archives are not supported (disk %u, central directory on disk %u)",
					le16(rec + EOCD_DISK),
					le16(rec + EOCD_CD_DISK));
	end->n_disk = le16(rec + EOCD_N_DISK);
	end->n_total = le16(rec + EOCD_N_TOTAL);
	end->cd_size = le32(rec + EOCD_CD_SIZE);
	end->cd_off = le32(rec + EOCD_CD_OFF);
	end->end_off = off;
	end->rec_off = off;
	return 0;
}

/* Check what the end record @end says against the file and our limits. */
static int check_end(struct ptz_reader *z, const struct ptz_end *end,
		     struct diag *d)
{
	uint64_t o = end->rec_off;
	uint64_t f_disk = o + (z->zip64 ? EOCD64_N_DISK : EOCD_N_DISK);
	uint64_t f_total = o + (z->zip64 ? EOCD64_N_TOTAL : EOCD_N_TOTAL);
	uint64_t f_size = o + (z->zip64 ? EOCD64_CD_SIZE : EOCD_CD_SIZE);
	uint64_t f_off = o + (z->zip64 ? EOCD64_CD_OFF : EOCD_CD_OFF);

	if (end->n_disk != end->n_total)
		return diag_corrupt(d, f_disk, "end record counts %" PRIu64 " entries on this disk but %" PRIu64 " in total",
				    end->n_disk, end->n_total);
	if (end->cd_off > end->end_off)
		return diag_corrupt(d, f_off, "central directory offset 0x%" PRIx64 " is past the end records at 0x%" PRIx64,
				    end->cd_off, end->end_off);
	/* Compare with the room left, so that no sum can overflow. */
	if (end->cd_size > end->end_off - end->cd_off)
		return diag_corrupt(d, f_size, "central directory (0x%" PRIx64 " + %" PRIu64 " bytes) runs past the end records at 0x%" PRIx64,
				    end->cd_off, end->cd_size, end->end_off);
	/* Every entry takes at least its fixed 46 bytes. */
	if (end->n_total > end->cd_size / PTZ_CDIR_LEN)
		return diag_corrupt(d, f_total, "%" PRIu64 " entries cannot fit in a central directory of %" PRIu64 " bytes",
				    end->n_total, end->cd_size);
	if (end->n_total > PTZ_MAX_ENTRIES)
		return diag_unsupported(d, f_total, "too many records (%" PRIu64 ", at most %u)",
					end->n_total, PTZ_MAX_ENTRIES);
	if (end->cd_size > PTZ_MAX_CDIR)
		return diag_unsupported(d, f_size, "central directory too large (%" PRIu64 " bytes, at most %llu)",
					end->cd_size, PTZ_MAX_CDIR);
	z->nentries = (uint32_t)end->n_total;
	z->cdir_off = end->cd_off;
	z->cdir_size = end->cd_size;
	return 0;
}

int ptz_eocd_read(struct ptz_reader *z, struct diag *d)
{
	size_t max = PTZ_EOCD_LEN + PTZ_COMMENT_MAX;
	size_t len = z->file_size < max ? (size_t)z->file_size : max;
	unsigned char loc[PTZ_LOC64_LEN];
	struct ptz_end end = { 0 };
	unsigned char *tail;
	uint64_t tail_off = z->file_size - len;
	long p;
	int rc;

	if (z->file_size == 0)
		return diag_corrupt(d, 0, "empty file: truncated download or not a zip archive");
	if (z->file_size < PTZ_EOCD_LEN)
		return diag_corrupt(d, 0, "file too short for a zip archive (%" PRIu64 " bytes): truncated download or not a zip archive",
				    z->file_size);
	tail = malloc(len);
	if (!tail)
		return diag_nomem(d);
	rc = ptz_pread(z, tail, len, tail_off, d);
	if (rc < 0)
		goto out_free_tail;
	p = find_eocd(tail, len);
	if (p < 0) {
		rc = no_eocd(z, tail, len, d);
		goto out_free_tail;
	}
	z->eocd_off = tail_off + (uint64_t)p;
	z->zip64 = 0;
	if (z->eocd_off >= PTZ_LOC64_LEN) {
		uint64_t loc_off = z->eocd_off - PTZ_LOC64_LEN;

		rc = ptz_pread(z, loc, sizeof(loc), loc_off, d);
		if (rc < 0)
			goto out_free_tail;
		if (le32(loc) == PTZ_SIG_LOC64) {
			rc = read_zip64(z, loc_off, loc, &end, d);
			if (rc < 0)
				goto out_free_tail;
		}
	}
	if (!z->zip64) {
		rc = read_classic(tail + p, z->eocd_off, &end, d);
		if (rc < 0)
			goto out_free_tail;
	}
	rc = check_end(z, &end, d);
out_free_tail:
	free(tail);
	return rc;
}
