/*
 * test_ptz_crc.c - a record's CRC-32 and ptverify's zip checks (core/zip/
 * ptz_crc.c, ptz_verify.c) on archives built by zip_builder.c: the CRC-32
 * recomputed from a stored record across the 4 MiB read chunk and from a
 * deflated one; after a record's bytes are patched in a copy, its new
 * CRC-32 written into the local header (a 0 there beside a descriptor
 * stays 0), the data descriptor and the central directory, the other
 * records untouched, and a broken central directory refused; descriptors
 * and local headers that disagree with the central directory (name,
 * method, CRC-32, sizes), bytes between records and after the end,
 * reported once each by name.
 */
#include "test_util.h"

#include <libdeflate.h>
#include <stdio.h>

#include "diag/diag.h"
#include "util/le.h"
#include "zip/ptz.h"
#include "zip/ptz_verify.h"
#include "zip_builder.h"

#define BIG	((4u << 20) + 4099)	/* past one 4 MiB read chunk */

static unsigned char *big;
static const char text[] = "a deflated record, a deflated record, again";

struct arch {
	struct buf b;
	struct zinfo info;
	int fd;
	struct ptz_reader z;
	struct diag d;
};

/* Record 1's data, made once (ents[] below takes its address). */
static unsigned char *big_data(void)
{
	if (!big) {
		big = malloc(BIG);
		cr_assert_not_null(big);
		for (size_t i = 0; i < BIG; i++)
			big[i] = (unsigned char)(i * 2654435761u >> 11);
	}
	return big;
}

static void arch_open(struct arch *a, bool torch)
{
	static const char pkl[] = "\x80\x02}q\x00.";
	const struct zent ents[] = {
		{ "archive/data.pkl", pkl, sizeof(pkl) - 1, false },
		{ "archive/data/0", big_data(), BIG, false },
		{ "archive/code.txt", text, sizeof(text) - 1, true },
		{ "archive/version", "3\n", 2, false },
	};
	struct zopt o = { .torch = torch };

	memset(a, 0, sizeof(*a));
	zb_build(&a->b, ents, 4, &o, &a->info);
	a->fd = tmp_fd();
	cr_assert_eq(write(a->fd, a->b.p, a->b.len), (ssize_t)a->b.len);
	diag_init(&a->d, "t.zip");
	cr_assert_eq(ptz_reader_open(&a->z, a->fd, "t.zip", &a->d), 0, "%s",
		     a->d.msg);
}

static void arch_close(struct arch *a)
{
	ptz_reader_release(&a->z);
	close(a->fd);
	free(a->b.p);
}

static void count(void *arg, uint64_t n)
{
	*(uint64_t *)arg += n;
}

Test(ptz_crc, stored_and_deflated_records_match_the_directory)
{
	struct arch a;

	arch_open(&a, true);
	for (uint32_t i = 0; i < a.z.nentries; i++) {
		struct ptz_entry *e = &a.z.entries[i];
		uint64_t read = 0;
		uint32_t crc = ~0u;

		cr_assert_eq(ptz_entry_crc32(&a.z, e, &crc, count, &read,
					     &a.d), 0, "%s", a.d.msg);
		cr_assert_eq(crc, e->crc32, "%s", e->name);
		cr_assert_eq(read, e->csize, "%s: %llu bytes read", e->name,
			     (unsigned long long)read);
	}
	arch_close(&a);
	assert_no_leaks();
}

/* Copy @a's archive, patch byte @at of record 1's data in the copy, write
 * the new CRC-32 into it, and reopen it. */
static uint32_t patched_copy(struct arch *a, size_t at, int *out,
			     struct ptz_reader *nz)
{
	struct ptz_entry *e = &a->z.entries[1];
	unsigned char v = (unsigned char)~big[at];
	uint32_t crc;
	int fd = tmp_fd();

	cr_assert_eq(write(fd, a->b.p, a->b.len), (ssize_t)a->b.len);
	cr_assert_eq(ptz_entry_locate(&a->z, e, &a->d), 0);
	cr_assert_eq(pwrite(fd, &v, 1, (off_t)(e->data_off + at)), 1);
	crc = libdeflate_crc32(libdeflate_crc32(libdeflate_crc32(0, big, at),
						&v, 1), big + at + 1,
			       BIG - at - 1);
	cr_assert_neq(crc, e->crc32);
	cr_assert_eq(ptz_entry_put_crc(&a->z, e, fd, crc, "copy.zip", &a->d),
		     0, "%s", a->d.msg);
	memset(nz, 0, sizeof(*nz));
	cr_assert_eq(ptz_reader_open(nz, fd, "copy.zip", &a->d), 0, "%s",
		     a->d.msg);
	*out = fd;
	return crc;
}

Test(ptz_crc, patched_record_gets_its_crc_in_directory_and_descriptor)
{
	struct ptz_reader nz;
	unsigned char h[8];
	struct arch a;
	uint32_t crc, got;
	int fd;

	arch_open(&a, true);
	crc = patched_copy(&a, BIG - 1, &fd, &nz);
	cr_assert_eq(nz.entries[1].crc32, crc);
	cr_assert_eq(ptz_entry_crc32(&nz, &nz.entries[1], &got, NULL, NULL,
				     &a.d), 0);
	cr_assert_eq(got, crc);
	/* torch's layout: 0 in the local header, "PK\7\8" then the CRC */
	cr_assert_eq(pread(fd, h, 4, (off_t)a.info.hdr[1] + 14), 4);
	cr_assert_eq(le32(h), 0);
	cr_assert_eq(pread(fd, h, 8, (off_t)(a.info.data[1] + BIG)), 8);
	cr_assert_eq(le32(h), 0x08074b50u);
	cr_assert_eq(le32(h + 4), crc);
	for (uint32_t i = 0; i < nz.nentries; i++)
		if (i != 1)
			cr_assert_eq(nz.entries[i].crc32, a.z.entries[i].crc32);
	ptz_reader_release(&nz);
	close(fd);
	arch_close(&a);
	assert_no_leaks();
}

Test(ptz_crc, patched_record_gets_its_crc_in_the_local_header)
{
	struct ptz_reader nz;
	unsigned char h[4];
	struct arch a;
	uint32_t crc;
	int fd;

	arch_open(&a, false);
	crc = patched_copy(&a, 0, &fd, &nz);
	cr_assert_eq(nz.entries[1].crc32, crc);
	cr_assert_eq(pread(fd, h, 4, (off_t)a.info.hdr[1] + 14), 4);
	cr_assert_eq(le32(h), crc);
	ptz_reader_release(&nz);
	close(fd);
	arch_close(&a);
	assert_no_leaks();
}

Test(ptz_crc, refuses_a_broken_central_directory)
{
	struct ptz_entry *e;
	struct arch a;
	int fd = tmp_fd();

	arch_open(&a, true);
	e = &a.z.entries[1];
	a.b.p[a.info.cd[0]] = 'X';	/* the entry before record 1's */
	cr_assert_eq(write(fd, a.b.p, a.b.len), (ssize_t)a.b.len);
	cr_assert_eq(ptz_entry_locate(&a.z, e, &a.d), 0);
	cr_assert_eq(ptz_entry_put_crc(&a.z, e, fd, 1, "copy.zip", &a.d),
		     -EILSEQ);
	cr_assert_str_eq(a.d.msg, "t.zip: not a central directory entry");
	cr_assert_eq(a.d.off, a.info.cd[0]);
	close(fd);
	arch_close(&a);
	assert_no_leaks();
}

/* ---- ptz_verify ---- */

struct found {
	int n;
	char check[8][16];
	uint64_t off[8];
	char msg[8][200];
};

static void found(void *arg, const char *check, uint64_t off, const char *msg)
{
	struct found *f = arg;

	cr_assert_lt(f->n, 8, "more problems than expected: %s", msg);
	snprintf(f->check[f->n], sizeof(f->check[0]), "%s", check);
	snprintf(f->msg[f->n], sizeof(f->msg[0]), "%s", msg);
	f->off[f->n++] = off;
}

static void verify(struct arch *a, struct found *f)
{
	struct ptz_verify v = {
		.z = &a->z, .problem = found, .arg = f,
	};

	memset(f, 0, sizeof(*f));
	ptz_verify_records(&v);
	ptz_verify_archive(&v);
}

Test(ptz_verify, a_clean_archive_has_no_problems)
{
	struct found f;
	struct arch a;

	arch_open(&a, true);
	verify(&a, &f);
	cr_assert_eq(f.n, 0, "%s: %s", f.check[0], f.msg[0]);
	arch_close(&a);
	assert_no_leaks();
}

Test(ptz_verify, names_a_descriptor_and_a_local_name_that_disagree)
{
	size_t at;
	struct found f;
	struct arch a;

	arch_open(&a, true);
	at = a.info.data[1] + BIG + 4;	/* record 1's descriptor CRC */
	a.b.p[at] ^= 0xff;
	a.b.p[a.info.hdr[3] + 30 + 8] = 'V';	/* "archive/version" */
	cr_assert_eq(pwrite(a.fd, a.b.p, a.b.len, 0), (ssize_t)a.b.len);
	verify(&a, &f);
	cr_assert_eq(f.n, 2, "%d problems: %s", f.n, f.msg[0]);
	cr_assert_str_eq(f.check[0], "descriptor");
	cr_assert_eq(f.off[0], at - 4);
	cr_assert(strstr(f.msg[0], "data descriptor of 'archive/data/0' says "
			 "CRC-32 "), "%s", f.msg[0]);
	cr_assert_str_eq(f.check[1], "record");
	cr_assert_str_eq(f.msg[1], "local header names 'archive/Version', "
			 "the central directory 'archive/version'");
	cr_assert_eq(f.off[1], a.info.hdr[3]);
	arch_close(&a);
	assert_no_leaks();
}

/*
 * torch reads a record by its central directory entry, a streaming reader
 * by its local header and descriptor: each value where they disagree is
 * named (the local name's check is above).
 */
Test(ptz_verify, names_local_headers_and_descriptors_torch_does_not_read)
{
	size_t at;
	struct found f;
	struct arch a;

	/* the plain layout: CRC-32 and sizes in the local headers */
	arch_open(&a, false);
	a.b.p[a.info.hdr[0] + 8] = 8;			/* method */
	put_le32(a.b.p + a.info.hdr[2] + 22, 7);	/* size */
	put_le32(a.b.p + a.info.hdr[3] + 14, 0xc0ffee);	/* CRC-32 */
	cr_assert_eq(pwrite(a.fd, a.b.p, a.b.len, 0), (ssize_t)a.b.len);
	verify(&a, &f);
	cr_assert_eq(f.n, 4, "%d problems: %s", f.n, f.msg[0]);
	cr_assert_str_eq(f.msg[0], "local header of 'archive/data.pkl' says "
			 "compression method 8, the central directory 0 "
			 "(which torch reads)");
	cr_assert_eq(f.off[0], a.info.hdr[0]);
	cr_assert_str_eq(f.check[1], "alignment");	/* the plain layout's */
	cr_assert(strstr(f.msg[2], "local header of 'archive/code.txt' says "
			 "CRC-32 ") && strstr(f.msg[2], " and 7 bytes"), "%s",
		  f.msg[2]);
	cr_assert(strstr(f.msg[3], "says CRC-32 00c0ffee and 2 bytes, the "
			 "central directory (which torch reads) "), "%s",
		  f.msg[3]);
	arch_close(&a);
	/* torch's layout: sizes in the descriptor, here one that lies */
	arch_open(&a, true);
	at = a.info.data[2] + a.info.csize[2];
	put_le32(a.b.p + at + 12, 9);
	cr_assert_eq(pwrite(a.fd, a.b.p, a.b.len, 0), (ssize_t)a.b.len);
	verify(&a, &f);
	cr_assert_eq(f.n, 1, "%d problems: %s", f.n, f.msg[0]);
	cr_assert_str_eq(f.check[0], "descriptor");
	cr_assert(strstr(f.msg[0], "data descriptor of 'archive/code.txt' "
			 "says 9 bytes ("), "%s", f.msg[0]);
	cr_assert_eq(f.off[0], at);
	arch_close(&a);
	assert_no_leaks();
}

Test(ptz_verify, names_bytes_that_belong_to_nothing)
{
	struct found f;
	struct arch a;
	int fd = tmp_fd();

	arch_open(&a, true);
	cr_assert_eq(write(fd, a.b.p, a.b.len), (ssize_t)a.b.len);
	cr_assert_eq(write(fd, "junk", 4), 4);
	ptz_reader_release(&a.z);
	close(a.fd);
	a.fd = fd;
	cr_assert_eq(ptz_reader_open(&a.z, fd, "t.zip", &a.d), 0, "%s",
		     a.d.msg);
	verify(&a, &f);
	cr_assert_eq(f.n, 1, "%d problems: %s", f.n, f.msg[0]);
	cr_assert_str_eq(f.check[0], "trailing");
	cr_assert_str_eq(f.msg[0], "4 bytes after the end of the zip archive");
	cr_assert_eq(f.off[0], a.b.len);
	arch_close(&a);
	assert_no_leaks();
}
