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
 *   entries past the end record's count      | the counted ones only
 *   a name twice, or in two cases            | the one miniz's heap sort and
 *                                            | binary search land on
 *   a name with a NUL ("data.pkl\0x")        | never that record; zipfile
 *                                            | cuts the name at the NUL
 *   a record miniz takes for a directory     | none of its bytes: the buffer
 *   (name ending in '/', DOS attribute 0x10) | torch allocated, unwritten
 *   a zip after a pickle (no "PK\3\4" first) | the pickle, as a legacy file
 */
#define PTZ_BUILD 1
#include "zip/ptz_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"
#include "util/le.h"

#define ZIPFILE_Z64	56u	/* zipfile's ZIP64 end record: 56 bytes before
				   the locator (no extensible data) */

/*
 * Which of several records equal ignoring case torch loads is fixed by
 * miniz's index: a heap sort of the central directory's positions by
 * name (mz_zip_reader_sort_central_dir_offsets_by_filename(), not stable)
 * and a binary search of it (mz_zip_locate_file_binary_search()).  Done
 * here as miniz does it, step for step; the same in both miniz versions,
 * and checked against both torches on 60 random archives.  Above this
 * many records the answer is not worked out.
 */
#define MZ_SORT_MAX	(1u << 20)

static bool mz_less(const struct ptz_entry *e, uint32_t a, uint32_t b)
{
	return ptz_name_cmp(e[a].name, e[a].name_len, e[b].name,
			    e[b].name_len) < 0;
}

/* miniz's sift-down of @ix[@root] in the heap @ix[0..@end). */
static void mz_sift(const struct ptz_entry *e, uint32_t *ix, uint64_t root,
		    uint64_t end)
{
	for (;;) {
		uint64_t child = root * 2 + 1;
		uint32_t t;

		if (child >= end)
			break;
		if (child + 1 < end && mz_less(e, ix[child], ix[child + 1]))
			child++;
		if (!mz_less(e, ix[root], ix[child]))
			break;
		t = ix[root];
		ix[root] = ix[child];
		ix[child] = t;
		root = child;
	}
}

/* miniz's index of @z: its central directory heap-sorted by name, or
   NULL (too many records, no memory).  Caller frees. */
static uint32_t *mz_index(const struct ptz_reader *z)
{
	const struct ptz_entry *e = z->entries;
	uint32_t n = z->nentries, *ix;

	if (n > MZ_SORT_MAX || !(ix = malloc((size_t)n * sizeof(*ix) + 1)))
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		ix[i] = i;
	for (uint32_t start = n >= 2 ? (n - 2) >> 1 : 0; n >= 2; start--) {
		mz_sift(e, ix, start, n);
		if (!start)
			break;
	}
	for (uint32_t end = n - 1; n >= 2 && end > 0; end--) {
		uint32_t t = ix[end];

		ix[end] = ix[0];
		ix[0] = t;
		mz_sift(e, ix, 0, end);
	}
	return ix;
}

/* The central directory index (in z->entries) of the record miniz's
   lookup of @key's name finds in @ix. */
static uint32_t mz_search(const struct ptz_reader *z, const uint32_t *ix,
			  const struct ptz_entry *key)
{
	int64_t lo = 0, hi = (int64_t)z->nentries - 1;

	while (lo <= hi) {
		int64_t mid = lo + ((hi - lo) >> 1);
		const struct ptz_entry *m = &z->entries[ix[mid]];
		int c = ptz_name_cmp(m->name, m->name_len, key->name,
				     key->name_len);

		if (!c)
			return ix[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return ptz_cd_index(z, key);	/* not reached: @key is in @ix */
}

/* Where the central directory entry of z->entries[@i] is. */
static uint64_t cd_at(const struct ptz_reader *z, const struct ptz_scan *s,
		      uint32_t i)
{
	return z->cdir_off + s->cd_pos[i];
}

/*
 * Names equal ignoring ASCII case (z->by_name is sorted so): torch looks
 * every name up ignoring case, so it loads one record for all of them,
 * the one mz_search() finds; Python's zipfile keeps the last of names that
 * are equal, and tells apart those that differ in case.
 */
static int check_dups(const struct ptz_reader *z, const struct ptz_scan *s,
		      struct diag *d)
{
	struct ptz_entry *const *v = z->by_name;
	const struct ptz_entry *a, *b, *t;
	uint32_t n = z->nentries, i = 0, k, pick, *ix;
	bool same = true, known;

	while (i + 1 < n && ptz_name_cmp(v[i]->name, v[i]->name_len,
					 v[i + 1]->name, v[i + 1]->name_len))
		i++;
	if (i + 1 >= n)
		return 0;
	/* v[i..k) are one name ignoring case, in central directory order;
	   b the first spelt otherwise than a, if any */
	a = v[i];
	b = v[i + 1];
	for (k = i + 1; k < n && !ptz_name_cmp(a->name, a->name_len,
					       v[k]->name, v[k]->name_len); k++)
		if (memcmp(a->name, v[k]->name, a->name_len) && same) {
			same = false;
			b = v[k];
		}
	ix = mz_index(z);
	known = ix != NULL;
	pick = known ? mz_search(z, ix, a) : 0;
	free(ix);
	if (!known)
		return diag_unsafe(d, cd_at(z, s, ptz_cd_index(z, b)), "duplicate record name '%.100s' (%u records, equal ignoring case as torch looks names up): too many records (%" PRIu32 ") to work out which one torch loads",
				   a->name, k - i, n);
	t = &z->entries[pick];
	if (same)
		return diag_unsafe(d, cd_at(z, s, pick), "duplicate record name '%.100s' (%u records, at 0x%" PRIx64 ", 0x%" PRIx64 "%s): torch loads the one at 0x%" PRIx64 ", Python's zipfile the last",
				   a->name, k - i, a->header_off, b->header_off,
				   k - i > 2 ? ", ..." : "", t->header_off);
	return diag_unsafe(d, cd_at(z, s, pick), "duplicate record name '%.60s' ignoring case ('%.60s' too): torch, looking names up so, loads '%.60s' at 0x%" PRIx64 " for either, other zip readers each by its own name (records at 0x%" PRIx64 " and 0x%" PRIx64 "%s)",
			   a->name, b->name, t->name, t->header_off,
			   a->header_off, b->header_off,
			   k - i > 2 ? ", ..." : "");
}

/*
 * A record miniz reads nothing of though it holds bytes: its extract
 * returns at once for a directory and for a record without compressed
 * bytes, and torch keeps the buffer it allocated for the data, unwritten
 * (torch 1.13 and 2.x load zeros or whatever the memory held).
 */
static int check_dir(const struct ptz_reader *z, const struct ptz_scan *s,
		     struct diag *d)
{
	const struct ptz_entry *e = &z->entries[s->dir_data];
	uint64_t off = cd_at(z, s, s->dir_data);

	if (s->dir_why == PTZ_DIR_ZERO)
		return diag_unsafe(d, off, "record '%.100s' claims %" PRIu64 " bytes in no compressed ones (zip64 sizes): torch 1.13 reads none of them (its buffer stays as allocated), torch 2.x refuses the archive",
				   e->name, e->usize);
	if (s->dir_why == PTZ_DIR_SLASH)
		return diag_unsafe(d, off, "record '%.100s' holds %" PRIu64 " bytes, but its name ends in '/': torch takes it for a directory and reads none of them (its buffer stays as allocated), other zip readers read them",
				   e->name, e->usize);
	return diag_unsafe(d, off, "record '%.100s' holds %" PRIu64 " bytes, but its external attributes 0x%08" PRIx32 " mark a DOS directory: torch reads none of them (its buffer stays as allocated), other zip readers read them",
			   e->name, e->usize, s->dir_attr);
}

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

/*
 * Opened as torch reads it (ptz_reader_open_torch()): keep in z->by_name,
 * of each run of names equal ignoring case, only the record torch's
 * lookup finds, so that ptz_find() finds it.
 */
static int keep_torch_picks(struct ptz_reader *z, const struct ptz_scan *s,
			    struct diag *d)
{
	struct ptz_entry **v = z->by_name;
	uint32_t n = z->nentries, o = 0, *ix = NULL;

	for (uint32_t i = 0, k; i < n; i = k) {
		for (k = i + 1; k < n && !ptz_name_cmp(v[i]->name,
						       v[i]->name_len,
						       v[k]->name,
						       v[k]->name_len); k++)
			;
		if (k - i == 1) {
			v[o++] = v[i];
			continue;
		}
		if (!ix && !(ix = mz_index(z)))
			return diag_unsupported(d, cd_at(z, s, ptz_cd_index(z, v[i])), "duplicate record name '%.100s' in %" PRIu32 " records, too many to work out which one torch loads",
						v[i]->name, n);
		v[o++] = &z->entries[mz_search(z, ix, v[i])];
	}
	free(ix);
	z->nnames = o;
	return 0;
}

int ptz_amb_check(struct ptz_reader *z, const struct ptz_scan *s,
		  struct diag *d)
{
	unsigned char sig[4];
	int rc;

	if (s->as_torch)
		return keep_torch_picks(z, s, d);
	if ((rc = check_ends(z, s, d)))
		return rc;
	if (s->cd_tail)
		return diag_unsafe(d, z->cdir_off + z->cdir_size - s->cd_tail, "central directory holds more records than the %" PRIu32 " its end record counts (%" PRIu64 " bytes more): torch reads only the counted ones, Python's zipfile all",
				   z->nentries, s->cd_tail);
	if (!z->nentries)
		return 0;
	/* torch.load reads a zip only if it starts with a local header */
	rc = ptz_pread(z, sig, sizeof(sig), 0, d);
	if (rc < 0)
		return rc;
	if (le32(sig) != PTZ_SIG_LOCAL)
		return diag_unsafe(d, 0, "the archive does not start with a local header (\"PK\\3\\4\"): torch.load reads such a file as a legacy pickle stream, not as this zip, which other zip readers find from its end");
	if (s->nul_name != UINT32_MAX) {
		const struct ptz_entry *e = &z->entries[s->nul_name];

		return diag_unsafe(d, cd_at(z, s, s->nul_name) + PTZ_CDIR_LEN, "record name '%.100s' goes on after a NUL byte: torch never reads that record (no name it looks up matches it), Python's zipfile cuts the name at the NUL and reads it as '%.100s'",
				   e->name, e->name);
	}
	if ((rc = check_dups(z, s, d)))
		return rc;
	if (s->dir_data != UINT32_MAX)
		return check_dir(z, s, d);
	return 0;
}
