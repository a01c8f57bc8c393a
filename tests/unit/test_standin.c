/*
 * test_standin.c - what a remote object rests on without a server: a
 * stand-in descriptor (util/io.h) is read only through io_pread*(), a dup
 * of it too, and the kernel refuses it (a bypass fails, never reads
 * zeros); sizes as written on a command line (util/units.h); URLs shown
 * without their password, and shown forms that still lead to the object
 * (source.h); member names percent-encoded into URLs (src_remote.h).
 */
#define _GNU_SOURCE
#include "source/source.h"
#include "source/src_remote.h"
#include "util/io.h"
#include "util/units.h"
#include "diag/diag.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A backing whose byte at @off is (off * 7) & 0xff: any slip shows. */
static int pattern(void *obj, void *buf, size_t len, uint64_t off,
		   struct diag *d)
{
	unsigned *calls = obj;

	(void)d;
	++*calls;
	if (off + len > 100000)
		return -ENODATA;
	for (size_t i = 0; i < len; i++)
		((unsigned char *)buf)[i] = (unsigned char)((off + i) * 7);
	return 0;
}

static int stand_in(unsigned *calls)
{
	int m = memfd_create("t", MFD_CLOEXEC), fd;
	char p[64];

	cr_assert_geq(m, 0);
	cr_assert_eq(ftruncate(m, 100000), 0);
	snprintf(p, sizeof(p), "/proc/self/fd/%d", m);
	fd = open(p, O_PATH | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	close(m);
	cr_assert_eq(io_back(fd, &(struct io_backing){ pattern, calls,
						    100000 }), 0);
	return fd;
}

Test(standin, reads_go_to_the_backing_and_only_there)
{
	unsigned calls = 0;
	int fd = stand_in(&calls), dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	unsigned char b[300];
	struct diag d;
	struct stat st;

	cr_assert(io_backed(fd) && io_backed(dup));
	cr_assert_eq(io_pread_full(dup, b, sizeof(b), 99000), 0);
	for (size_t i = 0; i < sizeof(b); i++)
		cr_assert_eq(b[i], (unsigned char)((99000 + i) * 7), "%zu", i);
	cr_assert_eq(io_pread(fd, b, sizeof(b), 99900), 100);	/* to its end */
	cr_assert_eq(b[99], (unsigned char)(99999 * 7));
	cr_assert_eq(io_pread(fd, b, sizeof(b), 100000), 0);
	diag_init(&d, "x");
	cr_assert_eq(io_pread_diag(fd, b, sizeof(b), 99900, "the data", &d),
		     -EILSEQ);	/* the object ends: corrupt, at its offset */
	cr_assert_eq(calls, 3);
	/* the kernel refuses it: no bypass reads the memfd's zeros */
	cr_assert_eq(pread(fd, b, 1, 0), -1);
	cr_assert_eq(errno, EBADF);
	cr_assert_eq(mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0),
		     MAP_FAILED);
	cr_assert(!fstat(fd, &st) && S_ISREG(st.st_mode) &&
		  st.st_size == 100000);
	close(dup);
	close(fd);
}

Test(standin, a_local_file_is_not_one)
{
	char path[] = "/tmp/standinXXXXXX";
	int fd = mkstemp(path);
	unsigned char b[4] = { 0 };

	cr_assert_geq(fd, 0);
	unlink(path);
	cr_assert_eq(write(fd, "abcd", 4), 4);
	cr_assert(!io_backed(fd));
	cr_assert_eq(io_pread_full(fd, b, 4, 0), 0);
	cr_assert_eq(memcmp(b, "abcd", 4), 0);
	close(fd);
}

Test(standin, sizes_as_written)
{
	uint64_t v;

	cr_assert(util_parse_size("65536", &v) && v == 65536);
	cr_assert(util_parse_size("256M", &v) && v == 256u << 20);
	cr_assert(util_parse_size("1GiB", &v) && v == 1u << 30);
	cr_assert(util_parse_size("4kB", &v) && v == 4096);
	cr_assert(!util_parse_size("-1", &v));
	cr_assert(!util_parse_size(" 1", &v));
	cr_assert(!util_parse_size("1T", &v));
	cr_assert(!util_parse_size("1Mx", &v));
	cr_assert(!util_parse_size("17179869184G", &v));	/* overflow */
	cr_assert(!util_parse_size("", &v));
}

Test(standin, urls_are_shown_without_their_password)
{
	char out[256], a0[] = "ptls", a1[] = "https://al:s3cret@h.example/m.pt",
	     a2[] = "local.pt";
	char *argv[] = { a0, a1, a2, NULL };
	char *real;

	cr_assert(src_is_url("s3://b/k") && src_is_url("http://h/x") &&
		  !src_is_url("model.pt") && !src_is_url("/s3://x"));
	src_hide_urls(3, argv);
	cr_assert_null(strstr(argv[1], "s3cret"));
	cr_assert_null(strstr(a1, "s3cret"), "overwritten in place: %s", a1);
	cr_assert_str_eq(argv[2], "local.pt");
	cr_assert_str_eq(src_shown("local.pt", out, sizeof(out)), "local.pt");
	/* what is shown still reaches the object: the join keeps the
	   authority, and the shown form names no secret */
	real = srcr_join(argv[1], "x y.bin", 7);
	cr_assert_not_null(real);
	cr_assert_null(strstr(real, "s3cret"));
	cr_assert_not_null(strstr(real, "/x%20y.bin"), "%s", real);
	free(real);
}

Test(standin, member_names_are_percent_encoded)
{
	char *u = srcr_join("s3://b/run", "sub/a&b#c?.distcp", 17);

	cr_assert_str_eq(u, "s3://b/run/sub/a%26b%23c%3F.distcp");
	free(u);
}
