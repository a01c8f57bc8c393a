/*
 * test_source.c - the one door (core/source): every member of a folder is
 * opened beneath it or refused with one line.  Names that leave the folder
 * ('..', absolute, through a symlinked directory), fifos and devices
 * (refused without blocking), a link as the last component (read through,
 * its target's owner and mode kept: the Hugging Face cache), two names of
 * one file (aliases), a file rewritten in place (src_fresh) or replaced by
 * rename (src_same), and the directory write-back creates files in.
 */
#include "source/source.h"
#include "diag/diag.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char root[256], top[64];
static struct src *s;
static struct diag d;

static void put(const char *name, const char *text, mode_t mode)
{
	char p[192];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", top, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	cr_assert_geq(fd, 0, "%s", p);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void at(const char *fmt, const char *a, char *out, size_t n)
{
	char rel[96];

	snprintf(rel, sizeof(rel), fmt, a);
	snprintf(out, n, "%s/%s", top, rel);
}

static void setup(void)
{
	char p[192];

	snprintf(top, sizeof(top), "/tmp/test_source.XXXXXX");
	cr_assert_not_null(mkdtemp(top));
	at("%s", "root", root, sizeof(root));
	cr_assert_eq(mkdir(root, 0755), 0);
	at("%s", "victim", p, sizeof(p));
	cr_assert_eq(mkdir(p, 0755), 0);
	at("%s", "root/sub", p, sizeof(p));
	cr_assert_eq(mkdir(p, 0755), 0);
	put("victim/important.pt", "precious", 0644);
	put("root/a.bin", "aaaa", 0644);
	put("root/sub/b.bin", "bb", 0600);
	put("blob", "from the blob", 0640);
	at("%s", "root/out", p, sizeof(p));
	cr_assert_eq(symlink("../victim", p), 0);
	at("%s", "root/link.bin", p, sizeof(p));
	cr_assert_eq(symlink("../blob", p), 0);
	at("%s", "root/again.bin", p, sizeof(p));
	cr_assert_eq(symlink("a.bin", p), 0);
	at("%s", "root/fifo", p, sizeof(p));
	cr_assert_eq(mkfifo(p, 0644), 0);
	diag_init(&d, root);
	cr_assert_eq(src_new(root, -1, &s, &d), 0, "%s", d.msg);
}

static void teardown(void)
{
	char cmd[96];

	src_free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(source, .init = setup, .fini = teardown, .timeout = 20);

static int add(const char *name, unsigned flags)
{
	diag_init(&d, root);
	return src_add(s, name, strlen(name), 42, flags, &d);
}

Test(source, opens_members_beneath_the_root)
{
	int a = add("a.bin", 0), b = add("sub/b.bin", 0);
	const struct src_member *m;

	cr_assert_eq(a, 0, "%s", d.msg);
	cr_assert_eq(b, 1, "%s", d.msg);
	m = src_at(s, 1);
	cr_assert_str_eq(m->name, "sub/b.bin");
	cr_assert_str_eq(m->leaf, "b.bin");
	cr_assert_eq(m->mode, 0600);
	cr_assert_eq(m->size, 2);
	cr_assert_eq(src_alias(s, 1), 1);
	cr_assert_eq(src_fresh(s, 0, &d), 0);
	cr_assert_eq(src_same(s, 1, &d), 0);
}

Test(source, refuses_names_that_leave_the_root)
{
	static const char *bad[] = { "../victim/important.pt",
		"/etc/passwd", "sub/../a.bin", "./a.bin", "sub//b.bin", "",
		"sub/" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cr_assert_eq(add(bad[i], 0), -EILSEQ, "%s", bad[i]);
		cr_assert_eq(d.off, 42);
	}
	cr_assert_eq(src_count(s), 0);
}

Test(source, refuses_a_symlinked_directory)
{
	cr_assert_eq(add("out/important.pt", 0), -ELOOP);
	cr_assert(strstr(d.msg, "'out' is a symbolic link"), "%s", d.msg);
	/* even as optional: it is there, and leads outside */
	cr_assert_eq(add("out/important.pt", SRC_OPTIONAL), -ELOOP);
}

Test(source, refuses_a_fifo_without_blocking)
{
	cr_assert_eq(add("fifo", 0), -EINVAL);
	cr_assert(strstr(d.msg, "'fifo' is a fifo, not a regular file"),
		  "%s", d.msg);
	cr_assert_eq(add("sub", 0), -EINVAL);
	cr_assert(strstr(d.msg, "is a directory"), "%s", d.msg);
}

Test(source, reads_through_a_last_link_with_its_targets_mode)
{
	int k = add("link.bin", 0);
	const struct src_member *m;
	char buf[32] = { 0 };

	cr_assert_geq(k, 0, "%s", d.msg);
	m = src_at(s, (uint32_t)k);
	cr_assert_eq(m->mode, 0640);
	cr_assert_eq(pread(m->fd, buf, sizeof(buf) - 1, 0), 13);
	cr_assert_str_eq(buf, "from the blob");
}

Test(source, knows_two_names_of_one_file)
{
	int a = add("a.bin", 0), b = add("again.bin", 0);

	cr_assert_geq(b, 0, "%s", d.msg);
	cr_assert_eq(src_alias(s, (uint32_t)b), (uint32_t)a);
	cr_assert_eq(src_alias(s, (uint32_t)a), (uint32_t)a);
}

Test(source, optional_members_may_be_absent)
{
	cr_assert_eq(add("nothing.bin", SRC_OPTIONAL), -ENOENT);
	cr_assert_eq(d.err, 0);
	cr_assert_eq(add("nodir/x.bin", SRC_OPTIONAL), -ENOENT);
	cr_assert_eq(add("nothing.bin", 0), -ENOENT);
	cr_assert_neq(d.err, 0);
}

Test(source, sees_a_rewrite_and_a_rename)
{
	int k = add("a.bin", 0);
	char p[192], q[192];

	cr_assert_geq(k, 0);
	nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	put("root/a.bin", "AAAAA", 0644);	/* the same inode, rewritten */
	cr_assert_eq(src_fresh(s, (uint32_t)k, &d), -ESTALE);
	cr_assert(strstr(d.msg, "changed under the mount"), "%s", d.msg);
	k = add("sub/b.bin", 0);
	put("c.tmp", "cc", 0644);
	at("%s", "c.tmp", p, sizeof(p));
	at("%s", "root/sub/b.bin", q, sizeof(q));
	cr_assert_eq(rename(p, q), 0);
	diag_init(&d, root);
	cr_assert_eq(src_same(s, (uint32_t)k, &d), -ESTALE);
	cr_assert(strstr(d.msg, "changed since it was mounted"), "%s", d.msg);
}

Test(source, write_back_directories_are_the_ones_walked)
{
	const char *leaf;
	int fd;

	diag_init(&d, root);
	fd = src_dir_of(s, "sub/b.g1.bin", &leaf, &d);
	cr_assert_geq(fd, 0, "%s", d.msg);
	cr_assert_str_eq(leaf, "b.g1.bin");
	cr_assert_eq(src_dir_of(s, "out/x.pt", &leaf, &d), -ELOOP);
	cr_assert_eq(src_dir_of(s, "../x.pt", &leaf, &d), -EILSEQ);
}
