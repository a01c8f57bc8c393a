/*
 * test_seqout.c - the sequential writer (core/util/seqout.c) against a
 * plain model of the file: random runs of appends (1 byte to 6 MiB, so
 * buffers fill, queue and wrap), seeks forward and back, and kernel
 * copies from another file, on a file system that takes O_DIRECT (the
 * test directory) and on one that does not (/dev/shm, tmpfs), read back
 * byte for byte.  Also: a direct descriptor is used where statx says
 * direct I/O works, a copy is read through the buffers where it goes
 * direct and through the kernel where it cannot, and a write error in the
 * writer thread is what seqout_close() returns.
 */
#define _GNU_SOURCE
#include "test_util.h"

#include "util/io.h"
#include "util/seqout.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>

#define FILE_MAX	(24u << 20)
#define SRC_LEN		(8u << 20)

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int scratch(const char *dir, char *path, size_t len)
{
	int fd;

	snprintf(path, len, "%s/pt_seqout.XXXXXX", dir);
	fd = mkstemp(path);
	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	return fd;
}

/* Does this process hold an O_DIRECT descriptor of @path's file? */
static bool direct_fd_of(const char *path)
{
	struct stat want, st;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	bool found = false;

	cr_assert(d && !stat(path, &want));
	while (!found && (e = readdir(d))) {
		char fdinfo[300], line[128];
		unsigned flags = 0;
		FILE *f;

		if (e->d_name[0] == '.' ||
		    fstatat(dirfd(d), e->d_name, &st, 0) ||
		    st.st_ino != want.st_ino || st.st_dev != want.st_dev)
			continue;
		snprintf(fdinfo, sizeof(fdinfo), "/proc/self/fdinfo/%s",
			 e->d_name);
		if (!(f = fopen(fdinfo, "r")))
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "flags: %o", &flags) == 1)
				break;
		fclose(f);
		found = flags & O_DIRECT;
	}
	closedir(d);
	return found;
}

static bool dio_capable(int fd)
{
	struct statx sx;

	return !statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) &&
	       (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align;
}

/* 400 random operations on a file in @dir, checked against a model. */
static void random_run(const char *dir)
{
	char path[256], spath[256];
	int fd = scratch(dir, path, sizeof(path));
	int src = scratch(dir, spath, sizeof(spath));
	unsigned char *model = calloc(1, FILE_MAX), *data = malloc(SRC_LEN);
	unsigned char *back = malloc(FILE_MAX);
	uint64_t pos = next() % 10000, end = 0;
	struct seqout *s;

	cr_assert(model && data && back);
	for (size_t i = 0; i < SRC_LEN; i++)
		data[i] = (unsigned char)next();
	cr_assert_eq(pwrite(src, data, SRC_LEN, 0), (ssize_t)SRC_LEN);
	cr_assert_eq(seqout_open(&s, fd, pos), 0);
	if (dio_capable(fd))
		cr_assert(direct_fd_of(path), "%s: no O_DIRECT descriptor",
			  dir);
	for (int op = 0; op < 400; op++) {
		unsigned kind = (unsigned)(next() % 10);
		uint64_t n = next() % 4 ? next() % 9000 : next() % (6u << 20);

		if (kind == 0) {		/* seek anywhere written or near */
			pos = next() % (end + 8192);
			cr_assert_eq(seqout_seek(s, pos), 0);
		} else if (kind == 2) {		/* where it is: a no-op */
			cr_assert_eq(seqout_seek(s, pos), 0);
		} else if (kind == 1) {		/* copy from src */
			uint64_t at = next() % SRC_LEN;

			n = n < SRC_LEN - at ? n : SRC_LEN - at;
			if (pos + n > FILE_MAX)
				continue;
			cr_assert_eq(seqout_copy(s, src, at, n), 0);
			memcpy(model + pos, data + at, n);
			pos += n;
		} else {			/* append */
			if (pos + n > FILE_MAX)
				continue;
			for (uint64_t k = 0; k < n; k++)
				model[pos + k] = (unsigned char)(op + k * 7);
			cr_assert_eq(seqout_put(s, model + pos, n), 0);
			pos += n;
		}
		cr_assert_eq(seqout_pos(s), pos);
		end = pos > end ? pos : end;
	}
	cr_assert_eq(seqout_close(s), 0);
	cr_assert_eq(pread(fd, back, FILE_MAX, 0), (ssize_t)end);
	for (uint64_t i = 0; i < end; i++)
		cr_assert_eq(back[i], model[i], "%s: byte %llu differs", dir,
			     (unsigned long long)i);
	close(fd);
	close(src);
	unlink(path);
	unlink(spath);
	free(model);
	free(data);
	free(back);
	assert_no_leaks();
}

Test(seqout, random_runs_direct)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	random_run(dir);
}

Test(seqout, random_runs_through_the_page_cache)
{
	struct stat st;

	if (stat("/dev/shm", &st))
		cr_skip_test("no /dev/shm");
	random_run("/dev/shm");
}

/* The thread's write fails (the file may grow to 1 MiB only): the error
 * is what put or close returns, and nothing is left allocated. */
Test(seqout, write_error_is_returned)
{
	struct rlimit lim = { 1u << 20, 1u << 20 };
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	unsigned char *buf = calloc(1, 1u << 20);
	char path[256];
	int fd = scratch(dir, path, sizeof(path)), rc = 0, rc2;
	struct seqout *s;

	signal(SIGXFSZ, SIG_IGN);
	cr_assert(buf && !setrlimit(RLIMIT_FSIZE, &lim));
	cr_assert_eq(seqout_open(&s, fd, 0), 0);
	for (int i = 0; i < 16 && !rc; i++)
		rc = seqout_put(s, buf, 1u << 20);
	rc2 = seqout_close(s);
	rc = rc ? rc : rc2;
	cr_assert_eq(rc, -EFBIG, "got %d", rc);
	close(fd);
	unlink(path);
	free(buf);
	assert_no_leaks();
}

/* A descriptor open for reading only: nothing is written through another
 * one (the direct descriptor is only ever a second way of writing). */
Test(seqout, read_only_fd_writes_nothing)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	unsigned char *buf = calloc(1, 8u << 20);
	char path[256];
	int fd = scratch(dir, path, sizeof(path)), ro = open(path, O_RDONLY);
	struct seqout *s;
	struct stat st;
	int rc, rc2;

	cr_assert(buf && ro >= 0);
	cr_assert_eq(seqout_open(&s, ro, 0), 0);
	cr_assert(!direct_fd_of(path), "a writable descriptor was opened");
	rc = seqout_put(s, buf, 8u << 20);
	rc2 = seqout_close(s);
	cr_assert_eq(rc ? rc : rc2, -EBADF);
	cr_assert(!fstat(fd, &st) && st.st_size == 0, "%lld bytes written",
		  (long long)st.st_size);
	close(ro);
	close(fd);
	unlink(path);
	free(buf);
	assert_no_leaks();
}

/*
 * Where the output is written direct and its file system cannot clone
 * the blocks (ext4), seqout_copy() reads them into its buffers: a kernel
 * copy would go through the page cache and the fsync after.  Without a
 * direct descriptor (tmpfs) the kernel copies.  A source that ends early
 * is -ENODATA either way.
 */
static void copy_choice(const char *dir, bool direct)
{
	char path[256], spath[256];
	int fd = scratch(dir, path, sizeof(path));
	int src = scratch(dir, spath, sizeof(spath));
	unsigned char data[100] = { 1 };
	struct seqout *s;

	cr_assert_eq(pwrite(src, data, sizeof(data), 0), (ssize_t)sizeof(data));
	cr_assert_eq(seqout_open(&s, fd, 0), 0);
	cr_assert_eq(seqout_kernel_copies(s, src, 0), !direct, "%s", dir);
	cr_assert_eq(seqout_copy(s, src, 50, 100), -ENODATA);
	seqout_close(s);
	close(fd);
	close(src);
	unlink(path);
	unlink(spath);
	assert_no_leaks();
}

Test(seqout, copy_reads_what_the_kernel_would_cache)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[256];
	int fd = scratch(dir, path, sizeof(path));
	bool direct = dio_capable(fd) && !io_shares_blocks(fd);

	close(fd);
	unlink(path);
	if (!direct)
		cr_skip_test("%s: no direct I/O, or blocks it can clone", dir);
	copy_choice(dir, true);
}

Test(seqout, copy_in_the_kernel_without_direct_io)
{
	struct stat st;

	if (stat("/dev/shm", &st))
		cr_skip_test("no /dev/shm");
	copy_choice("/dev/shm", false);
}
