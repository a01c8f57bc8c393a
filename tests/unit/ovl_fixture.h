/*
 * ovl_fixture.h - the scratch checkpoint the overlay's Criterion tests
 * share (test_ovl.c, test_undo.c, test_ovl_retype.c): the bundled sample
 * copied into a fresh directory under /tmp, opened with its overlay
 * (.model.pt.ptfs beside it), closed and opened again to replay, and
 * removed at the end.  Include it after test_util.h; the test target
 * defines PT_TEST_DATA and PT_INTERNAL (for ovl_int.h).
 */
#ifndef PT_TESTS_OVL_FIXTURE_H
#define PT_TESTS_OVL_FIXTURE_H

#include "ckpt/ckpt.h"
#include "diag/diag.h"
#include "ovl/ovl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAMPLE PT_TEST_DATA "/sample.pt"

struct fx {
	char dir[64];		/* scratch directory */
	char ck[128];		/* its copy of the sample */
	char ovl[128];		/* the default overlay */
	char jr[160];		/* its journal */
	struct ckpt *c;
	struct ovl *v;
	struct diag d;
};

static inline void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out;
	ssize_t n;

	cr_assert(in >= 0, "%s: %s", from, strerror(errno));
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert(out >= 0, "%s: %s", to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		cr_assert_eq(write(out, buf, n), n);
	cr_assert_eq(n, 0, "%s: %s", from, strerror(errno));
	close(in);
	close(out);
}

/* A scratch directory /tmp/@tag.XXXXXX holding model.pt, not opened. */
static inline void fx_make(struct fx *f, const char *tag)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/%s.XXXXXX", tag);
	cr_assert(mkdtemp(f->dir), "mkdtemp: %s", strerror(errno));
	snprintf(f->ck, sizeof(f->ck), "%s/model.pt", f->dir);
	snprintf(f->ovl, sizeof(f->ovl), "%s/.model.pt.ptfs", f->dir);
	snprintf(f->jr, sizeof(f->jr), "%s/" OVL_JOURNAL, f->ovl);
	copy_file(SAMPLE, f->ck);
}

/* Open the checkpoint (it must open) and its overlay: ovl_open()'s result. */
static inline int fx_load(struct fx *f, const struct ovl_opts *o)
{
	diag_init(&f->d, f->ck);
	cr_assert_eq(ckpt_open(f->ck, &f->c, &f->d), 0, "%s", f->d.msg);
	return ovl_open(f->c, f->ck, o, &f->v, &f->d);
}

/* The same, and it must succeed; @discard drops what was staged. */
static inline void fx_load_ok(struct fx *f, bool discard)
{
	struct ovl_opts o = { .discard = discard };

	cr_assert_eq(fx_load(f, &o), 0, "%s", f->d.msg);
}

static inline void fx_close(struct fx *f)
{
	ovl_close(f->v);
	ckpt_close(f->c);
	f->v = NULL;
	f->c = NULL;
}

static inline void fx_fini(struct fx *f)
{
	char cmd[128];

	fx_close(f);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	cr_assert_eq(system(cmd), 0);
}

/* The node at key path @path, which must be there. */
static inline struct ckpt_node *fx_node(struct fx *f, const char *path)
{
	struct ckpt_node *n = ovl_resolve(f->v, path, strlen(path));

	cr_assert(n, "%s: not in the model", path);
	return n;
}

static inline off_t size_of(const char *p)
{
	struct stat st;

	return stat(p, &st) ? -1 : st.st_size;
}

/* The whole file @p into *@buf (malloc'd), its size into *@n. */
static inline void read_all(const char *p, unsigned char **buf, size_t *n)
{
	FILE *fp = fopen(p, "rb");

	cr_assert(fp, "%s", p);
	fseek(fp, 0, SEEK_END);
	*n = (size_t)ftell(fp);
	rewind(fp);
	*buf = malloc(*n + 1);
	cr_assert_eq(fread(*buf, 1, *n, fp), *n);
	fclose(fp);
}

#endif
