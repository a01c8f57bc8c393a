/*
 * ovl_journal.c - the overlay's journal of structural edits: append-only,
 * one record per edit, each checked by a CRC so that a record torn by a
 * crash is recognized and cut off instead of replayed.
 *
 * Record layout (little-endian):
 *
 * OFFSET | SIZE | FIELD
 * -------+------+-------------------------------------------------
 *      0 |    4 | payload length n (at most JR_MAX)
 *      4 |    4 | CRC-32 of the payload
 *      8 |    n | payload: op (1 byte), then fields, each a u32
 *        |      | length and that many bytes (names may hold any
 *        |      | byte but '/' and NUL; value texts any byte)
 *
 * The first record is JR_HEAD: the magic and the size and mtime of the
 * checkpoint the edits apply to.
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

static void le_put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

int jr_append(struct ovl *v, const struct jrec *r, struct diag *d)
{
	size_t n = 1;
	unsigned char *p, *q;
	int rc;

	for (int i = 0; i < r->nf; i++)
		n += 4 + r->len[i];
	if (n > JR_MAX)
		return diag_errno(d, -E2BIG, "journal record too large");
	p = malloc(8 + n);
	if (!p)
		return diag_nomem(d);
	q = p + 8;
	*q++ = r->op;
	for (int i = 0; i < r->nf; i++) {
		le_put32(q, r->len[i]);
		memcpy(q + 4, r->f[i], r->len[i]);
		q += 4 + r->len[i];
	}
	le_put32(p, n);
	le_put32(p + 4, libdeflate_crc32(0, p + 8, n));
	rc = io_pwrite_full(v->jfd, p, 8 + n, v->jend);
	if (!rc && fdatasync(v->jfd))
		rc = -errno;
	free(p);
	if (rc) {
		/* cut a partial record off, so that the next one follows
		   the last good one (best effort: replay cuts it too) */
		if (ftruncate(v->jfd, v->jend))
			(void)0;
		return diag_errno(d, rc, "%s/%s: %s", v->dir, OVL_JOURNAL,
				  strerror(-rc));
	}
	v->jend += 8 + n;
	return 0;
}

int jr_create(struct ovl *v, struct diag *d)
{
	char size[24], sec[24], nsec[24];
	struct jrec h = { .op = JR_HEAD, .nf = 4,
			  .f = { OVL_MAGIC, size, sec, nsec } };
	int rc;

	v->jfd = openat(v->dfd, OVL_JOURNAL, O_RDWR | O_CREAT | O_TRUNC |
			O_CLOEXEC, 0600);
	if (v->jfd < 0)
		return diag_errno(d, -errno, "%s/%s: %s", v->dir, OVL_JOURNAL,
				  strerror(errno));
	v->jend = 0;
	snprintf(size, sizeof(size), "%llu",
		 (unsigned long long)v->base.st_size);
	snprintf(sec, sizeof(sec), "%lld", (long long)v->base.st_mtim.tv_sec);
	snprintf(nsec, sizeof(nsec), "%ld", (long)v->base.st_mtim.tv_nsec);
	for (int i = 0; i < 4; i++)
		h.len[i] = strlen(h.f[i]);
	rc = jr_append(v, &h, d);
	if (rc) {
		/*
		 * No journal without its header: the next edit creates it
		 * again, instead of appending records that the next mount
		 * would refuse as "not a ptfs journal" (an EIO here did).
		 */
		close(v->jfd);
		v->jfd = -1;
		(void)unlinkat(v->dfd, OVL_JOURNAL, 0);
	}
	return rc;
}

bool jr_num(const struct jrec *r, int i, uint64_t *out)
{
	uint64_t x = 0;

	if (i >= r->nf || !r->len[i] || r->len[i] > 19)
		return false;
	for (uint32_t k = 0; k < r->len[i]; k++) {
		if (r->f[i][k] < '0' || r->f[i][k] > '9')
			return false;
		x = x * 10 + (r->f[i][k] - '0');
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

int jr_load(struct ovl *v, struct jrec **recs, size_t *nrecs,
	    unsigned char **buf, struct diag *d)
{
	off_t size = lseek(v->jfd, 0, SEEK_END);
	unsigned char *b;
	struct jrec *r = NULL;
	size_t n = 0, pos = 0;

	*recs = NULL;
	*nrecs = 0;
	*buf = NULL;
	if (size < 0)
		return diag_errno(d, -errno, "%s/%s: %s", v->dir, OVL_JOURNAL,
				  strerror(errno));
	b = malloc(size + 1);
	if (!b)
		return diag_nomem(d);
	if (io_pread_full(v->jfd, b, size, 0)) {
		free(b);
		return diag_errno(d, -EIO, "%s/%s: cannot read", v->dir,
				  OVL_JOURNAL);
	}
	while ((off_t)pos + 8 <= size) {
		uint32_t len = le32(b + pos), crc = le32(b + pos + 4);
		struct jrec *nr;

		if (!len || len > JR_MAX || len > size - pos - 8 ||
		    libdeflate_crc32(0, b + pos + 8, len) != crc)
			break;
		nr = realloc(r, (n + 1) * sizeof(*r));
		if (!nr) {
			free(r);
			free(b);
			return diag_nomem(d);
		}
		r = nr;
		if (!decode(b + pos + 8, len, &r[n]))
			break;
		n++;
		pos += 8 + len;
	}
	if ((off_t)pos != size && ftruncate(v->jfd, pos)) {
		free(r);
		free(b);
		return diag_errno(d, -errno, "%s/%s: cannot cut off a torn "
				  "record: %s", v->dir, OVL_JOURNAL,
				  strerror(errno));
	}
	v->jend = pos;
	*recs = r;
	*nrecs = n;
	*buf = b;
	return 0;
}
