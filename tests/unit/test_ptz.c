/*
 * test_ptz.c - the zip reader (core/zip) against archives built here in
 * memory: torch's layout (FB padding, data descriptors, ZIP64 end records)
 * and a plain one (sizes in local headers, comment, ZIP64 extras), then
 * every malformation we could name, every truncation and every flipped
 * byte of small archives, and the real torch-written fixtures in shared/.
 */
#include "test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag/diag.h"
#include "util/le.h"
#include "zip/ptz.h"
#include "zip/ptz_int.h"
#include "zip_builder.h"
#include "fixtures.h"

/*
 * PTZ_WINDOW=N runs every test here with the central directory read N
 * bytes at a time (ctest's ptz_window): each record then crosses the
 * window, or is longer than it, and every archive, good or malformed,
 * must open or fail as it does read 256 KiB at a time.
 */
__attribute__((constructor)) static void window_from_env(void)
{
	const char *e = getenv("PTZ_WINDOW");

	if (e)
		ptz_cdir_window = strtoul(e, NULL, 10);
}

static const char pkl[] = "\x80\x02}q\x00.";
static const char ver[] = "3\n";
static const float f[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
static const char py[] =
	"def forward(self, x):\n    return self.linear(x)\n"
	"def forward(self, x):\n    return self.linear(x)\n"
	"def forward(self, x):\n    return self.linear(x)\n";

static const struct zent std_ents[] = {
	{ "archive/data.pkl", pkl, sizeof(pkl) - 1, false },
	{ "archive/data/0", f, sizeof(f), false },
	{ "archive/code/x.py", py, sizeof(py) - 1, true },
	{ "archive/version", ver, 2, false },
};
#define NSTD (sizeof(std_ents) / sizeof(std_ents[0]))

static void std_torch(struct buf *b, struct zinfo *info)
{
	struct zopt o = { .torch = true };

	zb_build(b, std_ents, NSTD, &o, info);
}

static void std_plain(struct buf *b, struct zinfo *info)
{
	struct zopt o = { .comment = "a comment" };

	zb_build(b, std_ents, NSTD, &o, info);
}

/* ---- opening ---- */

struct h {
	int fd;
	uint64_t size;
	struct ptz_reader z;
	struct diag d;
	char line[512];
};

static void pwrite_all(int fd, const void *p, size_t n, off_t off)
{
	cr_assert_eq(pwrite(fd, p, n, off), (ssize_t)n);
}

static int h_reopen(struct h *h)
{
	int rc;

	diag_init(&h->d, "t.zip");
	rc = ptz_reader_open(&h->z, h->fd, "t.zip", &h->d);
	diag_line(&h->d, h->line, sizeof(h->line));
	if (rc < 0) {
		cr_assert(h->d.off == DIAG_NO_OFFSET || h->d.off <= h->size,
			  "offset past the file: %s", h->line);
		cr_assert(h->d.msg[0]);
	}
	return rc;
}

static int h_open(struct h *h, const void *p, size_t n)
{
	h->fd = tmp_fd();
	h->size = n;
	pwrite_all(h->fd, p, n, 0);
	return h_reopen(h);
}

static void h_close(struct h *h)
{
	ptz_reader_release(&h->z);
	close(h->fd);
}

/* Open @b, expect failure @err with @what in the message; return offset. */
static uint64_t open_fails(const struct buf *b, int err, const char *what)
{
	struct h h;
	int rc = h_open(&h, b->p, b->len);
	uint64_t off = h.d.off;

	cr_expect_eq(rc, err, "rc %d, want %d: %s", rc, err, h.line);
	cr_expect(strstr(h.d.msg, what), "'%s' not in: %s", what, h.line);
	h_close(&h);
	return off;
}

/* Read entry @i of @h and compare it with @want. */
static void expect_entry(struct h *h, size_t i, const struct zent *want)
{
	struct ptz_entry *e = &h->z.entries[i];
	unsigned char *out;
	size_t len;
	int rc;

	cr_assert_str_eq(e->name, want->name);
	rc = ptz_entry_read(&h->z, e, 1 << 20, &out, &len, &h->d);
	cr_assert_eq(rc, 0, "%s", diag_line(&h->d, h->line, sizeof(h->line)));
	cr_assert_eq(len, want->len);
	cr_assert(!memcmp(out, want->data, len));
	cr_assert_eq(out[len], 0);
	free(out);
}

/* ---- well-formed archives ---- */

Test(ptz_read, opens_torch_layout_with_aligned_data)
{
	struct buf b;
	struct zinfo in;
	struct h h;

	std_torch(&b, &in);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	cr_assert_eq(h.z.zip64, 1);
	cr_assert_eq(h.z.nentries, NSTD);
	cr_assert_eq(h.z.cdir_off, in.cd_off);
	cr_assert_eq(h.z.cdir_size, in.cd_size);
	cr_assert_eq(h.z.eocd_off, in.eocd_off);
	cr_assert_str_eq(h.z.prefix, "archive");
	cr_assert_eq(h.z.prefix_len, 7);
	for (size_t i = 0; i < NSTD; i++) {
		struct ptz_entry *e = &h.z.entries[i];

		cr_assert_eq(ptz_cd_index(&h.z, e), i);
		cr_assert_eq(e->header_off, in.hdr[i]);
		cr_assert_eq(ptz_limit(e),
			     i + 1 < NSTD ? in.hdr[i + 1] : in.cd_off);
		cr_assert_eq(e->usize, std_ents[i].len);
		cr_assert_eq(e->csize, in.csize[i]);
		cr_assert_eq(e->method, std_ents[i].deflate ? 8 : 0);
		cr_assert_eq(ptz_entry_locate(&h.z, e, &h.d), 0);
		cr_assert_eq(e->data_off, in.data[i]);
		cr_assert_eq(e->data_off % 64, 0);
		cr_assert_eq(ptz_entry_locate(&h.z, e, &h.d), 0);
		cr_assert_eq(e->data_off, in.data[i]);
		expect_entry(&h, i, &std_ents[i]);
	}
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, opens_plain_layout_with_comment)
{
	struct buf b;
	struct zinfo in;
	struct h h;

	std_plain(&b, &in);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	cr_assert_eq(h.z.zip64, 0);
	cr_assert_eq(h.z.eocd_off, in.eocd_off);
	for (size_t i = 0; i < NSTD; i++) {
		cr_assert_eq(ptz_entry_locate(&h.z, &h.z.entries[i], &h.d), 0);
		cr_assert_eq(h.z.entries[i].data_off, in.data[i]);
		expect_entry(&h, i, &std_ents[i]);
	}
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, finds_eocd_before_longest_comment)
{
	char *comment = malloc(0xffff);
	struct zopt o = { .comment = comment, .comment_len = 0xffff };
	struct buf b;
	struct zinfo in;
	struct h h;

	memset(comment, 'c', 0xffff);
	zb_build(&b, std_ents, NSTD, &o, &in);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	cr_assert_eq(h.z.eocd_off, in.eocd_off);
	cr_assert_eq(h.z.nentries, NSTD);
	h_close(&h);
	free(b.p);
	/*
	 * "PK\5\6" all over the comment: like miniz (and torch), the last
	 * one with 22 bytes after it is the end record, here one that
	 * says disk 0xffff
	 */
	for (size_t i = 0; i < 0xffff; i++)
		comment[i] = i % 24 < 4 ? "PK\5\6"[i % 24] : '\377';
	zb_build(&b, std_ents, NSTD, &o, &in);
	cr_expect_eq(open_fails(&b, -ENOTSUP, "multi-disk"),
		     in.eocd_off + 22 + (0xffff - 22) / 24 * 24 + 4);
	free(b.p);
	free(comment);
	assert_no_leaks();
}

Test(ptz_read, takes_an_end_record_inside_the_comment_as_miniz)
{
	unsigned char fake[26] = "xx";
	struct zopt o = { .comment = (const char *)fake, .comment_len = 26 };
	struct buf b;
	struct zinfo in;

	/* miniz reads the last "PK\5\6" with 22 bytes after it, whatever
	   the comment lengths say: torch refuses this one too */
	put_le32(fake + 2, PTZ_SIG_EOCD);
	put_le16(fake + 2 + 10, 7);
	fake[24] = fake[25] = 'y';
	zb_build(&b, std_ents, NSTD, &o, &in);
	cr_expect_eq(open_fails(&b, -EILSEQ, "0 entries on this disk but 7"),
		     in.eocd_off + 22 + 2 + 8);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, tolerates_bytes_after_end_record)
{
	struct buf b;
	struct zinfo in;
	struct h h;

	std_torch(&b, &in);
	zb_put_bytes(&b, "junk!", 5);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	cr_assert_eq(h.z.eocd_off, in.eocd_off);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, reads_zip64_extra_in_cdir)
{
	struct zopt o = { .cd_zip64 = true, .zip64_end = true };
	struct buf b;
	struct zinfo in;
	struct h h;

	zb_build(&b, std_ents, NSTD, &o, &in);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	for (size_t i = 0; i < NSTD; i++) {
		cr_assert_eq(h.z.entries[i].header_off, in.hdr[i]);
		cr_assert_eq(h.z.entries[i].csize, in.csize[i]);
		expect_entry(&h, i, &std_ents[i]);
	}
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, uses_zip64_record_behind_sentinels)
{
	struct zopt o = { .torch = true, .eocd_sentinels = true };
	struct buf b;
	struct zinfo in;
	struct h h;

	zb_build(&b, std_ents, NSTD, &o, &in);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	cr_assert_eq(h.z.zip64, 1);
	cr_assert_eq(h.z.nentries, NSTD);
	cr_assert_eq(h.z.cdir_off, in.cd_off);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

/*
 * A record with more than 4 GiB after its data before the central
 * directory (a sparse file here): the entry keeps that room as 32 bits,
 * clamped, and ptz_limit() still lies past anything the record's headers
 * can reach, so it is located and read as before.
 */
Test(ptz_read, keeps_room_past_4_gib_clamped)
{
	static const struct zent ent = { "a", "xyz", 3, false };
	const uint64_t gap = UINT64_C(5) << 30;
	struct zopt o = { .cd_zip64 = true, .zip64_end = true };
	struct buf b;
	struct zinfo in;
	struct h h;
	unsigned char *tail;
	size_t ntail;

	zb_build(&b, &ent, 1, &o, &in);
	tail = b.p + in.cd_off;
	ntail = b.len - in.cd_off;
	put_le64(b.p + in.z64_off + 48, in.cd_off + gap);
	put_le64(b.p + in.loc_off + 8, in.z64_off + gap);
	put_le32(b.p + in.eocd_off + 16, 0xffffffff);	/* as torch clamps */
	h.fd = tmp_fd();
	h.size = b.len + gap;
	pwrite_all(h.fd, b.p, in.cd_off, 0);
	pwrite_all(h.fd, tail, ntail, (off_t)(in.cd_off + gap));
	cr_assert_eq(h_reopen(&h), 0, "%s", h.line);
	cr_assert_eq(h.z.entries[0].slack, UINT32_MAX);
	cr_assert_geq(ptz_limit(&h.z.entries[0]), UINT64_C(1) << 32);
	expect_entry(&h, 0, &ent);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

/* Open an archive of records named @names (data "x") into @h. */
static void open_names(struct h *h, struct buf *b, const char *const *names,
		       size_t n, bool torch)
{
	struct zent ents[ZMAX];
	struct zopt o = { .torch = torch };
	struct zinfo in;

	for (size_t i = 0; i < n; i++)
		ents[i] = (struct zent){ names[i], "x", 1, false };
	zb_build(b, ents, n, &o, &in);
	cr_assert_eq(h_open(h, b->p, b->len), 0, "%s", h->line);
}

Test(ptz_read, prefix_may_contain_space)
{
	static const char *const names[] = { "my model/data.pkl",
					     "my model/version" };
	struct buf b;
	struct h h;

	open_names(&h, &b, names, 2, true);
	cr_assert_str_eq(h.z.prefix, "my model");
	cr_assert_eq(h.z.prefix_len, 8);
	cr_assert_eq(ptz_find_rel(&h.z, "version"), &h.z.entries[1]);
	cr_assert_eq(ptz_find_rel(&h.z, "data.pkl"), &h.z.entries[0]);
	cr_assert_null(ptz_find_rel(&h.z, "data"));
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, prefix_is_null_without_slash)
{
	static const char *const names[] = { "data.pkl", "x/version" };
	struct buf b;
	struct h h;

	open_names(&h, &b, names, 2, false);
	cr_assert_null(h.z.prefix);
	cr_assert_eq(h.z.prefix_len, 0);
	cr_assert_eq(ptz_find_rel(&h.z, "data.pkl"), &h.z.entries[0]);
	cr_assert_eq(ptz_find_rel(&h.z, "x/version"), &h.z.entries[1]);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, prefix_comes_from_first_record_only)
{
	static const char *const names[] = { "b/data.pkl", "a/version" };
	struct buf b;
	struct h h;

	open_names(&h, &b, names, 2, true);
	cr_assert_str_eq(h.z.prefix, "b");
	cr_assert_null(ptz_find_rel(&h.z, "version"));
	cr_assert_eq(ptz_find(&h.z, "a/version"), &h.z.entries[1]);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, finds_names_ignoring_ascii_case)
{
	static const char *const names[] = {
		"Arc/DATA.PKL", "Arc/data/0", "Arc/data/1", "Arc/data/10",
		"Arc/data/11", "Arc/data/2", "Arc/Version", "Arc/\xc3\x84",
		"Arc/_", "Arc/[", "Arc/data/9",
	};
	size_t n = sizeof(names) / sizeof(names[0]);
	struct buf b;
	struct h h;
	char up[64];

	open_names(&h, &b, names, n, true);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(ptz_find(&h.z, names[i]), &h.z.entries[i]);
		for (size_t j = 0; (up[j] = names[i][j]); j++)
			if (up[j] >= 'a' && up[j] <= 'z')
				up[j] -= 'a' - 'A';
		cr_assert_eq(ptz_find(&h.z, up), &h.z.entries[i], "%s", up);
		cr_assert_eq(ptz_find_rel(&h.z, names[i] + 4),
			     &h.z.entries[i]);
	}
	cr_assert_eq(ptz_find(&h.z, "arc/data.pkl"), &h.z.entries[0]);
	cr_assert_eq(ptz_find_rel(&h.z, "vERSION"), &h.z.entries[6]);
	cr_assert_null(ptz_find(&h.z, "Arc/\xc3\xa4"));	/* not ASCII */
	cr_assert_null(ptz_find(&h.z, "Arc/data"));
	cr_assert_null(ptz_find(&h.z, "Arc/data/00"));
	cr_assert_null(ptz_find(&h.z, "Arc/DATA.PK"));
	cr_assert_null(ptz_find(&h.z, "Arc/DATA.PKL/"));
	cr_assert_null(ptz_find(&h.z, ""));
	cr_assert_null(ptz_find(&h.z, NULL));
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

/* ptz_name_cmp() skips equal 8-byte words: its sign must be that of a
 * byte-at-a-time compare of the folded names, for names of every length
 * that differ in case or in bytes anywhere. */
Test(ptz_read, name_order_ignores_case_at_any_position)
{
	static const char abc[] = "aAbB/0.z";
	unsigned seed = 7;
	char x[24], y[24];

	for (int round = 0; round < 200000; round++) {
		size_t nx = (size_t)(rand_r(&seed) % 21), ny, i;
		int want = 0, have;

		for (i = 0; i < nx; i++)
			x[i] = abc[rand_r(&seed) % 8];
		/* mostly y is x with a change or two, or cut */
		ny = rand_r(&seed) % 4 ? nx : (size_t)(rand_r(&seed) % 21);
		for (i = 0; i < ny; i++)
			y[i] = i < nx && rand_r(&seed) % 8 ? x[i] :
			       abc[rand_r(&seed) % 8];
		for (i = 0; i < nx && i < ny && !want; i++)
			want = ptz_fold((unsigned char)x[i]) -
			       ptz_fold((unsigned char)y[i]);
		if (!want)
			want = nx < ny ? -1 : nx > ny;
		have = ptz_name_cmp(x, nx, y, ny);
		cr_assert_eq(have < 0 ? -1 : have > 0, want < 0 ? -1 : want > 0,
			     "'%.*s' '%.*s'", (int)nx, x, (int)ny, y);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The index is sorted by merging the central directory's sorted runs (one
 * in a torch 1.13 file, a few in torch 2's) or, past 16 runs, by qsort():
 * every name is found whatever the order, and a name that differs only in
 * case from one in another run is refused.
 */
Test(ptz_read, finds_every_name_in_any_record_order)
{
	enum { N = 300 };
	static char store[N][24];
	const char *names[N], *v[N];
	struct zent ents[N];
	struct zopt o = { .torch = true };
	struct zinfo in;
	struct buf b;
	struct h h;

	cr_assert_leq(N, ZMAX);
	for (int i = 0; i < N; i++) {
		snprintf(store[i], sizeof(store[i]), "a/data/%d", i);
		names[i] = store[i];
	}
	qsort(names, N, sizeof(names[0]), cmp_str);	/* as torch writes */
	for (int order = 0; order < 3; order++) {
		int k = 0;

		if (order == 0)	/* one run */
			memcpy(v, names, sizeof(v));
		for (int r = 0; order == 1 && r < 3; r++)	/* three */
			for (int i = r; i < N; i += 3)
				v[k++] = names[i];
		for (int i = 0; order == 2 && i < N; i++)	/* N runs */
			v[i] = names[N - 1 - i];
		open_names(&h, &b, v, N, true);
		for (int i = 0; i < N; i++)
			cr_assert_eq(ptz_find(&h.z, v[i]), &h.z.entries[i],
				     "%s, order %d", v[i], order);
		cr_assert_null(ptz_find(&h.z, "a/data/"));
		cr_assert_null(ptz_find(&h.z, "a/data/3000"));
		h_close(&h);
		free(b.p);
	}
	/* three runs, the last record a duplicate of run 0's first */
	for (int r = 0, k = 0; r < 3; r++)
		for (int i = r; i < N; i += 3)
			v[k++] = names[i];
	v[N - 1] = "A/DATA/0";
	for (int i = 0; i < N; i++)
		ents[i] = (struct zent){ v[i], "x", 1, false };
	zb_build(&b, ents, N, &o, &in);
	{
		/* test_ptz_amb.c: which one torch loads */
		uint64_t off = open_fails(&b, -EILSEQ, "duplicate record name 'a/data/0' ignoring case ('A/DATA/0' too)");

		cr_expect(off == in.cd[0] || off == in.cd[N - 1],
			  "offset 0x%llx", (unsigned long long)off);
	}
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, reads_deflated_record)
{
	size_t n = 20000;
	char *text = malloc(n);
	struct zent e = { "archive/code/big.py", text, n, true };
	struct zopt o = { .torch = true };
	struct buf b;
	struct zinfo in;
	struct h h;

	for (size_t i = 0; i < n; i++)
		text[i] = "abcdefgh  \n"[(i * 7 + i / 13) % 11];
	zb_build(&b, &e, 1, &o, &in);
	cr_assert_lt(in.csize[0], n / 2);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	cr_assert_eq(h.z.entries[0].method, PTZ_DEFLATED);
	expect_entry(&h, 0, &e);
	h_close(&h);
	free(b.p);
	free(text);
	assert_no_leaks();
}

Test(ptz_read, reads_empty_record)
{
	struct zent e[] = { { "a/empty", "", 0, false },
			    { "a/empty.z", "", 0, true } };
	struct zopt o = { .torch = true };
	struct buf b;
	struct zinfo in;
	struct h h;

	zb_build(&b, e, 2, &o, &in);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	expect_entry(&h, 0, &e[0]);
	expect_entry(&h, 1, &e[1]);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, read_refuses_record_over_max)
{
	struct buf b;
	struct zinfo in;
	struct h h;
	static unsigned char dummy[1];
	unsigned char *out = dummy;
	size_t len = 7;

	std_torch(&b, &in);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	cr_assert_eq(ptz_entry_read(&h.z, &h.z.entries[1], sizeof(f) - 1, &out,
				    &len, &h.d), -EFBIG);
	cr_assert_null(out);
	cr_assert_eq(len, 0);
	cr_assert_eq(h.d.off, in.hdr[1]);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, opens_empty_archive)
{
	struct zopt o = { 0 };
	struct buf b;
	struct zinfo in;
	struct h h;

	zb_build(&b, NULL, 0, &o, &in);
	cr_assert_eq(b.len, 22);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	cr_assert_eq(h.z.nentries, 0);
	cr_assert_null(h.z.prefix);
	cr_assert_null(ptz_find(&h.z, "a"));
	cr_assert_null(ptz_find_rel(&h.z, "a"));
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, release_of_zeroed_reader_is_safe)
{
	struct ptz_reader z = { 0 };

	ptz_reader_release(&z);
	ptz_reader_release(&z);
	assert_no_leaks();
}

Test(ptz_read, ignores_local_sizes_and_crc)
{
	struct buf b;
	struct zinfo in;
	struct h h;

	std_plain(&b, &in);
	for (size_t i = 0; i < NSTD; i++)
		memset(b.p + in.hdr[i] + 14, 0xee, 12);
	cr_assert_eq(h_open(&h, b.p, b.len), 0, "%s", h.line);
	for (size_t i = 0; i < NSTD; i++)
		expect_entry(&h, i, &std_ents[i]);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

/* ---- malformed archives ---- */

/* Open, then locate and read every entry; every failure must be clean. */
static void open_and_read_all(struct h *h)
{
	int rc = h_reopen(h);

	cr_assert(rc == 0 || rc == -EILSEQ || rc == -ENOTSUP, "rc %d: %s",
		  rc, h->line);
	if (rc < 0)
		return;
	for (uint32_t i = 0; i < h->z.nentries; i++) {
		unsigned char *out;
		size_t len;

		diag_init(&h->d, "t.zip");
		rc = ptz_entry_read(&h->z, &h->z.entries[i], 1 << 16, &out,
				    &len, &h->d);
		cr_assert(rc == 0 || rc == -EILSEQ || rc == -EFBIG,
			  "rc %d: %s", rc, h->d.msg);
		if (rc == 0)
			free(out);
		cr_assert(ptz_find(&h->z, h->z.entries[i].name));
	}
	ptz_reader_release(&h->z);
}

/*
 * Every proper prefix of @b must fail, naming a truncated download, but
 * those that only cut the comment of the end record at @eocd: miniz (and
 * torch) read those.
 */
static void truncate_every_length(const struct buf *b, size_t eocd)
{
	struct h h;

	cr_assert_eq(h_open(&h, b->p, b->len), 0, "%s", h.line);
	ptz_reader_release(&h.z);
	for (size_t len = b->len; len-- > 0;) {
		cr_assert_eq(ftruncate(h.fd, (off_t)len), 0);
		h.size = len;
		if (len >= eocd + 22) {
			cr_assert_eq(h_reopen(&h), 0, "length %zu: %s", len,
				     h.line);
			ptz_reader_release(&h.z);
			continue;
		}
		cr_assert_eq(h_reopen(&h), -EILSEQ, "length %zu: %s", len,
			     h.line);
		cr_assert(strstr(h.line, "truncated download"),
			  "length %zu: %s", len, h.line);
	}
	h_close(&h);
}

Test(ptz_malformed, rejects_every_truncation)
{
	struct buf b;
	struct zinfo in;

	std_torch(&b, &in);
	truncate_every_length(&b, in.eocd_off);
	free(b.p);
	std_plain(&b, &in);
	truncate_every_length(&b, in.eocd_off);
	free(b.p);
	assert_no_leaks();
}

/* Flip each byte of @b in turn (with three masks), open and read. */
static void flip_every_byte(const struct buf *b)
{
	static const unsigned char masks[] = { 0x01, 0x80, 0xff };
	struct h h;

	cr_assert_eq(h_open(&h, b->p, b->len), 0, "%s", h.line);
	ptz_reader_release(&h.z);
	for (size_t i = 0; i < b->len; i++) {
		for (size_t m = 0; m < sizeof(masks); m++) {
			unsigned char c = b->p[i] ^ masks[m];

			pwrite_all(h.fd, &c, 1, (off_t)i);
			open_and_read_all(&h);
		}
		pwrite_all(h.fd, &b->p[i], 1, (off_t)i);
	}
	h_close(&h);
}

Test(ptz_malformed, survives_flipped_bytes_torch_layout)
{
	struct buf b;
	struct zinfo in;

	std_torch(&b, &in);
	flip_every_byte(&b);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_malformed, survives_flipped_bytes_plain_layout)
{
	struct zopt o = { .cd_zip64 = true, .comment = "PK\5\6 comment" };
	struct buf b;
	struct zinfo in;

	zb_build(&b, std_ents, NSTD, &o, &in);
	flip_every_byte(&b);
	free(b.p);
	assert_no_leaks();
}

static void fails_on_text(const char *text, const char *what)
{
	struct buf b = { (unsigned char *)strdup(text), strlen(text), 0 };

	open_fails(&b, -EILSEQ, what);
	free(b.p);
}

Test(ptz_malformed, rejects_empty_file)
{
	fails_on_text("", "empty file: truncated download");
	assert_no_leaks();
}

Test(ptz_malformed, rejects_short_file)
{
	fails_on_text("PK\3\4\24\0\0\0", "too short");
	assert_no_leaks();
}

Test(ptz_malformed, rejects_file_without_end_record)
{
	char junk[300];

	memset(junk, 'P', sizeof(junk) - 1);
	junk[sizeof(junk) - 1] = '\0';
	memcpy(junk, "PK\3\4", 4);
	fails_on_text(junk, "no end of central directory record: truncated download or not a zip archive");
	assert_no_leaks();
}

Test(ptz_malformed, rejects_git_lfs_pointer)
{
	fails_on_text("version https://git-lfs.github.com/spec/v1\n"
		      "oid sha256:4665a5ea423c2713d436b5ee50593a9640e0018c1550b5a0002f74190d6caea8\n"
		      "size 1340424\n", "git lfs pointer");
	assert_no_leaks();
}

Test(ptz_malformed, rejects_html_page)
{
	fails_on_text("\n<!DOCTYPE html>\n<html><head><title>Sign in</title>"
		      "</head><body>Please sign in.</body></html>\n", "html");
	assert_no_leaks();
}

/* Break a field of the standard torch or plain archive, expect failure. */
#define BREAK(torch, stmt, err, what, want_off)				\
	do {								\
		struct buf b;						\
		struct zinfo in;					\
		uint64_t off_;						\
									\
		if (torch)						\
			std_torch(&b, &in);				\
		else							\
			std_plain(&b, &in);				\
		stmt;							\
		off_ = open_fails(&b, (err), (what));			\
		cr_expect_eq(off_, (uint64_t)(want_off),		\
			     "offset 0x%llx", (unsigned long long)off_);\
		free(b.p);						\
	} while (0)

Test(ptz_malformed, rejects_cdir_past_eocd)
{
	BREAK(false, put_le32(b.p + in.eocd_off + 12, in.cd_size + 1),
	      -EILSEQ, "runs past the end records", in.eocd_off + 12);
	/* With ZIP64 the end records start at the ZIP64 record. */
	BREAK(true, put_le64(b.p + in.z64_off + 40, in.cd_size + 1),
	      -EILSEQ, "runs past the end records", in.z64_off + 40);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_out_of_range_offsets)
{
	BREAK(false, put_le32(b.p + in.eocd_off + 16, 0x7fffffff),
	      -EILSEQ, "offset 0x7fffffff is past", in.eocd_off + 16);
	BREAK(true, put_le64(b.p + in.z64_off + 48, UINT64_MAX - 3),
	      -EILSEQ, "is past the end records", in.z64_off + 48);
	BREAK(true, put_le64(b.p + in.z64_off + 40, UINT64_MAX),
	      -EILSEQ, "runs past", in.z64_off + 40);
	/* miniz takes the classic values where the locator points at no
	   ZIP64 record, and refuses one past the end (test_ptz_amb.c) */
	BREAK(true, put_le64(b.p + in.loc_off + 8, in.loc_off - 55),
	      -EILSEQ, "where no zip64 end record is", in.loc_off);
	BREAK(true, put_le64(b.p + in.loc_off + 8, UINT64_MAX),
	      -EILSEQ, "runs past the end of the file", in.loc_off + 8);
	BREAK(true, put_le64(b.p + in.loc_off + 8, in.cd_off),
	      -EILSEQ, "where no zip64 end record is", in.loc_off);
	BREAK(false, put_le32(b.p + in.cd[3] + 42, in.cd_off),
	      -EILSEQ, "runs past the central directory", in.cd[3] + 42);
	BREAK(false, put_le32(b.p + in.cd[3] + 42, 0xfffffff0),
	      -EILSEQ, "runs past the central directory", in.cd[3] + 42);
	BREAK(false, put_le32(b.p + in.cd[1] + 20, 0x40);
	      put_le32(b.p + in.cd[1] + 24, 0x40),
	      -EILSEQ, "overlaps", in.hdr[1]);
	BREAK(false, put_le32(b.p + in.cd[3] + 20, 0x4000);
	      put_le32(b.p + in.cd[3] + 24, 0x4000),
	      -EILSEQ, "runs past the central directory", in.cd[3] + 42);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_lying_entry_counts)
{
	BREAK(false, put_le16(b.p + in.eocd_off + 8, 3);
	      put_le16(b.p + in.eocd_off + 10, 3),
	      -EILSEQ, "more records than the 3 its end record counts",
	      in.cd[3]);
	BREAK(false, put_le16(b.p + in.eocd_off + 8, 3);
	      put_le16(b.p + in.eocd_off + 10, 3); b.p[in.cd[3]] = 'X',
	      -EILSEQ, "bytes after its 3 records", in.cd[3]);
	BREAK(false, put_le16(b.p + in.eocd_off + 8, 5);
	      put_le16(b.p + in.eocd_off + 10, 5),
	      -EILSEQ, "ends inside a record", in.cd_off + in.cd_size);
	BREAK(false, put_le16(b.p + in.eocd_off + 10, 0xffff);
	      put_le16(b.p + in.eocd_off + 8, 0xffff),
	      -EILSEQ, "65535 entries cannot fit", in.eocd_off + 10);
	BREAK(true, put_le64(b.p + in.z64_off + 24, 1ull << 40);
	      put_le64(b.p + in.z64_off + 32, 1ull << 40),
	      -EILSEQ, "cannot fit", in.z64_off + 32);
	BREAK(false, put_le16(b.p + in.eocd_off + 8, 3),
	      -EILSEQ, "3 entries on this disk but 4", in.eocd_off + 8);
	BREAK(true, put_le64(b.p + in.z64_off + 24, 3),
	      -EILSEQ, "3 entries on this disk but 4", in.z64_off + 24);
	BREAK(false, put_le16(b.p + in.eocd_off + 8, 0);
	      put_le16(b.p + in.eocd_off + 10, 0),
	      -EILSEQ, "but no records", in.cd_off);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_multi_disk_archives)
{
	BREAK(false, put_le16(b.p + in.eocd_off + 4, 1),
	      -ENOTSUP, "multi-disk", in.eocd_off + 4);
	BREAK(true, put_le32(b.p + in.z64_off + 20, 2),
	      -ENOTSUP, "multi-disk", in.z64_off + 16);
	BREAK(true, put_le32(b.p + in.loc_off + 16, 2),
	      -ENOTSUP, "multi-disk", in.loc_off + 16);
	/* miniz reads only archives of 1 disk */
	BREAK(true, put_le32(b.p + in.loc_off + 16, 0),
	      -ENOTSUP, "0 disks; torch reads only 1", in.loc_off + 16);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_bad_zip64_record_size)
{
	BREAK(true, put_le64(b.p + in.z64_off + 4, 43),
	      -EILSEQ, "bad zip64 end record size 43", in.z64_off + 4);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_bad_cdir_signature)
{
	BREAK(false, b.p[in.cd[2]] = 0x51, -EILSEQ,
	      "bad central directory signature 0x02014b51", in.cd[2]);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_overlapping_records)
{
	BREAK(false, put_le32(b.p + in.cd[2] + 42, in.hdr[1] + 10),
	      -EILSEQ, "record 'archive/data/0' overlaps 'archive/code/x.py'",
	      in.hdr[1]);
	BREAK(false, put_le32(b.p + in.cd[3] + 42, in.hdr[0]),
	      -EILSEQ, "record 'archive/data.pkl' overlaps 'archive/version'",
	      in.hdr[0]);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_encrypted_records)
{
	BREAK(false, b.p[in.cd[1] + 8] |= 1, -ENOTSUP,
	      "record 'archive/data/0' is encrypted", in.cd[1] + 8);
	BREAK(false, b.p[in.cd[1] + 8] |= 0x40, -ENOTSUP,
	      "is encrypted", in.cd[1] + 8);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_unknown_method)
{
	BREAK(false, put_le16(b.p + in.cd[0] + 10, 12), -ENOTSUP,
	      "compression method 12", in.cd[0] + 10);
	BREAK(false, put_le16(b.p + in.cd[0] + 10, 99), -ENOTSUP,
	      "compression method 99", in.cd[0] + 10);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_stored_size_mismatch)
{
	BREAK(false, put_le32(b.p + in.cd[1] + 20, sizeof(f) - 1), -EILSEQ,
	      "stored record 'archive/data/0' has compressed size 39 but size 40",
	      in.cd[1] + 20);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_deflate_claims_past_its_ratio)
{
	/* 16 compressed bytes cannot inflate to 4 GiB: refused at open,
	   before anything is allocated for them (tests/hostile) */
	BREAK(false, put_le32(b.p + in.cd[2] + 24, 0xfffffff0), -EILSEQ,
	      "claims 4294967280 bytes from", in.cd[2] + 24);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_bad_names)
{
	BREAK(false, b.p[in.cd[1] + 46 + 3] = 0, -EILSEQ, "NUL",
	      in.cd[1] + 46);
	BREAK(true, put_le16(b.p + in.cd[3] + 28, 0);
	      put_le16(b.p + in.cd[3] + 30, 15),
	      -EILSEQ, "empty name", in.cd[3] + 28);
	BREAK(false, put_le16(b.p + in.cd[3] + 28, 0x1000),
	      -EILSEQ, "runs past the central directory", in.cd[3] + 28);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_bad_zip64_extras)
{
	/* No ZIP64 extra although the fields say 0xffffffff. */
	BREAK(false, put_le32(b.p + in.cd[1] + 20, 0xffffffff);
	      put_le32(b.p + in.cd[1] + 24, 0xffffffff),
	      -EILSEQ, "but no zip64 extra field", in.cd[1]);
	BREAK(false, put_le32(b.p + in.cd[1] + 42, 0xffffffff),
	      -EILSEQ, "but no zip64 extra field", in.cd[1]);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_short_or_overrunning_zip64_extra)
{
	struct zopt o = { .cd_zip64 = true };
	struct buf b;
	struct zinfo in;
	size_t x;

	zb_build(&b, std_ents, NSTD, &o, &in);
	x = in.cd[1] + 46 + strlen(std_ents[1].name);
	put_le16(b.p + x + 2, 16);
	cr_expect_eq(open_fails(&b, -EILSEQ, "too short (16 bytes, 24 needed)"),
		     x);
	put_le16(b.p + x + 2, 25);
	cr_expect_eq(open_fails(&b, -EILSEQ, "runs past its extra area"), x);
	/* An unknown field first is skipped. */
	put_le16(b.p + x, 0x5455);
	put_le16(b.p + x + 2, 0);
	put_le16(b.p + x + 4, 1);
	put_le16(b.p + x + 6, 20);
	cr_expect_eq(open_fails(&b, -EILSEQ, "too short (20 bytes, 24 needed)"),
		     x + 4);
	free(b.p);
	assert_no_leaks();
}

/* Open @b (which must open), then expect ptz_entry_read of @i to fail. */
static void read_fails(const struct buf *b, size_t i, int err,
		       const char *what, uint64_t want_off)
{
	struct h h;
	unsigned char *out = NULL;
	size_t len;
	int rc;

	cr_assert_eq(h_open(&h, b->p, b->len), 0, "%s", h.line);
	rc = ptz_entry_read(&h.z, &h.z.entries[i], 1 << 20, &out, &len,
			    &h.d);
	diag_line(&h.d, h.line, sizeof(h.line));
	cr_expect_eq(rc, err, "rc %d: %s", rc, h.line);
	cr_expect_null(out);
	cr_expect(strstr(h.d.msg, what), "'%s' not in: %s", what, h.line);
	cr_expect_eq(h.d.off, want_off, "%s", h.line);
	h_close(&h);
}

Test(ptz_malformed, rejects_bad_local_headers)
{
	struct buf b;
	struct zinfo in;

	std_torch(&b, &in);
	b.p[in.hdr[1] + 3] = 5;
	read_fails(&b, 1, -EILSEQ, "bad local header signature 0x05034b50",
		   in.hdr[1]);
	b.p[in.hdr[1] + 3] = 4;
	put_le16(b.p + in.hdr[1] + 28, 0xffff);
	read_fails(&b, 1, -EILSEQ, "run past the next record", in.hdr[1] + 26);
	put_le16(b.p + in.hdr[1] + 28, 0);
	put_le16(b.p + in.hdr[3] + 26, 200);
	read_fails(&b, 3, -EILSEQ, "run past the next record", in.hdr[3] + 26);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_malformed, rejects_bad_deflate_streams)
{
	struct buf b;
	struct zinfo in;

	char what[80];

	std_plain(&b, &in);
	put_le32(b.p + in.cd[2] + 24, sizeof(py) + 9);
	snprintf(what, sizeof(what), "inflates to %zu bytes, not its size %zu",
		 sizeof(py) - 1, sizeof(py) + 9);
	read_fails(&b, 2, -EILSEQ, what, in.data[2]);
	put_le32(b.p + in.cd[2] + 24, sizeof(py) - 11);
	snprintf(what, sizeof(what), "inflates to more than its size %zu",
		 sizeof(py) - 11);
	read_fails(&b, 2, -EILSEQ, what, in.data[2]);
	put_le32(b.p + in.cd[2] + 24, sizeof(py) - 1);
	memset(b.p + in.data[2], 0xff, in.csize[2]);
	read_fails(&b, 2, -EILSEQ, "not a valid deflate stream", in.data[2]);
	free(b.p);
	assert_no_leaks();
}

/*
 * A sparse file of a little over 2 GiB whose ZIP64 end record claims
 * @n entries in @cd_size bytes at offset 0.
 */
static void open_sparse(uint64_t n, uint64_t cd_size, int err,
			const char *what)
{
	uint64_t size = PTZ_MAX_CDIR + 4096;
	unsigned char tail[98] = { 0 };
	struct h h;
	int rc;

	put_le32(tail, PTZ_SIG_EOCD64);
	put_le64(tail + 4, 44);
	put_le64(tail + 24, n);
	put_le64(tail + 32, n);
	put_le64(tail + 40, cd_size);
	put_le32(tail + 56, PTZ_SIG_LOC64);
	put_le64(tail + 64, size - 98);
	put_le32(tail + 72, 1);
	put_le32(tail + 76, PTZ_SIG_EOCD);
	h.fd = tmp_fd();
	h.size = size;
	cr_assert_eq(ftruncate(h.fd, (off_t)size), 0);
	pwrite_all(h.fd, tail, sizeof(tail), (off_t)(size - sizeof(tail)));
	rc = h_reopen(&h);
	cr_expect_eq(rc, err, "%s", h.line);
	cr_expect(strstr(h.d.msg, what), "%s", h.line);
	h_close(&h);
}

Test(ptz_malformed, refuses_counts_and_sizes_over_limits)
{
	open_sparse(1, PTZ_MAX_CDIR + 46, -ENOTSUP,
		    "central directory too large");
	open_sparse(PTZ_MAX_ENTRIES + 1ull, (PTZ_MAX_ENTRIES + 1ull) * 46,
		    -ENOTSUP, "too many records");
	open_sparse(1, PTZ_MAX_CDIR + 8192, -EILSEQ, "runs past");
	assert_no_leaks();
}

/* ---- real torch-written files ---- */

/* True when the local header at @off has torch's "FB" alignment field. */
static bool has_fb_padding(int fd, uint64_t off)
{
	unsigned char lh[30], x[0x10000];
	size_t nl, el;

	if (pread(fd, lh, 30, (off_t)off) != 30)
		return false;
	nl = le16(lh + 26);
	el = le16(lh + 28);
	if (pread(fd, x, el, (off_t)(off + 30 + nl)) != (ssize_t)el)
		return false;
	for (size_t p = 0; p + 4 <= el; p += 4 + le16(x + p + 2))
		if (x[p] == 'F' && x[p + 1] == 'B')
			return true;
	return false;
}

/*
 * Open @path and check every record: located, aligned, CRC right.  Returns
 * the number of records, 0 for a file that is not a zip archive.
 */
static uint32_t check_fixture(const char *path)
{
	struct h h;
	unsigned char magic[4];
	int rc;

	h.fd = open(path, O_RDONLY);
	cr_assert(h.fd >= 0, "%s: %s", path, strerror(errno));
	if (pread(h.fd, magic, 4, 0) != 4 || memcmp(magic, "PK\3\4", 4)) {
		close(h.fd);
		return 0;
	}
	diag_init(&h.d, path);
	rc = ptz_reader_open(&h.z, h.fd, path, &h.d);
	cr_assert_eq(rc, 0, "%s", diag_line(&h.d, h.line, sizeof(h.line)));
	cr_expect_gt(h.z.nentries, 0, "%s", path);
	cr_expect_not_null(h.z.prefix, "%s", path);
	for (uint32_t i = 0; i < h.z.nentries; i++) {
		struct ptz_entry *e = &h.z.entries[i];
		unsigned char *out;
		size_t len;

		rc = ptz_entry_read(&h.z, e, 64 << 20, &out, &len, &h.d);
		cr_assert_eq(rc, 0, "%s",
			     diag_line(&h.d, h.line, sizeof(h.line)));
		cr_expect_eq(len, e->usize);
		if (e->crc32)
			cr_expect_eq(libdeflate_crc32(0, out, len), e->crc32,
				     "%s: %s: bad CRC", path, e->name);
		free(out);
		if (e->method == PTZ_STORED &&
		    has_fb_padding(h.fd, e->header_off))
			cr_expect_eq(e->data_off % 64, 0, "%s: %s at 0x%llx",
				     path, e->name,
				     (unsigned long long)e->data_off);
		cr_expect_eq(ptz_find(&h.z, e->name), e);
	}
	rc = (int)h.z.nentries;
	h_close(&h);
	return (uint32_t)rc;
}

struct fixture_counts {
	unsigned long files, records;
};

static void check_one(const char *path, void *arg)
{
	struct fixture_counts *k = arg;
	uint32_t n = check_fixture(path);

	k->files += n > 0;
	k->records += n;
}

Test(ptz_fixtures, opens_every_zip_fixture)
{
	struct fixture_counts k = { 0, 0 };

	for_each_fixture(check_one, &k);
	cr_log_info("checked %lu records in %lu zip fixtures", k.records,
		    k.files);
	assert_no_leaks();
}

/* ---- streaming inflate into a file (ptz_inflate.c) ---- */

/* Inflate entry @i of @b into a temporary file: rc, with @h's line. */
static int inflate_into(const struct buf *b, size_t i, struct h *h, int *out,
			uint32_t *crc)
{
	int rc;

	cr_assert_eq(h_open(h, b->p, b->len), 0, "%s", h->line);
	*out = tmp_fd();
	rc = ptz_entry_inflate(&h->z, &h->z.entries[i], *out, crc, &h->d);
	diag_line(&h->d, h->line, sizeof(h->line));
	return rc;
}

Test(ptz_inflate, streams_a_large_record_into_a_file)
{
	/* 5 MiB: noise (several input chunks) then zeros (output chunks
	   that take almost no input) */
	size_t n = 5u << 20;
	unsigned char *data = malloc(n), *back = malloc(n + 1);
	struct zent e = { "archive/data/0", data, n, true };
	struct zopt o = { .torch = true };
	uint32_t crc = 0, x = 1;
	struct zinfo in;
	struct buf b;
	struct h h;
	int fd;

	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		data[i] = i < 3u << 20 ? (unsigned char)(x >> 16) : 0;
	}
	zb_build(&b, &e, 1, &o, &in);
	cr_assert_eq(inflate_into(&b, 0, &h, &fd, &crc), 0, "%s", h.line);
	cr_expect_eq(crc, libdeflate_crc32(0, data, n));
	cr_assert_eq(pread(fd, back, n + 1, 0), (ssize_t)n);
	cr_expect(!memcmp(back, data, n));
	close(fd);
	h_close(&h);
	free(b.p);
	free(data);
	free(back);
	assert_no_leaks();
}

Test(ptz_inflate, rejects_lying_sizes_crcs_and_streams)
{
	char what[80];
	struct buf b;
	struct zinfo in;
	struct h h;
	uint32_t crc;
	int fd;

	std_plain(&b, &in);
	/* a stored record is not for this function */
	cr_expect_eq(inflate_into(&b, 1, &h, &fd, &crc), -ENOTSUP, "%s",
		     h.line);
	close(fd);
	h_close(&h);
	put_le32(b.p + in.cd[2] + 24, sizeof(py) + 9);
	cr_expect_eq(inflate_into(&b, 2, &h, &fd, &crc), -EILSEQ);
	snprintf(what, sizeof(what), "inflates to %zu bytes, not its size %zu",
		 sizeof(py) - 1, sizeof(py) + 9);
	cr_expect(strstr(h.line, what), "%s", h.line);
	close(fd);
	h_close(&h);
	put_le32(b.p + in.cd[2] + 24, sizeof(py) - 11);
	cr_expect_eq(inflate_into(&b, 2, &h, &fd, &crc), -EILSEQ);
	snprintf(what, sizeof(what), "inflates to more than its size %zu",
		 sizeof(py) - 11);
	cr_expect(strstr(h.line, what), "%s", h.line);
	close(fd);
	h_close(&h);
	put_le32(b.p + in.cd[2] + 24, sizeof(py) - 1);
	put_le32(b.p + in.cd[2] + 16, 0x12345678);
	cr_expect_eq(inflate_into(&b, 2, &h, &fd, &crc), -EILSEQ);
	cr_expect(strstr(h.line, "the central directory says 0x12345678"),
		  "%s", h.line);
	cr_expect_eq(h.d.off, in.data[2]);
	close(fd);
	h_close(&h);
	free(b.p);
	std_plain(&b, &in);
	/* the stream stops before its end: csize cut to 4 bytes */
	put_le32(b.p + in.cd[2] + 20, 4);
	cr_expect_eq(inflate_into(&b, 2, &h, &fd, &crc), -EILSEQ);
	cr_expect(strstr(h.line, "deflate stream cut short"), "%s", h.line);
	close(fd);
	h_close(&h);
	free(b.p);
	std_plain(&b, &in);
	memset(b.p + in.data[2], 0xff, in.csize[2]);
	cr_expect_eq(inflate_into(&b, 2, &h, &fd, &crc), -EILSEQ);
	cr_expect(strstr(h.line, "not a valid deflate stream"), "%s", h.line);
	close(fd);
	h_close(&h);
	free(b.p);
	assert_no_leaks();
}

/* ---- an archive inside a larger file (a DCP item) ---- */

/* @pre junk bytes, the archive, @post junk bytes: a temporary file. */
static int embedded(const struct buf *b, size_t pre, size_t post)
{
	int fd = tmp_fd();
	unsigned char junk[256];

	memset(junk, 'P', sizeof(junk));	/* "PPP..": no signature */
	cr_assert(pre <= sizeof(junk) && post <= sizeof(junk));
	pwrite_all(fd, junk, pre, 0);
	pwrite_all(fd, b->p, b->len, pre);
	pwrite_all(fd, junk, post, pre + b->len);
	return fd;
}

Test(ptz_read, opens_an_archive_at_an_offset)
{
	struct ptz_reader z;
	struct zinfo in;
	struct buf b = { 0 };
	struct ptz_entry *e;
	unsigned char *data;
	struct diag d;
	size_t len;
	int fd;

	std_torch(&b, &in);
	fd = embedded(&b, 100, 37);
	diag_init(&d, "t.distcp");
	cr_assert_eq(ptz_reader_open_at(&z, fd, "t.distcp", 100, b.len, &d),
		     0, "%s", d.msg);
	cr_expect_eq(z.base, 100);
	cr_expect_eq(z.file_size, b.len);
	e = ptz_find_rel(&z, "data/0");
	cr_assert(e);
	cr_assert_eq(ptz_entry_locate(&z, e, &d), 0, "%s", d.msg);
	/* offsets count from the archive's start */
	cr_expect_eq(e->data_off, in.data[1]);
	cr_assert_eq(ptz_entry_read(&z, e, 1 << 20, &data, &len, &d), 0);
	cr_expect_eq(len, sizeof(f));
	cr_expect_arr_eq(data, f, sizeof(f));
	free(data);
	ptz_reader_release(&z);
	/* the trailing junk is not part of it: the end record must be the
	   archive's last bytes, as for a file; a size that is 1 byte short
	   cuts the end record */
	cr_expect_neq(ptz_reader_open_at(&z, fd, "t.distcp", 100, b.len - 1,
					 &d), 0);
	ptz_reader_release(&z);
	close(fd);
	free(b.p);
	assert_no_leaks();
}

Test(ptz_read, refuses_an_embedded_archive_past_the_file)
{
	struct ptz_reader z;
	struct zinfo in;
	struct buf b = { 0 };
	struct diag d;
	int fd;

	std_torch(&b, &in);
	fd = embedded(&b, 10, 0);
	diag_init(&d, "t.distcp");
	cr_expect_eq(ptz_reader_open_at(&z, fd, "t.distcp", 10, b.len + 1, &d),
		     -EILSEQ);
	cr_expect(strstr(d.msg, "runs past the end of the file"), "%s", d.msg);
	ptz_reader_release(&z);
	diag_init(&d, "t.distcp");
	cr_expect_eq(ptz_reader_open_at(&z, fd, "t.distcp", UINT64_MAX - 5, 10,
					&d), -EILSEQ);
	ptz_reader_release(&z);
	close(fd);
	free(b.p);
	assert_no_leaks();
}
