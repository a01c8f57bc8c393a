/*
 * ptz_read.c - open a zip archive (end records, then central directory),
 * look records up by name the way torch's miniz does (ASCII case ignored),
 * and find and read a record's data through its local header (APPNOTE
 * 4.3.7).  After ptz_reader_open() everything here is pread-only, so many
 * threads may share one reader; ptz_entry_locate() writes e->data_off, the
 * same value each time.
 */
#define PTZ_BUILD 1
#include "zip/ptz_int.h"
#include "util/heap.h"
#include "util/io.h"

#include <errno.h>
#include <inttypes.h>
#include <libdeflate.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag/diag.h"
#include "util/le.h"

/*
 * Local file header:
 *
 * OFFSET | SIZE | FIELD
 * -------+------+---------------------------------------------------
 *      0 |    4 | signature 0x04034b50 ("PK\3\4")
 *      4 |    2 | version needed to extract
 *      6 |    2 | general purpose flags
 *      8 |    2 | compression method
 *     10 |    2 | modification time
 *     12 |    2 | modification date
 *     14 |    4 | CRC-32 (0 when bit 3 of flags: in a data descriptor)
 *     18 |    4 | compressed size (likewise)
 *     22 |    4 | uncompressed size (likewise)
 *     26 |    2 | name length n
 *     28 |    2 | extra field length m (torch: "FB" alignment padding)
 *     30 |    n | name
 *   30+n |    m | extra fields
 * 30+n+m |      | data (csize bytes, then an optional data descriptor)
 *
 * Only the signature and the two lengths are used; like miniz, sizes and
 * CRC come from the central directory.
 */
#define LH_NAME_LEN	26
#define LH_EXTRA_LEN	28

int ptz_pread(const struct ptz_reader *z, void *buf, size_t len, uint64_t off,
	      struct diag *d)
{
	return io_pread_diag(z->fd, buf, len, z->base + off, NULL, d);
}

int ptz_reader_open(struct ptz_reader *z, int fd, const char *path,
		    struct diag *d)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		int err = errno;

		memset(z, 0, sizeof(*z));
		z->fd = fd;
		z->path = path;
		return diag_errno(d, -err, "cannot stat: %s", strerror(err));
	}
	return ptz_reader_open_at(z, fd, path, 0, (uint64_t)st.st_size, d);
}

/* ptz_reader_open_at(), @torch: ptz_reader_open_torch(). */
static int open_at(struct ptz_reader *z, int fd, const char *path,
		   uint64_t base, uint64_t size, bool torch, struct diag *d)
{
	struct ptz_scan s;
	struct stat st;
	int rc;

	memset(z, 0, sizeof(*z));
	z->fd = fd;
	z->path = path;
	if (fstat(fd, &st) < 0) {
		int err = errno;

		return diag_errno(d, -err, "cannot stat: %s", strerror(err));
	}
	/* an embedded archive must lie inside its file */
	if (base > (uint64_t)st.st_size || size > (uint64_t)st.st_size - base)
		return diag_corrupt(d, base, "archive of %" PRIu64 " bytes at "
				    "offset %" PRIu64 " runs past the end of "
				    "the file (%" PRIu64 " bytes)", size, base,
				    (uint64_t)st.st_size);
	z->base = base;
	z->file_size = size;
	ptz_scan_init(&s);
	s.as_torch = torch;
	rc = ptz_eocd_read(z, &s, d);
	if (rc < 0)
		goto out_release;
	rc = ptz_cdir_read(z, &s, d);
	if (rc < 0)
		goto out_release;
	return 0;
out_release:
	ptz_reader_release(z);
	z->fd = fd;
	z->path = path;
	return rc;
}

int ptz_reader_open_at(struct ptz_reader *z, int fd, const char *path,
		       uint64_t base, uint64_t size, struct diag *d)
{
	return open_at(z, fd, path, base, size, false, d);
}

int ptz_reader_open_torch(struct ptz_reader *z, int fd, const char *path,
			  uint64_t base, uint64_t size, struct diag *d)
{
	return open_at(z, fd, path, base, size, true, d);
}

void ptz_reader_release(struct ptz_reader *z)
{
	free(z->entries);
	free(z->by_name);
	free(z->prefix);
	free(z->names);
	memset(z, 0, sizeof(*z));
}

/*
 * A name to look up in up to three pieces ("prefix", "/", "rel"), so that
 * ptz_find_rel() needs no buffer.  None of the pieces contains a NUL.
 */
struct key {
	const char *s[3];
	size_t n[3];
};

/* ptz_name_cmp(@e's name, key) without joining the key's pieces. */
static int key_cmp(const struct ptz_entry *e, const struct key *k)
{
	const unsigned char *p = (const unsigned char *)e->name;
	size_t n = k->n[0] + k->n[1] + k->n[2], at = 0;

	for (int i = 0; i < 3; i++)
		for (size_t j = 0; j < k->n[i]; j++, at++) {
			int c;

			if (at == e->name_len)
				return -1;	/* a prefix of the key */
			c = ptz_fold(p[at]) - ptz_fold((unsigned char)k->s[i][j]);
			if (c)
				return c;
		}
	return e->name_len > n;
}

/*
 * Binary search of z->by_name.  Names are unique ignoring case (checked at
 * open, or made so by ptz_reader_open_torch()), so the one match ignoring
 * case is also the exact match if any.
 */
static struct ptz_entry *find_key(const struct ptz_reader *z,
					const struct key *k)
{
	size_t lo = 0, hi = z->nnames;

	if (k->n[0] + k->n[1] + k->n[2] > UINT16_MAX)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = key_cmp(z->by_name[mid], k);

		if (!c)
			return z->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

struct ptz_entry *ptz_find(const struct ptz_reader *z, const char *name)
{
	struct key k = { { name, "", "" }, { 0, 0, 0 } };

	if (!name || !z->nnames)
		return NULL;
	k.n[0] = strlen(name);
	return find_key(z, &k);
}

struct ptz_entry *ptz_find_rel(const struct ptz_reader *z, const char *rel)
{
	struct key k = { { "", "", rel }, { 0, 0, 0 } };

	if (!rel || !z->nnames)
		return NULL;
	if (z->prefix) {
		k.s[0] = z->prefix;
		k.n[0] = z->prefix_len;
		k.s[1] = "/";
		k.n[1] = 1;
	}
	k.n[2] = strlen(rel);
	return find_key(z, &k);
}

int ptz_entry_locate(const struct ptz_reader *z, struct ptz_entry *e,
		     struct diag *d)
{
	unsigned char lh[PTZ_LOCAL_LEN];
	uint64_t off = e->header_off, limit = ptz_limit(e);
	uint64_t data_off, room;
	uint32_t sig;
	int rc;

	if (e->data_off)
		return 0;
	/* ptz_reader_open() checked header_off + 30 + csize <= limit. */
	rc = ptz_pread(z, lh, sizeof(lh), off, d);
	if (rc < 0)
		return rc;
	sig = le32(lh);
	if (sig != PTZ_SIG_LOCAL)
		return diag_corrupt(d, off, "bad local header signature 0x%08" PRIx32 " for record '%s'",
				    sig, e->name);
	data_off = off + PTZ_LOCAL_LEN + le16(lh + LH_NAME_LEN) +
		   le16(lh + LH_EXTRA_LEN);
	room = limit - off;
	if (data_off - off > room || room - (data_off - off) < e->csize)
		return diag_corrupt(d, off + LH_NAME_LEN, "record '%s': local name (%u bytes), extra (%u bytes) and data (%" PRIu64 " bytes) run past the next record at 0x%" PRIx64,
				    e->name, le16(lh + LH_NAME_LEN),
				    le16(lh + LH_EXTRA_LEN), e->csize, limit);
	e->data_off = data_off;
	return 0;
}

/* Inflate the @e->csize bytes at e->data_off into @out (e->usize bytes). */
static int inflate_entry(const struct ptz_reader *z,
			 const struct ptz_entry *e, unsigned char *out,
			 struct diag *d)
{
	struct libdeflate_decompressor *dec;
	enum libdeflate_result res;
	unsigned char *in;
	size_t got = 0;
	int rc;

	in = malloc(e->csize ? (size_t)e->csize : 1);
	if (!in)
		return diag_nomem(d);
	rc = ptz_pread(z, in, (size_t)e->csize, e->data_off, d);
	if (rc < 0)
		goto out_free_in;
	dec = libdeflate_alloc_decompressor();
	if (!dec) {
		rc = diag_nomem(d);
		goto out_free_in;
	}
	res = libdeflate_deflate_decompress(dec, in, (size_t)e->csize, out,
					    (size_t)e->usize, &got);
	if (res == LIBDEFLATE_INSUFFICIENT_SPACE)
		rc = diag_corrupt(d, e->data_off, "record '%s' inflates to more than its size %" PRIu64,
				  e->name, e->usize);
	else if (res != LIBDEFLATE_SUCCESS)
		rc = diag_corrupt(d, e->data_off, "record '%s' is not a valid deflate stream",
				  e->name);
	else if (got != e->usize)
		rc = diag_corrupt(d, e->data_off, "record '%s' inflates to %zu bytes, not its size %" PRIu64,
				  e->name, got, e->usize);
	libdeflate_free_decompressor(dec);
out_free_in:
	free(in);
	return rc;
}

/* The largest deflate stream worth reading for @max output bytes. */
static uint64_t max_csize(uint64_t max)
{
	uint64_t m;

	/* Stored deflate blocks add 5 bytes per 64 KiB; allow far more. */
	if (__builtin_add_overflow(max, max / 16 + 4096, &m))
		return UINT64_MAX;
	return m;
}

int ptz_entry_fits(const struct ptz_reader *z, struct ptz_entry *e,
		   uint64_t max, struct diag *d)
{
	int rc = ptz_entry_locate(z, e, d);

	if (rc < 0)
		return rc;
	if (e->usize > max || e->usize >= SIZE_MAX)
		return diag_set(d, -EFBIG, e->header_off, "record '%s' is %" PRIu64 " bytes, more than the %" PRIu64 " allowed",
				e->name, e->usize, max);
	if (e->method == PTZ_DEFLATED &&
	    (e->csize > max_csize(max) || e->csize >= SIZE_MAX))
		return diag_set(d, -EFBIG, e->header_off, "record '%s' has %" PRIu64 " compressed bytes, too many for its allowed %" PRIu64,
				e->name, e->csize, max);
	return 0;
}

int ptz_entry_read(const struct ptz_reader *z, struct ptz_entry *e,
		   uint64_t max, unsigned char **out, size_t *len,
		   struct diag *d)
{
	unsigned char *buf;
	int rc;

	*out = NULL;
	*len = 0;
	rc = ptz_entry_fits(z, e, max, d);
	if (rc < 0)
		return rc;
	buf = malloc((size_t)e->usize + 1);
	if (!buf)
		return diag_nomem(d);
	util_populate(buf, (size_t)e->usize + 1);
	if (e->method == PTZ_DEFLATED)
		rc = inflate_entry(z, e, buf, d);
	else
		rc = ptz_pread(z, buf, (size_t)e->usize, e->data_off, d);
	if (rc < 0)
		goto out_free_buf;
	buf[e->usize] = '\0';
	*out = buf;
	*len = (size_t)e->usize;
	return 0;
out_free_buf:
	free(buf);
	return rc;
}
