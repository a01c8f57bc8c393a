/*
 * ptz_cdir.c - read the central directory (APPNOTE 4.3.12) through a
 * window and turn it into the reader's index: one ptz_entry per record
 * with its sizes and local header offset (ZIP64 extra field, 4.5.3, where
 * the 32-bit fields say 0xffffffff), every name in one block, the names
 * sorted ignoring ASCII case, the order torch's miniz looks names up in,
 * and the records' spaces checked not to overlap.  What miniz reads
 * otherwise than other readers (a name with a NUL, a record it takes for
 * a directory, entries past the count) is noted for ptz_amb.c, which
 * judges it before the checks of each record.
 */
#define PTZ_BUILD 1
#include "zip/ptz_int.h"
#include "util/heap.h"
#include "util/io.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"
#include "util/le.h"

/*
 * Central directory entry:
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    4 | signature 0x02014b50 ("PK\1\2")
 *      4 |    2 | version made by
 *      6 |    2 | version needed to extract
 *      8 |    2 | general purpose flags (bit 0, bit 6: encryption)
 *     10 |    2 | compression method (0 stored, 8 deflated)
 *     12 |    2 | modification time
 *     14 |    2 | modification date
 *     16 |    4 | CRC-32
 *     20 |    4 | compressed size (0xffffffff: in the ZIP64 extra)
 *     24 |    4 | uncompressed size (0xffffffff: in the ZIP64 extra)
 *     28 |    2 | name length n
 *     30 |    2 | extra field length m
 *     32 |    2 | comment length k
 *     34 |    2 | disk where the record starts
 *     36 |    2 | internal attributes
 *     38 |    4 | external attributes
 *     42 |    4 | local header offset (0xffffffff: in the ZIP64 extra)
 *     46 |    n | name (not NUL-terminated)
 *   46+n |    m | extra fields
 * 46+n+m |    k | comment
 */
#define CD_FLAGS	8
#define CD_METHOD	10
#define CD_CRC		16
#define CD_CSIZE	20
#define CD_USIZE	24
#define CD_NAME_LEN	28
#define CD_EXTRA_LEN	30
#define CD_COMMENT_LEN	32
#define CD_EXT_ATTR	38
#define CD_HEADER_OFF	42

/*
 * Extra field (a list of these fills the m bytes):
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    2 | header id (0x0001: ZIP64 extended information)
 *      2 |    2 | body size s
 *      4 |    s | body
 *
 * ZIP64 body: only the fields whose 32-bit value is 0xffffffff, in this
 * order: uncompressed size (8), compressed size (8), local header offset
 * (8), then the disk number (4, not used here).
 */
#define EXTRA_HDR	4

#define SENTINEL32	PTZ_SENTINEL32
#define DOS_DIR		0x10u	/* external attributes: a directory */

/* One central directory entry while it is parsed. */
struct cd_rec {
	const unsigned char *p;	/* the entry in the buffer */
	uint64_t off;		/* its file offset */
	uint16_t name_len;
	uint16_t extra_len;
	uint16_t comment_len;
};

/*
 * Replace the 0xffffffff fields of @e from the ZIP64 extra field of @r.
 * Other extra fields are skipped; like miniz, the list is only walked
 * when a value is needed from it, and then it must be well formed.
 */
static int read_zip64_extra(const struct cd_rec *r, struct ptz_entry *e,
			    const char *name, struct diag *d)
{
	const unsigned char *x = r->p + PTZ_CDIR_LEN + r->name_len;
	uint64_t xoff = r->off + PTZ_CDIR_LEN + r->name_len;
	size_t left = r->extra_len;
	unsigned need = 0;

	need += e->usize == SENTINEL32 ? 8 : 0;
	need += e->csize == SENTINEL32 ? 8 : 0;
	need += e->header_off == SENTINEL32 ? 8 : 0;
	while (left >= EXTRA_HDR) {
		uint16_t id = le16(x);
		uint16_t size = le16(x + 2);
		const unsigned char *b = x + EXTRA_HDR;

		if (size > left - EXTRA_HDR)
			return diag_corrupt(d, xoff, "extra field 0x%04x of '%s' (%u bytes) runs past its extra area (%zu bytes left)",
					    id, name, size, left - EXTRA_HDR);
		if (id != PTZ_EXTRA_ZIP64) {
			x += EXTRA_HDR + size;
			xoff += EXTRA_HDR + size;
			left -= EXTRA_HDR + size;
			continue;
		}
		if (size < need)
			return diag_corrupt(d, xoff, "zip64 extra field of '%s' too short (%u bytes, %u needed)",
					    name, size, need);
		if (e->usize == SENTINEL32) {
			e->usize = le64(b);
			b += 8;
		}
		if (e->csize == SENTINEL32) {
			e->csize = le64(b);
			b += 8;
		}
		if (e->header_off == SENTINEL32)
			e->header_off = le64(b);
		return 0;
	}
	return diag_corrupt(d, r->off, "record '%s' has a size or offset of 0xffffffff but no zip64 extra field",
			    name);
}


/*
 * Decode the entry @r, the @i-th, into @e (name already set), and note
 * in @s what miniz reads of it otherwise than other readers: nothing at
 * all of a record it takes for a directory (a name ending in '/', the DOS
 * directory attribute) or of one with no compressed bytes, since
 * mz_zip_reader_extract_to_mem() returns at once for those.  torch then
 * gets the buffer it allocated, unwritten (issue 44).  With classic
 * sizes the second does not arise: miniz refuses such a record at open.
 */
static int read_entry(const struct cd_rec *r, uint32_t i, struct ptz_entry *e,
		      struct ptz_scan *s, struct diag *d)
{
	const unsigned char *p = r->p;
	uint32_t attr = le32(p + CD_EXT_ATTR);
	int rc, why = 0;

	e->flags = le16(p + CD_FLAGS);
	e->method = le16(p + CD_METHOD);
	e->crc32 = le32(p + CD_CRC);
	e->csize = le32(p + CD_CSIZE);
	e->usize = le32(p + CD_USIZE);
	e->header_off = le32(p + CD_HEADER_OFF);
	if (e->usize == SENTINEL32 || e->csize == SENTINEL32 ||
	    e->header_off == SENTINEL32) {
		rc = read_zip64_extra(r, e, e->name, d);
		if (rc < 0)
			return rc;
	}
	if (memchr(p + PTZ_CDIR_LEN, 0, r->name_len) &&
	    s->nul_name == UINT32_MAX)
		s->nul_name = i;
	if (p[PTZ_CDIR_LEN + r->name_len - 1] == '/')
		why = PTZ_DIR_SLASH;
	else if (attr & DOS_DIR)
		why = PTZ_DIR_ATTR;
	else if (!e->csize && (le32(p + CD_CSIZE) == SENTINEL32 ||
			       le32(p + CD_USIZE) == SENTINEL32))
		why = PTZ_DIR_ZERO;
	if (why && e->usize && s->dir_data == UINT32_MAX) {
		s->dir_data = i;
		s->dir_why = why;
		s->dir_attr = attr;
	}
	return 0;
}

#define PTZ_DEFLATE_RATIO	1032u	/* deflate's greatest expansion */

/*
 * Check what can be checked of the record @e alone, whose central
 * directory entry is at @off.
 */
static int check_entry(const struct ptz_reader *z, const struct ptz_entry *e,
		       uint64_t off, struct diag *d)
{
	uint64_t room;

	if (e->flags & (PTZ_FLAG_ENCRYPTED | PTZ_FLAG_STRONG))
		return diag_unsupported(d, off + CD_FLAGS, "record '%s' is encrypted (flags 0x%04x)",
					e->name, e->flags);
	if (e->method != PTZ_STORED && e->method != PTZ_DEFLATED)
		return diag_unsupported(d, off + CD_METHOD, "record '%s' uses compression method %u (only 0, stored, and 8, deflate, are supported)",
					e->name, e->method);
	if (e->method == PTZ_STORED && e->csize != e->usize)
		return diag_corrupt(d, off + CD_CSIZE, "stored record '%s' has compressed size %" PRIu64 " but size %" PRIu64,
				    e->name, e->csize, e->usize);
	/*
	 * Deflate turns one 258-byte match into at least 2 bits, so no
	 * stream inflates to more than 1032 times its size (zlib's
	 * zlib_tech.html).  A larger claim is a lie that would otherwise
	 * size an allocation (ptz_entry_read) or an overlay file.
	 */
	if (e->method == PTZ_DEFLATED &&
	    e->usize / PTZ_DEFLATE_RATIO > e->csize + 1)
		return diag_corrupt(d, off + CD_USIZE, "deflated record '%s' claims %" PRIu64 " bytes from %" PRIu64 ", more than deflate can give",
				    e->name, e->usize, e->csize);
	/*
	 * The local header and the data must fit before the central
	 * directory; ptz_entry_locate() checks the local name and extra
	 * lengths later (miniz reads by those, not by this name's).
	 */
	room = z->cdir_off;
	if (e->header_off > room || room - e->header_off < PTZ_LOCAL_LEN ||
	    room - e->header_off - PTZ_LOCAL_LEN < e->csize)
		return diag_corrupt(d, off + CD_HEADER_OFF, "record '%s' (local header at 0x%" PRIx64 ", %" PRIu64 " bytes of data) runs past the central directory at 0x%" PRIx64,
				    e->name, e->header_off, e->csize, room);
	return 0;
}

size_t ptz_cdir_window = 256u << 10;

/*
 * The central directory is read through a window: read whole, the 6.4 MB
 * of 100,000 records were as many fresh pages, filled, read once and
 * unmapped (a tenth of ptls's zip index).  An entry that does not fit
 * (46 bytes and up to 3 x 64 KiB) grows it.
 */
struct cdir_win {
	unsigned char *buf;
	size_t cap;		/* bytes buf holds */
	uint64_t start;		/* central directory offset of buf[0] */
	size_t len;		/* its bytes in buf */
};

/* Have bytes [@pos, @pos + @n) of the central directory, which holds
 * them, in @w. */
static int win_need(const struct ptz_reader *z, struct cdir_win *w,
		    uint64_t pos, size_t n, struct diag *d)
{
	size_t keep = 0, want;
	unsigned char *nb;
	int rc;

	if (pos >= w->start && pos + n <= w->start + w->len)
		return 0;
	if (n > w->cap) {
		if (!(nb = realloc(w->buf, n)))
			return diag_nomem(d);
		w->buf = nb;
		w->cap = n;
	}
	if (pos >= w->start && pos < w->start + w->len) {
		keep = (size_t)(w->start + w->len - pos);
		memmove(w->buf, w->buf + (pos - w->start), keep);
	}
	want = z->cdir_size - pos < w->cap ? (size_t)(z->cdir_size - pos) :
	       w->cap;
	w->start = pos;
	w->len = keep;
	rc = ptz_pread(z, w->buf + keep, want - keep, z->cdir_off + pos + keep,
		       d);
	if (rc < 0)
		return rc;
	w->len = want;
	return 0;
}

/*
 * Split the entry at @pos of the central directory into @r (read
 * through @w), checking that its fixed part, name, extra and comment are
 * all inside the central directory.
 */
static int split_entry(const struct ptz_reader *z, struct cdir_win *w,
		       uint64_t pos, struct cd_rec *r, struct diag *d)
{
	size_t left = (size_t)(z->cdir_size - pos);
	uint32_t sig;
	int rc;

	r->off = z->cdir_off + pos;
	if (left < PTZ_CDIR_LEN)
		return diag_corrupt(d, r->off, "central directory ends inside a record (%zu of 46 bytes left)",
				    left);
	if ((rc = win_need(z, w, pos, PTZ_CDIR_LEN, d)))
		return rc;
	r->p = w->buf + (pos - w->start);
	sig = le32(r->p);
	if (sig != PTZ_SIG_CDIR)
		return diag_corrupt(d, r->off, "bad central directory signature 0x%08" PRIx32,
				    sig);
	r->name_len = le16(r->p + CD_NAME_LEN);
	r->extra_len = le16(r->p + CD_EXTRA_LEN);
	r->comment_len = le16(r->p + CD_COMMENT_LEN);
	if ((size_t)r->name_len + r->extra_len + r->comment_len >
	    left - PTZ_CDIR_LEN)
		return diag_corrupt(d, r->off + CD_NAME_LEN, "central directory record runs past the central directory (name %u, extra %u, comment %u bytes, %zu left)",
				    r->name_len, r->extra_len, r->comment_len,
				    left - PTZ_CDIR_LEN);
	if (r->name_len == 0)
		return diag_corrupt(d, r->off + CD_NAME_LEN, "record with an empty name");
	rc = win_need(z, w, pos, PTZ_CDIR_LEN + (size_t)r->name_len +
		      r->extra_len + r->comment_len, d);
	if (rc)
		return rc;
	r->p = w->buf + (pos - w->start);
	return 0;
}

/*
 * Parse every entry of the central directory, read through @w.  Bytes
 * after the last entry the end record counts are corrupt, unless they are
 * more entries: miniz stops at the count, Python's zipfile reads on
 * (s->cd_tail).
 */
static int parse_all(struct ptz_reader *z, struct cdir_win *w,
		     uint32_t *cd_pos, struct ptz_scan *s, struct diag *d)
{
	char *names = z->names;
	uint64_t pos = 0;
	int rc;

	for (uint32_t i = 0; i < z->nentries; i++) {
		struct ptz_entry *e = &z->entries[i];
		struct cd_rec r = { 0 };

		rc = split_entry(z, w, pos, &r, d);
		if (rc < 0)
			return rc;
		/* Each entry takes >= name_len + 1 bytes: names fit. */
		memcpy(names, r.p + PTZ_CDIR_LEN, r.name_len);
		names[r.name_len] = '\0';
		e->name = names;
		e->name_len = r.name_len;
		names += r.name_len + 1;
		rc = read_entry(&r, i, e, s, d);
		if (rc < 0)
			return rc;
		cd_pos[i] = (uint32_t)pos;
		pos += PTZ_CDIR_LEN + r.name_len + r.extra_len + r.comment_len;
	}
	if (pos == z->cdir_size)
		return 0;
	if (z->cdir_size - pos >= 4) {
		rc = win_need(z, w, pos, 4, d);
		if (rc < 0)
			return rc;
		if (le32(w->buf + (pos - w->start)) == PTZ_SIG_CDIR) {
			s->cd_tail = z->cdir_size - pos;
			return 0;
		}
	}
	return diag_corrupt(d, z->cdir_off + pos, "central directory has %" PRIu64 " bytes after its %" PRIu32 " records (the end record's count is wrong)",
			    z->cdir_size - pos, z->nentries);
}

static int cmp_offset(const void *a, const void *b)
{
	const struct ptz_entry *x = *(struct ptz_entry *const *)a;
	const struct ptz_entry *y = *(struct ptz_entry *const *)b;

	if (x->header_off != y->header_off)
		return x->header_off < y->header_off ? -1 : 1;
	return x < y ? -1 : x > y;	/* central directory order */
}

static int cmp_name(const void *a, const void *b)
{
	const struct ptz_entry *x = *(struct ptz_entry *const *)a;
	const struct ptz_entry *y = *(struct ptz_entry *const *)b;
	int c = ptz_name_cmp(x->name, x->name_len, y->name, y->name_len);

	if (c)
		return c;
	return x < y ? -1 : x > y;	/* central directory order */
}

/*
 * Give each record the space up to the next local header (or the central
 * directory) and check that it needs no more than that.  @v holds every
 * entry; it is left sorted by offset.
 */
static int check_overlaps(struct ptz_reader *z, struct ptz_entry **v,
			  struct diag *d)
{
	uint32_t n = z->nentries, k = 1;

	/* torch writes the central directory in file order: no sort then */
	while (k < n && cmp_offset(&v[k - 1], &v[k]) < 0)
		k++;
	if (k < n)
		qsort(v, n, sizeof(*v), cmp_offset);
	for (uint32_t i = 0; i < n; i++) {
		struct ptz_entry *e = v[i];
		/*
		 * check_entry() checked header_off + need <= cdir_off, so
		 * the sum cannot overflow and only a next record can be hit.
		 * The local name need not be as long as this one: miniz reads
		 * the data after the local header's own name.
		 */
		uint64_t need = PTZ_LOCAL_LEN + e->csize;
		uint64_t limit = i + 1 < n ? v[i + 1]->header_off :
				 z->cdir_off;

		if (limit - e->header_off < need)
			return diag_corrupt(d, e->header_off, "record '%s' overlaps '%s'",
					    e->name, v[i + 1]->name);
		limit -= e->header_off + need;
		e->slack = limit < UINT32_MAX ? (uint32_t)limit : UINT32_MAX;
	}
	return 0;
}

#define MAX_RUNS	16u	/* more sorted runs than this: qsort() */

/*
 * Sort @v[0..@n) by cmp_name(): merge its sorted runs when there are few
 * (torch's central directory has 1 to 3), else qsort().  0 or -ENOMEM.
 */
static int sort_names(struct ptz_entry **v, uint32_t n)
{
	uint32_t start[MAX_RUNS + 1], nruns = 0, i;
	struct ptz_entry **tmp;

	for (i = 0; i < n; i++)
		if (!i || cmp_name(&v[i - 1], &v[i]) > 0) {
			if (nruns == MAX_RUNS) {
				qsort(v, n, sizeof(*v), cmp_name);
				return 0;
			}
			start[nruns++] = i;
		}
	if (nruns < 2)
		return 0;
	start[nruns] = n;
	tmp = malloc((size_t)n * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	/* merge run 0 with run 1, the result with run 2, and so on */
	for (uint32_t r = 1; r < nruns; r++) {
		uint32_t a = 0, b = start[r], end = start[r + 1], o = 0;

		while (a < start[r] && b < end)
			tmp[o++] = cmp_name(&v[a], &v[b]) <= 0 ? v[a++] : v[b++];
		while (a < start[r])
			tmp[o++] = v[a++];
		while (b < end)
			tmp[o++] = v[b++];
		memcpy(v, tmp, (size_t)end * sizeof(*v));
	}
	free(tmp);
	return 0;
}

/* The folder of the first record's name; torch names every record in it. */
static int set_prefix(struct ptz_reader *z, struct diag *d)
{
	const char *name;
	const char *slash;
	size_t len;

	if (!z->nentries)
		return 0;
	name = z->entries[0].name;
	slash = strchr(name, '/');
	if (!slash)
		return 0;
	len = (size_t)(slash - name);
	z->prefix = malloc(len + 1);
	if (!z->prefix)
		return diag_nomem(d);
	memcpy(z->prefix, name, len);
	z->prefix[len] = '\0';
	z->prefix_len = len;
	return 0;
}

/* The checks of each record, then of their spaces (@v: scratch). */
static int check_all(struct ptz_reader *z, const uint32_t *cd_pos,
		     struct ptz_entry **v, struct diag *d)
{
	int rc;

	for (uint32_t i = 0; i < z->nentries; i++) {
		rc = check_entry(z, &z->entries[i], z->cdir_off + cd_pos[i], d);
		if (rc < 0)
			return rc;
		v[i] = &z->entries[i];
	}
	return check_overlaps(z, v, d);
}

int ptz_cdir_read(struct ptz_reader *z, struct ptz_scan *s, struct diag *d)
{
	size_t n = z->nentries;
	size_t size = (size_t)z->cdir_size;
	struct cdir_win w = { 0 };
	struct ptz_entry **v = NULL;
	uint32_t *cd_pos;
	int rc;

	if (!n)
		return size ? diag_corrupt(d, z->cdir_off, "central directory has %zu bytes but no records",
					   size) : 0;
	/* ptz_eocd_read() checked n * 46 <= size <= PTZ_MAX_CDIR. */
	w.cap = size < ptz_cdir_window ? size : ptz_cdir_window;
	w.buf = malloc(w.cap ? w.cap : 1);
	if (!w.buf)
		return diag_nomem(d);
	util_populate(w.buf, w.cap);
	cd_pos = malloc(n * sizeof(*cd_pos));
	if (!cd_pos) {
		rc = diag_nomem(d);
		goto out_free_buf;
	}
	z->entries = calloc(n, sizeof(*z->entries));
	z->by_name = malloc(n * sizeof(*z->by_name));
	z->names = malloc(size);
	v = malloc(n * sizeof(*v));
	if (!z->entries || !z->by_name || !z->names || !v) {
		rc = diag_nomem(d);
		goto out_free_cd_pos;
	}
	/* every entry is written: their pages in one call each, not a
	   fault each (heap.h); the names' block is only an upper bound */
	util_populate(cd_pos, n * sizeof(*cd_pos));
	util_populate(z->entries, n * sizeof(*z->entries));
	util_populate(z->by_name, n * sizeof(*z->by_name));
	rc = parse_all(z, &w, cd_pos, s, d);
	if (rc < 0)
		goto out_free_cd_pos;
	for (size_t i = 0; i < n; i++)
		z->by_name[i] = &z->entries[i];
	z->nnames = (uint32_t)n;
	if (sort_names(z->by_name, (uint32_t)n)) {
		rc = diag_nomem(d);
		goto out_free_cd_pos;
	}
	s->cd_pos = cd_pos;
	rc = ptz_amb_check(z, s, d);
	s->cd_pos = NULL;
	if (rc < 0)
		goto out_free_cd_pos;
	rc = check_all(z, cd_pos, v, d);
	if (rc < 0)
		goto out_free_cd_pos;
	rc = set_prefix(z, d);
out_free_cd_pos:
	free(v);
	free(cd_pos);
out_free_buf:
	free(w.buf);
	return rc;
}
