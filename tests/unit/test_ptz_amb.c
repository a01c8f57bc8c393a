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

/*
 * @b must be refused as unsafe, in one line holding @what, at @off;
 * frees b->p.
 */
static void unsafe(struct buf *b, const char *what, uint64_t off)
{
	struct h h;
	int rc = h_open(&h, b);

	cr_expect_eq(rc, -EILSEQ, "rc %d: %s", rc, h.line);
	cr_expect(h.d.unsafe, "not counted as unsafe: %s", h.line);
	cr_expect(strstr(h.d.msg, what), "'%s' not in: %s", what, h.line);
	cr_expect_null(strchr(h.line, '\n'));
	cr_expect_eq(h.d.off, off, "offset 0x%llx, want 0x%llx: %s",
		     (unsigned long long)h.d.off, (unsigned long long)off,
		     h.line);
	h_close(&h);
	free(b->p);
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

/* plain() with the external attributes @attrs. */
static void plain_attrs(struct buf *b, struct zinfo *in, const struct zent *e,
			size_t n, const uint32_t *attrs)
{
	struct zopt o = { .attrs = attrs };

	zb_build(b, e, n, &o, in);
}

/* ---- end records ---- */

/*
 * Two checkpoints' records, data.pkl holding @a and @bb, and one central
 * directory holding first the entries of @a's, then of @bb's (two each);
 * the end record names @a's and has a comment of @clen bytes, which the
 * caller fills.
 */
static void two_dirs_of(struct buf *b, struct zinfo *in, size_t clen,
			const char *a, const char *bb)
{
	static char comment[64];
	const struct zent e[4] = {
		{ "archive/data.pkl", a, strlen(a), false },
		{ "archive/version", ver, 2, false },
		{ "archive/data.pkl", bb, strlen(bb), false },
		{ "archive/version", ver, 2, false },
	};
	struct zopt o = { .comment = clen ? comment : NULL,
			  .comment_len = clen };

	memset(comment, 'c', sizeof(comment));
	zb_build(b, e, 4, &o, in);
	put_le16(b->p + in->eocd_off + 8, 2);
	put_le16(b->p + in->eocd_off + 10, 2);
	put_le32(b->p + in->eocd_off + 12, in->cd[2] - in->cd[0]);
}

static void two_dirs(struct buf *b, struct zinfo *in, size_t clen)
{
	two_dirs_of(b, in, clen, "first", "other");
}

/* An end record of 2 entries naming the second directory, at @p. */
static void second_eocd(unsigned char *p, const struct zinfo *in)
{
	memset(p, 0, PTZ_EOCD_LEN);
	put_le32(p, PTZ_SIG_EOCD);
	put_le16(p + 8, 2);
	put_le16(p + 10, 2);
	put_le32(p + 12, in->cd_off + in->cd_size - in->cd[2]);
	put_le32(p + 16, in->cd[2]);
}

Test(ptz_amb, refuses_an_end_record_inside_the_comment)
{
	struct buf b;
	struct zinfo in;
	char want[300];

	/* the comment: an end record, then 8 bytes (issue 44's layout) */
	two_dirs(&b, &in, PTZ_EOCD_LEN + 8);
	second_eocd(b.p + in.eocd_off + PTZ_EOCD_LEN, &in);
	snprintf(want, sizeof(want), "two end of central directory records: torch reads the last, at 0x%zx (central directory at 0x%zx, 2 records); the zip format, whose comment ends the file, gives this one (central directory at 0x%zx, 2 records)",
		 in.eocd_off + PTZ_EOCD_LEN, in.cd[2], in.cd[0]);
	unsafe(&b, want, in.eocd_off);
	/* without the 8 bytes both end records end the file */
	two_dirs(&b, &in, PTZ_EOCD_LEN);
	second_eocd(b.p + in.eocd_off + PTZ_EOCD_LEN, &in);
	unsafe(&b, "other zip readers may take this one", in.eocd_off);
	assert_no_leaks();
}

Test(ptz_amb, refuses_an_end_record_after_the_end_record)
{
	struct buf b;
	struct zinfo in;

	two_dirs(&b, &in, 0);
	second_eocd(zb_put(&b, PTZ_EOCD_LEN), &in);
	zb_put_bytes(&b, "junk1234", 8);
	unsafe(&b, "torch reads the last", in.eocd_off);
	assert_no_leaks();
}

Test(ptz_amb, refuses_classic_values_other_than_the_zip64_ones)
{
	struct zopt o = { .torch = true };
	struct buf b;
	struct zinfo in;

	/* torch reads the ZIP64 record; Go's archive/zip the classic one */
	zb_build(&b, std_ents, NSTD, &o, &in);
	put_le16(b.p + in.eocd_off + 8, 1);
	put_le16(b.p + in.eocd_off + 10, 1);
	put_le32(b.p + in.eocd_off + 16, 12345);
	unsafe(&b, "the classic end record says central directory at 0x3039 (1 records), the zip64 one, which torch reads,",
	       in.eocd_off);
	/* 0xffff and 0xffffffff say "see the ZIP64 record" */
	o.eocd_sentinels = true;
	zb_build(&b, std_ents, NSTD, &o, &in);
	reads(&b, "data/0", f, sizeof(f));
	assert_no_leaks();
}

Test(ptz_amb, refuses_a_zip64_locator_pointing_at_no_record)
{
	struct zopt o = { .torch = true };
	struct buf b;
	struct zinfo in;

	/* miniz then reads the classic values, here the right ones */
	zb_build(&b, std_ents, NSTD, &o, &in);
	put_le64(b.p + in.loc_off + 8, in.cd_off);
	unsafe(&b, "where no zip64 end record is: torch ignores it and reads the classic end record",
	       in.loc_off);
	assert_no_leaks();
}

Test(ptz_amb, refuses_a_zip64_record_away_from_its_locator)
{
	struct zopt o = { .torch = true };
	struct buf b, c = { 0 };
	struct zinfo in;
	unsigned char *p;
	char want[300];

	/* records, directory, the ZIP64 record the locator names, another
	   right before the locator (where zipfile reads it) */
	zb_build(&b, std_ents, NSTD, &o, &in);
	zb_put_bytes(&c, b.p, in.loc_off);
	p = zb_put(&c, PTZ_EOCD64_LEN);
	memcpy(p, b.p + in.z64_off, PTZ_EOCD64_LEN);
	put_le64(p + 32, 2);
	zb_put_bytes(&c, b.p + in.loc_off, b.len - in.loc_off);
	snprintf(want, sizeof(want), "zip64 end record at 0x%zx is not right before its locator at 0x%zx: torch reads it where the locator points",
		 in.z64_off, in.loc_off + PTZ_EOCD64_LEN);
	free(b.p);
	unsafe(&c, want, in.z64_off);
	assert_no_leaks();
}

Test(ptz_amb, refuses_a_directory_not_right_before_the_end_records)
{
	struct zopt o = { .torch = true };
	struct buf b, c = { 0 };
	struct zinfo in;

	/* zipfile takes the 16 bytes before as the directory's last */
	plain(&b, &in, std_ents, NSTD);
	zb_put_bytes(&c, b.p, in.eocd_off);
	memset(zb_put(&c, 16), 'g', 16);
	zb_put_bytes(&c, b.p + in.eocd_off, b.len - in.eocd_off);
	free(b.p);
	unsafe(&c, "does not end where the end records start", in.eocd_off);
	/* the same between the directory and the ZIP64 record */
	zb_build(&b, std_ents, NSTD, &o, &in);
	c = (struct buf){ 0 };
	zb_put_bytes(&c, b.p, in.z64_off);
	memset(zb_put(&c, 16), 'g', 16);
	zb_put_bytes(&c, b.p + in.z64_off, b.len - in.z64_off);
	put_le64(c.p + in.loc_off + 16 + 8, in.z64_off + 16);
	free(b.p);
	unsafe(&c, "every record moved by +16", in.z64_off);
	assert_no_leaks();
}

Test(ptz_amb, finds_the_end_record_as_far_back_as_miniz_looks)
{
	/* 4096 + 16 x 4093 bytes: trailing bytes up to that are fine */
	const size_t room = 69584 - PTZ_EOCD_LEN;
	struct buf b;
	struct zinfo in;
	struct h h;

	plain(&b, &in, std_ents, NSTD);
	memset(zb_put(&b, room), 'j', room);
	reads(&b, "data/0", f, sizeof(f));
	plain(&b, &in, std_ents, NSTD);
	memset(zb_put(&b, room + 1), 'j', room + 1);
	cr_expect_eq(h_open(&h, &b), -EILSEQ, "%s", h.line);
	cr_expect(strstr(h.line, "no end of central directory record"), "%s",
		  h.line);
	h_close(&h);
	free(b.p);
	/* a comment cut short does not matter to miniz either */
	{
		struct zopt o = { .comment = "a comment" };

		zb_build(&b, std_ents, NSTD, &o, &in);
		b.len -= 3;
		reads(&b, "data/0", f, sizeof(f));
	}
	assert_no_leaks();
}

/* ---- the central directory ---- */

Test(ptz_amb, refuses_entries_past_the_end_record_count)
{
	struct buf b;
	struct zinfo in;

	/* miniz reads the 2 counted; zipfile reads on to the third */
	plain(&b, &in, std_ents, NSTD);
	put_le16(b.p + in.eocd_off + 8, 2);
	put_le16(b.p + in.eocd_off + 10, 2);
	unsafe(&b, "central directory holds more records than the 2 its end record counts",
	       in.cd[2]);
	assert_no_leaks();
}

/*
 * @n records named @names[i] holding "<i>", then "archive/version":
 * torch must be said to load record @pick.
 */
static void dup_case(const char *const *names, size_t n, size_t pick,
		     const char *what)
{
	struct zent e[10];
	char data[9][2];
	struct buf b;
	struct zinfo in;
	char want[300];

	cr_assert_leq(n, 9);
	for (size_t i = 0; i < n; i++) {
		data[i][0] = (char)('0' + i);
		e[i] = (struct zent){ names[i], data[i], 1, false };
	}
	e[n] = (struct zent){ "archive/version", ver, 2, false };
	plain(&b, &in, e, n + 1);
	snprintf(want, sizeof(want), what, in.hdr[pick]);
	unsafe(&b, want, in.cd[pick]);
}

Test(ptz_amb, names_the_record_torch_loads_of_a_name_listed_twice)
{
	static const char *const d[] = {
		"archive/data.pkl", "archive/data.pkl", "archive/data.pkl",
		"archive/data.pkl", "archive/data.pkl",
	};
	/* measured: torch 1.13 and 2.x load the first of 2, the last of 3
	   and 4, the fourth of 5 (miniz's heap sort is not stable) */
	static const size_t pick[6] = { 0, 0, 0, 2, 3, 3 };

	for (size_t n = 2; n <= 5; n++)
		dup_case(d, n, pick[n], "torch loads the one at 0x%zx, Python's zipfile the last");
	assert_no_leaks();
}

Test(ptz_amb, names_the_record_torch_loads_of_names_differing_in_case)
{
	static const char *const a[] = { "archive/data.pkl", "archive/DATA.PKL" };
	static const char *const b[] = { "archive/DATA.PKL", "archive/data.pkl" };
	static const char *const c[] = { "archive/Data.pkl", "archive/data.pkl",
					 "archive/DATA.pkl" };

	/* measured with torch 1.13 and 2.x */
	dup_case(a, 2, 0, "loads 'archive/data.pkl' at 0x%zx for either");
	dup_case(b, 2, 0, "loads 'archive/DATA.PKL' at 0x%zx for either");
	dup_case(c, 3, 2, "loads 'archive/DATA.pkl' at 0x%zx for either");
	assert_no_leaks();
}

Test(ptz_amb, names_the_record_torch_loads_among_other_names)
{
	static const char *const d[] = {
		"archive/data.pkl", "archive/data/0", "archive/data/1",
		"archive/data/2", "archive/data/3", "archive/data/4",
		"archive/data/5", "archive/data.pkl",
	};

	/* measured: the first */
	dup_case(d, 8, 0, "torch loads the one at 0x%zx");
	assert_no_leaks();
}

Test(ptz_amb, refuses_a_name_going_on_after_a_nul)
{
	struct buf b;
	struct zinfo in;

	/* "archive/data.pkl\0x": torch never finds it, zipfile reads it
	   as "archive/data.pkl" */
	const struct zent e[3] = {
		{ "archive/data.pkl", "plain", 5, false },
		{ "archive/data.pklXx", "nul", 3, false },
		{ "archive/version", ver, 2, false },
	};

	plain(&b, &in, e, 3);
	b.p[in.cd[1] + PTZ_CDIR_LEN + 16] = 0;
	unsafe(&b, "record name 'archive/data.pkl' goes on after a NUL byte: torch never reads that record",
	       in.cd[1] + PTZ_CDIR_LEN);
	assert_no_leaks();
}

Test(ptz_amb, refuses_a_record_torch_takes_for_a_directory)
{
	static const uint32_t dir1[NSTD] = { 0, 0x10, 0 };
	struct zent e[NSTD];
	struct zopt o = { .cd_zip64 = true };
	struct buf b;
	struct zinfo in;

	/* measured: torch loads the tensor's storage unwritten (zeros, or
	   what the memory held) */
	plain_attrs(&b, &in, std_ents, NSTD, dir1);
	unsafe(&b, "record 'archive/data/0' holds 16 bytes, but its external attributes 0x00000010 mark a DOS directory: torch reads none of them",
	       in.cd[1]);
	memcpy(e, std_ents, sizeof(e));
	e[1].name = "archive/data/0/";
	plain(&b, &in, e, NSTD);
	unsafe(&b, "but its name ends in '/': torch takes it for a directory",
	       in.cd[1]);
	/* ZIP64 sizes: 16 bytes in none compressed (torch 2.x refuses) */
	zb_build(&b, std_ents, NSTD, &o, &in);
	put_le64(b.p + in.cd[1] + PTZ_CDIR_LEN + 14 + 4 + 8, 0);
	unsafe(&b, "claims 16 bytes in no compressed ones (zip64 sizes): torch 1.13 reads none of them",
	       in.cd[1]);
	/* an empty one is a directory to every reader */
	e[1] = (struct zent){ "archive/sub/", "", 0, false };
	plain_attrs(&b, &in, e, NSTD, dir1);
	reads(&b, "data.pkl", pkl, sizeof(pkl) - 1);
	assert_no_leaks();
}

/* ---- what comes before the records ---- */

/* torch < 1.6's stream: the magic number, protocol 1001, system info,
   the object ({"who": "legacy"}) and no storage keys */
static const char legacy[] =
	"\x80\x02\x8a\x0al\xfc\x9c\x46\xf9\x20j\xa8P\x19."
	"\x80\x02M\xe9\x03."
	"\x80\x02}q\x00(X\x10\x00\x00\x00protocol_versionq\x01M\xe9\x03"
	"X\x0d\x00\x00\x00little_endianq\x02\x88X\x0a\x00\x00\x00type_sizes"
	"q\x03}q\x04(X\x05\x00\x00\x00shortq\x05K\x02X\x03\x00\x00\x00intq"
	"\x06K\x04X\x04\x00\x00\x00longq\x07K\x08uu."
	"\x80\x02}q\x00X\x03\x00\x00\x00whoq\x01X\x06\x00\x00\x00legacyq\x02s."
	"\x80\x02]q\x00.";

Test(ptz_amb, refuses_a_zip_after_a_pickle)
{
	struct zopt o = { .head = legacy, .head_len = sizeof(legacy) - 1 };
	struct buf b;
	struct zinfo in;
	struct ckpt *c;
	const char *path;

	/* torch.load takes it for a legacy file: it reads the pickle */
	zb_build(&b, std_ents, NSTD, &o, &in);
	path = write_tmp(b.p, b.len);
	c = open_ok(path);
	cr_expect_eq(c->format, CKPT_LEGACY);
	cr_expect_eq(c->zip.nentries, 0);
	ckpt_close(c);
	unlink(path);
	unsafe(&b, "the archive does not start with a local header", 0);
	assert_no_leaks();
}

Test(ptz_amb, reads_a_zip_after_junk_that_starts_with_a_local_header)
{
	/* torch.load looks at the first 4 bytes only, then reads by the
	   central directory (ptverify names the bytes as a gap) */
	static const char junk[34] = "PK\3\4";
	struct zopt o = { .head = junk, .head_len = sizeof(junk) };
	struct buf b;
	struct zinfo in;

	zb_build(&b, std_ents, NSTD, &o, &in);
	reads(&b, "data/0", f, sizeof(f));
	assert_no_leaks();
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

/* ---- what torch reads of a refused archive ---- */

/* @b opened as torch reads it, into @h (caller closes). */
static void open_torch(struct h *h, const struct buf *b)
{
	h->fd = tmp_fd();
	cr_assert_eq(pwrite(h->fd, b->p, b->len, 0), (ssize_t)b->len);
	diag_init(&h->d, "t.zip");
	cr_assert_eq(ptz_reader_open_torch(&h->z, h->fd, "t.zip", 0, b->len,
					   &h->d), 0, "%s",
		     diag_line(&h->d, h->line, sizeof(h->line)));
}

Test(ptz_amb, opened_as_torch_finds_the_records_torch_loads)
{
	static const char *const d[] = {
		"archive/data.pkl", "archive/data.pkl", "archive/data.pkl",
		"archive/DATA.PKL", "archive/version",
	};
	struct zent e[5];
	struct buf b;
	struct zinfo in;
	struct h h;

	/* names equal ignoring case: only miniz's pick is found (measured
	   for 2 to 5 records: the last of 4) */
	for (size_t i = 0; i < 5; i++)
		e[i] = (struct zent){ d[i], "x", 1, false };
	plain(&b, &in, e, 5);
	open_torch(&h, &b);
	cr_expect_eq(h.z.nentries, 5);
	cr_expect_eq(h.z.nnames, 2);
	cr_expect_eq(ptz_find(&h.z, "archive/data.pkl"), &h.z.entries[3]);
	cr_expect_eq(ptz_find(&h.z, "archive/Data.pkl"), &h.z.entries[3]);
	cr_expect_eq(ptz_find_rel(&h.z, "version"), &h.z.entries[4]);
	h_close(&h);
	free(b.p);
	/* an end record in the comment: the directory torch reads */
	two_dirs(&b, &in, PTZ_EOCD_LEN + 8);
	second_eocd(b.p + in.eocd_off + PTZ_EOCD_LEN, &in);
	open_torch(&h, &b);
	cr_expect_eq(h.z.cdir_off, in.cd[2]);
	cr_expect_eq(ptz_find_rel(&h.z, "data.pkl")->header_off, in.hdr[2]);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

/* a data.pkl that imports posix.system, and one that imports nothing
   (no NUL in either: two_dirs_of() takes strings) */
static const char evil[] = "\x80\x02" "cposix\nsystem\n.";
static const char benign[] = "\x80\x02}.";

/* Open @b as ptls --check does: refused as unsafe; whether a finding
   names posix.system. */
static bool refused_naming_system(const struct buf *b)
{
	const char *path = write_tmp(b->p, b->len);
	struct ckpt *c = NULL;
	bool named = false, archive = false;
	struct diag d;

	diag_init(&d, path);
	cr_assert_eq(ckpt_open_with(path, CKPT_OPEN_KEEP, &c, &d), -EILSEQ);
	cr_assert(d.unsafe, "%s", d.msg);
	cr_assert_not_null(c);
	for (uint32_t i = 0; i < c->nglobals; i++) {
		const struct ckpt_global *g = &c->globals[i];

		named |= g->kind == CKPT_U_GLOBAL &&
			 !strcmp(g->module, "posix") &&
			 !strcmp(g->name, "system");
		archive |= g->kind == CKPT_U_ARCHIVE;
	}
	cr_expect(archive, "the refusal is no finding");
	ckpt_close(c);
	unlink(path);
	return named;
}

Test(ptz_amb, names_what_torch_runs_of_a_refused_archive)
{
	struct buf b;
	struct zinfo in;

	/* torch reads the inner directory's data.pkl: what it runs is
	   named beside the refusal, what it never reads is not */
	two_dirs_of(&b, &in, PTZ_EOCD_LEN + 8, benign, evil);
	second_eocd(b.p + in.eocd_off + PTZ_EOCD_LEN, &in);
	cr_expect(refused_naming_system(&b));
	free(b.p);
	two_dirs_of(&b, &in, PTZ_EOCD_LEN + 8, evil, benign);
	second_eocd(b.p + in.eocd_off + PTZ_EOCD_LEN, &in);
	cr_expect(!refused_naming_system(&b));
	free(b.p);
	assert_no_leaks();
}
