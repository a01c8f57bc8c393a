/*
 * ptz_int.h - what the parts of the zip reader share: record sizes and
 * signatures (APPNOTE 6.3.x sections 4.3.7, 4.3.12, 4.3.14-16), the ASCII
 * case fold torch's miniz uses for names, what the open notes of records
 * that readers disagree on (struct ptz_scan), and the one pread helper.
 *
 * Internal: the files of core/zip define PTZ_BUILD before including it, and
 * tests define PT_INTERNAL (like libarchive's *_private.h headers).
 */
#ifndef PT_ZIP_PTZ_INT_H
#define PT_ZIP_PTZ_INT_H

#if !defined(PT_INTERNAL) && !defined(PTZ_BUILD)
#error "ptz_int.h is internal to core/zip and its tests"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "zip/ptz.h"

struct diag;

#define PTZ_SIG_LOCAL	0x04034b50u	/* "PK\3\4" local file header */
#define PTZ_SIG_CDIR	0x02014b50u	/* "PK\1\2" central directory entry */
#define PTZ_SIG_EOCD	0x06054b50u	/* "PK\5\6" end of central directory */
#define PTZ_SIG_EOCD64	0x06064b50u	/* "PK\6\6" ZIP64 end record */
#define PTZ_SIG_LOC64	0x07064b50u	/* "PK\6\7" ZIP64 end locator */

#define PTZ_CDIR_LEN	46u	/* fixed part of a central directory entry */
#define PTZ_EOCD_LEN	22u	/* classic end record without its comment */
#define PTZ_EOCD64_LEN	56u	/* ZIP64 end record without extensible data */
#define PTZ_LOC64_LEN	20u	/* ZIP64 end locator */
#define PTZ_COMMENT_MAX	0xffffu	/* archive comment: a u16 length */

#define PTZ_EXTRA_ZIP64	0x0001u	/* ZIP64 extended information extra field */
#define PTZ_SENTINEL32	0xffffffffu	/* a 32-bit field: see the ZIP64 one */

#define PTZ_FLAG_ENCRYPTED	0x0001u	/* bit 0: traditional encryption */
#define PTZ_FLAG_STRONG		0x0040u	/* bit 6: strong encryption */

/*
 * Fold ASCII upper case to lower case and nothing else: miniz's MZ_TOLOWER,
 * independent of the locale.
 */
static inline int ptz_fold(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/*
 * The order of z->by_name: byte by byte ignoring ASCII case, a prefix
 * first.  torch writes its central directory in that order (data.pkl,
 * data/0, data/1, data/10 ..., version; torch 2 puts byteorder first and
 * .data/ last), so the open merges a few sorted runs (ptz_cdir.c) where a
 * sort of 100,000 names with their long common prefix took 11% of ptls.
 */
static inline int ptz_name_cmp(const char *a, size_t na, const char *b,
			       size_t nb)
{
	const unsigned char *p = (const unsigned char *)a;
	const unsigned char *q = (const unsigned char *)b;
	size_t i = 0, n = na < nb ? na : nb;

	/* the common prefix ("archive/data/") 8 bytes at a time: equal
	   bytes fold alike */
	for (uint64_t x, y; i + 8 <= n; i += 8) {
		memcpy(&x, p + i, 8);
		memcpy(&y, q + i, 8);
		if (x != y)
			break;
	}
	for (; i < n; i++) {
		int c = ptz_fold(p[i]) - ptz_fold(q[i]);

		if (c)
			return c;
	}
	return na < nb ? -1 : na > nb;
}

#define PTZ_NONE	UINT64_MAX	/* no such record in struct ptz_scan */

/*
 * What the open saw that torch's miniz reads one way and other zip
 * readers another.  ptz_eocd_read() and ptz_cdir_read() read the archive
 * as miniz does and note these here; ptz_amb_check() judges them once the
 * central directory is read, so that a file torch cannot open at all is
 * reported as corrupt, not as ambiguous.
 */
struct ptz_scan {
	bool as_torch;			/* ptz_reader_open_torch(): no
					   refusal, torch's picks kept */
	/* another end record before the one miniz takes, naming another
	   central directory (ptz_eocd.c) */
	uint64_t eocd2_off;		/* PTZ_NONE: none */
	uint64_t eocd2_cd_off;
	uint32_t eocd2_n;
	bool eocd2_exact;		/* its comment ends the file, the
					   one miniz takes does not */
	/* the ZIP64 locator and where it points (PTZ_NONE: no locator) */
	uint64_t loc_off;
	uint64_t z64_off;
	bool z64_missing;		/* no ZIP64 end record there: miniz
					   reads the classic values */
	uint64_t classic[4];		/* the classic record's entries on
					   this disk, total, directory size
					   and offset, as written */
	/* the central directory (ptz_cdir.c) */
	const uint32_t *cd_pos;		/* each entry's position in it */
	uint64_t cd_tail;		/* bytes after the counted entries */
	uint32_t nul_name;		/* first name holding a NUL byte
					   (UINT32_MAX: none) */
	uint32_t dir_data;		/* first record miniz reads nothing of
					   though it holds bytes (likewise) */
	int dir_why;			/* why: PTZ_DIR_SLASH, ... */
	uint32_t dir_attr;		/* its external attributes */
};

#define PTZ_DIR_SLASH	1	/* its name ends in '/' */
#define PTZ_DIR_ATTR	2	/* external attributes: the DOS directory bit */
#define PTZ_DIR_ZERO	3	/* ZIP64 sizes: no compressed bytes for data */

/* A scan that has seen nothing yet. */
void ptz_scan_init(struct ptz_scan *s);

/*
 * Find the end records as miniz does: sets z->eocd_off, z->zip64,
 * z->nentries, z->cdir_off and z->cdir_size, all checked against
 * z->file_size, and notes in @s what other readers would take instead.
 */
int ptz_eocd_read(struct ptz_reader *z, struct ptz_scan *s, struct diag *d);

/*
 * Read and check the central directory located by ptz_eocd_read(): fills
 * z->entries, z->names, z->by_name, z->prefix; calls ptz_amb_check()
 * once it is read, before the checks of each record.  On failure the
 * caller releases what was filled in.
 */
int ptz_cdir_read(struct ptz_reader *z, struct ptz_scan *s, struct diag *d);

/*
 * Refuse, with diag_unsafe(), an archive that torch reads otherwise than
 * other zip readers (ptz_amb.c): what @s noted, names equal ignoring case
 * (z->by_name sorted), a first record that is no local header.  With
 * s->as_torch, refuse nothing but keep in z->by_name, of names equal
 * ignoring case, the record torch's lookup finds (z->nnames).
 */
int ptz_amb_check(struct ptz_reader *z, const struct ptz_scan *s,
		  struct diag *d);

/* Bytes of the central directory ptz_cdir_read() reads at a time (an
 * entry longer than that is read whole); tests make it small. */
extern size_t ptz_cdir_window;

#endif
