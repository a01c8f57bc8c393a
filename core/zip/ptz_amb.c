/*
 * ptz_amb.c - refuse an archive that torch reads otherwise than other zip
 * readers do (issue 44).  torch.load opens a zip with miniz (2.1.0 in
 * torch 1.x, 3.0.2 in 2.x); ptz_eocd.c and ptz_cdir.c read it as miniz
 * does and note where Python's zipfile (what model scanners use), the zip
 * format's own rules or a streaming reader would find other records.
 * Such a file fails here with diag_unsafe(): one line saying what torch
 * would load and why the file is ambiguous, counted as a danger, not as
 * damage.  What torch 1.13 and 2.14 load, measured with the archives of
 * tests/fuzz/seeds_zip.py (data.pkl in each names the record it is):
 *
 *   ARCHIVE                                  | TORCH LOADS
 *   -----------------------------------------+-------------------------------
 *   an end record inside another's comment   | the inner one (the last
 *   or after it                              | "PK\5\6" with 22 bytes after)
 *   ZIP64 and classic values that differ     | the ZIP64 record's
 *   a ZIP64 locator pointing at no record    | the classic values
 *   a ZIP64 record away from its locator     | the one the locator names
 *   a directory not right before the end     | it, at its offset; zipfile
 *   records                                  | the bytes before them
 */
#define PTZ_BUILD 1
#include "zip/ptz_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>

#include "diag/diag.h"

#define ZIPFILE_Z64	56u	/* zipfile's ZIP64 end record: 56 bytes before
				   the locator (no extensible data) */

/*
 * The end records, as ptz_eocd.c read them the way miniz does, against
 * what other readers take: an earlier end record, the 56 bytes right
 * before the ZIP64 locator (zipfile's ZIP64 record), the classic values
 * (what a reader that consults ZIP64 only for 0xffff fields uses), and
 * the bytes right before the end records (zipfile's central directory,
 * every offset moved by the difference).
 */
static int check_ends(const struct ptz_reader *z, const struct ptz_scan *s,
		      struct diag *d)
{
	uint64_t end = z->eocd_off, cd_end = z->cdir_off + z->cdir_size;
	const uint64_t *c = s->classic;

	if (s->eocd2_off != PTZ_NONE)
		return diag_unsafe(d, s->eocd2_off, "two end of central directory records: torch reads the last, at 0x%" PRIx64 " (central directory at 0x%" PRIx64 ", %" PRIu32 " records); %s this one (central directory at 0x%" PRIx64 ", %" PRIu32 " records)",
				   z->eocd_off, z->cdir_off, z->nentries,
				   s->eocd2_exact ? "the zip format, whose comment ends the file, gives" : "other zip readers may take",
				   s->eocd2_cd_off, s->eocd2_n);
	if (s->z64_missing)
		return diag_unsafe(d, s->loc_off, "zip64 end locator points at 0x%" PRIx64 ", where no zip64 end record is: torch ignores it and reads the classic end record (central directory at 0x%" PRIx64 ", %" PRIu32 " records), other zip readers refuse the file or look elsewhere",
				   s->z64_off, z->cdir_off, z->nentries);
	if (z->zip64 && s->z64_off + ZIPFILE_Z64 != s->loc_off)
		return diag_unsafe(d, s->z64_off, "zip64 end record at 0x%" PRIx64 " is not right before its locator at 0x%" PRIx64 ": torch reads it where the locator points (central directory at 0x%" PRIx64 ", %" PRIu32 " records), Python's zipfile the 56 bytes before the locator",
				   s->z64_off, s->loc_off, z->cdir_off,
				   z->nentries);
	if (z->zip64 && ((c[0] != 0xffff && c[0] != z->nentries) ||
			 (c[1] != 0xffff && c[1] != z->nentries) ||
			 (c[2] != PTZ_SENTINEL32 && c[2] != z->cdir_size) ||
			 (c[3] != PTZ_SENTINEL32 && c[3] != z->cdir_off)))
		return diag_unsafe(d, z->eocd_off, "the classic end record says central directory at 0x%" PRIx64 " (%" PRIu64 " records), the zip64 one, which torch reads, 0x%" PRIx64 " (%" PRIu32 "): readers that consult zip64 only for 0xffff values read another directory",
				   c[3], c[1], z->cdir_off, z->nentries);
	if (z->zip64)
		end = s->z64_off;
	if (cd_end != end)
		return diag_unsafe(d, cd_end, "central directory (0x%" PRIx64 ", %" PRIu64 " bytes) does not end where the end records start (0x%" PRIx64 "): torch reads it at its offset, Python's zipfile takes the bytes before the end records for it, every record moved by %+" PRId64,
				   z->cdir_off, z->cdir_size, end,
				   (int64_t)(end - cd_end));
	return 0;
}

int ptz_amb_check(const struct ptz_reader *z, const struct ptz_scan *s,
		  struct diag *d)
{
	return check_ends(z, s, d);
}
