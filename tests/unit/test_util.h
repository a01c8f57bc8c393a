/*
 * test_util.h - helpers shared by the Criterion tests: leak checks that
 * actually fail a test (LeakSanitizer alone only prints; see
 * ../shared/style.md), and building byte buffers for malformed inputs.
 */
#ifndef PT_TESTS_TEST_UTIL_H
#define PT_TESTS_TEST_UTIL_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(PT_SANITIZE)
#include <sanitizer/lsan_interface.h>
#define assert_no_leaks() \
	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "memory leaked")
#else
#define assert_no_leaks() ((void)0)
#endif

/* A growable byte buffer for generated inputs (add() appends). */
struct bytes {
	unsigned char *p;
	size_t n, cap;
};

static inline void add(struct bytes *b, const void *s, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
		cr_assert_not_null(b->p);
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

/* An anonymous scratch file (made in /tmp, unlinked at once). */
static inline int tmp_fd(void)
{
	char path[] = "/tmp/pt_test.XXXXXX";
	int fd = mkstemp(path);

	cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	return fd;
}

/* The name of the file write_tmp() made last ("" before the first). */
static inline char *tmp_last(void)
{
	static char path[64];	/* one a test file */

	return path;
}

/*
 * @p[0..@n) in a file of its own under /tmp, for code that opens a path:
 * its name (tmp_last()).  The file the call before made is removed.
 */
static inline const char *write_tmp(const void *p, size_t n)
{
	char *path = tmp_last();
	int fd;

	if (path[0])
		unlink(path);
	strcpy(path, "/tmp/ptfs-test-XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, p, n), (ssize_t)n);
	close(fd);
	return path;
}

/* The whole of @fd in a malloc'd buffer (one byte more, for a NUL). */
static inline unsigned char *slurp(int fd, size_t *len)
{
	struct stat st;
	unsigned char *p;

	cr_assert_eq(fstat(fd, &st), 0);
	p = malloc((size_t)st.st_size + 1);
	cr_assert_not_null(p);
	cr_assert_eq(pread(fd, p, (size_t)st.st_size, 0), st.st_size);
	*len = (size_t)st.st_size;
	return p;
}

static inline void put_le16(unsigned char *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static inline void put_le32(unsigned char *p, uint32_t v)
{
	put_le16(p, v);
	put_le16(p + 2, v >> 16);
}

static inline void put_le64(unsigned char *p, uint64_t v)
{
	put_le32(p, v);
	put_le32(p + 4, v >> 32);
}

#endif
