/*
 * ovl_journal.c - the overlay's journal: append-only, one record per
 * edit, each with a sequence number and a CRC, read back by streaming
 * (one record in memory at a time, never the whole file), so that a torn
 * tail (a crash during an append) is told apart from damage (a bad record
 * with a valid one after it).  The journal is untrusted input: another
 * user may have planted it (docs/design.md, "The overlay on disk").
 *
 * Record layout (little-endian):
 *
 * OFFSET | SIZE | FIELD
 * -------+------+-------------------------------------------------
 *      0 |    4 | payload length n (1 .. JR_MAX)
 *      4 |    4 | CRC-32 of bytes 8 .. 16+n (sequence and payload)
 *      8 |    8 | sequence number: 0 for the header, then +1 each
 *     16 |    n | payload: op (1 byte), then fields, each a u32
 *        |      | length and that many bytes (names may hold any
 *        |      | byte but '/' and NUL; value texts any byte)
 *
 * Record 0 is JR_HEAD (ovl_int.h lists every op and its fields).
 */
#define _GNU_SOURCE 1	/* fdatasync */
#include "ovl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/io.h"
#include "util/le.h"

#define SCAN_CHUNK	(1u << 16)

static void le_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void le_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

int jr_encode(const struct jrec *r, uint64_t seq, unsigned char **out,
	      size_t *outlen)
{
	size_t n = 1;
	unsigned char *p, *q;

	for (int i = 0; i < r->nf; i++)
		n += 4 + (size_t)r->len[i];
	if (n > JR_MAX)
		return -E2BIG;
	p = malloc(JR_HDR + n);
	if (!p)
		return -ENOMEM;
	q = p + JR_HDR;
	*q++ = (unsigned char)r->op;
	for (int i = 0; i < r->nf; i++) {
		le_put32(q, r->len[i]);
		if (r->len[i])
			memcpy(q + 4, r->f[i], r->len[i]);
		q += 4 + r->len[i];
	}
	le_put32(p, (uint32_t)n);
	le_put64(p + 8, seq);
	le_put32(p + 4, libdeflate_crc32(0, p + 8, 8 + n));
	*out = p;
	*outlen = JR_HDR + n;
	return 0;
}

int jr_append(struct ovl *v, const struct jrec *r, struct diag *d)
{
	unsigned char *p;
	size_t n;
	int rc = jr_encode(r, v->jseq, &p, &n);

	if (rc == -E2BIG)
		return diag_errno(d, rc, "journal record too large");
	if (rc)
		return diag_nomem(d);
	rc = io_pwrite_full(v->jfd, p, n, v->jend);
	if (!rc && fdatasync(v->jfd))
		rc = -errno;
	free(p);
	if (rc) {
		/* cut a partial record off, so that the next one follows
		   the last good one (best effort: the next mount sees a
		   torn tail otherwise) */
		if (ftruncate(v->jfd, v->jend))
			(void)0;
		return diag_errno(d, rc, "%s: %s", v->jpath, strerror(-rc));
	}
	v->jend += n;
	v->jseq++;
	return 0;
}

bool jr_num(const struct jrec *r, int i, uint64_t *out)
{
	uint64_t x = 0;

	if (i >= r->nf || !r->len[i] || r->len[i] > 19)
		return false;
	for (uint32_t k = 0; k < r->len[i]; k++) {
		if (r->f[i][k] < '0' || r->f[i][k] > '9')
			return false;
		x = x * 10 + (uint64_t)(r->f[i][k] - '0');
	}
	*out = x;
	return true;
}

/* Decode one payload into @r; false if its fields do not add up. */
static bool decode(const unsigned char *p, size_t n, struct jrec *r)
{
	size_t pos = 1;

	memset(r, 0, sizeof(*r));
	r->op = (char)p[0];
	while (pos < n) {
		uint32_t len;

		if (r->nf == JR_MAXF || n - pos < 4)
			return false;
		len = le32(p + pos);
		if (len > n - pos - 4)
			return false;
		r->f[r->nf] = (const char *)p + pos + 4;
		r->len[r->nf++] = len;
		pos += 4 + len;
	}
	return true;
}

void jr_reader_init(struct jr_reader *rd, int fd, uint64_t size)
{
	memset(rd, 0, sizeof(*rd));
	rd->fd = fd;
	rd->size = size;
}

void jr_reader_release(struct jr_reader *rd)
{
	free(rd->buf);
	rd->buf = NULL;
	rd->cap = 0;
}

/*
 * Is there a whole record at @pos with sequence number @seq or later, its
 * CRC right?  Reads in pieces: a record may be JR_MAX bytes.
 */
static int valid_at(struct jr_reader *rd, uint64_t pos, uint64_t seq,
		    unsigned char *tmp, bool *ok)
{
	unsigned char h[JR_HDR];
	uint32_t len, crc, got;
	uint64_t s;
	int rc;

	*ok = false;
	if (rd->size - pos < JR_HDR)
		return 0;
	rc = io_pread_full(rd->fd, h, JR_HDR, pos);
	if (rc)
		return rc;
	len = le32(h);
	crc = le32(h + 4);
	s = le64(h + 8);
	if (!len || len > JR_MAX || len > rd->size - pos - JR_HDR ||
	    s < seq || s - seq > (UINT64_C(1) << 32))
		return 0;
	got = libdeflate_crc32(0, h + 8, 8);
	for (uint64_t k = 0; k < len; k += SCAN_CHUNK) {
		size_t m = len - k < SCAN_CHUNK ? len - k : SCAN_CHUNK;

		rc = io_pread_full(rd->fd, tmp, m, pos + JR_HDR + k);
		if (rc)
			return rc;
		got = libdeflate_crc32(got, tmp, m);
	}
	*ok = got == crc;
	return 0;
}

/*
 * A bad record at @bad: is any valid record after it?  Then the journal is
 * damaged; else its tail was torn.  Bounded memory; reads the rest once
 * (and a candidate's bytes when its header fits).
 */
static int damaged_after(struct jr_reader *rd, uint64_t bad, uint64_t *at)
{
	unsigned char *win = malloc(SCAN_CHUNK + JR_HDR), *tmp;
	int rc = 0;

	*at = 0;
	tmp = win ? malloc(SCAN_CHUNK) : NULL;
	if (!tmp) {
		free(win);
		return -ENOMEM;
	}
	for (uint64_t base = bad + 1; base + JR_HDR <= rd->size && !rc;
	     base += SCAN_CHUNK) {
		uint64_t m = rd->size - base;
		bool ok;

		m = m < SCAN_CHUNK + JR_HDR ? m : SCAN_CHUNK + JR_HDR;
		rc = io_pread_full(rd->fd, win, m, base);
		for (uint64_t k = 0; !rc && k + JR_HDR <= m && k < SCAN_CHUNK;
		     k++) {
			uint32_t len = le32(win + k);
			uint64_t s = le64(win + k + 8);

			/* cheap filters first: a length that fits, a
			   sequence number not before the bad one's */
			if (!len || len > JR_MAX ||
			    len > rd->size - base - k - JR_HDR ||
			    s < rd->seq || s - rd->seq > (UINT64_C(1) << 32))
				continue;
			rc = valid_at(rd, base + k, rd->seq, tmp, &ok);
			if (!rc && ok) {
				*at = base + k;
				goto out;
			}
		}
	}
out:
	free(win);
	free(tmp);
	return rc;
}

int jr_next(struct jr_reader *rd, struct jrec *r, const char *name,
	    struct diag *d)
{
	unsigned char h[JR_HDR];
	const char *why = NULL;
	uint32_t len = 0;
	uint64_t at;
	int rc;

	if (rd->pos == rd->size || rd->torn)
		return 0;
	if (rd->size - rd->pos < JR_HDR) {
		why = "a record header cut short";
		goto bad;
	}
	rc = io_pread_full(rd->fd, h, JR_HDR, rd->pos);
	if (rc)
		return diag_errno(d, rc, "%s: %s", name, strerror(-rc));
	len = le32(h);
	if (!len || len > JR_MAX) {
		why = "a record length out of range";
		goto bad;
	}
	if (len > rd->size - rd->pos - JR_HDR) {
		why = "a record cut short";
		goto bad;
	}
	if (le64(h + 8) != rd->seq) {
		why = "a record out of sequence";
		goto bad;
	}
	if (rd->cap < len) {
		unsigned char *nb = realloc(rd->buf, len);

		if (!nb)
			return diag_nomem(d);
		rd->buf = nb;
		rd->cap = len;
	}
	rc = io_pread_full(rd->fd, rd->buf, len, rd->pos + JR_HDR);
	if (rc)
		return diag_errno(d, rc, "%s: %s", name, strerror(-rc));
	if (libdeflate_crc32(libdeflate_crc32(0, h + 8, 8), rd->buf, len) !=
	    le32(h + 4)) {
		why = "a record whose CRC does not match";
		goto bad;
	}
	if (!decode(rd->buf, len, r)) {
		/* the CRC matched: this is what was written, and we do not
		   write records like it */
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: "
				    "record %llu has fields that do not add "
				    "up", name, (unsigned long long)rd->pos,
				    (unsigned long long)rd->seq);
	}
	r->off = rd->pos;
	rd->pos += JR_HDR + len;
	rd->seq++;
	return 1;
bad:
	rc = damaged_after(rd, rd->pos, &at);
	if (rc)
		return rc == -ENOMEM ? diag_nomem(d) :
		       diag_errno(d, rc, "%s: %s", name, strerror(-rc));
	if (at)
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: "
				    "%s, and valid records after it (at "
				    "0x%llx): the journal is damaged; nothing "
				    "was changed (move the overlay aside, or "
				    "mount with -o discard to drop its edits)",
				    name, (unsigned long long)rd->pos, why,
				    (unsigned long long)at);
	/* the last append never finished: the edit did not return */
	rd->torn = true;
	return 0;
}
