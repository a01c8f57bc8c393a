/*
 * ptz_eocd.c - find the central directory through the end records as
 * torch's miniz (2.1.0 in torch 1.x, 3.0.2 in torch 2.x) finds it: the
 * classic end of central directory record (APPNOTE 4.3.16) is the last
 * "PK\5\6" with 22 bytes after it in the file's last 69584 bytes, whatever
 * its comment length says, and, when a ZIP64 locator (4.3.15) sits right
 * before it, the ZIP64 end record (4.3.14) it points to wins, wherever it
 * is.  torch.save always writes all three; other zip tools often only the
 * first.  What other readers would take instead (an earlier end record, a
 * ZIP64 record not before its locator) is noted for ptz_amb.c.
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
	uint64_t end_off;	/* where the central directory must end: the
				   locator, or the classic record */
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
 * miniz scans the file backwards in 4 KiB blocks that overlap by 3 bytes
 * and gives up once it has looked 64 KiB + 22 bytes back: its last block
 * starts 4096 + 16 x 4093 = 69584 bytes before the end.
 */
#define MZ_EOCD_SCAN	69584u

/*
 * The end record miniz takes: the last "PK\5\6" of @tail (the last @len
 * bytes of the file) with at least 22 bytes after it.  Its comment length
 * is not looked at, so trailing bytes are allowed and a record inside
 * another's comment wins.  Returns its index or -1.
 */
static long find_eocd(const unsigned char *tail, size_t len)
{
	if (len < PTZ_EOCD_LEN)
		return -1;
	for (size_t p = len - PTZ_EOCD_LEN + 1; p-- > 0;)
		if (le32(tail + p) == PTZ_SIG_EOCD)
			return (long)p;
	return -1;
}

/*
 * Note in @s the last end record before the one at @p (both in @tail, the
 * file's bytes from @tail_off) that other readers could take: its comment
 * fits in the file, it names another central directory, and that one lies
 * before it (or is in a ZIP64 record).  Where only it ends the file with
 * its comment, it is what the zip format's own rule picks.
 */
static void find_other(const unsigned char *tail, size_t len, size_t p,
		       uint64_t tail_off, struct ptz_scan *s)
{
	bool exact = le16(tail + p + EOCD_COMMENT) == len - p - PTZ_EOCD_LEN;

	for (size_t q = p; q-- > 0;) {
		const unsigned char *r = tail + q;
		size_t room = len - q - PTZ_EOCD_LEN;
		uint64_t at = tail_off + q;
		uint32_t cd_off, cd_size;

		if (le32(r) != PTZ_SIG_EOCD || le16(r + EOCD_COMMENT) > room ||
		    !memcmp(r + EOCD_DISK, tail + p + EOCD_DISK, 16))
			continue;
		cd_off = le32(r + EOCD_CD_OFF);
		cd_size = le32(r + EOCD_CD_SIZE);
		if (cd_off != PTZ_SENTINEL32 && cd_size != PTZ_SENTINEL32 &&
		    (cd_off > at || cd_size > at - cd_off))
			continue;
		s->eocd2_off = at;
		s->eocd2_cd_off = cd_off;
		s->eocd2_n = le16(r + EOCD_N_TOTAL);
		s->eocd2_exact = !exact && le16(r + EOCD_COMMENT) == room;
		return;
	}
}

/*
 * Read the ZIP64 locator at @loc_off and the ZIP64 end record it points
 * to into @end, as miniz does: the record may be anywhere in the file,
 * and where the locator points at none, the classic values are read
 * (s->z64_missing).
 */
static int read_zip64(struct ptz_reader *z, uint64_t loc_off,
		      const unsigned char *loc, struct ptz_end *end,
		      struct ptz_scan *s, struct diag *d)
{
	unsigned char rec[PTZ_EOCD64_LEN];
	uint64_t off = le64(loc + LOC64_OFF);
	uint64_t recsize;
	int rc;

	s->loc_off = loc_off;
	s->z64_off = off;
	if (le32(loc + LOC64_DISK) != 0)
		return diag_unsupported(d, loc_off, "multi-disk zip archives are not supported (zip64 locator: disk %" PRIu32 ")",
					le32(loc + LOC64_DISK));
	/* the locator is at 76 or later: the subtraction cannot wrap */
	if (off > z->file_size - PTZ_EOCD64_LEN)
		return diag_corrupt(d, loc_off + LOC64_OFF, "zip64 end record offset 0x%" PRIx64 " runs past the end of the file",
				    off);
	rc = ptz_pread(z, rec, sizeof(rec), off, d);
	if (rc < 0)
		return rc;
	if (le32(rec) != PTZ_SIG_EOCD64) {
		s->z64_missing = true;
		return 0;
	}
	if (le32(loc + LOC64_NDISKS) != 1)
		return diag_unsupported(d, loc_off + LOC64_NDISKS, "multi-disk zip archives are not supported (zip64 locator: %" PRIu32 " disks; torch reads only 1)",
					le32(loc + LOC64_NDISKS));
	recsize = le64(rec + EOCD64_RECSIZE);
	if (recsize < PTZ_EOCD64_LEN - 12)
		return diag_corrupt(d, off + EOCD64_RECSIZE, "bad zip64 end record size %" PRIu64 " (at least 44)",
				    recsize);
	if (le32(rec + EOCD64_DISK) != 0 || le32(rec + EOCD64_CD_DISK) != 0)
		return diag_unsupported(d, off + EOCD64_DISK, "multi-disk zip archives are not supported (zip64 end record: disk %" PRIu32 ", central directory on disk %" PRIu32 ")",
					le32(rec + EOCD64_DISK),
					le32(rec + EOCD64_CD_DISK));
	end->n_disk = le64(rec + EOCD64_N_DISK);
	end->n_total = le64(rec + EOCD64_N_TOTAL);
	end->cd_size = le64(rec + EOCD64_CD_SIZE);
	end->cd_off = le64(rec + EOCD64_CD_OFF);
	end->rec_off = off;
	/* between the directory's start and the locator, the record is
	   where the end records start; elsewhere ptz_amb.c refuses it */
	if (off >= end->cd_off && off < loc_off)
		end->end_off = off;
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

void ptz_scan_init(struct ptz_scan *s)
{
	memset(s, 0, sizeof(*s));
	s->eocd2_off = PTZ_NONE;
	s->loc_off = PTZ_NONE;
	s->z64_off = PTZ_NONE;
	s->nul_name = UINT32_MAX;
	s->dir_data = UINT32_MAX;
}

int ptz_eocd_read(struct ptz_reader *z, struct ptz_scan *s, struct diag *d)
{
	size_t len = z->file_size < MZ_EOCD_SCAN ? (size_t)z->file_size :
		     MZ_EOCD_SCAN;
	unsigned char loc[PTZ_LOC64_LEN];
	struct ptz_end end = { 0 };
	unsigned char *tail, *rec;
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
	rec = tail + p;
	z->eocd_off = tail_off + (uint64_t)p;
	z->zip64 = 0;
	s->classic[0] = le16(rec + EOCD_N_DISK);
	s->classic[1] = le16(rec + EOCD_N_TOTAL);
	s->classic[2] = le32(rec + EOCD_CD_SIZE);
	s->classic[3] = le32(rec + EOCD_CD_OFF);
	find_other(tail, len, (size_t)p, tail_off, s);
	/* where miniz looks for a locator: room for it and a ZIP64 record */
	end.end_off = z->eocd_off;
	if (z->eocd_off >= PTZ_LOC64_LEN + PTZ_EOCD64_LEN) {
		uint64_t loc_off = z->eocd_off - PTZ_LOC64_LEN;

		rc = ptz_pread(z, loc, sizeof(loc), loc_off, d);
		if (rc < 0)
			goto out_free_tail;
		if (le32(loc) == PTZ_SIG_LOC64) {
			end.end_off = loc_off;
			rc = read_zip64(z, loc_off, loc, &end, s, d);
			if (rc < 0)
				goto out_free_tail;
		}
	}
	if (!z->zip64) {
		rc = read_classic(rec, z->eocd_off, &end, d);
		if (rc < 0)
			goto out_free_tail;
	}
	rc = check_end(z, &end, d);
out_free_tail:
	free(tail);
	return rc;
}
