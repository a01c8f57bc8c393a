/*
 * test_ptz_base.c - the zip writer against a base (core/zip/ptz_copy.c):
 * an archive written against the archive it replaces, copied in runs or
 * patched into a clone of it, must be byte for byte what the writer writes
 * without one, for edits anywhere in a record (first and last byte, across
 * 64 KiB chunks and the 1 MiB compare buffer, bytes rewritten with the
 * same values), with and without a dirty map and a known CRC; only what
 * differs may be written into a clone, and runs must be one copy each.  A
 * record that would move in a clone fails with -EAGAIN; a clone longer
 * than the archive is cut.  (The clone here is a plain copy of the base:
 * the writer cannot tell, and FICLONE needs XFS or btrfs, which
 * tests/fs/reflink.sh has.)
 */
#include "test_util.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag/diag.h"
#include "zip/ptz_write.h"
#include "zip/ptz_write_int.h"

static char line[512];

static const char *dline(const struct diag *d)
{
	return diag_line(d, line, sizeof(line));
}

#define NREC	5
#define EDITED	2	/* the record the edits go to */

static const char *const names[NREC] = {
	"archive/data.pkl", "archive/data/0", "archive/data/1",
	"archive/data/2", "archive/version",
};
static const size_t sizes[NREC] = { 1000, 300000, (5u << 19) + 77, 0, 2 };

struct fixture {
	unsigned char *data[NREC];	/* the base's records */
	unsigned char *edited;		/* record EDITED after the edits */
	uint64_t data_off[NREC];	/* where the base has them */
	uint32_t crc[NREC];
	int base, ovl;			/* the base archive, the new bytes */
	uint64_t dirty[64];		/* chunks of 64 KiB the edits touch */
};

static void fixture_make(struct fixture *f)
{
	struct ptz_writer w;
	struct diag d;

	memset(f, 0, sizeof(*f));
	diag_init(&d, "base.zip");
	f->base = tmp_fd();
	cr_assert_eq(ptz_writer_init(&w, f->base, 0, &d), 0);
	for (int i = 0; i < NREC; i++) {
		struct ptz_source s = { .len = sizes[i] };

		f->data[i] = malloc(sizes[i] + 1);
		cr_assert_not_null(f->data[i]);
		for (size_t k = 0; k < sizes[i]; k++)
			f->data[i][k] = (unsigned char)((k * 2654435761u + i) >> 13);
		f->crc[i] = libdeflate_crc32(0, f->data[i], sizes[i]);
		s.buf = f->data[i];
		cr_assert_eq(ptz_writer_add(&w, names[i], &s, &d), 0, "%s",
			     dline(&d));
		f->data_off[i] = w.ents[i].header_off +
				 ptz_local_len((uint16_t)strlen(names[i]),
					       w.ents[i].header_off, sizes[i],
					       w.align);
	}
	cr_assert_eq(ptz_writer_finish(&w, &d), 0, "%s", dline(&d));
	ptz_writer_release(&w);
	f->edited = malloc(sizes[EDITED]);
	cr_assert_not_null(f->edited);
	memcpy(f->edited, f->data[EDITED], sizes[EDITED]);
	f->ovl = tmp_fd();
}

/* Change @n bytes of the edited record at @at (to @same: as they were). */
static void edit(struct fixture *f, uint64_t at, size_t n, bool same)
{
	for (size_t k = 0; k < n; k++)
		f->edited[at + k] ^= same ? 0 : (unsigned char)(0x5a + k);
	for (uint64_t c = at >> 16; c <= (at + n - 1) >> 16; c++)
		f->dirty[c / 64] |= UINT64_C(1) << (c % 64);
}

static void fixture_free(struct fixture *f)
{
	for (int i = 0; i < NREC; i++)
		free(f->data[i]);
	free(f->edited);
	close(f->base);
	close(f->ovl);
}

enum mode { PLAIN, COPY, CLONE };

struct opts {
	bool no_map;		/* no dirty map: compare the whole record */
	bool no_crc;		/* the base's CRC unknown (CRC-less file) */
	int grow;		/* record 1 this many bytes longer */
};

/* Write the edited archive into @fd (for CLONE, holding the base). */
static int write_one(struct fixture *f, int fd, enum mode m,
		     const struct opts *o, struct ptz_write_stats *st,
		     struct diag *d)
{
	struct ptz_writer w;
	int rc;

	cr_assert_eq(pwrite(f->ovl, f->edited, sizes[EDITED], 0),
		     (ssize_t)sizes[EDITED]);
	rc = ptz_writer_init(&w, fd, 0, d);
	if (!rc && m != PLAIN)
		rc = ptz_writer_base(&w, f->base, m == CLONE, d);
	for (int i = 0; i < NREC && !rc; i++) {
		struct ptz_source s = { .len = sizes[i] };
		unsigned char *grown = NULL;

		if (i == EDITED) {
			s.fd = f->ovl;
			s.based = m != PLAIN;
			s.base_off = f->data_off[i];
			s.base_crc_ok = !o->no_crc;
			s.base_crc = f->crc[i];
			s.dirty = o->no_map ? NULL : f->dirty;
			s.dirty_shift = 16;
		} else if (i == 1 && o->grow) {
			grown = calloc(1, sizes[i] + o->grow);
			memcpy(grown, f->data[i], sizes[i]);
			s.buf = grown;
			s.len = sizes[i] + o->grow;
		} else if (i == 0 || i == NREC - 1 || m == PLAIN) {
			s.buf = f->data[i];	/* compared when emitted */
		} else {
			s.fd = f->base;		/* the base's own bytes */
			s.off = f->data_off[i];
			s.has_crc = true;
			s.crc32 = f->crc[i];
			s.based = true;
			s.base_off = f->data_off[i];
		}
		rc = ptz_writer_add(&w, names[i], &s, d);
		free(grown);
	}
	if (!rc)
		rc = ptz_writer_finish(&w, d);
	if (rc == -EAGAIN)
		cr_assert(w.moved, "-EAGAIN without moved: %s", dline(d));
	*st = w.st;
	ptz_writer_release(&w);
	return rc;
}

/* The edited archive written all three ways must be the same bytes. */
static void check_ways(struct fixture *f, const struct opts *o,
		       uint64_t max_written)
{
	int plain = tmp_fd(), copy = tmp_fd(), clone = tmp_fd();
	unsigned char *a, *b, *c;
	size_t la, lb, lc, lbase;
	struct ptz_write_stats st;
	struct diag d;

	diag_init(&d, "new.zip");
	cr_assert_eq(write_one(f, plain, PLAIN, o, &st, &d), 0, "%s",
		     dline(&d));
	cr_assert_eq(write_one(f, copy, COPY, o, &st, &d), 0, "%s",
		     dline(&d));
	/* runs: before, between and after the differing spans */
	cr_assert_leq(st.copy_calls, 12, "%u copies", st.copy_calls);
	a = slurp(f->base, &lbase);
	cr_assert_eq(pwrite(clone, a, lbase, 0), (ssize_t)lbase);
	free(a);
	cr_assert_eq(write_one(f, clone, CLONE, o, &st, &d), 0, "%s",
		     dline(&d));
	cr_assert_eq(st.copy_calls, 0);
	cr_assert_leq(st.written, max_written, "wrote %llu bytes",
		      (unsigned long long)st.written);
	a = slurp(plain, &la);
	b = slurp(copy, &lb);
	c = slurp(clone, &lc);
	cr_assert_eq(la, lb);
	cr_assert_eq(la, lc);
	cr_assert(!memcmp(a, b, la), "copied against the base differs");
	cr_assert(!memcmp(a, c, la), "patched clone differs");
	free(a);
	free(b);
	free(c);
	close(plain);
	close(copy);
	close(clone);
}

Test(ptz_base, four_bytes_write_four_bytes_and_the_crc_fields)
{
	struct fixture f;
	struct opts o = { 0 };

	fixture_make(&f);
	edit(&f, 4000, 4, false);
	/* 4 data bytes, the descriptor's and the central entry's CRC */
	check_ways(&f, &o, 12);
	fixture_free(&f);
}

Test(ptz_base, edits_across_chunks_and_buffers_update_the_crc)
{
	struct fixture f;
	struct opts o = { 0 };
	const uint64_t at[] = {
		0, 65535, 65536 + 100, (1u << 20) - 2, (1u << 20) + 3000,
		(2u << 20) + 17, sizes[EDITED] - 1,
	};

	fixture_make(&f);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		edit(&f, at[i], at[i] + 3 <= sizes[EDITED] ? 3 : 1, false);
	edit(&f, 500000, 40, true);	/* written, unchanged */
	/* 19 bytes, 65535 and 65636 one span (99 equal bytes between), the
	   CRC fields */
	check_ways(&f, &o, 19 + 99 + 8);
	o.no_map = true;		/* every byte compared: same result */
	check_ways(&f, &o, 19 + 99 + 8);
	o.no_crc = true;		/* CRC over every byte */
	check_ways(&f, &o, 19 + 99 + 8);
	fixture_free(&f);
}

Test(ptz_base, nearby_differences_are_one_write)
{
	struct fixture f;
	struct opts o = { 0 };

	fixture_make(&f);
	for (uint64_t k = 0; k < 64; k++)
		edit(&f, 70000 + 100 * k, 1, false);
	check_ways(&f, &o, 6400 + 8);
	fixture_free(&f);
}

Test(ptz_base, a_wholly_rewritten_record_is_written_whole)
{
	struct fixture f;
	struct opts o = { .no_map = true };

	fixture_make(&f);
	edit(&f, 0, sizes[EDITED], false);
	check_ways(&f, &o, sizes[EDITED] + 8);
	fixture_free(&f);
}

Test(ptz_base, a_record_that_moves_fails_a_clone_with_eagain)
{
	struct fixture f;
	struct opts o = { .grow = 64 };
	struct ptz_write_stats st;
	int fd = tmp_fd();
	unsigned char *a;
	size_t la;
	struct diag d;

	fixture_make(&f);
	edit(&f, 10, 4, false);
	a = slurp(f.base, &la);
	cr_assert_eq(pwrite(fd, a, la, 0), (ssize_t)la);
	diag_init(&d, "new.zip");
	cr_assert_eq(write_one(&f, fd, CLONE, &o, &st, &d), -EAGAIN);
	/* without a clone it is written, and right */
	cr_assert_eq(ftruncate(fd, 0), 0);
	diag_init(&d, "new.zip");
	cr_assert_eq(write_one(&f, fd, COPY, &o, &st, &d), 0, "%s",
		     dline(&d));
	free(a);
	a = slurp(fd, &la);
	cr_assert_gt(la, 0);
	free(a);
	close(fd);
	fixture_free(&f);
}

Test(ptz_base, a_clone_longer_than_the_archive_is_cut)
{
	struct fixture f;
	struct opts o = { 0 };
	struct ptz_write_stats st;
	int fd = tmp_fd(), plain = tmp_fd();
	unsigned char *a, *b;
	size_t la, lb;
	struct diag d;

	fixture_make(&f);
	edit(&f, 123456, 2, false);
	/* a base with bytes after its end records (zip allows a comment
	   or junk there; the writer writes none) */
	a = slurp(f.base, &la);
	cr_assert_eq(pwrite(f.base, "trailing junk", 13, la), 13);
	cr_assert_eq(pwrite(fd, a, la, 0), (ssize_t)la);
	cr_assert_eq(pwrite(fd, "trailing junk", 13, la), 13);
	free(a);
	diag_init(&d, "new.zip");
	cr_assert_eq(write_one(&f, fd, CLONE, &o, &st, &d), 0, "%s",
		     dline(&d));
	cr_assert_eq(write_one(&f, plain, PLAIN, &o, &st, &d), 0, "%s",
		     dline(&d));
	a = slurp(fd, &la);
	b = slurp(plain, &lb);
	cr_assert_eq(la, lb);
	cr_assert(!memcmp(a, b, la));
	free(a);
	free(b);
	close(fd);
	close(plain);
	fixture_free(&f);
}
