/*
 * test_ptz_write.c - the zip writer (core/zip/ptz_write.c): every stored
 * torch-written fixture repacked from its own records must come out byte
 * for byte the same; archives written from memory read back with our
 * reader and, independently, with libarchive; the ZIP64 encodings at 4 GiB
 * checked field by field without writing 4 GiB; an archive written at an
 * origin inside a larger file (a DCP item); and write failures (a
 * read-only fd, a full tmpfs) reported as -errno with the diag set.
 */
#include "test_util.h"
#include "fixtures.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag/diag.h"
#include "util/le.h"
#include "zip/ptz.h"
#include "zip/ptz_int.h"
#include "zip/ptz_write.h"
#include "zip/ptz_write_int.h"

static char line[512];

static const char *dline(const struct diag *d)
{
	return diag_line(d, line, sizeof(line));
}

/* ---- byte-identical repack of the fixtures ---- */

/*
 * Zip files among the fixtures that torch's miniz did not write with its
 * current settings, so that only a masked comparison can match:
 * ts_tchrs_foo_v1_modeljson.pt comes from torch 1.0/1.1 (2019), whose
 * miniz still stamped a DOS time and date into every header.
 */
static const char *const time_stamped[] = { "ts_tchrs_foo_v1_modeljson.pt" };

static bool is_time_stamped(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (size_t i = 0; i < sizeof(time_stamped) / sizeof(*time_stamped);
	     i++)
		if (!strcmp(base, time_stamped[i]))
			return true;
	return false;
}

/* Zero the time and date of every local header and central entry. */
static void mask_times(unsigned char *p, const struct ptz_reader *z)
{
	uint64_t off = z->cdir_off;

	for (uint32_t i = 0; i < z->nentries; i++) {
		memset(p + z->entries[i].header_off + 10, 0, 4);
		cr_assert_eq(le32(p + off), PTZ_SIG_CDIR);
		memset(p + off + 12, 0, 4);
		off += PTZ_CDIR_LEN + le16(p + off + 28) + le16(p + off + 30) +
		       le16(p + off + 32);
	}
}

/*
 * Repack @path from its own records (central directory order, data by
 * range, CRC from the central directory).  Returns 1 if it matched, 0 if
 * it is not a zip of stored records.
 */
static int repack(const char *path)
{
	struct ptz_reader z;
	struct ptz_writer w;
	struct diag d;
	unsigned char magic[4], *in, *out;
	size_t in_len, out_len;
	int fd, ofd, rc;

	fd = open(path, O_RDONLY);
	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	if (pread(fd, magic, 4, 0) != 4 || memcmp(magic, "PK\3\4", 4)) {
		close(fd);
		return 0;
	}
	diag_init(&d, path);
	rc = ptz_reader_open(&z, fd, path, &d);
	cr_assert_eq(rc, 0, "%s", dline(&d));
	for (uint32_t i = 0; i < z.nentries; i++) {
		if (z.entries[i].method != PTZ_STORED) {
			ptz_reader_release(&z);
			close(fd);
			return 0;
		}
	}
	ofd = tmp_fd();
	cr_assert_eq(ptz_writer_init(&w, ofd, 0, &d), 0, "%s", dline(&d));
	for (uint32_t i = 0; i < z.nentries; i++) {
		struct ptz_entry *e = &z.entries[i];
		struct ptz_source src = { .fd = fd, .len = e->usize,
					  .has_crc = true, .crc32 = e->crc32 };

		cr_assert_eq(ptz_entry_locate(&z, e, &d), 0, "%s", dline(&d));
		src.off = e->data_off;
		rc = ptz_writer_add(&w, e->name, &src, &d);
		cr_assert_eq(rc, 0, "%s", dline(&d));
	}
	cr_assert_eq(ptz_writer_finish(&w, &d), 0, "%s", dline(&d));
	in = slurp(fd, &in_len);
	out = slurp(ofd, &out_len);
	if (is_time_stamped(path)) {
		cr_expect(in_len != out_len || memcmp(in, out, in_len),
			  "%s now matches unmasked: drop it from the list",
			  path);
		mask_times(in, &z);
	}
	cr_expect_eq(out_len, in_len, "%s: %zu bytes written, %zu read",
		     path, out_len, in_len);
	for (size_t i = 0; i < in_len && i < out_len; i++) {
		if (in[i] != out[i]) {
			cr_expect_fail("%s: first difference at 0x%zx", path,
				       i);
			break;
		}
	}
	free(in);
	free(out);
	ptz_writer_release(&w);
	ptz_reader_release(&z);
	close(ofd);
	close(fd);
	return 1;
}

static void repack_one(const char *path, void *arg)
{
	*(unsigned *)arg += (unsigned)repack(path);
}

Test(ptz_write, repacks_torch_fixtures_byte_for_byte)
{
	unsigned files = 0;

	for_each_fixture(repack_one, &files);
	cr_expect_eq(repack(PT_TEST_DATA "/sample.pt"), 1);
	cr_log_info("repacked %u stored zip fixtures", files);
	assert_no_leaks();
}

/* ---- read back ---- */

#define BIG_LEN ((size_t)3 << 20)	/* more than one copy chunk */

struct rec {
	const char *name;
	const unsigned char *data;
	size_t len;
	int from;		/* 0 memory, 1 file range, 2 with known CRC */
};

static unsigned char *pattern(size_t len, unsigned seed)
{
	unsigned char *p = malloc(len ? len : 1);

	cr_assert_not_null(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
	return p;
}

/* Check the archive in @fd holds @recs, in order, with our reader. */
static void read_back_ptz(int fd, const struct rec *recs, size_t n,
			  uint32_t align)
{
	struct ptz_reader z;
	struct diag d;

	diag_init(&d, "out.zip");
	cr_assert_eq(ptz_reader_open(&z, fd, "out.zip", &d), 0, "%s",
		     dline(&d));
	cr_assert_eq(z.nentries, n);
	cr_assert_eq(z.zip64, 1);
	cr_assert_eq(z.eocd_off + PTZ_EOCD_LEN, z.file_size);
	cr_assert_str_eq(z.prefix, "archive");
	for (size_t i = 0; i < n; i++) {
		struct ptz_entry *e = &z.entries[i];
		unsigned char *out;
		size_t len;

		cr_assert_str_eq(e->name, recs[i].name);
		cr_assert_eq(e->flags, recs[i].len ? 0x0808 : 0x0800);
		cr_assert_eq(ptz_entry_read(&z, e, 64 << 20, &out, &len, &d), 0,
			     "%s", dline(&d));
		cr_assert_eq(e->data_off % align, 0, "%s at 0x%llx", e->name,
			     (unsigned long long)e->data_off);
		cr_assert_eq(len, recs[i].len);
		cr_assert(!len || !memcmp(out, recs[i].data, len), "%s",
			  e->name);
		cr_assert_eq(libdeflate_crc32(0, out, len), e->crc32, "%s",
			     e->name);
		free(out);
	}
	ptz_reader_release(&z);
}

/* The same with libarchive, which also checks every CRC itself. */
static void read_back_libarchive(int fd, const struct rec *recs, size_t n)
{
	struct archive *a = archive_read_new();
	struct archive_entry *ae;
	unsigned char *buf = malloc(BIG_LEN);
	size_t i = 0;

	cr_assert_not_null(a);
	cr_assert_not_null(buf);
	cr_assert_eq(archive_read_support_format_zip(a), ARCHIVE_OK);
	cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
	cr_assert_eq(archive_read_open_fd(a, fd, 65536), ARCHIVE_OK, "%s",
		     archive_error_string(a));
	while (archive_read_next_header(a, &ae) == ARCHIVE_OK) {
		la_ssize_t got;

		cr_assert_lt(i, n);
		cr_assert_str_eq(archive_entry_pathname(ae), recs[i].name);
		cr_assert_eq(archive_entry_size(ae), (la_int64_t)recs[i].len);
		got = archive_read_data(a, buf, BIG_LEN);
		cr_assert_eq(got, (la_ssize_t)recs[i].len, "%s: %s",
			     recs[i].name, archive_error_string(a));
		cr_assert(!recs[i].len ||
			  !memcmp(buf, recs[i].data, recs[i].len));
		i++;
	}
	cr_assert_eq(i, n, "libarchive: %s", archive_error_string(a));
	cr_assert_eq(archive_read_free(a), ARCHIVE_OK);
	free(buf);
}

Test(ptz_write, reads_back_with_ptz_and_libarchive)
{
	static const char pkl[] = "\x80\x02}q\x00.";
	unsigned char *big = pattern(BIG_LEN, 1);
	unsigned char *mid = pattern(100000, 2);
	unsigned char *file = pattern(BIG_LEN + 17, 3);
	const struct rec recs[] = {
		{ "archive/data.pkl", (const unsigned char *)pkl,
		  sizeof(pkl) - 1, 0 },
		{ "archive/data/0", big, BIG_LEN, 0 },
		{ "archive/data/1", NULL, 0, 0 },
		{ "archive/data/2", mid, 100000, 0 },
		{ "archive/data/3", file + 5, BIG_LEN, 1 },
		{ "archive/data/4", file + 1, 4096, 2 },
		{ "archive/version", (const unsigned char *)"3\n", 2, 0 },
	};
	size_t n = sizeof(recs) / sizeof(recs[0]);
	struct ptz_writer w;
	struct diag d;
	int src = tmp_fd(), fd = tmp_fd();

	cr_assert_eq(pwrite(src, file, BIG_LEN + 17, 0),
		     (ssize_t)BIG_LEN + 17);
	diag_init(&d, "out.zip");
	cr_assert_eq(ptz_writer_init(&w, fd, 4096, &d), 0, "%s", dline(&d));
	for (size_t i = 0; i < n; i++) {
		struct ptz_source s = { .buf = recs[i].data,
					.len = recs[i].len };

		if (recs[i].from) {
			s.buf = NULL;
			s.fd = src;
			s.off = (uint64_t)(recs[i].data - file);
			s.has_crc = recs[i].from == 2;
			s.crc32 = libdeflate_crc32(0, recs[i].data,
						   recs[i].len);
		}
		cr_assert_eq(ptz_writer_add(&w, recs[i].name, &s, &d), 0, "%s",
			     dline(&d));
	}
	cr_assert_eq(ptz_writer_finish(&w, &d), 0, "%s", dline(&d));
	ptz_writer_release(&w);
	read_back_ptz(fd, recs, n, 4096);
	read_back_libarchive(fd, recs, n);
	close(src);
	close(fd);
	free(big);
	free(mid);
	free(file);
	assert_no_leaks();
}

/*
 * Two archives one after the other in one file, the second written at an
 * origin (a DCP .distcp's items): each reads back at its offset with
 * zip offsets counted from its own start, alignment included, and the
 * bytes before the origin are not touched.  From a file source too, so
 * that copy_file_range lands at the origin as well.
 */
Test(ptz_write, writes_at_an_origin)
{
	static const char pkl[] = "\x80\x02K\x07.";
	unsigned char *data = pattern(70000, 4);
	struct ptz_writer w;
	struct ptz_reader z;
	struct diag d;
	uint64_t at[3] = { 0 };
	int src = tmp_fd(), fd = tmp_fd();

	cr_assert_eq(pwrite(src, data, 70000, 0), 70000);
	diag_init(&d, "items");
	for (int k = 0; k < 2; k++) {
		struct ptz_source p = { .buf = pkl, .len = sizeof(pkl) - 1 };
		struct ptz_source s = { .fd = src, .off = 3, .len = 69000 };

		cr_assert_eq(ptz_writer_init(&w, fd, 64, &d), 0, "%s",
			     dline(&d));
		w.origin = at[k];
		cr_assert_eq(ptz_writer_add(&w, "archive/data.pkl", &p, &d), 0,
			     "%s", dline(&d));
		cr_assert_eq(ptz_writer_add(&w, "archive/data/0", &s, &d), 0,
			     "%s", dline(&d));
		cr_assert_eq(ptz_writer_finish(&w, &d), 0, "%s", dline(&d));
		at[k + 1] = at[k] + w.cursor;
		ptz_writer_release(&w);
	}
	for (int k = 0; k < 2; k++) {
		unsigned char *out;
		size_t len;

		cr_assert_eq(ptz_reader_open_at(&z, fd, "items", at[k],
						at[k + 1] - at[k], &d), 0,
			     "item %d: %s", k, dline(&d));
		cr_assert_eq(z.nentries, 2);
		cr_assert_eq(ptz_entry_read(&z, &z.entries[1], 1 << 20, &out,
					    &len, &d), 0, "%s", dline(&d));
		cr_assert_eq(len, 69000);
		cr_assert(!memcmp(out, data + 3, len));
		cr_assert_eq(z.entries[1].data_off % 64, 0);
		free(out);
		ptz_reader_release(&z);
	}
	/* and the first is still whole as a file of its own */
	cr_assert_eq(ftruncate(fd, (off_t)at[1]), 0);
	cr_assert_eq(ptz_reader_open(&z, fd, "items", &d), 0, "%s",
		     dline(&d));
	ptz_reader_release(&z);
	close(src);
	close(fd);
	free(data);
	assert_no_leaks();
}

/*
 * copy_file_range between file systems (tmpfs to /tmp) fails with EXDEV:
 * the writer falls back to pread/pwrite, once for good.
 */
Test(ptz_write, copies_across_file_systems_by_fallback)
{
	char path[] = "/dev/shm/test_ptz_write.XXXXXX";
	unsigned char *file = pattern(BIG_LEN, 6);
	const struct rec recs[] = {
		{ "archive/data/0", file, BIG_LEN, 2 },
		{ "archive/data/1", file + 3, 1000, 2 },
	};
	struct ptz_writer w;
	struct diag d;
	int src = mkstemp(path), fd = tmp_fd();

	if (src < 0) {
		free(file);
		close(fd);
		cr_skip_test("no /dev/shm: %s", strerror(errno));
	}
	unlink(path);
	cr_assert_eq(pwrite(src, file, BIG_LEN, 0), (ssize_t)BIG_LEN);
	diag_init(&d, "out.zip");
	cr_assert_eq(ptz_writer_init(&w, fd, 0, &d), 0);
	for (size_t i = 0; i < 2; i++) {
		struct ptz_source s = {
			.fd = src, .len = recs[i].len, .has_crc = true,
			.off = (uint64_t)(recs[i].data - file),
			.crc32 = libdeflate_crc32(0, recs[i].data, recs[i].len),
		};

		cr_assert_eq(ptz_writer_add(&w, recs[i].name, &s, &d), 0, "%s",
			     dline(&d));
	}
	cr_assert_eq(ptz_writer_finish(&w, &d), 0, "%s", dline(&d));
	cr_log_info("copy_file_range %s", w.no_copy_range ? "fell back" :
		    "worked across file systems");
	ptz_writer_release(&w);
	read_back_ptz(fd, recs, 2, 64);
	read_back_libarchive(fd, recs, 2);
	close(src);
	close(fd);
	free(file);
	assert_no_leaks();
}

/* ---- ZIP64 encodings ---- */

Test(ptz_write, zip64_local_header_for_large_size_and_offset)
{
	static const char name[] = "archive/data/0";
	const uint64_t c = 0x100000000ull, size = 0x100000000ull;
	unsigned char b[256];
	size_t len = ptz_local_encode(b, name, 14, c, size, 64);
	uint16_t el = le16(b + 28);

	cr_assert_eq(len, ptz_local_len(14, c, size, 64));
	cr_assert_eq(len, 30 + 14 + el);
	cr_assert_eq((c + len) % 64, 0);
	cr_assert_eq(le32(b), PTZ_SIG_LOCAL);
	cr_assert_eq(le16(b + 4), 0);
	cr_assert_eq(le16(b + 6), 0x0808);
	for (int i = 8; i < 26; i++)
		cr_assert_eq(b[i], 0, "byte %d", i);
	cr_assert(!memcmp(b + 30, name, 14));
	/* ZIP64 extra: size, 0, then the header's own offset */
	cr_assert_eq(le16(b + 44), 1);
	cr_assert_eq(le16(b + 46), 24);
	cr_assert_eq(le64(b + 48), size);
	cr_assert_eq(le64(b + 56), 0);
	cr_assert_eq(le64(b + 64), c);
	/* start = c + 30 + 14 + 28 + 4 = c + 76: pad 52 */
	cr_assert(!memcmp(b + 72, "FB", 2));
	cr_assert_eq(le16(b + 74), 52);
	cr_assert_eq(el, 28 + 4 + 52);
	for (size_t i = 76; i < len; i++)
		cr_assert_eq(b[i], 'Z');
}

Test(ptz_write, zip64_extra_only_for_what_is_large)
{
	unsigned char b[256];
	size_t len;

	/* small offset, size exactly 0xffffffff: size and 0 only */
	len = ptz_local_encode(b, "a/b", 3, 0, PTZ_MAX32, 64);
	cr_assert_eq(le16(b + 33), 1);
	cr_assert_eq(le16(b + 35), 16);
	cr_assert_eq(le64(b + 37), PTZ_MAX32);
	cr_assert_eq(le64(b + 45), 0);
	cr_assert(!memcmp(b + 53, "FB", 2));
	cr_assert_eq(len % 64, 0);
	/* small size at offset 0xffffffff: the offset only */
	len = ptz_local_encode(b, "a/b", 3, PTZ_MAX32, 5, 64);
	cr_assert_eq(le16(b + 35), 8);
	cr_assert_eq(le64(b + 37), PTZ_MAX32);
	cr_assert(!memcmp(b + 45, "FB", 2));
	cr_assert_eq((PTZ_MAX32 + len) % 64, 0);
	/* just below both limits: no ZIP64 extra */
	len = ptz_local_encode(b, "a/b", 3, PTZ_MAX32 - 1, PTZ_MAX32 - 1, 64);
	cr_assert(!memcmp(b + 33, "FB", 2));
	cr_assert_eq((PTZ_MAX32 - 1 + len) % 64, 0);
	/* alignment 4096: a pad of up to 4095 'Z's */
	len = ptz_local_encode(b, "a/b", 3, 0, 0, 64);
	cr_assert_eq(len, 64);
	cr_assert_eq(le16(b + 6), 0x0800);
	cr_assert_eq(ptz_local_len(3, 4096, 1, 4096), 4096);
	cr_assert_eq(ptz_local_len(3, 4096 - 37, 1, 4096), 37);
	cr_assert_eq(ptz_local_len(3, 4096 - 36, 1, 4096), 37 + 4095);
}

Test(ptz_write, zip64_descriptor_and_central_entry)
{
	struct ptz_wentry big = { .name_len = 3, .crc32 = 0xdeadbeef,
				  .size = 0x123456789ull,
				  .header_off = 0x100000000ull };
	struct ptz_wentry far = { .name_len = 3, .crc32 = 7, .size = 10,
				  .header_off = 0x100000000ull };
	struct ptz_wentry small = { .name_len = 3, .crc32 = 7, .size = 10,
				    .header_off = 0x1000 };
	unsigned char b[256];

	cr_assert_eq(ptz_desc_encode(b, &big), 24);
	cr_assert_eq(le32(b), PTZ_SIG_DESC);
	cr_assert_eq(le32(b + 4), 0xdeadbeef);
	cr_assert_eq(le64(b + 8), big.size);
	cr_assert_eq(le64(b + 16), big.size);
	cr_assert_eq(ptz_desc_encode(b, &far), 24);
	cr_assert_eq(le64(b + 8), 10);
	cr_assert_eq(ptz_desc_encode(b, &small), 16);
	cr_assert_eq(le32(b + 8), 10);
	cr_assert_eq(le32(b + 12), 10);

	cr_assert_eq(ptz_cdir_encode(b, &big, "a/b"), 46 + 3 + 28);
	cr_assert_eq(ptz_cdir_len(&big), 46 + 3 + 28);
	cr_assert_eq(le32(b), PTZ_SIG_CDIR);
	cr_assert_eq(le32(b + 4), 0);
	cr_assert_eq(le16(b + 8), 0x0808);
	cr_assert_eq(le32(b + 16), 0xdeadbeef);
	cr_assert_eq(le32(b + 20), PTZ_MAX32);
	cr_assert_eq(le32(b + 24), PTZ_MAX32);
	cr_assert_eq(le16(b + 30), 28);
	cr_assert_eq(le32(b + 42), PTZ_MAX32);
	cr_assert(!memcmp(b + 46, "a/b", 3));
	cr_assert_eq(le16(b + 49), 1);
	cr_assert_eq(le16(b + 51), 24);
	cr_assert_eq(le64(b + 53), big.size);
	cr_assert_eq(le64(b + 61), big.size);
	cr_assert_eq(le64(b + 69), big.header_off);

	cr_assert_eq(ptz_cdir_encode(b, &far, "a/b"), 46 + 3 + 12);
	cr_assert_eq(le32(b + 20), 10);
	cr_assert_eq(le32(b + 42), PTZ_MAX32);
	cr_assert_eq(le16(b + 51), 8);
	cr_assert_eq(le64(b + 53), far.header_off);
	cr_assert_eq(ptz_cdir_encode(b, &small, "a/b"), 46 + 3);
	cr_assert_eq(le16(b + 30), 0);
	cr_assert_eq(le32(b + 42), 0x1000);
}

Test(ptz_write, end_records_clamp_classic_fields)
{
	unsigned char b[PTZ_END_LEN];

	cr_assert_eq(ptz_end_encode(b, 70000, 0x100000000ull, 0x2000),
		     PTZ_END_LEN);
	cr_assert_eq(le32(b), PTZ_SIG_EOCD64);
	cr_assert_eq(le64(b + 4), 44);
	cr_assert_eq(le16(b + 12), 0x031e);
	cr_assert_eq(le16(b + 14), 0x002d);
	cr_assert_eq(le64(b + 24), 70000);
	cr_assert_eq(le64(b + 32), 70000);
	cr_assert_eq(le64(b + 40), 0x2000);
	cr_assert_eq(le64(b + 48), 0x100000000ull);
	cr_assert_eq(le32(b + 56), PTZ_SIG_LOC64);
	cr_assert_eq(le64(b + 64), 0x100002000ull);
	cr_assert_eq(le32(b + 72), 1);
	cr_assert_eq(le32(b + 76), PTZ_SIG_EOCD);
	cr_assert_eq(le16(b + 84), 0xffff);
	cr_assert_eq(le16(b + 86), 0xffff);
	cr_assert_eq(le32(b + 88), 0x2000);
	cr_assert_eq(le32(b + 92), PTZ_MAX32);
	cr_assert_eq(le16(b + 96), 0);
}

/* ---- failures ---- */

Test(ptz_write, rejects_bad_alignment_and_names)
{
	struct ptz_writer w;
	struct ptz_source s = { .buf = "x", .len = 1 };
	struct diag d;
	char *name = malloc(70000);

	diag_init(&d, "out.zip");
	cr_assert_eq(ptz_writer_init(&w, -1, 100, &d), -EINVAL);
	cr_assert(diag_failed(&d));
	ptz_writer_release(&w);
	cr_assert_eq(ptz_writer_init(&w, -1, 65536, &d), -EINVAL);
	ptz_writer_release(&w);
	diag_init(&d, "out.zip");
	cr_assert_eq(ptz_writer_init(&w, -1, 0, &d), 0);
	cr_assert_eq(w.align, 64);
	cr_assert_eq(ptz_writer_add(&w, "", &s, &d), -ENAMETOOLONG);
	memset(name, 'a', 69999);
	name[69999] = '\0';
	cr_assert_eq(ptz_writer_add(&w, name, &s, &d), -ENAMETOOLONG);
	ptz_writer_release(&w);
	free(name);
	assert_no_leaks();
}

Test(ptz_write, read_only_fd_fails_with_ebadf)
{
	char path[] = "/tmp/test_ptz_write.XXXXXX";
	int fd = mkstemp(path), ro, src = tmp_fd(), rc;
	unsigned char *big = pattern(BIG_LEN, 4);
	struct ptz_source s = { .buf = "3\n", .len = 2 };
	struct ptz_writer w;
	struct diag d;

	cr_assert(fd >= 0);
	ro = open(path, O_RDONLY);
	unlink(path);
	cr_assert(ro >= 0);
	cr_assert_eq(pwrite(src, big, BIG_LEN, 0), (ssize_t)BIG_LEN);

	/* small records wait in the buffer: the end records fail */
	diag_init(&d, "out.zip");
	cr_assert_eq(ptz_writer_init(&w, ro, 0, &d), 0);
	cr_assert_eq(ptz_writer_add(&w, "a/version", &s, &d), 0);
	cr_assert_eq(ptz_writer_finish(&w, &d), -EBADF);
	cr_assert(diag_failed(&d));
	cr_assert(strstr(dline(&d), "cannot write"), "%s", line);
	cr_assert_eq(ptz_writer_finish(&w, &d), -EBADF);
	ptz_writer_release(&w);

	/* a range the kernel copies fails at once, and so does every later
	   call; one read and buffered (no CRC known) fails by the finish */
	for (int crc = 0; crc < 2; crc++) {
		s = (struct ptz_source){ .fd = src, .len = BIG_LEN,
					 .has_crc = crc };
		diag_init(&d, "out.zip");
		cr_assert_eq(ptz_writer_init(&w, ro, 0, &d), 0);
		rc = ptz_writer_add(&w, "a/data/0", &s, &d);
		if (!crc && !rc)
			rc = ptz_writer_finish(&w, &d);
		cr_assert_eq(rc, -EBADF, "%s", dline(&d));
		cr_assert(diag_failed(&d));
		cr_assert_eq(ptz_writer_add(&w, "a/data/1", &s, &d), -EBADF);
		ptz_writer_release(&w);
	}
	close(ro);
	close(fd);
	close(src);
	free(big);
	assert_no_leaks();
}

Test(ptz_write, full_disk_fails_with_enospc)
{
	char dir[] = "/tmp/test_ptz_write.XXXXXX";
	char cmd[256], path[300];
	unsigned char *big = pattern(BIG_LEN, 5);
	struct ptz_source s = { .buf = big, .len = BIG_LEN };
	struct ptz_writer w;
	struct diag d;
	int fd, rc;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "mount -t tmpfs -o size=64k tmpfs %s 2>/dev/null", dir);
	if (geteuid() != 0 || system(cmd) != 0) {
		rmdir(dir);
		free(big);
		cr_skip_test("cannot mount a small tmpfs (not root?)");
	}
	snprintf(path, sizeof(path), "%s/out.zip", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	cr_assert(fd >= 0);
	diag_init(&d, path);
	cr_assert_eq(ptz_writer_init(&w, fd, 0, &d), 0);
	/* written by a second thread: the error comes by the finish */
	rc = ptz_writer_add(&w, "a/data/0", &s, &d);
	if (!rc)
		rc = ptz_writer_finish(&w, &d);
	ptz_writer_release(&w);
	close(fd);
	snprintf(cmd, sizeof(cmd), "umount %s", dir);
	cr_expect_eq(system(cmd), 0);
	cr_expect_eq(rmdir(dir), 0);
	free(big);
	dline(&d);
	cr_assert_eq(rc, -ENOSPC, "%s", line);
	cr_assert(strstr(line, "cannot write"), "%s", line);
	assert_no_leaks();
}
