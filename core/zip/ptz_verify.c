/*
 * ptz_verify.c - ptverify's checks of a torch zip archive (ptz_verify.h):
 * what torch never verifies (each record's CRC-32; zip tools do), what
 * torch.load(mmap=True) needs (stored, aligned storage records), the
 * layout torch 2.x's offset calculation assumes (.format_version,
 * torch-format.md 2.3 and 3), and bytes hidden from torch (gaps, trailing
 * bytes, unused storage records).  A local header, a data descriptor and
 * the end records are read here as ptz_read.c and ptz_eocd.c lay them out
 * (APPNOTE 4.3.7, 4.3.9, 4.3.14-16).
 */
#define PTZ_BUILD 1
#include "zip/ptz_int.h"
#include "zip/ptz_verify.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "diag/diag.h"
#include "util/io.h"
#include "util/le.h"

#define ALIGN_MIN	64u		/* torch's; mmap users expect it */
#define SIG_DESC	0x08074b50u	/* "PK\7\8" */
#define LH_FLAGS	6		/* the local header's fields */
#define LH_METHOD	8
#define LH_CRC		14
#define LH_CSIZE	18
#define LH_USIZE	22
#define LH_NAME_LEN	26
#define FLAG_DESC	0x0008u		/* bit 3: a descriptor follows */

static void problem(const struct ptz_verify *v, const char *check,
		    uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void problem(const struct ptz_verify *v, const char *check,
		    uint64_t off, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	v->problem(v->arg, check, off, msg);
}

static void problem_diag(const struct ptz_verify *v, const char *check,
			 const struct diag *d)
{
	problem(v, check, d->off, "%s", d->msg);
}

/* @n bytes at @off of the archive, or false (a short file: the reader
 * refused what a check needs already, or will). */
static bool get(const struct ptz_reader *z, void *buf, size_t n, uint64_t off)
{
	return !io_pread_full(z->fd, buf, n, z->base + off);
}

/* A record under the top folder's data/: a storage's, by torch's names. */
static bool is_storage_rec(const struct ptz_reader *z,
			   const struct ptz_entry *e)
{
	return e->name_len > z->prefix_len + 6 &&
	       !strncasecmp(e->name + z->prefix_len + 1, "data/", 5);
}

/* ---- each record ---- */

/*
 * The local header must say what the central directory says: torch
 * (miniz) reads by the central directory, a streaming reader (unzip -,
 * bsdtar from a pipe, ZipInputStream) by the local headers, and Python's
 * zipfile refuses a local name that differs.  CRC-32 and sizes only when
 * no descriptor holds them (flag bit 3) and they are not in a ZIP64 extra.
 */
static void check_local(const struct ptz_verify *v, const struct ptz_entry *e)
{
	unsigned char lh[PTZ_LOCAL_LEN];
	uint16_t n;
	char *name;

	if (!get(v->z, lh, sizeof(lh), e->header_off))
		return;		/* ptz_entry_locate() read it already */
	if (le16(lh + LH_METHOD) != e->method)
		problem(v, "record", e->header_off, "local header of '%s' "
			"says compression method %u, the central directory %u "
			"(which torch reads)", e->name, le16(lh + LH_METHOD),
			e->method);
	else if (!(le16(lh + LH_FLAGS) & FLAG_DESC) &&
		 le32(lh + LH_CSIZE) != PTZ_SENTINEL32 &&
		 le32(lh + LH_USIZE) != PTZ_SENTINEL32 &&
		 (le32(lh + LH_CRC) != e->crc32 ||
		  le32(lh + LH_CSIZE) != e->csize ||
		  le32(lh + LH_USIZE) != e->usize))
		problem(v, "record", e->header_off, "local header of '%s' "
			"says CRC-32 %08" PRIx32 " and %" PRIu32 " bytes, the "
			"central directory (which torch reads) %08" PRIx32
			" and %" PRIu64, e->name, le32(lh + LH_CRC),
			le32(lh + LH_USIZE), e->crc32, e->usize);
	n = le16(lh + LH_NAME_LEN);
	if (n != e->name_len) {
		problem(v, "record", e->header_off, "local header of '%s' "
			"names %u bytes, the central directory %u", e->name, n,
			e->name_len);
		return;
	}
	name = malloc(n + 1u);
	if (name && get(v->z, name, n, e->header_off + PTZ_LOCAL_LEN) &&
	    memcmp(name, e->name, n)) {
		name[n] = '\0';
		problem(v, "record", e->header_off, "local header names '%s', "
			"the central directory '%s'", name, e->name);
	}
	free(name);
}

/*
 * The data descriptor after the data (flag bit 3) must carry the CRC-32
 * and, where its size shows their width (with or without its signature,
 * up to the next record), the sizes: a streaming reader goes by it.
 */
static void check_descriptor(const struct ptz_verify *v,
			     const struct ptz_entry *e)
{
	unsigned char dd[24];
	uint64_t at = e->data_off + e->csize, room, cs, us;
	size_t sig;
	uint32_t crc;

	if (!(e->flags & FLAG_DESC) || !e->csize || at + 8 > ptz_limit(e) ||
	    !get(v->z, dd, 8, at))
		return;
	sig = le32(dd) == SIG_DESC ? 4 : 0;
	crc = le32(dd + sig);
	if (crc != e->crc32) {
		problem(v, "descriptor", at, "data descriptor of '%s' says "
			"CRC-32 %08" PRIx32 ", the central directory %08" PRIx32,
			e->name, crc, e->crc32);
		return;
	}
	room = ptz_limit(e) - at;
	if (room == sig + 12 && get(v->z, dd, room, at)) {
		cs = le32(dd + sig + 4);
		us = le32(dd + sig + 8);
	} else if (room == sig + 20 && get(v->z, dd, room, at)) {
		cs = le64(dd + sig + 4);
		us = le64(dd + sig + 12);
	} else {
		return;
	}
	if (cs != e->csize || us != e->usize)
		problem(v, "descriptor", at, "data descriptor of '%s' says %"
			PRIu64 " bytes (%" PRIu64 " compressed), the central "
			"directory %" PRIu64 " (%" PRIu64 ")", e->name, us, cs,
			e->usize, e->csize);
}

static void check_crc(const struct ptz_verify *v, struct ptz_entry *e)
{
	struct diag d;
	uint32_t crc;
	int rc;

	diag_init(&d, v->z->path);
	rc = ptz_entry_crc32(v->z, e, &crc, v->step, v->arg, &d);
	if (rc == -EFBIG) {
		problem(v, "crc", e->header_off, "record '%s' inflates to "
			"%" PRIu64 " bytes: CRC-32 not checked", e->name,
			e->usize);
		return;
	}
	if (rc) {
		problem_diag(v, "record", &d);
		return;
	}
	if (crc == e->crc32)
		return;
	if (!e->crc32)
		problem(v, "crc", e->header_off, "record '%s' has no CRC-32 "
			"(0, data %08" PRIx32 "): saved with torch.serialization"
			".set_crc32_options(False)? zip tools call it corrupt",
			e->name, crc);
	else
		problem(v, "crc", e->header_off, "record '%s': CRC-32 of the "
			"data is %08" PRIx32 ", the archive says %08" PRIx32
			" (changed after it was written?)", e->name, crc,
			e->crc32);
}

static void check_record(const struct ptz_verify *v, struct ptz_entry *e)
{
	const struct ptz_reader *z = v->z;
	struct diag d;

	diag_init(&d, z->path);
	if (ptz_entry_locate(z, e, &d)) {
		problem_diag(v, "record", &d);
		return;
	}
	check_local(v, e);
	if (e->method != PTZ_STORED && is_storage_rec(z, e))
		problem(v, "deflated", e->header_off, "record '%s' is "
			"compressed: torch.load(mmap=True) reads its raw bytes "
			"as data", e->name);
	else if (e->method == PTZ_STORED && is_storage_rec(z, e) &&
		 e->data_off % ALIGN_MIN)
		problem(v, "alignment", e->data_off, "record '%s' data is "
			"%" PRIu64 "-byte aligned, not %u: tensors mapped by "
			"torch.load(mmap=True) are misaligned (ptrepack fixes "
			"it)", e->name, ptz_align(e->data_off), ALIGN_MIN);
	check_descriptor(v, e);
	if (!v->no_crc)
		check_crc(v, e);
}

void ptz_verify_records(const struct ptz_verify *v)
{
	for (uint32_t i = 0; i < v->z->nentries; i++)
		check_record(v, &v->z->entries[i]);
}

/* ---- the space between records ---- */

static int by_header(const void *a, const void *b)
{
	const struct ptz_entry *x = *(struct ptz_entry *const *)a;
	const struct ptz_entry *y = *(struct ptz_entry *const *)b;

	return x->header_off < y->header_off ? -1 :
	       x->header_off > y->header_off;
}

/* Bytes after @e's data that a data descriptor may fill. */
static bool descriptor_gap(const struct ptz_entry *e, uint64_t gap)
{
	if (!(e->flags & FLAG_DESC) || !e->csize)
		return gap == 0;
	return gap == 12 || gap == 16 || gap == 20 || gap == 24;
}

/*
 * Every byte of a torch archive belongs to a record, its descriptor, the
 * central directory or the end records; anything else (data before the
 * first record, between records, after the end) is hidden from torch.
 */
static void check_gaps(const struct ptz_verify *v)
{
	const struct ptz_reader *z = v->z;
	struct ptz_entry **s = malloc((z->nentries + 1) * sizeof(*s));
	unsigned char eocd[PTZ_EOCD_LEN];
	uint64_t at = 0, end;

	if (!s)
		return;
	for (uint32_t i = 0; i < z->nentries; i++)
		s[i] = &z->entries[i];
	qsort(s, z->nentries, sizeof(*s), by_header);
	if (z->nentries && s[0]->header_off)
		problem(v, "gap", 0, "%" PRIu64 " bytes before the first "
			"record belong to no record", s[0]->header_off);
	for (uint32_t i = 0; i < z->nentries; i++) {
		uint64_t next = i + 1 < z->nentries ? s[i + 1]->header_off :
				z->cdir_off;

		if (!s[i]->data_off)
			continue;	/* not located: reported already */
		at = s[i]->data_off + s[i]->csize;
		if (next >= at && !descriptor_gap(s[i], next - at))
			problem(v, "gap", at, "%" PRIu64 " bytes after record "
				"'%s' belong to no record", next - at,
				s[i]->name);
	}
	free(s);
	/* after the central directory: ZIP64 end record and locator */
	at = z->cdir_off + z->cdir_size;
	if (z->zip64 && get(z, eocd, 12, at) && le32(eocd) == PTZ_SIG_EOCD64)
		at += 12 + le64(eocd + 4) + PTZ_LOC64_LEN;
	if (z->eocd_off > at)
		problem(v, "gap", at, "%" PRIu64 " bytes before the end of "
			"central directory belong to nothing", z->eocd_off - at);
	if (!get(z, eocd, sizeof(eocd), z->eocd_off))
		return;
	end = z->eocd_off + sizeof(eocd) + le16(eocd + 20);
	if (z->file_size > end)
		problem(v, "trailing", end, "%" PRIu64 " bytes after the end "
			"of the zip archive", z->file_size - end);
}

/* ---- what torch 2.x's mmap offset calculation assumes ---- */

static int by_pkl_off(const void *a, const void *b)
{
	const struct ptz_use *x = *(const struct ptz_use *const *)a;
	const struct ptz_use *y = *(const struct ptz_use *const *)b;

	return x->pkl_off < y->pkl_off ? -1 : x->pkl_off > y->pkl_off;
}

/*
 * With .format_version >= 1, torch 2.x may compute (not read) where each
 * storage's data starts: data/0's real offset, then each next storage
 * right after the previous one's data and descriptor, behind a local
 * header padded to .storage_alignment (torch-format.md 2.3 and 3).  A
 * file laid out otherwise loads garbage with mmap=True and
 * calculate_storage_offsets.  Storages in the order the pickle first
 * names them.
 */
static void check_layout(const struct ptz_verify *v, uint64_t align)
{
	const struct ptz_use **s;
	uint64_t cur = 0;
	bool first = true;

	s = malloc((v->nuses + 1) * sizeof(*s));
	if (!s)
		return;
	for (uint32_t i = 0; i < v->nuses; i++)
		s[i] = &v->uses[i];
	qsort(s, v->nuses, sizeof(*s), by_pkl_off);
	for (uint32_t i = 0; i < v->nuses; i++) {
		const struct ptz_entry *e = s[i]->rec;
		uint64_t hdr, start, expect, n = s[i]->nbytes;

		if (!e || !e->data_off)
			continue;
		if (first) {
			if (strcmp(s[i]->key, "0")) {
				problem(v, "layout", s[i]->pkl_off, "the "
					"pickle names storage '%s' first, not "
					"'0': torch 2.x's offset calculation "
					"(.format_version) refuses the file",
					s[i]->key);
				break;
			}
			hdr = e->header_off;
			expect = e->data_off;
			first = false;
		} else {
			bool big = n >= 0xffffffffu || cur >= 0xffffffffu;

			/* a local header, its name, the "FB" extra's header
			 * and, for ZIP64, the extra with the sizes and the
			 * header's offset */
			hdr = cur;
			start = cur + PTZ_LOCAL_LEN + e->name_len + 4 +
				(big ? 4 + (n >= 0xffffffffu ? 16 : 0) +
				 (cur >= 0xffffffffu ? 8 : 0) : 0);
			expect = start + (align - start % align) % align;
		}
		if (expect != e->data_off) {
			problem(v, "layout", e->data_off, "record '%s' starts "
				"at 0x%" PRIx64 ", torch 2.x computes 0x%"
				PRIx64 " (.format_version): torch.load(mmap="
				"True, calculate_storage_offsets) reads wrong "
				"bytes (ptrepack fixes it)", e->name,
				e->data_off, expect);
			break;
		}
		/* the data descriptor: ZIP64 sizes past 4 GiB */
		cur = e->data_off + n;
		if (n)
			cur += hdr >= 0xffffffffu || n >= 0xffffffffu ? 24 : 16;
	}
	free(s);
}

/* ---- records torch reads ---- */

static char *small_record(const struct ptz_reader *z, const char *rel)
{
	struct ptz_entry *e = ptz_find_rel(z, rel);
	unsigned char *buf = NULL;
	struct diag quiet;
	size_t len;

	diag_init(&quiet, z->path);
	if (!e || ptz_entry_read(z, e, 64, &buf, &len, &quiet))
		return NULL;
	return (char *)buf;
}

static void check_records_torch_reads(const struct ptz_verify *v)
{
	const struct ptz_reader *z = v->z;
	struct ptz_entry *ver = ptz_find_rel(z, "version");
	struct ptz_entry *dver = ptz_find_rel(z, ".data/version");
	struct ptz_entry *bo = ptz_find_rel(z, "byteorder");
	char *fv = small_record(z, ".format_version");
	char *sa = small_record(z, ".storage_alignment");
	uint64_t align = ALIGN_MIN;

	if (ver && dver) {
		char *a = small_record(z, "version");
		char *b = small_record(z, ".data/version");

		if (a && b && strtoul(a, NULL, 10) != strtoul(b, NULL, 10))
			problem(v, "version", dver->header_off, "'version' "
				"says %lu, '.data/version' (which torch reads) "
				"%lu", strtoul(a, NULL, 10),
				strtoul(b, NULL, 10));
		free(a);
		free(b);
	}
	if (v->big_endian && bo)
		problem(v, "byteorder", bo->header_off, "byteorder 'big': "
			"torch 2.x byte-swaps every storage on a little-endian "
			"host, torch 1.x does not (the two load different "
			"values)");
	if (sa) {
		unsigned long a = strtoul(sa, NULL, 10);

		if (!a || (a & (a - 1)))
			problem(v, "alignment", ptz_find_rel(z,
				".storage_alignment")->header_off,
				".storage_alignment '%.16s' is not a power of "
				"two", sa);
		else
			align = a;
	}
	for (uint32_t i = 0; i < v->nuses && align > ALIGN_MIN; i++) {
		const struct ptz_entry *e = v->uses[i].rec;

		if (e && e->data_off && e->data_off % align)
			problem(v, "alignment", e->data_off, "record '%s' is "
				"not aligned to %" PRIu64 " as "
				".storage_alignment says", e->name, align);
	}
	if (fv && strcmp(fv, "1") >= 0)
		check_layout(v, align);
	free(fv);
	free(sa);
}

/* data/ records no storage of the model uses. */
static void check_unused(const struct ptz_verify *v)
{
	const struct ptz_reader *z = v->z;
	bool *used;

	if (!v->uses)
		return;		/* the model's storages are not known */
	used = calloc(z->nentries + 1, sizeof(*used));
	if (!used)
		return;
	for (uint32_t i = 0; i < v->nuses; i++)
		if (v->uses[i].rec)
			used[ptz_cd_index(z, v->uses[i].rec)] = true;
	for (uint32_t i = 0; i < z->nentries; i++) {
		const struct ptz_entry *e = &z->entries[i];

		if (!used[i] && is_storage_rec(z, e))
			problem(v, "unused", e->header_off, "record '%s' (%"
				PRIu64 " bytes) is used by no tensor (ptrepack "
				"--drop-unused leaves it out)", e->name,
				e->usize);
	}
	free(used);
}

void ptz_verify_archive(const struct ptz_verify *v)
{
	check_gaps(v);
	check_records_torch_reads(v);
	check_unused(v);
}
