/*
 * test_ptz_amb.c - archives that torch's zip reader (miniz) reads
 * otherwise than other zip readers (issue 44, core/zip/ptz_amb.c): each
 * is refused with one line from diag_unsafe() naming what torch loads, or
 * read as torch reads it.  What torch loads was measured with torch 1.13
 * and 2.x on the same layouts (tests/fuzz/seeds_zip.py writes them).
 */
#include "test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_open_util.h"
#include "diag/diag.h"
#include "zip/ptz.h"
#include "zip/ptz_int.h"
#include "zip_builder.h"

/* PTZ_WINDOW=N: the central directory read N bytes at a time (ctest's
   ptz_amb_window), as in test_ptz.c */
__attribute__((constructor)) static void window_from_env(void)
{
	const char *e = getenv("PTZ_WINDOW");

	if (e)
		ptz_cdir_window = strtoul(e, NULL, 10);
}

static const char pkl[] = "\x80\x02}q\x00.";
static const char ver[] = "3\n";
static const float f[4] = { 1, 2, 3, 4 };

/* data.pkl, data/0 and version under "archive/" */
static const struct zent std_ents[] = {
	{ "archive/data.pkl", pkl, sizeof(pkl) - 1, false },
	{ "archive/data/0", f, sizeof(f), false },
	{ "archive/version", ver, 2, false },
};
#define NSTD 3

struct h {
	int fd;
	struct ptz_reader z;
	struct diag d;
	char line[512];
};

static int h_open(struct h *h, const struct buf *b)
{
	int rc;

	h->fd = tmp_fd();
	cr_assert_eq(pwrite(h->fd, b->p, b->len, 0), (ssize_t)b->len);
	diag_init(&h->d, "t.zip");
	rc = ptz_reader_open(&h->z, h->fd, "t.zip", &h->d);
	diag_line(&h->d, h->line, sizeof(h->line));
	return rc;
}

static void h_close(struct h *h)
{
	ptz_reader_release(&h->z);
	close(h->fd);
}

/* @b must open, and its record @rel hold @len bytes @want; frees b->p. */
static void reads(struct buf *b, const char *rel, const void *want,
		  size_t len)
{
	struct h h;
	struct ptz_entry *e;
	unsigned char *out;
	size_t n;

	cr_assert_eq(h_open(&h, b), 0, "%s", h.line);
	e = ptz_find_rel(&h.z, rel);
	cr_assert_not_null(e, "no %s", rel);
	cr_assert_eq(ptz_entry_read(&h.z, e, 1 << 20, &out, &n, &h.d), 0,
		     "%s", diag_line(&h.d, h.line, sizeof(h.line)));
	cr_expect_eq(n, len);
	cr_expect(!memcmp(out, want, len), "%s: other bytes", rel);
	free(out);
	h_close(&h);
	free(b->p);
}

static void plain(struct buf *b, struct zinfo *in, const struct zent *e,
		  size_t n)
{
	struct zopt o = { .torch = false };

	zb_build(b, e, n, &o, in);
}

/* ---- local headers: miniz reads by the central directory ---- */

Test(ptz_amb, reads_by_the_central_directory_what_the_local_header_names_otherwise)
{
	static const char *const same[NSTD] = { NULL, "archive/evil/0" };
	static const char *const longer[NSTD] = { NULL,
						  "archive/something/else" };
	static const char *const shorter[NSTD] = { "d.pkl", "archive/e", "v" };
	struct zopt o = { .lnames = same };
	struct buf b;
	struct zinfo in;

	/* measured: torch 1.13 and 2.x load the record; zipfile refuses */
	zb_build(&b, std_ents, NSTD, &o, &in);
	reads(&b, "data/0", f, sizeof(f));
	o.lnames = longer;
	zb_build(&b, std_ents, NSTD, &o, &in);
	reads(&b, "data/0", f, sizeof(f));
	/* shorter: the record takes less room than its central name */
	o.lnames = shorter;
	zb_build(&b, std_ents, NSTD, &o, &in);
	reads(&b, "data/0", f, sizeof(f));
	zb_build(&b, std_ents, NSTD, &o, &in);
	reads(&b, "version", ver, 2);
	assert_no_leaks();
}

Test(ptz_amb, reads_the_central_directory_values_not_the_local_ones)
{
	struct buf b;
	struct zinfo in;

	/* measured: torch reads method, sizes, CRC and flags from the
	   central directory, and the data after the local name and extra */
	plain(&b, &in, std_ents, NSTD);
	put_le16(b.p + in.hdr[1] + 6, 0x0809);
	put_le16(b.p + in.hdr[1] + 8, 8);
	put_le32(b.p + in.hdr[1] + 14, 0x12345678);
	put_le32(b.p + in.hdr[1] + 18, 3);
	put_le32(b.p + in.hdr[1] + 22, 1000);
	reads(&b, "data/0", f, sizeof(f));
	/* torch's own layout: sizes in descriptors, here lying ones */
	{
		struct zopt o = { .torch = true };

		zb_build(&b, std_ents, NSTD, &o, &in);
		put_le32(b.p + in.data[1] + sizeof(f) + 8, 3);
		put_le32(b.p + in.data[1] + sizeof(f) + 12, 1000);
		reads(&b, "data/0", f, sizeof(f));
	}
	assert_no_leaks();
}
